/* refine.c: AdaRound and bias correction over a QDQ graph (see refine.h). */
#include "engine/refine.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/graph_edit.h"
#include "runtime/plan.h"

enum { L_CONV, L_GEMM, L_MATMUL };

/* One quantized weighted layer of the QDQ graph. */
typedef struct {
    int node, kind;
    const char *t;          /* the activation it reads (pre-Q name, the same in both graphs) */
    const char *t_dq;       /* its dequantized value in the QDQ graph */
    int q_v, scale_v, bias_v;
    int w_fp;               /* the FP32 weight in the FP32 graph */
    int transposed;         /* weight stored [k x cout] (Gemm transB 0, MatMul) */
    int64_t cout, k, groups, cin;
    int64_t kh, kw, sh, sw, dh, dw, ph, pw, ph_end, pw_end; /* Conv geometry */
    float alpha;            /* Gemm alpha */
    double *sum_fp, *sum_q; /* patch sums [groups * k] */
    double count;           /* positions summed */
} layer;

eng_refine_options eng_refine_defaults(void)
{
    eng_refine_options o = {.bias_correction = 1, .adaround_positions = 4096};
    return o;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int producer_is(const ptq_graph *g, int v, const char *op)
{
    if (v < 0 || g->values[v].producer < 0) return 0;
    return strcmp(g->nodes[g->values[v].producer].op_type, op) == 0;
}

static int is_initializer(const ptq_graph *g, int v, ptq_dtype dt)
{
    return v >= 0 && g->values[v].kind == PTQ_VALUE_INITIALIZER && g->values[v].t.data && g->values[v].t.dtype == dt;
}

/* The FP32 graph's value named like v's producer's output 0 ... found by name. */
static int find_node_by_output(const ptq_graph *g, const char *out_name)
{
    int v = ptq_graph_find_value(g, out_name);
    return v < 0 ? -1 : g->values[v].producer;
}

/* The Add that alone consumes MatMul output v and adds a float initializer of cout entries. */
static int matmul_bias(const ptq_graph *g, int v, int64_t cout)
{
    int add = -1, uses = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++)
            if (g->nodes[i].inputs[j] == v) {
                uses++;
                add = i;
            }
    if (uses != 1 || g->values[v].is_output || strcmp(g->nodes[add].op_type, "Add") != 0) return -1;
    const ptq_node *n = &g->nodes[add];
    if (n->n_inputs != 2) return -1;
    int b = n->inputs[0] == v ? n->inputs[1] : n->inputs[0];
    if (!is_initializer(g, b, PTQ_F32) || (int64_t)ptq_tensor_numel(&g->values[b].t) != cout) return -1;
    const ptq_tensor *bt = &g->values[b].t;
    if (bt->rank < 1 || bt->dims[bt->rank - 1] != cout || ptq_graph_count_uses(g, b) != 1) return -1;
    return b;
}

