/* quantize.c: see quantize.h. */
#include "engine/model.h"
#include "engine/runner.h"
#include "engine/quantize.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "io/file.h"
#include "io/onnx.h"
#include "quant/adaround.h"
#include "quant/fp16.h"
#include "quant/opset.h"
#include "quant/rules.h"
#include "runtime/graph_edit.h"

ptq_status eng_methods_ranges(const eng_collector *col, const calib_method *methods, int n_methods, io_range *const *ranges,
                              io_cache_entry *const *entries, int *warn)
{
    /* tensors are independent (the same result at any thread count); each resamples its
     * analysis histogram once for all the methods. A failure is reported for the first
     * tensor in order that failed (the message copied out of the worker thread). */
    ptq_status st = PTQ_OK;
    int first = col->n;
    char msg[512] = "";
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < col->n; i++) {
        float a[CALIB_MAX_METHODS];
        int w[CALIB_MAX_METHODS];
        ptq_status s = calib_amaxes(col->t[i].stats, methods, n_methods, a, w);
        if (s != PTQ_OK) {
#pragma omp critical /* unnamed: a named one exports a .gomp_critical_user_ symbol from libptq.so */
            if (i < first) {
                first = i;
                st = s;
                snprintf(msg, sizeof msg, "%s", ptq_last_error());
            }
            continue;
        }
        for (int m = 0; m < n_methods; m++) {
            if (ranges && ranges[m]) {
                ranges[m][i].name = col->t[i].name;
                ranges[m][i].amax = a[m];
            }
            if (entries && entries[m]) {
                entries[m][i].name = col->t[i].name;
                entries[m][i].scale = a[m] / 127.0f;
            }
        }
        if (warn) warn[i] = w[0];
    }
    if (st != PTQ_OK) ptq_error("tensor '%s': %s", col->t[first].name, msg);
    return st;
}

ptq_status eng_method_ranges(const eng_collector *col, const calib_method *m, io_range *ranges, io_cache_entry *entries,
                             int *warn)
{
    return eng_methods_ranges(col, m, 1, &ranges, &entries, warn);
}

int eng_warn_clipping(const eng_collector *col, const io_range *ranges, const calib_method *m, const pp_log *log)
{
    char name[64];
    int n = 0;
    calib_method_name(m, name, sizeof name);
    for (int i = 0; i < col->n; i++) {
        const calib_stats *s = col->t[i].stats;
        double share = calib_clip_share(s, ranges[i].amax);
        if (!(share > ENG_CLIP_WARN_SHARE)) continue;
        if (++n <= ENG_CLIP_WARN_LINES)
            pp_log_message(log, PP_LOG_WARNING, "tensor '%s': %s's amax %g clips %.1f %% of its values (they reach %g)",
                           col->t[i].name, name, (double)ranges[i].amax, 100.0 * share, (double)s->amax);
    }
    if (n > ENG_CLIP_WARN_LINES)
        pp_log_message(log, PP_LOG_WARNING, "%d more tensors: %s's amax clips more than %g %% of their values",
                       n - ENG_CLIP_WARN_LINES, name, 100.0 * ENG_CLIP_WARN_SHARE);
    return n;
}

void eng_per_method_path(const char *path, const char *tag, char *buf, size_t cap)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash)) snprintf(buf, cap, "%.*s.%s%s", (int)(dot - path), path, tag, dot);
    else snprintf(buf, cap, "%s.%s", path, tag);
}

ptq_status eng_calibrate_write(const eng_collector *col, const calib_method *methods, int n_methods, const char *cache,
                               const char *json, long trt_version, const char *trt_algorithm, const pp_log *log, int *warned)
{
    ptq_status st = PTQ_OK;
    io_outset *own = NULL; /* a library caller's files as one set (ptq's CLI has its command's set current) */
    io_range *ranges[CALIB_MAX_METHODS] = {0};
    io_cache_entry *entries[CALIB_MAX_METHODS] = {0};
    int *warn = calloc((size_t)col->n + 1, sizeof(int));
    *warned = 0;
    if (n_methods > CALIB_MAX_METHODS) FAIL(PTQ_ERR_ARG, "at most %d methods", CALIB_MAX_METHODS);
    CHECK_ALLOC(warn);
    for (int m = 0; m < n_methods; m++) {
        ranges[m] = calloc((size_t)col->n + 1, sizeof *ranges[m]);
        entries[m] = calloc((size_t)col->n + 1, sizeof *entries[m]);
        if (!ranges[m] || !entries[m]) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the ranges of method %d", m);
    }
    TRY(eng_methods_ranges(col, methods, n_methods, ranges, entries, warn));
    for (int i = 0; i < col->n; i++)
        if (warn[i]) {
            (*warned)++;
            pp_log_message(log, PP_LOG_WARNING, "tensor '%s' was all zeros or never finite: amax 1.0", col->t[i].name);
        }
    for (int m = 0; m < n_methods; m++) *warned += eng_warn_clipping(col, ranges[m], &methods[m], log);
    if (!io_outset_current()) TRY(io_outset_begin(&own, NULL));
    for (int m = 0; m < n_methods; m++) {
        char tag[64], path[4200];
        calib_method_name(&methods[m], tag, sizeof tag);
        if (cache) {
            if (n_methods > 1) eng_per_method_path(cache, tag, path, sizeof path);
            else snprintf(path, sizeof path, "%s", cache);
            TRY(io_cache_write(path, trt_version, io_cache_algorithm(trt_algorithm), entries[m], col->n));
        }
        if (json) {
            if (n_methods > 1) eng_per_method_path(json, tag, path, sizeof path);
            else snprintf(path, sizeof path, "%s", json);
            TRY(io_ranges_write_json(path, tag, ranges[m], col->n));
        }
    }
    if (own) TRY(io_outset_commit(own, NULL));
done:
    io_outset_free(own);
    for (int m = 0; m < CALIB_MAX_METHODS; m++) {
        free(ranges[m]);
        free(entries[m]);
    }
    free(warn);
    return st;
}

