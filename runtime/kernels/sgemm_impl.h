/* sgemm_impl.h: the blocked GEMM driver shared by the SIMD paths (included by
 * sgemm_avx2.c and sgemm_avx512.c, each compiled for its ISA).
 *
 * The includer defines SG_MR x SG_NR (the register tile), SG_FN (the driver's name) and
 * sg_micro(kc, ap, bp, ldbp, c, ldc, load): the full tile C[SG_MR x SG_NR] (pitch ldc) from
 * packed A (kc steps of SG_MR values) and B (kc rows of SG_NR values, ldbp apart: SG_NR when
 * packed), each element's accumulator started from C (load) or +0.0f and updated by one
 * FMA per step, in order.
 *
 * Blocking (BLIS's loop order): columns in blocks of SG_NC, k in blocks of SG_KC, rows in
 * blocks of SG_MC. B's block is packed into SG_NR-wide panels (zero-padded), A's into
 * SG_MR-high strips; for each B panel (kept in L1) the A strips stream from L2. With one
 * row block of at most SG_DIRECT_ROWS rows, full panels of a row-major B are read in place
 * (so few strips reuse a panel that packing it costs more than it saves) unless the panel's
 * rows alias in L1 (sg_direct_fits). Between k
 * blocks an element's accumulator goes through C unchanged (a float store and load), so
 * the chain is the same FMA sequence whatever the blocking. Edge tiles run the same
 * microkernel on a padded copy of the tile, or, when only rows are missing and the includer
 * defines SG_VEC (its vector type and ops), sg_micro_rows straight into C. SG_TAPS_FN (the includer names it too) runs the
 * taps of a shifted convolution in one call. */
#include <stdint.h>
#include <string.h>

#define SG_KC 256
#define SG_MC (SG_MR * 16)
#define SG_NC 1024
#define SG_DIRECT_ROWS SG_MC
/* floats of packing workspace the driver needs: A block, then B block */
#define SG_WS_FLOATS ((size_t)SG_MC * SG_KC + (size_t)SG_KC * SG_NC)

/* A[i0 .. i0+mc) x [p0 .. p0+kc) -> strips of SG_MR rows: ap[strip][p][r], zero rows past mc. */
static void sg_pack_a(int trans_a, const float *a, int64_t lda, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                      float *ap)
{
    for (int64_t is = 0; is < mc; is += SG_MR) {
        int64_t mr = mc - is < SG_MR ? mc - is : SG_MR;
        float *d = ap + is * kc;
        if (!trans_a) {
            for (int64_t r = 0; r < mr; r++) {
                const float *src = a + (i0 + is + r) * lda + p0;
                for (int64_t p = 0; p < kc; p++) d[p * SG_MR + r] = src[p];
            }
        } else {
            for (int64_t p = 0; p < kc; p++) {
                const float *src = a + (p0 + p) * lda + i0 + is;
                for (int64_t r = 0; r < mr; r++) d[p * SG_MR + r] = src[r];
            }
        }
        for (int64_t r = mr; r < SG_MR; r++)
            for (int64_t p = 0; p < kc; p++) d[p * SG_MR + r] = 0.0f;
    }
}

/* B[p0 .. p0+kc) x [j0 .. j0+nc) -> panels of SG_NR columns: bp[panel][p][j], zero columns past nc. */
static void sg_pack_b(int trans_b, const float *b, int64_t ldb, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                      float *bp)
{
    for (int64_t js = 0; js < nc; js += SG_NR) {
        int64_t nr = nc - js < SG_NR ? nc - js : SG_NR;
        float *d = bp + js * kc;
        if (!trans_b) {
            for (int64_t p = 0; p < kc; p++) {
                const float *src = b + (p0 + p) * ldb + j0 + js;
                float *dp = d + p * SG_NR;
                if (nr == SG_NR) {
                    memcpy(dp, src, sizeof(float) * SG_NR);
                } else {
                    memcpy(dp, src, sizeof(float) * (size_t)nr);
                    memset(dp + nr, 0, sizeof(float) * (size_t)(SG_NR - nr));
                }
            }
        } else {
            for (int64_t j = 0; j < nr; j++) {
                const float *src = b + (j0 + js + j) * ldb + p0;
                for (int64_t p = 0; p < kc; p++) d[p * SG_NR + j] = src[p];
            }
            for (int64_t j = nr; j < SG_NR; j++)
                for (int64_t p = 0; p < kc; p++) d[p * SG_NR + j] = 0.0f;
        }
    }
}

