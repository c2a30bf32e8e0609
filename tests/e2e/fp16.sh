#!/usr/bin/env bash
# The float part in FP16 (quant/fp16.h): ptq compare --float fp16|fp32 and ptq quantize
# --float-dtype fp16, on a small model whose excluded layer loses precision in FP16 (a
# Conv, then + 500 and - 500: FP16's step at 500 is 0.25) and on PP-OCR's text classifier.
# Asserted: compare's cosine differs between fp16 and fp32; the written float16 model passes
# onnx.checker, runs in ONNX Runtime and in ptq; ptq's run of it gives compare's fp16 cosine
# (the simulation and the written model compute the same values); ONNX Runtime's between the fp16
# and fp32 cosines (its CPU provider computes float16 ops that lack a float16 kernel in float32 and
# drops the float16 rounding between two such ops); byte-identical outputs and reports at 1 and 2
# threads.
. "$(dirname "$0")/lib.sh"
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
M=$TMP/sub.onnx
$PY - "$M" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
r = np.random.RandomState(3)
w1 = nh.from_array((r.randn(8, 3, 3, 3) * 0.3).astype(np.float32), 'w1')
b1 = nh.from_array((r.randn(8) * 0.1).astype(np.float32), 'b1')
w2 = nh.from_array((r.randn(8, 8, 3, 3) * 0.2).astype(np.float32), 'w2')
b2 = nh.from_array((r.randn(8) * 0.1).astype(np.float32), 'b2')
k = nh.from_array(np.array(500.0, np.float32), 'k')
nodes = [h.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
         h.make_node('Relu', ['c1'], ['r1'], name='relu1'),
         h.make_node('Conv', ['r1', 'w2', 'b2'], ['c2'], name='conv2', pads=[1, 1, 1, 1]),
         h.make_node('Add', ['c2', 'k'], ['a'], name='add'),
         h.make_node('Sub', ['a', 'k'], ['y'], name='sub')]
g = h.make_graph(nodes, 'sub', [h.make_tensor_value_info('x', T.FLOAT, ['N', 3, 16, 16])],
                 [h.make_tensor_value_info('y', T.FLOAT, ['N', 8, 16, 16])], [w1, b1, w2, b2, k])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)]); m.ir_version = 7
