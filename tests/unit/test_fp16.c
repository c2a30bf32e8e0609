/* test_fp16.c: float32 <-> float16 conversion (runtime/tensor.c) against an independent
 * reference, the Cast kernel's float16 paths, and quant/fp16.c: the simulated float part of a
 * QDQ graph gives the same bits as the float16 model it writes, run through the upcast (also
 * after a save and load), at 1 and 2 threads. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/onnx.h"
#include "quant/fp16.h"
#include "runtime/graph.h"
#include "runtime/op.h"
#include "runtime/ops/half.h"
#include "runtime/plan.h"
#include "tests/test.h"
#include "tests/unit/tiny_graph.h"

static float bits_f(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint32_t f_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* Reference: the nearest of the finite halves by bisection over their values (positive halves
 * 0x0000..0x7bff increase with their code), ties to the even code; past 65504, halfway to 65536
 * (65520) and beyond is infinity. */
static uint16_t ref_f32_to_f16(float f)
{
    if (f != f) return 0x7e00;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    unsigned lo = 0, hi = 0x7bff;
    if (a >= (double)ptq_f16_to_f32(0x7bff)) return sign | 0x7bff;
    while (hi - lo > 1) { /* half(lo) <= a < half(hi) */
        unsigned mid = (lo + hi) / 2;
        if ((double)ptq_f16_to_f32((uint16_t)mid) <= a) lo = mid;
        else hi = mid;
    }
    double dl = a - (double)ptq_f16_to_f32((uint16_t)lo), dh = (double)ptq_f16_to_f32((uint16_t)hi) - a;
    unsigned r = dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo);
    return (uint16_t)(sign | r);
}

TEST(every_half_round_trips)
{
    int bad = 0;
    for (unsigned h = 0; h < 65536; h++) {
        float f = ptq_f16_to_f32((uint16_t)h);
        int nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (nan) {
            if (!(f != f) || (signbit(f) != 0) != ((h & 0x8000) != 0)) bad++;
            continue;
        }
        if (ptq_f32_to_f16(f) != h) bad++;
    }
    EXPECT_EQ_INT(bad, 0);
    EXPECT(ptq_f16_to_f32(0x3c00) == 1.0f);
    EXPECT(ptq_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* the smallest subnormal */
    EXPECT(ptq_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    EXPECT(ptq_f16_to_f32(0x0400) == ldexpf(1.0f, -14));
    EXPECT(ptq_f16_to_f32(0x7bff) == 65504.0f);
    EXPECT(isinf(ptq_f16_to_f32(0xfc00)) && ptq_f16_to_f32(0xfc00) < 0);
}

TEST(ties_go_to_even)
{
    int bad = 0;
    for (unsigned h = 0; h < 0x7bff; h++) { /* every midpoint between neighbours, and just off it */
        float a = ptq_f16_to_f32((uint16_t)h), b = ptq_f16_to_f32((uint16_t)(h + 1));
        float mid = (a + b) / 2; /* exact in float32 */
        uint16_t even = (uint16_t)(h & 1 ? h + 1 : h);
        bad += ptq_f32_to_f16(mid) != even;
        bad += ptq_f32_to_f16(nextafterf(mid, 0.0f)) != h;
        bad += ptq_f32_to_f16(nextafterf(mid, INFINITY)) != h + 1;
        bad += ptq_f32_to_f16(-mid) != (0x8000 | even);
    }
    EXPECT_EQ_INT(bad, 0);
    EXPECT_EQ_INT(ptq_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);      /* tie: 1.0 is even */
    EXPECT_EQ_INT(ptq_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);  /* tie: up to even */
}

TEST(subnormals_and_underflow)
{
    EXPECT_EQ_INT(ptq_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);             /* half of the smallest: to even 0 */
    EXPECT_EQ_INT(ptq_f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1.0f)), 0x0001);
    EXPECT_EQ_INT(ptq_f32_to_f16(ldexpf(3.0f, -25)), 0x0002);             /* 1.5 units: to even 2 */
    EXPECT_EQ_INT(ptq_f32_to_f16(ldexpf(1.0f, -30)), 0x0000);
    EXPECT_EQ_INT(ptq_f32_to_f16(-ldexpf(1.0f, -30)), 0x8000);            /* keeps the sign */
    EXPECT_EQ_INT(ptq_f32_to_f16(ldexpf(1023.5f, -24)), 0x0400);          /* rounds up into the normals */
    EXPECT_EQ_INT(ptq_f32_to_f16(bits_f(1)), 0x0000);                     /* float32 subnormal */
    EXPECT_EQ_INT(ptq_f32_to_f16(-0.0f), 0x8000);
}

