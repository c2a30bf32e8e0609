#!/usr/bin/env bash
# ONNX reading beyond what the PaddleOCR models exercise: initializers in typed fields
# (float_data, int64_data, int32_data), external data files beside the model (and a
# location escaping the folder refused), doc strings, metadata and value_info kept by a
# round trip, and Gelu (newer than the node tests Debian ships) against numpy.
. "$(dirname "$0")/lib.sh"

$PY - "$TMP" <<'PYEOF'
import sys, math, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
x = helper.make_tensor_value_info("x", T.FLOAT, [2, 3])
y = helper.make_tensor_value_info("y", T.FLOAT, [2, 3])

def model(nodes, inits, opset=13, outputs=(y,), **kw):
    g = helper.make_graph(nodes, "g", [x], list(outputs), inits, doc_string="graph doc")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], doc_string="model doc", **kw)
    m.ir_version = 8
    return m

# typed fields: w in float_data, a Reshape shape in int64_data, a Cast from int32_data
w = helper.make_tensor("w", T.FLOAT, [2, 3], [0.5, -1.0, 2.0, 3.0, -0.25, 1.5])
shape = helper.make_tensor("shape", T.INT64, [2], [3, 2])
back = helper.make_tensor("back", T.INT64, [2], [2, 3])
i32 = helper.make_tensor("i32", T.INT32, [2, 3], [1, 2, 3, 4, 5, 6])
m = model([helper.make_node("Add", ["x", "w"], ["a"], name="add", doc_string="node doc"),
           helper.make_node("Reshape", ["a", "shape"], ["r"], name="reshape"),
           helper.make_node("Reshape", ["r", "back"], ["b"], name="reshape_back"),
           helper.make_node("Cast", ["i32"], ["f"], to=T.FLOAT, name="cast"),
           helper.make_node("Mul", ["b", "f"], ["y"], name="mul")], [w, shape, back, i32])
m.graph.value_info.append(helper.make_tensor_value_info("a", T.FLOAT, [2, 3]))
helper.set_model_props(m, {"author": "ptq tests", "purpose": "typed fields"})
onnx.save(m, f"{d}/typed.onnx")
xv = np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5
np.save(f"{d}/x.npy", xv)
np.save(f"{d}/typed.want.npy", ((xv + numpy_helper.to_array(w)) * np.arange(1, 7, dtype=np.float32).reshape(2, 3)).astype(np.float32))

# external data: the weight lives in a file beside the model
big = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
m = model([helper.make_node("Sub", ["x", "wx"], ["y"], name="sub")], [numpy_helper.from_array(big, "wx")])
onnx.save(m, f"{d}/external.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="external.bin",
          size_threshold=0)
np.save(f"{d}/external.want.npy", xv - big)
t = m.graph.initializer[0]
for e in t.external_data:
    if e.key == "location": e.value = "../escape.bin"
onnx.save(m, f"{d}/escape.onnx")

# Gelu (opset 20, both forms)
for approx in ("none", "tanh"):
    m = model([helper.make_node("Gelu", ["x"], ["y"], approximate=approx)], [], opset=20)
    onnx.save(m, f"{d}/gelu_{approx}.onnx")
    xs = xv.astype(np.float64)
    if approx == "none":
        want = 0.5 * xs * (1 + np.vectorize(math.erf)(xs / math.sqrt(2)))
    else:
        want = 0.5 * xs * (1 + np.tanh(math.sqrt(2 / math.pi) * (xs + 0.044715 * xs ** 3)))
    np.save(f"{d}/gelu_{approx}.want.npy", want.astype(np.float32))

# control flow and data-dependent shapes: an If on a run-time condition whose branches read
# x and an initializer of the enclosing graph; a Loop whose body holds an If (two levels of
# outer-scope names) and stacks a scan output; NonZero and Compress of x > 0
xi = helper.make_tensor_value_info("x", T.FLOAT, [2, 3])
outs = [helper.make_tensor_value_info(n, T.FLOAT, sh) for n, sh in (("y_if", [2, 3]), ("y_loop", [2, 3]),
                                                                     ("y_scan", [3]), ("y_comp", ["n"]))]
outs.append(helper.make_tensor_value_info("y_nz", T.INT64, [2, "n"]))
w = numpy_helper.from_array(np.array([[0.5, -1.0, 2.0], [3.0, -0.25, 1.5]], np.float32), "w")
then_g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["t_out"])], "then", [],
                           [helper.make_tensor_value_info("t_out", T.FLOAT, [2, 3])])
else_g = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["e_out"])], "else", [],
                           [helper.make_tensor_value_info("e_out", T.FLOAT, [2, 3])])
inner_then = helper.make_graph([helper.make_node("Mul", ["acc_in", "x"], ["it_out"])], "inner_then", [],
                               [helper.make_tensor_value_info("it_out", T.FLOAT, [2, 3])])
inner_else = helper.make_graph([helper.make_node("Add", ["acc_in", "x"], ["ie_out"])], "inner_else", [],
                               [helper.make_tensor_value_info("ie_out", T.FLOAT, [2, 3])])