/* Describes node ni of the QDQ graph as a layer, or returns 0 when it is not one. */
static int describe(const ptq_graph *q, const ptq_graph *f, int ni, layer *L)
{
    const ptq_node *n = &q->nodes[ni];
    memset(L, 0, sizeof *L);
    L->node = ni;
    L->bias_v = -1;
    L->alpha = 1.0f;
    if (!strcmp(n->op_type, "Conv")) L->kind = L_CONV;
    else if (!strcmp(n->op_type, "Gemm")) L->kind = L_GEMM;
    else if (!strcmp(n->op_type, "MatMul")) L->kind = L_MATMUL;
    else return 0;
    if (n->n_inputs < 2 || n->n_outputs < 1 || n->outputs[0] < 0) return 0;
    int xd = n->inputs[0], wd = n->inputs[1];
    if (!producer_is(q, xd, "DequantizeLinear") || !producer_is(q, wd, "DequantizeLinear")) return 0;
    const ptq_node *dqx = &q->nodes[q->values[xd].producer], *dqw = &q->nodes[q->values[wd].producer];
    if (dqx->n_inputs < 1 || !producer_is(q, dqx->inputs[0], "QuantizeLinear")) return 0;
    const ptq_node *qx = &q->nodes[q->values[dqx->inputs[0]].producer];
    if (qx->n_inputs < 1 || qx->inputs[0] < 0) return 0;
    if (dqw->n_inputs < 2 || !is_initializer(q, dqw->inputs[0], PTQ_I8) || !is_initializer(q, dqw->inputs[1], PTQ_F32))
        return 0;
    L->t = q->values[qx->inputs[0]].name;
    L->t_dq = q->values[xd].name;
    L->q_v = dqw->inputs[0];
    L->scale_v = dqw->inputs[1];
    const ptq_tensor *w = &q->values[L->q_v].t;
    int64_t axis = ptq_attr_int(dqw, "axis", 1);
    int fn = find_node_by_output(f, q->values[n->outputs[0]].name);
    if (fn < 0 || f->nodes[fn].n_inputs < 2) return 0;
    L->w_fp = f->nodes[fn].inputs[1];
    if (!is_initializer(f, L->w_fp, PTQ_F32) || !ptq_shape_equal(&f->values[L->w_fp].t, w)) return 0;
    if (L->kind == L_CONV) {
        if (w->rank != 4 || axis != 0 || strcmp(ptq_attr_string(n, "auto_pad", "NOTSET"), "NOTSET") != 0) return 0;
        size_t c;
        const int64_t *s = ptq_attr_ints(n, "strides", &c), *d, *p;
        if (s && c != 2) return 0;
        d = ptq_attr_ints(n, "dilations", &c);
        if (d && c != 2) return 0;
        p = ptq_attr_ints(n, "pads", &c);
        if (p && c != 4) return 0;
        L->groups = ptq_attr_int(n, "group", 1);
        L->cout = w->dims[0];
        L->kh = w->dims[2];
        L->kw = w->dims[3];
        L->k = w->dims[1] * L->kh * L->kw;
        L->cin = w->dims[1] * L->groups;
        L->sh = s ? s[0] : 1;
        L->sw = s ? s[1] : 1;
        L->dh = d ? d[0] : 1;
        L->dw = d ? d[1] : 1;
        L->ph = p ? p[0] : 0;
        L->pw = p ? p[1] : 0;
        L->ph_end = p ? p[2] : 0;
        L->pw_end = p ? p[3] : 0;
        if (L->groups < 1 || L->cout % L->groups) return 0;
        if (n->n_inputs >= 3 && n->inputs[2] >= 0) {
            int b = n->inputs[2];
            if (!is_initializer(q, b, PTQ_F32) || (int64_t)ptq_tensor_numel(&q->values[b].t) != L->cout ||
                ptq_graph_count_uses(q, b) != 1)
                return 0;
            L->bias_v = b;
        }
    } else {
        if (w->rank != 2) return 0;
        L->groups = 1;
        if (L->kind == L_GEMM) {
            if (ptq_attr_int(n, "transA", 0)) return 0;
            L->transposed = !ptq_attr_int(n, "transB", 0);
            L->alpha = ptq_attr_float(n, "alpha", 1.0f);
            if (n->n_inputs >= 3 && n->inputs[2] >= 0) {
                int b = n->inputs[2];
                if (ptq_attr_float(n, "beta", 1.0f) != 1.0f || !is_initializer(q, b, PTQ_F32) ||
                    ptq_graph_count_uses(q, b) != 1)
                    return 0;
                L->bias_v = b;
            }
        } else {
            L->transposed = 1;
        }
        L->cout = L->transposed ? w->dims[1] : w->dims[0];
        L->k = L->transposed ? w->dims[0] : w->dims[1];
        L->cin = L->k;
        if (axis != (L->transposed ? 1 : 0)) return 0;
        if (L->bias_v >= 0 && (int64_t)ptq_tensor_numel(&q->values[L->bias_v].t) != L->cout) return 0;
        if (L->kind == L_MATMUL) L->bias_v = matmul_bias(q, n->outputs[0], L->cout);
    }
    return 1;
}

/* Weight element (c, j) of a [cout x k] view of a layer's weight stored w. */
static inline size_t widx(const layer *L, int64_t c, int64_t j)
{
    return L->transposed ? (size_t)(j * L->cout + c) : (size_t)(c * L->k + j);
}

