/* compare.c: QDQ variants against FP32 on held-out images (see compare.h). */
#include "engine/compare.h"
#include "engine/model.h"
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
#include "io/labels.h"
#include "engine/compare_det.h"
#include "engine/compare_seg.h"
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
    TRY(eng_model_load(ev->model, &g, NULL));
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
 * 0, 1, ... (torchvision's ImageFolder); "list:FILE": "image class" lines (the class after the
 * last space or tab, as ImageNet's validation lists); otherwise a file of "image,label" lines.
 * Images are matched by base name, the label is the class index. */
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
    const char *file;
    int list = !strncmp(spec, "list:", 5); /* "image class" lines, as ImageNet's val lists */
    io_labels_parse(spec, &file);
    TRY(io_read_file(file, &buf, &len, 1 << 26));
    int line_no = 0;
    size_t k;
    for (char *cur = (char *)buf, *line; (line = io_text_line(&cur, list, &line_no, &k));) {
        if (!k || line[0] == '#') continue;
        char *comma = list ? strrchr(line, ' ') : strrchr(line, ',');
        if (list && (!comma || strrchr(line, '\t') > comma)) comma = strrchr(line, '\t');
        char *end = NULL;
        long v = comma ? strtol(comma + 1, &end, 10) : -1;
        if (!comma || end == comma + 1 || *end || v < 0 || v > 1000000) {
            free(buf);
            FAIL(PTQ_ERR_FORMAT, "%s:%d: expected %s with a class index", file, line_no,
                 list ? "'image class'" : "'image,label'");
        }
        *comma = 0;
        const char *base = strrchr(line, '/');
        base = base ? base + 1 : line;
        if (!*base) {
            free(buf);
            FAIL(PTQ_ERR_FORMAT, "%s:%d: no image name before the %s", file, line_no, list ? "class" : "comma");
        }
        for (int i = 0; i < l->n; i++)
            if (!strcmp(l->keys[i], base)) {
                free(buf);
                FAIL(PTQ_ERR_FORMAT, "%s:%d: %s is labelled twice (line %d too)", file, line_no, base, l->line[i]);
            }
        if ((st = label_add(l, base, (int)v, line_no)) != PTQ_OK) {
            free(buf);
            FAIL(st, "out of memory reading labels");
        }
    }
    free(buf);
    if (!l->n) FAIL(PTQ_ERR_FORMAT, "%s: no label", file);
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
            FAIL(PTQ_ERR_FORMAT, "%s:%d: %s is not among the evaluation images in %s", cmp_labels_path(spec), l->line[i],
                 l->keys[i], images);
done:
    return st;
}

/* A detector's labels: every label names an evaluation image (not under a --limit). */
static ptq_status box_labels_check_unused(const io_box_labels *l, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; !limited && i < l->n_img; i++)
        if (!l->img[i].used)
            FAIL(PTQ_ERR_FORMAT, "%s: %s%s is not among the evaluation images in %s", l->path, l->img[i].name,
                 l->kind == IO_LABELS_YOLO ? ".txt" : "", images);
done:
    return st;
}

/* A recogniser's labels: every label names an evaluation image (not under a --limit). */
static ptq_status text_labels_check_unused(const io_text_labels *l, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; !limited && i < l->n; i++)
        if (!l->used[i])
            FAIL(PTQ_ERR_FORMAT, "%s:%d: %s is not among the evaluation images in %s", l->path, l->line[i], l->name[i],
                 images);
done:
    return st;
}

static ptq_status poly_labels_check_unused(const io_poly_labels *l, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; !limited && i < l->n_img; i++)
        if (!l->img[i].used)
            FAIL(PTQ_ERR_FORMAT, "%s:%d: %s is not among the evaluation images in %s", l->path, l->img[i].line,
                 l->img[i].name, images);
done:
    return st;
}

/* cmp_labels_check of paddle:/text: labels: readable with their dictionary, every evaluation image
 * labelled, every label naming an evaluation image. */
static ptq_status text_labels_check(const char *spec, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    io_text_labels l = {0};
    char **paths = NULL;
    int n = 0;
    TRY(io_text_labels_load(spec, &l));
    TRY(pp_list_images(images, &paths, &n));
    for (int i = 0; i < n; i++)
        if (io_text_labels_find(&l, paths[i]) < 0)
            FAIL(PTQ_ERR_FORMAT, "%s: evaluation image without a label in %s", paths[i], l.path);
    TRY(text_labels_check_unused(&l, images, limited));
done:
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    io_text_labels_free(&l);
    return st;
}

/* cmp_labels_check of yolo:DIR or coco:FILE: readable, every evaluation image in a coco file,
 * every label naming an evaluation image. */
static ptq_status box_labels_check(const char *spec, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    io_box_labels l = {0};
    char **paths = NULL;
    int n = 0;
    TRY(io_box_labels_load(spec, &l));
    TRY(pp_list_images(images, &paths, &n));
    for (int i = 0; i < n; i++)
        if (!io_box_labels_find(&l, paths[i]) && l.kind == IO_LABELS_COCO)
            FAIL(PTQ_ERR_FORMAT, "%s: evaluation image not among the images of %s", paths[i], l.path);
    TRY(box_labels_check_unused(&l, images, limited));
done:
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    io_box_labels_free(&l);
    return st;
}

/* cmp_labels_check of paddledet:FILE: readable, every evaluation image with a line (unless limited),
 * every line naming an evaluation image. */
static ptq_status poly_labels_check(const char *spec, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    io_poly_labels l = {0};
    char **paths = NULL;
    int n = 0;
    TRY(io_poly_labels_load(spec, &l));
    TRY(pp_list_images(images, &paths, &n));
    for (int i = 0; i < n; i++)
        if (!io_poly_labels_find(&l, paths[i]) && !limited)
            FAIL(PTQ_ERR_FORMAT, "%s: evaluation image without a line in %s", paths[i], l.path);
    TRY(poly_labels_check_unused(&l, images, limited));
done:
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    io_poly_labels_free(&l);
    return st;
}

