#!/usr/bin/env bash
# The ops of runtime/ops/logic.c, math.c, utility.c, normalize.c, loss.c, qlinear.c and the
# newer reductions against ONNX Runtime (npm onnxruntime-node) on model-sized random inputs
# (the ONNX node tests hold a few elements each): one single-node model per case, built with
# onnx.helper, run by `ptq run` and by tests/oracle/ort.js on the same .npy inputs. Floats
# must agree within atol + rtol*|ort| (rtol 1e-5 for element-wise math, 1e-4 where the two
# sum in different orders); integers and bools exactly.
# The integer ops (MatMulInteger, ConvInteger, QLinearConv, QLinearMatMul) are checked against
# exact numpy references written here instead (int64 accumulation, then QLinear*'s requantization
# as ONNX specifies it: float32 multiplier a_scale*b_scale/y_scale, round half to even, + zero
# point, saturate): ONNX Runtime's u8s8 kernels (MLAS) on a CPU without VNNI (AVX2, or AVX-512
# without VNNI as on Skylake) multiply with vpmaddubsw, which adds each two adjacent u8*s8 products
# into an int16 with signed saturation (255*127 + 255*127 = 64770 becomes 32767) before widening to
# int32, so their results differ per CPU (VNNI's vpdpbusd sums into int32 directly); numpy's are the
# same everywhere. Checked: on an AVX-512
# VNNI Xeon (vpdpbusd sums into int32: no saturation) ONNX Runtime's outputs equal these references
# bit for bit, and ptq gives them with PTQ_ISA=avx512, avx2 and generic.
. "$(dirname "$0")/lib.sh"
ORT="node $ROOT/tests/oracle/ort.js"

# case NAME: writes $TMP/NAME/{model.onnx, in_*.npy, tol}
gen() {
  $PY - "$TMP" "$1" <<'PYEOF'
import sys, os, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
tmp, name = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(abs(hash(name)) % 2**32)
d = os.path.join(tmp, name)
if name != "--list":
    import shutil
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
NP = {np.float32: T.FLOAT, np.float64: T.DOUBLE, np.int64: T.INT64, np.int32: T.INT32, np.int8: T.INT8,
      np.uint8: T.UINT8, np.bool_: T.BOOL}

def u(*shape, lo=-3.0, hi=3.0, dt=np.float32):
    return rng.uniform(lo, hi, shape).astype(dt)

def case(op, inputs, attrs=None, n_out=1, opset=13, consts=None, tol=(1e-6, 1e-5), out_types=None, ref=None):
    """inputs: (name, array) fed at run time, then consts: (name, array) initializers, in the
    node's input order; output types from onnx's shape inference, or out_types (opset 18 ops,
    newer than the onnx 1.12 installed here). ref: a function of the input arrays (in node
    order) giving the exact outputs, written to ref/ and compared instead of ONNX Runtime's."""
    consts = consts or []
    ins = [helper.make_tensor_value_info(n, NP[a.dtype.type], a.shape) for n, a in inputs]
    if out_types:
        outs = [helper.make_tensor_value_info(f"y{i}", t, None) for i, t in enumerate(out_types)]
    else:
        outs = []
        for i in range(n_out):
            v = onnx.ValueInfoProto()
            v.name = f"y{i}"
            outs.append(v)
    node = helper.make_node(op, [n for n, _ in inputs] + [n for n, _ in consts], [f"y{i}" for i in range(n_out)], **(attrs or {}))
    g = helper.make_graph([node], "g", ins, outs, [numpy_helper.from_array(a, n) for n, a in consts])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if not out_types:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        del m.graph.value_info[:]
    open(os.path.join(d, "model.onnx"), "wb").write(m.SerializeToString())
    for n, a in inputs:
        np.save(os.path.join(d, f"in_{n}.npy"), a)
    open(os.path.join(d, "tol"), "w").write(f"{tol[0]} {tol[1]}\n")
    if ref:
        os.makedirs(os.path.join(d, "ref"))
        for i, y in enumerate(ref(*[a for _, a in inputs + consts])):
            np.save(os.path.join(d, "ref", f"y{i}.npy"), y)

# Exact references of the integer ops (int64 sums: no overflow, no per-CPU kernel).
def conv_int(x, w, group=1, strides=(1, 1), pads=(0, 0, 0, 0)):
    """x [N,C,H,W], w [M,C/group,kh,kw], both int64 with the zero points already subtracted
    (so padding is 0, the zero point's value); dilation 1."""
    N, C, H, W = x.shape
    M, Cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    Ho, Wo = (xp.shape[2] - kh) // strides[0] + 1, (xp.shape[3] - kw) // strides[1] + 1
    y, Mg = np.zeros((N, M, Ho, Wo), np.int64), M // group
    for g in range(group):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * Cg:(g + 1) * Cg, i:i + strides[0] * Ho:strides[0], j:j + strides[1] * Wo:strides[1]]
                y[:, g * Mg:(g + 1) * Mg] += np.einsum("nchw,mc->nmhw", patch, w[g * Mg:(g + 1) * Mg, :, i, j])
    return y

