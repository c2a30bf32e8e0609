"""qdq_weights_only.py IN.qdq.onnx OUT.onnx: the QDQ model with its activation
QuantizeLinear/DequantizeLinear pairs removed and its weight DequantizeLinear nodes kept:
the network a Q/DQ-free translation must compute (weights already quantized, activations
float), for ONNX Runtime to check `ptq translate` against (tests/e2e/translate.sh)."""
import sys

import onnx


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    m = onnx.load(argv[1])
    g = m.graph
    inits = {t.name for t in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    rename, drop = {}, set()
    for n in g.node:
        if n.op_type == "DequantizeLinear" and n.input[0] not in inits:
            q = prod[n.input[0]]
            if q.input[0] in inits:  # float weight -> Q -> DQ: a weight, kept
                continue
            rename[n.output[0]] = q.input[0]
            drop.update([id(n), id(q)])
    keep = [n for n in g.node if id(n) not in drop]
    for n in keep:
        for i, v in enumerate(n.input):
            if v in rename:
                n.input[i] = rename[v]
    del g.node[:]
    g.node.extend(keep)
    onnx.save(m, argv[2])
    print(f"{len(rename)} activation pairs removed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
