"""calib_ref.py SAMPLES.npy: every calibration method's amax for the samples (one batch),
written from the text of shared/docs/quantization-spec.md §2-§3 with numpy (a test oracle,
independent of ptq's C code). Prints JSON {method: amax}."""
import json
import sys

import numpy as np

B, A = 4096, 2048


def collection_hist(x):
    a = np.abs(x[np.isfinite(x)]).astype(np.float64)
    amax = float(np.float32(a.max()))
    R = 2.0 ** -24
    while R < amax:
        R *= 2
    idx = np.floor(a * (B / R)).astype(np.int64)
    idx[a >= R * (1 - 2.0 ** -24)] = B - 1
    return np.bincount(np.minimum(idx, B - 1), minlength=B).astype(np.float64), R, amax


def analysis_hist(h, R, amax):
    H = np.zeros(A)
    wc, wa = R / B, amax / A
    for b in np.nonzero(h)[0]:
        lo, hi, cnt = b * wc, (b + 1) * wc, h[b]
        if lo >= amax:
            H[-1] += cnt
            continue
        top = min(hi, amax)
        if hi > amax:
            H[-1] += cnt * (hi - amax) / wc
        for k in range(int(lo / wa), min(int(top / wa), A - 1) + 1):
            s, e = max(k * wa, lo), min((k + 1) * wa, top)
            if e > s:
                H[k] += cnt * (e - s) / wc
    return H


def percentile(H, w, P):
    c = np.cumsum(H) / H.sum()
    return (int(np.argmax(c >= P / 100.0)) + 1) * w


def entropy(H, w, nq=128):
    H = H.astype(np.float64).copy()
    H[0] = H[1]  # pytorch-quantization's _compute_amax_entropy: bins[0] = bins[1]
    best, best_i = np.inf, A
    for i in range(nq, A + 1):
        P = H[:i].copy()
        P[i - 1] += H[i:].sum()
        Q = np.zeros(i)
        for j in range(nq):
            a, b = j * i // nq, (j + 1) * i // nq
            seg = H[a:b]
            nz = seg != 0
            if nz.any():
                Q[a:b][nz] = seg.sum() / nz.sum()
        if P.sum() <= 0 or Q.sum() <= 0:
            continue
        P, Q = P / P.sum(), Q / Q.sum()
        Q = np.where((P > 0) & (Q == 0), 1e-4, Q)
        Q = Q / Q.sum()
        m = P > 0
        kl = float(np.sum(P[m] * np.log(P[m] / Q[m])))
        if kl < best:
            best, best_i = kl, i
    return (best_i + 0.5) * w


def mse(H, w):
    c = (np.arange(A) + 0.5) * w
    best, best_a = np.inf, A * w
    for i in range(128, A + 1):
        a = i * w
        s = a / 127
        q = np.clip(np.round(c / s), -127, 127)
        err = float(np.sum(H * (c - q * s) ** 2))
        if err < best:
            best, best_a = err, a
    return best_a


if __name__ == "__main__":
    x = np.load(sys.argv[1]).astype(np.float32).ravel()
    h, R, amax = collection_hist(x)
    H = analysis_hist(h, R, amax)
    w = amax / A
    out = {"max": amax, "percentile-99.9": percentile(H, w, 99.9), "percentile-99.99": percentile(H, w, 99.99),
           "percentile-99.999": percentile(H, w, 99.999), "entropy": entropy(H, w), "mse": mse(H, w), "bin": w}
    print(json.dumps(out))
