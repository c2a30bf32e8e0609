/* qdq.c: Q/DQ insertion. Decide per node with the rules table, then rewrite the
 * graph: shared Q/DQ pairs per activation tensor, int8 weights + DequantizeLinear,
 * and a final stable topological sort so the file stays valid ONNX. */
#include "qdq.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/opset.h"
#include "quant/rules.h"
#include "runtime/graph_edit.h"
#include "runtime/op.h"
#include "runtime/plan.h"

#define NAME_CAP 1024

quant_options quant_defaults(void)
{
    quant_options o;
    memset(&o, 0, sizeof o);
    return o;
}

void quant_report_free(quant_report *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_nodes; i++) {
        free(r->nodes[i].node_name);
        free(r->nodes[i].op_type);
    }
    free(r->nodes);
    for (int i = 0; i < r->n_unmatched; i++) free(r->unmatched[i]);
    free(r->unmatched);
    memset(r, 0, sizeof *r);
}

int8_t quant_round_s8(float x, float scale)
{
    float q = rintf(x / scale); /* round half to even in the default rounding mode */
    if (!(q >= -128.0f)) q = isnan(q) ? 0.0f : -128.0f;
    if (q > 127.0f) q = 127.0f;
    return (int8_t)q;
}

/* spec §1: amax must be finite and >= 2^-30, else 1.0 */
static float safe_amax(float amax)
{
    return isfinite(amax) && amax >= 0x1p-30f ? amax : 1.0f;
}

void quant_weight_amax(const ptq_tensor *w, int axis, float *amax)
{
    int64_t outer = 1, inner = 1, ch = w->dims[axis];
    for (int d = 0; d < axis; d++) outer *= w->dims[d];
    for (int d = axis + 1; d < w->rank; d++) inner *= w->dims[d];
    const float *x = w->data;
    for (int64_t c = 0; c < ch; c++) amax[c] = 0.0f;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < ch; c++) {
            const float *p = x + (o * ch + c) * inner;
            float m = amax[c];
            for (int64_t i = 0; i < inner; i++) {
                float a = fabsf(p[i]);
                if (a > m || isnan(a)) m = isnan(a) ? NAN : a;
            }
            amax[c] = m;
        }
    for (int64_t c = 0; c < ch; c++) amax[c] = safe_amax(amax[c]);
}

/* ---- decisions ---- */

typedef enum { EDGE_ACT, EDGE_WEIGHT_CHANNEL } edge_kind;

typedef struct {
    int node, input;
    edge_kind kind;
    int axis;
} edge;

static int is_float_initializer(const ptq_graph *g, int v)
{
    return v >= 0 && g->values[v].kind == PTQ_VALUE_INITIALIZER && g->values[v].t.dtype == PTQ_F32 && g->values[v].t.data;
}

/* Values known without running activations: initializers, Constant outputs, Shape
 * outputs and anything computed only from those. */
static ptq_status constant_values(const ptq_graph *g, uint8_t *is_const)
{
    ptq_status st = PTQ_OK;
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    CHECK_ALLOC(order);
    TRY(ptq_graph_toposort(g, order));
    for (int v = 0; v < g->n_values; v++) is_const[v] = g->values[v].kind == PTQ_VALUE_INITIALIZER;
    for (int k = 0; k < g->n_nodes; k++) {
        const ptq_node *n = &g->nodes[order[k]];
        int c = strcmp(n->op_type, "Shape") == 0 || strcmp(n->op_type, "Size") == 0;
        if (!c) {
            c = 1;
            for (int i = 0; i < n->n_inputs; i++)
                if (n->inputs[i] >= 0 && !is_const[n->inputs[i]]) c = 0;
        }
        for (int o = 0; o < n->n_outputs; o++)
            if (n->outputs[o] >= 0) is_const[n->outputs[o]] = (uint8_t)c;
    }
done:
    free(order);
    return st;
}

/* post[v] = 1 for the values computed from a data-dependent selection (NonZero, TopK,
 * NonMaxSuppression, Compress, Unique, control flow: ops flagged PTQ_OP_DYNAMIC or
 * PTQ_OP_CONTROL): a detector's post-processing (box decoding, score filtering, NMS). TensorRT
 * runs it in float; only weighted layers there (the RoI heads of two-stage detectors) are
 * quantized. Constants stay 0. */
