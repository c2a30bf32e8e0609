/* test_ops_gemm.c: Gemm and MatMul (runtime/ops/gemm.c) run directly, one node at a
 * time, against double-precision references computed here: random shapes,
 * transA/transB, alpha/beta, every broadcast form of C, opset rules, MatMul's 1-D
 * promotion and batch broadcasting (folded and per batch), tiles, fused activations,
 * bit-identical results at 1, 2 and 3 threads, OpenBLAS's own threading
 * (kern_sgemm_threaded) equal to single-threaded calls, kern_sgemm's edge cases, and
 * error messages. Tolerance: |a-b| <= 1e-4 + 1e-4*|b|. */
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

TEST(sgemm_edges_and_openblas_threads)
{
    /* k = 0: beta * C, or zeros with beta = 0 even over NaN */
    float c[6] = {NAN, NAN, NAN, 1, 2, 3};
    kern_sgemm(0, 0, 2, 3, 0, 1.0f, NULL, 0, NULL, 3, 0.0f, c, 3);
    for (int i = 0; i < 6; i++) EXPECT_EQ_INT(c[i] == 0.0f, 1);
    float d[2] = {1, 2};
    kern_sgemm(0, 0, 1, 2, 0, 1.0f, NULL, 0, NULL, 2, 3.0f, d, 2);
    EXPECT_NEAR(d[1], 6.0, 0, 0);
    /* a 1x1 product with lda = 0 (OpenBLAS would reject it) */
    float x = 2.0f, z = 3.0f, r = 0.0f;
    kern_sgemm(0, 0, 1, 1, 1, 1.0f, &x, 0, &z, 0, 0.0f, &r, 0);
    EXPECT_NEAR(r, 6.0, 0, 0);
    /* OpenBLAS threading over M and N gives the single-threaded bits */
    int64_t M = 301, N = 517, K = 263;
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
    float *C1 = malloc(sizeof(float) * (size_t)(M * N)), *C2 = malloc(sizeof(float) * (size_t)(M * N));
    float *R = malloc(sizeof(float) * (size_t)(M * N));
    if (!A || !B || !C1 || !C2 || !R) abort();
    for (int64_t i = 0; i < M * K; i++) A[i] = frand(-1, 1);
    for (int64_t i = 0; i < K * N; i++) B[i] = frand(-1, 1);
    kern_sgemm_threaded(1, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
    kern_sgemm_threaded(2, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C2, N);
    EXPECT(memcmp(C1, C2, sizeof(float) * (size_t)(M * N)) == 0);
#pragma omp parallel num_threads(2)
    {
        kern_blas_serial();
#pragma omp single
        kern_sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C2, N);
    }
    EXPECT(memcmp(C1, C2, sizeof(float) * (size_t)(M * N)) == 0);
    kern_sgemm_ref(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, R, N);
    EXPECT_EQ_INT(compare_f32(C1, R, (size_t)(M * N), ATOL, RTOL, "sgemm"), 0);
    free(A);
    free(B);
    free(C1);
    free(C2);
    free(R);
    /* larger than OpenBLAS's M and N blocks, with beta = 1 over a prefilled C and
     * transposed operands, at 1, 2 and 3 threads. K stays <= 512: beyond it OpenBLAS
     * 0.3.21's threaded driver cuts K into other passes than the serial one and the bits
     * differ (K = 600, 700, 769, 913, 1200 measured here), which is why ptq's ops never
     * let OpenBLAS thread a call. */
    struct {
        int64_t m, n, k;
        int ta, tb;
    } big[] = {{517, 1301, 512, 0, 0}, {480, 480, 480, 0, 0}, {96, 25600, 24, 1, 0}, {40, 6625, 120, 0, 1}};
    for (size_t bc = 0; bc < sizeof big / sizeof big[0]; bc++) {
        int64_t m = big[bc].m, n = big[bc].n, k = big[bc].k;
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
        float *c1 = malloc(sizeof(float) * (size_t)(m * n)), *cn = malloc(sizeof(float) * (size_t)(m * n));
        if (!a || !b || !c1 || !cn) abort();
        for (int64_t i = 0; i < m * k; i++) a[i] = frand(-1, 1);
        for (int64_t i = 0; i < k * n; i++) b[i] = frand(-1, 1);
        int64_t lda = big[bc].ta ? m : k, ldb = big[bc].tb ? k : n;
        for (int nt = 1; nt <= 3; nt++) {
            float *dst = nt == 1 ? c1 : cn;
            for (int64_t i = 0; i < m * n; i++) dst[i] = 0.25f;
            kern_sgemm_threaded(nt, big[bc].ta, big[bc].tb, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, dst, n);
            if (nt > 1) {
                int same = memcmp(c1, cn, sizeof(float) * (size_t)(m * n)) == 0;
                if (!same) printf("    %lldx%lldx%lld: %d OpenBLAS threads differ from 1\n", (long long)m, (long long)n, (long long)k, nt);
                EXPECT(same);
            }
        }
        free(a);
        free(b);
        free(c1);
        free(cn);
    }
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
    RUN(sgemm_edges_and_openblas_threads);
    return test_summary();
}
