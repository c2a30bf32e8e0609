/* test_plan.c: the executor: sorting, folding, fusion, memory reuse, observers, errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/op.h"
#include "runtime/plan.h"
#include "tests/test.h"
#include "tests/unit/tiny_graph.h"

/* --- tiny graph builder: tests/unit/tiny_graph.h --- */

static void attr_ints(ptq_graph *g, int n, const char *name, const int64_t *v, size_t count)
{
    ptq_attr a;
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup(name);
    a.type = PTQ_ATTR_INTS;
    a.ints = malloc(sizeof(int64_t) * count);
    memcpy(a.ints, v, sizeof(int64_t) * count);
    a.n = count;
    ptq_node_add_attr(&g->nodes[n], &a);
}

static ptq_graph *new_graph(void)
{
    ptq_graph *g = ptq_graph_create();
    g->opsets = calloc(1, sizeof *g->opsets);
    g->opsets[0].domain = ptq_strdup("");
    g->opsets[0].version = 13;
    g->n_opsets = 1;
    return g;
}

static int have_ops(const char *const *ops, int n)
{
    for (int i = 0; i < n; i++)
        if (!ptq_op_get(ptq_op_find("", ops[i]))) return 0;
    return 1;
}

/* --- observer that records names --- */
typedef struct {
    char names[64][32];
    int n;
} seen_log;

static ptq_status record(const char *name, int nd, const ptq_tensor *t, void *user)
{
    seen_log *log = user;
    (void)nd;
    (void)t;
    if (log->n < 64) snprintf(log->names[log->n++], 32, "%s", name);
    return PTQ_OK;
}

TEST(every_op_in_ops_def_has_a_kernel)
{
    for (int i = 0; i < PTQ_OP_COUNT; i++)
        if (!ptq_op_get(i)) TEST_FAILF("op %s has no kernel linked", ptq_op_name(i));
}

TEST(toposort_orders_an_unsorted_graph_and_finds_cycles)
{
    ptq_graph *g = new_graph();
    int64_t d[1] = {4};
    input(g, "x", 1, d);
    node(g, "second", "Relu", "a", NULL, "b");
    node(g, "first", "Relu", "x", NULL, "a");
    output(g, "b");
    int order[2];
    EXPECT_EQ_INT(ptq_graph_toposort(g, order), PTQ_OK);
    EXPECT_EQ_INT(order[0], 1);
    EXPECT_EQ_INT(order[1], 0);
    ptq_graph_destroy(g);

    g = new_graph();
    input(g, "x", 1, d);
    node(g, "p", "Add", "x", "q_out", "p_out");
    node(g, "q", "Relu", "p_out", NULL, "q_out");
    output(g, "q_out");
    EXPECT_EQ_INT(ptq_graph_toposort(g, order), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "cycle") != NULL);
    ptq_graph_destroy(g);

    g = new_graph();
    input(g, "x", 1, d);
    node(g, "p", "Add", "x", "w_missing", "y");
    output(g, "y");
    EXPECT_EQ_INT(ptq_graph_toposort(g, order), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "w_missing") != NULL);
    ptq_graph_destroy(g);
}

TEST(unsupported_ops_are_listed_together)
{
    ptq_graph *g = new_graph();
    int64_t d[1] = {4};
    input(g, "x", 1, d);
    node(g, "n1", "FancyOp", "x", NULL, "a");
    node(g, "n2", "Relu", "a", NULL, "b");
    node(g, "n3", "OtherOp", "b", NULL, "c");
    output(g, "c");
    ptq_plan *p = NULL;
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, NULL, &p), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "FancyOp (1 node, first 'n1')") != NULL);
    EXPECT(strstr(ptq_last_error(), "OtherOp (1 node, first 'n3')") != NULL);
    EXPECT(p == NULL);
    ptq_graph_destroy(g);
}

TEST(symbolic_dims_must_be_bound)
{
    ptq_graph *g = new_graph();
    int64_t d[2] = {-1, 4};
    input(g, "x", 2, d);
    g->values[0].dim_params[0] = ptq_strdup("batch");
    node(g, "r", "Relu", "x", NULL, "y");
    output(g, "y");
    ptq_plan *p = NULL;
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, NULL, &p), PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "batch") != NULL);
    ptq_input_shape s = {.name = "x", .rank = 3, .dims = {2, 4, 1}};
    EXPECT_EQ_INT(ptq_plan_create(g, &s, 1, NULL, &p), PTQ_ERR_SHAPE); /* wrong rank */
    ptq_input_shape s2 = {.name = "x", .rank = 2, .dims = {2, 5}};
    EXPECT_EQ_INT(ptq_plan_create(g, &s2, 1, NULL, &p), PTQ_ERR_SHAPE); /* fixed dim differs */
    ptq_input_shape s3 = {.name = "x", .rank = 2, .dims = {3, 4}};
    if (ptq_op_get(PTQ_OP_RELU)) {
        EXPECT_EQ_INT(ptq_plan_create(g, &s3, 1, NULL, &p), PTQ_OK);
        ptq_plan_destroy(p);
    }
    ptq_graph_destroy(g);
}