static ptq_status post_values(const ptq_graph *g, const uint8_t *is_const, uint8_t *post)
{
    ptq_status st = PTQ_OK;
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    CHECK_ALLOC(order);
    TRY(ptq_graph_toposort(g, order));
    memset(post, 0, (size_t)g->n_values + 1);
    for (int k = 0; k < g->n_nodes; k++) {
        const ptq_node *n = &g->nodes[order[k]];
        int id = n->domain[0] ? -1 : ptq_op_find(n->domain, n->op_type);
        const ptq_op_def *def = id >= 0 ? ptq_op_get(id) : NULL;
        int p = (def && (def->flags & (PTQ_OP_DYNAMIC | PTQ_OP_CONTROL))) || strcmp(n->op_type, "TopK") == 0;
        for (int i = 0; i < n->n_inputs && !p; i++) p = n->inputs[i] >= 0 && post[n->inputs[i]];
        for (int o = 0; o < n->n_outputs; o++)
            if (n->outputs[o] >= 0) post[n->outputs[o]] = (uint8_t)(p && !is_const[n->outputs[o]]);
    }
done:
    free(order);
    return st;
}

ptq_status quant_post_processing(const ptq_graph *g, uint8_t *post)
{
    ptq_status st = PTQ_OK;
    uint8_t *is_const = malloc((size_t)g->n_values + 1);
    CHECK_ALLOC(is_const);
    TRY(constant_values(g, is_const));
    TRY(post_values(g, is_const, post));
done:
    free(is_const);
    return st;
}

/* uses[v]: the nodes reading v, plus one if v is a graph output. */
static void count_uses(const ptq_graph *g, int *uses)
{
    for (int v = 0; v < g->n_values; v++) uses[v] = g->values[v].is_output;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) uses[g->nodes[i].inputs[k]]++;
}

/* Producer op of v, looking through BatchNormalization (TensorRT folds it into the conv), when
 * the Add reading v is that op's only reader: TensorRT can fuse an add into a convolution's
 * epilogue only then. A conv whose output also feeds the other branch (ConvNeXt's and
 * MobileNetV2's identity) is not fusible: ModelOpt's build_non_residual_input_map finds the
 * same (the lowest common ancestor of the two inputs is that conv). NULL otherwise. */
static const char *fusible_producer(const ptq_graph *g, int v, const int *uses)
{
    for (int hops = 0; v >= 0 && hops < 4; hops++) {
        int p = g->values[v].producer;
        if (p < 0 || uses[v] != 1) return NULL;
        const ptq_node *n = &g->nodes[p];
        if (strcmp(n->op_type, "BatchNormalization") != 0) return n->op_type;
        v = n->n_inputs ? n->inputs[0] : -1;
    }
    return NULL;
}

/* 1 when v is computed from `from` by pointwise ops (quant_is_pointwise_op) whose other inputs
 * are constants, within `depth` nodes: x*x*x, 0.044715*x^3, tanh(x), ... A residual branch
 * holds a weighted op, so it never matches. */
static int pointwise_of(const ptq_graph *g, const uint8_t *is_const, int v, int from, int depth)
{
    if (v == from) return 1;
    int p = v >= 0 ? g->values[v].producer : -1;
    if (p < 0 || depth <= 0) return 0;
    const ptq_node *n = &g->nodes[p];
    if (n->domain[0] || !quant_is_pointwise_op(n->op_type)) return 0;
    int any = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        int u = n->inputs[i];
        if (u < 0 || is_const[u]) continue;
        if (!pointwise_of(g, is_const, u, from, depth - 1)) return 0;
        any = 1;
    }
    return any;
}

static int excluded(const ptq_graph *g, const ptq_node *n, const quant_options *opt, uint8_t *matched, char *why,
                    size_t cap)
{
    (void)g;
    for (int i = 0; i < opt->n_exclude_op_types; i++)
        if (strcmp(opt->exclude_op_types[i], n->op_type) == 0) {
            matched[i] = 1;
            snprintf(why, cap, "excluded by --exclude-op-types %s", n->op_type);
            return 1;
        }
    for (int i = 0; i < opt->n_exclude_nodes; i++)
        if (fnmatch(opt->exclude_nodes[i], n->name, 0) == 0) {
            matched[opt->n_exclude_op_types + i] = 1;
            snprintf(why, cap, "excluded by --exclude-nodes '%s'", opt->exclude_nodes[i]);
            return 1;
        }
    return 0;
}

