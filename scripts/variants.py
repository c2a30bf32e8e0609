#!/usr/bin/python3
"""variants.py: derives a model as users ship it from a float32 zoo export (scripts/zoo.py).

  scripts/variants.py IN.onnx OUT.onnx --variant V [--mean a,b,c --std a,b,c] [--scale S] [--size HxW] [--verify]

IN is a float32 model with one [N, 3, H, W] image input (build/zoo/NAME.opN.onnx; its .json
beside it names the task and ptq's preset). Variants:
  fp16-weights      every float32 initializer stored as float16, a Cast(to=FLOAT) in front of its
                    readers (the graph still computes in float32)
  fp16              float16 end to end: graph inputs and outputs, value_info, initializers, Constant
                    and ConstantOfShape values, Cast(to=FLOAT) become float16 (as onnxconverter_common's
                    convert_float_to_float16 with keep_io_types=False); Resize's roi and scales stay
                    float32 as the op requires, and so do float tensors computed from shapes
  uint8-nhwc        input [N, H, W, 3] uint8; in the graph Cast(to=FLOAT) -> Transpose(0,3,1,2) ->
                    Mul(scale) -> Sub(mean) -> Div(std) in front of the network (a Sub of zeros or a
                    Div by ones is left out, as exporters fold them)
  gray              input [N, 1, H, W]: the first Conv's weights summed over its 3 input channels, so
                    gray(x) == original(x repeated over 3 channels)
  dynamic-hw        the input's H and W symbolic ('height', 'width'), the outputs' dims that follow them
                    too; value_info re-inferred (none contradicts the symbolic input)
  opset11           onnx.version_converter down to opset 11; where it has no down adapter (onnx 1.12
                    stops at Relu 13 -> 12) the ops whose opset 11 form differs are rewritten by hand
  ultralytics-meta  metadata_props as Ultralytics' ONNX export writes them (ultralytics/engine/exporter.py:
                    description, author, date, version, license, docs, stride, task, batch, imgsz, names;
                    each value str() of the Python object: imgsz "[H, W]", names "{0: 'person', ...}")
--mean/--std/--scale: the normalisation uint8-nhwc puts in the graph; by default what the .json's
preset implies (imagenet-*: 1/255, ImageNet mean and std; yolo-*: 1/255, 0, 1).
--size HxW: the imgsz ultralytics-meta records (default the model's H, W).
--verify: ONNX Runtime (tests/oracle/ort.js) runs IN and OUT on the export's traced photo
(NAME.opN.ref/images.npy, or a fixed-seed random input), converted for the variant, and the script
asserts OUT computes what IN computes: cosine >= 0.999 for fp16 and fp16-weights, otherwise
max |diff| <= 1e-4 * (1 + max |ref|). Every variant passes onnx.checker.check_model(full_check=True).
Only python3-onnx and numpy (Debian's /usr/bin/python3).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("fp16-weights", "fp16", "uint8-nhwc", "gray", "dynamic-hw", "opset11", "ultralytics-meta")
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16

COCO = ["person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
        "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
        "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
        "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
        "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
        "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
        "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard",
        "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase",
        "scissors", "teddy bear", "hair drier", "toothbrush"]
VOC = ["background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
       "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor"]


def fail(msg):
    sys.exit(f"variants.py: {msg}")


def meta_for(path):
    """The zoo's .json beside IN.onnx (NAME.opN.json), or {}."""
    p = os.path.splitext(path)[0] + ".json"
    if os.path.exists(p):
        with open(p) as fh:
            return json.load(fh)
    return {}


def image_input(m):
    """The graph's one non-initializer input: (ValueInfoProto, [N, C, H, W] dims as int or str)."""
    inits = {t.name for t in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    if len(ins) != 1:
        fail(f"expected one graph input, found {len(ins)} ({', '.join(i.name for i in ins)})")
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in ins[0].type.tensor_type.shape.dim]
    if len(dims) != 4 or ins[0].type.tensor_type.elem_type != F32:
        fail(f"input '{ins[0].name}': expected a float32 [N, C, H, W] tensor, found rank {len(dims)} "
             f"type {TensorProto.DataType.Name(ins[0].type.tensor_type.elem_type)}")
    return ins[0], dims


def consumers(g):
    out = {}
    for n in g.node:
        for k, x in enumerate(n.input):
            if x:
                out.setdefault(x, []).append((n, k))
    return out


