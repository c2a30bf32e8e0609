/* sgemm_isa.h: the SIMD paths of kern_sgemm (internal to runtime/kernels). Each takes a
 * 64-byte aligned workspace of its *_ws_floats floats; sgemm.c owns one per thread. */
#ifndef PTQ_KERN_SGEMM_ISA_H
#define PTQ_KERN_SGEMM_ISA_H

#include <stddef.h>
#include <stdint.h>

extern const size_t sgemm_avx2_ws_floats, sgemm_avx512_ws_floats;
void sgemm_avx2(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, float *ws);
void sgemm_avx512(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, float *ws);

#endif
