/* test_ops_pool.c: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (runtime/ops/pool.c)
 * run directly, one node at a time: random grids of 1-D/2-D/3-D geometries (kernel,
 * strides, dilations, asymmetric pads, auto_pad, ceil_mode, count_include_pad) against a
 * naive reference written here (same tap order, so Y is compared bit for bit), Indices
 * with both storage orders, the vector kernel against the Indices (reference) path,
 * identical results at 1 and 3 threads, the ONNX examples, NaN/-inf handling and the
 * error messages. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/op.h"
#include "tests/unit/op_test.h"

/* ------------------------------------------------------------ harness */

/* Runs one node (named pool0, opset 19): x (its data hidden at infer) -> outs[0..n_out)
 * (allocated here, garbage-filled before the run so every element must be written; outs[1],
 * the Indices, only when want_out[1]). Consumes the attributes added to *attrs. */
static ptq_status run_node(const char *op, const ptq_tensor *x, op_node *attrs, int n_out, const int *want_out,
                           ptq_tensor *outs, int nthreads)
{
    attrs->name = "pool0";
    attrs->opset = 19;
    attrs->n_out = n_out;
    attrs->want[1] = n_out > 1 && want_out[1];
    attrs->nthreads = nthreads;
    return op_run_ins(attrs, op, &x, 1, outs);
}

/* ------------------------------------------------------------ pooling cases and the reference */

typedef struct {
    int is_max, nsp;
    int64_t n, c, in[3], k[3], s[3], d[3], pb[3], pe[3];
    int ceil_mode, count_include_pad, storage_order;
    const char *auto_pad; /* NULL: attribute absent */
    int explicit_defaults;  /* write strides/dilations even when all 1 */
} pool_case;

static void case_print(const pool_case *c)
{
    printf("    %s nsp %d n %lld c %lld ceil %d cip %d order %d auto_pad %s:", c->is_max ? "MaxPool" : "AveragePool",
           c->nsp, (long long)c->n, (long long)c->c, c->ceil_mode, c->count_include_pad, c->storage_order,
           c->auto_pad ? c->auto_pad : "-");
    for (int i = 0; i < c->nsp; i++)
        printf(" [in %lld k %lld s %lld d %lld p %lld/%lld]", (long long)c->in[i], (long long)c->k[i],
               (long long)c->s[i], (long long)c->d[i], (long long)c->pb[i], (long long)c->pe[i]);
    printf("\n");
}

/* Output size and effective pads per ONNX (written independently of runtime/shape.c). */
static void case_geometry(const pool_case *c, int64_t *out, int64_t *pb, int64_t *pe)
{
    for (int i = 0; i < c->nsp; i++) {
        int64_t ek = (c->k[i] - 1) * c->d[i] + 1;
        if (c->auto_pad && strncmp(c->auto_pad, "SAME", 4) == 0) {
            out[i] = (c->in[i] + c->s[i] - 1) / c->s[i];
            int64_t total = (out[i] - 1) * c->s[i] + ek - c->in[i];
            if (total < 0) total = 0;
            pb[i] = strcmp(c->auto_pad, "SAME_UPPER") == 0 ? total / 2 : (total + 1) / 2;
            pe[i] = total - pb[i];
            continue;
        }
        int valid = c->auto_pad && strcmp(c->auto_pad, "VALID") == 0;
        pb[i] = valid ? 0 : c->pb[i];
        pe[i] = valid ? 0 : c->pe[i];
        int64_t span = c->in[i] + pb[i] + pe[i] - ek;
        if (c->ceil_mode) {
            out[i] = (span + c->s[i] - 1) / c->s[i] + 1;
            if ((out[i] - 1) * c->s[i] >= c->in[i] + pb[i]) out[i]--;
        } else {
            out[i] = span / c->s[i] + 1;
        }
    }
}

