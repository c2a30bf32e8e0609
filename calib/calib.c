/* calib.c: streaming statistics (spec §2) and the four methods (spec §3). */
#include "calib.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib_isa.h"
#include "runtime/kernels/mathf.h"
#include "runtime/kernels/sgemm.h"

#define MAX_THREADS 64

calib_stats *calib_stats_create(void)
{
    calib_stats *s = calloc(1, sizeof *s);
    if (s) {
        s->min = INFINITY;
        s->max = -INFINITY;
    }
    return s;
}

void calib_stats_destroy(calib_stats *s)
{
    free(s);
}

/* Doubles R once: bins (2i, 2i+1) -> i, upper half cleared. */
static void double_range(calib_stats *s)
{
    for (int i = 0; i < CALIB_BINS / 2; i++) s->hist[i] = s->hist[2 * i] + s->hist[2 * i + 1];
    memset(&s->hist[CALIB_BINS / 2], 0, sizeof(uint64_t) * CALIB_BINS / 2);
    s->range *= 2.0;
}

/* The smallest power of two strictly greater than v, at least 2^-24 (see calib.h). */
static double pow2_above(double v)
{
    int e;
    if (!(v >= 0x1p-24)) return 0x1p-24;
    frexp(v, &e); /* v = f * 2^e, f in [0.5, 1): 2^e > v >= 2^(e-1) */
    double r = ldexp(1.0, e);
    return r > 0x1p-24 ? r : 0x1p-24;
}

static inline float from_key(uint32_t key)
{
    uint32_t bits = key & 0x80000000u ? key & 0x7fffffffu : ~key;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint32_t key_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return calib_order_key(u);
}

/* The generic path of calib_scan_bins (calib_isa.h), written branch-free so that the
 * compiler vectorises the scan; the bins are stored in order. */
size_t calib_scan_bins_generic(const float *x, size_t n, float inv, calib_scan *r, uint32_t *idx)
{
    uint32_t kmin = UINT32_MAX, kmax = 0, amax = 0, zeros = 0, bad = 0;
    const uint32_t *bits = (const uint32_t *)(const void *)x;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = bits[i], a = u & 0x7fffffffu;
        uint32_t finite = a < 0x7f800000u, key = calib_order_key(u);
        uint32_t lo = finite ? key : UINT32_MAX, hi = finite ? key : 0, am = finite ? a : 0;
        kmin = lo < kmin ? lo : kmin;
        kmax = hi > kmax ? hi : kmax;
        amax = am > amax ? am : amax;
        zeros += a == 0;
        bad += finite ^ 1u;
        if (a - 1u < 0x7f7fffffu) { /* 0 < |x| <= FLT_MAX */
            float f;
            memcpy(&f, &a, 4);
            idx[k++] = (uint32_t)(f * inv);
        }
    }
    *r = (calib_scan){kmin, kmax, amax, zeros, bad};
    return k;
}

typedef size_t (*scan_fn)(const float *, size_t, float, calib_scan *, uint32_t *);

static scan_fn scan_for(int isa)
{
    kern_isa best = kern_isa_current();
    if (isa < 0) isa = (int)best;
    if (isa == KERN_ISA_AVX512 && __builtin_cpu_supports("avx512f")) return calib_scan_bins_avx512;
    if (isa == KERN_ISA_AVX2 && __builtin_cpu_supports("avx2")) return calib_scan_bins_avx2;
    return calib_scan_bins_generic;
}

/* A thread's partial statistics: scanned and binned chunk by chunk with the part's own R
 * (doubled, bins merged in pairs, when a chunk exceeds it). Bin edges of all powers of two
 * align, so bringing every part to the final R gives exactly the direct fill, and min, max
 * and amax are kept as order keys: the merged result is a function of the multiset of values
 * alone, whatever the split into parts, chunks or tiles. Counts go to four interleaved uint32
 * sub-histograms (consecutive increments off the same counter), flushed into acc before they
 * could overflow, when R grows and when the part is taken. */
#define SUB (CALIB_BINS + 1)
#define FLUSH ((size_t)1 << 30)

struct calib_part {
    uint32_t kmin, kmax, amax;
    uint64_t count, zeros, nan, pinf, ninf;
    double range;               /* 0 until a finite non-zero value */
    size_t since_flush;         /* increments in h since the last flush */
    uint64_t acc[CALIB_BINS];
    uint32_t h[4 * SUB];
    uint32_t idx[CALIB_CHUNK];
};

