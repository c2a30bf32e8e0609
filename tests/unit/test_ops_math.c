/* test_ops_math.c: the ops of runtime/ops/logic.c, math.c, utility.c, normalize.c, loss.c,
 * qlinear.c, the newer reductions of reduce.c, runtime/kernels/trig.c, and the integer paths of
 * basic.c's Add/Sub/Mul/Div and Clip, run directly one node at a time, where the
 * ONNX node tests are thin: model-sized tensors (past the kernels' one-thread threshold) at
 * 1 and 3 threads (bit-identical), values the node tests never hold (ties of Round, Mod's
 * signs, saturating and NaN casts, float64 -> float16 in one rounding, LogSumExp of large
 * values, ArgMax ties and NaN), and the one-line error messages naming the node. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/opset.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "runtime/kernels/trig.h"
#include "runtime/op.h"
#include "tests/unit/graph_build.h"
#include "tests/unit/op_test.h"

static void free_all(ptq_tensor *t, int n)
{
    for (int i = 0; i < n; i++) ptq_tensor_free(&t[i]);
}

/* Runs a one-input op at 1 and 3 threads; both must succeed and agree bit for bit. */
static int same_at_1_and_3(op_node r, const char *what)
{
    ptq_tensor a[1], b[1];
    op_node r3 = r;
    r.nthreads = 1;
    r3.nthreads = 3;
    /* attributes are consumed by op_run: give r3 its own copies */
    for (int k = 0; k < r.n_attrs; k++) {
        ptq_attr *s = &r.attrs[k], *d = &r3.attrs[k];
        d->name = ptq_strdup(s->name);
        if (s->type == PTQ_ATTR_INTS) {
            d->ints = malloc(sizeof(int64_t) * (s->n ? s->n : 1));
            if (!d->ints) abort();
            memcpy(d->ints, s->ints, sizeof(int64_t) * s->n);
        }
        if (s->type == PTQ_ATTR_STRING) d->s = ptq_strdup(s->s);
    }
    int ok = op_run(&r, a) == PTQ_OK && op_run(&r3, b) == PTQ_OK && same_bits(&a[0], &b[0]);
    if (!ok) printf("    %s: 1 and 3 threads differ or fail (%s)\n", what, ptq_last_error());
    ptq_tensor_free(&a[0]);
    ptq_tensor_free(&b[0]);
    return ok;
}

/* ------------------------------------------------------------ thread-count invariance on model-sized tensors */

TEST(threads_bit_identical)
{
    int64_t xd[4] = {2, 16, 48, 64}, bd[4] = {1, 16, 1, 64}; /* 98304 elements */
    ptq_tensor x = tensor_rand(4, xd, -4, 4), b = tensor_rand(4, bd, -4, 4);
    op_node r = {.op = "GreaterOrEqual", .n_in = 2, .in = {&x, &b}};
    EXPECT(same_at_1_and_3(r, "GreaterOrEqual"));
    r = (op_node){.op = "Sin", .n_in = 1, .in = {&x}};
    EXPECT(same_at_1_and_3(r, "Sin"));
    r = (op_node){.op = "Atanh", .n_in = 1, .in = {&b}};
    EXPECT(same_at_1_and_3(r, "Atanh"));
    static const char *reds[] = {"ReduceLogSumExp", "ReduceL1", "ReduceProd", "ReduceSumSquare", "ReduceLogSum"};
    int64_t ax[2] = {1, 3};
    for (int i = 0; i < 5; i++) {
        r = (op_node){.op = reds[i], .opset = 13, .n_in = 1, .in = {&x}};
        add_ints(&r, "axes", ax, 1 + i % 2);
        EXPECT(same_at_1_and_3(r, reds[i]));
    }
    r = (op_node){.op = "ArgMax", .n_in = 1, .in = {&x}};
    add_int(&r, "axis", 2);
    EXPECT(same_at_1_and_3(r, "ArgMax"));
    r = (op_node){.op = "LRN", .n_in = 1, .in = {&x}};
    add_int(&r, "size", 5);
    EXPECT(same_at_1_and_3(r, "LRN"));
    r = (op_node){.op = "MeanVarianceNormalization", .n_in = 1, .in = {&x}};
    EXPECT(same_at_1_and_3(r, "MeanVarianceNormalization"));
    int64_t dd[3] = {64, 6, 6};
    ptq_tensor m = tensor_rand(3, dd, -2, 2);
    r = (op_node){.op = "Det", .n_in = 1, .in = {&m}};
    EXPECT(same_at_1_and_3(r, "Det"));
    ptq_tensor_free(&x);
    ptq_tensor_free(&b);
    ptq_tensor_free(&m);
}

/* ------------------------------------------------------------ runtime/kernels/trig.c against libm */

/* Random double: uniform mantissa, exponent in [emin, emax], random sign. */
static double rand_double(int emin, int emax)
{
    double m = 1.0 + (double)rnd() * 0x1p-32 + (double)rnd() * 0x1p-64;
    return ldexp(rnd() & 1 ? -m : m, (int)irand(emin, emax));
}

/* |got - want| in units of want's last place (0 when both are NaN or equal). */
static double ulps(double got, double want)
{
    if (got == want || (got != got && want != want)) return 0;
    if (got != got || want != want) return INFINITY;
    int e;
    frexp(want, &e);
    return fabs(got - want) / ldexp(1.0, (e < -1021 ? -1021 : e) - 53);
}

/* Accuracy measured over 200000 samples per range: sin, cos 2 ulps, tan 3, atan 4, asin 6,
 * acos 5 (double); rounded to float, never a mismatch with libm. */
TEST(trig_kernels)
{
    static const struct {
        const char *name;
        double (*mine)(double), (*ref)(double);
        int emin, emax;
        double max_ulps;
    } fs[] = {{"sin", ptq_sin, sin, -30, 1023, 2.5},  {"cos", ptq_cos, cos, -30, 1023, 2.5},
              {"tan", ptq_tan, tan, -30, 1023, 3.5},  {"sin", ptq_sin, sin, -3, 4, 2.5},
              {"cos", ptq_cos, cos, -3, 4, 2.5},      {"tan", ptq_tan, tan, -3, 4, 3.5},
              {"atan", ptq_atan, atan, -40, 1023, 4.5}, {"asin", ptq_asin, asin, -40, -1, 6.5},
              {"acos", ptq_acos, acos, -40, -1, 5.5}};
    for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
        int bad = 0, float_diff = 0;
        for (int i = 0; i < 20000; i++) {
            double x = rand_double(fs[k].emin, fs[k].emax), g = fs[k].mine(x), w = fs[k].ref(x);
            if (ulps(g, w) > fs[k].max_ulps) {
                if (bad < 3) printf("    %s(%.17g) = %.17g, libm %.17g\n", fs[k].name, x, g, w);
                bad++;
            }
            float xf = (float)x;
            if (isfinite(xf)) float_diff += (float)fs[k].mine((double)xf) != (float)fs[k].ref((double)xf);
        }
        EXPECT_EQ_INT(bad, 0);
        EXPECT_EQ_INT(float_diff, 0);
    }
    static const double xs[] = {0x1p1023, 1e22, 3.141592653589793, 1.5707963267948966, -0x1.fffffep127, 1e-310, -0.0};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        EXPECT(ulps(ptq_sin(xs[i]), sin(xs[i])) <= 2.5);
        EXPECT(ulps(ptq_cos(xs[i]), cos(xs[i])) <= 2.5);
        EXPECT(ulps(ptq_tan(xs[i]), tan(xs[i])) <= 3.5);
    }
    EXPECT(signbit(ptq_sin(-0.0)) && signbit(ptq_tan(-0.0)) && signbit(ptq_atan(-0.0)) && signbit(ptq_asin(-0.0)));
    EXPECT(isnan(ptq_sin(INFINITY)) && isnan(ptq_cos(-INFINITY)) && isnan(ptq_asin(1.5)) && isnan(ptq_acos(-1.0000001)));
    EXPECT(ptq_atan(INFINITY) == atan(INFINITY) && ptq_asin(1.0) == asin(1.0) && ptq_acos(-1.0) == acos(-1.0));
    EXPECT(ptq_acos(1.0) == 0.0);
}

