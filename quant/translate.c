/* translate.c: QDQ model -> Q/DQ-free model + INT8 scales + fp16 nodes (see translate.h). */
#include "translate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph_edit.h"

#define NAME_CAP 1024

quant_translate_options quant_translate_defaults(void)
{
    quant_translate_options o;
    memset(&o, 0, sizeof o);
    return o;
}

static int is_init(const ptq_graph *g, int v)
{
    return v >= 0 && g->values[v].kind == PTQ_VALUE_INITIALIZER && g->values[v].t.data;
}

static int is_op(const ptq_node *n, const char *op)
{
    return strcmp(n->op_type, op) == 0 && (!n->domain[0] || strcmp(n->domain, "ai.onnx") == 0);
}

/* A Q or DQ node's scale (float initializer, scalar or 1-D) and zero point (optional
 * int8/uint8 initializer of the same size; absent means uint8 zero). */
typedef struct {
    const float *scale;
    int64_t n;
    const ptq_tensor *zp; /* NULL: absent */
    int axis;             /* of a 1-D scale, normalised to the data's rank */
} qparams;

static ptq_status read_qparams(const ptq_graph *g, const ptq_node *n, int data_rank, qparams *q)
{
    ptq_status st = PTQ_OK;
    int s = n->n_inputs > 1 ? n->inputs[1] : -1, z = n->n_inputs > 2 ? n->inputs[2] : -1;
    if (!is_init(g, s) || g->values[s].t.dtype != PTQ_F32)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': its scale is not a float32 constant", n->op_type, n->name);
    const ptq_tensor *st_ = &g->values[s].t;
    q->scale = st_->data;
    q->n = ptq_tensor_numel(st_);
    if (st_->rank > 1 || q->n < 1) FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': scale of rank %d", n->op_type, n->name, st_->rank);
    for (int64_t i = 0; i < q->n; i++)
        if (!(q->scale[i] > 0) || !isfinite(q->scale[i]))
            FAIL(PTQ_ERR_FORMAT, "%s '%s': scale %g is not a positive finite number", n->op_type, n->name, (double)q->scale[i]);
    q->zp = NULL;
    if (z >= 0) {
        if (!is_init(g, z) || (int64_t)ptq_tensor_numel(&g->values[z].t) != q->n)
            FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': its zero point is not a constant the size of its scale", n->op_type, n->name);
        q->zp = &g->values[z].t;
    }
    if (!q->zp || q->zp->dtype != PTQ_I8)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': %s quantization; TensorRT's INT8 is signed and symmetric", n->op_type, n->name,
             q->zp ? ptq_dtype_name(q->zp->dtype) : "uint8 (no zero point)");
    for (int64_t i = 0; i < q->n; i++)
        if (((const int8_t *)q->zp->data)[i] != 0)
            FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': zero point %d; TensorRT's INT8 is symmetric (zero point 0)", n->op_type,
                 n->name, ((const int8_t *)q->zp->data)[i]);
    int64_t axis = ptq_attr_int(n, "axis", 1);
    if (axis < 0) axis += data_rank;
    q->axis = (int)axis;
done:
    return st;
}

/* The channel of element i of t along axis (0 for a per-tensor scale). */
static int64_t channel_of(const ptq_tensor *t, const qparams *q, int64_t i)
{
    if (q->n == 1) return 0;
    int64_t inner = 1;
    for (int d = q->axis + 1; d < t->rank; d++) inner *= t->dims[d];
    return (i / inner) % t->dims[q->axis];
}

/* The float weight a DequantizeLinear computes from initializer w (int8), or from float w
 * through the QuantizeLinear qn first (round half to even, saturate to int8). */
