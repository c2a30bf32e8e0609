/* test_ops_gemm.c: Gemm and MatMul (runtime/ops/gemm.c) run directly, one node at a
 * time, against double-precision references computed here: random shapes,
 * transA/transB, alpha/beta, every broadcast form of C, opset rules, MatMul's 1-D
 * promotion and batch broadcasting (folded and per batch), tiles, fused activations,
 * bit-identical results at 1, 2 and 3 threads and in any batch, kern_sgemm's edge cases,
 * its ISA paths equal to the written-out FMA chain bit for bit, its results independent of
 * tiles and k splits, and error messages. Tolerance: |a-b| <= 1e-4 + 1e-4*|b|. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/kernels/sgemm.h"
#include "runtime/op.h"
#include "tests/unit/op_test.h"

#define ATOL 1e-4
#define RTOL 1e-4
#define B_CONST 6u /* op_node.const_mask: inputs 1 and 2 visible at infer */

/* ------------------------------------------------------------ helpers */

/* Runs one node (named mm3; opset o->opset, 0: 13) on ins (NULL = omitted) into *y
 * (allocated here; caller frees). Consumes o's attributes. */
static ptq_status run_op(const char *op, const ptq_tensor *const *ins, int n_in, ptq_tensor *y, op_node *o)
{
    o->name = "mm3";
    if (!o->opset) o->opset = 13;
    return op_run_ins(o, op, ins, n_in, y);
}

/* ------------------------------------------------------------ Gemm */

/* C shapes: 0 none, 1 scalar (rank 0), 2 [1], 3 [N], 4 [M,1], 5 [1,N], 6 [M,N], 7 [1,1] */
static int gemm_case(int64_t M, int64_t N, int64_t K, int ta, int tb, float alpha, float beta, int cform, int nthreads,
                     const ptq_activation *act)
{
    int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N}, cd[2] = {1, 1};
    int cr = 0;
    switch (cform) {
    case 2: cr = 1; break;
    case 3: cr = 1; cd[0] = N; break;
    case 4: cr = 2; cd[0] = M; break;
    case 5: cr = 2; cd[1] = N; break;
    case 6: cr = 2; cd[0] = M; cd[1] = N; break;
    case 7: cr = 2; break;
    default: break;
    }
    ptq_tensor a = tensor_rand(2, ad, -1, 1), b = tensor_rand(2, bd, -1, 1), c = tensor_rand(cr, cd, -1, 1);
    ptq_tensor y;
    op_node o;
    memset(&o, 0, sizeof o);
    o.nthreads = nthreads;
    o.const_mask = irand(0, 1) ? B_CONST : 0;
    if (act) o.act = *act;
    if (ta || irand(0, 1)) add_int(&o, "transA", ta);
    if (tb || irand(0, 1)) add_int(&o, "transB", tb);
    if (alpha != 1.0f) add_float(&o, "alpha", alpha);
    if (beta != 1.0f) add_float(&o, "beta", beta);
    const ptq_tensor *ins[3] = {&a, &b, &c};
    ptq_status st = run_op("Gemm", ins, cform ? 3 : 2, &y, &o);
    int bad = 0;
    if (st != PTQ_OK) {
        printf("    error: %s\n", ptq_last_error());
        bad = 1;
    } else if (y.rank != 2 || y.dims[0] != M || y.dims[1] != N) {
        bad = 1;
    } else {
        float *ref = malloc(sizeof(float) * (size_t)(M * N + 1));
        if (!ref) abort();
        const float *A = a.data, *B = b.data, *C = c.data;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)(ta ? A[k * M + i] : A[i * K + k]) * (double)(tb ? B[j * K + k] : B[k * N + j]);
                s *= (double)alpha;
                if (cform) {
                    int64_t ci = cd[0] == 1 || cr < 2 ? 0 : i, cj = cr == 1 ? (cd[0] == 1 ? 0 : j) : (cd[1] == 1 ? 0 : j);
                    s += (double)beta * (double)C[cr == 2 ? ci * cd[1] + cj : cj];
                }
                ref[i * N + j] = (float)s;
            }
        if (act) ptq_activation_apply(act, ref, (size_t)(M * N));
        bad = compare_f32(y.data, ref, (size_t)(M * N), ATOL, RTOL, "Gemm");
        free(ref);
    }
    if (bad)
        printf("    Gemm M %lld N %lld K %lld transA %d transB %d alpha %g beta %g C form %d threads %d\n", (long long)M,
               (long long)N, (long long)K, ta, tb, (double)alpha, (double)beta, cform, nthreads);
    ptq_tensor_free(&a);
    ptq_tensor_free(&b);
    ptq_tensor_free(&c);
    ptq_tensor_free(&y);
    return bad;
}

