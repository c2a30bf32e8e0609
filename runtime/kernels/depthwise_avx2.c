/* depthwise_avx2.c: the AVX2 rows of depthwise.c's 3x3 and 5x5 kernels at column stride 1
 * or 2 (compiled with -mavx2; called only where cpuid reports it, on the avx2 and avx512
 * paths). Each output is the taps summed from zero in row-major tap order, a multiply then an
 * add per tap (no FMA: the same two roundings as the generic loop), then the bias: the bytes
 * of every other path. Eight outputs a vector, eight vectors (then four, then one) at once so
 * that the adds of independent sums overlap; the last ow % 8 outputs one by one. At stride 2 a vector of taps
 * p[2x + j] is the even (j even) or odd lanes of two loads, deinterleaved. */
#include <immintrin.h>

#include "runtime/kernels/depthwise_isa.h"

/* lanes 0, 2, 4, ... (odd = 0) or 1, 3, 5, ... (odd = 1) of the 16 floats at q */
static inline __m256 dw_lanes(const float *q, int odd)
{
    __m256 a = _mm256_loadu_ps(q), b = _mm256_loadu_ps(q + 8);
    __m256 t = odd ? _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)) : _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

static inline __m256 dw_taps(const float *q, int sw, int j)
{
    return sw == 1 ? _mm256_loadu_ps(q + j) : dw_lanes(q + (j & ~1), j & 1);
}

/* V vectors (8 V outputs) of one row from x: V independent sums, enough of them to cover the
 * add's latency (a sum's next add waits for its last). */
static inline __attribute__((always_inline)) void dw_block(const float *restrict p, int64_t pp, const float *restrict w,
                                                           __m256 vb, float *restrict o, int64_t x, int K, int SW, int V)
{
    __m256 a[8];
    for (int v = 0; v < V; v++) a[v] = _mm256_setzero_ps();
    for (int i = 0; i < K; i++) {
        const float *q = p + i * pp + x * SW;
        for (int j = 0; j < K; j++) {
            const __m256 wv = _mm256_broadcast_ss(w + i * K + j);
            for (int v = 0; v < V; v++) a[v] = _mm256_add_ps(a[v], _mm256_mul_ps(wv, dw_taps(q + 8 * v * SW, SW, j)));
        }
    }
    for (int v = 0; v < V; v++) _mm256_storeu_ps(o + x + 8 * v, _mm256_add_ps(a[v], vb));
}

static inline __attribute__((always_inline)) void dw_row(const float *restrict p, int64_t pp, const float *restrict w,
                                                         float bias, float *restrict o, int64_t ow, int K, int SW)
{
    const __m256 vb = _mm256_set1_ps(bias);
    int64_t x = 0;
    for (; x + 64 <= ow; x += 64) dw_block(p, pp, w, vb, o, x, K, SW, 8);
    if (x + 32 <= ow) {
        dw_block(p, pp, w, vb, o, x, K, SW, 4);
        x += 32;
    }
    for (; x + 8 <= ow; x += 8) dw_block(p, pp, w, vb, o, x, K, SW, 1);
    for (; x < ow; x++) {
        float acc = 0.0f;
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) acc += w[i * K + j] * p[i * pp + x * SW + j];
        o[x] = acc + bias;
    }
}

void kern_dw_rows_avx2(const float *pad, int64_t pp, int64_t sh, float *y, int64_t ow, int64_t rows, const float *w,
                       float bias, int k, int sw)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *p = pad + r * sh * pp;
        float *o = y + r * ow;
        if (k == 3 && sw == 1) dw_row(p, pp, w, bias, o, ow, 3, 1);
        else if (k == 3) dw_row(p, pp, w, bias, o, ow, 3, 2);
        else if (sw == 1) dw_row(p, pp, w, bias, o, ow, 5, 1);
        else dw_row(p, pp, w, bias, o, ow, 5, 2);
    }
}