/* A chain of 8 Relus on 1 MiB tensors needs two buffers, not eight. */
TEST(arena_reuses_dead_buffers)
{
    if (!ptq_op_get(PTQ_OP_RELU)) SKIP("Relu kernel not linked");
    ptq_graph *g = new_graph();
    int64_t d[1] = {262144};
    input(g, "t0", 1, d);
    char a[8], b[8];
    for (int i = 0; i < 8; i++) {
        snprintf(a, sizeof a, "t%d", i);
        snprintf(b, sizeof b, "t%d", i + 1);
        node(g, b, "Relu", a, NULL, b);
    }
    output(g, "t8");
    ptq_plan *p = NULL;
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, NULL, &p), PTQ_OK);
    if (p) {
        EXPECT_EQ_INT(ptq_plan_arena_bytes(p), 2 * 262144 * 4);
        ptq_tensor x = {.dtype = PTQ_F32, .rank = 1, .dims = {262144}};
        ptq_tensor_alloc(&x);
        for (int i = 0; i < 262144; i++) ((float *)x.data)[i] = (float)(i % 7) - 3.0f;
        EXPECT_EQ_INT(ptq_plan_run(p, &x, 1), PTQ_OK);
        const float *y = ptq_plan_output(p, 0, NULL)->data;
        EXPECT_NEAR(y[0], 0.0, 0, 0);
        EXPECT_NEAR(y[6], 3.0, 0, 0);
        ptq_tensor_free(&x);
    }
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);
}

/* Conv -> BatchNormalization -> Relu: fused and unfused plans agree; the observer
 * sees every tensor (so nothing is fused away) in plan order, inputs first. */
TEST(fusion_matches_unfused_and_observer_sees_all)
{
    static const char *const ops[] = {"Conv", "BatchNormalization", "Relu"};
    if (!have_ops(ops, 3)) SKIP("Conv, BatchNormalization or Relu kernel not linked");
    ptq_graph *g = new_graph();
    int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3}, cd[1] = {3};
    float w[54], s[3] = {0.5f, 2.0f, -1.0f}, bb[3] = {0.1f, -0.2f, 0.3f}, m[3] = {0.05f, -0.1f, 0.2f},
                v[3] = {1.0f, 0.25f, 4.0f};
    for (int i = 0; i < 54; i++) w[i] = (float)((i * 37) % 11 - 5) / 7.0f;
    input(g, "x", 4, xd);
    init(g, "w", PTQ_F32, 4, wd, w);
    init(g, "s", PTQ_F32, 1, cd, s);
    init(g, "b", PTQ_F32, 1, cd, bb);
    init(g, "m", PTQ_F32, 1, cd, m);
    init(g, "v", PTQ_F32, 1, cd, v);
    int c = node(g, "conv", "Conv", "x", "w", "c");
    int64_t pads[4] = {1, 1, 1, 1};
    attr_ints(g, c, "pads", pads, 4);
    int bn_vals[5] = {val(g, "c"), val(g, "s"), val(g, "b"), val(g, "m"), val(g, "v")}, bn_out = val(g, "bn"), bn;
    ptq_graph_add_node(g, "bn", "BatchNormalization", "", bn_vals, 5, &bn_out, 1, &bn);
    node(g, "relu", "Relu", "bn", NULL, "y");
    output(g, "y");

    ptq_tensor x = {.dtype = PTQ_F32, .rank = 4, .dims = {1, 2, 5, 5}};
    ptq_tensor_alloc(&x);
    for (int i = 0; i < 50; i++) ((float *)x.data)[i] = (float)((i * 13) % 9 - 4) / 3.0f;

    ptq_plan_options fused = ptq_plan_defaults(), plain = ptq_plan_defaults();
    plain.fuse = 0;
    seen_log log = {0};
    ptq_plan_options observed = ptq_plan_defaults();
    observed.observer = record;
    observed.observer_user = &log;
    ptq_plan *pf = NULL, *pp = NULL, *po = NULL;
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &fused, &pf), PTQ_OK);
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &plain, &pp), PTQ_OK);
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &observed, &po), PTQ_OK);
    if (pf && pp && po) {
        EXPECT_EQ_INT(ptq_plan_run(pf, &x, 1), PTQ_OK);
        EXPECT_EQ_INT(ptq_plan_run(pp, &x, 1), PTQ_OK);
        EXPECT_EQ_INT(ptq_plan_run(po, &x, 1), PTQ_OK);
        const float *yf = ptq_plan_output(pf, 0, NULL)->data, *yp = ptq_plan_output(pp, 0, NULL)->data,
                    *yo = ptq_plan_output(po, 0, NULL)->data;
        int nonzero = 0;
        for (int i = 0; i < 75; i++) {
            EXPECT_NEAR(yf[i], yp[i], 1e-5, 1e-5);
            EXPECT_NEAR(yo[i], yp[i], 0, 0);
            nonzero += yp[i] != 0.0f;
        }
        EXPECT(nonzero > 10);
        EXPECT_EQ_INT(log.n, 4);
        EXPECT_STR(log.names[0], "x");
        EXPECT_STR(log.names[1], "c");
        EXPECT_STR(log.names[2], "bn");
        EXPECT_STR(log.names[3], "y");
    }
    ptq_plan_destroy(pf);
    ptq_plan_destroy(pp);
    ptq_plan_destroy(po);
    ptq_tensor_free(&x);
    ptq_graph_destroy(g);
}

/* Steps a plan runs (fused steps are skipped); -1 on error. */
static int count_steps(ptq_plan *p, const ptq_tensor *x)
{
    int n = 0, finished = 0;
    if (ptq_plan_begin(p, x, 1) != PTQ_OK) return -1;
    for (;;) {
        if (ptq_plan_step(p, &finished) != PTQ_OK) return -1;
        if (finished) return n;
        n++;
    }
}

/* ConvTranspose -> Add (a bias written as its own node) -> BatchNormalization -> Sigmoid, as
 * PP-OCR det's head: in a plan with fusion the three follow the ConvTranspose as its epilogue
 * (one step), and every output byte equals the unfused plan's; once with kernel = stride (each
 * output one tap, the exact path) and once with overlapping taps (kernel 3, stride 2, pad 1). */
