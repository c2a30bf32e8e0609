/* sgemm.h: ptq's own single-precision GEMM, the same bits on every x86-64 CPU.
 *
 *   // C[m x n] = (accumulate ? C : 0) + op(A) * op(B), row-major, leading dims in elements
 *   #pragma omp parallel num_threads(nt)
 *   #pragma omp for
 *   for (tile...) kern_sgemm(0, 0, m, n, k, a, lda, b, ldb, 1, c, ldc);
 *
 * The contract that makes results machine-independent: every output element is ONE chain
 * of fused multiply-adds in k order, acc = fma(op(A)[i][p], op(B)[p][j], acc) for p = 0,
 * 1, ..., k-1, started from +0.0f (accumulate = 0) or from C's value (accumulate = 1). No
 * partial sums, no reassociation: the chain does not depend on the ISA path, on where the
 * element lies in a register tile, on the blocking, on the call's m, n or k splits, nor on
 * the thread that runs it. Three paths compute that chain:
 *   - avx512: packed panels, an 8 x 32 register-blocked microkernel (AVX-512F);
 *   - avx2:   the same driver, a 6 x 16 microkernel (AVX2 + FMA);
 *   - generic: portable C, fmaf() per multiply-add (correctly rounded, so it equals the
 *     hardware FMA bit for bit; slow where the CPU has no FMA).
 * The best path the CPU has is chosen once from cpuid; PTQ_ISA=avx512|avx2|generic forces
 * one (kern_isa_check reports a bad or unavailable value). Calls are single-threaded and
 * re-entrant: the ops split their outputs into tiles and run tiles in parallel. Each
 * thread keeps its packing buffers (about 1.2 MB) for its lifetime. Zero-sized m or n do
 * nothing; k = 0 leaves C (accumulate) or zeroes it. All pointers are borrowed. */
#ifndef PTQ_KERN_SGEMM_H
#define PTQ_KERN_SGEMM_H

#include <stddef.h>
#include <stdint.h>

typedef enum { KERN_ISA_GENERIC = 0, KERN_ISA_AVX2, KERN_ISA_AVX512 } kern_isa;

/* The path in use (the best the CPU has, or PTQ_ISA's when that is valid and available). */
kern_isa kern_isa_current(void);
/* 1 when the CPU has F16C (float <-> half conversions), probed with the path. */
int kern_cpu_has_f16c(void);
/* "generic", "avx2" or "avx512". */
const char *kern_isa_name(kern_isa isa);
/* 0 when PTQ_ISA is unset or names a path this CPU runs; else -1 with a one-line reason in
 * msg (e.g. "PTQ_ISA=avx512: this CPU has no AVX-512F"). */
int kern_isa_check(char *msg, size_t cap);

/* C = (accumulate ? C : 0) + op(A) op(B); op(A) is m x k (A is k x m when trans_a), op(B)
 * k x n (B is n x k when trans_b). */
void kern_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc);

/* The same computed by one given path (tests compare the paths bit for bit); a path the
 * CPU lacks falls back to generic. */
void kern_sgemm_isa(kern_isa isa, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc);

/* A constant left operand (a conv's weights) packed once for the path in use, so that each
 * call skips packing it: the same bits as kern_sgemm on the unpacked matrix. */
typedef struct {
    kern_isa isa;
    int64_t m, k;
    float *data; /* owned: kern_sgemm_apack_free */
} kern_sgemm_apack;

/* Packs op(A) [m x k]; 0, or -1 when out of memory. */
int kern_sgemm_pack_a(int trans_a, int64_t m, int64_t k, const float *a, int64_t lda, kern_sgemm_apack *out);
void kern_sgemm_apack_free(kern_sgemm_apack *p);
/* C [p->m x n] = (accumulate ? C : 0) + A op(B) with A = the packed matrix. */
void kern_sgemm_packed(const kern_sgemm_apack *p, int trans_b, int64_t n, const float *b, int64_t ldb, int accumulate,
                       float *c, int64_t ldc);
/* The taps of a shifted convolution: C [m x n] = sum over t of A_t (b + boff[t]), the taps'
 * matrices packed alike (same path, m and k), B not transposed with pitch ldb. The same bits as
 * kern_sgemm_packed tap after tap (accumulate = t > 0); the SIMD paths run every tap per column
 * panel, so that C stays in L1 across the taps. */
#define KERN_TAPS_MAX 64 /* more taps: one call per tap */
void kern_sgemm_packed_taps(const kern_sgemm_apack *taps, int ntaps, const int64_t *boff, int64_t n, const float *b,
                            int64_t ldb, float *c, int64_t ldc);

/* Splits `count` independent m x n GEMMs with reduction k into tiles, from the shapes
 * alone (never the thread count): *tn columns, at most panel_floats / k of them (at least
 * 64), the n columns cut into equal tiles (a multiple of 16), their number a multiple of
 * KERN_MIN_TASKS for a single GEMM; when that leaves fewer than KERN_MIN_TASKS tiles and
 * split_m is set, *tm rows (a multiple of 16, else *tm = m). Tiles only share out the work:
 * results do not depend on them (see the contract above). */
#define KERN_MIN_TASKS 2
void kern_gemm_tiles(int64_t m, int64_t n, int64_t k, int64_t count, int split_m, int64_t panel_floats, int64_t *tm,
                     int64_t *tn);
/* Rows (or any unit) per part when `total` of them, at most max_per per part, are split
 * for `count` independent jobs by the same rule as the columns above (at least
 * KERN_MIN_TASKS parts in all, a multiple of it for a single job, parts of equal size). */
int64_t kern_split_rows(int64_t total, int64_t max_per, int64_t count);
/* ceil(a / b) for a >= 0, b >= 1. */
int64_t kern_ceil_div(int64_t a, int64_t b);

/* Scalar reference: sums in double, in k order (tests bound the FMA chain's error by it). */
void kern_sgemm_ref(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc);

#endif
