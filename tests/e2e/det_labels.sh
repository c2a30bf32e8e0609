#!/usr/bin/env bash
# compare against a text detector's polygons (--labels paddledet:FILE): PP-OCRv4 det on 8 pages of
# tests/oracle/textpages.py (their truth.json turned into PaddleOCR's det label list, every 7th line
# "###", a don't-care region). The oracle: the very tensors ptq's preprocessing gives (ptq
# preprocess --dump) run by ONNX Runtime, DB post-processing in Python (tests/oracle/ocr_pipeline.py's
# boxes_from_bitmap on OpenCV) and PaddleOCR's DetMetric ported without shapely
# (tests/oracle/det_metric.py). Asserted, within 1e-4: FP32's precision, recall, hmean and their
# 95 % intervals in compare's JSON equal the port's on the boxes of PaddleOCR's own DB (OpenCV and
# pyclipper, which ptq's C DB reproduces pixel for pixel: the float32 arithmetic of
# cv2.minAreaRect, cv2.fillPoly's pixels, Clipper's round offset), and the max method's figures
# and intervals, and those of its difference to FP32, equal the port's on the outputs `ptq run`
# gives for the model `ptq quantize` writes with the same method. With the paddleocr-det-dynamic
# preset (PaddleOCR's DetResizeForTest) FP32's boxes equal those of PaddleOCR's pipeline end to end
# (ocr_pipeline.py: its preprocessing, ORT, its DB) on every page. hmean picks the method and
# drives --target-drop; a method that empties the map is named in one warning; bad label lines
# are refused in one line naming FILE:LINE.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
M=$MODELS/ch_PP-OCRv4_det_infer.onnx
[ -f "$M" ] || { skip "text detector labels" "no $M"; finish; }
command -v node >/dev/null || { skip "text detector labels" "no node (ONNX Runtime oracle)"; finish; }
$PY -c "import cv2, pyclipper" 2>/dev/null || { skip "text detector labels" "no cv2 or pyclipper"; finish; }
$PY "$ROOT/tests/oracle/textpages.py" "$TMP/ev" --pages 8 --split eval >/dev/null || { echo "FAIL textpages"; exit 1; }
$PY "$ROOT/tests/oracle/textpages.py" "$TMP/cal" --pages 3 --split calib >/dev/null || { echo "FAIL textpages"; exit 1; }
$PY - "$TMP" <<'PYEOF'
import json, sys
d = sys.argv[1]
t = json.load(open(d + '/ev/truth.json'))
k = 0
with open(d + '/det.labels', 'w', encoding='utf-8') as f:
    for im in t['images']:
        ann = []
        for l in im['lines']:
            k += 1
            ann.append({'transcription': '###' if k % 7 == 0 else l['text'], 'points': l['polygon']})
        if im is t['images'][0]:  # a self-crossing polygon: DetMetric drops it
            ann.append({'transcription': 'bowtie', 'points': [[2, 2], [40, 30], [40, 2], [2, 30]]})
        f.write(im['image'] + '\t' + json.dumps(ann, ensure_ascii=False) + '\n')
PYEOF
PRE="--preset paddleocr-det"
COMMON="--images $TMP/cal/pages --eval-images $TMP/ev/pages $PRE --labels paddledet:$TMP/det.labels --layers-method none"

