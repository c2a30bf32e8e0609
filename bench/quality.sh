#!/usr/bin/env bash
# make bench (issue 5): FP32 vs QDQ output quality per calibration method on the three
# PaddleOCR models, from `ptq compare` (the QDQ model `ptq quantize` writes, simulated by
# ptq's executor) with the photos split in two: odd-numbered photos calibrate, even-numbered
# ones evaluate. No exclusions. Written to build/bench/quality.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
mkdir -p "$OUT"
ls "$PWD"/build/photos/* | grep -v truncated | sort > "$OUT/all.list"
awk 'NR % 2 == 1' "$OUT/all.list" > "$OUT/calib.list"
awk 'NR % 2 == 0' "$OUT/all.list" > "$OUT/eval.list"
{
  echo "calibration: $(wc -l < "$OUT/calib.list") photos, evaluation: $(wc -l < "$OUT/eval.list") other photos"
  echo
  echo "| model | method | cosine | SQNR dB | top-1 agreement |"
  echo "|---|---|---:|---:|---:|"
  for spec in "ch_PP-OCRv4_det_infer:paddleocr-det" "ch_ppocr_mobile_v2.0_cls_infer:paddleocr-cls" "ch_PP-OCRv4_rec_infer:paddleocr-rec"; do
    m=${spec%%:*}; preset=${spec#*:}
    "$PTQ" compare "build/models/$m.onnx" --images "$OUT/calib.list" --eval-images "$OUT/eval.list" --preset "$preset" \
      --batch 4 --methods all --json "$OUT/$m.compare.json" --threads 2 >/dev/null 2>&1
    /usr/bin/python3 - "$OUT/$m.compare.json" "$m" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["methods"]:
    t = "" if x["top1_agree"] is None else f"{x['top1_agree']:.3f}"
    best = " (best)" if x["method"] == r["best_method"] else ""
    print(f"| {sys.argv[2]} | {x['method']}{best} | {x['cosine']:.4f} | {x['sqnr_db']:.1f} | {t} |")
PYEOF
  done
} | tee "$OUT/quality.md"
