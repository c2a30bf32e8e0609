#!/usr/bin/env bash
# Sensitivity by the output metric (issue 13 item 4, accuracy-algorithms.md): a planted harmful
# tensor is found first. A small classifier is built here with one activation made harmful
# without changing the FP32 function: conv1's output channel 0 is scaled by 1000 and conv2's
# weights reading it by 1/1000 (ReLU between them is positively homogeneous), so per-tensor
# INT8 of that activation spends its range on one channel and flattens the others. The
# auto-exclusion of `ptq compare` must rank conv2 (the consumer of the planted tensor) most
# harmful, exclude it, and reach the target; without the plant nothing is that harmful.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
PHOTOS=$ROOT/build/photos
ls "$PHOTOS"/*.png | LC_ALL=C sort | head -n 8 > "$TMP/calib.list"
ls "$PHOTOS"/*.png | LC_ALL=C sort | tail -n 8 > "$TMP/eval.list"

$PY - "$TMP" <<'PYEOF' || { echo "FAIL building the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
rng = np.random.default_rng(7)
def model(plant):
    w1 = rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1
    w3 = rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1
    fc = rng.standard_normal((10, 16)).astype(np.float32)
    b1 = np.full(16, 0.1, np.float32)
    if plant:
        w1[0] *= 1000; b1[0] *= 1000; w2[:, 0] /= 1000
    inits = [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (w3, "w3"), (fc, "fc")]]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c3"], ["r3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc", transB=1),
    ]
    g = helper.make_graph(nodes, "planted", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    return m
rng = np.random.default_rng(7); onnx.save(model(False), f"{d}/plain.onnx")
rng = np.random.default_rng(7); onnx.save(model(True), f"{d}/planted.onnx")
PYEOF

run() { # model out
  "$PTQ" compare "$TMP/$1.onnx" --images "$TMP/calib.list" --eval-images "$TMP/eval.list" --preset imagenet-torchvision \
    --size 32x32 --shorter 32 --methods max --metric cosine --target 0.9999 --exclusions "$TMP/$1.excl" --threads 2 >"$TMP/$1.out" 2>"$TMP/$1.err"
}
check "compare + exclusion search on the planted model" run planted
check "the planted tensor's consumer ranks most harmful" sh -c "grep -A1 'most harmful first' '$TMP/planted.err' | tail -1 | grep -q ' conv2 '"
check "its gain from float is the largest by far" $PY - "$TMP/planted.err" <<'PYEOF'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"ptq:\s+\S+\s+float alone", l)]
gains = [float(re.search(r"float alone ([-+0-9.e]+)", l).group(1)) for l in rows]
assert rows and " conv2 " in rows[0] and gains[0] > 0, rows
assert all(g < gains[0] / 2 for g in gains[1:]), gains
print(f"conv2 gain {gains[0]:+.6f}, next {max(gains[1:], default=0):+.6f}")
PYEOF
check "the exclusion contains conv2 and the target is reached" sh -c "grep -qx conv2 '$TMP/planted.excl' && grep -q 'reach cosine' '$TMP/planted.out'"
check "compare + exclusion search on the plain model" run plain
check "without the plant conv2 is not excluded" sh -c "! grep -qx conv2 '$TMP/plain.excl' 2>/dev/null"
finish
