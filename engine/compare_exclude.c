/* compare_exclude.c: layer-wise errors and the exclusion search of `ptq compare` (see compare.h). */
#include "engine/compare_metrics.h"
#include "engine/runner.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "runtime/graph_edit.h"
#include "runtime/plan.h"

/* ---- layer-wise ---- */

typedef struct {
    const char *tensor, *dq;  /* names in the QDQ graph (borrowed) */
    float scale;
    cmp_sums acc, iso;                   /* accumulated, isolated */
    float *copy;                     /* the QDQ side, when it came first */
    size_t copy_n, copy_cap;
    int order;                       /* FP32 execution order, -1 unseen */
} layer_acc;

/* Copies of the QDQ side go back to a list of spare buffers when compared, and the next copy
 * takes the smallest spare that fits, else a new buffer cut from a slab (a block of the
 * evaluations' pool the size of the QDQ plan's activations), else malloc: memory the kernel has mapped
 * already, not fresh pages for every tensor of every batch. */
typedef struct {
    float **buf;
    size_t *cap;
    int n;
    char *slab;          /* borrowed from the pool; buffers cut from it are not freed alone */
    size_t slab_cap, slab_used;
} spares;

static int from_slab(const spares *s, const float *p)
{
    return s->slab && (const char *)p >= s->slab && (const char *)p < s->slab + s->slab_cap;
}

static void spare_put(spares *s, float *p, size_t cap)
{
    if (!p) return;
    s->buf[s->n] = p;
    s->cap[s->n++] = cap;
}

static float *spare_take(spares *s, size_t n, size_t *cap)
{
    int best = -1;
    for (int i = 0; i < s->n; i++)
        if (s->cap[i] >= n && (best < 0 || s->cap[i] < s->cap[best])) best = i;
    if (best < 0) {
        size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
        *cap = n;
        if (s->slab && s->slab_cap - s->slab_used >= bytes) {
            s->slab_used += bytes;
            return (float *)(void *)(s->slab + s->slab_used - bytes);
        }
        return malloc(n * sizeof(float));
    }
    float *p = s->buf[best];
    *cap = s->cap[best];
    s->buf[best] = s->buf[--s->n];
    s->cap[best] = s->cap[s->n];
    return p;
}

typedef struct {
    layer_acc *l;
    int n, seen;
    ptq_name_index *by_tensor;       /* FP32 graph value -> index in l (via tensor_slot) */
    ptq_name_index *by_qvalue;       /* QDQ graph values by name */
    int *tensor_slot, *dq_slot;      /* per FP32 value / QDQ node index: layer or -1 */
    const ptq_graph *gq;
    ptq_plan *qplan;
    int q_finished;
    int pending;                     /* layer the QDQ plan is being stepped to, or -1 */
    spares spare;                    /* one slot per layer: a layer holds a copy or a spare */
    int nthreads;
    int images;                      /* in the batch being compared */
    const float *fp32;               /* that layer's FP32 data */
} lockstep;

/* What each plan's observer sees (everything else may fuse): the quantized tensors on
 * the FP32 side, their dequantized forms on the QDQ side. */
static int wants_fp32(const char *name, void *user)
{
    const lockstep *ls = user;
    int v = ptq_name_index_find(ls->by_tensor, name);
    return v >= 0 && ls->tensor_slot[v] >= 0;
}

static int wants_qdq(const char *name, void *user)
{
    const lockstep *ls = user;
    int v = ptq_name_index_find(ls->by_qvalue, name);
    int node = v >= 0 ? ls->gq->values[v].producer : -1;
    return node >= 0 && ls->dq_slot[node] >= 0;
}

static ptq_status layer_sums(const float *a, const float *b, size_t n, int images, float scale, int nthreads,
                             cmp_sums *m);

/* QDQ side: a dequantized tensor. Compared at once when the FP32 side is waiting for it,
 * copied when it came first. */