/* Appends the edges of node ni; returns the node's state and reason. */
static quant_node_state decide(const ptq_graph *g, int ni, const uint8_t *is_const, const uint8_t *post, const int *uses,
                               const quant_options *opt, edge *edges, int *n_edges, char *why, size_t cap)
{
    const ptq_node *n = &g->nodes[ni];
    const quant_rule *r = n->domain[0] ? NULL : quant_rule_find(n->op_type);
    float amax;
    if (!r) {
        snprintf(why, cap, "no rule for %s: stays float (fused or propagated by TensorRT)", n->op_type);
        return QUANT_NODE_NO_RULE;
    }
    for (int i = 0; i < n->n_inputs && !quant_is_weighted_op(n->op_type); i++)
        if (n->inputs[i] >= 0 && post[n->inputs[i]]) {
            snprintf(why, cap, "post-processing (after TopK, NMS or NonZero): stays float");
            return QUANT_NODE_NO_RULE;
        }
    if (r->kind == QUANT_RULE_FLOAT) {
        snprintf(why, cap, "%s", r->why);
        return QUANT_NODE_NO_RULE;
    }
    edge local[4];
    int k = 0;
    if (r->kind == QUANT_RULE_RESIDUAL_ADD) {
        if (n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0 || is_const[n->inputs[0]] ||
            is_const[n->inputs[1]]) {
            snprintf(why, cap, "Add with a constant input (a bias, not a residual): stays float");
            return QUANT_NODE_NO_RULE;
        }
        if (pointwise_of(g, is_const, n->inputs[1], n->inputs[0], 4) ||
            pointwise_of(g, is_const, n->inputs[0], n->inputs[1], 4)) {
            snprintf(why, cap, "Add of x and a pointwise function of x (GELU's tanh form x + 0.044715 x^3): stays float");
            return QUANT_NODE_NO_RULE;
        }
        const char *p0 = fusible_producer(g, n->inputs[0], uses), *p1 = fusible_producer(g, n->inputs[1], uses);
        int w0 = p0 && quant_is_weighted_op(p0), w1 = p1 && quant_is_weighted_op(p1);
        if (w0 && !w1) local[k++] = (edge){ni, 1, EDGE_ACT, 0};
        else if (w1 && !w0) local[k++] = (edge){ni, 0, EDGE_ACT, 0};
        else if (w0 && w1) local[k++] = (edge){ni, 1, EDGE_ACT, 0}; /* both fusible convs: fuse into the first */
        else {
            local[k++] = (edge){ni, 0, EDGE_ACT, 0};
            local[k++] = (edge){ni, 1, EDGE_ACT, 0};
        }
    } else {
        for (int i = 0; i < n->n_inputs && i < 8; i++)
            if (r->act_inputs & (1u << i)) local[k++] = (edge){ni, i, EDGE_ACT, 0};
        int wi = r->weight_input;
        if (wi >= 0 && wi < n->n_inputs) {
            int v = n->inputs[wi];
            if (r->kind == QUANT_RULE_GEMM || r->kind == QUANT_RULE_MATMUL) {
                int axis = r->kind == QUANT_RULE_GEMM ? (ptq_attr_int(n, "transB", 0) ? 0 : 1) : 1;
                if (is_float_initializer(g, v) && g->values[v].t.rank == 2)
                    local[k++] = (edge){ni, wi, EDGE_WEIGHT_CHANNEL, axis};
                else
                    local[k++] = (edge){ni, wi, EDGE_ACT, 0};
            } else {
                if (!is_float_initializer(g, v)) {
                    snprintf(why, cap, "weight '%s' is not a float32 initializer", v >= 0 ? g->values[v].name : "");
                    return QUANT_NODE_UNSUPPORTED;
                }
                if (r->weight_axis >= g->values[v].t.rank) {
                    snprintf(why, cap, "weight '%s' has rank %d", g->values[v].name, g->values[v].t.rank);
                    return QUANT_NODE_UNSUPPORTED;
                }
                local[k++] = (edge){ni, wi, EDGE_WEIGHT_CHANNEL, r->weight_axis};
            }
        }
    }
    for (int e = 0; e < k; e++) {
        if (local[e].kind != EDGE_ACT) continue;
        int v = n->inputs[local[e].input];
        if (v < 0 || is_const[v]) {
            snprintf(why, cap, "input %d is a constant, not an activation", local[e].input);
            return QUANT_NODE_UNSUPPORTED;
        }
        if (!opt->range || !opt->range(g->values[v].name, &amax, opt->range_user)) {
            snprintf(why, cap, "no calibrated range for '%s'", g->values[v].name);
            return QUANT_NODE_UNSUPPORTED;
        }
    }
    memcpy(edges + *n_edges, local, sizeof(edge) * (size_t)k);
    *n_edges += k;
    snprintf(why, cap, "%s", r->why);
    return QUANT_NODE_QUANTIZED;
}

