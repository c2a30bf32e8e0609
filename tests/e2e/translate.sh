#!/usr/bin/env bash
# ptq translate (quantization spec §6, NVIDIA's qdq_translator): QDQ models that ptq quantize
# wrote for the cls and det models, and small graphs built here for every propagation rule.
# - the Q/DQ-free model passes onnx.checker, has no QuantizeLinear, DequantizeLinear or
#   BatchNormalization after a Conv left, and ONNX Runtime's output on it equals (to float rounding of the
#   BN fold) ONNX Runtime's output on the QDQ model with its activation pairs removed: the
#   same network with its weights quantized;
# - the cache holds every activation pair's scale bit for bit, and `quantize --from-cache`
#   of that cache on the FP32 model, with the fp16 nodes excluded, writes the same QDQ model
#   byte for byte (the round trip QDQ -> implicit -> QDQ);
# - the fp16 nodes are the excluded weighted nodes; the layer arguments are trtexec's;
# - propagation rules (default, --propagate-concat/-pool/-mul, --dla) on a constructed graph;
# - bad inputs: an FP32 model, uint8 and asymmetric quantization, an unknown option.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
ORT="node $ROOT/tests/oracle/ort.js"
CMP=$ROOT/tests/oracle/compare.py
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
DET=$MODELS/ch_PP-OCRv4_det_infer.onnx
PHOTOS=$ROOT/build/photos
ls "$PHOTOS"/*.png | LC_ALL=C sort | head -n 8 > "$TMP/calib.list"
ls "$PHOTOS"/*.png | LC_ALL=C sort | tail -n 4 > "$TMP/eval.list"
rm -f "$TMP"/*.onnx "$TMP"/*_precision_config*

model_case() { # key model preset output exclude-node
  local key=$1 m=$2 preset=$3 out=$4 ex=$5 q=$TMP/$1.qdq.onnx
  "$PTQ" quantize "$m" --images "$TMP/calib.list" --preset "$preset" --method max --exclude-nodes "$ex" -o "$q" 2>/dev/null &&
  "$PTQ" translate "$q" 2>"$TMP/$key.err" || { cat "$TMP/$key.err"; return 1; }
  local p=$TMP/$key.qdq
  $PY - "$q" "${p}_noqdq.onnx" "${p}_precision_config.json" "${p}_precision_config_calib.cache" "${p}_precision_config_layer_arg.txt" "$ex" <<'PYEOF' || return 1
import sys, json, struct, collections, onnx
from onnx import numpy_helper
qdq, noqdq, cfg, cache, arg, ex = sys.argv[1:7]
m = onnx.load(noqdq); onnx.checker.check_model(m, full_check=True)
ops = collections.Counter(n.op_type for n in m.graph.node)
prod = {o: n for n in m.graph.node for o in n.output}
bn_after_conv = [n.name for n in m.graph.node if n.op_type == 'BatchNormalization' and n.input[0] in prod and prod[n.input[0]].op_type == 'Conv']
assert not ops['QuantizeLinear'] and not ops['DequantizeLinear'] and not bn_after_conv, (ops, bn_after_conv)
q = onnx.load(qdq)
init = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
want = {n.input[0]: float(init[n.input[1]]) for n in q.graph.node if n.op_type == 'QuantizeLinear'}
lines = open(cache).read().splitlines()
assert lines[0] == 'TRT-8601-EntropyCalibration2', lines[0]
got = {l.rsplit(': ', 1)[0]: struct.unpack('>f', bytes.fromhex(l.rsplit(': ', 1)[1].rjust(8, '0')))[0] for l in lines[1:]}
bad = [t for t, s in want.items() if struct.pack('<f', got.get(t, -1.0)) != struct.pack('<f', s)]
assert not bad, f'{len(bad)} scales differ, first {bad[:3]}'
c = json.load(open(cfg))
assert c['fp16_nodes'] == [ex], c['fp16_nodes']
assert set(c['int8_tensor_scales']) == set(got), 'JSON and cache name different tensors'
assert open(arg).read() == f'{ex}:fp16\n', open(arg).read()
print(f"{len(want)} activation scales bit for bit, {len(got)} in the cache, fp16 {c['fp16_nodes']}, "
      f"{len(m.graph.node)} nodes ({len(q.graph.node)} with Q/DQ)")
PYEOF
  "$PTQ" preprocess --images "$TMP/eval.list" --preset "$preset" --dump "$TMP/$key.eval.npy" 2>/dev/null &&
  $PY "$ROOT/tests/oracle/qdq_weights_only.py" "$q" "$TMP/$key.wonly.onnx" >/dev/null &&
  $ORT "$TMP/$key.wonly.onnx" --input x="$TMP/$key.eval.npy" --out-dir "$TMP/$key.wonly" --opt disable --threads 1 &&
  $ORT "${p}_noqdq.onnx" --input x="$TMP/$key.eval.npy" --out-dir "$TMP/$key.noqdq" --opt disable --threads 1 &&
  $PY "$CMP" "$TMP/$key.noqdq/$out.npy" "$TMP/$key.wonly/$out.npy" --cos 0.99999 --rel 1e-3 | sed 's/^/ORT, translated vs QDQ weights only: /'
}

check "cls: translated model valid, scales bit for bit, fp16 node, ORT output = the QDQ network's" \
  model_case cls "$CLS" paddleocr-cls softmax_0.tmp_0 p2o.Conv.5
check "det (residual Adds, Concat, Resize, ConvTranspose): the same" \
  model_case det "$DET" paddleocr-det sigmoid_0.tmp_0 p2o.Conv.12

round_trip() { # key model: quantize --from-cache of the translated cache, the fp16 nodes excluded
  local key=$1 m=$2 p=$TMP/$1.qdq
  local ex; ex=$(sed 's/:fp16//g' "${p}_precision_config_layer_arg.txt")
  "$PTQ" quantize "$m" --from-cache "${p}_precision_config_calib.cache" --exclude-nodes "$ex" -o "$TMP/$key.again.onnx" 2>/dev/null &&
  cmp "$TMP/$key.again.onnx" "$TMP/$key.qdq.onnx" && echo "QDQ -> translate -> quantize --from-cache: the same $(stat -c %s "$TMP/$key.qdq.onnx") bytes"
}
check "cls: round trip to the identical QDQ model" round_trip cls "$CLS"
check "det: round trip to the identical QDQ model" round_trip det "$DET"
check "cache headers: translate --trt-version/--trt-algorithm; quantize --from-cache keeps the version and writes EntropyCalibration2" bash -c "
  '$PTQ' translate '$TMP/cls.qdq.onnx' -o '$TMP/v10' --trt-version 101401 --trt-algorithm LegacyCalibration 2>/dev/null &&
  head -1 '$TMP/v10_precision_config_calib.cache' | grep -qx 'TRT-101401-LegacyCalibration' &&
  { echo TRT-101401-MinMaxCalibration; tail -n +2 '$TMP/cls.qdq_precision_config_calib.cache'; } > '$TMP/minmax.cache' &&
  '$PTQ' quantize '$CLS' --from-cache '$TMP/minmax.cache' -o '$TMP/mm.onnx' --cache '$TMP/mm.cache' 2>/dev/null &&
  head -1 '$TMP/mm.cache' | grep -qx 'TRT-101401-EntropyCalibration2' &&
  ! '$PTQ' translate '$TMP/cls.qdq.onnx' -o '$TMP/bad' --trt-algorithm Entropy 2>/dev/null && echo 'LegacyCalibration, 101401; MinMax in, EntropyCalibration2 out'"

# A constructed graph for the propagation rules:
#   x -Q/DQ(sx)-> MaxPool -> Reshape -> r;  y -Q/DQ(sy)-> Transpose -> t (Pad, Relu ...)
#   Concat(r, t) -> c;  GlobalAveragePool(x) -> gp;  Mul(t, 2.0) -> m;  Conv(x) -> Add(conv, t) -> a
cat > "$TMP/prop.py" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
f = lambda n, v: numpy_helper.from_array(np.array(v, np.float32), n)
i8 = lambda n, v: numpy_helper.from_array(np.array(v, np.int8), n)
inits = [f('sx', 0.02), f('sy', 0.05), i8('z', 0), numpy_helper.from_array(np.array([1, 4, 4, 4], np.int64), 'shape'),
         f('two', 2.0), i8('w', np.ones((4, 4, 1, 1))), f('ws', [0.01] * 4), i8('wz', [0] * 4), f('b', [0.0] * 4)]
N = helper.make_node
nodes = [N('QuantizeLinear', ['x', 'sx', 'z'], ['xq'], name='qx'), N('DequantizeLinear', ['xq', 'sx', 'z'], ['xd'], name='dqx'),
         N('QuantizeLinear', ['y', 'sy', 'z'], ['yq'], name='qy'), N('DequantizeLinear', ['yq', 'sy', 'z'], ['yd'], name='dqy'),
         N('MaxPool', ['xd'], ['mp'], name='maxpool', kernel_shape=[1, 1]), N('Reshape', ['mp', 'shape'], ['r'], name='reshape'),
         N('Transpose', ['yd'], ['t'], name='transpose', perm=[0, 1, 3, 2]), N('Relu', ['t'], ['tr'], name='relu'),
         N('Concat', ['r', 'tr'], ['c'], name='concat', axis=1), N('GlobalAveragePool', ['xd'], ['gp'], name='gap'),
         N('Mul', ['tr', 'two'], ['m'], name='mul'), N('DequantizeLinear', ['w', 'ws', 'wz'], ['wd'], name='dqw', axis=0),
         N('Conv', ['xd', 'wd', 'b'], ['conv'], name='conv'), N('Add', ['conv', 'tr'], ['a'], name='add')]
vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
g = helper.make_graph(nodes, 'prop', [vi('x', [1, 4, 4, 4]), vi('y', [1, 4, 4, 4])],
                      [vi('c', None), vi('gp', None), vi('m', None), vi('a', None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), f'{d}/prop.onnx')
PYEOF
propagation() {
  $PY "$TMP/prop.py" "$TMP" || return 1
  "$PTQ" translate "$TMP/prop.onnx" -o "$TMP/p0" 2>/dev/null &&
  "$PTQ" translate "$TMP/prop.onnx" -o "$TMP/p1" --propagate-concat --propagate-pool --propagate-mul --dla 2>/dev/null || return 1
  $PY - "$TMP/p0_precision_config.json" "$TMP/p1_precision_config.json" <<'PYEOF'
import sys, json, struct
f32 = lambda v: struct.unpack('<f', struct.pack('<f', v))[0]
sx, sy = f32(0.02), f32(0.05)
base = {'x': sx, 'y': sy, 'mp': sx, 'r': sx, 't': sy, 'tr': sy}
want0 = dict(base)
want1 = dict(base, c=sy, gp=sx, m=sy, conv=1.0)
for path, want in zip(sys.argv[1:], (want0, want1)):
    got = {k: f32(v) for k, v in json.load(open(path))['int8_tensor_scales'].items()}
    assert got == want, (path, got, want)
print('default: MaxPool, Reshape, Transpose, Relu carry the scale; options: Concat max, GlobalAveragePool, Mul, DLA conv 1.0')
PYEOF
}
check "scale propagation: default ops, --propagate-concat/-pool/-mul, --dla" propagation

bad_inputs() {
  $PY - "$TMP" <<'PYEOF' || return 1
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
for name, zp in (('u8', np.array(0, np.uint8)), ('asym', np.array(3, np.int8))):
    inits = [numpy_helper.from_array(np.array(0.1, np.float32), 's'), numpy_helper.from_array(zp, 'z')]
    nodes = [helper.make_node('QuantizeLinear', ['x', 's', 'z'], ['q'], name='q'),
             helper.make_node('DequantizeLinear', ['q', 's', 'z'], ['y'], name='dq'), helper.make_node('Relu', ['y'], ['o'])]
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4])
    onnx.save(helper.make_model(helper.make_graph(nodes, name, [vi('x')], [vi('o')], inits),
                                opset_imports=[helper.make_opsetid('', 13)]), f'{d}/{name}.onnx')
PYEOF
  local out rc
  for c in "$CLS:not a QDQ model:1" "$TMP/u8.onnx:uint8:1" "$TMP/asym.onnx:zero point 3:1" "$TMP/nope.onnx:No such file:1"; do
    IFS=: read -r f want code <<< "$c"
    out=$("$PTQ" translate "$f" -o "$TMP/bad" 2>&1); rc=$?
    [ $rc = "$code" ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "$want" || { echo "$f: rc $rc: $out"; return 1; }
  done
  ls "$TMP"/bad_* 2>/dev/null && { echo "files written"; return 1; }
  "$PTQ" translate "$CLS" --bogus 2>/dev/null; [ $? = 2 ] || return 1
  echo "FP32 model, uint8, zero point 3, missing file: one line each, exit 1, nothing written; unknown option: 2"
}
check "bad inputs: one line naming the model and the reason, no output" bad_inputs
finish