TEST(gemm_random)
{
    for (int it = 0; it < 200; it++) {
        int64_t M = irand(1, 20), N = irand(1, 20), K = irand(1, 20);
        float alpha = it % 3 ? 1.0f : frand(-1, 1) * 2.0f, beta = it % 4 ? 1.0f : (it % 8 ? 0.0f : frand(-1, 1) * 2.0f);
        EXPECT_EQ_INT(gemm_case(M, N, K, (int)irand(0, 1), (int)irand(0, 1), alpha, beta, it % 8, 1 + it % 3, NULL), 0);
    }
}

TEST(gemm_tiles_and_threads)
{
    /* large enough for several column and row tiles */
    EXPECT_EQ_INT(gemm_case(300, 900, 200, 0, 1, 0.5f, 2.0f, 3, 2, NULL), 0);
    EXPECT_EQ_INT(gemm_case(130, 70, 500, 1, 0, 1.0f, 1.0f, 6, 3, NULL), 0);
    EXPECT_EQ_INT(gemm_case(8, 1000, 1280, 0, 1, 1.0f, 1.0f, 5, 2, NULL), 0);
    ptq_activation relu;
    memset(&relu, 0, sizeof relu);
    relu.kind = PTQ_ACT_RELU;
    relu.has_post = 1;
    relu.post_mul = 3.0f;
    relu.post_add = 0.5f;
    EXPECT_EQ_INT(gemm_case(33, 65, 17, 1, 1, 1.0f, 1.0f, 3, 2, &relu), 0);
}

/* Gemm with the batch as M (a classifier head): each image's row is bit-identical to its row
 * computed alone, for batches 1..9, transA 0 and 1, with a bias C, at 1 and 2 threads. */
TEST(gemm_batch_size_invariant)
{
    enum { NMAX = 9 };
    int64_t K = 200, N = 300;
    int64_t xd[2] = {NMAX, K}, bd[2] = {N, K}, cd[1] = {N};
    ptq_tensor x = tensor_rand(2, xd, -1, 1), b = tensor_rand(2, bd, -1, 1), c = tensor_rand(1, cd, -1, 1);
    int bad = 0;
    for (int ta = 0; ta <= 1; ta++) {
        ptq_tensor alone[NMAX];
        for (int i = 0; i < NMAX; i++) { /* image i alone: a 1 x K row (or K x 1 column) */
            int64_t d1[2] = {ta ? K : 1, ta ? 1 : K};
            ptq_tensor a1 = tensor_new(PTQ_F32, 2, d1);
            memcpy(a1.data, (float *)x.data + i * K, sizeof(float) * (size_t)K);
            const ptq_tensor *p[3] = {&a1, &b, &c};
            op_node o;
            memset(&o, 0, sizeof o);
            o.nthreads = 1;
            add_int(&o, "transA", ta);
            add_int(&o, "transB", 1);
            EXPECT_EQ_INT(run_op("Gemm", p, 3, &alone[i], &o), PTQ_OK);
            ptq_tensor_free(&a1);
        }
        for (int nt = 1; nt <= 2; nt++)
            for (int n = 1; n <= NMAX; n++) {
                int64_t dn[2] = {ta ? K : n, ta ? n : K};
                ptq_tensor an = tensor_new(PTQ_F32, 2, dn), y;
                for (int i = 0; i < n; i++)
                    for (int64_t k = 0; k < K; k++)
                        ((float *)an.data)[ta ? k * n + i : i * K + k] = ((const float *)x.data)[i * K + k];
                const ptq_tensor *p[3] = {&an, &b, &c};
                op_node o;
                memset(&o, 0, sizeof o);
                o.nthreads = nt;
                add_int(&o, "transA", ta);
                add_int(&o, "transB", 1);
                EXPECT_EQ_INT(run_op("Gemm", p, 3, &y, &o), PTQ_OK);
                for (int i = 0; i < n; i++)
                    if (memcmp((const float *)y.data + i * N, alone[i].data, sizeof(float) * (size_t)N) != 0 && bad++ < 3)
                        printf("  transA %d, batch %d, threads %d: image %d differs from its row alone\n", ta, n, nt, i);
                ptq_tensor_free(&y);
                ptq_tensor_free(&an);
            }
        for (int i = 0; i < NMAX; i++) ptq_tensor_free(&alone[i]);
    }
    EXPECT_EQ_INT(bad, 0);
    ptq_tensor_free(&x);
    ptq_tensor_free(&b);
    ptq_tensor_free(&c);
}

