/* test_ops_norm.c: normalisation, softmax and reductions run directly, one node at a time:
 *   BatchNormalization, InstanceNormalization, LayerNormalization (runtime/ops/norm.c),
 *   Softmax, LogSoftmax (norm.c), ReduceSum/Mean/Max/Min/L2 (runtime/ops/reduce.c).
 * Each against a double-precision reference written here on random shapes, every axis,
 * both opset conventions (Softmax coerced 2-D before 13; axes attribute vs input),
 * constant and runtime parameters, broadcast Scale/B, optional outputs, int32/int64
 * reductions (exact), empty and no-op reductions, NaN/Inf, bit-identical results at 1
 * and 3 threads, and the error messages. Float tolerance |a-b| <= 1e-5 + 1e-5*|b|
 * (sums: 1e-4 absolute). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/op.h"
#include "tests/unit/op_test.h"

/* ------------------------------------------------------------ harness */

static void free_outs(ptq_tensor *outs, int n)
{
    for (int i = 0; i < n; i++) ptq_tensor_free(&outs[i]);
}

static void print_shape(const char *what, const ptq_tensor *t)
{
    char buf[96];
    printf("    %s %s\n", what, ptq_shape_str(t, buf, sizeof buf));
}

/* ------------------------------------------------------------ BatchNormalization */

TEST(batch_normalization)
{
    static const int64_t shapes[][6] = {{4, 2, 3, 5, 7}, {2, 4, 6}, {3, 2, 5, 33}, {5, 1, 2, 3, 4, 3}, {4, 1, 16, 1, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int rank = (int)shapes[si][0];
        int64_t dims[5] = {1, 1, 1, 1, 1};
        for (int d = 0; d < rank; d++) dims[d] = shapes[si][1 + d];
        ptq_tensor x = tensor_rand(rank, dims, -3, 3);
        int64_t c = dims[1];
        ptq_tensor sc = tensor_rand(1, &c, -2, 2), b = tensor_rand(1, &c, -1, 1), m = tensor_rand(1, &c, -1, 1),
                   v = tensor_rand(1, &c, 0.01f, 3);
        float eps = si % 2 ? 1e-2f : 1e-5f;
        size_t n = ptq_tensor_numel(&x), inner = n / (size_t)(dims[0] * c);
        double *ref = malloc(n * sizeof *ref);
        if (!ref) abort();
        for (size_t i = 0; i < n; i++) {
            size_t ch = (i / inner) % (size_t)c;
            double xv = (double)((float *)x.data)[i];
            ref[i] = (xv - (double)((float *)m.data)[ch]) / sqrt((double)((float *)v.data)[ch] + (double)eps) *
                         (double)((float *)sc.data)[ch] +
                     (double)((float *)b.data)[ch];
        }
        ptq_tensor outs[4][1];
        for (int variant = 0; variant < 4; variant++) {
            op_node r = {.op = "BatchNormalization", .opset = variant < 2 ? 15 : 7, .n_in = 5,
                          .in = {&x, &sc, &b, &m, &v}, .const_mask = variant % 2 ? 0x1e : 0,
                          .nthreads = variant == 3 ? 3 : 1};
            if (eps != 1e-5f) add_float(&r, "epsilon", eps);
            if (variant == 2) add_int(&r, "spatial", 1);
            EXPECT_EQ_INT(op_run(&r, outs[variant]), PTQ_OK);
            EXPECT(ptq_shape_equal(&outs[variant][0], &x));
            EXPECT_EQ_INT(compare_f64(&outs[variant][0], ref, n, 1e-5, 1e-5, "BatchNormalization"), 0);
        }
        /* constant (state) and runtime (scratch) coefficients, 1 and 3 threads: identical */
        for (int variant = 1; variant < 4; variant++) EXPECT(same_bits(&outs[0][0], &outs[variant][0]));
        for (int variant = 0; variant < 4; variant++) free_outs(outs[variant], 1);
        free(ref);
        ptq_tensor_free(&x);
        ptq_tensor_free(&sc);
        ptq_tensor_free(&b);
        ptq_tensor_free(&m);
        ptq_tensor_free(&v);
    }
}

TEST(batch_normalization_errors)
{
    int64_t xd[4] = {1, 3, 2, 2}, c = 3, c4 = 4, d1 = 3;
    ptq_tensor x = tensor_rand(4, xd, -1, 1), p = tensor_rand(1, &c, 0.5f, 1), p4 = tensor_rand(1, &c4, 0.5f, 1),
               x1 = tensor_rand(1, &d1, -1, 1);
    ptq_tensor outs[3];
    op_node r = {.op = "BatchNormalization", .opset = 15, .n_in = 5, .in = {&x, &p, &p, &p, &p}};
    add_int(&r, "training_mode", 1);
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "BatchNormalization 'n1': training_mode") != NULL);
    r.opset = 7;
    add_int(&r, "spatial", 0);
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_UNSUPPORTED);
    r.in[3] = &p4;
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "mean has shape 4") != NULL);
    r.in[3] = &p;
    r.n_out = 3;
    r.want[1] = r.want[2] = 1;
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_UNSUPPORTED);
    r.n_out = 1;
    r.in[0] = &x1;
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_SHAPE);
    r.in[0] = &x;
    r.n_in = 4;
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_FORMAT);
    ptq_tensor_free(&x);
    ptq_tensor_free(&p);
    ptq_tensor_free(&p4);
    ptq_tensor_free(&x1);
}

