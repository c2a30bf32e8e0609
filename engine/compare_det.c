/* compare_det.c: DetMetric against polygon labels and its sums per image (see compare_det.h;
 * the DB boxes are engine/compare_db.c's). */
#include "engine/compare_det.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/compare_truth.h"
#include "runtime/graph.h"

int cmp_tdet_is_map(const ptq_tensor *y, int nb)
{
    return y->dtype == PTQ_F32 && y->rank == 4 && y->dims[0] == nb && y->dims[1] == 1 && y->dims[2] >= 1 && y->dims[3] >= 1;
}

/* ---- DetMetric ---- */

static double signed_area(const double *x, const double *y, int n)
{
    double a = 0;
    for (int i = 0, j = n - 1; i < n; j = i++) a += x[j] * y[i] - x[i] * y[j];
    return 0.5 * a;
}

static int orient(double ax, double ay, double bx, double by, double cx, double cy)
{
    double v = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax);
    return (v > 0) - (v < 0);
}

static int on_seg(double ax, double ay, double bx, double by, double px, double py)
{
    return fmin(ax, bx) <= px && px <= fmax(ax, bx) && fmin(ay, by) <= py && py <= fmax(ay, by);
}

static int seg_meet(const double *x, const double *y, int a, int b, int c, int d)
{
    int o1 = orient(x[a], y[a], x[b], y[b], x[c], y[c]), o2 = orient(x[a], y[a], x[b], y[b], x[d], y[d]);
    int o3 = orient(x[c], y[c], x[d], y[d], x[a], y[a]), o4 = orient(x[c], y[c], x[d], y[d], x[b], y[b]);
    if (o1 != o2 && o3 != o4) return 1;
    return (!o1 && on_seg(x[a], y[a], x[b], y[b], x[c], y[c])) || (!o2 && on_seg(x[a], y[a], x[b], y[b], x[d], y[d])) ||
           (!o3 && on_seg(x[c], y[c], x[d], y[d], x[a], y[a])) || (!o4 && on_seg(x[c], y[c], x[d], y[d], x[b], y[b]));
}

/* shapely's is_valid for a ring: not zero area, no two edges that are not neighbours meeting */
static int simple_polygon(const double *x, const double *y, int n)
{
    if (signed_area(x, y, n) == 0) return 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 2; j < n; j++) {
            if (i == 0 && j == n - 1) continue;
            if (seg_meet(x, y, i, (i + 1) % n, j, (j + 1) % n)) return 0;
        }
    return 1;
}

/* The area of polygon s (any simple polygon) clipped by the convex quadrilateral (cx, cy)
 * (Sutherland-Hodgman); buf: room for 4 * (n + 8) doubles. */
static double clip_area(const double *sx, const double *sy, int n, const double *cx, const double *cy, double *buf)
{
    int cap = n + 8;
    double *ax = buf, *ay = buf + cap, *bx = buf + 2 * cap, *by = buf + 3 * cap;
    double ccw = signed_area(cx, cy, 4) > 0 ? 1 : -1;
    int m = n;
    memcpy(ax, sx, sizeof *ax * (size_t)n);
    memcpy(ay, sy, sizeof *ay * (size_t)n);
    for (int e = 0; e < 4 && m > 0; e++) {
        double px = cx[e], py = cy[e], qx = cx[(e + 1) % 4], qy = cy[(e + 1) % 4];
        int k = 0;
        for (int i = 0; i < m; i++) {
            int j = (i + m - 1) % m;
            double si = ccw * ((qx - px) * (ay[i] - py) - (qy - py) * (ax[i] - px));
            double sj = ccw * ((qx - px) * (ay[j] - py) - (qy - py) * (ax[j] - px));
            if ((si >= 0) != (sj >= 0) && k < cap) {
                double t = sj / (sj - si);
                bx[k] = ax[j] + t * (ax[i] - ax[j]);
                by[k++] = ay[j] + t * (ay[i] - ay[j]);
            }
            if (si >= 0 && k < cap) {
                bx[k] = ax[i];
                by[k++] = ay[i];
            }
        }
        m = k;
        double *t = ax;
        ax = bx;
        bx = t;
        t = ay;
        ay = by;
        by = t;
    }
    return m >= 3 ? fabs(signed_area(ax, ay, m)) : 0.0;
}