TEST(conv_transpose_epilogue_fuses_bit_for_bit)
{
    static const char *const ops[] = {"ConvTranspose", "Add", "BatchNormalization", "Sigmoid"};
    if (!have_ops(ops, 4)) SKIP("ConvTranspose, Add, BatchNormalization or Sigmoid kernel not linked");
    for (int overlap = 0; overlap < 2; overlap++) {
        const int64_t k = overlap ? 3 : 2, cin = 4, cout = 3, h = 5, w = 6;
        int64_t xd[4] = {1, cin, h, w}, wd[4] = {cin, cout, k, k}, cd[1] = {cout}, bd[4] = {1, cout, 1, 1};
        float wt[4 * 3 * 3 * 3], s[3] = {0.5f, 2.0f, -1.0f}, bb[3] = {0.1f, -0.2f, 0.3f},
                                 m[3] = {0.05f, -0.1f, 0.2f}, v[3] = {1.0f, 0.25f, 4.0f}, add[3] = {0.7f, -1.3f, 0.01f};
        for (int i = 0; i < (int)(cin * cout * k * k); i++) wt[i] = (float)((i * 37) % 11 - 5) / 7.0f;
        ptq_graph *g = new_graph();
        input(g, "x", 4, xd);
        init(g, "w", PTQ_F32, 4, wd, wt);
        init(g, "a", PTQ_F32, 4, bd, add);
        init(g, "s", PTQ_F32, 1, cd, s);
        init(g, "b", PTQ_F32, 1, cd, bb);
        init(g, "m", PTQ_F32, 1, cd, m);
        init(g, "v", PTQ_F32, 1, cd, v);
        int ct = node(g, "ct", "ConvTranspose", "x", "w", "c");
        int64_t strides[2] = {2, 2}, pads[4] = {1, 1, 1, 1}, outpad[2] = {1, 1};
        attr_ints(g, ct, "strides", strides, 2);
        if (overlap) {
            attr_ints(g, ct, "pads", pads, 4);
            attr_ints(g, ct, "output_padding", outpad, 2);
        }
        node(g, "add", "Add", "c", "a", "ca");
        int bn_vals[5] = {val(g, "ca"), val(g, "s"), val(g, "b"), val(g, "m"), val(g, "v")}, bn_out = val(g, "bn"), bn;
        ptq_graph_add_node(g, "bn", "BatchNormalization", "", bn_vals, 5, &bn_out, 1, &bn);
        node(g, "sig", "Sigmoid", "bn", NULL, "y");
        output(g, "y");
        ptq_tensor x = {.dtype = PTQ_F32, .rank = 4, .dims = {1, cin, h, w}};
        ptq_tensor_alloc(&x);
        for (int i = 0; i < (int)(cin * h * w); i++) ((float *)x.data)[i] = (float)((i * 13) % 9 - 4) / 3.0f;
        ptq_plan_options fused = ptq_plan_defaults(), plain = ptq_plan_defaults();
        plain.fuse = 0;
        ptq_plan *pf = NULL, *pp = NULL;
        EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &fused, &pf), PTQ_OK);
        EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &plain, &pp), PTQ_OK);
        if (pf && pp) {
            EXPECT_EQ_INT(count_steps(pf, &x), 1);
            EXPECT_EQ_INT(count_steps(pp, &x), 4);
            const ptq_tensor *yf = ptq_plan_output(pf, 0, NULL), *yp = ptq_plan_output(pp, 0, NULL);
            EXPECT_EQ_INT(yf->dims[2], 2 * h);
            EXPECT_EQ_INT(yf->dims[3], 2 * w);
            size_t n = ptq_tensor_numel(yp);
            int differ = 0, mid = 0;
            for (size_t i = 0; i < n; i++) {
                differ += memcmp(&((const float *)yf->data)[i], &((const float *)yp->data)[i], sizeof(float)) != 0;
                mid += ((const float *)yp->data)[i] > 0.01f && ((const float *)yp->data)[i] < 0.99f;
            }
            EXPECT_EQ_INT(differ, 0);
            EXPECT(mid > (int)n / 4); /* the sigmoid's range, not saturated */
        }
        ptq_plan_destroy(pf);
        ptq_plan_destroy(pp);
        ptq_tensor_free(&x);
        ptq_graph_destroy(g);
    }
}

/* QuantizeLinear -> DequantizeLinear -> Relu, once with the pair's scale and zero point
 * shared and once with a DequantizeLinear of another scale: the fused plan (one float step
 * for the pair) gives the unfused plan's bytes, the observer sees the dequantized tensor
 * with DequantizeLinear as its producer, and a plan from an arena pool reuses the arena of
 * the one destroyed before it. */
static ptq_graph *qdq_graph(float dq_scale, int with_zp)
{
    ptq_graph *g = new_graph();
    int64_t xd[2] = {3, 1000}, one[1] = {1};
    float sc = 0.02f;
    input(g, "x", 2, xd);
    init(g, "qs", PTQ_F32, 1, one, &sc);
    init(g, "ds", PTQ_F32, 1, one, &dq_scale);
    if (with_zp) { /* int8 zero points of -3: the clamp range is [-128, 127] */
        for (int k = 0; k < 2; k++) {
            int v = val(g, k ? "dz" : "qz");
            ptq_value *z = &g->values[v];
            z->kind = PTQ_VALUE_INITIALIZER;
            z->t.dtype = PTQ_I8;
            z->t.rank = 1;
            z->t.dims[0] = 1;
            ptq_tensor_alloc(&z->t);
            *(int8_t *)z->t.data = -3;
            g->initializers = realloc(g->initializers, sizeof(int) * (size_t)(g->n_initializers + 1));
            g->initializers[g->n_initializers++] = v;
        }
    }
    int ins[3] = {val(g, "x"), val(g, "qs"), with_zp ? val(g, "qz") : -1}, q_out = val(g, "q"), n;
    ptq_graph_add_node(g, "quant", "QuantizeLinear", "", ins, with_zp ? 3 : 2, &q_out, 1, &n);
    int dins[3] = {val(g, "q"), val(g, "ds"), with_zp ? val(g, "dz") : -1}, d_out = val(g, "dq");
    ptq_graph_add_node(g, "dequant", "DequantizeLinear", "", dins, with_zp ? 3 : 2, &d_out, 1, &n);
    node(g, "r1", "Relu", "dq", NULL, "y");
    output(g, "y");
    return g;
}