def fresh(g, base):
    """A tensor name not yet used in g, from base."""
    used = {x for n in g.node for x in list(n.input) + list(n.output)}
    used |= {t.name for t in g.initializer} | {i.name for i in g.input} | {o.name for o in g.output}
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}_{k}"
    return name


def set_elem(vi, t):
    vi.type.tensor_type.elem_type = t


# ---- variants ----------------------------------------------------------------------------------
def fp16_weights(m, _a, _meta):
    g = m.graph
    graph_inputs = {i.name for i in g.input}
    casts, keep = [], []
    for t in g.initializer:
        if t.data_type != F32 or t.name in graph_inputs:
            keep.append(t)
            continue
        h = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), fresh(g, t.name + "_fp16"))
        keep.append(h)
        casts.append(helper.make_node("Cast", [h.name], [t.name], name=fresh(g, t.name + "_cast"), to=F32))
    del g.initializer[:]
    g.initializer.extend(keep)
    nodes = casts + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    return m


# inputs that stay float32 in a float16 model: (op, input index)
FLOAT_ONLY = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}
INT_TYPES = {TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT8,
             TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL}


def elem_types(m):
    """Every tensor's element type, by ONNX shape inference on m."""
    inf = onnx.shape_inference.infer_shapes(m)
    t = {}
    for vi in list(inf.graph.value_info) + list(inf.graph.input) + list(inf.graph.output):
        t[vi.name] = vi.type.tensor_type.elem_type
    for i in inf.graph.initializer:
        t[i.name] = i.data_type
    return t


def fp16(m, _a, _meta):
    g = m.graph
    types = elem_types(m)
    # float32 tensors that must stay float32: Resize's roi/scales and what computes them, and
    # floats computed from shapes (Cast of an integer tensor and everything downstream of it
    # until a Cast back to an integer)
    producer = {o: n for n in g.node for o in n.output}
    cons = consumers(g)
    keep = set()
    stack = [n.input[k] for n in g.node for k, x in enumerate(n.input) if x and (n.op_type, k) in FLOAT_ONLY]
    while stack:  # backwards from the float-only inputs
        x = stack.pop()
        if x in keep:
            continue
        keep.add(x)
        p = producer.get(x)
        if p is not None and p.op_type != "Cast":
            stack.extend(i for i in p.input if i and types.get(i) == F32)
    stack = [n.output[0] for n in g.node if n.op_type == "Cast" and types.get(n.input[0]) in INT_TYPES
             and n.attribute[0].i == F32]
    while stack:  # forwards from shape floats
        x = stack.pop()
        if x in keep:
            continue
        keep.add(x)
        for n, _k in cons.get(x, []):
            if n.op_type != "Cast":
                stack.extend(o for o in n.output if types.get(o) == F32)
    for x in keep:  # a shape float mixed with an activation would need a Cast: not in the zoo
        for n, _k in cons.get(x, []):
            bad = [i for i in n.input if i and types.get(i) == F32 and i not in keep]
            if bad and n.op_type not in ("Resize", "Upsample"):
                fail(f"fp16: {n.op_type} '{n.name}' mixes the shape float '{x}' with '{bad[0]}'")
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == F32 and vi.name not in keep:
            set_elem(vi, F16)
    for i, t in enumerate(g.initializer):
        if t.data_type == F32 and t.name not in keep:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for n in g.node:
        if n.op_type == "Cast" and n.output[0] not in keep:
            for at in n.attribute:
                if at.name == "to" and at.i == F32:
                    at.i = F16
        if n.op_type == "Constant" and n.output[0] not in keep:
            for at in n.attribute:
                if at.name == "value" and at.t.data_type == F32:
                    at.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(at.t).astype(np.float16), at.t.name))
                elif at.name in ("value_float", "value_floats"):
                    v = np.array(at.f if at.name == "value_float" else list(at.floats), np.float16)
                    n.attribute.remove(at)
                    n.attribute.extend([helper.make_attribute("value", numpy_helper.from_array(
                        v.reshape(()) if at.name == "value_float" else v))])
                    break
        if n.op_type == "ConstantOfShape" and n.output[0] not in keep:
            for at in n.attribute:
                if at.name == "value" and at.t.data_type == F32:
                    at.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(at.t).astype(np.float16), at.t.name))
            if not any(at.name == "value" for at in n.attribute):  # default: a float32 0
                n.attribute.extend([helper.make_attribute("value", numpy_helper.from_array(np.zeros(1, np.float16)))])
        if n.op_type in ("If", "Loop", "Scan"):
            fail(f"fp16: {n.op_type} '{n.name}': subgraphs are not converted")
        for at in n.attribute:
            if at.name == "dtype" and at.i == F32 and n.output[0] not in keep:  # EyeLike, Random*
                at.i = F16
    return m