ptq_status cmp_tdet_match(const io_image_polys *gt, const cmp_tdet_box *dt, int n_dt, int *gt_care, int *det_care,
                         int *matched)
{
    ptq_status st = PTQ_OK;
    int ng = gt ? gt->n : 0, most = 4;
    for (int g = 0; g < ng; g++)
        if (gt->npt[g] > most) most = gt->npt[g];
    /* each polygon's points (x then y), its area, validity, and the offsets into gt->xy */
    double *px = malloc(sizeof *px * (size_t)most * 2), *buf = NULL, *garea = malloc(sizeof *garea * (size_t)(ng + 1));
    int *gok = malloc(sizeof *gok * (size_t)(ng + 1)), *off = malloc(sizeof *off * (size_t)(ng + 1));
    int *gm = calloc((size_t)ng + 1, sizeof *gm), *dm = calloc((size_t)n_dt + 1, sizeof *dm);
    int *dok = malloc(sizeof *dok * (size_t)(n_dt + 1)), *dcare = malloc(sizeof *dcare * (size_t)(n_dt + 1));
    CHECK_ALLOC(px && garea && gok && off && gm && dm && dok && dcare ? px : NULL);
    CHECK_ALLOC(buf = malloc(sizeof *buf * 4 * ((size_t)most + 8)));
    *gt_care = *det_care = *matched = 0;
    for (int g = 0, at = 0; g < ng; at += gt->npt[g], g++) {
        off[g] = at;
        for (int q = 0; q < gt->npt[g]; q++) {
            px[q] = gt->xy[2 * (size_t)(at + q)];
            px[most + q] = gt->xy[2 * (size_t)(at + q) + 1];
        }
        gok[g] = simple_polygon(px, px + most, gt->npt[g]);
        garea[g] = fabs(signed_area(px, px + most, gt->npt[g]));
        *gt_care += gok[g] && gt->care[g];
    }
#define GT_POINTS(g)                                                                                                     \
    for (int q = 0; q < gt->npt[g]; q++) {                                                                               \
        px[q] = gt->xy[2 * (size_t)(off[g] + q)];                                                                        \
        px[most + q] = gt->xy[2 * (size_t)(off[g] + q) + 1];                                                             \
    }
    for (int d = 0; d < n_dt; d++) {
        dok[d] = simple_polygon(dt[d].x, dt[d].y, 4);
        dcare[d] = dok[d];
        if (!dok[d]) continue;
        double da = fabs(signed_area(dt[d].x, dt[d].y, 4));
        for (int g = 0; g < ng; g++) { /* the first don't-care polygon covering more than half of it */
            if (!gok[g] || gt->care[g]) continue;
            GT_POINTS(g);
            double in = clip_area(px, px + most, gt->npt[g], dt[d].x, dt[d].y, buf);
            if ((da == 0 ? 0 : in / da) > 0.5) {
                dcare[d] = 0;
                break;
            }
        }
        *det_care += dcare[d];
    }
    for (int g = 0; g < ng; g++) {
        if (!gok[g] || !gt->care[g]) continue;
        GT_POINTS(g);
        for (int d = 0; d < n_dt; d++) {
            if (gm[g] || dm[d] || !dcare[d]) continue;
            double in = clip_area(px, px + most, gt->npt[g], dt[d].x, dt[d].y, buf);
            double uni = garea[g] + fabs(signed_area(dt[d].x, dt[d].y, 4)) - in;
            if (uni > 0 && in / uni > 0.5) {
                gm[g] = dm[d] = 1;
                (*matched)++;
            }
        }
    }
#undef GT_POINTS
done:
    free(px);
    free(buf);
    free(garea);
    free(gok);
    free(off);
    free(gm);
    free(dm);
    free(dok);
    free(dcare);
    return st;
}

