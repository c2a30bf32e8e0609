/* percentile.c: the percentile method (spec section 3). */
#include "calib/methods.h"

/* percentile:P: with c(i) = (H[0] + ... + H[i]) / total, the first bin i with
 * c(i) >= P/100; the result is that bin's upper edge, (i + 1) * amax / 2048.
 * total is the same running sum carried to the last bin, so c(2047) == 1 exactly.
 * ONNX Runtime's symmetric Percentile calibrator picks the same bin but returns its
 * lower edge (hist_edges[i]): for the same histogram ptq's amax is one bin width larger. */
double calib_amax_percentile(const calib_analysis *a, double p)
{
    const int nb = CALIB_ANALYSIS_BINS;
    const double w = (double)a->amax / nb;
    if (!(a->amax > 0.0f)) return 0.0;
    double total = 0.0;
    for (int i = 0; i < nb; i++) total += a->h[i];
    if (!(total > 0.0)) return 0.0;
    const double target = p / 100.0;
    double cum = 0.0;
    for (int i = 0; i < nb; i++) {
        cum += a->h[i];
        if (cum / total >= target) return (i + 1) * w;
    }
    return nb * w;
}
