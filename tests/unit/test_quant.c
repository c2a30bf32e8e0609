/* test_quant.c: Q/DQ placement rules on small graphs built here (spec §5), weight
 * quantization bit-exactness, exclusions, names. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/qdq.h"
#include "quant/rules.h"
#include "runtime/graph.h"
#include "tests/test.h"

static int val(ptq_graph *g, const char *name)
{
    int v = ptq_graph_find_value(g, name);
    if (v < 0) ptq_graph_add_value(g, name, &v);
    return v;
}

static ptq_graph *new_graph(const char *x, int c)
{
    ptq_graph *g = ptq_graph_create();
    g->opsets = calloc(1, sizeof *g->opsets);
    g->opsets[0].domain = ptq_strdup("");
    g->opsets[0].version = 13;
    g->n_opsets = 1;
    int v = val(g, x);
    g->values[v].kind = PTQ_VALUE_INPUT;
    g->values[v].t.dtype = PTQ_F32;
    g->values[v].t.rank = 4;
    int64_t d[4] = {1, c, 8, 8};
    memcpy(g->values[v].t.dims, d, sizeof d);
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = v;
    g->n_inputs = 1;
    return g;
}

static void output(ptq_graph *g, const char *name)
{
    g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
    g->outputs[g->n_outputs++] = val(g, name);
}

static void weight(ptq_graph *g, const char *name, int rank, const int64_t *dims)
{
    int v = val(g, name);
    ptq_value *x = &g->values[v];
    x->kind = PTQ_VALUE_INITIALIZER;
    x->t.dtype = PTQ_F32;
    x->t.rank = rank;
    memcpy(x->t.dims, dims, sizeof(int64_t) * (size_t)rank);
    ptq_tensor_alloc(&x->t);
    float *p = x->t.data;
    size_t n = ptq_tensor_numel(&x->t);
    for (size_t i = 0; i < n; i++) p[i] = (float)((int)(i * 7919 % 201) - 100) / 50.0f;
    g->initializers = realloc(g->initializers, sizeof(int) * (size_t)(g->n_initializers + 1));
    g->initializers[g->n_initializers++] = v;
}

static int node(ptq_graph *g, const char *name, const char *op, const char *a, const char *b, const char *out)
{
    int ins[2], n_in = 0, o = val(g, out), n;
    if (a) ins[n_in++] = val(g, a);
    if (b) ins[n_in++] = val(g, b);
    ptq_graph_add_node(g, name, op, "", ins, n_in, &o, 1, &n);
    return n;
}

static int conv(ptq_graph *g, const char *name, const char *x, const char *w, int cout, int cin, const char *out)
{
    int64_t d[4] = {cout, cin, 3, 3};
    weight(g, w, 4, d);
    return node(g, name, "Conv", x, w, out);
}

/* every tensor has range 2.0, except names starting with "norange" */
static int ranges(const char *name, float *amax, void *user)
{
    (void)user;
    if (strncmp(name, "norange", 7) == 0) return 0;
    *amax = 2.0f;
    return 1;
}

static const ptq_node *find_node(const ptq_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return &g->nodes[i];
    return NULL;
}

/* name of input i of node `name` */
static const char *input_of(const ptq_graph *g, const char *name, int i)
{
    const ptq_node *n = find_node(g, name);
    if (!n || i >= n->n_inputs || n->inputs[i] < 0) return "(none)";
    return g->values[n->inputs[i]].name;
}

static int count_op(const ptq_graph *g, const char *op)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) c += strcmp(g->nodes[i].op_type, op) == 0;
    return c;
}

static ptq_status quantize(ptq_graph *g, quant_options *o, quant_report *rep)
{
    o->range = ranges;
    return quant_insert_qdq(g, o, rep);
}