/* Output positions of one image: Conv OH*OW (dims: [N, C, H, W]), Gemm/MatMul the rows. */
static int64_t conv_out(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t s, int64_t d)
{
    return (in + pb + pe - (d * (k - 1) + 1)) / s + 1;
}

/* Adds the sums of one image's input patches over every output position to sum ([groups * k];
 * (ci, kh, kw) order within a group) and returns the number of positions. x is the image's
 * slice of the layer input: [C, H, W] for Conv, [rows, K] for Gemm/MatMul. Parallel over
 * channels; each sum runs in a fixed order, so the result is the same at any thread count. */
static int64_t patch_sums(const layer *L, const float *x, const ptq_tensor *t, double *sum, int nthreads)
{
    if (L->kind != L_CONV) {
        int64_t K = t->dims[t->rank - 1], rows = (int64_t)(ptq_tensor_numel(t) / (size_t)K) / t->dims[0];
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < K; j++) sum[j] += (double)x[r * K + j];
        return rows;
    }
    int64_t C = t->dims[1], H = t->dims[2], W = t->dims[3], cin_g = L->k / (L->kh * L->kw);
    int64_t OH = conv_out(H, L->ph, L->ph_end, L->kh, L->sh, L->dh), OW = conv_out(W, L->pw, L->pw_end, L->kw, L->sw, L->dw);
#pragma omp parallel for schedule(static) num_threads(nthreads > 0 ? nthreads : omp_get_max_threads())
    for (int64_t c = 0; c < C; c++) {
        double *base = sum + (c / cin_g) * L->k + (c % cin_g) * L->kh * L->kw;
        for (int64_t a = 0; a < L->kh; a++)
            for (int64_t oh = 0; oh < OH; oh++) {
                int64_t ih = oh * L->sh - L->ph + a * L->dh;
                if (ih < 0 || ih >= H) continue;
                const float *row = x + (c * H + ih) * W;
                for (int64_t b = 0; b < L->kw; b++) {
                    double s = 0;
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t iw = ow * L->sw - L->pw + b * L->dw;
                        if (iw >= 0 && iw < W) s += (double)row[iw];
                    }
                    base[a * L->kw + b] += s;
                }
            }
    }
    return OH * OW;
}

/* The model's data input: its first graph input that is not an initializer. */
static int data_input(const ptq_graph *g)
{
    for (int i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].kind == PTQ_VALUE_INPUT) return g->inputs[i];
    return -1;
}

/* One pass: the images through a plan of g that lets the observer see `names`, stopping
 * each batch once `stop` (when set) was observed. The observer gets the image index of the
 * batch's first image in pass->first. */
typedef struct pass pass;
typedef ptq_status (*pass_fn)(pass *ps, const char *name, const ptq_tensor *t);
struct pass {
    const char *const *names;
    int n_names;
    const char *stop;
    int stopped;
    pass_fn fn;
    void *user;
    int first;            /* index of the batch's first image */
};

static int pass_wants(const char *name, void *user)
{
    pass *ps = user;
    for (int i = 0; i < ps->n_names; i++)
        if (!strcmp(ps->names[i], name)) return 1;
    return 0;
}

static ptq_status pass_observe(const char *name, int node, const ptq_tensor *t, void *user)
{
    pass *ps = user;
    (void)node;
    if (!pass_wants(name, ps)) return PTQ_OK;
    ptq_status st = ps->fn(ps, name, t);
    if (ps->stop && !strcmp(ps->stop, name)) ps->stopped = 1;
    return st;
}

/* Runs every batch of the source through g (one plan per batch shape, at most two alive:
 * the full batch and the last one). With two graphs (g2 non-NULL), each batch runs through
 * g first and then g2, so ps2's observer can use what ps saw of the same images. */
