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

/* Bytes of the block a bound_memory plan of g needs at batch n of w x h (0: it cannot be planned);
 * out of memory is the caller's error (*nomem), never a reason to pick another batch. */
static size_t plan_bytes(const ptq_graph *g, const pp_config *cfg, int w, int h, int n, const ptq_plan_options *popt,
                         int *nomem)
{
    ptq_tensor x = eng_shaped_tensor(cfg, w, h, NULL, n), xm = eng_model_tensor(g, &x);
    ptq_input_shape s = {.name = g->values[eng_graph_input(g)].name, .rank = xm.rank};
    memcpy(s.dims, xm.dims, sizeof s.dims);
    ptq_plan_options po = *popt;
    po.bound_memory = 1;
    po.pool = NULL;
    ptq_plan *p = NULL;
    ptq_status st = ptq_plan_create(g, &s, 1, &po, &p);
    if (st == PTQ_ERR_NOMEM) *nomem = 1;
    if (st != PTQ_OK) return 0;
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
    int nomem = 0;
    size_t b1 = plan_bytes(g, cfg, w, h, 1, popt, &nomem), b2 = b1 ? plan_bytes(g, cfg, w, h, 2, popt, &nomem) : 0;
    if (nomem) return PTQ_ERR_NOMEM; /* ptq_plan_create's message: what was being allocated */
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

/* The Ultralytics export's metadata: imgsz "[640, 640]" (H, W) and task; 1 when the model has it. */
static int ultralytics_size(const ptq_graph *g, int *h, int *w)
{
    const char *imgsz = NULL;
    int yolo = 0;
    for (int i = 0; i < g->n_metadata; i++) {
        const ptq_kv *kv = &g->metadata[i];
        if (!kv->key || !kv->value) continue;
        if (!strcmp(kv->key, "imgsz")) imgsz = kv->value;
        if (!strcmp(kv->key, "stride") || !strcmp(kv->key, "task")) yolo = 1;
        if (!strcmp(kv->key, "author") && strstr(kv->value, "Ultralytics")) yolo = 1;
    }
    if (!imgsz || !yolo) return 0;
    if (sscanf(imgsz, " [ %d , %d ]", h, w) != 2) {
        if (sscanf(imgsz, " [ %d ]", h) != 1 && sscanf(imgsz, " %d", h) != 1) return 0;
        *w = *h;
    }
    return *h > 0 && *w > 0 && *h <= 16384 && *w <= 16384;
}

/* The channel dim of an image input's last three dims d: 0 (first), 2 (last), -1 (cannot tell).
 * An end of 1 or 3 is the channels; otherwise a small known end (2, 4) is a channel count and a
 * larger one a spatial dim. */
static int channel_dim(const int64_t *d, int nhwc_given, int nhwc)
{
    if (nhwc_given) return nhwc ? 2 : 0;
    int first = d[0] == 1 || d[0] == 3, last = d[2] == 1 || d[2] == 3;
    if (first != last) return first ? 0 : 2;
    if (first) return nhwc ? 2 : 0; /* [3, H, 3]: the preset's */
    int cf = d[0] > 0 && d[0] <= 4, cl = d[2] > 0 && d[2] <= 4, sf = d[0] > 4, sl = d[2] > 4;
    if (cf != cl) return cf ? 0 : 2;
    if (sf != sl) return sf ? 2 : 0;
    return -1;
}

ptq_status eng_fit_preprocessing(const ptq_graph *g, const char *model, pp_config *cfg, const pp_log *log)
{
    int in = eng_graph_input(g);
    const ptq_value *v = in >= 0 ? &g->values[in] : NULL;
    const char *m = model ? model : "model";
    int say = eng_preprocessing_say_once(), no_preset = !eng_preprocessing_given(ENG_PP_PRESET);
    if (say) eng_preprocessing_say(log);
    char text[320], dims[160];
    if (!v) return PTQ_OK;
    declared_dims(v, dims, sizeof dims);
    if (v->t.dtype != PTQ_F32 && v->t.dtype != PTQ_U8 && v->t.dtype != PTQ_F16) {
        ptq_error("%s: input '%s' is %s %s: ptq feeds images as float32 or uint8 pixels; export the model with a "
                  "float32 (or uint8) image input, or feed it with --input",
                  m, v->name, ptq_dtype_name(v->t.dtype), dims);
        return PTQ_ERR_UNSUPPORTED;
    }
    int u8 = v->t.dtype == PTQ_U8, uh = 0, uw = 0;
    if (no_preset && ultralytics_size(g, &uh, &uw)) { /* an Ultralytics export says how it was trained */
        ptq_status st = eng_preprocessing_again("yolo-letterbox-640", cfg);
        if (st != PTQ_OK) return st;
        if (!eng_preprocessing_given(ENG_PP_SIZE)) {
            cfg->width = uw;
            cfg->height = uh;
        }
        no_preset = 0;
        if (say)
            pp_log_message(log, PP_LOG_WARNING, "%s: no --preset: the model's metadata (imgsz [%d, %d]) names an Ultralytics export: "
                           "preset yolo-letterbox-640 at %dx%d", m, uh, uw, cfg->width, cfg->height);
    }
    if (v->t.rank != 4 && v->t.rank != 3) return PTQ_OK; /* eng_check_input_dims says why */
    const int64_t *d = v->t.dims + (v->t.rank - 3); /* C, H, W or H, W, C */
    int cd = channel_dim(d, eng_preprocessing_given(ENG_PP_LAYOUT), cfg->nhwc);
    if (cd < 0 && v->t.rank == 4) cd = cfg->nhwc ? 2 : 0; /* [?, ?, ?, ?]: the preset's layout */
    if (cd < 0) {
        ptq_error("%s: input '%s' is %s %s: ptq cannot tell which dim holds the channels; give --layout NCHW or NHWC",
                  m, v->name, ptq_dtype_name(v->t.dtype), dims);
        return PTQ_ERR_ARG;
    }
    cfg->nhwc = cd == 2;
    int64_t C = d[cd];
    if (C > 0 && C != 1 && C != 3) {
        ptq_error("%s: input '%s' is %s %s: %lld channels; ptq feeds 3 (--channel-order RGB or BGR) or 1 (GRAY, "
                  "GRAY_PIL, GRAY_CV): export the model with one of those (for RGBA, drop the alpha channel)",
                  m, v->name, ptq_dtype_name(v->t.dtype), dims, (long long)C);
        return PTQ_ERR_UNSUPPORTED;
    }
    if (C == 1 && !cfg->gray) { /* a gray model: the image's luma, one mean/std */
        if (eng_preprocessing_given(ENG_PP_ORDER)) {
            ptq_error("%s: input '%s' is %s %s: one channel, but --channel-order gives three; use --channel-order "
                      "GRAY (or GRAY_PIL, GRAY_CV)", m, v->name, ptq_dtype_name(v->t.dtype), dims);
            return PTQ_ERR_ARG;
        }
        cfg->gray = cfg->bgr ? PP_GRAY_CV : PP_GRAY_PIL;
        float mean = (cfg->mean[0] + cfg->mean[1] + cfg->mean[2]) / 3.0f, std = (cfg->std[0] + cfg->std[1] + cfg->std[2]) / 3.0f;
        int averaged = cfg->mean[0] != cfg->mean[1] || cfg->mean[1] != cfg->mean[2] || cfg->std[0] != cfg->std[1] ||
                       cfg->std[1] != cfg->std[2];
        cfg->mean[0] = cfg->mean[1] = cfg->mean[2] = mean;
        cfg->std[0] = cfg->std[1] = cfg->std[2] = std;
        if (say)
            pp_log_message(log, PP_LOG_WARNING, "%s: input '%s' has one channel: fed the image's luma (%s), normalised with mean %g, "
                           "std %g%s", m, v->name, cfg->gray == PP_GRAY_CV ? "GRAY_CV: OpenCV's" : "GRAY_PIL: PIL's",
                           (double)mean, (double)std, averaged ? " (the preset's three averaged)" : "");
    }
    int hd = cfg->nhwc ? 0 : 1, wd = cfg->nhwc ? 1 : 2;
    int fixed = d[hd] > 0 && d[wd] > 0 && d[hd] <= 16384 && d[wd] <= 16384;
    int scalable = cfg->mode == PP_MODE_STRETCH || cfg->mode == PP_MODE_LETTERBOX || cfg->mode == PP_MODE_SHORTER_CROP;
    /* a size the user gave (--size) is kept: a contradiction is refused by eng_check_input_dims */
    if (!pp_dynamic(cfg) && fixed && (d[hd] != cfg->height || d[wd] != cfg->width) && (scalable || no_preset) &&
        !eng_preprocessing_given(ENG_PP_SIZE)) {
        int oh = cfg->height, ow = cfg->width, os = cfg->shorter;
        cfg->height = (int)d[hd];
        cfg->width = (int)d[wd];
        if (cfg->mode == PP_MODE_SHORTER_CROP && !eng_preprocessing_given(ENG_PP_SHORTER)) {
            /* the crop keeps its ratio to the shorter side (imagenet: 224/256) */
            int side = cfg->width < cfg->height ? cfg->width : cfg->height, oside = ow < oh ? ow : oh;
            cfg->shorter = (int)((double)side * os / oside + 0.5);
        }
        if (say && !no_preset) {
            if (cfg->mode == PP_MODE_SHORTER_CROP)
                pp_log_message(log, PP_LOG_WARNING, "%s: input '%s' is %s: %s's %dx%d crop of shorter side %d scaled to it: shorter "
                               "side %d, crop %dx%d", m, v->name, dims, eng_preprocessing_origin(), ow, oh, os,
                               cfg->shorter, cfg->width, cfg->height);
            else
                pp_log_message(log, PP_LOG_WARNING, "%s: input '%s' is %s: %s's %s to %dx%d scaled to it: %s to %dx%d", m, v->name,
                               dims, eng_preprocessing_origin(), pp_mode_name(cfg->mode), ow, oh,
                               pp_mode_name(cfg->mode), cfg->width, cfg->height);
        }
    }
    if (u8 || cfg->gray) {
        int identity = cfg->scale == 1.0f, nc = pp_channels(cfg);
        for (int k = 0; k < nc; k++) identity &= cfg->mean[k] == 0.0f && cfg->std[k] == 1.0f;
        if (u8 && !identity) {
            if (eng_preprocessing_given(ENG_PP_NORM)) {
                ptq_error("%s: input '%s' is uint8 %s: it takes pixels as they are, so --scale/--mean/--std cannot "
                          "apply (the graph normalises); leave them out", m, v->name, dims);
                return PTQ_ERR_ARG;
            }
            cfg->scale = 1.0f;
            for (int k = 0; k < 3; k++) {
                cfg->mean[k] = 0.0f;
                cfg->std[k] = 1.0f;
            }
        }
        if (u8 && say)
            pp_log_message(log, PP_LOG_WARNING, "%s: input '%s' is uint8 %s: fed the %s geometry as uint8 %s pixels, without its "
                           "scale/mean/std (the graph normalises)", m, v->name, dims,
                           no_preset ? "default" : "preset's", cfg->nhwc ? "NHWC" : "NCHW");
    }
    if (no_preset) {
        eng_preprocessing_describe_default(cfg);
        if (say) {
            eng_preprocessing_text(cfg, text, sizeof text);
            pp_log_message(log, PP_LOG_WARNING, "%s: no --preset: assuming %s; give --preset (ptq preprocess --list-presets) if the "
                           "model was trained otherwise", m, text);
        }
    }
    return pp_validate(cfg);
}

int eng_preset_fits(const ptq_graph *g, const pp_config *c)
{
    int in = eng_graph_input(g);
    if (in < 0) return 0;
    const ptq_value *v = &g->values[in];
    if (v->t.rank != 4 && v->t.rank != 3) return 0;
    if (v->t.dtype != PTQ_F32 && v->t.dtype != PTQ_F16 && v->t.dtype != PTQ_U8) return 0;
    const int64_t *d = v->t.dims + (v->t.rank - 3); /* C, H, W or H, W, C */
    int cdim = channel_dim(d, 0, c->nhwc);
    if (cdim < 0 && v->t.rank == 4) cdim = c->nhwc ? 2 : 0;
    if (cdim < 0 || (d[cdim] >= 0 && d[cdim] != 1 && d[cdim] != 3)) return 0;
    int nhwc = cdim == 2, hd = nhwc ? 0 : 1, wd = nhwc ? 1 : 2, dyn = pp_dynamic(c);
    if ((d[hd] >= 0 && dyn & PP_DYN_HEIGHT) || (d[wd] >= 0 && dyn & PP_DYN_WIDTH)) return 0;
    if (dyn || ((d[hd] < 0 || d[hd] == c->height) && (d[wd] < 0 || d[wd] == c->width))) return 2;
    return c->mode == PP_MODE_STRETCH || c->mode == PP_MODE_LETTERBOX || c->mode == PP_MODE_SHORTER_CROP;
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
    TRY(quant_fp16_float_inputs(g, &upcast)); /* the images' float32 tensors rounded to a float16 input */
    r.g = g;
    r.model = model;
    r.popt = ptq_plan_defaults();
    r.popt.nthreads = o->threads;
    r.popt.fuse = fuse;
    pp_config cf = *cfg;
    TRY(eng_fit_preprocessing(g, model, &cf, &o->log));
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
