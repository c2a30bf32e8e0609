/* api.c: the public C API (include/ptq.h) on top of engine/: each call maps its options onto
 * the engine's jobs, which the CLI runs too, so both write the same bytes. Internal statuses
 * and messages are ptq.h's (same numbers; ptq_error_message() is the thread's last message). */
#include "include/ptq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "engine/collect.h"
#include "engine/compare.h"
#include "engine/model.h"
#include "engine/preprocessing.h"
#include "engine/quantize.h"
#include "engine/runner.h"
#include "engine/translate.h"
#include "io/cache.h"
#include "io/onnx.h"
#include "io/ranges.h"
#include "io/report.h"
#include "runtime/plan.h"

_Static_assert((int)PTQ_E_INTERNAL == (int)PTQ_ERR_INTERNAL && (int)PTQ_E_SHAPE == (int)PTQ_ERR_SHAPE &&
                   (int)PTQ_E_ARG == (int)PTQ_ERR_ARG && (int)PTQ_SUCCESS == (int)PTQ_OK,
               "ptq_err and ptq_status share their numbers");

static ptq_err err(ptq_status st)
{
    return (ptq_err)st;
}

static ptq_err fail(ptq_status st, const char *msg)
{
    ptq_error("%s", msg);
    return (ptq_err)st;
}

PTQ_API const char *ptq_error_message(void)
{
    return ptq_last_error();
}

PTQ_API const char *ptq_version(void)
{
    return "0.1";
}

/* ---- logging: the caller's callbacks, or nothing at all ---- */

static void quiet_progress(const char *label, int done, int total, double seconds, int last, void *user)
{
    (void)label, (void)done, (void)total, (void)seconds, (void)last, (void)user;
}

static void quiet_message(int level, const char *text, void *user)
{
    (void)level, (void)text, (void)user;
}

static pp_log log_of(const ptq_log *l)
{
    pp_log p = {quiet_progress, quiet_message, NULL};
    if (l) {
        if (l->progress) p.progress = l->progress;
        if (l->message) p.message = l->message;
        p.user = l->user;
    }
    return p;
}

/* ---- models ---- */

struct ptq_model {
    char *path;
    ptq_graph *g;
};

PTQ_API ptq_err ptq_model_load(const char *path, ptq_model **out)
{
    ptq_status st = PTQ_OK;
    ptq_model *m = NULL;
    if (!out) return fail(PTQ_ERR_ARG, "ptq_model_load: out is NULL");
    *out = NULL;
    if (!path) return fail(PTQ_ERR_ARG, "ptq_model_load: no path");
    m = calloc(1, sizeof *m);
    CHECK_ALLOC(m);
    m->path = ptq_strdup(path);
    CHECK_ALLOC(m->path);
    TRY(eng_model_load(path, &m->g, NULL));
    *out = m;
    m = NULL;
done:
    ptq_model_free(m);
    return err(st);
}

PTQ_API void ptq_model_free(ptq_model *m)
{
    if (!m) return;
    ptq_graph_destroy(m->g);
    free(m->path);
    free(m);
}

static int data_input(const ptq_model *m, int i)
{
    for (int k = 0, seen = 0; m && k < m->g->n_inputs; k++)
        if (m->g->values[m->g->inputs[k]].kind == PTQ_VALUE_INPUT && seen++ == i) return m->g->inputs[k];
    return -1;
}

PTQ_API int ptq_model_num_inputs(const ptq_model *m)
{
    int n = 0;
    while (data_input(m, n) >= 0) n++;
    return n;
}

PTQ_API const char *ptq_model_input_name(const ptq_model *m, int i)
{
    int v = data_input(m, i);
    return v >= 0 ? m->g->values[v].name : NULL;
}

PTQ_API int ptq_model_num_outputs(const ptq_model *m)
{
    return m ? m->g->n_outputs : 0;
}

PTQ_API const char *ptq_model_output_name(const ptq_model *m, int i)
{
    return m && i >= 0 && i < m->g->n_outputs ? m->g->values[m->g->outputs[i]].name : NULL;
}

/* ---- datasets ---- */

struct ptq_dataset {
    eng_calib_source src;    /* o.images -> images; cfg from the preset and overrides */
    char *images, *preset;
    pp_dataset *d;           /* the pass ptq_dataset_next is reading, or NULL */
    int used, skipped;
};

PTQ_API void ptq_dataset_defaults(ptq_dataset_options *o)
{
    pp_dataset_options d = pp_dataset_defaults();
    memset(o, 0, sizeof *o);
    o->batch = 0; /* the model's (eng_fit_batch); 8 when the dataset is read alone */
    o->limit = d.limit;
    o->exif = d.exif;
    o->seed = d.seed;
}

