/* test_plan_dynamic.c: plans with a dynamic part (data-dependent shapes, runtime/plan.c)
 * and subgraphs (io/onnx.c decoding, runtime/ops/control.c): observer order, determinism
 * across thread counts, repeated runs whose sizes change (down to 0), lockstep stepping,
 * and clear errors for malformed subgraphs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx.h"
#include "runtime/graph.h"
#include "runtime/op.h"
#include "runtime/plan.h"
#include "tests/test.h"
#include "tests/unit/pb_encode.h"
#include "tests/unit/tiny_graph.h"

/* --- tiny graph builder: tests/unit/tiny_graph.h --- */

/* An empty graph of the default domain at opset 13. */
static ptq_graph *graph13(void)
{
    ptq_graph *g = ptq_graph_create();
    g->opsets = calloc(1, sizeof *g->opsets);
    g->opsets[0].domain = ptq_strdup("");
    g->opsets[0].version = 13;
    g->n_opsets = 1;
    return g;
}

/* x[8] -> a = Relu(x) (static), b = Sigmoid(x) (static, an output);
 * nz = NonZero(x > 0) -> idx = Reshape(nz, [-1]) -> gat = Gather(a, idx) -> h = gat * 2 (dynamic) */
static ptq_graph *mixed_graph(void)
{
    ptq_graph *g = graph13();
    int64_t d8[1] = {8}, d1[1] = {1};
    float zero = 0.0f, two = 2.0f;
    int64_t flat = -1;
    input(g, "x", 1, d8);
    init(g, "zero", PTQ_F32, 0, NULL, &zero);
    init(g, "two", PTQ_F32, 0, NULL, &two);
    init(g, "flat", PTQ_I64, 1, d1, &flat);
    node(g, "relu", "Relu", "x", NULL, "a");
    node(g, "pos", "Greater", "x", "zero", "m");
    node(g, "nonzero", "NonZero", "m", NULL, "nz");
    node(g, "reshape", "Reshape", "nz", "flat", "idx");
    node(g, "gather", "Gather", "a", "idx", "gat");
    node(g, "double", "Mul", "gat", "two", "h");
    node(g, "sigmoid", "Sigmoid", "x", NULL, "b");
    output(g, "h");
    output(g, "b");
    return g;
}

typedef struct {
    char names[32][16];
    int n;
} seen_log;

static ptq_status record(const char *name, int nd, const ptq_tensor *t, void *user)
{
    seen_log *log = user;
    (void)nd;
    if (t->dtype != PTQ_F32 || (ptq_tensor_numel(t) && !t->data)) return PTQ_ERR_INTERNAL;
    if (log->n < 32) snprintf(log->names[log->n++], 16, "%s", name);
    return PTQ_OK;
}

static ptq_tensor vec(float *x, int64_t n)
{
    ptq_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = PTQ_F32;
    t.rank = 1;
    t.dims[0] = n;
    t.data = x;
    return t;
}