def norm(a, meta):
    """(scale, mean[3], std[3]) for uint8-nhwc: the options, else the .json's preset."""
    preset = meta.get("preset", [])
    p = preset[preset.index("--preset") + 1] if "--preset" in preset else ""
    if a.mean is None or a.std is None:
        if p.startswith("imagenet-torchvision"):
            mean, std = IMAGENET_MEAN, IMAGENET_STD
        elif p.startswith("yolo-"):
            mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
        else:
            fail(f"uint8-nhwc: no --mean/--std given and the preset '{p or 'none'}' (from the .json beside IN) "
                 "is not one this script knows")
    mean = [float(v) for v in a.mean.split(",")] if a.mean else list(mean)
    std = [float(v) for v in a.std.split(",")] if a.std else list(std)
    if len(mean) != 3 or len(std) != 3:
        fail("--mean and --std take 3 values each (a,b,c)")
    return (a.scale if a.scale is not None else 1 / 255), mean, std


def uint8_nhwc(m, a, meta):
    g = m.graph
    inp, (n_, c, h, w) = image_input(m)
    if c != 3:
        fail(f"uint8-nhwc: input '{inp.name}' has {c} channels, expected 3")
    scale, mean, std = norm(a, meta)
    old = inp.name
    x = fresh(g, old + "_nchw")  # the network's input, renamed
    for n in g.node:
        for k, v in enumerate(n.input):
            if v == old:
                n.input[k] = x
    for o in g.output:
        if o.name == old:
            fail(f"uint8-nhwc: input '{old}' is also a graph output")
    chain, cur = [], old
    f = fresh(g, old + "_float")
    chain.append(helper.make_node("Cast", [cur], [f], name=f, to=F32))
    t = fresh(g, old + "_transposed")
    chain.append(helper.make_node("Transpose", [f], [t], name=t, perm=[0, 3, 1, 2]))
    steps = [("Mul", np.array(scale, np.float32), scale != 1),
             ("Sub", np.array(mean, np.float32).reshape(1, 3, 1, 1), any(v != 0 for v in mean)),
             ("Div", np.array(std, np.float32).reshape(1, 3, 1, 1), any(v != 1 for v in std))]
    steps = [s for s in steps if s[2]]
    cur = t
    for k, (op, v, _) in enumerate(steps):
        out = x if k == len(steps) - 1 else fresh(g, f"{old}_{op.lower()}")
        cname = fresh(g, f"{old}_{op.lower()}_c")
        g.initializer.append(numpy_helper.from_array(v, cname))
        chain.append(helper.make_node(op, [cur, cname], [out], name=out))
        cur = out
    if not steps:
        chain[-1].output[0] = x
    nodes = chain + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    inp.type.tensor_type.elem_type = TensorProto.UINT8
    d = inp.type.tensor_type.shape.dim
    for k, v in enumerate([n_, h, w, 3]):
        d[k].Clear()
        if isinstance(v, str):
            d[k].dim_param = v
        else:
            d[k].dim_value = v
    return m


def gray(m, _a, _meta):
    g = m.graph
    inp, dims = image_input(m)
    if dims[1] != 3:
        fail(f"gray: input '{inp.name}' has {dims[1]} channels, expected 3")
    inits = {t.name: t for t in g.initializer}
    readers = consumers(g).get(inp.name, [])
    if not readers:
        fail(f"gray: nothing reads input '{inp.name}'")
    for n, k in readers:
        if n.op_type != "Conv" or k != 0 or n.input[1] not in inits:
            fail(f"gray: input '{inp.name}' is read by {n.op_type} '{n.name}' (only Convs with constant weights "
                 "can be folded)")
        if any(at.name == "group" and at.i != 1 for at in n.attribute):
            fail(f"gray: Conv '{n.name}' is grouped")
    for wname in {n.input[1] for n, _ in readers}:
        t = inits[wname]
        wt = numpy_helper.to_array(t)
        if wt.shape[1] != 3:
            fail(f"gray: Conv weight '{wname}' has {wt.shape[1]} input channels, expected 3")
        if len([1 for n in g.node for x in n.input if x == wname]) != len([1 for n, _ in readers if n.input[1] == wname]):
            fail(f"gray: weight '{wname}' is also read by other nodes")
        t.CopyFrom(numpy_helper.from_array(wt.sum(axis=1, keepdims=True).astype(wt.dtype), wname))
    inp.type.tensor_type.shape.dim[1].dim_value = 1
    return m


