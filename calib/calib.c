/* calib.c: streaming statistics (spec §2) and the four methods (spec §3). */
#include "calib.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Pass 1 over a slice: min, max, amax of the finite values, zeros, non-finite count.
 * Written branch-free on integer keys so that the compiler vectorises it: a finite
 * float's key (bits ^ 0x80000000 when positive, ~bits when negative) orders like its
 * value as an unsigned integer, and |x|'s bits order like |x|. */
typedef struct {
    float min, max, amax;
    uint64_t zeros, nonfinite;
} scan_result;

static inline uint32_t order_key(uint32_t bits)
{
    return bits ^ ((uint32_t)((int32_t)bits >> 31) | 0x80000000u);
}

static inline float from_key(uint32_t key)
{
    uint32_t bits = key & 0x80000000u ? key & 0x7fffffffu : ~key;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

__attribute__((target_clones("avx2", "default")))
static void scan_slice(const float *x, size_t n, scan_result *r)
{
    uint32_t kmin = UINT32_MAX, kmax = 0, amax = 0, zeros = 0, bad = 0;
    const uint32_t *bits = (const uint32_t *)(const void *)x;
#pragma omp simd reduction(min : kmin) reduction(max : kmax, amax) reduction(+ : zeros, bad)
    for (size_t i = 0; i < n; i++) {
        uint32_t u = bits[i], a = u & 0x7fffffffu;
        uint32_t finite = a < 0x7f800000u, key = order_key(u);
        uint32_t lo = finite ? key : UINT32_MAX, hi = finite ? key : 0, am = finite ? a : 0;
        kmin = lo < kmin ? lo : kmin;
        kmax = hi > kmax ? hi : kmax;
        amax = am > amax ? am : amax;
        zeros += a == 0;
        bad += finite ^ 1u;
    }
    if (kmin == UINT32_MAX) { /* nothing finite */
        r->min = INFINITY;
        r->max = -INFINITY;
    } else {
        r->min = from_key(kmin);
        r->max = from_key(kmax);
    }
    memcpy(&r->amax, &amax, 4);
    r->zeros = zeros;
    r->nonfinite = bad;
}

/* Pass 2 over a slice: counts of |x| per bin of width R/4096 for the finite non-zero
 * values (zeros are added to bin 0 by the caller from pass 1's count). inv = 4096/R is a
 * power of two, so |x| * inv is exact in float and the bin is floor(|x| * 4096 / R);
 * |x| < R holds by the choice of R. Four interleaved sub-histograms (and a dump slot for
 * zeros and non-finite values) keep consecutive increments off the same counter. */
#define SUB (CALIB_BINS + 1)
static void fill_slice(const float *x, size_t n, float inv, uint32_t *h /* 4 * SUB */)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) {
            uint32_t u;
            memcpy(&u, &x[i + j], 4);
            u &= 0x7fffffffu;
            float a;
            memcpy(&a, &u, 4);
            int b = u - 1u < 0x7f7fffffu ? (int)(a * inv) : CALIB_BINS; /* 0 < |x| <= FLT_MAX */
            h[j * SUB + b]++;
        }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u &= 0x7fffffffu;
        float a;
        memcpy(&a, &u, 4);
        h[u - 1u < 0x7f7fffffu ? (int)(a * inv) : CALIB_BINS]++;
    }
}

#define PAR_MIN 65536           /* elements below which one thread does it all */
#define CHUNK 8192              /* floats scanned then binned while in L1/L2 */
#define FLUSH ((size_t)1 << 30) /* uint32 sub-histogram counts never overflow */

/* One thread's share of a batch: scanned and binned chunk by chunk with the thread's own
 * R (doubled, bins merged in pairs, when a chunk exceeds it). Bin edges of all powers of
 * two align, so bringing every part to the final R gives exactly the direct fill. */
typedef struct {
    scan_result r;
    uint64_t nan, pinf, ninf;
    double range;               /* 0 until a finite non-zero value */
    uint64_t acc[CALIB_BINS];
} part_hist;

