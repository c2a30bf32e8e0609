#!/usr/bin/env bash
# ptq compare --labels FILE (and list:FILE) refuses a labelled set whose labels do not match its images, with one
# line naming the file (and the line): a label naming no evaluation image, an empty label or image
# name, an image labelled twice, an evaluation image without a label. A matching set is read and
# its top-1 accuracy equals the oracle's (tests/oracle/ocr_pipeline.py classify + top1 on ONNX
# Runtime) for FP32 (PaddleOCR's cls on tests/oracle/textpages.py's labelled crops).
. "$(dirname "$0")/lib.sh"
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
if [ ! -f "$CLS" ] || ! fc-list 2>/dev/null | grep -qi wqy; then
  skip "labels" "needs build/models and the fonts of scripts/deps.sh (make deps)"; finish
fi
rm -rf "$TMP"/set "$TMP"/*.labels
"$PY" "$ROOT/tests/oracle/textpages.py" "$TMP/set" --pages 2 --split eval >/dev/null || { echo "FAIL textpages"; exit 1; }
E=$TMP/set/cls
L=$TMP/set/cls.labels
cmp_labels() { "$PTQ" compare "$CLS" --images "$E" --eval-images "$E" --preset paddleocr-cls --methods max --labels "$1"; }

check "a matching labelled set: top-1 accuracy reported" bash -c "cmp_out=\$('$PTQ' compare '$CLS' --images '$E' --eval-images '$E' \
  --preset paddleocr-cls --methods max --labels '$L' --json '$TMP/ok.json' 2>&1) || { echo \"\$cmp_out\"; exit 1; }; echo \"\$cmp_out\" | grep -q 'top-1 acc'"

first=$(head -n 1 "$L" | cut -d, -f1)
n=$(wc -l < "$L")
{ cat "$L"; echo "nosuch.png,1"; } > "$TMP/extra.labels"
check "a label naming no evaluation image is refused (file:line, name)" \
  refused "extra.labels:$((n + 1)): nosuch.png is not among the evaluation images" cmp_labels "$TMP/extra.labels"
{ cat "$L"; echo "$first,0"; } > "$TMP/twice.labels"
check "an image labelled twice is refused" refused "twice.labels:$((n + 1)): $first is labelled twice (line 1 too)" \
  cmp_labels "$TMP/twice.labels"
{ echo "$first,"; tail -n +2 "$L"; } > "$TMP/empty.labels"
check "an empty label is refused" refused "empty.labels:1: expected 'image,label'" cmp_labels "$TMP/empty.labels"
{ cat "$L"; echo ",1"; } > "$TMP/noname.labels"
check "a label without an image name is refused" refused "noname.labels:$((n + 1)): no image name" cmp_labels "$TMP/noname.labels"
tail -n +2 "$L" > "$TMP/missing.labels"
check "an evaluation image without a label is refused (names the image)" \
  refused "$first: evaluation image without a label in $TMP/missing.labels" cmp_labels "$TMP/missing.labels"

# the same labels as an ImageNet-style list ("path class", a space or a tab): the same top-1 accuracy
sed 's/,\([0-9]*\)$/ \1/' "$L" > "$TMP/list.labels"
check "--labels list:FILE ('image class' lines) gives the same top-1 accuracy as the CSV" bash -c "
  '$PTQ' compare '$CLS' --images '$E' --eval-images '$E' --preset paddleocr-cls --methods max --labels 'list:$TMP/list.labels' \
      --json '$TMP/list.json' >/dev/null 2>&1 &&
  '$PY' -c \"import json; a = json.load(open('$TMP/ok.json'))['methods'][0]['top1_acc']; b = json.load(open('$TMP/list.json'))['methods'][0]['top1_acc']
assert a == b and a is not None, (a, b); print('top-1', a)\""
{ cat "$TMP/list.labels"; echo "x.png one"; } > "$TMP/list_bad.labels"
check "a list line whose class is not an index is refused (file:line)" \
  refused "list_bad.labels:$((n + 1)): expected 'image class' with a class index" cmp_labels "list:$TMP/list_bad.labels"

# FP32 top-1 against the labels equals the oracle's (ONNX Runtime, PaddleOCR's cls preprocessing)
if [ -d "$ROOT/build/oracle/node_modules/onnxruntime-node" ]; then
  ls "$E"/*.png > "$TMP/cls.list"
  check "the labels read by ptq are the oracle's: FP32 top-1 accuracy of both agrees" bash -c "
    '$PY' '$ROOT/tests/oracle/ocr_pipeline.py' classify --cls '$CLS' --images '$TMP/cls.list' --out '$TMP/cls.json' 2>/dev/null &&
    '$PY' '$ROOT/tests/oracle/ocr_pipeline.py' top1 --labels '$L' --hyp '$TMP/cls.json' --json '$TMP/top1.json' >/dev/null &&
    '$PY' - '$TMP/top1.json' '$TMP/ok.json' <<'EOF'
import json, sys
o = json.load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
acc = [m['top1_acc'] for m in r['methods'] if 'top1_acc' in m] if 'methods' in r else []
print('oracle FP32 top-1', o['point'], 'ptq max top-1', acc)
assert o['items'] == o['den'] and o['point'] >= 0.9, o
assert acc and abs(acc[0] - o['point']) <= 1.0 / o['items'] + 1e-9, (acc, o)
EOF"
else
  skip "oracle top-1" "needs onnxruntime-node (make deps)"
fi
finish