/* ---- ONNX Runtime's limits on scales ----
 * ONNX Runtime fuses DequantizeLinear -> GlobalAveragePool -> QuantizeLinear (and an
 * AveragePool whose kernel is the whole image, without pads: QLinearAveragePool falls back to
 * the same kernel) into QLinearGlobalAveragePool, whose MLAS kernel (onnxruntime/core/mlas/lib/
 * qlgavgpool.cpp, CheckQLinearGlobalAveragePoolScaleAndSize) throws "parameter out of
 * computation range" at run time unless x_scale / (y_scale * image_size), in float, lies in
 * [2^-32, 256) and image_size < 2^24. ONNX Runtime's other int8 kernels (QLinearConv,
 * QLinearMatMul, QGemm, QLinearAdd, QLinearMul, QLinearConcat, the lookup tables) take any
 * positive scales. Where the calibrated scales break the rule, the pool's input keeps float:
 * ONNX Runtime then runs the pool in float, TensorRT loses only an INT8 pooling. */

static int ort_gap_fits(float sx, float sy, int64_t image)
{
    if (image < 1 || image >= 0x1000000) return 0;
    float s = sx / (sy * (float)image);
    return s >= 0x1p-32f && s < 256.0f;
}

/* The scale activation_pair writes for v. */
static float act_scale(const ptq_graph *g, int v, const quant_options *opt)
{
    float amax = 1.0f;
    opt->range(g->values[v].name, &amax, opt->range_user);
    return safe_amax(amax) / 127.0f;
}

/* Product of dims 2.. of t, or -1 unless t has rank >= 3 and all those dims are known. */
static int64_t spatial_size(const ptq_tensor *t)
{
    if (!t || t->rank < 3) return -1;
    int64_t n = 1;
    for (int d = 2; d < t->rank; d++) {
        if (t->dims[d] < 1) return -1;
        n *= t->dims[d];
    }
    return n;
}

/* For a pool ORT may run as QLinearGlobalAveragePool, given its input's shape (NULL or rank -1:
 * unknown): 1 and *image (-1: unknown) if it may, 0 if it cannot (an AveragePool with pads, or
 * whose kernel is not the known image). */
static int ort_global_pool(const ptq_node *n, const ptq_tensor *in_shape, int64_t *image)
{
    *image = spatial_size(in_shape);
    if (strcmp(n->op_type, "GlobalAveragePool") == 0) return 1;
    size_t nk = 0, np = 0;
    const int64_t *k = ptq_attr_ints(n, "kernel_shape", &nk), *pads = ptq_attr_ints(n, "pads", &np);
    const char *ap = ptq_attr_string(n, "auto_pad", "NOTSET");
    if (!k || nk == 0 || (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)) return 0;
    for (size_t i = 0; i < np; i++)
        if (pads[i] != 0) return 0;
    int64_t kn = 1;
    for (size_t i = 0; i < nk; i++) kn *= k[i];
    if (*image < 0) {
        *image = kn; /* it falls back only when the kernel is the image: the image is then kn */
        return 1;
    }
    if (in_shape->rank != (int)nk + 2) return 0;
    for (size_t i = 0; i < nk; i++)
        if (in_shape->dims[2 + i] != k[i]) return 0;
    return 1;
}

/* image < 0 (unknown): the rule for every image size (monotone in the size: 1 and 2^24-1). */
static int ort_gap_fits_any(float sx, float sy, int64_t image)
{
    return image > 0 ? ort_gap_fits(sx, sy, image) : ort_gap_fits(sx, sy, 1) && ort_gap_fits(sx, sy, 0xFFFFFF);
}

