/* collect.c: the calibration pass (see collect.h). The observer is called in the same
 * order every batch, so a cursor finds each tensor's statistics without a lookup. */
#include "engine/collect.h"

#include <fnmatch.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "engine/runner.h"
#include "io/npy.h"
#include "io/onnx.h"
#include "io/preset.h"
#include "io/stats.h"
#include "quant/qdq.h"
#include "runtime/graph_edit.h"
#include "runtime/op.h"
#include "runtime/plan.h"

static int wanted(const eng_collector *c, const char *name)
{
    if (!c->n_globs) return 1;
    for (int i = 0; i < c->n_globs; i++)
        if (fnmatch(c->globs[i], name, 0) == 0) return 1;
    return 0;
}

/* Value lookup by name in O(log n): value indices sorted by name (ptq_graph_find_value is
 * linear, and the plan asks for every value, several times, while it fuses). */
static const ptq_graph *sort_graph;

static int by_name(const void *a, const void *b)
{
    return strcmp(sort_graph->values[*(const int *)a].name, sort_graph->values[*(const int *)b].name);
}

static int *name_index(const ptq_graph *g)
{
    int *idx = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!idx) return NULL;
    for (int v = 0; v < g->n_values; v++) idx[v] = v;
    sort_graph = g;
    qsort(idx, (size_t)g->n_values, sizeof *idx, by_name);
    return idx;
}

static int find_value(const ptq_graph *g, const int *idx, const char *name)
{
    int lo = 0, hi = g->n_values - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(g->values[idx[mid]].name, name);
        if (c == 0) return idx[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* The plan's filter: with --tensors the matching tensors; else the tensors that stand for
 * themselves or for views of them in quant_calib_tensors' answer. */
static int observed_name(const char *name, void *user)
{
    eng_collector *c = user;
    if (c->n_globs) return wanted(c, name);
    int v = find_value(c->g, c->by_name, name);
    return v >= 0 && c->source[v];
}

/* The entry of tensor `name`, created (at its value's place in plan order) when new. */
static eng_tensor_stats *entry_of(eng_collector *c, const char *name)
{
    if (c->cursor < c->n && strcmp(c->t[c->cursor].name, name) == 0) return &c->t[c->cursor];
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0) return &c->t[i];
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 256;
        eng_tensor_stats *nt = realloc(c->t, sizeof *nt * (size_t)cap);
        if (!nt) return NULL;
        c->t = nt;
        c->cap = cap;
    }
    eng_tensor_stats *e = &c->t[c->n];
    memset(e, 0, sizeof *e);
    int v = find_value(c->g, c->by_name, name);
    e->pos = v >= 0 ? c->pos[v] : c->n;
    e->name = ptq_strdup(name);
    e->stats = calib_stats_create();
    if (!e->name || !e->stats) {
        free(e->name);
        calib_stats_destroy(e->stats);
        return NULL;
    }
    c->n++;
    return e;
}

/* Tiles of a kernel's output go to the statistics part of the thread that computed them,
 * while they are in cache; the observer call after the node merges the parts. */
typedef struct {
    ptq_tile_sink sink;
    eng_collector *col;
    calib_stats *stats;
} tile_sink;

static void sink_tile(ptq_tile_sink *sk, int thread, const float *y, int64_t rows, int64_t cols, int64_t stride)
{
    tile_sink *s = (tile_sink *)sk;
    if (thread < 0 || thread >= s->col->n_parts) {
        s->col->bad_thread = 1; /* reported by the observer: the counts will not add up */
        return;
    }
    calib_part *p = s->col->parts[thread];
    calib_part_start(p, s->stats);
    calib_part_add_rows(p, y, (size_t)rows, (size_t)cols, (size_t)stride);
}

static ptq_tile_sink *make_sink(const char *name, int node, void *user)
{
    eng_collector *c = user;
    (void)node;
    eng_tensor_stats *e = entry_of(c, name);
    if (!e) return NULL; /* out of memory: the observer reports it */
    if (!e->sink) {
        tile_sink *s = calloc(1, sizeof *s);
        if (!s) return NULL;
        s->sink.tile = sink_tile;
        s->col = c;
        s->stats = e->stats;
        e->sink = s;
    }
    return e->sink;
}