/* Naive pooling of one case: taps in dim order, float sum (the kernel's order). */
static void pool_ref(const pool_case *c, const float *x, float *y, int64_t *idx)
{
    int64_t out[3], pb[3], pe[3];
    case_geometry(c, out, pb, pe);
    int64_t in_sz = 1, out_sz = 1;
    for (int i = 0; i < c->nsp; i++) {
        in_sz *= c->in[i];
        out_sz *= out[i];
    }
    for (int64_t p = 0; p < c->n * c->c; p++)
        for (int64_t oi = 0; oi < out_sz; oi++) {
            int64_t o[3] = {0, 0, 0}, rem = oi;
            for (int i = c->nsp - 1; i >= 0; i--) {
                o[i] = rem % out[i];
                rem /= out[i];
            }
            int64_t taps = 1;
            for (int i = 0; i < c->nsp; i++) taps *= c->k[i];
            float acc = c->is_max ? -INFINITY : 0.0f;
            int64_t best = -1, inside = 0, padded = 0;
            for (int64_t t = 0; t < taps; t++) {
                int64_t tt = t, pos[3], ok = 1, okpad = 1;
                int64_t tap[3];
                for (int i = c->nsp - 1; i >= 0; i--) {
                    tap[i] = tt % c->k[i];
                    tt /= c->k[i];
                }
                for (int i = 0; i < c->nsp; i++) {
                    pos[i] = o[i] * c->s[i] - pb[i] + tap[i] * c->d[i];
                    if (pos[i] < 0 || pos[i] >= c->in[i]) ok = 0;
                    if (pos[i] < -pb[i] || pos[i] >= c->in[i] + pe[i]) okpad = 0;
                }
                padded += okpad;
                if (!ok) continue;
                inside++;
                int64_t flat = 0;
                for (int i = 0; i < c->nsp; i++) flat = flat * c->in[i] + pos[i];
                float v = x[p * in_sz + flat];
                if (c->is_max) {
                    if (v > acc) {
                        acc = v;
                        best = flat;
                    }
                } else {
                    acc += v;
                }
                if (inside == 1 && c->is_max && idx) {
                    /* remember the first tap for an all -inf/NaN window */
                    int64_t f = flat;
                    if (c->storage_order) {
                        f = 0;
                        for (int i = c->nsp - 1; i >= 0; i--) f = f * c->in[i] + pos[i];
                    }
                    idx[p * out_sz + oi] = p * in_sz + f;
                }
            }
            if (!c->is_max) acc = acc / (float)(c->count_include_pad ? padded : inside);
            y[p * out_sz + oi] = acc;
            if (idx && best >= 0) {
                int64_t f = best;
                if (c->storage_order) { /* column-major: first spatial dim fastest */
                    int64_t pos[3], r = best;
                    for (int i = c->nsp - 1; i >= 0; i--) {
                        pos[i] = r % c->in[i];
                        r /= c->in[i];
                    }
                    f = 0;
                    for (int i = c->nsp - 1; i >= 0; i--) f = f * c->in[i] + pos[i];
                }
                idx[p * out_sz + oi] = p * in_sz + f;
            }
        }
}

static void case_attrs(const pool_case *c, op_node *l)
{
    memset(l, 0, sizeof *l);
    add_ints(l, "kernel_shape", c->k, c->nsp);
    int any_s = 0, any_d = 0;
    for (int i = 0; i < c->nsp; i++) {
        any_s |= c->s[i] != 1;
        any_d |= c->d[i] != 1;
    }
    if (any_s || c->explicit_defaults) add_ints(l, "strides", c->s, c->nsp);
    if (any_d || c->explicit_defaults) add_ints(l, "dilations", c->d, c->nsp);
    if (c->auto_pad) {
        add_str(l, "auto_pad", c->auto_pad);
    } else {
        int64_t pads[6];
        for (int i = 0; i < c->nsp; i++) {
            pads[i] = c->pb[i];
            pads[c->nsp + i] = c->pe[i];
        }
        add_ints(l, "pads", pads, 2 * c->nsp);
    }
    if (c->ceil_mode || c->explicit_defaults) add_int(l, "ceil_mode", c->ceil_mode);
    if (!c->is_max && (c->count_include_pad || c->explicit_defaults)) add_int(l, "count_include_pad", c->count_include_pad);
    if (c->is_max && (c->storage_order || c->explicit_defaults)) add_int(l, "storage_order", c->storage_order);
}

