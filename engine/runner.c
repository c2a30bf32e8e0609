/* runner.c: see runner.h. */
#include "engine/runner.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "engine/preprocessing.h"
#include "engine/source.h"
#include "io/onnx.h"
#include "quant/fp16.h"

int eng_graph_input(const ptq_graph *g)
{
    for (int i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].kind == PTQ_VALUE_INPUT) return g->inputs[i];
    return -1;
}

int eng_batchless(const ptq_graph *g)
{
    int in = eng_graph_input(g);
    return in >= 0 && g->values[in].t.rank == 3;
}

ptq_tensor eng_model_tensor(const ptq_graph *g, const ptq_tensor *x)
{
    ptq_tensor t = *x;
    if (eng_batchless(g) && t.rank == 4 && t.dims[0] == 1) {
        memmove(t.dims, t.dims + 1, sizeof(int64_t) * 3);
        t.dims[3] = 0;
        t.rank = 3;
    }
    return t;
}

ptq_status eng_fit_batch(const ptq_graph *g, const char *model, pp_dataset_options *o)
{
    int in = eng_graph_input(g);
    const ptq_value *v = in >= 0 ? &g->values[in] : NULL;
    int64_t fixed = v && v->t.rank == 4 && v->t.dims[0] > 0 ? v->t.dims[0] : 0;
    if (v && v->t.rank == 3) { /* [C, H, W]: one image at a time */
        if (o->batch > 1) {
            ptq_error("%s: the model takes one image at a time (%s has no batch dim), so --batch %d cannot apply; "
                      "leave --batch out",
                      model ? model : "model", v->name, o->batch);
            return PTQ_ERR_ARG;
        }
        o->batch = 1;
    } else if (fixed) {
        if (o->batch > 0 && o->batch != fixed) {
            ptq_error("%s: the model fixes the batch of %s to %lld, so --batch %d cannot apply; leave --batch out",
                      model ? model : "model", v->name, (long long)fixed, o->batch);
            return PTQ_ERR_ARG;
        }
        o->batch = (int)(fixed <= 4096 ? fixed : 4096);
    } else if (o->batch <= 0)
        o->batch = ENG_DEFAULT_BATCH;
    return PTQ_OK;
}

size_t eng_memory_budget_bytes(const pp_dataset_options *o)
{
    return (size_t)(o && o->memory_mb > 0 ? o->memory_mb : ENG_DEFAULT_MEMORY_MB) << 20;
}

size_t eng_cache_budget_bytes(const pp_dataset_options *o)
{
    return eng_memory_budget_bytes(o) / 2;
}

/* Bytes of the block a bound_memory plan of g needs at batch n of w x h (0: it cannot be planned). */
static size_t plan_bytes(const ptq_graph *g, const pp_config *cfg, int w, int h, int n, const ptq_plan_options *popt)
{
    ptq_tensor x = eng_shaped_tensor(cfg, w, h, NULL, n), xm = eng_model_tensor(g, &x);
    ptq_input_shape s = {.name = g->values[eng_graph_input(g)].name, .rank = xm.rank};
    memcpy(s.dims, xm.dims, sizeof s.dims);
    ptq_plan_options po = *popt;
    po.bound_memory = 1;
    po.pool = NULL;
    ptq_plan *p = NULL;
    if (ptq_plan_create(g, &s, 1, &po, &p) != PTQ_OK) return 0;
    size_t bytes = ptq_plan_memory_bytes(p);
    ptq_plan_destroy(p);
    return bytes;
}