static ptq_status observe_qdq(const char *name, int node, const ptq_tensor *t, void *user)
{
    lockstep *ls = user;
    (void)name;
    if (node < 0) return PTQ_OK;
    int k = ls->dq_slot[node];
    if (k < 0) return PTQ_OK;
    layer_acc *l = &ls->l[k];
    size_t n = ptq_tensor_numel(t);
    if (k == ls->pending) {
        ls->pending = -1;
        return layer_sums(ls->fp32, t->data, n, ls->images, 0.0f, ls->nthreads, &l->acc);
    }
    spare_put(&ls->spare, l->copy, l->copy_cap);
    l->copy = spare_take(&ls->spare, n, &l->copy_cap);
    if (!l->copy) {
        ptq_error("out of memory comparing layers");
        return PTQ_ERR_NOMEM;
    }
    memcpy(l->copy, t->data, n * sizeof(float));
    l->copy_n = n;
    return PTQ_OK;
}

/* Static: a target_clones function outside this file would be exported (its ifunc resolver
 * ignores -fvisibility=hidden). */
/* cmp_sums_add in 8 interleaved double lanes (element i goes to lane i mod 8, the lanes added
 * in a fixed order at the end): the same sums up to rounding, at any thread count the same
 * bits, and several times faster than one dependent chain per sum. For the layer-wise errors,
 * whose tensors are large; the output metrics keep cmp_sums_add's order (tests/e2e/compare.sh
 * recomputes them exactly). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void cmp_sums_add_lanes(cmp_sums *m, const float *a, const float *b, size_t n)
{
    double ab[CMP_LANES] = {0}, aa[CMP_LANES] = {0}, bb[CMP_LANES] = {0}, dd[CMP_LANES] = {0}, mx[CMP_LANES] = {0};
    int nan = 0;
    for (size_t i = 0; i < n; i += CMP_LANES) { /* past the end, both sides are 0: nothing added */
        int k = n - i < CMP_LANES ? (int)(n - i) : CMP_LANES;
        for (int l = 0; l < CMP_LANES; l++) {
            double x = l < k ? (double)a[i + l] : 0.0, y = l < k ? (double)b[i + l] : 0.0, d = x - y, ad = fabs(d);
            ab[l] += x * y;
            aa[l] += x * x;
            bb[l] += y * y;
            dd[l] += d * d;
            mx[l] = ad > mx[l] ? ad : mx[l];
            nan |= d != d;
        }
    }
    for (int l = 0; l < CMP_LANES; l++) {
        m->ab += ab[l];
        m->aa += aa[l];
        m->bb += bb[l];
        m->dd += dd[l];
        if (mx[l] > m->max_abs) m->max_abs = mx[l];
    }
    if (nan) m->max_abs = INFINITY;
    m->n += (double)n;
}

/* Sums of x y, x x, y y and (x - y)^2 for y = DQ(Q(x)) as the QDQ model computes it
 * (quant_round_s8: round half to even, saturate to [-128, 127], NaN to 0; then q * scale
 * in float), in cmp_sums_add_lanes' 8 double lanes. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void isolated_sums(const float *a, size_t n, float scale, cmp_sums *m)
{
    double ab[CMP_LANES] = {0}, aa[CMP_LANES] = {0}, bb[CMP_LANES] = {0}, dd[CMP_LANES] = {0};
    float y[CMP_LANES];
    for (size_t i = 0; i < n; i += CMP_LANES) { /* lanes as in cmp_sums_add_lanes */
        int k = n - i < CMP_LANES ? (int)(n - i) : CMP_LANES;
        for (int l = 0; l < CMP_LANES; l++) {
            float x = l < k ? a[i + l] : 0.0f, q = rintf(x / scale);
            q = q >= -128.0f ? q : (q != q ? 0.0f : -128.0f);
            q = q > 127.0f ? 127.0f : q;
            y[l] = q * scale;
        }
        for (int l = 0; l < CMP_LANES; l++) {
            double xd = l < k ? (double)a[i + l] : 0.0, yd = y[l], d = xd - yd;
            ab[l] += xd * yd;
            aa[l] += xd * xd;
            bb[l] += yd * yd;
            dd[l] += d * d;
        }
    }
    for (int l = 0; l < CMP_LANES; l++) {
        m->ab += ab[l];
        m->aa += aa[l];
        m->bb += bb[l];
        m->dd += dd[l];
    }
}

/* The layer-wise cmp_sums of a (and b, or DQ(Q(a)) with `scale` when b is NULL): image by image
 * (the tensor's n / images elements in turn, when they divide n), each image over blocks of 2^16
 * elements; the blocks run in parallel and their cmp_sums are added in order. The same bits at any
 * thread count, and at any batch size for a tensor whose images lie one after another (batch
 * first, as the layers of image models hold them). */