static void flush(part_hist *p, uint32_t *h)
{
    for (int b = 0; b < CALIB_BINS; b++) p->acc[b] += (uint64_t)h[b] + h[SUB + b] + h[2 * SUB + b] + h[3 * SUB + b];
    memset(h, 0, sizeof(uint32_t) * 4 * SUB);
}

static void grow(uint64_t *hist, double *range, double to)
{
    while (*range < to) {
        for (int i = 0; i < CALIB_BINS / 2; i++) hist[i] = hist[2 * i] + hist[2 * i + 1];
        memset(&hist[CALIB_BINS / 2], 0, sizeof(uint64_t) * CALIB_BINS / 2);
        *range *= 2.0;
    }
}

static void add_part(const float *x, size_t n, double range0, part_hist *p, uint32_t *h)
{
    p->r = (scan_result){INFINITY, -INFINITY, 0.0f, 0, 0};
    p->range = range0;
    size_t since_flush = 0;
    for (size_t c = 0; c < n; c += CHUNK) {
        size_t len = n - c < CHUNK ? n - c : CHUNK;
        scan_result r;
        scan_slice(x + c, len, &r);
        if (r.min < p->r.min) p->r.min = r.min;
        if (r.max > p->r.max) p->r.max = r.max;
        if (r.amax > p->r.amax) p->r.amax = r.amax;
        p->r.zeros += r.zeros;
        p->r.nonfinite += r.nonfinite;
        if (r.nonfinite)
            for (size_t i = c; i < c + len; i++) {
                if (isnan(x[i])) p->nan++;
                else if (isinf(x[i])) *(x[i] > 0 ? &p->pinf : &p->ninf) += 1;
            }
        if (r.zeros + r.nonfinite == len) continue; /* nothing to bin */
        if ((double)r.amax >= p->range) {
            double to = pow2_above((double)r.amax);
            if (p->range == 0.0) p->range = to;
            else {
                flush(p, h);
                since_flush = 0;
                grow(p->acc, &p->range, to);
            }
        }
        if (since_flush + len > FLUSH) {
            flush(p, h);
            since_flush = 0;
        }
        fill_slice(x + c, len, (float)(CALIB_BINS / p->range), h); /* a power of two: exact */
        since_flush += len;
    }
    flush(p, h);
}

void calib_stats_add(calib_stats *s, const float *x, size_t n, int nthreads)
{
    if (nthreads < 1 || n < PAR_MIN) nthreads = 1;
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
#pragma omp parallel num_threads(nthreads) if (nthreads > 1)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
        part_hist *p = calloc(1, sizeof *p);
        uint32_t *h = calloc(4 * SUB, sizeof *h);
        if (p && h) add_part(x + lo, hi - lo, s->range, p, h);
        /* combine in thread order: min/max exact, counts are integers, and every part is
         * brought to the larger R before its bins are added */
#pragma omp for ordered schedule(static, 1)
        for (int k = 0; k < nt; k++)
#pragma omp ordered
        {
            if (p && h) { /* out of memory: the slice is left out, and count shows it */
                if (p->r.min < s->min) s->min = p->r.min;
                if (p->r.max > s->max) s->max = p->r.max;
                if (p->r.amax > s->amax) s->amax = p->r.amax;
                s->count += hi - lo;
                s->zeros += p->r.zeros;
                s->nan += p->nan;
                s->pinf += p->pinf;
                s->ninf += p->ninf;
                s->hist[0] += p->r.zeros;
                if (p->range > 0) {
                    if (s->range == 0.0) s->range = p->range;
                    grow(s->hist, &s->range, p->range);
                    grow(p->acc, &p->range, s->range);
                    for (int b = 0; b < CALIB_BINS; b++) s->hist[b] += p->acc[b];
                }
            }
        }
        free(p);
        free(h);
    }
    /* only zeros so far: R = 2^-24 holds them in bin 0 */
    if (s->range == 0.0 && s->count > s->nan + s->pinf + s->ninf) s->range = pow2_above((double)s->amax);
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
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
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

