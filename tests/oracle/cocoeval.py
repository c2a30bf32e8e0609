"""COCO bbox mAP as pycocotools' COCOeval defines it (evaluate + accumulate + summarize, area
range "all", maxDets 100), written here in numpy from its published definition, independently
of ptq's C (tests/e2e/truth_labels.sh compares the two).

  gts: list of dicts {image_id, category_id, bbox [x, y, w, h], area, iscrowd}
  dts: list of dicts {image_id, category_id, bbox, score}   (COCO's results format)
  coco_map(gts, dts, image_ids, category_ids) -> (map50, map, {cat: ap50}, {cat: ap})
  evals = evaluate(gts, dts, image_ids, category_ids)  # evaluateImg of each (image, category), once
  resample_map(evals, draw, category_ids) -> (map50, map) of the images draw (a list of image ids,
      repeats allowed, as bootstrap resamples are: each copy is evaluated as that image was; the same
      doubles as coco_map of the resample's boxes renamed to new image ids, an image's matching
      depending on its own boxes alone)

Images are evaluated in the order of image_ids (ties of equal scores across images keep it);
categories without a non-crowd ground-truth box are left out of the means (AP None).

As a script: cocoeval.py GT.json DT.json prints that as JSON (GT a COCO instances file)."""
import json
import sys

import numpy as np

IOU_THRS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1)
REC_THRS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1)
MAX_DETS = 100
AREA_ALL = (0.0, 1e5 ** 2)


def bbox_iou(d, g, crowd):
    """IoU of detections d [D, 4] with ground truth g [G, 4] (x y w h); a crowd box's union is the detection's area."""
    out = np.zeros((len(d), len(g)))
    for i, (dx, dy, dw, dh) in enumerate(d):
        for j, (gx, gy, gw, gh) in enumerate(g):
            w = min(dx + dw, gx + gw) - max(dx, gx)
            if w <= 0:
                continue
            h = min(dy + dh, gy + gh) - max(dy, gy)
            if h <= 0:
                continue
            inter = w * h
            union = dw * dh if crowd[j] else dw * dh + gw * gh - inter
            out[i, j] = inter / union
    return out


def evaluate_img(gt, dt):
    """One image and category: COCOeval.evaluateImg. None when both are empty."""
    if not gt and not dt:
        return None
    ignore = np.array([1 if (g.get("iscrowd", 0) or g["area"] < AREA_ALL[0] or g["area"] > AREA_ALL[1]) else 0
                       for g in gt], dtype=int)
    gi = np.argsort(ignore, kind="mergesort")
    gt = [gt[i] for i in gi]
    ignore = ignore[gi]
    di = np.argsort([-d["score"] for d in dt], kind="mergesort")
    dt = [dt[i] for i in di[:MAX_DETS]]
    crowd = [int(g.get("iscrowd", 0)) for g in gt]
    ious = bbox_iou(np.array([d["bbox"] for d in dt], float).reshape(-1, 4),
                    np.array([g["bbox"] for g in gt], float).reshape(-1, 4), crowd)
    T, G, D = len(IOU_THRS), len(gt), len(dt)
    gtm = np.zeros((T, G))
    dtm = np.zeros((T, D))
    dt_ig = np.zeros((T, D))
    for t, thr in enumerate(IOU_THRS):
        for d in range(D):
            best = min(thr, 1 - 1e-10)
            m = -1
            for g in range(G):
                if gtm[t, g] > 0 and not crowd[g]:
                    continue
                if m > -1 and ignore[m] == 0 and ignore[g] == 1:
                    break
                if ious[d, g] < best:
                    continue
                best = ious[d, g]
                m = g
            if m == -1:
                continue
            dt_ig[t, d] = ignore[m]
            dtm[t, d] = 1
            gtm[t, m] = 1
    area = np.array([d["bbox"][2] * d["bbox"][3] for d in dt]).reshape(1, -1)
    out_of_range = (area < AREA_ALL[0]) | (area > AREA_ALL[1])
    dt_ig = np.logical_or(dt_ig, np.logical_and(dtm == 0, np.repeat(out_of_range, T, 0)))
    return {"scores": np.array([d["score"] for d in dt]), "matched": dtm, "ignored": dt_ig, "gt_ignored": ignore}


