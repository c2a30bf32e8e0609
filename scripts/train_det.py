#!/usr/bin/python3
"""train_det.py DATA OUT.onnx: trains scripts/yolo.py's YOLOv8-like detector on the set
scripts/truthdata.py composes (DATA/train), exports it to ONNX (opset 13, output [1, 4 + nc, N]:
cx cy w h in input pixels, class scores through a sigmoid; what `ptq compare --labels yolo:DIR`
decodes) and says its mAP on DATA/val (tests/oracle/cocoeval.py, boxes mapped back through the
letterbox) and the weights' sha256.

Model: YoloV8Like(nc, depth 0.33, width 0.125) with a DFL head of 8 bins; input 320x320, the
images letterboxed as Ultralytics does (gain min(320 / h, 320 / w), grey 114 padding, centred).
Loss, anchor-free: each ground-truth box goes to the level matching its longest side (<= 64 px:
stride 8, <= 128: 16, else 32) and there to the cells whose centres lie inside the box and within
2.5 cells of its centre (at least the centre's cell; a cell two boxes claim goes to the smaller);
BCE of the class logits over every cell (target 1 for the assigned class, 0 elsewhere), GIoU and
DFL (cross-entropy on the two bins around each distance) at the assigned cells, each normalised by
the number of assigned cells. AdamW, cosine learning rate, horizontal flips. Seeded; on the CPU by
default with torch threads = cores (--device cuda only to iterate faster).
"""
import argparse
import glob
import hashlib
import io
import math
import os
import sys
import time

import cv2
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))
from yolo import Detect, YoloV8Like  # noqa: E402

S = 320
REG = 8
STRIDES = (8, 16, 32)


def letterbox(img):
    h, w = img.shape[:2]
    g = min(S / h, S / w)
    nw, nh = round(w * g), round(h * g)
    px, py = round((S - nw) / 2 - 0.1), round((S - nh) / 2 - 0.1)
    out = np.full((S, S, 3), 114, np.uint8)
    out[py:py + nh, px:px + nw] = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    return out, g, px, py


