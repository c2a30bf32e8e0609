#!/usr/bin/python3
"""An experiment, not part of ptq or `make bench` (README, "What the targets ask of rec"): whole-model
reconstruction of a ptq QDQ model of PP-OCRv4 rec in PyTorch, to see whether optimising against the
model's output can do what the per-layer refinements cannot. The QDQ model's placement and activation
scales are kept and run as fake quantization (straight-through rounding); learned: the AdaRound
variables of every int8 weight jointly, and/or the float biases and the activation scales (LSQ-style
gradients), with the KL divergence from the float model's output distribution as the loss. The codes,
biases and scales are written back into the QDQ model, which then runs anywhere.

  reconstruct_torch.py QDQ.onnx FP32.onnx OUT.onnx --calib C.npz --val V.npz [--iters N] [--batch B]
      [--lam X] [--lr X] [--bias --blr X] [--fix-codes] [--scales --slr X] [--device cuda]

C.npz / V.npz: preprocessed lines (arrays a0, a1, ... of [1, 3, 48, W]); a text file listing images
instead is preprocessed here as PaddleOCR's resize_norm_img (needs cv2). The logits are read at
p2o.Add.277, the input of PP-OCRv4 rec's final Softmax. Needs torch (the device machine has it;
Debian's python3-torch also runs it on a CPU). --check PREFIX writes the first input and the QDQ and
float outputs as .npy, to compare with `ptq run`."""
import argparse, math, os, sys, time
import numpy as np, onnx, torch
try:
    import cv2
except ImportError:
    cv2 = None
import torch.nn.functional as F
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "oracle"))
from edit_distance import levenshtein  # noqa: E402

def attrs(n):
    return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}

def rec_input(path, max_w=3200):
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    h, w = img.shape[:2]
    imgW = int(48 * max(320 / 48, w / h))
    imgW = min(imgW, max_w)
    rw = min(imgW, int(math.ceil(48 * w / h)))
    r = cv2.resize(img, (rw, 48)).astype(np.float32) / 255.0
    r = (r - 0.5) / 0.5
    out = np.zeros((3, 48, imgW), np.float32)
    out[:, :, :rw] = r.transpose(2, 0, 1)
    return torch.from_numpy(out)[None]

