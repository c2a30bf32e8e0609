/* compare_seg.c: mIoU against a segmenter's masks (see compare_seg.h). */
#include "engine/compare_seg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/compare_metrics.h"
#include "engine/compare_truth.h"

int cmp_seg_classes(const ptq_tensor *y, int nb)
{
    if (y->dtype != PTQ_F32 || y->rank != 4 || y->dims[0] != nb || y->dims[2] < 1 || y->dims[3] < 1) return 0;
    if (y->dims[1] > 256) return 0; /* a mask holds 8-bit classes */
    return y->dims[1] == 1 ? 2 : (int)y->dims[1];
}

void cmp_seg_truth_free(cmp_seg_truth *t)
{
    if (!t) return;
    for (int i = 0; t->mask && i < t->n_img; i++) free(t->mask[i]);
    free(t->mask);
    free(t->w);
    free(t->h);
    memset(t, 0, sizeof *t);
}

static ptq_status truth_reserve(cmp_seg_truth *t, int n)
{
    ptq_status st = PTQ_OK;
    if (n <= t->cap) return PTQ_OK;
    int cap = n > 2 * t->cap ? n : 2 * t->cap;
    uint8_t **m = realloc(t->mask, sizeof *m * (size_t)cap);
    CHECK_ALLOC(m);
    t->mask = m;
    int *w = realloc(t->w, sizeof *w * (size_t)cap);
    CHECK_ALLOC(w);
    t->w = w;
    int *h = realloc(t->h, sizeof *h * (size_t)cap);
    CHECK_ALLOC(h);
    t->h = h;
    for (int i = t->cap; i < cap; i++) {
        t->mask[i] = NULL;
        t->w[i] = t->h[i] = 0;
    }
    t->cap = cap;
done:
    return st;
}

ptq_status cmp_seg_truth_add(cmp_seg_truth *t, int img, const io_mask_labels *l, const char *path, const pp_meta *m)
{
    ptq_status st = PTQ_OK;
    uint8_t *mask = NULL;
    int w = 0, h = 0;
    char mp[4096];
    TRY(truth_reserve(t, img + 1));
    TRY(io_mask_read(l, path, &mask, &w, &h));
    io_mask_path(l, path, mp, sizeof mp);
    if (w != m->src_w || h != m->src_h)
        FAIL(PTQ_ERR_FORMAT, "%s: mask of %dx%d pixels, its image %s has %dx%d", mp, w, h, path, m->src_w, m->src_h);
    for (size_t p = 0; p < (size_t)w * (size_t)h; p++)
        if (mask[p] != t->ignore && mask[p] >= t->n_classes)
            FAIL(PTQ_ERR_FORMAT, "%s: pixel (%d, %d) holds class %d, the model has %d classes (ignore value %d)", mp,
                 (int)(p % (size_t)w), (int)(p / (size_t)w), mask[p], t->n_classes, t->ignore);
    free(t->mask[img]);
    t->mask[img] = mask;
    mask = NULL;
    t->w[img] = w;
    t->h[img] = h;
    if (img + 1 > t->n_img) t->n_img = img + 1;
done:
    free(mask);
    return st;
}

void cmp_seg_free(cmp_seg *s)
{
    if (!s) return;
    for (int k = 0; s->inter && k < s->n_sets; k++) {
        free(s->inter[k]);
        free(s->uni[k]);
    }
    free(s->inter);
    free(s->uni);
    free(s->one);
    memset(s, 0, sizeof *s);
}

ptq_status cmp_seg_begin(cmp_seg *s, const cmp_seg_truth *t, int n_sets)
{
    ptq_status st = PTQ_OK;
    memset(s, 0, sizeof *s);
    s->t = t;
    s->n_sets = n_sets;
    s->inter = calloc((size_t)n_sets, sizeof *s->inter);
    s->uni = calloc((size_t)n_sets, sizeof *s->uni);
    s->one = malloc(sizeof *s->one * (size_t)n_sets);
    CHECK_ALLOC(s->inter && s->uni && s->one ? s->inter : NULL);
    for (int k = 0; k < n_sets; k++) s->one[k] = -2;
done:
    return st;
}