/* The float amax whose amax / 127.0f (what quant/ and the cache writer compute) is exactly
 * the cache's scale s, so that a QDQ model made from a cache has its scales bit for bit.
 * For every normal float, s * 127 rounded is such an amax (checked exhaustively over [1, 2):
 * it differs from the calibrated amax in 0.8 % of cases, by one ulp, but divides back to s);
 * the loop only guards the subnormal range, moving an ulp at a time toward s. */
float eng_amax_for_scale(float s)
{
    float a = (float)((double)s * 127.0);
    for (int k = 0; k < 8 && a / 127.0f != s; k++) a = nextafterf(a, a / 127.0f < s ? INFINITY : 0.0f);
    return a;
}

eng_quantize_job eng_quantize_job_defaults(void)
{
    eng_quantize_job j;
    memset(&j, 0, sizeof j);
    calib_method_parse("percentile:99.99", &j.method); /* docs/quantizing.md#recipes: entropy fails on few-element tensors */
    j.qo = quant_defaults();
    j.ro = eng_refine_defaults();
    j.ro.bias_correction = 0;
    j.refine_images = 32;
    j.refine_check = 1;
    j.target = (cmp_target){NAN, NAN, 1.0, NAN, {0}, NAN};
    cmp_metric_parse("cosine", &j.target.kind);
    j.eval_float16 = 1;
    return j;
}

ptq_status eng_quantize_recipe(eng_quantize_job *job, const char *recipe, int method_given, int no_bias, int may_equalize)
{
    int fast = !strcmp(recipe, "fast"), best = !strcmp(recipe, "best");
    if (!fast && !best && strcmp(recipe, "balanced")) {
        ptq_error("bad recipe '%s' (fast, balanced, best)", recipe);
        return PTQ_ERR_ARG;
    }
    if (fast) return PTQ_OK;
    if (!method_given) {
        static const char *const cand[] = {"max", "percentile:99.99", "percentile:99.999", "mse"};
        for (int i = 0; i < 4; i++) calib_method_parse(cand[i], &job->choose[i]);
        job->n_choose = 4;
    }
    if (!no_bias) job->ro.bias_correction = 1;
    if (best) {
        if (!job->ro.adaround_iters) job->ro.adaround_iters = quant_adaround_defaults().iters;
        job->output_mse = 1;
        if (may_equalize) job->equalize = 1;
    }
    return PTQ_OK;
}

/* Equalization of res->g (equalize.h) on the calibration images, before their pass. */
static ptq_status equalize(const eng_quantize_job *job, eng_quantize_result *res)
{
    ptq_status st = PTQ_OK;
    if (job->from_stats || job->from_cache || job->stats_out) {
        ptq_error("equalization changes the model the statistics describe: not with --from-stats, --from-cache or --stats");
        return PTQ_ERR_ARG;
    }
    if (!job->src || job->src->input_npy) {
        ptq_error("equalization runs the model on images: give calibration images");
        return PTQ_ERR_ARG;
    }
    pp_dataset_options o = job->src->o;
    o.log = job->log;
    TRY(eng_equalize_images(res->g, &o, &job->src->cfg, NULL, &res->eq));
done:
    if (st != PTQ_OK) ptq_error_prefix("%s: ", job->model);
    return st;
}

