"""ops_index_models.py OUTDIR: one-node ONNX models of the indexing, geometry, sequence
and signal ops (runtime/ops/index.c, roialign.c, einsum.c, gridsample.c, geometry.c, rnn.c,
signal.c)
at the shapes real models give them (torchvision's Faster/Mask R-CNN RoI heads, Swin /
MaxViT attention einsums, a CRNN recogniser's bidirectional LSTM / GRU, a RetinaNet TopK
over 20k scores), with random inputs from a fixed seed.

Writes OUTDIR/CASE.onnx and OUTDIR/CASE/<input>.npy per case, and OUTDIR/cases.txt:
one line per case, "CASE ATOL RTOL" (tests/e2e/ops_index.sh runs ptq and ONNX Runtime
on each and compares). Test oracle only: ptq never needs python."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(20261127)
cases = []

NP2ONNX = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int64: TensorProto.INT64,
           np.int32: TensorProto.INT32}


def add(name, op, inputs, consts, attrs, outputs, opset, atol=1e-5, rtol=1e-4, ir=8):
    """inputs / consts: [(name, array)] (runtime inputs / initializers); outputs: [(name, np dtype)]."""
    node = helper.make_node(op, [n for n, _ in inputs] + [n for n, _ in consts] if not isinstance(attrs.get("_order"), list)
                            else attrs.pop("_order"), [n for n, _ in outputs], name=name, **attrs)
    g = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, NP2ONNX[a.dtype.type], a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(n, NP2ONNX[t], None) for n, t in outputs],
        [numpy_helper.from_array(a, n) for n, a in consts])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir

    onnx.save(m, os.path.join(out, name + ".onnx"))
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for n, a in inputs:
        np.save(os.path.join(out, name, n + ".npy"), a)
    cases.append(f"{name} {atol} {rtol}")


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def boxes(n, w, h):
    """[n, 4] x1 y1 x2 y2 in image pixels: mostly inside, some crossing the border, some
    degenerate (zero or negative size, as a detector's early proposals can be)."""
    x1 = rng.uniform(-40, w, n)
    y1 = rng.uniform(-40, h, n)
    bw = rng.uniform(0, w / 2, n)
    bh = rng.uniform(0, h / 2, n)
    b = np.stack([x1, y1, x1 + bw, y1 + bh], 1)
    b[:4] = [[10, 10, 10, 10], [50, 60, 40, 50], [0, 0, w, h], [w - 5, h - 5, w + 30, h + 30]]
    return b.astype(np.float32)


# RoiAlign: Faster R-CNN's box head (torchvision exports aligned=False: output_half_pixel,
# sampling_ratio 2, 7x7 on the stride-4 level), Mask R-CNN's mask head (aligned=True:
# half_pixel, adaptive sampling, 14x14, stride 8), opset 10 (no attribute) in max mode.
feat = f32(2, 32, 50, 68, lo=0.0, hi=4.0)
rois = boxes(120, 272, 200)
bidx = rng.integers(0, 2, 120).astype(np.int64)
add("roialign_faster_rcnn", "RoiAlign", [("x", feat), ("rois", rois), ("batch_indices", bidx)], [],
    dict(coordinate_transformation_mode="output_half_pixel", output_height=7, output_width=7, sampling_ratio=2,
         spatial_scale=0.25), [("y", np.float32)], 16)
add("roialign_mask_rcnn", "RoiAlign", [("x", feat), ("rois", boxes(60, 544, 400)), ("batch_indices", bidx[:60])], [],
    dict(coordinate_transformation_mode="half_pixel", output_height=14, output_width=14, sampling_ratio=0,
         spatial_scale=0.125), [("y", np.float32)], 16)
add("roialign_opset10_max", "RoiAlign", [("x", feat), ("rois", rois[:40]), ("batch_indices", bidx[:40])], [],
    dict(mode="max", output_height=5, output_width=4, sampling_ratio=0, spatial_scale=0.25), [("y", np.float32)], 10)

# Einsum: Swin / MaxViT attention and relative-position terms, and a few general forms.
for name, eq, shapes in [
    ("einsum_maxvit_relpos", "bhwc,hkc->bhwk", [(2, 7, 7, 32), (7, 13, 32)]),
    ("einsum_batch_matmul", "bij,bjk->bik", [(12, 49, 32), (12, 32, 49)]),
    ("einsum_attention_qk", "bhqd,bhkd->bhqk", [(2, 4, 49, 32), (2, 4, 49, 32)]),
    ("einsum_attention_v", "bhqk,bhkd->bhqd", [(2, 4, 49, 49), (2, 4, 49, 32)]),
    ("einsum_ellipsis", "...ij,...jk->...ik", [(3, 2, 5, 6), (3, 2, 6, 4)]),
    ("einsum_implicit", "ij,jk", [(9, 11), (11, 5)]),
    ("einsum_outer_sum", "bi,bj->ij", [(6, 8), (6, 7)]),
    ("einsum_trace", "bii->b", [(4, 6, 6)]),
]:
    ins = [(f"x{i}", f32(*s)) for i, s in enumerate(shapes)]
    add(name, "Einsum", ins, [], dict(equation=eq), [("y", np.float32)], 12)

# GridSample: every mode, padding and align_corners, the grid reaching past [-1, 1].
img = f32(2, 3, 9, 11)
grid = f32(2, 5, 6, 2, lo=-1.3, hi=1.3)
for mode in ["bilinear", "nearest", "bicubic"]:
    for pad in ["zeros", "border", "reflection"]:
        for ac in [0, 1]:
            add(f"gridsample_{mode}_{pad}_{ac}", "GridSample", [("x", img), ("grid", grid)], [],
                dict(mode=mode, padding_mode=pad, align_corners=ac), [("y", np.float32)], 16)
vol = f32(2, 3, 5, 6, 7)
vgrid = f32(2, 4, 3, 5, 3, lo=-1.3, hi=1.3)
for mode in ["linear", "nearest"]:
    for pad in ["zeros", "border", "reflection"]:
        add(f"gridsample3d_{mode}_{pad}", "GridSample", [("x", vol), ("grid", vgrid)], [],
            dict(mode=mode, padding_mode=pad, align_corners=int(pad == "border")), [("y", np.float32)], 20, ir=9)

# Recurrent ops: a CRNN recogniser's bidirectional LSTM (T=26 steps, batch 3, 96 -> 48),
# sequence_lens shorter than T for two of the three, initial states; a GRU as PyTorch
# exports it (linear_before_reset=1); a reverse RNN with Relu. (ONNX Runtime refuses
# layout = 1: the node tests cover it.)
T, B, I, H = 26, 3, 96, 48
lens = np.array([26, 17, 9], dtype=np.int32)
add("lstm_crnn_bidirectional", "LSTM",
    [("X", f32(T, B, I)), ("sequence_lens", lens), ("initial_h", f32(2, B, H)), ("initial_c", f32(2, B, H))],
    [("W", f32(2, 4 * H, I, lo=-0.2, hi=0.2)), ("R", f32(2, 4 * H, H, lo=-0.2, hi=0.2)), ("B", f32(2, 8 * H, lo=-0.1, hi=0.1))],
    dict(_order=["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c"], direction="bidirectional", hidden_size=H),
    [("Y", np.float32), ("Y_h", np.float32), ("Y_c", np.float32)], 14, atol=1e-5, rtol=1e-3)
add("lstm_peepholes_clip", "LSTM", [("X", f32(T, B, I))],
    [("W", f32(1, 4 * H, I, lo=-0.3, hi=0.3)), ("R", f32(1, 4 * H, H, lo=-0.3, hi=0.3)), ("B", f32(1, 8 * H)),
     ("P", f32(1, 3 * H))],
    dict(_order=["X", "W", "R", "B", "", "", "", "P"], hidden_size=H, clip=0.8), [("Y", np.float32), ("Y_h", np.float32)],
    14, atol=1e-5, rtol=1e-3)
add("gru_bidirectional_lens", "GRU", [("X", f32(T, B, I)), ("sequence_lens", lens)],
    [("W", f32(2, 3 * H, I, lo=-0.2, hi=0.2)), ("R", f32(2, 3 * H, H, lo=-0.2, hi=0.2)), ("B", f32(2, 6 * H, lo=-0.1, hi=0.1))],
    dict(_order=["X", "W", "R", "B", "sequence_lens"], direction="bidirectional", hidden_size=H,
         linear_before_reset=1), [("Y", np.float32), ("Y_h", np.float32)], 14, atol=1e-5, rtol=1e-3)
add("gru_reset_after", "GRU", [("X", f32(T, B, I))],
    [("W", f32(1, 3 * H, I, lo=-0.2, hi=0.2)), ("R", f32(1, 3 * H, H, lo=-0.2, hi=0.2)), ("B", f32(1, 6 * H))],
    dict(_order=["X", "W", "R", "B"], hidden_size=H), [("Y", np.float32), ("Y_h", np.float32)], 14, atol=1e-5, rtol=1e-3)
add("rnn_reverse_relu", "RNN", [("X", f32(T, B, I)), ("sequence_lens", lens)],
    [("W", f32(1, H, I, lo=-0.1, hi=0.1)), ("R", f32(1, H, H, lo=-0.1, hi=0.1))],
    dict(_order=["X", "W", "R", "", "sequence_lens"], direction="reverse", hidden_size=H, activations=["Relu"]),
    [("Y", np.float32), ("Y_h", np.float32)], 14, atol=1e-5, rtol=1e-3)
add("lstm_custom_activations", "LSTM", [("X", f32(T, B, I))],
    [("W", f32(2, 4 * H, I, lo=-0.2, hi=0.2)), ("R", f32(2, 4 * H, H, lo=-0.2, hi=0.2))],
    dict(_order=["X", "W", "R"], hidden_size=H, direction="bidirectional",
         activations=["HardSigmoid", "LeakyRelu", "Tanh", "Sigmoid", "ScaledTanh", "Affine"],
         activation_alpha=[0.3, 0.05, 0.9, 0.7], activation_beta=[0.6, 1.1, 0.2]),
    [("Y", np.float32), ("Y_h", np.float32), ("Y_c", np.float32)], 14, atol=1e-5, rtol=1e-3)

# TopK: RetinaNet's pre-NMS selection (1000 of 20000 scores), and the smallest k of
# integer-valued scores with many ties (ties go to the lower index).
add("topk_retinanet", "TopK", [("scores", f32(1, 20000, lo=0.0, hi=1.0))], [("k", np.array([1000], np.int64))],
    dict(axis=1), [("values", np.float32), ("indices", np.int64)], 11)
add("topk_ties_smallest", "TopK", [("x", rng.integers(0, 5, (40, 6)).astype(np.float32))],
    [("k", np.array([7], np.int64))], dict(axis=0, largest=0), [("values", np.float32), ("indices", np.int64)], 11)

# Gathers and scatters at detector-like shapes.
data = f32(2, 300, 85)
add("gathernd_batch1", "GatherND", [("data", data), ("indices", rng.integers(-300, 300, (2, 50, 1)).astype(np.int64))], [],
    dict(batch_dims=1), [("y", np.float32)], 13)
add("gather_elements_axis1", "GatherElements", [("data", data), ("indices", rng.integers(-300, 300, (2, 40, 85)).astype(np.int64))],
    [], dict(axis=1), [("y", np.float32)], 13)
add("scatternd_add", "ScatterND", [("data", f32(8, 6, 5)), ("indices", rng.integers(0, 6, (10, 2)).astype(np.int64)),
                                   ("updates", f32(10, 5))], [], dict(reduction="add"), [("y", np.float32)], 16)
add("scatter_elements_mul", "ScatterElements",
    [("data", f32(6, 7)), ("indices", rng.integers(-7, 7, (6, 4)).astype(np.int64)), ("updates", f32(6, 4))], [],
    dict(axis=1, reduction="mul"), [("y", np.float32)], 16)

# MaxUnpool (indices as MaxPool gives them: flat over N x C x H x W, one per window) and
# ReverseSequence in both layouts.
win = rng.integers(0, 2, (1, 4, 5, 6, 2))
hh, ww = np.meshgrid(np.arange(5), np.arange(6), indexing="ij")
flat = ((np.arange(4)[:, None, None] * 10 + hh * 2 + win[0, :, :, :, 0]) * 12 + ww * 2 + win[0, :, :, :, 1])[None]
add("maxunpool_2x2", "MaxUnpool", [("x", f32(1, 4, 5, 6)), ("i", flat.astype(np.int64))], [],
    dict(kernel_shape=[2, 2], strides=[2, 2]), [("y", np.float32)], 11)
add("reversesequence_batch_major", "ReverseSequence", [("x", f32(4, 7, 3)), ("lens", np.array([7, 1, 4, 0], np.int64))], [],
    dict(batch_axis=0, time_axis=1), [("y", np.float32)], 10)

# Signal ops
add("dft_onesided", "DFT", [("x", f32(2, 24, 3, 1))], [], dict(axis=1, onesided=1), [("y", np.float32)], 17, atol=1e-4)
add("dft20_axis_input_inverse", "DFT", [("x", f32(2, 5, 12, 2))],
    [("dft_length", np.array(16, np.int64)), ("axis", np.array(-2, np.int64))], dict(inverse=1), [("y", np.float32)], 20,
    atol=1e-5, ir=9)
add("stft_hann", "STFT", [("signal", f32(2, 400, 1)), ("window", (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(64) / 64)).astype(np.float32))],
    [("step", np.array(32, np.int64))], dict(_order=["signal", "step", "window"]), [("y", np.float32)], 17, atol=1e-4)

