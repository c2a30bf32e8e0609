#!/usr/bin/env bash
# Float16 models as they are shipped (engine/model.h, quant/fp16.h), from the zoo's resnet18 (160)
# and YOLOv8-like detector (320), opset 13, in two variants of scripts/variants.py: fp16-weights
# (float initializers stored as float16 behind a Cast(to=float)) and fp16 (inputs, outputs,
# initializers, activations float16). Per model and variant:
#   ptq quantize (8 photos) quantizes every Conv/Gemm/MatMul weight (int8 DequantizeLinear count
#   == layers with a constant weight) with no warning; onnx.checker passes; the graph inputs and
#   outputs keep the variant's dtypes; no Cast is left without readers; ONNX Runtime runs the QDQ
#   model and its output has cosine >= 0.99 to ONNX Runtime's run of the float32 original on a
#   preprocessed photo; its TensorRT cache (--cache) names the model's own tensors;
#   for fp16: the float part is written in float16 (float16 Conv/Add/... outputs in the model);
#   ptq run of the variant == ONNX Runtime's run of it (cosine >= 0.9999); ptq run --images runs
#   the fp16 variant (the float32 images rounded to its float16 input); resnet18's fp16 QDQ model
#   is the same bytes at 1 thread with the generic ISA; resnet18 fp16 with Casts to and from
#   float32 at its ends (float32 interface, float16 inside) is quantized the same way.
# Also: ptq run --input with float16 and uint8 .npy files (a tiny model whose uint8 input is Cast
# to float, then a Conv: ptq == ONNX Runtime), a file of another dtype
# refused in one line naming the input and both dtypes, and a Conv whose weight is not an
# initializer warned about on stderr (count and reason), not only in --report.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
Z=$ROOT/build/zoo
ORT="node $ROOT/tests/oracle/ort.js"
for n in resnet18 yolov8n_like; do
  [ -f "$Z/$n.op13.onnx" ] || $PY "$ROOT/scripts/zoo.py" --models $n --opset 13 > "$TMP/zoo.log" 2>&1
done

# the variants (scripts/variants.py): fp16-weights, fp16
variant() { $PY "$ROOT/scripts/variants.py" "$1" "$2" --variant "$3"; }

cat > "$TMP/check_qdq.py" <<'PYEOF'
# check_qdq.py ORIGINAL VARIANT QDQ [half]: every weight int8, checker, interface, no dead Cast
import sys, onnx
from onnx import TensorProto as T
mo, mv, mq = (onnx.load(p) for p in sys.argv[1:4])
onnx.checker.check_model(mq)
inits = {t.name for t in mo.graph.initializer}
want = sum(1 for n in mo.graph.node if n.op_type in ('Conv', 'ConvTranspose', 'Gemm', 'MatMul') and len(n.input) > 1 and n.input[1] in inits)
qi = {t.name: t.data_type for t in mq.graph.initializer}
got = sum(1 for n in mq.graph.node if n.op_type == 'DequantizeLinear' and qi.get(n.input[0]) == T.INT8)
assert got == want, f"{got} int8 weights, {want} layers with a constant weight"
io = lambda m: [(v.name, v.type.tensor_type.elem_type) for v in list(m.graph.input) + list(m.graph.output) if v.name not in {t.name for t in m.graph.initializer}]
assert io(mq) == io(mv), f"interface {io(mq)}, the model's {io(mv)}"
read = {i for n in mq.graph.node for i in n.input} | {o.name for o in mq.graph.output}
dead = [n.name for n in mq.graph.node if n.op_type == 'Cast' and n.output[0] not in read]
assert not dead, f"Casts without readers: {dead}"
if len(sys.argv) > 4:  # the float part in float16: some float outputs typed float16 by inference
    inf = onnx.shape_inference.infer_shapes(mq)
    half = sum(1 for v in inf.graph.value_info if v.type.tensor_type.elem_type == T.FLOAT16)
    assert half > 0, "no float16 activation in the QDQ model"
print(f"{got}/{want} weights int8, interface {io(mq)}")
PYEOF