static ptq_status dequantize_weight(const ptq_graph *g, const ptq_node *qn, const ptq_node *dq, int w, ptq_tensor *out)
{
    ptq_status st = PTQ_OK;
    const ptq_tensor *t = &g->values[w].t;
    qparams qd, qq;
    TRY(read_qparams(g, dq, t->rank, &qd));
    if (qn) TRY(read_qparams(g, qn, t->rank, &qq));
    if (qd.n > 1 && (qd.axis < 0 || qd.axis >= t->rank || t->dims[qd.axis] != qd.n))
        FAIL(PTQ_ERR_SHAPE, "DequantizeLinear '%s': %lld scales for axis %d of '%s'", dq->name, (long long)qd.n, qd.axis,
             g->values[w].name);
    if (qn && (qq.n != qd.n || memcmp(qq.scale, qd.scale, sizeof(float) * (size_t)qd.n) != 0))
        FAIL(PTQ_ERR_UNSUPPORTED, "QuantizeLinear '%s' and DequantizeLinear '%s' use different scales", qn->name, dq->name);
    if ((qn && t->dtype != PTQ_F32) || (!qn && t->dtype != PTQ_I8))
        FAIL(PTQ_ERR_UNSUPPORTED, "weight '%s' is %s: expected %s", g->values[w].name, ptq_dtype_name(t->dtype),
             qn ? "float32" : "int8");
    memset(out, 0, sizeof *out);
    out->dtype = PTQ_F32;
    out->rank = t->rank;
    memcpy(out->dims, t->dims, sizeof t->dims);
    TRY(ptq_tensor_alloc(out));
    int64_t n = (int64_t)ptq_tensor_numel(t);
    float *o = out->data;
    for (int64_t i = 0; i < n; i++) {
        float s = qd.scale[channel_of(t, &qd, i)], q;
        if (qn) {
            q = nearbyintf(((const float *)t->data)[i] / s);
            q = q < -128.0f ? -128.0f : q > 127.0f ? 127.0f : q;
        } else {
            q = (float)((const int8_t *)t->data)[i];
        }
        o[i] = q * s;
    }
done:
    return st;
}

/* Value v, produced by a node until now, becomes an initializer holding *t (moved). */
static ptq_status make_initializer(ptq_graph *g, int v, ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    int *list = realloc(g->initializers, sizeof(int) * ((size_t)g->n_initializers + 1));
    CHECK_ALLOC(list);
    g->initializers = list;
    ptq_value *val = &g->values[v];
    ptq_tensor_free(&val->t);
    val->t = *t;
    val->t.owns_data = 1;
    memset(t, 0, sizeof *t);
    val->kind = PTQ_VALUE_INITIALIZER;
    val->producer = -1;
    val->in_value_info = 0;
    g->initializers[g->n_initializers++] = v;
done:
    return st;
}

static void replace_uses(ptq_graph *g, int from, int to, const uint8_t *removed)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!removed[i])
            for (int k = 0; k < g->nodes[i].n_inputs; k++)
                if (g->nodes[i].inputs[k] == from) g->nodes[i].inputs[k] = to;
}

/* Removes the marked nodes; their outputs leave value_info. */
static ptq_status compact(ptq_graph *g, uint8_t *removed)
{
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ptq_node *n = &g->nodes[i];
        if (!removed[i]) {
            g->nodes[k++] = *n;
            continue;
        }
        for (int o = 0; o < n->n_outputs; o++)
            if (n->outputs[o] >= 0 && !g->values[n->outputs[o]].is_output) g->values[n->outputs[o]].in_value_info = 0;
        ptq_node_clear(n);
    }
    g->n_nodes = k;
    memset(removed, 0, (size_t)(k > 0 ? k : 1));
    return ptq_graph_link(g);
}