def dynamic_hw(m, _a, _meta):
    g = m.graph
    inp, dims = image_input(m)
    d = inp.type.tensor_type.shape.dim
    h, w = dims[2], dims[3]
    for k, p in ((2, "height"), (3, "width")):
        d[k].Clear()
        d[k].dim_param = p
    # outputs: a dim ONNX shape inference still finds static stays; of the others (past batch and
    # channels) dim 2 equal to H and dim 3 equal to W follow the input, the rest become symbolic
    del g.value_info[:]
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    for o in probe.graph.output:  # inference keeps a declared output shape: infer without it
        o.type.tensor_type.ClearField("shape")
    inf = onnx.shape_inference.infer_shapes(probe)
    by_name = {o.name: o for o in inf.graph.output}
    for o in g.output:
        io = by_name.get(o.name)
        idims = io.type.tensor_type.shape.dim if io is not None else []
        for k, dd in enumerate(o.type.tensor_type.shape.dim):
            if not dd.HasField("dim_value"):
                continue
            static = k < len(idims) and idims[k].HasField("dim_value") and idims[k].dim_value == dd.dim_value
            v = dd.dim_value
            if static or k < 2:  # known, or batch and channels (the batch stays as the input's)
                continue
            dd.Clear()
            if (k, v) in ((2, h), (3, w)) and len(o.type.tensor_type.shape.dim) == 4:
                dd.dim_param = "height" if k == 2 else "width"
            else:
                dd.dim_param = f"{o.name}_dim{k}"
    g.value_info.extend(vi for vi in inf.graph.value_info if vi.type.tensor_type.HasField("shape"))
    return m


def const_ints(g, name):
    """The int64 values of an initializer or Constant output, or None."""
    for t in g.initializer:
        if t.name == name:
            return [int(v) for v in numpy_helper.to_array(t).ravel()]
    for n in g.node:
        if n.op_type == "Constant" and n.output[0] == name and n.attribute[0].name == "value":
            return [int(v) for v in numpy_helper.to_array(n.attribute[0].t).ravel()]
    return None


# ops whose opset 11 form differs from opset 13's in more than the types they accept
DOWN_13_11 = ("Unsqueeze", "Squeeze", "Split", "ReduceSum", "Softmax", "LogSoftmax", "Hardmax", "Resize")


