#!/usr/bin/python3
"""zoo.py: exports ptq's model zoo as ONNX into build/zoo/ (never committed).

  scripts/zoo.py [--tier ci|all] [--opset 13|17 ...] [--models a,b] [--force] [--list] [--threads N]

Models: torchvision 0.14's classifiers, semantic segmenters, detectors (and keypoint / instance
segmentation R-CNNs), plus a YOLOv8-like detector written here (scripts/yolo.py) with and without
NMS. No weights are downloaded (weights=None, weights_backbone=None): torchvision's default
initialisation, then every BatchNorm's running statistics measured on the calibration photos
(build/photos): momentum None (a plain average over the batches), BatchNorm layers alone in
train mode, forward passes without grad, then eval. So activations have realistic ranges for
calibration. torch.manual_seed(0) before each model: the same bytes every time on one machine.

Each export writes build/zoo/NAME.opN.onnx and NAME.opN.json (task, input shape, ptq preset and
overrides, compare metric, export status, seconds, size, node count, error). An entry whose
.json records the same recipe (this script, yolo.py, torch and torchvision versions, the entry's
parameters) is up to date and skipped, a failed export included (--force redoes it).

Detectors: torchvision's take a list of [3, H, W] images; the export wraps them to take the
[1, 3, H, W] tensor ptq's presets produce (x[0]) and return (boxes, scores, labels). They
normalise inside (GeneralizedRCNNTransform / SSD's transform), so their preset feeds /255 pixels;
min_size = max_size = the input side, so the internal resize is the identity scale.

ViT at opset 13: torch 1.13's nn.MultiheadAttention takes its fused fast path
(aten::_native_multi_head_attention, no ONNX symbolic) in eval mode without grad. The export
runs the attention through F.multi_head_attention_forward (the non-fused path: MatMul, Softmax,
Transpose) by giving each MultiheadAttention a forward that calls it; see _unfuse_mha. (Opset
14 or 17 does not help: no opset has an export of the fused op.) Exporting with grad enabled
would avoid it too (the fast path is skipped when weights require grad).

swin_v2_t: its attention calls Tensor.zero_ on a slice of the qkv bias in forward, and torch 1.13
has no ONNX export of aten::zero; _zero_symbolic gives it one (ConstantOfShape of its shape).

Each export also leaves NAME.opN.ref/: the input it was traced with (images.npy) and torch's
outputs (OUTPUT.npy), so ONNX Runtime can be checked against torch (bench/zoo.sh does).
"""
import argparse
import hashlib
import inspect
import json
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision import models as tvm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import yolo  # noqa: E402

warnings.filterwarnings("ignore", message="Palette images")

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


# ---- entries -----------------------------------------------------------------------------------
# name: (task, build, side, tiers, extra)   task: cls | seg | det | yolo | yolo-nms
def cls(fn, **kw):
    return lambda: getattr(tvm, fn)(weights=None, **kw)


def vit_head(m):
    # torchvision zero-initialises the ViT head (weights for fine-tuning): every logit would be
    # 0 and top-1 meaningless; N(0, 0.02) gives logits of std ~0.5 over LayerNorm'd features
    nn.init.normal_(m.heads.head.weight, std=0.02)
    return m


def vit(fn):
    return lambda: vit_head(getattr(tvm, fn)(weights=None))


def vit_tiny():
    # a small ViT (4 layers, 192 wide, 4 heads, 64x64 input, 16 patches): LayerNorm, MatMul
    # attention and GELU of vit_b_16 at a CI-sized cost
    # 4 heads (even): torch 1.13 would take its fused attention path (see _unfuse_mha)
    return vit_head(tvm.VisionTransformer(image_size=64, patch_size=16, num_layers=4, num_heads=4,
                                          hidden_dim=192, mlp_dim=768, num_classes=1000))


def swin_mini():
    # a small Swin (2 stages of 2 blocks, 32 wide, window 4, 64x64 input): shifted windows with
    # their attention masks (Mod, ScatterND or Slice depending on the exporter) at a CI-sized cost
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                           stochastic_depth_prob=0.0)


def seg(fn):
    return lambda: getattr(tvm.segmentation, fn)(weights=None, weights_backbone=None)


def det(fn, side, **kw):
    return lambda: getattr(tvm.detection, fn)(weights=None, weights_backbone=None, **kw)


def rcnn(fn, side):
    return det(fn, side, min_size=side, max_size=side)