ptq_status eng_fit_batch_memory(const ptq_graph *g, const char *model, const pp_config *cfg,
                                const ptq_plan_options *popt, size_t extra, pp_dataset_options *o,
                                eng_memory_budget *mb)
{
    eng_memory_budget m = {.budget = eng_memory_budget_bytes(o)};
    int in = eng_graph_input(g), chosen = o->batch <= 0;
    const ptq_value *v = in >= 0 ? &g->values[in] : NULL;
    if (!v || v->t.rank != 4 || v->t.dims[0] > 0) chosen = 0; /* batchless, or a fixed batch */
    ptq_status st = eng_fit_batch(g, model, o);
    if (st != PTQ_OK || !chosen) {
        if (mb) *mb = m;
        return st;
    }
    /* the largest tensor an image gives (dims that follow the image: their limit) */
    size_t floats = pp_tensor_floats(cfg);
    int dyn = pp_dynamic(cfg), h = cfg->height, w = cfg->width;
    if (dyn & PP_DYN_HEIGHT) { /* a square limit (limit-side): the side */
        h = 1;
        while ((size_t)(h + 1) * (size_t)(h + 1) * 3 <= floats) h++;
    }
    if (dyn) w = (int)(floats / 3 / (size_t)h);
    size_t b1 = plan_bytes(g, cfg, w, h, 1, popt), b2 = b1 ? plan_bytes(g, cfg, w, h, 2, popt) : 0;
    if (!b1) { /* not plannable at that size: batch 1, and the pass's own plan says why if it fails too */
        o->batch = m.batch = 1;
        if (mb) *mb = m;
        return PTQ_OK;
    }
    size_t weights = 0;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i].kind == PTQ_VALUE_INITIALIZER) weights += ptq_tensor_numel(&g->values[i].t) * ptq_dtype_size(g->values[i].t.dtype);
    int threads = popt->nthreads > 0 ? popt->nthreads : omp_get_max_threads();
    int ring = (o->prefetch > 1 ? o->prefetch : 1) + 1;
    size_t act = b2 > b1 ? b2 - b1 : b1;
    m.per_image = act + (size_t)ring * floats * sizeof(float);
    m.fixed = ((size_t)ENG_PROCESS_MB << 20) + 2 * weights + extra + (size_t)threads * (5u << 18) + (b1 > act ? b1 - act : 0);
    m.batch = 1;
    while (m.batch < ENG_DEFAULT_BATCH && m.fixed + (size_t)(m.batch + 1) * m.per_image <= m.budget) m.batch++;
    m.over = m.fixed + m.per_image > m.budget;
    o->batch = m.batch;
    if (mb) *mb = m;
    return PTQ_OK;
}

ptq_tensor eng_shaped_tensor(const pp_config *cfg, int w, int h, const float *data, int n)
{
    pp_config c = *cfg;
    c.width = w;
    c.height = h;
    return eng_batch_tensor(&c, data, n);
}

/* "[?, 3, 48, 192]": the declared dims of value v (symbolic or unknown dims as '?'). */
static void declared_dims(const ptq_value *v, char *buf, size_t cap)
{
    size_t k = 0;
    if (v->t.rank < 0) {
        snprintf(buf, cap, "[unknown rank]");
        return;
    }
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int d = 0; d < v->t.rank && k < cap; d++)
        k += v->t.dims[d] >= 0 ? (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)v->t.dims[d])
                               : (size_t)snprintf(buf + k, cap - k, "%s?", d ? ", " : "");
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static void dims_text(const int64_t *dims, int rank, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < rank && k < cap; d++) k += (size_t)snprintf(buf + k, cap - k, d ? "x%lld" : "%lld", (long long)dims[d]);
}

void eng_fit_preprocessing(const ptq_graph *g, pp_config *cfg)
{
    int in = eng_graph_input(g);
    const ptq_value *v = in >= 0 ? &g->values[in] : NULL;
    if (v && (v->t.rank == 4 || v->t.rank == 3) && !pp_dynamic(cfg)) {
        const int64_t *d = v->t.dims + (v->t.rank - 3); /* C, H, W or H, W, C */
        if (eng_preprocessing_free(ENG_PP_LAYOUT) && d[2] == 3 && d[0] != 3 && d[0] != 1) cfg->nhwc = 1;
        int hd = cfg->nhwc ? 0 : 1, wd = cfg->nhwc ? 1 : 2;
        if (eng_preprocessing_free(ENG_PP_SIZE) && d[hd] > 0 && d[wd] > 0 && d[hd] <= 16384 && d[wd] <= 16384) {
            cfg->height = (int)d[hd];
            cfg->width = (int)d[wd];
        }
    }
    eng_preprocessing_describe_default(cfg);
}

int eng_preset_fits(const ptq_graph *g, const pp_config *c)
{
    int in = eng_graph_input(g);
    if (in < 0) return 0;
    const ptq_value *v = &g->values[in];
    if (v->t.rank != 4 && v->t.rank != 3) return 0;
    const int64_t *d = v->t.dims + (v->t.rank - 3); /* C, H, W or H, W, C */
    int cd = c->nhwc ? 2 : 0, hd = c->nhwc ? 0 : 1, wd = c->nhwc ? 1 : 2, dyn = pp_dynamic(c);
    if (d[cd] >= 0 && d[cd] != 3) return 0;
    if (d[hd] >= 0 && (dyn & PP_DYN_HEIGHT || d[hd] != c->height)) return 0;
    if (d[wd] >= 0 && (dyn & PP_DYN_WIDTH || d[wd] != c->width)) return 0;
    return 1;
}