TEST(mixed_plan_runs_dynamic_part_with_changing_sizes)
{
    ptq_graph *g = mixed_graph();
    ptq_plan *p = NULL;
    seen_log log = {0};
    ptq_plan_options opt = ptq_plan_defaults();
    opt.observer = record;
    opt.observer_user = &log;
    ptq_status st = ptq_plan_create(g, NULL, 0, &opt, &p);
    EXPECT_EQ_INT(st, PTQ_OK);
    if (st != PTQ_OK) {
        printf("  %s\n", ptq_last_error());
        ptq_graph_destroy(g);
        return;
    }
    EXPECT_EQ_INT(ptq_plan_n_dynamic(p), 4); /* NonZero, Reshape, Gather, Mul */
    /* sizes 4, 0, 8, then 4 again at other places and 4 with other values at the same places
     * (the shapes repeat: downstream steps keep their inference, the data must still be new) */
    float xs[5][8] = {{1, -2, 3, -4, 5, -6, 7, -8},     {-1, -2, -3, -4, -5, -6, -7, -8}, {1, 2, 3, 4, 5, 6, 7, 0.5f},
                      {-1, 2, -3, 4, -5, 6, -7, 8.5f}, {-1, 3, -3, 5, -5, 7, -7, 9.5f}};
    int64_t want_n[5] = {4, 0, 8, 4, 4};
    for (int r = 0; r < 5; r++) {
        ptq_tensor in = vec(xs[r], 8);
        log.n = 0;
        EXPECT_EQ_INT(ptq_plan_run(p, &in, 1), PTQ_OK);
        const ptq_tensor *h = ptq_plan_output(p, 0, NULL), *b = ptq_plan_output(p, 1, NULL);
        EXPECT_EQ_INT(h->rank, 1);
        EXPECT_EQ_INT(h->dims[0], want_n[r]);
        for (int64_t i = 0, k = 0; i < 8; i++)
            if (xs[r][i] > 0) {
                if (k < h->dims[0] && ((const float *)h->data)[k] != xs[r][i] * 2)
                    TEST_FAILF("run %d: h[%lld] = %g, expected %g", r, (long long)k, (double)((const float *)h->data)[k],
                               (double)(xs[r][i] * 2));
                k++;
            }
        EXPECT_EQ_INT(b->dims[0], 8);
        /* observers: every float tensor, in plan order (the graph input first) */
        const char *want[] = {"x", "a", "gat", "h", "b"};
        EXPECT_EQ_INT(log.n, 5);
        for (int i = 0; i < 5 && i < log.n; i++) EXPECT_STR(log.names[i], want[i]);
        const ptq_tensor *nz = ptq_plan_value(p, ptq_graph_find_value(g, "nz"));
        EXPECT(nz != NULL && nz->rank == 2 && nz->dims[0] == 1 && nz->dims[1] == want_n[r]);
    }
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);
}

/* A dynamic output keeps its buffer from run to run while it fits: Concat's shape inference
 * used to reset the whole output tensor, losing (and leaking) the buffer of every run.
 * x[8] -> NonZero(x > 0) -> Reshape [-1] -> Gather(x) -> c = Concat(gat, gat) (an output). */
TEST(dynamic_output_keeps_its_buffer)
{
    ptq_graph *g = graph13();
    int64_t d8[1] = {8}, d1[1] = {1}, flat = -1, axis0 = 0;
    float zero = 0.0f;
    input(g, "x", 1, d8);
    init(g, "zero", PTQ_F32, 0, NULL, &zero);
    init(g, "flat", PTQ_I64, 1, d1, &flat);
    node(g, "pos", "Greater", "x", "zero", "m");
    node(g, "nonzero", "NonZero", "m", NULL, "nz");
    node(g, "reshape", "Reshape", "nz", "flat", "idx");
    node(g, "gather", "Gather", "x", "idx", "gat");
    int cat = node(g, "concat", "Concat", "gat", "gat", "c");
    ptq_attr a;
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup("axis");
    a.type = PTQ_ATTR_INT;
    a.i = axis0;
    ptq_node_add_attr(&g->nodes[cat], &a);
    output(g, "c");
    ptq_plan *p = NULL;
    ptq_status st = ptq_plan_create(g, NULL, 0, NULL, &p);
    EXPECT_EQ_INT(st, PTQ_OK);
    if (st == PTQ_OK) {
        float xs[3][8] = {{1, 2, 3, 4, 5, 6, 7, 8}, {1, -2, 3, -4, 5, -6, 7, -8}, {-1, -2, -3, 4, -5, -6, -7, -8}};
        int64_t want[3] = {16, 8, 2};
        const void *first = NULL;
        for (int r = 0; r < 3; r++) {
            ptq_tensor in = vec(xs[r], 8);
            EXPECT_EQ_INT(ptq_plan_run(p, &in, 1), PTQ_OK);
            const ptq_tensor *c = ptq_plan_output(p, 0, NULL);
            EXPECT_EQ_INT(c->dims[0], want[r]);
            if (r == 0) first = c->data;
            else if (c->data != first) TEST_FAILF("run %d: the output moved to another buffer", r);
            for (int64_t i = 0, k = 0; i < 8; i++)
                if (xs[r][i] > 0) {
                    if (((const float *)c->data)[k] != xs[r][i] || ((const float *)c->data)[k + want[r] / 2] != xs[r][i])
                        TEST_FAILF("run %d: c[%lld] wrong", r, (long long)k);
                    k++;
                }
        }
    } else {
        printf("  %s\n", ptq_last_error());
    }
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);
}

