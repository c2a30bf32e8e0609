"""perturb_weights.py IN.onnx OUT.onnx MODE X [SEED]: a copy of IN whose Conv, Gemm and MatMul
constant weights (those ptq quantizes; biases, normalisations and the rest untouched) are
perturbed, to see how much error a model's task tolerates in its weights alone
(bench/weight_noise.sh):

  mantissa B   every weight rounded to B significant bits (relative error <= 2^-B); B = 8
               is bfloat16's precision, 11 float16's
  int8 F       per output channel, uniform noise of F int8 steps peak to peak (step = the
               channel's max |w| / 127, as ptq's per-channel weight scales): F = 1 has the
               size and distribution of nearest rounding's error, without its correlations
  nearest B    per output channel, rounded to the nearest of the symmetric B-bit levels
               (step max |w| / (2^(B-1) - 1)): B = 8 is ptq's int8 weights with nearest
               rounding"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main(argv):
    if len(argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        return 2
    m = onnx.load(argv[1])
    mode, x = argv[3], float(argv[4])
    if mode not in ("mantissa", "int8", "nearest"):
        print(f"perturb_weights.py: unknown mode {mode!r}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(int(argv[5]) if len(argv) == 6 else 0)
    tensors = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            tensors[n.output[0]] = n.attribute[0].t
    moved, done = 0, set()
    for n in m.graph.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul") or len(n.input) < 2 or n.input[1] not in tensors:
            continue
        if n.input[1] in done:
            continue
        done.add(n.input[1])
        t = tensors[n.input[1]]
        w = numpy_helper.to_array(t).astype(np.float32)
        if w.dtype != np.float32 or w.ndim < 2:
            continue
        if mode == "mantissa":
            f, e = np.frexp(w)
            v = np.ldexp(np.round(f * 2.0 ** x) / 2.0 ** x, e)
        else:
            # output channels: Conv's axis 0, MatMul's last axis, Gemm's by transB
            trans_b = any(a.name == "transB" and a.i for a in n.attribute)
            axis = 0 if n.op_type == "Conv" or trans_b else w.ndim - 1
            wm = np.moveaxis(w, axis, 0)
            levels = 127.0 if mode == "int8" else 2.0 ** (x - 1) - 1
            step = np.abs(wm).reshape(wm.shape[0], -1).max(1) / levels
            step = step.reshape((-1,) + (1,) * (w.ndim - 1))
            if mode == "int8":
                v = wm + rng.uniform(-0.5, 0.5, wm.shape) * step * x
            else:
                v = np.round(wm / np.where(step > 0, step, 1)) * step
            v = np.moveaxis(v, 0, axis)
        t.CopyFrom(numpy_helper.from_array(v.astype(np.float32), t.name))
        moved += 1
    onnx.save(m, argv[2])
    print(f"{moved} weights perturbed ({mode} {x:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