static void random_case(pool_case *c, int is_max)
{
    memset(c, 0, sizeof *c);
    c->is_max = is_max;
    c->nsp = (int)irand(1, 3);
    c->n = irand(1, 2);
    c->c = irand(1, 3);
    c->explicit_defaults = (int)irand(0, 1);
    int mode = (int)irand(0, 9); /* 0..5 explicit pads, 6 VALID, 7 SAME_UPPER, 8 SAME_LOWER, 9 NOTSET */
    c->auto_pad = mode == 6 ? "VALID" : mode == 7 ? "SAME_UPPER" : mode == 8 ? "SAME_LOWER" : mode == 9 ? "NOTSET" : NULL;
    c->ceil_mode = (mode <= 5 || mode == 9) ? (int)irand(0, 1) : 0;
    c->count_include_pad = is_max ? 0 : (int)irand(0, 1);
    c->storage_order = is_max ? (int)irand(0, 1) : 0;
    int big = c->nsp == 1 ? 40 : c->nsp == 2 ? 13 : 6;
    for (int i = 0; i < c->nsp; i++) {
        c->k[i] = irand(1, 4);
        c->s[i] = irand(1, 3);
        c->d[i] = irand(0, 3) == 0 ? irand(2, 3) : 1;
        int64_t ek = (c->k[i] - 1) * c->d[i] + 1;
        c->in[i] = irand(ek, ek + big);
        /* pads smaller than the dilated kernel: every window touches the input */
        if (mode <= 5 || mode == 9) {
            c->pb[i] = mode == 9 ? 0 : irand(0, ek - 1 < 3 ? ek - 1 : 3);
            c->pe[i] = mode == 9 ? 0 : irand(0, ek - 1 < 3 ? ek - 1 : 3);
        }
    }
}

/* Runs a case at 1 and 3 threads (with and without Indices for MaxPool) and compares
 * with the reference; returns 1 when all agree. */
