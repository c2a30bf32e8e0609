#!/usr/bin/python3
"""train_fmnist.py OUT: trains a small ViT and a small ConvNeXt on Fashion-MNIST (Debian's
dataset-fashion-mnist, IDX gz files in /usr/share/datasets/fashion-mnist), exports each to ONNX
(opset 13; input [1, 1, 28, 28] gray x / 255, output [1, 10] logits) as OUT/{vit,convnext}.onnx,
says each one's test top-1 (torch, FP32) and its weights' sha256, and writes the images ptq reads:
OUT/calib/NNNNN.png (--calib training images, every class alike) and OUT/test/NNNNN.png (the first
--test of the 10,000 test images) with OUT/test.list, `path class` lines (`ptq compare --labels
list:OUT/test.list`).

ViT: 4x4 patches (49 tokens) of width 64, learned positions, 4 pre-norm blocks (4 heads, MLP 128,
GELU), mean of the tokens, LayerNorm, linear head. ConvNeXt: a 2x2 stride-2 stem to 32 channels,
two blocks (7x7 depthwise, LayerNorm over channels, 1x1 to 4x, GELU, 1x1 back, residual), a
LayerNorm + 2x2 stride-2 conv to 64, two more blocks, global average, LayerNorm, linear head.
AdamW, cosine learning rate, random 2-pixel shifts and horizontal flips. Seeded; on the CPU by
default with torch threads = cores (--device cuda only to iterate faster).
"""
import argparse
import gzip
import hashlib
import io
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

DATA = "/usr/share/datasets/fashion-mnist"


def idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


class Block(nn.Module):
    def __init__(self, d, heads, mlp):
        super().__init__()
        self.h = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1) * (d // self.h) ** -0.5).softmax(-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class ViT(nn.Module):
    def __init__(self, d=64, depth=4, heads=4, mlp=128, nc=10):
        super().__init__()
        self.patch = nn.Conv2d(1, d, 4, 4)
        self.pos = nn.Parameter(torch.randn(1, 49, d) * 0.02)
        self.blocks = nn.Sequential(*[Block(d, heads, mlp) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, nc)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.blocks(x).mean(1)))


class LN2d(nn.Module):
    """LayerNorm over the channels of NCHW."""

    def __init__(self, c):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.ones(1, c, 1, 1)), nn.Parameter(torch.zeros(1, c, 1, 1))

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        return (x - u) / torch.sqrt(s + 1e-6) * self.w + self.b


class CNBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw, self.n = nn.Conv2d(c, c, 7, 1, 3, groups=c), LN2d(c)
        self.pw1, self.pw2 = nn.Conv2d(c, 4 * c, 1), nn.Conv2d(4 * c, c, 1)

    def forward(self, x):
        return x + self.pw2(F.gelu(self.pw1(self.n(self.dw(x)))))


class ConvNeXt(nn.Module):
    def __init__(self, nc=10):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 32, 2, 2), LN2d(32), CNBlock(32), CNBlock(32),
                               LN2d(32), nn.Conv2d(32, 64, 2, 2), CNBlock(64), CNBlock(64))
        self.norm, self.head = nn.LayerNorm(64), nn.Linear(64, nc)

    def forward(self, x):
        return self.head(self.norm(self.f(x).mean((2, 3))))


def augment(xb, rng):
    b = xb.shape[0]
    p = F.pad(xb, (2, 2, 2, 2))
    dx, dy = rng.randint(0, 5, b), rng.randint(0, 5, b)
    flip = rng.rand(b) < 0.5
    r = np.arange(28)
    rows = dy[:, None] + r                                        # [b, 28]
    cols = dx[:, None] + np.where(flip[:, None], 27 - r, r)       # mirrored columns where flipped
    return p[np.arange(b)[:, None, None], 0, rows[:, :, None], cols[:, None, :]][:, None]


def top1(m, x, y, dev):
    m.eval()
    ok = 0
    with torch.no_grad():
        for k in range(0, len(x), 1000):
            ok += int((m(x[k:k + 1000].to(dev)).argmax(1).cpu() == y[k:k + 1000]).sum())
    m.train()
    return ok / len(x)


def export_kw():
    """The TorchScript exporter where torch has another default (dynamo, opset 18 and up)."""
    import inspect
    return {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--epochs", type=int, default=int(os.environ.get("FMNIST_EPOCHS", 15)))
    ap.add_argument("--test", type=int, default=10000, help="test images written as PNGs")
    ap.add_argument("--calib", type=int, default=256)
    ap.add_argument("--limit", type=int, default=int(os.environ.get("FMNIST_LIMIT", 60000)), help="training images used")
    ap.add_argument("--models", default="vit,convnext")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--data-only", action="store_true", help="write the PNGs and test.list, train nothing")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    xtr, ytr = idx(f"{a.data}/train-images-idx3-ubyte.gz"), idx(f"{a.data}/train-labels-idx1-ubyte.gz")
    xte, yte = idx(f"{a.data}/t10k-images-idx3-ubyte.gz"), idx(f"{a.data}/t10k-labels-idx1-ubyte.gz")
    os.makedirs(f"{a.out}/calib", exist_ok=True)
    os.makedirs(f"{a.out}/test", exist_ok=True)
    rng = np.random.RandomState(0)
    for i, j in enumerate(rng.permutation(len(xtr))[:a.calib]):
        Image.fromarray(xtr[j]).save(f"{a.out}/calib/{i:05d}.png")
    with open(f"{a.out}/test.list", "w") as f:
        for i in range(a.test):
            p = os.path.abspath(f"{a.out}/test/{i:05d}.png")
            Image.fromarray(xte[i]).save(p)
            f.write(f"{p} {int(yte[i])}\n")
    if a.data_only:
        return
    X = torch.from_numpy(xtr[:a.limit].astype(np.float32) / 255)[:, None]
    Y = torch.from_numpy(ytr[:a.limit].astype(np.int64))
    XT = torch.from_numpy(xte.astype(np.float32) / 255)[:, None]
    YT = torch.from_numpy(yte.astype(np.int64))
    for name in a.models.split(","):
        t0 = time.time()
        torch.manual_seed(0)
        rng = np.random.RandomState(1)
        m = (ViT() if name == "vit" else ConvNeXt()).to(dev)
        bs = 128
        steps = a.epochs * math.ceil(len(X) / bs)
        opt = torch.optim.AdamW(m.parameters(), lr=2e-3, weight_decay=0.05)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 200) * 0.5 * (1 + math.cos(math.pi * k / steps)))
        for ep in range(a.epochs):
            order = torch.from_numpy(rng.permutation(len(X)))
            for k in range(0, len(X), bs):
                idx_ = order[k:k + bs]
                loss = F.cross_entropy(m(augment(X[idx_], rng).to(dev)), Y[idx_].to(dev), label_smoothing=0.1)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
            print(f"train_fmnist: {name} epoch {ep + 1}/{a.epochs} loss {float(loss.detach()):.3f} {time.time() - t0:.0f} s", flush=True)
        m = m.cpu().eval()
        acc = top1(m, XT, YT, torch.device("cpu"))
        m.eval()
        buf = io.BytesIO()
        torch.save(m.state_dict(), buf)
        sha = hashlib.sha256(buf.getvalue()).hexdigest()
        torch.onnx.export(m, torch.zeros(1, 1, 28, 28), f"{a.out}/{name}.onnx", opset_version=13,
                          input_names=["input"], output_names=["logits"], **export_kw())
        print(f"train_fmnist: {a.out}/{name}.onnx: FP32 test top-1 {100 * acc:.2f} % (torch, 10000 images); "
              f"weights sha256 {sha}; {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