TEST(gemm_opset_rules)
{
    int64_t ad[2] = {3, 4}, bd[2] = {4, 5};
    ptq_tensor a = tensor_rand(2, ad, -1, 1), b = tensor_rand(2, bd, -1, 1), y;
    const ptq_tensor *ins[2] = {&a, &b};
    op_node o;
    memset(&o, 0, sizeof o);
    o.opset = 9;
    EXPECT_EQ_INT(run_op("Gemm", ins, 2, &y, &o), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "required before opset 11") != NULL);
    EXPECT(strstr(ptq_last_error(), "mm3") != NULL);
    ptq_tensor_free(&y);
    o.opset = 11;
    EXPECT_EQ_INT(run_op("Gemm", ins, 2, &y, &o), PTQ_OK);
    ptq_tensor_free(&y);
    /* inner dims differ; C that does not broadcast; int input */
    int64_t bd2[2] = {5, 5}, cd[2] = {2, 5};
    ptq_tensor b2 = tensor_rand(2, bd2, -1, 1), c = tensor_rand(2, cd, -1, 1);
    const ptq_tensor *ins2[2] = {&a, &b2};
    memset(&o, 0, sizeof o);
    EXPECT_EQ_INT(run_op("Gemm", ins2, 2, &y, &o), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "inner dims") != NULL);
    ptq_tensor_free(&y);
    const ptq_tensor *ins3[3] = {&a, &b, &c};
    EXPECT_EQ_INT(run_op("Gemm", ins3, 3, &y, &o), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "does not broadcast") != NULL);
    ptq_tensor_free(&y);
    a.dtype = PTQ_F64;
    EXPECT_EQ_INT(run_op("Gemm", ins, 2, &y, &o), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "float64") != NULL);
    a.dtype = PTQ_F32;
    ptq_tensor_free(&y);
    ptq_tensor_free(&a);
    ptq_tensor_free(&b);
    ptq_tensor_free(&b2);
    ptq_tensor_free(&c);
}

/* ------------------------------------------------------------ MatMul */