/* ------------------------------------------------------------ InstanceNormalization */

TEST(instance_normalization)
{
    static const int64_t shapes[][6] = {{4, 2, 3, 5, 7}, {3, 2, 4, 100}, {5, 1, 2, 3, 4, 2}, {4, 1, 3, 1, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int rank = (int)shapes[si][0];
        int64_t dims[5];
        for (int d = 0; d < rank; d++) dims[d] = shapes[si][1 + d];
        ptq_tensor x = tensor_rand(rank, dims, -2, 5);
        int64_t c = dims[1];
        ptq_tensor sc = tensor_rand(1, &c, -2, 2), b = tensor_rand(1, &c, -1, 1);
        float eps = si % 2 ? 1e-2f : 1e-5f;
        size_t n = ptq_tensor_numel(&x), inner = n / (size_t)(dims[0] * c);
        double *ref = malloc(n * sizeof *ref);
        if (!ref) abort();
        for (size_t p = 0; p < n / inner; p++) {
            const float *xp = (const float *)x.data + p * inner;
            double mean = 0, var = 0;
            for (size_t i = 0; i < inner; i++) mean += (double)xp[i];
            mean /= (double)inner;
            for (size_t i = 0; i < inner; i++) var += ((double)xp[i] - mean) * ((double)xp[i] - mean);
            var /= (double)inner;
            size_t ch = p % (size_t)c;
            for (size_t i = 0; i < inner; i++)
                ref[p * inner + i] = ((double)xp[i] - mean) / sqrt(var + (double)eps) * (double)((float *)sc.data)[ch] +
                                     (double)((float *)b.data)[ch];
        }
        ptq_tensor o1[1], o3[1];
        for (int t = 0; t < 2; t++) {
            op_node r = {.op = "InstanceNormalization", .n_in = 3, .in = {&x, &sc, &b}, .nthreads = t ? 3 : 1};
            if (eps != 1e-5f) add_float(&r, "epsilon", eps);
            EXPECT_EQ_INT(op_run(&r, t ? o3 : o1), PTQ_OK);
        }
        EXPECT_EQ_INT(compare_f64(o1, ref, n, 1e-4, 1e-5, "InstanceNormalization"), 0);
        EXPECT(same_bits(o1, o3));
        free_outs(o1, 1);
        free_outs(o3, 1);
        free(ref);
        ptq_tensor_free(&x);
        ptq_tensor_free(&sc);
        ptq_tensor_free(&b);
    }
    /* errors: rank 2, scale of the wrong size */
    int64_t d2[2] = {2, 3}, d4[4] = {1, 3, 2, 2}, c2 = 2, c3 = 3;
    ptq_tensor x2 = tensor_rand(2, d2, -1, 1), x4 = tensor_rand(4, d4, -1, 1), p2 = tensor_rand(1, &c2, 0, 1),
               p3 = tensor_rand(1, &c3, 0, 1);
    ptq_tensor outs[1];
    op_node r = {.op = "InstanceNormalization", .n_in = 3, .in = {&x2, &p3, &p3}};
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_SHAPE);
    r.in[0] = &x4;
    r.in[1] = &p2;
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "scale has shape 2") != NULL);
    ptq_tensor_free(&x2);
    ptq_tensor_free(&x4);
    ptq_tensor_free(&p2);
    ptq_tensor_free(&p3);
}