/* cmp_labels_check of mask:DIR: the folder readable, a mask for every evaluation image (unless
 * limited: then for those used, when read). */
static ptq_status mask_labels_check(const char *spec, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    io_mask_labels l = {0};
    char **paths = NULL, mp[4096];
    int n = 0;
    TRY(io_mask_labels_open(spec, &l));
    if (limited) goto done;
    TRY(pp_list_images(images, &paths, &n));
    for (int i = 0; i < n; i++) {
        io_mask_path(&l, paths[i], mp, sizeof mp);
        FILE *f = fopen(mp, "rb");
        if (!f) FAIL(PTQ_ERR_IO, "%s: no mask for %s (--labels mask:%s needs one STEM.png per image)", mp, paths[i], l.dir);
        fclose(f);
    }
done:
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    io_mask_labels_free(&l);
    return st;
}

const char *cmp_labels_path(const char *labels)
{
    const char *path;
    if (!labels || !strcmp(labels, "folders")) return NULL;
    io_labels_kind k = io_labels_parse(labels, &path);
    /* FILE:dict=KEYS, DIR:ignore=V: checked when read */
    return k == IO_LABELS_PADDLE || k == IO_LABELS_TEXT || k == IO_LABELS_MASK ? NULL : path;
}

ptq_status cmp_labels_check(const char *spec, const char *images, int limited)
{
    ptq_status st = PTQ_OK;
    label_set l = {0};
    char **paths = NULL;
    int n = 0;
    const char *path;
    io_labels_kind kind = io_labels_parse(spec, &path);
    if (kind == IO_LABELS_PADDLE || kind == IO_LABELS_TEXT) return text_labels_check(spec, images, limited);
    if (kind == IO_LABELS_MASK) return mask_labels_check(spec, images, limited);
    if (kind == IO_LABELS_PADDLEDET) return poly_labels_check(spec, images, limited);
    if (kind != IO_LABELS_CLASSES) return box_labels_check(spec, images, limited);
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
    pp_meta *meta;  /* per image: where it landed in the tensor */
} cached_batch;

/* A detector's ground truth per evaluation image (pixels) and every model's detections, for mAP:
 * sets 0..n-1 the QDQ variants, set n FP32. */
typedef struct {
    int n_img, cap, n_sets, n_classes;
    cmp_gt **gt;
    int *n_gt;
    int gt_borrowed;             /* gt belongs to the cache */
    cmp_det ***dt;               /* [set][image] */
    int **n_dt;
} truth_set;

struct cmp_cache {
    cached_batch *b;
    int n_b, cap, n_out, complete, overflow, kind, images;
    cmp_gt **gt;                 /* the evaluation's truth_set ground truth, kept with the images */
    int *n_gt, n_gt_img, n_classes;
    cmp_seg_truth seg;           /* a segmenter's masks, kept with the images */
    cmp_tdet_truth det;          /* a text detector's polygons, kept with the images */
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
        free(c->b[i].meta);
    }
    for (int i = 0; c->gt && i < c->n_gt_img; i++) free(c->gt[i]);
    free(c->gt);
    free(c->n_gt);
    c->gt = NULL;
    c->n_gt = NULL;
    c->n_gt_img = 0;
    cmp_seg_truth_free(&c->seg);
    cmp_tdet_truth_free(&c->det);
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
static void cache_add(cmp_cache *c, const ptq_tensor *x, int w, int h, const ptq_plan *ref, const int *labels,
                      const pp_meta *meta)
{
    size_t bytes = ptq_tensor_nbytes(x) + (sizeof(int) + sizeof(pp_meta)) * (size_t)x->dims[0];
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
    b->meta = malloc(sizeof(pp_meta) * (size_t)b->n);
    if (!b->x || !b->y || !b->yn || !b->labels || !b->meta) goto give_up;
    memcpy(b->x, x->data, ptq_tensor_nbytes(x));
    memcpy(b->meta, meta, sizeof(pp_meta) * (size_t)b->n);
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

/* ---- a detector's ground truth (mAP) ---- */

static void truth_free(truth_set *ts)
{
    for (int i = 0; !ts->gt_borrowed && ts->gt && i < ts->n_img; i++) free(ts->gt[i]);
    if (!ts->gt_borrowed) {
        free(ts->gt);
        free(ts->n_gt);
    }
    for (int s = 0; ts->dt && s < ts->n_sets; s++) {
        for (int i = 0; ts->dt[s] && i < ts->n_img; i++) free(ts->dt[s][i]);
        free(ts->dt[s]);
        free(ts->n_dt[s]);
    }
    free(ts->dt);
    free(ts->n_dt);
    memset(ts, 0, sizeof *ts);
}

/* Room for n images' detections in every set (and their ground truth unless borrowed), zeroed. */
static ptq_status truth_reserve(truth_set *ts, int n)
{
    ptq_status st = PTQ_OK;
    if (n <= ts->cap) return PTQ_OK;
    int cap = n > 2 * ts->cap ? n : 2 * ts->cap;
    if (!ts->gt_borrowed) {
        cmp_gt **g = realloc(ts->gt, sizeof *g * (size_t)cap);
        CHECK_ALLOC(g);
        ts->gt = g;
        int *ng = realloc(ts->n_gt, sizeof *ng * (size_t)cap);
        CHECK_ALLOC(ng);
        ts->n_gt = ng;
        for (int i = ts->cap; i < cap; i++) {
            ts->gt[i] = NULL;
            ts->n_gt[i] = 0;
        }
    }
    for (int s = 0; s < ts->n_sets; s++) {
        cmp_det **d = realloc(ts->dt[s], sizeof *d * (size_t)cap);
        CHECK_ALLOC(d);
        ts->dt[s] = d;
        int *nd = realloc(ts->n_dt[s], sizeof *nd * (size_t)cap);
        CHECK_ALLOC(nd);
        ts->n_dt[s] = nd;
        for (int i = ts->cap; i < cap; i++) {
            ts->dt[s][i] = NULL;
            ts->n_dt[s][i] = 0;
        }
    }
    ts->cap = cap;
done:
    return st;
}

/* The ground truth of image `img` (b: its labels, NULL for none) in its own pixels (m: its size);
 * normalised: yolo's centre and size relative to the image. */
static ptq_status truth_gt(truth_set *ts, int img, const io_image_boxes *b, const pp_meta *m, int normalised)
{
    ptq_status st = PTQ_OK;
    TRY(truth_reserve(ts, img + 1));
    if (img + 1 > ts->n_img) ts->n_img = img + 1;
    if (!b || !b->n) return PTQ_OK;
    CHECK_ALLOC(ts->gt[img] = malloc(sizeof(cmp_gt) * (size_t)b->n));
    for (int j = 0; j < b->n; j++) {
        const io_box_label *x = &b->box[j];
        cmp_gt g = {x->x, x->y, x->w, x->h, x->area, x->cls, x->crowd};
        if (normalised) {
            double W = m->src_w, H = m->src_h;
            g = (cmp_gt){(x->x - x->w / 2) * W, (x->y - x->h / 2) * H, x->w * W, x->h * H, x->w * W * x->h * H, x->cls, 0};
        }
        ts->gt[img][j] = g;
    }
    ts->n_gt[img] = b->n;
done:
    return st;
}

typedef struct {
    truth_set *ts;         /* NULL: no detector's labels */
    int img0;              /* the batch's first image */
    const pp_meta *meta;   /* per image of the batch */
    const pp_config *cfg;
    int w, h;              /* the tensor's */
} truth_batch;

/* Detections of every image of a batch from output 0 (y, y_n floats; y0 a tensor of its shape) into set s. */
static ptq_status truth_dets(const truth_batch *tb, int s, int kind, const ptq_tensor *y0, int nb, const float *y, size_t y_n)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < nb; i++) {
        int img = tb->img0 + i;
        TRY(truth_reserve(tb->ts, img + 1));
        free(tb->ts->dt[s][img]);
        tb->ts->dt[s][img] = NULL;
        TRY(cmp_image_dets(kind, y0, nb, y, y_n, i, tb->cfg, tb->w, tb->h, &tb->meta[i], &tb->ts->dt[s][img],
                           &tb->ts->n_dt[s][img]));
    }
