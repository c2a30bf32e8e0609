/* hist.c: streaming per-tensor statistics and the analysis histogram (spec section 2). */
#include "calib/hist.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 256
/* Below this many elements a batch is scanned by one thread. */
#define PAR_MIN 65536

typedef struct {
    uint64_t nan, pinf, ninf, zero, finite;
    float min, max, amax;
} part_stats;

void calib_hist_init(calib_hist *h)
{
    memset(h, 0, sizeof *h);
    h->log2_r = CALIB_LOG2_R_UNSET;
}

uint64_t calib_hist_finite(const calib_hist *h)
{
    return h->count - h->n_nan - h->n_pinf - h->n_ninf;
}

double calib_hist_range(const calib_hist *h)
{
    return h->log2_r == CALIB_LOG2_R_UNSET ? 0.0 : ldexp(1.0, h->log2_r);
}

/* min and max with a sign rule for zeros (-0 < +0), so the result is the same
 * whatever order the values arrive in. */
static float min_signed(float a, float b)
{
    if (b < a || (b == a && signbit(b) && !signbit(a))) return b;
    return a;
}

static float max_signed(float a, float b)
{
    if (b > a || (b == a && !signbit(b) && signbit(a))) return b;
    return a;
}

/* log2 of the smallest power of two strictly greater than amax, at least 2^-24. */
static int log2_range_for(float amax)
{
    int e = 0;
    if (!(amax > 0.0f)) return CALIB_LOG2_R_MIN;
    (void)frexpf(amax, &e); /* amax = m * 2^e, m in [0.5, 1): 2^(e-1) <= amax < 2^e */
    return e < CALIB_LOG2_R_MIN ? CALIB_LOG2_R_MIN : e;
}

static int clamp_threads(int nthreads, size_t n)
{
    int nt = nthreads > 0 ? nthreads : omp_get_max_threads();
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt < 1 || n < PAR_MIN) nt = 1;
    return nt;
}

static void scan_range(const float *x, size_t lo, size_t hi, part_stats *p)
{
    part_stats s = {0};
    for (size_t i = lo; i < hi; i++) {
        float v = x[i];
        if (isnan(v)) {
            s.nan++;
        } else if (isinf(v)) {
            if (v > 0) s.pinf++;
            else s.ninf++;
        } else {
            if (s.finite == 0) {
                s.min = s.max = v;
            } else {
                s.min = min_signed(s.min, v);
                s.max = max_signed(s.max, v);
            }
            if (v == 0.0f) s.zero++;
            s.finite++;
        }
    }
    if (s.finite) s.amax = fmaxf(fabsf(s.min), fabsf(s.max));
    *p = s;
}

/* Bins of |x| over [0, 2^log2_r): index floor(|x| * 4096 / R), exact because R is a
 * power of two; clamped to the last bin (the spec's last-bin rule). */
static void bin_range(const float *x, size_t lo, size_t hi, int log2_r, uint64_t *bins)
{
    const float scale = ldexpf(1.0f, 12 - log2_r);
    for (size_t i = lo; i < hi; i++) {
        float a = fabsf(x[i]);
        if (!(a <= FLT_MAX)) continue; /* NaN, Inf */
        float f = a * scale;
        uint32_t idx = f >= (float)(CALIB_COLLECT_BINS - 1) ? CALIB_COLLECT_BINS - 1 : (uint32_t)f;
        bins[idx]++;
    }
}

size_t calib_hist_work_size(int nthreads)
{
    int nt = nthreads > 0 ? nthreads : omp_get_max_threads();
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt < 1) nt = 1;
    return (size_t)nt * CALIB_COLLECT_BINS;
}

void calib_hist_grow(calib_hist *h, int log2_r)
{
    if (h->log2_r == CALIB_LOG2_R_UNSET || log2_r <= h->log2_r) return;
    int s = log2_r - h->log2_r;
    if (s > 12) s = 12; /* every bin lands in bin 0 */
    /* bins[j] -> bins[j >> s]; j >> s <= j, and bin j >> s has already been emptied */
    for (int j = 0; j < CALIB_COLLECT_BINS; j++) {
        uint64_t v = h->bins[j];
        h->bins[j] = 0;
        h->bins[j >> s] += v;
    }
    h->log2_r = log2_r;
}