/* ------------------------------------------------------------ LayerNormalization */

/* Offset of x's element i in an operand of shape t broadcast to x (numpy rules). */
static size_t bcast_index(const ptq_tensor *x, const ptq_tensor *t, size_t i)
{
    size_t off = 0, mul = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        size_t idx = i % (size_t)x->dims[d];
        i /= (size_t)x->dims[d];
        int td = d - (x->rank - t->rank);
        if (td < 0) continue;
        if (t->dims[td] != 1) off += idx * mul;
        mul *= (size_t)t->dims[td];
    }
    return off;
}

static void layer_norm_case(int rank, const int64_t *dims, int64_t axis_attr, int scale_kind, int with_bias, float eps)
{
    ptq_tensor x = tensor_rand(rank, dims, -3, 4);
    int axis = (int)(axis_attr < 0 ? axis_attr + rank : axis_attr);
    /* scale_kind 0: dims[axis:]; 1: same with leading 1s; 2: dims[axis:] with its first dim 1;
     * 3: [1]; 4: X's whole shape (varies over the leading dims too) */
    int64_t sd[8];
    int sr = 0;
    if (scale_kind == 3) {
        sd[sr++] = 1;
    } else if (scale_kind == 4) {
        for (int d = 0; d < rank; d++) sd[sr++] = dims[d];
    } else {
        if (scale_kind == 1) sd[sr++] = 1;
        for (int d = axis; d < rank; d++) sd[sr++] = dims[d];
        if (scale_kind == 2) sd[0] = 1;
    }
    ptq_tensor sc = tensor_rand(sr, sd, -2, 2), b = tensor_rand(sr, sd, -1, 1);
    size_t n = ptq_tensor_numel(&x), rows = 1;
    for (int d = 0; d < axis; d++) rows *= (size_t)dims[d];
    size_t len = n / rows;
    double *ref = malloc(n * sizeof *ref), *rmean = malloc(rows * sizeof *rmean), *rinv = malloc(rows * sizeof *rinv);
    if (!ref || !rmean || !rinv) abort();
    for (size_t r = 0; r < rows; r++) {
        const float *xr = (const float *)x.data + r * len;
        double mean = 0, var = 0;
        for (size_t j = 0; j < len; j++) mean += (double)xr[j];
        mean /= (double)len;
        for (size_t j = 0; j < len; j++) var += ((double)xr[j] - mean) * ((double)xr[j] - mean);
        var /= (double)len;
        rmean[r] = mean;
        rinv[r] = 1.0 / sqrt(var + (double)eps);
        for (size_t j = 0; j < len; j++) {
            size_t i = r * len + j;
            double v = ((double)xr[j] - mean) * rinv[r] * (double)((float *)sc.data)[bcast_index(&x, &sc, i)];
            if (with_bias) v += (double)((float *)b.data)[bcast_index(&x, &b, i)];
            ref[i] = v;
        }
    }
    ptq_tensor o[2][3];
    for (int t = 0; t < 2; t++) {
        op_node r = {.op = "LayerNormalization", .opset = 17, .n_in = with_bias ? 3 : 2, .in = {&x, &sc, &b},
                      .const_mask = t ? 6 : 0, .n_out = 3, .want = {1, t == 0, 1}, .nthreads = t ? 3 : 1};
        if (axis_attr != -1) add_int(&r, "axis", axis_attr);
        if (eps != 1e-5f) add_float(&r, "epsilon", eps);
        if (t) add_int(&r, "stash_type", 1);
        ptq_status st = op_run(&r, o[t]);
        EXPECT_EQ_INT(st, PTQ_OK);
        if (st != PTQ_OK) printf("    %s\n", ptq_last_error());
    }
    int bad = compare_f64(&o[0][0], ref, n, 1e-5, 1e-5, "Y") + compare_f64(&o[0][1], rmean, rows, 1e-5, 1e-5, "Mean") +
              compare_f64(&o[0][2], rinv, rows, 1e-5, 1e-5, "InvStdDev");
    EXPECT_EQ_INT(o[0][1].rank, rank);
    for (int d = 0; d < rank; d++) EXPECT_EQ_INT(o[0][1].dims[d], d < axis ? dims[d] : 1);
    EXPECT(same_bits(&o[0][0], &o[1][0]));
    EXPECT(same_bits(&o[0][2], &o[1][2]));
    if (bad) {
        print_shape("X", &x);
        print_shape("Scale", &sc);
        printf("    axis %lld bias %d\n", (long long)axis_attr, with_bias);
    }
    EXPECT_EQ_INT(bad, 0);
    free_outs(o[0], 3);
    ptq_tensor_free(&o[1][0]);
    ptq_tensor_free(&o[1][2]);
    free(ref);
    free(rmean);
    free(rinv);
    ptq_tensor_free(&x);
    ptq_tensor_free(&sc);
    ptq_tensor_free(&b);
}

