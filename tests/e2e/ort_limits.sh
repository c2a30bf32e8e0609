#!/usr/bin/env bash
# QDQ models that ONNX Runtime runs: ORT fuses DequantizeLinear -> GlobalAveragePool ->
# QuantizeLinear (and an AveragePool whose kernel is the whole image) into
# QLinearGlobalAveragePool, whose kernel refuses x_scale / (y_scale * H*W) outside [2^-32, 256)
# at run time ("parameter out of computation range"). The case of models exported with
# BatchNorm statistics at their initial values (lraspp/deeplabv3 mobilenet_v3): activations
# near 1e-8 whose spatial mean is 0, so the pool's output range falls back to amax 1.0. A model
# made with onnx.helper reproduces it; ptq keeps those pools' inputs float, says so in the
# summary and the report, and ORT runs the QDQ model; the same model with the pool input
# quantized at the calibrated scale is refused by ORT with that message.
. "$(dirname "$0")/lib.sh"
cat > "$TMP/make.py" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out = sys.argv[1]
rng = np.random.RandomState(0)
w = nh.from_array(rng.randn(4, 4, 1, 1).astype(np.float32), "w_se")
w2 = nh.from_array(rng.randn(4, 4, 1, 1).astype(np.float32), "w_se2")
nodes = [h.make_node("GlobalAveragePool", ["x"], ["pooled"], name="gap"),
         h.make_node("Conv", ["pooled", "w_se"], ["se"], name="se_conv"),      # a squeeze-excitation's 1x1 conv
         h.make_node("AveragePool", ["x"], ["pooled2"], name="avg_global", kernel_shape=[8, 8]),
         h.make_node("Conv", ["pooled2", "w_se2"], ["se2"], name="se_conv2")]
g = h.make_graph(nodes, "tiny_gap", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 8, 8])],
                 [h.make_tensor_value_info("se", T.FLOAT, [1, 4, 1, 1]), h.make_tensor_value_info("se2", T.FLOAT, [1, 4, 1, 1])],
                 [w, w2])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
onnx.checker.check_model(m)
onnx.save(m, f"{out}/tiny_gap.onnx")
# activations up to 1e-8 in a checkerboard (BatchNorm at init): amax 1e-8, spatial mean exactly 0,
# so the pools' outputs get amax 1.0 and x_scale / (y_scale * 64) = 1e-8 / 64 < 2^-32
cb = np.indices((8, 8)).sum(0) % 2 * 2 - 1
x = (np.broadcast_to(cb, (4, 4, 8, 8)) * 2.5e-9 * (1 + np.arange(4))[:, None, None, None]).astype(np.float32)
np.save(f"{out}/calib.npy", x)
np.save(f"{out}/x.npy", x[:1])
PY
check "onnx.helper writes a GlobalAveragePool/AveragePool model and +-1e-8 calibration samples" $PY "$TMP/make.py" "$TMP"
check "ptq quantize: both pools keep float inputs, warned in the summary and explained in the report" bash -c "
  '$PTQ' quantize '$TMP/tiny_gap.onnx' --input '$TMP/calib.npy' --batch 1 --method max -o '$TMP/tiny_gap.qdq.onnx' \
    --report '$TMP/tiny_gap.report' --json '$TMP/tiny_gap.json' 2>'$TMP/q.err' &&
  grep -q \"warning: GlobalAveragePool 'gap': input kept float: ONNX Runtime's QLinearGlobalAveragePool needs x_scale/(y_scale\\*64)\" '$TMP/q.err' &&
  grep -q \"warning: AveragePool 'avg_global': input kept float\" '$TMP/q.err' &&
  grep -qP '^gap\tGlobalAveragePool\tnot quantized\tinput kept float: ONNX Runtime' '$TMP/tiny_gap.report' &&
  grep -qP '^avg_global\tAveragePool\tnot quantized\tinput kept float: ONNX Runtime' '$TMP/tiny_gap.report' && tail -1 '$TMP/q.err'"
cat > "$TMP/check.py" <<'PY'
import sys, json, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh
m = onnx.load(sys.argv[1]); onnx.checker.check_model(m)
prod = {o: n.op_type for n in m.graph.node for o in n.output}
ins = {n.name: [prod.get(i) for i in n.input] for n in m.graph.node}
assert ins["gap"] == [None] and ins["avg_global"] == [None], ins          # pools read x itself
assert ins["se_conv"][:2] == ["DequantizeLinear"] * 2 and ins["se_conv2"][:2] == ["DequantizeLinear"] * 2, ins
# the naive placement: x quantized at its calibrated scale in front of each pool (a pair each;
# the second scale 1/1024 larger so that ORT's common-subexpression pass keeps two pairs)
amax = json.load(open(sys.argv[2]))["tensors"]["x"]["amax"]
for k, n in enumerate(n for n in list(m.graph.node) if n.name in ("gap", "avg_global")):
    m.graph.initializer.extend([nh.from_array(np.array(amax / 127 * (1 + k / 1024), np.float32), f"x_scale_naive{k}"),
                                nh.from_array(np.array(0, np.int8), f"x_zp_naive{k}")])
    q = h.make_node("QuantizeLinear", ["x", f"x_scale_naive{k}", f"x_zp_naive{k}"], [f"x_q_naive{k}"], name=f"x_Q_naive{k}")
    dq = h.make_node("DequantizeLinear", [f"x_q_naive{k}", f"x_scale_naive{k}", f"x_zp_naive{k}"], [f"x_dq_naive{k}"], name=f"x_DQ_naive{k}")
    n.input[0] = f"x_dq_naive{k}"
    m.graph.node.insert(0, dq); m.graph.node.insert(0, q)
onnx.save(m, sys.argv[3])
print(f"pools read x in float, their consumers read DequantizeLinear; x amax {amax:.3g}")
PY
check "the QDQ model: pools on float x, their 1x1 convs on Q/DQ (onnx.checker passes); a naive copy quantizes x" \
  $PY "$TMP/check.py" "$TMP/tiny_gap.qdq.onnx" "$TMP/tiny_gap.json" "$TMP/naive.qdq.onnx"
check "ONNX Runtime (all optimizations: QLinear fusions) runs ptq's QDQ model, and ptq run agrees" bash -c "
  node '$ROOT/tests/oracle/ort.js' '$TMP/tiny_gap.qdq.onnx' --input x='$TMP/x.npy' --out-dir '$TMP/ort' >/dev/null &&
  '$PTQ' run '$TMP/tiny_gap.qdq.onnx' --input '$TMP/x.npy' --output-dir '$TMP/ptq' >/dev/null &&
  $PY '$ROOT/tests/oracle/compare.py' '$TMP/ptq/se.npy' '$TMP/ort/se.npy' --atol 1e-6 && $PY '$ROOT/tests/oracle/compare.py' '$TMP/ptq/se2.npy' '$TMP/ort/se2.npy' --atol 1e-6"
check "ONNX Runtime refuses the naive copy (QLinearGlobalAveragePool or QLinearAveragePool): 'parameter out of computation range'" bash -c "
  ! node '$ROOT/tests/oracle/ort.js' '$TMP/naive.qdq.onnx' --input x='$TMP/x.npy' --out-dir '$TMP/naive' >'$TMP/naive.log' 2>&1 &&
  grep -q 'QLinearGlobalAveragePool parameter out of computation range' '$TMP/naive.log' && grep -o 'Non-zero status code returned while running [A-Za-z]* node' '$TMP/naive.log' | head -1"
finish