ENTRIES = {
    # classification (ImageNet preprocessing at the given side, shorter = side * 256 / 224)
    "mobilenet_v3_small": ("cls", cls("mobilenet_v3_small"), 224, "ci", {}),
    "resnet18": ("cls", cls("resnet18"), 160, "ci", {}),
    "vit_tiny": ("cls", vit_tiny, 64, "ci", {}),
    "mobilenet_v2": ("cls", cls("mobilenet_v2"), 224, "all", {}),
    "mobilenet_v3_large": ("cls", cls("mobilenet_v3_large"), 224, "all", {}),
    "efficientnet_b0": ("cls", cls("efficientnet_b0"), 224, "all", {}),
    "efficientnet_v2_s": ("cls", cls("efficientnet_v2_s"), 224, "all", {}),
    "regnet_y_400mf": ("cls", cls("regnet_y_400mf"), 224, "all", {}),
    "regnet_x_400mf": ("cls", cls("regnet_x_400mf"), 224, "all", {}),
    "shufflenet_v2_x1_0": ("cls", cls("shufflenet_v2_x1_0"), 224, "all", {}),
    "squeezenet1_1": ("cls", cls("squeezenet1_1"), 224, "all", {}),
    "densenet121": ("cls", cls("densenet121"), 224, "all", {}),
    "googlenet": ("cls", cls("googlenet", aux_logits=False, init_weights=True), 224, "all", {}),
    "inception_v3": ("cls", cls("inception_v3", aux_logits=False, init_weights=True), 299, "all", {}),
    "mnasnet1_0": ("cls", cls("mnasnet1_0"), 224, "all", {}),
    "resnet50": ("cls", cls("resnet50"), 224, "all", {}),
    "resnext50_32x4d": ("cls", cls("resnext50_32x4d"), 224, "all", {}),
    "convnext_tiny": ("cls", cls("convnext_tiny"), 224, "all", {}),
    "swin_t": ("cls", cls("swin_t"), 224, "all", {}),
    "swin_mini": ("cls", swin_mini, 64, "all", {}),
    "swin_v2_t": ("cls", cls("swin_v2_t"), 256, "all", {}),
    "maxvit_t": ("cls", cls("maxvit_t"), 224, "all", {}),
    "vit_b_16": ("cls", vit("vit_b_16"), 224, "all", {}),
    # semantic segmentation (output 'out': [1, 21, H, W] logits)
    "lraspp_mobilenet_v3_large": ("seg", seg("lraspp_mobilenet_v3_large"), 256, "ci", {}),
    # the same segmenter as shipped at 320x320 (scripts/variants.py derives its variants)
    "lraspp_mobilenet_v3_large_320": ("seg", seg("lraspp_mobilenet_v3_large"), 320, "all", {}),
    "deeplabv3_mobilenet_v3_large": ("seg", seg("deeplabv3_mobilenet_v3_large"), 256, "all", {}),
    "fcn_resnet50": ("seg", seg("fcn_resnet50"), 256, "all", {}),
    # YOLOv8-like (scripts/yolo.py): [1, 84, 2100] raw, or [1, K, 6] after NMS
    "yolov8n_like": ("yolo", lambda: yolo.YoloV8Like(nc=80), 320, "ci", {}),
    "yolov8n_like_nms": ("yolo-nms", lambda: yolo.YoloNMS(yolo.YoloV8Like(nc=80)), 320, "all", {}),
    # torchvision detection, keypoints, instance segmentation ([1, 3, H, W] -> boxes, scores, labels[, ...])
    "ssdlite320_mobilenet_v3_large": ("det", det("ssdlite320_mobilenet_v3_large", 320), 320, "all", {}),
    "fasterrcnn_mobilenet_v3_large_320_fpn": ("det", rcnn("fasterrcnn_mobilenet_v3_large_320_fpn", 320), 320, "all",
                                              {"bn": "backbone"}),
    "retinanet_resnet50_fpn": ("det", rcnn("retinanet_resnet50_fpn", 320), 320, "all", {}),
    "fcos_resnet50_fpn": ("det", rcnn("fcos_resnet50_fpn", 320), 320, "all", {}),
    "maskrcnn_resnet50_fpn": ("det", rcnn("maskrcnn_resnet50_fpn", 320), 320, "all",
                              {"bn": "backbone", "outputs": ["masks"]}),
    "keypointrcnn_resnet50_fpn": ("det", rcnn("keypointrcnn_resnet50_fpn", 320), 320, "all",
                                  {"bn": "backbone", "outputs": ["keypoints", "keypoints_scores"]}),
}