#define SUM_BLOCK ((size_t)1 << 16)
static ptq_status layer_sums(const float *a, const float *b, size_t n, int images, float scale, int nthreads,
                             cmp_sums *m)
{
    if (n == 0) return PTQ_OK;
    size_t per = images > 1 && n % (size_t)images == 0 ? n / (size_t)images : n;
    size_t bpi = (per + SUM_BLOCK - 1) / SUM_BLOCK, nb = n / per * bpi;
    cmp_sums *part = calloc(nb + 1, sizeof *part);
    if (!part) {
        ptq_error("out of memory comparing layers (the partial sums of %zu blocks)", nb);
        return PTQ_ERR_NOMEM;
    }
    int nt = nthreads > 1 && nb > 1 ? nthreads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t k = 0; k < nb; k++) {
        size_t j = (k % bpi) * SUM_BLOCK, off = k / bpi * per + j, len = per - j < SUM_BLOCK ? per - j : SUM_BLOCK;
        if (b) cmp_sums_add_lanes(&part[k], a + off, b + off, len);
        else isolated_sums(a + off, len, scale, &part[k]);
    }
    for (size_t k = 0; k < nb; k++) {
        m->ab += part[k].ab;
        m->aa += part[k].aa;
        m->bb += part[k].bb;
        m->dd += part[k].dd;
        if (part[k].max_abs > m->max_abs) m->max_abs = part[k].max_abs;
    }
    free(part);
    return PTQ_OK;
}

/* FP32 side: a tensor the QDQ model quantizes. Isolated error at once; accumulated
 * against the copy, or by stepping the QDQ plan until it dequantizes the same tensor. */
static ptq_status observe_fp32(const char *name, int node, const ptq_tensor *t, void *user)
{
    lockstep *ls = user;
    ptq_status st = PTQ_OK;
    int k = ptq_name_index_find(ls->by_tensor, name);
    k = k >= 0 ? ls->tensor_slot[k] : -1;
    (void)node;
    if (k < 0) return PTQ_OK;
    layer_acc *l = &ls->l[k];
    const float *a = t->data;
    size_t n = ptq_tensor_numel(t);
    if (l->order < 0) l->order = ls->seen++;
    TRY(layer_sums(a, NULL, n, ls->images, l->scale, ls->nthreads, &l->iso));
    if (l->copy) {
        if (l->copy_n == n) TRY(layer_sums(a, l->copy, n, ls->images, 0.0f, ls->nthreads, &l->acc));
        spare_put(&ls->spare, l->copy, l->copy_cap);
        l->copy = NULL;
        return PTQ_OK;
    }
    ls->pending = k;
    ls->fp32 = a;
    while (ls->pending == k && !ls->q_finished) TRY(ptq_plan_step(ls->qplan, &ls->q_finished));
    ls->pending = -1;
done:
    return st;
}

