/* equalize.c: activation equalization in front of depthwise convolutions (see equalize.h). */
#include "engine/runner.h"
#include "engine/equalize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/pass.h"
#include "runtime/graph_edit.h"

enum { MAX_SHIFT = 12 }; /* s_c <= 2^12: a nearly dead channel is not blown up to the others' range */

static int is_op(const ptq_graph *g, int node, const char *op)
{
    return node >= 0 && !strcmp(g->nodes[node].op_type, op) && !g->nodes[node].domain[0];
}

/* Input i of node n if it is a float initializer of rank `rank` (0: any) with dims[0] == d0
 * that nothing else reads, else -1. */
static int own_param(const ptq_graph *g, const ptq_node *n, int i, int rank, int64_t d0)
{
    int v = i < n->n_inputs ? n->inputs[i] : -1;
    if (v < 0) return -1;
    const ptq_value *x = &g->values[v];
    if (x->kind != PTQ_VALUE_INITIALIZER || !x->t.data || x->t.dtype != PTQ_F32 || x->t.rank < 1 || x->t.dims[0] != d0)
        return -1;
    if ((rank && x->t.rank != rank) || ptq_graph_count_uses(g, v) != 1) return -1;
    return v;
}

/* v is read by exactly one node input and is no graph output. */
static int single_use(const ptq_graph *g, int v)
{
    return v >= 0 && !g->values[v].is_output && ptq_graph_count_uses(g, v) == 1;
}

/* The parameters of the pair whose depthwise Conv is node n2 (-1 fields when it is none). */
typedef struct {
    int n1, bn, n2;
    int w1, b1, gamma, beta, w2; /* b1: -1 when L1 has no bias or a BatchNormalization follows */
    int64_t c;
} pair_params;

static int match(const ptq_graph *g, int n2, pair_params *p)
{
    const ptq_node *l2 = &g->nodes[n2];
    memset(p, -1, sizeof *p);
    if (!is_op(g, n2, "Conv") || l2->n_inputs < 2) return 0;
    int w = l2->inputs[1];
    if (w < 0 || g->values[w].t.rank != 4 || g->values[w].t.dims[1] != 1) return 0;
    int64_t c = g->values[w].t.dims[0];
    if (c < 2 || ptq_attr_int(l2, "group", 1) != c || (p->w2 = own_param(g, l2, 1, 4, c)) < 0) return 0;
    int v = l2->inputs[0];
    if (!single_use(g, v)) return 0;
    int node = g->values[v].producer;
    if (is_op(g, node, "Relu")) { /* Relu(s x) = s Relu(x) for s > 0 */
        v = g->nodes[node].inputs[0];
        if (!single_use(g, v)) return 0;
        node = g->values[v].producer;
    }
    if (is_op(g, node, "BatchNormalization")) {
        const ptq_node *bn = &g->nodes[node];
        for (int o = 1; o < bn->n_outputs; o++)
            if (bn->outputs[o] >= 0 && ptq_graph_count_uses(g, bn->outputs[o])) return 0; /* training outputs in use */
        if ((p->gamma = own_param(g, bn, 1, 1, c)) < 0 || (p->beta = own_param(g, bn, 2, 1, c)) < 0) return 0;
        p->bn = node;
        v = bn->inputs[0];
        if (!single_use(g, v)) return 0;
        node = g->values[v].producer;
    }
    if (!is_op(g, node, "Conv") || (p->w1 = own_param(g, &g->nodes[node], 1, 0, c)) < 0) return 0;
    if (p->bn < 0 && g->nodes[node].n_inputs > 2 && g->nodes[node].inputs[2] >= 0 &&
        (p->b1 = own_param(g, &g->nodes[node], 2, 1, c)) < 0)
        return 0; /* a bias that is shared or not per channel */
    p->n1 = node;
    p->n2 = n2;
    p->c = c;
    return 1;
}

static const char *out_name(const ptq_graph *g, int node)
{
    return g->values[g->nodes[node].outputs[0]].name;
}

void eng_equalization_free(eng_equalization *eq)
{
    for (int i = 0; eq->pairs && i < eq->n; i++) {
        eng_eq_pair *p = &eq->pairs[i];
        free(p->producer);
        free(p->bn);
        free(p->consumer);
        free(p->tensor);
        free(p->range);
        free(p->scale);
    }
    free(eq->pairs);
    memset(eq, 0, sizeof *eq);
}