cosine() { $PY "$ROOT/tests/oracle/compare.py" "$1" "$2" --cos "$3"; }
PHOTOS=$ROOT/build/photos
for n in resnet18 yolov8n_like; do
  case $n in
    resnet18) PRE=(--preset imagenet-torchvision --size 160x160 --shorter 182); OUT=logits ;;
    yolov8n_like) PRE=(--preset yolo-letterbox-640 --size 320x320); OUT=output0 ;;
  esac
  M=$Z/$n.op13.onnx
  D=$TMP/$n
  mkdir -p "$D"
  "$PTQ" preprocess --images "$PHOTOS" "${PRE[@]}" --limit 1 --dump "$D/x.npy" > /dev/null 2>&1
  $PY -c "import numpy as np; np.save('$D/xh.npy', np.load('$D/x.npy').astype(np.float16))"
  $ORT "$M" --input images="$D/x.npy" --out-dir "$D/ort_fp32" > /dev/null 2>&1
  for v in fp16-weights fp16; do
    V=$D/$v.onnx
    X=$D/x.npy
    [ $v = fp16 ] && X=$D/xh.npy
    check "$n $v: the variant is made" variant "$M" "$V" $v
    check "$n $v: ptq quantize: every weight quantized, no warning" bash -c "
      '$PTQ' quantize '$V' --images '$PHOTOS' ${PRE[*]} --limit 8 -o '$D/$v.q.onnx' --cache '$D/$v.cache' 2> '$D/$v.err' &&
      ! grep -q 'warning' '$D/$v.err' || { cat '$D/$v.err'; false; }
      $PY '$TMP/check_qdq.py' '$M' '$V' '$D/$v.q.onnx' $([ $v = fp16 ] && echo half)"
    check "$n $v: ONNX Runtime runs the QDQ model, cosine >= 0.99 to the float32 original's" bash -c "
      $ORT '$D/$v.q.onnx' --input images='$X' --out-dir '$D/ort_$v.q' > '$D/ort_$v.q.log' 2>&1 || { tail -3 '$D/ort_$v.q.log'; false; }
      $PY -c \"import numpy as np; np.save('$D/ort_$v.q/o32.npy', np.load('$D/ort_$v.q/$OUT.npy').astype(np.float32))\"
      $PY '$ROOT/tests/oracle/compare.py' '$D/ort_$v.q/o32.npy' '$D/ort_fp32/$OUT.npy' --cos 0.99"
    check "$n $v: the cache names the model's own tensors" bash -c "grep -q '^images: ' '$D/$v.cache' && ! grep -q '_fp32: ' '$D/$v.cache'"
    check "$n $v: ptq run == ONNX Runtime (cosine >= 0.9999)" bash -c "
      '$PTQ' run '$V' --input images='$X' --output-dir '$D/ptq_$v' > '$D/run_$v.log' 2>&1 || { cat '$D/run_$v.log'; false; }
      $ORT '$V' --input images='$X' --out-dir '$D/ort_$v' > /dev/null 2>&1 &&
      $PY -c \"import numpy as np; a = np.load('$D/ptq_$v/$OUT.npy'); assert a.dtype == ('float16' if '$v' == 'fp16' else 'float32'), a.dtype\" &&
      $PY '$ROOT/tests/oracle/compare.py' '$D/ptq_$v/$OUT.npy' '$D/ort_$v/$OUT.npy' --cos 0.9999"
  done
  [ $n = resnet18 ] && check "$n fp16 with float32 inputs/outputs (Casts at both ends, as keep_io_types converters write): quantized, interface float32, ORT cosine >= 0.99" bash -c "
    $PY - '$D/fp16.onnx' '$D/keepio.onnx' <<'PYEOF'
import sys, onnx
from onnx import helper as h, TensorProto as T
m = onnx.load(sys.argv[1]); g = m.graph
x, y = g.input[0].name, g.output[0].name
for n in g.node:
    n.input[:] = [i + '_h' if i == x else i for i in n.input]
    n.output[:] = [o + '_h' if o == y else o for o in n.output]
g.node.insert(0, h.make_node('Cast', [x], [x + '_h'], to=T.FLOAT16, name='in_cast'))
g.node.append(h.make_node('Cast', [y + '_h'], [y], to=T.FLOAT, name='out_cast'))
g.input[0].type.tensor_type.elem_type = g.output[0].type.tensor_type.elem_type = T.FLOAT
onnx.checker.check_model(m); onnx.save(m, sys.argv[2])
PYEOF
    '$PTQ' quantize '$D/keepio.onnx' --images '$PHOTOS' ${PRE[*]} --limit 8 -o '$D/keepio.q.onnx' 2> /dev/null &&
    $PY '$TMP/check_qdq.py' '$M' '$D/keepio.onnx' '$D/keepio.q.onnx' half &&
    $ORT '$D/keepio.q.onnx' --input images='$D/x.npy' --out-dir '$D/ort_keepio.q' > /dev/null &&
    $PY '$ROOT/tests/oracle/compare.py' '$D/ort_keepio.q/$OUT.npy' '$D/ort_fp32/$OUT.npy' --cos 0.99"
  [ $n = resnet18 ] && check "$n fp16: the QDQ model is the same bytes at 1 thread with PTQ_ISA=generic" bash -c "
    PTQ_ISA=generic '$PTQ' quantize '$D/fp16.onnx' --images '$PHOTOS' ${PRE[*]} --limit 8 --threads 1 -o '$D/fp16.t1.q.onnx' 2> /dev/null &&
    cmp '$D/fp16.q.onnx' '$D/fp16.t1.q.onnx'"
  check "$n fp16: ptq run --images (float32 images rounded to the float16 input)" \
    "$PTQ" run "$D/fp16.onnx" --images "$PHOTOS" "${PRE[@]}" --limit 2
done