static ptq_status ort_limits(const ptq_graph *g, const quant_options *opt, edge *edges, int n_edges, quant_report *rep)
{
    ptq_status st = PTQ_OK;
    uint8_t *quantized = calloc((size_t)g->n_values + 1, 1);
    ptq_plan *plan = NULL;
    int plan_tried = 0;
    CHECK_ALLOC(quantized);
    for (int e = 0; e < n_edges; e++)
        if (edges[e].kind == EDGE_ACT) quantized[g->nodes[edges[e].node].inputs[edges[e].input]] = 1;
    for (int e = 0; e < n_edges; e++) {
        int ni = edges[e].node;
        if (ni < 0 || edges[e].kind != EDGE_ACT || edges[e].input != 0) continue;
        const ptq_node *n = &g->nodes[ni];
        if (n->domain[0] || n->n_outputs < 1 || n->outputs[0] < 0 ||
            (strcmp(n->op_type, "GlobalAveragePool") != 0 && strcmp(n->op_type, "AveragePool") != 0))
            continue;
        int x = n->inputs[0], y = n->outputs[0];
        if (!quantized[y]) continue; /* no QuantizeLinear after the pool: nothing to fuse */
        float sx = act_scale(g, x, opt), sy = act_scale(g, y, opt);
        const ptq_tensor *shape = g->values[x].t.rank >= 0 ? &g->values[x].t : NULL;
        int known = spatial_size(shape) > 0;
        int64_t image;
        if (!ort_global_pool(n, shape, &image)) continue;
        int ok = ort_gap_fits_any(sx, sy, image);
        if (!ok && !known) {
            /* the image size decides: infer the shapes once (this fails for symbolic input
             * dims; the size stays unknown and the rule for every size applies) */
            if (!plan_tried) {
                plan_tried = 1;
                ptq_plan_options po = ptq_plan_defaults();
                po.bound_memory = 1;
                if (ptq_plan_create(g, NULL, 0, &po, &plan) != PTQ_OK) plan = NULL;
            }
            const ptq_tensor *t = plan ? ptq_plan_value(plan, x) : NULL;
            if (t && spatial_size(t) > 0) ok = !ort_global_pool(n, t, &image) || ort_gap_fits(sx, sy, image);
        }
        if (ok) continue;
        quant_node_report *r = &rep->nodes[ni];
        r->state = QUANT_NODE_UNSUPPORTED;
        if (image > 0)
            snprintf(r->reason, sizeof r->reason,
                     "input kept float: ONNX Runtime's QLinearGlobalAveragePool needs x_scale/(y_scale*%lld) in [2^-32, 256), "
                     "here %.3g/%.3g", (long long)image, (double)sx, (double)sy);
        else
            snprintf(r->reason, sizeof r->reason,
                     "input kept float: ONNX Runtime's QLinearGlobalAveragePool needs x_scale/(y_scale*HW) in [2^-32, 256), "
                     "here %.3g/%.3g", (double)sx, (double)sy);
        rep->n_ort_float++;
        for (int f = 0; f < n_edges; f++)
            if (edges[f].node == ni) edges[f].node = -1; /* dropped: the pool keeps float inputs */
    }
done:
    ptq_plan_destroy(plan);
    free(quantized);
    return st;
}

/* ---- rewriting ---- */

static ptq_status add_scalar(ptq_graph *g, const char *base, ptq_dtype dt, float value, int *out)
{
    ptq_status st = PTQ_OK;
    char name[NAME_CAP];
    ptq_tensor t = {0};
    t.dtype = dt;
    t.rank = 0;
    TRY(ptq_tensor_alloc(&t));
    if (dt == PTQ_F32) *(float *)t.data = value;
    ptq_graph_unique_name(g, base, name, sizeof name);
    st = ptq_graph_add_initializer(g, name, &t, out);
done:
    ptq_tensor_free(&t);
    return st;
}

static ptq_status add_node2(ptq_graph *g, const char *base, const char *op, const int *ins, int n_in,
                            const char *out_base, int *out_val, int axis)
{
    ptq_status st = PTQ_OK;
    char name[NAME_CAP], oname[NAME_CAP];
    int n;
    ptq_graph_unique_name(g, out_base, oname, sizeof oname);
    TRY(ptq_graph_add_value(g, oname, out_val));
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_node(g, name, op, "", ins, n_in, out_val, 1, &n));
    if (axis >= 0) {
        ptq_attr a;
        memset(&a, 0, sizeof a);
        a.name = ptq_strdup("axis");
        a.type = PTQ_ATTR_INT;
        a.i = axis;
        CHECK_ALLOC(a.name);
        TRY(ptq_node_add_attr(&g->nodes[n], &a));
    }
