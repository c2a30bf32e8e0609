"""torch_exports.py OUTDIR: small models exported by torch.onnx (torch 1.13, torchvision 0.14)
whose graphs use the indexing, geometry and sequence ops, with torch's own outputs as the
reference (random weights, fixed seed):
  roialign_tv_aligned0 / roialign_tv_aligned1: torchvision.ops.roi_align, aligned False / True
      (Faster R-CNN's and Mask R-CNN's settings), opsets 11 / 16 (torchvision 0.14 writes no
      coordinate_transformation_mode at opset 16, so aligned=False exported there means
      half_pixel, which ONNX Runtime and ptq then compute: a 0.967-cosine miss of torch's
      values; at opset 11 the op's fixed output_half_pixel is torch's aligned=False);
  crnn: a CRNN-style recogniser (convs, a bidirectional nn.LSTM, a bidirectional nn.GRU,
      a linear head), opset 14;
  swin: a small torchvision SwinTransformer (two stages, window attention with the relative
      position bias table and shifted windows), opset 17;
  gridsample_tv: torch.nn.functional.grid_sample, bilinear / zeros and bicubic / reflection.
Writes OUTDIR/NAME.onnx, OUTDIR/NAME/in_<i>.npy and OUTDIR/NAME/ref_<i>.npy (outputs in
order), and OUTDIR/exports.txt ("NAME ATOL RTOL" per model). Test oracle only."""
import os
import sys
import warnings

import numpy as np
import torch
import torchvision

warnings.filterwarnings("ignore")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(20261127)
lines = []


def export(name, model, inputs, opset, atol, rtol, names=None):
    model.eval()
    with torch.no_grad():
        refs = model(*inputs)
    refs = refs if isinstance(refs, (tuple, list)) else (refs,)
    in_names = names or [f"in_{i}" for i in range(len(inputs))]
    torch.onnx.export(model, tuple(inputs), os.path.join(out, name + ".onnx"), opset_version=opset,
                      input_names=in_names, output_names=[f"ref_{i}" for i in range(len(refs))])
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for n, x in zip(in_names, inputs):
        np.save(os.path.join(out, name, n + ".npy"), x.numpy())
    for i, r in enumerate(refs):
        np.save(os.path.join(out, name, f"ref_{i}.npy"), r.numpy())
    lines.append(f"{name} {atol} {rtol}")


class RoiAlign(torch.nn.Module):
    def __init__(self, aligned, size, scale, sampling):
        super().__init__()
        self.aligned, self.size, self.scale, self.sampling = aligned, size, scale, sampling

    def forward(self, x, boxes):
        return torchvision.ops.roi_align(x, boxes, self.size, self.scale, self.sampling, self.aligned)


feat = torch.rand(2, 16, 40, 52) * 4
n = 64
x1 = torch.rand(n) * 200 - 20
y1 = torch.rand(n) * 150 - 20
boxes = torch.stack([torch.randint(0, 2, (n,)).float(), x1, y1, x1 + torch.rand(n) * 100, y1 + torch.rand(n) * 80], 1)
export("roialign_tv_aligned0", RoiAlign(False, (7, 7), 0.25, 2), [feat, boxes], 11, 1e-5, 1e-4)
export("roialign_tv_aligned1", RoiAlign(True, (14, 14), 0.25, 0), [feat, boxes], 16, 1e-5, 1e-4)


class CRNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d((4, 1)))
        self.lstm = torch.nn.LSTM(32 * 2, 24, bidirectional=True)
        self.gru = torch.nn.GRU(48, 16, bidirectional=True)
        self.fc = torch.nn.Linear(32, 37)

    def forward(self, x):
        f = self.conv(x)                      # [B, 32, 2, W/2]
        b, c, h, w = f.shape
        f = f.reshape(b, c * h, w).permute(2, 0, 1)  # [T, B, C]
        f, _ = self.lstm(f)
        f, _ = self.gru(f)
        return self.fc(f).log_softmax(2)


export("crnn", CRNN(), [torch.rand(2, 3, 16, 64)], 14, 1e-5, 1e-3)

from torchvision.models.swin_transformer import SwinTransformer  # noqa: E402

swin = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[7, 7],
                       num_classes=10)
export("swin", swin, [torch.rand(1, 3, 56, 56)], 17, 1e-4, 1e-3)


class GridSample(torch.nn.Module):
    def forward(self, x, g):
        return (torch.nn.functional.grid_sample(x, g, "bilinear", "zeros", align_corners=False),
                torch.nn.functional.grid_sample(x, g, "bicubic", "reflection", align_corners=True))


export("gridsample_tv", GridSample(), [torch.rand(2, 4, 12, 15), torch.rand(2, 6, 7, 2) * 2.6 - 1.3], 16, 1e-5, 1e-4)

with open(os.path.join(out, "exports.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{len(lines)} exports in {out}")
