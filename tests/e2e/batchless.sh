#!/usr/bin/env bash
# Models whose input has no batch dim ([3, H, W], as torchvision's detectors export) and models
# that fix their batch: every command feeds them what they take, without --batch.
#  - a [3, H, W] classifier: run --images, calibrate, quantize, compare work one image at a time;
#    its calibration cache equals (byte for byte) the cache of the same network taking [N, 3, H, W]
#    at the default batch of 8; its QDQ model passes onnx.checker and runs in ONNX Runtime;
#  - a [1, 3, H, W] model quantizes without --batch (the model's batch of 1 is used);
#  - a --batch that contradicts the model is refused in one line naming the input.
. "$(dirname "$0")/lib.sh"
PHOTOS=$ROOT/build/photos
PRE=(--preset imagenet-torchvision --size 32x32 --limit 12)

$PY - "$TMP" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng = np.random.default_rng(3)
def model(path, in_dims, first):
    inits = [nh.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, 'w1'),
             nh.from_array(rng.standard_normal(8).astype(np.float32) * 0.1, 'b1'),
             nh.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2, 'w2'),
             nh.from_array(rng.standard_normal((10, 16)).astype(np.float32) * 0.3, 'wf'),
             nh.from_array(np.zeros(10, np.float32), 'bf'), nh.from_array(np.array([0], np.int64), 'axes')]
    nodes = [first,
             h.make_node('Conv', ['u', 'w1', 'b1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
             h.make_node('Relu', ['c1'], ['r1'], name='relu1'),
             h.make_node('Conv', ['r1', 'w2'], ['c2'], name='conv2', pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node('Relu', ['c2'], ['r2'], name='relu2'),
             h.make_node('GlobalAveragePool', ['r2'], ['p'], name='gap'),
             h.make_node('Flatten', ['p'], ['f'], name='flat'),
             h.make_node('Gemm', ['f', 'wf', 'bf'], ['logits'], name='fc', transB=1)]
    g = h.make_graph(nodes, 'g', [h.make_tensor_value_info('image', T.FLOAT, in_dims)],
                     [h.make_tensor_value_info('logits', T.FLOAT, [1, 10])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
d = sys.argv[1]
# rng draws the same weights for each model: reseed before each
rng = np.random.default_rng(3); model(d + '/chw.onnx', [3, 32, 32], onnx.helper.make_node('Unsqueeze', ['image', 'axes'], ['u'], name='unsq'))
rng = np.random.default_rng(3); model(d + '/nchw.onnx', ['N', 3, 32, 32], onnx.helper.make_node('Identity', ['image'], ['u'], name='unsq'))
rng = np.random.default_rng(3); model(d + '/n1.onnx', [1, 3, 32, 32], onnx.helper.make_node('Identity', ['image'], ['u'], name='unsq'))
np.save(d + '/one.npy', np.random.default_rng(5).uniform(-2, 2, (3, 32, 32)).astype(np.float32))
EOF

check "run --images: a [3, H, W] model runs every image, one at a time" bash -c "
  '$PTQ' run '$TMP/chw.onnx' --images '$PHOTOS' ${PRE[*]} 2>&1 | grep -E '^ptq run: 12 images'"
check "calibrate: [3, H, W] at batch 1 gives the cache of [N, 3, H, W] at batch 8, byte for byte" bash -c "
  '$PTQ' calibrate '$TMP/chw.onnx' --images '$PHOTOS' ${PRE[*]} --tensors '*' --cache '$TMP/chw.cache' 2>/dev/null &&
  '$PTQ' calibrate '$TMP/nchw.onnx' --images '$PHOTOS' ${PRE[*]} --tensors '*' --cache '$TMP/nchw.cache' 2>/dev/null &&
  cmp '$TMP/chw.cache' '$TMP/nchw.cache' && wc -l < '$TMP/chw.cache'"
check "quantize: a [3, H, W] model, the QDQ model passes onnx.checker" bash -c "
  '$PTQ' quantize '$TMP/chw.onnx' --images '$PHOTOS' ${PRE[*]} -o '$TMP/chw.qdq.onnx' 2>/dev/null &&
  $PY -c \"import onnx; m = onnx.load('$TMP/chw.qdq.onnx'); onnx.checker.check_model(m);
n = sum(x.op_type == 'QuantizeLinear' for x in m.graph.node); assert n >= 4, n; print(n, 'QuantizeLinear')\""
# ONNX Runtime with session.disable_quant_qdq=1: Q/DQ in float, the same on every CPU (its int8
# kernels saturate u8s8 pair sums on CPUs without VNNI: tests/e2e/placement_transformer.sh)
check "quantize: ONNX Runtime runs the [3, H, W] QDQ model, close to ptq's run of it" bash -c "
  node '$ROOT/tests/oracle/ort.js' '$TMP/chw.qdq.onnx' --input image='$TMP/one.npy' --config session.disable_quant_qdq=1 --out-dir '$TMP/ort' >/dev/null &&
  '$PTQ' run '$TMP/chw.qdq.onnx' --input '$TMP/one.npy' --output-dir '$TMP/ptq' >/dev/null &&
  $PY '$ROOT/tests/oracle/compare.py' '$TMP/ptq/logits.npy' '$TMP/ort/logits.npy' --cos 0.999"
check "compare: a [3, H, W] classifier gets every method's top-1 agreement" bash -c "
  '$PTQ' compare '$TMP/chw.onnx' --images '$PHOTOS' --eval-images '$PHOTOS' ${PRE[*]} --eval-limit 6 \
      --json '$TMP/cmp.json' >/dev/null 2>&1 &&
  $PY -c \"import json; r = json.load(open('$TMP/cmp.json')); m = r['methods']; assert len(m) >= 4, m
assert all(x['top1_agree'] is not None for x in m), m; print(len(m), 'methods with top-1 agreement')\""
check "quantize: a model that fixes its batch to 1 needs no --batch" bash -c "
  '$PTQ' quantize '$TMP/n1.onnx' --images '$PHOTOS' ${PRE[*]} -o '$TMP/n1.qdq.onnx' 2>&1 | tail -n 1 | grep -F 'wrote'"
check "quantize --batch 4 on a [3, H, W] model: refused, naming the input" \
  refused "takes one image at a time (image has no batch dim)" \
  "$PTQ" quantize "$TMP/chw.onnx" --images "$PHOTOS" "${PRE[@]}" --batch 4 -o "$TMP/x.onnx"
check "calibrate --batch 4 on a model fixing its batch to 1: refused, naming the input" \
  refused "fixes the batch of image to 1" \
  "$PTQ" calibrate "$TMP/n1.onnx" --images "$PHOTOS" "${PRE[@]}" --batch 4 --cache "$TMP/x.cache"
check "nothing half-written after the refusals" bash -c "! ls '$TMP'/x.* 2>/dev/null"
finish
