/* methods.h: the calibration methods (spec section 3) and the amax rules (section 1).
 * Every method turns one tensor's statistics into an amax; scale = amax / 127.
 *
 *   calib_method m[CALIB_MAX_METHODS]; int nm;
 *   TRY(calib_methods_parse("max,percentile:99.9,entropy", m, CALIB_MAX_METHODS, &nm));
 *   calib_analysis a;
 *   calib_hist_analysis(&hist, &a);          // or the --passes 2 histogram (hist.h)
 *   for (int i = 0; i < nm; i++) {
 *       calib_result r = calib_compute(&m[i], &hist, &a);
 *       if (r.warn) fprintf(stderr, "warning: '%s': %s, amax set to 1\n", name, calib_warning_text(r.warn));
 *       char fn[64]; calib_method_file_name(&m[i], fn, sizeof fn);   // "percentile-99.9"
 *       ... r.amax, r.scale ...
 *   }
 *
 * Everything here is pure: no allocation, no state, results in plain values.
 * "all" = max, percentile:99.9, percentile:99.99, percentile:99.999, entropy, mse. */
#ifndef PTQ_CALIB_METHODS_H
#define PTQ_CALIB_METHODS_H

#include <stddef.h>

#include "calib/hist.h"
#include "runtime/status.h"

#define CALIB_MAX_METHODS 16
#define CALIB_DEFAULT_PERCENTILE 99.99
/* amax below this (or zero, NaN, Inf) is replaced by CALIB_FALLBACK_AMAX, with a warning. */
#define CALIB_MIN_AMAX 0x1p-30
#define CALIB_FALLBACK_AMAX 1.0f
/* Entropy and mse search thresholds from bin CALIB_START_BIN to CALIB_ANALYSIS_BINS. */
#define CALIB_START_BIN 128
#define CALIB_QUANT_BINS 128

typedef enum {
    CALIB_METHOD_MAX,
    CALIB_METHOD_PERCENTILE,
    CALIB_METHOD_ENTROPY,
    CALIB_METHOD_MSE
} calib_method_kind;

typedef struct {
    calib_method_kind kind;
    double percentile; /* CALIB_METHOD_PERCENTILE only: in (0, 100] */
} calib_method;

typedef enum {
    CALIB_WARN_NONE = 0,
    CALIB_WARN_NO_FINITE,   /* the tensor never had a finite value (or was never seen) */
    CALIB_WARN_ALL_ZERO,    /* every finite value was zero */
    CALIB_WARN_TINY,        /* the method's amax was below 2^-30 */
    CALIB_WARN_NONFINITE    /* the method's amax was NaN or overflowed float32 */
} calib_warning;

typedef struct {
    float amax;           /* finite, >= 2^-30: the method's result or CALIB_FALLBACK_AMAX */
    float scale;          /* amax / 127 in float32 */
    double raw;           /* the method's result before the rules of section 1 */
    calib_warning warn;   /* CALIB_WARN_NONE unless amax was replaced */
} calib_result;

/* Parses "max", "percentile" (99.99), "percentile:P", "entropy", "mse", "all", or a
 * comma-separated list of them; duplicates are dropped, order kept. Fails (ARG) naming
 * the bad item, or when more than cap methods result. */
ptq_status calib_methods_parse(const char *s, calib_method *out, int cap, int *n);
/* Display name: "max", "percentile:99.9", "entropy", "mse". Returns buf. */
const char *calib_method_name(const calib_method *m, char *buf, size_t cap);
/* File-name form: "percentile-99.999" (no ':'); others as calib_method_name. Returns buf. */
const char *calib_method_file_name(const calib_method *m, char *buf, size_t cap);
/* TensorRT cache algorithm (spec section 4): MinMaxCalibration for max, else EntropyCalibration2. */
const char *calib_method_trt_algorithm(const calib_method *m);
/* One line of text for a warning ("never finite", ...). */
const char *calib_warning_text(calib_warning w);

/* Raw methods on an analysis histogram (amax > 0 expected; 0 is returned otherwise). */
double calib_amax_percentile(const calib_analysis *a, double p);
double calib_amax_entropy(const calib_analysis *a);
double calib_amax_mse(const calib_analysis *a);

/* The method's amax for one tensor with section 1's rules applied. a: the analysis
 * histogram (resampled or --passes 2); may be NULL for max, else it is resampled from h
 * on the stack. */
calib_result calib_compute(const calib_method *m, const calib_hist *h, const calib_analysis *a);
/* Section 1's rules alone: raw -> amax/scale/warning, given the tensor's statistics. */
calib_result calib_result_from_raw(double raw, const calib_hist *h);

#endif