ptq_status eng_quantize_ranges(const eng_quantize_job *job, eng_quantize_result *res)
{
    ptq_status st = PTQ_OK;
    char algo[128] = ""; /* --from-cache's header: its version is kept, its algorithm is not (trtexec's is EntropyCalibration2) */
    int *warn = NULL;
    const eng_calib_source *src = job->src;
    res->col.nthreads = src && src->o.threads > 0 ? src->o.threads : omp_get_max_threads();
    TRY(eng_model_load(job->model, &res->g, &res->half));
    TRY(eng_validate_model(res->g, job->model, NULL, 0)); /* what ptq run refuses, before any work */
    if (job->equalize) TRY(equalize(job, res));
    if (job->from_stats) {
        TRY(eng_stats_load(job->from_stats, job->model, &res->col, &res->stats_images));
    } else if (job->from_cache) {
        TRY(io_cache_read(job->from_cache, &res->cached, &res->n_cached, &res->cache_version, algo, sizeof algo));
    } else {
        if (!job->src) FAIL(PTQ_ERR_ARG, "no calibration data: give images, samples, statistics or a cache");
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        TRY(eng_collect(res->g, job->model, job->src, &res->col));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        res->seconds_calibration = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (job->stats_out) TRY(eng_stats_save(job->stats_out, job->model, job->src, &res->col));
    }
    int n = job->from_cache ? res->n_cached : res->col.n;
    res->ranges = calloc((size_t)n + 1, sizeof *res->ranges);
    res->entries = calloc((size_t)n + 1, sizeof *res->entries);
    warn = calloc((size_t)n + 1, sizeof(int));
    if (!res->ranges || !res->entries || !warn) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the ranges' tables");
    res->n_ranges = n;
    if (job->from_cache) {
        for (int i = 0; i < res->n_cached; i++) {
            float a = eng_amax_for_scale(res->cached[i].scale);
            warn[i] = !(a >= 0x1p-30f); /* a zero scale: quant/ uses amax 1.0 */
            res->ranges[i].name = res->entries[i].name = res->cached[i].name;
            res->ranges[i].amax = warn[i] ? 1.0f : a;
            res->entries[i].scale = res->ranges[i].amax / 127.0f;
        }
    } else {
        TRY(eng_method_ranges(&res->col, &job->method, res->ranges, res->entries, warn)); /* in parallel over tensors */
    }
    for (int i = 0; i < n; i++)
        if (warn[i]) {
            res->warned++;
            if (job->from_cache)
                pp_log_message(&job->log, PP_LOG_WARNING, "tensor '%s' has scale %g in %s: amax 1.0", res->ranges[i].name,
                               (double)res->cached[i].scale, job->from_cache);
            else
                pp_log_message(&job->log, PP_LOG_WARNING, "tensor '%s' was all zeros or never finite: amax 1.0", res->ranges[i].name);
        }
    /* the ranges written: a method chosen by measurement warns once chosen; output-mse's are measured */
    if (!job->from_cache && !job->output_mse && job->n_choose <= 0)
        res->warned += eng_warn_clipping(&res->col, res->ranges, &job->method, &job->log);
    if (job->from_cache) snprintf(res->tag, sizeof res->tag, "cache");
    else if (job->output_mse) snprintf(res->tag, sizeof res->tag, "output-mse");
    else calib_method_name(&job->method, res->tag, sizeof res->tag);
done:
    free(warn);
    return st;
}

/* The job's exclusions followed by extra (auto-exclusion's nodes), as res->exclude_nodes. */
static ptq_status set_exclusions(const eng_quantize_job *job, eng_quantize_result *res, char *const *extra, int n_extra)
{
    const char **l = malloc(sizeof *l * (size_t)(job->qo.n_exclude_nodes + n_extra + 1));
    if (!l) {
        ptq_error("out of memory allocating the list of excluded nodes");
        return PTQ_ERR_NOMEM;
    }
    int n = 0;
    for (int i = 0; i < job->qo.n_exclude_nodes; i++) l[n++] = job->qo.exclude_nodes[i];
    for (int i = 0; i < n_extra; i++) l[n++] = extra[i];
    free(res->exclude_nodes);
    res->exclude_nodes = l;
    res->n_exclude_nodes = n;
    return PTQ_OK;
}

static void check_metric(const eng_quantize_job *job, const cmp_metrics *m, cmp_metric *out);
enum { CHECK_MIN_IMAGES = 8 };

/* The check's evaluation images: the evaluation images, or every fourth calibration image
 * (ev->o shard 3 of 4); 0 with *why set when there are too few or they are a shard. */
static int check_images(const eng_quantize_job *job, cmp_eval *ev, char *why, size_t cap)
{
    if (job->eval_images) {
        ev->o.images = job->eval_images;
        ev->o.limit = job->eval_limit;
        ev->o.shuffle = 0;
        return 1;
    }
    if (!job->src || !job->src->o.images) {
        snprintf(why, cap, "no images to measure on: give --eval-images");
        return 0;
    }
    pp_dataset *d = NULL;
    pp_dataset_options lo = job->src->o;
    int files = 0;
    lo.quiet = 1;
    lo.limit = 0;
    if (pp_dataset_open(&lo, &job->src->cfg, &d) == PTQ_OK) files = pp_dataset_files(d);
    pp_dataset_close(d);
    if (job->src->o.limit > 0 && files > job->src->o.limit) files = job->src->o.limit; /* what the user gave to calibrate */
    if (job->src->o.shard_count > 1) {
        snprintf(why, cap, "the calibration images are a shard: give --eval-images");
        return 0;
    }
    if (files < 2 * CHECK_MIN_IMAGES) {
        snprintf(why, cap, "%d calibration images, fewer than %d to hold some out: give --eval-images", files, 2 * CHECK_MIN_IMAGES);
        return 0;
    }
    ev->o.shard_count = 4;
    ev->o.shard_index = 3;
    /* at most a quarter of --limit, 64 without it */
    ev->o.limit = job->eval_limit > 0 ? job->eval_limit : job->src->o.limit > 0 ? (job->src->o.limit / 4 > CHECK_MIN_IMAGES ? job->src->o.limit / 4 : CHECK_MIN_IMAGES) : 64;
    return 1;
}