# ptq run --input: float16 and uint8 .npy files reach the model as they are
U=$TMP/u8.onnx
$PY - "$TMP" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
d = sys.argv[1]
r = np.random.RandomState(5)
w = nh.from_array((r.randn(4, 3, 3, 3) * 0.1).astype(np.float32), 'w')
for name, dt in (('u8', T.UINT8), ('f16', T.FLOAT16)):
    nodes = [h.make_node('Cast', ['x'], ['xf'], to=T.FLOAT), h.make_node('Conv', ['xf', 'w'], ['y'], name='conv', pads=[1, 1, 1, 1])]
    g = h.make_graph(nodes, name, [h.make_tensor_value_info('x', dt, [1, 3, 8, 8])], [h.make_tensor_value_info('y', T.FLOAT, [1, 4, 8, 8])], [w])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)]); m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, f'{d}/{name}.onnx')
np.save(f'{d}/x_u8.npy', r.randint(0, 256, (1, 3, 8, 8)).astype(np.uint8))
np.save(f'{d}/x_f16.npy', (r.randn(1, 3, 8, 8) * 100).astype(np.float16))
np.save(f'{d}/x_f32.npy', r.randn(1, 3, 8, 8).astype(np.float32))
np.save(f'{d}/x_i32.npy', np.zeros((1, 3, 8, 8), np.int32))
PYEOF
for t in u8 f16; do
  check "ptq run --input x_$t.npy (a $t input) == ONNX Runtime (max-abs <= 1e-4 x max)" bash -c "
    '$PTQ' run '$TMP/$t.onnx' --input x='$TMP/x_$t.npy' --output-dir '$TMP/run_$t' &&
    $ORT '$TMP/$t.onnx' --input x='$TMP/x_$t.npy' --out-dir '$TMP/ortrun_$t' > /dev/null &&
    $PY -c \"import numpy as np; a, b = np.load('$TMP/run_$t/y.npy'), np.load('$TMP/ortrun_$t/y.npy'); d = np.abs(a - b).max(); print('max-abs', d); assert d <= 1e-4 * np.abs(b).max()\""
done
check "ptq run refuses a float32 .npy of non-whole values for a uint8 input (one line: input, the value)" \
  refused "input 'x' is uint8 but element 0 of the float32 tensor fed to it is" "$PTQ" run "$TMP/u8.onnx" --input x="$TMP/x_f32.npy"
check "ptq run refuses an int32 .npy for a uint8 input (one line: input, both dtypes)" \
  refused "x_i32.npy holds int32, model input 'x' takes uint8" "$PTQ" run "$TMP/u8.onnx" --input x="$TMP/x_i32.npy"
check "ptq run refuses a uint8 .npy for a float16 input" \
  refused "holds uint8, model input 'x' takes float16" "$PTQ" run "$TMP/f16.onnx" --input x="$TMP/x_u8.npy"
check "ptq run --random-seed fills a uint8 input (not all zeros)" bash -c "
  '$PTQ' run '$TMP/u8.onnx' --save-input '$TMP/rand_u8.npy' --output '$TMP/rand_y.npy' > /dev/null &&
  $PY -c \"import numpy as np; x = np.load('$TMP/rand_u8.npy'); assert x.dtype == np.uint8 and x.max() > 0, (x.dtype, x.max())\""

# a weight ptq cannot quantize is warned about on stderr, with the count and the reason
$PY - "$TMP/wid.onnx" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
r = np.random.RandomState(7)
w1 = nh.from_array((r.randn(4, 3, 3, 3) * 0.3).astype(np.float32), 'w1')
w2 = nh.from_array((r.randn(4, 4, 3, 3) * 0.3).astype(np.float32), 'w2')
nodes = [h.make_node('Conv', ['x', 'w1'], ['c1'], name='conv1', pads=[1, 1, 1, 1]),
         h.make_node('Relu', ['c1'], ['r1'], name='relu1'),
         h.make_node('Identity', ['w2'], ['w2i'], name='w2_identity'),
         h.make_node('Conv', ['r1', 'w2i'], ['y'], name='conv2', pads=[1, 1, 1, 1])]
g = h.make_graph(nodes, 'wid', [h.make_tensor_value_info('x', T.FLOAT, [1, 3, 16, 16])], [h.make_tensor_value_info('y', T.FLOAT, [1, 4, 16, 16])], [w1, w2])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)]); m.ir_version = 7
onnx.save(m, sys.argv[1])
PYEOF
$PY -c "import numpy as np; np.save('$TMP/wid_x.npy', np.random.RandomState(1).rand(4, 3, 16, 16).astype(np.float32))"
check "a Conv whose weight stays float is warned about on stderr (count, node, reason)" bash -c "
  '$PTQ' quantize '$TMP/wid.onnx' --input '$TMP/wid_x.npy' -o '$TMP/wid.q.onnx' 2> '$TMP/wid.err' > '$TMP/wid.out'
  grep \"warning: 1 of 2 Conv/ConvTranspose/Gemm/MatMul layers keep float weights: Conv 'conv2': weight 'w2i' is not a float32 initializer\" '$TMP/wid.err' ||
    { cat '$TMP/wid.err'; false; }"
finish