ptq_status cmp_layers(const cmp_eval *ev, const ptq_graph *gq, cmp_layer **out, int *n_out)
{
    ptq_status st = PTQ_OK;
    pp_dataset *d = NULL;
    lockstep ls = {.gq = gq, .pending = -1};
    eng_runner ra = {.g = ev->g}, rb = {.g = gq};
    *out = NULL;
    *n_out = 0;
    ls.l = calloc((size_t)gq->n_nodes + 1, sizeof *ls.l);
    ls.tensor_slot = malloc(sizeof(int) * ((size_t)ev->g->n_values + 1));
    ls.dq_slot = malloc(sizeof(int) * ((size_t)gq->n_nodes + 1));
    ls.spare.buf = malloc(sizeof(float *) * ((size_t)gq->n_nodes + 1));
    ls.spare.cap = malloc(sizeof(size_t) * ((size_t)gq->n_nodes + 1));
    CHECK_ALLOC(ls.spare.buf);
    CHECK_ALLOC(ls.spare.cap);
    ls.by_tensor = ptq_name_index_build(ev->g);
    ls.by_qvalue = ptq_name_index_build(gq);
    CHECK_ALLOC(ls.by_qvalue);
    CHECK_ALLOC(ls.l);
    CHECK_ALLOC(ls.tensor_slot);
    CHECK_ALLOC(ls.dq_slot);
    CHECK_ALLOC(ls.by_tensor);
    for (int v = 0; v < ev->g->n_values; v++) ls.tensor_slot[v] = -1;
    for (int i = 0; i < gq->n_nodes; i++) ls.dq_slot[i] = -1;
    /* the quantized activations: DequantizeLinear(QuantizeLinear(t)) with t a tensor of
     * the FP32 model that is not a constant */
    for (int i = 0; i < gq->n_nodes; i++) {
        const ptq_node *dq = &gq->nodes[i];
        if (strcmp(dq->op_type, "DequantizeLinear") || dq->n_inputs < 2 || dq->inputs[0] < 0) continue;
        int qi = gq->values[dq->inputs[0]].producer;
        if (qi < 0 || strcmp(gq->nodes[qi].op_type, "QuantizeLinear") || gq->nodes[qi].inputs[0] < 0) continue;
        const ptq_value *src = &gq->values[gq->nodes[qi].inputs[0]];
        int fv = ptq_name_index_find(ls.by_tensor, src->name);
        if (fv < 0 || ev->g->values[fv].kind == PTQ_VALUE_INITIALIZER || ls.tensor_slot[fv] >= 0) continue;
        const ptq_value *sc = &gq->values[dq->inputs[1]];
        if (sc->kind != PTQ_VALUE_INITIALIZER || sc->t.dtype != PTQ_F32 || ptq_tensor_numel(&sc->t) != 1) continue;
        layer_acc *l = &ls.l[ls.n];
        l->tensor = src->name;
        l->dq = gq->values[dq->outputs[0]].name;
        l->scale = *(const float *)sc->t.data;
        l->order = -1;
        ls.tensor_slot[fv] = ls.n;
        ls.dq_slot[i] = ls.n;
        ls.n++;
    }
    ra.popt = ptq_plan_defaults();
    ra.popt.nthreads = ev->nthreads;
    ls.nthreads = ev->nthreads > 0 ? ev->nthreads : omp_get_max_threads();
    ra.popt.pool = cmp_cache_pool(ev->cache);
    ra.popt.observer = observe_fp32;
    ra.popt.observe_filter = wants_fp32;
    ra.popt.observer_user = &ls;
    rb.popt = ra.popt;
    rb.popt.observer = observe_qdq;
    rb.popt.observe_filter = wants_qdq;
    pp_dataset_options eo = ev->o;
    TRY(eng_fit_batch(ev->g, ev->model, &eo));
    TRY(pp_dataset_open(&eo, &ev->cfg, &d));
    for (;;) {
        const float *x;
        int nb, w, h;
        TRY(pp_dataset_next(d, &x, &nb, NULL, NULL));
        if (nb == 0) break;
        pp_dataset_batch_shape(d, &w, &h);
        ptq_tensor t = eng_shaped_tensor(&ev->cfg, w, h, x, nb);
        TRY(eng_runner_ready(&ra, &t));
        TRY(eng_runner_ready(&rb, &t));
        if (ev->cache && !ls.spare.slab) /* after both plans took their blocks; the QDQ plan's
                                            * activations' size: room for its early copies */
            ls.spare.slab = ptq_arena_pool_take(cmp_cache_pool(ev->cache), ptq_plan_arena_bytes(rb.plan), &ls.spare.slab_cap);
        ls.qplan = rb.plan;
        ls.q_finished = 0;
        ls.images = nb;
        ptq_tensor tm = eng_model_tensor(ev->g, &t);
        TRY(ptq_plan_begin(rb.plan, &tm, 1));
        TRY(ptq_plan_run(ra.plan, &tm, 1));
        for (int k = 0; k < ls.n; k++) { /* the QDQ side of a tensor FP32 never showed */
            spare_put(&ls.spare, ls.l[k].copy, ls.l[k].copy_cap);
            ls.l[k].copy = NULL;
        }
    }
    /* results in FP32 execution order */
    cmp_layer *res = calloc((size_t)ls.n + 1, sizeof *res);
    CHECK_ALLOC(res);
    int m = 0;
    for (int ord = 0; ord < ls.seen; ord++)
        for (int k = 0; k < ls.n; k++) {
            layer_acc *l = &ls.l[k];
            if (l->order != ord) continue;
            cmp_layer *r = &res[m++];
            r->tensor = ptq_strdup(l->tensor);
            int v = ptq_graph_find_value(gq, l->dq);
            const char *node = "", *op = "";
            for (int i = 0; v >= 0 && i < gq->n_nodes && !*op; i++)
                for (int j = 0; j < gq->nodes[i].n_inputs; j++)
                    if (gq->nodes[i].inputs[j] == v) {
                        node = gq->nodes[i].name;
                        op = gq->nodes[i].op_type;
                        break;
                    }
            r->node = ptq_strdup(node);
            r->op_type = op;
            r->amax = l->scale * 127.0f;
            r->acc_cosine = cmp_cosine_of(&l->acc);
            r->acc_sqnr_db = cmp_sqnr_of(&l->acc);
            r->iso_cosine = cmp_cosine_of(&l->iso);
            r->iso_sqnr_db = cmp_sqnr_of(&l->iso);
            if (!r->tensor || !r->node) {
                cmp_layers_free(res, m);
                FAIL(PTQ_ERR_NOMEM, "out of memory allocating the excluded layers' list");
            }
        }
    *out = res;
    *n_out = m;
done:
    pp_dataset_close(d);
    eng_runner_free(&ra);
    eng_runner_free(&rb);
    for (int k = 0; ls.l && k < ls.n; k++)
        if (!from_slab(&ls.spare, ls.l[k].copy)) free(ls.l[k].copy);
    for (int k = 0; k < ls.spare.n; k++)
        if (!from_slab(&ls.spare, ls.spare.buf[k])) free(ls.spare.buf[k]);
    if (ls.spare.slab) ptq_arena_pool_put(cmp_cache_pool(ev->cache), ls.spare.slab, ls.spare.slab_cap);
    free(ls.spare.buf);
    free(ls.spare.cap);
    free(ls.l);
    free(ls.tensor_slot);
    free(ls.dq_slot);
    ptq_name_index_destroy(ls.by_tensor);
    ptq_name_index_destroy(ls.by_qvalue);
    return st;
}

