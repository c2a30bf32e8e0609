/* calib.h: streaming per-tensor statistics and the calibration methods
 * (quantization spec §2-§3).
 *
 *   calib_stats *s = calib_stats_create();
 *   calib_stats_add(s, x, n, nthreads);        // every batch, in order
 *   calib_method m; calib_method_parse("percentile:99.99", &m);
 *   int warn; float amax; TRY(calib_amax(s, &m, &amax, &warn));   // warn: zero/non-finite, amax 1.0
 *   calib_stats_destroy(s);
 *
 * A collection histogram of |x| with CALIB_BINS bins over [0, R), R a power of two
 * doubled (bin pairs merged) when a batch exceeds it; the methods work on the
 * CALIB_ANALYSIS_BINS-bin histogram over [0, amax] resampled from it. Threads fill
 * private histograms merged in thread order: results do not depend on the thread count.
 *
 * R is the smallest power of two STRICTLY greater than the amax seen so far (at least
 * 2^-24). The spec's first-batch wording says "≥"; with ">" a value's bin is always
 * floor(|x| * 4096 / R), computed exactly (R is a power of two), whatever R's history,
 * so statistics merged from shards equal one pass bit for bit even when amax is a power
 * of two. The spec's last-bin rule holds as a consequence: every |x| < R. */
#ifndef PTQ_CALIB_H
#define PTQ_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

#define CALIB_BINS 4096
#define CALIB_ANALYSIS_BINS 2048

typedef struct {
    float min, max, amax;       /* over finite values; amax = max |x| */
    uint64_t count, nan, pinf, ninf, zeros;
    double range;               /* R; 0 before the first finite value */
    uint64_t hist[CALIB_BINS];
} calib_stats;

typedef enum { CALIB_MAX = 0, CALIB_PERCENTILE, CALIB_ENTROPY, CALIB_MSE } calib_kind;

typedef struct {
    calib_kind kind;
    double percentile;          /* CALIB_PERCENTILE: P in (0, 100] */
} calib_method;

calib_stats *calib_stats_create(void);
void calib_stats_destroy(calib_stats *s);
/* Adds one batch. Out of memory for a thread's scratch leaves its slice out (count shows it). */
void calib_stats_add(calib_stats *s, const float *x, size_t n, int nthreads);
/* A thread's partial statistics of one tensor at a time (about 100 KB), for callers that
 * observe a tensor in pieces from several threads (one part per thread, no locking) and merge
 * the parts afterwards in thread order; nothing is allocated in the hot loop. The merged
 * result depends only on the values seen, never on how they were split into parts or pieces.
 *
 *   calib_part_start(part[t], s);                       // each thread, before its pieces
 *   calib_part_add_rows(part[t], y, rows, cols, stride); // any number of pieces
 *   for (t = 0; t < nt; t++) calib_stats_take(s, part[t]); // after the tensor */
typedef struct calib_part calib_part;
calib_part *calib_part_create(void);
void calib_part_destroy(calib_part *p);
/* An empty part starts at s's range R (fewer bin merges later); no effect on the result. */
void calib_part_start(calib_part *p, const calib_stats *s);
void calib_part_add(calib_part *p, const float *x, size_t n);
/* rows x cols floats, rows stride floats apart */
void calib_part_add_rows(calib_part *p, const float *x, size_t rows, size_t cols, size_t stride);
/* The same through one path (0 generic, 1 avx2, 2 avx512, as kern_isa); a path the CPU lacks
 * runs generic. Every path gives the same statistics bit for bit (the unit test checks). */
void calib_part_add_isa(calib_part *p, const float *x, size_t n, int isa);
/* s += p; p is left empty for the next tensor. */
void calib_stats_take(calib_stats *s, calib_part *p);
/* calib_stats_add over nthreads threads with the caller's parts (parts[0 .. nthreads)). */
void calib_stats_add_parts(calib_stats *s, const float *x, size_t n, calib_part *const *parts, int nthreads);

/* dst += src, exactly and order-independently. */
void calib_stats_merge(calib_stats *dst, const calib_stats *src);
/* The analysis histogram H[CALIB_ANALYSIS_BINS] over [0, amax]. */
void calib_analysis_hist(const calib_stats *s, double *H);

/* The most methods one list may name (calib_methods_parse's cap in ptq's callers). */
enum { CALIB_MAX_METHODS = 16 };

/* "max", "percentile" (99.99), "percentile:P", "entropy", "mse". 0 on success. */
int calib_method_parse(const char *s, calib_method *m);
/* "max", "percentile-99.99", "entropy", "mse": for file names. */
void calib_method_name(const calib_method *m, char *buf, size_t cap);
/* "max,entropy" or "all" (= max, percentile:99.9, percentile:99.99, percentile:99.999, entropy, mse). */
int calib_methods_parse(const char *s, calib_method *out, int cap, int *n);

/* The method's amax; 1.0 (and *warn = 1) when the tensor was all zeros, never finite or
 * its amax fell below 2^-30 (spec §1). */
ptq_status calib_amax(const calib_stats *s, const calib_method *m, float *amax, int *warn);
/* The share of s's finite values that a range amax clips by more than one int8 step: |x| above
 * amax * (1 + 1/127), from the collection histogram (the bin holding that bound counted for
 * the part of its width above it). */
double calib_clip_share(const calib_stats *s, float amax);
/* calib_amax of n methods at once (amax[i], warn[i] for m[i]): the analysis histogram is
 * resampled once for all of them. PTQ_ERR_NOMEM (naming the method) when the histogram or a
 * method's search buffers cannot be allocated: never another method's answer. */
ptq_status calib_amaxes(const calib_stats *s, const calib_method *m, int n, float *amax, int *warn);

#endif