static int check_case(const pool_case *c)
{
    int64_t out[3], pb[3], pe[3];
    case_geometry(c, out, pb, pe);
    int64_t xd[5] = {c->n, c->c}, yd[5] = {c->n, c->c};
    for (int i = 0; i < c->nsp; i++) {
        xd[2 + i] = c->in[i];
        yd[2 + i] = out[i];
    }
    ptq_tensor x = tensor_rand(2 + c->nsp, xd, -4, 4);
    /* ties and repeated values exercise the first-max rule */
    size_t nx = ptq_tensor_numel(&x);
    for (size_t i = 0; i < nx; i++)
        if (rnd() % 5 == 0) ((float *)x.data)[i] = (float)(int)((float *)x.data)[i];
    ptq_tensor ref = tensor_new(PTQ_F32, 2 + c->nsp, yd);
    ptq_tensor ref_idx = {0};
    ref_idx.dtype = PTQ_I64;
    ref_idx.rank = 2 + c->nsp;
    memcpy(ref_idx.dims, yd, sizeof yd);
    if (ptq_tensor_alloc(&ref_idx) != PTQ_OK) abort();
    pool_ref(c, x.data, ref.data, ref_idx.data);
    size_t ny = ptq_tensor_numel(&ref);
    int ok = 1;
    const char *op = c->is_max ? "MaxPool" : "AveragePool";
    for (int variant = 0; variant < (c->is_max ? 4 : 2) && ok; variant++) {
        int threads = variant % 2 ? 3 : 1, with_idx = variant >= 2;
        int want[2] = {1, with_idx};
        ptq_tensor outs[2];
        op_node l;
        case_attrs(c, &l);
        ptq_status st = run_node(op, &x, &l, with_idx ? 2 : 1, want, outs, threads);
        if (st != PTQ_OK) {
            printf("    %s: %s\n", ptq_status_name(st), ptq_last_error());
            ok = 0;
        } else if (!ptq_shape_equal(&outs[0], &ref)) {
            char a[64], b[64];
            printf("    shape %s, expected %s\n", ptq_shape_str(&outs[0], a, sizeof a), ptq_shape_str(&ref, b, sizeof b));
            ok = 0;
        } else {
            const float *y = outs[0].data, *r = ref.data;
            for (size_t i = 0; i < ny && ok; i++)
                if (!(y[i] == r[i] || (isnan(y[i]) && isnan(r[i])))) {
                    printf("    threads %d indices %d: y[%zu] = %.9g, expected %.9g\n", threads, with_idx, i,
                           (double)y[i], (double)r[i]);
                    ok = 0;
                }
            if (with_idx)
                for (size_t i = 0; i < ny && ok; i++)
                    if (((int64_t *)outs[1].data)[i] != ((int64_t *)ref_idx.data)[i]) {
                        printf("    threads %d: indices[%zu] = %lld, expected %lld\n", threads, i,
                               (long long)((int64_t *)outs[1].data)[i], (long long)((int64_t *)ref_idx.data)[i]);
                        ok = 0;
                    }
        }
        ptq_tensor_free(&outs[0]);
        if (with_idx) ptq_tensor_free(&outs[1]);
    }
    if (!ok) case_print(c);
    ptq_tensor_free(&x);
    ptq_tensor_free(&ref);
    ptq_tensor_free(&ref_idx);
    return ok;
}

/* ------------------------------------------------------------ tests */

/* 400 random cases (fewer after the third failure). */
static void random_grid(int is_max)
{
    int bad = 0;
    for (int i = 0; i < 400 && bad < 3; i++) {
        pool_case c;
        random_case(&c, is_max);
        bad += !check_case(&c);
    }
    EXPECT_EQ_INT(bad, 0);
}

TEST(max_pool_random_grid)
{
    random_grid(1);
}

TEST(average_pool_random_grid)
{
    random_grid(0);
}

/* The hot shapes of image models: 3x3 s2 p1 max pool, 2x2 s2 average, wide rows. */
TEST(pool_model_shapes)
{
    pool_case c;
    memset(&c, 0, sizeof c);
    c.nsp = 2;
    c.n = 1;
    c.c = 16;
    c.in[0] = 80;
    c.in[1] = 97;
    for (int i = 0; i < 2; i++) {
        c.k[i] = 3;
        c.s[i] = 2;
        c.d[i] = 1;
        c.pb[i] = c.pe[i] = 1;
    }
    c.is_max = 1;
    EXPECT(check_case(&c));
    c.is_max = 0;
    EXPECT(check_case(&c));
    c.count_include_pad = 1;
    EXPECT(check_case(&c));
    for (int i = 0; i < 2; i++) {
        c.k[i] = 2;
        c.s[i] = 2;
        c.pb[i] = c.pe[i] = 0;
    }
    c.count_include_pad = 0;
    c.ceil_mode = 1;
    EXPECT(check_case(&c));
    c.is_max = 1;
    EXPECT(check_case(&c));
    /* stride 1 (SPP-style 5x5 s1 p2) */
    for (int i = 0; i < 2; i++) {
        c.k[i] = 5;
        c.s[i] = 1;
        c.pb[i] = c.pe[i] = 2;
    }
    c.ceil_mode = 0;
    EXPECT(check_case(&c));
}

/* ONNX examples (onnx/docs/Operators.md): maxpool_2d_ceil, averagepool_2d_ceil,
 * maxpool_2d_dilations, maxpool_with_argmax_2d_precomputed_strides. */