typedef struct {
    int producer;
    int calls;
} dq_seen;

static ptq_status see_dq(const char *name, int nd, const ptq_tensor *t, void *user)
{
    dq_seen *s = user;
    (void)t;
    if (!strcmp(name, "dq")) {
        s->producer = nd;
        s->calls++;
    }
    return PTQ_OK;
}

static int only_dq(const char *name, void *user)
{
    (void)user;
    return !strcmp(name, "dq");
}

TEST(quantize_dequantize_pairs_fuse_bit_for_bit)
{
    static const char *const ops[] = {"Relu", "QuantizeLinear", "DequantizeLinear"};
    if (!have_ops(ops, 3)) SKIP("Relu or Q/DQ kernels not linked");
    ptq_tensor x = {.dtype = PTQ_F32, .rank = 2, .dims = {3, 1000}};
    ptq_tensor_alloc(&x);
    float *xv = x.data;
    for (int i = 0; i < 3000; i++) xv[i] = (float)((i * 7919) % 8001 - 500) / 900.0f; /* past the clamp too */
    xv[5] = NAN;                                                                     /* NaN quantizes to the zero point */
    ptq_arena_pool *pool = ptq_arena_pool_create();
    EXPECT(pool != NULL);
    for (int c = 0; c < 4; c++) {
        int with_zp = c & 1;
        ptq_graph *g = qdq_graph(c < 2 ? 0.02f : 0.03f, with_zp);
        ptq_plan_options fused = ptq_plan_defaults(), plain = ptq_plan_defaults();
        plain.fuse = 0;
        dq_seen seen = {-2, 0};
        fused.observer = see_dq;
        fused.observe_filter = only_dq;
        fused.observer_user = &seen;
        fused.pool = pool;
        ptq_plan *pf = NULL, *pp = NULL;
        EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &fused, &pf), PTQ_OK);
        EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &plain, &pp), PTQ_OK);
        if (pf && pp) {
            EXPECT_EQ_INT(ptq_plan_run(pf, &x, 1), PTQ_OK);
            EXPECT_EQ_INT(ptq_plan_run(pp, &x, 1), PTQ_OK);
            const ptq_tensor *yf = ptq_plan_output(pf, 0, NULL), *yp = ptq_plan_output(pp, 0, NULL);
            EXPECT(memcmp(yf->data, yp->data, ptq_tensor_nbytes(yp)) == 0);
            /* fused (same scale): no int8 tensor in the arena */
            if (c < 2) EXPECT(ptq_plan_arena_bytes(pf) < ptq_plan_arena_bytes(pp));
            else EXPECT_EQ_INT(ptq_plan_arena_bytes(pf), ptq_plan_arena_bytes(pp));
            EXPECT_EQ_INT(seen.calls, 1);
            EXPECT_EQ_INT(seen.producer, g->values[val(g, "dq")].producer);
            const float *y = yp->data;
            int clamped = 0;
            for (int i = 0; i < 3000; i++) clamped += y[i] == (with_zp ? 130.0f : 255.0f) * (c < 2 ? 0.02f : 0.03f);
            EXPECT(clamped > 0);
        }
        ptq_plan_destroy(pf);
        ptq_plan_destroy(pp);
        ptq_graph_destroy(g);
    }
    ptq_arena_pool_destroy(pool);
    ptq_tensor_free(&x);
}

/* quant_fp16_simulate's rounding, Cast(float16) -> Cast(float): x -> Mul -> pair -> Sigmoid -> pair
 * -> y, and x's own pair read by an Add beside the Mul: every pair becomes one step or the
 * rounding of its producer's output in place (Mul's, Sigmoid's), so the fused plan runs 4 steps
 * (Mul, Sigmoid, x's pair as one step, Add) where the unfused runs 9, with the unfused plan's
 * bytes on values that round every way (ties, subnormals, overflow, NaN, -0); and
 * ptq_round_f16 equals ptq_f32_to_f16 then ptq_f16_to_f32 over a sweep of bit patterns. */
static void attr_int(ptq_graph *g, int n, const char *name, int64_t v)
{
    ptq_attr a;
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup(name);
    a.type = PTQ_ATTR_INT;
    a.i = v;
    ptq_node_add_attr(&g->nodes[n], &a);
}