ptq_status eng_quantize_choose_method(const eng_quantize_job *job, eng_quantize_result *res)
{
    ptq_status st = PTQ_OK;
    int n = job->n_choose, nr = res->n_ranges;
    if (n <= 0) return PTQ_OK;
    if (job->from_cache) {
        ptq_error("choosing the method needs statistics, not a cache");
        return PTQ_ERR_ARG;
    }
    cmp_cache *cc = cmp_cache_create(eng_cache_budget_bytes(job->src ? &job->src->o : NULL));
    ptq_graph *gq[8] = {0};
    io_range *r[8] = {0};
    io_cache_entry *e[8] = {0};
    int *warn = calloc((size_t)nr + 1, sizeof(int));
    cmp_metrics m[8];
    char why[160] = "";
    cmp_eval ev = {.g = res->g, .model = job->model, .cfg = job->src ? job->src->cfg : (pp_config){0},
                   .labels = job->eval_images ? job->labels : NULL, .cache = cc, .eq = &res->eq, .metric = job->target.kind,
                   .float16 = job->eval_float16};
    if (job->src) ev.o = job->src->o;
    else ev.o = pp_dataset_defaults();
    ev.nthreads = ev.o.threads;
    ev.o.log = job->log;
    CHECK_ALLOC(cc);
    CHECK_ALLOC(warn);
    if (!job->src && job->eval_images) FAIL(PTQ_ERR_ARG, "choosing the method on --eval-images needs the preprocessing of calibration images");
    if (!check_images(job, &ev, why, sizeof why)) {
        pp_log_message(&job->log, PP_LOG_WARNING, "the method is not chosen by measurement (%s): %s", why, res->tag);
        if (!job->output_mse) res->warned += eng_warn_clipping(&res->col, res->ranges, &job->method, &job->log);
        goto done;
    }
    TRY(eng_fit_batch(res->g, job->model, &ev.o));
    for (int k = 0; k < n; k++) {
        quant_report rep = {0};
        CHECK_ALLOC(r[k] = calloc((size_t)nr + 1, sizeof *r[k]));
        CHECK_ALLOC(e[k] = calloc((size_t)nr + 1, sizeof *e[k]));
        TRY(eng_method_ranges(&res->col, &job->choose[k], r[k], e[k], warn));
        st = cmp_build_qdq(&ev, r[k], nr, &job->qo, &gq[k], &rep);
        quant_report_free(&rep);
        if (st != PTQ_OK) goto done;
    }
    ev.o.label = "choosing the method";
    TRY(cmp_evaluate(&ev, gq, n, m));
    cmp_metric metric;
    check_metric(job, &m[0], &metric);
    cmp_metric_name(&metric, res->check_metric, sizeof res->check_metric);
    int best = 0;
    for (int k = 0; k < n; k++) {
        res->choose_metric[k] = cmp_metric_value(&metric, &m[k]);
        res->choose_cosine[k] = m[k].cosine;
        double a = res->choose_metric[k], b = res->choose_metric[best];
        if (a > b || (a == b && m[k].cosine > m[best].cosine)) best = k;
    }
    res->chosen = best;
    res->choose_images = m[0].images;
    free(res->eval_model); /* the refinement check starts from the chosen model: measured here */
    res->eval_model = NULL;
    TRY(onnx_model_serialize(gq[best], &res->eval_model, &res->eval_model_len));
    res->eval_metrics = m[best];
    cmp_cache_destroy(res->eval_cache);
    res->eval_cache = cc;
    cc = NULL;
    memcpy(res->ranges, r[best], sizeof *res->ranges * (size_t)nr);
    memcpy(res->entries, e[best], sizeof *res->entries * (size_t)nr);
    if (job->output_mse) snprintf(res->tag, sizeof res->tag, "output-mse");
    else calib_method_name(&job->choose[best], res->tag, sizeof res->tag);
    if (!job->output_mse) res->warned += eng_warn_clipping(&res->col, res->ranges, &job->choose[best], &job->log);
done:
    for (int k = 0; k < n; k++) {
        ptq_graph_destroy(gq[k]);
        free(r[k]);
        free(e[k]);
    }
    free(warn);
    cmp_cache_destroy(cc);
    return st;
}

ptq_status eng_quantize_auto_exclude(const eng_quantize_job *job, eng_quantize_result *res)
{
    ptq_status st = PTQ_OK;
    if (!job->auto_exclude) return PTQ_OK;
    if (!job->src || !job->eval_images) {
        ptq_error("auto-exclusion needs calibration images and evaluation images");
        return PTQ_ERR_ARG;
    }
    cmp_cache *cc = cmp_cache_create(eng_cache_budget_bytes(&job->src->o));
    cmp_target tg = job->target;
    cmp_eval ev = {.g = res->g, .model = job->model, .o = job->src->o, .cfg = job->src->cfg, .labels = job->labels,
                   .float16 = job->eval_float16,
                   .nthreads = job->src->o.threads, .cache = cc, .metric = tg.kind, .eq = &res->eq};
    ev.o.images = job->eval_images;
    ev.o.limit = job->eval_limit;
    ev.o.shuffle = 0;
    ev.o.log = job->log;
    ptq_graph *gq = NULL;
    quant_report r0 = {0};
    cmp_layer *layers = NULL;
    int n_layers = 0;
    cmp_metrics m;
    if (!cc) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the calibration cache");
    ev.o.label = "auto-exclude: FP32 baseline";
    TRY(cmp_target_baseline(&ev, &tg));
    ev.o.label = "auto-exclude: evaluating";
    TRY(cmp_build_qdq(&ev, res->ranges, res->n_ranges, &job->qo, &gq, &r0));
    TRY(cmp_evaluate(&ev, &gq, 1, &m));
    if (cmp_meets(&tg, &m)) {
        res->excl.reached = m;
    } else {
        ev.o.label = "auto-exclude: layer-wise errors";
        TRY(cmp_layers(&ev, gq, &layers, &n_layers));
        TRY(cmp_auto_exclude(&ev, res->ranges, res->n_ranges, &job->qo, gq, layers, n_layers, &tg, &res->excl));
    }
    TRY(set_exclusions(job, res, res->excl.nodes, res->excl.n_nodes));
done:
    cmp_layers_free(layers, n_layers);
    quant_report_free(&r0);
    ptq_graph_destroy(gq);
    cmp_cache_destroy(cc);
    return st;
}