TEST(conv_bn_relu_chain)
{
    ptq_graph *g = new_graph("x", 3);
    conv(g, "c1", "x", "w1", 8, 3, "c1_out");
    node(g, "relu1", "Relu", "c1_out", NULL, "r1");
    conv(g, "c2", "r1", "w2", 8, 8, "c2_out");
    output(g, "c2_out");
    quant_options o = quant_defaults();
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_OK);
    EXPECT_STR(input_of(g, "c1", 0), "x_dequantized");
    EXPECT_STR(input_of(g, "c1", 1), "w1_dequantized");
    EXPECT_STR(input_of(g, "c2", 0), "r1_dequantized");
    EXPECT_STR(input_of(g, "relu1", 0), "c1_out"); /* activation: fused, no Q/DQ */
    EXPECT_EQ_INT(count_op(g, "QuantizeLinear"), 2);   /* x, r1: weights are int8 initializers */
    EXPECT_EQ_INT(count_op(g, "DequantizeLinear"), 4);
    EXPECT_EQ_INT(rep.n_activations, 2);
    EXPECT_EQ_INT(rep.n_weights, 2);
    /* the float weight is gone; an int8 one with per-channel scale replaces it */
    int w = ptq_graph_find_value(g, "w1_quantized"), s = ptq_graph_find_value(g, "w1_scale");
    EXPECT(w >= 0 && g->values[w].t.dtype == PTQ_I8 && g->values[w].kind == PTQ_VALUE_INITIALIZER);
    EXPECT(s >= 0 && g->values[s].t.rank == 1 && g->values[s].t.dims[0] == 8);
    const ptq_node *dq = find_node(g, "w1_DequantizeLinear");
    EXPECT(dq && ptq_attr_int(dq, "axis", -1) == 0);
    int found_w1 = 0;
    for (int i = 0; i < g->n_initializers; i++) found_w1 |= strcmp(g->values[g->initializers[i]].name, "w1") == 0;
    EXPECT(!found_w1);
    /* activation scale = amax / 127 */
    int xs = ptq_graph_find_value(g, "x_scale");
    EXPECT(xs >= 0 && *(float *)g->values[xs].t.data == 2.0f / 127.0f);
    /* nodes are topologically sorted: every Q precedes its DQ precedes the conv */
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int p = g->values[g->nodes[i].inputs[k]].producer;
            if (p >= i) TEST_FAILF("node %s reads a later node's output", g->nodes[i].name);
        }
    quant_report_free(&rep);
    ptq_graph_destroy(g);
}

TEST(residual_add_quantizes_the_identity_branch)
{
    ptq_graph *g = new_graph("x", 8);
    conv(g, "c1", "x", "w1", 8, 8, "c1_out");
    node(g, "add", "Add", "c1_out", "x", "sum");       /* x is the identity branch */
    node(g, "relu", "Relu", "sum", NULL, "y");
    node(g, "add_bias", "Add", "y", "w1", "z");        /* constant input: a bias add, no Q/DQ */
    node(g, "add_plain", "Add", "y", "z", "u");        /* neither from a conv: both */
    output(g, "u");
    quant_options o = quant_defaults();
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_OK);
    EXPECT_STR(input_of(g, "add", 0), "c1_out");
    EXPECT_STR(input_of(g, "add", 1), "x_dequantized"); /* shared with the conv's input pair */
    EXPECT_STR(input_of(g, "add_bias", 0), "y");
    EXPECT_STR(input_of(g, "add_plain", 0), "y_dequantized");
    EXPECT_STR(input_of(g, "add_plain", 1), "z_dequantized");
    EXPECT_EQ_INT(count_op(g, "QuantizeLinear"), 3); /* x (shared), y, z */
    quant_report_free(&rep);
    ptq_graph_destroy(g);
}

TEST(dedicated_qdq_gives_each_consumer_its_pair)
{
    ptq_graph *g = new_graph("x", 8);
    conv(g, "c1", "x", "w1", 8, 8, "c1_out");
    node(g, "add", "Add", "c1_out", "x", "sum");
    output(g, "sum");
    quant_options o = quant_defaults();
    o.dedicated_qdq = 1;
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_OK);
    EXPECT_EQ_INT(count_op(g, "QuantizeLinear"), 2);
    EXPECT(strcmp(input_of(g, "c1", 0), input_of(g, "add", 1)) != 0);
    EXPECT(find_node(g, "x_QuantizeLinear_1") != NULL); /* numeric suffix only when taken */
    quant_report_free(&rep);
    ptq_graph_destroy(g);
}