/* numpy matmul of a (ra dims) and b (rb dims) in doubles; y has the expected shape. */
static int matmul_case(int ra, const int64_t *da, int rb, const int64_t *db, int nthreads, const ptq_activation *act)
{
    ptq_tensor a = tensor_rand(ra, da, -1, 1), b = tensor_rand(rb, db, -1, 1), y;
    op_node o;
    memset(&o, 0, sizeof o);
    o.nthreads = nthreads;
    o.const_mask = irand(0, 1) ? B_CONST : 0;
    if (act) o.act = *act;
    const ptq_tensor *ins[2] = {&a, &b};
    ptq_status st = run_op("MatMul", ins, 2, &y, &o);
    int bad = 0;
    /* promoted shapes */
    int64_t pa[PTQ_MAX_RANK + 1], pb[PTQ_MAX_RANK + 1];
    int rpa = ra < 2 ? 2 : ra, rpb = rb < 2 ? 2 : rb;
    if (ra == 1) {
        pa[0] = 1;
        pa[1] = da[0];
    } else
        for (int d = 0; d < ra; d++) pa[d] = da[d];
    if (rb == 1) {
        pb[0] = db[0];
        pb[1] = 1;
    } else
        for (int d = 0; d < rb; d++) pb[d] = db[d];
    int64_t M = pa[rpa - 2], K = pa[rpa - 1], N = pb[rpb - 1];
    int br = (rpa > rpb ? rpa : rpb) - 2;
    int64_t bdims[PTQ_MAX_RANK], nb = 1;
    for (int d = 0; d < br; d++) {
        int ia = d - (br - (rpa - 2)), ib = d - (br - (rpb - 2));
        int64_t x = ia >= 0 ? pa[ia] : 1, z = ib >= 0 ? pb[ib] : 1;
        bdims[d] = x == 1 ? z : x;
        nb *= bdims[d];
    }
    int64_t want[PTQ_MAX_RANK];
    int wr = 0;
    for (int d = 0; d < br; d++) want[wr++] = bdims[d];
    if (ra >= 2) want[wr++] = M;
    if (rb >= 2) want[wr++] = N;
    if (st != PTQ_OK) {
        printf("    error: %s\n", ptq_last_error());
        bad = 1;
    } else {
        int shape_ok = y.rank == wr;
        for (int d = 0; shape_ok && d < wr; d++) shape_ok = y.dims[d] == want[d];
        if (!shape_ok) {
            char buf[64];
            printf("    output shape %s\n", ptq_shape_str(&y, buf, sizeof buf));
            bad = 1;
        } else {
            float *ref = malloc(sizeof(float) * (size_t)(nb * M * N + 1));
            if (!ref) abort();
            const float *A = a.data, *B = b.data;
            for (int64_t bi = 0; bi < nb; bi++) {
                /* batch offsets with broadcasting */
                int64_t rem = bi, oa = 0, ob = 0, ma = 1, mb = 1;
                for (int d = br - 1; d >= 0; d--) {
                    int64_t idx = rem % bdims[d];
                    rem /= bdims[d];
                    int ia = d - (br - (rpa - 2)), ib = d - (br - (rpb - 2));
                    if (ia >= 0) {
                        oa += (pa[ia] == 1 ? 0 : idx) * ma;
                        ma *= pa[ia];
                    }
                    if (ib >= 0) {
                        ob += (pb[ib] == 1 ? 0 : idx) * mb;
                        mb *= pb[ib];
                    }
                }
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) {
                        double s = 0;
                        for (int64_t k = 0; k < K; k++)
                            s += (double)A[oa * M * K + i * K + k] * (double)B[ob * K * N + k * N + j];
                        ref[bi * M * N + i * N + j] = (float)s;
                    }
            }
            if (act) ptq_activation_apply(act, ref, (size_t)(nb * M * N));
            bad = compare_f32(y.data, ref, (size_t)(nb * M * N), ATOL, RTOL, "MatMul");
            free(ref);
        }
    }
    if (bad) {
        printf("    MatMul a");
        for (int d = 0; d < ra; d++) printf(" %lld", (long long)da[d]);
        printf(", b");
        for (int d = 0; d < rb; d++) printf(" %lld", (long long)db[d]);
        printf(", %d threads\n", nthreads);
    }
    ptq_tensor_free(&a);
    ptq_tensor_free(&b);
    ptq_tensor_free(&y);
    return bad;
}

