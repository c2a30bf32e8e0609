"""bootstrap.py: percentile bootstrap intervals for the bench figures (test/bench tool only).

Every figure of the labelled benches (bench/truth.sh) is a ratio of sums over images (a page's
character edits over its truth characters; a page's correct crops over its crops; the pixels of
an image's mask intersection over its union), so one helper serves them all: resample the images
with replacement B times, recompute the ratio of the sums, and take the 2.5th and 97.5th
percentiles (numpy's linear interpolation). The draws come from numpy's RandomState(seed), whose
stream numpy keeps stable: same values, same seed, same interval, on any machine.

Figures of two systems read on the same images are compared paired: the same draws resample
both, and the interval is that of the difference. A difference whose interval holds 0 is inside
the noise of this image set.

  ratio(num, den, boot=1000, seed=1)          -> (point, lo, hi)
  paired_delta(num_a, num_b, den, ...)        -> (point of b - a, lo, hi)
  fmt(point, lo, hi, percent=True)            -> "1.23 % [0.98, 1.51]"
"""
import numpy as np


def _draws(n, boot, seed):
    return np.random.RandomState(seed).randint(0, n, size=(boot, n))


def ratio(num, den, boot=1000, seed=1, level=0.95):
    """sum(num)/sum(den) over the units, and its percentile bootstrap interval over the units."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    if num.shape != den.shape or num.ndim != 1 or len(num) == 0:
        raise ValueError("bootstrap.ratio: num and den must be 1-D, of one length, not empty")
    point = num.sum() / max(den.sum(), 1e-300)
    idx = _draws(len(num), boot, seed)
    stats = num[idx].sum(axis=1) / np.maximum(den[idx].sum(axis=1), 1e-300)
    lo, hi = np.percentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return float(point), float(lo), float(hi)


def paired_delta(num_a, num_b, den, boot=1000, seed=1, level=0.95, den_b=None):
    """b's ratio minus a's on the same units (den_b: b's denominators when they differ, as the
    unions of two masks do), with the interval of the difference under shared draws."""
    a = np.asarray(num_a, dtype=np.float64)
    b = np.asarray(num_b, dtype=np.float64)
    da = np.asarray(den, dtype=np.float64)
    db = da if den_b is None else np.asarray(den_b, dtype=np.float64)
    point = b.sum() / max(db.sum(), 1e-300) - a.sum() / max(da.sum(), 1e-300)
    idx = _draws(len(a), boot, seed)
    stats = b[idx].sum(axis=1) / np.maximum(db[idx].sum(axis=1), 1e-300) - \
        a[idx].sum(axis=1) / np.maximum(da[idx].sum(axis=1), 1e-300)
    lo, hi = np.percentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return float(point), float(lo), float(hi)


def fmt(point, lo, hi, percent=True, digits=2):
    if percent:
        return f"{100 * point:.{digits}f} % [{100 * lo:.{digits}f}, {100 * hi:.{digits}f}]"
    return f"{point:.{digits + 2}f} [{lo:.{digits + 2}f}, {hi:.{digits + 2}f}]"


if __name__ == "__main__":  # self-check: the interval holds the point, draws are reproducible
    rng = np.random.RandomState(0)
    den = rng.randint(50, 150, 40)
    num = rng.binomial(den, 0.05)
    p, lo, hi = ratio(num, den)
    assert lo <= p <= hi and (p, lo, hi) == ratio(num, den), (p, lo, hi)
    d = paired_delta(num, num, den)
    assert d == (0.0, 0.0, 0.0), d
    print("bootstrap.py: ok", fmt(p, lo, hi))