/* Whether kc rows of a B panel read in place, ldb floats apart, stay in L1: the rows fall in
 * 4096 / gcd(row stride in bytes, 4096) of the 64 sets (row starts 4 KiB apart all share one
 * set), 8 ways each at the least, with room for A's strip. A pointwise conv over a 160 x 160 or
 * 320 x 320 plane has rows 25 or 100 pages apart: every row in the same set, so the panel is
 * packed there (the packed panel is contiguous). */
static int sg_direct_fits(int64_t ldb, int64_t kc)
{
    int64_t a = ldb * (int64_t)sizeof(float), b = 4096;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    int64_t sets = 4096 / (a > 0 ? a : 4096);
    if (sets > 64) sets = 64;
    return sets * 8 >= 2 * kc;
}

#ifdef SG_VEC
/* The first R < SG_MR rows of the tile, straight into C (an edge strip of m % SG_MR rows):
 * the same accumulators and FMA order as sg_micro's rows, 2 R registers of the includer's
 * vector type SG_VEC (SG_NR / 2 floats) and its SG_LOADU, SG_STOREU, SG_ZERO, SG_FMADD, SG_BCAST. */
static inline __attribute__((always_inline)) void sg_rows(int64_t kc, const float *ap, const float *bp, int64_t ldbp,
                                                          float *c, int64_t ldc, int load, const int R)
{
    SG_VEC x0[SG_MR], x1[SG_MR];
    for (int r = 0; r < R; r++) {
        x0[r] = load ? SG_LOADU(c + r * ldc) : SG_ZERO();
        x1[r] = load ? SG_LOADU(c + r * ldc + SG_NR / 2) : SG_ZERO();
    }
    for (int64_t p = 0; p < kc; p++) {
        SG_VEC b0 = SG_LOADU(bp), b1 = SG_LOADU(bp + SG_NR / 2);
        for (int r = 0; r < R; r++) {
            SG_VEC av = SG_BCAST(ap + r);
            x0[r] = SG_FMADD(av, b0, x0[r]);
            x1[r] = SG_FMADD(av, b1, x1[r]);
        }
        ap += SG_MR;
        bp += ldbp;
    }
    for (int r = 0; r < R; r++) {
        SG_STOREU(c + r * ldc, x0[r]);
        SG_STOREU(c + r * ldc + SG_NR / 2, x1[r]);
    }
}

static void sg_micro_rows(int64_t kc, const float *ap, const float *bp, int64_t ldbp, float *c, int64_t ldc, int load,
                          int64_t mr)
{
    switch (mr) { /* constant R: unrolled, in registers */
    case 1: sg_rows(kc, ap, bp, ldbp, c, ldc, load, 1); break;
    case 2: sg_rows(kc, ap, bp, ldbp, c, ldc, load, 2); break;
    case 3: sg_rows(kc, ap, bp, ldbp, c, ldc, load, 3); break;
    case 4: sg_rows(kc, ap, bp, ldbp, c, ldc, load, 4); break;
    case 5: sg_rows(kc, ap, bp, ldbp, c, ldc, load, 5); break;
#if SG_MR > 6
    case 6: sg_rows(kc, ap, bp, ldbp, c, ldc, load, 6); break;
#endif
#if SG_MR > 7
    case 7: sg_rows(kc, ap, bp, ldbp, c, ldc, load, 7); break;
#endif
    default: break;
    }
}
#endif

