/* collect.c: the calibration pass (see collect.h). The observer is called in the same
 * order every batch, so a cursor finds each tensor's statistics without a lookup. */
#include "engine/collect.h"

#include <fnmatch.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/runner.h"
#include "io/npy.h"
#include "io/preset.h"
#include "io/stats.h"
#include "runtime/plan.h"

static int wanted(const eng_collector *c, const char *name)
{
    if (!c->n_globs) return 1;
    for (int i = 0; i < c->n_globs; i++)
        if (fnmatch(c->globs[i], name, 0) == 0) return 1;
    return 0;
}

static int wanted_name(const char *name, void *user)
{
    return wanted(user, name);
}

/* The observer: calls come in the same order every batch, so a cursor finds the entry. */
static ptq_status observe(const char *name, int node, const ptq_tensor *t, void *user)
{
    eng_collector *c = user;
    (void)node;
    if (!wanted(c, name)) return PTQ_OK;
    eng_tensor_stats *e = NULL;
    if (c->cursor < c->n && strcmp(c->t[c->cursor].name, name) == 0) e = &c->t[c->cursor];
    for (int i = 0; !e && i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0) e = &c->t[i];
    if (!e) {
        if (c->n == c->cap) {
            int cap = c->cap ? c->cap * 2 : 256;
            eng_tensor_stats *nt = realloc(c->t, sizeof *nt * (size_t)cap);
            if (!nt) {
                ptq_error("out of memory collecting statistics");
                return PTQ_ERR_NOMEM;
            }
            c->t = nt;
            c->cap = cap;
        }
        e = &c->t[c->n++];
        e->name = ptq_strdup(name);
        e->stats = calib_stats_create();
        if (!e->name || !e->stats) {
            ptq_error("out of memory collecting statistics");
            return PTQ_ERR_NOMEM;
        }
    }
    c->cursor = (int)(e - c->t) + 1;
    calib_stats_add(e->stats, t->data, ptq_tensor_numel(t), c->nthreads);
    return PTQ_OK;
}


void eng_collector_free(eng_collector *col)
{
    for (int i = 0; i < col->n; i++) {
        free(col->t[i].name);
        calib_stats_destroy(col->t[i].stats);
    }
    free(col->t);
    free(col->image_ids);
    memset(col, 0, sizeof *col);
}

/* The ids statistics files record (io/stats.h): the dataset's, or for n samples of a .npy
 * the FNV-1a 64 of each index (8 bytes, little-endian) seeded with the file's hash. */
static ptq_status keep_image_ids(eng_collector *col, const pp_dataset *d, uint64_t npy_hash, int n)
{
    const uint64_t *ids = d ? pp_dataset_image_ids(d, &n) : NULL;
    free(col->image_ids);
    col->n_image_ids = 0;
    col->image_ids = malloc(sizeof *col->image_ids * (size_t)(n > 0 ? n : 1));
    if (!col->image_ids) {
        ptq_error("out of memory for %d image ids", n);
        return PTQ_ERR_NOMEM;
    }
    for (int k = 0; k < n; k++) {
        uint8_t le[8];
        for (int b = 0; b < 8; b++) le[b] = (uint8_t)((uint64_t)k >> (8 * b));
        col->image_ids[k] = ids ? ids[k] : io_fnv1a64(le, sizeof le, npy_hash);
    }
    col->n_image_ids = n;
    return PTQ_OK;
}