ptq_status eng_check_input_dims(const ptq_graph *g, const char *model, const pp_config *cfg)
{
    int in = eng_graph_input(g);
    if (in < 0) return PTQ_OK;
    const ptq_value *v = &g->values[in];
    ptq_tensor x = eng_batch_tensor(cfg, NULL, 1);
    if (v->t.rank < 0) return PTQ_OK;
    char want[160], got[96];
    declared_dims(v, want, sizeof want);
    dims_text(x.dims + 1, 3, got, sizeof got);
    if (v->t.rank != 4 && v->t.rank != 3) {
        ptq_error("%s: %s gives %s images (rank 4 with the batch, or 3 without) but the model declares %s as %s",
                  model, eng_preprocessing_origin(), got, v->name, want);
        return PTQ_ERR_SHAPE;
    }
    int off = v->t.rank == 3 ? 1 : 0; /* declared dim of x's dim d: d - off */
    int dyn = pp_dynamic(cfg), wd = cfg->nhwc ? 2 : 3, hd = cfg->nhwc ? 1 : 2;
    if (dyn) { /* "3x48xW": the dims that follow the image by letter */
        char t[3][24];
        for (int d = 1; d < 4; d++) {
            if ((dyn & PP_DYN_WIDTH && d == wd) || (dyn & PP_DYN_HEIGHT && d == hd)) snprintf(t[d - 1], sizeof t[0], "%s", d == wd ? "W" : "H");
            else snprintf(t[d - 1], sizeof t[0], "%lld", (long long)x.dims[d]);
        }
        snprintf(got, sizeof got, "%sx%sx%s", t[0], t[1], t[2]);
    }
    for (int d = 1; d < 4; d++) {
        int follows = (dyn & PP_DYN_WIDTH && d == wd) || (dyn & PP_DYN_HEIGHT && d == hd);
        int64_t decl = v->t.dims[d - off];
        if (follows && decl >= 0) {
            ptq_error("%s: %s gives %s images (%s follow%s the image) but the model fixes %s as %s (dim %d is %lld); use "
                      "a fixed-size preset",
                      model, eng_preprocessing_origin(), got, dyn == PP_DYN_WIDTH ? "W" : "H and W",
                      dyn == PP_DYN_WIDTH ? "s" : "", v->name, want, d - off, (long long)decl);
            return PTQ_ERR_SHAPE;
        }
        if (!follows && decl >= 0 && decl != x.dims[d]) {
            ptq_error("%s: %s gives %s images but the model declares %s as %s (dim %d is %lld); use a preset or "
                      "--size that matches it",
                      model, eng_preprocessing_origin(), got, v->name, want, d - off, (long long)decl);
            return PTQ_ERR_SHAPE;
        }
    }
    return PTQ_OK;
}

ptq_status eng_plan_images(const ptq_graph *g, const char *model, const ptq_input_shape *s,
                           const ptq_plan_options *popt, ptq_plan **out)
{
    ptq_status st = ptq_plan_create(g, s, 1, popt, out);
    if (st == PTQ_OK) return st;
    char why[1024], want[160] = "?", got[96];
    snprintf(why, sizeof why, "%s", ptq_last_error());
    int in = eng_graph_input(g);
    if (in >= 0) declared_dims(&g->values[in], want, sizeof want);
    dims_text(s->dims, s->rank, got, sizeof got);
    ptq_error("%s: %s (the input %s was %s, from %s; the model declares it as %s)", model ? model : "model", why,
              s->name, got, eng_preprocessing_origin(), want);
    return st;
}

