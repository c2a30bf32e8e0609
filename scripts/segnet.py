#!/usr/bin/python3
"""segnet.py: a small segmentation network with a ground truth, trained here (bench/truth.sh).

Data: composites of 64x64 pixels: a random crop of a photo of build/photos with 1 to 4 shapes
pasted on it (discs, ellipses, rectangles, triangles, stars; a solid colour, a gradient or a
stripe pattern, with noise, sometimes half transparent at the edge), and the mask of what was
pasted. Training and calibration composites use the even-numbered photos, evaluation
composites the odd-numbered ones (other seeds too): the evaluation backgrounds are never seen.

Network: a U-Net of depthwise-separable blocks (Conv 1x1, 3x3 in the first -> BatchNorm -> ReLU ->
depthwise Conv 3x3 -> BatchNorm -> ReLU -> Conv 1x1 -> BatchNorm -> ReLU; the chain --equalize
works on),
widths 12-24-48 with skips, nearest upsampling, a Sigmoid probability map [N, 1, 64, 64].
Trained with Adam on soft-Dice + BCE, torch.manual_seed(0), 1 thread, deterministic data;
exported to ONNX opset 13 (inference-mode BatchNorm).

  segnet.py all --out DIR [--eval N] [--steps N]
      writes DIR/{train,calib,eval}/ composites (eval/NNNN.png with eval/NNNN.mask.png),
      DIR/calib.list, DIR/preset.yaml (ptq's preprocessing: RGB, /255, NCHW), trains, writes
      DIR/segnet.onnx and prints the FP32 IoU on the evaluation composites.
  segnet.py eval --out DIR NAME=MODEL.onnx ...
      IoU (probability > 0.5) against the masks, pooled over the evaluation composites (summed
      intersections over summed unions), with the 95 % bootstrap interval over composites and,
      for every model after the first, the paired difference to the first; a markdown table.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
SIZE = 64
PHOTOS = ["astronaut.png", "brick.png", "camera.png", "cell.png", "chelsea.png", "clock_motion.png",
          "coffee.png", "coins.png", "color.png", "grass.png", "gravel.png", "hubble_deep_field.jpg",
          "ihc.png", "moon.png", "motorcycle_left.png", "motorcycle_right.png", "retina.jpg",
          "rocket.jpg", "logo.png", "horse.png", "page.png", "text.png"]


def load_photos(names):
    out = []
    for n in names:
        im = Image.open(os.path.join(ROOT, "build", "photos", n))
        if im.mode in ("RGBA", "LA", "P"):
            im = im.convert("RGBA")
            bg = Image.new("RGB", im.size, (255, 255, 255))
            bg.paste(im, mask=im.split()[3])
            im = bg
        im = im.convert("RGB")
        im.info = {}
        out.append(im)
    return out


def shape_mask(rng, size):
    m = Image.new("L", (size, size), 0)
    d = ImageDraw.Draw(m)
    kind = rng.randint(0, 5)
    cx, cy = rng.uniform(0.1, 0.9) * size, rng.uniform(0.1, 0.9) * size
    r = rng.uniform(0.08, 0.28) * size
    if kind == 0:
        d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=255)
    elif kind == 1:
        d.ellipse((cx - r, cy - r * rng.uniform(0.4, 0.9), cx + r, cy + r * rng.uniform(0.4, 0.9)), fill=255)
    elif kind == 2:
        a = rng.uniform(0, np.pi)
        pts = [(cx + r * np.cos(a + t) * (1.3 if k % 2 else 0.8), cy + r * np.sin(a + t))
               for k, t in enumerate(np.linspace(0, 2 * np.pi, 5)[:4])]
        d.polygon(pts, fill=255)
    elif kind == 3:
        a = rng.uniform(0, 2 * np.pi)
        d.polygon([(cx + r * np.cos(a + t), cy + r * np.sin(a + t)) for t in (0, 2.1, 4.2)], fill=255)
    else:
        a = rng.uniform(0, 2 * np.pi)
        pts = [(cx + (r if k % 2 == 0 else r * 0.45) * np.cos(a + k * np.pi / 5),
                cy + (r if k % 2 == 0 else r * 0.45) * np.sin(a + k * np.pi / 5)) for k in range(10)]
        d.polygon(pts, fill=255)
    return np.asarray(m) > 127


def fill(rng, size):
    c1 = rng.randint(0, 256, 3).astype(np.float32)
    c2 = rng.randint(0, 256, 3).astype(np.float32)
    kind = rng.randint(0, 3)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    if kind == 0:
        t = np.zeros((size, size), np.float32)
    elif kind == 1:
        a = rng.uniform(0, 2 * np.pi)
        t = np.clip((np.cos(a) * xx + np.sin(a) * yy + 1) / 2, 0, 1)
    else:
        a = rng.uniform(0, 2 * np.pi)
        t = (np.sin((np.cos(a) * xx + np.sin(a) * yy) * rng.uniform(10, 40)) > 0).astype(np.float32)
    img = c1[None, None] * (1 - t[..., None]) + c2[None, None] * t[..., None]
    return img + rng.normal(0, rng.uniform(2, 14), (size, size, 3))


def composite(rng, photos):
    photo = photos[rng.randint(0, len(photos))]
    pw, ph = photo.size
    s = rng.uniform(max(SIZE / pw, SIZE / ph), max(SIZE / pw, SIZE / ph) * 4)
    big = photo.resize((max(SIZE, round(pw * s)), max(SIZE, round(ph * s))), Image.BILINEAR)
    x, y = rng.randint(0, big.size[0] - SIZE + 1), rng.randint(0, big.size[1] - SIZE + 1)
    img = np.asarray(big.crop((x, y, x + SIZE, y + SIZE)), np.float32).copy()
    mask = np.zeros((SIZE, SIZE), bool)
    for _ in range(rng.randint(1, 5)):
        m = shape_mask(rng, SIZE)
        alpha = m.astype(np.float32)
        if rng.rand() < 0.3:  # a soft edge
            alpha = np.asarray(Image.fromarray((alpha * 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(1.0)),
                               np.float32) / 255
        img = img * (1 - alpha[..., None]) + fill(rng, SIZE) * alpha[..., None]
        mask |= m
    return np.clip(img, 0, 255).round().astype(np.uint8), mask


def make_set(d, n, seed, photos):
    os.makedirs(d, exist_ok=True)
    rng = np.random.RandomState(seed)
    xs, ys = [], []
    for i in range(n):
        img, mask = composite(rng, photos)
        Image.fromarray(img).save(os.path.join(d, f"{i:04d}.png"), compress_level=1)
        Image.fromarray(mask.astype(np.uint8) * 255).save(os.path.join(d, f"{i:04d}.mask.png"), compress_level=1)
        xs.append(img)
        ys.append(mask)
    return np.stack(xs), np.stack(ys)


def build_net():
    import torch.nn as nn

    def block(cin, cout, k=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1, groups=cout, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(), nn.Conv2d(cout, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.e3 = block(3, 12, 3), block(12, 24), block(24, 48)
            self.d2, self.d1 = block(48 + 24, 24), block(24 + 12, 12)
            self.pool = nn.MaxPool2d(2)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.head = nn.Conv2d(12, 1, 1)

        def forward(self, x):
            import torch
            a = self.e1(x)
            b = self.e2(self.pool(a))
            c = self.e3(self.pool(b))
            u = self.d2(torch.cat([self.up(c), b], 1))
            u = self.d1(torch.cat([self.up(u), a], 1))
            return torch.sigmoid(self.head(u))

    return UNet()


def to_tensor(x):
    import torch
    return torch.from_numpy(x.astype(np.float32).transpose(0, 3, 1, 2) / 255.0)


def train(out, steps, xs, ys):
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one: 2 threads spin against each other on a shared 2-core machine
    torch.use_deterministic_algorithms(True)
    net = build_net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    x_all, y_all = to_tensor(xs), torch.from_numpy(ys.astype(np.float32))[:, None]
    g = torch.Generator().manual_seed(0)
    net.train()
    t0 = time.time()
    for step in range(steps):
        idx = torch.randint(0, len(x_all), (16,), generator=g)
        x, y = x_all[idx], y_all[idx]
        if step % 2:  # flips: cheap augmentation
            x, y = x.flip(3), y.flip(3)
        p = net(x).clamp(1e-6, 1 - 1e-6)
        bce = torch.nn.functional.binary_cross_entropy(p, y)
        dice = 1 - (2 * (p * y).sum() + 1) / (p.sum() + y.sum() + 1)
        loss = bce + dice
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 100 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f} ({time.time() - t0:.0f} s)", flush=True)
    net.eval()
    dummy = torch.zeros(1, 3, SIZE, SIZE)
    torch.onnx.export(net, dummy, os.path.join(out, "segnet.onnx"), opset_version=13, input_names=["image"],
                      output_names=["prob"], dynamic_axes={"image": {0: "n"}, "prob": {0: "n"}})
    return net, time.time() - t0


def iou_units(probs, masks):
    pred = probs > 0.5
    inter = (pred & masks).reshape(len(masks), -1).sum(1)
    union = (pred | masks).reshape(len(masks), -1).sum(1)
    return inter, union


def cmd_all(a):
    names = [n for n in PHOTOS if os.path.exists(os.path.join(ROOT, "build", "photos", n))]
    train_photos = load_photos(names[0::2])
    eval_photos = load_photos(names[1::2])
    xs, ys = make_set(os.path.join(a.out, "train"), a.train, 101, train_photos)
    make_set(os.path.join(a.out, "calib"), a.calib, 202, train_photos)
    ex, ey = make_set(os.path.join(a.out, "eval"), a.eval, 303, eval_photos)
    with open(os.path.join(a.out, "calib.list"), "w") as f:
        f.write("".join(os.path.abspath(os.path.join(a.out, "calib", f"{i:04d}.png")) + "\n" for i in range(a.calib)))
    with open(os.path.join(a.out, "preset.yaml"), "w") as f:
        f.write(f"# scripts/segnet.py's input: RGB /255, NCHW, {SIZE}x{SIZE} (the composites' own size)\n"
                f"mode: stretch\nwidth: {SIZE}\nheight: {SIZE}\nresize: linear\nchannel_order: RGB\n"
                f"scale: 0.00392156862745098\nmean: [0.0, 0.0, 0.0]\nstd: [1.0, 1.0, 1.0]\nlayout: NCHW\n")
    net, secs = train(a.out, a.steps, xs, ys)
    import torch
    with torch.no_grad():
        p = net(to_tensor(ex)).numpy()[:, 0]
    i, u = iou_units(p, ey)
    print(f"segnet: {a.train} training composites, {a.steps} steps in {secs:.0f} s; FP32 (torch) IoU on "
          f"{a.eval} evaluation composites {i.sum() / u.sum():.4f}")


def cmd_eval(a):
    from bootstrap import paired_delta, ratio
    from ocr_pipeline import run_model
    import tempfile
    d = os.path.join(a.out, "eval")
    n = len([f for f in os.listdir(d) if f.endswith(".mask.png")])
    xs = [np.asarray(Image.open(os.path.join(d, f"{i:04d}.png")).convert("RGB"), np.float32).transpose(2, 0, 1)[None] / 255
          for i in range(n)]
    masks = np.stack([np.asarray(Image.open(os.path.join(d, f"{i:04d}.mask.png"))) > 127 for i in range(n)])
    rows, base = [], None
    with tempfile.TemporaryDirectory(prefix="segnet.") as tmp:
        for spec in a.models:
            name, _, path = spec.partition("=")
            probs = np.stack([o[0, 0] for o in run_model(path, xs, tmp, name.replace(":", "_"), 2)])
            i, u = iou_units(probs, masks)
            p, lo, hi = ratio(i, u)
            cell = f"{p:.4f} [{lo:.4f}, {hi:.4f}]"
            if base is None:
                base = (i, u)
                delta = ""
            else:
                dd, dlo, dhi = paired_delta(base[0], i, base[1], den_b=u)
                delta = f"{dd:+.4f} [{dlo:+.4f}, {dhi:+.4f}]"
            rows.append((name, cell, delta))
    print(f"### segnet (scripts/segnet.py, U-Net trained here): mask IoU against the pasted shapes ({n} composites)")
    print()
    print(f"| model | IoU (p > 0.5), pooled | minus {rows[0][0]} (paired) |")
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    print()
    print(f"IoU: summed intersections over summed unions over the {n} evaluation composites (backgrounds from "
          f"photos never used in training or calibration); 95 % bootstrap intervals over composites.")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("all")
    p.add_argument("--out", required=True)
    p.add_argument("--train", type=int, default=1200)
    p.add_argument("--calib", type=int, default=64)
    p.add_argument("--eval", type=int, default=200)
    p.add_argument("--steps", type=int, default=500)
    p = sub.add_parser("eval")
    p.add_argument("--out", required=True)
    p.add_argument("models", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cmd_all(a) if a.cmd == "all" else cmd_eval(a)


if __name__ == "__main__":
    main()