ptq_status eng_equalize_find(const ptq_graph *g, eng_equalization *eq)
{
    ptq_status st = PTQ_OK;
    memset(eq, 0, sizeof *eq);
    eq->pairs = calloc((size_t)g->n_nodes + 1, sizeof *eq->pairs);
    CHECK_ALLOC(eq->pairs);
    for (int n = 0; n < g->n_nodes; n++) {
        pair_params pp;
        if (!match(g, n, &pp)) continue;
        eng_eq_pair *p = &eq->pairs[eq->n++];
        p->channels = pp.c;
        p->producer = ptq_strdup(out_name(g, pp.n1));
        p->bn = pp.bn >= 0 ? ptq_strdup(out_name(g, pp.bn)) : NULL;
        p->consumer = ptq_strdup(out_name(g, pp.n2));
        p->tensor = ptq_strdup(g->values[g->nodes[pp.n2].inputs[0]].name);
        p->range = calloc((size_t)pp.c, sizeof *p->range);
        p->scale = malloc(sizeof *p->scale * (size_t)pp.c);
        if (!p->producer || (pp.bn >= 0 && !p->bn) || !p->consumer || !p->tensor || !p->range || !p->scale)
            FAIL(PTQ_ERR_NOMEM, "out of memory allocating the equalization scales");
        for (int64_t k = 0; k < pp.c; k++) p->scale[k] = 1.0f;
    }
done:
    if (st != PTQ_OK) eng_equalization_free(eq);
    return st;
}

/* The pass's observer: max |x| per channel of a pair's X ([N, C, ...]). */
static ptq_status see(eng_pass *ps, const char *name, const ptq_tensor *t)
{
    eng_equalization *eq = ps->user;
    for (int i = 0; i < eq->n; i++) {
        eng_eq_pair *p = &eq->pairs[i];
        if (strcmp(p->tensor, name)) continue;
        if (t->dtype != PTQ_F32 || t->rank < 2 || t->dims[1] != p->channels) {
            ptq_error("equalization: tensor '%s' is not [N, %lld, ...] float", name, (long long)p->channels);
            return PTQ_ERR_SHAPE;
        }
        size_t plane = ptq_tensor_numel(t) / (size_t)(t->dims[0] * t->dims[1]);
        const float *x = t->data;
        for (int64_t b = 0; b < t->dims[0]; b++)
            for (int64_t c = 0; c < p->channels; c++, x += plane) {
                float r = p->range[c];
                for (size_t k = 0; k < plane; k++) r = fmaxf(r, fabsf(x[k])); /* NaN ignored */
                p->range[c] = r;
            }
    }
    return PTQ_OK;
}

/* s_c = 2^floor(log2(R / r_c)), so that r_c s_c is in (R/2, R]; 1 for dead or non-finite channels. */
static void choose_scales(eng_eq_pair *p)
{
    float rmax = 0.0f;
    for (int64_t c = 0; c < p->channels; c++)
        if (isfinite(p->range[c]) && p->range[c] > rmax) rmax = p->range[c];
    int finite = 1;
    for (int64_t c = 0; c < p->channels; c++) finite &= isfinite(p->range[c]);
    double lo = INFINITY, hi = 0, lo2 = INFINITY, hi2 = 0;
    for (int64_t c = 0; c < p->channels; c++) {
        float r = p->range[c];
        p->scale[c] = 1.0f;
        if (finite && r > 0.0f && rmax > 0.0f) {
            int e;
            frexp((double)rmax / (double)r, &e); /* R / r = f 2^e, f in [0.5, 1) */
            p->scale[c] = ldexpf(1.0f, e - 1 < MAX_SHIFT ? e - 1 : MAX_SHIFT);
        }
        if (r > 0.0f && isfinite(r)) {
            double a = (double)r, b = (double)r * (double)p->scale[c];
            lo = a < lo ? a : lo;
            hi = a > hi ? a : hi;
            lo2 = b < lo2 ? b : lo2;
            hi2 = b > hi2 ? b : hi2;
        }
    }
    p->spread = hi > 0 ? hi / lo : 1.0;
    p->spread_after = hi2 > 0 ? hi2 / lo2 : 1.0;
}