TEST(pool_onnx_examples)
{
    int64_t dims[4] = {1, 1, 4, 4};
    ptq_tensor x = tensor_new(PTQ_F32, 4, dims);
    for (int i = 0; i < 16; i++) ((float *)x.data)[i] = (float)(i + 1);
    int want[2] = {1, 0};
    ptq_tensor y[2];
    op_node l = {.n_attrs = 0};
    int64_t k3[2] = {3, 3}, s2[2] = {2, 2};
    add_ints(&l, "kernel_shape", k3, 2);
    add_ints(&l, "strides", s2, 2);
    add_int(&l, "ceil_mode", 1);
    EXPECT_EQ_INT(run_node("MaxPool", &x, &l, 1, want, y, 1), PTQ_OK);
    static const float mp[4] = {11, 12, 15, 16};
    EXPECT_EQ_INT(y[0].dims[2], 2);
    EXPECT_EQ_INT(y[0].dims[3], 2);
    for (int i = 0; i < 4; i++) EXPECT_NEAR(((float *)y[0].data)[i], mp[i], 0, 0);
    ptq_tensor_free(&y[0]);

    add_ints(&l, "kernel_shape", k3, 2);
    add_ints(&l, "strides", s2, 2);
    add_int(&l, "ceil_mode", 1);
    EXPECT_EQ_INT(run_node("AveragePool", &x, &l, 1, want, y, 1), PTQ_OK);
    static const float ap[4] = {6, 7.5f, 12, 13.5f};
    for (int i = 0; i < 4; i++) EXPECT_NEAR(((float *)y[0].data)[i], ap[i], 0, 0);
    ptq_tensor_free(&y[0]);

    int64_t k2[2] = {2, 2}, d2[2] = {2, 2};
    add_ints(&l, "kernel_shape", k2, 2);
    add_ints(&l, "dilations", d2, 2);
    EXPECT_EQ_INT(run_node("MaxPool", &x, &l, 1, want, y, 1), PTQ_OK);
    static const float md[4] = {11, 12, 15, 16};
    for (int i = 0; i < 4; i++) EXPECT_NEAR(((float *)y[0].data)[i], md[i], 0, 0);
    ptq_tensor_free(&y[0]);
    ptq_tensor_free(&x);

    /* 5x5 input 1..25, kernel 2 stride 2, storage_order 1 */
    int64_t d5[4] = {1, 1, 5, 5};
    x = tensor_new(PTQ_F32, 4, d5);
    for (int i = 0; i < 25; i++) ((float *)x.data)[i] = (float)(i + 1);
    int want2[2] = {1, 1};
    add_ints(&l, "kernel_shape", k2, 2);
    add_ints(&l, "strides", s2, 2);
    add_int(&l, "storage_order", 1);
    EXPECT_EQ_INT(run_node("MaxPool", &x, &l, 2, want2, y, 1), PTQ_OK);
    static const float mv[4] = {7, 9, 17, 19};
    static const int64_t mi[4] = {6, 16, 8, 18};
    for (int i = 0; i < 4; i++) {
        EXPECT_NEAR(((float *)y[0].data)[i], mv[i], 0, 0);
        EXPECT_EQ_INT(((int64_t *)y[1].data)[i], mi[i]);
    }
    EXPECT_EQ_INT(y[1].dtype, PTQ_I64);
    ptq_tensor_free(&y[0]);
    ptq_tensor_free(&y[1]);
    ptq_tensor_free(&x);
}