done:
    return st;
}

/* One bootstrap resample of a truth_set: set s's and FP32's mAP50 and mAP, and the differences
 * (accumulated from the matches made once, cmp_map_prepare; thread-safe). */
typedef struct {
    const cmp_map_prep *q, *f;
} map_draw_ctx;

static int map_draw(const int *idx, int n, void *user, double *v)
{
    const map_draw_ctx *c = user;
    for (int j = 0; j < 6; j++) v[j] = NAN;
    if (cmp_map_resample(c->q, idx, n, &v[0], &v[1]) || cmp_map_resample(c->f, idx, n, &v[2], &v[3])) return -1;
    v[4] = v[0] - v[2];
    v[5] = v[1] - v[3];
    return 0;
}

/* mAP of set s into m (ap50/ap per class) and FP32's (set ts->n_sets - 1), with their bootstrap
 * intervals when asked. */
static ptq_status truth_map(const truth_set *ts, int s, int intervals, cmp_metrics *m)
{
    ptq_status st = PTQ_OK;
    cmp_map_result r = {0}, f = {0};
    map_draw_ctx c = {NULL, NULL};
    cmp_map_prep *pq = NULL, *pf = NULL;
    double lo[6], hi[6];
    for (int j = 0; j < 6; j++) lo[j] = hi[j] = NAN;
    if (intervals) {
        TRY(cmp_map_prepare((const cmp_gt *const *)ts->gt, ts->n_gt, (const cmp_det *const *)ts->dt[s], ts->n_dt[s], ts->n_img,
                            ts->n_classes, &pq));
        TRY(cmp_map_prepare((const cmp_gt *const *)ts->gt, ts->n_gt, (const cmp_det *const *)ts->dt[ts->n_sets - 1],
                            ts->n_dt[ts->n_sets - 1], ts->n_img, ts->n_classes, &pf));
        c = (map_draw_ctx){pq, pf};
        TRY(cmp_bootstrap_stats(ts->n_img, CMP_BOOT_MAP, 6, map_draw, &c, lo, hi));
    }
    double *ci[6] = {m->map50_ci, m->map_ci, m->fp32_map50_ci, m->fp32_map_ci, m->map50_delta_ci, m->map_delta_ci};
    for (int j = 0; j < 6; j++) {
        ci[j][0] = lo[j];
        ci[j][1] = hi[j];
    }
    TRY(cmp_coco_map((const cmp_gt *const *)ts->gt, ts->n_gt, (const cmp_det *const *)ts->dt[s], ts->n_dt[s], ts->n_img,
                     ts->n_classes, &r));
    TRY(cmp_coco_map((const cmp_gt *const *)ts->gt, ts->n_gt, (const cmp_det *const *)ts->dt[ts->n_sets - 1],
                     ts->n_dt[ts->n_sets - 1], ts->n_img, ts->n_classes, &f));
    m->map50 = r.map50;
    m->map = r.map;
    m->fp32_map50 = f.map50;
    m->fp32_map = f.map;
    m->n_ap = ts->n_classes < CMP_AP_CLASSES ? ts->n_classes : CMP_AP_CLASSES;
    for (int k = 0; k < m->n_ap; k++) {
        m->ap50[k] = (float)r.ap50[k];
        m->ap[k] = (float)r.ap[k];
        m->fp32_ap50[k] = (float)f.ap50[k];
        m->fp32_ap[k] = (float)f.ap[k];
    }
done:
    cmp_map_prep_free(pq);
    cmp_map_prep_free(pf);
    cmp_map_result_free(&r);
    cmp_map_result_free(&f);
    return st;
}

