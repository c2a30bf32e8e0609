/* compare.c: QDQ variants against FP32 on held-out images (see compare.h). */
#include "engine/compare.h"
#include "engine/compare_metrics.h"
#include "engine/runner.h"

#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/file.h"
#include "io/onnx.h"
#include "quant/fp16.h"
#include "quant/opset.h"
#include "runtime/graph_edit.h"
#include "runtime/plan.h"

/* ---- QDQ variants ---- */

typedef struct {
    const io_range *r;
    int n;
} range_set;

static int range_lookup(const char *name, float *amax, void *user)
{
    const range_set *s = user;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->r[i].name, name) == 0) {
            *amax = s->r[i].amax;
            return 1;
        }
    return 0;
}

ptq_status cmp_build_qdq(const cmp_eval *ev, const io_range *ranges, int n, const quant_options *qopt, ptq_graph **out,
                         quant_report *report)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    int changed;
    range_set set = {ranges, n};
    quant_options q = *qopt;
    q.range = range_lookup;
    q.range_user = &set;
    TRY(onnx_model_load(ev->model, &g));
    TRY(ptq_graph_constants_to_initializers(g, &changed));
    if (ev->eq) TRY(eng_equalize_apply(g, ev->eq));
    TRY(quant_upgrade_opset(g, 13, &changed));
    TRY(quant_insert_qdq(g, &q, report));
    if (ev->float16) {
        quant_fp16_report fr;
        TRY(quant_fp16_simulate(g, &fr));
    }
    *out = g;
    g = NULL;
done:
    ptq_graph_destroy(g);
    return st;
}

ptq_status cmp_evaluate_graph(const cmp_eval *ev, const ptq_graph *qdq, cmp_metrics *out)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = (ptq_graph *)qdq; /* only read without float16 */
    uint8_t *buf = NULL;
    size_t len;
    if (ev->float16) { /* a copy: serialized and read back */
        quant_fp16_report fr;
        g = NULL;
        TRY(onnx_model_serialize(qdq, &buf, &len));
        TRY(onnx_model_load_buffer(buf, len, NULL, ev->model, &g));
        TRY(quant_fp16_simulate(g, &fr));
    }
    st = cmp_evaluate(ev, &g, 1, out);
done:
    free(buf);
    if (g != qdq) ptq_graph_destroy(g);
    return st;
}

/* ---- labels ---- */

typedef struct {
    char **keys;   /* file: image base names; folders: class folder names, sorted */
    int *labels;
    int *line;     /* file: the line of each key */
    char *used;    /* file: the key named an evaluation image */
    int n, folders;
} label_set;