PTQ_API ptq_err ptq_dataset_open(const char *images, const ptq_dataset_options *o, ptq_dataset **out)
{
    ptq_status st = PTQ_OK;
    ptq_dataset *ds = NULL;
    pp_dataset *probe = NULL;
    char **keys = NULL, **vals = NULL;
    int n = o ? o->n_overrides : 0;
    if (!out) return fail(PTQ_ERR_ARG, "ptq_dataset_open: out is NULL");
    *out = NULL;
    if (!images || !o) return fail(PTQ_ERR_ARG, "ptq_dataset_open: no images or options");
    if (o->batch < 0 || o->batch > 4096) FAIL(PTQ_ERR_ARG, "bad batch %d (1 to 4096, or 0: the model's)", o->batch);
    if (o->shard_count < 0 || (o->shard_count && (o->shard_index < 0 || o->shard_index >= o->shard_count)) ||
        (!o->shard_count && o->shard_index))
        FAIL(PTQ_ERR_ARG, "bad shard %d/%d (index 0 to count - 1)", o->shard_index, o->shard_count);
    if (o->memory_mb && (o->memory_mb < 64 || o->memory_mb > 1048576))
        FAIL(PTQ_ERR_ARG, "bad memory_mb %d (MB, from 64 to 1048576, or 0: 512)", o->memory_mb);
    if (n < 0 || (n && !o->overrides)) FAIL(PTQ_ERR_ARG, "bad overrides");
    ds = calloc(1, sizeof *ds);
    keys = calloc((size_t)n + 1, sizeof *keys);
    vals = calloc((size_t)n + 1, sizeof *vals);
    CHECK_ALLOC(ds);
    CHECK_ALLOC(keys);
    CHECK_ALLOC(vals);
    for (int i = 0; i < n; i++) {
        const char *eq = o->overrides[i] ? strchr(o->overrides[i], '=') : NULL;
        if (!eq || eq == o->overrides[i]) FAIL(PTQ_ERR_ARG, "override '%s': expected key=value", o->overrides[i] ? o->overrides[i] : "(null)");
        keys[i] = ptq_strdup(o->overrides[i]);
        CHECK_ALLOC(keys[i]);
        keys[i][eq - o->overrides[i]] = 0;
        vals[i] = keys[i] + (eq - o->overrides[i]) + 1;
    }
    ds->src.o = pp_dataset_defaults();
    ds->src.cfg = pp_defaults();
    ds->images = ptq_strdup(images);
    CHECK_ALLOC(ds->images);
    if (o->preset) CHECK_ALLOC(ds->preset = ptq_strdup(o->preset));
    TRY(eng_preprocessing(ds->preset, (const char *const *)keys, (const char *const *)vals, n, &ds->src.cfg));
    ds->src.o.images = ds->images;
    ds->src.o.batch = o->batch;
    ds->src.o.limit = o->limit;
    ds->src.o.shuffle = o->shuffle;
    ds->src.o.seed = o->seed;
    ds->src.o.strict = o->strict;
    ds->src.o.exif = o->exif;
    ds->src.o.threads = o->threads;
    ds->src.o.shard_index = o->shard_index;
    ds->src.o.shard_count = o->shard_count;
    ds->src.o.memory_mb = o->memory_mb;
    ds->src.o.log = log_of(&o->log);
    /* lists the files now, so that a folder without images fails here */
    pp_dataset_options po = ds->src.o;
    po.quiet = 1;
    TRY(pp_dataset_open(&po, &ds->src.cfg, &probe));
    *out = ds;
    ds = NULL;
done:
    pp_dataset_close(probe);
    for (int i = 0; keys && i < n; i++) free(keys[i]);
    free(keys);
    free(vals);
    ptq_dataset_free(ds);
    return err(st);
}

PTQ_API ptq_err ptq_dataset_next(ptq_dataset *ds, const float **data, int64_t shape[4], int *n)
{
    ptq_status st = PTQ_OK;
    if (!ds || !data || !shape || !n) return fail(PTQ_ERR_ARG, "ptq_dataset_next: NULL argument");
    *n = 0;
    if (!ds->d) TRY(pp_dataset_open(&ds->src.o, &ds->src.cfg, &ds->d));
    TRY(pp_dataset_next(ds->d, data, n, NULL, NULL));
    pp_dataset_counts(ds->d, &ds->used, &ds->skipped);
    if (*n == 0) {
        pp_dataset_close(ds->d);
        ds->d = NULL;
        memset(shape, 0, 4 * sizeof *shape);
        return PTQ_SUCCESS;
    }
    int w, h;
    pp_dataset_batch_shape(ds->d, &w, &h);
    ptq_tensor t = eng_shaped_tensor(&ds->src.cfg, w, h, *data, *n);
    for (int i = 0; i < 4; i++) shape[i] = t.dims[i];
done:
    if (st != PTQ_OK) {
        pp_dataset_close(ds->d);
        ds->d = NULL;
    }
    return err(st);
}