TEST(overflow_infinity_and_nan)
{
    EXPECT_EQ_INT(ptq_f32_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ_INT(ptq_f32_to_f16(nextafterf(65520.0f, 0.0f)), 0x7bff);
    EXPECT_EQ_INT(ptq_f32_to_f16(65520.0f), 0x7c00); /* the tie with 65536 goes to infinity (even) */
    EXPECT_EQ_INT(ptq_f32_to_f16(-1e9f), 0xfc00);
    EXPECT_EQ_INT(ptq_f32_to_f16(INFINITY), 0x7c00);
    EXPECT_EQ_INT(ptq_f32_to_f16(-INFINITY), 0xfc00);
    EXPECT_EQ_INT(ptq_f32_to_f16(FLT_MAX), 0x7c00);
    uint16_t n = ptq_f32_to_f16(NAN), m = ptq_f32_to_f16(-NAN);
    EXPECT((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0 && !(n & 0x8000));
    EXPECT((m & 0x7c00) == 0x7c00 && (m & 0x3ff) != 0 && (m & 0x8000));
    EXPECT(isnan(quant_fp16_round(bits_f(0x7f800001u)))); /* a signalling NaN stays a NaN */
    EXPECT(isinf(quant_fp16_round(70000.0f)));
}

TEST(random_floats_match_the_reference)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int bad = 0;
    for (int i = 0; i < 400000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t b = (uint32_t)(s >> 16);
        /* exponents around the half range (2^-26 .. 2^17) most of the time */
        if (i % 4) b = (b & 0x807fffffu) | ((uint32_t)(101 + (s >> 56) % 44) << 23);
        float f = bits_f(b);
        if (f != f) continue;
        uint16_t got = ptq_f32_to_f16(f), want = ref_f32_to_f16(f);
        if (got != want && bad++ < 5) printf("  %a (0x%08x): 0x%04x, expected 0x%04x\n", (double)f, f_bits(f), got, want);
        if (quant_fp16_round(f) != ptq_f16_to_f32(want) && !(isinf(quant_fp16_round(f)) && (want & 0x7fff) == 0x7c00)) bad++;
    }
    EXPECT_EQ_INT(bad, 0);
}

TEST(branchless_kernel_conversions_give_the_same_bits)
{
    int bad = 0;
    for (unsigned h = 0; h < 65536; h++)
        bad += f_bits(half_to_f32((uint16_t)h)) != f_bits(ptq_f16_to_f32((uint16_t)h));
    EXPECT_EQ_INT(bad, 0);
    for (uint64_t b = 0; b < (1ull << 32); b += 251) { /* every exponent, varied mantissas */
        float f = bits_f((uint32_t)b);
        if (half_from_f32(f) != ptq_f32_to_f16(f) && bad++ < 5) printf("  0x%08x: 0x%04x, expected 0x%04x\n", (uint32_t)b, half_from_f32(f), ptq_f32_to_f16(f));
    }
    for (unsigned h = 0; h < 0x7c00; h++) { /* around every midpoint, both signs */
        float a = ptq_f16_to_f32((uint16_t)h), m = h < 0x7bff ? (a + ptq_f16_to_f32((uint16_t)(h + 1))) / 2 : 65520.0f;
        const float t[] = {m, nextafterf(m, 0.0f), nextafterf(m, INFINITY), a, -m, -a};
        for (int k = 0; k < 6; k++) bad += half_from_f32(t[k]) != ptq_f32_to_f16(t[k]);
    }
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, bits_f(0x7f800001u), bits_f(0xffc00001u), FLT_MAX,
                             -FLT_MAX, bits_f(1), bits_f(0x80000001u), 65504.0f, 65519.0f, 65520.0f, ldexpf(1.0f, -25)};
    for (size_t k = 0; k < sizeof special / sizeof *special; k++) bad += half_from_f32(special[k]) != ptq_f32_to_f16(special[k]);
    EXPECT_EQ_INT(bad, 0);
}

