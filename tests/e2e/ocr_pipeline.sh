#!/usr/bin/env bash
# tests/oracle/ocr_pipeline.py (PaddleOCR's det + rec pipeline on ONNX Runtime, the oracle of
# bench/ocr_cer.sh): the FP32 models read page.png's text (text.png, handwritten maths on a
# blurred page, gives PP-OCRv4 det nothing above its thresholds, so page.png carries the check);
# the CER arithmetic; the unclip fallback for machines without pyclipper against pyclipper.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
OCR=tests/oracle/ocr_pipeline.py
why=""
command -v node >/dev/null 2>&1 && [ -d build/oracle/node_modules/onnxruntime-node ] || why="no node or onnxruntime-node (make deps)"
[ -n "$why" ] || $PY -c "import cv2" 2>/dev/null || why="no python3-opencv (make deps)"
[ -n "$why" ] || [ -f "$MODELS/ppocr_keys_v1.txt" ] || why="no build/models/ppocr_keys_v1.txt (make deps)"
if [ -n "$why" ]; then
  skip "FP32 pipeline reads page.png" "$why"; skip "CER arithmetic" "$why"; skip "unclip fallback" "$why"
  finish
fi

read_page() {
  $PY $OCR --det "$MODELS/ch_PP-OCRv4_det_infer.onnx" --rec "$MODELS/ch_PP-OCRv4_rec_infer.onnx" \
    --keys "$MODELS/ppocr_keys_v1.txt" --images build/photos/page.png --out "$TMP/page.json" 2>/dev/null &&
  $PY - "$TMP/page.json" <<'PYEOF'
import json, sys
lines = [l["text"] for l in json.load(open(sys.argv[1]))["images"][0]["lines"]]
text = "\n".join(lines)
want = ["Region-based segmentation", "markers of the coins", "label", "histogram"]
miss = [w for w in want if w not in text]
assert not miss and len(lines) >= 3, f"missing {miss} in {lines}"
print(f"{len(lines)} lines, first: {lines[0]!r}")
PYEOF
}
check "FP32 pipeline reads page.png" read_page

cer_math() {
  $PY - <<'PYEOF'
import json, os, sys, tempfile
sys.path.insert(0, "tests/oracle")
import ocr_pipeline as o
assert o.levenshtein("kitten", "sitting") == 3 and o.levenshtein("", "abc") == 3
d = tempfile.mkdtemp()
def w(n, lines):
    json.dump({"images": [{"image": "a", "lines": [{"text": t} for t in lines]}]}, open(f"{d}/{n}", "w"))
    return f"{d}/{n}"
c, share, e, n, _, _ = o.cer(w("r", ["abcd", "ef"]), w("h", ["abXd", "ef"]))
assert (e, n) == (1, 7) and abs(c - 1 / 7) < 1e-12 and share == 0.5, (c, share, e, n)
print(f"CER {c:.4f}, identical lines {share}")
PYEOF
}
check "CER arithmetic" cer_math

unclip_fallback() {
  $PY - <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, "tests/oracle")
import ocr_pipeline as o
if o.pyclipper is None:
    print("pyclipper missing: fallback in use, nothing to compare"); sys.exit(0)
worst = 0
for cx, cy, w, h, a in [(100, 50, 120, 14, 3.0), (60, 80, 40, 9, -10.0), (200, 30, 300, 30, 0.0)]:
    import cv2
    box, _ = o.get_mini_boxes(cv2.boxPoints(((cx, cy), (w, h), a)).reshape(-1, 1, 2))
    box = np.array(box)
    a1, _ = o.get_mini_boxes(o.unclip(box, 1.5).reshape(-1, 1, 2))
    saved, o.pyclipper = o.pyclipper, None
    a2, _ = o.get_mini_boxes(o.unclip(box, 1.5).reshape(-1, 1, 2))
    o.pyclipper = saved
    worst = max(worst, float(np.abs(np.array(a1) - np.array(a2)).max()))
assert worst <= 1.5, worst
print(f"fallback within {worst:.2f} px of pyclipper")
PYEOF
}
check "unclip fallback" unclip_fallback
finish