# CenterCropPad, Col2Im (opset 18) and AffineGrid (opset 20): no node tests in ONNX 1.12's data
add("center_crop_pad_hw", "CenterCropPad", [("x", f32(2, 9, 12, 3))], [("shape", np.array([14, 7], np.int64))],
    dict(axes=[1, 2]), [("y", np.float32)], 18, ir=9)
add("center_crop_pad_all", "CenterCropPad", [("x", f32(5, 8, 3))], [("shape", np.array([4, 11, 3], np.int64))],
    {}, [("y", np.float32)], 18, ir=9)
add("col2im_3x3_s2_pad", "Col2Im", [("x", f32(2, 4 * 9, 5 * 6))],
    [("image_shape", np.array([9, 11], np.int64)), ("block_shape", np.array([3, 3], np.int64))],
    dict(strides=[2, 2], pads=[1, 1, 1, 1], dilations=[1, 1]), [("y", np.float32)], 18, ir=9)
add("col2im_dilated", "Col2Im", [("x", f32(1, 3 * 4, 6 * 11))],
    [("image_shape", np.array([9, 10], np.int64)), ("block_shape", np.array([2, 2], np.int64))],
    dict(dilations=[3, 2], pads=[0, 1, 0, 2]), [("y", np.float32)], 18, ir=9)
for ac in [0, 1]:
    add(f"affine_grid_2d_{ac}", "AffineGrid", [("theta", f32(2, 2, 3))], [("size", np.array([2, 3, 7, 9], np.int64))],
        dict(align_corners=ac), [("grid", np.float32)], 20, ir=9)
    add(f"affine_grid_3d_{ac}", "AffineGrid", [("theta", f32(2, 3, 4))], [("size", np.array([2, 1, 4, 5, 6], np.int64))],
        dict(align_corners=ac), [("grid", np.float32)], 20, ir=9)

with open(os.path.join(out, "cases.txt"), "w") as f:
    f.write("\n".join(cases) + "\n")
print(f"{len(cases)} cases in {out}")