TEST(mixed_plan_is_bit_identical_across_thread_counts_and_steps_in_lockstep)
{
    ptq_graph *g = mixed_graph();
    ptq_plan *p1 = NULL, *p2 = NULL;
    ptq_plan_options o1 = ptq_plan_defaults(), o2 = ptq_plan_defaults();
    o1.nthreads = 1;
    o2.nthreads = 2;
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &o1, &p1), PTQ_OK);
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, &o2, &p2), PTQ_OK);
    if (!p1 || !p2) {
        ptq_plan_destroy(p1);
        ptq_plan_destroy(p2);
        ptq_graph_destroy(g);
        return;
    }
    float x[8] = {0.25f, -1, 3.5f, 0, 1e-3f, -7, 2, 9};
    ptq_tensor in = vec(x, 8);
    EXPECT_EQ_INT(ptq_plan_begin(p1, &in, 1), PTQ_OK);
    EXPECT_EQ_INT(ptq_plan_begin(p2, &in, 1), PTQ_OK);
    int steps = 0;
    for (int f1 = 0, f2 = 0; !f1 || !f2; steps++) {
        EXPECT_EQ_INT(ptq_plan_step(p1, &f1), PTQ_OK);
        EXPECT_EQ_INT(ptq_plan_step(p2, &f2), PTQ_OK);
        EXPECT_EQ_INT(f1, f2);
        if (steps > 20) break;
    }
    EXPECT_EQ_INT(steps, 8); /* 7 nodes (Greater included), then finished */
    for (int o = 0; o < 2; o++) {
        const ptq_tensor *a = ptq_plan_output(p1, o, NULL), *b = ptq_plan_output(p2, o, NULL);
        EXPECT(ptq_shape_equal(a, b));
        EXPECT(memcmp(a->data, b->data, ptq_tensor_nbytes(a)) == 0);
    }
    EXPECT_EQ_INT(ptq_plan_output(p1, 0, NULL)->dims[0], 5);
    ptq_plan_destroy(p1);
    ptq_plan_destroy(p2);
    ptq_graph_destroy(g);
}

TEST(static_graph_has_no_dynamic_part)
{
    ptq_graph *g = mixed_graph();
    /* only the static outputs: keep b, drop h */
    g->n_outputs = 1;
    g->outputs[0] = ptq_graph_find_value(g, "b");
    ptq_plan *p = NULL;
    EXPECT_EQ_INT(ptq_plan_create(g, NULL, 0, NULL, &p), PTQ_OK);
    /* the NonZero branch is still planned (it is in the graph) and dynamic */
    if (p) EXPECT_EQ_INT(ptq_plan_n_dynamic(p), 4);
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);

    g = mixed_graph();
    /* the NonZero of a constant folds at plan time: nothing dynamic */
    ptq_input_shape s = {.name = "x", .rank = 1, .dims = {8}};
    float x[8] = {1, 0, 1, 0, 1, 0, 1, 0};
    s.data = x;
    EXPECT_EQ_INT(ptq_plan_create(g, &s, 1, NULL, &p), PTQ_OK);
    if (p) {
        EXPECT_EQ_INT(ptq_plan_n_dynamic(p), 0);
        EXPECT_EQ_INT(ptq_plan_run(p, NULL, 0), PTQ_OK);
        EXPECT_EQ_INT(ptq_plan_output(p, 0, NULL)->dims[0], 4);
    }
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);
}

TEST(shape_input_known_at_run_time_makes_the_node_dynamic)
{
    /* y = Relu(Reshape(x, s)) with s a graph input: Reshape's infer needs s ("not constant" at
     * plan time), so it and the Relu after it are inferred at each run, with s's values */
    ptq_graph *g = graph13();
    int64_t d8[1] = {8}, d2[1] = {2};
    input(g, "x", 1, d8);
    input(g, "s", 1, d2);
    g->values[ptq_graph_find_value(g, "s")].t.dtype = PTQ_I64;
    node(g, "reshape", "Reshape", "x", "s", "r");
    node(g, "relu", "Relu", "r", NULL, "y");
    output(g, "y");
    ptq_plan *p = NULL;
    ptq_status st = ptq_plan_create(g, NULL, 0, NULL, &p);
    EXPECT_EQ_INT(st, PTQ_OK);
    if (st == PTQ_OK) {
        EXPECT_EQ_INT(ptq_plan_n_dynamic(p), 2);
        int64_t shapes[3][2] = {{2, 4}, {4, 2}, {2, 4}};
        for (int r = 0; r < 3; r++) {
            float x[8] = {1, -2, 3, -4, 5, -6, 7, -8};
            ptq_tensor in[2];
            memset(in, 0, sizeof in);
            in[0] = vec(x, 8);
            in[1].dtype = PTQ_I64;
            in[1].rank = 1;
            in[1].dims[0] = 2;
            in[1].data = shapes[r];
            EXPECT_EQ_INT(ptq_plan_run(p, in, 2), PTQ_OK);
            const ptq_tensor *y = ptq_plan_output(p, 0, NULL);
            EXPECT(y->rank == 2 && y->dims[0] == shapes[r][0] && y->dims[1] == shapes[r][1]);
            for (int i = 0; i < 8; i++) EXPECT(((const float *)y->data)[i] == (x[i] > 0 ? x[i] : 0));
        }
    } else {
        printf("  %s\n", ptq_last_error());
    }
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);
}