/* Per line of a recogniser's labels, for the bootstrap intervals: the edits of each set (the
 * variants, then FP32) and whether it read the line exactly, by evaluation image; with a
 * classifier's labels, exact holds whether each set's top-1 class is the image's label. */
typedef struct {
    double **edits, **exact, *chars, *ones;
    int n_sets, cap;
} ocr_lines;

static void ocr_lines_free(ocr_lines *o)
{
    for (int s = 0; o->edits && s < o->n_sets; s++) {
        free(o->edits[s]);
        free(o->exact[s]);
    }
    free(o->edits);
    free(o->exact);
    free(o->chars);
    free(o->ones);
    memset(o, 0, sizeof *o);
}

static ptq_status ocr_lines_reserve(ocr_lines *o, int n)
{
    ptq_status st = PTQ_OK;
    if (n <= o->cap) return PTQ_OK;
    int cap = n > 2 * o->cap ? n : 2 * o->cap;
    double *c = realloc(o->chars, sizeof *c * (size_t)cap);
    CHECK_ALLOC(c);
    o->chars = c;
    double *one = realloc(o->ones, sizeof *one * (size_t)cap);
    CHECK_ALLOC(one);
    o->ones = one;
    for (int s = 0; s < o->n_sets; s++) {
        double *e = realloc(o->edits[s], sizeof *e * (size_t)cap);
        CHECK_ALLOC(e);
        o->edits[s] = e;
        double *x = realloc(o->exact[s], sizeof *x * (size_t)cap);
        CHECK_ALLOC(x);
        o->exact[s] = x;
    }
    o->cap = cap;
done:
    return st;
}

/* A recogniser's reading of every image of a batch (output 0 y, [N, T, C] or [N, C, T] by axis)
 * against its labels (lab: each image's index in tl) into a, and per line into set s of ol from
 * image img0 on. */
static ptq_status ocr_add(cmp_acc *a, const io_text_labels *tl, const ptq_tensor *y0, int axis, const float *y, size_t y_n,
                          int nb, const int *lab, ocr_lines *ol, int s, int img0)
{
    ptq_status st = PTQ_OK;
    int ax = axis < 0 ? 2 : axis, tax = ax == 2 ? 1 : 2;
    int64_t T = y0->dims[tax], C = y0->dims[ax], cs = ax == 2 ? 1 : T, ts = ax == 2 ? C : 1;
    int *r = NULL;
    int64_t *row = NULL;
    if (y_n != (size_t)(nb * T * C)) return PTQ_OK;
    if (C != tl->n_classes)
        FAIL(PTQ_ERR_FORMAT, "--labels %s: the dictionary gives %d classes (blank, its characters, space), the model's "
             "output %lld", tl->path, tl->n_classes, (long long)C);
    int longest = 0;
    for (int i = 0; i < nb; i++)
        if (tl->len[lab[i]] > longest) longest = tl->len[lab[i]];
    r = malloc(sizeof *r * (size_t)(T + 1));
    row = malloc(sizeof *row * (size_t)(longest + 1));
    CHECK_ALLOC(r && row ? r : NULL);
    for (int i = 0; i < nb; i++) {
        int64_t n = cmp_ctc_greedy(y + (size_t)i * (size_t)(T * C), T, C, ts, cs, 0, r);
        for (int64_t t = 0; t < n; t++) r[t] = tl->class_code[r[t]];
        const int *ref = tl->seq[lab[i]];
        int64_t e = cmp_edit_distance(r, n, ref, tl->len[lab[i]], row);
        a->ocr_edits += (long)e;
        a->ocr_chars += tl->len[lab[i]];
        a->ocr_lines++;
        a->ocr_exact += e == 0;
        TRY(ocr_lines_reserve(ol, img0 + i + 1));
        ol->edits[s][img0 + i] = (double)e;
        ol->exact[s][img0 + i] = e == 0;
        ol->chars[img0 + i] = tl->len[lab[i]];
        ol->ones[img0 + i] = 1;
    }
done:
    free(r);
    free(row);
    return st;
}

/* Scores one batch of every variant against the FP32 outputs fp32[o] (fp32_n[o] elements; an
 * output whose size differs, as data-dependent ones may, adds to no cmp_sums). */
