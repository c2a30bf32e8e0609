"""calib_ref.py: the calibration methods of shared/docs/quantization-spec.md §3, a numpy
port of pytorch-quantization's calib/histogram.py functions (_compute_amax_percentile,
_compute_amax_entropy, _compute_amax_mse) written from the spec text: a test oracle
independent of ptq's C code. Every method works on the 2048-bin analysis histogram H over
[0, amax] (bin width w = amax / 2048, edges i w) and gives a float32 amax.

  calib_ref.py samples X.npy          methods on H built here from the samples (spec §2:
                                      collection histogram, then resampling): JSON {method: amax}
  calib_ref.py hist SHOW.txt H.npy [--every N]
                                      methods on ptq's own analysis histograms (`ptq stats show
                                      FILE --hist H.npy > SHOW.txt`), every N-th tensor:
                                      JSON {tensor: {method: amax}}
  calib_ref.py grow A.npy B.npy ...   pytorch-quantization's HistogramCalibrator.collect (2048
                                      bins over [0, first batch's amax], bins of that width
                                      appended when a later batch exceeds it), then the
                                      methods: JSON {method: amax}"""
import json
import sys

import numpy as np

B, A = 4096, 2048
METHODS = ['max', 'percentile-99.9', 'percentile-99.99', 'percentile-99.999', 'entropy', 'mse']


def collection_hist(x):
    a = np.abs(x[np.isfinite(x)]).astype(np.float64)
    amax = float(np.float32(a.max()))
    R = 2.0 ** -24
    while R <= amax:
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


def percentile(H, edges, P):
    """_compute_amax_percentile: the lower edge of the bin where the CDF reaches P."""
    total = H.sum()
    cdf = np.cumsum(H / total)
    return edges[np.searchsorted(cdf, P / 100)]


def rel_entr_sum(p, q):
    """scipy.stats.entropy(p, q): both normalised, sum of p ln(p/q) over p > 0; +inf where p > 0 = q
    (checked before normalising: when Q is all zero, scipy's 0/0 would give NaN, which np.argmin
    would pick; the spec says +inf)."""
    if np.any((p > 0) & (q <= 0)):
        return np.inf
    p = 1.0 * p / np.sum(p)
    q = 1.0 * q / np.sum(q)
    v = np.zeros_like(p)
    m = p > 0
    v[m] = p[m] * np.log(p[m] / q[m])
    return np.sum(v)


def entropy(hist, edges, nbins=128, start_bin=128):
    """_compute_amax_entropy: bins[0] = bins[1]; KL(P||Q) for every candidate i in
    start_bin .. N; the last minimum; result edges[i]."""
    bins = hist.astype(np.float64).copy()
    bins[0] = bins[1]
    div = []
    for i in range(start_bin, len(bins) + 1):
        space = np.linspace(0, i, num=nbins + 1)
        dig = np.digitize(range(i), space) - 1          # bin k in group floor(128 k / i)
        dig[bins[:i] == 0] = -1                          # zero bins stay zero in Q
        keep = dig != -1
        counts = np.bincount(dig[keep], weights=bins[:i][keep], minlength=nbins)  # in index order
        nz = np.bincount(dig[keep], minlength=nbins)
        dens = np.zeros(nbins)
        dens[nz > 0] = counts[nz > 0] / nz[nz > 0]
        Q = np.zeros(i)
        Q[keep] = dens[dig[keep]]
        P = np.array(bins[:i])
        P[-1] += np.sum(bins[i:])
        div.append(rel_entr_sum(P, Q))
    div = np.array(div)
    last = len(div) - 1 - np.argmin(div[::-1])
    return edges[last + start_bin]


def mse(H, w, start_bin=128):
    """_compute_amax_mse: candidates the bin centres; clamp(round_half_even(c/s)); first minimum."""
    c = (np.arange(len(H)) + 0.5) * w
    errs = []
    for i in range(start_bin, len(H)):
        s = c[i] / 127
        q = np.clip(np.round(c / s), -127, 127)
        errs.append(np.sum(H * (c - q * s) ** 2))
    return c[start_bin + int(np.argmin(errs))]


def methods(H, amax):
    w = amax / A
    edges = np.arange(A + 1) * w
    out = {'max': amax, 'percentile-99.9': percentile(H, edges, 99.9), 'percentile-99.99': percentile(H, edges, 99.99),
           'percentile-99.999': percentile(H, edges, 99.999), 'entropy': entropy(H, edges), 'mse': mse(H, w)}
    return {k: float(np.float32(v)) for k, v in out.items()} | {'bin': w}


def grow(batches, num_bins=A):
    """HistogramCalibrator.collect (torch path, |x|): the first batch sets num_bins bins over
    [0, its amax]; a later batch above the last edge appends bins of the same width."""
    hist = edges = None
    for x in batches:
        x = np.abs(x[np.isfinite(x)].astype(np.float64))
        xmax = float(np.float32(x.max()))
        if hist is None:
            edges = np.linspace(0, xmax, num_bins + 1)
            nb = num_bins
        else:
            width = edges[1] - edges[0]
            if xmax > edges[-1]:
                nb = int(np.ceil(xmax / width))
                edges = np.arange(nb + 1) * width
            nb = len(edges) - 1
        h = np.bincount(np.minimum(np.floor(x / (edges[-1] / nb)).astype(np.int64), nb - 1), minlength=nb).astype(np.float64)
        if hist is not None:
            h[:len(hist)] += hist
        hist = h
    return hist, edges


if __name__ == '__main__':
    mode = sys.argv[1]
    if mode == 'samples':
        x = np.load(sys.argv[2]).astype(np.float32).ravel()
        h, R, amax = collection_hist(x)
        print(json.dumps(methods(analysis_hist(h, R, amax), amax)))
    elif mode == 'hist':
        rows = open(sys.argv[2]).read().splitlines()
        start = next(k for k, r in enumerate(rows) if r.startswith('name ')) + 1
        table = [r.split() for r in rows[start:]]
        Hs = np.load(sys.argv[3])
        every = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == '--every' else 1
        assert len(table) == Hs.shape[0], (len(table), Hs.shape)
        out = {}
        for t in range(0, len(table), every):
            name, amax = table[t][0], float(np.float32(table[t][7]))
            if amax > 0 and Hs[t].sum() > 0:
                out[name] = methods(Hs[t], amax)
        print(json.dumps(out))
    elif mode == 'grow':
        hist, edges = grow([np.load(f).astype(np.float32).ravel() for f in sys.argv[2:]])
        amax = float(edges[-1])
        assert len(hist) == A, 'the first batch must hold the overall amax'
        print(json.dumps(methods(hist, amax)))
    else:
        sys.exit(__doc__)
