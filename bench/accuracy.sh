#!/usr/bin/env bash
# make bench (issue 13): what each accuracy algorithm contributes on the three PaddleOCR models.
# For each combination (calibration method, output-aware scales, AdaRound, bias correction,
# activation equalization),
# `ptq quantize` writes det, rec and cls QDQ models from the calibration half of the rendered
# text set (bench/ocr_cer.sh's split); on the held-out half this prints
#   - the model metrics of the QDQ model against FP32 (ptq runs both on the same preprocessed
#     evaluation tensors; numpy computes them): cosine, seq-top1 (rec), mask-iou:0.3 (det),
#     top1 agreement (cls);
#   - the CER of PaddleOCR's pipeline (tests/oracle/ocr_pipeline.py, ONNX Runtime) with det and
#     rec INT8 against the FP32 pipeline, and with rec alone INT8;
#   - the quantize time of det and rec.
# Written to build/bench/accuracy.md. ACC_CONFIGS="name|flags;..." replaces the combinations.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
W=$OUT/accuracy
M=build/models
PY=/usr/bin/python3
OCR="$PY tests/oracle/ocr_pipeline.py --keys $M/ppocr_keys_v1.txt"
mkdir -p "$W"
# the split and the FP32 reading of bench/ocr_cer.sh
[ -f "$OUT/ocr/fp32.json" ] || BUILD=$BUILD bench/ocr_cer.sh >/dev/null
cp "$OUT/ocr/det.calib" "$OUT/ocr/rec.calib" "$OUT/ocr/eval" "$W/"
TEXT=$PWD/build/textphotos
for k in rec cls; do # crops of the held-out photos
  ls "$TEXT/$k"/*.png | sort | grep -v -F -f <(sed 's/\.png$/_/; s/.*\///' "$W/det.calib") > "$W/$k.eval" || true
done
ls "$TEXT/cls"/*.png | sort | grep -F -f <(sed 's/\.png$/_/; s/.*\///' "$W/det.calib") > "$W/cls.calib" || true
awk -F'\t' '$1 == "E" {print $2}' "$OUT/ocr/det.split" > "$W/det.eval"

declare -A MODEL=([det]=ch_PP-OCRv4_det_infer [rec]=ch_PP-OCRv4_rec_infer [cls]=ch_ppocr_mobile_v2.0_cls_infer)
for k in det rec cls; do
  [ -f "$W/$k.eval.npy" ] || "$PTQ" preprocess --images "$W/$k.eval" --preset "paddleocr-$k" --dump "$W/$k.eval.npy" >/dev/null 2>&1
  [ -f "$W/$k.fp32.npy" ] || "$PTQ" run "$M/${MODEL[$k]}.onnx" --input "$W/$k.eval.npy" --output "$W/$k.fp32.npy" --threads 2 >/dev/null
done

# "name|flags[|det preset[|rec preset[|det's own flags]]]": det calibrates at each image's own size
# (paddleocr-det-dynamic: the longer side at most 960, sides multiples of 32, as the pipeline runs it)
# unless a preset is given; rec at paddleocr-rec unless a second preset is given. det.val: renders 2
# and 3 of the calibration photos (bench/ocr_cer.sh's build/textphotos8), no held-out image, where
# det's exclusion search measures mask-iou.
ls "$PWD"/build/textphotos8/det/*_[23].png 2>/dev/null | awk 'NR == FNR { calib[$1] = 1; next }
  { n = $0; sub(/.*\//, "", n); sub(/_[0-9]+\.png$/, "", n); if (n in calib) print }' "$OUT/ocr/calib.photos" - > "$W/det.val" || true
CONFIGS=${ACC_CONFIGS:-"mse, det calibrated at 640x640|--method mse|paddleocr-det;mse|--method mse;mse + bias correction|--method mse --bias-correction;output-mse|--method output-mse;mse + AdaRound|--method mse --adaround;mse + AdaRound + bias correction|--method mse --adaround --bias-correction;output-mse + AdaRound + bias correction|--method output-mse --adaround --bias-correction;output-mse + AdaRound, rec at the lines' widths|--method output-mse --adaround|paddleocr-det-dynamic|paddleocr-rec-dynamic;mse + equalization|--method mse --equalize;mse, rec at the lines' widths|--method mse|paddleocr-det-dynamic|paddleocr-rec-dynamic;mse + equalization, rec at the lines' widths|--method mse --equalize|paddleocr-det-dynamic|paddleocr-rec-dynamic;output-mse + AdaRound + equalization, rec at the lines' widths|--method output-mse --adaround --equalize|paddleocr-det-dynamic|paddleocr-rec-dynamic;the same + det's layers in float by mask-iou:0.3 0.97 on det.val|--method output-mse --adaround --equalize|paddleocr-det-dynamic|paddleocr-rec-dynamic|--auto-exclude --eval-images $W/det.val --metric mask-iou:0.3 --target 0.97"}
metrics() { # KIND QDQ_OUT.npy
  $PY - "$1" "$W/$1.fp32.npy" "$2" <<'PY'
import sys, numpy as np
k, a, b = sys.argv[1], np.load(sys.argv[2]).astype(np.float64), np.load(sys.argv[3]).astype(np.float64)
cos = (a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum())
if k == "rec": extra = (a.argmax(-1) == b.argmax(-1)).mean()
elif k == "cls": extra = (a.argmax(-1) == b.argmax(-1)).mean()
else:
    A, B = a > 0.3, b > 0.3
    extra = (A & B).sum() / max((A | B).sum(), 1)
print(f"{cos:.4f} | {extra:.4f}")
PY
}
{
  echo "| configuration | det cosine | det mask-iou:0.3 | rec cosine | rec seq-top1 | cls cosine | cls top1 | CER det+rec | CER rec only | det / rec quantize s |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  IFS=';' read -ra CS <<< "$CONFIGS"
  for c in "${CS[@]}"; do
    name=${c%%|*}; flags=${c#*|}; detp=paddleocr-det-dynamic recp=paddleocr-rec
    case $flags in *"|"*) detp=${flags#*|}; flags=${flags%%|*} ;; esac
    case $detp in *"|"*) recp=${detp#*|}; detp=${detp%%|*} ;; esac
    detx=""; case $recp in *"|"*) detx=${recp#*|}; recp=${recp%%|*} ;; esac
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    row="| $name"
    declare -A SECS=()
    for k in det rec cls; do
      calib=$W/$k.calib; [ $k = cls ] || calib=$OUT/ocr/$k.calib
      preset=paddleocr-$k; [ $k = det ] && preset=$detp; [ $k = rec ] && preset=$recp
      own=""; [ $k = det ] && own=$detx
      s0=$(date +%s.%N)
      # shellcheck disable=SC2086
      "$PTQ" quantize "$M/${MODEL[$k]}.onnx" --images "$calib" --preset "$preset" $flags $own --threads 2 \
        -o "$W/$k.$tag.qdq.onnx" > "$W/$k.$tag.log" 2>&1
      SECS[$k]=$(echo "$(date +%s.%N) - $s0" | bc)
      "$PTQ" run "$W/$k.$tag.qdq.onnx" --input "$W/$k.eval.npy" --output "$W/$k.$tag.out.npy" --threads 2 >/dev/null
      row="$row | $(metrics $k "$W/$k.$tag.out.npy")"
    done
    $OCR --det "$W/det.$tag.qdq.onnx" --rec "$W/rec.$tag.qdq.onnx" --images "$W/eval" --out "$W/both.$tag.json" 2>/dev/null
    $OCR --boxes-from "$OUT/ocr/fp32.json" --rec "$W/rec.$tag.qdq.onnx" --images "$W/eval" --out "$W/rec.$tag.json" 2>/dev/null
    cer() { $PY tests/oracle/ocr_pipeline.py cer --ref "$OUT/ocr/fp32.json" --hyp "$1" | awk '{printf "%.4f", $2}'; }
    printf '%s | %s | %s | %.0f / %.0f |\n' "$row" "$(cer "$W/both.$tag.json")" "$(cer "$W/rec.$tag.json")" "${SECS[det]}" "${SECS[rec]}"
  done
  # ONNX Runtime quantize_static's models, when bench/ort_quantize_static.py made them (it needs
  # Python onnxruntime, which Debian lacks): the same pipeline, CER only
  for meth in minmax percentile entropy; do
    O=$OUT/ortq
    [ -f "$O/det.ort_$meth.onnx" ] && [ -f "$O/rec.ort_$meth.onnx" ] || continue
    $OCR --det "$O/det.ort_$meth.onnx" --rec "$O/rec.ort_$meth.onnx" --images "$W/eval" --out "$O/both.$meth.json" 2>/dev/null
    $OCR --boxes-from "$OUT/ocr/fp32.json" --rec "$O/rec.ort_$meth.onnx" --images "$W/eval" --out "$O/rec.$meth.json" 2>/dev/null
    c1=$($PY tests/oracle/ocr_pipeline.py cer --ref "$OUT/ocr/fp32.json" --hyp "$O/both.$meth.json" | awk '{printf "%.4f", $2}')
    c2=$($PY tests/oracle/ocr_pipeline.py cer --ref "$OUT/ocr/fp32.json" --hyp "$O/rec.$meth.json" | awk '{printf "%.4f", $2}')
    echo "| ONNX Runtime quantize_static, $meth | | | | | | | $c1 | $c2 | |"
  done
} > "$W/table.md"
{
  echo "Accuracy algorithms on PP-OCRv4 det and rec and the mobile cls (rendered text; calibration on"
  echo "$(wc -l < "$OUT/ocr/det.calib") det / $(wc -l < "$OUT/ocr/rec.calib") rec / $(wc -l < "$W/cls.calib") cls images, evaluation on"
  echo "$(wc -l < "$W/det.eval") det / $(wc -l < "$W/rec.eval") rec / $(wc -l < "$W/cls.eval") cls images of other photos;"
  echo "CER of the OCR pipeline against FP32 on $(wc -l < "$W/eval") images). 2 threads."
  echo
  cat "$W/table.md"
} | tee "$OUT/accuracy.md"