TEST(layer_normalization)
{
    int64_t d4[4] = {2, 3, 4, 5}, d3[3] = {2, 7, 96}, d2[2] = {3, 1000};
    for (int a = -4; a < 4; a++) layer_norm_case(4, d4, a, 0, 1, 1e-5f);
    for (int a = -3; a < 3; a++) layer_norm_case(3, d3, a, (a + 3) % 4, a % 2 == 0, 0.1f);
    layer_norm_case(2, d2, -1, 0, 1, 1e-5f);
    layer_norm_case(2, d2, 1, 3, 0, 1e-5f);
    layer_norm_case(4, d4, 2, 2, 1, 1e-5f);
    layer_norm_case(4, d4, 1, 1, 1, 1e-5f);
    layer_norm_case(4, d4, 2, 4, 1, 1e-5f);
    layer_norm_case(3, d3, -1, 4, 0, 1e-5f);

    int64_t xd[3] = {2, 3, 4}, bad_d[1] = {3};
    ptq_tensor x = tensor_rand(3, xd, -1, 1), s = tensor_rand(1, bad_d, -1, 1), s4 = tensor_rand(1, &xd[2], -1, 1);
    ptq_tensor outs[3];
    op_node r = {.op = "LayerNormalization", .opset = 17, .n_in = 2, .in = {&x, &s}};
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "Scale of shape 3 does not broadcast to X of shape 2x3x4") != NULL);
    r.in[1] = &s4;
    add_int(&r, "stash_type", 11);
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_UNSUPPORTED);
    add_int(&r, "axis", 3);
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_SHAPE);
    add_int(&r, "axis", -4);
    EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_SHAPE);
    ptq_tensor_free(&x);
    ptq_tensor_free(&s);
    ptq_tensor_free(&s4);
}

/* ------------------------------------------------------------ Softmax, LogSoftmax */

static void softmax_ref(const ptq_tensor *x, int axis, int coerced, int log_out, double *ref)
{
    size_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= (size_t)x->dims[d];
    if (coerced) {
        for (int d = axis; d < x->rank; d++) len *= (size_t)x->dims[d];
    } else {
        len = (size_t)x->dims[axis];
        for (int d = axis + 1; d < x->rank; d++) inner *= (size_t)x->dims[d];
    }
    const float *xv = x->data;
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t base = o * len * inner + i;
            double m = -(double)INFINITY, s = 0;
            for (size_t k = 0; k < len; k++) m = fmax(m, (double)xv[base + k * inner]);
            for (size_t k = 0; k < len; k++) s += exp((double)xv[base + k * inner] - m);
            for (size_t k = 0; k < len; k++) {
                double v = (double)xv[base + k * inner] - m;
                ref[base + k * inner] = log_out ? v - log(s) : exp(v) / s;
            }
        }
}

static void softmax_case(int rank, const int64_t *dims, float lo, float hi)
{
    ptq_tensor x = tensor_rand(rank, dims, lo, hi);
    size_t n = ptq_tensor_numel(&x);
    double *ref = malloc(n * sizeof *ref);
    if (!ref) abort();
    for (int log_out = 0; log_out < 2; log_out++)
        for (int coerced = 0; coerced < 2; coerced++)
            for (int a = -rank; a < rank + 1; a++) {
                int default_axis = a == rank;
                int axis = default_axis ? (coerced ? 1 : rank - 1) : (a < 0 ? a + rank : a);
                if (axis >= rank) continue;
                softmax_ref(&x, axis, coerced, log_out, ref);
                ptq_tensor o1[1], o3[1];
                for (int t = 0; t < 2; t++) {
                    op_node r = {.op = log_out ? "LogSoftmax" : "Softmax", .opset = coerced ? 11 : 13, .n_in = 1,
                                  .in = {&x}, .nthreads = t ? 3 : 1};
                    if (!default_axis) add_int(&r, "axis", a);
                    EXPECT_EQ_INT(op_run(&r, t ? o3 : o1), PTQ_OK);
                }
                int bad = compare_f64(o1, ref, n, 1e-6, 1e-5, log_out ? "LogSoftmax" : "Softmax");
                if (bad) {
                    print_shape("X", &x);
                    printf("    axis %d coerced %d\n", a, coerced);
                }
                EXPECT_EQ_INT(bad, 0);
                EXPECT(same_bits(o1, o3));
                free_outs(o1, 1);
                free_outs(o3, 1);
            }
    free(ref);
    ptq_tensor_free(&x);
}

