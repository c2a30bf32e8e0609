"""variant_check.py: the checks of a QDQ model ptq wrote for a model as shipped (scripts/variants.py).

  variant_check.py input  VARIANT DUMP.npy OUT_DIR [--u8 DUMP_U8.npy]
      the variant's inputs from ptq preprocess --dump of the float32 original's preprocessing:
      OUT_DIR/in_K.npy per image (float16 for fp16, the channel mean for gray, the uint8 pixels of
      DUMP_U8 (dumped NHWC with scale 1, mean 0, std 1) for uint8-nhwc, the dump itself otherwise)
  variant_check.py check  FP32.onnx QDQ.onnx OUT_DIR
      prints key<TAB>value lines (bench/variants.sh's result file):
        weights   n/N: of the N Conv/ConvTranspose/Gemm/MatMul nodes of FP32.onnx with a constant
                  weight (an initializer, or one through Cast/Identity), how many in QDQ.onnx read
                  theirs from a DequantizeLinear of an int8 initializer (through Cast/Identity)
        checker   ok, or onnx.checker's first line on QDQ.onnx (full_check)
        interface ok, or the first graph input/output whose name, type or shape QDQ.onnx changed
        cosine    the median over OUT_DIR/in_K.npy of the cosine of ONNX Runtime's output of QDQ.onnx
                  to its output of FP32.onnx (tests/oracle/ort_batch.js, the first output): the zoo's
                  networks are untrained, and on one photo (bw_text.png: black text on white) their
                  output is near-degenerate, its cosine noise (0.54-0.62 for mobilenet_v3_large
                  whatever the variant, against 0.989-0.998 on the other photos)
        worst     the lowest of those cosines (for the record)
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEIGHTED = {"Conv": (1,), "ConvTranspose": (1,), "Gemm": (1,), "MatMul": (0, 1)}
PASS = ("Cast", "Identity")


def make_inputs(variant, dump, out_dir, u8=None):
    x = np.load(dump)
    if variant == "uint8-nhwc":
        if u8 is None:
            sys.exit("variant_check.py: uint8-nhwc needs --u8 DUMP_U8.npy")
        p = np.load(u8)
        if p.shape[-1] != 3 or np.any(p != np.rint(p)) or p.min() < 0 or p.max() > 255:
            sys.exit(f"variant_check.py: {u8} is not NHWC pixels 0..255 (shape {p.shape})")
        x = p.astype(np.uint8)
    elif variant == "fp16":
        x = x.astype(np.float16)
    elif variant == "gray":
        x = x.mean(axis=1, keepdims=True).astype(np.float32)
    os.makedirs(out_dir, exist_ok=True)
    for k in range(x.shape[0]):
        np.save(os.path.join(out_dir, f"in_{k}.npy"), np.ascontiguousarray(x[k:k + 1]))
    print(f"{x.shape[0]} inputs {x.dtype} {list(x.shape[1:])}")


def producers(g):
    return {o: n for n in g.node for o in n.output}


def source(g, name, prod):
    """The node that makes name once Cast/Identity are passed (None for an initializer or input)."""
    n = prod.get(name)
    while n is not None and n.op_type in PASS:
        name = n.input[0]
        n = prod.get(name)
    return n, name


def weights(fp32, qdq):
    inits = {t.name for t in fp32.graph.initializer}
    prod = producers(fp32.graph)
    total = 0
    for n in fp32.graph.node:
        for k in WEIGHTED.get(n.op_type, ()):
            if k < len(n.input):
                s, nm = source(fp32.graph, n.input[k], prod)
                if (s is None and nm in inits) or (s is not None and s.op_type == "Constant"):
                    total += 1
                    break
    q_inits = {t.name: t for t in qdq.graph.initializer}
    prod = producers(qdq.graph)
    done = 0
    for n in qdq.graph.node:
        for k in WEIGHTED.get(n.op_type, ()):
            if k < len(n.input):
                s, _ = source(qdq.graph, n.input[k], prod)
                if s is not None and s.op_type == "DequantizeLinear":
                    w = q_inits.get(s.input[0])
                    if w is not None and w.data_type == TensorProto.INT8:
                        done += 1
                        break
    return done, total


def graph_io(m):
    inits = {t.name for t in m.graph.initializer}
    out = []
    for kind, vs in (("input", [i for i in m.graph.input if i.name not in inits]), ("output", m.graph.output)):
        for v in vs:
            tt = v.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
            out.append((kind, v.name, TensorProto.DataType.Name(tt.elem_type), dims))
    return out


def check(fp32_path, qdq_path, out_dir):
    fp32 = onnx.load(fp32_path)
    qdq = onnx.load(qdq_path)
    n, total = weights(fp32, qdq)
    print(f"weights\t{n}/{total}")
    try:
        onnx.checker.check_model(qdq, full_check=True)
        print("checker\tok")
    except Exception as e:  # noqa: BLE001
        print("checker\t" + (str(e).strip().splitlines() or ["?"])[0][:200])
    a, b = graph_io(fp32), graph_io(qdq)
    if a == b:
        print("interface\tok")
    else:
        diff = next((f"{x[0]} {x[1]} {x[2]} {x[3]} -> " + (f"{y[1]} {y[2]} {y[3]}" if y else "missing")
                     for x, y in zip(a + [None] * len(b), b + [None] * len(a)) if x != y and x), "extra graph io")
        print("interface\t" + diff)
    ins = sorted(f for f in os.listdir(out_dir) if f.startswith("in_") and f.endswith(".npy"))
    lists = {}
    for tag in ("fp32", "qdq"):
        lp = os.path.join(out_dir, f"{tag}.list")
        with open(lp, "w") as fh:
            for f in ins:
                fh.write(f"{os.path.join(out_dir, f)} {os.path.join(out_dir, tag + '_' + f[3:])}\n")
        lists[tag] = lp
    for tag, model in (("fp32", fp32_path), ("qdq", qdq_path)):
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "oracle", "ort_batch.js"), model, lists[tag]],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"cosine\tONNX Runtime ({tag}): " + (r.stderr.strip().splitlines() or ["?"])[-1][:200])
            return
    cos = []
    for f in ins:
        x = np.load(os.path.join(out_dir, "fp32_" + f[3:])).astype(np.float64).ravel()
        y = np.load(os.path.join(out_dir, "qdq_" + f[3:])).astype(np.float64).ravel()
        if x.shape != y.shape:
            print(f"cosine\tshape {y.shape} != FP32's {x.shape}")
            return
        den = np.sqrt((x @ x) * (y @ y))
        cos.append(float(x @ y / den) if den > 0 else float(np.array_equal(x, y)))
    print(f"cosine\t{float(np.median(cos)):.6f}")
    print(f"worst\t{min(cos):.6f}")


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "input":
        make_inputs(a[1], a[2], a[3], a[5] if len(a) >= 6 and a[4] == "--u8" else None)
    elif len(a) == 4 and a[0] == "check":
        check(a[1], a[2], a[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