/* NaN never wins a max (ONNX Runtime's rule); -inf windows stay -inf; the average sees NaN. */
TEST(pool_nan_and_inf)
{
    int64_t dims[3] = {1, 1, 6};
    ptq_tensor x = tensor_new(PTQ_F32, 3, dims);
    float *xv = x.data;
    xv[0] = NAN;
    xv[1] = 2.0f;
    xv[2] = -INFINITY;
    xv[3] = -INFINITY;
    xv[4] = NAN;
    xv[5] = INFINITY;
    int want[2] = {1, 1};
    ptq_tensor y[2];
    op_node l = {.n_attrs = 0};
    int64_t k2 = 2, s2 = 2;
    add_ints(&l, "kernel_shape", &k2, 1);
    add_ints(&l, "strides", &s2, 1);
    EXPECT_EQ_INT(run_node("MaxPool", &x, &l, 2, want, y, 1), PTQ_OK);
    const float *yv = y[0].data;
    const int64_t *iv = y[1].data;
    EXPECT_NEAR(yv[0], 2.0, 0, 0);
    EXPECT_EQ_INT(iv[0], 1);
    EXPECT_NEAR(yv[1], -INFINITY, 0, 0);
    EXPECT_EQ_INT(iv[1], 2);
    EXPECT_NEAR(yv[2], INFINITY, 0, 0);
    EXPECT_EQ_INT(iv[2], 5);
    ptq_tensor_free(&y[0]);
    ptq_tensor_free(&y[1]);
    add_ints(&l, "kernel_shape", &k2, 1);
    add_ints(&l, "strides", &s2, 1);
    EXPECT_EQ_INT(run_node("AveragePool", &x, &l, 1, want, y, 1), PTQ_OK);
    yv = y[0].data;
    EXPECT(isnan(yv[0]));
    EXPECT_NEAR(yv[1], -INFINITY, 0, 0);
    EXPECT(isnan(yv[2]));
    ptq_tensor_free(&y[0]);
    ptq_tensor_free(&x);
}

static double global_ref(const float *x, size_t n, int is_max)
{
    double acc = is_max ? -(double)INFINITY : 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i];
        acc = is_max ? (v > acc ? v : acc) : acc + v;
    }
    return is_max ? acc : acc / (double)n;
}