void cmp_layers_free(cmp_layer *l, int n)
{
    for (int i = 0; l && i < n; i++) {
        free(l[i].tensor);
        free(l[i].node);
    }
    free(l);
}

/* ---- auto-exclusion ---- */

double cmp_target_fp32(const cmp_target *t, const cmp_metrics *m)
{
    switch (t->kind.kind) {
    case CMP_METRIC_MAP50: return m->fp32_map50;
    case CMP_METRIC_MAP: return m->fp32_map;
    case CMP_METRIC_TEXT_CHARS: return 1.0 - m->fp32_cer;
    case CMP_METRIC_MIOU: return m->fp32_miou;
    case CMP_METRIC_HMEAN: return m->fp32_hmean;
    case CMP_METRIC_TEXT_LINES: return m->fp32_line_acc;
    case CMP_METRIC_TOP1: return t->fp32_top1;
    case CMP_METRIC_SQNR: return NAN;
    default: return 1.0; /* agreement with FP32: FP32 agrees with itself */
    }
}

int cmp_meets(const cmp_target *t, const cmp_metrics *m)
{
    if (!isnan(t->cosine) && !(m->cosine >= t->cosine)) return 0;
    if (!isnan(t->metric) && !(cmp_metric_value(&t->kind, m) >= t->metric)) return 0;
    if (!isnan(t->drop) && !(cmp_target_fp32(t, m) - cmp_metric_value(&t->kind, m) <= t->drop)) return 0;
    if (!isnan(t->top1_drop)) {
        double top1 = !isnan(m->top1_acc) ? m->top1_acc : m->top1_agree;
        if (isnan(top1) || !(t->fp32_top1 - top1 <= t->top1_drop)) return 0;
    }
    return 1;
}

ptq_status cmp_target_baseline(const cmp_eval *ev, cmp_target *t)
{
    ptq_status st = PTQ_OK;
    cmp_metrics fm;
    t->fp32_top1 = 1.0; /* agreement of FP32 with itself */
    int top1 = !isnan(t->top1_drop) || (!isnan(t->drop) && t->kind.kind == CMP_METRIC_TOP1);
    if (!top1 || !ev->labels) return PTQ_OK;
    ptq_graph *g = (ptq_graph *)ev->g; /* only read */
    TRY(cmp_evaluate(ev, &g, 1, &fm));
    t->fp32_top1 = fm.top1_acc;
done:
    return st;
}

