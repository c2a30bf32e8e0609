#!/usr/bin/python3
"""det_metric.py: PaddleOCR's DetMetric (ppocr/metrics/det_metric.py, DetectionIoUEvaluator of
ppocr/metrics/eval_det_iou.py) without shapely, a test oracle of `ptq compare --labels paddledet:`.

Per image: polygons that shapely would call invalid (zero area, or two edges that are not
neighbours touching or crossing) are dropped; a detection covering more than half of its own area
with a don't-care polygon ("###" or "*") is not counted; the rest are matched one to one, ground
truth polygon by polygon and detection by detection in order, the first unmatched pair with IoU >
0.5. Over the images: precision = matched / detections counted, recall = matched / polygons
counted, hmean = 2PR / (P + R) (0 where a denominator is 0). Intersections: a polygon clipped by a
convex one (Sutherland-Hodgman, written here in plain Python; detections are rectangles), checked
against OpenCV's intersectConvexConvex where both are convex.

  det_metric.py --labels det.labels --hyp boxes.json [--base base.json] [--json OUT]
      boxes.json: {"images": [{"image": PATH, "boxes": [[[x, y] x4], ...]}]} (images by base name);
      prints precision, recall and hmean with 95 % bootstrap intervals over the images
      (tests/oracle/bootstrap.py's draws), and with --base the paired differences hyp - base.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bootstrap import _draws  # noqa: E402


def read_labels(path):
    """PaddleOCR's det label list -> {base name: [(points, dont_care), ...]}"""
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line:
                continue
            name, sep, js = line.partition("\t")
            if not sep:
                sys.exit(f"det_metric.py: {path}:{n}: no tab")
            out[os.path.basename(name)] = [([tuple(map(float, p)) for p in a["points"]],
                                             a.get("transcription") in ("###", "*")) for a in json.loads(js)]
    return out


def area(p):
    s = 0.0
    for i in range(len(p)):
        x0, y0 = p[i - 1]
        x1, y1 = p[i]
        s += x0 * y1 - x1 * y0
    return s / 2


def _orient(a, b, c):
    v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
    return (v > 0) - (v < 0)


def _between(a, b, p):
    return min(a[0], b[0]) <= p[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= p[1] <= max(a[1], b[1])


def _touch(a, b, c, d):
    o = [_orient(a, b, c), _orient(a, b, d), _orient(c, d, a), _orient(c, d, b)]
    if o[0] != o[1] and o[2] != o[3]:
        return True
    return ((o[0] == 0 and _between(a, b, c)) or (o[1] == 0 and _between(a, b, d)) or
            (o[2] == 0 and _between(c, d, a)) or (o[3] == 0 and _between(c, d, b)))


def valid(p):
    n = len(p)
    if n < 3 or area(p) == 0:
        return False
    for i in range(n):
        for j in range(i + 2, n):
            if i == 0 and j == n - 1:
                continue
            if _touch(p[i], p[(i + 1) % n], p[j], p[(j + 1) % n]):
                return False
    return True


def convex(p):
    s = {_orient(p[i - 2], p[i - 1], p[i]) for i in range(len(p))} - {0}
    return len(s) <= 1


def clip(subject, window):
    """subject clipped by the convex polygon window (Sutherland-Hodgman)"""
    sign = 1.0 if area(window) > 0 else -1.0
    out = list(subject)
    for k in range(len(window)):
        if not out:
            break
        a, b = window[k - 1], window[k]
        side = lambda q: sign * ((b[0] - a[0]) * (q[1] - a[1]) - (b[1] - a[1]) * (q[0] - a[0]))
        inp, out = out, []
        for i in range(len(inp)):
            p, q = inp[i - 1], inp[i]
            sp, sq = side(p), side(q)
            if (sq >= 0) != (sp >= 0):
                t = sp / (sp - sq)
                out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
            if sq >= 0:
                out.append(q)
    return abs(area(out)) if len(out) >= 3 else 0.0


def intersection(g, d):
    if convex(d):
        a = clip(g, d)
    elif convex(g):
        a = clip(d, g)
    else:
        raise ValueError("neither polygon is convex")
    if convex(g) and convex(d):  # OpenCV's own clipping agrees
        import cv2
        b, _ = cv2.intersectConvexConvex(np.array(g, np.float32), np.array(d, np.float32))
        assert abs(a - b) <= 1e-3 * max(1.0, abs(area(g)), abs(area(d))), (g, d, a, b)
    return a


def evaluate_image(gt, det):
    """gt: [(points, dont_care)], det: [points] -> (gt counted, det counted, matched)"""
    gts = [(p, dc) for p, dc in gt if valid(p)]
    dets = [p for p in det if valid(p)]
    dont = [i for i, (p, dc) in enumerate(gts) if dc]
    det_dont = set()
    for k, d in enumerate(dets):
        da = abs(area(d))
        for i in dont:
            if (0 if da == 0 else intersection(gts[i][0], d) / da) > 0.5:
                det_dont.add(k)
                break
    gm, dm, matched = set(), set(), 0
    for i, (g, dc) in enumerate(gts):
        for k, d in enumerate(dets):
            if i in gm or k in dm or dc or k in det_dont:
                continue
            inter = intersection(g, d)
            union = abs(area(g)) + abs(area(d)) - inter
            if union > 0 and inter / union > 0.5:
                gm.add(i)
                dm.add(k)
                matched += 1
    return len(gts) - len(dont), len(dets) - len(det_dont), matched


def combine(units):
    gc = sum(u[0] for u in units)
    dc = sum(u[1] for u in units)
    m = sum(u[2] for u in units)
    r = 0.0 if gc == 0 else m / gc
    p = 0.0 if dc == 0 else m / dc
    h = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return p, r, h


def intervals(units, base=None, boot=1000, seed=1):
    """95 % percentile intervals of (P, R, H), and of hyp - base under the same draws"""
    idx = _draws(len(units), boot, seed)
    a = np.array([combine([units[i] for i in row]) for row in idx])
    out = {"ci": [(float(np.percentile(a[:, j], 2.5)), float(np.percentile(a[:, j], 97.5))) for j in range(3)]}
    if base is not None:
        b = np.array([combine([base[i] for i in row]) for row in idx])
        out["delta_ci"] = [(float(np.percentile(a[:, j] - b[:, j], 2.5)), float(np.percentile(a[:, j] - b[:, j], 97.5)))
                           for j in range(3)]
    return out


def units_of(labels, boxes):
    """per image of labels (sorted by name): evaluate_image of boxes[name] (a list of 4-point boxes)"""
    return [evaluate_image(labels[n], boxes.get(n, [])) for n in sorted(labels)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--hyp", required=True)
    ap.add_argument("--base")
    ap.add_argument("--json")
    a = ap.parse_args()
    labels = read_labels(a.labels)
    load = lambda f: {os.path.basename(r["image"]): [[tuple(p) for p in b] for b in r["boxes"]]
                      for r in json.load(open(f))["images"]}
    u = units_of(labels, load(a.hyp))
    b = units_of(labels, load(a.base)) if a.base else None
    p, r, h = combine(u)
    iv = intervals(u, b)
    rep = {"precision": p, "recall": r, "hmean": h, "ci": iv["ci"]}
    if b is not None:
        rep["delta_ci"] = iv["delta_ci"]
    print(json.dumps(rep))
    if a.json:
        json.dump(rep, open(a.json, "w"))


if __name__ == "__main__":
    main()