/* ------------------------------------------------------------ unary float functions against libm in double */

TEST(unary_against_libm)
{
    static const struct {
        const char *op;
        double (*f)(double);
        float lo, hi;
    } fs[] = {{"Sinh", sinh, -80, 80},   {"Cosh", cosh, -80, 80},   {"Asinh", asinh, -1e6f, 1e6f},
              {"Acosh", acosh, 1, 1e6f}, {"Atanh", atanh, -1, 1},   {"Asinh", asinh, -1e-3f, 1e-3f},
              {"Sinh", sinh, -1e-3f, 1e-3f}, {"Atanh", atanh, -1e-4f, 1e-4f}, {"Tan", tan, -1.5f, 1.5f}};
    int64_t n = 4096;
    for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
        ptq_tensor x = tensor_rand(1, &n, fs[k].lo, fs[k].hi), y[1];
        double *ref = malloc(sizeof(double) * (size_t)n);
        if (!ref) abort();
        for (int64_t i = 0; i < n; i++) ref[i] = fs[k].f((double)((float *)x.data)[i]);
        op_node r = {.op = fs[k].op, .n_in = 1, .in = {&x}};
        EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
        EXPECT_EQ_INT(compare_f64(&y[0], ref, (size_t)n, 1e-37, 2e-7, fs[k].op), 0);
        ptq_tensor_free(&y[0]);
        ptq_tensor_free(&x);
        free(ref);
    }
    /* Mish = x tanh(log(1 + e^x)); Celu with alpha 2 = max(0, x) + min(0, 2 (e^(x/2) - 1)) */
    ptq_tensor x = tensor_rand(1, &n, -30, 30), y[1];
    double *ref = malloc(sizeof(double) * (size_t)n);
    if (!ref) abort();
    for (int64_t i = 0; i < n; i++) {
        double v = (double)((float *)x.data)[i];
        ref[i] = v * tanh(log1p(exp(v)));
    }
    op_node r = {.op = "Mish", .n_in = 1, .in = {&x}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    EXPECT_EQ_INT(compare_f64(&y[0], ref, (size_t)n, 1e-37, 2e-7, "Mish"), 0);
    ptq_tensor_free(&y[0]);
    for (int64_t i = 0; i < n; i++) {
        double v = (double)((float *)x.data)[i];
        ref[i] = v > 0 ? v : 2.0 * expm1(v / 2.0);
    }
    r = (op_node){.op = "Celu", .n_in = 1, .in = {&x}};
    add_float(&r, "alpha", 2.0f);
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    EXPECT_EQ_INT(compare_f64(&y[0], ref, (size_t)n, 1e-37, 2e-7, "Celu"), 0);
    ptq_tensor_free(&y[0]);
    ptq_tensor_free(&x);
    free(ref);
}

/* ------------------------------------------------------------ integer Add/Sub/Mul/Div wrap like their type; integer Clip */