def int32(acc):
    assert acc.min() >= -2**31 and acc.max() < 2**31, "the case overflows int32"
    return acc.astype(np.int32)

def requant(acc, mult, zp, dt):
    """QLinear*: saturate(round_half_even(float32(acc) * mult) + zp), all in float32 as the spec's formula."""
    v = np.rint(acc.astype(np.float32) * mult) + np.float32(zp)
    info = np.iinfo(dt)
    return np.clip(v, info.min, info.max).astype(dt)

I64 = lambda a: np.asarray(a).astype(np.int64)
def ref_matmul_integer(a, b, az, bz):
    return [int32(np.matmul(I64(a) - I64(az), I64(b) - I64(bz)))]
def ref_conv_integer(x, w, xz, **at):
    return [int32(conv_int(I64(x) - I64(xz), I64(w), **at))]
def ref_qlinear_conv(x, xs, xz, w, ws, wz, ys, yz, bias):
    acc = conv_int(I64(x) - I64(xz), I64(w) - I64(wz).reshape(-1, 1, 1, 1), pads=(1, 1, 1, 1)) + I64(bias).reshape(1, -1, 1, 1)
    mult = (np.float32(xs) * ws.astype(np.float32)) / np.float32(ys)
    return [requant(int32(acc), mult.reshape(1, -1, 1, 1), yz, np.uint8)]
def ref_qlinear_matmul(a, as_, az, b, bs, bz, ys, yz):
    acc = np.matmul(I64(a) - I64(az), I64(b) - I64(bz))
    return [requant(int32(acc), (np.float32(as_) * np.float32(bs)) / np.float32(ys), yz, np.uint8)]

