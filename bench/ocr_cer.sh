#!/usr/bin/env bash
# make bench (issue 13 item 3): what INT8 costs PaddleOCR's end-to-end reading. ptq quantizes
# PP-OCRv4 det and rec per calibration method (max, percentile 99.99, entropy, mse; rendered text
# images, the calibration half of bench/quality.sh's split: odd-numbered source photos, 2 renders
# each), then tests/oracle/ocr_pipeline.py (PaddleOCR's det + rec pipeline, ONNX Runtime running
# the FP32 and the QDQ models) reads the evaluation half: the even-numbered photos in
# $TEXT_VARIANTS (default 8) renders each (build/textphotos8; its first 2 are build/textphotos'
# own) plus build/photos/text.png and page.png. CER is against the FP32 pipeline's own reading
# (not a ground truth): det+rec INT8, det INT8 with rec FP32, rec INT8 on FP32 det's boxes; and
# the noise floor: FP32 rec on FP32 det's boxes with each corner moved by up to one pixel; and
# what rec's reading tolerates in its weights alone (rounded mantissas, 9- and 8-bit codes,
# int8-sized noise).
# Written to build/bench/ocr_cer.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
W=$OUT/ocr
M=build/models
TEXT=$PWD/build/textphotos
PY=/usr/bin/python3
OCR="$PY tests/oracle/ocr_pipeline.py --keys $M/ppocr_keys_v1.txt"
mkdir -p "$W"
t0=$(date +%s)
[ -f "$TEXT/.done" ] || { $PY tests/oracle/textimages.py build/photos "$TEXT" >/dev/null && touch "$TEXT/.done"; }