/* The observer: calls come in the same order every batch, so a cursor finds the entry. */
static ptq_status observe(const char *name, int node, const ptq_tensor *t, void *user)
{
    eng_collector *c = user;
    (void)node;
    eng_tensor_stats *e = entry_of(c, name);
    if (!e) {
        ptq_error("out of memory collecting statistics");
        return PTQ_ERR_NOMEM;
    }
    c->cursor = (int)(e - c->t) + 1;
    size_t n = ptq_tensor_numel(t);
    uint64_t before = e->stats->count;
    for (int i = 0; i < c->n_parts; i++) calib_stats_take(e->stats, c->parts[i]); /* in thread order */
    uint64_t tiled = e->stats->count - before;
    if (tiled == 0) {
        int nt = c->nthreads < c->n_parts ? c->nthreads : c->n_parts;
        calib_stats_add_parts(e->stats, t->data, n, c->parts, nt);
    } else if (tiled != n || c->bad_thread) {
        ptq_error("tensor '%s': its kernel reported %llu of its %zu values", name, (unsigned long long)tiled, n);
        return PTQ_ERR_INTERNAL;
    }
    return PTQ_OK;
}

static int by_pos(const void *a, const void *b)
{
    int x = ((const eng_tensor_stats *)a)->pos, y = ((const eng_tensor_stats *)b)->pos;
    return (x > y) - (x < y);
}

/* After the pass: a view's statistics are its source's; sources observed only for their
 * views are dropped; entries in plan order. */
static ptq_status finish(eng_collector *c)
{
    if (c->want)
        for (int v = 0; v < c->g->n_values; v++) {
            int r = c->want[v];
            if (r < 0 || r == v) continue;
            int src = -1, have = 0;
            for (int i = 0; i < c->n; i++) {
                if (strcmp(c->t[i].name, c->g->values[r].name) == 0) src = i;
                if (strcmp(c->t[i].name, c->g->values[v].name) == 0) have = 1;
            }
            if (src < 0 || have) continue;
            calib_stats copy = *c->t[src].stats;
            eng_tensor_stats *e = entry_of(c, c->g->values[v].name);
            if (!e) {
                ptq_error("out of memory collecting statistics");
                return PTQ_ERR_NOMEM;
            }
            *e->stats = copy;
        }
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        int v = c->want ? find_value(c->g, c->by_name, c->t[i].name) : -1;
        if (c->want && (v < 0 || c->want[v] < 0)) {
            free(c->t[i].name);
            calib_stats_destroy(c->t[i].stats);
            free(c->t[i].sink);
            continue;
        }
        c->t[k++] = c->t[i];
    }
    c->n = k;
    if (c->n > 1) qsort(c->t, (size_t)c->n, sizeof *c->t, by_pos); /* c->t may be NULL when empty */
    return PTQ_OK;
}

/* col->want for g: quant_calib_tensors on a copy of the model, mapped back by name. */
static ptq_status calib_tensors(const ptq_graph *g, const char *model, eng_collector *col)
{
    ptq_status st = PTQ_OK;
    ptq_graph *copy = NULL;
    int *want = NULL, *copy_idx = NULL;
    col->want = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    col->source = calloc((size_t)g->n_values + 1, 1);
    CHECK_ALLOC(col->want);
    CHECK_ALLOC(col->source);
    TRY(eng_model_load(model, &copy, NULL));
    TRY(quant_calib_tensors(copy, &want));
    copy_idx = name_index(copy);
    CHECK_ALLOC(copy_idx);
    for (int v = 0; v < g->n_values; v++) {
        int c = find_value(copy, copy_idx, g->values[v].name);
        int r = c >= 0 && want[c] >= 0 ? find_value(g, col->by_name, copy->values[want[c]].name) : -1;
        col->want[v] = c >= 0 && want[c] >= 0 && r < 0 ? v : r; /* a source the upgrade made: v itself */
        if (col->want[v] >= 0) col->source[col->want[v]] = 1;
    }
done:
    if (st != PTQ_OK) ptq_error_prefix("%s: ", model);
    free(copy_idx);
    free(want);
    ptq_graph_destroy(copy);
    return st;
}

/* Warns, when some nodes of g are ops ptq does not run, which graph outputs depend on them:
 * the calibration pass leaves them out (they come after the last quantized layer), but ptq run
 * and compare cannot produce those outputs. */