static void merge_minmax(calib_hist *h, uint64_t had_finite, const part_stats *p)
{
    if (!p->finite) return;
    if (!had_finite) {
        h->min = p->min;
        h->max = p->max;
    } else {
        h->min = min_signed(h->min, p->min);
        h->max = max_signed(h->max, p->max);
    }
    h->amax = fmaxf(fabsf(h->min), fabsf(h->max));
}

void calib_hist_add_work(calib_hist *h, const float *x, size_t n, int nthreads, uint64_t *work)
{
    part_stats parts[MAX_THREADS];
    int nt = work ? clamp_threads(nthreads, n) : 1;
    if (n == 0) return;

    memset(parts, 0, sizeof(part_stats) * (size_t)nt);
    if (nt == 1) {
        scan_range(x, 0, n, &parts[0]);
    } else {
#pragma omp parallel num_threads(nt)
        {
            size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
            scan_range(x, n * t / T, n * (t + 1) / T, &parts[t]);
        }
    }

    /* Combine in thread-index order (all of it is exact anyway). */
    part_stats b = {0};
    for (int t = 0; t < nt; t++) {
        const part_stats *p = &parts[t];
        if (!p->finite && !p->nan && !p->pinf && !p->ninf) continue;
        b.nan += p->nan;
        b.pinf += p->pinf;
        b.ninf += p->ninf;
        b.zero += p->zero;
        if (p->finite) {
            if (!b.finite) {
                b.min = p->min;
                b.max = p->max;
            } else {
                b.min = min_signed(b.min, p->min);
                b.max = max_signed(b.max, p->max);
            }
        }
        b.finite += p->finite;
    }
    if (b.finite) b.amax = fmaxf(fabsf(b.min), fabsf(b.max));

    uint64_t had_finite = calib_hist_finite(h);
    h->count += n;
    h->n_nan += b.nan;
    h->n_pinf += b.pinf;
    h->n_ninf += b.ninf;
    h->n_zero += b.zero;
    if (!b.finite) return;
    merge_minmax(h, had_finite, &b);

    int need = log2_range_for(h->amax);
    if (h->log2_r == CALIB_LOG2_R_UNSET) h->log2_r = need;
    else calib_hist_grow(h, need);

    if (nt == 1) {
        bin_range(x, 0, n, h->log2_r, h->bins);
        return;
    }
    int log2_r = h->log2_r, used = 1;
#pragma omp parallel num_threads(nt)
    {
        size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        uint64_t *mine = work + t * CALIB_COLLECT_BINS;
        memset(mine, 0, sizeof(uint64_t) * CALIB_COLLECT_BINS);
        bin_range(x, n * t / T, n * (t + 1) / T, log2_r, mine);
        if (t == 0) used = (int)T;
    }
    for (int t = 0; t < used; t++) {
        const uint64_t *p = work + (size_t)t * CALIB_COLLECT_BINS;
        for (int j = 0; j < CALIB_COLLECT_BINS; j++) h->bins[j] += p[j];
    }
}

ptq_status calib_hist_add(calib_hist *h, const float *x, size_t n, int nthreads)
{
    int nt = clamp_threads(nthreads, n);
    if (nt == 1) {
        calib_hist_add_work(h, x, n, 1, NULL);
        return PTQ_OK;
    }
    uint64_t *work = malloc(sizeof(uint64_t) * calib_hist_work_size(nt));
    if (!work) {
        ptq_error("calib_hist_add: out of memory for %d thread histograms", nt);
        return PTQ_ERR_NOMEM;
    }
    calib_hist_add_work(h, x, n, nt, work);
    free(work);
    return PTQ_OK;
}

