#!/usr/bin/env bash
# compare against a detector's own labels: the YOLO-style detector with NMS in the zoo
# (yolov8n_like_nms, detections [1, K, 6], untrained: its boxes are noise, but mAP against labels
# written from FP32's own detections, jittered, plus boxes of its own, is a number both sides must
# agree on). Labels as Ultralytics writes them (yolo:DIR, one STEM.txt of normalised boxes per
# image) and as COCO's instances JSON (coco:FILE, category ids 1.., a crowd box). Asserted: the
# FP32 model's and the method's mAP50 and mAP50-95 in compare's JSON equal, within 1e-4, an
# independent numpy port of COCOeval (tests/oracle/cocoeval.py) applied to ptq run's outputs of
# the FP32 model and of the model `ptq quantize` writes with the same method, mapped back through
# Ultralytics' letterbox by python here; map is the metric that picks the method; --metric map
# --target-drop X leaves layers in float until mAP50-95 is within X of FP32's; bad label files are
# refused in one line naming the file and line. The 95 % bootstrap intervals of both mAPs (FP32's,
# the method's, the paired difference's; 1000 resamples of the images) equal the port's COCOeval of
# the same resamples. A classifier's top-1 accuracy with its intervals equals the numpy port
# (tests/oracle/bootstrap.py) on ptq run's outputs. `compare --as-is` (the model as given, no
# calibration) of the FP32 model gives the same doubles as compare's FP32 row, of the QDQ model
# `ptq quantize` wrote those of compare's row of its method (with --base FP32, the paired differences,
# cosine and the rest too), for the detector and the classifier; calibration options and --base
# without --as-is are refused. Then a recogniser against its text (below).
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
M=$ROOT/build/zoo/yolov8n_like_nms.op13.onnx
# exported here when missing (zoo.sh, which also exports them, runs later in make test)
CM=$ROOT/build/zoo/mobilenet_v3_small.op13.onnx
[ -f "$M" ] && [ -f "$CM" ] || $PY "$ROOT/scripts/zoo.py" --models yolov8n_like_nms,mobilenet_v3_small --opset 13 > "$TMP/zoo.log" 2>&1
[ -f "$M" ] && [ -f "$CM" ] || { skip "truth labels" "no $M or $CM: scripts/zoo.py failed ($(tail -n 1 "$TMP/zoo.log"))"; finish; }
ls "$ROOT"/build/photos/* | grep -v truncated | sort > "$TMP/all.list"
awk 'NR % 3 == 1' "$TMP/all.list" | head -n 4 > "$TMP/calib.list"
awk 'NR % 3 == 2' "$TMP/all.list" | head -n 6 > "$TMP/eval.list"
PRE=(--preset yolo-letterbox-640 --size 320x320)

# the evaluation images as compare sees them, one tensor per image, and FP32's outputs
"$PTQ" preprocess --images "$TMP/eval.list" "${PRE[@]}" --dump "$TMP/eval.npy" >/dev/null 2>&1
$PY -c "
import numpy as np; x = np.load('$TMP/eval.npy')
for i in range(x.shape[0]): np.save('$TMP/img%d.npy' % i, x[i:i + 1])
print(x.shape[0])" > "$TMP/n_eval"
N=$(cat "$TMP/n_eval")
"$PTQ" quantize "$M" --images "$TMP/calib.list" "${PRE[@]}" --method max -o "$TMP/q.onnx" >/dev/null 2>&1
for i in $(seq 0 $((N - 1))); do
  "$PTQ" run "$M" --input "$TMP/img$i.npy" --output-dir "$TMP/fp.$i" >/dev/null
  "$PTQ" run "$TMP/q.onnx" --input "$TMP/img$i.npy" --output-dir "$TMP/q.$i" >/dev/null
done

# detections in image pixels (Ultralytics' scale_boxes after its letterbox), as COCO results;
# labels written from FP32's detections
cat > "$TMP/dets.py" <<'PYEOF'
import glob, json, sys
import numpy as np
from PIL import Image
def image_sizes(lst):
    paths = [l.strip() for l in open(lst) if l.strip()]
    return paths, [Image.open(p).size for p in paths]
def detections(prefix, paths, sizes, S=320):
    out = []
    for i, (w, h) in enumerate(sizes):
        d = np.load(glob.glob('%s.%d/*.npy' % (prefix, i))[0]).reshape(-1, 6)
        keep = [j for j in range(len(d)) if d[j, 4] >= np.float32(0.001)]
        keep.sort(key=lambda j: (-float(d[j, 4]), j))
        gain = min(S / h, S / w)
        px, py = round((S - w * gain) / 2 - 0.1), round((S - h * gain) / 2 - 0.1)
        for j in keep:
            x1, y1, x2, y2 = [float(v) for v in d[j, :4]]
            x1, x2 = [min(max((v - px) / gain, 0.0), w) for v in (x1, x2)]
            y1, y2 = [min(max((v - py) / gain, 0.0), h) for v in (y1, y2)]
            out.append({'image_id': i, 'category_id': int(d[j, 5]), 'bbox': [x1, y1, x2 - x1, y2 - y1],
                        'score': float(d[j, 4])})
    return out
PYEOF
$PY - "$TMP" <<'PYEOF'
import json, os, sys
import numpy as np
d = sys.argv[1]
sys.path.insert(0, d)
from dets import image_sizes, detections
paths, sizes = image_sizes(d + '/eval.list')
fp = detections(d + '/fp', paths, sizes)
rng = np.random.default_rng(35)
os.makedirs(d + '/yolo', exist_ok=True)
anns, images = [], []
for i, (p, (w, h)) in enumerate(zip(paths, sizes)):
    stem = os.path.splitext(os.path.basename(p))[0]
    mine = [x for x in fp if x['image_id'] == i][:4]
    boxes = []
    for x in mine:  # FP32's boxes moved by up to 10 % of their size
        bx, by, bw, bh = x['bbox']
        j = rng.uniform(-0.1, 0.1, 4)
        bx, by = min(max(bx + j[0] * bw, 0), w - 2), min(max(by + j[1] * bh, 0), h - 2)
        bw, bh = max(min(bw * (1 + j[2]), w - bx), 1), max(min(bh * (1 + j[3]), h - by), 1)
        boxes.append((x['category_id'], bx, by, bw, bh))
    cls = int(rng.integers(0, 80))  # and one box of its own
    boxes.append((cls, w * 0.25, h * 0.25, w * 0.4, h * 0.3))
    with open('%s/yolo/%s.txt' % (d, stem), 'w') as f:
        for c, bx, by, bw, bh in boxes:
            f.write('%d %.6f %.6f %.6f %.6f\n' % (c, (bx + bw / 2) / w, (by + bh / 2) / h, bw / w, bh / h))
    images.append({'id': 100 + i, 'file_name': 'val/' + os.path.basename(p), 'width': w, 'height': h})
    for c, bx, by, bw, bh in boxes:
        anns.append({'id': len(anns) + 1, 'image_id': 100 + i, 'category_id': c + 1, 'bbox': [bx, by, bw, bh],
                     'area': bw * bh, 'iscrowd': 0})
anns[0]['iscrowd'] = 1
cats = [{'id': c + 1, 'name': 'class%d' % c} for c in range(80)]
json.dump({'images': images, 'annotations': anns, 'categories': cats}, open(d + '/coco.json', 'w'))
PYEOF

# the port: the YOLO labels read back from their files (normalised -> pixels), the COCO file as it is
cat > "$TMP/port.py" <<'PYEOF'
import glob, json, os, sys
import numpy as np
d, kind, report = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, d)
sys.path.insert(0, sys.argv[4])
from dets import image_sizes, detections
from cocoeval import coco_map
paths, sizes = image_sizes(d + '/eval.list')
ids = list(range(len(paths)))
if kind == 'yolo':
    gts = []
    for i, (p, (w, h)) in enumerate(zip(paths, sizes)):
        for line in open('%s/yolo/%s.txt' % (d, os.path.splitext(os.path.basename(p))[0])):
            c, cx, cy, bw, bh = [float(v) for v in line.split()]
            gts.append({'image_id': i, 'category_id': int(c), 'bbox': [(cx - bw / 2) * w, (cy - bh / 2) * h, bw * w, bh * h],
                        'area': bw * w * bh * h, 'iscrowd': 0})
    cats = list(range(max(g['category_id'] for g in gts) + 1))
else:
    coco = json.load(open(d + '/coco.json'))
    by_id = {im['id']: k for k, im in enumerate(coco['images'])}
    gts = [dict(a, image_id=by_id[a['image_id']], category_id=a['category_id'] - 1) for a in coco['annotations']]
    cats = list(range(80))
r = json.load(open(report))
worst = 0
for name, prefix, got in (('FP32', d + '/fp', r['fp32']), ('max', d + '/q', r['methods'][0])):
    m50, m, ap50, ap = coco_map(gts, detections(prefix, paths, sizes), ids, cats)
    for key, want in (('map50', m50), ('map', m)):
        if not abs(got[key] - want) <= 1e-4:
            sys.exit('%s %s: ptq %.6f, port %.6f' % (name, key, got[key], want))
    for k, c in enumerate(cats):
        if (ap[c] is None) != (got['ap'][k] is None) or (ap[c] is not None and abs(ap[c] - got['ap'][k]) > 1e-4):
            sys.exit('%s class %d: ptq %s, port %s' % (name, c, got['ap'][k], ap[c]))
    worst = max(worst, abs(got['map'] - m), abs(got['map50'] - m50))
    print('%s mAP50 %.4f mAP50-95 %.4f' % (name, m50, m), end='; ')
if kind == 'yolo':  # the bootstrap intervals: 1000 resamples of the images, COCOeval of each (each image
    # evaluated once, cocoeval.resample_map; the first 50 resamples also as coco_map of the resample's
    # boxes under new image ids, which must give the same doubles)
    from bootstrap import _draws
    from cocoeval import evaluate, resample_map
    fp, q = detections(d + '/fp', paths, sizes), detections(d + '/q', paths, sizes)
    evals = [evaluate(gts, dts, ids, cats) for dts in (q, fp)]
    stats = []
    for n, idx in enumerate(_draws(len(ids), 1000, 1)):
        idx = [int(i) for i in idx]
        v = [x for e in evals for x in resample_map(e, idx, cats)]
        if n < 50:
            rg = [dict(g, image_id=j) for j, i in enumerate(idx) for g in gts if g['image_id'] == i]
            full = []
            for dts in (q, fp):
                rd = [dict(x, image_id=j) for j, i in enumerate(idx) for x in dts if x['image_id'] == i]
                full += coco_map(rg, rd, list(range(len(idx))), cats)[:2]
            if not all(a == b or (a != a and b != b) for a, b in zip(v, full)):
                sys.exit('resample %d: resample_map %s, coco_map of the resample %s' % (n, v, full))
        stats.append(v + [v[0] - v[2], v[1] - v[3]])
    stats = np.array(stats)
    for col, (obj, key) in enumerate(((r['methods'][0], 'map50_ci'), (r['methods'][0], 'map_ci'), (r['fp32'], 'map50_ci'),
                                      (r['fp32'], 'map_ci'), (r['methods'][0], 'map50_delta_ci'),
                                      (r['methods'][0], 'map_delta_ci'))):
        s = stats[:, col][~np.isnan(stats[:, col])]
        lo, hi = np.percentile(s, [2.5, 97.5])
        if not (abs(obj[key][0] - lo) <= 1e-4 and abs(obj[key][1] - hi) <= 1e-4):
            sys.exit('%s: ptq %s, port [%.6f, %.6f]' % (key, obj[key], lo, hi))
        worst = max(worst, abs(obj[key][0] - lo), abs(obj[key][1] - hi))
    print('intervals of 1000 resamples equal (50 of them also evaluated whole)', end='; ')
print('largest difference %.2g' % worst)
PYEOF

for kind in yolo coco; do
  spec=$kind:$TMP/yolo; [ $kind = coco ] && spec=$kind:$TMP/coco.json
  check "compare --labels $kind: mAP of FP32 and max equal the COCOeval port on ptq run's outputs" bash -c "
    '$PTQ' compare '$M' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' ${PRE[*]} --methods max --float fp32 \
        --labels '$spec' --json '$TMP/report_$kind.json' > '$TMP/$kind.out' 2>&1 || { cat '$TMP/$kind.out'; exit 1; }
    grep -q 'mAP50-95' '$TMP/$kind.out' && grep -q '^FP32 against' '$TMP/$kind.out' &&
    $PY '$TMP/port.py' '$TMP' $kind '$TMP/report_$kind.json' '$ROOT/tests/oracle'"
done
# --as-is: the model as given, no calibration: its figures are those of the same run's FP32 row, and
# the QDQ model ptq quantize wrote scores what compare's row of its method says (the same doubles in
# the JSON: truth figures, intervals, with --base the paired differences, cosine and box-f1 too)
cat > "$TMP/same.py" <<'PYEOF'
import json, sys
a, b, pairs = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3:]
TRUTH = ('map50', 'map', 'map50_ci', 'map_ci', 'ap50', 'ap', 'top1_acc', 'top1_ci', 'cer', 'line_acc', 'cer_ci',
         'line_acc_ci', 'miou', 'miou_ci', 'iou')
def get(r, where):
    return r['fp32'] if where == 'fp32' else r['methods'][0]
n = 0
for pair in pairs:  # "as-is-side:compare-side[:delta]"
    x, y, *more = pair.split(':')
    keys = TRUTH + (('map50_delta_ci', 'map_delta_ci', 'top1_delta_ci', 'cosine', 'sqnr_db', 'box_f1', 'top1_agree')
                    if more else ())
    for k in keys:
        if k in get(a, x) or k in get(b, y):
            assert get(a, x).get(k) == get(b, y).get(k), (pair, k, get(a, x).get(k), get(b, y).get(k))
            n += get(a, x).get(k) is not None
assert a['as_is'] is True and a['methods'][0]['method'] == 'as-is' and b['as_is'] is False, (a['as_is'], b['as_is'])
assert n >= 2 * len(pairs), (n, pairs)
print('%d figures equal' % n)
PYEOF
check "compare --as-is: FP32's own figures equal the FP32 row of compare (same doubles)" bash -c "
  '$PTQ' compare '$M' --as-is --eval-images '$TMP/eval.list' ${PRE[*]} --labels 'yolo:$TMP/yolo' --json '$TMP/asis_fp.json' \
      > '$TMP/asis_fp.out' 2>&1 || { cat '$TMP/asis_fp.out'; exit 1; }
  grep -q '^as-is against yolo:' '$TMP/asis_fp.out' && ! grep -q 'best' '$TMP/asis_fp.out' &&
  $PY '$TMP/same.py' '$TMP/asis_fp.json' '$TMP/report_yolo.json' m:fp32 fp32:fp32"
check "compare --as-is of the QDQ model ptq quantize wrote: compare's row of that method (with --base: its differences)" bash -c "
  '$PTQ' compare '$TMP/q.onnx' --as-is --eval-images '$TMP/eval.list' ${PRE[*]} --labels 'yolo:$TMP/yolo' \
      --json '$TMP/asis_q.json' > '$TMP/asis_q.out' 2>&1 || { cat '$TMP/asis_q.out'; exit 1; }
  $PY '$TMP/same.py' '$TMP/asis_q.json' '$TMP/report_yolo.json' m:m &&
  '$PTQ' compare '$TMP/q.onnx' --as-is --base '$M' --eval-images '$TMP/eval.list' ${PRE[*]} --labels 'yolo:$TMP/yolo' \
      --json '$TMP/asis_b.json' > '$TMP/asis_b.out' 2>&1 || { cat '$TMP/asis_b.out'; exit 1; }
  grep -q '^base against yolo:' '$TMP/asis_b.out' && grep -q 'minus base' '$TMP/asis_b.out' &&
  $PY '$TMP/same.py' '$TMP/asis_b.json' '$TMP/report_yolo.json' m:m:delta fp32:fp32"
check "compare --as-is with an option of calibration: refused" refused "--as-is scores the model as given, without calibration: --images does not apply" \
  "$PTQ" compare "$M" --as-is --images "$TMP/calib.list" --eval-images "$TMP/eval.list" "${PRE[@]}"
check "compare --base without --as-is: refused" refused "--base is for --as-is" \
  "$PTQ" compare "$M" --base "$M" --images "$TMP/calib.list" --eval-images "$TMP/eval.list" "${PRE[@]}"
check "compare with detector labels: map is the metric that picks the method" bash -c "
  '$PTQ' compare '$M' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' ${PRE[*]} --methods max,mse \
      --labels 'yolo:$TMP/yolo' 2>/dev/null | grep -E '^best: .* \(by map, then cosine\)'"

check "--metric map --target-drop: the layers left in float keep mAP50-95 within 0.02 of FP32's" bash -c "
  '$PTQ' compare '$M' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' ${PRE[*]} --methods max --float fp32 \
      --labels 'yolo:$TMP/yolo' --eval-limit 3 --metric map --target-drop 0.02 --json '$TMP/drop.json' > '$TMP/drop.out' 2>&1 || { cat '$TMP/drop.out'; exit 1; }
  $PY -c \"import json; r = json.load(open('$TMP/drop.json')); x = r['exclusion']
assert x['target'].startswith('map drop <= 0.02 (FP32 '), x['target']
assert x['reached'] <= 0.02, x
print(x['target'], 'reached', x['reached'], 'with', len(x['nodes']), 'nodes in float')\""
check "--target-drop with sqnr: refused" refused "--target-drop: FP32 has no sqnr of its own" "$PTQ" compare "$M" \
  --images "$TMP/calib.list" --eval-images "$TMP/eval.list" "${PRE[@]}" --metric sqnr --target-drop 1

# untrusted label files: one line naming the file and line or entry
mkdir -p "$TMP/bad1" "$TMP/bad2"
cp "$TMP"/yolo/*.txt "$TMP/bad1/"
first=$(ls "$TMP/bad1" | head -n 1)
echo "3 0.5 0.5 1.5 0.2" >> "$TMP/bad1/$first"
n1=$(wc -l < "$TMP/bad1/$first")
check "a yolo box outside 0..1: refused naming the file and line" \
  refused "$TMP/bad1/$first:$n1: 1.5 is outside 0..1" "$PTQ" compare "$M" --images "$TMP/calib.list" \
    --eval-images "$TMP/eval.list" "${PRE[@]}" --methods max --labels "yolo:$TMP/bad1"
cp "$TMP"/yolo/*.txt "$TMP/bad2/"
echo "0 0.5 0.5 0.1 0.1" > "$TMP/bad2/not_an_image.txt"
check "a yolo label file of no evaluation image: refused naming it" \
  refused "not_an_image.txt is not among the evaluation images" "$PTQ" compare "$M" --images "$TMP/calib.list" \
    --eval-images "$TMP/eval.list" "${PRE[@]}" --methods max --labels "yolo:$TMP/bad2"
$PY -c "
import json; c = json.load(open('$TMP/coco.json')); c['annotations'][2]['category_id'] = 500
json.dump(c, open('$TMP/bad_cat.json', 'w'))
c = json.load(open('$TMP/coco.json')); c['images'] = c['images'][1:]; c['annotations'] = [a for a in c['annotations'] if a['image_id'] != 100]
json.dump(c, open('$TMP/bad_img.json', 'w'))"
check "a coco annotation of an unknown category: refused naming the entry" \
  refused "bad_cat.json: annotations[2]: category_id 500 is not in categories" "$PTQ" compare "$M" \
    --images "$TMP/calib.list" --eval-images "$TMP/eval.list" "${PRE[@]}" --methods max --labels "coco:$TMP/bad_cat.json"
check "an evaluation image missing from the coco file: refused naming it" \
  refused "evaluation image not among the images of $TMP/bad_img.json" "$PTQ" compare "$M" \
    --images "$TMP/calib.list" --eval-images "$TMP/eval.list" "${PRE[@]}" --methods max --labels "coco:$TMP/bad_img.json"
check "detector labels on a classifier: refused, naming the labels and the model" bash -c "
  err=\$('$PTQ' compare '$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx' --images '$TMP/calib.list' \
      --eval-images '$TMP/eval.list' --preset paddleocr-cls --methods max --labels 'yolo:$TMP/yolo' 2>&1 >/dev/null) && exit 1
  echo \"\$err\" | grep -F -- \"--labels yolo:$TMP/yolo: a detector's labels, but $MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx's output 0 is not\""

# A recogniser against its text: PP-OCRv4 rec on tests/oracle/textpages.py's labelled crops, the
# labels as PaddleOCR's list (path<TAB>text) and as one STEM.txt per crop. Asserted: CER and the
# share of lines read exactly, of FP32 and of max, with their bootstrap intervals and those of the
# paired differences (tests/oracle/bootstrap.py, numpy's draws), equal a python port (greedy CTC with the
# dictionary as PaddleOCR's CTCLabelDecode, Levenshtein on the strings) on ptq run's outputs, the
# texts made partly wrong (a character replaced, dropped, or one the dictionary lacks added).
# a classifier's top-1 accuracy with its bootstrap intervals (zoo MobileNetV3-small, labels from
# FP32's own classes, every other image given another class)
CPRE=(--preset imagenet-torchvision)
awk 'NR % 2 == 0' "$TMP/all.list" | head -n 8 > "$TMP/cls.list"
"$PTQ" preprocess --images "$TMP/cls.list" "${CPRE[@]}" --dump "$TMP/cls.npy" >/dev/null 2>&1
NC=$($PY -c "
import numpy as np; x = np.load('$TMP/cls.npy')
for i in range(x.shape[0]): np.save('$TMP/cls%d.npy' % i, x[i:i + 1])
print(x.shape[0])")
"$PTQ" quantize "$CM" --images "$TMP/calib.list" "${CPRE[@]}" --method max -o "$TMP/cls.q.onnx" >/dev/null 2>&1
for i in $(seq 0 $((NC - 1))); do
  "$PTQ" run "$CM" --input "$TMP/cls$i.npy" --output-dir "$TMP/cfp.$i" >/dev/null
  "$PTQ" run "$TMP/cls.q.onnx" --input "$TMP/cls$i.npy" --output-dir "$TMP/cq.$i" >/dev/null
done
$PY - "$TMP" "$ROOT/tests/oracle" <<'PYEOF2'
import glob, os, sys
import numpy as np
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from bootstrap import ratio, paired_delta
paths = [l.strip() for l in open(d + '/cls.list')]
hit = {'fp': [], 'q': []}
with open(d + '/cls.labels', 'w') as f:
    for i, p in enumerate(paths):
        fp = int(np.argmax(np.load(glob.glob('%s/cfp.%d/*.npy' % (d, i))[0]).reshape(-1)))
        q = int(np.argmax(np.load(glob.glob('%s/cq.%d/*.npy' % (d, i))[0]).reshape(-1)))
        label = fp if i % 2 == 0 else (fp + 1 + i) % 1000
        f.write('%s %d\n' % (os.path.basename(p), label))
        hit['fp'].append(float(fp == label))
        hit['q'].append(float(q == label))
ones = [1.0] * len(paths)
want = {'q': ratio(hit['q'], ones), 'fp': ratio(hit['fp'], ones), 'delta': paired_delta(hit['fp'], hit['q'], ones)}
open(d + '/cls.want', 'w').write(repr(want))
PYEOF2
check "compare --labels list: top-1 accuracy of FP32 and max with bootstrap intervals equal the numpy port" bash -c "
  '$PTQ' compare '$CM' --images '$TMP/calib.list' --eval-images '$TMP/cls.list' ${CPRE[*]} --methods max --float fp32 \
      --labels 'list:$TMP/cls.labels' --json '$TMP/cls.json' > '$TMP/cls.out' 2>&1 || { cat '$TMP/cls.out'; exit 1; }
  grep -q '^FP32 top-1 accuracy' '$TMP/cls.out' &&
  $PY -c \"
import json; w = eval(open('$TMP/cls.want').read()); r = json.load(open('$TMP/cls.json'))
m, f = r['methods'][0], r['fp32']
for got, want in ((m['top1_acc'], w['q'][0]), (f['top1_acc'], w['fp'][0]), (m['top1_ci'], w['q'][1:]), (f['top1_ci'], w['fp'][1:]),
                  (m['top1_delta_ci'], w['delta'][1:])):
    got, want = (got if isinstance(got, list) else [got]), (list(want) if isinstance(want, tuple) else [want])
    assert all(abs(a - b) <= 1e-9 for a, b in zip(got, want)) and len(got) == len(want), (got, want)
print('FP32 top-1 %.3f %s, max %.3f %s, delta %s' % (w['fp'][0], w['fp'][1:], w['q'][0], w['q'][1:], w['delta'][1:]))\""

check "compare --as-is on a classifier: FP32's and the QDQ model's top-1 with intervals are compare's rows" bash -c "
  '$PTQ' compare '$CM' --as-is --eval-images '$TMP/cls.list' ${CPRE[*]} --labels 'list:$TMP/cls.labels' --json '$TMP/cls_asis_fp.json' \
      > '$TMP/cls_asis.out' 2>&1 || { cat '$TMP/cls_asis.out'; exit 1; }
  '$PTQ' compare '$TMP/cls.q.onnx' --as-is --base '$CM' --eval-images '$TMP/cls.list' ${CPRE[*]} --labels 'list:$TMP/cls.labels' \
      --json '$TMP/cls_asis_q.json' >> '$TMP/cls_asis.out' 2>&1 || { cat '$TMP/cls_asis.out'; exit 1; }
  $PY '$TMP/same.py' '$TMP/cls_asis_fp.json' '$TMP/cls.json' m:fp32 fp32:fp32 &&
  $PY '$TMP/same.py' '$TMP/cls_asis_q.json' '$TMP/cls.json' m:m:delta fp32:fp32"

REC=$MODELS/ch_PP-OCRv4_rec_infer.onnx
KEYS=$MODELS/ppocr_keys_v1.txt
if [ ! -f "$REC" ] || ! fc-list 2>/dev/null | grep -qi wqy; then
  skip "recogniser labels" "needs build/models and the fonts of scripts/deps.sh (make deps)"; finish
fi
rm -rf "$TMP/ocr" "$TMP/ocrtext"
$PY "$ROOT/tests/oracle/textpages.py" "$TMP/ocr" --pages 1 --split eval >/dev/null
ls "$TMP"/ocr/rec/*.png | sort > "$TMP/rec.list"
$PY - "$TMP" <<'PYEOF2'
import os, sys
d = sys.argv[1]
os.makedirs(d + '/ocrtext', exist_ok=True)
# some texts made wrong, so that the readings have errors to count: a character replaced, one
# the dictionary lacks appended, one dropped
lines = []
for k, line in enumerate(open(d + '/ocr/rec.labels', encoding='utf-8')):
    name, text = line.rstrip('\n').split(',', 1)
    text = [text, text[:-1] + 'Q', text + '\u2603', text[1:]][k % 4] if len(text) > 1 else text
    lines.append('%s,%s\n' % (name, text))
open(d + '/truth.labels', 'w', encoding='utf-8').writelines(lines)
with open(d + '/rec.paddle', 'w', encoding='utf-8') as f:
    for line in lines:
        name, text = line.rstrip('\n').split(',', 1)
        f.write('rec/%s\t%s\n' % (name, text))
        open('%s/ocrtext/%s.txt' % (d, os.path.splitext(name)[0]), 'w', encoding='utf-8').write(text + '\n')
PYEOF2
RPRE=(--preset paddleocr-rec)
"$PTQ" preprocess --images "$TMP/rec.list" "${RPRE[@]}" --dump "$TMP/rec.npy" >/dev/null 2>&1
NR=$($PY -c "
import numpy as np; x = np.load('$TMP/rec.npy')
for i in range(x.shape[0]): np.save('$TMP/rec%d.npy' % i, x[i:i + 1])
print(x.shape[0])")
"$PTQ" quantize "$REC" --images "$TMP/rec.list" "${RPRE[@]}" --method max -o "$TMP/rec.q.onnx" >/dev/null 2>&1
for i in $(seq 0 $((NR - 1))); do
  "$PTQ" run "$REC" --input "$TMP/rec$i.npy" --output-dir "$TMP/rfp.$i" >/dev/null
  "$PTQ" run "$TMP/rec.q.onnx" --input "$TMP/rec$i.npy" --output-dir "$TMP/rq.$i" >/dev/null
done
cat > "$TMP/ocr_port.py" <<'PYEOF2'
import glob, json, os, sys
import numpy as np
d, report, keys, oracle = sys.argv[1:5]
sys.path.insert(0, oracle)
from edit_distance import levenshtein
from bootstrap import ratio, paired_delta
chars = ['blank'] + [l.rstrip('\n').rstrip('\r') for l in open(keys, encoding='utf-8')] + [' ']
paths = [l.strip() for l in open(d + '/rec.list')]
truth = dict(l.rstrip('\n').split(',', 1) for l in open(d + '/truth.labels', encoding='utf-8'))
def read(prob):  # PaddleOCR's CTCLabelDecode: argmax, repeats merged, blank dropped
    idx = prob.argmax(axis=1)
    keep = np.ones(len(idx), bool)
    keep[1:] = idx[1:] != idx[:-1]
    keep &= idx != 0
    return ''.join(chars[i] for i in idx[keep])
r = json.load(open(report))
per = {}
near = lambda a, b: abs(a[0] - b[0]) <= 1e-4 and abs(a[1] - b[1]) <= 1e-4
for name, prefix, got in (('FP32', 'rfp', r['fp32']), ('max', 'rq', r['methods'][0])):
    edits, nchars, exact = [], [], []
    for i, p in enumerate(paths):
        y = np.load(glob.glob('%s/%s.%d/*.npy' % (d, prefix, i))[0])[0]
        ref = truth[os.path.basename(p)]
        e = levenshtein(read(y), ref)
        edits.append(e); nchars.append(len(ref)); exact.append(float(e == 0))
    per[name] = (edits, exact)
    cer, lo, hi = ratio(edits, nchars)
    acc, alo, ahi = ratio(exact, [1] * len(paths))
    assert abs(got['cer'] - cer) <= 1e-4 and abs(got['line_acc'] - acc) <= 1e-4, (name, got, cer, acc)
    assert near(got['cer_ci'], (lo, hi)) and near(got['line_acc_ci'], (alo, ahi)), (name, got, lo, hi, alo, ahi)
    print('%s CER %.4f [%.4f, %.4f] lines %.4f [%.4f, %.4f]' % (name, cer, lo, hi, acc, alo, ahi), end='; ')
m = r['methods'][0]
_, lo, hi = paired_delta(per['FP32'][0], per['max'][0], nchars)
_, alo, ahi = paired_delta(per['FP32'][1], per['max'][1], [1] * len(paths))
assert near(m['cer_delta_ci'], (lo, hi)) and near(m['line_acc_delta_ci'], (alo, ahi)), (m, lo, hi, alo, ahi)
print('max - FP32 CER [%.4f, %.4f]; %d lines' % (lo, hi, len(paths)))
PYEOF2
for spec in "paddle:$TMP/rec.paddle:dict=$KEYS" "text:$TMP/ocrtext:dict=$KEYS"; do
  kind=${spec%%:*}
  check "compare --labels $kind: CER and exact lines of FP32 and max equal the python port on ptq run's outputs; text-chars picks the method" bash -c "
    '$PTQ' compare '$REC' --images '$TMP/rec.list' --eval-images '$TMP/rec.list' ${RPRE[*]} --methods max --float fp32 \
        --labels '$spec' --json '$TMP/ocr_$kind.json' > '$TMP/ocr_$kind.out' 2>&1 || { cat '$TMP/ocr_$kind.out'; exit 1; }
    grep -q '^FP32 against' '$TMP/ocr_$kind.out' && grep -q '(by text-chars, then cosine)' '$TMP/ocr_$kind.out' &&
    $PY '$TMP/ocr_port.py' '$TMP' '$TMP/ocr_$kind.json' '$KEYS' '$ROOT/tests/oracle'"
done
{ cat "$TMP/rec.paddle"; printf 'rec/nosuch.png\tabc\n'; } > "$TMP/rec_extra.paddle"
check "a recogniser label naming no evaluation image: refused naming the file and line" \
  refused "rec_extra.paddle:$(($(wc -l < "$TMP/rec.paddle") + 1)): nosuch.png is not among the evaluation images" \
  "$PTQ" compare "$REC" --images "$TMP/rec.list" --eval-images "$TMP/rec.list" "${RPRE[@]}" --methods max \
    --labels "paddle:$TMP/rec_extra.paddle:dict=$KEYS"
check "a recogniser's labels without a dictionary: refused" \
  refused "a recogniser's labels are paddle:FILE:dict=KEYS or text:DIR:dict=KEYS" \
  "$PTQ" compare "$REC" --images "$TMP/rec.list" --eval-images "$TMP/rec.list" "${RPRE[@]}" --methods max \
    --labels "paddle:$TMP/rec.paddle"
finish