/* Drops every initializer nothing reads anymore (int8 weights, scales, zero points, BN). */
static ptq_status drop_unused_initializers(ptq_graph *g)
{
    ptq_status st = PTQ_OK;
    int n = g->n_initializers, *copy = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    CHECK_ALLOC(copy);
    memcpy(copy, g->initializers, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        if (!g->values[copy[i]].is_output) ptq_graph_drop_initializer_if_unused(g, copy[i]);
    free(copy);
done:
    return st;
}

static void keep_scale(float *sc, int v, float s, int *conflicts)
{
    if (isnan(sc[v])) sc[v] = s;
    else if (sc[v] != s) {
        (*conflicts)++;
        if (s > sc[v]) sc[v] = s;
    }
}

/* Steps 1 and 2: weights dequantized into float initializers, activation pairs removed. */
static ptq_status remove_qdq(ptq_graph *g, float *sc, uint8_t *removed, quant_translation *tr)
{
    ptq_status st = PTQ_OK;
    ptq_tensor w = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        ptq_node *d = &g->nodes[i];
        if (!is_op(d, "DequantizeLinear")) continue;
        int x = d->n_inputs > 0 ? d->inputs[0] : -1, out = d->n_outputs > 0 ? d->outputs[0] : -1;
        int p = x >= 0 ? g->values[x].producer : -1;
        const ptq_node *qn = p >= 0 && is_op(&g->nodes[p], "QuantizeLinear") ? &g->nodes[p] : NULL;
        if (x < 0 || out < 0) FAIL(PTQ_ERR_FORMAT, "DequantizeLinear '%s' has no input or output", d->name);
        if (is_init(g, x) || (qn && is_init(g, qn->inputs[0]))) { /* a weight */
            TRY(dequantize_weight(g, qn, d, qn ? qn->inputs[0] : x, &w));
            TRY(make_initializer(g, out, &w));
            removed[i] = 1;
            tr->n_weights++;
            continue;
        }
        if (!qn)
            FAIL(PTQ_ERR_UNSUPPORTED, "DequantizeLinear '%s': its input '%s' is neither a constant nor a QuantizeLinear output",
                 d->name, g->values[x].name);
        int y = qn->inputs[0];
        qparams qq, qd;
        TRY(read_qparams(g, qn, 0, &qq));
        TRY(read_qparams(g, d, 0, &qd));
        if (qq.n != 1 || qd.n != 1)
            FAIL(PTQ_ERR_UNSUPPORTED, "QuantizeLinear '%s': per-channel activation scales; TensorRT's are per tensor", qn->name);
        if (qq.scale[0] != qd.scale[0])
            FAIL(PTQ_ERR_UNSUPPORTED, "QuantizeLinear '%s' (scale %g) and DequantizeLinear '%s' (scale %g) disagree", qn->name,
                 (double)qq.scale[0], d->name, (double)qd.scale[0]);
        keep_scale(sc, y, qq.scale[0], &tr->n_conflicts);
        if (g->values[out].is_output) { /* keep the output's name: the pair becomes an Identity */
            free(d->op_type);
            CHECK_ALLOC(d->op_type = ptq_strdup("Identity"));
            for (int a = 0; a < d->n_attrs; a++) ptq_attr_clear(&d->attrs[a]);
            d->n_attrs = 0;
            d->inputs[0] = y;
            d->n_inputs = 1;
        } else {
            replace_uses(g, out, y, removed);
            removed[i] = 1;
        }
        tr->n_activation_pairs++;
    }
    /* QuantizeLinear nodes nothing reads anymore go; any other is not a Q/DQ pair */
    for (int i = 0; i < g->n_nodes; i++) {
        ptq_node *q = &g->nodes[i];
        if (!is_op(q, "QuantizeLinear") || removed[i]) continue;
        int out = q->outputs[0], uses = 0;
        for (int k = 0; k < g->n_nodes; k++)
            if (!removed[k])
                for (int j = 0; j < g->nodes[k].n_inputs; j++) uses += g->nodes[k].inputs[j] == out;
        if (uses || g->values[out].is_output)
            FAIL(PTQ_ERR_UNSUPPORTED, "QuantizeLinear '%s': its int8 output is used by something other than a DequantizeLinear",
                 q->name);
        removed[i] = 1;
    }
    TRY(compact(g, removed));
    TRY(drop_unused_initializers(g));
done:
    ptq_tensor_free(&w);
    return st;
}

/* A float32 constant of exactly n elements, or NULL. */
static const float *const_vec(const ptq_graph *g, int v, int64_t n)
{
    if (!is_init(g, v) || g->values[v].t.dtype != PTQ_F32 || (int64_t)ptq_tensor_numel(&g->values[v].t) != n) return NULL;
    return g->values[v].t.data;
}

static ptq_status add_float_initializer(ptq_graph *g, const char *base, const ptq_tensor *shape_of, const double *vals,
                                        int64_t n, int *out)
{
    ptq_status st = PTQ_OK;
    char name[NAME_CAP];
    ptq_tensor t = {0};
    t.dtype = PTQ_F32;
    t.rank = shape_of ? shape_of->rank : 1;
    if (shape_of) memcpy(t.dims, shape_of->dims, sizeof t.dims);
    else t.dims[0] = n;
    TRY(ptq_tensor_alloc(&t));
    for (int64_t i = 0; i < n; i++) ((float *)t.data)[i] = (float)vals[i];
    ptq_graph_unique_name(g, base, name, sizeof name);
    TRY(ptq_graph_add_initializer(g, name, &t, out));
done:
    ptq_tensor_free(&t);
    return st;
}