/* ---- methods ---- */

/* percentile: the upper edge of the first bin where the cumulative share reaches P. */
static double method_percentile(const double *H, double w, double P)
{
    double total = 0, c = 0;
    for (int i = 0; i < CALIB_ANALYSIS_BINS; i++) total += H[i];
    if (total <= 0) return 0;
    for (int i = 0; i < CALIB_ANALYSIS_BINS; i++) {
        c += H[i];
        if (c / total >= P / 100.0) return (i + 1) * w;
    }
    return CALIB_ANALYSIS_BINS * w;
}

/* entropy: TensorRT's EntropyCalibration2 KL search over 2048 bins down to 128 quantized
 * bins (pytorch-quantization's _compute_amax_entropy): for each candidate threshold bin i,
 * P = H[:i] with the outliers folded into its last bin, Q = H[:i] merged into 128 groups and
 * spread back over each group's non-zero bins; the i with the least KL(P||Q) wins.
 * As in pytorch-quantization (`bins[0] = bins[1]`), the first bin's count is replaced by the
 * second's before the search: bin 0 holds the exact zeros of ReLU outputs and padding, and
 * with that spike every wide grouping looks costly, so the search would fall to the
 * smallest threshold (amax / 16) on such tensors.
 *
 * Computed in O(128) per candidate instead of O(i), from prefix sums over H: with S the
 * total count, C(k) = H[0] + ... + H[k-1], L(k) = sum of H ln H over those bins, group j
 * of candidate i holding G_j counts on nz_j non-zero bins, and T = H[i-1] + tail the
 * last bin of P:
 *   sum P ln P = (L(i-1) + T ln T) / S - ln S
 *   sum P ln Q = (sum_j G'_j ln(G_j / nz_j) + T ln q_last) / S - (C(i-1) + T) / S * ln C(i)
 * where G'_j = G_j except that the last group leaves out H[i-1] (counted in T), and
 * q_last = G_127 / nz_127, or 1e-4 * C(i) when H[i-1] = 0 < T: the only bin where P > 0
 * and Q = 0, which the smoothing sets to 1e-4 before Q is renormalised by (1 + 1e-4). */
static double method_entropy(const double *hist, double w)
{
    enum { NB = CALIB_ANALYSIS_BINS, NQ = 128 };
    double H[NB], C[NB + 1], L[NB + 1];
    memcpy(H, hist, sizeof H);
    H[0] = H[1];
    int NZ[NB + 1];
    C[0] = L[0] = 0;
    NZ[0] = 0;
    for (int k = 0; k < NB; k++) {
        C[k + 1] = C[k] + H[k];
        L[k + 1] = L[k] + (H[k] > 0 ? H[k] * log(H[k]) : 0);
        NZ[k + 1] = NZ[k] + (H[k] != 0);
    }
    double S = C[NB], best = INFINITY;
    int best_i = NB;
    if (!(S > 0)) return NB * w;
    for (int i = NQ; i <= NB; i++) {
        double Ci = C[i], T = H[i - 1] + (S - Ci);
        if (!(Ci > 0)) continue;
        double plnp = L[i - 1] / S - C[i - 1] / S * log(S), plnq = 0, lastq = 0;
        if (T > 0) plnp += T / S * log(T / S);
        for (int j = 0; j < NQ; j++) {
            int lo = (int)((int64_t)j * i / NQ), hi = (int)((int64_t)(j + 1) * i / NQ);
            double G = C[hi] - C[lo];
            int nz = NZ[hi] - NZ[lo];
            if (nz == 0) continue;
            double lq = log(G / nz), Gp = j == NQ - 1 ? G - H[i - 1] : G;
            plnq += Gp * lq;
            if (j == NQ - 1) lastq = lq;
        }
        int smoothed = H[i - 1] == 0 && T > 0;
        if (T > 0) plnq += T * (smoothed ? log(1e-4 * Ci) : lastq);
        plnq = plnq / S - (C[i - 1] + T) / S * log(Ci);
        double kl = plnp - plnq + (smoothed ? log1p(1e-4) : 0.0);
        if (kl < best) {
            best = kl;
            best_i = i;
        }
    }
    return (best_i + 0.5) * w;
}