/* Appends to names the nodes that consume the dequantized form of `tensor` in gq. */
static int consumers_of(const ptq_graph *gq, const char *tensor, const char **names, int cap)
{
    int n = 0;
    for (int i = 0; i < gq->n_nodes; i++) {
        const ptq_node *q = &gq->nodes[i];
        if (strcmp(q->op_type, "QuantizeLinear") || q->inputs[0] < 0 || strcmp(gq->values[q->inputs[0]].name, tensor))
            continue;
        for (int j = 0; j < gq->n_nodes; j++) { /* Q -> DQ -> consumers */
            const ptq_node *dq = &gq->nodes[j];
            if (strcmp(dq->op_type, "DequantizeLinear") || dq->inputs[0] != q->outputs[0]) continue;
            for (int k = 0; k < gq->n_nodes; k++)
                for (int a = 0; a < gq->nodes[k].n_inputs; a++)
                    if (gq->nodes[k].inputs[a] == dq->outputs[0] && gq->nodes[k].name[0] && n < cap) {
                        names[n++] = gq->nodes[k].name;
                        break;
                    }
        }
    }
    return n;
}

typedef struct {
    const cmp_eval *ev;
    const io_range *ranges;
    int n_ranges;
    const quant_options *qo;      /* the user's exclusions come first */
    const char **nodes;           /* candidate c's nodes: nodes[start[c] .. start[c + 1]) */
    int *start, n_cand, evaluations;
} search;

/* The metrics with the nodes of the candidates flagged in use excluded. */
static ptq_status eval_excluding(search *s, const int *use, cmp_metrics *m)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    quant_report rep = {0};
    int cap = s->qo->n_exclude_nodes + s->start[s->n_cand] + 1, n = 0;
    const char **list = malloc(sizeof *list * (size_t)cap);
    CHECK_ALLOC(list);
    for (int i = 0; i < s->qo->n_exclude_nodes; i++) list[n++] = s->qo->exclude_nodes[i];
    for (int c = 0; c < s->n_cand; c++)
        for (int j = s->start[c]; use[c] && j < s->start[c + 1]; j++) list[n++] = s->nodes[j];
    quant_options qo = *s->qo;
    qo.exclude_nodes = list;
    qo.n_exclude_nodes = n;
    cmp_eval ev = *s->ev;
    ev.o.label = "exclusion search";
    TRY(cmp_build_qdq(s->ev, s->ranges, s->n_ranges, &qo, &g, &rep));
    TRY(cmp_evaluate(&ev, &g, 1, m));
    s->evaluations++;
done:
    free(list);
    quant_report_free(&rep);
    ptq_graph_destroy(g);
    return st;
}

static int by_iso_sqnr(const void *a, const void *b)
{
    const cmp_layer *x = *(const cmp_layer *const *)a, *y = *(const cmp_layer *const *)b;
    int c = (x->iso_sqnr_db > y->iso_sqnr_db) - (x->iso_sqnr_db < y->iso_sqnr_db);
    return c ? c : (x > y) - (x < y); /* ties: execution order */
}

void cmp_layers_by_harm(const cmp_layer *layers, int n, const cmp_layer **order)
{
    for (int i = 0; i < n; i++) order[i] = &layers[i];
    qsort(order, (size_t)n, sizeof *order, by_iso_sqnr);
}

/* Output-metric sensitivity of the candidates (accuracy-algorithms.md): all_but[c], the metric
 * with only candidate c in float, for every candidate; then only[c], the metric with only c
 * quantized, for the candidates whose gain ties another's (the tie-break; NAN elsewhere). Each
 * is one evaluation pass. */
static ptq_status sensitivity(search *s, const cmp_metric *k, double all, double *all_but, double *only)
{
    ptq_status st = PTQ_OK;
    cmp_metrics m;
    int *use = calloc((size_t)s->n_cand + 1, sizeof *use);
    double t0 = omp_get_wtime();
    CHECK_ALLOC(use);
    for (int c = 0; c < s->n_cand; c++) {
        for (int j = 0; j < s->n_cand; j++) use[j] = j == c;
        TRY(eval_excluding(s, use, &m));
        all_but[c] = cmp_metric_value(k, &m);
        only[c] = NAN;
        if (!s->ev->quiet) pp_log_progress(&s->ev->o.log, "sensitivity: candidates", c + 1, s->n_cand, omp_get_wtime() - t0,
                                            c + 1 == s->n_cand);
    }
    for (int c = 0; c < s->n_cand; c++) {
        int tied = 0;
        for (int j = 0; j < s->n_cand && !tied; j++) tied = j != c && all_but[j] - all == all_but[c] - all;
        if (!tied) continue;
        for (int j = 0; j < s->n_cand; j++) use[j] = j != c;
        TRY(eval_excluding(s, use, &m));
        only[c] = cmp_metric_value(k, &m);
    }
done:
    free(use);
    return st;
}