static void part_clear(calib_part *p)
{
    if (p->range > 0) memset(p->acc, 0, sizeof p->acc);
    p->kmin = UINT32_MAX;
    p->kmax = p->amax = 0;
    p->count = p->zeros = p->nan = p->pinf = p->ninf = 0;
    p->range = 0.0;
}

calib_part *calib_part_create(void)
{
    calib_part *p = calloc(1, sizeof *p);
    if (p) part_clear(p);
    return p;
}

void calib_part_destroy(calib_part *p)
{
    free(p);
}

static void flush(calib_part *p)
{
    if (!p->since_flush) return;
    uint32_t *h = p->h;
    for (int b = 0; b < CALIB_BINS; b++) p->acc[b] += (uint64_t)h[b] + h[SUB + b] + h[2 * SUB + b] + h[3 * SUB + b];
    memset(h, 0, sizeof p->h);
    p->since_flush = 0;
}

static void grow(uint64_t *hist, double *range, double to)
{
    while (*range < to) {
        for (int i = 0; i < CALIB_BINS / 2; i++) hist[i] = hist[2 * i] + hist[2 * i + 1];
        memset(&hist[CALIB_BINS / 2], 0, sizeof(uint64_t) * CALIB_BINS / 2);
        *range *= 2.0;
    }
}

static void count_bins(uint32_t *restrict h, const uint32_t *restrict idx, size_t k)
{
    size_t i = 0;
    for (; i + 4 <= k; i += 4) {
        h[idx[i]]++;
        h[SUB + idx[i + 1]]++;
        h[2 * SUB + idx[i + 2]]++;
        h[3 * SUB + idx[i + 3]]++;
    }
    for (; i < k; i++) h[idx[i]]++;
}

static void part_chunk(calib_part *p, const float *x, size_t len, scan_fn scan)
{
    calib_scan r;
    size_t k = scan(x, len, p->range > 0 ? (float)(CALIB_BINS / p->range) : 0.0f, &r, p->idx);
    p->count += len;
    p->zeros += r.zeros;
    if (r.kmin < p->kmin) p->kmin = r.kmin;
    if (r.kmax > p->kmax) p->kmax = r.kmax;
    if (r.amax > p->amax) p->amax = r.amax;
    if (r.nonfinite)
        for (size_t i = 0; i < len; i++) {
            if (isnan(x[i])) p->nan++;
            else if (isinf(x[i])) *(x[i] > 0 ? &p->pinf : &p->ninf) += 1;
        }
    if (!k) return; /* nothing to bin */
    float am;
    memcpy(&am, &r.amax, 4);
    if ((double)am >= p->range) { /* R grows: the bins are computed again with the new R */
        double to = pow2_above((double)am);
        if (p->range == 0.0) p->range = to;
        else {
            flush(p);
            grow(p->acc, &p->range, to);
        }
        k = scan(x, len, (float)(CALIB_BINS / p->range), &r, p->idx); /* a power of two: exact */
    }
    if (p->since_flush + k > FLUSH) flush(p);
    count_bins(p->h, p->idx, k);
    p->since_flush += k;
}

static void part_add(calib_part *p, const float *x, size_t n, scan_fn scan)
{
    for (size_t c = 0; c < n; c += CALIB_CHUNK) part_chunk(p, x + c, n - c < CALIB_CHUNK ? n - c : CALIB_CHUNK, scan);
}

void calib_part_add(calib_part *p, const float *x, size_t n)
{
    part_add(p, x, n, scan_for(-1));
}

void calib_part_add_isa(calib_part *p, const float *x, size_t n, int isa)
{
    part_add(p, x, n, scan_for(isa));
}

void calib_part_add_rows(calib_part *p, const float *x, size_t rows, size_t cols, size_t stride)
{
    scan_fn scan = scan_for(-1);
    if (stride == cols) part_add(p, x, rows * cols, scan);
    else
        for (size_t r = 0; r < rows; r++) part_add(p, x + r * stride, cols, scan);
}

void calib_part_start(calib_part *p, const calib_stats *s)
{
    if (p->count == 0 && p->range == 0.0) p->range = s->range;
}