X = (4, 16, 24, 24)  # a detector-head-sized activation
cases = {
 "sin": lambda: case("Sin", [("x", u(*X, lo=-40, hi=40))]),
 "cos": lambda: case("Cos", [("x", u(*X, lo=-40, hi=40))]),
 "tan": lambda: case("Tan", [("x", u(*X, lo=-1.4, hi=1.4))]),
 "asin": lambda: case("Asin", [("x", u(*X, lo=-1, hi=1))]),
 "acos": lambda: case("Acos", [("x", u(*X, lo=-1, hi=1))]),
 "atan": lambda: case("Atan", [("x", u(*X, lo=-50, hi=50))]),
 "sinh": lambda: case("Sinh", [("x", u(*X, lo=-10, hi=10))]),
 "cosh": lambda: case("Cosh", [("x", u(*X, lo=-10, hi=10))]),
 "asinh": lambda: case("Asinh", [("x", u(*X, lo=-100, hi=100))]),
 "acosh": lambda: case("Acosh", [("x", u(*X, lo=1, hi=100))]),
 "atanh": lambda: case("Atanh", [("x", u(*X, lo=-0.99, hi=0.99))]),
 "softsign": lambda: case("Softsign", [("x", u(*X))]),
 "celu": lambda: case("Celu", [("x", u(*X))], {"alpha": 0.7}),
 "thresholded_relu": lambda: case("ThresholdedRelu", [("x", u(*X))], {"alpha": 0.4}),
 "shrink": lambda: case("Shrink", [("x", u(*X))], {"lambd": 0.6, "bias": 0.2}),
 "round": lambda: case("Round", [("x", (rng.integers(-40, 40, X) * 0.25).astype(np.float32))]),
 "sign": lambda: case("Sign", [("x", (rng.integers(-2, 3, X)).astype(np.float32))]),
 "mod_int": lambda: case("Mod", [("a", rng.integers(-100, 100, X).astype(np.int32)), ("b", rng.choice([-7, -3, 5, 9], (1, 16, 1, 1)).astype(np.int32))]),
 "mod_fmod": lambda: case("Mod", [("a", u(*X, lo=-10, hi=10)), ("b", u(1, 16, 1, 24, lo=0.5, hi=3))], {"fmod": 1}),
 "greater_or_equal": lambda: case("GreaterOrEqual", [("a", u(*X)), ("b", u(1, 16, 1, 24))]),
 "less_or_equal_int": lambda: case("LessOrEqual", [("a", rng.integers(-5, 5, X).astype(np.int64)), ("b", rng.integers(-5, 5, (24,)).astype(np.int64))]),
 "and": lambda: case("And", [("a", rng.integers(0, 2, X).astype(np.bool_)), ("b", rng.integers(0, 2, (1, 16, 24, 1)).astype(np.bool_))]),
 "xor": lambda: case("Xor", [("a", rng.integers(0, 2, X).astype(np.bool_)), ("b", rng.integers(0, 2, X).astype(np.bool_))]),
 "where": lambda: case("Where", [("c", rng.integers(0, 2, (1, 1, 24, 24)).astype(np.bool_)), ("a", u(*X)), ("b", u(1, 16, 1, 1))]),
 "isinf": lambda: case("IsInf", [("x", np.where(rng.random(X) < 0.1, np.float32(np.inf), u(*X)) * np.where(rng.random(X) < 0.5, 1, -1).astype(np.float32))], {"detect_negative": 0}),
 "reduce_l1": lambda: case("ReduceL1", [("x", u(*X))], {"axes": [1, 3], "keepdims": 0}, tol=(1e-5, 1e-4)),
 "reduce_prod": lambda: case("ReduceProd", [("x", u(*X, lo=0.5, hi=1.5))], {"axes": [1]}, tol=(1e-6, 1e-4)),
 "reduce_sum_square": lambda: case("ReduceSumSquare", [("x", u(*X))], {"axes": [2, 3]}, tol=(1e-5, 1e-4)),
 "reduce_log_sum": lambda: case("ReduceLogSum", [("x", u(*X, lo=0.1, hi=2))], {"axes": [1]}, tol=(1e-5, 1e-4)),
 "reduce_log_sum_exp": lambda: case("ReduceLogSumExp", [("x", u(*X, lo=-20, hi=20))], {"axes": [3]}, tol=(1e-5, 1e-4)),
 "reduce_max_18": lambda: case("ReduceMax", [("x", u(*X))], {"keepdims": 0}, opset=18, consts=[("axes", np.array([0, 2], np.int64))], out_types=[T.FLOAT]),
 "argmax": lambda: case("ArgMax", [("x", u(*X))], {"axis": 1, "keepdims": 0}),
 "argmin_last": lambda: case("ArgMin", [("x", rng.integers(0, 4, X).astype(np.float32))], {"axis": 3, "select_last_index": 1}),
 "hardmax": lambda: case("Hardmax", [("x", u(*X))], {"axis": 1}),
 "lrn": lambda: case("LRN", [("x", u(*X))], {"size": 5, "alpha": 1e-3, "beta": 0.75, "bias": 2.0}, tol=(1e-6, 1e-4)),
 "mvn": lambda: case("MeanVarianceNormalization", [("x", u(*X))], tol=(1e-5, 1e-4)),
 "group_norm": lambda: case("GroupNormalization", [("x", u(*X)), ("s", u(4, lo=0.5, hi=2)), ("b", u(4))], {"num_groups": 4}, opset=18, tol=(1e-5, 1e-4), out_types=[T.FLOAT]),
 "mish": lambda: case("Mish", [("x", u(*X, lo=-20, hi=20))], opset=18, out_types=[T.FLOAT]),
 "bitwise_xor": lambda: case("BitwiseXor", [("a", rng.integers(-128, 128, X).astype(np.int8)), ("b", rng.integers(-128, 128, (24,)).astype(np.int8))], opset=18, out_types=[T.INT8]),
 "lp_norm": lambda: case("LpNormalization", [("x", u(*X))], {"axis": 1, "p": 2}, tol=(1e-6, 1e-5)),
 "cumsum": lambda: case("CumSum", [("x", u(*X))], {"exclusive": 1, "reverse": 1}, consts=[("axis", np.array(2, np.int64))], tol=(1e-5, 1e-4)),
 "trilu": lambda: case("Trilu", [("x", u(*X))], {"upper": 0}, opset=14, consts=[("k", np.array(-3, np.int64))]),
 "onehot": lambda: case("OneHot", [("i", rng.integers(-12, 12, (4, 50)).astype(np.int64))], {"axis": 1}, consts=[("depth", np.array(10, np.int64)), ("v", np.array([0.5, 2.0], np.float32))]),
 "eyelike": lambda: case("EyeLike", [("x", u(24, 30))], {"k": 2, "dtype": T.DOUBLE}),
 "det": lambda: case("Det", [("x", u(16, 5, 5))], tol=(1e-4, 1e-4)),
 "castlike_f64": lambda: case("CastLike", [("x", u(*X, lo=-1000, hi=1000)), ("like", np.zeros(1, np.float64))], opset=15),
 "cast_i8": lambda: case("Cast", [("x", u(*X, lo=-100, hi=100))], {"to": T.INT8}),
 "hardmax_opset11": lambda: case("Hardmax", [("x", u(*X))], {"axis": 2}, opset=11),
 "mvn_axes": lambda: case("MeanVarianceNormalization", [("x", u(*X))], {"axes": [1, 3]}, tol=(1e-5, 1e-4)),
 "bitshift": lambda: case("BitShift", [("a", rng.integers(0, 256, X).astype(np.uint8)), ("b", rng.integers(0, 8, (24,)).astype(np.uint8))], {"direction": "LEFT"}),
 "isnan": lambda: case("IsNaN", [("x", np.where(rng.random(X) < 0.2, np.float32(np.nan), u(*X)))]),
 "not": lambda: case("Not", [("x", rng.integers(0, 2, X).astype(np.bool_))]),
 "equal_nan": lambda: case("Equal", [("a", np.where(rng.random(X) < 0.2, np.float32(np.nan), rng.integers(0, 3, X).astype(np.float32))), ("b", rng.integers(0, 3, (24,)).astype(np.float32))]),
 "sign_int": lambda: case("Sign", [("x", rng.integers(-5, 5, X).astype(np.int32))]),
 "where_int64": lambda: case("Where", [("c", rng.integers(0, 2, (24,)).astype(np.bool_)), ("a", rng.integers(-9, 9, X).astype(np.int64)), ("b", rng.integers(-9, 9, (16, 1, 1)).astype(np.int64))]),
 "reduce_prod_int": lambda: case("ReduceProd", [("x", rng.integers(-2, 3, X).astype(np.int64))], {"axes": [3], "keepdims": 0}),
 "cumsum_int": lambda: case("CumSum", [("x", rng.integers(-100, 100, X).astype(np.int32))], consts=[("axis", np.array(-1, np.int32))]),
 "argmax_int": lambda: case("ArgMax", [("x", rng.integers(0, 5, X).astype(np.int32))], {"axis": 2, "select_last_index": 1}),
 "clip_int8": lambda: case("Clip", [("x", rng.integers(-128, 128, X).astype(np.int8))], consts=[("lo", np.array(-20, np.int8)), ("hi", np.array(30, np.int8))]),
 "add_uint8": lambda: case("Add", [("a", rng.integers(0, 256, X).astype(np.uint8)), ("b", rng.integers(0, 256, (24,)).astype(np.uint8))], opset=14),
 "reverse_sequence": lambda: case("ReverseSequence", [("x", u(30, 6, 5, 4)), ("l", rng.integers(0, 31, (6,)).astype(np.int64))], {"batch_axis": 1, "time_axis": 0}),
 "nll": lambda: case("NegativeLogLikelihoodLoss", [("x", u(8, 10, 6, 6)), ("t", rng.integers(0, 10, (8, 6, 6)).astype(np.int64)), ("w", u(10, lo=0.2, hi=1))], {"reduction": "mean"}, tol=(1e-5, 1e-4)),
 "sce": lambda: case("SoftmaxCrossEntropyLoss", [("x", u(8, 10, 6, 6)), ("t", np.where(rng.random((8, 6, 6)) < 0.1, -100, rng.integers(0, 10, (8, 6, 6))).astype(np.int64))], {"reduction": "none", "ignore_index": -100}, n_out=2, tol=(1e-5, 1e-4)),
 "dynamic_quantize": lambda: case("DynamicQuantizeLinear", [("x", u(*X))], n_out=3),
 "matmul_integer": lambda: case("MatMulInteger", [("a", rng.integers(0, 256, (2, 64, 96)).astype(np.uint8)), ("b", rng.integers(-128, 128, (96, 48)).astype(np.int8)), ("az", np.array(128, np.uint8)), ("bz", np.array(3, np.int8))], ref=ref_matmul_integer),
 "conv_integer": lambda: case("ConvInteger", [("x", rng.integers(0, 256, (2, 8, 20, 20)).astype(np.uint8)), ("w", rng.integers(0, 256, (16, 4, 3, 3)).astype(np.uint8)), ("xz", np.array(7, np.uint8))], {"group": 2, "strides": [2, 1], "pads": [1, 1, 1, 1]},
                                   ref=lambda x, w, xz: ref_conv_integer(x, w, xz, group=2, strides=(2, 1), pads=(1, 1, 1, 1))),
 "qlinear_conv": lambda: case("QLinearConv", [("x", rng.integers(0, 256, (2, 8, 20, 20)).astype(np.uint8)), ("xs", np.array(0.02, np.float32)), ("xz", np.array(120, np.uint8)), ("w", rng.integers(-127, 128, (16, 8, 3, 3)).astype(np.int8)), ("ws", u(16, lo=0.001, hi=0.01)), ("wz", np.zeros(16, np.int8)), ("ys", np.array(0.05, np.float32)), ("yz", np.array(128, np.uint8)), ("bias", rng.integers(-2000, 2000, 16).astype(np.int32))], {"pads": [1, 1, 1, 1]}, ref=ref_qlinear_conv),
 "qlinear_matmul": lambda: case("QLinearMatMul", [("a", rng.integers(0, 256, (64, 96)).astype(np.uint8)), ("as", np.array(0.02, np.float32)), ("az", np.array(120, np.uint8)), ("b", rng.integers(0, 256, (96, 48)).astype(np.uint8)), ("bs", np.array(0.01, np.float32)), ("bz", np.array(130, np.uint8)), ("ys", np.array(0.1, np.float32)), ("yz", np.array(128, np.uint8))], ref=ref_qlinear_matmul),
}
if name == "--list":
    print(" ".join(cases))