TEST(integer_arithmetic_and_clip)
{
    int64_t d = 4;
    ptq_tensor a = tensor_new(PTQ_U8, 1, &d), b = tensor_new(PTQ_U8, 1, &d), y[1];
    static const uint8_t av[4] = {250, 3, 200, 7}, bv[4] = {10, 5, 2, 0};
    static const uint8_t want[4][4] = {{4, 8, 202, 7}, {240, 254, 198, 7}, {196, 15, 144, 0}, {25, 0, 100, 0}};
    memcpy(a.data, av, 4);
    memcpy(b.data, bv, 4);
    static const char *ops[4] = {"Add", "Sub", "Mul", "Div"};
    for (int o = 0; o < 4; o++) {
        op_node r = {.op = ops[o], .n_in = 2, .in = {&a, &b}};
        EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
        for (int i = 0; i < 4; i++) EXPECT_EQ_INT(((uint8_t *)y[0].data)[i], want[o][i]);
        ptq_tensor_free(&y[0]);
    }
    ptq_tensor p = tensor_new(PTQ_I64, 1, &d), q = tensor_new(PTQ_I64, 1, &d);
    static const int64_t pv[4] = {INT64_MIN, INT64_MAX, -7, 7}, qv[4] = {-1, 2, 2, -1};
    static const int64_t dv[4] = {INT64_MIN, INT64_MAX / 2, -3, -7}, sv[4] = {INT64_MAX, INT64_MIN + 1, -5, 6};
    memcpy(p.data, pv, sizeof pv);
    memcpy(q.data, qv, sizeof qv);
    op_node r = {.op = "Div", .n_in = 2, .in = {&p, &q}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK); /* INT64_MIN / -1 wraps instead of trapping */
    for (int i = 0; i < 4; i++) EXPECT_EQ_INT(((int64_t *)y[0].data)[i], dv[i]);
    ptq_tensor_free(&y[0]);
    r = (op_node){.op = "Add", .n_in = 2, .in = {&p, &q}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    for (int i = 0; i < 4; i++) EXPECT_EQ_INT(((int64_t *)y[0].data)[i], sv[i]);
    ptq_tensor_free(&y[0]);
    int64_t one = 1;
    ptq_tensor x8 = tensor_new(PTQ_I8, 1, &d), lo = tensor_new(PTQ_I8, 0, &one), flo = tensor_new(PTQ_F32, 0, &one);
    static const int8_t xv[4] = {-128, -2, 5, 127};
    memcpy(x8.data, xv, 4);
    ((int8_t *)lo.data)[0] = -3;
    r = (op_node){.op = "Clip", .n_in = 2, .in = {&x8, &lo}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    static const int8_t cv[4] = {-3, -2, 5, 127};
    for (int i = 0; i < 4; i++) EXPECT_EQ_INT(((int8_t *)y[0].data)[i], cv[i]);
    ptq_tensor_free(&y[0]);
    r = (op_node){.op = "Clip", .n_in = 2, .in = {&x8, &flo}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "Clip 'n1': input 1 is float32, the input is int8") != NULL);
    ptq_tensor *fr[] = {&a, &b, &p, &q, &x8, &lo, &flo};
    for (int i = 0; i < 7; i++) ptq_tensor_free(fr[i]);
}

/* ------------------------------------------------------------ broadcasting walks of Where and the comparisons */

TEST(where_compare_broadcast)
{
    int64_t cd[3] = {2, 1, 4}, xd[2] = {3, 1}, one = 1;
    ptq_tensor c = tensor_new(PTQ_BOOL, 3, cd), x = tensor_new(PTQ_I64, 2, xd), yv = tensor_new(PTQ_I64, 0, &one), y[1];
    for (int i = 0; i < 8; i++) ((uint8_t *)c.data)[i] = (uint8_t)(i % 3 == 0);
    for (int i = 0; i < 3; i++) ((int64_t *)x.data)[i] = 10 + i;
    ((int64_t *)yv.data)[0] = -1;
    op_node r = {.op = "Where", .n_in = 3, .in = {&c, &x, &yv}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    EXPECT(y[0].rank == 3 && y[0].dims[0] == 2 && y[0].dims[1] == 3 && y[0].dims[2] == 4);
    int bad = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                bad += ((int64_t *)y[0].data)[(i * 3 + j) * 4 + k] != (((i * 4 + k) % 3 == 0) ? 10 + j : -1);
    EXPECT_EQ_INT(bad, 0);
    ptq_tensor_free(&y[0]);
    /* int64 values beyond 2^53 compare exactly; [3, 1] against [1, 4] */
    int64_t ad[2] = {3, 1}, bd[2] = {1, 4};
    ptq_tensor a = tensor_new(PTQ_I64, 2, ad), b = tensor_new(PTQ_I64, 2, bd);
    for (int i = 0; i < 3; i++) ((int64_t *)a.data)[i] = (INT64_C(1) << 60) + i;
    for (int i = 0; i < 4; i++) ((int64_t *)b.data)[i] = (INT64_C(1) << 60) + i - 1;
    static const char *ops[3] = {"Equal", "LessOrEqual", "Greater"};
    for (int o = 0; o < 3; o++) {
        r = (op_node){.op = ops[o], .n_in = 2, .in = {&a, &b}};
        EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
        bad = 0;
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 4; k++) {
                int64_t u = i, v = k - 1;
                int want = o == 0 ? u == v : o == 1 ? u <= v : u > v;
                bad += ((uint8_t *)y[0].data)[i * 4 + k] != want;
            }
        EXPECT_EQ_INT(bad, 0);
        ptq_tensor_free(&y[0]);
    }
    ptq_tensor *fr[] = {&c, &x, &yv, &a, &b};
    for (int i = 0; i < 5; i++) ptq_tensor_free(fr[i]);
}

/* ------------------------------------------------------------ reductions against double references */

TEST(reduce_log_sum_exp_large_values)
{
    int64_t xd[2] = {3, 300};
    ptq_tensor x = tensor_rand(2, xd, 80, 120); /* exp overflows float: needs the max shift */
    ((float *)x.data)[300] = -INFINITY;
    for (int i = 600; i < 900; i++) ((float *)x.data)[i] = -INFINITY; /* an all -inf row gives -inf */
    double ref[3];
    for (int r = 0; r < 3; r++) {
        double m = -INFINITY, s = 0;
        for (int i = 0; i < 300; i++) m = fmax(m, (double)((float *)x.data)[r * 300 + i]);
        for (int i = 0; i < 300 && isfinite(m); i++) s += exp((double)((float *)x.data)[r * 300 + i] - m);
        ref[r] = isfinite(m) ? m + log(s) : m;
    }
    op_node n = {.op = "ReduceLogSumExp", .n_in = 2, .in = {&x, NULL}};
    int64_t axis = 1;
    ptq_tensor ax = tensor_i64(1, &axis), y[1];
    n.in[1] = &ax;
    n.const_mask = 2;
    add_int(&n, "keepdims", 0);
    EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
    EXPECT_EQ_INT(y[0].rank, 1);
    EXPECT_EQ_INT(compare_f64(&y[0], ref, 3, 1e-5, 1e-6, "ReduceLogSumExp"), 0);
    ptq_tensor_free(&y[0]);
    ptq_tensor_free(&x);
    ptq_tensor_free(&ax);
}

TEST(reduce_prod_l1_sumsq_int)
{
    int64_t xd[2] = {2, 3}, v[6] = {-2, 3, 4, 1, -1, 5};
    ptq_tensor x = tensor_new(PTQ_I64, 2, xd), y[1];
    memcpy(x.data, v, sizeof v);
    static const char *ops[] = {"ReduceProd", "ReduceL1", "ReduceSumSquare"};
    static const int64_t want[3][2] = {{-24, -5}, {9, 7}, {29, 27}};
    int64_t axis = 1;
    for (int k = 0; k < 3; k++) {
        op_node n = {.op = ops[k], .opset = 13, .n_in = 1, .in = {&x}};
        add_ints(&n, "axes", &axis, 1);
        add_int(&n, "keepdims", 0);
        EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
        EXPECT_EQ_INT(((int64_t *)y[0].data)[0], want[k][0]);
        EXPECT_EQ_INT(((int64_t *)y[0].data)[1], want[k][1]);
        ptq_tensor_free(&y[0]);
    }
    ptq_tensor_free(&x);
    /* opset 18: Max and Min on uint8 and int8 */
    ptq_tensor u = tensor_new(PTQ_U8, 2, xd), s8 = tensor_new(PTQ_I8, 2, xd);
    static const uint8_t uv[6] = {200, 3, 255, 0, 1, 2};
    static const int8_t sv[6] = {-128, 5, 127, -3, -7, 0};
    memcpy(u.data, uv, 6);
    memcpy(s8.data, sv, 6);
    ptq_tensor ax = tensor_i64(1, &axis);
    op_node n = {.op = "ReduceMax", .n_in = 2, .in = {&u, &ax}, .const_mask = 2};
    EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
    EXPECT(y[0].dtype == PTQ_U8 && ((uint8_t *)y[0].data)[0] == 255 && ((uint8_t *)y[0].data)[1] == 2);
    ptq_tensor_free(&y[0]);
    n = (op_node){.op = "ReduceMin", .n_in = 2, .in = {&s8, &ax}, .const_mask = 2};
    EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
    EXPECT(y[0].dtype == PTQ_I8 && ((int8_t *)y[0].data)[0] == -128 && ((int8_t *)y[0].data)[1] == -7);
    ptq_tensor_free(&y[0]);
    n = (op_node){.op = "ReduceSum", .n_in = 2, .in = {&s8, &ax}, .const_mask = 2};
    EXPECT_EQ_INT(op_run(&n, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "ReduceSum 'n1': input is int8, supported: float32, float64, float16, int32, int64") != NULL);
    ptq_tensor_free(&u);
    ptq_tensor_free(&s8);
    ptq_tensor_free(&ax);
}

TEST(argmax_ties_and_nan)
{
    int64_t xd[2] = {3, 4};
    float v[12] = {1, 5, 5, 2, /* tie */ 3, NAN, 7, NAN, /* first NaN */ -1, -1, -1, -1};
    ptq_tensor x = tensor_new(PTQ_F32, 2, xd), y[1];
    memcpy(x.data, v, sizeof v);
    static const int64_t want[2][2][3] = {{{1, 1, 0}, {2, 1, 3}}, {{0, 1, 0}, {0, 1, 3}}}; /* [max/min][last][row] */
    for (int mn = 0; mn < 2; mn++)
        for (int last = 0; last < 2; last++) {
            op_node n = {.op = mn ? "ArgMin" : "ArgMax", .n_in = 1, .in = {&x}};
            add_int(&n, "axis", -1);
            add_int(&n, "select_last_index", last);
            EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
            EXPECT_EQ_INT(y[0].rank, 2);
            for (int r = 0; r < 3; r++) EXPECT_EQ_INT(((int64_t *)y[0].data)[r], want[mn][last][r]);
            ptq_tensor_free(&y[0]);
        }
    ptq_tensor_free(&x);
}

/* ------------------------------------------------------------ element-wise values */

TEST(round_half_to_even)
{
    float v[8] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4999998f, -2.5f, 1e30f};
    float want[8] = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, 2.0f, -2.0f, 1e30f};
    int64_t d = 8;
    ptq_tensor x = tensor_new(PTQ_F32, 1, &d), y[1];
    memcpy(x.data, v, sizeof v);
    op_node n = {.op = "Round", .n_in = 1, .in = {&x}};
    EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
    for (int i = 0; i < 8; i++) {
        EXPECT_NEAR(((float *)y[0].data)[i], want[i], 0, 0);
        EXPECT_EQ_INT(signbit(((float *)y[0].data)[i]) != 0, signbit(want[i]) != 0);
    }
    ptq_tensor_free(&y[0]);
    ptq_tensor_free(&x);
}