void calib_stats_take(calib_stats *s, calib_part *p)
{
    flush(p);
    if (p->count) {
        if (p->kmin != UINT32_MAX) {
            if (p->kmin < key_of(s->min)) s->min = from_key(p->kmin);
            if (p->kmax > key_of(s->max)) s->max = from_key(p->kmax);
        }
        float am;
        memcpy(&am, &p->amax, 4);
        if (am > s->amax) s->amax = am;
        s->count += p->count;
        s->zeros += p->zeros;
        s->nan += p->nan;
        s->pinf += p->pinf;
        s->ninf += p->ninf;
        s->hist[0] += p->zeros;
        if (p->range > 0) {
            if (s->range == 0.0) s->range = p->range;
            grow(s->hist, &s->range, p->range);
            grow(p->acc, &p->range, s->range);
            for (int b = 0; b < CALIB_BINS; b++) s->hist[b] += p->acc[b];
        }
        /* only zeros so far: R = 2^-24 holds them in bin 0 */
        if (s->range == 0.0 && s->count > s->nan + s->pinf + s->ninf) s->range = pow2_above((double)s->amax);
    }
    part_clear(p);
}

#define PAR_MIN 65536           /* elements below which one thread does it all */

void calib_stats_add_parts(calib_stats *s, const float *x, size_t n, calib_part *const *parts, int nthreads)
{
    if (nthreads < 1 || n < PAR_MIN) nthreads = 1;
    scan_fn scan = scan_for(-1);
#pragma omp parallel num_threads(nthreads) if (nthreads > 1)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
        calib_part_start(parts[t], s);
        part_add(parts[t], x + lo, hi - lo, scan);
    }
    for (int t = 0; t < nthreads; t++) calib_stats_take(s, parts[t]); /* in thread order */
}

void calib_stats_add(calib_stats *s, const float *x, size_t n, int nthreads)
{
    calib_part *parts[MAX_THREADS];
    if (nthreads < 1 || n < PAR_MIN) nthreads = 1;
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
    int ok = 0;
    while (ok < nthreads && (parts[ok] = calib_part_create())) ok++;
    if (ok) calib_stats_add_parts(s, x, n, parts, ok); /* out of memory: fewer threads, or nothing */
    for (int t = 0; t < ok; t++) calib_part_destroy(parts[t]);
}

void calib_stats_merge(calib_stats *dst, const calib_stats *src)
{
    calib_stats tmp = *src;
    if (src->range > 0 && dst->range == 0) dst->range = src->range; /* dst's histogram is empty */
    if (src->range > 0) {
        while (dst->range < tmp.range) double_range(dst);
        while (tmp.range < dst->range) double_range(&tmp);
        for (int b = 0; b < CALIB_BINS; b++) dst->hist[b] += tmp.hist[b];
    }
    if (src->count > src->nan + src->pinf + src->ninf) { /* as order keys: -0 below +0 */
        if (key_of(src->min) < key_of(dst->min)) dst->min = src->min;
        if (key_of(src->max) > key_of(dst->max)) dst->max = src->max;
    }
    if (src->amax > dst->amax) dst->amax = src->amax;
    dst->count += src->count;
    dst->nan += src->nan;
    dst->pinf += src->pinf;
    dst->ninf += src->ninf;
    dst->zeros += src->zeros;
}

void calib_analysis_hist(const calib_stats *s, double *H)
{
    memset(H, 0, sizeof(double) * CALIB_ANALYSIS_BINS);
    double amax = (double)s->amax;
    if (!(amax > 0.0) || s->range == 0.0) {
        for (int b = 0; b < CALIB_BINS; b++) H[0] += (double)s->hist[b];
        return;
    }
    double wc = s->range / CALIB_BINS, wa = amax / CALIB_ANALYSIS_BINS;
    for (int b = 0; b < CALIB_BINS; b++) {
        if (!s->hist[b]) continue;
        double lo = b * wc, hi = lo + wc, cnt = (double)s->hist[b];
        if (lo >= amax) { /* only inside amax's own bin in theory; keep counts anyway */
            H[CALIB_ANALYSIS_BINS - 1] += cnt;
            continue;
        }
        double top = hi > amax ? amax : hi;
        if (hi > amax) H[CALIB_ANALYSIS_BINS - 1] += cnt * (hi - amax) / wc;
        int k0 = (int)(lo / wa), k1 = (int)(top / wa);
        if (k1 >= CALIB_ANALYSIS_BINS) k1 = CALIB_ANALYSIS_BINS - 1;
        for (int k = k0; k <= k1; k++) {
            double a = k * wa > lo ? k * wa : lo, e = (k + 1) * wa < top ? (k + 1) * wa : top;
            if (e > a) H[k] += cnt * (e - a) / wc;
        }
    }
}