static ptq_status run_pass(const ptq_graph *g, pass *ps, const ptq_graph *g2, pass *ps2, const eng_source *src,
                           int nthreads, int *images)
{
    ptq_status st = PTQ_OK;
    ptq_plan *plan[2][2] = {{NULL, NULL}, {NULL, NULL}};
    ptq_tensor shape[2] = {{0}, {0}};
    int in_v = data_input(g), opened = 0, done = 0;
    if (in_v < 0) FAIL(PTQ_ERR_FORMAT, "the model has no data input");
    TRY(src->open(src->user));
    opened = 1;
    for (;;) {
        ptq_tensor t;
        TRY(src->next(src->user, &t));
        if (t.rank < 1 || t.dims[0] == 0) break;
        int slot = plan[0][0] && !ptq_shape_equal(&shape[0], &t) ? 1 : 0;
        for (int k = 0; k < (g2 ? 2 : 1); k++) {
            const ptq_graph *gk = k ? g2 : g;
            pass *pk = k ? ps2 : ps;
            if (plan[slot][k] && !ptq_shape_equal(&shape[slot], &t)) {
                ptq_plan_destroy(plan[slot][k]);
                plan[slot][k] = NULL;
            }
            if (!plan[slot][k]) {
                ptq_plan_options po = ptq_plan_defaults();
                po.nthreads = nthreads;
                po.observer = pass_observe;
                po.observer_user = pk;
                po.observe_filter = pass_wants;
                ptq_input_shape s = {.name = gk->values[data_input(gk)].name, .rank = t.rank};
                memcpy(s.dims, t.dims, sizeof s.dims);
                TRY(ptq_plan_create(gk, &s, 1, &po, &plan[slot][k]));
            }
            pk->first = done;
            pk->stopped = 0;
            TRY(ptq_plan_begin(plan[slot][k], &t, 1));
            for (int fin = 0; !fin && !pk->stopped;) TRY(ptq_plan_step(plan[slot][k], &fin));
        }
        shape[slot] = t;
        shape[slot].data = NULL;
        done += (int)t.dims[0];
    }
    if (images) *images = done;
done:
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) ptq_plan_destroy(plan[i][k]);
    if (opened) src->close(src->user);
    return st;
}

typedef struct {
    layer *L;
    int nl;
    const int *group;  /* the layers of the current pass (QDQ phase) */
    int ng;
    int qdq;           /* 0: the FP32 pass (every layer), 1: the QDQ pass of one group */
    int nthreads;
} sums_ctx;

static ptq_status add_sums(pass *ps, const char *name, const ptq_tensor *t)
{
    sums_ctx *c = ps->user;
    size_t per = ptq_tensor_numel(t) / (size_t)t->dims[0];
    for (int gi = 0; gi < (c->qdq ? c->ng : c->nl); gi++) {
        layer *L = &c->L[c->qdq ? c->group[gi] : gi];
        if (strcmp(c->qdq ? L->t_dq : L->t, name) != 0) continue;
        for (int64_t i = 0; i < t->dims[0]; i++) {
            int64_t np = patch_sums(L, (const float *)t->data + (size_t)i * per, t, c->qdq ? L->sum_q : L->sum_fp, c->nthreads);
            if (!c->qdq) L->count += (double)np;
        }
    }
    return PTQ_OK;
}

/* b_c += E[W x]_c - E[W~ x~]_c, from the patch means; adds a zero bias to a Conv without one. */
static ptq_status correct_bias(ptq_graph *q, const ptq_graph *f, layer *L, int *corrected)
{
    ptq_status st = PTQ_OK;
    if (L->bias_v < 0 && L->kind != L_CONV) return PTQ_OK; /* a MatMul without its own Add */
    const float *w = f->values[L->w_fp].t.data, *s = q->values[L->scale_v].t.data;
    const int8_t *codes = q->values[L->q_v].t.data;
    int64_t per_group = L->cout / L->groups;
    double inv = L->count > 0 ? 1.0 / L->count : 0.0;
    if (L->bias_v < 0) {
        ptq_tensor b = {.dtype = PTQ_F32, .rank = 1};
        b.dims[0] = L->cout;
        TRY(ptq_tensor_alloc(&b));
        char base[512], name[512];
        snprintf(base, sizeof base, "%s_bias", q->values[q->nodes[L->node].outputs[0]].name);
        ptq_graph_unique_name(q, base, name, sizeof name);
        int v;
        TRY(ptq_graph_add_initializer(q, name, &b, &v));
        ptq_node *n = &q->nodes[L->node];
        int *in = realloc(n->inputs, sizeof(int) * 3);
        CHECK_ALLOC(in);
        n->inputs = in;
        for (int i = n->n_inputs; i < 3; i++) n->inputs[i] = -1;
        n->n_inputs = 3;
        n->inputs[2] = v;
        L->bias_v = v;
    }
    float *b = q->values[L->bias_v].t.data;
    for (int64_t c = 0; c < L->cout; c++) {
        const double *mf = L->sum_fp + (c / per_group) * L->k, *mq = L->sum_q + (c / per_group) * L->k;
        double ef = 0, eq = 0;
        for (int64_t j = 0; j < L->k; j++) {
            size_t wi = widx(L, c, j);
            ef += (double)w[wi] * mf[j];
            eq += (double)s[c] * (double)codes[wi] * mq[j];
        }
        b[c] = (float)((double)b[c] + (double)L->alpha * (ef - eq) * inv);
    }
    (*corrected)++;
done:
    return st;
}