static ptq_status score_batch(const eng_runner *ref, eng_runner *rs, int n, const ptq_tensor *x, float *const *fp32,
                              const size_t *fp32_n, int n_out, const int *labels, int kind, const cmp_metric *metric,
                              cmp_acc *accs, const truth_batch *tb, const io_text_labels *tl, ocr_lines *ol, int img0,
                              cmp_seg *sg, cmp_tdet *dg)
{
    ptq_status st = PTQ_OK;
    int nb = (int)x->dims[0];
    for (int k = 0; k < n; k++) {
        ptq_plan *plan;
        if (ref && ref->plan && rs[k].g == ref->g)
            plan = ref->plan; /* the reference itself (compare --as-is, no base): its outputs of this batch, run once */
        else {
            TRY(eng_runner_run(&rs[k], x));
            plan = rs[k].plan;
        }
        if (tb && tb->ts) {
            const ptq_tensor *y = ptq_plan_output(plan, 0, NULL);
            if (k == 0) TRY(truth_dets(tb, n, kind, y, nb, fp32[0], fp32_n[0]));
            TRY(truth_dets(tb, k, kind, y, nb, y->data, ptq_tensor_numel(y)));
        }
        if (tb && sg) { /* FP32's map once, as set n */
            const ptq_tensor *y = ptq_plan_output(plan, 0, NULL);
            for (int i = 0; i < nb; i++) {
                if (k == 0)
                    TRY(cmp_seg_add(sg, n, img0 + i, y, nb, fp32[0], fp32_n[0], i, tb->w, tb->h, &tb->meta[i]));
                TRY(cmp_seg_add(sg, k, img0 + i, y, nb, y->data, ptq_tensor_numel(y), i, tb->w, tb->h, &tb->meta[i]));
            }
        }
        if (tb && dg) { /* FP32's boxes once, as set n */
            const ptq_tensor *y = ptq_plan_output(rs[k].plan, 0, NULL);
            for (int i = 0; i < nb; i++) {
                if (k == 0)
                    TRY(cmp_tdet_add(dg, n, img0 + i, y, nb, fp32[0], fp32_n[0], i, tb->w, tb->h, &tb->meta[i]));
                TRY(cmp_tdet_add(dg, k, img0 + i, y, nb, y->data, ptq_tensor_numel(y), i, tb->w, tb->h, &tb->meta[i]));
            }
        }
        if (tl) { /* FP32's reading once, in accs[n] */
            const ptq_tensor *y = ptq_plan_output(plan, 0, NULL);
            if (k == 0) TRY(ocr_add(&accs[n], tl, y, metric->axis, fp32[0], fp32_n[0], nb, labels, ol, n, img0));
            TRY(ocr_add(&accs[k], tl, y, metric->axis, y->data, ptq_tensor_numel(y), nb, labels, ol, k, img0));
        }
        for (int o = 0; o < n_out; o++) {
            const ptq_tensor *y = ptq_plan_output(plan, o, NULL);
            if (y->dtype == PTQ_F32 && fp32[o] && fp32_n[o] == ptq_tensor_numel(y))
                cmp_sums_add_images(&accs[k].s, fp32[o], y->data, ptq_tensor_numel(y), nb);
        }
        if (kind == CMP_OUT_BOXES || kind == CMP_OUT_YOLO || kind == CMP_OUT_DETECTIONS) {
            int so = kind == CMP_OUT_BOXES ? cmp_box_scores_output(plan, ptq_plan_output(plan, 0, NULL)) : 0;
            TRY(cmp_box_add(&accs[k], kind, plan, nb, fp32[0], fp32_n[0], so > 0 ? fp32[so] : NULL));
            continue;
        }
        const ptq_tensor *y = ptq_plan_output(plan, 0, NULL);
        if (kind == CMP_OUT_SEQUENCE && y->rank == 3) TRY(cmp_seq3_add(&accs[k], y, metric->axis, fp32[0], y->data));
        else if (kind == CMP_OUT_SEQUENCE) cmp_seq_add(&accs[k], y, metric->axis, fp32[0], y->data);
        if (kind == CMP_OUT_MAP) cmp_mask_add(&accs[k], fp32[0], y->data, ptq_tensor_numel(y), cmp_mask_threshold(metric));
        if (kind != CMP_OUT_CLASSIFIER) continue;
        int64_t C = y->dims[1];
        for (int i = 0; i < nb; i++) {
            int want = cmp_argmax(fp32[0] + i * C, C), got = cmp_argmax((const float *)y->data + i * C, C);
            if (!accs[k].cls_seen) {
                accs[k].cls_seen = 1;
                accs[k].cls_fp0 = want;
                accs[k].cls_q0 = got;
            }
            accs[k].cls_fp_many |= want != accs[k].cls_fp0;
            accs[k].cls_q_many |= got != accs[k].cls_q0;
            accs[k].agree += want == got;
            accs[k].rows++;
            if (labels[i] >= 0) {
                accs[k].labelled++;
                accs[k].correct += got == labels[i];
                if (ol->exact) {
                    TRY(ocr_lines_reserve(ol, img0 + i + 1));
                    ol->exact[k][img0 + i] = got == labels[i];
                    ol->exact[n][img0 + i] = want == labels[i];
                    ol->ones[img0 + i] = 1;
                }
            }
        }
    }
done:
    return st;
}

/* What collapsed in variant k's output 0 (a: its sums; sg: a segmenter's classes, dg: a text detector's boxes,
 * FP32's as set n) where FP32's did not, into m->collapsed ("" when nothing did). */