PTQ_API void ptq_dataset_counts(const ptq_dataset *ds, int *used, int *skipped)
{
    if (used) *used = ds ? ds->used : 0;
    if (skipped) *skipped = ds ? ds->skipped : 0;
}

PTQ_API void ptq_dataset_free(ptq_dataset *ds)
{
    if (!ds) return;
    pp_dataset_close(ds->d);
    free(ds->images);
    free(ds->preset);
    free(ds);
}

/* ---- calibration ---- */

struct ptq_calibration {
    eng_collector col;
    int images;
    pp_log log; /* the calibration's warnings go to the caller's callbacks (ptq_calibrate_options.log) */
};

PTQ_API void ptq_calibrate_defaults(ptq_calibrate_options *o)
{
    memset(o, 0, sizeof *o);
}

PTQ_API ptq_err ptq_calibrate(const ptq_model *m, ptq_dataset *d, const ptq_calibrate_options *o, ptq_calibration **out)
{
    ptq_status st = PTQ_OK;
    ptq_calibration *c = NULL;
    if (!out) return fail(PTQ_ERR_ARG, "ptq_calibrate: out is NULL");
    *out = NULL;
    if (!m || !d) return fail(PTQ_ERR_ARG, "ptq_calibrate: no model or dataset");
    c = calloc(1, sizeof *c);
    CHECK_ALLOC(c);
    c->log = log_of(o ? &o->log : NULL);
    eng_calib_source src = d->src;
    if (o) {
        c->col.globs = o->tensors;
        c->col.n_globs = o->n_tensors;
        src.o.log = c->log;
    }
    TRY(eng_collect(m->g, m->path, &src, &c->col));
    if (o && o->stats_out) TRY(eng_stats_save(o->stats_out, m->path, &src, &c->col));
    if (c->col.n == 0) FAIL(PTQ_ERR_FORMAT, "%s: no float tensor was observed", m->path);
    c->images = src.images;
    d->used = src.images;
    d->skipped = src.skipped;
    *out = c;
    c = NULL;
done:
    if (*out) (*out)->col.globs = NULL, (*out)->col.n_globs = 0;
    ptq_calibration_free(c);
    return err(st);
}

PTQ_API ptq_err ptq_calibration_load(const ptq_model *m, const char *stats_path, ptq_calibration **out)
{
    ptq_status st = PTQ_OK;
    uint64_t images = 0;
    ptq_calibration *c = NULL;
    if (!out) return fail(PTQ_ERR_ARG, "ptq_calibration_load: out is NULL");
    *out = NULL;
    if (!m || !stats_path) return fail(PTQ_ERR_ARG, "ptq_calibration_load: no model or path");
    c = calloc(1, sizeof *c);
    CHECK_ALLOC(c);
    c->log = log_of(NULL);
    TRY(eng_stats_load(stats_path, m->path, &c->col, &images));
    if (c->col.n == 0) FAIL(PTQ_ERR_FORMAT, "%s: no tensor in the statistics", stats_path);
    c->images = (int)images;
    *out = c;
    c = NULL;
done:
    ptq_calibration_free(c);
    return err(st);
}

PTQ_API int ptq_calibration_images(const ptq_calibration *c)
{
    return c ? c->images : 0;
}

PTQ_API void ptq_calibration_free(ptq_calibration *c)
{
    if (!c) return;
    eng_collector_free(&c->col);
    free(c);
}

typedef struct {
    ptq_ranges pub; /* first: a ptq_ranges * is a ranges_impl * */
    io_range *r;
    io_cache_entry *e;
    const char **names;
    float *amax;
} ranges_impl;