ptq_status eng_refine(ptq_graph *qdq, const ptq_graph *fp32, const eng_source *src, const eng_refine_options *opt,
                      eng_refine_report *rep)
{
    ptq_status st = PTQ_OK;
    double t0 = now();
    layer *L = calloc((size_t)qdq->n_nodes + 1, sizeof *L);
    const char **names = calloc((size_t)qdq->n_nodes + 1, sizeof *names);
    int *group = calloc((size_t)qdq->n_nodes + 1, sizeof *group);
    int nl = 0, nn = 0;
    memset(rep, 0, sizeof *rep);
    CHECK_ALLOC(L);
    CHECK_ALLOC(names);
    CHECK_ALLOC(group);
    for (int i = 0; i < qdq->n_nodes; i++)
        if (describe(qdq, fp32, i, &L[nl])) {
            L[nl].sum_fp = calloc((size_t)(L[nl].groups * L[nl].k), sizeof(double));
            L[nl].sum_q = calloc((size_t)(L[nl].groups * L[nl].k), sizeof(double));
            CHECK_ALLOC(L[nl].sum_fp);
            CHECK_ALLOC(L[nl].sum_q);
            int seen = 0;
            for (int j = 0; j < nn && !seen; j++) seen = !strcmp(names[j], L[nl].t);
            if (!seen) names[nn++] = L[nl].t;
            nl++;
        }
    rep->layers = nl;
    if (!nl || !opt->bias_correction) goto finish;

    /* the FP32 patch means of every layer, in one pass */
    sums_ctx sc = {.L = L, .nl = nl, .nthreads = opt->nthreads};
    pass pf = {.names = names, .n_names = nn, .fn = add_sums, .user = &sc};
    double tp = now();
    TRY(run_pass(fp32, &pf, NULL, NULL, src, opt->nthreads, &rep->images));
    rep->passes++;
    rep->seconds_passes += now() - tp;

    /* then one pass of the QDQ model per activation, in topological order */
    for (int a = 0; a < nn; a++) {
        int ng = 0;
        for (int i = 0; i < nl; i++)
            if (!strcmp(L[i].t, names[a])) group[ng++] = i;
        sums_ctx qc = {.L = L, .nl = nl, .group = group, .ng = ng, .qdq = 1, .nthreads = opt->nthreads};
        const char *want = L[group[0]].t_dq;
        pass pq = {.names = &want, .n_names = 1, .stop = want, .fn = add_sums, .user = &qc};
        tp = now();
        TRY(run_pass(qdq, &pq, NULL, NULL, src, opt->nthreads, NULL));
        rep->passes++;
        rep->seconds_passes += now() - tp;
        for (int i = 0; i < ng; i++) TRY(correct_bias(qdq, fp32, &L[group[i]], &rep->corrected));
        if (!opt->quiet) pp_progress("refine: layers", group[ng - 1] + 1, nl, now() - t0, a == nn - 1);
    }
finish:
    rep->seconds_total = now() - t0;
done:
    for (int i = 0; L && i < nl; i++) {
        free(L[i].sum_fp);
        free(L[i].sum_q);
    }
    free(L);
    free(names);
    free(group);
    return st;
}