ptq_status eng_runner_ready(eng_runner *r, const ptq_tensor *xb)
{
    ptq_tensor xm = eng_model_tensor(r->g, xb), *x = &xm;
    ptq_status st = PTQ_OK;
    eng_runner_slot *e = NULL;
    int64_t dims[PTQ_MAX_RANK + 1] = {0}; /* the key: rank, then the dims */
    dims[0] = x->rank;
    for (int d = 0; d < x->rank && d < PTQ_MAX_RANK; d++) dims[d + 1] = x->dims[d];
    r->plan = NULL;
    for (int i = 0; i < ENG_RUNNER_PLANS && !e; i++)
        if (r->slots[i].used && !memcmp(r->slots[i].dims, dims, sizeof dims)) e = &r->slots[i];
    eng_memory *m = r->shared ? r->shared : &r->own;
    if (!e) { /* an empty slot, else the least recently used plan gives its place */
        e = &r->slots[0];
        for (int i = 1; i < ENG_RUNNER_PLANS; i++)
            if (r->slots[i].used < e->used) e = &r->slots[i];
        ptq_plan_destroy(e->plan);
        memset(e, 0, sizeof *e);
        int in = eng_graph_input(r->g);
        if (in < 0) FAIL(PTQ_ERR_FORMAT, "the model has no input");
        ptq_input_shape s = {.name = r->g->values[in].name, .rank = x->rank};
        memcpy(s.dims, x->dims, sizeof s.dims);
        ptq_plan_options popt = r->popt;
        popt.bound_memory = 1;
        TRY(eng_plan_images(r->g, r->model, &s, &popt, &e->plan));
        memcpy(e->dims, dims, sizeof dims);
    }
    e->used = ++r->tick;
    if (!r->shared) r->own.pool = r->popt.pool;
    TRY(eng_memory_bind(m, e->plan));
    r->plan = e->plan;
done:
    return st;
}

ptq_status eng_runner_run(eng_runner *r, const ptq_tensor *x)
{
    ptq_status st = eng_runner_ready(r, x);
    ptq_tensor t = eng_model_tensor(r->g, x);
    return st == PTQ_OK ? ptq_plan_run(r->plan, &t, 1) : st;
}

ptq_status eng_memory_bind(eng_memory *m, ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    size_t need = ptq_plan_memory_bytes(p);
    if (need > m->cap) { /* a bigger block (the old one, too small here, is not pooled either) */
        ptq_aligned_free(m->mem);
        m->cap = 0;
        if (!(m->mem = ptq_arena_pool_take(m->pool, need, &m->cap)))
            FAIL(PTQ_ERR_NOMEM, "out of memory: %.1f MiB of activations", (double)need / 1048576.0);
    }
    ptq_plan_bind_memory(p, m->mem);
done:
    return st;
}

void eng_memory_free(eng_memory *m)
{
    ptq_arena_pool_put(m->pool, m->mem, m->cap);
    m->mem = NULL;
    m->cap = 0;
}

void eng_runner_free(eng_runner *r)
{
    for (int i = 0; i < ENG_RUNNER_PLANS; i++) ptq_plan_destroy(r->slots[i].plan);
    memset(r->slots, 0, sizeof r->slots);
    r->plan = NULL;
    eng_memory_free(&r->own);
}

ptq_status eng_run_images(const char *model, const pp_dataset_options *o, const pp_config *cfg, int fuse, int *images,
                          int *skipped)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    pp_dataset *d = NULL;
    eng_runner r = {0};
    *images = *skipped = 0;
    int upcast = 0;
    TRY(onnx_model_load(model, &g));
    TRY(quant_fp16_upcast(g, &upcast)); /* float16 layers: computed in float32, outputs rounded */
    r.g = g;
    r.model = model;
    r.popt = ptq_plan_defaults();
    r.popt.nthreads = o->threads;
    r.popt.fuse = fuse;
    pp_config cf = *cfg;
    eng_fit_preprocessing(g, &cf);
    cfg = &cf;
    TRY(eng_check_input_dims(g, model, cfg));
    pp_dataset_options of = *o;
    TRY(eng_fit_batch_memory(g, model, cfg, &r.popt, 0, &of, NULL));
    TRY(pp_dataset_open(&of, cfg, &d));
    for (;;) {
        const float *x;
        int n, w, h;
        TRY(pp_dataset_next(d, &x, &n, NULL, NULL));
        if (n == 0) break;
        pp_dataset_batch_shape(d, &w, &h);
        ptq_tensor t = eng_shaped_tensor(cfg, w, h, x, n);
        if ((st = eng_runner_run(&r, &t)) != PTQ_OK) {
            if (strncmp(ptq_last_error(), model, strlen(model)) != 0) ptq_error_prefix("%s: ", model);
            goto done;
        }
    }
    pp_dataset_counts(d, images, skipped);
done:
    pp_dataset_close(d);
    eng_runner_free(&r);
    ptq_graph_destroy(g);
    return st;
}