ptq_status eng_equalize_measure(const ptq_graph *g, const eng_source *src, int nthreads, ptq_arena_pool *pool,
                                eng_equalization *eq)
{
    ptq_status st = PTQ_OK;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!eq->n) return PTQ_OK;
    const char **names = malloc(sizeof *names * (size_t)eq->n);
    int *order = malloc(sizeof *order * ((size_t)g->n_nodes + 1));
    CHECK_ALLOC(names);
    CHECK_ALLOC(order);
    /* the pass stops once the X read last (in execution order) has been seen */
    TRY(ptq_graph_toposort(g, order));
    const char *last = NULL;
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < eq->n; i++) {
            int v = ptq_graph_find_value(g, eq->pairs[i].consumer);
            if (v >= 0 && g->values[v].producer == order[k]) last = eq->pairs[i].tensor;
        }
    for (int i = 0; i < eq->n; i++) {
        names[i] = eq->pairs[i].tensor;
        memset(eq->pairs[i].range, 0, sizeof(float) * (size_t)eq->pairs[i].channels);
    }
    eng_pass ps = {.names = names, .n_names = eq->n, .stop = last, .fn = see, .user = eq};
    TRY(eng_run_pass(g, &ps, NULL, NULL, src, nthreads, pool, &eq->images));
    for (int i = 0; i < eq->n; i++) choose_scales(&eq->pairs[i]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    eq->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
done:
    free(names);
    free(order);
    return st;
}

ptq_status eng_equalize_images(ptq_graph *g, const pp_dataset_options *o, const pp_config *cfg, ptq_arena_pool *pool,
                               eng_equalization *eq)
{
    ptq_status st = PTQ_OK;
    int n_const = 0;
    eng_dataset_source ds = {0};
    TRY(ptq_graph_constants_to_initializers(g, &n_const));
    TRY(eng_equalize_find(g, eq));
    pp_dataset_options po = *o;
    po.label = "equalize";
    ptq_plan_options popt = ptq_plan_defaults(); /* the pass's plans, fused but for the measured inputs */
    popt.nthreads = o->threads;
    TRY(eng_fit_batch_memory(g, NULL, cfg, &popt, 0, &po, NULL));
    eng_source es = eng_source_dataset(&ds, &po, cfg);
    TRY(eng_equalize_measure(g, &es, o->threads, pool, eq));
    TRY(eng_equalize_apply(g, eq));
done:
    eng_source_dataset_free(&ds);
    return st;
}

/* Multiplies each of the c rows of initializer v by f[row] (or by 1 / f[row]). */
static void scale_rows(ptq_graph *g, int v, const float *f, int64_t c, int divide)
{
    ptq_tensor *t = &g->values[v].t;
    size_t row = ptq_tensor_numel(t) / (size_t)c;
    float *x = t->data;
    for (int64_t r = 0; r < c; r++) {
        float m = divide ? 1.0f / f[r] : f[r]; /* a power of two: exact */
        for (size_t k = 0; k < row; k++) x[(size_t)r * row + k] *= m;
    }
}

ptq_status eng_equalize_apply(ptq_graph *g, const eng_equalization *eq)
{
    for (int i = 0; i < eq->n; i++) {
        const eng_eq_pair *p = &eq->pairs[i];
        int v = ptq_graph_find_value(g, p->consumer);
        pair_params pp;
        if (v < 0 || !match(g, g->values[v].producer, &pp) || pp.c != p->channels ||
            strcmp(g->values[g->nodes[pp.n2].inputs[0]].name, p->tensor) || strcmp(out_name(g, pp.n1), p->producer) ||
            (pp.bn >= 0) != (p->bn != NULL)) {
            ptq_error("equalization: the model has no pair '%s' -> '%s' as measured", p->producer, p->consumer);
            return PTQ_ERR_ARG;
        }
        if (pp.bn >= 0) {
            scale_rows(g, pp.gamma, p->scale, pp.c, 0);
            scale_rows(g, pp.beta, p->scale, pp.c, 0);
        } else {
            scale_rows(g, pp.w1, p->scale, pp.c, 0);
            if (pp.b1 >= 0) scale_rows(g, pp.b1, p->scale, pp.c, 0);
        }
        scale_rows(g, pp.w2, p->scale, pp.c, 1);
    }
    return PTQ_OK;
}