TEST(gemm_matmul_convtranspose_axes)
{
    ptq_graph *g = new_graph("x", 4);
    int64_t wt[4] = {4, 6, 2, 2}, gb[2] = {10, 24}, mb[2] = {24, 5};
    weight(g, "wt", 4, wt);
    node(g, "deconv", "ConvTranspose", "x", "wt", "d");
    node(g, "flat", "Flatten", "d", NULL, "f");
    weight(g, "gb", 2, gb);
    int gemm = node(g, "gemm", "Gemm", "f", "gb", "g1");
    ptq_attr a;
    memset(&a, 0, sizeof a);
    a.name = ptq_strdup("transB");
    a.type = PTQ_ATTR_INT;
    a.i = 1;
    ptq_node_add_attr(&g->nodes[gemm], &a);
    weight(g, "mb", 2, mb);
    node(g, "mm", "MatMul", "f", "mb", "m1");
    node(g, "mm2", "MatMul", "f", "f", "m2"); /* activation x activation: both per tensor */
    output(g, "g1");
    output(g, "m1");
    output(g, "m2");
    quant_options o = quant_defaults();
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_OK);
    EXPECT_EQ_INT(ptq_attr_int(find_node(g, "wt_DequantizeLinear"), "axis", -1), 1);
    EXPECT_EQ_INT(ptq_attr_int(find_node(g, "gb_DequantizeLinear"), "axis", -1), 0);
    EXPECT_EQ_INT(ptq_attr_int(find_node(g, "mb_DequantizeLinear"), "axis", -1), 1);
    EXPECT_STR(input_of(g, "mm2", 0), "f_dequantized");
    EXPECT_STR(input_of(g, "mm2", 1), "f_dequantized");
    EXPECT_STR(input_of(g, "flat", 0), "d"); /* data movement: none */
    int s = ptq_graph_find_value(g, "wt_scale");
    EXPECT(s >= 0 && g->values[s].t.dims[0] == 6);
    quant_report_free(&rep);
    ptq_graph_destroy(g);
}

TEST(pool_concat_resize_paths)
{
    ptq_graph *g = new_graph("x", 4);
    node(g, "pool", "MaxPool", "x", NULL, "p");
    node(g, "gap", "GlobalAveragePool", "p", NULL, "gp");
    int ins[2] = {val(g, "p"), val(g, "x")}, o = val(g, "cat"), n;
    ptq_graph_add_node(g, "concat", "Concat", "", ins, 2, &o, 1, &n);
    node(g, "resize", "Resize", "cat", NULL, "rs");
    output(g, "gp");
    output(g, "rs");
    quant_options opt = quant_defaults();
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &opt, &rep), PTQ_OK);
    EXPECT_STR(input_of(g, "pool", 0), "x_dequantized");
    EXPECT_STR(input_of(g, "gap", 0), "p_dequantized");
    EXPECT_STR(input_of(g, "concat", 0), "p");
    EXPECT_STR(input_of(g, "resize", 0), "cat");
    /* graph outputs stay float */
    EXPECT_STR(g->values[g->outputs[0]].name, "gp");
    quant_report_free(&rep);
    ptq_graph_destroy(g);
}