TEST(softmax)
{
    int64_t d3[3] = {3, 4, 5}, d4[4] = {2, 3, 4, 5}, d1[1] = {7}, dwide[3] = {2, 5, 130}, drow[2] = {3, 1000};
    softmax_case(3, d3, -3, 3);
    softmax_case(4, d4, -3, 3);
    softmax_case(1, d1, -3, 3);
    softmax_case(3, dwide, -3, 3);
    softmax_case(2, drow, -5, 5);
    softmax_case(2, drow, 1000, 1010); /* large values: stable only with the max subtracted */
    softmax_case(3, d3, -1000, -990);

    /* -inf entries: probability 0, log -inf; an all -inf row is NaN */
    int64_t d2[2] = {2, 3};
    ptq_tensor x = tensor_new(PTQ_F32, 2, d2);
    float *xv = x.data;
    xv[0] = 1.0f;
    xv[1] = -INFINITY;
    xv[2] = 1.0f;
    xv[3] = xv[4] = xv[5] = -INFINITY;
    ptq_tensor o[1];
    op_node r = {.op = "Softmax", .opset = 13, .n_in = 1, .in = {&x}};
    EXPECT_EQ_INT(op_run(&r, o), PTQ_OK);
    const float *y = o[0].data;
    EXPECT_NEAR(y[0], 0.5, 0, 0);
    EXPECT_NEAR(y[1], 0.0, 0, 0);
    EXPECT(isnan(y[3]));
    free_outs(o, 1);
    r.op = "LogSoftmax";
    EXPECT_EQ_INT(op_run(&r, o), PTQ_OK);
    y = o[0].data;
    EXPECT_NEAR(y[0], -log(2.0), 1e-6, 0);
    EXPECT_NEAR(y[1], -(double)INFINITY, 0, 0);
    free_outs(o, 1);
    /* errors: axis out of range, integer input */
    add_int(&r, "axis", 2);
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "LogSoftmax 'n1': axis 2 out of range") != NULL);
    ptq_tensor xi = tensor_new(PTQ_I32, 2, d2);
    r.in[0] = &xi;
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_UNSUPPORTED);
    ptq_tensor_free(&xi);
    ptq_tensor_free(&x);
}

/* ------------------------------------------------------------ reductions */

enum { K_SUM, K_MEAN, K_MAX, K_MIN, K_L2 };
static const char *const reduce_ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2"};

/* Reference over doubles: output index of every input element, accumulate, finish.
 * abssum[j]: the sum of |x| (|x|^2 for L2) behind output j, divided like the output (Mean),
 * to bound the float32 summation error. */
static void reduce_ref(const ptq_tensor *x, const int *red, int kind, double *ref, double *abssum, size_t ny)
{
    size_t nx = ptq_tensor_numel(x), count = 1;
    for (int d = 0; d < x->rank; d++)
        if (red[d]) count *= (size_t)x->dims[d];
    for (size_t j = 0; j < ny; j++) {
        ref[j] = kind == K_MAX ? -(double)INFINITY : kind == K_MIN ? (double)INFINITY : 0.0;
        abssum[j] = 0.0;
    }
    for (size_t i = 0; i < nx; i++) {
        size_t rem = i, oi = 0, mul = 1;
        for (int d = x->rank - 1; d >= 0; d--) {
            size_t idx = rem % (size_t)x->dims[d];
            rem /= (size_t)x->dims[d];
            if (!red[d]) {
                oi += idx * mul;
                mul *= (size_t)x->dims[d];
            }
        }
        double v = ptq_tensor_get_f64(x, i);
        abssum[oi] += kind == K_L2 ? v * v : fabs(v);
        switch (kind) {
        case K_MAX: ref[oi] = (isnan(v) || isnan(ref[oi])) ? (double)NAN : fmax(ref[oi], v); break;
        case K_MIN: ref[oi] = (isnan(v) || isnan(ref[oi])) ? (double)NAN : fmin(ref[oi], v); break;
        case K_L2: ref[oi] += v * v; break;
        default: ref[oi] += v; break;
        }
    }
    for (size_t j = 0; j < ny; j++) {
        if (kind == K_MEAN) ref[j] = x->dtype == PTQ_F32 ? ref[j] / (double)count : trunc(ref[j] / (double)count);
        if (kind == K_MEAN && count) abssum[j] /= (double)count;
        if (kind == K_L2) ref[j] = sqrt(ref[j]);
    }
}