def load_split(d):
    """Letterboxed images [N, 3, S, S] uint8, boxes per image (class, x1, y1, x2, y2 in input pixels),
    and each image's (w, h, gain, px, py)."""
    paths = sorted(glob.glob(os.path.join(d, "images", "*.png")))
    xs, boxes, geo = [], [], []
    for p in paths:
        img = cv2.cvtColor(cv2.imread(p, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        h, w = img.shape[:2]
        lb, g, px, py = letterbox(img)
        xs.append(lb.transpose(2, 0, 1))
        b = []
        lp = os.path.join(d, "labels", os.path.basename(p)[:-4] + ".txt")
        for line in open(lp).read().split("\n"):
            if line.strip():
                c, cx, cy, bw, bh = line.split()
                cx, cy, bw, bh = float(cx) * w, float(cy) * h, float(bw) * w, float(bh) * h
                b.append((int(c), (cx - bw / 2) * g + px, (cy - bh / 2) * g + py, (cx + bw / 2) * g + px, (cy + bh / 2) * g + py))
        boxes.append(b)
        geo.append((w, h, g, px, py))
    return np.stack(xs), boxes, geo, paths


def build(nc):
    torch.manual_seed(0)
    m = YoloV8Like(nc=nc, depth=0.33, width=0.125)
    ch = tuple(m.detect.cv2[i][0].conv.in_channels for i in range(3))
    m.detect = Detect(nc, ch, STRIDES, reg_max=REG)
    for mod in m.modules():  # class logits start low (prior 0.01), as detectors are initialised
        if isinstance(mod, nn.Conv2d) and mod.out_channels == nc and mod.bias is not None:
            nn.init.constant_(mod.bias, -4.6)
    return m


def head(m, x):
    """Per level: box logits [B, 4 REG, h, w] and class logits [B, nc, h, w]."""
    return [(m.detect.cv2[i](f), m.detect.cv3[i](f)) for i, f in enumerate(m.features(x))]


def targets(boxes, nc, flip):
    """Per level: class targets [B, nc, h, w], a mask of assigned cells [B, h, w] and their boxes [B, 4, h, w]."""
    B = len(boxes)
    out = []
    for s in STRIDES:
        n = S // s
        cls = np.zeros((B, nc, n, n), np.float32)
        pos = np.zeros((B, n, n), bool)
        box = np.zeros((B, 4, n, n), np.float32)
        area = np.full((B, n, n), np.inf, np.float32)
        out.append((s, cls, pos, box, area))
    for bi, bs in enumerate(boxes):
        for c, x1, y1, x2, y2 in bs:
            if flip[bi]:
                x1, x2 = S - x2, S - x1
            side = max(x2 - x1, y2 - y1)
            li = 0 if side <= 64 else 1 if side <= 128 else 2
            s, cls, pos, box, area = out[li]
            n = S // s
            cx, cy = (x1 + x2) / 2 / s, (y1 + y2) / 2 / s
            a = (x2 - x1) * (y2 - y1)
            cells = [(j, i) for j in range(max(0, int(cy - 3)), min(n, int(cy + 4)))
                     for i in range(max(0, int(cx - 3)), min(n, int(cx + 4)))
                     if abs(i + 0.5 - cx) <= 2.5 and abs(j + 0.5 - cy) <= 2.5
                     and x1 < (i + 0.5) * s < x2 and y1 < (j + 0.5) * s < y2]
            cj, ci = min(int(cy), n - 1), min(int(cx), n - 1)
            if (cj, ci) not in cells:
                cells.append((cj, ci))
            for j, i in cells:
                if a < area[bi, j, i]:
                    area[bi, j, i] = a
                    pos[bi, j, i] = True
                    cls[bi, :, j, i] = 0
                    cls[bi, c, j, i] = 1
                    box[bi, :, j, i] = (x1, y1, x2, y2)
    return [(s, torch.from_numpy(c), torch.from_numpy(p), torch.from_numpy(b)) for s, c, p, b, _ in out]


def giou(a, b):
    ix = (torch.min(a[:, 2], b[:, 2]) - torch.max(a[:, 0], b[:, 0])).clamp(min=0)
    iy = (torch.min(a[:, 3], b[:, 3]) - torch.max(a[:, 1], b[:, 1])).clamp(min=0)
    inter = ix * iy
    ua = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    iou = inter / (ua + 1e-7)
    cw = torch.max(a[:, 2], b[:, 2]) - torch.min(a[:, 0], b[:, 0])
    chh = torch.max(a[:, 3], b[:, 3]) - torch.min(a[:, 1], b[:, 1])
    c = cw * chh + 1e-7
    return iou - (c - ua) / c


def loss_fn(outs, tg, dev):
    lcls = lbox = ldfl = 0.0
    npos = max(1.0, float(sum(t[2].sum() for t in tg)))
    bins = torch.arange(REG, dtype=torch.float32, device=dev)
    for (pb, pc), (s, tcls, tpos, tbox) in zip(outs, tg):
        tcls, tpos, tbox = tcls.to(dev), tpos.to(dev), tbox.to(dev)
        lcls = lcls + F.binary_cross_entropy_with_logits(pc, tcls, reduction="sum")
        if not tpos.any():
            continue
        B, _, n, _ = pb.shape
        logits = pb.view(B, 4, REG, n, n).permute(0, 3, 4, 1, 2)[tpos]  # [P, 4, REG]
        gt = tbox.permute(0, 2, 3, 1)[tpos]                             # [P, 4]
        jj, ii = torch.meshgrid(torch.arange(n, device=dev), torch.arange(n, device=dev), indexing="ij")
        ax = (ii.float() + 0.5)[None].expand(B, n, n)[tpos] * s
        ay = (jj.float() + 0.5)[None].expand(B, n, n)[tpos] * s
        dist = (logits.softmax(-1) * bins).sum(-1) * s                    # l t r b in pixels
        pred = torch.stack((ax - dist[:, 0], ay - dist[:, 1], ax + dist[:, 2], ay + dist[:, 3]), 1)
        lbox = lbox + (1 - giou(pred, gt)).sum()
        t = torch.stack((ax - gt[:, 0], ay - gt[:, 1], gt[:, 2] - ax, gt[:, 3] - ay), 1) / s
        t = t.clamp(0, REG - 1 - 0.01)
        tl = t.floor().long()
        wr = t - tl.float()
        lp = logits.log_softmax(-1)
        ldfl = ldfl - (lp.gather(-1, tl[..., None])[..., 0] * (1 - wr) + lp.gather(-1, (tl + 1)[..., None])[..., 0] * wr).sum() / 4
    return (0.5 * lcls + 7.5 * lbox + 1.5 * ldfl) / npos


def evaluate(m, x, geo, boxes_px, nc, dev):
    """mAP50 and mAP50-95 of the model on letterboxed images x (decoded as ptq compare does:
    best class per anchor, score >= 0.001, per-class NMS at IoU 0.7, 300 boxes)."""
    from cocoeval import coco_map
    import copy
    import torchvision
    m = copy.deepcopy(m).cpu().eval()  # the head's grid is made on the CPU
    dev = torch.device("cpu")
    gts, dts = [], []
    with torch.no_grad():
        for k in range(0, len(x), 32):
            y = m(torch.from_numpy(x[k:k + 32]).to(dev).float() / 255).cpu()
            for b in range(y.shape[0]):
                i = k + b
                w, h, g, px, py = geo[i]
                p = y[b].T
                sc, cl = p[:, 4:].max(1)
                keep = sc >= 0.001
                p, sc, cl = p[keep], sc[keep], cl[keep]
                bx = torch.cat((p[:, :2] - p[:, 2:4] / 2, p[:, :2] + p[:, 2:4] / 2), 1)
                idx = torchvision.ops.batched_nms(bx, sc, cl, 0.7)[:300]
                for j in idx.tolist():
                    x1, y1, x2, y2 = bx[j].tolist()
                    x1, x2 = [min(max((v - px) / g, 0.0), w) for v in (x1, x2)]
                    y1, y2 = [min(max((v - py) / g, 0.0), h) for v in (y1, y2)]
                    dts.append({"image_id": i, "category_id": int(cl[j]), "bbox": [x1, y1, x2 - x1, y2 - y1], "score": float(sc[j])})
                for c, x1, y1, x2, y2 in boxes_px[i]:
                    x1, x2 = (x1 - px) / g, (x2 - px) / g
                    y1, y2 = (y1 - py) / g, (y2 - py) / g
                    gts.append({"image_id": i, "category_id": c, "bbox": [x1, y1, x2 - x1, y2 - y1],
                                "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})
    r = coco_map(gts, dts, list(range(len(x))), list(range(nc)))
    return r[0], r[1]


def export_kw():
    """The TorchScript exporter where torch has another default (dynamo, opset 18 and up)."""
    import inspect
    return {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--epochs", type=int, default=int(os.environ.get("DET_EPOCHS", 60)))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    dev = torch.device(a.device)
    nc = len(open(os.path.join(a.data, "classes.txt")).read().split())
    t0 = time.time()
    x, boxes, _, _ = load_split(os.path.join(a.data, "train"))
    vx, vboxes, vgeo, _ = load_split(os.path.join(a.data, "val"))
    m = build(nc).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=a.lr, weight_decay=5e-4)
    steps = a.epochs * math.ceil(len(x) / a.batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 100) * 0.5 * (1 + math.cos(math.pi * k / steps)))
    print(f"train_det: {len(x)} training images, {len(vx)} val, {sum(p.numel() for p in m.parameters())} parameters, "
          f"{a.epochs} epochs on {a.device} ({a.threads} threads)", flush=True)
    for ep in range(a.epochs):
        order = rng.permutation(len(x))
        tot = 0.0
        for k in range(0, len(x), a.batch):
            idx = order[k:k + a.batch]
            flip = rng.rand(len(idx)) < 0.5
            xb = x[idx].copy()
            xb[flip] = xb[flip][..., ::-1]
            xb = torch.from_numpy(xb).to(dev).float() / 255
            loss = loss_fn(head(m, xb), targets([boxes[i] for i in idx], nc, flip), dev)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 10.0)
            opt.step()
            sched.step()
            tot += float(loss.detach()) * len(idx)
        msg = f"train_det: epoch {ep + 1}/{a.epochs} loss {tot / len(x):.3f} {time.time() - t0:.0f} s"
        if (ep + 1) % 10 == 0 or ep + 1 == a.epochs:
            m50, m5095 = evaluate(m, vx, vgeo, vboxes, nc, dev)
            msg += f" val mAP50 {m50:.4f} mAP50-95 {m5095:.4f}"
        print(msg, flush=True)
    m = m.cpu().eval()
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    sha = hashlib.sha256(buf.getvalue()).hexdigest()
    torch.onnx.export(m, torch.zeros(1, 3, S, S), a.out, opset_version=13, input_names=["images"],
                      output_names=["output0"], **export_kw())
    m50, m5095 = evaluate(m, vx, vgeo, vboxes, nc, torch.device("cpu"))
    print(f"train_det: {a.out}: FP32 val mAP50 {m50:.4f} mAP50-95 {m5095:.4f} (torch); weights sha256 {sha}; "
          f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