TEST(exclusions_by_name_glob_and_op_type)
{
    ptq_graph *g = new_graph("x", 3);
    conv(g, "backbone/conv1", "x", "w1", 8, 3, "a");
    conv(g, "backbone/conv2", "a", "w2", 8, 8, "b");
    conv(g, "head/conv", "b", "w3", 8, 8, "c");
    node(g, "pool", "MaxPool", "c", NULL, "d");
    output(g, "d");
    const char *nodes[] = {"backbone/conv2", "nothing*"};
    const char *types[] = {"MaxPool", "LSTM"};
    quant_options o = quant_defaults();
    o.exclude_nodes = nodes;
    o.n_exclude_nodes = 2;
    o.exclude_op_types = types;
    o.n_exclude_op_types = 2;
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_OK);
    EXPECT_STR(input_of(g, "backbone/conv2", 0), "a");
    EXPECT_STR(input_of(g, "backbone/conv2", 1), "w2"); /* float weight kept */
    EXPECT_STR(input_of(g, "head/conv", 0), "b_dequantized");
    EXPECT_STR(input_of(g, "pool", 0), "c");
    EXPECT_EQ_INT(rep.n_excluded, 2);
    EXPECT_EQ_INT(rep.n_unmatched, 2);
    if (rep.n_unmatched == 2) {
        EXPECT_STR(rep.unmatched[0], "LSTM");
        EXPECT_STR(rep.unmatched[1], "nothing*");
    }
    quant_report_free(&rep);
    /* a glob */
    ptq_graph *g2 = new_graph("x", 3);
    conv(g2, "backbone/conv1", "x", "w1", 8, 3, "a");
    conv(g2, "head/conv", "a", "w3", 8, 8, "c");
    output(g2, "c");
    const char *glob[] = {"backbone/*"};
    quant_options o2 = quant_defaults();
    o2.exclude_nodes = glob;
    o2.n_exclude_nodes = 1;
    EXPECT_EQ_INT(quantize(g2, &o2, &rep), PTQ_OK);
    EXPECT_STR(input_of(g2, "backbone/conv1", 0), "x");
    EXPECT_STR(input_of(g2, "head/conv", 0), "a_dequantized");
    quant_report_free(&rep);
    ptq_graph_destroy(g);
    ptq_graph_destroy(g2);
}

TEST(weight_quantization_is_bit_exact)
{
    /* round half to even, saturation, zero channel gets scale 1/127 */
    EXPECT_EQ_INT(quant_round_s8(2.5f, 1.0f), 2);
    EXPECT_EQ_INT(quant_round_s8(3.5f, 1.0f), 4);
    EXPECT_EQ_INT(quant_round_s8(-2.5f, 1.0f), -2);
    EXPECT_EQ_INT(quant_round_s8(1000.0f, 1.0f), 127);
    EXPECT_EQ_INT(quant_round_s8(-1000.0f, 1.0f), -128);
    ptq_tensor w = {.dtype = PTQ_F32, .rank = 2, .dims = {3, 2}};
    ptq_tensor_alloc(&w);
    float *x = w.data;
    x[0] = 0.5f; x[1] = -1.0f; x[2] = 0.0f; x[3] = 0.0f; x[4] = 3.0f; x[5] = 1e-40f;
    float amax[3];
    quant_weight_amax(&w, 0, amax);
    EXPECT_NEAR(amax[0], 1.0, 0, 0);
    EXPECT_NEAR(amax[1], 1.0, 0, 0); /* all-zero channel: safe 1.0 */
    EXPECT_NEAR(amax[2], 3.0, 0, 0);
    float amax1[2];
    quant_weight_amax(&w, 1, amax1);
    EXPECT_NEAR(amax1[0], 3.0, 0, 0);
    EXPECT_NEAR(amax1[1], 1.0, 0, 0);
    ptq_tensor_free(&w);
}

TEST(missing_range_and_low_opset_are_reported)
{
    ptq_graph *g = new_graph("norange_x", 3);
    conv(g, "c1", "norange_x", "w1", 8, 3, "y");
    output(g, "y");
    quant_options o = quant_defaults();
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_OK);
    EXPECT_EQ_INT(rep.nodes[0].state, QUANT_NODE_UNSUPPORTED);
    EXPECT(strstr(rep.nodes[0].reason, "norange_x") != NULL);
    EXPECT_EQ_INT(count_op(g, "QuantizeLinear"), 0);
    quant_report_free(&rep);
    g->opsets[0].version = 11;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "opset 11") != NULL);
    quant_report_free(&rep);
    ptq_graph_destroy(g);
}

/* A transformer block's pieces: both operands of Q*K^T and softmax*V per tensor; Softmax,
 * LayerNormalization, GELU (tanh form: x + 0.044715*x^3) float with the table's reasons. */