typedef struct {
    int c;
    double gain, only;
} ranked;

/* One point of the curve metric(tensors in float), a message through the log. */
static void curve_point(const pp_log *log, const char *kname, const cmp_metric *k, int n, const cmp_metrics *m)
{
    char cos[64] = "";
    if (k->kind != CMP_METRIC_COSINE) snprintf(cos, sizeof cos, ", cosine %.6f", m->cosine);
    pp_log_message(log, PP_LOG_INFO, "%d quantized tensor%s in float: %s %.6f%s", n, n == 1 ? "" : "s", kname,
                   cmp_metric_value(k, m), cos);
}

static int by_gain(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    /* NaN (metric not applicable) last */
    int c = (y->gain > x->gain || (x->gain != x->gain && y->gain == y->gain)) - (x->gain > y->gain || (y->gain != y->gain && x->gain == x->gain));
    if (!c && x->only == x->only && y->only == y->only) c = (x->only > y->only) - (x->only < y->only);
    return c ? c : (x->c > y->c) - (x->c < y->c);
}

ptq_status cmp_auto_exclude(const cmp_eval *ev, const io_range *ranges, int n_ranges, const quant_options *qopt,
                            const ptq_graph *gq, const cmp_layer *layers, int n_layers, const cmp_target *t,
                            cmp_exclusion *out)
{
    ptq_status st = PTQ_OK;
    search s = {.ev = ev, .ranges = ranges, .n_ranges = n_ranges, .qo = qopt};
    const char **cand_nodes = malloc(sizeof *cand_nodes * ((size_t)n_layers * 8 + 1));
    int *cand_start = malloc(sizeof *cand_start * ((size_t)n_layers + 2));
    int *use = calloc((size_t)n_layers + 1, sizeof *use);
    ranked *rk = calloc((size_t)n_layers + 1, sizeof *rk);
    double *all_but = calloc((size_t)n_layers + 1, sizeof(double)), *only = calloc((size_t)n_layers + 1, sizeof(double));
    s.nodes = malloc(sizeof *s.nodes * ((size_t)n_layers * 8 + 1));
    s.start = malloc(sizeof *s.start * ((size_t)n_layers + 2));
    memset(out, 0, sizeof *out);
    CHECK_ALLOC(cand_nodes);
    CHECK_ALLOC(cand_start);
    CHECK_ALLOC(use);
    CHECK_ALLOC(rk);
    CHECK_ALLOC(all_but);
    CHECK_ALLOC(only);
    CHECK_ALLOC(s.nodes);
    CHECK_ALLOC(s.start);
    const cmp_metric *k = &ev->metric;
    char kname[48];
    cmp_metric_name(k, kname, sizeof kname);
    /* candidates: the quantized tensors, in execution order, as the nodes consuming them */
    int nk = 0;
    for (int i = 0; i < n_layers; i++) {
        s.start[s.n_cand] = nk;
        int got = consumers_of(gq, layers[i].tensor, s.nodes + nk, 8);
        if (got) {
            nk += got;
            s.n_cand++;
        }
    }
    s.start[s.n_cand] = nk;
    /* ranked by the gain in the output metric from leaving each one alone in float */
    cmp_metrics m;
    for (int c = 0; c < s.n_cand; c++) use[c] = 0;
    TRY(eval_excluding(&s, use, &m));
    double all = cmp_metric_value(k, &m);
    TRY(sensitivity(&s, k, all, all_but, only));
    for (int c = 0; c < s.n_cand; c++) rk[c] = (ranked){c, all_but[c] - all, only[c]};
    qsort(rk, (size_t)s.n_cand, sizeof *rk, by_gain);
    if (!ev->quiet) {
        pp_log_message(&ev->o.log, PP_LOG_INFO, "sensitivity by %s (all quantized: %.6f), most harmful first:", kname, all);
        for (int r = 0; r < s.n_cand && r < 10; r++) {
            char only_text[64] = "";
            if (rk[r].only == rk[r].only) /* measured for ties only */
                snprintf(only_text, sizeof only_text, ", quantized alone %.6f", rk[r].only);
            pp_log_message(&ev->o.log, PP_LOG_INFO, "  %-40s float alone %+.6f%s", s.nodes[s.start[rk[r].c]], rk[r].gain, only_text);
        }
    }
    /* the candidates in that order */
    memcpy(cand_nodes, s.nodes, sizeof *cand_nodes * (size_t)nk);
    memcpy(cand_start, s.start, sizeof *cand_start * (size_t)(s.n_cand + 1));
    for (int r = 0, j = 0; r < s.n_cand; r++) {
        int c = rk[r].c;
        s.start[r] = j;
        for (int e = cand_start[c]; e < cand_start[c + 1]; e++) s.nodes[j++] = cand_nodes[e];
    }
    /* the smallest prefix that meets the target: doubling, then bisection (lo fails, hi meets);
     * each evaluation is a point of the curve metric(number of tensors in float) */
    int lo = 0, hi = 1, found = 0;
    while (!found && lo < s.n_cand) {
        if (hi > s.n_cand) hi = s.n_cand;
        for (int c = 0; c < s.n_cand; c++) use[c] = c < hi;
        TRY(eval_excluding(&s, use, &m));
        if (!ev->quiet) curve_point(&ev->o.log, kname, k, hi, &m);
        if (cmp_meets(t, &m)) {
            found = 1;
            out->reached = m;
        } else {
            lo = hi;
            hi *= 2;
        }
    }
    if (!found) FAIL(PTQ_ERR_ARG, "the target is not reached even with all %d quantized tensors in float", s.n_cand);
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        for (int c = 0; c < s.n_cand; c++) use[c] = c < mid;
        TRY(eval_excluding(&s, use, &m));
        if (!ev->quiet) curve_point(&ev->o.log, kname, k, mid, &m);
        if (cmp_meets(t, &m)) {
            hi = mid;
            out->reached = m;
        } else {
            lo = mid;
        }
    }
    /* then each chosen candidate back in, least harmful first, kept quantized when the target holds */
    for (int c = 0; c < s.n_cand; c++) use[c] = c < hi;
    for (int c = hi - 2; c >= 0; c--) {
        use[c] = 0;
        TRY(eval_excluding(&s, use, &m));
        if (cmp_meets(t, &m)) out->reached = m;
        else use[c] = 1;
    }
    out->nodes = malloc(sizeof *out->nodes * ((size_t)nk + 1));
    CHECK_ALLOC(out->nodes);
    for (int c = 0; c < s.n_cand; c++)
        for (int j = s.start[c]; use[c] && j < s.start[c + 1]; j++) {
            int dup = 0;
            for (int e = 0; e < out->n_nodes; e++) dup |= !strcmp(out->nodes[e], s.nodes[j]);
            if (dup) continue;
            if (!(out->nodes[out->n_nodes] = ptq_strdup(s.nodes[j]))) FAIL(PTQ_ERR_NOMEM, "out of memory copying the name of node '%s'", s.nodes[j]);
            out->n_nodes++;
        }
    out->evaluations = s.evaluations;
done:
    if (st != PTQ_OK) cmp_exclusion_free(out);
    free(cand_nodes);
    free(cand_start);
    free(use);
    free(rk);
    free(all_but);
    free(only);
    free(s.nodes);
    free(s.start);
    return st;
}

void cmp_exclusion_free(cmp_exclusion *x)
{
    for (int i = 0; x->nodes && i < x->n_nodes; i++) free(x->nodes[i]);
    free(x->nodes);
    memset(x, 0, sizeof *x);
}

char *cmp_layer_precisions(const cmp_exclusion *x)
{
    size_t len = 32;
    for (int e = 0; e < x->n_nodes; e++) len += strlen(x->nodes[e]) + 8;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    p += sprintf(p, "--layerPrecisions=");
    for (int e = 0; e < x->n_nodes; e++) p += sprintf(p, "%s%s:fp16", e ? "," : "", x->nodes[e]);
    return s;
}