static ptq_status seg_reserve(cmp_seg *s, int n)
{
    ptq_status st = PTQ_OK;
    if (n <= s->cap) return PTQ_OK;
    int cap = n > 2 * s->cap ? n : 2 * s->cap;
    size_t C = (size_t)s->t->n_classes;
    for (int k = 0; k < s->n_sets; k++) {
        double *a = realloc(s->inter[k], sizeof *a * C * (size_t)cap);
        CHECK_ALLOC(a);
        s->inter[k] = a;
        double *b = realloc(s->uni[k], sizeof *b * C * (size_t)cap);
        CHECK_ALLOC(b);
        s->uni[k] = b;
        memset(a + C * (size_t)s->cap, 0, sizeof *a * C * (size_t)(cap - s->cap));
        memset(b + C * (size_t)s->cap, 0, sizeof *b * C * (size_t)(cap - s->cap));
    }
    s->cap = cap;
done:
    return st;
}

/* The output index of each of the n image pixels along one axis (-1: outside the tensor): the
 * output's `out` pixels span the tensor's `tn`, the image's n pixels its resized `rn` from `pad`. */
static void axis_map(int n, int rn, int pad, int tn, int64_t out, int *idx)
{
    for (int x = 0; x < n; x++) {
        double u = (double)pad + ((double)x + 0.5) * (double)rn / (double)n;
        double o = floor(u * (double)out / (double)tn);
        idx[x] = u < 0 || u >= tn || o < 0 || o >= (double)out ? -1 : (int)o;
    }
}

ptq_status cmp_seg_add(cmp_seg *s, int set, int img, const ptq_tensor *y0, int nb, const float *y, size_t y_n, int i,
                       int tw, int th, const pp_meta *meta)
{
    ptq_status st = PTQ_OK;
    const cmp_seg_truth *t = s->t;
    int C = t->n_classes;
    int64_t OC = y0->dims[1], OH = y0->dims[2], OW = y0->dims[3];
    int *cx = NULL, *cy = NULL;
    uint8_t *pred = NULL;
    long *gt = NULL, *pr = NULL, *in = NULL;
    if (y_n != (size_t)((int64_t)nb * OC * OH * OW) || img >= t->n_img || !t->mask[img]) return PTQ_OK;
    TRY(seg_reserve(s, img + 1));
    int w = t->w[img], h = t->h[img];
    cx = malloc(sizeof *cx * (size_t)w);
    cy = malloc(sizeof *cy * (size_t)h);
    pred = malloc((size_t)(OH * OW));
    gt = calloc((size_t)C, sizeof *gt);
    pr = calloc((size_t)C, sizeof *pr);
    in = calloc((size_t)C, sizeof *in);
    CHECK_ALLOC(cx && cy && pred && gt && pr && in ? cx : NULL);
    const float *x = y + (size_t)i * (size_t)(OC * OH * OW);
    size_t plane = (size_t)(OH * OW);
    for (size_t p = 0; p < plane; p++) { /* the class of every output pixel: the first maximum */
        if (OC == 1) {
            pred[p] = x[p] > 0.5f;
            continue;
        }
        int best = 0;
        float v = x[p];
        for (int64_t c = 1; c < OC; c++)
            if (x[(size_t)c * plane + p] > v) {
                v = x[(size_t)c * plane + p];
                best = (int)c;
            }
        pred[p] = (uint8_t)best;
    }
    for (size_t p = 0; p < plane && s->one[set] != -1; p++)
        if (s->one[set] == -2) s->one[set] = pred[p];
        else if (s->one[set] != pred[p]) s->one[set] = -1;
    axis_map(w, meta->resized_w, meta->pad_left, tw, OW, cx);
    axis_map(h, meta->resized_h, meta->pad_top, th, OH, cy);
    const uint8_t *m = t->mask[img];
    for (int r = 0; r < h; r++) {
        if (cy[r] < 0) continue;
        const uint8_t *row = pred + (size_t)cy[r] * (size_t)OW;
        for (int c = 0; c < w; c++) {
            int g = m[(size_t)r * (size_t)w + (size_t)c];
            if (cx[c] < 0 || g == t->ignore) continue;
            int q = row[cx[c]];
            gt[g]++;
            pr[q]++;
            in[g] += g == q;
        }
    }
    double *I = s->inter[set] + (size_t)img * (size_t)C, *U = s->uni[set] + (size_t)img * (size_t)C;
    for (int c = 0; c < C; c++) {
        I[c] = (double)in[c];
        U[c] = (double)(gt[c] + pr[c] - in[c]);
    }
done:
    free(cx);
    free(cy);
    free(pred);
    free(gt);
    free(pr);
    free(in);
    return st;
}

