/* hist.h: streaming statistics of one activation tensor (spec section 2): exact
 * min/max/amax over finite values, counts, and a 4096-bin histogram of |x| over
 * [0, R), R a power of two that grows by merging bin pairs; plus the 2048-bin
 * analysis histogram over [0, amax] that every method of methods.h works on.
 *
 *   calib_hist h;
 *   calib_hist_init(&h);
 *   TRY(calib_hist_add(&h, x, n, nthreads));      // once per batch
 *   TRY(calib_hist_merge(&h, &other_shard));       // exact, order-independent
 *   calib_analysis a;
 *   calib_hist_analysis(&h, &a);                   // resampled to 2048 bins over [0, amax]
 *
 *   // --passes 2: pass 1 fills h, pass 2 fills the analysis histogram directly
 *   calib_analysis_begin(&a, h.amax);
 *   TRY(calib_analysis_add(&a, x, n, nthreads));  // once per batch of pass 2
 *
 * Both structs are plain values (no pointers): copy, memcpy and free them freely.
 * Results never depend on the thread count: threads fill private integer
 * histograms added in thread-index order, and min/max/amax are exact.
 *
 * R rule (spec section 2, one reading made exact): R is the smallest power of two
 * strictly greater than the amax seen so far, and at least 2^-24 (CALIB_LOG2_R_MIN).
 * A batch with amax >= R doubles R as often as needed, each doubling merging bin
 * pairs (2i, 2i+1) -> i. The spec's first-batch wording ("smallest power of two >=
 * amax") would let a value equal R sit in the last bin and then, after a doubling,
 * in a bin different from the one a direct fill gives; with "strictly greater" a
 * bin index is floor(|x| * 4096 / R) computed exactly (R is a power of two), so R's
 * history never matters and merging shards equals one pass bit for bit. The spec's
 * last-bin rule (values >= R(1 - 2^-24) go to bin 4095) still holds and is applied
 * as a guard: the largest float below R is R(1 - 2^-24) and lands in bin 4095. */
#ifndef PTQ_CALIB_HIST_H
#define PTQ_CALIB_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

#define CALIB_COLLECT_BINS 4096
#define CALIB_ANALYSIS_BINS 2048
#define CALIB_LOG2_R_MIN (-24)
#define CALIB_LOG2_R_MAX 128   /* 2^128 > FLT_MAX: covers every finite float */
#define CALIB_LOG2_R_UNSET (-1000)

typedef struct {
    uint64_t count;        /* every element seen, NaN and Inf included */
    uint64_t n_nan, n_pinf, n_ninf;
    uint64_t n_zero;       /* +0 and -0 */
    float min, max, amax;  /* over finite values; 0 when there is none */
    int log2_r;            /* R = 2^log2_r; CALIB_LOG2_R_UNSET until a finite value arrives */
    uint64_t bins[CALIB_COLLECT_BINS]; /* counts of |x| (finite x) per bin of width R/4096 */
} calib_hist;

/* Analysis histogram: n_bins = 2048 bins of width amax/2048 over [0, amax]; fractional
 * counts when resampled. amax <= 0 means "no finite non-zero value" (methods fall back). */
typedef struct {
    float amax;
    double h[CALIB_ANALYSIS_BINS];
} calib_analysis;

void calib_hist_init(calib_hist *h);
/* Finite values counted into min/max/amax and the histogram. */
uint64_t calib_hist_finite(const calib_hist *h);
/* R as a double (0 when unset). */
double calib_hist_range(const calib_hist *h);

/* Adds one batch of n floats. nthreads <= 0: OpenMP's default. Fails only on allocation. */
ptq_status calib_hist_add(calib_hist *h, const float *x, size_t n, int nthreads);
/* Same, with caller-owned scratch of at least calib_hist_work_size(nthreads) uint64_t
 * (reused across batches: no allocation per call). */
size_t calib_hist_work_size(int nthreads);
void calib_hist_add_work(calib_hist *h, const float *x, size_t n, int nthreads, uint64_t *work);

/* Doubles R (merging bin pairs) until R = 2^log2_r; no-op when R is unset or already there. */
void calib_hist_grow(calib_hist *h, int log2_r);
/* dst += src: both brought to the larger R, counts added, min/max/amax combined. Exact;
 * merge(a, b) == merge(b, a) == one pass over both inputs. Fails (ARG) on an overflowing count. */
ptq_status calib_hist_merge(calib_hist *dst, const calib_hist *src);
/* Checks the invariants of a histogram read from an untrusted file; what names it in
 * the message. */
ptq_status calib_hist_validate(const calib_hist *h, const char *what);

/* Resamples the collection histogram into a (spec section 2): each collection bin's count
 * spread uniformly over its width; the part above amax goes to the last analysis bin. */
void calib_hist_analysis(const calib_hist *h, calib_analysis *a);

/* --passes 2: clears a and sets its amax (pass 1's amax); calib_analysis_add then puts each
 * finite |v| in bin min(2047, floor(v / amax * 2048)) (double arithmetic). Exact counts. */
void calib_analysis_begin(calib_analysis *a, float amax);
ptq_status calib_analysis_add(calib_analysis *a, const float *x, size_t n, int nthreads);
/* Sum of the bins (sequential). */
double calib_analysis_total(const calib_analysis *a);

#endif