static void labels_free(label_set *l)
{
    for (int i = 0; i < l->n; i++) free(l->keys[i]);
    free(l->keys);
    free(l->labels);
    free(l->line);
    free(l->used);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static ptq_status label_add(label_set *l, const char *key, int label, int line)
{
    char **k = realloc(l->keys, sizeof *k * (size_t)(l->n + 1));
    if (!k) return PTQ_ERR_NOMEM;
    l->keys = k;
    int *v = realloc(l->labels, sizeof *v * (size_t)(l->n + 1));
    if (!v) return PTQ_ERR_NOMEM;
    l->labels = v;
    int *ln = realloc(l->line, sizeof *ln * (size_t)(l->n + 1));
    if (!ln) return PTQ_ERR_NOMEM;
    l->line = ln;
    char *u = realloc(l->used, (size_t)(l->n + 1));
    if (!u) return PTQ_ERR_NOMEM;
    l->used = u;
    if (!(l->keys[l->n] = ptq_strdup(key))) return PTQ_ERR_NOMEM;
    l->line[l->n] = line;
    l->used[l->n] = 0;
    l->labels[l->n++] = label;
    return PTQ_OK;
}

/* "folders": the sub-folders of the evaluation folder, sorted byte-wise, are classes
 * 0, 1, ... (torchvision's ImageFolder); otherwise a file of "image,label" lines where
 * image is matched by base name and label is the class index. */
static ptq_status labels_load(const char *spec, const char *images, label_set *l)
{
    ptq_status st = PTQ_OK;
    memset(l, 0, sizeof *l);
    if (!strcmp(spec, "folders")) {
        DIR *d = opendir(images);
        if (!d) FAIL(PTQ_ERR_IO, "%s: --labels folders needs a folder of class folders", images);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || e->d_type != DT_DIR) continue;
            if ((st = label_add(l, e->d_name, 0, 0)) != PTQ_OK) break;
        }
        closedir(d);
        if (st != PTQ_OK) FAIL(st, "out of memory reading labels");
        qsort(l->keys, (size_t)l->n, sizeof *l->keys, cmp_str);
        for (int i = 0; i < l->n; i++) l->labels[i] = i;
        l->folders = 1;
        if (!l->n) FAIL(PTQ_ERR_FORMAT, "%s: no class folder for --labels folders", images);
        goto done;
    }
    uint8_t *buf = NULL;
    size_t len;
    TRY(io_read_file(spec, &buf, &len, 1 << 26));
    int line_no = 0;
    for (char *line = strtok((char *)buf, "\n"); line; line = strtok(NULL, "\n")) {
        line_no++;
        size_t k = strlen(line);
        if (k && line[k - 1] == '\r') line[--k] = 0;
        if (!k || line[0] == '#') continue;
        char *comma = strrchr(line, ',');
        char *end = NULL;
        long v = comma ? strtol(comma + 1, &end, 10) : -1;
        if (!comma || end == comma + 1 || *end || v < 0 || v > 1000000) {
            free(buf);
            FAIL(PTQ_ERR_FORMAT, "%s:%d: expected 'image,label' with a class index", spec, line_no);
        }
        *comma = 0;
        const char *base = strrchr(line, '/');
        base = base ? base + 1 : line;
        if (!*base) {
            free(buf);
            FAIL(PTQ_ERR_FORMAT, "%s:%d: no image name before the comma", spec, line_no);
        }
        for (int i = 0; i < l->n; i++)
            if (!strcmp(l->keys[i], base)) {
                free(buf);
                FAIL(PTQ_ERR_FORMAT, "%s:%d: %s is labelled twice (line %d too)", spec, line_no, base, l->line[i]);
            }
        if ((st = label_add(l, base, (int)v, line_no)) != PTQ_OK) {
            free(buf);
            FAIL(st, "out of memory reading labels");
        }
    }
    free(buf);
    if (!l->n) FAIL(PTQ_ERR_FORMAT, "%s: no label", spec);
done:
    if (st != PTQ_OK) labels_free(l);
    return st;
}

/* The class of an image path, or -1; marks the file's entry used. */
static int label_of(label_set *l, const char *path)
{
    if (!l->n) return -1;
    const char *slash = strrchr(path, '/');
    if (l->folders) { /* the name of the folder holding the image */
        if (!slash) return -1;
        const char *b = slash;
        while (b > path && b[-1] != '/') b--;
        for (int i = 0; i < l->n; i++)
            if (strlen(l->keys[i]) == (size_t)(slash - b) && !strncmp(l->keys[i], b, (size_t)(slash - b)))
                return l->labels[i];
        return -1;
    }
    const char *base = slash ? slash + 1 : path;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->keys[i], base)) {
            l->used[i] = 1;
            return l->labels[i];
        }
    return -1;
}

/* A labelled set must match its images: every evaluation image has a label (checked as each is
 * read), and with a file, every label names an evaluation image (checked once all were read;
 * not under a --limit, which leaves images out on purpose). */
static ptq_status labels_check_unused(const label_set *l, const char *spec, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; !l->folders && !limited && i < l->n; i++)
        if (!l->used[i])
            FAIL(PTQ_ERR_FORMAT, "%s:%d: %s is not among the evaluation images in %s", spec, l->line[i], l->keys[i],
                 images);
done:
    return st;
}

ptq_status cmp_labels_check(const char *spec, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    label_set l = {0};
    char **paths = NULL;
    int n = 0;
    TRY(labels_load(spec, images, &l));
    TRY(pp_list_images(images, &paths, &n));
    for (int i = 0; i < n; i++)
        if (label_of(&l, paths[i]) < 0)
            FAIL(PTQ_ERR_FORMAT, "%s: evaluation image without a label in %s", paths[i],
                 l.folders ? "--labels folders (not in a class folder)" : spec);
    TRY(labels_check_unused(&l, spec, images, limited));
done:
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    labels_free(&l);
    return st;
}