/* The first bin k whose centre (k + 0.5) w quantizes with scale i w / 127 to a level >= q
 * (round half to even): 127 (2k + 1) > (2q - 1) i, or equal with q even. Exact integers. */
static int level_start(int q, int i)
{
    if (q == 0) return 0;
    int64_t bound = (int64_t)(2 * q - 1) * i;
    int64_t k = (bound / 127 - 1) / 2;
    if (k < 0) k = 0;
    while (k > 0 && 127 * (2 * (k - 1) + 1) >= bound) k--;
    for (;;) {
        int64_t v = 127 * (2 * k + 1);
        if (v > bound || (v == bound && q % 2 == 0)) return (int)k;
        k++;
    }
}

/* mse: pytorch-quantization's _compute_amax_mse: candidates a = i w, bin centres
 * c_k = (k + 0.5) w quantized with s = a / 127 (round half to even, clamped to 127); the
 * candidate with the least histogram-weighted squared error wins (the first on ties).
 * Each quantization level q covers a run of bins, found exactly in integers, so the error
 * of a candidate is a sum over 128 levels of prefix sums of H, H c and H c^2 (in units of
 * w): sum H (c - q i / 127)^2 = S2 - 2 (q i / 127) S1 + (q i / 127)^2 S0. */
static double method_mse(const double *H, double w)
{
    enum { NB = CALIB_ANALYSIS_BINS };
    double P0[NB + 1], P1[NB + 1], P2[NB + 1];
    P0[0] = P1[0] = P2[0] = 0;
    for (int k = 0; k < NB; k++) {
        double c = k + 0.5;
        P0[k + 1] = P0[k] + H[k];
        P1[k + 1] = P1[k] + H[k] * c;
        P2[k + 1] = P2[k] + H[k] * c * c;
    }
    double best = INFINITY;
    int best_i = NB;
    for (int i = 128; i <= NB; i++) {
        double err = 0;
        int lo = 0;
        for (int q = 0; q <= 127 && lo < NB; q++) {
            int hi = q == 127 ? NB : level_start(q + 1, i);
            if (hi > NB) hi = NB;
            if (hi > lo) {
                double v = q * (double)i / 127.0;
                double s0 = P0[hi] - P0[lo], s1 = P1[hi] - P1[lo], s2 = P2[hi] - P2[lo];
                err += s2 - 2 * v * s1 + v * v * s0;
            }
            lo = hi;
        }
        if (err < best) {
            best = err;
            best_i = i;
        }
    }
    return best_i * w;
}

float calib_amax(const calib_stats *s, const calib_method *m, int *warn)
{
    double amax = s->amax, r = amax;
    *warn = 0;
    if (!(amax >= 0x1p-30) || !isfinite(amax) || s->range == 0.0) {
        *warn = 1;
        return 1.0f;
    }
    if (m->kind != CALIB_MAX) {
        double *H = malloc(sizeof(double) * CALIB_ANALYSIS_BINS);
        if (!H) return (float)amax;
        calib_analysis_hist(s, H);
        double w = amax / CALIB_ANALYSIS_BINS;
        if (m->kind == CALIB_PERCENTILE) r = method_percentile(H, w, m->percentile);
        else if (m->kind == CALIB_ENTROPY) r = method_entropy(H, w);
        else r = method_mse(H, w);
        free(H);
    }
    float f = (float)r;
    if (!(f >= 0x1p-30f) || !isfinite(f)) {
        *warn = 1;
        return 1.0f;
    }
    return f;
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