TEST(matmul_shapes)
{
    struct {
        int ra;
        int64_t da[5];
        int rb;
        int64_t db[5];
    } cases[] = {
        {1, {4}, 1, {4}},                    /* dot product -> scalar */
        {1, {4}, 2, {4, 3}},                 /* vector x matrix */
        {2, {3, 4}, 1, {4}},                 /* matrix x vector */
        {1, {4}, 3, {2, 4, 3}},              /* vector x batch */
        {3, {2, 3, 4}, 1, {4}},              /* batch x vector */
        {2, {3, 4}, 2, {4, 5}},
        {3, {2, 3, 4}, 2, {4, 5}},           /* folded */
        {4, {2, 3, 5, 4}, 4, {1, 1, 4, 6}},  /* folded: B's batch dims are 1 */
        {2, {3, 4}, 3, {2, 4, 5}},           /* A broadcast over B's batch */
        {4, {2, 1, 3, 4}, 3, {5, 4, 6}},     /* both broadcast */
        {4, {1, 8, 40, 15}, 4, {1, 8, 15, 40}}, /* attention */
        {3, {1, 40, 120}, 2, {120, 6625}},   /* rec's classifier: column tiles */
        {2, {3, 0}, 2, {0, 5}},              /* K = 0: zeros */
        {3, {2, 0, 4}, 2, {4, 5}},           /* M = 0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int nt = 1; nt <= 3; nt += 2)
            EXPECT_EQ_INT(matmul_case(cases[i].ra, cases[i].da, cases[i].rb, cases[i].db, nt, NULL), 0);
}

TEST(matmul_random)
{
    ptq_activation act;
    memset(&act, 0, sizeof act);
    act.kind = PTQ_ACT_LEAKY_RELU;
    act.alpha = 0.1f;
    for (int it = 0; it < 100; it++) {
        int ra = (int)irand(1, 4), rb = (int)irand(1, 4);
        int64_t da[4], db[4], K = irand(1, 30);
        for (int d = 0; d < 4; d++) {
            da[d] = irand(1, 3) == 1 ? 1 : irand(1, 4);
            db[d] = da[d] == 1 || irand(0, 3) == 0 ? irand(1, 3) : da[d];
            if (db[d] != da[d] && da[d] != 1) db[d] = 1;
        }
        /* align batch dims right: make the trailing ones the matrix dims */
        da[ra - 1] = K;
        if (ra >= 2) da[ra - 2] = irand(1, 40);
        if (rb == 1) db[0] = K;
        else {
            db[rb - 2] = K;
            db[rb - 1] = irand(1, 40);
        }
        /* batch dims of a and b: right-aligned broadcast compatibility */
        int bra = ra - 2, brb = rb - 2;
        for (int i = 1; i <= bra && i <= brb; i++) {
            int64_t *x = &da[bra - i], *z = &db[brb - i];
            if (*x != *z && *x != 1 && *z != 1) *z = 1;
        }
        EXPECT_EQ_INT(matmul_case(ra, da, rb, db, 1 + it % 2, it % 5 == 0 ? &act : NULL), 0);
    }
}

TEST(matmul_threads_bit_identical)
{
    int64_t da[3] = {2, 200, 120}, db[2] = {120, 700}, dc[4] = {1, 8, 40, 15}, dd[4] = {1, 8, 15, 40};
    ptq_tensor a = tensor_rand(3, da, -1, 1), b = tensor_rand(2, db, -1, 1);
    ptq_tensor c = tensor_rand(4, dc, -1, 1), d = tensor_rand(4, dd, -1, 1);
    const ptq_tensor *p1[2] = {&a, &b}, *p2[2] = {&c, &d};
    for (int which = 0; which < 2; which++) {
        ptq_tensor y1, yn;
        op_node o;
        memset(&o, 0, sizeof o);
        o.nthreads = 1;
        EXPECT_EQ_INT(run_op("MatMul", which ? p2 : p1, 2, &y1, &o), PTQ_OK);
        for (int nt = 2; nt <= 3; nt++) {
            memset(&o, 0, sizeof o);
            o.nthreads = nt;
            EXPECT_EQ_INT(run_op("MatMul", which ? p2 : p1, 2, &yn, &o), PTQ_OK);
            EXPECT(same_bits(&y1, &yn));
            ptq_tensor_free(&yn);
        }
        ptq_tensor_free(&y1);
    }
    ptq_tensor_free(&a);
    ptq_tensor_free(&b);
    ptq_tensor_free(&c);
    ptq_tensor_free(&d);
}

/* An image's rows come out the same whatever the batch it runs in: A [n, 40, 120] and
 * A [n, 120] (a 2-D A whose rows are the batch) times a constant B, for n = 1..9, each
 * image's output bit-identical to its output alone, at 1 and 2 threads. */