TEST(float16_round_trips_fuse_bit_for_bit)
{
    static const char *const ops[] = {"Cast", "Mul", "Add", "Sigmoid"};
    if (!have_ops(ops, 4)) SKIP("Cast, Mul, Add or Sigmoid kernel not linked");
    ptq_graph *g = new_graph();
    int64_t xd[2] = {3, 4001}, one[1] = {1};
    float k = 1.0009765625f; /* 1 + 2^-10: products land between halves */
    input(g, "x", 2, xd);
    init(g, "k", PTQ_F32, 1, one, &k);
    const char *pair[3][3] = {{"m", "m16", "mr"}, {"s", "s16", "y"}, {"x", "x16", "xr"}};
    node(g, "mul", "Mul", "x", "k", "m");
    node(g, "sig", "Sigmoid", "mr", NULL, "s");
    for (int c = 0; c < 3; c++) {
        attr_int(g, node(g, pair[c][1], "Cast", pair[c][0], NULL, pair[c][1]), "to", PTQ_F16);
        attr_int(g, node(g, pair[c][2], "Cast", pair[c][1], NULL, pair[c][2]), "to", PTQ_F32);
    }
    node(g, "add", "Add", "xr", "x", "z");
    output(g, "y");
    output(g, "z");
    ptq_tensor x = {.dtype = PTQ_F32, .rank = 2, .dims = {3, 4001}};
    ptq_tensor_alloc(&x);
    float *xv = x.data;
    uint32_t r = 12345;
    for (int i = 0; i < 12003; i++) {
        r = r * 1664525u + 1013904223u;
        xv[i] = ldexpf((float)(r >> 8) / 16777216.0f - 0.5f, (int)(r % 48) - 30); /* 2^-31 .. 2^17 */
    }
    static const float special[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f, -3e-8f, 5.96e-8f,
                                    2.98023224e-8f, 6.1e-5f, 1.00048828125f, 1.00146484375f, INFINITY, -INFINITY};
    for (int i = 0; i < (int)(sizeof special / sizeof *special); i++) xv[100 + i] = special[i];
    xv[200] = NAN;
    xv[201] = -NAN;
    ptq_plan_options fused = ptq_plan_defaults(), plain = ptq_plan_defaults();
    plain.fuse = 0;
    ptq_plan *pf = NULL, *pp = NULL;
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &fused, &pf), PTQ_OK);
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &plain, &pp), PTQ_OK);
    if (pf && pp) {
        EXPECT_EQ_INT(count_steps(pf, &x), 4); /* Mul (rounded), Sigmoid (rounded), x's pair, Add */
        EXPECT_EQ_INT(count_steps(pp, &x), 9);
        EXPECT_EQ_INT(ptq_plan_run(pf, &x, 1), PTQ_OK);
        EXPECT_EQ_INT(ptq_plan_run(pp, &x, 1), PTQ_OK);
        for (int o = 0; o < 2; o++) {
            const ptq_tensor *yf = ptq_plan_output(pf, o, NULL), *yp = ptq_plan_output(pp, o, NULL);
            EXPECT(memcmp(yf->data, yp->data, ptq_tensor_nbytes(yp)) == 0);
        }
        const float *z = ptq_plan_output(pp, 1, NULL)->data;
        EXPECT(z[100 + 4] == INFINITY && z[100 + 5] == -INFINITY); /* 65520 overflows to infinity */
    }
    float a[4096], b[4096];
    int bad = 0;
    for (uint32_t base = 0; base < 0x100000u; base++) { /* 2^32 bit patterns in steps of 4096 */
        for (int i = 0; i < 4096; i++) {
            uint32_t bits = (base << 12) ^ (uint32_t)i * 2654435761u;
            memcpy(&a[i], &bits, 4);
        }
        ptq_round_f16(a, b, 4096, 1);
        for (int i = 0; i < 4096; i++) {
            float want = ptq_f16_to_f32(ptq_f32_to_f16(a[i]));
            bad += memcmp(&want, &b[i], 4) != 0;
        }
        if (base % 4 == 0) base += 3 + (base & 0x7f); /* a sample of the exponents and mantissas */
    }
    EXPECT_EQ_INT(bad, 0);
    ptq_plan_destroy(pf);
    ptq_plan_destroy(pp);
    ptq_tensor_free(&x);
    ptq_graph_destroy(g);
}

/* quant_fp16_simulate's float part after an INT8 layer, as PP-OCRv4 rec has it: a per-channel
 * affine (Mul by [1,C,1,1], Add of [C,1,1]), hard-swish (Add 3, Clip 0..6, Mul, Div 6), Sub of a
 * scalar, every value after the Mul rounded to FP16. The fused plan runs 2 steps (the Mul, the
 * rest as one ptq_op_ew_chain), or with b a graph output too 3 (the Mul, the Add, the rest from
 * b) where the unfused runs 19, with the
 * unfused plan's bytes on b and y, at 1 and 2 threads, on values that round every way (ties,
 * subnormals, overflow, -0, infinities at the Clip, NaNs with payloads, in the 8-wide body and
 * the tail of a row). */