done:
    return st;
}

/* A Q -> DQ pair on activation v; returns the dequantized value. */
static ptq_status activation_pair(ptq_graph *g, int v, float amax, int *dq_out)
{
    ptq_status st = PTQ_OK;
    char base[NAME_CAP];
    const char *t = g->values[v].name;
    int scale, zp, q;
    snprintf(base, sizeof base, "%s_scale", t);
    TRY(add_scalar(g, base, PTQ_F32, safe_amax(amax) / 127.0f, &scale));
    snprintf(base, sizeof base, "%s_zero_point", t);
    TRY(add_scalar(g, base, PTQ_I8, 0, &zp));
    t = g->values[v].name; /* values may have moved */
    char nq[NAME_CAP], oq[NAME_CAP], ndq[NAME_CAP], odq[NAME_CAP];
    snprintf(nq, sizeof nq, "%s_QuantizeLinear", t);
    snprintf(oq, sizeof oq, "%s_quantized", t);
    snprintf(ndq, sizeof ndq, "%s_DequantizeLinear", t);
    snprintf(odq, sizeof odq, "%s_dequantized", t);
    int qin[3] = {v, scale, zp};
    TRY(add_node2(g, nq, "QuantizeLinear", qin, 3, oq, &q, -1));
    int dqin[3] = {q, scale, zp};
    TRY(add_node2(g, ndq, "DequantizeLinear", dqin, 3, odq, dq_out, -1));
done:
    return st;
}

/* Per-channel weight: int8 initializer + DQ (or float + Q + DQ); returns the dequantized value. */
static ptq_status weight_pair(ptq_graph *g, int w, int axis, int weights_fp32, int *dq_out)
{
    ptq_status st = PTQ_OK;
    const ptq_tensor *wt = &g->values[w].t;
    int64_t ch = wt->dims[axis];
    float *amax = malloc(sizeof(float) * (size_t)(ch ? ch : 1));
    ptq_tensor sc = {0}, zp = {0}, q8 = {0};
    char wname[NAME_CAP / 2], base[NAME_CAP], name[NAME_CAP];
    int scale_v, zp_v;
    CHECK_ALLOC(amax);
    snprintf(wname, sizeof wname, "%s", g->values[w].name);
    quant_weight_amax(wt, axis, amax);
    sc.dtype = PTQ_F32;
    sc.rank = 1;
    sc.dims[0] = ch;
    zp.dtype = PTQ_I8;
    zp.rank = 1;
    zp.dims[0] = ch;
    TRY(ptq_tensor_alloc(&sc));
    TRY(ptq_tensor_alloc(&zp));
    for (int64_t c = 0; c < ch; c++) ((float *)sc.data)[c] = amax[c] / 127.0f;
    if (!weights_fp32) {
        q8 = *wt;
        q8.dtype = PTQ_I8;
        q8.data = NULL;
        q8.owns_data = 0;
        TRY(ptq_tensor_alloc(&q8));
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < axis; d++) outer *= wt->dims[d];
        for (int d = axis + 1; d < wt->rank; d++) inner *= wt->dims[d];
        const float *x = wt->data;
        int8_t *y = q8.data;
        const float *s = sc.data;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t c = 0; c < ch; c++)
                for (int64_t i = 0; i < inner; i++) {
                    int64_t idx = (o * ch + c) * inner + i;
                    y[idx] = quant_round_s8(x[idx], s[c]);
                }
    }
    snprintf(base, sizeof base, "%s_scale", wname);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_initializer(g, name, &sc, &scale_v));
    snprintf(base, sizeof base, "%s_zero_point", wname);
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_initializer(g, name, &zp, &zp_v));
    char ndq[NAME_CAP], odq[NAME_CAP];
    snprintf(ndq, sizeof ndq, "%s_DequantizeLinear", wname);
    snprintf(odq, sizeof odq, "%s_dequantized", wname);
    if (weights_fp32) {
        char nq[NAME_CAP], oq[NAME_CAP];
        int q;
        snprintf(nq, sizeof nq, "%s_QuantizeLinear", wname);
        snprintf(oq, sizeof oq, "%s_quantized", wname);
        int qin[3] = {w, scale_v, zp_v};
        TRY(add_node2(g, nq, "QuantizeLinear", qin, 3, oq, &q, axis));
        int dqin[3] = {q, scale_v, zp_v};
        TRY(add_node2(g, ndq, "DequantizeLinear", dqin, 3, odq, dq_out, axis));
    } else {
        int q;
        snprintf(base, sizeof base, "%s_quantized", wname);
        ptq_graph_unique_name(g, base, name, sizeof name);
        TRY(ptq_graph_add_initializer(g, name, &q8, &q));
        int dqin[3] = {q, scale_v, zp_v};
        TRY(add_node2(g, ndq, "DequantizeLinear", dqin, 3, odq, dq_out, axis));
    }