TEST(matmul_batch_size_invariant)
{
    enum { NMAX = 9 };
    int64_t T = 40, K = 120, N = 360;
    for (int rank = 2; rank <= 3; rank++) {
        int64_t rows = rank == 3 ? T : 1;
        int64_t da[3] = {NMAX, T, K}, da2[2] = {NMAX, K}, db[2] = {K, N};
        ptq_tensor all = rank == 3 ? tensor_rand(3, da, -1, 1) : tensor_rand(2, da2, -1, 1);
        ptq_tensor b = tensor_rand(2, db, -1, 1), alone[NMAX];
        int bad = 0;
        for (int nt = 1; nt <= 2; nt++)
            for (int n = 1; n <= NMAX; n++) {
                ptq_tensor a = all, y;
                a.dims[0] = n;
                const ptq_tensor *p[2] = {&a, &b};
                op_node o;
                memset(&o, 0, sizeof o);
                o.nthreads = nt;
                EXPECT_EQ_INT(run_op("MatMul", p, 2, &y, &o), PTQ_OK);
                if (n == 1 && nt == 1) alone[0] = y; /* image 0 alone; the others below */
                for (int i = 0; i < n; i++) {
                    if (nt == 1 && i == n - 1 && n > 1) { /* image i alone, once */
                        ptq_tensor ai = all, yi;
                        ai.dims[0] = 1;
                        ai.data = (float *)all.data + (size_t)(i * rows * K);
                        const ptq_tensor *pi[2] = {&ai, &b};
                        memset(&o, 0, sizeof o);
                        o.nthreads = 1;
                        EXPECT_EQ_INT(run_op("MatMul", pi, 2, &yi, &o), PTQ_OK);
                        alone[i] = yi;
                    }
                    const float *got = (const float *)y.data + i * rows * N, *want = alone[i].data;
                    if (memcmp(got, want, sizeof(float) * (size_t)(rows * N)) != 0 && bad++ < 3)
                        printf("  rank %d, batch %d, threads %d: image %d differs from its output alone\n", rank, n, nt, i);
                }
                if (!(n == 1 && nt == 1)) ptq_tensor_free(&y);
            }
        EXPECT_EQ_INT(bad, 0);
        for (int i = 0; i < NMAX; i++) ptq_tensor_free(&alone[i]);
        ptq_tensor_free(&all);
        ptq_tensor_free(&b);
    }
}

TEST(matmul_errors)
{
    int64_t da[2] = {3, 4}, db[2] = {5, 6}, dc[3] = {2, 3, 4}, dd[3] = {3, 4, 5};
    ptq_tensor a = tensor_rand(2, da, -1, 1), b = tensor_rand(2, db, -1, 1);
    ptq_tensor c = tensor_rand(3, dc, -1, 1), d = tensor_rand(3, dd, -1, 1), s, y;
    memset(&s, 0, sizeof s);
    s = tensor_rand(0, da, -1, 1);
    op_node o;
    memset(&o, 0, sizeof o);
    const ptq_tensor *p1[2] = {&a, &b}, *p2[2] = {&c, &d}, *p3[2] = {&s, &a};
    EXPECT_EQ_INT(run_op("MatMul", p1, 2, &y, &o), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "MatMul 'mm3'") != NULL);
    ptq_tensor_free(&y);
    EXPECT_EQ_INT(run_op("MatMul", p2, 2, &y, &o), PTQ_ERR_SHAPE); /* batch 2 vs 3 */
    ptq_tensor_free(&y);
    EXPECT_EQ_INT(run_op("MatMul", p3, 2, &y, &o), PTQ_ERR_SHAPE); /* rank 0 */
    ptq_tensor_free(&y);
    b.dtype = PTQ_I64;
    EXPECT_EQ_INT(run_op("MatMul", p1, 2, &y, &o), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "int64") != NULL);
    b.dtype = PTQ_F32;
    ptq_tensor_free(&y);
    ptq_tensor_free(&a);
    ptq_tensor_free(&b);
    ptq_tensor_free(&c);
    ptq_tensor_free(&d);
    ptq_tensor_free(&s);
}

/* ------------------------------------------------------------ kern_sgemm */

TEST(sgemm_edges)
{
    /* k = 0: zeros without accumulate (even over NaN), C unchanged with it */
    float c[6] = {NAN, NAN, NAN, 1, 2, 3};
    kern_sgemm(0, 0, 2, 3, 0, NULL, 0, NULL, 3, 0, c, 3);
    for (int i = 0; i < 6; i++) EXPECT_EQ_INT(c[i] == 0.0f, 1);
    float d[2] = {1, 2};
    kern_sgemm(0, 0, 1, 2, 0, NULL, 0, NULL, 2, 1, d, 2);
    EXPECT_NEAR(d[1], 2.0, 0, 0);
    /* a 1x1 product with leading dims 0 */
    float x = 2.0f, z = 3.0f, r = NAN;
    kern_sgemm(0, 0, 1, 1, 1, &x, 0, &z, 0, 0, &r, 0);
    EXPECT_NEAR(r, 6.0, 0, 0);
    /* m or n = 0 touches nothing */
    kern_sgemm(0, 0, 0, 2, 1, &x, 1, &z, 2, 0, d, 2);
    EXPECT_NEAR(d[0], 1.0, 0, 0);
}

