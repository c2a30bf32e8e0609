/* mse.c: the mean-squared-error threshold search (spec section 3). */
#include <math.h>

#include "calib/methods.h"

/* mse (pytorch-quantization's _compute_amax_mse): every bin edge a = i * w, i in
 * 128..2048, is a candidate; each bin's count sits at its centre c_k = (k + 0.5) w and
 * is fake-quantized with scale s = a / 127 (round half to even, clamp to [-127, 127]);
 * the candidate with the smallest sum of H[k] * (c_k - q_k s)^2 wins (the first on ties). */
double calib_amax_mse(const calib_analysis *a)
{
    const int nb = CALIB_ANALYSIS_BINS;
    if (!(a->amax > 0.0f)) return 0.0;
    const double w = (double)a->amax / nb;
    int best = nb;
    double best_err = INFINITY;
    for (int i = CALIB_START_BIN; i <= nb; i++) {
        const double amax = i * w, s = amax / 127.0;
        double err = 0.0;
        for (int k = 0; k < nb; k++) {
            if (a->h[k] == 0.0) continue;
            double c = (k + 0.5) * w;
            double qv = rint(c / s);
            if (qv > 127.0) qv = 127.0;
            if (qv < -127.0) qv = -127.0;
            double d = c - qv * s;
            err += a->h[k] * d * d;
        }
        if (err < best_err) {
            best_err = err;
            best = i;
        }
    }
    return best * w;
}
