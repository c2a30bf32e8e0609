#!/usr/bin/env bash
# make bench (issue 11): how far ONNX Runtime's output moves from last-bit float changes
# alone, beside how far ptq's is from ORT's. For each PaddleOCR model and method, the QDQ
# model `ptq quantize` writes (4 photos, as tests/e2e/quantize_models.sh) runs in ORT
# (--opt disable: the QDQ graph as written), in ORT again with every Conv bias moved by one
# ulp (tests/oracle/perturb_bias.py: a change of the size another summation order makes),
# and in ptq. Printed, not asserted: the cosines ORT vs ORT+-1ulp and ptq vs ORT. Where the
# first is as low as the second, ptq's distance from ORT is what any executor that sums in
# another order than ORT's kernels would show. Written to build/bench/ort_sensitivity.md.
#   METHODS="max entropy" (default) picks the methods.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
TMP=$OUT/ort_sensitivity
PY=/usr/bin/python3
ORT="node tests/oracle/ort.js"
METHODS=${METHODS:-max entropy}
export OMP_WAIT_POLICY=passive
mkdir -p "$TMP"
cos() { $PY tests/oracle/compare.py "$1" "$2" | sed 's/^cosine \([0-9.-]*\),.*/\1/'; }

{
  echo "| model | method | eval photos | ORT vs ORT, Conv biases +-1 ulp | ptq vs ORT |"
  echo "|---|---|---:|---:|---:|"
  for spec in "det:ch_PP-OCRv4_det_infer:sigmoid_0.tmp_0:text.png page.png" \
              "cls:ch_ppocr_mobile_v2.0_cls_infer:softmax_0.tmp_0:text.png page.png coins.png camera.png chelsea.png rocket.jpg coffee.png horse.png" \
              "rec:ch_PP-OCRv4_rec_infer:softmax_11.tmp_0:text.png page.png bw_text.png logo.png"; do
    IFS=: read -r key model out photos <<<"$spec"
    printf "$PWD/build/photos/%s\n" $photos > "$TMP/$key.list"
    $PTQ preprocess --images "$TMP/$key.list" --preset paddleocr-$key --dump "$TMP/$key.eval.npy" 2>/dev/null
    for meth in $METHODS; do
      t=$key.${meth/:/}
      $PTQ quantize "build/models/$model.onnx" --images build/photos --preset paddleocr-$key --limit 4 \
        --method "$meth" -o "$TMP/$t.onnx" 2>/dev/null
      $PY tests/oracle/perturb_bias.py "$TMP/$t.onnx" "$TMP/$t.ulp.onnx" >/dev/null
      $ORT "$TMP/$t.onnx" --input x="$TMP/$key.eval.npy" --out-dir "$TMP/$t.ort" --opt disable --threads 1 >/dev/null
      $ORT "$TMP/$t.ulp.onnx" --input x="$TMP/$key.eval.npy" --out-dir "$TMP/$t.ulp.ort" --opt disable --threads 1 >/dev/null
      $PTQ run "$TMP/$t.onnx" --input "$TMP/$key.eval.npy" --output-dir "$TMP/$t.ptq" >/dev/null
      echo "| $key | $meth | $(wc -l < "$TMP/$key.list") | $(cos "$TMP/$t.ulp.ort/$out.npy" "$TMP/$t.ort/$out.npy")" \
           "| $(cos "$TMP/$t.ptq/$out.npy" "$TMP/$t.ort/$out.npy") |"
    done
  done
} | tee "$OUT/ort_sensitivity.md"