TEST(mod_signs)
{
    int64_t d = 6, a[6] = {7, -7, 7, -7, INT64_MIN, 0}, b[6] = {3, 3, -3, -3, -1, 5};
    int64_t py[6] = {1, 2, -2, -1, 0, 0}, c[6] = {1, -1, 1, -1, 0, 0};
    ptq_tensor ta = tensor_new(PTQ_I64, 1, &d), tb = tensor_new(PTQ_I64, 1, &d), y[1];
    memcpy(ta.data, a, sizeof a);
    memcpy(tb.data, b, sizeof b);
    for (int f = 0; f < 2; f++) {
        op_node n = {.op = "Mod", .n_in = 2, .in = {&ta, &tb}};
        add_int(&n, "fmod", f);
        EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
        for (int i = 0; i < 6; i++) EXPECT_EQ_INT(((int64_t *)y[0].data)[i], f ? c[i] : py[i]);
        ptq_tensor_free(&y[0]);
    }
    ((int64_t *)tb.data)[3] = 0;
    op_node n = {.op = "Mod", .n_in = 2, .in = {&ta, &tb}};
    EXPECT_EQ_INT(op_run(&n, y), PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "Mod 'n1': integer division by zero (element 3)") != NULL);
    ptq_tensor_free(&y[0]);
    ptq_tensor fa = tensor_rand(1, &d, -5, 5);
    n = (op_node){.op = "Mod", .n_in = 2, .in = {&fa, &fa}};
    EXPECT_EQ_INT(op_run(&n, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "Mod 'n1': fmod = 0 with float32 inputs") != NULL);
    ptq_tensor_free(&ta);
    ptq_tensor_free(&tb);
    ptq_tensor_free(&fa);
}

TEST(cast_edges)
{
    int64_t d = 6;
    float v[6] = {NAN, 300.7f, -300.7f, -1.9f, 1e20f, -1e20f};
    ptq_tensor x = tensor_new(PTQ_F32, 1, &d), y[1];
    memcpy(x.data, v, sizeof v);
    op_node n = {.op = "Cast", .n_in = 1, .in = {&x}};
    add_int(&n, "to", PTQ_I8);
    EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
    static const int8_t w8[6] = {0, 127, -128, -1, 127, -128};
    for (int i = 0; i < 6; i++) EXPECT_EQ_INT(((int8_t *)y[0].data)[i], w8[i]);
    ptq_tensor_free(&y[0]);
    n = (op_node){.op = "Cast", .n_in = 1, .in = {&x}};
    add_int(&n, "to", PTQ_I64);
    EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
    EXPECT_EQ_INT(((int64_t *)y[0].data)[4], INT64_MAX);
    EXPECT_EQ_INT(((int64_t *)y[0].data)[5], INT64_MIN);
    ptq_tensor_free(&y[0]);
    /* float64 -> float16 rounds once: 1 + 2^-11 + 2^-40 is just above a float16 tie, so it
     * rounds up; through float32 (1 + 2^-11 exactly, a tie) it would round down to 1 */
    int64_t one = 1;
    ptq_tensor xd = tensor_new(PTQ_F64, 1, &one);
    ((double *)xd.data)[0] = 1.0 + ldexp(1.0, -11) + ldexp(1.0, -40);
    n = (op_node){.op = "Cast", .n_in = 1, .in = {&xd}};
    add_int(&n, "to", PTQ_F16);
    EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
    EXPECT_EQ_INT(((uint16_t *)y[0].data)[0], 0x3c01);
    ptq_tensor_free(&y[0]);
    n = (op_node){.op = "Cast", .n_in = 1, .in = {&xd}};
    add_int(&n, "to", PTQ_STRING);
    EXPECT_EQ_INT(op_run(&n, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "Cast 'n1': cast from float64 to") != NULL);
    ptq_tensor_free(&x);
    ptq_tensor_free(&xd);
}

TEST(cumsum_exclusive_reverse)
{
    int64_t xd[2] = {2, 4}, axis = 1;
    float v[8] = {1, 2, 3, 4, 10, 20, 30, 40};
    static const float want[4][8] = {{1, 3, 6, 10, 10, 30, 60, 100},
                                     {0, 1, 3, 6, 0, 10, 30, 60},
                                     {10, 9, 7, 4, 100, 90, 70, 40},
                                     {9, 7, 4, 0, 90, 70, 40, 0}};
    ptq_tensor x = tensor_new(PTQ_F32, 2, xd), ax = tensor_i64(1, &axis), y[1];
    memcpy(x.data, v, sizeof v);
    for (int k = 0; k < 4; k++) {
        op_node n = {.op = "CumSum", .n_in = 2, .in = {&x, &ax}, .const_mask = 2};
        add_int(&n, "exclusive", k & 1);
        add_int(&n, "reverse", k >> 1);
        EXPECT_EQ_INT(op_run(&n, y), PTQ_OK);
        EXPECT_EQ_INT(compare_f32(y[0].data, want[k], 8, 0, 0, "CumSum"), 0);
        ptq_tensor_free(&y[0]);
    }
    op_node n = {.op = "CumSum", .n_in = 2, .in = {&x, &ax}}; /* axis not constant */
    EXPECT_EQ_INT(op_run(&n, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "CumSum 'n1': axis input is not constant") != NULL);
    ptq_tensor_free(&x);
    ptq_tensor_free(&ax);
}