/* A partial tile (mr < SG_MR or nr < SG_NR): the row kernel where only rows are missing (SG_VEC
 * given), else the microkernel on a padded copy. */
static void sg_edge(int64_t kc, const float *ap, const float *bp, int64_t ldbp, float *c, int64_t ldc, int load,
                    int64_t mr, int64_t nr)
{
#ifdef SG_VEC
    if (nr == SG_NR) { /* full width, fewer rows: the includer's row kernel, no copy */
        sg_micro_rows(kc, ap, bp, ldbp, c, ldc, load, mr);
        return;
    }
#endif
    _Alignas(64) float t[SG_MR * SG_NR];
    memset(t, 0, sizeof t);
    if (load)
        for (int64_t i = 0; i < mr; i++) memcpy(t + i * SG_NR, c + i * ldc, sizeof(float) * (size_t)nr);
    sg_micro(kc, ap, bp, ldbp, t, SG_NR, load);
    for (int64_t i = 0; i < mr; i++) memcpy(c + i * ldc, t + i * SG_NR, sizeof(float) * (size_t)nr);
}

/* One row of C (m = 1, B not transposed): c[j] = fma(op(A)[p], B[p][j], c[j]) for p in
 * order, the chain of sgemm.h, vectorised over j by the compiler (this file is built for
 * the path's ISA, so fmaf is the instruction). Without packing, nothing is padded to the
 * register tile: a depthwise layer's one-channel groups and a batch-1 classifier head. */
static void sg_row(int trans_a, int64_t n, int64_t k, const float *a, int64_t lda, const float *restrict b,
                   int64_t ldb, int accumulate, float *restrict c)
{
    if (!accumulate)
        for (int64_t j = 0; j < n; j++) c[j] = 0.0f;
    for (int64_t p = 0; p < k; p++) {
        const float av = trans_a ? a[p * lda] : a[p], *bp = b + p * ldb;
        for (int64_t j = 0; j < n; j++) c[j] = fmaf(av, bp[j], c[j]);
    }
}

/* The taps of a shifted convolution: C [m x n] = sum over t in [0, ntaps) of A_t B_t, each A_t
 * [m x k] packed whole (apk[t], as sg_pack_a with p0 = 0 and kc = k), B_t = b + boff[t] (row
 * pitch ldb, not transposed). Each element's chain runs tap after tap, p in order within a tap,
 * from +0.0f: the chain of calling SG_FN per tap with accumulate = (t > 0). Column panel by
 * panel: for one panel every tap, and for each tap every strip of rows, so that the panel of C
 * (m x SG_NR) stays in L1 across the taps and a tap's B panel across the strips. A partial
 * panel (and, with more than SG_DIRECT_ROWS rows, every panel) is packed into ws, which holds
 * at least k * SG_NR floats. */
static void SG_TAPS_FN(int64_t m, int64_t n, int64_t k, int ntaps, const float *const *apk, const float *b,
                       int64_t ldb, const int64_t *boff, float *c, int64_t ldc, float *ws)
{
    for (int64_t jr = 0; jr < n; jr += SG_NR) {
        int64_t nr = n - jr < SG_NR ? n - jr : SG_NR;
        for (int t = 0; t < ntaps; t++) {
            const float *bq = b + boff[t] + jr;
            int64_t ldbq = ldb;
            if (nr < SG_NR || m > SG_DIRECT_ROWS || (m > SG_MR && !sg_direct_fits(ldb, k))) {
                sg_pack_b(0, b + boff[t], ldb, 0, k, jr, nr, ws);
                bq = ws;
                ldbq = SG_NR;
            }
            for (int64_t ir = 0; ir < m; ir += SG_MR) {
                int64_t mr = m - ir < SG_MR ? m - ir : SG_MR;
                float *cc = c + ir * ldc + jr;
                if (mr == SG_MR && nr == SG_NR)
                    sg_micro(k, apk[t] + ir * k, bq, ldbq, cc, ldc, t > 0);
                else
                    sg_edge(k, apk[t] + ir * k, bq, ldbq, cc, ldc, t > 0, mr, nr);
            }
        }
    }
}