TEST(attention_products_and_transformer_floats)
{
    ptq_graph *g = new_graph("x", 8);
    int64_t wd[2] = {8, 8};
    weight(g, "wq", 2, wd);
    weight(g, "wk", 2, wd);
    weight(g, "wv", 2, wd);
    weight(g, "c044", 1, (int64_t[]){1});
    weight(g, "gamma", 1, (int64_t[]){8});
    node(g, "q", "MatMul", "x", "wq", "q_out");
    node(g, "k", "MatMul", "x", "wk", "k_out");
    node(g, "kt", "Transpose", "k_out", NULL, "kt_out");
    node(g, "qk", "MatMul", "q_out", "kt_out", "s");
    node(g, "softmax", "Softmax", "s", NULL, "p");
    node(g, "v", "MatMul", "x", "wv", "v_out");
    node(g, "pv", "MatMul", "p", "v_out", "o");
    node(g, "ln", "LayerNormalization", "o", "gamma", "h");
    node(g, "sq", "Mul", "h", "h", "h2");
    node(g, "cube", "Mul", "h", "h2", "h3");
    node(g, "scale", "Mul", "h3", "c044", "h3c");
    node(g, "inner", "Add", "h", "h3c", "a");
    node(g, "tanh", "Tanh", "a", NULL, "t");
    output(g, "t");
    quant_options o = quant_defaults();
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_OK);
    EXPECT_STR(input_of(g, "qk", 0), "q_out_dequantized");
    EXPECT_STR(input_of(g, "qk", 1), "kt_out_dequantized");
    EXPECT_STR(input_of(g, "pv", 0), "p_dequantized"); /* the softmax output, per tensor */
    EXPECT_STR(input_of(g, "pv", 1), "v_out_dequantized");
    const ptq_node *dq = find_node(g, "p_DequantizeLinear");
    EXPECT(dq && ptq_node_attr(dq, "axis") == NULL);
    EXPECT_STR(input_of(g, "softmax", 0), "s");
    EXPECT_STR(input_of(g, "ln", 0), "o");
    EXPECT_STR(input_of(g, "inner", 0), "h");
    EXPECT_STR(input_of(g, "inner", 1), "h3c");
    for (int i = 0; i < rep.n_nodes; i++) {
        const quant_node_report *r = &rep.nodes[i];
        if (!strcmp(r->node_name, "softmax")) EXPECT(strstr(r->reason, "Softmax: float") != NULL);
        if (!strcmp(r->node_name, "ln")) EXPECT(strstr(r->reason, "LayerNormalization: float") != NULL);
        if (!strcmp(r->node_name, "inner")) {
            EXPECT_EQ_INT(r->state, QUANT_NODE_NO_RULE);
            EXPECT(strstr(r->reason, "GELU") != NULL);
        }
    }
    EXPECT_EQ_INT(count_op(g, "QuantizeLinear"), 5); /* x, q_out, kt_out, p, v_out */
    quant_report_free(&rep);
    ptq_graph_destroy(g);
}

/* ranges: "tiny*" tensors have amax *(float *)user, the others 2.0 */
static int ranges_tiny(const char *name, float *amax, void *user)
{
    *amax = strncmp(name, "tiny", 4) == 0 ? *(const float *)user : 2.0f;
    return 1;
}

/* ONNX Runtime's QLinearGlobalAveragePool needs x_scale / (y_scale * H*W) in [2^-32, 256):
 * a pool whose scales break it keeps a float input (and is reported); one within it does not. */