/* The chain of sgemm.h written out: one fmaf per multiply-add, in k order. */
static void chain_ref(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                      int64_t ldb, int acc, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = acc ? c[i * ldc + j] : 0.0f;
            for (int64_t p = 0; p < k; p++)
                s = fmaf(ta ? a[p * lda + i] : a[i * lda + p], tb ? b[j * ldb + p] : b[p * ldb + j], s);
            c[i * ldc + j] = s;
        }
}

/* Every path (avx512, avx2, generic: those the CPU has; the others fall back to generic)
 * gives the written-out FMA chain bit for bit, on shapes around the register tiles (6x16,
 * 8x32), one row (unpacked), the blocks (k 256, rows 96/128, columns 1024), both transposes, with and
 * without accumulation, leading dims wider than the rows; and stays within the double
 * reference's tolerance. */
TEST(sgemm_paths_equal_the_chain)
{
    static const int64_t shapes[][3] = {{1, 1, 1},     {5, 15, 3},    {6, 16, 7},     {7, 17, 255},  {8, 32, 256},
                                        {9, 33, 257},  {13, 47, 513}, {97, 130, 64},  {129, 31, 300}, {200, 1030, 33},
                                        {16, 2100, 9}, {3, 70, 1000}, {40, 6625 / 25, 120}, {1, 1030, 300},
                                        {1, 37, 9}};
    kern_isa paths[] = {KERN_ISA_GENERIC, KERN_ISA_AVX2, KERN_ISA_AVX512};
    printf("  best path on this CPU: %s\n", kern_isa_name(kern_isa_current()));
    int bad = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int form = 0; form < 8; form++) {
            int ta = form & 1, tb = (form >> 1) & 1, acc = (form >> 2) & 1;
            int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
            int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
            size_t na = (size_t)((ta ? k : m) * lda), nb = (size_t)((tb ? n : k) * ldb), nc = (size_t)(m * ldc);
            float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb), *c0 = malloc(sizeof(float) * nc);
            float *want = malloc(sizeof(float) * nc), *got = malloc(sizeof(float) * nc), *ref = malloc(sizeof(float) * nc);
            if (!a || !b || !c0 || !want || !got || !ref) abort();
            for (size_t i = 0; i < na; i++) a[i] = frand(-1, 1);
            for (size_t i = 0; i < nb; i++) b[i] = frand(-1, 1);
            for (size_t i = 0; i < nc; i++) c0[i] = frand(-2, 2);
            memcpy(want, c0, sizeof(float) * nc);
            chain_ref(ta, tb, m, n, k, a, lda, b, ldb, acc, want, ldc);
            memcpy(ref, c0, sizeof(float) * nc);
            kern_sgemm_ref(ta, tb, m, n, k, a, lda, b, ldb, acc, ref, ldc);
            if (compare_f32(want, ref, nc, ATOL * (double)k, RTOL, "chain vs double") != 0) bad++;
            for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
                memcpy(got, c0, sizeof(float) * nc);
                kern_sgemm_isa(paths[pi], ta, tb, m, n, k, a, lda, b, ldb, acc, got, ldc);
                if (memcmp(got, want, sizeof(float) * nc) != 0 && bad++ < 5)
                    printf("  %s: %lldx%lldx%lld transA %d transB %d accumulate %d differs from the chain\n",
                           kern_isa_name(paths[pi]), (long long)m, (long long)n, (long long)k, ta, tb, acc);
            }
            free(a);
            free(b);
            free(c0);
            free(want);
            free(got);
            free(ref);
        }
    EXPECT_EQ_INT(bad, 0);
}

/* Weights packed once (kern_sgemm_pack_a, as Conv does at plan time) give kern_sgemm's bits,
 * either transposed layout of A, with and without accumulation. */