/* Runs one reduction of x over red[] (n_axes listed in axes order) and checks it against
 * the reference; mode 0: axes attribute (opset 13, ReduceSum 11), 1: axes input (opset 18). */
static int reduce_case(const ptq_tensor *x, int kind, const int64_t *axes, int n_axes, int keep, int mode)
{
    int red[PTQ_MAX_RANK] = {0}, bad = 0;
    for (int i = 0; i < n_axes; i++) red[axes[i] < 0 ? axes[i] + x->rank : axes[i]] = 1;
    if (n_axes == 0)
        for (int d = 0; d < x->rank; d++) red[d] = 1;
    int64_t yd[PTQ_MAX_RANK];
    int yr = 0;
    for (int d = 0; d < x->rank; d++)
        if (!red[d]) yd[yr++] = x->dims[d];
        else if (keep) yd[yr++] = 1;
    size_t ny = 1;
    for (int d = 0; d < yr; d++) ny *= (size_t)yd[d];
    double *ref = malloc((ny ? ny : 1) * sizeof *ref), *abssum = malloc((ny ? ny : 1) * sizeof *abssum);
    if (!ref || !abssum) abort();
    reduce_ref(x, red, kind, ref, abssum, ny);
    ptq_tensor ax = tensor_i64(n_axes, axes);
    ptq_tensor o[2][1];
    for (int t = 0; t < 2; t++) {
        op_node r = {.op = reduce_ops[kind], .n_in = 1, .in = {x, &ax}, .nthreads = t ? 3 : 1};
        if (mode == 0) {
            r.opset = kind == K_SUM ? 11 : 13;
            if (n_axes) add_ints(&r, "axes", axes, n_axes);
        } else {
            r.opset = 18;
            r.n_in = 2;
            r.const_mask = 2;
        }
        if (keep == 0 || t) add_int(&r, "keepdims", keep);
        ptq_status st = op_run(&r, o[t]);
        if (st != PTQ_OK) {
            printf("    %s\n", ptq_last_error());
            bad++;
        }
    }
    if (!bad) {
        EXPECT_EQ_INT(o[0][0].rank, yr);
        EXPECT_EQ_INT(o[0][0].dtype, x->dtype);
        for (int d = 0; d < yr && d < o[0][0].rank; d++) EXPECT_EQ_INT(o[0][0].dims[d], yd[d]);
        if (x->dtype == PTQ_F32) {
            /* Max, Min exact; sums: float32 rounding grows with the magnitudes summed */
            int exact = kind == K_MAX || kind == K_MIN;
            for (size_t j = 0; j < ny; j++) {
                double v = (double)((const float *)o[0][0].data)[j];
                double atol = exact ? 0 : 1e-5 + 5e-8 * abssum[j];
                if (!test_close_(v, ref[j], atol, exact ? 0 : 1e-5)) {
                    if (bad < 3) printf("    %s: element %zu = %.9g, expected %.9g\n", reduce_ops[kind], j, v, ref[j]);
                    bad++;
                }
            }
        } else {
            for (size_t j = 0; j < ny; j++)
                if (ptq_tensor_get_f64(&o[0][0], j) != ref[j]) {
                    if (bad < 3)
                        printf("    %s: element %zu = %.17g, expected %.17g\n", reduce_ops[kind], j,
                               ptq_tensor_get_f64(&o[0][0], j), ref[j]);
                    bad++;
                }
        }
        if (!same_bits(&o[0][0], &o[1][0])) {
            printf("    1 and 3 threads differ\n");
            bad++;
        }
    }
    if (bad) {
        print_shape("X", x);
        printf("    %s %s keepdims %d mode %d axes", reduce_ops[kind], ptq_dtype_name(x->dtype), keep, mode);
        for (int i = 0; i < n_axes; i++) printf(" %lld", (long long)axes[i]);
        printf("\n");
    }
    free_outs(o[0], 1);
    free_outs(o[1], 1);
    ptq_tensor_free(&ax);
    free(ref);
    free(abssum);
    return bad;
}

