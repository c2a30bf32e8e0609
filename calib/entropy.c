/* entropy.c: TensorRT's EntropyCalibration2 threshold search (spec section 3). */
#include <math.h>

#include "calib/methods.h"

#define KL_EPS 1e-4

/* KL(P || Q) for threshold bin i (spec section 3, steps 1-3); p and q are scratch of
 * at least i doubles; outliers = H[i] + ... + H[2047]. */
static double kl_at(const double *h, int i, double outliers, double *p, double *q)
{
    double sum_p = 0.0, sum_q = 0.0;
    /* 1. P = H[0:i], outliers clipped into the last bin. */
    for (int k = 0; k < i; k++) p[k] = h[k];
    p[i - 1] += outliers;
    for (int k = 0; k < i; k++) sum_p += p[k];

    /* 2. Q: 128 groups [floor(j*i/128), floor((j+1)*i/128)); each group's total spread
     * evenly over the bins of the group that are non-zero in H. */
    for (int j = 0; j < CALIB_QUANT_BINS; j++) {
        int b0 = (int)((long)j * i / CALIB_QUANT_BINS), b1 = (int)((long)(j + 1) * i / CALIB_QUANT_BINS);
        double tot = 0.0;
        int nz = 0;
        for (int k = b0; k < b1; k++) {
            tot += h[k];
            if (h[k] != 0.0) nz++;
        }
        double v = nz ? tot / nz : 0.0;
        for (int k = b0; k < b1; k++) q[k] = h[k] != 0.0 ? v : 0.0;
    }
    for (int k = 0; k < i; k++) sum_q += q[k];

    /* 3. Normalise; smooth zero bins of Q on P's support with eps and renormalise Q. */
    int smoothed = 0;
    for (int k = 0; k < i; k++) {
        p[k] = sum_p > 0.0 ? p[k] / sum_p : 0.0;
        q[k] = sum_q > 0.0 ? q[k] / sum_q : 0.0;
        if (p[k] > 0.0 && q[k] == 0.0) {
            q[k] = KL_EPS;
            smoothed = 1;
        }
    }
    if (smoothed) {
        double s = 0.0;
        for (int k = 0; k < i; k++) s += q[k];
        for (int k = 0; k < i; k++) q[k] /= s;
    }
    double kl = 0.0;
    for (int k = 0; k < i; k++)
        if (p[k] > 0.0) kl += p[k] * log(p[k] / q[k]);
    return kl;
}

/* entropy: KL search over the 2048-bin histogram H down to 128 quantized bins, as in
 * TensorRT's EntropyCalibration2 (GTC 2017, "8-bit Inference with TensorRT"; the same
 * loop as pytorch-quantization's _compute_amax_entropy with start_bin 128, stride 1).
 * For each candidate i in 128..2048, P is H[0:i] with everything above clipped into bin
 * i-1, and Q is H[0:i] quantized to 128 levels (each group's mass spread over its
 * non-zero bins); the i with the smallest KL(P || Q) wins (the first on ties) and the
 * threshold is (i + 0.5) bin widths. Differences from pytorch-quantization, as the spec
 * asks: no bins[0] = bins[1] substitution, first (not last) minimum, (i + 0.5) * w
 * rather than the edge i * w, group bounds by integer floor instead of np.digitize. */
double calib_amax_entropy(const calib_analysis *a)
{
    const int nb = CALIB_ANALYSIS_BINS;
    if (!(a->amax > 0.0f)) return 0.0;
    const double w = (double)a->amax / nb;
    double p[CALIB_ANALYSIS_BINS], q[CALIB_ANALYSIS_BINS], suffix[CALIB_ANALYSIS_BINS + 1];
    suffix[nb] = 0.0;
    for (int k = nb - 1; k >= 0; k--) suffix[k] = suffix[k + 1] + a->h[k];

    int best = nb;
    double best_kl = INFINITY;
    for (int i = CALIB_START_BIN; i <= nb; i++) {
        double kl = kl_at(a->h, i, suffix[i], p, q);
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
    }
    return (best + 0.5) * w;
}
