"""perturb_bias.py IN.onnx OUT.onnx [SEED]: a copy of IN whose Conv biases are each moved by
one ulp, up or down at random (fixed seed). A change of the size that another summation
order makes in a float kernel: running ONNX Runtime on both shows how far a QDQ model's
output moves from last-bit float differences alone (bench/ort_sensitivity.sh)."""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    m = onnx.load(argv[1])
    rng = np.random.default_rng(int(argv[3]) if len(argv) == 4 else 7)
    biases = {n.input[2] for n in m.graph.node if n.op_type == "Conv" and len(n.input) > 2}
    moved = 0
    for t in m.graph.initializer:
        if t.name in biases:
            a = numpy_helper.to_array(t).astype(np.float32)
            away = np.where(rng.random(a.shape) < 0.5, np.inf, -np.inf).astype(np.float32)
            t.CopyFrom(numpy_helper.from_array(np.nextafter(a, away).astype(np.float32), t.name))
            moved += 1
    onnx.save(m, argv[2])
    print(f"{moved} Conv biases moved by one ulp")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
