"""boxes.py REPORT.json METHOD LAYOUT N FP_PREFIX Q_PREFIX: compare's box-f1, ported from its
definition (engine/compare.h) in float32 numpy, on ptq run's outputs FP_PREFIX.i/ and Q_PREFIX.i/
of each of the N evaluation images; asserts the report's box_f1 for METHOD equals it exactly.
LAYOUT: yolo (y.npy [1, 4 + classes, anchors]) or final (boxes.npy [K, 4], scores.npy [K])."""
import json, sys
import numpy as np

CONF, MATCH_IOU, NMS_IOU, MAX_BOXES = np.float32(0.25), np.float32(0.5), np.float32(0.7), 300
f32 = np.float32


def iou(a, b):
    w = f32(min(a[2], b[2]) - max(a[0], b[0]))
    h = f32(min(a[3], b[3]) - max(a[1], b[1]))
    if w <= 0 or h <= 0:
        return f32(0)
    inter = f32(w * h)
    ua = f32(f32(f32(a[2] - a[0]) * f32(a[3] - a[1])) + f32(f32(b[2] - b[0]) * f32(b[3] - b[1])))
    ua = f32(ua - inter)
    return f32(inter / ua) if ua > 0 else f32(0)


def by_score(boxes):  # (x1, y1, x2, y2, score, cls, idx): score descending, then position
    return sorted(boxes, key=lambda b: (-float(b[4]), b[6]))


def final_boxes(bx, sc):
    return by_score([(bx[i, 0], bx[i, 1], bx[i, 2], bx[i, 3], sc[i], -1, i) for i in range(len(sc)) if sc[i] >= CONF])


def yolo_boxes(y):
    rows, a = y.shape
    cand = []
    for j in range(a):
        cls = y[4:, j]
        best = int(np.argmax(cls))  # the first maximum, as the C loop's strict >
        s = cls[best]
        if not s >= CONF:
            continue
        cx, cy, w, h = y[0, j], y[1, j], y[2, j], y[3, j]
        cand.append((f32(cx - f32(w / f32(2))), f32(cy - f32(h / f32(2))), f32(cx + f32(w / f32(2))),
                     f32(cy + f32(h / f32(2))), s, best, j))
    out = []
    for c in by_score(cand):
        if len(out) >= MAX_BOXES:
            break
        if not any(o[5] == c[5] and iou(o, c) > NMS_IOU for o in out):
            out.append(c)
    return out


def match(f, q):
    used = [False] * len(q)
    m = 0
    for b in f:
        best, bi = -1, MATCH_IOU
        for j, c in enumerate(q):
            if used[j] or c[5] != b[5]:
                continue
            v = iou(b, c)
            if v >= bi and (best < 0 or v > bi):
                best, bi = j, v
        if best >= 0:
            used[best] = True
            m += 1
    return m


report, method, layout, n, fp, q = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
matched = nf = nq = 0
for i in range(n):
    if layout == "yolo":
        a, b = yolo_boxes(np.load("%s.%d/y.npy" % (fp, i))[0]), yolo_boxes(np.load("%s.%d/y.npy" % (q, i))[0])
    else:
        a = final_boxes(np.load("%s.%d/boxes.npy" % (fp, i)), np.load("%s.%d/scores.npy" % (fp, i)))
        b = final_boxes(np.load("%s.%d/boxes.npy" % (q, i)), np.load("%s.%d/scores.npy" % (q, i)))
    matched += match(a, b)
    nf += len(a)
    nq += len(b)
want = 2.0 * matched / (nf + nq) if nf + nq else 1.0
got = [m for m in json.load(open(report))["methods"] if m["method"] == method][0]["box_f1"]
assert got == want, "box_f1 %r, the port gives %r (%d matched of %d FP32 and %d QDQ boxes)" % (got, want, matched, nf, nq)
print("box_f1 %.6f = the port's (%d matched of %d FP32 and %d QDQ boxes)" % (got, matched, nf, nq))