ptq_status eng_collect(const ptq_graph *g, const char *model, eng_calib_source *srcp, eng_collector *colp)
{
    ptq_status st = PTQ_OK;
    ptq_plan *plan = NULL, *tail_plan = NULL;
    eng_runner runner = {.g = g, .model = model};
    pp_dataset *d = NULL;
    ptq_tensor samples = {0};
    pp_dataset_options o = srcp->o;
    if (!o.label) o.label = "calibration";
    pp_config cfg = srcp->cfg;
    const char *input = srcp->input_npy;
    eng_collector *col = colp;
    int in_v = -1;
    for (int i = 0; i < g->n_inputs && in_v < 0; i++)
        if (g->values[g->inputs[i]].kind == PTQ_VALUE_INPUT) in_v = g->inputs[i];
    if (in_v < 0) {
        ptq_error("%s: the model has no input", model);
        st = PTQ_ERR_FORMAT;
        goto fail;
    }
    const char *in_name = g->values[in_v].name;
    ptq_plan_options popt = ptq_plan_defaults();
    if (col->nthreads < 1) col->nthreads = o.threads > 0 ? o.threads : omp_get_max_threads();
    popt.observer = observe;
    popt.observer_user = col;
    if (col->n_globs) popt.observe_filter = wanted_name; /* the rest may fuse */
    popt.nthreads = o.threads;
    int batch_done = 0, images = 0, skipped = 0;
    runner.popt = popt;
    if (input) {
        if ((st = io_hash_file(input, &srcp->list_hash)) != PTQ_OK) goto fail;
        if ((st = npy_load(input, &samples)) != PTQ_OK) goto fail;
        if (samples.dtype != PTQ_F32 || samples.rank < 1) {
            ptq_error("%s: samples must be a float32 array [N, ...]", input);
            st = PTQ_ERR_FORMAT;
            goto fail;
        }
        int64_t N = samples.dims[0];
        size_t per = N ? ptq_tensor_numel(&samples) / (size_t)N : 0;
        /* fed in batches of --batch; the last batch runs smaller (its own plan) */
        for (int64_t start = 0; start < N; start += o.batch) {
            int64_t nb = N - start < o.batch ? N - start : o.batch;
            ptq_tensor x = samples;
            x.dims[0] = nb;
            x.data = (float *)samples.data + (size_t)start * per;
            x.owns_data = 0;
            ptq_plan **pp = nb == o.batch ? &plan : &tail_plan;
            if (!*pp) {
                ptq_input_shape s = {.name = in_name, .rank = x.rank};
                memcpy(s.dims, x.dims, sizeof s.dims);
                if ((st = ptq_plan_create(g, &s, 1, &popt, pp)) != PTQ_OK) {
                    ptq_error_prefix("%s: ", model);
                    goto fail;
                }
            }
            col->cursor = 0;
            if ((st = ptq_plan_run(*pp, &x, 1)) != PTQ_OK) goto fail;
            images += (int)nb;
            batch_done++;
        }
        if ((st = keep_image_ids(col, NULL, srcp->list_hash, images)) != PTQ_OK) goto fail;
    } else {
        if ((st = eng_check_input_dims(g, model, &cfg)) != PTQ_OK || (st = pp_dataset_open(&o, &cfg, &d)) != PTQ_OK)
            goto fail;
        for (;;) {
            const float *x;
            int n;
            if ((st = pp_dataset_next(d, &x, &n, NULL, NULL)) != PTQ_OK) goto fail;
            if (n == 0) break;
            int w, h;
            pp_dataset_batch_shape(d, &w, &h);
            /* one plan per input shape (runner.h); every shape's tensors add to the same
             * per-name statistics */
            ptq_tensor t = eng_shaped_tensor(&cfg, w, h, x, n);
            if ((st = eng_runner_ready(&runner, &t)) != PTQ_OK) goto fail;
            col->cursor = 0;
            if ((st = ptq_plan_run(runner.plan, &t, 1)) != PTQ_OK) goto fail;
            batch_done++;
        }
        pp_dataset_counts(d, &images, &skipped);
        srcp->list_hash = pp_dataset_list_hash(d);
        if ((st = keep_image_ids(col, d, 0, 0)) != PTQ_OK) goto fail;
        if (images == 0) {
            ptq_error("%s: none of its %d images could be read (see the warnings above)", o.images, skipped);
            st = PTQ_ERR_IO;
            goto fail;
        }
    }
    srcp->images = images;
    srcp->skipped = skipped;
    srcp->batches = batch_done;
    goto done;
fail:
done:
    ptq_tensor_free(&samples);
    pp_dataset_close(d);
    ptq_plan_destroy(plan);
    ptq_plan_destroy(tail_plan);
    eng_runner_free(&runner);
    return st;
}

void eng_calib_source_describe(const eng_calib_source *src, char *buf, size_t cap)
{
    if (src->input_npy) {
        snprintf(buf, cap, "npy:%016llx", (unsigned long long)src->list_hash);
        return;
    }
    char text[1024];
    io_preset_describe(&src->cfg, text, sizeof text);
    snprintf(buf, cap, "%s exif=%s", text, src->o.exif ? "on" : "off");
}

ptq_status eng_stats_save(const char *path, const char *model, const eng_calib_source *src, const eng_collector *col)
{
    ptq_status st = PTQ_OK;
    io_stats s;
    char text[1200];
    io_stats_init(&s);
    TRY(io_hash_file(model, &s.model_hash));
    eng_calib_source_describe(src, text, sizeof text);
    TRY(io_stats_set_preprocess(&s, text));
    if (col->n_image_ids != src->images)
        FAIL(PTQ_ERR_ARG, "statistics: %d image ids for %d images", col->n_image_ids, src->images);
    TRY(io_stats_set_images(&s, col->image_ids, (uint64_t)col->n_image_ids));
    for (int i = 0; i < col->n; i++) TRY(io_stats_add(&s, col->t[i].name, col->t[i].stats));
    TRY(io_stats_write(path, &s));
done:
    io_stats_free(&s);
    return st;
}

ptq_status eng_stats_load(const char *path, const char *model, eng_collector *col, uint64_t *n_images)
{
    ptq_status st = PTQ_OK;
    io_stats s;
    uint64_t h;
    io_stats_init(&s);
    TRY(io_hash_file(model, &h));
    TRY(io_stats_read(path, &s));
    if (s.model_hash != h)
        FAIL(PTQ_ERR_ARG, "%s: statistics of another model than %s (model hash %016llx in the statistics, %016llx of %s)", path, model,
             (unsigned long long)s.model_hash, (unsigned long long)h, model);
    col->t = calloc((size_t)s.n_tensors + 1, sizeof *col->t);
    CHECK_ALLOC(col->t);
    col->cap = s.n_tensors + 1;
    for (int i = 0; i < s.n_tensors; i++) {
        if (!wanted(col, s.tensors[i].name)) continue;
        eng_tensor_stats *e = &col->t[col->n++];
        e->name = s.tensors[i].name; /* moved: the io_stats gives them up below */
        e->stats = s.tensors[i].stats;
        s.tensors[i].name = NULL;
        s.tensors[i].stats = NULL;
    }
    *n_images = s.n_images;
done:
    io_stats_free(&s);
    return st;
}