/* ---- the truth and the sums per image ---- */

void cmp_tdet_truth_free(cmp_tdet_truth *t)
{
    if (!t) return;
    for (int i = 0; t->img && i < t->cap; i++) {
        free(t->img[i].name);
        free(t->img[i].npt);
        free(t->img[i].xy);
        free(t->img[i].care);
    }
    free(t->img);
    memset(t, 0, sizeof *t);
}

ptq_status cmp_tdet_truth_add(cmp_tdet_truth *t, int img, const io_image_polys *p)
{
    ptq_status st = PTQ_OK;
    if (img >= t->cap) {
        int cap = img + 1 > 2 * t->cap ? img + 1 : 2 * t->cap;
        io_image_polys *q = realloc(t->img, sizeof *q * (size_t)cap);
        CHECK_ALLOC(q);
        t->img = q;
        memset(q + t->cap, 0, sizeof *q * (size_t)(cap - t->cap));
        t->cap = cap;
    }
    io_image_polys *o = &t->img[img];
    free(o->name);
    free(o->npt);
    free(o->xy);
    free(o->care);
    memset(o, 0, sizeof *o);
    if (img + 1 > t->n_img) t->n_img = img + 1;
    if (!p) return PTQ_OK;
    CHECK_ALLOC(o->name = ptq_strdup(p->name));
    if (!p->n) return PTQ_OK;
    size_t total = 0;
    for (int g = 0; g < p->n; g++) total += (size_t)p->npt[g];
    o->npt = malloc(sizeof *o->npt * (size_t)p->n);
    o->care = malloc(sizeof *o->care * (size_t)p->n);
    o->xy = malloc(sizeof *o->xy * 2 * total);
    CHECK_ALLOC(o->npt && o->care && o->xy ? o->npt : NULL);
    memcpy(o->npt, p->npt, sizeof *o->npt * (size_t)p->n);
    memcpy(o->care, p->care, sizeof *o->care * (size_t)p->n);
    memcpy(o->xy, p->xy, sizeof *o->xy * 2 * total);
    o->n = p->n;
    for (int g = 0, at = 0; g < p->n; at += p->npt[g], g++) {
        double *x = malloc(sizeof *x * 2 * (size_t)p->npt[g]);
        CHECK_ALLOC(x);
        for (int q = 0; q < p->npt[g]; q++) {
            x[q] = p->xy[2 * (size_t)(at + q)];
            x[p->npt[g] + q] = p->xy[2 * (size_t)(at + q) + 1];
        }
        int ok = simple_polygon(x, x + p->npt[g], p->npt[g]);
        free(x);
        if (ok) continue;
        if (!t->not_simple++) {
            t->first_line = p->line;
            t->first_poly = g;
        }
    }
done:
    return st;
}

void cmp_tdet_free(cmp_tdet *d)
{
    if (!d) return;
    for (int k = 0; d->matched && k < d->n_sets; k++) {
        free(d->matched[k]);
        free(d->det_care[k]);
    }
    free(d->matched);
    free(d->det_care);
    free(d->gt_care);
    free(d->any);
    for (int i = 0; d->fxy && i < d->cap; i++) free(d->fxy[i]);
    free(d->fxy);
    free(d->fn);
    memset(d, 0, sizeof *d);
}

ptq_status cmp_tdet_begin(cmp_tdet *d, const cmp_tdet_truth *t, int n_sets)
{
    ptq_status st = PTQ_OK;
    memset(d, 0, sizeof *d);
    d->t = t;
    d->n_sets = n_sets;
    d->matched = calloc((size_t)n_sets, sizeof *d->matched);
    d->det_care = calloc((size_t)n_sets, sizeof *d->det_care);
    d->any = calloc((size_t)n_sets, sizeof *d->any);
    CHECK_ALLOC(d->matched && d->det_care && d->any ? d->any : NULL);
done:
    return st;
}