/* ------------------------------------------------------------ SoftmaxCrossEntropyLoss on a segmentation-like shape */

TEST(softmax_cross_entropy_4d)
{
    int64_t xd[4] = {2, 5, 3, 4}, td[3] = {2, 3, 4}, c = 5;
    ptq_tensor x = tensor_rand(4, xd, -3, 3), w = tensor_rand(1, &c, 0.5f, 2), t = tensor_new(PTQ_I64, 3, td);
    int64_t *tv = t.data;
    for (int i = 0; i < 24; i++) tv[i] = i % 7 == 3 ? -1 : irand(0, 4);
    double num = 0, den = 0;
    for (int n = 0; n < 2; n++)
        for (int d = 0; d < 12; d++) {
            int64_t k = tv[n * 12 + d];
            if (k == -1) continue;
            double m = -INFINITY, s = 0;
            for (int j = 0; j < 5; j++) m = fmax(m, (double)((float *)x.data)[(n * 5 + j) * 12 + d]);
            for (int j = 0; j < 5; j++) s += exp((double)((float *)x.data)[(n * 5 + j) * 12 + d] - m);
            double lp = (double)((float *)x.data)[(n * 5 + k) * 12 + d] - m - log(s), wk = (double)((float *)w.data)[k];
            num += -lp * wk;
            den += wk;
        }
    double ref = num / den;
    ptq_tensor y[2];
    op_node r = {.op = "SoftmaxCrossEntropyLoss", .n_in = 3, .in = {&x, &t, &w}, .n_out = 2, .want = {1, 1}};
    add_int(&r, "ignore_index", -1);
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    EXPECT_EQ_INT(y[0].rank, 0);
    EXPECT_EQ_INT(compare_f64(&y[0], &ref, 1, 1e-6, 1e-6, "SoftmaxCrossEntropyLoss"), 0);
    EXPECT(ptq_shape_equal(&y[1], &x));
    free_all(y, 2);
    tv[1] = 5; /* outside [0, C) and not ignore_index */
    r = (op_node){.op = "NegativeLogLikelihoodLoss", .n_in = 2, .in = {&x, &t}};
    add_str(&r, "reduction", "sum");
    add_int(&r, "ignore_index", -1);
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "NegativeLogLikelihoodLoss 'n1': target 5 at element 1 is outside [0, 5)") != NULL);
    ptq_tensor_free(&y[0]);
    r = (op_node){.op = "NegativeLogLikelihoodLoss", .n_in = 2, .in = {&x, &t}}; /* -1 is a class without ignore_index */
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "target 5 at element 1") != NULL);
    ptq_tensor_free(&y[0]);
    r = (op_node){.op = "NegativeLogLikelihoodLoss", .n_in = 2, .in = {&x, &t}};
    add_str(&r, "reduction", "avg");
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "reduction 'avg', expected none, sum or mean") != NULL);
    ptq_tensor_free(&x);
    ptq_tensor_free(&w);
    ptq_tensor_free(&t);
}

/* ------------------------------------------------------------ MatMulInteger: batch, per-column zero point */

TEST(matmul_integer_per_column)
{
    int64_t ad[3] = {2, 3, 8}, bd[2] = {8, 4}, four = 4, one = 1;
    ptq_tensor a = tensor_new(PTQ_U8, 3, ad), b = tensor_new(PTQ_I8, 2, bd);
    for (int i = 0; i < 48; i++) ((uint8_t *)a.data)[i] = (uint8_t)irand(0, 255);
    for (int i = 0; i < 32; i++) ((int8_t *)b.data)[i] = (int8_t)irand(-128, 127);
    ptq_tensor az = tensor_new(PTQ_U8, 0, &one), bz = tensor_new(PTQ_I8, 1, &four), y[1];
    ((uint8_t *)az.data)[0] = 128;
    for (int j = 0; j < 4; j++) ((int8_t *)bz.data)[j] = (int8_t)(j - 2);
    op_node m = {.op = "MatMulInteger", .n_in = 4, .in = {&a, &b, &az, &bz}};
    EXPECT_EQ_INT(op_run(&m, y), PTQ_OK);
    EXPECT_EQ_INT(y[0].rank, 3);
    int bad = 0;
    for (int bt = 0; bt < 2; bt++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                int64_t acc = 0;
                for (int k = 0; k < 8; k++)
                    acc += (int64_t)(((uint8_t *)a.data)[(bt * 3 + i) * 8 + k] - 128) * (((int8_t *)b.data)[k * 4 + j] - (j - 2));
                bad += ((int32_t *)y[0].data)[(bt * 3 + i) * 4 + j] != acc;
            }
    EXPECT_EQ_INT(bad, 0);
    ptq_tensor_free(&y[0]);
    ptq_tensor a2 = tensor_new(PTQ_U8, 2, (int64_t[2]){3, 7});
    m = (op_node){.op = "MatMulInteger", .n_in = 2, .in = {&a2, &b}};
    EXPECT_EQ_INT(op_run(&m, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "MatMulInteger 'n1': A has K = 7, B has 8") != NULL);
    ptq_tensor *fr[] = {&a, &b, &az, &bz, &a2};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) ptq_tensor_free(fr[i]);
}

/* ------------------------------------------------------------ Hardmax through the opset upgrade */

/* Plans g for x and copies output 0 into *y. */
static ptq_status plan_run_copy(const ptq_graph *g, const ptq_tensor *x, ptq_tensor *y)
{
    ptq_input_shape sh = {.name = "x", .rank = x->rank};
    memcpy(sh.dims, x->dims, sizeof sh.dims);
    ptq_plan_options opt = ptq_plan_defaults();
    ptq_plan *p = NULL;
    ptq_status st = ptq_plan_create(g, &sh, 1, &opt, &p);
    if (st == PTQ_OK) st = ptq_plan_run(p, x, 1);
    if (st == PTQ_OK) st = ptq_tensor_copy(y, ptq_plan_output(p, 0, NULL));
    ptq_plan_destroy(p);
    return st;
}

/* Hardmax below opset 13 takes one maximum per row of the input coerced to 2-D at axis;
 * the upgrade to 13 must keep that (Flatten, Hardmax over the last axis, Reshape). */
TEST(hardmax_opset_upgrade)
{
    int64_t dims[3] = {2, 3, 4};
    ptq_graph *g = gb_graph(3, dims);
    g->opsets[0].version = 11;
    int n = gb_node(g, "h", "Hardmax", (const char *const[]){"x"}, 1, "y");
    gb_int_attr(g, n, "axis", 1);
    gb_output(g, "y");
    ptq_tensor x = tensor_rand(3, dims, -1, 1), y11, y13;
    memset(&y11, 0, sizeof y11);
    memset(&y13, 0, sizeof y13);
    EXPECT_EQ_INT(plan_run_copy(g, &x, &y11), PTQ_OK);
    int ones[2] = {0, 0};
    for (int i = 0; i < 24; i++) ones[i / 12] += ((float *)y11.data)[i] == 1.0f;
    EXPECT(ones[0] == 1 && ones[1] == 1);
    int changed = 0;
    EXPECT_EQ_INT(quant_upgrade_opset(g, 13, &changed), PTQ_OK);
    EXPECT_EQ_INT(changed, 1);
    EXPECT_EQ_INT(plan_run_copy(g, &x, &y13), PTQ_OK);
    EXPECT(same_bits(&y11, &y13));
    ptq_tensor_free(&x);
    ptq_tensor_free(&y11);
    ptq_tensor_free(&y13);
    ptq_graph_destroy(g);
}

