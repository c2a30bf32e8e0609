#!/usr/bin/env bash
# The labelled OCR data of bench/truth.sh, quickly: tests/oracle/textpages.py renders 3 pages
# (byte-identical for the same seed; the calibration split shares no word with the evaluation
# split); truth.json, the crops and their labels agree in count and names; the CER of FP32's
# reading against the truth (tests/oracle/ocr_pipeline.py cer --truth) is a number in [0, 1]
# whose bootstrap interval holds it; rec alone on the truth's crops reads within that too.
. "$(dirname "$0")/lib.sh"
M=$MODELS
if [ ! -f "$M/ch_PP-OCRv4_rec_infer.onnx" ] || ! fc-list 2>/dev/null | grep -qi wqy; then
  skip "truth" "needs build/models and the fonts of scripts/deps.sh (make deps)"; finish
fi
rm -rf "$TMP"/a "$TMP"/b "$TMP"/c
TP="$PY $ROOT/tests/oracle/textpages.py"
OCRP="$PY $ROOT/tests/oracle/ocr_pipeline.py"
check "textpages renders 3 pages" $TP "$TMP/a" --pages 3 --split eval
$TP "$TMP/b" --pages 3 --split eval >/dev/null
check "the same seed gives byte-identical pages, crops, truth and labels" \
  bash -c "cd '$TMP/a' && for f in truth.json rec.labels cls.labels pages/* rec/* cls/*; do cmp \"\$f\" '$TMP/b/'\"\$f\" || exit 1; done"
$TP "$TMP/c" --pages 3 --split calib >/dev/null
check "calibration and evaluation splits share no Latin word and no page" "$PY" - "$TMP/a/truth.json" "$TMP/c/truth.json" <<'EOF'
import json, re, sys
words = [set(w for p in json.load(open(f))["images"] for l in p["lines"] for w in re.findall(r"[a-z]{3,}", l["text"].lower()))
         for f in sys.argv[1:]]
assert not (words[0] & words[1]), words[0] & words[1]
assert open(sys.argv[1], "rb").read() != open(sys.argv[2], "rb").read()
EOF
check "truth.json, the crops and the labels agree" "$PY" - "$TMP/a" <<'EOF'
import json, os, sys
d = sys.argv[1]
t = json.load(open(os.path.join(d, "truth.json")))["images"]
names = [f"{os.path.splitext(os.path.basename(p['image']))[0]}_{j:02d}.png" for p in t for j in range(len(p["lines"]))]
texts = [l["text"] for p in t for l in p["lines"]]
rec = [l.rstrip("\n").split(",", 1) for l in open(os.path.join(d, "rec.labels"), encoding="utf-8")]
cls = [l.rstrip("\n").split(",", 1) for l in open(os.path.join(d, "cls.labels"))]
assert [r[0] for r in rec] == names and [r[1] for r in rec] == texts, "rec.labels"
assert [c[0] for c in cls] == names and sorted(set(c[1] for c in cls)) == ["0", "1"], "cls.labels"
assert abs(sum(c[1] == "1" for c in cls) - len(cls) / 2) <= 0.5, "half turned"
assert sorted(os.listdir(os.path.join(d, "rec"))) == sorted(names) == sorted(os.listdir(os.path.join(d, "cls")))
assert all(len(l["polygon"]) == 4 and l["text"] for p in t for l in p["lines"])
print(f"{len(t)} pages, {len(names)} lines")
EOF
if [ -d "$ROOT/build/oracle/node_modules/onnxruntime-node" ]; then
  OCR="$OCRP --keys $M/ppocr_keys_v1.txt"
  $OCR --det "$M/ch_PP-OCRv4_det_infer.onnx" --rec "$M/ch_PP-OCRv4_rec_infer.onnx" --images "$TMP/a/pages.list" \
    --out "$TMP/fp32.json" 2>/dev/null
  ls "$TMP"/a/rec/*.png > "$TMP/rec.list"
  $OCR --crops --rec "$M/ch_PP-OCRv4_rec_infer.onnx" --images "$TMP/rec.list" --out "$TMP/crops.json" 2>/dev/null
  inside() { # FIGURES.json MAX: lo <= point <= hi within [0, 1], point <= MAX
    "$PY" -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert 0 <= r['lo'] <= r['point'] <= r['hi'] <= 1, r
assert r['point'] <= float(sys.argv[2]), ('CER above', sys.argv[2], r)
print(f\"{r['metric']} {r['point']:.4f} [{r['lo']:.4f}, {r['hi']:.4f}] over {r['units']} pages\")" "$@"
  }
  cer_truth() { $OCRP cer --truth "$TMP/a/truth.json" --hyp "$TMP/fp32.json" --json "$TMP/c1.json" >/dev/null && inside "$TMP/c1.json" 0.2; }
  cer_crops() { $OCRP cer --labels "$TMP/a/rec.labels" --hyp "$TMP/crops.json" --ignore-space --json "$TMP/c2.json" >/dev/null &&
                inside "$TMP/c2.json" 0.05; }
  check "cer --truth: FP32's CER in [0, 1], inside its bootstrap interval (and below 0.2)" cer_truth
  check "cer --labels: rec alone on the truth's crops, spaces ignored (below 0.05)" cer_crops
  check "cer --base: a reading against itself differs by 0 [0, 0]" bash -c \
    "$OCRP cer --truth '$TMP/a/truth.json' --hyp '$TMP/fp32.json' --base '$TMP/fp32.json' | grep -F 'minus base +0.0000 [+0.0000, +0.0000]'"
else
  skip "cer --truth" "needs onnxruntime-node (make deps)"
fi
check "bootstrap.py's self-check" "$PY" "$ROOT/tests/oracle/bootstrap.py"
finish