def opset11_by_hand(m):
    """Opset 13 -> 11 for what onnx.version_converter has no down adapter for (it stops at Relu):
    the opset 13 inputs that were attributes in 11 (Unsqueeze/Squeeze/ReduceSum axes, Split's
    split) become attributes again, Softmax-like ops over a non-last axis are wrapped in
    Transposes (opset 11 flattens from the axis), Resize gets the roi input opset 11 requires.
    Other ops of the zoo are the same at both opsets."""
    g = m.graph
    ranks = {}
    inf = onnx.shape_inference.infer_shapes(m)
    for vi in list(inf.graph.value_info) + list(inf.graph.input) + list(inf.graph.output):
        if vi.type.tensor_type.HasField("shape"):
            ranks[vi.name] = len(vi.type.tensor_type.shape.dim)
    out = []
    for n in g.node:
        if n.op_type in ("Unsqueeze", "Squeeze", "ReduceSum") and len(n.input) > 1 and n.input[1]:
            v = const_ints(g, n.input[1])
            if v is None:
                fail(f"opset11: {n.op_type} '{n.name}': axes '{n.input[1]}' is not a constant")
            del n.input[1:]
            n.attribute.extend([helper.make_attribute("axes", v)])
        elif n.op_type == "Split" and len(n.input) > 1 and n.input[1]:
            v = const_ints(g, n.input[1])
            if v is None:
                fail(f"opset11: Split '{n.name}': split '{n.input[1]}' is not a constant")
            del n.input[1:]
            n.attribute.extend([helper.make_attribute("split", v)])
        elif n.op_type in ("Softmax", "LogSoftmax", "Hardmax"):
            axis = next((at.i for at in n.attribute if at.name == "axis"), -1)
            r = ranks.get(n.input[0])
            if r is None:
                fail(f"opset11: {n.op_type} '{n.name}': the rank of '{n.input[0]}' is unknown")
            axis = axis + r if axis < 0 else axis
            for at in list(n.attribute):
                if at.name == "axis":
                    n.attribute.remove(at)
            n.attribute.extend([helper.make_attribute("axis", r - 1)])
            if axis != r - 1:
                perm = [k for k in range(r) if k != axis] + [axis]
                inv = [perm.index(k) for k in range(r)]
                t_in, t_out = fresh(g, n.input[0] + "_last"), fresh(g, n.output[0] + "_last")
                out.append(helper.make_node("Transpose", [n.input[0]], [t_in], name=t_in, perm=perm))
                y = n.output[0]
                n.input[0], n.output[0] = t_in, t_out
                out.append(n)
                out.append(helper.make_node("Transpose", [t_out], [y], name=fresh(g, y + "_back"), perm=inv))
                continue
        elif n.op_type == "Resize":  # opset 11: roi and scales are required (empty when sizes is given)
            while len(n.input) < 3:
                n.input.append("")
            for k, what in ((1, "_roi"), (2, "_scales")):
                if not n.input[k]:
                    name = fresh(g, (n.name or n.output[0]) + what)
                    g.initializer.append(numpy_helper.from_array(np.zeros(0, np.float32), name))
                    n.input[k] = name
        out.append(n)
    del g.node[:]
    g.node.extend(out)
    for op in m.opset_import:
        if op.domain in ("", "ai.onnx"):
            op.version = 11
    del g.value_info[:]  # re-inferred by whoever loads it
    return m


def opset11(m, _a, _meta):
    from onnx import version_converter
    if any(op.domain in ("", "ai.onnx") and op.version == 11 for op in m.opset_import):
        return m
    if not any(op.domain in ("", "ai.onnx") and op.version == 13 for op in m.opset_import):
        fail("opset11: IN must be an opset 13 model")
    try:
        return version_converter.convert_version(m, 11)
    except Exception:  # noqa: BLE001 (no down adapter for some op: by hand)
        return opset11_by_hand(m)


def ultralytics_meta(m, a, meta):
    _, dims = image_input(m)
    h, w = dims[2], dims[3]
    if a.size:
        h, w = (int(v) for v in a.size.lower().split("x"))
    task = meta.get("task", "yolo")
    if task.startswith("yolo") or task == "det":
        utask, names = "detect", COCO
    elif task == "seg":
        utask, names = "segment", VOC
    else:
        utask = "classify"
        n = next((o.type.tensor_type.shape.dim[1].dim_value for o in m.graph.output), 1000)
        names = [f"class{i}" for i in range(n)]
    name = meta.get("name", os.path.splitext(os.path.basename(a.inp))[0])
    props = {
        "description": f"Ultralytics {name} model trained on coco.yaml" if utask == "detect"
        else f"Ultralytics {name} model",
        "author": "Ultralytics",
        "date": "2024-01-01T00:00:00.000000",  # fixed: the same bytes every run
        "version": "8.1.0",
        "license": "AGPL-3.0 License (https://ultralytics.com/license)",
        "docs": "https://docs.ultralytics.com",
        "stride": 32,
        "task": utask,
        "batch": 1,
        "imgsz": [h, w],
        "names": dict(enumerate(names)),
    }
    del m.metadata_props[:]
    for k, v in props.items():  # as the exporter: meta.key, meta.value = k, str(v)
        p = m.metadata_props.add()
        p.key, p.value = k, str(v)
    return m


BUILD = {"fp16-weights": fp16_weights, "fp16": fp16, "uint8-nhwc": uint8_nhwc, "gray": gray,
         "dynamic-hw": dynamic_hw, "opset11": opset11, "ultralytics-meta": ultralytics_meta}


# ---- verify ------------------------------------------------------------------------------------
def ort_run(model, name, x, d, tag):
    xp = os.path.join(d, tag + "_in.npy")
    np.save(xp, x)
    od = os.path.join(d, tag)
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "oracle", "ort.js"), model, "--input", f"{name}={xp}",
                        "--out-dir", od], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"ONNX Runtime cannot run {model}: {(r.stderr.strip().splitlines() or [''])[-1]}")
    return od