else:
    cases[name]()
PYEOF
}

# compare DIR: every output of the oracle (DIR/ref: numpy's exact one, else DIR/ort) against ptq's
cmp_outputs() {
  $PY - "$1" <<'PYEOF'
import sys, os, glob, numpy as np
d = sys.argv[1]
atol, rtol = map(float, open(os.path.join(d, "tol")).read().split())
n, oracle = 0, "ref" if os.path.isdir(os.path.join(d, "ref")) else "ort"
ORT = "numpy" if oracle == "ref" else "ORT"
for f in sorted(glob.glob(os.path.join(d, oracle, "*.npy"))):
    want = np.load(f)
    got = np.load(os.path.join(d, "ptq", os.path.basename(f)))
    if got.shape != want.shape: sys.exit(f"{os.path.basename(f)}: shape {got.shape}, {ORT} {want.shape}")
    if got.dtype != want.dtype: sys.exit(f"{os.path.basename(f)}: dtype {got.dtype}, {ORT} {want.dtype}")
    if np.issubdtype(want.dtype, np.floating):
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~((np.abs(g - w) <= atol + rtol * np.abs(w)) | (np.isnan(g) & np.isnan(w)) | (g == w))
    else:
        bad = got != want
    if bad.any():
        i = np.flatnonzero(bad)[0]
        sys.exit(f"{os.path.basename(f)}: {int(bad.sum())} of {want.size} differ, first at {i}: {got.ravel()[i]} vs {ORT} {want.ravel()[i]}")
    n += want.size
if n == 0: sys.exit(f"no output of {oracle}/ to compare")
print(f"{n} values agree with {ORT}")
PYEOF
}

run_case() {
  local c=$1 d=$TMP/$1 args=()
  gen "$c" || return 1
  for f in "$d"/in_*.npy; do n=$(basename "$f" .npy); args+=(--input "${n#in_}=$f"); done
  rm -rf "$d/ptq" "$d/ort"
  "$PTQ" run "$d/model.onnx" "${args[@]}" --output-dir "$d/ptq" >/dev/null || return 1
  [ -d "$d/ref" ] || $ORT "$d/model.onnx" "${args[@]}" --out-dir "$d/ort" >/dev/null || return 1
  cmp_outputs "$d"
}

if ! command -v node >/dev/null 2>&1 || [ ! -d "$ROOT/build/oracle/node_modules/onnxruntime-node" ]; then
  skip "ops against ONNX Runtime" "no node or onnxruntime-node (make deps)"
  finish
fi
for c in $(gen --list); do
  check "$c" run_case "$c"
done
finish