# bench/quality.sh's text split by source photo (NAME_K.png, NAME_K_L.png): odd-numbered photos calibrate
ls "$TEXT"/det | sed 's/_[0-9]*\.png$//' | sort -u | awk 'NR % 2 == 1' > "$W/calib.photos"
for k in det rec; do
  ls "$TEXT/$k"/*.png | sort | awk -v sub_re="$( [ $k = det ] && echo '_[0-9]+\\.png$' || echo '_[0-9]+_[0-9]+\\.png$')" '
    NR == FNR { calib[$1] = 1; next }
    { n = $0; sub(/.*\//, "", n); sub(sub_re, "", n); print (n in calib ? "C" : "E") "\t" $0 }' "$W/calib.photos" - > "$W/$k.split"
  awk -F'\t' '$1 == "C" {print $2}' "$W/$k.split" > "$W/$k.calib"
done
NV=${TEXT_VARIANTS:-8}
TEST=$PWD/build/textphotos$NV
[ -f "$TEST/.done" ] || { $PY tests/oracle/textimages.py build/photos "$TEST" --variants "$NV" >/dev/null && touch "$TEST/.done"; }
{ ls "$TEST"/det/*.png | sort | awk 'NR == FNR { calib[$1] = 1; next }
    { n = $0; sub(/.*\//, "", n); sub(/_[0-9]+\.png$/, "", n); if (!(n in calib)) print }' "$W/calib.photos" -
  echo "$PWD/build/photos/text.png"; echo "$PWD/build/photos/page.png"; } > "$W/eval"

DET=$M/ch_PP-OCRv4_det_infer.onnx
REC=$M/ch_PP-OCRv4_rec_infer.onnx
METHODS="max percentile:99.99 entropy mse"
# one calibration pass per model (its statistics), then every method from the statistics
for k in det rec; do
  m=$M/ch_PP-OCRv4_${k}_infer.onnx
  first=${METHODS%% *}
  "$PTQ" quantize "$m" --images "$W/$k.calib" --preset "paddleocr-$k" --method "$first" --stats "$W/$k.ptqstats" \
    --threads 2 -o "$W/$k.$first.qdq.onnx" >/dev/null 2>&1
  for meth in ${METHODS#* }; do
    "$PTQ" quantize "$m" --from-stats "$W/$k.ptqstats" --method "$meth" -o "$W/$k.${meth%%:*}.qdq.onnx" >/dev/null 2>&1
  done
done
t1=$(date +%s)

$OCR --det "$DET" --rec "$REC" --images "$W/eval" --out "$W/fp32.json" 2>/dev/null
cer() { $PY tests/oracle/ocr_pipeline.py cer --ref "$W/fp32.json" --hyp "$1" | awk '{printf "%.4f (%s lines identical)", $2, $11}'; }
floor=""
for seed in 1 2 3; do # the noise floor: FP32 rec on FP32 boxes moved by up to a pixel
  $PY tests/oracle/ocr_pipeline.py jitter --ref "$W/fp32.json" --out "$W/jitter$seed.boxes.json" --seed $seed
  $OCR --boxes-from "$W/jitter$seed.boxes.json" --rec "$REC" --images "$W/eval" --out "$W/jitter$seed.json" 2>/dev/null
  floor="$floor${floor:+, }$(cer "$W/jitter$seed.json")"
done
{
  echo "| method | CER det+rec INT8 | CER det INT8 only | CER rec INT8 only |"
  echo "|---|---:|---:|---:|"
  for meth in $METHODS; do
    n=${meth%%:*}
    $OCR --det "$W/det.$n.qdq.onnx" --rec "$REC" --images "$W/eval" --out "$W/det.$n.json" 2>/dev/null
    $OCR --boxes-from "$W/det.$n.json" --rec "$W/rec.$n.qdq.onnx" --images "$W/eval" --out "$W/both.$n.json" 2>/dev/null
    $OCR --boxes-from "$W/fp32.json" --rec "$W/rec.$n.qdq.onnx" --images "$W/eval" --out "$W/rec.$n.json" 2>/dev/null
    echo "| $meth | $(cer "$W/both.$n.json") | $(cer "$W/det.$n.json") | $(cer "$W/rec.$n.json") |"
  done
  echo "| FP32, every box corner moved by up to 1 px (3 seeds) | | | $floor |"
  echo
  echo "What rec tolerates in its weights alone (FP32 activations; tests/oracle/perturb_weights.py), rec on FP32 det's boxes:"
  echo
  echo "| rec's Conv/MatMul weights | CER rec only |"
  echo "|---|---:|"
  for p in "mantissa 8" "mantissa 7" "nearest 9" "nearest 8" "int8 0.5" "int8 1"; do
    f="$W/rec.noise.${p/ /}.onnx"
    $PY tests/oracle/perturb_weights.py "$REC" "$f" $p >/dev/null
    $OCR --boxes-from "$W/fp32.json" --rec "$f" --images "$W/eval" --out "$f.json" 2>/dev/null
    case $p in
      mantissa*) what="rounded to ${p#* } significant bits (8: bfloat16's precision)" ;;
      nearest*) what="per-channel symmetric ${p#* }-bit codes, nearest rounding" ;;
      *) what="uniform noise of ${p#* } int8 step per channel (1: nearest rounding's size)" ;;
    esac
    echo "| $what | $(cer "$f.json") |"
  done
} > "$W/table.md"
t2=$(date +%s)
nimg=$(wc -l < "$W/eval")
nlines=$($PY -c "import json,sys; print(sum(len(r['lines']) for r in json.load(open(sys.argv[1]))['images']))" "$W/fp32.json")
{
  echo "OCR character error rate of the INT8 pipelines against the FP32 pipeline (PaddleOCR det + rec,"
  echo "ONNX Runtime), $nimg evaluation images, $nlines lines read by FP32; calibration on $(wc -l < "$W/det.calib")"
  echo "det / $(wc -l < "$W/rec.calib") rec images. Quantization $((t1 - t0)) s, pipelines $((t2 - t1)) s."
  echo
  cat "$W/table.md"
} | tee "$OUT/ocr_cer.md"
