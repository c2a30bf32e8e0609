/* depthwise_avx2.c: the AVX2 rows of depthwise.c's 3x3 and 5x5 kernels at column stride 1
 * or 2 (compiled with -mavx2; called only where cpuid reports it, on the avx2 and avx512
 * paths). Each output is the taps summed from zero in row-major tap order, a multiply then an
 * add per tap (no FMA: the same two roundings as the generic loop), then the bias: the bytes
 * of every other path. Eight outputs a vector, four vectors at once so that the adds of four
 * independent sums overlap; the last ow % 8 outputs one by one. At stride 2 a vector of taps
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

static inline __attribute__((always_inline)) void dw_row(const float *restrict p, int64_t pp, const float *restrict w,
                                                         float bias, float *restrict o, int64_t ow, int K, int SW)
{
    const __m256 vb = _mm256_set1_ps(bias);
    int64_t x = 0;
    for (; x + 32 <= ow; x += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < K; i++) {
            const float *q = p + i * pp + x * SW;
            for (int j = 0; j < K; j++) {
                const __m256 wv = _mm256_broadcast_ss(w + i * K + j);
                a0 = _mm256_add_ps(a0, _mm256_mul_ps(wv, dw_taps(q, SW, j)));
                a1 = _mm256_add_ps(a1, _mm256_mul_ps(wv, dw_taps(q + 8 * SW, SW, j)));
                a2 = _mm256_add_ps(a2, _mm256_mul_ps(wv, dw_taps(q + 16 * SW, SW, j)));
                a3 = _mm256_add_ps(a3, _mm256_mul_ps(wv, dw_taps(q + 24 * SW, SW, j)));
            }
        }
        _mm256_storeu_ps(o + x, _mm256_add_ps(a0, vb));
        _mm256_storeu_ps(o + x + 8, _mm256_add_ps(a1, vb));
        _mm256_storeu_ps(o + x + 16, _mm256_add_ps(a2, vb));
        _mm256_storeu_ps(o + x + 24, _mm256_add_ps(a3, vb));
    }
    for (; x + 8 <= ow; x += 8) {
        __m256 a0 = _mm256_setzero_ps();
        for (int i = 0; i < K; i++) {
            const float *q = p + i * pp + x * SW;
            for (int j = 0; j < K; j++)
                a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_broadcast_ss(w + i * K + j), dw_taps(q, SW, j)));
        }
        _mm256_storeu_ps(o + x, _mm256_add_ps(a0, vb));
    }
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
