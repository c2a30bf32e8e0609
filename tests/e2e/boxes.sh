#!/usr/bin/env bash
# compare's box-f1 on detectors: a YOLOv8-style raw head ([N, 4 + classes, anchors], anchors the
# cells of strides 8, 16, 32) and final boxes with scores ([K, 4] + [K], batchless, as torchvision's
# detectors give). Asserted: compare recognises both layouts and its box_f1 (float part in FP32) EQUALS a numpy port of
# the metric (decode, per-class NMS, one-to-one matching; tests/oracle/boxes.py) applied to ptq run's
# outputs of the FP32 model and of the model `ptq quantize` writes with the same method.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
ls "$ROOT"/build/photos/* | grep -v truncated | sort > "$TMP/all.list"
awk 'NR % 2 == 1' "$TMP/all.list" | head -n 8 > "$TMP/calib.list"
awk 'NR % 2 == 0' "$TMP/all.list" | head -n 6 > "$TMP/eval.list"
PRE=(--preset imagenet-torchvision --size 64x64)

$PY - "$TMP" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(11)
def W(*s, k=0.4): return rng.standard_normal(s).astype(np.float32) * k
# YOLO-style: three strided branches, each a 1x1 head of 4 + 3 rows, flattened and concatenated
nc = 3; rows = 4 + nc
inits, nodes = [], []
for s in (8, 16, 32):
    inits += [nh.from_array(W(8, 3, s, s, k=0.05), f'w{s}'), nh.from_array(W(rows, 8, 1, 1, k=0.8), f'h{s}')]
    nodes += [h.make_node('Conv', ['x', f'w{s}'], [f'c{s}'], name=f'conv{s}', strides=[s, s]),
              h.make_node('Relu', [f'c{s}'], [f'r{s}'], name=f'relu{s}'),
              h.make_node('Conv', [f'r{s}', f'h{s}'], [f'o{s}'], name=f'head{s}'),
              h.make_node('Reshape', [f'o{s}', 'shape'], [f'f{s}'], name=f'flat{s}')]
scale = np.array([64, 64, 32, 32] + [1] * nc, np.float32).reshape(1, rows, 1)
inits += [nh.from_array(np.array([0, rows, -1], np.int64), 'shape'), nh.from_array(scale, 'scale')]
nodes += [h.make_node('Concat', ['f8', 'f16', 'f32'], ['cat'], name='cat', axis=2),
          h.make_node('Sigmoid', ['cat'], ['sig'], name='sig'),
          h.make_node('Mul', ['sig', 'scale'], ['y'], name='decode')]
g = h.make_graph(nodes, 'yolo', [h.make_tensor_value_info('x', T.FLOAT, ['N', 3, 64, 64])],
                 [h.make_tensor_value_info('y', T.FLOAT, ['N', rows, 84])], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), d + '/yolo.onnx')
# final boxes, batchless: 16 boxes x1 y1 x2 y2 and their scores from a conv stem
K = 16
inits = [nh.from_array(np.array([0], np.int64), 'axes'), nh.from_array(W(8, 3, 16, 16, k=0.05), 'ws'),
         nh.from_array(W(5, 8, 1, 1, k=0.8), 'wh'), nh.from_array(np.array([5, K], np.int64), 'shape'),
         nh.from_array(np.array([4, 1], np.int64), 'split'),
         nh.from_array(np.array([[0], [0], [16], [16]], np.float32), 'lo'),
         nh.from_array(np.array([[48], [48], [48], [48]], np.float32), 'span')]
nodes = [h.make_node('Unsqueeze', ['image', 'axes'], ['u'], name='unsq'),
         h.make_node('Conv', ['u', 'ws'], ['c'], name='stem', strides=[16, 16]),
         h.make_node('Relu', ['c'], ['r'], name='relu'),
         h.make_node('Conv', ['r', 'wh'], ['o'], name='head'),
         h.make_node('Reshape', ['o', 'shape'], ['f'], name='flat'),
         h.make_node('Sigmoid', ['f'], ['s'], name='sig'),
         h.make_node('Split', ['s', 'split'], ['b4', 'sc'], name='split', axis=0),
         h.make_node('Mul', ['b4', 'span'], ['bm'], name='span_mul'),
         h.make_node('Add', ['bm', 'lo'], ['ba'], name='lo_add'),
         h.make_node('Transpose', ['ba'], ['boxes'], name='to_k4', perm=[1, 0]),
         h.make_node('Squeeze', ['sc', 'axes'], ['scores'], name='squeeze')]
g = h.make_graph(nodes, 'boxes', [h.make_tensor_value_info('image', T.FLOAT, [3, 64, 64])],
                 [h.make_tensor_value_info('boxes', T.FLOAT, [K, 4]), h.make_tensor_value_info('scores', T.FLOAT, [K])], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), d + '/final.onnx')
PYEOF

# the evaluation images as ptq compare sees them, one .npy per image
"$PTQ" preprocess --images "$TMP/eval.list" "${PRE[@]}" --dump "$TMP/eval.npy" >/dev/null 2>&1
$PY -c "
import numpy as np; x = np.load('$TMP/eval.npy')
for i in range(x.shape[0]): np.save('$TMP/img%d.npy' % i, x[i:i + 1]); np.save('$TMP/chw%d.npy' % i, x[i])
print(x.shape[0])" > "$TMP/n_eval"
N=$(cat "$TMP/n_eval")

for key in yolo final; do
  m=$TMP/$key.onnx
  check "compare $key: box-f1 reported for every method" bash -c "
    '$PTQ' compare '$m' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' ${PRE[*]} --methods max,mse --float fp32 \
        --json '$TMP/$key.json' > '$TMP/$key.out' 2>&1 &&
    grep -q 'box-f1' '$TMP/$key.out' &&
    $PY -c \"import json; r = json.load(open('$TMP/$key.json'))
assert all(m['box_f1'] is not None for m in r['methods']), r['methods']
print(', '.join('%s %.4f' % (m['method'], m['box_f1']) for m in r['methods']))\""
  for method in max mse; do
    "$PTQ" quantize "$m" --images "$TMP/calib.list" "${PRE[@]}" --method $method -o "$TMP/$key.$method.onnx" >/dev/null 2>&1
    in=img; [ $key = final ] && in=chw
    for i in $(seq 0 $((N - 1))); do
      "$PTQ" run "$m" --input "$TMP/$in$i.npy" --output-dir "$TMP/$key.fp.$i" >/dev/null
      "$PTQ" run "$TMP/$key.$method.onnx" --input "$TMP/$in$i.npy" --output-dir "$TMP/$key.$method.$i" >/dev/null
    done
    check "compare $key $method: box_f1 equals the numpy port on ptq run's outputs" \
      $PY "$ROOT/tests/oracle/boxes.py" "$TMP/$key.json" "$method" "$key" "$N" "$TMP/$key.fp" "$TMP/$key.$method"
  done
done
check "compare --metric box-f1 picks the best method by it" bash -c "
  '$PTQ' compare '$TMP/yolo.onnx' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' ${PRE[*]} --methods max,mse \
      --metric box-f1 2>/dev/null | grep -E '^best: .* \(by box-f1, then cosine\)'"
check "compare --metric box-f1 on a classifier: refused, naming what applies" bash -c "
  err=\$('$PTQ' compare '$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx' --images '$TMP/calib.list' \
      --eval-images '$TMP/eval.list' --preset paddleocr-cls --methods max --metric box-f1 2>&1 >/dev/null) && exit 1
  echo \"\$err\" | grep -F -- '--metric box-f1 does not apply to its output 0 (a classifier: top1)'"
finish
