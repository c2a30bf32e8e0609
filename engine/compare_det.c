/* compare_det.c: DB post-processing and DetMetric against polygon labels (see compare_det.h). */
#include "engine/compare_det.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/compare_truth.h"

enum { DB_MAX_CANDIDATES = 1000 };
#define DB_THRESH 0.3f
#define DB_BOX_THRESH 0.6
#define DB_UNCLIP 1.5
#define DB_MIN_SIZE 3.0

int cmp_tdet_is_map(const ptq_tensor *y, int nb)
{
    return y->dtype == PTQ_F32 && y->rank == 4 && y->dims[0] == nb && y->dims[1] == 1 && y->dims[2] >= 1 && y->dims[3] >= 1;
}

/* ---- borders (Suzuki and Abe 1985, as cv2.findContours with RETR_LIST) ---- */

typedef struct {
    int *p;          /* x, y pairs of every border, one after the other */
    size_t n, cap;   /* ints used */
    int *start;      /* each border's first pair */
    int n_b, cap_b;
} borders;

static int push_point(borders *b, int x, int y)
{
    if (b->n + 2 > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        int *p = realloc(b->p, sizeof *p * cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    b->p[b->n++] = x;
    b->p[b->n++] = y;
    return 0;
}

static int push_border(borders *b)
{
    if (b->n_b + 2 > b->cap_b) {
        int cap = b->cap_b ? 2 * b->cap_b : 64;
        int *s = realloc(b->start, sizeof *s * (size_t)cap);
        if (!s) return -1;
        b->start = s;
        b->cap_b = cap;
    }
    b->start[b->n_b++] = (int)(b->n / 2);
    return 0;
}

/* neighbours counterclockwise (rows grow downwards): E, NE, N, NW, W, SW, S, SE */
static const int DX[8] = {1, 1, 0, -1, -1, -1, 0, 1}, DY[8] = {0, -1, -1, -1, 0, 1, 1, 1};

static int dir_of(int dx, int dy)
{
    for (int d = 0; d < 8; d++)
        if (DX[d] == dx && DY[d] == dy) return d;
    return 0;
}

/* f: (W + 2) x (H + 2) labels, 1 for text, a zero frame; every border's points (in the map's
 * pixels, the frame taken off) into b, in the order found. */
static int trace(int *f, int W, int H, borders *b)
{
    int S = W + 2, nbd = 1;
    for (int i = 1; i <= H; i++)
        for (int j = 1; j <= W; j++) {
            int *c = &f[i * S + j], i2, j2;
            if (*c == 1 && c[-1] == 0) {
                i2 = i;
                j2 = j - 1;
            } else if (*c >= 1 && c[1] == 0) {
                i2 = i;
                j2 = j + 1;
            } else
                continue;
            nbd++;
            if (push_border(b) || push_point(b, j - 1, i - 1)) return -1;
            /* 3.1: clockwise from (i2, j2) for a non-zero neighbour */
            int d0 = dir_of(j2 - j, i2 - i), d1 = -1;
            for (int k = 0; k < 8; k++) {
                int d = (d0 - k + 8) % 8;
                if (f[(i + DY[d]) * S + j + DX[d]]) {
                    d1 = d;
                    break;
                }
            }
            if (d1 < 0) {
                *c = -nbd;
                continue;
            }
            int i1 = i + DY[d1], j1 = j + DX[d1];
            i2 = i1;
            j2 = j1;
            int i3 = i, j3 = j;
            for (;;) {
                /* 3.3: counterclockwise around (i3, j3) from the neighbour after (i2, j2) */
                int ds = dir_of(j2 - j3, i2 - i3), i4 = i3, j4 = j3, east0 = 0;
                for (int k = 1; k <= 8; k++) {
                    int d = (ds + k) % 8;
                    int v = f[(i3 + DY[d]) * S + j3 + DX[d]];
                    if (v) {
                        i4 = i3 + DY[d];
                        j4 = j3 + DX[d];
                        break;
                    }
                    if (d == 0) east0 = 1;
                }
                int *c3 = &f[i3 * S + j3];
                if (east0) *c3 = -nbd;
                else if (*c3 == 1) *c3 = nbd;
                if (i4 == i && j4 == j && i3 == i1 && j3 == j1) break;
                i2 = i3;
                j2 = j3;
                i3 = i4;
                j3 = j4;
                if (push_point(b, j3 - 1, i3 - 1)) return -1;
            }
        }
    b->start[b->n_b] = (int)(b->n / 2);
    return 0;
}

/* ---- minimum-area rectangles ---- */

typedef struct {
    double cx, cy, ux, uy, w, h; /* centre, unit vector of the side of length w (the other: (-uy, ux), h) */
} rect;

static long long cross3(const int *o, const int *a, const int *b)
{
    return (long long)(a[0] - o[0]) * (b[1] - o[1]) - (long long)(a[1] - o[1]) * (b[0] - o[0]);
}

static int by_xy(const void *pa, const void *pb)
{
    const int *a = pa, *b = pb;
    return a[0] != b[0] ? (a[0] > b[0]) - (a[0] < b[0]) : (a[1] > b[1]) - (a[1] < b[1]);
}

/* The narrowest box of n points (x, y pairs; sorted in place) over the edges of their convex hull;
 * hull: room for 2 n + 2 points. w = h = 0 when the hull has fewer than 3 points. */
static void min_area_rect(int *p, int n, int *hull, rect *r)
{
    memset(r, 0, sizeof *r);
    qsort(p, (size_t)n, 2 * sizeof *p, by_xy);
    int k = 0;
    for (int i = 0; i < n; i++) { /* Andrew's monotone chain, collinear points dropped */
        while (k >= 2 && cross3(&hull[2 * (k - 2)], &hull[2 * (k - 1)], &p[2 * i]) <= 0) k--;
        hull[2 * k] = p[2 * i];
        hull[2 * k + 1] = p[2 * i + 1];
        k++;
    }
    for (int i = n - 2, t = k + 1; i >= 0; i--) {
        while (k >= t && cross3(&hull[2 * (k - 2)], &hull[2 * (k - 1)], &p[2 * i]) <= 0) k--;
        hull[2 * k] = p[2 * i];
        hull[2 * k + 1] = p[2 * i + 1];
        k++;
    }
    k--; /* the first point again */
    if (k < 3) {
        r->cx = p[0];
        r->cy = p[1];
        r->ux = 1;
        return;
    }
    double best = INFINITY;
    for (int e = 0; e < k; e++) {
        int *a = &hull[2 * e], *b = &hull[2 * ((e + 1) % k)];
        double ex = b[0] - a[0], ey = b[1] - a[1], len = sqrt(ex * ex + ey * ey);
        ex /= len;
        ey /= len;
        double u0 = INFINITY, u1 = -INFINITY, v0 = INFINITY, v1 = -INFINITY;
        for (int q = 0; q < k; q++) {
            double dx = hull[2 * q] - a[0], dy = hull[2 * q + 1] - a[1];
            double u = dx * ex + dy * ey, v = -dx * ey + dy * ex;
            u0 = fmin(u0, u);
            u1 = fmax(u1, u);
            v0 = fmin(v0, v);
            v1 = fmax(v1, v);
        }
        double area = (u1 - u0) * (v1 - v0);
        if (area < best) {
            best = area;
            double um = 0.5 * (u0 + u1), vm = 0.5 * (v0 + v1);
            r->cx = a[0] + um * ex - vm * ey;
            r->cy = a[1] + um * ey + vm * ex;
            r->ux = ex;
            r->uy = ey;
            r->w = u1 - u0;
            r->h = v1 - v0;
        }
    }
}

/* The rectangle's corners grown by g on every side, in get_mini_boxes' order (sorted by x; of the
 * two leftmost the upper first, then the upper and lower of the two rightmost, then the lower left). */
static void corners(const rect *r, double g, double *x, double *y)
{
    double a = 0.5 * r->w + g, b = 0.5 * r->h + g, px[4], py[4];
    static const int su[4] = {-1, 1, 1, -1}, sv[4] = {-1, -1, 1, 1};
    for (int k = 0; k < 4; k++) {
        px[k] = r->cx + su[k] * a * r->ux - sv[k] * b * r->uy;
        py[k] = r->cy + su[k] * a * r->uy + sv[k] * b * r->ux;
    }
    int o[4] = {0, 1, 2, 3};
    for (int i = 1; i < 4; i++) /* stable insertion sort by x */
        for (int j = i; j > 0 && px[o[j]] < px[o[j - 1]]; j--) {
            int t = o[j];
            o[j] = o[j - 1];
            o[j - 1] = t;
        }
    int i1 = py[o[1]] > py[o[0]] ? 0 : 1, i4 = 1 - i1;
    int i2 = py[o[3]] > py[o[2]] ? 2 : 3, i3 = 5 - i2;
    int pick[4] = {o[i1], o[i2], o[i3], o[i4]};
    for (int k = 0; k < 4; k++) {
        x[k] = px[pick[k]];
        y[k] = py[pick[k]];
    }
}

/* inside or on the polygon of n integer vertices */
static int inside(const int *vx, const int *vy, int n, int x, int y)
{
    int in = 0;
    for (int a = 0, b = n - 1; a < n; b = a++) {
        long long cr = (long long)(vx[b] - vx[a]) * (y - vy[a]) - (long long)(vy[b] - vy[a]) * (x - vx[a]);
        if (!cr && x >= (vx[a] < vx[b] ? vx[a] : vx[b]) && x <= (vx[a] > vx[b] ? vx[a] : vx[b]) &&
            y >= (vy[a] < vy[b] ? vy[a] : vy[b]) && y <= (vy[a] > vy[b] ? vy[a] : vy[b]))
            return 1;
        if ((vy[a] > y) != (vy[b] > y) &&
            (double)x < (double)(vx[b] - vx[a]) * (double)(y - vy[a]) / (double)(vy[b] - vy[a]) + vx[a])
            in = !in;
    }
    return in;
}

/* box_score_fast: the mean of the map over the box's pixels (corners truncated to integers) */
static double box_score(const float *map, int W, int H, const double *x, const double *y)
{
    double x0 = fmin(fmin(x[0], x[1]), fmin(x[2], x[3])), x1 = fmax(fmax(x[0], x[1]), fmax(x[2], x[3]));
    double y0 = fmin(fmin(y[0], y[1]), fmin(y[2], y[3])), y1 = fmax(fmax(y[0], y[1]), fmax(y[2], y[3]));
    int xmin = (int)fmin(fmax(floor(x0), 0), W - 1), xmax = (int)fmin(fmax(ceil(x1), 0), W - 1);
    int ymin = (int)fmin(fmax(floor(y0), 0), H - 1), ymax = (int)fmin(fmax(ceil(y1), 0), H - 1);
    int vx[4], vy[4];
    for (int k = 0; k < 4; k++) {
        vx[k] = (int)(x[k] - xmin);
        vy[k] = (int)(y[k] - ymin);
    }
    double s = 0;
    long n = 0;
    for (int r = ymin; r <= ymax; r++)
        for (int c = xmin; c <= xmax; c++)
            if (inside(vx, vy, 4, c - xmin, r - ymin)) {
                s += (double)map[(size_t)r * (size_t)W + (size_t)c];
                n++;
            }
    return n ? s / (double)n : 0.0;
}

/* a map coordinate back to the image's pixels (DBPostProcess: x / W * dest for a stretch) */
static double unmap(double v, int out, int tn, int pad, int resized, int src)
{
    if (pad == 0 && resized == tn) return v / out * src;
    return ((v * tn / out) - pad) * src / resized;
}

ptq_status cmp_db_boxes(const float *map, int W, int H, int tw, int th, const pp_meta *meta, cmp_tdet_box **out, int *n)
{
    ptq_status st = PTQ_OK;
    size_t S = (size_t)W + 2;
    int *f = calloc(S * ((size_t)H + 2), sizeof *f), *pts = NULL, *hull = NULL;
    borders b = {0};
    cmp_tdet_box *boxes = NULL;
    int nb = 0;
    *out = NULL;
    *n = 0;
    CHECK_ALLOC(f);
    for (int r = 0; r < H; r++)
        for (int c = 0; c < W; c++) f[(size_t)(r + 1) * S + (size_t)c + 1] = map[(size_t)r * (size_t)W + (size_t)c] > DB_THRESH;
    if (trace(f, W, H, &b)) FAIL(PTQ_ERR_NOMEM, "out of memory tracing the text regions of a %dx%d map", W, H);
    int longest = 0;
    for (int k = 0; k < b.n_b; k++)
        if (b.start[k + 1] - b.start[k] > longest) longest = b.start[k + 1] - b.start[k];
    pts = malloc(sizeof *pts * 2 * ((size_t)longest + 1));
    hull = malloc(sizeof *hull * 4 * ((size_t)longest + 2));
    boxes = malloc(sizeof *boxes * (size_t)(b.n_b + 1));
    CHECK_ALLOC(pts && hull && boxes ? pts : NULL);
    /* cv2.findContours lists the borders last found first */
    for (int k = b.n_b - 1; k >= 0 && k >= b.n_b - DB_MAX_CANDIDATES; k--) {
        int np = b.start[k + 1] - b.start[k];
        memcpy(pts, b.p + 2 * (size_t)b.start[k], sizeof *pts * 2 * (size_t)np);
        rect r;
        min_area_rect(pts, np, hull, &r);
        if (fmin(r.w, r.h) < DB_MIN_SIZE) continue;
        double x[4], y[4];
        corners(&r, 0, x, y);
        if (DB_BOX_THRESH > box_score(map, W, H, x, y)) continue;
        double area = 0, len = 0;
        for (int a = 0, c = 3; a < 4; c = a++) {
            area += x[c] * y[a] - x[a] * y[c];
            len += hypot(x[a] - x[c], y[a] - y[c]);
        }
        double g = fabs(area) * 0.5 * DB_UNCLIP / len;
        if (fmin(r.w, r.h) + 2 * g < DB_MIN_SIZE + 2) continue;
        corners(&r, g, x, y);
        cmp_tdet_box *o = &boxes[nb++];
        for (int q = 0; q < 4; q++) {
            double u = meta ? unmap(x[q], W, tw, meta->pad_left, meta->resized_w, meta->src_w) : x[q];
            double v = meta ? unmap(y[q], H, th, meta->pad_top, meta->resized_h, meta->src_h) : y[q];
            double mw = meta ? meta->src_w : W, mh = meta ? meta->src_h : H;
            o->x[q] = fmin(fmax(nearbyint(u), 0), mw);
            o->y[q] = fmin(fmax(nearbyint(v), 0), mh);
        }
    }
    if (nb) {
        *out = boxes;
        boxes = NULL;
    }
    *n = nb;
done:
    free(f);
    free(pts);
    free(hull);
    free(boxes);
    free(b.p);
    free(b.start);
    return st;
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
    free(o->npt);
    free(o->xy);
    free(o->care);
    memset(o, 0, sizeof *o);
    if (img + 1 > t->n_img) t->n_img = img + 1;
    if (!p || !p->n) return PTQ_OK;
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