/* The evaluation set kept in memory: inputs, FP32 outputs and labels per batch. */
typedef struct {
    float *x;
    int n, w, h;    /* images and their tensor width and height */
    float **y;      /* n_out FP32 outputs (NULL when not float) */
    size_t *yn;     /* their element counts (outputs of data-dependent size differ from the QDQ model's) */
    int *labels;    /* per image, -1 unknown */
} cached_batch;

struct cmp_cache {
    cached_batch *b;
    int n_b, cap, n_out, complete, overflow, kind, images;
    size_t bytes, budget;
    ptq_arena_pool *pool;   /* the evaluation plans' arenas, reused from one variant to the next */
};

cmp_cache *cmp_cache_create(size_t budget)
{
    cmp_cache *c = calloc(1, sizeof *c);
    if (c && !(c->pool = ptq_arena_pool_create())) {
        free(c);
        return NULL;
    }
    if (c) c->budget = budget;
    return c;
}

ptq_arena_pool *cmp_cache_pool(cmp_cache *c)
{
    return c ? c->pool : NULL;
}

static void cache_clear(cmp_cache *c)
{
    for (int i = 0; i < c->n_b; i++) {
        free(c->b[i].x);
        for (int o = 0; c->b[i].y && o < c->n_out; o++) free(c->b[i].y[o]);
        free(c->b[i].y);
        free(c->b[i].yn);
        free(c->b[i].labels);
    }
    free(c->b);
    c->b = NULL;
    c->n_b = c->cap = 0;
    c->bytes = 0;
}

void cmp_cache_drop(cmp_cache *c)
{
    if (!c) return;
    cache_clear(c);
    c->complete = 0;
}

void cmp_cache_destroy(cmp_cache *c)
{
    if (!c) return;
    cache_clear(c);
    ptq_arena_pool_destroy(c->pool);
    free(c);
}

/* Keeps a copy of one batch; gives up (overflow, everything freed) past the budget or
 * when out of memory: the evaluations then stream from the images again. */
static void cache_add(cmp_cache *c, const ptq_tensor *x, int w, int h, const ptq_plan *ref, const int *labels)
{
    size_t bytes = ptq_tensor_nbytes(x) + sizeof(int) * (size_t)x->dims[0];
    for (int o = 0; o < c->n_out; o++) {
        const ptq_tensor *y = ptq_plan_output(ref, o, NULL);
        bytes += y->dtype == PTQ_F32 ? ptq_tensor_nbytes(y) : 0;
    }
    if (c->overflow || c->bytes + bytes > c->budget) goto give_up;
    if (c->n_b == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        cached_batch *nb = realloc(c->b, sizeof *nb * (size_t)cap);
        if (!nb) goto give_up;
        c->b = nb;
        c->cap = cap;
    }
    cached_batch *b = &c->b[c->n_b];
    memset(b, 0, sizeof *b);
    c->n_b++; /* counted now so that cache_clear frees a partial entry */
    b->n = (int)x->dims[0];
    b->w = w;
    b->h = h;
    b->x = malloc(ptq_tensor_nbytes(x));
    b->y = calloc((size_t)c->n_out + 1, sizeof *b->y);
    b->yn = calloc((size_t)c->n_out + 1, sizeof *b->yn);
    b->labels = malloc(sizeof(int) * (size_t)b->n);
    if (!b->x || !b->y || !b->yn || !b->labels) goto give_up;
    memcpy(b->x, x->data, ptq_tensor_nbytes(x));
    memcpy(b->labels, labels, sizeof(int) * (size_t)b->n);
    for (int o = 0; o < c->n_out; o++) {
        const ptq_tensor *y = ptq_plan_output(ref, o, NULL);
        if (y->dtype != PTQ_F32) continue;
        if (!(b->y[o] = malloc(ptq_tensor_nbytes(y) + 1))) goto give_up;
        memcpy(b->y[o], y->data, ptq_tensor_nbytes(y));
        b->yn[o] = ptq_tensor_numel(y);
    }
    c->bytes += bytes;
    return;
give_up:
    cache_clear(c);
    c->overflow = 1;
}

/* Scores one batch of every variant against the FP32 outputs fp32[o] (fp32_n[o] elements; an
 * output whose size differs, as data-dependent ones may, adds to no cmp_sums). */