TEST(sgemm_packed_a_equals_unpacked)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 33, 5}, {24, 160, 864}, {130, 70, 300}, {16, 1030, 9}};
    int bad = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int form = 0; form < 4; form++) {
            int ta = form & 1, acc = form >> 1;
            int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2], lda = ta ? m : k;
            float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
            float *want = malloc(sizeof(float) * (size_t)(m * n)), *got = malloc(sizeof(float) * (size_t)(m * n));
            if (!a || !b || !want || !got) abort();
            for (int64_t i = 0; i < m * k; i++) a[i] = frand(-1, 1);
            for (int64_t i = 0; i < k * n; i++) b[i] = frand(-1, 1);
            for (int64_t i = 0; i < m * n; i++) want[i] = got[i] = frand(-1, 1);
            kern_sgemm(ta, 0, m, n, k, a, lda, b, n, acc, want, n);
            kern_sgemm_apack pk;
            EXPECT_EQ_INT(kern_sgemm_pack_a(ta, m, k, a, lda, &pk), 0);
            kern_sgemm_packed(&pk, 0, n, b, n, acc, got, n);
            if (memcmp(got, want, sizeof(float) * (size_t)(m * n)) != 0 && bad++ < 3)
                printf("  %lldx%lldx%lld transA %d accumulate %d: packed differs\n", (long long)m, (long long)n,
                       (long long)k, ta, acc);
            kern_sgemm_apack_free(&pk);
            free(a);
            free(b);
            free(want);
            free(got);
        }
    EXPECT_EQ_INT(bad, 0);
}

/* Where an element lies does not matter: a block of rows and columns computed alone, and k
 * cut into two accumulating calls, give the bits of one whole call. */
TEST(sgemm_tiles_and_k_splits_invariant)
{
    int64_t m = 37, n = 301, k = 530;
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *whole = malloc(sizeof(float) * (size_t)(m * n)), *part = malloc(sizeof(float) * (size_t)(m * n));
    if (!a || !b || !whole || !part) abort();
    for (int64_t i = 0; i < m * k; i++) a[i] = frand(-1, 1);
    for (int64_t i = 0; i < k * n; i++) b[i] = frand(-1, 1);
    kern_sgemm(0, 0, m, n, k, a, k, b, n, 0, whole, n);
    int bad = 0;
    static const int64_t cuts[][2] = {{1, 1}, {5, 17}, {13, 100}, {30, 290}};
    for (size_t ci = 0; ci < sizeof cuts / sizeof cuts[0]; ci++) {
        int64_t i0 = cuts[ci][0], j0 = cuts[ci][1];
        memset(part, 0, sizeof(float) * (size_t)(m * n));
        /* four blocks, each its own call */
        kern_sgemm(0, 0, i0, j0, k, a, k, b, n, 0, part, n);
        kern_sgemm(0, 0, i0, n - j0, k, a, k, b + j0, n, 0, part + j0, n);
        kern_sgemm(0, 0, m - i0, j0, k, a + i0 * k, k, b, n, 0, part + i0 * n, n);
        kern_sgemm(0, 0, m - i0, n - j0, k, a + i0 * k, k, b + j0, n, 0, part + i0 * n + j0, n);
        if (memcmp(part, whole, sizeof(float) * (size_t)(m * n)) != 0) bad++;
        /* k in two parts: the second continues the first's chains */
        int64_t k0 = 7 + (int64_t)ci * 101;
        kern_sgemm(0, 0, m, n, k0, a, k, b, n, 0, part, n);
        kern_sgemm(0, 0, m, n, k - k0, a + k0, k, b + k0 * n, n, 1, part, n);
        if (memcmp(part, whole, sizeof(float) * (size_t)(m * n)) != 0) bad++;
    }
    EXPECT_EQ_INT(bad, 0);
    free(a);
    free(b);
    free(whole);
    free(part);
}

int main(void)
{
    op_test_seed(777u);
    RUN(gemm_random);
    RUN(gemm_tiles_and_threads);
    RUN(gemm_batch_size_invariant);
    RUN(gemm_opset_rules);
    RUN(matmul_shapes);
    RUN(matmul_random);
    RUN(matmul_threads_bit_identical);
    RUN(matmul_batch_size_invariant);
    RUN(matmul_errors);
    RUN(sgemm_edges);
    RUN(sgemm_paths_equal_the_chain);
    RUN(sgemm_tiles_and_k_splits_invariant);
    RUN(sgemm_packed_a_equals_unpacked);
    return test_summary();
}