/* ---- methods ----
 * Each method is pytorch-quantization's (calib/histogram.py) on the analysis histogram, so
 * that a numpy port of it (tests/oracle/calib_ref.py) gives the same float32 amax bit for
 * bit. Sums that decide a result are taken in numpy's order (sum_pairwise); the entropy and
 * mse searches screen every candidate with an O(128) prefix-sum formula, then evaluate the
 * few candidates within rounding distance of the best directly, term by term as the
 * reference does, so that the prefix sums' rounding cannot move the choice. */

enum { NB = CALIB_ANALYSIS_BINS, NQ = 128, START_BIN = 128 };

/* The sum of a[0 .. n-1] in numpy's order (np.sum of a contiguous float64 array):
 * sequential below 8 terms, 8 interleaved accumulators up to 128, halves (rounded down to
 * a multiple of 8) above. */
static double sum_pairwise(const double *a, int n)
{
    if (n < 8) {
        double r = 0.0;
        for (int i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        int i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    return sum_pairwise(a, n2) + sum_pairwise(a + n2, n - n2);
}

/* Near-ties of the screening pass: candidates whose screened value is within this
 * (relative to the best, plus an absolute bound on the prefix sums' rounding) of the best
 * get the direct evaluation, which alone decides: a wider cut costs time, never the result.
 * Entropy: every term is bounded by ln(total) < 45, so the screened KL errs by under 1e-12
 * (128 terms, in any order: the screening sums run in vector lanes). Mse: the sums over the
 * levels of S2, -2 v S1 and v^2 S0 are each at most about sum H c^2 (v is within half a step
 * of the centres it stands for, and below every clipped one) and cancel, erring by a few
 * hundred ulps of sum H c^2: under 1e-13 of it. */
#define SCREEN_RTOL 1e-7
#define SCREEN_ATOL 1e-11

/* percentile (_compute_amax_percentile): cdf = cumsum(H / total), total = np.sum(H); the
 * first i with cdf[i] >= P/100 (np.searchsorted); result the lower edge i w of that bin. */
static double method_percentile(const double *H, double w, double P)
{
    double total = sum_pairwise(H, NB), c = 0, target = P / 100.0;
    if (!(total > 0)) return 0;
    for (int i = 0; i < NB; i++) {
        c += H[i] / total;
        if (c >= target) return i * w;
    }
    return NB * w;
}

/* The screening sums of every entropy candidate i in START_BIN .. NB (see method_entropy):
 * with the 128 groups of candidate i (bin k in group floor(128 k / i), so group j is bins
 * [ceil(j i / 128), ceil((j + 1) i / 128))), each group's total G_j over its nz_j non-zero
 * bins, raw[i] = sum over the non-empty groups of G'_j ln(G_j / nz_j) (G'_127 leaves out
 * H[i-1]) and lastq[i] = ln(G_127 / nz_127) (0 when that group is empty).
 *
 * A group of candidate i is floor(i / 128) or one more bins wide, so every group of every
 * candidate is one of the (start, width) runs with width 1 .. 16: their terms G ln(G / nz)
 * are tabulated once per width (2048 logs each, 17 widths, against 128 logs for each of the
 * 1921 candidates), and a candidate's sum reads its 128 groups from the tables of its two
 * widths. The logs are ptq_log's branch-free core (ptq_mathf_log_normal) on G * (1 / nz);
 * a run whose mean falls outside that core's domain (not a positive normal double) holds a
 * NaN, and slow[i] is set where the sum is not finite: the caller evaluates that candidate
 * with ptq_log (entropy_screen_one). Candidates with slow[i] == SCREEN_SKIP on entry (+inf
 * KL) are left alone. The sums' order differs from entropy_kl_direct's, which alone decides
 * (the screening only has to stay within SCREEN_ATOL of it). */
enum { SCREEN_SKIP = 2, MAXW = NB / NQ };

/* tab[s] = G ln(G / nz) of the run of `width` bins from s (0 when they are all zero, NaN
 * outside the fast log's domain), for every s in 0 .. NB - width. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void entropy_runs(const double *restrict C, const int *restrict NZ, int width, double *restrict tab)
{
    double arg[NB], G[NB], mark[NB];
    int n = NB - width + 1;
#pragma omp simd
    for (int s = 0; s < n; s++) {
        int nz = NZ[s + width] - NZ[s], empty = nz == 0;
        G[s] = C[s + width] - C[s];                               /* exactly 0 when empty */
        arg[s] = G[s] / (double)(nz + empty) + (double)empty; /* 1 when empty: its log is 0 */
        mark[s] = (arg[s] < 0x1p-1022) | (arg[s] > DBL_MAX) ? (double)NAN : 1.0;
    }
#pragma omp simd
    for (int s = 0; s < n; s++) tab[s] = G[s] * ptq_mathf_log_normal(arg[s], 0.0) * mark[s];
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void entropy_sum_groups(const double *restrict tab, int i, int wlo, double *restrict out)
{
    /* tab holds the runs of width wlo at [0, NB] and of width wlo + 1 at [NB + 1, 2 NB + 1] */
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < NQ; j++) {
        int e0 = (j * i + NQ - 1) / NQ, e1 = ((j + 1) * i + NQ - 1) / NQ;
        sum += tab[e0 + (e1 - e0 - wlo) * (NB + 1)];
    }
    *out = sum;
}