static ptq_graph *new_graph(void)
{
    ptq_graph *g = ptq_graph_create();
    g->opsets = calloc(1, sizeof *g->opsets);
    g->opsets[0].domain = ptq_strdup("");
    g->opsets[0].version = 13;
    g->n_opsets = 1;
    g->ir_version = 7;
    return g;
}

static void set_attr_int(ptq_graph *g, int n, const char *name, int64_t v)
{
    ptq_attr a;
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup(name);
    a.type = PTQ_ATTR_INT;
    a.i = v;
    ptq_node_add_attr(&g->nodes[n], &a);
}

TEST(cast_float16_paths_at_any_thread_count)
{
    enum { N = 200003 };
    ptq_graph *g = new_graph();
    int64_t d[1] = {N};
    input(g, "x", 1, d);
    set_attr_int(g, node(g, "c16", "Cast", "x", NULL, "h"), "to", PTQ_F16);
    set_attr_int(g, node(g, "c32", "Cast", "h", NULL, "y"), "to", PTQ_F32);
    output(g, "y");
    float *x = malloc(sizeof *x * N);
    uint64_t s = 1;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = bits_f((uint32_t)(s >> 32));
    }
    ptq_tensor in = {.dtype = PTQ_F32, .rank = 1, .dims = {N}, .data = x};
    for (int t = 1; t <= 2; t++) {
        ptq_plan_options o = ptq_plan_defaults();
        o.nthreads = t;
        ptq_plan *p = NULL;
        EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &o, &p), PTQ_OK);
        if (!p) break;
        EXPECT_EQ_INT(ptq_plan_run(p, &in, 1), PTQ_OK);
        const float *y = ptq_plan_output(p, 0, NULL)->data;
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float want = quant_fp16_round(x[i]);
            bad += f_bits(y[i]) != f_bits(want); /* NaNs too: the quiet NaN 0x7e00 with the sign */
        }
        EXPECT_EQ_INT(bad, 0);
        ptq_plan_destroy(p);
    }
    free(x);
    ptq_graph_destroy(g);
}

/* x -> Mul(c) -> m -> Relu -> r (output) ; x -> Q -> DQ -> d ; Add(d, r) -> a ; a -> last -> y (output):
 * Mul, Relu and a Softplus last are the float part; Add reads a DequantizeLinear (an INT8 layer)
 * and a Sigmoid last is fused into it. */
static ptq_graph *qdq_graph_with(const char *last)
{
    ptq_graph *g = new_graph();
    int64_t d[2] = {4, 64}, one[1] = {64};
    input(g, "x", 2, d);
    float c[64], scale = 0.02f;
    int8_t zp = 0;
    for (int i = 0; i < 64; i++) c[i] = 1.0f + 0.000123f * (float)i - 0.0031f * (float)(i % 7);
    init(g, "c", PTQ_F32, 1, one, c);
    init(g, "s", PTQ_F32, 0, one, &scale);
    init(g, "z", PTQ_I8, 0, one, &zp);
    node(g, "mul", "Mul", "x", "c", "m");
    node(g, "relu", "Relu", "m", NULL, "r");
    int q = node(g, "q", "QuantizeLinear", "x", "s", "xq");
    int dq = node(g, "dq", "DequantizeLinear", "xq", "s", "xd");
    (void)q;
    (void)dq;
    int zv = ptq_graph_find_value(g, "z");
    for (int k = 0; k < g->n_nodes; k++) /* Q and DQ take the zero point as input 2 */
        if (!strcmp(g->nodes[k].op_type, "QuantizeLinear") || !strcmp(g->nodes[k].op_type, "DequantizeLinear")) {
            g->nodes[k].inputs = realloc(g->nodes[k].inputs, sizeof(int) * 3);
            g->nodes[k].inputs[2] = zv;
            g->nodes[k].n_inputs = 3;
        }
    node(g, "add", "Add", "xd", "r", "a");
    node(g, "last", last, "a", NULL, "y");
    output(g, "y");
    output(g, "r");
    return g;
}