/* ------------------------------------------------------------ ConvInteger: groups, strides, dilations, pads */

TEST(conv_integer_geometry)
{
    /* x [2, 4, 7, 9] uint8 zp 3, w [6, 2, 3, 2] int8 per-channel zp, group 2, strides (2, 1),
     * dilations (1, 2), pads (1, 0, 2, 1): against a loop written here */
    int64_t xd[4] = {2, 4, 7, 9}, wd[4] = {6, 2, 3, 2}, six = 6, one = 1;
    ptq_tensor x = tensor_new(PTQ_U8, 4, xd), w = tensor_new(PTQ_I8, 4, wd), xz = tensor_new(PTQ_U8, 0, &one),
               wz = tensor_new(PTQ_I8, 1, &six), y[1];
    for (size_t i = 0; i < ptq_tensor_numel(&x); i++) ((uint8_t *)x.data)[i] = (uint8_t)irand(0, 255);
    for (size_t i = 0; i < ptq_tensor_numel(&w); i++) ((int8_t *)w.data)[i] = (int8_t)irand(-128, 127);
    ((uint8_t *)xz.data)[0] = 3;
    for (int m = 0; m < 6; m++) ((int8_t *)wz.data)[m] = (int8_t)(m - 3);
    for (int threads = 1; threads <= 3; threads += 2) {
        op_node r = {.op = "ConvInteger", .n_in = 4, .in = {&x, &w, &xz, &wz}, .nthreads = threads};
        add_int(&r, "group", 2);
        add_ints(&r, "strides", (const int64_t[]){2, 1}, 2);
        add_ints(&r, "dilations", (const int64_t[]){1, 2}, 2);
        add_ints(&r, "pads", (const int64_t[]){1, 0, 2, 1}, 4);
        EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
        int64_t OH = (7 + 1 + 2 - 3) / 2 + 1, OW = (9 + 0 + 1 - 3) / 1 + 1;
        EXPECT(y[0].rank == 4 && y[0].dims[1] == 6 && y[0].dims[2] == OH && y[0].dims[3] == OW);
        int bad = 0;
        for (int n = 0; n < 2; n++)
            for (int m = 0; m < 6; m++)
                for (int oh = 0; oh < OH; oh++)
                    for (int ow = 0; ow < OW; ow++) {
                        int64_t acc = 0;
                        for (int c = 0; c < 2; c++)
                            for (int kh = 0; kh < 3; kh++)
                                for (int kw = 0; kw < 2; kw++) {
                                    int ih = oh * 2 - 1 + kh, iw = ow - 0 + kw * 2, ch = (m / 3) * 2 + c;
                                    if (ih < 0 || ih >= 7 || iw < 0 || iw >= 9) continue;
                                    acc += (int64_t)(((uint8_t *)x.data)[((n * 4 + ch) * 7 + ih) * 9 + iw] - 3) *
                                           (((int8_t *)w.data)[((m * 2 + c) * 3 + kh) * 2 + kw] - (m - 3));
                                }
                        bad += ((int32_t *)y[0].data)[((n * 6 + m) * OH + oh) * OW + ow] != acc;
                    }
        EXPECT_EQ_INT(bad, 0);
        ptq_tensor_free(&y[0]);
    }
    ptq_tensor *fr[] = {&x, &w, &xz, &wz};
    for (int i = 0; i < 4; i++) ptq_tensor_free(fr[i]);
}

/* ------------------------------------------------------------ GroupNormalization (opset 18 per group, 21 per channel) */

TEST(group_normalization)
{
    int64_t xd[4] = {2, 6, 5, 7}, six = 6, three = 3;
    ptq_tensor x = tensor_rand(4, xd, -2, 3), sc6 = tensor_rand(1, &six, 0.5f, 2), b6 = tensor_rand(1, &six, -1, 1),
               sc3 = tensor_rand(1, &three, 0.5f, 2), b3 = tensor_rand(1, &three, -1, 1), y[1];
    size_t n = ptq_tensor_numel(&x), len = 2 * 35;
    double *ref = malloc(n * sizeof *ref);
    if (!ref) abort();
    for (int opset = 18; opset <= 21; opset += 3) {
        for (int ng = 0; ng < 6; ng++) { /* 2 batches x 3 groups of 2 channels */
            const float *xp = (const float *)x.data + (size_t)ng * len;
            double m = 0, v = 0;
            for (size_t i = 0; i < len; i++) m += (double)xp[i];
            m /= (double)len;
            for (size_t i = 0; i < len; i++) v += ((double)xp[i] - m) * ((double)xp[i] - m);
            v /= (double)len;
            for (size_t i = 0; i < len; i++) {
                int g = ng % 3, c = g * 2 + (int)(i / 35);
                double a = opset == 21 ? (double)((float *)sc6.data)[c] : (double)((float *)sc3.data)[g];
                double bb = opset == 21 ? (double)((float *)b6.data)[c] : (double)((float *)b3.data)[g];
                ref[(size_t)ng * len + i] = a * ((double)xp[i] - m) / sqrt(v + 1e-3) + bb;
            }
        }
        op_node r = {.op = "GroupNormalization", .opset = opset, .n_in = 3, .in = {&x, opset == 21 ? &sc6 : &sc3, opset == 21 ? &b6 : &b3},
                     .nthreads = opset == 21 ? 3 : 1};
        add_int(&r, "num_groups", 3);
        add_float(&r, "epsilon", 1e-3f);
        EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
        EXPECT_EQ_INT(compare_f64(&y[0], ref, n, 1e-6, 1e-6, "GroupNormalization"), 0);
        ptq_tensor_free(&y[0]);
    }
    op_node r = {.op = "GroupNormalization", .opset = 21, .n_in = 3, .in = {&x, &sc3, &b3}};
    add_int(&r, "num_groups", 3);
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "GroupNormalization 'n1': scale and bias must be 1-D of 6 values (one per channel at opset 21)") != NULL);
    r = (op_node){.op = "GroupNormalization", .opset = 18, .n_in = 3, .in = {&x, &sc3, &b3}};
    add_int(&r, "num_groups", 4);
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "num_groups 4 does not divide 6 channels") != NULL);
    free(ref);
    ptq_tensor *fr[] = {&x, &sc6, &b6, &sc3, &b3};
    for (int i = 0; i < 5; i++) ptq_tensor_free(fr[i]);
}

/* ------------------------------------------------------------ LpNormalization */