static int lookup(const char *name, float *amax, void *user)
{
    eng_quantize_result *t = user;
    for (int i = 0; i < t->n_ranges; i++)
        if (strcmp(t->ranges[i].name, name) == 0) {
            *amax = t->ranges[i].amax;
            return 1;
        }
    for (int i = 0; i < t->n_missing; i++)
        if (strcmp(t->missing[i], name) == 0) return 0;
    if (t->n_missing == t->cap_missing) {
        int cap = t->cap_missing ? 2 * t->cap_missing : 16;
        char **m = realloc(t->missing, sizeof *m * (size_t)cap);
        if (!m) return 0; /* out of memory: only the report loses the name */
        t->missing = m;
        t->cap_missing = cap;
    }
    if ((t->missing[t->n_missing] = ptq_strdup(name)) != NULL) t->n_missing++;
    return 0;
}

ptq_status eng_quantize_build(const eng_quantize_job *job, eng_quantize_result *res)
{
    ptq_status st = PTQ_OK;
    int n_const = 0;
    ptq_graph *g = res->g;
    if (!res->exclude_nodes) TRY(set_exclusions(job, res, NULL, 0));
    res->opset0 = ptq_graph_opset(g, "");
    TRY(ptq_graph_constants_to_initializers(g, &n_const));
    if ((st = quant_upgrade_opset(g, 13, &res->n_upgraded)) != PTQ_OK) {
        ptq_error_prefix("%s: ", job->model);
        goto done;
    }
    quant_options qo = job->qo;
    qo.range = lookup;
    qo.range_user = res;
    qo.exclude_nodes = res->exclude_nodes;
    qo.n_exclude_nodes = res->n_exclude_nodes;
    if ((st = quant_insert_qdq(g, &qo, &res->rep)) != PTQ_OK) {
        ptq_error_prefix("%s: ", job->model);
        goto done;
    }
    for (int i = 0; i < res->rep.n_nodes; i++) /* quant/qdq.c's ort_limits: the reason names the rule */
        if (res->rep.nodes[i].state == QUANT_NODE_UNSUPPORTED && strncmp(res->rep.nodes[i].reason, "input kept float: ONNX Runtime", 30) == 0)
            pp_log_message(&job->log, PP_LOG_WARNING, "%s '%s': %s", res->rep.nodes[i].op_type, res->rep.nodes[i].node_name,
                           res->rep.nodes[i].reason);
    res->warned += res->rep.n_ort_float;
    /* weighted layers the rules would quantize but that keep float weights: named, counted */
    int n_weighted = 0, n_float = 0, first = -1;
    for (int i = 0; i < res->rep.n_nodes; i++) {
        const quant_node_report *r = &res->rep.nodes[i];
        if (!quant_is_weighted_op(r->op_type) || r->state == QUANT_NODE_EXCLUDED) continue;
        n_weighted++;
        if (r->state != QUANT_NODE_UNSUPPORTED) continue;
        if (first < 0) first = i;
        n_float++;
    }
    if (n_float) {
        const quant_node_report *r = &res->rep.nodes[first];
        pp_log_message(&job->log, PP_LOG_WARNING, "%d of %d Conv/ConvTranspose/Gemm/MatMul layers keep float weights: %s '%s': %s%s",
                       n_float, n_weighted, r->op_type, r->node_name, r->reason, n_float > 1 ? " (--report lists the others)" : "");
        res->warned++;
    }
    for (int i = 0; i < res->rep.n_unmatched; i++)
        pp_log_message(&job->log, PP_LOG_WARNING, "exclusion '%s' matches no node", res->rep.unmatched[i]);
    res->warned += res->rep.n_unmatched;
    for (int i = 0; i < res->n_missing; i++)
        pp_log_message(&job->log, PP_LOG_WARNING, "tensor '%s' has no range in %s: the nodes reading it stay float", res->missing[i],
                       job->from_cache ? job->from_cache : job->from_stats ? job->from_stats : "the calibration");
    res->warned += res->n_missing;
done:
    return st;
}

/* --method output-mse: the candidates of an activation are the methods' answers. */
static int candidates(const char *name, float *amax, int cap, void *user)
{
    static const char *const methods[] = {"max", "percentile:99.9", "percentile:99.99", "percentile:99.999", "entropy", "mse"};
    const eng_quantize_result *r = user;
    for (int i = 0; i < r->col.n; i++) {
        if (strcmp(r->col.t[i].name, name)) continue;
        int n = 0;
        for (int m = 0; m < 6 && n < cap; m++) {
            calib_method cm;
            int warn = 0;
            calib_method_parse(methods[m], &cm);
            float a = 0;
            if (calib_amax(r->col.t[i].stats, &cm, &a, &warn) != PTQ_OK) return -1; /* the refinement fails */
            if (!warn) amax[n++] = a;
        }
        return n;
    }
    return 0;
}

static void chosen(const char *name, float amax, void *user)
{
    eng_quantize_result *r = user;
    for (int i = 0; i < r->n_ranges; i++)
        if (!strcmp(r->ranges[i].name, name)) {
            r->ranges[i].amax = amax;
            r->entries[i].scale = amax / 127.0f;
        }
}

