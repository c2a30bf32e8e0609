/* sgemm_isa.h: the SIMD paths of kern_sgemm (internal to runtime/kernels). Each takes a
 * 64-byte aligned workspace of its *_ws_floats floats; sgemm.c owns one per thread. */
#ifndef PTQ_KERN_SGEMM_ISA_H
#define PTQ_KERN_SGEMM_ISA_H

#include <stddef.h>
#include <stdint.h>

extern const size_t sgemm_avx2_ws_floats, sgemm_avx512_ws_floats;
extern const int sgemm_avx2_mr, sgemm_avx512_mr; /* rows per packed strip of A */
/* apk: A packed by the path's *_pack_a (then a and lda are unused), or NULL */
void sgemm_avx2(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, const float *apk, float *ws);
void sgemm_avx512(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, const float *apk, float *ws);
/* op(A) [m x k] into strips of the path's mr rows over all k (zero rows past m): dst holds
 * ceil(m / mr) * mr * k floats. */
void sgemm_avx2_pack_a(int trans_a, int64_t m, int64_t k, const float *a, int64_t lda, float *dst);
void sgemm_avx512_pack_a(int trans_a, int64_t m, int64_t k, const float *a, int64_t lda, float *dst);
/* One row of C (m = 1) with B not transposed, unpacked: the same chain. */
void sgemm_avx2_row(int trans_a, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                    int accumulate, float *c);
void sgemm_avx512_row(int trans_a, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                      int accumulate, float *c);
/* The taps of a shifted convolution (kern_sgemm_packed_taps); ws holds at least k * the
 * path's register tile width floats (k <= *_ws_floats / 32 does on both). */
void sgemm_avx2_taps(int64_t m, int64_t n, int64_t k, int ntaps, const float *const *apk, const float *b, int64_t ldb,
                     const int64_t *boff, float *c, int64_t ldc, float *ws);
void sgemm_avx512_taps(int64_t m, int64_t n, int64_t k, int ntaps, const float *const *apk, const float *b,
                       int64_t ldb, const int64_t *boff, float *c, int64_t ldc, float *ws);

#endif