typedef struct {
    const double *inter, *uni, *inter_a, *uni_a; /* _a: FP32's */
    int C;
} miou_stat;

/* mIoU of the images idx[0..n) (with repeats): NAN when no class has a union. */
static double miou_of(const double *inter, const double *uni, const int *idx, int n, int C, double *si, double *su)
{
    for (int c = 0; c < C; c++) si[c] = su[c] = 0;
    for (int k = 0; k < n; k++) {
        const double *a = inter + (size_t)idx[k] * (size_t)C, *b = uni + (size_t)idx[k] * (size_t)C;
        for (int c = 0; c < C; c++) {
            si[c] += a[c];
            su[c] += b[c];
        }
    }
    double s = 0;
    int k = 0;
    for (int c = 0; c < C; c++)
        if (su[c] > 0) {
            s += si[c] / su[c];
            k++;
        }
    return k ? s / k : (double)NAN;
}

/* v: this set's mIoU, FP32's, their difference (thread-safe: its own sums) */
static int miou_draw(const int *idx, int n, void *user, double *v)
{
    const miou_stat *m = user;
    double *sum = malloc(sizeof *sum * 2 * (size_t)m->C);
    if (!sum) return -1;
    v[0] = miou_of(m->inter, m->uni, idx, n, m->C, sum, sum + m->C);
    v[1] = miou_of(m->inter_a, m->uni_a, idx, n, m->C, sum, sum + m->C);
    v[2] = v[0] - v[1];
    free(sum);
    return 0;
}

ptq_status cmp_seg_metrics(const cmp_seg *s, int set, int fp32, cmp_metrics *m)
{
    ptq_status st = PTQ_OK;
    int C = s->t->n_classes, n = s->t->n_img;
    int *all = malloc(sizeof *all * (size_t)(n + 1));
    double *sum = malloc(sizeof *sum * 4 * (size_t)C);
    CHECK_ALLOC(all && sum ? all : NULL);
    if (n < 1 || s->cap < n) goto done;
    for (int k = 0; k < n; k++) all[k] = k;
    m->miou = miou_of(s->inter[set], s->uni[set], all, n, C, sum, sum + C);
    m->n_iou = C < CMP_AP_CLASSES ? C : CMP_AP_CLASSES;
    for (int c = 0; c < m->n_iou; c++) m->iou[c] = sum[C + c] > 0 ? (float)(sum[c] / sum[C + c]) : NAN;
    m->fp32_miou = miou_of(s->inter[fp32], s->uni[fp32], all, n, C, sum, sum + C);
    for (int c = 0; c < m->n_iou; c++) m->fp32_iou[c] = sum[C + c] > 0 ? (float)(sum[c] / sum[C + c]) : NAN;
    miou_stat d = {s->inter[set], s->uni[set], s->inter[fp32], s->uni[fp32], C};
    double lo[3], hi[3];
    TRY(cmp_bootstrap_stats(n, CMP_BOOT, 3, miou_draw, &d, lo, hi));
    m->miou_ci[0] = lo[0];
    m->miou_ci[1] = hi[0];
    m->fp32_miou_ci[0] = lo[1];
    m->fp32_miou_ci[1] = hi[1];
    m->miou_delta_ci[0] = lo[2];
    m->miou_delta_ci[1] = hi[2];
done:
    free(all);
    free(sum);
    return st;
}