/* A branch: out = op(x), x read from the enclosing graph g (a value of kind OUTER). */
static ptq_graph *branch(ptq_graph *g, const char *op, const char *out)
{
    ptq_graph *b = ptq_graph_create();
    b->parent = g;
    b->opsets = calloc(1, sizeof *b->opsets);
    b->opsets[0].domain = ptq_strdup("");
    b->opsets[0].version = 13;
    b->n_opsets = 1;
    node(b, out, op, "x", NULL, out);
    int xv = ptq_graph_find_value(b, "x");
    b->values[xv].kind = PTQ_VALUE_OUTER;
    b->values[xv].outer = ptq_graph_find_value(g, "x");
    output(b, out);
    return b;
}

/* y = If(c, then: Relu(x), else: Neg(x)) over x[4]; c a constant (cond_value 0/1) or an input. */
static ptq_graph *if_graph(int cond_value)
{
    ptq_graph *g = graph13();
    int64_t d4[1] = {4};
    input(g, "x", 1, d4);
    if (cond_value >= 0) {
        uint8_t c = (uint8_t)cond_value;
        init(g, "c", PTQ_BOOL, 0, NULL, &c);
    } else {
        input(g, "c", 0, NULL);
        g->values[ptq_graph_find_value(g, "c")].t.dtype = PTQ_BOOL;
    }
    node(g, "if", "If", "c", NULL, "y");
    ptq_attr a = {.name = ptq_strdup("then_branch"), .type = PTQ_ATTR_GRAPH, .graph = branch(g, "Relu", "t_out")};
    ptq_node_add_attr(&g->nodes[0], &a);
    ptq_attr b = {.name = ptq_strdup("else_branch"), .type = PTQ_ATTR_GRAPH, .graph = branch(g, "Neg", "e_out")};
    ptq_node_add_attr(&g->nodes[0], &b);
    output(g, "y");
    return g;
}

TEST(if_with_a_plan_time_condition_or_equal_branches_stays_static)
{
    for (int cond = -1; cond <= 1; cond++) {
        ptq_graph *g = if_graph(cond);
        ptq_plan *p = NULL;
        seen_log log = {0};
        ptq_plan_options opt = ptq_plan_defaults();
        opt.observer = record;
        opt.observer_user = &log;
        ptq_status st = ptq_plan_create(g, NULL, 0, &opt, &p);
        EXPECT_EQ_INT(st, PTQ_OK);
        if (st != PTQ_OK) {
            printf("  %s\n", ptq_last_error());
            ptq_graph_destroy(g);
            continue;
        }
        EXPECT_EQ_INT(ptq_plan_n_dynamic(p), 0);
        for (int run_cond = 0; run_cond <= 1; run_cond++) {
            if (cond >= 0 && run_cond != cond) continue;
            float x[4] = {-1.5f, 2, -3, 4};
            uint8_t c = (uint8_t)run_cond;
            ptq_tensor in[2];
            memset(in, 0, sizeof in);
            in[0] = vec(x, 4);
            in[1].dtype = PTQ_BOOL;
            in[1].data = &c;
            log.n = 0;
            EXPECT_EQ_INT(ptq_plan_run(p, in, cond >= 0 ? 1 : 2), PTQ_OK);
            const float *y = ptq_plan_output(p, 0, NULL)->data;
            for (int i = 0; i < 4; i++) EXPECT(y[i] == (run_cond ? (x[i] > 0 ? x[i] : 0) : -x[i]));
            EXPECT_EQ_INT(log.n, 3); /* x, the branch's output, y */
            if (log.n == 3) {
                EXPECT_STR(log.names[1], run_cond ? "t_out" : "e_out");
                EXPECT_STR(log.names[2], "y");
            }
        }
        ptq_plan_destroy(p);
        ptq_graph_destroy(g);
    }
}