done:
    free(amax);
    ptq_tensor_free(&sc);
    ptq_tensor_free(&zp);
    ptq_tensor_free(&q8);
    return st;
}

ptq_status quant_insert_qdq(ptq_graph *g, const quant_options *opt, quant_report *rep)
{
    ptq_status st = PTQ_OK;
    int n_orig = g->n_nodes, n_edges = 0, n_pat = opt->n_exclude_op_types + opt->n_exclude_nodes;
    uint8_t *is_const = NULL, *matched = NULL, *post = NULL;
    edge *edges = NULL;
    int *act_dq = NULL, *w_dq = NULL, *weights = NULL, *uses = NULL, n_weights = 0;
    memset(rep, 0, sizeof *rep);
    int64_t opset = ptq_graph_opset(g, "");
    if (opset < 13)
        FAIL(PTQ_ERR_UNSUPPORTED, "model opset %lld: per-channel Q/DQ needs opset 13 (upgrade the model first)",
             (long long)opset);
    is_const = calloc((size_t)g->n_values + 1, 1);
    uses = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    matched = calloc((size_t)n_pat + 1, 1);
    edges = malloc(sizeof *edges * ((size_t)n_orig * 4 + 1));
    rep->nodes = calloc((size_t)n_orig + 1, sizeof *rep->nodes);
    CHECK_ALLOC(is_const);
    CHECK_ALLOC(uses);
    CHECK_ALLOC(matched);
    CHECK_ALLOC(edges);
    CHECK_ALLOC(rep->nodes);
    TRY(constant_values(g, is_const));
    CHECK_ALLOC(post = calloc((size_t)g->n_values + 1, 1));
    TRY(post_values(g, is_const, post));
    count_uses(g, uses);
    rep->n_nodes = n_orig;
    for (int i = 0; i < n_orig; i++) {
        quant_node_report *r = &rep->nodes[i];
        r->node_name = ptq_strdup(g->nodes[i].name);
        r->op_type = ptq_strdup(g->nodes[i].op_type);
        CHECK_ALLOC(r->node_name);
        CHECK_ALLOC(r->op_type);
        if (excluded(g, &g->nodes[i], opt, matched, r->reason, sizeof r->reason)) {
            r->state = QUANT_NODE_EXCLUDED;
            rep->n_excluded++;
            continue;
        }
        r->state = decide(g, i, is_const, post, uses, opt, edges, &n_edges, r->reason, sizeof r->reason);
    }
    for (int i = 0; i < n_pat; i++) {
        if (matched[i]) continue;
        const char *p = i < opt->n_exclude_op_types ? opt->exclude_op_types[i]
                                                    : opt->exclude_nodes[i - opt->n_exclude_op_types];
        char **u = realloc(rep->unmatched, sizeof(char *) * ((size_t)rep->n_unmatched + 1));
        CHECK_ALLOC(u);
        rep->unmatched = u;
        rep->unmatched[rep->n_unmatched] = ptq_strdup(p);
        CHECK_ALLOC(rep->unmatched[rep->n_unmatched]);
        rep->n_unmatched++;
    }

    TRY(ort_limits(g, opt, edges, n_edges, rep));

    /* rewrite: one pair per activation tensor (or per edge with dedicated_qdq), one per weight */
    int n_vals0 = g->n_values;
    act_dq = malloc(sizeof(int) * ((size_t)n_vals0 + 1));
    w_dq = malloc(sizeof(int) * ((size_t)n_vals0 + 1));
    weights = malloc(sizeof(int) * ((size_t)n_edges + 1));
    CHECK_ALLOC(act_dq);
    CHECK_ALLOC(w_dq);
    CHECK_ALLOC(weights);
    for (int v = 0; v < n_vals0; v++) act_dq[v] = w_dq[v] = -1;
    for (int e = 0; e < n_edges; e++) {
        const edge *ed = &edges[e];
        if (ed->node < 0) continue; /* dropped by ort_limits */
        int v = g->nodes[ed->node].inputs[ed->input], dq;
        if (ed->kind == EDGE_ACT) {
            if (act_dq[v] < 0 || opt->dedicated_qdq) {
                float amax = 1.0f;
                opt->range(g->values[v].name, &amax, opt->range_user);
                TRY(activation_pair(g, v, amax, &dq));
                if (act_dq[v] < 0) rep->n_activations++;
                act_dq[v] = dq;
            }
            dq = act_dq[v];
        } else {
            if (w_dq[v] < 0) {
                TRY(weight_pair(g, v, ed->axis, opt->weights_fp32, &dq));
                w_dq[v] = dq;
                weights[n_weights++] = v;
                rep->n_weights++;
            }
            dq = w_dq[v];
        }
        g->nodes[ed->node].inputs[ed->input] = dq;
    }
    if (!opt->weights_fp32)
        for (int i = 0; i < n_weights; i++) ptq_graph_drop_initializer_if_unused(g, weights[i]);
    TRY(ptq_graph_sort_nodes(g));
done:
    free(is_const);
    free(post);
    free(matched);
    free(edges);
    free(act_dq);
    free(w_dq);
    free(weights);
    free(uses);
    return st;
}