TEST(lp_normalization)
{
    int64_t xd[3] = {2, 5, 3};
    ptq_tensor x = tensor_rand(3, xd, -2, 2), y[1];
    for (int k = 0; k < 5; k++) ((float *)x.data)[k * 3 + 1] = 0.0f; /* one line of zeros */
    double ref[30];
    for (int p = 1; p <= 2; p++) {
        for (int o = 0; o < 2; o++)
            for (int i = 0; i < 3; i++) {
                double acc = 0;
                for (int k = 0; k < 5; k++) {
                    double v = (double)((float *)x.data)[(o * 5 + k) * 3 + i];
                    acc += p == 1 ? fabs(v) : v * v;
                }
                double nrm = p == 1 ? acc : sqrt(acc);
                for (int k = 0; k < 5; k++)
                    ref[(o * 5 + k) * 3 + i] = nrm == 0 ? 0 : (double)((float *)x.data)[(o * 5 + k) * 3 + i] / nrm;
            }
        op_node r = {.op = "LpNormalization", .n_in = 1, .in = {&x}};
        add_int(&r, "axis", 1);
        add_int(&r, "p", p);
        EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
        EXPECT_EQ_INT(compare_f64(&y[0], ref, 30, 1e-7, 1e-6, "LpNormalization"), 0);
        ptq_tensor_free(&y[0]);
    }
    op_node r = {.op = "LpNormalization", .n_in = 1, .in = {&x}};
    add_int(&r, "p", 3);
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "LpNormalization 'n1': p = 3, expected 1 or 2") != NULL);
    ptq_tensor_free(&x);
}

/* ------------------------------------------------------------ Bitwise ops (opset 18) */

TEST(bitwise)
{
    int64_t d = 3, one = 1;
    ptq_tensor a = tensor_new(PTQ_I8, 1, &d), b = tensor_new(PTQ_I8, 0, &one), y[1];
    static const int8_t av[3] = {-1, 0x55, -128};
    memcpy(a.data, av, 3);
    ((int8_t *)b.data)[0] = 0x0f;
    static const char *ops[3] = {"BitwiseAnd", "BitwiseOr", "BitwiseXor"};
    static const int8_t want[3][3] = {{0x0f, 0x05, 0x00}, {-1, 0x5f, -113}, {-16, 0x5a, -113}};
    for (int o = 0; o < 3; o++) {
        op_node r = {.op = ops[o], .n_in = 2, .in = {&a, &b}};
        EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
        for (int i = 0; i < 3; i++) EXPECT_EQ_INT(((int8_t *)y[0].data)[i], want[o][i]);
        ptq_tensor_free(&y[0]);
    }
    op_node r = {.op = "BitwiseNot", .n_in = 1, .in = {&a}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    EXPECT(((int8_t *)y[0].data)[0] == 0 && ((int8_t *)y[0].data)[1] == -86 && ((int8_t *)y[0].data)[2] == 127);
    ptq_tensor_free(&y[0]);
    ptq_tensor f = tensor_rand(1, &d, 0, 1);
    r = (op_node){.op = "BitwiseNot", .n_in = 1, .in = {&f}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "BitwiseNot 'n1': dtype float32, expected an integer type") != NULL);
    ptq_tensor_free(&a);
    ptq_tensor_free(&b);
    ptq_tensor_free(&f);
}

/* ------------------------------------------------------------ DynamicQuantizeLinear */

TEST(dynamic_quantize_linear)
{
    int64_t d = 5;
    float v[5] = {-1.0f, 0.5f, 3.0f, 2.0f, -0.25f};
    ptq_tensor x = tensor_new(PTQ_F32, 1, &d), y[3];
    memcpy(x.data, v, sizeof v);
    op_node r = {.op = "DynamicQuantizeLinear", .n_in = 1, .in = {&x}, .n_out = 3, .want = {1, 1, 1}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    float scale = 4.0f / 255.0f, zp = rintf(1.0f / scale);
    EXPECT_NEAR(*(float *)y[1].data, scale, 0, 0);
    EXPECT_EQ_INT(*(uint8_t *)y[2].data, (int)zp);
    for (int i = 0; i < 5; i++) {
        float q = rintf(v[i] / scale) + zp;
        EXPECT_EQ_INT(((uint8_t *)y[0].data)[i], (int)(q < 0 ? 0 : q > 255 ? 255 : q));
    }
    free_all(y, 3);
    memset(x.data, 0, sizeof v); /* all zero: scale 1 as ONNX Runtime */
    EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);
    EXPECT_NEAR(*(float *)y[1].data, 1.0f, 0, 0);
    EXPECT_EQ_INT(*(uint8_t *)y[2].data, 0);
    EXPECT_EQ_INT(((uint8_t *)y[0].data)[4], 0);
    free_all(y, 3);
    ((float *)x.data)[2] = NAN;
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "DynamicQuantizeLinear 'n1': input element 2 is NaN") != NULL);
    free_all(y, 3);
    ptq_tensor_free(&x);
}

/* ------------------------------------------------------------ error messages */

TEST(errors)
{
    int64_t d2[2] = {3, 3}, d1 = 4, one = 1;
    ptq_tensor x = tensor_rand(2, d2, -1, 1), v = tensor_rand(1, &d1, -1, 1), u = tensor_new(PTQ_U8, 1, &d1), y[1];
    op_node r = {.op = "BitShift", .n_in = 2, .in = {&u, &u}};
    add_str(&r, "direction", "UP");
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "BitShift 'n1': direction 'UP', expected LEFT or RIGHT") != NULL);
    r = (op_node){.op = "And", .n_in = 2, .in = {&x, &x}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "And 'n1': input 0 is float32, expected bool") != NULL);
    r = (op_node){.op = "Less", .n_in = 2, .in = {&x, &u}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "Less 'n1': input dtypes differ (float32, uint8)") != NULL);
    r = (op_node){.op = "Trilu", .n_in = 1, .in = {&v}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "Trilu 'n1': input rank 1, expected at least 2") != NULL);
    ptq_tensor depth = tensor_new(PTQ_I64, 0, &one), vals = tensor_rand(1, (int64_t[1]){2}, 0, 1);
    r = (op_node){.op = "OneHot", .n_in = 3, .in = {&v, &depth, &vals}, .const_mask = 2};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "OneHot 'n1': depth 0 must be at least 1") != NULL);
    r = (op_node){.op = "ArgMax", .n_in = 1, .in = {&x}};
    add_int(&r, "axis", 2);
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "ArgMax 'n1': axis 2 out of range for input rank 2") != NULL);
    r = (op_node){.op = "LRN", .n_in = 1, .in = {&x}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "LRN 'n1': input rank 2, expected at least 3") != NULL);
    r = (op_node){.op = "Det", .n_in = 1, .in = {&v}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "Det 'n1': input must be [*, M, M]") != NULL);
    r = (op_node){.op = "ReduceLogSum", .opset = 13, .n_in = 1, .in = {&u}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "ReduceLogSum 'n1': input is uint8") != NULL);
    ptq_tensor sl = tensor_i64(3, (const int64_t[]){1, 4, 2});
    r = (op_node){.op = "ReverseSequence", .n_in = 2, .in = {&x, &sl}};
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "ReverseSequence 'n1': sequence_lens[1] = 4, expected 0 to 3") != NULL);
    ptq_tensor_free(&y[0]);
    ptq_tensor_free(&sl);
    r = (op_node){.op = "Celu", .n_in = 1, .in = {&x}};
    add_float(&r, "alpha", 0.0f);
    EXPECT_EQ_INT(op_run(&r, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "Celu 'n1': alpha is 0") != NULL);
    ptq_tensor_free(&x);
    ptq_tensor_free(&v);
    ptq_tensor_free(&u);
    ptq_tensor_free(&depth);
    ptq_tensor_free(&vals);
}