static void warn_unrunnable_outputs(const ptq_graph *g, const char *model, const pp_log *log)
{
    unsigned char *bad = calloc((size_t)g->n_values + 1, 1);
    char ops[256] = "", outs[512] = "";
    size_t ko = 0, kq = 0;
    if (!bad) return;
    for (int n = 0; n < g->n_nodes; n++) { /* file order is topological after loading */
        const ptq_node *node = &g->nodes[n];
        int unsupported = ptq_op_find(node->domain, node->op_type) < 0, from_bad = 0;
        for (int i = 0; i < node->n_inputs; i++) from_bad |= node->inputs[i] >= 0 && bad[node->inputs[i]];
        if (unsupported && ko < sizeof ops && !strstr(ops, node->op_type))
            ko += (size_t)snprintf(ops + ko, sizeof ops - ko, "%s%s", ko ? ", " : "", node->op_type);
        if (unsupported || from_bad)
            for (int o = 0; o < node->n_outputs; o++)
                if (node->outputs[o] >= 0) bad[node->outputs[o]] = 1;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (bad[g->outputs[i]] && kq < sizeof outs)
            kq += (size_t)snprintf(outs + kq, sizeof outs - kq, "%s%s", kq ? ", " : "", g->values[g->outputs[i]].name);
    if (kq)
        pp_log_message(log, PP_LOG_WARNING,
                       "%s: outputs %s need ops ptq does not run (%s); calibration does not (they come after the "
                       "last quantized layer), but ptq run and compare cannot produce them",
                       model, outs, ops);
    free(bad);
}

/* 1 when some graph input of g has no declared shape or a symbolic dim. */
static int symbolic_inputs(const ptq_graph *g)
{
    for (int i = 0; i < g->n_inputs; i++) {
        const ptq_value *v = &g->values[g->inputs[i]];
        if (v->kind != PTQ_VALUE_INPUT) continue;
        if (v->t.rank < 0) return 1;
        for (int d = 0; d < v->t.rank; d++)
            if (v->t.dims[d] < 0) return 1;
    }
    return 0;
}

ptq_status eng_validate_model(const ptq_graph *g, const char *model, const ptq_input_shape *shapes, int n_shapes)
{
    ptq_status st = PTQ_OK;
    unsigned char *keep = NULL;
    ptq_graph *view = NULL;
    ptq_plan *plan = NULL;
    if (n_shapes == 0 && symbolic_inputs(g)) return PTQ_OK; /* checked at the first batch's shape */
    /* every value but those downstream of an op ptq does not run (file order is topological) */
    keep = calloc((size_t)g->n_values + 1, 1);
    CHECK_ALLOC(keep);
    memset(keep, 1, (size_t)g->n_values);
    for (int n = 0; n < g->n_nodes; n++) {
        const ptq_node *node = &g->nodes[n];
        int ok = ptq_op_find(node->domain, node->op_type) >= 0;
        for (int i = 0; i < node->n_inputs && ok; i++) ok = node->inputs[i] < 0 || keep[node->inputs[i]];
        if (!ok)
            for (int o = 0; o < node->n_outputs; o++)
                if (node->outputs[o] >= 0) keep[node->outputs[o]] = 0;
    }
    int n_dropped = 0;
    TRY(ptq_graph_view_create(g, keep, &view, &n_dropped));
    ptq_plan_options popt = ptq_plan_defaults();
    popt.bound_memory = 1; /* shapes and attributes only: no activation memory */
    if ((st = ptq_plan_create(n_dropped ? view : g, shapes, n_shapes, &popt, &plan)) != PTQ_OK)
        ptq_error_prefix("%s: ", model);
done:
    ptq_plan_destroy(plan);
    ptq_graph_view_destroy(view);
    free(keep);
    return st;
}

/* Plan order of every value: graph inputs, then node outputs in execution order. */
static ptq_status plan_order(const ptq_graph *g, int *pos)
{
    ptq_status st = PTQ_OK;
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1)), k = 0;
    CHECK_ALLOC(order);
    TRY(ptq_graph_toposort(g, order));
    for (int v = 0; v < g->n_values; v++) pos[v] = INT32_MAX;
    for (int i = 0; i < g->n_inputs; i++) pos[g->inputs[i]] = k++;
    for (int i = 0; i < g->n_nodes; i++)
        for (int o = 0; o < g->nodes[order[i]].n_outputs; o++)
            if (g->nodes[order[i]].outputs[o] >= 0) pos[g->nodes[order[i]].outputs[o]] = k++;
done:
    free(order);
    return st;
}