TEST(elementwise_chains_fuse_bit_for_bit)
{
    static const char *const ops[] = {"Cast", "Mul", "Add", "Sub", "Div", "Clip"};
    if (!have_ops(ops, 6)) SKIP("Cast, Mul, Add, Sub, Div or Clip kernel not linked");
    for (int pin_b = 0; pin_b < 2; pin_b++) {
        ptq_graph *g = new_graph();
        int64_t xd[4] = {2, 3, 5, 701}, kd[4] = {1, 3, 1, 1}, bd[3] = {3, 1, 1}, one[1] = {1};
        float kc[3] = {1.0009765625f, -0.75f, 3.0e-3f}, bc[3] = {0.5f, -2.0f, 1e-7f}, three = 3.0f, zero = 0.0f, six = 6.0f,
              half = 0.5f;
        input(g, "x", 4, xd);
        init(g, "kc", PTQ_F32, 4, kd, kc);
        init(g, "bc", PTQ_F32, 3, bd, bc);
        init(g, "three", PTQ_F32, 1, one, &three);
        init(g, "zero", PTQ_F32, 0, one, &zero);
        init(g, "six", PTQ_F32, 0, one, &six);
        init(g, "half", PTQ_F32, 1, one, &half);
        /* value, its float16, its rounding */
        const char *pair[6][3] = {{"b0", "b16", "b"}, {"t0", "t16", "t"}, {"c0", "c16", "c"},
                                  {"m0", "m16", "m"}, {"h0", "h16", "h"}, {"y0", "y16", "y"}};
        for (int c = 0; c < 6; c++) {
            attr_int(g, node(g, pair[c][1], "Cast", pair[c][0], NULL, pair[c][1]), "to", PTQ_F16);
            attr_int(g, node(g, pair[c][2], "Cast", pair[c][1], NULL, pair[c][2]), "to", PTQ_F32);
        }
        node(g, "mul", "Mul", "x", "kc", "a");
        node(g, "add", "Add", "bc", "a", "b0");
        node(g, "add3", "Add", "b", "three", "t0");
        int ins[3] = {val(g, "t"), val(g, "zero"), val(g, "six")}, outs[1] = {val(g, "c0")}, n;
        ptq_graph_add_node(g, "clip", "Clip", "", ins, 3, outs, 1, &n);
        node(g, "hmul", "Mul", "b", "c", "m0");
        node(g, "div6", "Div", "m", "six", "h0");
        node(g, "sub", "Sub", "h", "half", "y0");
        if (pin_b) output(g, "b");
        output(g, "y");
        ptq_tensor x = {.dtype = PTQ_F32, .rank = 4, .dims = {2, 3, 5, 701}};
        ptq_tensor_alloc(&x);
        float *xv = x.data;
        size_t nx = ptq_tensor_numel(&x);
        uint32_t r = 4242;
        for (size_t i = 0; i < nx; i++) {
            r = r * 1664525u + 1013904223u;
            xv[i] = ldexpf((float)(r >> 8) / 16777216.0f - 0.5f, (int)(r % 48) - 30); /* 2^-31 .. 2^17 */
        }
        static const float special[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f, -3e-8f, 5.96e-8f,
                                        2.98023224e-8f, 6.1e-5f, 1.00048828125f, 1.00146484375f, INFINITY, -INFINITY,
                                        -3.0f, 3.0f, 5.99f, -2.999f};
        for (int c = 0; c < 3; c++) /* in each channel, in the 8-wide body and the tail of a row */
            for (int i = 0; i < (int)(sizeof special / sizeof *special); i++) {
                xv[(size_t)c * 5 * 701 + 40 + (size_t)i] = special[i];
                xv[(size_t)c * 5 * 701 + 701 - 1 - (size_t)i % 5] = special[i];
            }
        uint32_t payload[3] = {0x7fc12345u, 0xffd00001u, 0x7fa00001u}; /* NaNs with payloads (one signalling) */
        memcpy(&xv[300], &payload[0], 4);
        memcpy(&xv[301], &payload[1], 4);
        memcpy(&xv[nx - 1], &payload[2], 4);
        for (int threads = 1; threads <= 2; threads++) {
            ptq_plan_options fused = ptq_plan_defaults(), plain = ptq_plan_defaults();
            fused.nthreads = plain.nthreads = threads;
            plain.fuse = 0;
            ptq_plan *pf = NULL, *pp = NULL;
            EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &fused, &pf), PTQ_OK);
            EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &plain, &pp), PTQ_OK);
            if (pf && pp) {
                EXPECT_EQ_INT(count_steps(pf, &x), pin_b ? 3 : 2);
                EXPECT_EQ_INT(count_steps(pp, &x), 19);
                EXPECT_EQ_INT(ptq_plan_run(pf, &x, 1), PTQ_OK);
                EXPECT_EQ_INT(ptq_plan_run(pp, &x, 1), PTQ_OK);
                for (int o = 0; o < 1 + pin_b; o++) {
                    const ptq_tensor *yf = ptq_plan_output(pf, o, NULL), *yp = ptq_plan_output(pp, o, NULL);
                    EXPECT(memcmp(yf->data, yp->data, ptq_tensor_nbytes(yp)) == 0);
                }
                const float *y = ptq_plan_output(pp, pin_b, NULL)->data;
                int nan = 0;
                for (size_t i = 0; i < nx; i++) nan += isnan(y[i]);
                EXPECT(nan >= 3); /* the NaNs went through (and inf * 0 made some) */
            }
            ptq_plan_destroy(pf);
            ptq_plan_destroy(pp);
        }
        ptq_tensor_free(&x);
        ptq_graph_destroy(g);
    }
}

/* Plans made with bound_memory share one block (engine/runner.c: a plan per input shape,
 * one arena): two shapes of a Conv + Relu graph (the conv needs scratch), run in turn on
 * one block grown to the larger need, give the bits of plans with their own arenas; a
 * plan never bound refuses to run. */
