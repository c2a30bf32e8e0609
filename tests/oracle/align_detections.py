"""align_detections.py REF SRC DST: a detector's outputs SRC/*.npy (with scores.npy) written to DST
in the order of REF's detections, for a comparison element by element. Two implementations of
NMS or TopK may list detections of near-equal score in either order; each SRC detection is
paired with one REF detection by a minimum-cost assignment (the Hungarian method; cost: the
score difference plus the mean box-corner difference over the boxes' scale, and a label that
differs costs more than any such pair). Arrays whose first dimension is the detection count are
reordered, the others copied. When the counts differ, SRC is copied as it is (the comparison
then reports the difference)."""
import os, sys
import numpy as np


def assignment(cost):
    """Row i's column in a minimum-cost perfect matching of the square matrix cost
    (shortest augmenting paths with potentials, O(n^3); the inner loops run in numpy)."""
    n = cost.shape[0]
    inf = np.inf
    u, v = np.zeros(n + 1), np.zeros(n + 1)
    p = np.zeros(n + 1, dtype=np.int64)  # p[j]: the row matched to column j (1-based, 0: none)
    way = np.zeros(n + 1, dtype=np.int64)
    c = np.zeros((n + 1, n + 1))
    c[1:, 1:] = cost
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(n + 1, inf)
        used = np.zeros(n + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            free = ~used
            free[0] = False
            cur = c[i0] - u[i0] - v
            better = free & (cur < minv)
            minv[better] = cur[better]
            way[better] = j0
            cand = np.where(free, minv, inf)
            j1 = int(np.argmin(cand))
            delta = cand[j1]
            u[p[used]] += delta
            v[used] -= delta
            minv[free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    col = np.zeros(n, dtype=np.int64)
    for j in range(1, n + 1):
        col[p[j] - 1] = j - 1
    return col


def main():
    ref, src, dst = sys.argv[1:4]
    os.makedirs(dst, exist_ok=True)
    load = lambda d: {f: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy") and f != "images.npy"}
    a, b = load(ref), load(src)
    n = len(b["scores.npy"])
    order = np.arange(n)
    if len(a.get("scores.npy", [])) == n and n > 1:
        sa, sb = a["scores.npy"].astype(np.float64), b["scores.npy"].astype(np.float64)
        cost = np.abs(sa[:, None] - sb[None, :])
        if "boxes.npy" in a and "boxes.npy" in b:
            ba, bb = a["boxes.npy"].astype(np.float64), b["boxes.npy"].astype(np.float64)
            scale = max(float(np.abs(ba).max()), 1e-6)
            cost += np.abs(ba[:, None, :] - bb[None, :, :]).mean(axis=2) / scale
        if "labels.npy" in a and "labels.npy" in b:
            cost += (a["labels.npy"][:, None] != b["labels.npy"][None, :]) * (cost.max() + 1.0) * n
        order = assignment(cost)  # REF detection i <- SRC detection order[i]
    for f, x in b.items():
        np.save(os.path.join(dst, f), x[order] if x.ndim and len(x) == n else x)


main()
