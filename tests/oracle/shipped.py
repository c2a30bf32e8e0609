"""shipped.py: models as users ship them, and what their preprocessing means (test oracle only).

  shipped.py variant IN.onnx OUT.onnx size:HxW|int64|rgba|rank3
  shipped.py ref torchvision|torchvision-gray PHOTOS OUT.npy --shorter S --size N [--limit K] [--nhwc] [--scale V]
  shipped.py ref cv-gray PHOTOS OUT.npy --size WxH [--limit K]     cv2.cvtColor(BGR2GRAY) + cv2.resize linear, x1
  shipped.py ref pil-gray PHOTOS OUT.npy --size WxH [--limit K]    PIL convert("L") + resize(BILINEAR), x1
  shipped.py same A.npy B.npy                                       the same shape and values, exactly
  shipped.py ortcos FP32.onnx QDQ.onnx X.npy MIN [--uint8]          ONNX Runtime (tests/oracle/ort.js) runs both
        models on X (cast to uint8 with --uint8) image by image; every output's cosine over all images >= MIN

Variants (python3-onnx; uint8-nhwc, gray, ultralytics-meta: scripts/variants.py):
  size:HxW     the input's H and W set, a Resize's baked-in output size scaled with it (other declared shapes cleared)
  int64, rgba, rank3  an input ptq cannot feed: int64 pixels, 4 channels, [?, ?, ?]"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def first_input(m):
    inits = {i.name for i in m.graph.initializer}
    return next(i for i in m.graph.input if i.name not in inits)


def dims(vi):
    return [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]


def clear_shapes(m, keep):
    del m.graph.value_info[:]
    for o in m.graph.output:
        for k, d in enumerate(o.type.tensor_type.shape.dim):
            if k > 0 or not keep:
                d.Clear()
                d.dim_param = "d%d" % k


def variant(src, dst, v):
    m = onnx.load(src)
    x = first_input(m)
    n, c, h, w = dims(x)
    if v.startswith("size:"):
        hh, ww = (int(t) for t in v[5:].split("x"))
        x.type.tensor_type.shape.dim[2].dim_value = hh
        x.type.tensor_type.shape.dim[3].dim_value = ww
        # sizes the exporter baked in (a Resize's sizes: Concat(Shape[:2], Constant [h/k, w/k])) follow
        made = {o: nd for nd in m.graph.node for o in nd.output}
        for rs in (nd for nd in m.graph.node if nd.op_type == "Resize" and len(nd.input) == 4):
            cat = made.get(rs.input[3])
            for i in (cat.input if cat is not None and cat.op_type == "Concat" else []):
                k = made.get(i)
                if k is None or k.op_type != "Constant":
                    continue
                t = k.attribute[0].t
                v = numpy_helper.to_array(t)
                if v.shape == (2,) and (v[0] * hh) % h == 0 and (v[1] * ww) % w == 0:
                    t.CopyFrom(numpy_helper.from_array((v * np.array([hh, ww]) // np.array([h, w])).astype(v.dtype)))
        clear_shapes(m, True)
    elif v in ("int64", "rgba", "rank3"):  # a tiny conv model with an input ptq cannot feed
        cin = 4 if v == "rgba" else 3
        shape = {"int64": [1, 3, 32, 32], "rgba": [1, 4, 32, 32], "rank3": ["a", "b", "c"]}[v]
        dt = TensorProto.INT64 if v == "int64" else TensorProto.FLOAT
        nodes = [helper.make_node("Conv", ["xf" if v == "int64" else "x", "w"], ["y"])]
        if v == "int64":
            nodes.insert(0, helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT))
        g = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", dt, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones((2, cin, 3, 3), np.float32), "w")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    else:
        sys.exit("unknown variant " + v)
    onnx.save(m, dst)


def photos(root, limit):
    import preprocess_ref
    fs = [p for p in preprocess_ref.files(root) if preprocess_ref.decodes(p)]
    return fs[:limit] if limit else fs


def arg(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def ref(kind, root, out, args):
    from PIL import Image
    import cv2
    limit = int(arg(args, "--limit", "0"))
    xs = []
    for p in photos(root, limit):
        if kind.startswith("torchvision"):
            shorter, size = int(arg(args, "--shorter")), int(arg(args, "--size"))
            scale = float(arg(args, "--scale", str(1 / 255)))
            gray = kind.endswith("gray")
            im = Image.open(p).convert("L" if gray else "RGB")
            w, h = im.size
            nw, nh = (shorter, int(shorter * h / w)) if w <= h else (int(shorter * w / h), shorter)
            im = im.resize((nw, nh), Image.BILINEAR)
            top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
            a = np.asarray(im)[top:top + size, left:left + size]
            a = a.reshape(size, size, -1).astype(np.float32) * np.float32(scale)
            if scale != 1:
                mean = np.float32(np.mean(np.float32(MEAN))) if gray else np.array(MEAN, np.float32)
                std = np.float32(np.mean(np.float32(STD))) if gray else np.array(STD, np.float32)
                a = (a - mean) / std
            xs.append(a if "--nhwc" in args else a.transpose(2, 0, 1))
        else:
            W, H = (int(t) for t in arg(args, "--size").split("x"))
            if kind == "cv-gray":
                g = cv2.cvtColor(cv2.imread(p, cv2.IMREAD_COLOR), cv2.COLOR_BGR2GRAY)
                g = cv2.resize(g, (W, H), interpolation=cv2.INTER_NEAREST if "--nearest" in args else cv2.INTER_LINEAR)
            else:
                g = np.asarray(Image.open(p).convert("L").resize((W, H), Image.BILINEAR))
            xs.append(g.astype(np.float32)[None])
    np.save(out, np.stack(xs))


def same(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    if a.shape != b.shape:
        sys.exit("shape %s, the reference %s" % (a.shape, b.shape))
    bad = int((a != b).sum())
    print("%s: %d values, %d differ (max %g)" % (a.shape, a.size, bad, float(np.abs(a - b).max()) if a.size else 0))
    sys.exit(0 if bad == 0 else 1)


def ortcos(fp32, qdq, x_path, lo, u8):
    import subprocess
    import tempfile
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    x = np.load(x_path)
    if u8:
        assert np.all(x == np.round(x)) and x.min() >= 0 and x.max() <= 255, "not uint8 pixels"
        x = x.astype(np.uint8)
    name = first_input(onnx.load(fp32)).name
    outs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(len(x)):
            np.save(os.path.join(tmp, "x.npy"), x[i:i + 1])
            for tag, model in (("a", fp32), ("b", qdq)):
                d = os.path.join(tmp, tag)
                subprocess.run(["node", os.path.join(root, "tests/oracle/ort.js"), model, "--input",
                                "%s=%s" % (name, os.path.join(tmp, "x.npy")), "--out-dir", d], check=True,
                               stdout=subprocess.DEVNULL)
                for f in sorted(os.listdir(d)):
                    outs.setdefault((tag, f), []).append(np.load(os.path.join(d, f)).astype(np.float64).ravel())
    worst = 1.0
    for (tag, f), a in outs.items():
        if tag != "a":
            continue
        a, b = np.concatenate(a), np.concatenate(outs[("b", f)])
        c = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        print("%s: cosine %.4f over %d images (at least %s)" % (f, c, len(x), lo))
        worst = min(worst, c)
    sys.exit(0 if worst >= float(lo) else 1)


if __name__ == "__main__":
    if sys.argv[1] == "variant":
        variant(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "ref":
        ref(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "ortcos":
        ortcos(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], "--uint8" in sys.argv[6:])
    else:
        sys.exit(__doc__)
