#!/usr/bin/env bash
# The zoo's CI tier (scripts/zoo.py --tier ci, exported here if not up to date; torchvision 0.14,
# no weights, BatchNorm statistics from the photos): mobilenet_v3_small (224), resnet18 (160),
# vit_tiny (a 4-layer ViT at 64x64: LayerNorm, MatMul attention, GELU, through the non-fused
# attention path), lraspp_mobilenet_v3_large (256) and the YOLOv8-like detector without NMS (320),
# at opset 13, through bench/zoo.sh's steps (8 calibration and 8 evaluation photos). Per model:
#   ptq run equals ONNX Runtime on a preprocessed photo (cosine >= 0.99999, every output);
#   ptq calibrate and ptq quantize succeed; the QDQ model passes onnx.checker and ONNX Runtime
#   runs it (output cosine against ORT's FP32 > 0.5, a sanity bound: these are untrained
#   weights); ptq compare reports the task's metric: top-1 agreement (classifiers), per-pixel
#   argmax agreement seq-top1:1 (lraspp), cosine (the raw YOLO head; ptq has no box metric).
# Also the YOLO-style detector with NMS (opset 13): ONNX Runtime runs it ([1, K, 6] rows),
# and ptq run equals ORT once ptq has its ops (until then: skipped, naming what ptq lacks).
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
T0=$(date +%s)
CI="mobilenet_v3_small resnet18 vit_tiny lraspp_mobilenet_v3_large yolov8n_like"

check "zoo.py exports the ci tier and the YOLO detector with NMS (opset 13)" \
  $PY "$ROOT/scripts/zoo.py" --models "$(echo $CI | tr ' ' ,),yolov8n_like_nms" --opset 13
BUILD=$BUILD PTQ=$PTQ "$ROOT/bench/zoo.sh" --tier ci --opset 13 --limit 8 --eval-limit 8 --out "$TMP" > "$TMP/table.txt" 2> "$TMP/bench.err"
cat "$TMP/table.txt" | sed -n '1,/^$/p' | sed '/^$/d'

field() { awk -F'\t' -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "$1"; }
step() { # name model key log: the row's field starts with ok
  local R=$TMP/$2.op13/result v
  v=$(field "$R" "$3")
  case $v in ok*) echo "$v" ;; *) echo "${v:-missing}"; [ -f "$TMP/$2.op13/$4" ] && tail -n 5 "$TMP/$2.op13/$4"; return 1 ;; esac
}
for n in $CI; do
  check "$n: exported" step x "$n" export none
  check "$n: ptq run == ONNX Runtime (cosine >= 0.99999)" step x "$n" run parity.log
  check "$n: ptq calibrate" step x "$n" calibrate calibrate.log
  check "$n: ptq quantize" step x "$n" quantize quantize.log
  check "$n: onnx.checker accepts the QDQ model" step x "$n" checker checker.log
  check "$n: ONNX Runtime runs the QDQ model (cosine to FP32 > 0.5)" bash -c "
    v=\$(awk -F'\t' '\$1 == \"ort_qdq\" { print \$2 }' '$TMP/$n.op13/result'); echo \"\$v\"
    case \$v in 'ok cos '*) awk -v c=\"\${v#ok cos }\" 'BEGIN { exit !(c > 0.5) }' ;; *) tail -n 5 '$TMP/$n.op13/ortq.log'; false ;; esac"
  check "$n: ptq compare reports its metric" bash -c "
    v=\$(awk -F'\t' '\$1 == \"compare\" { print \$2 }' '$TMP/$n.op13/result'); echo \"\$v\"
    case \$v in top1\ [01].*|seq-top1:1\ [01].*|box-f1\ [01].*|cosine\ [0-9-]*) ;; *) tail -n 5 '$TMP/$n.op13/compare.log'; false ;; esac"
done

# YOLO with NMS: ORT runs it; ptq equals ORT once it has NonZero, NonMaxSuppression, ...
N=$ROOT/build/zoo/yolov8n_like_nms.op13.onnx D=$TMP/nms
mkdir -p "$D"
"$PTQ" preprocess --images "$TMP/eval.list" --preset yolo-letterbox-640 --size 320x320 --limit 1 --dump "$D/in.npy" > /dev/null
check "yolov8n_like_nms: ONNX Runtime runs it, [1, K, 6] detections" bash -c "
  node '$ROOT/tests/oracle/ort.js' '$N' --input images='$D/in.npy' --out-dir '$D/ort' &&
  $PY -c \"import numpy as np; d = np.load('$D/ort/detections.npy'); assert d.ndim == 3 and d.shape[0] == 1 and d.shape[2] == 6 and d.shape[1] > 0, d.shape; print(d.shape[1], 'detections')\""
lacks=$("$PTQ" inspect "$N" 2>&1 | sed -nE 's/^unsupported: (.*)/\1/p')
if [ -n "$lacks" ] && [ "$lacks" != none ]; then
  skip "yolov8n_like_nms: ptq run == ONNX Runtime" "ptq lacks $lacks"
else
  check "yolov8n_like_nms: ptq run == ONNX Runtime" bash -c "
    '$PTQ' run '$N' --input images='$D/in.npy' --output-dir '$D/ptq' --threads 2 &&
    $PY '$ROOT/tests/oracle/compare.py' '$D/ptq/detections.npy' '$D/ort/detections.npy' --cos 0.99999"
  # compare matches the QDQ model's detections to FP32's ([1, K, 6], K data-dependent): box-f1
  check "yolov8n_like_nms: ptq compare reports box-f1 on its [1, K, 6] detections" bash -c "
    '$PTQ' compare '$N' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset yolo-letterbox-640 --size 320x320 \
        --limit 4 --eval-limit 4 --methods max --json '$D/cmp.json' >/dev/null 2>&1 &&
    $PY -c \"import json; m = json.load(open('$D/cmp.json'))['methods'][0]; assert 0 <= m['box_f1'] <= 1, m; print('box-f1', m['box_f1'])\""
fi
echo "zoo.sh: $(( $(date +%s) - T0 )) s"
finish