def preset_args(task, side):
    """ptq's preprocessing for the entry: --preset and key=value overrides (docs/preprocessing.md)."""
    if task == "cls":
        if side == 224:
            return ["--preset", "imagenet-torchvision"]
        return ["--preset", "imagenet-torchvision", "--size", f"{side}x{side}", "--shorter", str(side * 256 // 224)]
    if task == "seg":  # torchvision's segmentation references: the whole photo, ImageNet normalised
        return ["--preset", "imagenet-torchvision", "--mode", "stretch", "--size", f"{side}x{side}"]
    # detectors: RGB / 255, letterboxed (torchvision's normalise inside the model)
    return ["--preset", "yolo-letterbox-640", "--size", f"{side}x{side}"]


def metric_for(task):
    # what `ptq compare --metric` offers for the task: top-1 agreement for classifiers; for the
    # segmenters' [1, 21, H, W] logits the argmax over axis 1 per pixel (seq-top1:1, pixel
    # agreement; mask-iou only reads a [N, 1, H, W] map); detectors: box-f1, their boxes matched
    # to FP32's (the YOLO head decoded, [K, 6] detections, or torchvision's boxes and scores)
    return {"cls": "top1", "seg": "seq-top1:1"}.get(task, "box-f1")


# ---- photos, BatchNorm statistics --------------------------------------------------------------
_DECODED = []


def photos(side, task):
    """The photos stretched to side x side, RGB, /255 (and ImageNet-normalised for cls and seg),
    as a [N, 3, side, side] batch."""
    from PIL import Image
    d = os.path.join(ROOT, "build", "photos")
    if not _DECODED:
        for f in sorted(os.listdir(d)):
            if f.lower().endswith((".png", ".jpg", ".jpeg")):
                try:
                    _DECODED.append(Image.open(os.path.join(d, f)).convert("RGB"))
                except OSError:
                    pass  # truncated.jpg
    out = []
    for im in _DECODED:
        a = np.asarray(im.resize((side, side), Image.BILINEAR), dtype=np.float32) / 255.0
        if task in ("cls", "seg"):
            a = (a - np.array(IMAGENET_MEAN, np.float32)) / np.array(IMAGENET_STD, np.float32)
        out.append(torch.from_numpy(a.transpose(2, 0, 1).copy()))
    if len(out) < 8:
        sys.exit(f"zoo: {d} has {len(out)} usable photos (run make deps)")
    return torch.stack(out)


def bn_statistics(model, x, batch=8, forward=None):
    """BatchNorm running mean and variance measured over the photos (the other layers in eval).
    forward: what runs on each batch (default the model)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    model.eval()  # also without BatchNorm: torch's reference outputs are eval-mode (no dropout)
    if not bns:
        return 0
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the batches
        m.train()
    with torch.no_grad():
        for i in range(0, len(x) - batch + 1, batch):  # full batches only (BN after a 1x1 pool needs > 1)
            (forward or model)(x[i:i + batch])
    model.eval()
    return len(bns)


class DetWrap(nn.Module):
    """[1, 3, H, W] -> torchvision detector on [x[0]] -> (boxes, scores, labels, extra...)."""

    def __init__(self, m, extra):
        super().__init__()
        self.m, self.extra = m, extra

    def forward(self, x):
        if self.training or x.shape[0] != 1:  # BN statistics: the batch as a list of images
            r = self.m(list(x.unbind(0)))
            return r
        r = self.m([x[0]])[0]
        return tuple([r["boxes"], r["scores"], r["labels"]] + [r[k] for k in self.extra])


class SegWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


def _zero_symbolic(g, self):
    # aten::zero (swin_v2's attention zeroes the key third of a copy of the qkv bias in its
    # forward; torch 1.13 has no ONNX symbolic for it): zeros of the input's shape
    return g.op("ConstantOfShape", g.op("Shape", self), value_t=torch.tensor([0.0]))


torch.onnx.register_custom_op_symbolic("aten::zero", _zero_symbolic, 13)


def _unfuse_mha(model):
    """Each nn.MultiheadAttention runs F.multi_head_attention_forward (not torch 1.13's fused
    aten::_native_multi_head_attention, which has no ONNX export)."""
    for m in model.modules():
        if isinstance(m, nn.MultiheadAttention):
            def fwd(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                    average_attn_weights=True, m=m):
                q, k, v = (t.transpose(0, 1) for t in (query, key, value)) if m.batch_first else (query, key, value)
                o, w = F.multi_head_attention_forward(
                    q, k, v, m.embed_dim, m.num_heads, m.in_proj_weight, m.in_proj_bias,
                    m.bias_k, m.bias_v, m.add_zero_attn, m.dropout, m.out_proj.weight, m.out_proj.bias,
                    training=False, key_padding_mask=key_padding_mask, need_weights=False, attn_mask=attn_mask)
                return (o.transpose(0, 1) if m.batch_first else o), None
            m.forward = fwd


# ---- export ------------------------------------------------------------------------------------
# Raise when a change here alters what the exports contain (yolo.py is hashed as it is).
EXPORT_VERSION = 2


def recipe(name, opset):
    """What the export depends on: yolo.py, the entry's builder (its source), the entry, versions."""
    h = hashlib.sha256()
    with open(os.path.join(ROOT, "scripts", "yolo.py"), "rb") as fh:
        h.update(fh.read())
    task, build, side, _, extra = ENTRIES[name]
    try:
        h.update(inspect.getsource(build).encode())
    except (OSError, TypeError):
        pass
    h.update(repr((EXPORT_VERSION, name, opset, task, side, sorted(extra.items()), torch.__version__,
                   torchvision.__version__)).encode())
    return h.hexdigest()[:16]


def export(name, opsets, out_dir, force):
    """Exports NAME at each of OPSETS whose .json is not up to date, from one model (one BatchNorm
    statistics pass). Yields (meta, cached) per opset."""
    task, build, side, tier, extra = ENTRIES[name]
    todo, done = [], {}
    for opset in opsets:
        base = os.path.join(out_dir, f"{name}.op{opset}")
        onnx_path, meta_path = base + ".onnx", base + ".json"
        if not force and os.path.exists(meta_path):
            with open(meta_path) as fh:
                old = json.load(fh)
            torch2_only = opset >= 18 and int(torch.__version__.split(".")[0]) < 2
            if (old.get("recipe") == recipe(name, opset) or torch2_only) and (
                    old.get("status") != "ok" or (os.path.exists(onnx_path) and os.path.isdir(base + ".ref"))):
                # how ptq is to feed and score it may change without a new export
                now = dict(tier=tier, preset=preset_args(task, side), metric=metric_for(task))
                if any(old.get(k) != v for k, v in now.items()):
                    old.update(now)
                    with open(meta_path, "w") as fh:
                        json.dump(old, fh, indent=1)
                done[opset] = (old, True)
                continue
        todo.append(opset)
    model, built_s, build_err = None, 0.0, None
    for opset in opsets:
        if opset in done:
            yield done[opset]
            continue
        if opset >= 18 and int(torch.__version__.split(".")[0]) < 2:
            # opset 18 is torch 2.x's exporter's (made on the device machine, copied into OUT)
            meta = {"name": name, "task": task, "tier": tier, "opset": opset, "status": "fail", "export_seconds": 0,
                    "error": "opset 18 exports need torch 2.x (this is torch %s)" % torch.__version__}
            yield meta, False
            continue
        base = os.path.join(out_dir, f"{name}.op{opset}")
        onnx_path, meta_path = base + ".onnx", base + ".json"
        meta = {"name": name, "task": task, "tier": tier, "opset": opset, "file": os.path.relpath(onnx_path, ROOT),
                "input": [1, 3, side, side], "preset": preset_args(task, side), "metric": metric_for(task),
                "recipe": recipe(name, opset), "torch": torch.__version__, "torchvision": torchvision.__version__}
        t0 = time.time()
        try:
            if model is None and build_err is None:
                try:
                    torch.manual_seed(0)
                    model = build()
                    if task == "det":
                        model = DetWrap(model, extra.get("outputs", []))
                    elif task == "seg":
                        model = SegWrap(model)
                    fwd = None
                    if extra.get("bn") == "backbone":
                        # the R-CNNs' BatchNorms are all in the backbone: the photos through the
                        # model's transform and backbone only (the whole model's eval path with
                        # 1000 proposals per image took 15 minutes for maskrcnn on 2 cores)
                        r = model.m
                        fwd = lambda xb: r.backbone(r.transform(list(xb.unbind(0)))[0].tensors)  # noqa: E731
                    bn = bn_statistics(model, photos(side, task), forward=fwd)
                    _unfuse_mha(model)
                    built_s = time.time() - t0
                except Exception as e:  # noqa: BLE001
                    build_err = e
            if build_err is not None:
                raise build_err
            meta.update(bn_layers=bn, build_seconds=round(built_s, 1))
            x = photos(side, task)[:1]
            if task == "det":
                names = ["boxes", "scores", "labels"] + extra.get("outputs", [])
            elif task == "yolo-nms":
                names = ["detections"]
            else:
                names = ["output0" if task == "yolo" else ("out" if task == "seg" else "logits")]
            tmp = onnx_path + ".tmp"
            t1 = time.time()
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if opset >= 18 and int(torch.__version__.split(".")[0]) >= 2:
                    # torch 2.x's exporter (torch.export, the default there): other graphs than
                    # the TorchScript exporter's of opsets 13-17
                    torch.onnx.export(model, (x,), tmp, opset_version=opset, input_names=["images"],
                                      output_names=names, dynamo=True, external_data=False)
                    meta["exporter"] = "dynamo"
                else:
                    torch.onnx.export(model, x, tmp, opset_version=opset, input_names=["images"],
                                      output_names=names, do_constant_folding=True)
            os.replace(tmp, onnx_path)
            # the export's input and torch's outputs, for checking ONNX Runtime against torch
            ref = base + ".ref"
            os.makedirs(ref, exist_ok=True)
            np.save(os.path.join(ref, "images.npy"), x.numpy())
            with torch.no_grad():
                y = model(x)
            for k, t in zip(names, y if isinstance(y, (tuple, list)) else (y,)):
                np.save(os.path.join(ref, k + ".npy"), t.numpy())
            import onnx
            m = onnx.load(onnx_path, load_external_data=False)
            ops = {}
            for n in m.graph.node:
                ops[n.op_type] = ops.get(n.op_type, 0) + 1
            meta.update(status="ok", nodes=len(m.graph.node), ops=ops, bytes=os.path.getsize(onnx_path),
                        outputs=[o.name for o in m.graph.output], onnx_export_seconds=round(time.time() - t1, 1))
        except Exception as e:  # noqa: BLE001 (a model that does not export is a row of the report)
            msg = str(e).strip().splitlines()
            meta.update(status="fail", error=f"{type(e).__name__}: {msg[0] if msg else ''}"[:300])
            for p in (onnx_path, onnx_path + ".tmp"):
                if os.path.exists(p):
                    os.remove(p)
        # export_seconds: model building and BatchNorm statistics (shared by the opsets of one
        # run, counted in each) plus this opset's torch.onnx.export
        meta["export_seconds"] = round(time.time() - t0 + (built_s if opset != todo[0] else 0), 1)
        with open(meta_path, "w") as fh:
            json.dump(meta, fh, indent=1)
        yield meta, False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier", choices=("ci", "all"), default="all")
    ap.add_argument("--opset", type=int, action="append", choices=(13, 14, 15, 16, 17, 18),
                    help="repeatable (default 13)")
    ap.add_argument("--models", help="comma-separated names (default: the tier's)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "zoo"))
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--list", action="store_true", help="print the tier's names and exit")
    ap.add_argument("--table", action="store_true", help="print what the .json files record (no export)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    names = [n for n, e in ENTRIES.items() if a.tier == "all" or e[3] == "ci"]
    if a.models:
        names = a.models.split(",")
        bad = [n for n in names if n not in ENTRIES]
        if bad:
            sys.exit(f"zoo: unknown model(s) {', '.join(bad)}; known: {', '.join(ENTRIES)}")
    if a.list:
        print("\n".join(names))
        return
    if a.table:
        print(f"{'model':38} {'op':>2} {'status':6} {'total s':>8} {'BN s':>6} {'onnx s':>6} {'nodes':>5} {'MB':>6}  error")
        for n in names:
            for opset in a.opset or [13]:
                p = os.path.join(a.out, f"{n}.op{opset}.json")
                if not os.path.exists(p):
                    print(f"{n:38} {opset:>2} {'-':6}")
                    continue
                with open(p) as fh:
                    m = json.load(fh)
                print(f"{n:38} {opset:>2} {m['status']:6} {m['export_seconds']:8.1f} {m.get('build_seconds', '-'):>6} "
                      f"{m.get('onnx_export_seconds', '-'):>6} {m.get('nodes', '-'):>5} "
                      f"{m.get('bytes', 0) / 1e6:6.1f}  {m.get('error', '')[:90]}")
        return
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    for n in names:
        for meta, cached in export(n, a.opset or [13], a.out, a.force):
            st = meta["status"]
            failed += st != "ok"
            info = (f"{meta['nodes']} nodes, {meta['bytes'] / 1e6:.1f} MB" if st == "ok" else meta.get("error", ""))
            print(f"{'up to date' if cached else 'exported  '} {n}.op{meta['opset']}: {st}, {meta['export_seconds']} s, {info}",
                  flush=True)
    print(f"zoo: {len(names) * len(a.opset or [13]) - failed} exported, {failed} failed", flush=True)


if __name__ == "__main__":
    main()