class Model:
    def __init__(self, qdq, fp32, train_bias, dev="cpu"):
        self.g = qdq.graph
        self.c = {i.name: torch.from_numpy(nh.to_array(i).copy()) for i in self.g.initializer}
        self.dev = dev
        orig = {n.output[0]: nh.to_array(n.attribute[0].t) for n in fp32.graph.node if n.op_type == "Constant"}
        orig.update({i.name: nh.to_array(i) for i in fp32.graph.initializer})
        self.w = {}   # dequantized weight name -> dict
        self.params = []
        for n in self.g.node:
            if n.op_type == "DequantizeLinear" and n.input[0] in self.c and self.c[n.input[0]].dtype == torch.int8:
                k = n.input[0][:-len("_quantized")]
                codes = nh.to_array([i for i in self.g.initializer if i.name == n.input[0]][0]).astype(np.float32)
                s = self.c[n.input[1]].numpy().astype(np.float32)
                ax = attrs(n).get("axis", 1)
                W = orig[k].astype(np.float32)
                Wm, cm = np.moveaxis(W, ax, 0), np.moveaxis(codes, ax, 0)
                sh = (-1,) + (1,) * (W.ndim - 1)
                # equalization: per-channel powers of two between the FP32 weights and the codes
                a_fp = np.abs(Wm).reshape(len(s), -1).max(1)
                a_q = np.abs(cm * s.reshape(sh)).reshape(len(s), -1).max(1)
                p = np.where(a_fp > 0, 2.0 ** np.round(np.log2(np.maximum(a_q, 1e-30) / np.maximum(a_fp, 1e-30))), 1.0)
                p = np.where(a_q > 0, p, 1.0)
                Wm = Wm * p.reshape(sh)
                W = np.moveaxis(Wm, 0, ax)
                sb = torch.from_numpy(np.moveaxis(np.broadcast_to(s.reshape(sh), Wm.shape), 0, ax).copy())
                Wt = torch.from_numpy(W.copy())
                fl = torch.floor(Wt / sb)
                frac = (Wt / sb - fl).clamp(1e-4, 1 - 1e-4)
                # h(V) = clamp(sigmoid(V) * 1.2 - 0.1, 0, 1) = frac
                V = torch.log((frac + 0.1) / 1.2 / (1 - (frac + 0.1) / 1.2)).to(dev).requires_grad_(True)
                self.w[n.output[0]] = dict(W=Wt.to(dev), s=sb.to(dev), fl=fl.to(dev), V=V, node=n,
                                           codes0=torch.from_numpy(codes).to(dev), ax=ax)
                self.params.append(V)
        # shape arithmetic stays on the CPU; float constants go to the device
        self.c = {k: (v.to(dev) if v.is_floating_point() else v) for k, v in self.c.items()}
        self.bias = {}
        if train_bias:
            for n in self.g.node:
                if n.op_type == "Conv" and len(n.input) > 2 and n.input[2] in self.c:
                    b = self.c[n.input[2]].clone().float().detach().requires_grad_(True)
                    self.bias[n.input[2]] = b
        self.hard = False
        self.scales = {}

    def train_scales(self):
        names = set()
        for n in self.g.node:
            if n.op_type == "QuantizeLinear":
                names.add(n.input[1])
        for k in names:
            self.scales[k] = torch.log(self.c[k].float()).clone().detach().requires_grad_(True)

    def h(self, V):
        return (torch.sigmoid(V) * 1.2 - 0.1).clamp(0, 1)

    def weight(self, name, quant):
        d = self.w[name]
        if not quant:
            return d["W"]
        if getattr(self, "codes0", False):
            return d["s"] * d["codes0"]
        if self.hard:
            r = (self.h(d["V"]) >= 0.5).float()
        else:
            r = self.h(d["V"])
        return d["s"] * torch.clamp(d["fl"] + r, -128, 127)

    def run(self, x, quant, want=None):
        env = dict(self.c)
        env.update(self.bias)
        for k, v in self.scales.items():
            env[k] = torch.exp(v)
        env[self.g.input[0].name] = x
        out = None
        for n in self.g.node:
            i = [env[k] if k else None for k in n.input]
            a = attrs(n)
            t = n.op_type
            if t == "DequantizeLinear":
                if n.output[0] in self.w:
                    y = self.weight(n.output[0], quant)
                else:
                    y = i[0] * i[1] if quant else i[0]
            elif t == "QuantizeLinear":
                if quant:
                    q = i[0] / i[1]
                    q = q + (torch.round(q) - q).detach()
                    y = torch.clamp(q, -128, 127)
                else:
                    y = i[0]
            elif t == "Conv":
                pads = a.get("pads", [0, 0, 0, 0])
                xx = i[0]
                if pads[0] != pads[2] or pads[1] != pads[3]:
                    xx = F.pad(xx, (pads[1], pads[3], pads[0], pads[2])); pads = [0, 0, 0, 0]
                y = F.conv2d(xx, i[1], i[2] if len(i) > 2 else None, a.get("strides", [1, 1]),
                             (pads[0], pads[1]), a.get("dilations", [1, 1]), a.get("group", 1))
            elif t == "Mul": y = i[0] * i[1]
            elif t == "Add": y = i[0] + i[1]
            elif t == "Sub": y = i[0] - i[1]
            elif t == "Div":
                y = torch.div(i[0], i[1], rounding_mode="trunc") if not i[0].is_floating_point() else i[0] / i[1]
            elif t == "Pow": y = i[0] ** i[1]
            elif t == "Sqrt": y = torch.sqrt(i[0])
            elif t == "Clip":
                lo = i[1] if len(i) > 1 and i[1] is not None else a.get("min")
                hi = i[2] if len(i) > 2 and i[2] is not None else a.get("max")
                y = torch.clamp(i[0], None if lo is None else float(lo), None if hi is None else float(hi))
            elif t == "Cast":
                to = a["to"]
                if to == 1:
                    y = i[0].to(self.dev, torch.float32)
                else:
                    y = i[0].cpu().to({7: torch.int64, 6: torch.int32, 9: torch.bool}[to])
            elif t == "MatMul": y = torch.matmul(i[0], i[1])
            elif t == "Shape": y = torch.tensor(i[0].shape, dtype=torch.int64)
            elif t == "Slice":
                st, en = i[1].tolist(), i[2].tolist()
                ax = i[3].tolist() if len(i) > 3 and i[3] is not None else list(range(len(st)))
                sp = i[4].tolist() if len(i) > 4 and i[4] is not None else [1] * len(st)
                sl = [slice(None)] * i[0].dim()
                for s0, e0, a0, p0 in zip(st, en, ax, sp):
                    dim = i[0].shape[a0]
                    e0 = min(e0, dim) if e0 >= 0 else e0
                    sl[a0] = slice(s0, e0, p0)
                y = i[0][tuple(sl)]
            elif t == "Squeeze":
                axes = i[1].tolist() if len(i) > 1 else a["axes"]
                y = i[0]
                for ax in sorted([x % i[0].dim() for x in axes], reverse=True):
                    y = y.squeeze(ax)
            elif t == "Unsqueeze":
                axes = i[1].tolist() if len(i) > 1 else a["axes"]
                y = i[0]
                for ax in sorted(axes):
                    y = y.unsqueeze(ax)
            elif t == "Concat": y = torch.cat(i, a["axis"])
            elif t == "Reshape":
                shp = i[1].tolist()
                shp = [i[0].shape[k] if v == 0 else v for k, v in enumerate(shp)]
                y = i[0].reshape(shp)
            elif t == "Transpose": y = i[0].permute(a["perm"])
            elif t == "ReduceMean": y = i[0].mean(dim=a["axes"], keepdim=bool(a.get("keepdims", 1)))
            elif t == "Sigmoid": y = torch.sigmoid(i[0])
            elif t == "Relu": y = F.relu(i[0])
            elif t == "HardSigmoid": y = torch.clamp(a.get("alpha", 0.2) * i[0] + a.get("beta", 0.5), 0, 1)
            elif t == "BatchNormalization":
                y = F.batch_norm(i[0], i[3], i[4], i[1], i[2], False, 0.0, a.get("epsilon", 1e-5))
            elif t == "Flatten":
                ax = a.get("axis", 1)
                y = i[0].reshape(int(np.prod(i[0].shape[:ax])), -1)
            elif t == "Softmax":
                y = torch.softmax(i[0], a.get("axis", -1))
            elif t == "GlobalAveragePool": y = i[0].mean(dim=(2, 3), keepdim=True)
            elif t == "AveragePool":
                y = F.avg_pool2d(i[0], a["kernel_shape"], a.get("strides"), 0,
                                 count_include_pad=bool(a.get("count_include_pad", 0)))
            else:
                raise SystemExit(f"op {t} not handled")
            env[n.output[0]] = y
            if want == "logits" and n.output[0] == "p2o.Add.277":
                return y
        return env[self.g.output[0].name]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qdq"); ap.add_argument("fp32"); ap.add_argument("out")
    ap.add_argument("--calib", required=True); ap.add_argument("--val")
    ap.add_argument("--iters", type=int, default=2000); ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--lam", type=float, default=0.01); ap.add_argument("--bias", action="store_true")
    ap.add_argument("--blr", type=float, default=1e-4); ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1); ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fix-codes", action="store_true"); ap.add_argument("--scales", action="store_true")
    ap.add_argument("--slr", type=float, default=1e-3)
    ap.add_argument("--time-limit", type=float, default=1e9)
    ap.add_argument("--device", default="cpu"); ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--check", help="write the first calibration input here as .npy with the input model's output")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    qdq, fp32 = onnx.load(args.qdq), onnx.load(args.fp32)
    m = Model(qdq, fp32, args.bias, args.device)
    def load_list(p):
        if p.endswith(".npz"):
            z = np.load(p)
            return [torch.from_numpy(z[k]) for k in sorted(z.files, key=lambda k: int(k[1:]))]
        return [rec_input(l.strip()) for l in open(p) if l.strip()]
    cal = [x.to(args.device) for x in load_list(args.calib)]
    val = [x.to(args.device) for x in load_list(args.val)] if args.val else []
    t0 = time.time()
    if args.check:
        m.codes0 = True
        with torch.no_grad():
            np.save(args.check + ".in.npy", cal[0].numpy())
            np.save(args.check + ".q.npy", m.run(cal[0], True).numpy())
            np.save(args.check + ".f.npy", m.run(cal[0], False).numpy())
        return
    with torch.no_grad():
        tgt = [m.run(x, False, "logits") for x in cal]
        vt = [m.run(x, False, "logits").argmax(-1) for x in val]

    def evaluate(tag):
        if not val:
            return
        def read(lab):
            lab = lab.flatten().tolist()
            return [l for k, l in enumerate(lab) if l != 0 and (k == 0 or l != lab[k - 1])]
        with torch.no_grad():
            agree = tot = edits = chars = 0
            for x, t in zip(val, vt):
                p = m.run(x, True, "logits").argmax(-1)
                agree += (p == t).sum().item(); tot += t.numel()
                ra, rb = read(t), read(p)
                edits += levenshtein(ra, rb); chars += len(ra)
        print(f"{tag}: val seq-top1 {agree / tot:.5f} seq-chars {1 - edits / chars:.4f} ({edits} edits) ({time.time() - t0:.0f} s)", flush=True)

    m.hard = True
    evaluate("start (codes from FP32 frac, hardened)")
    m.codes0 = True
    evaluate("the input model's codes")
    m.codes0 = args.fix_codes
    m.hard = False
    if args.scales:
        m.train_scales()
    groups = [] if args.fix_codes else [{"params": m.params, "lr": args.lr}]
    if m.scales:
        groups.append({"params": list(m.scales.values()), "lr": args.slr})
    if m.bias:
        groups.append({"params": list(m.bias.values()), "lr": args.blr})
    opt = torch.optim.Adam(groups)
    nw = sum(v.numel() for v in m.params)
    rng = np.random.default_rng(args.seed)
    warm = int(0.2 * args.iters)
    for it in range(args.iters):
        if time.time() - t0 > args.time_limit:
            print(f"time limit at iteration {it}", flush=True)
            break
        idx = rng.integers(len(cal), size=args.batch)
        loss = 0.0
        for k in idx:
            lg = m.run(cal[k], True, "logits")
            lp = F.log_softmax(lg, -1); pt = F.softmax(tgt[k], -1)
            loss = loss + (pt * (F.log_softmax(tgt[k], -1) - lp)).sum(-1).mean() / args.batch
        if it >= warm and not args.fix_codes:
            beta = 20 - (20 - 2) * (it - warm) / max(args.iters - warm, 1)
            reg = sum((1 - (2 * m.h(v) - 1).abs() ** beta).sum() for v in m.params) / nw
            total = loss + args.lam * reg
        else:
            reg = torch.tensor(0.0); total = loss
        opt.zero_grad(); total.backward(); opt.step()
        if it % 100 == 0 or it == args.iters - 1:
            soft = 0 if args.fix_codes else sum(((m.h(v) > 0.01) & (m.h(v) < 0.99)).sum().item() for v in m.params) / nw
            print(f"it {it}: kl {loss.item():.5f} reg {reg.item():.4f} undecided {soft:.3f} ({time.time() - t0:.0f} s)", flush=True)
        if it % args.eval_every == args.eval_every - 1:
            m.hard = True; evaluate(f"it {it} hardened"); m.hard = False
    m.hard = True
    evaluate("final hardened")
    # write the codes and biases back
    inits = {i.name: i for i in qdq.graph.initializer}
    changed = 0
    for name, d in m.w.items():
        if args.fix_codes:
            continue
        codes = torch.clamp(d["fl"] + (m.h(d["V"]) >= 0.5).float(), -128, 127).to(torch.int8)
        changed += (codes.float() != d["codes0"]).sum().item()
        q = d["node"].input[0]
        inits[q].CopyFrom(nh.from_array(codes.cpu().numpy(), q))
    for name, b in m.bias.items():
        inits[name].CopyFrom(nh.from_array(b.detach().cpu().numpy().astype(np.float32), name))
    for name, v in m.scales.items():
        inits[name].CopyFrom(nh.from_array(torch.exp(v).detach().cpu().numpy().astype(np.float32), name))
    onnx.save(qdq, args.out)
    print(f"wrote {args.out}: {changed} codes differ from the input model's of {nw}")

if __name__ == "__main__":
    main()