TEST(reduce_random_grid)
{
    int bad = 0;
    for (int it = 0; it < 600 && bad < 5; it++) {
        int rank = (int)irand(1, 5);
        int64_t dims[5];
        for (int d = 0; d < rank; d++) dims[d] = irand(0, 3) == 0 ? 1 : irand(2, 9);
        ptq_tensor x = tensor_rand(rank, dims, -4, 4);
        int64_t axes[5];
        int n_axes = 0;
        for (int d = 0; d < rank; d++)
            if (rnd() % 2) axes[n_axes++] = rnd() % 2 ? d : d - rank;
        for (int i = n_axes - 1; i > 0; i--) { /* any order */
            int j = (int)irand(0, i);
            int64_t t = axes[i];
            axes[i] = axes[j];
            axes[j] = t;
        }
        bad += reduce_case(&x, (int)irand(0, 4), axes, n_axes, (int)irand(0, 1), (int)irand(0, 1)) != 0;
        ptq_tensor_free(&x);
    }
    EXPECT_EQ_INT(bad, 0);
}

/* Long rows and columns: the segment and the row kernels, chunked over threads. */
TEST(reduce_large)
{
    static const int64_t shapes[][4] = {{2, 3, 1000}, {2, 1000, 7}, {3, 4, 50, 333}, {3, 3, 600, 2}};
    static const int64_t axes_sets[][3] = {{1, -1}, {1, 0}, {2, 0, 2}, {1, 1}, {2, 1, 2}, {1, 0}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int rank = (int)shapes[si][0];
        ptq_tensor x = tensor_rand(rank, &shapes[si][1], -4, 4);
        for (size_t ai = 0; ai < sizeof axes_sets / sizeof axes_sets[0]; ai++) {
            int n = (int)axes_sets[ai][0];
            int ok = 1;
            for (int i = 0; i < n; i++) ok &= axes_sets[ai][1 + i] < rank;
            if (!ok) continue;
            for (int kind = 0; kind < 5; kind++) EXPECT_EQ_INT(reduce_case(&x, kind, &axes_sets[ai][1], n, 1, 1), 0);
        }
        ptq_tensor_free(&x);
    }
}

TEST(reduce_int)
{
    int64_t dims[3] = {3, 4, 5};
    for (int is64 = 0; is64 < 2; is64++) {
        ptq_tensor x = tensor_new(is64 ? PTQ_I64 : PTQ_I32, 3, dims);
        for (size_t i = 0; i < 60; i++) {
            int64_t v = irand(-1000, 1000);
            if (is64) ((int64_t *)x.data)[i] = v * 1000000007LL;
            else ((int32_t *)x.data)[i] = (int32_t)v;
        }
        int64_t a1[1] = {1}, a2[2] = {0, 2};
        for (int kind = 0; kind < 4; kind++) {
            EXPECT_EQ_INT(reduce_case(&x, kind, a1, 1, 1, 0), 0);
            EXPECT_EQ_INT(reduce_case(&x, kind, a2, 2, 0, 1), 0);
            EXPECT_EQ_INT(reduce_case(&x, kind, a2, 0, 0, 1), 0);
        }
        ptq_tensor outs[1];
        op_node r = {.op = "ReduceL2", .opset = 13, .n_in = 1, .in = {&x}};
        EXPECT_EQ_INT(op_run(&r, outs), PTQ_ERR_UNSUPPORTED);
        ptq_tensor_free(&x);
    }
}