static void entropy_screen(const double *restrict C, const int *restrict NZ, const double *restrict H,
                           double *restrict raw, double *restrict lastq, unsigned char *restrict slow)
{
    double tab[2 * (NB + 1)]; /* widths w and w + 1 of the candidates i in [128 w, 128 (w + 1)) */
    int have = START_BIN / NQ;
    entropy_runs(C, NZ, have, tab);
    entropy_runs(C, NZ, have + 1, tab + NB + 1);
    for (int i = START_BIN; i <= NB; i++) {
        int w = i / NQ < MAXW ? i / NQ : MAXW - 1; /* i = 2048: every group is 16 wide, in the upper table */
        if (w != have) { /* the next width: the upper table moves down */
            memcpy(tab, tab + NB + 1, sizeof(double) * (NB + 1));
            entropy_runs(C, NZ, w + 1, tab + NB + 1);
            have = w;
        }
        if (slow[i] == SCREEN_SKIP) continue;
        double sum;
        entropy_sum_groups(tab, i, w, &sum);
        /* the last group, [ceil(127 i / 128), i), once more for its log and H[i-1]'s share */
        int e = (127 * i + NQ - 1) / NQ, nz = NZ[i] - NZ[e];
        double lq = 0.0;
        if (nz) {
            double G = C[i] - C[e], arg = G / (double)nz;
            lq = ptq_mathf_log_normal(arg, 0.0);
            sum -= H[i - 1] * lq;
        }
        raw[i] = sum;
        lastq[i] = lq;
        slow[i] = !isfinite(sum);
    }
}

/* entropy_screen's sums for one candidate, with ptq_log (any positive double). */
static void entropy_screen_one(int i, const double *C, const int *NZ, const double *H, double *raw, double *lastq)
{
    double sum = 0.0;
    *lastq = 0.0;
    for (int j = 0; j < NQ; j++) {
        int e0 = (j * i + NQ - 1) / NQ, e1 = ((j + 1) * i + NQ - 1) / NQ, nz = NZ[e1] - NZ[e0];
        double G = C[e1] - C[e0];
        if (!nz) continue;
        double lq = ptq_log(G / nz);
        sum += (j == NQ - 1 ? G - H[i - 1] : G) * lq;
        if (j == NQ - 1) *lastq = lq;
    }
    *raw = sum;
}

/* KL(P||Q) of entropy candidate i, evaluated as pytorch-quantization and scipy.stats.entropy
 * do: P = H[:i] with P[i-1] += np.sum(H[i:]); Q = each group's total spread over its bins
 * that are non-zero in H; both normalised by np.sum; sum of p ln(p / q) over p > 0 (np.sum).
 * +inf where some p > 0 has q = 0. scratch: 3 * NB doubles. */
static double entropy_kl_direct(const double *H, int i, double *scratch)
{
    double *P = scratch, *Q = scratch + NB, *v = scratch + 2 * NB;
    double G[NQ] = {0};
    int nz[NQ] = {0};
    memcpy(P, H, sizeof(double) * (size_t)i);
    P[i - 1] += sum_pairwise(H + i, NB - i);
    for (int k = 0; k < i; k++) {
        int j = (int)((int64_t)NQ * k / i);
        if (H[k] != 0) {
            G[j] += H[k];
            nz[j]++;
        }
    }
    for (int k = 0; k < i; k++) {
        int j = (int)((int64_t)NQ * k / i);
        Q[k] = H[k] != 0 ? G[j] / nz[j] : 0.0;
    }
    double sp = sum_pairwise(P, i), sq = sum_pairwise(Q, i);
    for (int k = 0; k < i; k++) {
        double p = P[k] / sp, q = Q[k] / sq;
        if (p > 0 && q > 0) v[k] = p * ptq_log(p / q);
        else if (p > 0) return INFINITY;
        else v[k] = 0.0;
    }
    return sum_pairwise(v, i);
}

