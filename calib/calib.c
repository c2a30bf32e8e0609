/* calib.c: streaming statistics (spec §2) and the four methods (spec §3). */
#include "calib.h"

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

static double pow2_at_least(double v)
{
    double r = 0x1p-24;
    while (r < v) r *= 2.0;
    return r;
}

typedef struct {
    float min, max, amax;
    uint64_t nan, pinf, ninf, zeros;
    uint64_t hist[CALIB_BINS];
} partial;

void calib_stats_add(calib_stats *s, const float *x, size_t n, int nthreads)
{
    if (nthreads < 1) nthreads = 1;
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
    if (n < 65536) nthreads = 1;
    partial *p = calloc((size_t)nthreads, sizeof *p);
    if (!p) return; /* out of memory: the batch is not counted (caller checks count) */
    /* pass 1: min, max, amax, special values; each thread a fixed slice */
#pragma omp parallel num_threads(nthreads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
        partial *q = &p[t];
        q->min = INFINITY;
        q->max = -INFINITY;
        for (size_t i = lo; i < hi; i++) {
            float v = x[i];
            if (isnan(v)) q->nan++;
            else if (isinf(v)) {
                if (v > 0) q->pinf++;
                else q->ninf++;
            }
            else {
                if (v < q->min) q->min = v;
                if (v > q->max) q->max = v;
                if (fabsf(v) > q->amax) q->amax = fabsf(v);
                if (v == 0.0f) q->zeros++;
            }
        }
    }
    float bmax = 0.0f;
    int any_finite = 0;
    for (int t = 0; t < nthreads; t++) {
        if (p[t].min < s->min) s->min = p[t].min;
        if (p[t].max > s->max) s->max = p[t].max;
        if (p[t].amax > bmax) bmax = p[t].amax;
        if (p[t].min <= p[t].max) any_finite = 1;
        s->nan += p[t].nan;
        s->pinf += p[t].pinf;
        s->ninf += p[t].ninf;
        s->zeros += p[t].zeros;
    }
    s->count += n;
    if (bmax > s->amax) s->amax = bmax;
    if (!any_finite) {
        free(p);
        return;
    }
    if (s->range == 0.0) s->range = pow2_at_least((double)bmax);
    else
        while ((double)bmax >= s->range) double_range(s);
    double range = s->range, inv = CALIB_BINS / range, top = range * (1.0 - 0x1p-24);
    /* pass 2: private histograms, merged in thread order */
#pragma omp parallel num_threads(nthreads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
        uint64_t *h = p[t].hist;
        for (size_t i = lo; i < hi; i++) {
            double a = fabs((double)x[i]);
            if (!isfinite(a)) continue;
            int b = a >= top ? CALIB_BINS - 1 : (int)(a * inv);
            h[b < CALIB_BINS ? b : CALIB_BINS - 1]++;
        }
    }
    for (int t = 0; t < nthreads; t++)
        for (int b = 0; b < CALIB_BINS; b++) s->hist[b] += p[t].hist[b];
    free(p);
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
 * spread back over each group's non-zero bins; the i with the least KL(P||Q) wins. */
static double method_entropy(const double *H, double w)
{
    enum { NQ = 128 };
    double *P = malloc(sizeof(double) * CALIB_ANALYSIS_BINS), *Q = malloc(sizeof(double) * CALIB_ANALYSIS_BINS);
    double best = INFINITY;
    int best_i = CALIB_ANALYSIS_BINS;
    if (!P || !Q) {
        free(P);
        free(Q);
        return CALIB_ANALYSIS_BINS * w;
    }
    double *tail = malloc(sizeof(double) * (CALIB_ANALYSIS_BINS + 1));
    if (!tail) {
        free(P);
        free(Q);
        return CALIB_ANALYSIS_BINS * w;
    }
    tail[CALIB_ANALYSIS_BINS] = 0;
    for (int i = CALIB_ANALYSIS_BINS - 1; i >= 0; i--) tail[i] = tail[i + 1] + H[i];
    for (int i = NQ; i <= CALIB_ANALYSIS_BINS; i++) {
        double psum = 0, qsum = 0;
        for (int k = 0; k < i; k++) P[k] = H[k];
        P[i - 1] += tail[i];
        for (int j = 0; j < NQ; j++) {
            int a = (int)((int64_t)j * i / NQ), b = (int)((int64_t)(j + 1) * i / NQ);
            double tot = 0;
            int nz = 0;
            for (int k = a; k < b; k++) {
                tot += H[k];
                nz += H[k] != 0;
            }
            for (int k = a; k < b; k++) Q[k] = H[k] != 0 && nz ? tot / nz : 0;
        }
        for (int k = 0; k < i; k++) {
            psum += P[k];
            qsum += Q[k];
        }
        if (psum <= 0 || qsum <= 0) continue;
        /* normalise, smooth Q's zero bins on P's support with 1e-4, renormalise Q */
        double qs = 0;
        for (int k = 0; k < i; k++) {
            P[k] /= psum;
            Q[k] /= qsum;
            if (P[k] > 0 && Q[k] == 0) Q[k] = 1e-4;
            qs += Q[k];
        }
        double kl = 0;
        for (int k = 0; k < i; k++)
            if (P[k] > 0) kl += P[k] * log(P[k] / (Q[k] / qs));
        if (kl < best) {
            best = kl;
            best_i = i;
        }
    }
    free(P);
    free(Q);
    free(tail);
    return (best_i + 0.5) * w;
}

/* mse: pytorch-quantization's _compute_amax_mse: the candidate edge with the least
 * histogram-weighted squared error of quantizing bin centres. */
static double method_mse(const double *H, double w)
{
    double best = INFINITY, best_a = CALIB_ANALYSIS_BINS * w;
    for (int i = 128; i <= CALIB_ANALYSIS_BINS; i++) {
        double a = i * w, s = a / 127.0, err = 0;
        for (int k = 0; k < CALIB_ANALYSIS_BINS; k++) {
            if (H[k] == 0) continue;
            double c = (k + 0.5) * w, q = nearbyint(c / s);
            if (q > 127) q = 127;
            if (q < -127) q = -127;
            double d = c - q * s;
            err += H[k] * d * d;
        }
        if (err < best) {
            best = err;
            best_a = a;
        }
    }
    return best_a;
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
