"""add_outputs.py IN.onnx OUT.onnx NAMES: a copy of IN whose graph also outputs the listed
intermediate tensors, so that ONNX Runtime (tests/oracle/ort.js) returns them: an oracle of
ptq's activations.
  NAMES is NAME[,NAME...], @FILE (one name per line) or --all-float (every float tensor a
  node produces).
Types come from the model's value_info or onnx shape inference; a tensor whose type is
known only from neither is declared float32 of unknown shape. The model's own outputs stay
first, in order; each added name appears once. Prints one line per name that could not be
added ("missing NAME: reason") on stdout and a summary on stderr; exits 1 if a listed name
is produced by no node (and is not a graph input or initializer), 2 on a usage error."""
import sys

import onnx
from onnx import shape_inference

FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


def main(argv):
    if len(argv) != 4:
        sys.stderr.write("usage: add_outputs.py IN.onnx OUT.onnx NAME[,NAME...]|@FILE|--all-float\n")
        return 2
    src, dst, spec = argv[1], argv[2], argv[3]
    m = onnx.load(src)
    g = m.graph
    try:
        inferred = shape_inference.infer_shapes(m, strict_mode=False).graph.value_info
    except Exception:  # inference is a convenience: fall back to the declared types
        inferred = []
    types = {v.name: v for v in list(inferred) + list(g.value_info) + list(g.output)}
    produced = [o for n in g.node for o in n.output if o]
    inputs = {i.name for i in g.input} | {t.name for t in g.initializer}
    have = {o.name for o in g.output}

    def elem(n):
        v = types.get(n)
        return v.type.tensor_type.elem_type if v is not None and v.type.HasField("tensor_type") else 0

    if spec == "--all-float":
        names = [n for n in produced if elem(n) in FLOATS]
    elif spec.startswith("@"):
        names = [l.strip() for l in open(spec[1:]) if l.strip()]
    else:
        names = [n for n in spec.split(",") if n]
    added, missing, bad = 0, 0, 0
    pset = set(produced)
    for n in names:
        if n in have:
            continue
        if n not in pset:
            if n in inputs:
                print(f"missing {n}: a graph input or initializer, not a node output")
                missing += 1
            else:
                sys.stderr.write(f"add_outputs.py: {src}: no node produces tensor '{n}'\n")
                bad += 1
            continue
        if elem(n):
            v = onnx.ValueInfoProto()
            v.CopyFrom(types[n])
        else:
            v = onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
        g.output.append(v)
        have.add(n)
        added += 1
    onnx.save(m, dst)
    sys.stderr.write(f"add_outputs.py: {added} outputs added, {missing} not addable\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