PTQ_API ptq_err ptq_calibration_ranges(const ptq_calibration *c, const char *method, ptq_ranges **out)
{
    ptq_status st = PTQ_OK;
    calib_method cm;
    ranges_impl *ri = NULL;
    int *warn = NULL;
    if (!out) return fail(PTQ_ERR_ARG, "ptq_calibration_ranges: out is NULL");
    *out = NULL;
    if (!c || !method) return fail(PTQ_ERR_ARG, "ptq_calibration_ranges: no calibration or method");
    if (calib_method_parse(method, &cm)) FAIL(PTQ_ERR_ARG, "bad method '%s' (max, percentile[:P], entropy, mse)", method);
    int n = c->col.n;
    ri = calloc(1, sizeof *ri);
    CHECK_ALLOC(ri);
    ri->r = calloc((size_t)n + 1, sizeof *ri->r);
    ri->e = calloc((size_t)n + 1, sizeof *ri->e);
    ri->names = calloc((size_t)n + 1, sizeof *ri->names);
    ri->amax = calloc((size_t)n + 1, sizeof *ri->amax);
    warn = calloc((size_t)n + 1, sizeof *warn);
    if (!ri->r || !ri->e || !ri->names || !ri->amax || !warn) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the ranges' tables");
    TRY(eng_method_ranges(&c->col, &cm, ri->r, ri->e, warn));
    for (int i = 0; i < n; i++) {
        ri->names[i] = ri->r[i].name;
        ri->amax[i] = ri->r[i].amax;
        ri->pub.n_warnings += warn[i];
    }
    ri->pub.n_clipped = eng_warn_clipping(&c->col, ri->r, &cm, &c->log);
    calib_method_name(&cm, ri->pub.method, sizeof ri->pub.method);
    ri->pub.n = n;
    ri->pub.names = ri->names;
    ri->pub.amax = ri->amax;
    *out = &ri->pub;
    ri = NULL;
done:
    free(warn);
    ptq_ranges_free(ri ? &ri->pub : NULL);
    return err(st);
}

static ptq_status check_algorithm(const char *a)
{
    if (a && !io_cache_algorithm(a)) {
        ptq_error("bad TensorRT algorithm '%s' (EntropyCalibration2, EntropyCalibration, MinMaxCalibration, LegacyCalibration)", a);
        return PTQ_ERR_ARG;
    }
    return PTQ_OK;
}

PTQ_API ptq_err ptq_ranges_write_cache(const ptq_ranges *r, const char *path, long trt_version, const char *trt_algorithm)
{
    if (!r || !path) return fail(PTQ_ERR_ARG, "ptq_ranges_write_cache: no ranges or path");
    ptq_status st = check_algorithm(trt_algorithm);
    if (st != PTQ_OK) return err(st);
    const ranges_impl *ri = (const ranges_impl *)r;
    return err(io_cache_write(path, trt_version > 0 ? trt_version : 8601, io_cache_algorithm(trt_algorithm), ri->e, r->n));
}

PTQ_API ptq_err ptq_ranges_write_json(const ptq_ranges *r, const char *path)
{
    if (!r || !path) return fail(PTQ_ERR_ARG, "ptq_ranges_write_json: no ranges or path");
    const ranges_impl *ri = (const ranges_impl *)r;
    return err(io_ranges_write_json(path, r->method, ri->r, r->n));
}

PTQ_API void ptq_ranges_free(ptq_ranges *r)
{
    ranges_impl *ri = (ranges_impl *)r;
    if (!ri) return;
    free(ri->r);
    free(ri->e);
    free(ri->names);
    free(ri->amax);
    free(ri);
}

/* ---- quantization ---- */

struct ptq_quantized {
    eng_quantize_job job;      /* pointers into the strings below, or NULL once the call returned */
    eng_quantize_result res;
    char *model, *from_cache;
    int images, skipped;
};

PTQ_API void ptq_quantize_defaults(ptq_quantize_options *o)
{
    memset(o, 0, sizeof *o);
    o->refine_images = 32;
    o->write_float16 = -1;
    o->target = o->target_cosine = o->target_top1_drop = NAN;
}