TEST(plans_of_two_shapes_share_one_bound_block)
{
    static const char *const ops[] = {"Conv", "Relu"};
    if (!have_ops(ops, 2)) SKIP("Conv or Relu kernel not linked");
    ptq_graph *g = new_graph();
    int64_t xd[4] = {-1, 3, -1, -1}, wd[4] = {4, 3, 3, 3};
    float w[108];
    for (int i = 0; i < 108; i++) w[i] = (float)((i * 29) % 13 - 6) / 9.0f;
    input(g, "x", 4, xd);
    init(g, "w", PTQ_F32, 4, wd, w);
    int c = node(g, "conv", "Conv", "x", "w", "c");
    int64_t pads[4] = {1, 1, 1, 1};
    attr_ints(g, c, "pads", pads, 4);
    node(g, "relu", "Relu", "c", NULL, "y");
    output(g, "y");
    ptq_input_shape shapes[2] = {{.name = "x", .rank = 4, .dims = {2, 3, 9, 11}}, {.name = "x", .rank = 4, .dims = {1, 3, 20, 17}}};
    ptq_tensor x[2];
    ptq_plan *own[2] = {NULL, NULL}, *bound[2] = {NULL, NULL};
    ptq_plan_options po = ptq_plan_defaults(), pb = ptq_plan_defaults();
    pb.bound_memory = 1;
    pb.fuse = po.fuse = 0; /* Conv's im2col path: scratch in the block too */
    size_t need = 0;
    for (int k = 0; k < 2; k++) {
        x[k] = (ptq_tensor){.dtype = PTQ_F32, .rank = 4};
        memcpy(x[k].dims, shapes[k].dims, sizeof x[k].dims);
        ptq_tensor_alloc(&x[k]);
        float *xv = x[k].data;
        for (size_t i = 0; i < ptq_tensor_numel(&x[k]); i++) xv[i] = (float)((i * 7 + k) % 17) / 5.0f - 1.5f;
        EXPECT_EQ_INT(ptq_plan_create(g, &shapes[k], 1, &po, &own[k]), PTQ_OK);
        EXPECT_EQ_INT(ptq_plan_create(g, &shapes[k], 1, &pb, &bound[k]), PTQ_OK);
        if (bound[k] && ptq_plan_memory_bytes(bound[k]) > need) need = ptq_plan_memory_bytes(bound[k]);
    }
    if (own[0] && own[1] && bound[0] && bound[1]) {
        EXPECT(ptq_plan_memory_bytes(bound[1]) >= ptq_plan_arena_bytes(bound[1]) + ptq_plan_scratch_bytes(bound[1]));
        EXPECT(ptq_plan_run(bound[0], &x[0], 1) != PTQ_OK); /* no block yet */
        void *block = ptq_aligned_alloc(need);
        EXPECT(block != NULL);
        for (int round = 0; round < 4 && block; round++) {
            int k = round % 2;
            EXPECT_EQ_INT(ptq_plan_run(own[k], &x[k], 1), PTQ_OK);
            ptq_plan_bind_memory(bound[k], block);
            EXPECT_EQ_INT(ptq_plan_run(bound[k], &x[k], 1), PTQ_OK);
            const ptq_tensor *a = ptq_plan_output(own[k], 0, NULL), *b = ptq_plan_output(bound[k], 0, NULL);
            EXPECT(ptq_shape_equal(a, b));
            EXPECT(memcmp(a->data, b->data, ptq_tensor_nbytes(a)) == 0);
            EXPECT((const char *)b->data >= (const char *)block && (const char *)b->data < (const char *)block + need);
        }
        ptq_aligned_free(block);
    }
    for (int k = 0; k < 2; k++) {
        ptq_plan_destroy(own[k]);
        ptq_plan_destroy(bound[k]);
        ptq_tensor_free(&x[k]);
    }
    ptq_graph_destroy(g);
}

/* Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds at plan time: the plan
 * then runs only the Reshape on the activation. */
TEST(shape_subgraphs_fold)
{
    static const char *const ops[] = {"Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Constant"};
    if (!have_ops(ops, 6)) SKIP("shape ops not linked");
    ptq_graph *g = new_graph();
    int64_t xd[3] = {2, 3, 4}, one = 1;
    input(g, "x", 3, xd);
    float minus1 = 0;
    (void)minus1;
    node(g, "shape", "Shape", "x", NULL, "s");
    /* index 0 as an int64 initializer */
    int iv = val(g, "i0");
    g->values[iv].kind = PTQ_VALUE_INITIALIZER;
    g->values[iv].t.dtype = PTQ_I64;
    g->values[iv].t.rank = 0;
    ptq_tensor_alloc(&g->values[iv].t);
    int axes = val(g, "axes0");
    g->values[axes].kind = PTQ_VALUE_INITIALIZER;
    g->values[axes].t.dtype = PTQ_I64;
    g->values[axes].t.rank = 1;
    g->values[axes].t.dims[0] = 1;
    ptq_tensor_alloc(&g->values[axes].t);
    int m1 = val(g, "m1");
    g->values[m1].kind = PTQ_VALUE_INITIALIZER;
    g->values[m1].t.dtype = PTQ_I64;
    g->values[m1].t.rank = 1;
    g->values[m1].t.dims[0] = 1;
    ptq_tensor_alloc(&g->values[m1].t);
    ((int64_t *)g->values[m1].t.data)[0] = -1;
    node(g, "gather", "Gather", "s", "i0", "n");
    node(g, "unsq", "Unsqueeze", "n", "axes0", "n1");
    int cat_in[2] = {val(g, "n1"), m1}, cat_out = val(g, "shape2"), cat;
    ptq_graph_add_node(g, "concat", "Concat", "", cat_in, 2, &cat_out, 1, &cat);
    ptq_attr a;
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup("axis");
    a.type = PTQ_ATTR_INT;
    a.i = 0;
    ptq_node_add_attr(&g->nodes[cat], &a);
    node(g, "reshape", "Reshape", "x", "shape2", "y");
    output(g, "y");
    (void)one;
    seen_log log = {0};
    ptq_plan_options o = ptq_plan_defaults();
    o.observer = record;
    o.observer_user = &log;
    ptq_plan *p = NULL;
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &o, &p), PTQ_OK);
    if (p) {
        const ptq_tensor *y = ptq_plan_output(p, 0, NULL);
        EXPECT_EQ_INT(y->rank, 2);
        EXPECT_EQ_INT(y->dims[0], 2);
        EXPECT_EQ_INT(y->dims[1], 12);
        ptq_tensor x = {.dtype = PTQ_F32, .rank = 3, .dims = {2, 3, 4}};
        ptq_tensor_alloc(&x);
        EXPECT_EQ_INT(ptq_plan_run(p, &x, 1), PTQ_OK);
        EXPECT_EQ_INT(log.n, 2); /* x and y: the folded int64 shape tensors are not activations */
        ptq_tensor_free(&x);
    }
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);
}