TEST(global_pool_scales_outside_onnx_runtime_range_keep_float)
{
    const float tiny[2] = {2e-9f, 0.5f};
    for (int k = 0; k < 2; k++) {
        ptq_graph *g = new_graph("x", 8);
        conv(g, "c1", "x", "w1", 8, 8, "tiny_act");
        node(g, "gap", "GlobalAveragePool", "tiny_act", NULL, "pooled");
        weight(g, "w2", 4, (int64_t[]){8, 8, 1, 1}); /* a squeeze-excitation's 1x1 conv */
        node(g, "c2", "Conv", "pooled", "w2", "y");
        output(g, "y");
        quant_options o = quant_defaults();
        o.range = ranges_tiny;
        o.range_user = (void *)&tiny[k];
        quant_report rep;
        EXPECT_EQ_INT(quant_insert_qdq(g, &o, &rep), PTQ_OK);
        EXPECT_STR(input_of(g, "c2", 0), "pooled_dequantized");
        if (k == 0) {
            EXPECT_STR(input_of(g, "gap", 0), "tiny_act");
            EXPECT_EQ_INT(rep.n_ort_float, 1);
            EXPECT_EQ_INT(rep.nodes[1].state, QUANT_NODE_UNSUPPORTED);
            EXPECT(strstr(rep.nodes[1].reason, "QLinearGlobalAveragePool") != NULL);
            if (!strstr(rep.nodes[1].reason, "y_scale*36")) TEST_FAILF("reason: %s (%s)", rep.nodes[1].reason, ptq_last_error()); /* 6x6: inferred */
        } else {
            EXPECT_STR(input_of(g, "gap", 0), "tiny_act_dequantized");
            EXPECT_EQ_INT(rep.n_ort_float, 0);
            EXPECT_EQ_INT(rep.nodes[1].state, QUANT_NODE_QUANTIZED);
        }
        quant_report_free(&rep);
        ptq_graph_destroy(g);
    }
}

/* An add can fuse only into a conv whose output nothing else reads: MobileNetV2's and
 * ConvNeXt's identity comes from a conv that also feeds the branch, so the identity is the
 * residual input (quantized) and the branch's own conv takes the add. */
TEST(residual_add_identity_from_a_shared_conv)
{
    ptq_graph *g = new_graph("x", 8);
    conv(g, "c1", "x", "w1", 8, 8, "c1_out");
    conv(g, "c2", "c1_out", "w2", 8, 8, "c2_out");
    node(g, "add", "Add", "c1_out", "c2_out", "sum"); /* c1_out: read by c2 and the add */
    node(g, "mul", "Mul", "c1_out", "c1_out", "sq");
    node(g, "add2", "Add", "sq", "c1_out", "u");      /* c1_out is no fusible conv output here either */
    output(g, "sum");
    output(g, "u");
    quant_options o = quant_defaults();
    quant_report rep;
    EXPECT_EQ_INT(quantize(g, &o, &rep), PTQ_OK);
    EXPECT_STR(input_of(g, "add", 0), "c1_out_dequantized");
    EXPECT_STR(input_of(g, "add", 1), "c2_out");
    EXPECT_STR(input_of(g, "add2", 0), "sq"); /* x*x + x: a pointwise function of x, float */
    quant_report_free(&rep);
    ptq_graph_destroy(g);
}

/* The table (docs/placement.md lists it): one row per op, each with a reason; the float rows
 * quantize nothing. */
TEST(rules_table_is_one_row_per_op)
{
    int n = 0;
    const quant_rule *r = quant_rules(&n);
    EXPECT(n >= 18);
    for (int i = 0; i < n; i++) {
        EXPECT(r[i].why && r[i].why[0]);
        EXPECT(quant_rule_find(r[i].op_type) == &r[i]);
        if (r[i].kind == QUANT_RULE_FLOAT) EXPECT(r[i].act_inputs == 0 && r[i].weight_input < 0);
        for (int j = 0; j < i; j++)
            if (!strcmp(r[i].op_type, r[j].op_type)) TEST_FAILF("op %s has two rows", r[i].op_type);
    }
    EXPECT(quant_rule_find("Relu") == NULL);
    EXPECT(quant_rule_find("Softmax") && quant_rule_find("Softmax")->kind == QUANT_RULE_FLOAT);
}

int main(void)
{
    RUN(conv_bn_relu_chain);
    RUN(residual_add_quantizes_the_identity_branch);
    RUN(dedicated_qdq_gives_each_consumer_its_pair);
    RUN(gemm_matmul_convtranspose_axes);
    RUN(pool_concat_resize_paths);
    RUN(exclusions_by_name_glob_and_op_type);
    RUN(weight_quantization_is_bit_exact);
    RUN(missing_range_and_low_opset_are_reported);
    RUN(attention_products_and_transformer_floats);
    RUN(residual_add_identity_from_a_shared_conv);
    RUN(rules_table_is_one_row_per_op);
    RUN(global_pool_scales_outside_onnx_runtime_range_keep_float);
    return test_summary();
}