PTQ_API ptq_err ptq_quantize(const ptq_model *m, ptq_dataset *d, const ptq_quantize_options *o, ptq_quantized **out)
{
    ptq_status st = PTQ_OK;
    ptq_quantized *q = NULL;
    ptq_quantize_options def;
    eng_calib_source src;
    if (!out) return fail(PTQ_ERR_ARG, "ptq_quantize: out is NULL");
    *out = NULL;
    if (!o) ptq_quantize_defaults(&def), o = &def;
    if (!m) return fail(PTQ_ERR_ARG, "ptq_quantize: no model");
    if (!!d + !!o->from_stats + !!o->from_cache != 1)
        return fail(PTQ_ERR_ARG, "ptq_quantize: give one of a dataset, from_stats or from_cache");
    q = calloc(1, sizeof *q);
    CHECK_ALLOC(q);
    q->model = ptq_strdup(m->path);
    CHECK_ALLOC(q->model);
    if (o->from_cache) CHECK_ALLOC(q->from_cache = ptq_strdup(o->from_cache));
    eng_quantize_job *job = &q->job;
    *job = eng_quantize_job_defaults();
    job->model = q->model;
    job->log = log_of(&o->log);
    if (d) {
        src = d->src;
        src.o.log = job->log;
        job->src = &src;
    }
    job->from_stats = o->from_stats;
    job->from_cache = q->from_cache;
    job->stats_out = o->stats_out;
    const char *method = o->method ? o->method : "percentile:99.99";
    job->output_mse = !strcmp(method, "output-mse");
    if (calib_method_parse(job->output_mse ? "mse" : method, &job->method))
        FAIL(PTQ_ERR_ARG, "bad method '%s' (max, percentile[:P], entropy, mse, output-mse)", method);
    if (o->from_cache && o->method)
        FAIL(PTQ_ERR_ARG, "a method does not apply to from_cache: the ranges are the cache's");
    job->qo.exclude_nodes = o->exclude_nodes;
    job->qo.n_exclude_nodes = o->n_exclude_nodes;
    job->qo.exclude_op_types = o->exclude_op_types;
    job->qo.n_exclude_op_types = o->n_exclude_op_types;
    job->qo.weights_fp32 = o->weights_fp32;
    job->qo.dedicated_qdq = o->dedicated_qdq;
    job->ro.bias_correction = o->bias_correction;
    job->ro.adaround_iters = o->adaround_iters;
    job->equalize = o->equalize;
    job->refine_images = o->refine_images > 0 ? o->refine_images : 32;
    job->refine_check = !o->no_refine_check;
    job->eval_float16 = !o->float_fp32;
    job->write_float16 = o->write_float16 < 0 ? -1 : o->write_float16 != 0;
    job->metric_given = o->metric != NULL;
    if (o->recipe) {
        if (strcmp(o->recipe, "fast") && (!d || d->src.input_npy))
            FAIL(PTQ_ERR_ARG, "recipe %s measures the model on images: give a dataset", o->recipe);
        TRY(eng_quantize_recipe(job, o->recipe, o->method != NULL, 0, !o->stats_out));
    }
    if ((job->ro.bias_correction || job->ro.adaround_iters || job->output_mse || job->equalize) && (!d || d->src.input_npy))
        FAIL(PTQ_ERR_ARG, "%s runs the model on images: give a dataset",
             job->output_mse ? "output-mse" : o->adaround_iters ? "AdaRound" : o->bias_correction ? "bias correction" : "equalization");
    job->target.cosine = o->target_cosine;
    job->target.top1_drop = o->target_top1_drop;
    job->target.metric = o->target;
    if (o->metric && cmp_metric_parse(o->metric, &job->target.kind))
        FAIL(PTQ_ERR_ARG, "bad metric '%s' (" CMP_METRIC_SPELLINGS ")", o->metric);
    int has_target = !isnan(o->target_cosine) || !isnan(o->target_top1_drop) || !isnan(o->target);
    if (!!o->eval_images != has_target)
        FAIL(PTQ_ERR_ARG, "auto-exclusion needs both eval_images and a target (target, target_cosine or target_top1_drop)");
    if (o->eval_images && !d) FAIL(PTQ_ERR_ARG, "auto-exclusion needs a calibration dataset");
    job->auto_exclude = o->eval_images != NULL;
    job->eval_images = o->eval_images;
    job->labels = o->labels;
    job->eval_limit = o->eval_limit;
    TRY(eng_quantize_ranges(job, &q->res));
    TRY(eng_quantize_choose_method(job, &q->res));
    TRY(eng_quantize_auto_exclude(job, &q->res));
    TRY(eng_quantize_build(job, &q->res));
    TRY(eng_quantize_refine(job, &q->res));
    if (d) {
        q->images = d->used = src.images;
        q->skipped = d->skipped = src.skipped;
    }
    /* what the caller lent is not kept */
    job->src = NULL;
    job->from_stats = job->stats_out = job->eval_images = job->labels = NULL;
    job->qo.exclude_nodes = job->qo.exclude_op_types = NULL;
    job->qo.n_exclude_nodes = job->qo.n_exclude_op_types = 0;
    free(q->res.exclude_nodes);
    q->res.exclude_nodes = NULL;
    q->res.n_exclude_nodes = 0;
    *out = q;
    q = NULL;
done:
    ptq_quantized_free(q);
    return err(st);
}