/* --- element-wise ops report their output to a tile sink, in cache --- */
typedef struct {
    ptq_tile_sink sink;
    size_t count;
    uint32_t hash; /* a sum of hashed bit patterns: which thread saw which block does not matter */
    int bad_thread, nthreads;
} tile_log;

static void log_tile(ptq_tile_sink *sk, int thread, const float *y, int64_t rows, int64_t cols, int64_t stride)
{
    tile_log *l = (tile_log *)sk;
    uint32_t x = 0;
    if (thread < 0 || thread >= l->nthreads) l->bad_thread = 1;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            uint32_t u;
            memcpy(&u, &y[r * stride + c], 4);
            x += (u ^ (u >> 15)) * 2654435761u;
        }
#pragma omp critical
    {
        l->count += (size_t)(rows * cols);
        l->hash += x;
    }
}

static tile_log *the_log;
static ptq_tile_sink *sink_for(const char *name, int node, void *user)
{
    (void)node;
    (void)user;
    return !strcmp(name, "y") ? &the_log->sink : NULL;
}

static ptq_status ignore(const char *name, int node, const ptq_tensor *t, void *user)
{
    (void)name, (void)node, (void)t, (void)user;
    return PTQ_OK;
}

/* Add and Mul of one shape (a single row, cut into blocks) and with a per-channel operand:
 * the tiles cover the output exactly once, on the kernel's threads, at 1 and 3 threads. */
TEST(elementwise_ops_report_tiles)
{
    static const char *const ops[] = {"Add", "Mul"};
    /* long rows cut into blocks; short rows (a channel scale of 2 x 24 planes of 12 x 16, as SE
     * blocks have) reported in runs */
    static const int64_t shapes[2][4] = {{1, 4, 96, 128}, {2, 24, 12, 16}};
    for (int sh = 0; sh < 2; sh++)
        for (int k = 0; k < 2; k++)
            for (int bcast = 0; bcast < 2; bcast++)
                for (int nt = 1; nt <= 3; nt += 2) {
                    int64_t xd[4] = {shapes[sh][0], shapes[sh][1], shapes[sh][2], shapes[sh][3]};
                    int64_t bd[4] = {xd[0], xd[1], 1, 1};
                    ptq_graph *g = new_graph();
                    input(g, "x", 4, xd);
                    size_t nb = (size_t)(xd[0] * xd[1]) * (bcast ? 1 : (size_t)(xd[2] * xd[3]));
                    float *b = malloc(sizeof(float) * nb);
                    for (size_t i = 0; i < nb; i++) b[i] = 0.25f * (float)(i % 13) - 1.0f;
                    init(g, "b", PTQ_F32, 4, bcast ? bd : xd, b);
                    node(g, "op", ops[k], "x", "b", "y");
                    output(g, "y");
                    tile_log log = {.sink.tile = log_tile, .nthreads = nt};
                    the_log = &log;
                    ptq_plan_options o = ptq_plan_defaults();
                    o.nthreads = nt;
                    o.observer = ignore;
                    o.tile_sink = sink_for;
                    ptq_plan *p = NULL;
                    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &o, &p), PTQ_OK);
                    ptq_tensor x = {.dtype = PTQ_F32, .rank = 4, .dims = {xd[0], xd[1], xd[2], xd[3]}};
                    ptq_tensor_alloc(&x);
                    for (size_t i = 0; i < ptq_tensor_numel(&x); i++) ((float *)x.data)[i] = (float)(i % 101) * 0.01f;
                    EXPECT_EQ_INT(ptq_plan_run(p, &x, 1), PTQ_OK);
                    const ptq_tensor *y = ptq_plan_output(p, 0, NULL);
                    for (size_t i = 0; i < ptq_tensor_numel(y); i++) { /* the values themselves, whatever the split */
                        size_t c = i / (size_t)(xd[2] * xd[3]), bi = bcast ? c : i;
                        float xv = ((float *)x.data)[i], want = k ? xv * b[bi] : xv + b[bi];
                        if (((float *)y->data)[i] != want) {
                            EXPECT(((float *)y->data)[i] == want);
                            break;
                        }
                    }
                    tile_log whole = {.nthreads = 1};
                    log_tile(&whole.sink, 0, y->data, 1, (int64_t)ptq_tensor_numel(y), (int64_t)ptq_tensor_numel(y));
                    EXPECT(log.count == ptq_tensor_numel(y));
                    EXPECT(!log.bad_thread);
                    EXPECT(log.hash == whole.hash);
                    ptq_tensor_free(&x);
                    ptq_plan_destroy(p);
                    ptq_graph_destroy(g);
                    free(b);
                }
}

int main(void)
{
    RUN(every_op_in_ops_def_has_a_kernel);
    RUN(toposort_orders_an_unsorted_graph_and_finds_cycles);
    RUN(unsupported_ops_are_listed_together);
    RUN(symbolic_dims_must_be_bound);
    RUN(arena_reuses_dead_buffers);
    RUN(fusion_matches_unfused_and_observer_sees_all);
    RUN(elementwise_ops_report_tiles);
    RUN(quantize_dequantize_pairs_fuse_bit_for_bit);
    RUN(float16_round_trips_fuse_bit_for_bit);
    RUN(elementwise_chains_fuse_bit_for_bit);
    RUN(conv_transpose_epilogue_fuses_bit_for_bit);
    RUN(plans_of_two_shapes_share_one_bound_block);
    RUN(shape_subgraphs_fold);
    return test_summary();
}