static ptq_status tdet_reserve(cmp_tdet *d, int n)
{
    ptq_status st = PTQ_OK;
    if (n <= d->cap) return PTQ_OK;
    int cap = n > 2 * d->cap ? n : 2 * d->cap;
    for (int k = 0; k < d->n_sets; k++) {
        double *a = realloc(d->matched[k], sizeof *a * (size_t)cap);
        CHECK_ALLOC(a);
        d->matched[k] = a;
        double *b = realloc(d->det_care[k], sizeof *b * (size_t)cap);
        CHECK_ALLOC(b);
        d->det_care[k] = b;
        memset(a + d->cap, 0, sizeof *a * (size_t)(cap - d->cap));
        memset(b + d->cap, 0, sizeof *b * (size_t)(cap - d->cap));
    }
    double *g = realloc(d->gt_care, sizeof *g * (size_t)cap);
    CHECK_ALLOC(g);
    d->gt_care = g;
    memset(g + d->cap, 0, sizeof *g * (size_t)(cap - d->cap));
    double **fx = realloc(d->fxy, sizeof *fx * (size_t)cap);
    CHECK_ALLOC(fx);
    d->fxy = fx;
    memset(fx + d->cap, 0, sizeof *fx * (size_t)(cap - d->cap));
    int *fn = realloc(d->fn, sizeof *fn * (size_t)cap);
    CHECK_ALLOC(fn);
    d->fn = fn;
    memset(fn + d->cap, 0, sizeof *fn * (size_t)(cap - d->cap));
    d->cap = cap;
done:
    return st;
}

ptq_status cmp_tdet_add(cmp_tdet *d, int set, int img, const ptq_tensor *y0, int nb, const float *y, size_t y_n, int i,
                       int tw, int th, const pp_meta *meta)
{
    ptq_status st = PTQ_OK;
    cmp_tdet_box *boxes = NULL;
    int n = 0, gc, dc, m;
    int64_t H = y0->dims[2], W = y0->dims[3];
    if (y_n != (size_t)((int64_t)nb * H * W) || img >= d->t->n_img) return PTQ_OK;
    TRY(tdet_reserve(d, img + 1));
    TRY(cmp_db_boxes(y + (size_t)i * (size_t)(H * W), (int)W, (int)H, tw, th, meta, &boxes, &n));
    TRY(cmp_tdet_match(&d->t->img[img], boxes, n, &gc, &dc, &m));
    d->any[set] |= n > 0;
    if (set == d->n_sets - 1) { /* FP32's boxes, for the report */
        free(d->fxy[img]);
        d->fxy[img] = NULL;
        d->fn[img] = 0;
        if (n) {
            CHECK_ALLOC(d->fxy[img] = malloc(sizeof **d->fxy * 8 * (size_t)n));
            for (int b = 0; b < n; b++)
                for (int c = 0; c < 4; c++) {
                    d->fxy[img][8 * b + 2 * c] = boxes[b].x[c];
                    d->fxy[img][8 * b + 2 * c + 1] = boxes[b].y[c];
                }
            d->fn[img] = n;
        }
    }
    d->gt_care[img] = gc;
    d->det_care[set][img] = dc;
    d->matched[set][img] = m;
done:
    free(boxes);
    return st;
}

/* precision, recall, hmean of summed counts, as DetectionIoUEvaluator.combine_results */
static void prh(double m, double dc, double gc, double *v)
{
    double r = gc == 0 ? 0 : m / gc, p = dc == 0 ? 0 : m / dc;
    v[0] = p;
    v[1] = r;
    v[2] = p + r == 0 ? 0 : 2 * r * p / (r + p);
}