PTQ_API void ptq_quantized_info(const ptq_quantized *q, ptq_quantize_info *info)
{
    memset(info, 0, sizeof *info);
    info->reached_cosine = NAN;
    if (!q) return;
    const eng_quantize_result *r = &q->res;
    info->activations = r->rep.n_activations;
    info->weights = r->rep.n_weights;
    for (int i = 0; i < r->rep.n_nodes; i++) info->quantized_nodes += r->rep.nodes[i].state == QUANT_NODE_QUANTIZED;
    info->excluded_nodes = r->rep.n_excluded;
    info->warnings = r->warned;
    info->images = q->images;
    info->skipped = q->skipped;
    info->auto_excluded = r->excl.n_nodes;
    if (q->job.auto_exclude) info->reached_cosine = r->excl.reached.cosine;
}

PTQ_API ptq_err ptq_quantized_write(const ptq_quantized *q, const char *model_path, const char *cache_path, const char *json_path)
{
    if (!q) return fail(PTQ_ERR_ARG, "ptq_quantized_write: no result");
    eng_quantize_outputs outs = {.model = model_path, .cache = cache_path, .json = json_path};
    return err(eng_quantize_write(&q->job, &q->res, &outs));
}

PTQ_API ptq_err ptq_quantized_write_cache(const ptq_quantized *q, const char *path, long trt_version, const char *trt_algorithm)
{
    if (!q || !path) return fail(PTQ_ERR_ARG, "ptq_quantized_write_cache: no result or path");
    ptq_status st = check_algorithm(trt_algorithm);
    if (st != PTQ_OK) return err(st);
    eng_quantize_outputs outs = {.cache = path, .trt_version = trt_version, .trt_algorithm = trt_algorithm};
    return err(eng_quantize_write(&q->job, &q->res, &outs));
}

PTQ_API const char *ptq_quantized_excluded(const ptq_quantized *q, int i)
{
    return q && i >= 0 && i < q->res.excl.n_nodes ? q->res.excl.nodes[i] : NULL;
}

PTQ_API void ptq_quantized_free(ptq_quantized *q)
{
    if (!q) return;
    eng_quantize_result_free(&q->res);
    free(q->model);
    free(q->from_cache);
    free(q);
}

/* ---- compare ---- */

typedef struct {
    ptq_compare_result pub;
    eng_compare_job job;
    eng_compare_result res;
    eng_calib_source src;
    ptq_method_metrics *pm;
    char *model, *calib_images, *eval_images, *preset;
} compare_impl;

PTQ_API void ptq_compare_defaults(ptq_compare_options *o)
{
    memset(o, 0, sizeof *o);
    o->methods = "max,percentile:99.99,percentile:99.999,entropy,mse";
    o->layers = 1;
}