/* Step 3: Conv -> BatchNormalization (the Conv's only consumer) becomes one Conv. */
static ptq_status fold_batchnorm(ptq_graph *g, uint8_t *removed, quant_translation *tr)
{
    ptq_status st = PTQ_OK;
    double *wv = NULL, *bv = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        ptq_node *bn = &g->nodes[i];
        if (!is_op(bn, "BatchNormalization") || bn->n_inputs < 5 || ptq_attr_int(bn, "spatial", 1) != 1) continue;
        if (bn->n_outputs > 1)
            for (int o = 1; o < bn->n_outputs; o++)
                if (bn->outputs[o] >= 0 && ptq_graph_count_uses(g, bn->outputs[o]) > 0) goto next;
        int x = bn->inputs[0], p = g->values[x].producer;
        if (p < 0 || !is_op(&g->nodes[p], "Conv") || ptq_graph_count_uses(g, x) != 1) continue;
        ptq_node *c = &g->nodes[p];
        int wi = c->inputs[1], bi = c->n_inputs > 2 ? c->inputs[2] : -1;
        if (!is_init(g, wi) || g->values[wi].t.dtype != PTQ_F32 || g->values[wi].t.rank < 3) continue;
        const ptq_tensor *W = &g->values[wi].t;
        int64_t cout = W->dims[0], per = (int64_t)ptq_tensor_numel(W) / (cout > 0 ? cout : 1);
        const float *gamma = const_vec(g, bn->inputs[1], cout), *beta = const_vec(g, bn->inputs[2], cout);
        const float *mean = const_vec(g, bn->inputs[3], cout), *var = const_vec(g, bn->inputs[4], cout);
        const float *bias = bi >= 0 ? const_vec(g, bi, cout) : NULL;
        if (!gamma || !beta || !mean || !var || (bi >= 0 && !bias)) continue;
        double eps = ptq_attr_float(bn, "epsilon", 1e-5f);
        wv = malloc(sizeof(double) * (size_t)(cout * per + 1));
        bv = malloc(sizeof(double) * (size_t)(cout + 1));
        CHECK_ALLOC(wv);
        CHECK_ALLOC(bv);
        for (int64_t o = 0; o < cout; o++) {
            double s = (double)gamma[o] / sqrt((double)var[o] + eps);
            for (int64_t k = 0; k < per; k++) wv[o * per + k] = (double)((const float *)W->data)[o * per + k] * s;
            bv[o] = ((bias ? (double)bias[o] : 0.0) - (double)mean[o]) * s + (double)beta[o];
        }
        char base[NAME_CAP];
        int nw, nb;
        snprintf(base, sizeof base, "%s_bn", g->values[wi].name);
        TRY(add_float_initializer(g, base, &g->values[wi].t, wv, cout * per, &nw));
        snprintf(base, sizeof base, "%s_bias_bn", g->nodes[p].name);
        TRY(add_float_initializer(g, base, NULL, bv, cout, &nb));
        free(wv);
        free(bv);
        wv = bv = NULL;
        c = &g->nodes[p]; /* (values moved, nodes did not) */
        bn = &g->nodes[i];
        if (c->n_inputs < 3) {
            int *ins = realloc(c->inputs, sizeof(int) * 3);
            CHECK_ALLOC(ins);
            c->inputs = ins;
            c->n_inputs = 3;
        }
        c->inputs[1] = nw;
        c->inputs[2] = nb;
        g->values[x].in_value_info = 0;
        c->outputs[0] = bn->outputs[0];
        bn->outputs[0] = x; /* the BN node is removed below; its old output is the Conv's now */
        removed[i] = 1;
        tr->n_bn_folded++;
    next:;
    }
    TRY(compact(g, removed));
    TRY(drop_unused_initializers(g));
done:
    free(wv);
    free(bv);
    return st;
}

static int in_list(const char *op, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(op, *list) == 0) return 1;
    return 0;
}

/* Step 4: scales forward through range-keeping ops, in topological order. */
static ptq_status propagate(const ptq_graph *g, const quant_translate_options *o, float *sc, quant_translation *tr)
{
    static const char *const keep[] = {"Pad", "Transpose", "MaxPool", "Flatten", "Relu", "Squeeze", "Reshape", "Sigmoid", NULL};
    static const char *const pools[] = {"AveragePool", "GlobalAveragePool", "ReduceMean", NULL};
    static const char *const eltwise[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", NULL};
    ptq_status st = PTQ_OK;
    int *order = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    CHECK_ALLOC(order);
    TRY(ptq_graph_toposort(g, order));
    for (int k = 0; k < g->n_nodes; k++) {
        const ptq_node *n = &g->nodes[order[k]];
        if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) continue;
        if (o->dla && in_list(n->op_type, eltwise))
            for (int i = 0; i < n->n_inputs; i++) {
                int v = n->inputs[i], p = v >= 0 ? g->values[v].producer : -1;
                if (p >= 0 && isnan(sc[v]) && (is_op(&g->nodes[p], "Conv") || is_op(&g->nodes[p], "ConvTranspose"))) {
                    sc[v] = 1.0f;
                    tr->n_propagated++;
                }
            }
        int out = n->n_outputs > 0 ? n->outputs[0] : -1, in = n->n_inputs > 0 ? n->inputs[0] : -1;
        if (out < 0 || in < 0 || !isnan(sc[out])) continue;
        float s = NAN;
        if (in_list(n->op_type, keep) || (o->propagate_pool && in_list(n->op_type, pools))) {
            s = sc[in];
        } else if ((o->propagate_concat && !strcmp(n->op_type, "Concat")) || (o->propagate_mul && !strcmp(n->op_type, "Mul"))) {
            int all = 1;
            for (int i = 0; i < n->n_inputs; i++) {
                int v = n->inputs[i];
                if (v < 0 || (!strcmp(n->op_type, "Mul") && is_init(g, v))) continue;
                if (isnan(sc[v])) all = 0;
                else if (isnan(s) || sc[v] > s) s = sc[v];
            }
            if (!all) s = NAN;
        }
        if (!isnan(s)) {
            sc[out] = s;
            tr->n_propagated++;
        }
    }
done:
    free(order);
    return st;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const quant_scale *)a)->name, ((const quant_scale *)b)->name);
}