body = helper.make_graph(
    [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
     helper.make_node("Cast", ["i"], ["i_f"], to=T.FLOAT),
     helper.make_node("Less", ["i_f", "one_f"], ["first"]),
     helper.make_node("If", ["first"], ["acc_out"], then_branch=inner_then, else_branch=inner_else),
     helper.make_node("ReduceSum", ["acc_out"], ["step_sum"], keepdims=0)],
    "body",
    [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
     helper.make_tensor_value_info("acc_in", T.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("acc_out", T.FLOAT, [2, 3]),
     helper.make_tensor_value_info("step_sum", T.FLOAT, [])],
    [numpy_helper.from_array(np.array(1.0, np.float32), "one_f")])
nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y_if"], then_branch=then_g, else_branch=else_g, name="if"),
         helper.make_node("Loop", ["trip", "", "x"], ["y_loop", "y_scan"], body=body, name="loop"),
         helper.make_node("Greater", ["x", "zero"], ["pos"]),
         helper.make_node("NonZero", ["pos"], ["y_nz"], name="nonzero"),
         helper.make_node("Reshape", ["pos", "flat"], ["pos_flat"]),
         helper.make_node("Compress", ["x", "pos_flat"], ["y_comp"], name="compress")]
inits = [w, numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
         numpy_helper.from_array(np.array(3, np.int64), "trip"),
         numpy_helper.from_array(np.array([-1], np.int64), "flat")]
g = helper.make_graph(nodes, "control", [xi], outs, inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, f"{d}/control.onnx")
wv = numpy_helper.to_array(w)
for name, xc in (("pos", xv + 0.3), ("neg", -xv - 1.0)):
    np.save(f"{d}/control_{name}.x.npy", xc.astype(np.float32))
    want = {"y_if": xc + wv if xc.sum() > 0 else xc - wv}
    acc, sums = xc.copy(), []
    for i in range(3):
        acc = acc * xc if i < 1 else acc + xc
        sums.append(acc.sum(dtype=np.float32))
    want.update(y_loop=acc, y_scan=np.array(sums, np.float32), y_nz=np.array(np.nonzero(xc > 0), np.int64),
                y_comp=xc.reshape(-1)[(xc > 0).reshape(-1)])
    for k, v in want.items():
        np.save(f"{d}/control_{name}.{k}.want.npy", np.asarray(v))
PYEOF

for c in pos neg; do
  check "control flow, $c: If, Loop with a nested If, NonZero, Compress equal numpy" bash -c "rm -rf '$TMP/control_$c' &&
      '$PTQ' run '$TMP/control.onnx' --input '$TMP/control_$c.x.npy' --output-dir '$TMP/control_$c' &&
      for o in y_if y_loop y_scan y_nz y_comp; do
        $PY '$ROOT/tests/oracle/compare.py' '$TMP/control_$c/'\$o.npy '$TMP/control_$c.'\$o.want.npy --cos 0.999999 --rel 1e-6 || exit 1; done"
done
check "round trip writes subgraphs back as they were" bash -c "'$PTQ' convert '$TMP/control.onnx' -o '$TMP/control.rt.onnx' &&
    $PY -c \"
import onnx
a, b = onnx.load('$TMP/control.onnx'), onnx.load('$TMP/control.rt.onnx')
onnx.checker.check_model(b)
assert [n.SerializeToString() for n in a.graph.node] == [n.SerializeToString() for n in b.graph.node], 'nodes differ'
print('subgraph attributes byte-identical')\""

for c in typed external gelu_none gelu_tanh; do
  check "$c: outputs equal numpy" bash -c "'$PTQ' run '$TMP/$c.onnx' --input '$TMP/x.npy' --output '$TMP/$c.got.npy' &&
      $PY '$ROOT/tests/oracle/compare.py' '$TMP/$c.got.npy' '$TMP/$c.want.npy' --cos 0.999999 --rel 1e-6"
done
check "external data escaping the model's folder is refused" bash -c "! '$PTQ' run '$TMP/escape.onnx' --input '$TMP/x.npy' 2>'$TMP/escape.err' &&
    grep -q 'leaves the model' '$TMP/escape.err' && cat '$TMP/escape.err'"
check "round trip keeps doc strings, metadata, value_info and typed initializer values" bash -c "'$PTQ' convert '$TMP/typed.onnx' -o '$TMP/typed.rt.onnx' &&
    $PY -c \"
import onnx, onnx.numpy_helper as nh
a, b = onnx.load('$TMP/typed.onnx'), onnx.load('$TMP/typed.rt.onnx')
onnx.checker.check_model(b)
assert b.doc_string == 'model doc' and b.graph.doc_string == 'graph doc', 'doc strings'
assert b.graph.node[0].doc_string == 'node doc', 'node doc string'
assert {p.key: p.value for p in b.metadata_props} == {'author': 'ptq tests', 'purpose': 'typed fields'}, 'metadata'
assert [v.name for v in b.graph.value_info] == ['a'] and b.graph.value_info[0] == a.graph.value_info[0], 'value_info'
for ta, tb in zip(a.graph.initializer, b.graph.initializer):
    assert ta.name == tb.name and (nh.to_array(ta) == nh.to_array(tb)).all(), ta.name
print('kept')\""
finish