PTQ_API ptq_err ptq_compare(const ptq_model *m, ptq_dataset *calib, ptq_dataset *eval, const ptq_compare_options *o,
                            ptq_compare_result **out)
{
    ptq_status st = PTQ_OK;
    compare_impl *c = NULL;
    ptq_compare_options def;
    if (!out) return fail(PTQ_ERR_ARG, "ptq_compare: out is NULL");
    *out = NULL;
    if (!o) ptq_compare_defaults(&def), o = &def;
    if (!m || !calib || !eval) return fail(PTQ_ERR_ARG, "ptq_compare: no model, calibration or evaluation dataset");
    c = calloc(1, sizeof *c);
    CHECK_ALLOC(c);
    c->model = ptq_strdup(m->path);
    c->calib_images = ptq_strdup(calib->images);
    c->eval_images = ptq_strdup(eval->images);
    CHECK_ALLOC(c->model);
    CHECK_ALLOC(c->calib_images);
    CHECK_ALLOC(c->eval_images);
    if (calib->preset) CHECK_ALLOC(c->preset = ptq_strdup(calib->preset));
    eng_compare_job *job = &c->job;
    *job = eng_compare_job_defaults();
    const char *methods = o->methods ? o->methods : "max,percentile:99.99,percentile:99.999,entropy,mse";
    if (calib_methods_parse(!strcmp(methods, "all") ? "max,percentile:99.9,percentile:99.99,percentile:99.999,entropy,mse" : methods,
                            job->methods, ENG_COMPARE_MAX_METHODS, &job->n_methods))
        FAIL(PTQ_ERR_ARG, "bad methods '%s'", methods);
    if (o->metric) {
        if (cmp_metric_parse(o->metric, &job->metric))
            FAIL(PTQ_ERR_ARG, "bad metric '%s' (" CMP_METRIC_SPELLINGS ")", o->metric);
        job->metric_given = 1;
    }
    job->log = log_of(&o->log);
    job->float16 = !o->float_fp32;
    c->src = calib->src;
    c->src.o.images = c->calib_images;
    c->src.o.log = job->log;
    job->model = c->model;
    job->g = m->g;
    job->src = &c->src;
    job->eval_cfg = eval->src.cfg;
    job->eval_images = c->eval_images;
    job->eval_limit = eval->src.o.limit;
    job->labels = o->labels;
    job->preset = c->preset;
    job->qo.exclude_nodes = o->exclude_nodes;
    job->qo.n_exclude_nodes = o->n_exclude_nodes;
    job->qo.exclude_op_types = o->exclude_op_types;
    job->qo.n_exclude_op_types = o->n_exclude_op_types;
    TRY(eng_compare_calibrate(job, &c->res));
    TRY(eng_compare_build(job, &c->res));
    TRY(eng_compare_evaluate(job, &c->res));
    if (o->layers) TRY(eng_compare_layers(job, &c->res));
    c->pm = calloc((size_t)c->res.n_methods + 1, sizeof *c->pm);
    CHECK_ALLOC(c->pm);
    for (int k = 0; k < c->res.n_methods; k++) {
        const cmp_metrics *mm = &c->res.metrics[k];
        snprintf(c->pm[k].method, sizeof c->pm[k].method, "%s", c->res.tags[k]);
        c->pm[k] = (ptq_method_metrics){.cosine = mm->cosine, .sqnr_db = mm->sqnr_db, .max_abs = mm->max_abs,
                                        .top1_agree = mm->top1_agree, .top1_acc = mm->top1_acc, .seq_top1 = mm->seq_top1,
                                        .mask_iou = mm->mask_iou, .seq_chars = mm->seq_chars, .seq_exact = mm->seq_exact,
                                        .box_f1 = mm->box_f1};
        snprintf(c->pm[k].method, sizeof c->pm[k].method, "%s", c->res.tags[k]);
    }
    /* the lent strings are not kept */
    job->labels = NULL;
    job->qo.exclude_nodes = job->qo.exclude_op_types = NULL;
    job->qo.n_exclude_nodes = job->qo.n_exclude_op_types = 0;
    job->g = NULL;
    c->res.ev.g = NULL;
    c->pub.n_methods = c->res.n_methods;
    c->pub.methods = c->pm;
    c->pub.best = c->res.best;
    c->pub.criterion = c->res.criterion;
    c->pub.calib_images = c->src.images;
    c->pub.eval_images = c->res.metrics[0].images;
    c->pub.internal = c;
    *out = &c->pub;
    c = NULL;
done:
    ptq_compare_free(c ? &c->pub : NULL);
    return err(st);
}

PTQ_API ptq_err ptq_compare_write_json(const ptq_compare_result *r, const char *path)
{
    if (!r || !path) return fail(PTQ_ERR_ARG, "ptq_compare_write_json: no result or path");
    const compare_impl *c = (const compare_impl *)r;
    return err(eng_compare_write(&c->job, &c->res, NULL, path, NULL));
}

PTQ_API ptq_err ptq_compare_write_html(const ptq_compare_result *r, const char *path)
{
    if (!r || !path) return fail(PTQ_ERR_ARG, "ptq_compare_write_html: no result or path");
    const compare_impl *c = (const compare_impl *)r;
    return err(eng_compare_write(&c->job, &c->res, NULL, NULL, path));
}

PTQ_API void ptq_compare_free(ptq_compare_result *r)
{
    compare_impl *c = (compare_impl *)r;
    if (!c) return;
    eng_compare_result_free(&c->res);
    free(c->pm);
    free(c->model);
    free(c->calib_images);
    free(c->eval_images);
    free(c->preset);
    free(c);
}

/* ---- translate ---- */

PTQ_API void ptq_translate_defaults(ptq_translate_options *o)
{
    memset(o, 0, sizeof *o);
    o->trt_version = 8601;
}

PTQ_API ptq_err ptq_translate(const char *qdq_model, const char *prefix, const ptq_translate_options *o)
{
    ptq_status st = PTQ_OK;
    ptq_translate_options def;
    quant_translation tr = {0};
    char *pre = NULL;
    if (!qdq_model) return fail(PTQ_ERR_ARG, "ptq_translate: no model");
    if (!o) ptq_translate_defaults(&def), o = &def;
    TRY(check_algorithm(o->trt_algorithm));
    pre = ptq_strdup(prefix ? prefix : qdq_model);
    CHECK_ALLOC(pre);
    size_t ml = strlen(pre);
    if (!prefix && ml > 5 && !strcmp(pre + ml - 5, ".onnx")) pre[ml - 5] = 0;
    quant_translate_options to = quant_translate_defaults();
    to.propagate_concat = o->propagate_concat;
    to.propagate_pool = o->propagate_pool;
    to.propagate_mul = o->propagate_mul;
    to.dla = o->dla;
    TRY(eng_translate(qdq_model, pre, &to, o->trt_version > 0 ? o->trt_version : 8601, o->trt_algorithm, &tr));
done:
    quant_translation_free(&tr);
    free(pre);
    return err(st);
}

