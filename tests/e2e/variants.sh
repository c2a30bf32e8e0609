#!/usr/bin/env bash
# Models as users ship them (scripts/variants.py) derived from four zoo models at opset 13
# (resnet18 160x160, mobilenet_v3_large 224, lraspp_mobilenet_v3_large 256, yolov8n_like 320;
# exported by scripts/zoo.py where missing), each quantized as a user types it, through
# bench/variants.sh's steps (8 calibration photos, 4 evaluation photos):
#   scripts/variants.py --verify: every variant of yolov8n_like passes onnx.checker and ONNX Runtime
#     computes what the original computes (cosine >= 0.999 float16, else max |diff| <= 1e-4 x range)
#   per row: ptq quantize VARIANT --images DIR --preset P -o OUT exits 0 (P and its overrides from the
#     model's .json, no --size where the model's input fixes it); every Conv/Gemm/MatMul with a
#     constant weight reads an int8 initializer through a DequantizeLinear; onnx.checker passes on the
#     QDQ model; its graph inputs and outputs keep the variant's names, types and shapes; ONNX Runtime's
#     QDQ output has cosine >= 0.99 (segmenter 0.97) to its output of the variant, on the photos as
#     ptq preprocess dumps them for the original, converted for the variant (where ptq's QDQ of the
#     original itself stays below that, as for the untrained mobilenet_v3 models: >= its cosine - 0.01)
# Rows: every variant of yolov8n_like; fp16-weights, fp16, uint8-nhwc and gray of the three others;
# dynamic-hw and opset11 of mobilenet_v3_large and resnet18.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
ALL="fp16-weights fp16 uint8-nhwc gray dynamic-hw opset11 ultralytics-meta"
ROWS=""
for v in $ALL; do ROWS="$ROWS,yolov8n_like:$v"; done
for m in resnet18 mobilenet_v3_large lraspp_mobilenet_v3_large; do
  for v in fp16-weights fp16 uint8-nhwc gray; do ROWS="$ROWS,$m:$v"; done
done
ROWS="${ROWS#,},mobilenet_v3_large:dynamic-hw,mobilenet_v3_large:opset11,resnet18:dynamic-hw,resnet18:opset11"

check "zoo.py exports resnet18, mobilenet_v3_large, lraspp_mobilenet_v3_large, yolov8n_like (opset 13)" \
  $PY "$ROOT/scripts/zoo.py" --models resnet18,mobilenet_v3_large,lraspp_mobilenet_v3_large,yolov8n_like --opset 13

Y=$ROOT/build/zoo/yolov8n_like.op13.onnx
for v in $ALL; do
  check "variants.py --variant $v --verify (yolov8n_like): checker, ORT computes the original's output" \
    $PY "$ROOT/scripts/variants.py" "$Y" "$TMP/yolov8n_like.$v.verify.onnx" --variant "$v" --verify
done
check "variants.py refuses gray on a 1-channel model, one line naming the input" \
  refused "input 'images' has 1 channels, expected 3" \
  $PY "$ROOT/scripts/variants.py" "$TMP/yolov8n_like.gray.verify.onnx" "$TMP/gray2.onnx" --variant gray

BUILD=$BUILD PTQ=$PTQ "$ROOT/bench/variants.sh" --rows "$ROWS" --limit 8 --eval-limit 4 --no-verify --out "$TMP/bench" \
  > "$TMP/table.txt" 2> "$TMP/bench.err"
sed -n '1,/^$/p' "$TMP/table.txt" | sed '/^$/d'

field() { awk -F'\t' -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "$1" 2>/dev/null; }
quantized() { # R: ptq quantize exited 0
  local q; q=$(field "$1" quantize); echo "${q:-$(field "$1" derive)}"; [ "$q" = ok ]
}
weights() { local w; w=$(field "$1" weights); echo "${w:--}"; [ -n "$w" ] && [ "${w%/*}" = "${w#*/}" ] && [ "${w#*/}" != 0 ]; }
is_ok() { local v; v=$(field "$1" "$2"); echo "${v:--}"; [ "$v" = ok ]; }
cosine() {
  local c t; c=$(field "$1" cosine); t=$(field "$1" threshold); echo "cosine ${c:--} (needs >= ${t:-?})"
  awk -v c="$c" -v t="$t" 'BEGIN { exit !(c ~ /^[0-9.]+$/ && t ~ /^[0-9.]+$/ && c + 0 >= t + 0) }'
}
for r in ${ROWS//,/ }; do
  m=${r%%:*} v=${r#*:} R=$TMP/bench/${r%%:*}/${r#*:}/result
  check "$m $v: ptq quantize exits 0" quantized "$R"
  if [ "$(field "$R" quantize)" != ok ]; then # the checks of its QDQ model wait for it (the row has failed)
    skip "$m $v: weights, checker, interface, cosine" "no QDQ model"
    continue
  fi
  check "$m $v: every constant weight int8 (n/N)" weights "$R"
  check "$m $v: onnx.checker accepts the QDQ model" is_ok "$R" checker
  check "$m $v: the QDQ model keeps the graph inputs and outputs" is_ok "$R" interface
  check "$m $v: ONNX Runtime on the QDQ model vs the variant" cosine "$R"
done
rm -f "$TMP"/bench/*/*/q.onnx # the QDQ models (the variants stay: derived again only when older than the script)
finish