static void collapsed(const cmp_acc *a, int kind, float t, const cmp_seg *sg, const cmp_tdet *dg, int k, int n,
                      cmp_metrics *m)
{
    m->collapsed[0] = 0;
    if (kind == CMP_OUT_MAP && !a->mask_q_on && a->mask_fp_on)
        snprintf(m->collapsed, sizeof m->collapsed, "is empty (nothing above %g)", (double)t);
    if (kind == CMP_OUT_CLASSIFIER && a->cls_seen && !a->cls_q_many && a->cls_fp_many)
        snprintf(m->collapsed, sizeof m->collapsed, "predicts class %d", a->cls_q0);
    if ((kind == CMP_OUT_YOLO || kind == CMP_OUT_DETECTIONS || kind == CMP_OUT_BOXES) && !a->box_q && a->box_fp)
        snprintf(m->collapsed, sizeof m->collapsed, "has no box scoring >= 0.25");
    if (sg && sg->one && sg->one[k] >= 0 && sg->one[n] == -1)
        snprintf(m->collapsed, sizeof m->collapsed, "is all class %d", sg->one[k]);
    if (dg && dg->any && !dg->any[k] && dg->any[n])
        snprintf(m->collapsed, sizeof m->collapsed, "gives no text box (DB)");
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
    io_box_labels boxes = {0};
    io_text_labels texts = {0};
    truth_set ts = {0};
    ocr_lines ol = {0};
    io_mask_labels masks = {0};
    cmp_seg_truth segt = {0};
    cmp_seg sg = {0};
    io_poly_labels polys = {0};
    cmp_tdet_truth dett = {0};
    cmp_tdet dg = {0};
    const char *lpath;
    io_labels_kind lkind = ev->labels ? io_labels_parse(ev->labels, &lpath) : IO_LABELS_NONE;
    int box_labels = lkind == IO_LABELS_YOLO || lkind == IO_LABELS_COCO;
    int text_labels = lkind == IO_LABELS_PADDLE || lkind == IO_LABELS_TEXT;
    int mask_labels = lkind == IO_LABELS_MASK;
    int poly_labels = lkind == IO_LABELS_PADDLEDET;
    int n_out = ev->g->n_outputs, images = 0, kind = -1;
    CHECK_ALLOC(rs);
    CHECK_ALLOC(accs);
    if (box_labels) {
        ts.n_sets = n + 1;
        ts.dt = calloc((size_t)n + 1, sizeof *ts.dt);
        ts.n_dt = calloc((size_t)n + 1, sizeof *ts.n_dt);
        CHECK_ALLOC(ts.dt && ts.n_dt ? ts.dt : NULL);
    }
    ref.popt = ptq_plan_defaults();
    ref.popt.nthreads = ev->nthreads;
    ref.popt.pool = cache ? cache->pool : NULL;
    /* one activation block for all: the reference's outputs are copied before the variants
     * run, and each variant is scored right after its run */
    mem.pool = ref.popt.pool;
    ref.shared = &mem;
    for (int k = 0; k < n; k++) rs[k] = (eng_runner){.g = qdq[k] ? qdq[k] : ev->g, .popt = ref.popt, .shared = &mem};
    if (text_labels || lkind == IO_LABELS_CLASSES) {
        if (text_labels) TRY(io_text_labels_load(ev->labels, &texts));
        ol.n_sets = n + 1;
        ol.edits = calloc((size_t)n + 1, sizeof *ol.edits);
        ol.exact = calloc((size_t)n + 1, sizeof *ol.exact);
        CHECK_ALLOC(ol.edits && ol.exact ? ol.edits : NULL);
    }
    if (cache && cache->complete) { /* decoded and run in FP32 before */
        struct timespec c0, c1;
        int done_images = 0;
        clock_gettime(CLOCK_MONOTONIC, &c0);
        if (box_labels) { /* the ground truth kept with the images */
            ts.gt_borrowed = 1;
            ts.gt = cache->gt;
            ts.n_gt = cache->n_gt;
            ts.n_classes = cache->n_classes;
            TRY(truth_reserve(&ts, cache->n_gt_img));
            ts.n_img = cache->n_gt_img;
        }
        if (mask_labels) TRY(cmp_seg_begin(&sg, &cache->seg, n + 1));
        if (poly_labels) TRY(cmp_tdet_begin(&dg, &cache->det, n + 1));
        for (int i = 0; i < cache->n_b; i++) {
            ptq_tensor t = eng_shaped_tensor(&ev->cfg, cache->b[i].w, cache->b[i].h, cache->b[i].x, cache->b[i].n);
            truth_batch tb = {box_labels ? &ts : NULL, done_images, cache->b[i].meta, &ev->cfg, cache->b[i].w, cache->b[i].h};
            TRY(score_batch(NULL, rs, n, &t, cache->b[i].y, cache->b[i].yn, n_out, cache->b[i].labels, cache->kind, &ev->metric,
                            accs, box_labels || mask_labels || poly_labels ? &tb : NULL, text_labels ? &texts : NULL, &ol,
                            done_images, mask_labels ? &sg : NULL, poly_labels ? &dg : NULL));
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
    if (box_labels) {
        TRY(io_box_labels_load(ev->labels, &boxes));
        ts.n_classes = boxes.n_classes;
    } else if (mask_labels)
        TRY(io_mask_labels_open(ev->labels, &masks));
    else if (poly_labels)
        TRY(io_poly_labels_load(ev->labels, &polys));
    else if (ev->labels && !text_labels)
        TRY(labels_load(ev->labels, ev->o.images, &labels));
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
        const pp_meta *meta;
        int nb;
        int w, h;
        TRY(pp_dataset_next(d, &x, &nb, &meta, &paths));
        if (nb == 0) break;
        pp_dataset_batch_shape(d, &w, &h); /* batches may differ in shape (pp_dynamic): so may outputs */
        ptq_tensor t = eng_shaped_tensor(&ev->cfg, w, h, x, nb);
        TRY(eng_runner_run(&ref, &t));
        if (kind < 0) {
            kind = cmp_output_kind(ref.plan, &t, nb, &ev->metric);
            if (text_labels && !(kind == CMP_OUT_SEQUENCE && ptq_plan_output(ref.plan, 0, NULL)->rank == 3))
                FAIL(PTQ_ERR_ARG, "--labels %s: a recogniser's labels, but %s's output 0 is not a sequence [N, T, C]",
                     ev->labels, ev->model);
            if (box_labels && kind != CMP_OUT_YOLO && kind != CMP_OUT_DETECTIONS)
                FAIL(PTQ_ERR_ARG, "--labels %s: a detector's labels, but %s's output 0 is not a YOLO head [N, 4 + classes, anchors] "
                     "or detections [K, 6] with classes", ev->labels, ev->model);
            const ptq_tensor *y = ptq_plan_output(ref.plan, 0, NULL);
            if (mask_labels) {
                if (!(segt.n_classes = cmp_seg_classes(y, nb)))
                    FAIL(PTQ_ERR_ARG, "--labels %s: a segmenter's masks, but %s's output 0 is not a map [N, C, H, W] "
                         "(C <= 256)", ev->labels, ev->model);
                segt.ignore = masks.ignore;
                TRY(cmp_seg_begin(&sg, &segt, n + 1));
            }
            if (poly_labels) {
                if (!cmp_tdet_is_map(y, nb))
                    FAIL(PTQ_ERR_ARG, "--labels %s: a text detector's polygons, but %s's output 0 is not a probability "
                         "map [N, 1, H, W]", ev->labels, ev->model);
                TRY(cmp_tdet_begin(&dg, &dett, n + 1));
            }
            if (box_labels && kind == CMP_OUT_YOLO && boxes.n_classes > y->dims[1] - 4)
                FAIL(PTQ_ERR_FORMAT, "--labels %s: class %d, but %s has %d classes", ev->labels, boxes.n_classes - 1,
                     ev->model, (int)(y->dims[1] - 4));
        }
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
            if (text_labels) {
                if ((lab[i] = io_text_labels_find(&texts, paths[i])) < 0)
                    FAIL(PTQ_ERR_FORMAT, "%s: evaluation image without a label in %s", paths[i], texts.path);
                continue;
            }
            if (mask_labels) {
                TRY(cmp_seg_truth_add(&segt, images + i, &masks, paths[i], &meta[i]));
                lab[i] = -1;
                continue;
            }
            if (poly_labels) {
                const io_image_polys *p = io_poly_labels_find(&polys, paths[i]);
                if (!p) FAIL(PTQ_ERR_FORMAT, "%s: evaluation image without a line in %s", paths[i], polys.path);
                TRY(cmp_tdet_truth_add(&dett, images + i, p));
                lab[i] = -1;
                continue;
            }
            if (box_labels) {
                const io_image_boxes *b = io_box_labels_find(&boxes, paths[i]);
                if (!b && boxes.kind == IO_LABELS_COCO)
                    FAIL(PTQ_ERR_FORMAT, "%s: evaluation image not among the images of %s", paths[i], boxes.path);
                TRY(truth_gt(&ts, images + i, b, &meta[i], boxes.kind == IO_LABELS_YOLO));
                lab[i] = -1;
                continue;
            }
            lab[i] = label_of(&labels, paths[i]);
            if (ev->labels && lab[i] < 0)
                FAIL(PTQ_ERR_FORMAT, "%s: evaluation image without a label in %s", paths[i],
                     labels.folders ? "--labels folders (not in a class folder)" : ev->labels);
        }
        if (cache) cache_add(cache, &t, w, h, ref.plan, lab, meta);
        truth_batch tb = {box_labels ? &ts : NULL, images, meta, &ev->cfg, w, h};
        TRY(score_batch(&ref, rs, n, &t, fp32, fp32_n, n_out, lab, kind, &ev->metric, accs,
                        box_labels || mask_labels || poly_labels ? &tb : NULL, text_labels ? &texts : NULL, &ol, images,
                        mask_labels ? &sg : NULL, poly_labels ? &dg : NULL));
        images += nb;
    }
    if (images == 0) {
        int used, skipped;
        pp_dataset_counts(d, &used, &skipped);
        FAIL(PTQ_ERR_IO, "%s: none of its %d evaluation images could be read (see the warnings above)", ev->o.images,
             skipped);
    }
    if (poly_labels && dett.not_simple)
        pp_log_message(&ev->o.log, PP_LOG_WARNING, "%s:%d: polygon %d is not simple (edges crossing, or no area); %d such "
                       "polygon%s on the evaluation images, not counted, as PaddleOCR's DetMetric does", polys.path,
                       dett.first_line, dett.first_poly, dett.not_simple, dett.not_simple == 1 ? "" : "s");
    if (box_labels) TRY(box_labels_check_unused(&boxes, ev->o.images, eo.limit > 0));
    else if (text_labels) TRY(text_labels_check_unused(&texts, ev->o.images, eo.limit > 0));
    else if (poly_labels) TRY(poly_labels_check_unused(&polys, ev->o.images, eo.limit > 0));
    else if (ev->labels) TRY(labels_check_unused(&labels, ev->labels, ev->o.images, eo.limit > 0));
    if (cache && !cache->overflow && mask_labels) { /* the masks count against the cache's budget too */
        size_t mb = 0;
        for (int i = 0; i < segt.n_img; i++) mb += (size_t)segt.w[i] * (size_t)segt.h[i];
        if (cache->bytes + mb > cache->budget) {
            cache_clear(cache);
            cache->overflow = 1;
        } else
            cache->bytes += mb;
    }
    if (cache && !cache->overflow) {
        cache->complete = 1;
        cache->kind = kind;
        cache->images = images;
        if (box_labels) { /* the ground truth moves to the cache */
            cache->gt = ts.gt;
            cache->n_gt = ts.n_gt;
            cache->n_gt_img = ts.n_img;
            cache->n_classes = ts.n_classes;
            ts.gt_borrowed = 1;
        }
        if (poly_labels) { /* the polygons move to the cache */
            cache->det = dett;
            memset(&dett, 0, sizeof dett);
            dg.t = &cache->det;
        }
        if (mask_labels) { /* the masks move to the cache */
            cache->seg = segt;
            memset(&segt, 0, sizeof segt);
            sg.t = &cache->seg;
        }
    }
scored:
    for (int k = 0; k < n; k++) {
        cmp_metrics_of(&accs[k], kind, ev->labels != NULL, images, cmp_mask_threshold(&ev->metric), &out[k]);
        out[k].map50 = out[k].map = out[k].fp32_map50 = out[k].fp32_map = NAN;
        out[k].n_ap = 0;
        for (int c = 0; c < 2; c++)
            out[k].map50_ci[c] = out[k].map_ci[c] = out[k].fp32_map50_ci[c] = out[k].fp32_map_ci[c] =
                out[k].map50_delta_ci[c] = out[k].map_delta_ci[c] = NAN;
        if (box_labels) TRY(truth_map(&ts, k, ev->map_intervals, &out[k]));
        out[k].miou = out[k].fp32_miou = NAN;
        out[k].n_iou = 0;
        for (int c = 0; c < 2; c++) out[k].miou_ci[c] = out[k].fp32_miou_ci[c] = out[k].miou_delta_ci[c] = NAN;
        if (mask_labels) TRY(cmp_seg_metrics(&sg, k, n, &out[k]));
        out[k].det_precision = out[k].det_recall = out[k].hmean = NAN;
        out[k].fp32_det_precision = out[k].fp32_det_recall = out[k].fp32_hmean = NAN;
        for (int c = 0; c < 2; c++)
            out[k].det_precision_ci[c] = out[k].det_recall_ci[c] = out[k].hmean_ci[c] = out[k].fp32_det_precision_ci[c] =
                out[k].fp32_det_recall_ci[c] = out[k].fp32_hmean_ci[c] = out[k].det_precision_delta_ci[c] =
                    out[k].det_recall_delta_ci[c] = out[k].hmean_delta_ci[c] = NAN;
        if (poly_labels) TRY(cmp_tdet_metrics(&dg, k, n, &out[k]));
        if (poly_labels && k == 0 && ev->fp32_boxes && !ev->fp32_boxes->n_img) TRY(cmp_tdet_boxes_of(&dg, ev->fp32_boxes));
        collapsed(&accs[k], kind, cmp_mask_threshold(&ev->metric), mask_labels ? &sg : NULL, poly_labels ? &dg : NULL, k,
                  n, &out[k]);
        const cmp_acc *a = &accs[k], *f = &accs[n];
        out[k].cer = out[k].line_acc = out[k].fp32_cer = out[k].fp32_line_acc = NAN;
        for (int c = 0; c < 2; c++)
            out[k].cer_ci[c] = out[k].line_acc_ci[c] = out[k].fp32_cer_ci[c] = out[k].fp32_line_acc_ci[c] =
                out[k].cer_delta_ci[c] = out[k].line_acc_delta_ci[c] = NAN;
        out[k].fp32_top1_acc = NAN;
        for (int c = 0; c < 2; c++) out[k].top1_ci[c] = out[k].fp32_top1_ci[c] = out[k].top1_delta_ci[c] = NAN;
        if (lkind == IO_LABELS_CLASSES && kind == CMP_OUT_CLASSIFIER && a->labelled == images && images > 0) {
            double hits = 0;
            for (int i = 0; i < images; i++) hits += ol.exact[n][i];
            out[k].fp32_top1_acc = hits / images;
            TRY(cmp_bootstrap_ratio(ol.exact[k], NULL, ol.ones, images, &out[k].top1_ci[0], &out[k].top1_ci[1]));
            TRY(cmp_bootstrap_ratio(ol.exact[n], NULL, ol.ones, images, &out[k].fp32_top1_ci[0], &out[k].fp32_top1_ci[1]));
            TRY(cmp_bootstrap_ratio(ol.exact[k], ol.exact[n], ol.ones, images, &out[k].top1_delta_ci[0],
                                    &out[k].top1_delta_ci[1]));
        }
        if (text_labels && a->ocr_lines && f->ocr_lines) {
            out[k].cer = (double)a->ocr_edits / (double)(a->ocr_chars ? a->ocr_chars : 1);
            out[k].line_acc = (double)a->ocr_exact / (double)a->ocr_lines;
            out[k].fp32_cer = (double)f->ocr_edits / (double)(f->ocr_chars ? f->ocr_chars : 1);
            out[k].fp32_line_acc = (double)f->ocr_exact / (double)f->ocr_lines;
            int nl = (int)a->ocr_lines;
            TRY(cmp_bootstrap_ratio(ol.edits[k], NULL, ol.chars, nl, &out[k].cer_ci[0], &out[k].cer_ci[1]));
            TRY(cmp_bootstrap_ratio(ol.exact[k], NULL, ol.ones, nl, &out[k].line_acc_ci[0], &out[k].line_acc_ci[1]));
            TRY(cmp_bootstrap_ratio(ol.edits[n], NULL, ol.chars, nl, &out[k].fp32_cer_ci[0], &out[k].fp32_cer_ci[1]));
            TRY(cmp_bootstrap_ratio(ol.exact[n], NULL, ol.ones, nl, &out[k].fp32_line_acc_ci[0],
                                    &out[k].fp32_line_acc_ci[1]));
            TRY(cmp_bootstrap_ratio(ol.edits[k], ol.edits[n], ol.chars, nl, &out[k].cer_delta_ci[0],
                                    &out[k].cer_delta_ci[1]));
            TRY(cmp_bootstrap_ratio(ol.exact[k], ol.exact[n], ol.ones, nl, &out[k].line_acc_delta_ci[0],
                                    &out[k].line_acc_delta_ci[1]));
        }
    }
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
    io_box_labels_free(&boxes);
    io_text_labels_free(&texts);
    ocr_lines_free(&ol);
    truth_free(&ts);
    cmp_seg_free(&sg);
    cmp_seg_truth_free(&segt);
    io_mask_labels_free(&masks);
    io_poly_labels_free(&polys);
    cmp_tdet_free(&dg);
    cmp_tdet_truth_free(&dett);
    return st;
}