/* ------------------------------------------------ subgraphs from protobuf bytes */

/* written with tests/unit/pb_encode.h */

enum {
    M_IR = 1, M_GRAPH = 7, M_OPSET = 8, G_NODE = 1, G_NAME = 2, G_INPUT = 11, G_OUTPUT = 12,
    N_INPUT = 1, N_OUTPUT = 2, N_NAME = 3, N_OP = 4, N_ATTR = 5, A_NAME = 1, A_G = 6, A_TYPE = 20,
    V_NAME = 1, V_TYPE = 2, TP_TENSOR = 1, TT_ELEM = 1, TT_SHAPE = 2, SH_DIM = 1, D_VALUE = 1
};

static void value_info(pb *g, int field, const char *name, int elem, int rank, int64_t dim)
{
    pb vi = {0}, tp = {0}, tt = {0}, sh = {0};
    pb_int(&tt, TT_ELEM, elem);
    for (int i = 0; i < rank; i++) {
        pb d = {0};
        pb_int(&d, D_VALUE, dim);
        pb_msg(&sh, SH_DIM, &d);
    }
    pb_msg(&tt, TT_SHAPE, &sh);
    pb_msg(&tp, TP_TENSOR, &tt);
    pb_str(&vi, V_NAME, name);
    pb_msg(&vi, V_TYPE, &tp);
    pb_msg(g, field, &vi);
}

/* A node with up to 3 inputs ("" omitted), one output, and graph attributes (g may be NULL:
 * an attribute of type GRAPH without its graph). */
static void add_node(pb *g, const char *op, const char *name, const char *const *ins, int n_in, const char *out,
                     const char *const *attr_names, pb *graphs, int n_graphs)
{
    pb n = {0};
    for (int i = 0; i < n_in; i++) pb_str(&n, N_INPUT, ins[i]);
    pb_str(&n, N_OUTPUT, out);
    pb_str(&n, N_NAME, name);
    pb_str(&n, N_OP, op);
    for (int k = 0; k < n_graphs; k++) {
        pb a = {0};
        pb_str(&a, A_NAME, attr_names[k]);
        if (graphs[k].d) pb_msg(&a, A_G, &graphs[k]);
        pb_int(&a, A_TYPE, 5);
        pb_msg(&n, N_ATTR, &a);
    }
    pb_msg(g, G_NODE, &n);
}

static pb model_of(pb *g)
{
    pb m = {0}, o = {0};
    pb_int(&m, M_IR, 8);
    pb_str(&o, 1, "");
    pb_int(&o, 2, 13);
    pb_msg(&m, M_OPSET, &o);
    pb_msg(&m, M_GRAPH, g);
    return m;
}

/* Loop over x[4]: body (i, cond, acc) -> (cond, acc + x * k, acc); `reads` is the outer name
 * the body's Mul reads (k: defined; else not) and `body_inputs` how many inputs it declares. */
