"""seg_miou.py: a segmenter's mIoU against class-index masks, written apart from ptq (test oracle).

The geometry of the preprocessing is recomputed here from the preset's definition (not read from
ptq): stretch, Ultralytics' letterbox, torchvision's Resize(shorter) + CenterCrop. Each pixel of
the image's own size reads the model's output at the nearest output pixel (its centre mapped into
the tensor, then scaled to the output's size); pixels outside the tensor (a crop's margins) and
pixels of the ignore value are not counted. IoU per class: intersections and unions summed over
the images; mIoU: the mean over the classes with a union (mmseg's and torchmetrics' global mIoU).
Intervals: percentile bootstrap over the images (bootstrap.py's draws), mIoU recomputed from
each resample's sums.

  geometry(w, h, mode, W, H, shorter=None)   -> (resized_w, resized_h, pad_left, pad_top)
  class_map(out, w, h, geom, W, H)           -> int array (h, w), -1 outside the tensor
  stats(pred, mask, C, ignore)               -> (inter[C], union[C]) of one image
  miou(inter, union)                          -> mIoU of summed per-image arrays [n, C]
  interval(inter, union, inter_a=None, union_a=None) -> (lo, hi) of mIoU (minus a's)
"""
import numpy as np

from bootstrap import _draws


def geometry(w, h, mode, W, H, shorter=None):
    if mode == 'stretch':
        return W, H, 0, 0
    if mode == 'letterbox':
        r = min(H / h, W / w)
        nw, nh = max(round(w * r), 1), max(round(h * r), 1)
        return nw, nh, round((W - nw) / 2 - 0.1), round((H - nh) / 2 - 0.1)
    if mode == 'shorter-crop':
        if w <= h:
            nw, nh = shorter, int(shorter * h / w)
        else:
            nw, nh = int(shorter * w / h), shorter
        return nw, nh, -round((nw - W) / 2.0), -round((nh - H) / 2.0)
    raise ValueError(mode)


def _axis(n, rn, pad, tn, out):
    u = pad + (np.arange(n, dtype=np.float64) + 0.5) * rn / n
    o = np.floor(u * out / tn)
    ok = (u >= 0) & (u < tn) & (o >= 0) & (o < out)
    return np.where(ok, o, -1).astype(np.int64)


def class_map(out, w, h, geom, W, H):
    """out: one image's output (C, OH, OW) or (1, OH, OW)."""
    out = np.asarray(out, dtype=np.float32)
    cls = (out[0] > np.float32(0.5)).astype(np.int64) if out.shape[0] == 1 else np.argmax(out, axis=0)
    rw, rh, px, py = geom
    cx = _axis(w, rw, px, W, out.shape[2])
    cy = _axis(h, rh, py, H, out.shape[1])
    m = cls[np.clip(cy, 0, None)][:, np.clip(cx, 0, None)]
    m[cy < 0, :] = -1
    m[:, cx < 0] = -1
    return m


def stats(pred, mask, C, ignore=255):
    keep = (pred >= 0) & (mask != ignore)
    p, g = pred[keep], mask[keep].astype(np.int64)
    inter = np.bincount(g[p == g], minlength=C)[:C].astype(np.float64)
    gt = np.bincount(g, minlength=C)[:C]
    pr = np.bincount(p, minlength=C)[:C]
    return inter, (gt + pr - inter).astype(np.float64)


def _miou(si, su):
    ok = su > 0
    return float(np.mean(si[ok] / su[ok])) if ok.any() else float('nan')


def miou(inter, union):
    return _miou(np.asarray(inter).sum(0), np.asarray(union).sum(0))


def per_class(inter, union):
    si, su = np.asarray(inter).sum(0), np.asarray(union).sum(0)
    return [float(a / b) if b > 0 else None for a, b in zip(si, su)]


def interval(inter, union, inter_a=None, union_a=None, boot=1000, seed=1):
    inter, union = np.asarray(inter), np.asarray(union)
    v = []
    for idx in _draws(len(inter), boot, seed):
        s = _miou(inter[idx].sum(0), union[idx].sum(0))
        if inter_a is not None:
            s -= _miou(np.asarray(inter_a)[idx].sum(0), np.asarray(union_a)[idx].sum(0))
        if not np.isnan(s):
            v.append(s)
    lo, hi = np.percentile(v, [2.5, 97.5])
    return float(lo), float(hi)