/* ---- sessions ---- */

struct ptq_session {
    const ptq_model *m;
    ptq_plan *plan;
    int threads, n_in;
    ptq_input_shape shapes[16]; /* of the plan, in data-input order */
    ptq_tensor in[16];
};

PTQ_API ptq_err ptq_session_create(const ptq_model *m, int threads, ptq_session **out)
{
    if (!out) return fail(PTQ_ERR_ARG, "ptq_session_create: out is NULL");
    *out = NULL;
    if (!m) return fail(PTQ_ERR_ARG, "ptq_session_create: no model");
    int n = ptq_model_num_inputs(m);
    if (n > 16) return fail(PTQ_ERR_UNSUPPORTED, "ptq_session_create: more than 16 inputs");
    ptq_session *s = calloc(1, sizeof *s);
    if (!s) return fail(PTQ_ERR_NOMEM, "out of memory allocating the session");
    s->m = m;
    s->threads = threads;
    s->n_in = n;
    *out = s;
    return PTQ_SUCCESS;
}

PTQ_API ptq_err ptq_session_run(ptq_session *s, int n, const char *const *names, const float *const *data,
                                const int64_t *const *shapes, const int *ranks)
{
    ptq_status st = PTQ_OK;
    if (!s || !data || !shapes || !ranks) return fail(PTQ_ERR_ARG, "ptq_session_run: NULL argument");
    if (n != s->n_in) FAIL(PTQ_ERR_ARG, "%s: %d inputs given, the model has %d", s->m->path, n, s->n_in);
    ptq_input_shape want[16];
    memset(want, 0, sizeof want);
    for (int k = 0; k < s->n_in; k++) {
        const char *name = ptq_model_input_name(s->m, k);
        int j = -1;
        for (int i = 0; i < n && j < 0; i++)
            if (names ? names[i] && !strcmp(names[i], name) : i == k) j = i;
        if (j < 0) FAIL(PTQ_ERR_ARG, "%s: input '%s' not given", s->m->path, name);
        if (ranks[j] < 0 || ranks[j] > PTQ_MAX_RANK || !data[j] || !shapes[j]) FAIL(PTQ_ERR_ARG, "input '%s': bad rank or data", name);
        want[k].name = name;
        want[k].rank = ranks[j];
        memcpy(want[k].dims, shapes[j], sizeof(int64_t) * (size_t)ranks[j]);
        s->in[k] = (ptq_tensor){.dtype = PTQ_F32, .rank = ranks[j], .data = (void *)data[j]};
        memcpy(s->in[k].dims, shapes[j], sizeof(int64_t) * (size_t)ranks[j]);
    }
    int same = s->plan != NULL;
    for (int k = 0; k < s->n_in && same; k++)
        same = want[k].rank == s->shapes[k].rank && !memcmp(want[k].dims, s->shapes[k].dims, sizeof want[k].dims);
    if (!same) {
        ptq_plan_destroy(s->plan);
        s->plan = NULL;
        ptq_plan_options popt = ptq_plan_defaults();
        popt.nthreads = s->threads;
        if ((st = ptq_plan_create(s->m->g, want, s->n_in, &popt, &s->plan)) != PTQ_OK) {
            ptq_error_prefix("%s: ", s->m->path);
            goto done;
        }
        memcpy(s->shapes, want, sizeof want);
    }
    TRY(ptq_plan_run(s->plan, s->in, s->n_in));
done:
    return err(st);
}

PTQ_API ptq_err ptq_session_output(const ptq_session *s, int i, const char **name, const float **data, const int64_t **shape,
                                   int *rank)
{
    if (!s || !s->plan) return fail(PTQ_ERR_ARG, "ptq_session_output: nothing has run");
    if (i < 0 || i >= s->m->g->n_outputs) return fail(PTQ_ERR_ARG, "ptq_session_output: no such output");
    const char *nm = NULL;
    const ptq_tensor *y = ptq_plan_output(s->plan, i, &nm);
    if (!y || y->dtype != PTQ_F32) return fail(PTQ_ERR_UNSUPPORTED, "ptq_session_output: output is not float32");
    if (name) *name = nm;
    if (data) *data = y->data;
    if (shape) *shape = y->dims;
    if (rank) *rank = y->rank;
    return PTQ_SUCCESS;
}

PTQ_API void ptq_session_free(ptq_session *s)
{
    if (!s) return;
    ptq_plan_destroy(s->plan);
    free(s);
}