onnx.checker.check_model(m); onnx.save(m, sys.argv[1])
PYEOF
ls "$ROOT/build/photos"/*.png | head -12 > "$TMP/calib.list"
ls "$ROOT/build/photos"/*.png | tail -n +13 | head -12 > "$TMP/eval.list"
PP="--preset imagenet-torchvision --mode stretch --size 16x16"
C="$PTQ compare $M --images $TMP/calib.list --eval-images $TMP/eval.list $PP --methods max --exclude-nodes conv2"
"$PTQ" preprocess --images "$TMP/eval.list" $PP --dump "$TMP/eval.npy" 2>/dev/null
"$PTQ" run "$M" --input x="$TMP/eval.npy" --output-dir "$TMP/fp32.ptq" >/dev/null
node "$ROOT/tests/oracle/ort.js" "$M" --input x="$TMP/eval.npy" --out-dir "$TMP/fp32.ort" --opt disable >/dev/null

check "compare: FP16 rounding of the excluded layer lowers the cosine; the report names the float part" bash -c "
  $C --float fp16 --threads 2 --json '$TMP/c16.json' > '$TMP/c16.out' 2>/dev/null &&
  $C --float fp32 --threads 2 --json '$TMP/c32.json' > '$TMP/c32.out' 2>/dev/null &&
  $C --threads 2 --json '$TMP/cdef.json' >/dev/null 2>&1 &&
  grep -q 'float part in FP16' '$TMP/c16.out' && grep -q 'float part in FP32' '$TMP/c32.out' &&
  $PY -c \"
import json, sys
r16, r32, rd = (json.load(open('$TMP/' + f + '.json')) for f in ('c16', 'c32', 'cdef'))
assert (r16['float_part'], r32['float_part'], rd['float_part']) == ('fp16', 'fp32', 'fp16')
a, b = r16['methods'][0]['cosine'], r32['methods'][0]['cosine']
assert rd['methods'][0]['cosine'] == a, 'the default is fp16'
print(f'cosine fp16 {a:.6f}, fp32 {b:.6f}'); sys.exit(0 if b - a > 1e-4 else 1)\""

check "compare at 1 and 2 threads: the same report" bash -c "
  $C --float fp16 --threads 1 --json '$TMP/c16.t1.json' >/dev/null 2>&1 && cmp '$TMP/c16.json' '$TMP/c16.t1.json'"

Q="$PTQ quantize $M --images $TMP/calib.list $PP --method max --exclude-nodes conv2"
check "quantize --float-dtype fp16: float16 weights and activations of the float part, onnx.checker passes" bash -c "
  $Q --float-dtype fp16 -o '$TMP/sub16.onnx' --threads 2 2>/dev/null &&
  $Q --float-dtype fp16 -o '$TMP/sub16.t1.onnx' --threads 1 2>/dev/null && cmp '$TMP/sub16.onnx' '$TMP/sub16.t1.onnx' &&
  $PY -c \"
import onnx
from onnx import TensorProto as T
m = onnx.load('$TMP/sub16.onnx'); onnx.checker.check_model(m, full_check=True)
init = {t.name: t.data_type for t in m.graph.initializer}
assert init['w2'] == T.FLOAT16 and init['b2'] == T.FLOAT16 and init['k'] == T.FLOAT16, init
assert m.graph.output[0].type.tensor_type.elem_type == T.FLOAT and m.graph.input[0].type.tensor_type.elem_type == T.FLOAT
casts = [n for n in m.graph.node if n.op_type == 'Cast']
print(len(casts), 'Casts;', sum(v == T.FLOAT16 for v in init.values()), 'float16 initializers')\""

check "the float16 model runs in ptq (compare's fp16 cosine) and in ONNX Runtime (between the fp16 and fp32 cosines), the same at 1 and 2 threads" bash -c "
  '$PTQ' run '$TMP/sub16.onnx' --input x='$TMP/eval.npy' --output-dir '$TMP/sub16.ptq' --threads 2 >/dev/null &&
  '$PTQ' run '$TMP/sub16.onnx' --input x='$TMP/eval.npy' --output-dir '$TMP/sub16.ptq1' --threads 1 >/dev/null &&
  cmp '$TMP/sub16.ptq/y.npy' '$TMP/sub16.ptq1/y.npy' &&
  node '$ROOT/tests/oracle/ort.js' '$TMP/sub16.onnx' --input x='$TMP/eval.npy' --out-dir '$TMP/sub16.ort' --opt disable >/dev/null &&
  $PY -c \"
import json, sys, numpy as np
def cos(a, b):
    a, b = np.load(a).astype(np.float64).ravel(), np.load(b).astype(np.float64).ravel()
    return a @ b / np.sqrt((a @ a) * (b @ b))
want, c32 = (json.load(open('$TMP/' + f + '.json'))['methods'][0]['cosine'] for f in ('c16', 'c32'))
p = cos('$TMP/fp32.ptq/y.npy', '$TMP/sub16.ptq/y.npy'); o = cos('$TMP/fp32.ort/y.npy', '$TMP/sub16.ort/y.npy')
print(f'compare {want:.7f}, ptq run {p:.7f}, ONNX Runtime {o:.7f} (compare --float fp32 {c32:.7f})')
sys.exit(0 if abs(p - want) < 1e-9 and want - 1e-4 <= o <= c32 + 1e-4 else 1)\""

for d in fp32 fp16; do
  "$PTQ" quantize "$CLS" --images "$ROOT/build/textphotos/cls" --limit 16 --preset paddleocr-cls --method max \
    --exclude-op-types Conv --float-dtype $d -o "$TMP/cls.$d.onnx" 2>/dev/null
done
ls "$ROOT/build/textphotos/cls"/*.png | tail -n 16 > "$TMP/cls.list"
"$PTQ" preprocess --images "$TMP/cls.list" --preset paddleocr-cls --dump "$TMP/cls.npy" 2>/dev/null
check "PP-OCR cls with --float-dtype fp16 (every Conv excluded): checker, ONNX Runtime and ptq run it, close to its float32 form" bash -c "
  $PY -c \"import onnx; onnx.checker.check_model(onnx.load('$TMP/cls.fp16.onnx'), full_check=True)\" &&
  for d in fp32 fp16; do node '$ROOT/tests/oracle/ort.js' \"$TMP/cls.\$d.onnx\" --input x='$TMP/cls.npy' --out-dir \"$TMP/cls.\$d.ort\" --opt disable >/dev/null &&
     '$PTQ' run \"$TMP/cls.\$d.onnx\" --input x='$TMP/cls.npy' --output-dir \"$TMP/cls.\$d.ptq\" >/dev/null || exit 1; done &&
  $PY '$ROOT/tests/oracle/compare.py' '$TMP/cls.fp16.ort/softmax_0.tmp_0.npy' '$TMP/cls.fp32.ort/softmax_0.tmp_0.npy' --cos 0.9999 >/dev/null &&
  $PY '$ROOT/tests/oracle/compare.py' '$TMP/cls.fp16.ptq/softmax_0.tmp_0.npy' '$TMP/cls.fp32.ptq/softmax_0.tmp_0.npy' --cos 0.9999 >/dev/null &&
  $PY '$ROOT/tests/oracle/compare.py' '$TMP/cls.fp16.ptq/softmax_0.tmp_0.npy' '$TMP/cls.fp16.ort/softmax_0.tmp_0.npy' --cos 0.9999"

check "bad --float and --float-dtype values are usage errors" bash -c "
  $C --float fp8 2>/dev/null; [ \$? = 2 ] && $Q --float-dtype bf16 -o '$TMP/x.onnx' 2>/dev/null; [ \$? = 2 ] && [ ! -e '$TMP/x.onnx' ]"
finish