/* Empty axes (all, or Y = X with noop_with_empty_axes), size-1 and zero-size dims, NaN. */
TEST(reduce_edges)
{
    int64_t dims[3] = {2, 3, 4};
    ptq_tensor x = tensor_rand(3, dims, -2, 2);
    ptq_tensor empty_axes = tensor_i64(0, NULL);
    ptq_tensor o[1];
    op_node r = {.op = "ReduceSum", .opset = 13, .n_in = 2, .in = {&x, &empty_axes}};
    add_int(&r, "noop_with_empty_axes", 1);
    EXPECT_EQ_INT(op_run(&r, o), PTQ_OK); /* axes not constant but empty: fine */
    EXPECT(same_bits(o, &x));
    free_outs(o, 1);
    r.in[1] = NULL;
    add_int(&r, "noop_with_empty_axes", 1);
    EXPECT_EQ_INT(op_run(&r, o), PTQ_OK);
    EXPECT(same_bits(o, &x));
    free_outs(o, 1);
    for (int kind = 0; kind < 5; kind++) EXPECT_EQ_INT(reduce_case(&x, kind, NULL, 0, 0, 1), 0);

    /* only size-1 dims reduced: a copy (L2: |x|) */
    int64_t d1[4] = {2, 1, 3, 1}, a13[2] = {1, 3};
    ptq_tensor x1 = tensor_rand(4, d1, -2, 2);
    for (int kind = 0; kind < 5; kind++) {
        EXPECT_EQ_INT(reduce_case(&x1, kind, a13, 2, 0, 0), 0);
        EXPECT_EQ_INT(reduce_case(&x1, kind, a13, 2, 1, 1), 0);
    }
    /* zero-size reduced dim: identities (Mean NaN); zero-size kept dim: empty output */
    int64_t d0[3] = {2, 0, 3}, a1[1] = {1}, a2[1] = {2};
    ptq_tensor x0 = tensor_new(PTQ_F32, 3, d0);
    for (int kind = 0; kind < 5; kind++) {
        EXPECT_EQ_INT(reduce_case(&x0, kind, a1, 1, 1, 1), 0);
        EXPECT_EQ_INT(reduce_case(&x0, kind, a2, 1, 0, 1), 0);
    }
    /* NaN propagates through Max/Min (and Sum, L2), in both kernels */
    ((float *)x.data)[5] = NAN;
    int64_t alast[1] = {2}, afirst[1] = {0};
    for (int kind = 0; kind < 5; kind++) {
        EXPECT_EQ_INT(reduce_case(&x, kind, alast, 1, 1, 0), 0);
        EXPECT_EQ_INT(reduce_case(&x, kind, afirst, 1, 1, 0), 0);
    }
    ptq_tensor_free(&x0);
    ptq_tensor_free(&x1);
    ptq_tensor_free(&empty_axes);
    ptq_tensor_free(&x);
}

TEST(reduce_errors)
{
    int64_t dims[3] = {2, 3, 4}, dup[2] = {1, -2}, out_of_range[1] = {3}, one[1] = {1};
    ptq_tensor x = tensor_rand(3, dims, -1, 1), ax = tensor_i64(1, one);
    ptq_tensor o[1];
    op_node r = {.op = "ReduceMean", .opset = 13, .n_in = 1, .in = {&x, &ax}};
    add_ints(&r, "axes", dup, 2);
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "ReduceMean 'n1': axis -2 repeated") != NULL);
    add_ints(&r, "axes", out_of_range, 1);
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_SHAPE);
    add_int(&r, "keepdims", 2);
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_FORMAT);
    r.opset = 18;
    r.n_in = 2;
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_UNSUPPORTED); /* axes input not constant */
    EXPECT(strstr(ptq_last_error(), "not constant") != NULL);
    add_ints(&r, "axes", one, 1);
    r.const_mask = 2;
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_FORMAT); /* both attribute and input */
    ptq_tensor axf = tensor_rand(1, one, 0, 1);
    r.in[1] = &axf;
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_FORMAT);
    ptq_tensor xs = tensor_new(PTQ_I8, 3, dims);
    r.in[0] = &xs;
    r.n_in = 1;
    EXPECT_EQ_INT(op_run(&r, o), PTQ_ERR_UNSUPPORTED);
    ptq_tensor_free(&xs);
    ptq_tensor_free(&axf);
    ptq_tensor_free(&ax);
    ptq_tensor_free(&x);
}

int main(void)
{
    op_test_seed(0xc0ffee11u);
    RUN(batch_normalization);
    RUN(batch_normalization_errors);
    RUN(instance_normalization);
    RUN(layer_normalization);
    RUN(softmax);
    RUN(reduce_random_grid);
    RUN(reduce_large);
    RUN(reduce_int);
    RUN(reduce_edges);
    RUN(reduce_errors);
    return test_summary();
}