void eng_collector_free(eng_collector *col)
{
    for (int i = 0; i < col->n; i++) {
        free(col->t[i].name);
        calib_stats_destroy(col->t[i].stats);
        free(col->t[i].sink);
    }
    free(col->t);
    free(col->want);
    free(col->source);
    free(col->by_name);
    free(col->pos);
    for (int i = 0; i < col->n_parts; i++) calib_part_destroy(col->parts[i]);
    free(col->parts);
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
    ptq_graph *view = NULL;
    unsigned char *keep = NULL;
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
    popt.observe_filter = observed_name; /* the rest may fuse */
    popt.tile_sink = make_sink;
    popt.keep_values = 1;                /* statistics of the model's own numbers */
    popt.nthreads = o.threads;
    popt.pool = col->pool;
    col->g = g;
    if (!col->by_name && !(col->by_name = name_index(g))) FAIL(PTQ_ERR_NOMEM, "out of memory collecting statistics");
    if (!col->pos) {
        col->pos = malloc(sizeof(int) * ((size_t)g->n_values + 1));
        if (!col->pos) FAIL(PTQ_ERR_NOMEM, "out of memory collecting statistics");
        TRY(plan_order(g, col->pos));
    }
    if (!input) {
        TRY(eng_fit_preprocessing(g, model, &cfg, &o.log));
        srcp->cfg = cfg; /* later passes over the same images take it too */
        TRY(eng_check_input_dims(g, model, &cfg));
    }
    if (!col->n_globs && !col->want) TRY(calib_tensors(g, model, col));
    /* only the part of the model the observed tensors need runs: post-processing after the
     * last quantized layer (box decoding, TopK, NMS) is left out of the calibration pass */
    keep = calloc((size_t)g->n_values + 1, 1);
    CHECK_ALLOC(keep);
    for (int v = 0; v < g->n_values; v++) keep[v] = observed_name(g->values[v].name, col) != 0;
    int n_dropped = 0;
    TRY(ptq_graph_view_create(g, keep, &view, &n_dropped));
    if (n_dropped == 0) {
        ptq_graph_view_destroy(view);
        view = NULL;
    } else {
        runner.g = view;
        if (ptq_graph_check_ops(g) != PTQ_OK) warn_unrunnable_outputs(g, model, &o.log);
    }
    /* what ptq run would refuse in the part left out is refused too, before any batch runs
     * (with symbolic input dims: at the first batch's shape, below) */
    if (view && !symbolic_inputs(g)) TRY(eng_validate_model(g, model, NULL, 0));
    const ptq_graph *gp = view ? view : g; /* what the calibration plans run */
    if (input) TRY(eng_fit_batch(g, model, &o));
    else { /* the batch whose activations fit the memory budget (--memory) with the statistics */
        int n_obs = 0;
        for (int v = 0; v < g->n_values; v++) n_obs += keep[v];
        int np = popt.nthreads > 0 ? popt.nthreads : omp_get_max_threads();
        size_t stats = (size_t)n_obs * sizeof(calib_stats) + (size_t)(np > col->nthreads ? np : col->nthreads) * sizeof(calib_stats);
        TRY(eng_fit_batch_memory(gp, model, &cfg, &popt, stats, &o, &srcp->memory));
        TRY(pp_dataset_open(&o, &cfg, &d));
    }
    srcp->o.batch = o.batch; /* later passes over the same images (refinement, equalization) take it too */
    if (!col->parts) {
        int np = popt.nthreads > 0 ? popt.nthreads : omp_get_max_threads();
        if (np < col->nthreads) np = col->nthreads;
        col->parts = calloc((size_t)np, sizeof *col->parts);
        if (!col->parts) FAIL(PTQ_ERR_NOMEM, "out of memory collecting statistics");
        for (; col->n_parts < np; col->n_parts++)
            if (!(col->parts[col->n_parts] = calib_part_create())) FAIL(PTQ_ERR_NOMEM, "out of memory collecting statistics");
    }
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
            ptq_tensor xb = samples;
            xb.dims[0] = nb;
            xb.data = (float *)samples.data + (size_t)start * per;
            xb.owns_data = 0;
            ptq_tensor x = eng_model_tensor(g, &xb);
            ptq_plan **pp = nb == o.batch ? &plan : &tail_plan;
            if (!*pp) {
                ptq_input_shape s = {.name = in_name, .rank = x.rank};
                memcpy(s.dims, x.dims, sizeof s.dims);
                if (start == 0 && view && symbolic_inputs(g) && (st = eng_validate_model(g, model, &s, 1)) != PTQ_OK)
                    goto fail;
                if ((st = ptq_plan_create(gp, &s, 1, &popt, pp)) != PTQ_OK) {
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
            ptq_tensor tm = eng_model_tensor(g, &t);
            if ((st = eng_runner_ready(&runner, &t)) != PTQ_OK) goto fail; /* its messages name the shape's origin */
            if (batch_done == 0 && view && symbolic_inputs(g)) { /* the whole model, at the first shape */
                ptq_input_shape s = {.name = in_name, .rank = tm.rank};
                memcpy(s.dims, tm.dims, sizeof s.dims);
                if ((st = eng_validate_model(g, model, &s, 1)) != PTQ_OK) goto fail;
            }
            col->cursor = 0;
            if ((st = ptq_plan_run(runner.plan, &tm, 1)) != PTQ_OK) goto fail;
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
    TRY(finish(col));
    goto done;
fail:
done:
    ptq_tensor_free(&samples);
    pp_dataset_close(d);
    ptq_plan_destroy(plan);
    ptq_plan_destroy(tail_plan);
    eng_runner_free(&runner);
    ptq_graph_view_destroy(view);
    free(keep);
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