def accumulate(evals):
    """One category: the precision at the 101 recall thresholds per IoU threshold, or None without ground truth."""
    evals = [e for e in evals if e is not None]
    if not evals:
        return None
    scores = np.concatenate([e["scores"] for e in evals])
    order = np.argsort(-scores, kind="mergesort")
    dtm = np.concatenate([e["matched"] for e in evals], axis=1)[:, order]
    dt_ig = np.concatenate([e["ignored"] for e in evals], axis=1)[:, order]
    npig = np.count_nonzero(np.concatenate([e["gt_ignored"] for e in evals]) == 0)
    if npig == 0:
        return None
    tps = np.logical_and(dtm, np.logical_not(dt_ig))
    fps = np.logical_and(np.logical_not(dtm), np.logical_not(dt_ig))
    tp_sum = np.cumsum(tps, axis=1).astype(float)
    fp_sum = np.cumsum(fps, axis=1).astype(float)
    prec = np.zeros((len(IOU_THRS), len(REC_THRS)))
    nd = tp_sum.shape[1]
    if nd == 0:
        return prec
    rc = tp_sum / npig
    pr = tp_sum / (fp_sum + tp_sum + np.spacing(1))
    pr = np.maximum.accumulate(pr[:, ::-1], axis=1)[:, ::-1]  # each precision the largest at or after it
    for t in range(len(IOU_THRS)):
        idx = np.searchsorted(rc[t], REC_THRS, side="left")
        ok = idx < nd
        prec[t, ok] = pr[t, idx[ok]]
    return prec


def evaluate(gts, dts, image_ids, category_ids):
    """evaluate_img of every image and category: {(image, category): its result}, the pairs with
    neither boxes nor detections left out (None)."""
    by_gt, by_dt = {}, {}
    for g in gts:
        by_gt.setdefault((g["image_id"], g["category_id"]), []).append(g)
    for d in dts:
        by_dt.setdefault((d["image_id"], d["category_id"]), []).append(d)
    cats = set(category_ids)
    return {(i, c): evaluate_img(by_gt.get((i, c), []), by_dt.get((i, c), []))
            for i in dict.fromkeys(image_ids) for c in cats if (i, c) in by_gt or (i, c) in by_dt}


def _means(evals, image_ids, category_ids):
    ap50, ap = {}, {}
    for c in category_ids:
        prec = accumulate([evals.get((i, c)) for i in image_ids])
        if prec is None:
            ap50[c] = ap[c] = None
            continue
        ap50[c] = float(np.mean(prec[0]))
        ap[c] = float(np.mean(prec))
    have = [c for c in category_ids if ap[c] is not None]
    m50 = float(np.mean([ap50[c] for c in have])) if have else float("nan")
    m = float(np.mean([ap[c] for c in have])) if have else float("nan")
    return m50, m, ap50, ap


def coco_map(gts, dts, image_ids, category_ids):
    return _means(evaluate(gts, dts, image_ids, category_ids), image_ids, category_ids)


def resample_map(evals, draw, category_ids):
    """mAP50 and mAP50-95 of the images draw (ids of evaluate's images, in the resample's order)."""
    return _means(evals, draw, category_ids)[:2]


if __name__ == "__main__":
    gt = json.load(open(sys.argv[1]))
    dts = json.load(open(sys.argv[2]))
    for a in gt["annotations"]:
        a.setdefault("area", a["bbox"][2] * a["bbox"][3])
    ids = [im["id"] for im in gt["images"]]
    cats = sorted(c["id"] for c in gt["categories"])
    m50, m, ap50, ap = coco_map(gt["annotations"], dts, ids, cats)
    print(json.dumps({"map50": m50, "map": m, "ap50": [ap50[c] for c in cats], "ap": [ap[c] for c in cats]}))
