#!/usr/bin/env bash
# make bench (issue 5): FP32 vs QDQ output quality per calibration method on the three
# PaddleOCR models, from `ptq compare` (the QDQ model `ptq quantize` writes, simulated by
# ptq's executor), no exclusions, on two data sets, each split into calibration and
# evaluation halves that share no photo:
#   text:   OCR data made from the real photos by tests/oracle/textimages.py (text lines
#           rendered on the photographs: whole images for det, line crops for rec, the same
#           crops with every second one turned 180 degrees for cls); odd-numbered photos
#           calibrate, even-numbered ones evaluate. What an OCR model is meant to see.
#   photos: every skimage image as it is (photos, scans, test patterns down to 3x5 pixels);
#           odd-numbered calibrate, even-numbered evaluate.
# Written to build/bench/quality.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
TEXT=$PWD/build/textphotos
mkdir -p "$OUT"
[ -f "$TEXT/.done" ] || { /usr/bin/python3 tests/oracle/textimages.py build/photos "$TEXT" >/dev/null && touch "$TEXT/.done"; }

# photos split: odd lines calibrate, even lines evaluate
ls "$PWD"/build/photos/* | grep -v truncated | sort > "$OUT/photos.all"
awk 'NR % 2 == 1' "$OUT/photos.all" > "$OUT/photos.det.calib"
awk 'NR % 2 == 0' "$OUT/photos.all" > "$OUT/photos.det.eval"
for k in cls rec; do cp "$OUT/photos.det.calib" "$OUT/photos.$k.calib"; cp "$OUT/photos.det.eval" "$OUT/photos.$k.eval"; done
# text split by source photo (NAME_K.png, NAME_K_L.png): odd-numbered photos calibrate
ls "$TEXT"/det | sed 's/_[0-9]*\.png$//' | sort -u | awk 'NR % 2 == 1' > "$OUT/text.calib.photos"
for k in det rec cls; do
  ls "$TEXT/$k"/*.png | sort | awk -v sub_re="$( [ $k = det ] && echo '_[0-9]+\\.png$' || echo '_[0-9]+_[0-9]+\\.png$')" '
    NR == FNR { calib[$1] = 1; next }
    { n = $0; sub(/.*\//, "", n); sub(sub_re, "", n); print (n in calib ? "C" : "E") "\t" $0 }' "$OUT/text.calib.photos" - > "$OUT/text.$k.split"
  awk -F'\t' '$1 == "C" {print $2}' "$OUT/text.$k.split" > "$OUT/text.$k.calib"
  awk -F'\t' '$1 == "E" {print $2}' "$OUT/text.$k.split" > "$OUT/text.$k.eval"
done

{
  echo "| data | model | calibration / evaluation images | method | cosine | SQNR dB | top-1 agreement |"
  echo "|---|---|---|---|---:|---:|---:|"
  for set in text photos; do
    for spec in "det:ch_PP-OCRv4_det_infer" "cls:ch_ppocr_mobile_v2.0_cls_infer" "rec:ch_PP-OCRv4_rec_infer"; do
      k=${spec%%:*}; m=${spec#*:}
      "$PTQ" compare "build/models/$m.onnx" --images "$OUT/$set.$k.calib" --eval-images "$OUT/$set.$k.eval" \
        --preset "paddleocr-$k" --batch 4 --methods all --json "$OUT/$set.$m.compare.json" --threads 2 >/dev/null 2>&1
      /usr/bin/python3 - "$OUT/$set.$m.compare.json" "$set" "$m" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["methods"]:
    t = "" if x["top1_agree"] is None else f"{x['top1_agree']:.3f}"
    best = " (best)" if x["method"] == r["best_method"] else ""
    print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['n_calib']} / {r['n_eval']} | {x['method']}{best} | {x['cosine']:.4f} | {x['sqnr_db']:.1f} | {t} |")
PYEOF
    done
  done
} | tee "$OUT/quality.md"