static ptq_graph *qdq_graph(void)
{
    return qdq_graph_with("Softplus");
}

/* Runs g on x ([4, 64]) with t threads; copies the two outputs into y (2 x 256 floats). */
static int run2(const ptq_graph *g, const float *x, int t, float *y)
{
    ptq_plan_options o = ptq_plan_defaults();
    o.nthreads = t;
    ptq_plan *p = NULL;
    ptq_tensor in = {.dtype = PTQ_F32, .rank = 2, .dims = {4, 64}, .data = (void *)x};
    if (ptq_plan_create(g, NULL, 0, &o, &p) != PTQ_OK || ptq_plan_run(p, &in, 1) != PTQ_OK) {
        printf("  %s\n", ptq_last_error());
        ptq_plan_destroy(p);
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        const ptq_tensor *out = ptq_plan_output(p, k, NULL);
        if (out->dtype != PTQ_F32 || ptq_tensor_numel(out) != 256) return -1;
        memcpy(y + 256 * k, out->data, 256 * sizeof *y);
    }
    ptq_plan_destroy(p);
    return 0;
}

static int count_op(const ptq_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += !strcmp(g->nodes[i].op_type, op);
    return n;
}

TEST(simulated_float_part_equals_the_written_float16_model)
{
    if (!ptq_op_get(PTQ_OP_CAST) || !ptq_op_get(PTQ_OP_SOFTPLUS)) SKIP("kernels not linked");
    float x[256], y32[512], ysim[512], yconv[512], yload[512], ysim2[512];
    for (int i = 0; i < 256; i++) x[i] = (float)sin(0.37 * i) * (1.0f + (float)(i % 5)) + 0.001f * (float)i;
    ptq_graph *g32 = qdq_graph(), *gs = qdq_graph(), *gc = qdq_graph(), *gl = NULL;
    unsigned char part[16] = {0};
    EXPECT_EQ_INT(quant_fp16_float_part(g32, part), PTQ_OK);
    for (int i = 0; i < g32->n_nodes; i++) {
        const char *op = g32->nodes[i].op_type;
        int want = !strcmp(op, "Mul") || !strcmp(op, "Relu") || !strcmp(op, "Softplus");
        if (part[i] != want) TEST_FAILF("node %s: in float part %d, expected %d", op, part[i], want);
    }
    ptq_graph *gf = qdq_graph_with("Sigmoid"); /* fused into the INT8 Add: not in the float part */
    EXPECT_EQ_INT(quant_fp16_float_part(gf, part), PTQ_OK);
    for (int i = 0; i < gf->n_nodes; i++)
        if (!strcmp(gf->nodes[i].op_type, "Sigmoid")) EXPECT_EQ_INT(part[i], 0);
    ptq_graph_destroy(gf);
    quant_fp16_report rs, rc;
    EXPECT_EQ_INT(quant_fp16_simulate(gs, &rs), PTQ_OK);
    EXPECT_EQ_INT(quant_fp16_convert(gc, &rc), PTQ_OK);
    EXPECT_EQ_INT(rs.n_nodes, 3);
    EXPECT_EQ_INT(rs.n_initializers, 1); /* c */
    EXPECT_EQ_INT(rc.n_initializers, 1);
    int cv = ptq_graph_find_value(gc, "c");
    EXPECT(cv >= 0 && gc->values[cv].t.dtype == PTQ_F16);
    /* written: x and a enter the float part through Cast(float16); r and y leave it by Cast(float) */
    EXPECT_EQ_INT(count_op(gc, "Cast"), 4);
    int yv = ptq_graph_find_value(gc, "y");
    EXPECT(yv >= 0 && !strcmp(gc->nodes[gc->values[yv].producer].op_type, "Cast"));
    EXPECT_EQ_INT(run2(g32, x, 1, y32), 0);
    EXPECT_EQ_INT(run2(gs, x, 1, ysim), 0);
    EXPECT_EQ_INT(run2(gs, x, 2, ysim2), 0);
    int changed = 0;
    EXPECT_EQ_INT(quant_fp16_upcast(gc, &changed), PTQ_OK);
    EXPECT_EQ_INT(changed, 3);
    EXPECT_EQ_INT(run2(gc, x, 2, yconv), 0);
    /* the float16 model through a file: io/ writes and reads float16 initializers and types */
    ptq_graph *gw = qdq_graph();
    EXPECT_EQ_INT(quant_fp16_convert(gw, &rc), PTQ_OK);
    char path[] = "/tmp/ptq_test_fp16_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    EXPECT_EQ_INT(onnx_model_save(gw, path), PTQ_OK);
    EXPECT_EQ_INT(onnx_model_load(path, &gl), PTQ_OK);
    unlink(path);
    if (gl) {
        EXPECT_EQ_INT(quant_fp16_upcast(gl, &changed), PTQ_OK);
        EXPECT_EQ_INT(run2(gl, x, 1, yload), 0);
    }
    int diff32 = 0, bad = 0;
    for (int i = 0; i < 512; i++) {
        diff32 += f_bits(y32[i]) != f_bits(ysim[i]);
        bad += f_bits(ysim[i]) != f_bits(yconv[i]) || f_bits(ysim[i]) != f_bits(ysim2[i]) ||
               (gl && f_bits(ysim[i]) != f_bits(yload[i]));
        bad += quant_fp16_round(ysim[i]) != ysim[i]; /* both outputs come out of the float part */
    }
    EXPECT_EQ_INT(bad, 0);
    EXPECT(diff32 > 100); /* FP16 changes the outputs */
    for (int i = 0; i < 256; i++) { /* r = Relu(fp16(fp16(x) * fp16(c))) */
        float m = quant_fp16_round(quant_fp16_round(x[i]) * quant_fp16_round(1.0f + 0.000123f * (float)(i % 64) - 0.0031f * (float)((i % 64) % 7)));
        if (f_bits(ysim[256 + i]) != f_bits(m > 0 ? m : 0.0f) && bad++ < 3) TEST_FAILF("r[%d] = %g, expected %g", i, (double)ysim[256 + i], (double)m);
    }
    /* converting twice changes nothing */
    int n_nodes = gw->n_nodes;
    EXPECT_EQ_INT(quant_fp16_convert(gw, &rc), PTQ_OK);
    EXPECT_EQ_INT(gw->n_nodes, n_nodes);
    EXPECT_EQ_INT(rc.n_nodes, 0);
    ptq_graph_destroy(g32);
    ptq_graph_destroy(gs);
    ptq_graph_destroy(gc);
    ptq_graph_destroy(gl);
    ptq_graph_destroy(gw);
}