/* entropy (_compute_amax_entropy; TensorRT's EntropyCalibration2 KL search): H' = H with
 * H'[0] := H[1] (bin 0 holds the exact zeros of ReLU outputs and padding: with that spike
 * every wide grouping looks costly and the search would fall to amax / 16); for each
 * candidate i in 128 .. 2048, P = H'[:i] with the outliers folded into its last bin and Q =
 * H'[:i] merged into 128 groups (bin k in group floor(128 k / i)) and spread back over each
 * group's non-zero bins; the i with the least KL(P||Q), the last one on ties, gives i w.
 *
 * Screening in O(128) per candidate from prefix sums over H': with S the total, C(k) =
 * H'[0] + ... + H'[k-1], L(k) = sum of H' ln H' over those bins, group j holding G_j on
 * nz_j non-zero bins and T = H'[i-1] + tail the last bin of P (sum P = S, sum Q = C(i)):
 *   sum P ln P = (L(i-1) + T ln T) / S - ln S
 *   sum P ln Q = (sum_j G'_j ln(G_j / nz_j) + T ln(G_127 / nz_127)) / S - ln C(i)
 * with G'_127 leaving out H'[i-1] (counted in T). KL is +inf exactly when H'[i-1] = 0 and
 * the tail is not empty: the last bin is the only one where P > 0 can meet Q = 0. */
static double method_entropy(const double *hist, double w)
{
    double H[NB], C[NB + 1], L[NB + 1], *kl = malloc(sizeof(double) * (NB + 1) * 4);
    int NZ[NB + 1], last_nz = -1;
    if (!kl) return -1; /* out of memory: calib_amaxes fails */
    double *scratch = kl + NB + 1;
    memcpy(H, hist, sizeof H);
    H[0] = H[1];
    C[0] = L[0] = 0;
    NZ[0] = 0;
    for (int k = 0; k < NB; k++) {
        C[k + 1] = C[k] + H[k];
        L[k + 1] = L[k] + (H[k] > 0 ? H[k] * ptq_log(H[k]) : 0);
        NZ[k + 1] = NZ[k] + (H[k] != 0);
        if (H[k] != 0) last_nz = k;
    }
    double S = C[NB], best = INFINITY;
    if (!(S > 0)) {
        free(kl);
        return NB * w;
    }
    double *raw = scratch, *lastq = raw + NB + 1, lnS = ptq_log(S);
    unsigned char slow[NB + 1];
    for (int i = START_BIN; i <= NB; i++) slow[i] = last_nz >= i && H[i - 1] == 0 ? SCREEN_SKIP : 0;
    entropy_screen(C, NZ, H, raw, lastq, slow);
    for (int i = START_BIN; i <= NB; i++) {
        int has_tail = last_nz >= i;
        kl[i] = INFINITY;
        if (slow[i] == SCREEN_SKIP) continue;
        if (slow[i]) entropy_screen_one(i, C, NZ, H, &raw[i], &lastq[i]);
        double Ci = C[i], T = H[i - 1] + (has_tail ? S - Ci : 0.0);
        double plnp = L[i - 1] / S - C[i - 1] / S * lnS, plnq = raw[i];
        if (T > 0) plnp += T / S * ptq_log(T / S);
        if (T > 0) plnq += T * lastq[i];
        plnq = plnq / S - ptq_log(Ci);
        kl[i] = plnp - plnq;
        if (kl[i] < best) best = kl[i];
    }
    /* direct evaluation of the near-best candidates; the last minimum wins */
    double cut = best + SCREEN_RTOL * fabs(best) + SCREEN_ATOL, best_direct = INFINITY;
    int best_i = NB;
    for (int i = START_BIN; i <= NB; i++) {
        if (!(kl[i] <= cut)) continue;
        double d = entropy_kl_direct(H, i, scratch);
        if (d <= best_direct) {
            best_direct = d;
            best_i = i;
        }
    }
    free(kl);
    return best_i * w;
}

/* err of mse candidate a = (i + 0.5) w, term by term as the reference does (np.sum of
 * H * (c - q s)^2, c = (k + 0.5) w, s = a / 127, q = clamp(round_half_even(c / s))). */