static ptq_status score_batch(eng_runner *rs, int n, const ptq_tensor *x, float *const *fp32, const size_t *fp32_n,
                              int n_out, const int *labels, int kind, const cmp_metric *metric, cmp_acc *accs)
{
    ptq_status st = PTQ_OK;
    int nb = (int)x->dims[0];
    for (int k = 0; k < n; k++) {
        TRY(eng_runner_run(&rs[k], x));
        for (int o = 0; o < n_out; o++) {
            const ptq_tensor *y = ptq_plan_output(rs[k].plan, o, NULL);
            if (y->dtype == PTQ_F32 && fp32[o] && fp32_n[o] == ptq_tensor_numel(y))
                cmp_sums_add(&accs[k].s, fp32[o], y->data, ptq_tensor_numel(y));
        }
        if (kind == CMP_OUT_BOXES || kind == CMP_OUT_YOLO || kind == CMP_OUT_DETECTIONS) {
            int so = kind == CMP_OUT_BOXES ? cmp_box_scores_output(rs[k].plan, ptq_plan_output(rs[k].plan, 0, NULL)) : 0;
            TRY(cmp_box_add(&accs[k], kind, rs[k].plan, nb, fp32[0], fp32_n[0], so > 0 ? fp32[so] : NULL));
            continue;
        }
        const ptq_tensor *y = ptq_plan_output(rs[k].plan, 0, NULL);
        if (kind == CMP_OUT_SEQUENCE && y->rank == 3) TRY(cmp_seq3_add(&accs[k], y, metric->axis, fp32[0], y->data));
        else if (kind == CMP_OUT_SEQUENCE) cmp_seq_add(&accs[k], y, metric->axis, fp32[0], y->data);
        if (kind == CMP_OUT_MAP) cmp_mask_add(&accs[k], fp32[0], y->data, ptq_tensor_numel(y), cmp_mask_threshold(metric));
        if (kind != CMP_OUT_CLASSIFIER) continue;
        int64_t C = y->dims[1];
        for (int i = 0; i < nb; i++) {
            int want = cmp_argmax(fp32[0] + i * C, C), got = cmp_argmax((const float *)y->data + i * C, C);
            accs[k].agree += want == got;
            accs[k].rows++;
            if (labels[i] >= 0) {
                accs[k].labelled++;
                accs[k].correct += got == labels[i];
            }
        }
    }
done:
    return st;
}