static ptq_status collect(const ptq_graph *g, const float *sc, quant_translation *tr)
{
    ptq_status st = PTQ_OK;
    int count = 0;
    for (int v = 0; v < g->n_values; v++) count += !isnan(sc[v]);
    tr->scales = calloc((size_t)count + 1, sizeof *tr->scales);
    tr->fp16_nodes = calloc((size_t)g->n_nodes + 1, sizeof *tr->fp16_nodes);
    CHECK_ALLOC(tr->scales);
    CHECK_ALLOC(tr->fp16_nodes);
    for (int v = 0; v < g->n_values; v++)
        if (!isnan(sc[v])) {
            CHECK_ALLOC(tr->scales[tr->n_scales].name = ptq_strdup(g->values[v].name));
            tr->scales[tr->n_scales++].scale = sc[v];
        }
    qsort(tr->scales, (size_t)tr->n_scales, sizeof *tr->scales, by_name);
    for (int i = 0; i < g->n_nodes; i++) {
        const ptq_node *n = &g->nodes[i];
        int weighted = is_op(n, "Conv") || is_op(n, "ConvTranspose") || is_op(n, "Gemm") || is_op(n, "MatMul");
        if (!weighted) continue;
        int float_in = 0, acts = is_op(n, "Gemm") || is_op(n, "MatMul") ? 2 : 1;
        for (int k = 0; k < acts && k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v >= 0 && !is_init(g, v) && isnan(sc[v])) float_in = 1;
        }
        if (float_in) CHECK_ALLOC(tr->fp16_nodes[tr->n_fp16++] = ptq_strdup(n->name));
    }
done:
    return st;
}

ptq_status quant_translate(ptq_graph *g, const quant_translate_options *o, quant_translation *tr)
{
    ptq_status st = PTQ_OK;
    float *sc = NULL;
    uint8_t *removed = NULL;
    memset(tr, 0, sizeof *tr);
    int any = 0;
    for (int i = 0; i < g->n_nodes; i++) any |= is_op(&g->nodes[i], "QuantizeLinear") || is_op(&g->nodes[i], "DequantizeLinear");
    if (!any) FAIL(PTQ_ERR_FORMAT, "no QuantizeLinear or DequantizeLinear node: not a QDQ model");
    TRY(ptq_graph_link(g));
    sc = malloc(sizeof(float) * (size_t)(g->n_values + 1));
    removed = calloc((size_t)g->n_nodes + 1, 1);
    CHECK_ALLOC(sc);
    CHECK_ALLOC(removed);
    for (int v = 0; v < g->n_values; v++) sc[v] = NAN;
    TRY(remove_qdq(g, sc, removed, tr));
    int before = g->n_values;
    TRY(fold_batchnorm(g, removed, tr));
    if (g->n_values > before) { /* new initializers: no scales */
        float *s2 = realloc(sc, sizeof(float) * (size_t)(g->n_values + 1));
        CHECK_ALLOC(s2);
        sc = s2;
        for (int v = before; v < g->n_values; v++) sc[v] = NAN;
    }
    TRY(ptq_graph_sort_nodes(g));
    TRY(propagate(g, o, sc, tr));
    TRY(collect(g, sc, tr));
done:
    free(sc);
    free(removed);
    if (st != PTQ_OK) quant_translation_free(tr);
    return st;
}

void quant_translation_free(quant_translation *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_scales; i++) free(t->scales[i].name);
    for (int i = 0; i < t->n_fp16; i++) free(t->fp16_nodes[i]);
    free(t->scales);
    free(t->fp16_nodes);
    memset(t, 0, sizeof *t);
}