/* A detector's post-processing stays float32: after a data-dependent selection (NonZero here),
 * box coordinates become indices, and FP16 there changes which elements are read (Mask R-CNN's
 * mask pasting read past an empty tensor). The Mul before it is in the float part, the one
 * after it is not. */
TEST(post_processing_stays_float32)
{
    ptq_graph *g = new_graph();
    int64_t d[2] = {4, 64}, one[1] = {1};
    float c = 1.5f;
    input(g, "x", 2, d);
    init(g, "c", PTQ_F32, 0, one, &c);
    int pre = node(g, "pre", "Mul", "x", "c", "m");
    node(g, "nz", "NonZero", "m", NULL, "i");
    int cast = node(g, "cast", "Cast", "i", NULL, "f");
    set_attr_int(g, cast, "to", PTQ_F32);
    int post = node(g, "post", "Mul", "f", "c", "y");
    output(g, "y");
    unsigned char *in = calloc((size_t)g->n_nodes, 1);
    EXPECT(in != NULL);
    EXPECT_EQ_INT(quant_fp16_float_part(g, in), PTQ_OK);
    EXPECT_EQ_INT(in[pre], 1);
    EXPECT_EQ_INT(in[post], 0);
    free(in);
    ptq_graph_destroy(g);
}

/* One float32 run of g on x (n floats, input [n]) into y; the output's dtype in *dt, halves
 * widened. 0 on success. */