/* What a refinement may change in the QDQ graph and the ranges: initializer data (scales,
 * int8 codes, biases), and a bias input added to a Conv without one. */
typedef struct {
    int n_nodes, n_init;
    int *n_inputs;
    void **data;
    size_t *bytes;
    io_range *ranges;
    io_cache_entry *entries;
} snapshot;

static void snapshot_free(snapshot *s)
{
    for (int i = 0; s->data && i < s->n_init; i++) free(s->data[i]);
    free(s->data);
    free(s->bytes);
    free(s->n_inputs);
    free(s->ranges);
    free(s->entries);
    memset(s, 0, sizeof *s);
}

static ptq_status snapshot_take(const ptq_graph *g, const eng_quantize_result *res, snapshot *s)
{
    ptq_status st = PTQ_OK;
    snapshot_free(s);
    s->n_nodes = g->n_nodes;
    s->n_init = g->n_initializers;
    CHECK_ALLOC(s->n_inputs = malloc(sizeof(int) * ((size_t)g->n_nodes + 1)));
    CHECK_ALLOC(s->data = calloc((size_t)g->n_initializers + 1, sizeof(void *)));
    CHECK_ALLOC(s->bytes = calloc((size_t)g->n_initializers + 1, sizeof(size_t)));
    CHECK_ALLOC(s->ranges = malloc(sizeof *s->ranges * ((size_t)res->n_ranges + 1)));
    CHECK_ALLOC(s->entries = malloc(sizeof *s->entries * ((size_t)res->n_ranges + 1)));
    for (int n = 0; n < g->n_nodes; n++) s->n_inputs[n] = g->nodes[n].n_inputs;
    for (int i = 0; i < g->n_initializers; i++) {
        const ptq_tensor *t = &g->values[g->initializers[i]].t;
        s->bytes[i] = t->data ? ptq_tensor_nbytes(t) : 0;
        CHECK_ALLOC(s->data[i] = malloc(s->bytes[i] ? s->bytes[i] : 1));
        if (s->bytes[i]) memcpy(s->data[i], t->data, s->bytes[i]);
    }
    if (res->n_ranges) {
        memcpy(s->ranges, res->ranges, sizeof *s->ranges * (size_t)res->n_ranges);
        memcpy(s->entries, res->entries, sizeof *s->entries * (size_t)res->n_ranges);
    }
done:
    return st;
}

static void snapshot_restore(ptq_graph *g, eng_quantize_result *res, const snapshot *s)
{
    for (int n = 0; n < s->n_nodes; n++) /* the biases added to Convs go */
        while (g->nodes[n].n_inputs > s->n_inputs[n]) {
            int v = g->nodes[n].inputs[--g->nodes[n].n_inputs];
            if (v >= 0) ptq_graph_drop_initializer_if_unused(g, v);
        }
    for (int i = 0; i < s->n_init; i++)
        if (s->bytes[i]) memcpy(g->values[g->initializers[i]].t.data, s->data[i], s->bytes[i]);
    if (res->n_ranges) {
        memcpy(res->ranges, s->ranges, sizeof *s->ranges * (size_t)res->n_ranges);
        memcpy(res->entries, s->entries, sizeof *s->entries * (size_t)res->n_ranges);
    }
}

/* The metric the check goes by: the user's, else the task's that applies to output 0. */
static void check_metric(const eng_quantize_job *job, const cmp_metrics *m, cmp_metric *out)
{
    *out = job->target.kind;
    if (job->metric_given) return;
    cmp_metric_parse("cosine", out);
    /* against the user's labels where they give a task metric, as compare chooses */
    if (!isnan(m->hmean)) cmp_metric_parse("hmean", out);
    else if (!isnan(m->miou)) cmp_metric_parse("miou", out);
    else if (!isnan(m->map)) cmp_metric_parse("map", out);
    else if (!isnan(m->cer)) cmp_metric_parse("text-chars", out);
    else if (!isnan(m->top1_agree)) cmp_metric_parse("top1", out);
    else if (!isnan(m->box_f1)) cmp_metric_parse("box-f1", out);
    else if (!isnan(m->mask_iou)) cmp_metric_parse("mask-iou:0.3", out);
    else if (!isnan(m->seq_chars)) cmp_metric_parse("seq-chars", out);
    else if (!isnan(m->seq_top1)) cmp_metric_parse("seq-top1", out);
}

static void add_report(eng_refine_report *to, const eng_refine_report *r)
{
    to->layers = r->layers;
    to->images = r->images;
    to->corrected += r->corrected;
    to->rounded += r->rounded;
    to->scales += r->scales;
    to->passes += r->passes;
    to->segments += r->segments;
    to->peak_memory = r->peak_memory > to->peak_memory ? r->peak_memory : to->peak_memory;
    to->peak_spilled = r->peak_spilled > to->peak_spilled ? r->peak_spilled : to->peak_spilled;
    to->codes_changed += r->codes_changed;
    to->max_shift = r->max_shift > to->max_shift ? r->max_shift : to->max_shift;
    to->seconds_passes += r->seconds_passes;
    to->seconds_scales += r->seconds_scales;
    to->seconds_adaround += r->seconds_adaround;
    to->seconds_total += r->seconds_total;
}

/* A QDQ model as the refinement check evaluates it (its float part rounded to FP16 with
 * ev->float16), serialized, and its metrics on the check's images. */
typedef struct {
    uint8_t *bytes;
    size_t len;
    cmp_metrics m;
} measured;