/* C = (accumulate ? C : 0) + op(A) op(B) with ws of SG_WS_FLOATS floats, 64-byte aligned.
 * apk: A already packed whole (strips of SG_MR rows over all k, as sg_pack_a with p0 = 0 and
 * kc = k lays them out), or NULL to pack A's blocks here. */
static void SG_FN(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, const float *apk, float *ws)
{
    float *ap = ws, *bp = ws + (size_t)SG_MC * SG_KC;
    for (int64_t jc = 0; jc < n; jc += SG_NC) {
        int64_t nc = n - jc < SG_NC ? n - jc : SG_NC;
        for (int64_t pc = 0; pc < k; pc += SG_KC) {
            int64_t kc = k - pc < SG_KC ? k - pc : SG_KC;
            int load = accumulate || pc > 0;
            /* the strip of A's rows [i, i + SG_MR) for this k block (i a multiple of SG_MR;
             * i0: the first row of the block packed in ap) */
#define SG_STRIP(i, i0) (apk ? apk + (i) * k + pc * SG_MR : ap + ((i) - (i0)) * kc)
            if (m <= SG_MC) { /* one row block: each B panel packed just before its use, in L1 */
                if (!apk) sg_pack_a(trans_a, a, lda, 0, m, pc, kc, ap);
                for (int64_t jr = 0; jr < nc; jr += SG_NR) {
                    int64_t nr = nc - jr < SG_NR ? nc - jr : SG_NR;
                    const float *bq = bp;
                    int64_t ldbq = SG_NR;
                    if (!trans_b && nr == SG_NR && m <= SG_DIRECT_ROWS && (m <= SG_MR || sg_direct_fits(ldb, kc))) {
                        bq = b + pc * ldb + jc + jr;
                        ldbq = ldb;
                    } else {
                        sg_pack_b(trans_b, b, ldb, pc, kc, jc + jr, nr, bp);
                    }
                    for (int64_t ir = 0; ir < m; ir += SG_MR) {
                        int64_t mr = m - ir < SG_MR ? m - ir : SG_MR;
                        float *cc = c + ir * ldc + jc + jr;
                        if (mr == SG_MR && nr == SG_NR)
                            sg_micro(kc, SG_STRIP(ir, 0), bq, ldbq, cc, ldc, load);
                        else
                            sg_edge(kc, SG_STRIP(ir, 0), bq, ldbq, cc, ldc, load, mr, nr);
                    }
                }
                continue;
            }
            sg_pack_b(trans_b, b, ldb, pc, kc, jc, nc, bp);
            for (int64_t ic = 0; ic < m; ic += SG_MC) {
                int64_t mc = m - ic < SG_MC ? m - ic : SG_MC;
                if (!apk) sg_pack_a(trans_a, a, lda, ic, mc, pc, kc, ap);
                for (int64_t jr = 0; jr < nc; jr += SG_NR) {
                    int64_t nr = nc - jr < SG_NR ? nc - jr : SG_NR;
                    for (int64_t ir = 0; ir < mc; ir += SG_MR) {
                        int64_t mr = mc - ir < SG_MR ? mc - ir : SG_MR;
                        float *cc = c + (ic + ir) * ldc + jc + jr;
                        if (mr == SG_MR && nr == SG_NR)
                            sg_micro(kc, SG_STRIP(ic + ir, ic), bp + jr * kc, SG_NR, cc, ldc, load);
                        else
                            sg_edge(kc, SG_STRIP(ic + ir, ic), bp + jr * kc, SG_NR, cc, ldc, load, mr, nr);
                    }
                }
            }
#undef SG_STRIP
        }
    }
}