static int run1(const ptq_graph *g, const void *x, ptq_dtype xdt, int n, float *y, ptq_dtype *dt)
{
    ptq_plan *p = NULL;
    ptq_plan_options o = ptq_plan_defaults();
    ptq_tensor in = {.dtype = xdt, .rank = 1, .dims = {n}, .data = (void *)x};
    if (ptq_plan_create(g, NULL, 0, &o, &p) != PTQ_OK || ptq_plan_run(p, &in, 1) != PTQ_OK) {
        printf("  %s\n", ptq_last_error());
        ptq_plan_destroy(p);
        return -1;
    }
    const ptq_tensor *out = ptq_plan_output(p, 0, NULL);
    *dt = out->dtype;
    for (int i = 0; i < n; i++)
        y[i] = out->dtype == PTQ_F16 ? ptq_f16_to_f32(((const uint16_t *)out->data)[i]) : ((const float *)out->data)[i];
    ptq_plan_destroy(p);
    return 0;
}

/* x [N] -> Mul(x, Cast(c16 -> float)) -> y: the weight's Cast goes, c becomes float32 with the
 * same values, bit for bit; nothing of the interface is float16. A float32 graph is untouched. */
TEST(widen_folds_float16_weights_behind_casts)
{
    enum { N = 64 };
    ptq_graph *g = new_graph();
    int64_t d[1] = {N};
    uint16_t c16[N];
    float x[N], y0[N], y1[N];
    for (int i = 0; i < N; i++) {
        c16[i] = ptq_f32_to_f16(0.37f * (float)i - 9.1f);
        x[i] = (float)sin(0.7 * i);
    }
    input(g, "x", 1, d);
    init(g, "c16", PTQ_F16, 1, d, c16);
    set_attr_int(g, node(g, "cast", "Cast", "c16", NULL, "c"), "to", PTQ_F32);
    node(g, "mul", "Mul", "x", "c", "y");
    output(g, "y");
    ptq_dtype dt;
    EXPECT_EQ_INT(run1(g, x, PTQ_F32, N, y0, &dt), 0);
    quant_fp16_widened w;
    EXPECT_EQ_INT(quant_fp16_widen(g, &w), PTQ_OK);
    EXPECT_EQ_INT(w.n_initializers, 1);
    EXPECT_EQ_INT(w.n_casts, 1);
    EXPECT_EQ_INT(w.computes_half, 0);
    EXPECT_EQ_INT(w.n_io, 0);
    EXPECT_EQ_INT(g->n_nodes, 1);
    int c = ptq_graph_find_value(g, "c16");
    EXPECT(c >= 0 && g->values[c].t.dtype == PTQ_F32 && g->nodes[0].inputs[1] == c);
    int bad = 0;
    for (int i = 0; c >= 0 && i < N; i++) bad += f_bits(((const float *)g->values[c].t.data)[i]) != f_bits(ptq_f16_to_f32(c16[i]));
    EXPECT_EQ_INT(bad, 0);
    EXPECT_EQ_INT(run1(g, x, PTQ_F32, N, y1, &dt), 0);
    for (int i = 0; i < N; i++) bad += f_bits(y0[i]) != f_bits(y1[i]);
    EXPECT_EQ_INT(bad, 0);
    quant_fp16_widened_free(&w);
    int n_nodes = g->n_nodes; /* now float32: widening again changes nothing */
    EXPECT_EQ_INT(quant_fp16_widen(g, &w), PTQ_OK);
    EXPECT_EQ_INT(g->n_nodes, n_nodes);
    EXPECT_EQ_INT(w.n_initializers + w.n_casts + w.n_values + w.n_io, 0);
    ptq_graph_destroy(g);
}

/* A float16 graph x16 -> Mul(x, c16) -> Relu -> y16: its twin computes in float32 (input, types,
 * c widened); the twin with its float part converted (quant_fp16_convert) and its interface
 * restored (quant_fp16_restore_io) is float16 in and out again with no Cast left: run through
 * the upcast, it gives the original's outputs bit for bit. Restored without the conversion,
 * Casts carry the float16 interface to the float32 nodes. */