/* The metrics of g on ev's images into *out, and g as evaluated into *now (replaced): those of
 * *known when g is that model byte for byte (the same model on the same images and FP32
 * outputs: the same metrics, without running it), else measured. */
static ptq_status check_measure(const cmp_eval *ev, const ptq_graph *g, const measured *known, measured *now, cmp_metrics *out)
{
    ptq_status st = PTQ_OK;
    ptq_graph *e = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    free(now->bytes);
    now->bytes = NULL;
    TRY(onnx_model_serialize(g, &buf, &len));
    if (ev->float16) {
        quant_fp16_report fr;
        TRY(onnx_model_load_buffer(buf, len, NULL, ev->model, &e));
        TRY(quant_fp16_simulate(e, &fr));
        free(buf);
        buf = NULL;
        TRY(onnx_model_serialize(e, &buf, &len));
    }
    if (known && known->bytes && known->len == len && !memcmp(known->bytes, buf, len)) {
        *out = known->m;
    } else {
        ptq_graph *run = e ? e : (ptq_graph *)g; /* cmp_evaluate only reads it */
        TRY(cmp_evaluate(ev, &run, 1, out));
    }
    now->bytes = buf;
    now->len = len;
    now->m = *out;
    buf = NULL;
done:
    free(buf);
    ptq_graph_destroy(e);
    return st;
}

ptq_status eng_quantize_refine(const eng_quantize_job *job, eng_quantize_result *res)
{
    ptq_status st = PTQ_OK;
    eng_refine_options ro = job->ro;
    ro.output_aware = job->output_mse;
    if (!(ro.bias_correction || ro.adaround_iters || ro.output_aware)) return PTQ_OK;
    if (!job->src || job->src->input_npy) {
        ptq_error("refinement runs the model on images: give calibration images");
        return PTQ_ERR_ARG;
    }
    /* the FP32 model as the QDQ graph was made from it: constants as initializers, opset 13 */
    ptq_graph *fp = NULL;
    int fp_upgraded = 0, fp_const = 0;
    pp_dataset_options ro_o = job->src->o;
    /* the first refine_images of the calibration images (--limit caps both) */
    ro_o.limit = ro_o.limit > 0 && ro_o.limit < job->refine_images ? ro_o.limit : job->refine_images;
    ro_o.label = "refine";
    ro_o.log = job->log;
    ro.nthreads = job->src->o.threads;
    ro.seed = job->src->o.seed; /* --seed: the samples' draw too */
    ro.candidates = candidates;
    ro.on_amax = chosen;
    ro.user = res;
    ro.log = job->log;
    cmp_cache *cc = NULL;
    measured chosen = {res->eval_model, res->eval_model_len, res->eval_metrics}, cur_model = {0}, step_model = {0};
    snapshot snap = {0};
    eng_dataset_source ds = {0};
    int ds_made = 0;
    res->n_steps = 0;
    res->check_images = 0;
    res->check_skipped[0] = 0;
    TRY(eng_model_load(job->model, &fp, NULL));
    TRY(ptq_graph_constants_to_initializers(fp, &fp_const));
    TRY(quant_upgrade_opset(fp, 13, &fp_upgraded));
    TRY(eng_equalize_apply(fp, &res->eq)); /* the FP32 model the QDQ one was made from */

    /* the check's images: the evaluation images, or every fourth calibration image, which the
     * refinement then leaves out */
    cmp_eval ev = {.g = fp, .model = job->model, .o = job->src->o, .cfg = job->src->cfg, .metric = job->target.kind,
                   .labels = job->eval_images ? job->labels : NULL, .nthreads = job->src->o.threads,
                   .float16 = job->eval_float16};
    ev.o.shuffle = job->src->o.shuffle;
    ev.o.log = job->log;
    if (job->refine_check && check_images(job, &ev, res->check_skipped, sizeof res->check_skipped) && !job->eval_images) {
        ro_o.shard_count = 4; /* the refinement leaves the held-out images out */
        ro_o.shard_index = 3;
        ro_o.shard_invert = 1;
    }
    int check = job->refine_check && !res->check_skipped[0];
    TRY(eng_fit_batch(fp, job->model, &ro_o));
    eng_source es = eng_source_dataset(&ds, &ro_o, &job->src->cfg);
    ds_made = 1;
    if (!check) {
        TRY(eng_refine(res->g, fp, &es, &ro, &res->rr));
        res->refined = 1;
        goto done;
    }

    /* each refinement on its own, in order, kept where the metric says it helps */
    TRY(eng_fit_batch(fp, job->model, &ev.o));
    /* the method choice's images and FP32 outputs, when it measured on these images (the same
     * check_images), and its chosen model: what the check measures first, unless the build changed it */
    if (res->eval_cache && res->choose_images > 0) {
        cc = res->eval_cache;
        res->eval_cache = NULL;
    } else {
        chosen.bytes = NULL;
        CHECK_ALLOC(cc = cmp_cache_create(eng_cache_budget_bytes(&job->src->o)));
    }
    ev.cache = cc;
    cmp_metrics m;
    cmp_metric metric;
    ev.o.label = "refine: check";
    TRY(check_measure(&ev, res->g, &chosen, &cur_model, &m));
    check_metric(job, &m, &metric);
    cmp_metric_name(&metric, res->check_metric, sizeof res->check_metric);
    res->check_images = m.images;
    double cur = cmp_metric_value(&metric, &m), cur_cos = m.cosine;
    static const char *const names[3] = {"output-aware scales", "AdaRound", "bias correction"};
    for (int k = 0; k < 3; k++) {
        eng_refine_options one = ro;
        one.output_aware = k == 0 && ro.output_aware;
        one.adaround_iters = k == 1 ? ro.adaround_iters : 0;
        one.bias_correction = k == 2 && ro.bias_correction;
        if (!one.output_aware && !one.adaround_iters && !one.bias_correction) continue;
        eng_refine_report rr;
        TRY(snapshot_take(res->g, res, &snap));
        TRY(eng_refine(res->g, fp, &es, &one, &rr));
        add_report(&res->rr, &rr);
        TRY(check_measure(&ev, res->g, NULL, &step_model, &m));
        struct eng_refine_step *s = &res->steps[res->n_steps++];
        s->name = names[k];
        s->before = cur;
        s->cos_before = cur_cos;
        s->after = cmp_metric_value(&metric, &m);
        s->cos_after = m.cosine;
        s->kept = s->after > s->before || (s->after == s->before && !(s->cos_after < s->cos_before));
        if (s->kept) {
            cur = s->after;
            cur_cos = s->cos_after;
            measured t = cur_model; /* the model measured is the current one */
            cur_model = step_model;
            step_model = t;
        } else {
            snapshot_restore(res->g, res, &snap);
            if (k == 0) /* the ranges are the method's again */
                calib_method_name(job->n_choose && res->choose_images > 0 ? &job->choose[res->chosen] : &job->method, res->tag,
                                  sizeof res->tag);
        }
    }
    /* the model as written: a dropped refinement must have left no trace, so it is the model
     * measured last as kept, byte for byte, or it is measured again and must score the same */
    TRY(check_measure(&ev, res->g, &cur_model, &step_model, &m));
    res->check_final = cmp_metric_value(&metric, &m);
    if (!(res->check_final == cur) && !(isnan(cur) && isnan(res->check_final)))
        FAIL(PTQ_ERR_INTERNAL, "refinement check: the model measures %.6f after the dropped refinements were undone, not %.6f",
             res->check_final, cur);
    res->refined = 1;
done:
    free(cur_model.bytes);
    free(step_model.bytes);
    snapshot_free(&snap);
    cmp_cache_destroy(cc);
    if (ds_made) eng_source_dataset_free(&ds);
    ptq_graph_destroy(fp);
    if (st != PTQ_OK) ptq_error_prefix("%s: ", job->model);
    return st;
}