def verify(a, orig, var, meta):
    inp, dims = image_input(orig)
    ref = os.path.join(os.path.splitext(a.inp)[0] + ".ref", "images.npy")
    if os.path.exists(ref):
        x = np.load(ref).astype(np.float32)
    else:
        x = np.random.default_rng(0).standard_normal([1 if isinstance(v, str) else v for v in dims]).astype(np.float32)
    vin = [i for i in var.graph.input if i.name not in {t.name for t in var.graph.initializer}][0]
    if a.variant == "uint8-nhwc":
        scale, mean, std = norm(a, meta)
        m3, s3 = np.array(mean, np.float32).reshape(1, 3, 1, 1), np.array(std, np.float32).reshape(1, 3, 1, 1)
        u = np.clip(np.rint((x * s3 + m3) / scale), 0, 255).astype(np.uint8)  # the photo's pixels
        xv = np.ascontiguousarray(u.transpose(0, 2, 3, 1))
        x = ((u.astype(np.float32) * np.float32(scale)) - m3) / s3
    elif a.variant == "gray":
        xv = x.mean(axis=1, keepdims=True).astype(np.float32)
        x = np.repeat(xv, 3, axis=1)
    elif a.variant == "fp16":
        xv = x.astype(np.float16)
    else:
        xv = x
    with tempfile.TemporaryDirectory() as d:
        oa = ort_run(a.inp, inp.name, x, d, "orig")
        ob = ort_run(a.out, vin.name, xv, d, "variant")
        for o in orig.graph.output:
            fn = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in o.name) + ".npy"
            r, v = np.load(os.path.join(oa, fn)).astype(np.float64), np.load(os.path.join(ob, fn)).astype(np.float64)
            if r.shape != v.shape:
                fail(f"--verify: output '{o.name}' shape {v.shape}, the original's {r.shape}")
            if a.variant in ("fp16", "fp16-weights"):
                cos = float(np.dot(r.ravel(), v.ravel()) / (np.linalg.norm(r) * np.linalg.norm(v) + 1e-30))
                ok, what = cos >= 0.999, f"cosine {cos:.6f}"
            else:
                diff = float(np.max(np.abs(r - v))) if r.size else 0.0
                tol = 1e-4 * (1 + (float(np.max(np.abs(r))) if r.size else 0.0))
                ok, what = diff <= tol, f"max |diff| {diff:.3g} (tolerance {tol:.3g})"
            if not ok:
                fail(f"--verify: {a.variant} output '{o.name}': {what}")
            print(f"variants.py: verify {a.variant} '{o.name}': {what}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inp", metavar="IN.onnx")
    ap.add_argument("out", metavar="OUT.onnx")
    ap.add_argument("--variant", required=True, choices=VARIANTS)
    ap.add_argument("--mean", help="a,b,c (uint8-nhwc; default: the .json's preset)")
    ap.add_argument("--std", help="a,b,c (uint8-nhwc; default: the .json's preset)")
    ap.add_argument("--scale", type=float, help="uint8-nhwc's Mul (default 1/255)")
    ap.add_argument("--size", help="HxW: the imgsz ultralytics-meta records (default the model's)")
    ap.add_argument("--verify", action="store_true", help="assert with ONNX Runtime that OUT computes what IN does")
    a = ap.parse_args()
    if a.size and (len(a.size.lower().split("x")) != 2 or not all(v.isdigit() for v in a.size.lower().split("x"))):
        fail(f"--size '{a.size}': expected HxW")
    orig = onnx.load(a.inp)
    meta = meta_for(a.inp)
    m = onnx.ModelProto()
    m.CopyFrom(orig)
    m = BUILD[a.variant](m, a, meta)
    m.doc_string = (m.doc_string + "\n" if m.doc_string else "") + f"scripts/variants.py --variant {a.variant}"
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # noqa: BLE001
        fail(f"{a.variant}: onnx.checker: {str(e).strip().splitlines()[0]}")
    tmp = a.out + ".tmp"
    onnx.save(m, tmp)
    os.replace(tmp, a.out)
    if a.verify:
        verify(a, orig, m, meta)


if __name__ == "__main__":
    main()