typedef struct {
    const double *m, *dc, *ma, *dca, *gc; /* _a: FP32's */
} det_stat;

/* v: this set's P, R, H, FP32's, the differences */
static int det_draw(const int *idx, int n, void *user, double *v)
{
    const det_stat *s = user;
    double m = 0, dc = 0, ma = 0, dca = 0, gc = 0;
    for (int k = 0; k < n; k++) {
        m += s->m[idx[k]];
        dc += s->dc[idx[k]];
        ma += s->ma[idx[k]];
        dca += s->dca[idx[k]];
        gc += s->gc[idx[k]];
    }
    prh(m, dc, gc, v);
    prh(ma, dca, gc, v + 3);
    for (int j = 0; j < 3; j++) v[6 + j] = v[j] - v[3 + j];
    return 0;
}

ptq_status cmp_tdet_metrics(const cmp_tdet *d, int set, int fp32, cmp_metrics *m)
{
    ptq_status st = PTQ_OK;
    int n = d->t->n_img;
    int *all = malloc(sizeof *all * (size_t)(n + 1));
    CHECK_ALLOC(all);
    if (n < 1 || d->cap < n) goto done;
    for (int k = 0; k < n; k++) all[k] = k;
    det_stat s = {d->matched[set], d->det_care[set], d->matched[fp32], d->det_care[fp32], d->gt_care};
    double v[9], lo[9], hi[9];
    det_draw(all, n, &s, v);
    m->det_precision = v[0];
    m->det_recall = v[1];
    m->hmean = v[2];
    m->fp32_det_precision = v[3];
    m->fp32_det_recall = v[4];
    m->fp32_hmean = v[5];
    TRY(cmp_bootstrap_stats(n, CMP_BOOT, 9, det_draw, &s, lo, hi));
    for (int j = 0; j < 2; j++) {
        double *l = j ? hi : lo;
        m->det_precision_ci[j] = l[0];
        m->det_recall_ci[j] = l[1];
        m->hmean_ci[j] = l[2];
        m->fp32_det_precision_ci[j] = l[3];
        m->fp32_det_recall_ci[j] = l[4];
        m->fp32_hmean_ci[j] = l[5];
        m->det_precision_delta_ci[j] = l[6];
        m->det_recall_delta_ci[j] = l[7];
        m->hmean_delta_ci[j] = l[8];
    }
done:
    free(all);
    return st;
}

void cmp_text_boxes_free(cmp_text_boxes *b)
{
    if (!b) return;
    for (int i = 0; i < b->n_img; i++) {
        if (b->name) free(b->name[i]);
        if (b->xy) free(b->xy[i]);
    }
    free(b->name);
    free(b->xy);
    free(b->n);
    memset(b, 0, sizeof *b);
}

ptq_status cmp_tdet_boxes_of(const cmp_tdet *d, cmp_text_boxes *out)
{
    ptq_status st = PTQ_OK;
    int n = d->t->n_img;
    cmp_text_boxes_free(out);
    if (d->cap < n) return PTQ_OK;
    out->name = calloc((size_t)n + 1, sizeof *out->name);
    out->xy = calloc((size_t)n + 1, sizeof *out->xy);
    out->n = calloc((size_t)n + 1, sizeof *out->n);
    CHECK_ALLOC(out->name && out->xy && out->n ? out->n : NULL);
    out->n_img = n;
    for (int i = 0; i < n; i++) {
        CHECK_ALLOC(out->name[i] = ptq_strdup(d->t->img[i].name ? d->t->img[i].name : ""));
        out->n[i] = d->fn[i];
        if (!d->fn[i]) continue;
        CHECK_ALLOC(out->xy[i] = malloc(sizeof **out->xy * 8 * (size_t)d->fn[i]));
        memcpy(out->xy[i], d->fxy[i], sizeof **out->xy * 8 * (size_t)d->fn[i]);
    }
done:
    if (st != PTQ_OK) cmp_text_boxes_free(out);
    return st;
}