ptq_status eng_quantize_write(const eng_quantize_job *job, const eng_quantize_result *res, const eng_quantize_outputs *out)
{
    ptq_status st = PTQ_OK;
    io_outset *own = NULL; /* a library caller's files as one set (ptq's CLI has its command's set current) */
    long version = out->trt_version ? out->trt_version : job->from_cache ? res->cache_version : 8601;
    if (job->equalize && out->cache) /* its scales describe the equalized tensors, which the FP32 file lacks */
        FAIL(PTQ_ERR_ARG, "an equalized model's cache fits only the model `ptq translate` writes from its QDQ model, not %s",
             job->model);
    /* a float16 model keeps its interface: float16 inputs and outputs, and by default its float
     * part in float16 (quant_fp16_convert: float32 Q/DQ scales between Casts, opset 13) */
    if (out->model && (job->write_float16 > 0 || (job->write_float16 < 0 && res->half.computes_half))) {
        quant_fp16_report fr;
        TRY(quant_fp16_convert(res->g, &fr));
    }
    if (out->model && res->half.n_io) {
        int casts;
        TRY(quant_fp16_restore_io(res->g, &res->half, &casts));
    }
    if (!io_outset_current()) TRY(io_outset_begin(&own, NULL));
    if (out->model) TRY(onnx_model_save(res->g, out->model));
    if (out->cache) TRY(io_cache_write(out->cache, version, io_cache_algorithm(out->trt_algorithm), res->entries, res->n_ranges));
    if (out->json) TRY(io_ranges_write_json(out->json, res->tag, res->ranges, res->n_ranges));
    if (out->report) {
        io_atomic_file f;
        TRY(io_atomic_open(&f, out->report));
        static const char *const states[] = {"quantized", "float", "excluded", "not quantized"};
        for (int i = 0; i < res->rep.n_nodes; i++)
            fprintf(f.fp, "%s\t%s\t%s\t%s\n", res->rep.nodes[i].node_name, res->rep.nodes[i].op_type,
                    states[res->rep.nodes[i].state], res->rep.nodes[i].reason);
        TRY(io_atomic_commit(&f));
    }
    if (own) TRY(io_outset_commit(own, out->model));
done:
    io_outset_free(own);
    return st;
}

void eng_quantize_result_free(eng_quantize_result *res)
{
    quant_report_free(&res->rep);
    cmp_exclusion_free(&res->excl);
    eng_equalization_free(&res->eq);
    free(res->ranges);
    free(res->entries);
    free(res->exclude_nodes);
    io_cache_free(res->cached, res->n_cached);
    for (int i = 0; i < res->n_missing; i++) free(res->missing[i]);
    free(res->missing);
    cmp_cache_destroy(res->eval_cache);
    free(res->eval_model);
    eng_collector_free(&res->col);
    ptq_graph_destroy(res->g);
    quant_fp16_widened_free(&res->half);
    memset(res, 0, sizeof *res);
}