ptq_status cmp_evaluate(const cmp_eval *ev, ptq_graph *const *qdq, int n, cmp_metrics *out)
{
    ptq_status st = PTQ_OK;
    pp_dataset *d = NULL;
    cmp_cache *cache = ev->cache;
    eng_runner ref = {.g = ev->g, .model = ev->model};
    eng_memory mem = {0};
    eng_runner *rs = calloc((size_t)n + 1, sizeof *rs);
    cmp_acc *accs = calloc((size_t)n + 1, sizeof *accs);
    float **fp32 = NULL;
    size_t *fp32_n = NULL;
    size_t *cap = NULL;
    int *lab = NULL, lab_cap = 0;
    label_set labels = {0};
    int n_out = ev->g->n_outputs, images = 0, kind = -1;
    CHECK_ALLOC(rs);
    CHECK_ALLOC(accs);
    ref.popt = ptq_plan_defaults();
    ref.popt.nthreads = ev->nthreads;
    ref.popt.pool = cache ? cache->pool : NULL;
    /* one activation block for all: the reference's outputs are copied before the variants
     * run, and each variant is scored right after its run */
    mem.pool = ref.popt.pool;
    ref.shared = &mem;
    for (int k = 0; k < n; k++) rs[k] = (eng_runner){.g = qdq[k], .popt = ref.popt, .shared = &mem};
    if (cache && cache->complete) { /* decoded and run in FP32 before */
        struct timespec c0, c1;
        int done_images = 0;
        clock_gettime(CLOCK_MONOTONIC, &c0);
        for (int i = 0; i < cache->n_b; i++) {
            ptq_tensor t = eng_shaped_tensor(&ev->cfg, cache->b[i].w, cache->b[i].h, cache->b[i].x, cache->b[i].n);
            TRY(score_batch(rs, n, &t, cache->b[i].y, cache->b[i].yn, n_out, cache->b[i].labels, cache->kind, &ev->metric,
                            accs));
            done_images += (int)cache->b[i].n;
            clock_gettime(CLOCK_MONOTONIC, &c1);
            if (!ev->quiet && !ev->o.quiet)
                pp_log_progress(&ev->o.log, ev->o.label, done_images, cache->images,
                            (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec), i == cache->n_b - 1);
        }
        images = cache->images;
        kind = cache->kind;
        goto scored;
    }
    if (cache) {
        cache_clear(cache);
        cache->n_out = n_out;
        cache->overflow = 0;
    }
    if (ev->labels) TRY(labels_load(ev->labels, ev->o.images, &labels));
    pp_dataset_options eo = ev->o;
    TRY(eng_fit_batch(ev->g, ev->model, &eo));
    TRY(pp_dataset_open(&eo, &ev->cfg, &d));
    fp32 = calloc((size_t)n_out + 1, sizeof *fp32);
    fp32_n = calloc((size_t)n_out + 1, sizeof *fp32_n);
    cap = calloc((size_t)n_out + 1, sizeof *cap);
    CHECK_ALLOC(fp32);
    CHECK_ALLOC(fp32_n);
    CHECK_ALLOC(cap);
    for (;;) {
        const float *x;
        const char *const *paths;
        int nb;
        int w, h;
        TRY(pp_dataset_next(d, &x, &nb, NULL, &paths));
        if (nb == 0) break;
        pp_dataset_batch_shape(d, &w, &h); /* batches may differ in shape (pp_dynamic): so may outputs */
        ptq_tensor t = eng_shaped_tensor(&ev->cfg, w, h, x, nb);
        TRY(eng_runner_run(&ref, &t));
        if (kind < 0) kind = cmp_output_kind(ref.plan, &t, nb, &ev->metric);
        for (int o = 0; o < n_out; o++) { /* keep the FP32 outputs while the QDQ variants run */
            const ptq_tensor *y = ptq_plan_output(ref.plan, o, NULL);
            size_t bytes = y->dtype == PTQ_F32 ? ptq_tensor_nbytes(y) : 0;
            fp32_n[o] = y->dtype == PTQ_F32 ? ptq_tensor_numel(y) : 0;
            if (bytes + 1 > cap[o]) { /* + 1: an empty output is still an array */
                float *p = realloc(fp32[o], bytes + 1);
                CHECK_ALLOC(p);
                fp32[o] = p;
                cap[o] = bytes + 1;
            }
            if (bytes) memcpy(fp32[o], y->data, bytes);
        }
        if (nb > lab_cap) {
            int *p = realloc(lab, sizeof *p * (size_t)nb);
            CHECK_ALLOC(p);
            lab = p;
            lab_cap = nb;
        }
        for (int i = 0; i < nb; i++) {
            lab[i] = label_of(&labels, paths[i]);
            if (ev->labels && lab[i] < 0)
                FAIL(PTQ_ERR_FORMAT, "%s: evaluation image without a label in %s", paths[i],
                     labels.folders ? "--labels folders (not in a class folder)" : ev->labels);
        }
        if (cache) cache_add(cache, &t, w, h, ref.plan, lab);
        TRY(score_batch(rs, n, &t, fp32, fp32_n, n_out, lab, kind, &ev->metric, accs));
        images += nb;
    }
    if (images == 0) {
        int used, skipped;
        pp_dataset_counts(d, &used, &skipped);
        FAIL(PTQ_ERR_IO, "%s: none of its %d evaluation images could be read (see the warnings above)", ev->o.images,
             skipped);
    }
    if (ev->labels) TRY(labels_check_unused(&labels, ev->labels, ev->o.images, eo.limit > 0));
    if (cache && !cache->overflow) {
        cache->complete = 1;
        cache->kind = kind;
        cache->images = images;
    }
scored:
    for (int k = 0; k < n; k++)
        cmp_metrics_of(&accs[k], kind, ev->labels != NULL, images, cmp_mask_threshold(&ev->metric), &out[k]);
done:
    pp_dataset_close(d);
    eng_runner_free(&ref);
    for (int k = 0; rs && k < n; k++) eng_runner_free(&rs[k]);
    eng_memory_free(&mem);
    for (int o = 0; fp32 && o < n_out; o++) free(fp32[o]);
    free(fp32);
    free(fp32_n);
    free(cap);
    free(lab);
    free(rs);
    free(accs);
    labels_free(&labels);
    return st;
}