/* ---- what calibration observes ---- */

static int any_range(const char *name, float *amax, void *user)
{
    (void)name;
    (void)user;
    *amax = 1.0f;
    return 1;
}

/* Ops whose output holds exactly the input's values (the same multiset of floats). */
static int is_view_op(const ptq_node *n)
{
    static const char *const views[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose"};
    if (n->domain[0]) return 0;
    for (size_t i = 0; i < sizeof views / sizeof *views; i++)
        if (strcmp(n->op_type, views[i]) == 0) return 1;
    return 0;
}

ptq_status quant_calib_tensors(ptq_graph *g, int **want_out)
{
    ptq_status st = PTQ_OK;
    int n_changed, *want = NULL, *uses = NULL;
    uint8_t *is_const = NULL, *post = NULL;
    edge *edges = NULL;
    quant_options opt = quant_defaults();
    opt.range = any_range;
    *want_out = NULL;
    /* the graph quant_insert_qdq sees (cmd_quantize): constants as initializers, opset 13 */
    TRY(ptq_graph_constants_to_initializers(g, &n_changed));
    TRY(quant_upgrade_opset(g, 13, &n_changed));
    want = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    is_const = calloc((size_t)g->n_values + 1, 1);
    uses = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    edges = malloc(sizeof *edges * ((size_t)g->n_nodes * 4 + 1));
    CHECK_ALLOC(want);
    CHECK_ALLOC(is_const);
    CHECK_ALLOC(uses);
    CHECK_ALLOC(edges);
    TRY(constant_values(g, is_const));
    CHECK_ALLOC(post = calloc((size_t)g->n_values + 1, 1));
    TRY(post_values(g, is_const, post));
    count_uses(g, uses);
    for (int v = 0; v < g->n_values; v++) want[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        char why[160];
        int n_edges = 0;
        if (decide(g, i, is_const, post, uses, &opt, edges, &n_edges, why, sizeof why) != QUANT_NODE_QUANTIZED) continue;
        for (int e = 0; e < n_edges; e++) {
            if (edges[e].kind != EDGE_ACT) continue;
            int v = g->nodes[i].inputs[edges[e].input], root = v;
            /* through views to the tensor that first holds these values (a bounded walk) */
            for (int hops = 0; hops < g->n_nodes; hops++) {
                int p = g->values[root].producer;
                if (p < 0 || !is_view_op(&g->nodes[p]) || g->nodes[p].n_inputs < 1 || g->nodes[p].n_outputs < 1 ||
                    g->nodes[p].outputs[0] != root)
                    break;
                int in = g->nodes[p].inputs[0];
                if (in < 0 || is_const[in]) break;
                root = in;
            }
            want[v] = root;
        }
    }
    *want_out = want;
    want = NULL;
done:
    free(want);
    free(is_const);
    free(post);
    free(uses);
    free(edges);
    return st;
}
