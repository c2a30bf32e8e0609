/* test_equalize.c: activation equalization (engine/equalize.h) on small graphs built here:
 * the chains it takes and the ones it leaves, the FP32 model's bits unchanged, channel ranges
 * brought within 2x, a smaller INT8 error, and the same scales at any batch and thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/equalize.h"
#include "quant/qdq.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "tests/test.h"
#include "tests/unit/graph_build.h"

enum { N_IMAGES = 6, C = 6 };

/* The channels' spread: gamma (or c1's rows without a BatchNormalization) planted per channel. */
static const float spread[C] = {1.0f, 20.0f, 0.05f, 3.0f, 0.5f, 9.0f};

enum { WITH_BN = 1, WITH_RELU = 2, DW = 4, R1_OUTPUT = 8 };

/* x [N,4,8,8] -> Conv c1 (6 out, 3x3, pads 1, bias) -> y1 [-> BatchNormalization -> b1] [-> Relu] -> r1
 *   -> Conv c2 (6 out, 3x3, pads 1, bias; group 6 with DW, else group 1) -> y2 (output) */
static ptq_graph *chain(int flags)
{
    ptq_graph *g = gb_graph(4, (const int64_t[]){1, 4, 8, 8});
    int dw = flags & DW;
    float *w1 = gb_weight(g, "w1", 4, (const int64_t[]){C, 4, 3, 3}, 11), *b1 = gb_weight(g, "bias1", 1, (const int64_t[]){C}, 12);
    gb_weight(g, "w2", 4, (const int64_t[]){C, dw ? 1 : C, 3, 3}, 13);
    gb_weight(g, "bias2", 1, (const int64_t[]){C}, 14);
    int n = gb_node(g, "c1", "Conv", (const char *const[]){"x", "w1", "bias1"}, 3, "y1");
    gb_ints_attr(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    const char *cur = "y1";
    if (flags & WITH_BN) {
        float *gm = gb_weight(g, "gamma", 1, (const int64_t[]){C}, 15), *mean = gb_weight(g, "mean", 1, (const int64_t[]){C}, 17);
        float *var = gb_weight(g, "var", 1, (const int64_t[]){C}, 18);
        gb_weight(g, "beta", 1, (const int64_t[]){C}, 16);
        for (int c = 0; c < C; c++) {
            gm[c] = spread[c] * (1.0f + 0.1f * gm[c]);
            var[c] = 0.5f + fabsf(var[c]);
            mean[c] *= 0.1f;
        }
        gb_node(g, "bn", "BatchNormalization", (const char *const[]){"y1", "gamma", "beta", "mean", "var"}, 5, "b1");
        cur = "b1";
    } else {
        for (int c = 0; c < C; c++) {
            for (int k = 0; k < 36; k++) w1[c * 36 + k] *= spread[c];
            b1[c] *= spread[c];
        }
    }
    if (flags & WITH_RELU) {
        gb_node(g, "relu", "Relu", (const char *const[]){cur}, 1, "r1");
    } else {
        gb_node(g, "id", "Identity", (const char *const[]){cur}, 1, "r1"); /* no equalization across Identity */
    }
    n = gb_node(g, "c2", "Conv", (const char *const[]){"r1", "w2", "bias2"}, 3, "y2");
    gb_ints_attr(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    if (dw) gb_int_attr(g, n, "group", C);
    gb_output(g, "y2");
    if (flags & R1_OUTPUT) gb_output(g, "r1");
    return g;
}

/* y2 of g over every image (malloc'd, 6 * 6 * 64 floats). */
static float *run(const ptq_graph *g, const gb_source *m)
{
    ptq_plan *p = NULL;
    ptq_plan_options po = ptq_plan_defaults();
    ptq_input_shape s = {.name = "x", .rank = 4, .dims = {N_IMAGES, 4, 8, 8}};
    EXPECT(ptq_plan_create(g, &s, 1, &po, &p) == PTQ_OK);
    ptq_tensor x = {.dtype = PTQ_F32, .rank = 4, .dims = {N_IMAGES, 4, 8, 8}, .data = m->data};
    EXPECT(ptq_plan_run(p, &x, 1) == PTQ_OK);
    const char *name;
    const ptq_tensor *y = ptq_plan_output(p, 0, &name);
    float *out = malloc(ptq_tensor_nbytes(y));
    memcpy(out, y->data, ptq_tensor_nbytes(y));
    ptq_plan_destroy(p);
    return out;
}

static ptq_status measure(ptq_graph *g, gb_source *m, int nthreads, eng_equalization *eq)
{
    eng_source src = gb_source_of(m);
    ptq_status st = eng_equalize_find(g, eq);
    return st == PTQ_OK ? eng_equalize_measure(g, &src, nthreads, NULL, eq) : st;
}

TEST(chains_taken_and_left)
{
    static const struct {
        int flags, pairs;
    } cases[] = {
        {WITH_BN | WITH_RELU | DW, 1}, {WITH_BN | DW, 0} /* Identity in between */, {WITH_RELU | DW, 1},
        {WITH_BN | WITH_RELU, 0} /* not depthwise */, {WITH_BN | WITH_RELU | DW | R1_OUTPUT, 0} /* X read twice */,
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ptq_graph *g = chain(cases[i].flags);
        eng_equalization eq;
        EXPECT(eng_equalize_find(g, &eq) == PTQ_OK);
        EXPECT(eq.n == cases[i].pairs);
        if (eq.n) EXPECT(!strcmp(eq.pairs[0].tensor, "r1") && eq.pairs[0].channels == C && !!eq.pairs[0].bn == !!(cases[i].flags & WITH_BN));
        eng_equalization_free(&eq);
        ptq_graph_destroy(g);
    }
}

/* The range of activation `name`: max |x| of the images for x; r1's from the measured pair. */
typedef struct {
    const gb_source *m;
    const eng_equalization *eq;
    int scaled;
} range_ctx;

static range_ctx rctx;

static int ranges(const char *name, float *amax, void *user)
{
    (void)user;
    float a = 0;
    if (!strcmp(name, "x"))
        for (int i = 0; i < 256 * N_IMAGES; i++) a = fmaxf(a, fabsf(rctx.m->data[i]));
    else if (!strcmp(name, "r1"))
        for (int c = 0; c < C; c++) a = fmaxf(a, rctx.eq->pairs[0].range[c] * (rctx.scaled ? rctx.eq->pairs[0].scale[c] : 1.0f));
    else return 0;
    *amax = a;
    return 1;
}

static double error_energy(const float *ref, const float *y)
{
    double e = 0;
    for (int i = 0; i < C * 64 * N_IMAGES; i++) {
        double d = (double)ref[i] - (double)y[i];
        e += d * d;
    }
    return e;
}

TEST(exact_and_better)
{
    for (int bn = 0; bn < 2; bn++) {
        ptq_graph *g = chain((bn ? WITH_BN : 0) | WITH_RELU | DW), *orig = chain((bn ? WITH_BN : 0) | WITH_RELU | DW);
        gb_source m = gb_images(4, (const int64_t[]){N_IMAGES, 4, 8, 8}, N_IMAGES);
        eng_equalization eq;
        EXPECT(measure(g, &m, 2, &eq) == PTQ_OK);
        EXPECT(eq.n == 1 && eq.images == N_IMAGES);
        const eng_eq_pair *p = &eq.pairs[0];
        EXPECT(p->spread > 50 && p->spread_after <= 2.0);
        for (int c = 0; c < C; c++) {
            int e;
            EXPECT(frexpf(p->scale[c], &e) == 0.5f && p->scale[c] >= 1.0f); /* powers of two, never shrinking */
        }
        float *before = run(g, &m);
        EXPECT(eng_equalize_apply(g, &eq) == PTQ_OK);
        float *after = run(g, &m);
        EXPECT(memcmp(before, after, sizeof(float) * C * 64 * N_IMAGES) == 0); /* the same bits */

        /* INT8: per-tensor r1 costs the small channels their levels; equalized, far less */
        quant_options o = quant_defaults();
        o.range = ranges;
        quant_report r;
        rctx = (range_ctx){&m, &eq, 0};
        EXPECT(quant_insert_qdq(orig, &o, &r) == PTQ_OK);
        quant_report_free(&r);
        rctx.scaled = 1;
        EXPECT(quant_insert_qdq(g, &o, &r) == PTQ_OK);
        quant_report_free(&r);
        float *q0 = run(orig, &m), *q1 = run(g, &m);
        double e0 = error_energy(before, q0), e1 = error_energy(before, q1);
        EXPECT(e1 < 0.5 * e0); /* 2.5x and 4.8x less here; the input's and the weights' rounding stay */
        free(before);
        free(after);
        free(q0);
        free(q1);
        free(m.data);
        eng_equalization_free(&eq);
        ptq_graph_destroy(g);
        ptq_graph_destroy(orig);
    }
}

TEST(deterministic_and_checked)
{
    ptq_graph *g = chain(WITH_BN | WITH_RELU | DW);
    gb_source m = gb_images(4, (const int64_t[]){N_IMAGES, 4, 8, 8}, N_IMAGES);
    eng_equalization a, b;
    EXPECT(measure(g, &m, 1, &a) == PTQ_OK);
    m.batch = 1;
    EXPECT(measure(g, &m, 3, &b) == PTQ_OK);
    EXPECT(a.n == 1 && b.n == 1 && memcmp(a.pairs[0].range, b.pairs[0].range, sizeof(float) * C) == 0 &&
           memcmp(a.pairs[0].scale, b.pairs[0].scale, sizeof(float) * C) == 0);
    /* applying to a model without that pair fails and names it */
    ptq_graph *other = chain(WITH_BN | WITH_RELU);
    EXPECT(eng_equalize_apply(other, &a) == PTQ_ERR_ARG);
    ptq_graph_destroy(other);
    eng_equalization_free(&a);
    eng_equalization_free(&b);
    ptq_graph_destroy(g);
    free(m.data);
}

int main(void)
{
    RUN(chains_taken_and_left);
    RUN(exact_and_better);
    RUN(deterministic_and_checked);
    return test_summary();
}