ptq_status calib_hist_merge(calib_hist *dst, const calib_hist *src)
{
    uint64_t had_finite = calib_hist_finite(dst);
    uint64_t src_finite = calib_hist_finite(src);
    if (dst->count > UINT64_MAX - src->count) {
        ptq_error("statistics merge: element count overflows (%llu + %llu)",
                  (unsigned long long)dst->count, (unsigned long long)src->count);
        return PTQ_ERR_ARG;
    }
    dst->count += src->count;
    dst->n_nan += src->n_nan;
    dst->n_pinf += src->n_pinf;
    dst->n_ninf += src->n_ninf;
    dst->n_zero += src->n_zero;
    if (!src_finite) return PTQ_OK;

    part_stats p = {0};
    p.finite = src_finite;
    p.min = src->min;
    p.max = src->max;
    merge_minmax(dst, had_finite, &p);

    if (dst->log2_r == CALIB_LOG2_R_UNSET) {
        dst->log2_r = src->log2_r;
        memcpy(dst->bins, src->bins, sizeof dst->bins);
        return PTQ_OK;
    }
    if (src->log2_r > dst->log2_r) calib_hist_grow(dst, src->log2_r);
    int s = dst->log2_r - src->log2_r; /* >= 0: src bin j goes to j >> s */
    if (s > 12) s = 12;
    for (int j = 0; j < CALIB_COLLECT_BINS; j++) dst->bins[j >> s] += src->bins[j];
    return PTQ_OK;
}

ptq_status calib_hist_validate(const calib_hist *h, const char *what)
{
    uint64_t nonfinite = h->n_nan;
    if (nonfinite > UINT64_MAX - h->n_pinf || nonfinite + h->n_pinf > UINT64_MAX - h->n_ninf ||
        nonfinite + h->n_pinf + h->n_ninf > h->count) {
        ptq_error("%s: NaN/Inf counts (%llu, %llu, %llu) exceed the element count %llu", what,
                  (unsigned long long)h->n_nan, (unsigned long long)h->n_pinf,
                  (unsigned long long)h->n_ninf, (unsigned long long)h->count);
        return PTQ_ERR_FORMAT;
    }
    uint64_t finite = calib_hist_finite(h), sum = 0;
    for (int j = 0; j < CALIB_COLLECT_BINS; j++) {
        if (sum > UINT64_MAX - h->bins[j]) {
            ptq_error("%s: histogram counts overflow", what);
            return PTQ_ERR_FORMAT;
        }
        sum += h->bins[j];
    }
    if (sum != finite) {
        ptq_error("%s: histogram holds %llu values, expected %llu finite values", what,
                  (unsigned long long)sum, (unsigned long long)finite);
        return PTQ_ERR_FORMAT;
    }
    if (h->n_zero > finite) {
        ptq_error("%s: %llu zeros among %llu finite values", what, (unsigned long long)h->n_zero,
                  (unsigned long long)finite);
        return PTQ_ERR_FORMAT;
    }
    if (!finite) {
        if (h->log2_r != CALIB_LOG2_R_UNSET || h->min != 0.0f || h->max != 0.0f || h->amax != 0.0f) {
            ptq_error("%s: no finite value but a range or min/max is set", what);
            return PTQ_ERR_FORMAT;
        }
        return PTQ_OK;
    }
    if (!isfinite(h->min) || !isfinite(h->max) || !(h->min <= h->max) ||
        h->amax != fmaxf(fabsf(h->min), fabsf(h->max))) {
        ptq_error("%s: inconsistent min %.9g, max %.9g, amax %.9g", what, (double)h->min,
                  (double)h->max, (double)h->amax);
        return PTQ_ERR_FORMAT;
    }
    if (h->log2_r != log2_range_for(h->amax)) {
        ptq_error("%s: histogram range 2^%d, expected 2^%d for amax %.9g", what, h->log2_r,
                  log2_range_for(h->amax), (double)h->amax);
        return PTQ_ERR_FORMAT;
    }
    if (h->n_zero && !(h->min <= 0.0f && h->max >= 0.0f)) {
        ptq_error("%s: %llu zeros outside [min %.9g, max %.9g]", what,
                  (unsigned long long)h->n_zero, (double)h->min, (double)h->max);
        return PTQ_ERR_FORMAT;
    }
    if ((h->amax == 0.0f) != (h->n_zero == finite) || h->bins[0] < h->n_zero) {
        ptq_error("%s: zero count %llu does not fit amax %.9g and bin 0 = %llu", what,
                  (unsigned long long)h->n_zero, (double)h->amax, (unsigned long long)h->bins[0]);
        return PTQ_ERR_FORMAT;
    }
    int top = (int)(h->amax * ldexpf(1.0f, 12 - h->log2_r));
    if (top > CALIB_COLLECT_BINS - 1) top = CALIB_COLLECT_BINS - 1;
    if (h->bins[top] == 0) {
        ptq_error("%s: amax %.9g falls in empty bin %d", what, (double)h->amax, top);
        return PTQ_ERR_FORMAT;
    }
    for (int j = top + 1; j < CALIB_COLLECT_BINS; j++) {
        if (h->bins[j]) {
            ptq_error("%s: bin %d counts %llu values above amax %.9g", what, j,
                      (unsigned long long)h->bins[j], (double)h->amax);
            return PTQ_ERR_FORMAT;
        }
    }
    return PTQ_OK;
}