static pb loop_model(const char *reads, int body_inputs, int with_graph)
{
    pb body = {0}, g = {0};
    pb_str(&body, G_NAME, "body");
    const char *ins_mul[] = {"x", reads}, *ins_add[] = {"acc_in", "xk"}, *ins_id[] = {"cond_in"}, *ins_id2[] = {"acc_in"};
    add_node(&body, "Identity", "cond_id", ins_id, 1, "cond_out", NULL, NULL, 0);
    add_node(&body, "Mul", "mul", ins_mul, 2, "xk", NULL, NULL, 0);
    add_node(&body, "Add", "add", ins_add, 2, "acc_out", NULL, NULL, 0);
    add_node(&body, "Identity", "scan_id", ins_id2, 1, "scan_out", NULL, NULL, 0);
    if (body_inputs > 0) value_info(&body, G_INPUT, "i", 7, 0, 0);
    if (body_inputs > 1) value_info(&body, G_INPUT, "cond_in", 9, 0, 0);
    if (body_inputs > 2) value_info(&body, G_INPUT, "acc_in", 1, 1, 4);
    if (body_inputs > 3) value_info(&body, G_INPUT, "extra", 1, 1, 4);
    value_info(&body, G_OUTPUT, "cond_out", 9, 0, 0);
    value_info(&body, G_OUTPUT, "acc_out", 1, 1, 4);
    value_info(&body, G_OUTPUT, "scan_out", 1, 1, 4);
    pb_str(&g, G_NAME, "g");
    value_info(&g, G_INPUT, "x", 1, 1, 4);
    value_info(&g, G_INPUT, "trip", 7, 0, 0);
    value_info(&g, G_INPUT, "k", 1, 0, 0);
    const char *ins[] = {"trip", "", "x"}, *names[] = {"body"};
    if (!with_graph) {
        free(body.d);
        memset(&body, 0, sizeof body);
    }
    pb n = {0};
    for (int i = 0; i < 3; i++) pb_str(&n, N_INPUT, ins[i]);
    pb_str(&n, N_OUTPUT, "y");
    pb_str(&n, N_OUTPUT, "ys");
    pb_str(&n, N_NAME, "loop");
    pb_str(&n, N_OP, "Loop");
    pb a = {0};
    pb_str(&a, A_NAME, names[0]);
    if (body.d) pb_msg(&a, A_G, &body);
    pb_int(&a, A_TYPE, 5);
    pb_msg(&n, N_ATTR, &a);
    pb_msg(&g, G_NODE, &n);
    value_info(&g, G_OUTPUT, "y", 1, 1, 4);
    value_info(&g, G_OUTPUT, "ys", 1, 2, 4);
    return model_of(&g);
}

TEST(loop_runs_with_data_dependent_trip_counts)
{
    pb m = loop_model("k", 3, 1);
    ptq_graph *g = NULL;
    ptq_plan *p = NULL;
    ptq_status st = onnx_model_load_buffer(m.d, m.n, NULL, "loop.onnx", &g);
    free(m.d);
    EXPECT_EQ_INT(st, PTQ_OK);
    if (st != PTQ_OK) {
        printf("  %s\n", ptq_last_error());
        return;
    }
    seen_log log = {0};
    ptq_plan_options opt = ptq_plan_defaults();
    opt.observer = record;
    opt.observer_user = &log;
    st = ptq_plan_create(g, NULL, 0, &opt, &p);
    EXPECT_EQ_INT(st, PTQ_OK);
    if (st == PTQ_OK) {
        EXPECT_EQ_INT(ptq_plan_n_dynamic(p), 1);
        for (int64_t trip = 0; trip <= 3; trip += 3) {
            float x[4] = {1, 2, 3, 4}, k = 0.5f;
            ptq_tensor in[3];
            memset(in, 0, sizeof in);
            in[0] = vec(x, 4);
            in[1].dtype = PTQ_I64;
            in[1].data = &trip;
            in[2].dtype = PTQ_F32;
            in[2].data = &k;
            log.n = 0;
            EXPECT_EQ_INT(ptq_plan_run(p, in, 3), PTQ_OK);
            const ptq_tensor *y = ptq_plan_output(p, 0, NULL), *ys = ptq_plan_output(p, 1, NULL);
            EXPECT_EQ_INT(ys->rank, 2);
            EXPECT_EQ_INT(ys->dims[0], trip);
            for (int i = 0; i < 4; i++) EXPECT(((const float *)y->data)[i] == x[i] + (float)trip * x[i] * k);
            /* inputs x, k; per iteration the body's xk, acc_out, scan_out (its inputs acc_in too); then y, ys */
            EXPECT_EQ_INT(log.n, 2 + (int)trip * 4 + 2);
            if (log.n >= 2) EXPECT_STR(log.names[log.n - 1], "ys");
        }
    } else {
        printf("  %s\n", ptq_last_error());
    }
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);
}

static void expect_fail(const char *what, ptq_status got, const char *needle)
{
    const char *msg = ptq_last_error();
    if (got == PTQ_OK) {
        TEST_FAILF("%s: succeeded, expected an error", what);
        return;
    }
    if (strchr(msg, '\n')) TEST_FAILF("%s: message is not one line: %s", what, msg);
    if (!strstr(msg, needle)) TEST_FAILF("%s: message lacks '%s': %s", what, needle, msg);
}

