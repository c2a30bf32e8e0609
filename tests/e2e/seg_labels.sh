#!/usr/bin/env bash
# compare against a segmenter's own masks (--labels mask:DIR): the zoo's LR-ASPP MobileNetV3
# (21 VOC classes, output [1, 21, 256, 256]). The masks are FP32's own classes mapped to each
# image's size, with rectangles of other classes pasted on, a band of the ignore value, half of them
# palette PNGs (as VOC writes), half 8-bit gray. Asserted: FP32's and the method's mIoU, per-class
# IoU and 95 % bootstrap intervals (and the paired difference's) in compare's JSON equal, within
# 1e-4, an independent numpy port (tests/oracle/seg_miou.py) applied to ptq run's outputs of the
# FP32 model and of the model `ptq quantize` writes with the same method, for a stretch, a
# centre-crop (the crop's margins not counted) and a letterbox geometry (max evaluated second,
# from compare's cache of the images, FP32's outputs and the masks); miou is the metric that picks
# the method and drives --target-drop; bad masks are refused in one line naming the file. Then a
# method that collapses output 0 on every held-out image (percentile:1 empties PP-OCRv4 det's map,
# makes a classifier give one class to every image) is named in exactly one warning, and a method
# that does not collapse in none; PP-OCRv4 det's probability map [N, 1, H, W] read as classes {0, 1}
# (> 0.5) against two-class masks equals the port too.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
M=$ROOT/build/zoo/lraspp_mobilenet_v3_large.op13.onnx
[ -f "$M" ] || { skip "segmentation labels" "no $M (make zoo)"; finish; }
ls "$ROOT"/build/photos/* | grep -v truncated | sort > "$TMP/all.list"
awk 'NR % 3 == 1' "$TMP/all.list" | head -n 3 > "$TMP/calib.list"
awk 'NR % 3 == 2' "$TMP/all.list" | head -n 5 > "$TMP/eval.list"
PRE_stretch="--preset imagenet-torchvision --mode stretch --size 256x256"
PRE_crop="--preset imagenet-torchvision --mode shorter-crop --shorter 320 --size 256x256"
PRE_letterbox="--preset imagenet-torchvision --mode letterbox --size 256x256"
# a refusal after the calibration pass: non-zero exit, one 'ptq:' error line, containing the part
late_refused() {
  local want=$1; shift
  local err
  if err=$("$@" 2>&1 >/dev/null); then echo "accepted: $*"; return 1; fi
  [ "$(echo "$err" | grep -c '^ptq: ')" = 1 ] || { echo "not one error line: $err"; return 1; }
  echo "$err" | grep '^ptq: ' | grep -qF -- "$want" || { echo "message lacks '$want': $err"; return 1; }
  echo "$err" | grep '^ptq: '
}
"$PTQ" quantize "$M" --images "$TMP/calib.list" $PRE_stretch --method max -o "$TMP/q_stretch.onnx" >/dev/null 2>&1
"$PTQ" quantize "$M" --images "$TMP/calib.list" $PRE_crop --method max -o "$TMP/q_crop.onnx" >/dev/null 2>&1
"$PTQ" quantize "$M" --images "$TMP/calib.list" $PRE_letterbox --method max -o "$TMP/q_letterbox.onnx" >/dev/null 2>&1
for g in stretch crop letterbox; do
  pre="PRE_$g"
  "$PTQ" preprocess --images "$TMP/eval.list" ${!pre} --dump "$TMP/$g.npy" >/dev/null 2>&1
  N=$($PY -c "
import numpy as np; x = np.load('$TMP/$g.npy')
for i in range(x.shape[0]): np.save('$TMP/$g.img%d.npy' % i, x[i:i + 1])
print(x.shape[0])")
  for i in $(seq 0 $((N - 1))); do
    "$PTQ" run "$M" --input "$TMP/$g.img$i.npy" --output-dir "$TMP/$g.fp.$i" >/dev/null
    "$PTQ" run "$TMP/q_$g.onnx" --input "$TMP/$g.img$i.npy" --output-dir "$TMP/$g.q.$i" >/dev/null
  done
done

# masks from FP32's classes (stretch geometry), perturbed
$PY - "$TMP" "$ROOT/tests/oracle" <<'PYEOF'
import glob, os, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from seg_miou import geometry, class_map
paths = [l.strip() for l in open(d + '/eval.list') if l.strip()]
rng = np.random.default_rng(35)
os.makedirs(d + '/masks', exist_ok=True)
pal = [v for c in range(256) for v in ((c * 37) % 256, (c * 91) % 256, (c * 53) % 256)]
for i, p in enumerate(paths):
    w, h = Image.open(p).size
    out = np.load(glob.glob('%s/stretch.fp.%d/*.npy' % (d, i))[0])[0]
    m = class_map(out, w, h, geometry(w, h, 'stretch', 256, 256), 256, 256).astype(np.uint8)
    for _ in range(3):  # rectangles of other classes
        x0, y0 = rng.integers(0, w // 2), rng.integers(0, h // 2)
        m[y0:y0 + h // 3, x0:x0 + w // 3] = rng.integers(0, 21)
    m[h // 2:h // 2 + max(h // 20, 1), :] = 255  # a band not counted
    stem = os.path.splitext(os.path.basename(p))[0]
    im = Image.fromarray(m, 'L')
    if i % 2 == 0:
        im = im.convert('P')
        im.putpalette(pal)
    im.save('%s/masks/%s.png' % (d, stem))
PYEOF

cat > "$TMP/port.py" <<'PYEOF'
import glob, json, sys
import numpy as np
from PIL import Image
d, g, report, oracle = sys.argv[1:5]
sys.path.insert(0, oracle)
import seg_miou as S
paths = [l.strip() for l in open(d + '/eval.list') if l.strip()]
mode, shorter = {'stretch': ('stretch', None), 'crop': ('shorter-crop', 320), 'letterbox': ('letterbox', None)}[g]
def sums(prefix):
    I, U = [], []
    for i, p in enumerate(paths):
        w, h = Image.open(p).size
        mask = np.array(Image.open('%s/masks/%s.png' % (d, p.rsplit('/', 1)[1].rsplit('.', 1)[0])))
        out = np.load(glob.glob('%s/%s.%s.%d/*.npy' % (d, g, prefix, i))[0])[0]
        pred = S.class_map(out, w, h, S.geometry(w, h, mode, 256, 256, shorter), 256, 256)
        a, b = S.stats(pred, mask, 21)
        I.append(a)
        U.append(b)
    return np.array(I), np.array(U)
r = json.load(open(report))
fi, fu = sums('fp')
qi, qu = sums('q')
def close(name, got, want):
    if not abs(got - want) <= 1e-4:
        sys.exit('%s: ptq %.6f, port %.6f' % (name, got, want))
mx = [m for m in r['methods'] if m['method'] == 'max'][0]  # (the second method: scored from compare's cache)
for name, (I, U), got in (('FP32', (fi, fu), r['fp32']), ('max', (qi, qu), mx)):
    close(name + ' miou', got['miou'], S.miou(I, U))
    lo, hi = S.interval(I, U)
    close(name + ' miou_ci[0]', got['miou_ci'][0], lo)
    close(name + ' miou_ci[1]', got['miou_ci'][1], hi)
    for c, want in enumerate(S.per_class(I, U)):
        if (want is None) != (got['iou'][c] is None) or (want is not None and abs(want - got['iou'][c]) > 1e-4):
            sys.exit('%s class %d: ptq %s, port %s' % (name, c, got['iou'][c], want))
lo, hi = S.interval(qi, qu, fi, fu)
close('delta ci[0]', mx['miou_delta_ci'][0], lo)
close('delta ci[1]', mx['miou_delta_ci'][1], hi)
print('FP32 mIoU %.4f, max %.4f, delta [%.4f, %.4f]; %d classes present' % (S.miou(fi, fu), S.miou(qi, qu), lo, hi,
      sum(v is not None for v in S.per_class(fi, fu))))
PYEOF

for g in stretch crop letterbox; do
  pre="PRE_$g"
  check "compare --labels mask: ($g) mIoU, per-class IoU, intervals of FP32 and max equal the numpy port" bash -c "
    '$PTQ' compare '$M' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' ${!pre} --methods percentile:99.99,max \
        --float fp32 --labels 'mask:$TMP/masks' --json '$TMP/report_$g.json' --html '$TMP/report_$g.html' > '$TMP/$g.out' 2>&1 || { cat '$TMP/$g.out'; exit 1; }
    grep -q 'mIoU' '$TMP/$g.out' && grep -q '^  FP32 mIoU' '$TMP/$g.out' && grep -q 'mIoU \[95 %\]' '$TMP/report_$g.html' &&
    $PY '$TMP/port.py' '$TMP' $g '$TMP/report_$g.json' '$ROOT/tests/oracle'"
done
check "compare with masks: miou is the metric that picks the method" bash -c "
  '$PTQ' compare '$M' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' $PRE_stretch --methods max,percentile:99.99 \
      --labels 'mask:$TMP/masks' --eval-limit 2 2>/dev/null | grep -E '^best: .* \(by miou, then cosine\)'"
check "--metric miou --target-drop: the layers left in float keep mIoU within 0.01 of FP32's" bash -c "
  '$PTQ' compare '$M' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' $PRE_stretch --methods max --float fp32 \
      --labels 'mask:$TMP/masks' --eval-limit 2 --metric miou --target-drop 0.01 --json '$TMP/drop.json' > '$TMP/drop.out' 2>&1 || { cat '$TMP/drop.out'; exit 1; }
  $PY -c \"import json; r = json.load(open('$TMP/drop.json')); x = r['exclusion']
assert x['target'].startswith('miou drop <= 0.01 (FP32 '), x['target']
assert x['reached'] <= 0.01, x
print(x['target'], 'reached', x['reached'], 'with', len(x['nodes']), 'nodes in float')\""

# bad masks
first=$(head -n 1 "$TMP/eval.list"); stem=$(basename "${first%.*}")
for b in size missing rgb class bit16; do rm -rf "$TMP/bad_$b"; cp -r "$TMP/masks" "$TMP/bad_$b"; done
$PY - "$TMP" "$stem" <<'PYEOF'
import sys
import numpy as np
from PIL import Image
d, stem = sys.argv[1:3]
m = np.array(Image.open('%s/masks/%s.png' % (d, stem)))  # a palette's indices
Image.fromarray(m[:-1]).save('%s/bad_size/%s.png' % (d, stem))
Image.fromarray(m).convert('RGB').save('%s/bad_rgb/%s.png' % (d, stem))
m2 = m.copy(); m2[3, 7] = 30
Image.fromarray(m2).save('%s/bad_class/%s.png' % (d, stem))
Image.fromarray(m.astype(np.uint16) * 256).save('%s/bad_bit16/%s.png' % (d, stem))
PYEOF
rm "$TMP/bad_missing/$stem.png"
args=("$M" --images "$TMP/calib.list" --eval-images "$TMP/eval.list" $PRE_stretch --methods max)
check "a mask of another size than its image: refused naming it" late_refused "$TMP/bad_size/$stem.png: mask of" \
  "$PTQ" compare "${args[@]}" --labels "mask:$TMP/bad_size"
check "an evaluation image without a mask: refused naming the file" refused "$TMP/bad_missing/$stem.png: no mask for" \
  "$PTQ" compare "${args[@]}" --labels "mask:$TMP/bad_missing"
check "an RGB mask: refused" late_refused "$TMP/bad_rgb/$stem.png: a mask is 8-bit grayscale or a palette PNG of class indices, not RGB" \
  "$PTQ" compare "${args[@]}" --labels "mask:$TMP/bad_rgb"
check "a 16-bit mask: refused" late_refused "$TMP/bad_bit16/$stem.png: a mask is 8-bit grayscale or a palette PNG of class indices, not 16-bit" \
  "$PTQ" compare "${args[@]}" --labels "mask:$TMP/bad_bit16"
check "a class the model does not have: refused naming the pixel" late_refused "$TMP/bad_class/$stem.png: pixel (7, 3) holds class 30, the model has 21 classes" \
  "$PTQ" compare "${args[@]}" --labels "mask:$TMP/bad_class"
check "a bad ignore value: refused" refused "ignore=300 is not a pixel value 0..255" \
  "$PTQ" compare "${args[@]}" --labels "mask:$TMP/masks:ignore=300"
check "masks on a classifier: refused, naming the labels and the model" late_refused "a segmenter's masks, but" \
  "$PTQ" compare "$ROOT/build/zoo/mobilenet_v3_small.op13.onnx" --images "$TMP/calib.list" --eval-images "$TMP/eval.list" \
  --preset imagenet-torchvision --methods max --labels "mask:$TMP/masks"

# collapsed outputs: a method whose output 0 is empty / one class on every held-out image is named
printf '%s\n' "$ROOT/build/photos/page.png" "$ROOT/build/photos/text.png" > "$TMP/pages.list"
DET=$MODELS/ch_PP-OCRv4_det_infer.onnx
if [ -f "$DET" ]; then
  check "a method that empties det's map on every image: one warning naming it, the output and the threshold" bash -c "
    '$PTQ' compare '$DET' --images '$TMP/pages.list' --eval-images '$TMP/pages.list' --preset paddleocr-det \
        --methods percentile:1,max --float fp32 2> '$TMP/det.err' > '$TMP/det.out' || { cat '$TMP/det.err'; exit 1; }
    grep -x \"ptq: warning: percentile-1: output 'sigmoid_0.tmp_0' is empty (nothing above 0.3) on all 2 images; FP32's is not\" '$TMP/det.err' &&
    [ \$(grep -c 'FP32.s is not' '$TMP/det.err') = 1 ]"
  # a probability map [N, 1, H, W] against two-class masks (class 1 where > 0.5)
  "$PTQ" preprocess --images "$TMP/pages.list" --preset paddleocr-det --dump "$TMP/det.npy" >/dev/null 2>&1
  "$PTQ" quantize "$DET" --images "$TMP/pages.list" --preset paddleocr-det --method max -o "$TMP/det.q.onnx" >/dev/null 2>&1
  $PY -c "
import numpy as np; x = np.load('$TMP/det.npy')
for i in range(x.shape[0]): np.save('$TMP/det%d.npy' % i, x[i:i + 1])"
  for i in 0 1; do
    "$PTQ" run "$DET" --input "$TMP/det$i.npy" --output-dir "$TMP/det.fp.$i" >/dev/null
    "$PTQ" run "$TMP/det.q.onnx" --input "$TMP/det$i.npy" --output-dir "$TMP/det.q.$i" >/dev/null
  done
  cat > "$TMP/binport.py" <<'PYEOF'
import glob, json, os, sys
import numpy as np
from PIL import Image
d, oracle = sys.argv[1:3]
sys.path.insert(0, oracle)
import seg_miou as S
paths = [l.strip() for l in open(d + '/pages.list')]
os.makedirs(d + '/binmasks', exist_ok=True)
sums = {'fp': ([], []), 'q': ([], [])}
for i, p in enumerate(paths):
    w, h = Image.open(p).size
    g = S.geometry(w, h, 'stretch', 640, 640)
    fp = np.load(glob.glob('%s/det.fp.%d/*.npy' % (d, i))[0])[0]
    m = S.class_map(fp, w, h, g, 640, 640).astype(np.uint8)
    m[: h // 4, : w // 4] = 1  # a block of text where FP32 sees none, and the reverse
    m[h // 2:, w // 2:] = 0
    Image.fromarray(m).save('%s/binmasks/%s.png' % (d, os.path.splitext(os.path.basename(p))[0]))
    for k in ('fp', 'q'):
        y = np.load(glob.glob('%s/det.%s.%d/*.npy' % (d, k, i))[0])[0]
        a, b = S.stats(S.class_map(y, w, h, g, 640, 640), m, 2)
        sums[k][0].append(a)
        sums[k][1].append(b)
if len(sys.argv) > 3:
    r = json.load(open(sys.argv[3]))
    for k, got in (('fp', r['fp32']), ('q', r['methods'][0])):
        want = S.miou(*sums[k])
        assert abs(got['miou'] - want) <= 1e-4, (k, got['miou'], want)
        assert all(abs(a - b) <= 1e-4 for a, b in zip(got['iou'], S.per_class(*sums[k]))), (got['iou'], S.per_class(*sums[k]))
    print('FP32 mIoU %.4f, max %.4f' % (S.miou(*sums['fp']), S.miou(*sums['q'])))
PYEOF
  $PY "$TMP/binport.py" "$TMP" "$ROOT/tests/oracle"
  check "compare --labels mask: on a probability map [N, 1, H, W]: mIoU of FP32 and max equal the numpy port" bash -c "
    '$PTQ' compare '$DET' --images '$TMP/pages.list' --eval-images '$TMP/pages.list' --preset paddleocr-det --methods max \
        --float fp32 --labels 'mask:$TMP/binmasks' --json '$TMP/bin.json' > '$TMP/bin.out' 2>&1 || { cat '$TMP/bin.out'; exit 1; }
    $PY '$TMP/binport.py' '$TMP' '$ROOT/tests/oracle' '$TMP/bin.json'"
else
  skip "collapsed det map" "no $DET (build/models)"
fi
check "a method whose classifier predicts one class for every image: one warning naming the class" bash -c "
  '$PTQ' compare '$ROOT/build/zoo/mobilenet_v3_small.op13.onnx' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' \
      --preset imagenet-torchvision --methods percentile:1,max --float fp32 2> '$TMP/cls.err' > /dev/null || { cat '$TMP/cls.err'; exit 1; }
  grep -E \"^ptq: warning: percentile-1: output 'logits' predicts class [0-9]+ on all 5 images; FP32's does not\\$\" '$TMP/cls.err' &&
  [ \$(grep -c 'FP32.s does not' '$TMP/cls.err') = 1 ]"
check "no collapse warning where no method collapses" bash -c "
  '$PTQ' compare '$M' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' $PRE_stretch --methods max --float fp32 \
      --eval-limit 2 2> '$TMP/nc.err' > /dev/null || { cat '$TMP/nc.err'; exit 1; }
  ! grep -q 'on all .* images; FP32' '$TMP/nc.err'"
finish