TEST(global_pools)
{
    static const int64_t shapes[][6] = {{3, 1, 2, 7}, {4, 2, 3, 5, 5}, {4, 1, 8, 40, 40}, {5, 1, 2, 3, 4, 2}, {4, 2, 5, 1, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int rank = (int)shapes[si][0];
        const int64_t *dims = &shapes[si][1];
        ptq_tensor x = tensor_rand(rank, dims, -4, 4);
        size_t planes = (size_t)(dims[0] * dims[1]), inner = ptq_tensor_numel(&x) / planes;
        for (int is_max = 0; is_max < 2; is_max++) {
            const char *op = is_max ? "GlobalMaxPool" : "GlobalAveragePool";
            int want[1] = {1};
            ptq_tensor y1, y3;
            op_node l = {.n_attrs = 0};
            EXPECT_EQ_INT(run_node(op, &x, &l, 1, want, &y1, 1), PTQ_OK);
            EXPECT_EQ_INT(run_node(op, &x, &l, 1, want, &y3, 3), PTQ_OK);
            EXPECT_EQ_INT(y1.rank, rank);
            for (int d = 2; d < rank; d++) EXPECT_EQ_INT(y1.dims[d], 1);
            for (size_t p = 0; p < planes; p++) {
                double r = global_ref((const float *)x.data + p * inner, inner, is_max);
                EXPECT_NEAR(((float *)y1.data)[p], r, 1e-6, 1e-6);
                EXPECT(((float *)y1.data)[p] == ((float *)y3.data)[p]);
            }
            ptq_tensor_free(&y1);
            ptq_tensor_free(&y3);
        }
        ptq_tensor_free(&x);
    }
}

/* Error paths: each names the node and the numbers. */
TEST(pool_errors)
{
    int64_t d4[4] = {1, 2, 6, 6}, d2[2] = {2, 6};
    ptq_tensor x = tensor_rand(4, d4, -4, 4), x2 = tensor_rand(2, d2, -4, 4);
    int want[2] = {1, 1};
    ptq_tensor y[2];
    op_node l = {.n_attrs = 0};
    int64_t k[2] = {2, 2}, k3[3] = {2, 2, 2}, big[4] = {0, 0, (int64_t)1 << 40, 0};

    EXPECT_EQ_INT(run_node("MaxPool", &x, &l, 1, want, y, 1), PTQ_ERR_FORMAT); /* no kernel_shape */
    EXPECT(strstr(ptq_last_error(), "MaxPool 'pool0'") != NULL);
    add_ints(&l, "kernel_shape", k3, 3);
    EXPECT_EQ_INT(run_node("MaxPool", &x, &l, 1, want, y, 1), PTQ_ERR_FORMAT);
    add_ints(&l, "kernel_shape", k, 2);
    EXPECT_EQ_INT(run_node("MaxPool", &x2, &l, 1, want, y, 1), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "rank 2") != NULL);
    add_ints(&l, "kernel_shape", k, 2);
    add_int(&l, "storage_order", 2);
    EXPECT_EQ_INT(run_node("MaxPool", &x, &l, 2, want, y, 1), PTQ_ERR_FORMAT);
    add_ints(&l, "kernel_shape", k, 2);
    add_str(&l, "auto_pad", "SAME_MIDDLE");
    EXPECT_EQ_INT(run_node("AveragePool", &x, &l, 1, want, y, 1), PTQ_ERR_FORMAT);
    add_ints(&l, "kernel_shape", k, 2);
    add_ints(&l, "pads", big, 4);
    EXPECT_EQ_INT(run_node("AveragePool", &x, &l, 1, want, y, 1), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "pads[2]") != NULL);
    add_ints(&l, "kernel_shape", k, 2);
    add_ints(&l, "pads", k, 2);
    EXPECT_EQ_INT(run_node("AveragePool", &x, &l, 1, want, y, 1), PTQ_ERR_FORMAT);
    add_ints(&l, "kernel_shape", k, 2);
    EXPECT_EQ_INT(run_node("AveragePool", &x, &l, 2, want, y, 1), PTQ_ERR_FORMAT); /* no Indices */
    int64_t k9[2] = {9, 9};
    add_ints(&l, "kernel_shape", k9, 2);
    EXPECT_EQ_INT(run_node("MaxPool", &x, &l, 1, want, y, 1), PTQ_ERR_SHAPE); /* kernel > input */
    add_ints(&l, "kernel_shape", k, 2);
    add_int(&l, "count_include_pad", 3);
    EXPECT_EQ_INT(run_node("AveragePool", &x, &l, 1, want, y, 1), PTQ_ERR_FORMAT);
    EXPECT_EQ_INT(run_node("GlobalAveragePool", &x2, &l, 1, want, y, 1), PTQ_ERR_SHAPE);

    ptq_tensor xi = {0};
    xi.dtype = PTQ_U8;
    xi.rank = 4;
    memcpy(xi.dims, d4, sizeof d4);
    if (ptq_tensor_alloc(&xi) != PTQ_OK) abort();
    add_ints(&l, "kernel_shape", k, 2);
    EXPECT_EQ_INT(run_node("MaxPool", &xi, &l, 1, want, y, 1), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "uint8") != NULL);
    EXPECT_EQ_INT(run_node("GlobalMaxPool", &xi, &l, 1, want, y, 1), PTQ_ERR_UNSUPPORTED);
    ptq_tensor_free(&xi);
    ptq_tensor_free(&x);
    ptq_tensor_free(&x2);
}

int main(void)
{
    op_test_seed(0x5eed1234u);
    RUN(max_pool_random_grid);
    RUN(average_pool_random_grid);
    RUN(pool_model_shapes);
    RUN(pool_onnx_examples);
    RUN(pool_nan_and_inf);
    RUN(global_pools);
    RUN(pool_errors);
    return test_summary();
}