TEST(malformed_subgraphs_fail_clearly)
{
    ptq_graph *g = (ptq_graph *)1;
    pb m = loop_model("q_nowhere", 3, 1);
    expect_fail("undefined outer name", onnx_model_load_buffer(m.d, m.n, NULL, "bad.onnx", &g),
                "reads 'q_nowhere', which no enclosing graph defines");
    EXPECT(g == NULL);
    free(m.d);

    m = loop_model("k", 3, 0);
    expect_fail("graph attribute without a graph", onnx_model_load_buffer(m.d, m.n, NULL, "bad.onnx", &g),
                "graph attribute 'body' has no graph");
    free(m.d);

    m = loop_model("k", 2, 1); /* the body does not declare acc_in: a name nothing defines */
    expect_fail("body input missing", onnx_model_load_buffer(m.d, m.n, NULL, "bad.onnx", &g),
                "subgraph 'body' reads 'acc_in', which no enclosing graph defines");
    free(m.d);

    m = loop_model("k", 4, 1); /* the body declares 4 inputs for 3 */
    ptq_status st = onnx_model_load_buffer(m.d, m.n, NULL, "bad.onnx", &g);
    free(m.d);
    EXPECT_EQ_INT(st, PTQ_OK);
    if (st == PTQ_OK) {
        ptq_plan *p = NULL;
        st = ptq_plan_create(g, NULL, 0, NULL, &p);
        if (st == PTQ_OK) { /* a dynamic Loop: the body is planned when it runs */
            float x[4] = {1, 2, 3, 4}, k = 1;
            int64_t trip = 2;
            ptq_tensor in[3];
            memset(in, 0, sizeof in);
            in[0] = vec(x, 4);
            in[1].dtype = PTQ_I64;
            in[1].data = &trip;
            in[2].dtype = PTQ_F32;
            in[2].data = &k;
            st = ptq_plan_run(p, in, 3);
        }
        expect_fail("body with too few inputs", st, "Loop 'loop': the body has 4 inputs and 3 outputs, expected 3 and 3");
        ptq_plan_destroy(p);
        ptq_graph_destroy(g);
    }

    /* an If missing its else branch, with a condition known at plan time */
    pb thn = {0}, gg = {0};
    pb_str(&thn, G_NAME, "then");
    const char *id_in[] = {"x"};
    add_node(&thn, "Identity", "t", id_in, 1, "t_out", NULL, NULL, 0);
    value_info(&thn, G_OUTPUT, "t_out", 1, 1, 4);
    pb_str(&gg, G_NAME, "g");
    value_info(&gg, G_INPUT, "x", 1, 1, 4);
    value_info(&gg, G_INPUT, "c", 9, 0, 0);
    const char *if_in[] = {"c"}, *names[] = {"then_branch"};
    add_node(&gg, "If", "if1", if_in, 1, "y", names, &thn, 1);
    value_info(&gg, G_OUTPUT, "y", 1, 1, 4);
    m = model_of(&gg);
    st = onnx_model_load_buffer(m.d, m.n, NULL, "if.onnx", &g);
    free(m.d);
    if (st != PTQ_OK) printf("  %s\n", ptq_last_error());
    EXPECT_EQ_INT(st, PTQ_OK);
    if (st == PTQ_OK) {
        ptq_plan *p = NULL;
        expect_fail("If without else_branch", ptq_plan_create(g, NULL, 0, NULL, &p),
                    "If 'if1': then_branch and else_branch graphs are required");
        ptq_plan_destroy(p);
        ptq_graph_destroy(g);
    }
}

int main(void)
{
    if (!ptq_op_get(ptq_op_find("", "NonZero")) || !ptq_op_get(ptq_op_find("", "Loop"))) {
        printf("NonZero or Loop not linked\n0 passed, 1 failed\n");
        return 1;
    }
    RUN(mixed_plan_runs_dynamic_part_with_changing_sizes);
    RUN(dynamic_output_keeps_its_buffer);
    RUN(mixed_plan_is_bit_identical_across_thread_counts_and_steps_in_lockstep);
    RUN(static_graph_has_no_dynamic_part);
    RUN(shape_input_known_at_run_time_makes_the_node_dynamic);
    RUN(if_with_a_plan_time_condition_or_equal_branches_stays_static);
    RUN(loop_runs_with_data_dependent_trip_counts);
    RUN(malformed_subgraphs_fail_clearly);
    return test_summary();
}