void calib_hist_analysis(const calib_hist *h, calib_analysis *a)
{
    memset(a, 0, sizeof *a);
    a->amax = h->amax;
    uint64_t finite = calib_hist_finite(h);
    if (!finite) return;
    if (!(h->amax > 0.0f)) {
        a->h[0] = (double)finite;
        return;
    }
    const double amax = (double)h->amax;
    const double wc = ldexp(1.0, h->log2_r - 12);   /* collection bin width (exact) */
    const double wa = amax / CALIB_ANALYSIS_BINS;   /* analysis bin width */
    const int last = CALIB_ANALYSIS_BINS - 1;
    for (int j = 0; j < CALIB_COLLECT_BINS; j++) {
        if (!h->bins[j]) continue;
        const double c = (double)h->bins[j];
        double lo = j * wc, hi = lo + wc;
        if (lo >= amax) { /* cannot happen for a valid histogram: keep the mass anyway */
            a->h[last] += c;
            continue;
        }
        if (hi > amax) { /* the part above amax (inside amax's own bin) goes to the last bin */
            a->h[last] += c * ((hi - amax) / wc);
            hi = amax;
        }
        int b = (int)(lo / wa) - 1;
        if (b < 0) b = 0;
        if (b > last) b = last;
        for (;; b++) {
            double bl = b * wa, bh = b == last ? amax : (b + 1) * wa;
            double l = lo > bl ? lo : bl, r = hi < bh ? hi : bh;
            if (r > l) a->h[b] += c * ((r - l) / wc);
            if (bh >= hi || b == last) break;
        }
    }
}

void calib_analysis_begin(calib_analysis *a, float amax)
{
    memset(a, 0, sizeof *a);
    a->amax = amax;
}

static void direct_range(const float *x, size_t lo, size_t hi, float amax, uint64_t *bins)
{
    const double inv = amax > 0.0f && isfinite(amax) ? (double)amax : 0.0;
    for (size_t i = lo; i < hi; i++) {
        float v = fabsf(x[i]);
        if (!(v <= FLT_MAX)) continue;
        size_t idx = 0;
        if (inv > 0.0) {
            double f = floor((double)v / inv * (double)CALIB_ANALYSIS_BINS);
            idx = f >= (double)(CALIB_ANALYSIS_BINS - 1) ? CALIB_ANALYSIS_BINS - 1 : (size_t)f;
        }
        bins[idx]++;
    }
}

ptq_status calib_analysis_add(calib_analysis *a, const float *x, size_t n, int nthreads)
{
    int nt = clamp_threads(nthreads, n);
    uint64_t *work = calloc((size_t)nt * CALIB_ANALYSIS_BINS, sizeof(uint64_t));
    if (!work) {
        ptq_error("calib_analysis_add: out of memory for %d thread histograms", nt);
        return PTQ_ERR_NOMEM;
    }
    int used = 1;
    if (nt == 1) {
        direct_range(x, 0, n, a->amax, work);
    } else {
        float amax = a->amax;
#pragma omp parallel num_threads(nt)
        {
            size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
            direct_range(x, n * t / T, n * (t + 1) / T, amax, work + t * CALIB_ANALYSIS_BINS);
            if (t == 0) used = (int)T;
        }
    }
    /* Integer partial counts, added in thread-index order: exact. */
    for (int b = 0; b < CALIB_ANALYSIS_BINS; b++) {
        uint64_t s = 0;
        for (int t = 0; t < used; t++) s += work[(size_t)t * CALIB_ANALYSIS_BINS + b];
        a->h[b] += (double)s;
    }
    free(work);
    return PTQ_OK;
}

double calib_analysis_total(const calib_analysis *a)
{
    double s = 0.0;
    for (int b = 0; b < CALIB_ANALYSIS_BINS; b++) s += a->h[b];
    return s;
}