static double mse_err_direct(const double *H, int i, double w, double *v)
{
    double s = (i + 0.5) * w / 127;
    for (int k = 0; k < NB; k++) {
        double c = (k + 0.5) * w, q = rint(c / s);
        if (q > 127) q = 127;
        double d = c - q * s;
        v[k] = H[k] * (d * d);
    }
    return sum_pairwise(v, NB);
}

/* The screened error of every mse candidate i in START_BIN .. NB - 1, in units of w (see
 * method_mse), in one vectorised pass: a sum over the 128 levels q of level q's share, from
 * the prefix sums at the level edges. Level q covers bins [level_start(q, i),
 * level_start(q + 1, i)) clipped to NB, level 127 up to NB; a level that covers no bin adds
 * exactly 0. level_start(q, i), the first bin k whose centre (k + 0.5) w quantizes to a level
 * >= q (q >= 1) with candidate amax (i + 0.5) w: 127 (2k + 1) / (2i + 1) > q - 1/2, i.e.
 * 254 (2k + 1) > (2q - 1)(2i + 1), so k = ((2q - 1)(2i + 1) - 254) / 508 + 1. The ratio is
 * never a half-integer (254 (2k + 1) is even, (2q - 1)(2i + 1) odd), so round-half-even has
 * no ties here and every bin's level is exact. */
typedef double v4d __attribute__((vector_size(32)));

__attribute__((target_clones("avx512f", "avx2", "default")))
static void mse_screen(const v4d *restrict P, const v4d *restrict cq, double *restrict err)
{
    for (int i = START_BIN; i < NB; i++) {
        double step = (2 * i + 1) / 254.0;
        int e[NQ + 1];
        e[0] = 0;
        e[NQ] = NB;
#pragma omp simd
        for (int q = 1; q < NQ; q++) { /* (2q - 1)(2i + 1) > 254 here (i >= 128) */
            int k = ((2 * q - 1) * (2 * i + 1) - 254) / 508 + 1;
            e[q] = k < NB ? k : NB;
        }
        /* P[k] = (S0, S1, S2) up to bin k in one vector, cq[q] = (q^2, -2q, 1): level q adds
         * (P[e[q + 1]] - P[e[q]]) * cq[q], and the sum is scaled by (step^2, step, 1) once */
        v4d acc0 = {0, 0, 0, 0}, acc1 = {0, 0, 0, 0}, lo = P[0];
        for (int q = 0; q < NQ; q += 2) {
            v4d mid = P[e[q + 1]], hi = P[e[q + 2]];
            acc0 += (mid - lo) * cq[q];
            acc1 += (hi - mid) * cq[q + 1];
            lo = hi;
        }
        v4d acc = acc0 + acc1;
        err[i] = acc[2] + acc[1] * step + acc[0] * (step * step);
    }
}

/* mse (_compute_amax_mse): candidates are the bin centres a = (i + 0.5) w, i in 128 .. 2047;
 * bin centres c_k = (k + 0.5) w quantized with s = a / 127 (round half to even, clamped to
 * 127); the candidate with the least histogram-weighted squared error wins, the first on
 * ties. Screening: each level q covers a run of bins (level_start), so in units of w the
 * error is a sum over 128 levels of prefix sums of H, H c and H c^2:
 * sum H (c - v)^2 = S2 - 2 v S1 + v^2 S0 with v = q (2i + 1) / 254. */
static double method_mse(const double *H, double w)
{
    double *err = malloc(sizeof(double) * (NB + NB));
    v4d *P = aligned_alloc(32, sizeof(v4d) * (NB + 1));
    if (!err || !P) { /* out of memory: calib_amaxes fails */
        free(err);
        free(P);
        return -1;
    }
    double *scratch = err + NB;
    v4d cq[NQ];
    for (int q = 0; q < NQ; q++) cq[q] = (v4d){(double)q * q, -2.0 * q, 1, 0};
    P[0] = (v4d){0, 0, 0, 0};
    for (int k = 0; k < NB; k++) {
        double c = k + 0.5;
        P[k + 1] = (v4d){P[k][0] + H[k], P[k][1] + H[k] * c, P[k][2] + H[k] * c * c, 0};
    }
    double best = INFINITY;
    mse_screen(P, cq, err);
    for (int i = START_BIN; i < NB; i++)
        if (err[i] < best) best = err[i];
    double cut = best + SCREEN_RTOL * fabs(best) + SCREEN_ATOL * P[NB][2], best_direct = INFINITY;
    int best_i = NB - 1;
    for (int i = START_BIN; i < NB; i++) {
        if (!(err[i] <= cut)) continue;
        double d = mse_err_direct(H, i, w, scratch);
        if (d < best_direct) {
            best_direct = d;
            best_i = i;
        }
    }
    free(err);
    free(P);
    return (best_i + 0.5) * w;
}