# the oracle's inputs: ptq's tensors, one .npy per page; ORT (FP32) and ptq run (the quantized model)
"$PTQ" preprocess --images "$TMP/ev/pages" $PRE --dump "$TMP/x.npy" >/dev/null 2>&1
"$PTQ" quantize "$M" --images "$TMP/cal/pages" $PRE --method max -o "$TMP/q.onnx" >/dev/null 2>&1
N=$($PY -c "
import numpy as np; x = np.load('$TMP/x.npy')
for i in range(x.shape[0]): np.save('$TMP/x%d.npy' % i, x[i:i + 1])
print(x.shape[0])")
: > "$TMP/ort.list"
for i in $(seq 0 $((N - 1))); do
  echo "$TMP/x$i.npy $TMP/ort$i.npy" >> "$TMP/ort.list"
  "$PTQ" run "$TMP/q.onnx" --input "$TMP/x$i.npy" --output-dir "$TMP/q.$i" >/dev/null
done
node "$ROOT/tests/oracle/ort_batch.js" "$M" "$TMP/ort.list" --threads 2

check "compare --labels paddledet: (FP32 and max)" bash -c "
  '$PTQ' compare '$M' $COMMON --methods max --json '$TMP/c.json' --html '$TMP/c.html' > '$TMP/c.out' 2> '$TMP/c.err' || { cat '$TMP/c.out' '$TMP/c.err'; exit 1; }
  grep -E '^  FP32 hmean [0-9.]+ \[' '$TMP/c.out'"
check "a polygon that is not simple is named in one warning (not counted, as PaddleOCR does)" bash -c "
  [ \$(grep -c 'is not simple' '$TMP/c.err') = 1 ] && grep -F 'det.labels:1: polygon' '$TMP/c.err' | grep -F '1 such polygon on the evaluation images'"
check "the HTML report shows precision, recall and hmean with intervals" grep -qF 'hmean [95 %]</th>' "$TMP/c.html"
check "one thread and batch 1: the same figures and boxes" bash -c "
  '$PTQ' compare '$M' $COMMON --methods max --batch 1 --threads 1 --json '$TMP/c1.json' >/dev/null 2>&1 &&
  $PY -c \"
import json
a, b = json.load(open('$TMP/c.json')), json.load(open('$TMP/c1.json'))
assert a['fp32'] == b['fp32'] and a['methods'] == b['methods'], 'differ'
print(len(a['fp32']['boxes']), 'pages of boxes identical')\""

cat > "$TMP/check.py" <<'PYEOF'
import glob, json, os, sys
import numpy as np
d, oracle = sys.argv[1], sys.argv[2]
sys.path.insert(0, oracle)
import ocr_pipeline as O
import det_metric as D
truth = json.load(open(d + '/ev/truth.json'))
size = {os.path.basename(im['image']): im['size'] for im in truth['images']}
names = sorted(size)  # ptq's order of the pages (sorted paths)
labels = D.read_labels(d + '/det.labels')

def boxes(maps):
    out = {}
    for n, m in zip(names, maps):
        w, h = size[n]
        pred = m[0, 0]
        out[n] = [[tuple(map(float, p)) for p in b] for b in O.boxes_from_bitmap(pred, pred > 0.3, w, h)]
    return out

ort = [np.load(d + '/ort%d.npy' % i) for i in range(len(names))]
q = []
for i in range(len(names)):
    f = glob.glob(d + '/q.%d/*.npy' % i)
    q.append(np.load(sorted(f)[0]))
got = json.load(open(d + '/c.json'))
bad = []
ob = boxes(ort)
pb = {r['image']: [[tuple(map(float, p)) for p in b] for b in r['boxes']] for r in got['fp32']['boxes']}
if sorted(pb) != names:
    bad.append('FP32 boxes: images %s, want %s' % (sorted(pb), names))
same = sum(pb.get(n) == ob[n] for n in names)
if same != len(names):
    bad.append('FP32 boxes differ from PaddleOCR\'s DB on ORT\'s map on %d of %d pages, e.g. %s' %
               (len(names) - same, len(names), [(n, pb.get(n), ob[n]) for n in names if pb.get(n) != ob[n]][:1]))
fu = D.units_of(labels, ob)
qu = D.units_of(labels, boxes(q))
def close(what, a, b, tol=1e-4):
    if not abs(a - b) <= tol:
        bad.append('%s: ptq %r, oracle %r' % (what, a, b))
keys = ['precision', 'recall', 'hmean']
f_iv, q_iv = D.intervals(fu), D.intervals(qu, fu)
for j, k in enumerate(keys):
    close('FP32 ' + k, got['fp32'][k], D.combine(fu)[j])
    close('FP32 %s_ci[0]' % k, got['fp32'][k + '_ci'][0], f_iv['ci'][j][0])
    close('FP32 %s_ci[1]' % k, got['fp32'][k + '_ci'][1], f_iv['ci'][j][1])
    mx = got['methods'][0]
    close('max ' + k, mx[k], D.combine(qu)[j])
    close('max %s_ci[0]' % k, mx[k + '_ci'][0], q_iv['ci'][j][0])
    close('max %s_ci[1]' % k, mx[k + '_ci'][1], q_iv['ci'][j][1])
    close('max %s_delta_ci[0]' % k, mx[k + '_delta_ci'][0], q_iv['delta_ci'][j][0])
    close('max %s_delta_ci[1]' % k, mx[k + '_delta_ci'][1], q_iv['delta_ci'][j][1])
if bad:
    sys.exit('\n'.join(bad))
print('FP32 P/R/H %.4f/%.4f/%.4f, max hmean %.4f; %d polygons counted, %d boxes counted, %d matched; %d FP32 boxes identical' %
      (D.combine(fu) + (D.combine(qu)[2], sum(u[0] for u in fu), sum(u[1] for u in fu), sum(u[2] for u in fu),
                        sum(len(v) for v in ob.values()))))
PYEOF
check "FP32's boxes equal PaddleOCR's DB's; FP32 and max: precision, recall, hmean and their intervals equal the port's" \
  $PY "$TMP/check.py" "$TMP" "$ROOT/tests/oracle"
# PaddleOCR's own pipeline end to end: its DetResizeForTest (the paddleocr-det-dynamic preset), ORT,
# its DBPostProcess (tests/oracle/ocr_pipeline.py's det_preprocess and boxes_from_bitmap)
check "paddleocr-det-dynamic: FP32's boxes equal PaddleOCR's pipeline's on every page, its hmean the port's" bash -c "
  '$PTQ' compare '$M' --images '$TMP/cal/pages' --eval-images '$TMP/ev/pages' --preset paddleocr-det-dynamic \
      --labels 'paddledet:$TMP/det.labels' --layers-method none --methods max --json '$TMP/dyn.json' > '$TMP/dyn.out' 2>&1 || { cat '$TMP/dyn.out'; exit 1; }
  $PY - '$TMP' '$ROOT/tests/oracle' '$M' <<'PYEOF'
import json, os, sys, tempfile
import cv2
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import ocr_pipeline as O
import det_metric as D
got = json.load(open(d + '/dyn.json'))
pb = {r['image']: [[tuple(map(float, p)) for p in b] for b in r['boxes']] for r in got['fp32']['boxes']}
paths = sorted(os.path.join(d, 'ev/pages', f) for f in os.listdir(d + '/ev/pages'))
imgs = [cv2.imread(p) for p in paths]
with tempfile.TemporaryDirectory() as tmp:
    probs = O.run_model(sys.argv[3], [O.det_preprocess(im) for im in imgs], tmp, 'det', 2)
ob = {}
for p, im, pr in zip(paths, imgs, probs):
    ob[os.path.basename(p)] = [[tuple(map(float, q)) for q in b] for b in O.boxes_from_bitmap(pr[0, 0], pr[0, 0] > 0.3, im.shape[1], im.shape[0])]
diff = [n for n in ob if pb.get(n) != ob[n]]
assert not diff, 'boxes differ on %s' % diff
u = D.units_of(D.read_labels(d + '/det.labels'), ob)
want = D.combine(u)
for k, w in zip(['precision', 'recall', 'hmean'], want):
    assert abs(got['fp32'][k] - w) <= 1e-4, (k, got['fp32'][k], w)
print('%d pages, %d boxes identical; FP32 P/R/H %.4f/%.4f/%.4f' % ((len(ob), sum(map(len, ob.values()))) + want))
PYEOF"
check "hmean is the metric that picks the method" grep -E '^best: .* \(by hmean, then cosine\)' "$TMP/c.out"
check "--metric hmean --target-drop: the layers left in float keep hmean within 0.05 of FP32's" bash -c "
  '$PTQ' compare '$M' --images '$TMP/cal/pages' --eval-images '$TMP/ev/pages' $PRE --labels 'paddledet:$TMP/det.labels' \
      --methods max --eval-limit 3 --metric hmean --target-drop 0.05 --json '$TMP/drop.json' > '$TMP/drop.out' 2>&1 || { cat '$TMP/drop.out'; exit 1; }
  $PY -c \"
import json; x = json.load(open('$TMP/drop.json'))['exclusion']
assert x['target'].startswith('hmean drop <= 0.05 (FP32 '), x['target']
print(x['target'], x['reached'])\""

check "a method whose map gives no box on any page is named in one warning (percentile:1 empties it)" bash -c "
  '$PTQ' compare '$M' --images '$TMP/cal/pages' --eval-images '$TMP/ev/pages' $PRE --labels 'paddledet:$TMP/det.labels' \
      --methods percentile:1 --layers-method none --eval-limit 3 --json '$TMP/empty.json' > '$TMP/empty.out' 2> '$TMP/empty.err' || { cat '$TMP/empty.err'; exit 1; }
  [ \$(grep -c 'gives no text box' '$TMP/empty.err') = 1 ] && grep 'gives no text box' '$TMP/empty.err' &&
  $PY -c \"
import json; m = json.load(open('$TMP/empty.json'))['methods'][0]
assert m['hmean'] == 0 and m['recall'] == 0, m\""

# bad labels: one line naming FILE:LINE
printf 'pages/p0000.png\t[{"transcription": "a", "points": [[0, 0], [1, 0], [1, 1]]}]\n' > "$TMP/three.labels"
printf 'pages/p0000.png\t[{"transcription": "a", "points": [[0, 0], [1, 0], [1, 1], [0, 1]]}]\npages/p0001.png [{}]\n' > "$TMP/notab.labels"
printf 'pages/p0000.png\t[{"transcription": "a", "points": [[0, 0], [1, "x"], [1, 1], [0, 1]]}]\n' > "$TMP/nan.labels"
printf 'pages/p0000.png\t[{"transcription": "a", "points": [[0, 0], [1, 0], [1, 1], [0, 1]]]\n' > "$TMP/json.labels"
for c in "three:three.labels:1: polygon 0 has 3 points" "notab:notab.labels:2: expected 'image<TAB>" \
         "nan:nan.labels:1: polygon 0, point 1 is not" "json:json.labels:1: the text after the tab is not JSON"; do
  name=${c%%:*}; want=${c#*:}
  check "bad label list ($name) refused naming the line" refused "$want" \
    "$PTQ" compare "$M" --images "$TMP/cal/pages" --eval-images "$TMP/ev/pages" $PRE --labels "paddledet:$TMP/$name.labels"
done
# a refusal after the calibration pass: non-zero exit, one 'ptq:' error line containing the part
late_refused() {
  local want=$1; shift
  local err
  if err=$("$@" 2>&1 >/dev/null); then echo "accepted: $*"; return 1; fi
  [ "$(echo "$err" | grep -c '^ptq: ')" = 1 ] || { echo "not one error line: $err"; return 1; }
  echo "$err" | grep '^ptq: ' | grep -qF -- "$want" || { echo "message lacks '$want': $err"; return 1; }
  echo "$err" | grep '^ptq: '
}
check "a model whose output 0 is not a map refused" late_refused "not a probability map [N, 1, H, W]" \
  "$PTQ" compare "$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx" --images "$TMP/cal/pages" --eval-images "$TMP/ev/pages" \
  --preset paddleocr-cls --labels "paddledet:$TMP/det.labels" --methods max --layers-method none
head -n 1 "$TMP/det.labels" > "$TMP/one.labels"
check "a page without a line refused" refused "evaluation image without a line in" \
  "$PTQ" compare "$M" --images "$TMP/cal/pages" --eval-images "$TMP/ev/pages" $PRE --labels "paddledet:$TMP/one.labels"
finish
