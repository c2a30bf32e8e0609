/* sgemm.h: row-major float32 GEMM through OpenBLAS, and its scalar reference.
 *
 *   // C[m x n] = alpha * op(A) * op(B) + beta * C, row-major, leading dims in elements
 *   if (!kern_sgemm_fits(m, n, k, lda, ldb, ldc)) -> refuse in infer (dims beyond int)
 *   #pragma omp parallel num_threads(nt)
 *   {
 *       kern_blas_serial();          // this thread's OpenBLAS calls stay on this thread
 *       #pragma omp for
 *       for (tile...) kern_sgemm(0, 0, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
 *   }
 *
 * ptq's weighted ops split their work into tiles fixed by the shapes alone and run one
 * single-threaded sgemm per tile, so the results never depend on the thread count.
 * kern_sgemm_threaded() lets OpenBLAS thread one call over nthreads instead; it is NOT
 * bit-identical to a serial call in general: OpenBLAS 0.3.21's threaded driver splits
 * M and N but also cuts K into other passes than the serial driver once K > 512
 * (measured; test_ops_gemm checks K <= 512 only), so the ops do not use it. Its speed
 * on PP-OCRv4 was no better than the tiles (det equal, rec 3% faster, cls 25% slower).
 * Zero-sized m, n or k are handled here (k = 0 gives beta * C, or zeros when beta = 0);
 * beta = 0 never reads C. All pointers are borrowed for the duration of the call. */
#ifndef PTQ_KERN_SGEMM_H
#define PTQ_KERN_SGEMM_H

#include <stdint.h>

/* 1 when the dims and leading dims fit OpenBLAS's 32-bit int interface. */
int kern_sgemm_fits(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc);

/* Makes OpenBLAS run single-threaded for the calling OpenMP implicit task (call it at
 * the top of a parallel region; it changes nothing outside the region). */
void kern_blas_serial(void);

/* C = alpha * op(A) * op(B) + beta * C; op(A) is m x k (A is k x m when trans_a), op(B) k x n. */
void kern_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* The same with OpenBLAS threaded over nthreads; must be called outside a parallel region. */
void kern_sgemm_threaded(int nthreads, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* Splits `count` independent m x n GEMMs with reduction k into tiles, from the shapes
 * alone (never the thread count, so results do not depend on it): *tn columns, at most
 * panel_floats / k of them (at least 64), the n columns cut into equal tiles (a multiple
 * of 16), their number a multiple of KERN_MIN_TASKS for a single GEMM; when that leaves
 * fewer than KERN_MIN_TASKS tiles and split_m is set, *tm rows (a multiple of 16, else
 * *tm = m). KERN_MIN_TASKS is sized for the 2-core target: on PP-OCRv4 rec's pointwise
 * convs two large tiles beat eight smaller ones by 15-20% (fewer re-packed panels). */
#define KERN_MIN_TASKS 2
void kern_gemm_tiles(int64_t m, int64_t n, int64_t k, int64_t count, int split_m, int64_t panel_floats, int64_t *tm,
                     int64_t *tn);
/* Rows (or any unit) per part when `total` of them, at most max_per per part, are split
 * for `count` independent jobs by the same rule as the columns above (at least
 * KERN_MIN_TASKS parts in all, a multiple of it for a single job, parts of equal size). */
int64_t kern_split_rows(int64_t total, int64_t max_per, int64_t count);
/* ceil(a / b) for a >= 0, b >= 1. */
int64_t kern_ceil_div(int64_t a, int64_t b);

/* Scalar reference: sums in double, in k order. */
void kern_sgemm_ref(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#endif