TEST(widen_then_restore_keeps_the_float16_interface)
{
    enum { N = 256 };
    int64_t d[1] = {N};
    uint16_t c16[N], x16[N];
    float y0[N], y1[N], y2[N];
    for (int i = 0; i < N; i++) {
        c16[i] = ptq_f32_to_f16(1.0f + 0.01f * (float)(i % 17) - 0.3f * (float)(i % 3));
        x16[i] = ptq_f32_to_f16((float)sin(0.37 * i) * 30.0f);
    }
    ptq_graph *gs[3];
    for (int k = 0; k < 3; k++) {
        ptq_graph *g = gs[k] = new_graph();
        input(g, "x", 1, d);
        g->values[ptq_graph_find_value(g, "x")].t.dtype = PTQ_F16;
        init(g, "c", PTQ_F16, 1, d, c16);
        node(g, "mul", "Mul", "x", "c", "m");
        node(g, "relu", "Relu", "m", NULL, "y");
        output(g, "y");
        int y = ptq_graph_find_value(g, "y");
        g->values[y].t.dtype = PTQ_F16;
        g->values[y].t.rank = 1;
        g->values[y].t.dims[0] = N;
        g->values[y].has_type = 1;
    }
    int changed = 0, casts = 0;
    ptq_dtype dt = PTQ_UNDEFINED;
    EXPECT_EQ_INT(quant_fp16_upcast(gs[0], &changed), PTQ_OK);
    EXPECT_EQ_INT(run1(gs[0], x16, PTQ_F16, N, y0, &dt), 0);
    EXPECT_EQ_INT(dt, PTQ_F16);
    quant_fp16_widened w[2];
    for (int k = 1; k < 3; k++) {
        EXPECT_EQ_INT(quant_fp16_widen(gs[k], &w[k - 1]), PTQ_OK);
        EXPECT_EQ_INT(w[k - 1].computes_half, 1);
        EXPECT_EQ_INT(w[k - 1].n_io, 2);
        EXPECT_EQ_INT(gs[k]->values[ptq_graph_find_value(gs[k], "x")].t.dtype, PTQ_F32);
        EXPECT_EQ_INT(gs[k]->values[ptq_graph_find_value(gs[k], "c")].t.dtype, PTQ_F32);
    }
    quant_fp16_report r;
    EXPECT_EQ_INT(quant_fp16_convert(gs[1], &r), PTQ_OK);
    EXPECT_EQ_INT(quant_fp16_restore_io(gs[1], &w[0], &casts), PTQ_OK);
    EXPECT_EQ_INT(count_op(gs[1], "Cast"), 0);

    EXPECT_EQ_INT(quant_fp16_restore_io(gs[2], &w[1], &casts), PTQ_OK);
    EXPECT_EQ_INT(casts, 2);
    EXPECT_EQ_INT(count_op(gs[2], "Cast"), 2);
    for (int k = 1; k < 3; k++) {
        EXPECT_EQ_INT(gs[k]->values[ptq_graph_find_value(gs[k], "x")].t.dtype, PTQ_F16);
        EXPECT_EQ_INT(gs[k]->values[ptq_graph_find_value(gs[k], "y")].t.dtype, PTQ_F16);
        EXPECT_EQ_INT(quant_fp16_upcast(gs[k], &changed), PTQ_OK);
    }
    EXPECT_EQ_INT(run1(gs[1], x16, PTQ_F16, N, y1, &dt), 0);
    EXPECT_EQ_INT(dt, PTQ_F16);
    EXPECT_EQ_INT(run1(gs[2], x16, PTQ_F16, N, y2, &dt), 0);
    EXPECT_EQ_INT(dt, PTQ_F16);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += f_bits(y0[i]) != f_bits(y1[i]) || f_bits(y0[i]) != f_bits(y2[i]);
    EXPECT_EQ_INT(bad, 0);
    for (int k = 0; k < 2; k++) quant_fp16_widened_free(&w[k]);
    for (int k = 0; k < 3; k++) ptq_graph_destroy(gs[k]);
}

int main(void)
{
    RUN(every_half_round_trips);
    RUN(ties_go_to_even);
    RUN(subnormals_and_underflow);
    RUN(overflow_infinity_and_nan);
    RUN(random_floats_match_the_reference);
    RUN(branchless_kernel_conversions_give_the_same_bits);
    RUN(cast_float16_paths_at_any_thread_count);
    RUN(simulated_float_part_equals_the_written_float16_model);
    RUN(post_processing_stays_float32);
    RUN(widen_folds_float16_weights_behind_casts);
    RUN(widen_then_restore_keeps_the_float16_interface);
    return test_summary();
}
