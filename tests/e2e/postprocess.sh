#!/usr/bin/env bash
# Calibration runs only what the quantized tensors need: post-processing after the last
# quantized layer (here an op ptq does not run, in a custom domain) is left out of the
# calibration pass, so calibrate and quantize work and say which outputs ptq run cannot produce;
# ptq run refuses the model naming the op.
. "$(dirname "$0")/lib.sh"
PHOTOS=$ROOT/build/photos
PRE=(--preset imagenet-torchvision --size 32x32 --limit 8)

$PY - "$TMP" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng = np.random.default_rng(3)
def model(path, post):
    inits = [nh.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, 'w1'),
             nh.from_array(rng.standard_normal((10, 8)).astype(np.float32) * 0.3, 'wf')]
    nodes = [h.make_node('Conv', ['x', 'w1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
             h.make_node('Relu', ['c1'], ['r1'], name='relu1'),
             h.make_node('GlobalAveragePool', ['r1'], ['p'], name='gap'),
             h.make_node('Flatten', ['p'], ['f'], name='flat'),
             h.make_node('Gemm', ['f', 'wf'], ['logits'], name='fc', transB=1)] + post
    outs = [h.make_tensor_value_info('logits', T.FLOAT, ['N', 10])]
    if post: outs.append(h.make_tensor_value_info('decoded', T.FLOAT, None))
    g = h.make_graph(nodes, 'g', [h.make_tensor_value_info('x', T.FLOAT, ['N', 3, 32, 32])], outs, inits)
    ops = [h.make_opsetid('', 13)] + ([h.make_opsetid('ptq.test', 1)] if post else [])
    onnx.save(h.make_model(g, opset_imports=ops), path)
d = sys.argv[1]
model(d + '/plain.onnx', [])
rng = np.random.default_rng(3)
model(d + '/post.onnx', [h.make_node('Decode', ['logits'], ['decoded'], name='decode', domain='ptq.test')])
# an If whose branches read a value only they read (by name, from the enclosing graph), with a
# quantized Conv after it: the calibration view keeps that value's producer
w2 = nh.from_array(rng.standard_normal((4, 8, 3, 3)).astype(np.float32) * 0.3, 'w2')
then_g = h.make_graph([h.make_node('Identity', ['m'], ['t_out'])], 'then', [], [h.make_tensor_value_info('t_out', T.FLOAT, None)])
else_g = h.make_graph([h.make_node('Neg', ['m'], ['e_out'])], 'else', [], [h.make_tensor_value_info('e_out', T.FLOAT, None)])
nodes = [h.make_node('Conv', ['x', 'w1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
         h.make_node('Relu', ['c1'], ['r1'], name='relu1'),
         h.make_node('Mul', ['r1', 'two'], ['m'], name='only_the_branches_read_me'),
         h.make_node('ReduceSum', ['r1'], ['s'], name='sum', keepdims=0),
         h.make_node('Greater', ['s', 'zero'], ['cond'], name='gt'),
         h.make_node('If', ['cond'], ['b'], name='branch', then_branch=then_g, else_branch=else_g),
         h.make_node('Conv', ['b', 'w2'], ['y'], name='conv2', pads=[1, 1, 1, 1])]
rng = np.random.default_rng(3)
inits = [nh.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, 'w1'), w2,
         nh.from_array(np.array(2, np.float32), 'two'), nh.from_array(np.array(0, np.float32), 'zero')]
g = h.make_graph(nodes, 'g', [h.make_tensor_value_info('x', T.FLOAT, ['N', 3, 32, 32])],
                 [h.make_tensor_value_info('y', T.FLOAT, None)], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), d + '/branch.onnx')
# a detector's tail: scores -> TopK -> the selected rows; an Add of two selected tensors (box
# decoding) stays float, a Gemm on the selected rows (an RoI head) is quantized
nodes = [h.make_node('Conv', ['x', 'w1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
         h.make_node('Relu', ['c1'], ['r1'], name='relu1'),
         h.make_node('Reshape', ['r1', 'rows'], ['feat'], name='to_rows'),
         h.make_node('ReduceMax', ['feat'], ['score'], name='score', axes=[1], keepdims=0),
         h.make_node('TopK', ['score', 'k'], ['top', 'idx'], name='topk'),
         h.make_node('Gather', ['feat', 'idx'], ['sel'], name='select', axis=0),
         h.make_node('Add', ['sel', 'sel'], ['decoded'], name='decode_add'),
         h.make_node('Gemm', ['sel', 'wg'], ['head'], name='roi_head', transB=1)]
inits = [nh.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, 'w1'),
         nh.from_array(np.array([-1, 8], np.int64), 'rows'), nh.from_array(np.array([16], np.int64), 'k'),
         nh.from_array(rng.standard_normal((4, 8)).astype(np.float32) * 0.3, 'wg')]
g = h.make_graph(nodes, 'g', [h.make_tensor_value_info('x', T.FLOAT, [1, 3, 32, 32])],
                 [h.make_tensor_value_info('decoded', T.FLOAT, None), h.make_tensor_value_info('head', T.FLOAT, None)], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), d + '/tail.onnx')
PYEOF

check "calibrate: an If's branches read a value by name; its producer runs, the Conv after the If is calibrated" bash -c "
  '$PTQ' calibrate '$TMP/branch.onnx' --images '$PHOTOS' ${PRE[*]} --cache '$TMP/branch.cache' 2>/dev/null &&
  grep -E '^b: ' '$TMP/branch.cache'"
check "quantize: after a TopK only weighted layers are quantized (the Gemm, not the Add)" bash -c "
  '$PTQ' quantize '$TMP/tail.onnx' --images '$PHOTOS' ${PRE[*]} --batch 1 -o '$TMP/tail.qdq.onnx' --report '$TMP/tail.tsv' 2>/dev/null &&
  $PY -c \"r = {l.split('\\t')[0]: l.rstrip('\\n').split('\\t') for l in open('$TMP/tail.tsv')}
assert r['roi_head'][2] == 'quantized', r['roi_head']
assert r['decode_add'][2] != 'quantized' and 'post-processing' in r['decode_add'][3], r['decode_add']
print(r['decode_add'][3])\""
check "calibrate: post-processing ptq does not run is left out; the cache equals the model's without it" bash -c "
  '$PTQ' calibrate '$TMP/post.onnx' --images '$PHOTOS' ${PRE[*]} --cache '$TMP/post.cache' 2>'$TMP/post.err' &&
  '$PTQ' calibrate '$TMP/plain.onnx' --images '$PHOTOS' ${PRE[*]} --cache '$TMP/plain.cache' 2>/dev/null &&
  cmp '$TMP/post.cache' '$TMP/plain.cache' && wc -l < '$TMP/post.cache'"
check "calibrate: warns which outputs ptq run cannot produce, naming the op" bash -c "
  grep -F 'outputs decoded need ops ptq does not run (Decode)' '$TMP/post.err'"
check "quantize: the model with unrunnable post-processing is quantized (Q/DQ before it)" bash -c "
  '$PTQ' quantize '$TMP/post.onnx' --images '$PHOTOS' ${PRE[*]} -o '$TMP/post.qdq.onnx' 2>/dev/null &&
  $PY -c \"import onnx; m = onnx.load('$TMP/post.qdq.onnx'); t = [n.op_type for n in m.graph.node]
assert t.count('QuantizeLinear') >= 2 and t[-1] == 'Decode', t; print(t.count('QuantizeLinear'), 'QuantizeLinear')\""
check "run: refused in one line naming the op" \
  refused "Decode" "$PTQ" run "$TMP/post.onnx" --images "$PHOTOS" "${PRE[@]}"
finish