ptq_status calib_amaxes(const calib_stats *s, const calib_method *m, int n, float *amax_out, int *warn)
{
    ptq_status st = PTQ_OK;
    double amax = s->amax, w = amax / CALIB_ANALYSIS_BINS, *H = NULL;
    int bad = !(amax >= 0x1p-30) || !isfinite(amax) || s->range == 0.0;
    for (int i = 0; i < n; i++) {
        double r = amax;
        char name[32];
        if (!bad && m[i].kind != CALIB_MAX) {
            calib_method_name(&m[i], name, sizeof name);
            if (!H) { /* resampled once for every method that reads it */
                if (!(H = malloc(sizeof(double) * CALIB_ANALYSIS_BINS)))
                    FAIL(PTQ_ERR_NOMEM, "out of memory: the %d-bin analysis histogram of calibration method %s",
                         CALIB_ANALYSIS_BINS, name);
                calib_analysis_hist(s, H);
            }
            if (m[i].kind == CALIB_PERCENTILE) r = method_percentile(H, w, m[i].percentile);
            else if (m[i].kind == CALIB_ENTROPY) r = method_entropy(H, w);
            else r = method_mse(H, w);
            if (r < 0) /* the method's own scratch over the histogram */
                FAIL(PTQ_ERR_NOMEM, "out of memory: the search buffers over the %d-bin histogram of calibration method %s",
                     CALIB_ANALYSIS_BINS, name);
        }
        float f = (float)r;
        warn[i] = bad || !(f >= 0x1p-30f) || !isfinite(f);
        amax_out[i] = warn[i] ? 1.0f : f;
    }
done:
    free(H);
    return st;
}

ptq_status calib_amax(const calib_stats *s, const calib_method *m, float *amax, int *warn)
{
    return calib_amaxes(s, m, 1, amax, warn);
}

int calib_method_parse(const char *s, calib_method *m)
{
    memset(m, 0, sizeof *m);
    if (!strcmp(s, "max")) m->kind = CALIB_MAX;
    else if (!strcmp(s, "entropy")) m->kind = CALIB_ENTROPY;
    else if (!strcmp(s, "mse")) m->kind = CALIB_MSE;
    else if (!strcmp(s, "percentile")) {
        m->kind = CALIB_PERCENTILE;
        m->percentile = 99.99;
    } else if (!strncmp(s, "percentile:", 11)) {
        char *end;
        m->kind = CALIB_PERCENTILE;
        m->percentile = strtod(s + 11, &end);
        if (*end || !(m->percentile > 0 && m->percentile <= 100)) return -1;
    } else {
        return -1;
    }
    return 0;
}

void calib_method_name(const calib_method *m, char *buf, size_t cap)
{
    static const char *const names[] = {"max", "percentile", "entropy", "mse"};
    if (m->kind == CALIB_PERCENTILE) snprintf(buf, cap, "percentile-%g", m->percentile);
    else snprintf(buf, cap, "%s", names[m->kind]);
}

int calib_methods_parse(const char *s, calib_method *out, int cap, int *n)
{
    *n = 0;
    if (!strcmp(s, "all")) {
        static const char *const all[] = {"max", "percentile:99.9", "percentile:99.99", "percentile:99.999", "entropy", "mse"};
        for (int i = 0; i < 6 && *n < cap; i++) calib_method_parse(all[i], &out[(*n)++]);
        return 0;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == cap || calib_method_parse(tok, &out[*n]) != 0) return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

double calib_clip_share(const calib_stats *s, float amax)
{
    uint64_t finite = s->count - s->nan - s->pinf - s->ninf;
    if (!(s->range > 0.0) || finite == 0 || !(amax >= 0.0f)) return 0.0;
    /* a value within one step (amax/127) above amax saturates with no more error than rounding */
    double w = s->range / CALIB_BINS, a = (double)amax * (1.0 + 1.0 / 127.0), above = 0.0;
    long k = (long)floor(a / w);
    if (k >= CALIB_BINS) return 0.0;
    /* the bin holding amax counts for the part of its width above amax (values spread evenly) */
    above += (double)s->hist[k] * (((double)(k + 1) * w - a) / w);
    for (long i = k + 1; i < CALIB_BINS; i++) above += (double)s->hist[i];
    return above / (double)finite;
}