/* ------------------------------------------------------------ random inputs and attributes: errors, never crashes
 * (6000 cases; RANDOM_GARBAGE_ITERS=N for more, e.g. under make SANITIZE=1) */

/* A tensor of random dtype among the common ones, rank 0..3, dims 0..3, values in [-3, 5]. */
static ptq_tensor random_tensor(void)
{
    static const ptq_dtype dts[] = {PTQ_F32, PTQ_F32, PTQ_I64, PTQ_I32, PTQ_U8, PTQ_I8, PTQ_BOOL, PTQ_F16, PTQ_F64, PTQ_U64};
    int64_t dims[3];
    int rank = (int)irand(0, 3);
    for (int d = 0; d < rank; d++) dims[d] = irand(0, 9) ? irand(1, 3) : 0;
    ptq_tensor t = tensor_new(dts[irand(0, 9)], rank, dims);
    size_t n = ptq_tensor_numel(&t);
    for (size_t i = 0; i < n; i++) {
        int64_t v = irand(-3, 5);
        switch (t.dtype) {
        case PTQ_F32: ((float *)t.data)[i] = (float)v * 0.75f; break;
        case PTQ_F64: ((double *)t.data)[i] = (double)v * 0.75; break;
        case PTQ_F16: ((uint16_t *)t.data)[i] = 0x3c00; break; /* 1.0 */
        case PTQ_I64: case PTQ_U64: ((int64_t *)t.data)[i] = v; break;
        case PTQ_I32: ((int32_t *)t.data)[i] = (int32_t)v; break;
        case PTQ_BOOL: ((uint8_t *)t.data)[i] = (uint8_t)(v > 1); break;
        default: ((uint8_t *)t.data)[i] = (uint8_t)v; break;
        }
    }
    return t;
}

TEST(random_garbage)
{
    static const char *ops[] = {
        "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "BitShift", "IsNaN",
        "IsInf", "Where", "Mod", "Sign", "Shrink", "Round", "Sin", "Acos", "Atanh", "Celu", "Mish", "Cast", "CastLike",
        "CumSum", "Trilu", "EyeLike", "OneHot", "Det", "Hardmax", "LRN", "MeanVarianceNormalization", "ReduceL1",
        "ReduceProd", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ArgMax", "ArgMin",
        "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "DynamicQuantizeLinear", "MatMulInteger",
        "ConvInteger", "Clip", "Add", "Div", "GroupNormalization", "BitwiseAnd", "BitwiseNot", "LpNormalization", "ReverseSequence"};
    static const char *strs[] = {"LEFT", "RIGHT", "none", "sum", "mean", "x"};
    int ok = 0, refused = 0, iters = getenv("RANDOM_GARBAGE_ITERS") ? atoi(getenv("RANDOM_GARBAGE_ITERS")) : 6000;
    for (int it = 0; it < iters; it++) {
        const char *op = ops[it % (int)(sizeof ops / sizeof ops[0])];
        ptq_tensor ins[5];
        int n_in = irand(0, 3) ? (int)irand(1, 3) : (int)irand(0, 5);
        op_node r = {.op = op, .n_in = n_in, .opset = irand(0, 1) ? 13 : 18, .nthreads = (int)irand(1, 3),
                     .const_mask = (unsigned)irand(0, 31)};
        if (!strcmp(op, "DynamicQuantizeLinear")) r.n_out = 3, r.want[1] = r.want[2] = 1;
        if (!strcmp(op, "SoftmaxCrossEntropyLoss") && irand(0, 1)) r.n_out = 2, r.want[1] = 1;
        int same = (int)irand(0, 1); /* half the cases: every input of the first one's dtype and shape */
        for (int i = 0; i < n_in; i++) {
            ins[i] = random_tensor();
            if (same && i > 0) {
                ptq_tensor_free(&ins[i]);
                if (ptq_tensor_copy(&ins[i], &ins[0]) != PTQ_OK) abort();
            }
            r.in[i] = irand(0, 7) ? &ins[i] : NULL;
        }
        int na = (int)irand(0, 4);
        for (int k = 0; k < na; k++) {
            static const char *names[] = {"axis", "keepdims", "fmod", "direction", "to", "upper", "k", "size",
                                          "reduction", "ignore_index", "exclusive", "reverse", "dtype", "alpha",
                                          "select_last_index", "axes", "group", "noop_with_empty_axes", "num_groups"};
            const char *nm = names[irand(0, 18)];
            if (!strcmp(nm, "direction") || !strcmp(nm, "reduction")) add_str(&r, nm, strs[irand(0, 5)]);
            else if (!strcmp(nm, "alpha")) add_float(&r, nm, (float)irand(-1, 2));
            else if (!strcmp(nm, "axes")) add_ints(&r, nm, (const int64_t[]){irand(-4, 4), irand(-4, 4)}, (int)irand(0, 2));
            else add_int(&r, nm, irand(-4, 14));
        }
        ptq_tensor outs[3];
        ptq_status st = op_run(&r, outs);
        if (st == PTQ_OK) ok++;
        else refused++;
        EXPECT(st == PTQ_OK || st == PTQ_ERR_FORMAT || st == PTQ_ERR_SHAPE || st == PTQ_ERR_UNSUPPORTED ||
               st == PTQ_ERR_ARG);
        free_all(outs, r.n_out ? r.n_out : 1);
        for (int i = 0; i < n_in; i++) ptq_tensor_free(&ins[i]);
    }
    printf("    random_garbage: %d ran, %d refused with a message\n", ok, refused);
    EXPECT(ok > iters / 20);
}

int main(void)
{
    op_test_seed(4242u);
    RUN(threads_bit_identical);
    RUN(trig_kernels);
    RUN(unary_against_libm);
    RUN(integer_arithmetic_and_clip);
    RUN(where_compare_broadcast);
    RUN(reduce_log_sum_exp_large_values);
    RUN(reduce_prod_l1_sumsq_int);
    RUN(argmax_ties_and_nan);
    RUN(round_half_to_even);
    RUN(mod_signs);
    RUN(cast_edges);
    RUN(cumsum_exclusive_reverse);
    RUN(softmax_cross_entropy_4d);
    RUN(matmul_integer_per_column);
    RUN(conv_integer_geometry);
    RUN(group_normalization);
    RUN(lp_normalization);
    RUN(bitwise);
    RUN(dynamic_quantize_linear);
    RUN(hardmax_opset_upgrade);
    RUN(errors);
    RUN(random_garbage);
    return test_summary();
}
