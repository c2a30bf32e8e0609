/* sgemm_avx512.c: the AVX-512F path of kern_sgemm (compiled with -mavx512f -mfma; called
 * only when cpuid reports AVX-512F). An 8 x 32 register tile: 16 zmm accumulators, two B
 * vectors and one broadcast A value per k step, one FMA per accumulator and step. */
#include <immintrin.h>

#include <math.h>

#include "runtime/kernels/sgemm_isa.h"

#define SG_MR 8
#define SG_NR 32
#define SG_FN sgemm_avx512_driver
#define SG_TAPS_FN sgemm_avx512_taps_driver

static inline void sg_micro(int64_t kc, const float *ap, const float *bp, int64_t ldbp, float *c, int64_t ldc,
                            int load)
{
    __m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
#define SG_LOAD(r)                                                                                                   \
    c##r##0 = load ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();                                             \
    c##r##1 = load ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
    SG_LOAD(0) SG_LOAD(1) SG_LOAD(2) SG_LOAD(3) SG_LOAD(4) SG_LOAD(5) SG_LOAD(6) SG_LOAD(7)
#undef SG_LOAD
    for (int64_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16), av;
#define SG_ROW(r)                                                                                                    \
    av = _mm512_set1_ps(ap[r]);                                                                                      \
    c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);                                                                      \
    c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);
        SG_ROW(0) SG_ROW(1) SG_ROW(2) SG_ROW(3) SG_ROW(4) SG_ROW(5) SG_ROW(6) SG_ROW(7)
#undef SG_ROW
        ap += SG_MR;
        bp += ldbp;
    }
#define SG_STORE(r)                                                                                                  \
    _mm512_storeu_ps(c + r * ldc, c##r##0);                                                                          \
    _mm512_storeu_ps(c + r * ldc + 16, c##r##1);
    SG_STORE(0) SG_STORE(1) SG_STORE(2) SG_STORE(3) SG_STORE(4) SG_STORE(5) SG_STORE(6) SG_STORE(7)
#undef SG_STORE
}

/* vector ops of sgemm_impl.h's row kernel (edge strips) */
#define SG_VEC __m512
#define SG_LOADU _mm512_loadu_ps
#define SG_STOREU _mm512_storeu_ps
#define SG_ZERO _mm512_setzero_ps
#define SG_FMADD _mm512_fmadd_ps
#define SG_BCAST(p) _mm512_set1_ps(*(p))

#include "runtime/kernels/sgemm_impl.h"

const size_t sgemm_avx512_ws_floats = SG_WS_FLOATS;
const int sgemm_avx512_mr = SG_MR;

void sgemm_avx512(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, const float *apk, float *ws)
{
    SG_FN(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, apk, ws);
}

void sgemm_avx512_pack_a(int trans_a, int64_t m, int64_t k, const float *a, int64_t lda, float *dst)
{
    sg_pack_a(trans_a, a, lda, 0, m, 0, k, dst);
}

void sgemm_avx512_row(int trans_a, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                 int accumulate, float *c)
{
    sg_row(trans_a, n, k, a, lda, b, ldb, accumulate, c);
}

void sgemm_avx512_taps(int64_t m, int64_t n, int64_t k, int ntaps, const float *const *apk, const float *b, int64_t ldb,
                       const int64_t *boff, float *c, int64_t ldc, float *ws)
{
    SG_TAPS_FN(m, n, k, ntaps, apk, b, ldb, boff, c, ldc, ws);
}
