/* compare_db.c: PaddleOCR's DB post-processing of a text detector's probability map (see
 * compare_det.h): borders, minimum-area boxes, their scores, the unclip, the boxes in the image. */
#include "engine/compare_det.h"

#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { DB_MAX_CANDIDATES = 1000 };
#define DB_THRESH 0.3f
#define DB_BOX_THRESH 0.6
#define DB_UNCLIP 1.5
#define DB_MIN_SIZE 3.0f

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
    if (!b->start && !(b->start = malloc(sizeof *b->start * (size_t)(b->cap_b = 64)))) return -1; /* room for the end mark */
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

/* ---- minimum-area rectangles, as cv2.minAreaRect and cv2.boxPoints compute them ---- */

/* Every step below is OpenCV's (imgproc convhull.cpp, rotcalipers.cpp; core RotatedRect::points) in
 * the same float32 and float64 arithmetic, in the same order: the rectangle's corners are then
 * truncated to integers (the unclip's input), where a corner of 343.99997 is 343, not 344. */

typedef struct {
    const int *p; /* x, y pairs */
    int *ord;     /* point indices sorted by x, then y, then index */
} hull_in;

#define PX(h, k) ((h)->p[2 * (h)->ord[k]])
#define PY(h, k) ((h)->p[2 * (h)->ord[k] + 1])
#define PSAME(h, a, b) (PX(h, a) == PX(h, b) && PY(h, a) == PY(h, b))

static int sgn64(long long v)
{
    return (v > 0) - (v < 0);
}

/* Sklansky's scan of the sorted points from start to end (positions in ord) for one quarter of the
 * hull: its positions into stack, their number returned. */
static int sklansky(const hull_in *h, int start, int end, int *stack, int nsign, int sign2)
{
    int incr = end > start ? 1 : -1, pprev = start, pcur = pprev + incr, pnext = pcur + incr, size = 3;
    if (start == end || PSAME(h, start, end)) {
        stack[0] = start;
        return 1;
    }
    stack[0] = pprev;
    stack[1] = pcur;
    stack[2] = pnext;
    end += incr;
    while (pnext != end) {
        if (PSAME(h, pcur, pnext)) {
            pnext += incr;
            stack[size - 1] = pnext;
            continue;
        }
        long long by = (long long)PY(h, pnext) - PY(h, pcur);
        if (sgn64(by) == nsign) {
            pnext += incr;
            stack[size - 1] = pnext;
            continue;
        }
        long long ax = (long long)PX(h, pcur) - PX(h, pprev), ay = (long long)PY(h, pcur) - PY(h, pprev);
        long long bx = (long long)PX(h, pnext) - PX(h, pcur);
        if (sgn64(ay * bx - ax * by) == sign2 && (ax || ay)) {
            pprev = pcur;
            pcur = pnext;
            pnext += incr;
            stack[size++] = pnext;
        } else if (pprev == start) {
            pcur = pnext;
            stack[1] = pcur;
            pnext += incr;
            stack[2] = pnext;
        } else {
            stack[size - 2] = pnext;
            pcur = pprev;
            pprev = stack[size - 4];
            size--;
        }
    }
    return size - 1;
}

static int by_point(const void *pa, const void *pb) /* x, y, index triples */
{
    const int *a = pa, *b = pb;
    for (int k = 0; k < 3; k++)
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    return 0;
}

/* cv2.convexHull(points, clockwise=False), as cv2.minAreaRect calls it: the indices of the hull's points in OpenCV's order into
 * out (room for n), their number returned. scratch: room for 5 n + 2 ints. */
static int cv_hull(const int *p, int n, int *scratch, int *out)
{
    hull_in h = {p, scratch};
    int *stack = scratch + n, *trip = scratch + 2 * n + 2, nout = 0, miny = 0, maxy = 0;
    for (int i = 0; i < n; i++) {
        trip[3 * i] = p[2 * i];
        trip[3 * i + 1] = p[2 * i + 1];
        trip[3 * i + 2] = i;
    }
    qsort(trip, (size_t)n, 3 * sizeof *trip, by_point);
    for (int i = 0; i < n; i++) h.ord[i] = trip[3 * i + 2];
    for (int i = 1; i < n; i++) {
        if (PY(&h, miny) > PY(&h, i)) miny = i;
        if (PY(&h, maxy) < PY(&h, i)) maxy = i;
    }
    if (PSAME(&h, 0, n - 1)) {
        out[0] = h.ord[0];
        return 1;
    }
    int *tl = stack, ntl = sklansky(&h, 0, maxy, tl, -1, 1);
    int *tr = stack + ntl, ntr = sklansky(&h, n - 1, maxy, tr, -1, -1);
    { /* counterclockwise: the two upper quarters change places */
        int *t = tl;
        tl = tr;
        tr = t;
        int c = ntl;
        ntl = ntr;
        ntr = c;
    }
    for (int i = 0; i < ntl - 1; i++) out[nout++] = h.ord[tl[i]];
    for (int i = ntr - 1; i > 0; i--) out[nout++] = h.ord[tr[i]];
    int stop = ntr > 2 ? tr[1] : ntl > 2 ? tl[ntl - 2] : -1;
    int *bl = stack, nbl = sklansky(&h, 0, miny, bl, 1, -1);
    int *br = stack + nbl, nbr = sklansky(&h, n - 1, miny, br, 1, 1);
    if (stop >= 0) { /* every point on one line: the lower half mirrors the upper one */
        int check = nbl > 2 ? bl[1] : nbl + nbr > 2 ? br[2 - nbl] : -1;
        if (check == stop || (check >= 0 && PSAME(&h, check, stop))) {
            if (nbl > 2) nbl = 2;
            if (nbr > 2) nbr = 2;
        }
    }
    for (int i = 0; i < nbl - 1; i++) out[nout++] = h.ord[bl[i]];
    for (int i = nbr - 1; i > 0; i--) out[nout++] = h.ord[br[i]];
    if (nout >= 3) { /* turned to start at the first or last point of the input, when it follows the input */
        int mn = 0, mx = 0, lt = 0, i;
        for (i = 1; i < nout; i++) {
            lt += out[i - 1] < out[i];
            if (lt > 1 && lt <= i - 2) break;
            if (out[i] < out[mn]) mn = i;
            if (out[i] > out[mx]) mx = i;
        }
        int dist = mx > mn ? mx - mn : mn - mx;
        if ((dist == 1 || dist == nout - 1) && (lt <= 1 || lt >= nout - 2)) {
            int asc = (mx + 1) % nout == mn, i0 = asc ? mn : mx, j = i0, *tmp = stack;
            if (i0 > 0) {
                for (i = 0; i < nout; i++) {
                    int next = j + 1 < nout ? j + 1 : 0;
                    tmp[i] = out[j];
                    if (i < nout - 1 && asc != (out[j] < out[next])) break;
                    j = next;
                }
                if (i == nout) memcpy(out, tmp, sizeof *out * (size_t)nout);
            }
        }
    }
    return nout;
}

#undef PX
#undef PY
#undef PSAME

typedef struct {
    float cx, cy, w, h, angle; /* cv2's RotatedRect: angle in degrees */
} cv_rect;

/* OpenCV's rotating calipers over a hull of n >= 3 float points (x, y pairs; vect, inv: room for
 * 2 n and n floats) into the rectangle. */
static void calipers(const float *pt, int n, float *vect, float *inv, cv_rect *r)
{
    float minarea = FLT_MAX, base_a, base_b = 0, orientation = 0;
    int left = 0, bottom = 0, right = 0, top = 0, seq[4];
    float left_x = pt[0], right_x = pt[0], top_y = pt[1], bottom_y = pt[1];
    float p0x = pt[0], p0y = pt[1];
    for (int i = 0; i < n; i++) {
        if (p0x < left_x) left_x = p0x, left = i;
        if (p0x > right_x) right_x = p0x, right = i;
        if (p0y > top_y) top_y = p0y, top = i;
        if (p0y < bottom_y) bottom_y = p0y, bottom = i;
        int nx = i + 1 < n ? i + 1 : 0;
        double dx = (double)(pt[2 * nx] - p0x), dy = (double)(pt[2 * nx + 1] - p0y);
        vect[2 * i] = (float)dx;
        vect[2 * i + 1] = (float)dy;
        inv[i] = (float)(1. / sqrt(dx * dx + dy * dy));
        p0x = pt[2 * nx];
        p0y = pt[2 * nx + 1];
    }
    double ax = (double)vect[2 * (n - 1)], ay = (double)vect[2 * (n - 1) + 1];
    for (int i = 0; i < n; i++) {
        double bx = (double)vect[2 * i], by = (double)vect[2 * i + 1], c = ax * by - ay * bx;
        if (c != 0) {
            orientation = c > 0 ? 1.f : -1.f;
            break;
        }
        ax = bx;
        ay = by;
    }
    base_a = orientation;
    seq[0] = bottom;
    seq[1] = right;
    seq[2] = top;
    seq[3] = left;
    int best_left = 0, best_bottom = 0;
    float best_a = 0, best_b = 0, best_w = 0, best_h = 0;
    for (int k = 0; k < n; k++) {
        /* each caliper's next edge turned into the first caliper's frame; the main one is the
         * edge no other lies to the right of (the dot product's sign, not the cosines: OpenCV >= 4.5.4) */
        const float *v0 = &vect[2 * seq[0]], *v1 = &vect[2 * seq[1]], *v2 = &vect[2 * seq[2]], *v3 = &vect[2 * seq[3]];
        float rv[4][2] = {{v0[0], v0[1]}, {v1[1], -v1[0]}, {-v2[0], -v2[1]}, {-v3[1], v3[0]}};
        int main = 0;
        for (int i = 1; i < 4; i++)
            if (rv[i][1] * rv[main][0] + -rv[i][0] * rv[main][1] < 0) main = i;
        int pi = seq[main];
        float lx = vect[2 * pi] * inv[pi], ly = vect[2 * pi + 1] * inv[pi];
        switch (main) {
        case 0: base_a = lx, base_b = ly; break;
        case 1: base_a = ly, base_b = -lx; break;
        case 2: base_a = -lx, base_b = -ly; break;
        default: base_a = -ly, base_b = lx;
        }
        seq[main] = seq[main] + 1 == n ? 0 : seq[main] + 1;
        float dx = pt[2 * seq[1]] - pt[2 * seq[3]], dy = pt[2 * seq[1] + 1] - pt[2 * seq[3] + 1];
        float width = dx * base_a + dy * base_b;
        dx = pt[2 * seq[2]] - pt[2 * seq[0]];
        dy = pt[2 * seq[2] + 1] - pt[2 * seq[0] + 1];
        float height = -dx * base_b + dy * base_a, area = width * height;
        if (area <= minarea) {
            minarea = area;
            best_left = seq[3];
            best_a = base_a;
            best_w = width;
            best_b = base_b;
            best_h = height;
            best_bottom = seq[0];
        }
    }
    float A1 = best_a, B1 = best_b, A2 = -best_b, B2 = best_a;
    float C1 = A1 * pt[2 * best_left] + pt[2 * best_left + 1] * B1;
    float C2 = A2 * pt[2 * best_bottom] + pt[2 * best_bottom + 1] * B2;
    float idet = 1.f / (A1 * B2 - A2 * B1);
    float px = (C1 * B2 - C2 * B1) * idet, py = (A1 * C2 - A2 * C1) * idet;
    float o1x = A1 * best_w, o1y = B1 * best_w, o2x = A2 * best_h, o2y = B2 * best_h;
    r->cx = px + (o1x + o2x) * 0.5f;
    r->cy = py + (o1y + o2y) * 0.5f;
    r->w = (float)sqrt((double)o1x * (double)o1x + (double)o1y * (double)o1y);
    r->h = (float)sqrt((double)o2x * (double)o2x + (double)o2y * (double)o2y);
    r->angle = (float)atan2((double)o1y, (double)o1x);
}

/* cv2.minAreaRect of n integer points (x, y pairs); scratch: room for 6 n + 2 ints, fs for 5 n floats. */
static void cv_min_area_rect(const int *p, int n, int *scratch, float *fs, cv_rect *r)
{
    int *idx = scratch, *tmp = scratch + n;
    memset(r, 0, sizeof *r);
    int nh = cv_hull(p, n, tmp, idx);
    float *hp = fs, *vect = hp + 2 * n, *inv = vect + 2 * n;
    for (int i = 0; i < nh; i++) {
        hp[2 * i] = (float)p[2 * idx[i]];
        hp[2 * i + 1] = (float)p[2 * idx[i] + 1];
    }
    if (nh > 2)
        calipers(hp, nh, vect, inv, r);
    else if (nh == 2) {
        r->cx = (hp[0] + hp[2]) * 0.5f;
        r->cy = (hp[1] + hp[3]) * 0.5f;
        double dx = (double)(hp[2] - hp[0]), dy = (double)(hp[3] - hp[1]);
        r->w = (float)sqrt(dx * dx + dy * dy);
        r->angle = (float)atan2(dy, dx);
    } else if (nh == 1) {
        r->cx = hp[0];
        r->cy = hp[1];
    }
    r->angle = (float)((double)(r->angle * 180.0f) / M_PI);
}

/* cv2.boxPoints, then get_mini_boxes' order (sorted by x, stable; of the two leftmost the upper
 * first, then the upper and the lower of the two rightmost, then the lower left). */
static void mini_box(const cv_rect *r, float *x, float *y)
{
    double t = (double)r->angle * M_PI / 180.;
    float b = (float)cos(t) * 0.5f, a = (float)sin(t) * 0.5f, px[4], py[4];
    px[0] = r->cx - a * r->h - b * r->w;
    py[0] = r->cy + b * r->h - a * r->w;
    px[1] = r->cx + a * r->h - b * r->w;
    py[1] = r->cy - b * r->h - a * r->w;
    px[2] = 2 * r->cx - px[0];
    py[2] = 2 * r->cy - py[0];
    px[3] = 2 * r->cx - px[1];
    py[3] = 2 * r->cy - py[1];
    int o[4] = {0, 1, 2, 3};
    for (int i = 1; i < 4; i++)
        for (int j = i; j > 0 && px[o[j]] < px[o[j - 1]]; j--) {
            int s = o[j];
            o[j] = o[j - 1];
            o[j - 1] = s;
        }
    int i1 = py[o[1]] > py[o[0]] ? 0 : 1, i4 = 1 - i1;
    int i2 = py[o[3]] > py[o[2]] ? 2 : 3, i3 = 5 - i2;
    int pick[4] = {o[i1], o[i2], o[i3], o[i4]};
    for (int k = 0; k < 4; k++) {
        x[k] = px[pick[k]];
        y[k] = py[pick[k]];
    }
}

/* ---- box_score_fast: cv2.fillPoly's pixels (imgproc drawing.cpp, 8-connected edges) ---- */

/* cv::clipLine: the segment cut to the w x h image; 0 when nothing is left */
static int clip_line(int w, int h, long long *x1, long long *y1, long long *x2, long long *y2)
{
    long long right = w - 1, bottom = h - 1, a;
    int c1 = (*x1 < 0) + (*x1 > right) * 2 + (*y1 < 0) * 4 + (*y1 > bottom) * 8;
    int c2 = (*x2 < 0) + (*x2 > right) * 2 + (*y2 < 0) * 4 + (*y2 > bottom) * 8;
    if ((c1 & c2) == 0 && (c1 | c2) != 0) {
        if (c1 & 12) {
            a = c1 < 8 ? 0 : bottom;
            *x1 += (long long)((double)(a - *y1) * (double)(*x2 - *x1) / (double)(*y2 - *y1));
            *y1 = a;
            c1 = (*x1 < 0) + (*x1 > right) * 2;
        }
        if (c2 & 12) {
            a = c2 < 8 ? 0 : bottom;
            *x2 += (long long)((double)(a - *y2) * (double)(*x2 - *x1) / (double)(*y2 - *y1));
            *y2 = a;
            c2 = (*x2 < 0) + (*x2 > right) * 2;
        }
        if ((c1 & c2) == 0 && (c1 | c2) != 0) {
            if (c1) {
                a = c1 == 1 ? 0 : right;
                *y1 += (long long)((double)(a - *x1) * (double)(*y2 - *y1) / (double)(*x2 - *x1));
                *x1 = a;
                c1 = 0;
            }
            if (c2) {
                a = c2 == 1 ? 0 : right;
                *y2 += (long long)((double)(a - *x2) * (double)(*y2 - *y1) / (double)(*x2 - *x1));
                *x2 = a;
                c2 = 0;
            }
        }
    }
    return (c1 | c2) == 0;
}

/* cv::Line, 8-connected, drawn from its left end (LineIterator with leftToRight) */
static void draw_line(uint8_t *m, int w, int h, int ax, int ay, int bx, int by)
{
    long long x1 = ax, y1 = ay, x2 = bx, y2 = by;
    if (x1 < 0 || x1 >= w || x2 < 0 || x2 >= w || y1 < 0 || y1 >= h || y2 < 0 || y2 >= h)
        if (!clip_line(w, h, &x1, &y1, &x2, &y2)) return;
    long long dx = x2 - x1, dy = y2 - y1, sx = 1, sy = 1;
    if (dx < 0) {
        dx = -dx;
        dy = -dy;
        x1 = x2;
        y1 = y2;
    }
    if (dy < 0) {
        dy = -dy;
        sy = -1;
    }
    int vert = dy > dx;
    if (vert) {
        long long t = dx;
        dx = dy;
        dy = t;
        t = sx;
        sx = sy;
        sy = t;
    }
    long long err = dx - 2 * dy, x = x1, y = y1;
    for (long long i = 0; i <= dx; i++) {
        m[(size_t)y * (size_t)w + (size_t)x] = 1;
        int minor = err < 0;
        err += -2 * dy + (minor ? 2 * dx : 0);
        if (vert) {
            y += sx;
            if (minor) x += sy;
        } else {
            x += sx;
            if (minor) y += sy;
        }
    }
}

/* cv2.fillPoly of a quadrilateral with integer corners into the w x h mask m (zeroed): its edges
 * as lines, then the rows between them (CollectPolyEdges, FillEdgeCollection: x in 16.16 fixed
 * point stepping by the truncated slope, a row from the ceiling of the left x to the floor of the
 * right one, an edge counted from its upper end's row to the row before its lower end). */
static void fill_quad(uint8_t *m, int w, int h, const int *vx, const int *vy)
{
    long long ex[4], edx[4], xmin = LLONG_MAX, xmax = LLONG_MIN;
    int ey0[4], ey1[4], ne = 0, ymin = INT_MAX, ymax = INT_MIN;
    for (int i = 0; i < 4; i++) {
        int j = (i + 3) % 4;
        draw_line(m, w, h, vx[j], vy[j], vx[i], vy[i]);
        if (vy[j] == vy[i]) continue;
        long long x0 = (long long)vx[j] * 65536, x1 = (long long)vx[i] * 65536;
        int top = vy[j] < vy[i] ? j : i;
        ey0[ne] = vy[top];
        ey1[ne] = vy[top == j ? i : j];
        ex[ne] = top == j ? x0 : x1;
        edx[ne] = (x1 - x0) / (vy[i] - vy[j]);
        long long xe = ex[ne] + (long long)(ey1[ne] - ey0[ne]) * edx[ne];
        if (ey0[ne] < ymin) ymin = ey0[ne];
        if (ey1[ne] > ymax) ymax = ey1[ne];
        xmin = ex[ne] < xmin ? ex[ne] : xmin;
        xmax = ex[ne] > xmax ? ex[ne] : xmax;
        xmin = xe < xmin ? xe : xmin;
        xmax = xe > xmax ? xe : xmax;
        ne++;
    }
    if (ne < 2 || ymax < 0 || ymin >= h || xmax < 0 || xmin >= (long long)w * 65536) return;
    if (ymax > h) ymax = h;
    for (int y = ymin; y < ymax; y++) {
        long long xs[4];
        int na = 0;
        for (int e = 0; e < ne; e++)
            if (ey0[e] <= y && y < ey1[e]) {
                long long v = ex[e] + (long long)(y - ey0[e]) * edx[e];
                int k = na++;
                for (; k > 0 && xs[k - 1] > v; k--) xs[k] = xs[k - 1];
                xs[k] = v;
            }
        if (y < 0) continue;
        for (int k = 0; k + 1 < na; k += 2) {
            long long a = (xs[k] + 65535) >> 16, b = xs[k + 1] >> 16;
            if (a >= w || b < 0) continue;
            if (a < 0) a = 0;
            if (b >= w) b = w - 1;
            if (a <= b) memset(m + (size_t)y * (size_t)w + (size_t)a, 1, (size_t)(b - a + 1));
        }
    }
}

/* box_score_fast: the mean of the map over cv2.fillPoly's pixels of the box (corners truncated to
 * integers) within the box's bounding rectangle; mask: room for W * H bytes */
static double box_score(const float *map, int W, int H, const double *x, const double *y, uint8_t *mask)
{
    double x0 = fmin(fmin(x[0], x[1]), fmin(x[2], x[3])), x1 = fmax(fmax(x[0], x[1]), fmax(x[2], x[3]));
    double y0 = fmin(fmin(y[0], y[1]), fmin(y[2], y[3])), y1 = fmax(fmax(y[0], y[1]), fmax(y[2], y[3]));
    int xmin = (int)fmin(fmax(floor(x0), 0), W - 1), xmax = (int)fmin(fmax(ceil(x1), 0), W - 1);
    int ymin = (int)fmin(fmax(floor(y0), 0), H - 1), ymax = (int)fmin(fmax(ceil(y1), 0), H - 1);
    int vx[4], vy[4], mw = xmax - xmin + 1, mh = ymax - ymin + 1;
    for (int k = 0; k < 4; k++) {
        vx[k] = (int)(x[k] - xmin);
        vy[k] = (int)(y[k] - ymin);
    }
    memset(mask, 0, (size_t)mw * (size_t)mh);
    fill_quad(mask, mw, mh, vx, vy);
    double s = 0;
    long n = 0;
    for (int r = 0; r < mh; r++)
        for (int c = 0; c < mw; c++)
            if (mask[(size_t)r * (size_t)mw + (size_t)c]) {
                s += (double)map[(size_t)(r + ymin) * (size_t)W + (size_t)(c + xmin)];
                n++;
            }
    return n ? s / (double)n : 0.0;
}

/* ---- unclip: pyclipper's ClipperOffset (Clipper 6.4, jtRound, etClosedPolygon, ArcTolerance 0.25) ---- */

static long long clip_round(double v) /* Clipper's Round */
{
    return v < 0 ? (long long)(v - 0.5) : (long long)(v + 0.5);
}

typedef struct {
    int *p;   /* x, y pairs */
    int n, cap;
} ipath;

static int ipath_push(ipath *o, long long x, long long y)
{
    if (o->n + 1 > o->cap) {
        int cap = o->cap ? 2 * o->cap : 64;
        int *p = realloc(o->p, sizeof *p * 2 * (size_t)cap);
        if (!p) return -1;
        o->p = p;
        o->cap = cap;
    }
    o->p[2 * o->n] = (int)x;
    o->p[2 * o->n + 1] = (int)y;
    o->n++;
    return 0;
}

/* The polygon of the 4 corners (truncated to integers, as pyclipper takes them) offset by delta > 0
 * with round joins, into o (the points of Clipper's result before its union, which only drops
 * duplicate and collinear points: the same convex hull). 0, or -1 out of memory. */
static int round_offset(const double *x, const double *y, double delta, ipath *o)
{
    long long px[4], py[4];
    int n = 0;
    o->n = 0;
    for (int k = 0; k < 4; k++) { /* AddPath: repeated points dropped */
        long long a = (long long)x[k], b = (long long)y[k];
        if (n && a == px[n - 1] && b == py[n - 1]) continue;
        px[n] = a;
        py[n++] = b;
    }
    while (n > 1 && px[0] == px[n - 1] && py[0] == py[n - 1]) n--;
    if (n < 3) return 0;
    double area = 0;
    for (int i = 0, j = n - 1; i < n; j = i++) area += (double)px[j] * (double)py[i] - (double)px[i] * (double)py[j];
    if (area < 0) /* FixOrientations: positive area, so that a positive delta grows it */
        for (int i = 0, j = n - 1; i < j; i++, j--) {
            long long t = px[i];
            px[i] = px[j];
            px[j] = t;
            t = py[i];
            py[i] = py[j];
            py[j] = t;
        }
    double nx[4], ny[4];
    for (int j = 0; j < n; j++) { /* GetUnitNormal */
        double dx = (double)(px[(j + 1) % n] - px[j]), dy = (double)(py[(j + 1) % n] - py[j]);
        double f = 1.0 / sqrt(dx * dx + dy * dy);
        nx[j] = dy * f;
        ny[j] = -dx * f;
    }
    double tol = 0.25 > fabs(delta) * 0.25 ? fabs(delta) * 0.25 : 0.25;
    double steps = M_PI / acos(1 - tol / fabs(delta));
    if (steps > fabs(delta) * M_PI) steps = fabs(delta) * M_PI;
    double sn = sin(2 * M_PI / steps), cs = cos(2 * M_PI / steps), per_rad = steps / (2 * M_PI);
    for (int j = 0, k = n - 1; j < n; k = j, j++) { /* OffsetPoint */
        double sin_a = nx[k] * ny[j] - nx[j] * ny[k];
        double sx = (double)px[j], sy = (double)py[j];
        if (fabs(sin_a * delta) < 1.0) {
            if (nx[k] * nx[j] + ny[j] * ny[k] > 0) {
                if (ipath_push(o, clip_round(sx + nx[k] * delta), clip_round(sy + ny[k] * delta))) return -1;
                continue;
            }
        } else if (sin_a > 1.0)
            sin_a = 1.0;
        else if (sin_a < -1.0)
            sin_a = -1.0;
        if (sin_a * delta < 0) {
            if (ipath_push(o, clip_round(sx + nx[k] * delta), clip_round(sy + ny[k] * delta)) ||
                ipath_push(o, px[j], py[j]) || ipath_push(o, clip_round(sx + nx[j] * delta), clip_round(sy + ny[j] * delta)))
                return -1;
            continue;
        }
        double a = atan2(sin_a, nx[k] * nx[j] + ny[k] * ny[j]); /* DoRound */
        int st = (int)clip_round(per_rad * fabs(a));
        if (st < 1) st = 1;
        double X = nx[k], Y = ny[k];
        for (int i = 0; i < st; i++) {
            if (ipath_push(o, clip_round(sx + X * delta), clip_round(sy + Y * delta))) return -1;
            double X2 = X;
            X = X * cs - sn * Y;
            Y = X2 * sn + Y * cs;
        }
        if (ipath_push(o, clip_round(sx + nx[j] * delta), clip_round(sy + ny[j] * delta))) return -1;
    }
    return 0;
}

/* a map coordinate back to the image's pixels: for a stretch DBPostProcess's x / W * dest_width
 * (float32, as numpy computes it on boxPoints' float32), else through the letterbox or crop */
static double unmap(float v, int out, int tn, int pad, int resized, int src)
{
    if (pad == 0 && resized == tn) return (double)(v / (float)out * (float)src);
    return (((double)v * tn / out) - pad) * src / resized;
}

/* room for cv_min_area_rect of n points */
static int grow_scratch(int **s, float **fs, int *cap, int n)
{
    if (n <= *cap) return 0;
    int *p = realloc(*s, sizeof *p * (6 * (size_t)n + 2));
    if (!p) return -1;
    *s = p;
    float *f = realloc(*fs, sizeof *f * 5 * (size_t)n);
    if (!f) return -1;
    *fs = f;
    *cap = n;
    return 0;
}

ptq_status cmp_db_boxes(const float *map, int W, int H, int tw, int th, const pp_meta *meta, cmp_tdet_box **out, int *n)
{
    ptq_status st = PTQ_OK;
    size_t S = (size_t)W + 2;
    int *f = calloc(S * ((size_t)H + 2), sizeof *f), *scratch = NULL, scap = 0;
    float *fscratch = NULL;
    uint8_t *mask = malloc((size_t)W * (size_t)H);
    borders b = {0};
    ipath grown = {0};
    cmp_tdet_box *boxes = NULL;
    int nb = 0;
    *out = NULL;
    *n = 0;
    CHECK_ALLOC(f && mask ? f : NULL);
    for (int r = 0; r < H; r++)
        for (int c = 0; c < W; c++) f[(size_t)(r + 1) * S + (size_t)c + 1] = map[(size_t)r * (size_t)W + (size_t)c] > DB_THRESH;
    if (trace(f, W, H, &b)) FAIL(PTQ_ERR_NOMEM, "out of memory tracing the text regions of a %dx%d map", W, H);
    CHECK_ALLOC(boxes = malloc(sizeof *boxes * (size_t)(b.n_b + 1)));
    /* cv2.findContours lists the borders last found first */
    for (int k = b.n_b - 1; k >= 0 && k >= b.n_b - DB_MAX_CANDIDATES; k--) {
        int np = b.start[k + 1] - b.start[k];
        if (grow_scratch(&scratch, &fscratch, &scap, np)) FAIL(PTQ_ERR_NOMEM, "out of memory for a border of %d points", np);
        cv_rect r;
        cv_min_area_rect(b.p + 2 * (size_t)b.start[k], np, scratch, fscratch, &r);
        if ((r.w < r.h ? r.w : r.h) < DB_MIN_SIZE) continue;
        float fx[4], fy[4];
        double x[4], y[4];
        mini_box(&r, fx, fy);
        for (int q = 0; q < 4; q++) {
            x[q] = (double)fx[q];
            y[q] = (double)fy[q];
        }
        if (DB_BOX_THRESH > box_score(map, W, H, x, y, mask)) continue;
        double area = 0, len = 0;
        for (int a = 0, c = 3; a < 4; c = a++) {
            area += x[c] * y[a] - x[a] * y[c];
            len += hypot(x[a] - x[c], y[a] - y[c]);
        }
        if (round_offset(x, y, fabs(area) * 0.5 * DB_UNCLIP / len, &grown))
            FAIL(PTQ_ERR_NOMEM, "out of memory growing the text boxes of a %dx%d map", W, H);
        if (grown.n < 1) continue;
        if (grow_scratch(&scratch, &fscratch, &scap, grown.n)) FAIL(PTQ_ERR_NOMEM, "out of memory for a box of %d points", grown.n);
        cv_min_area_rect(grown.p, grown.n, scratch, fscratch, &r);
        if ((r.w < r.h ? r.w : r.h) < DB_MIN_SIZE + 2) continue;
        mini_box(&r, fx, fy);
        cmp_tdet_box *o = &boxes[nb++];
        for (int q = 0; q < 4; q++) {
            double u = meta ? unmap(fx[q], W, tw, meta->pad_left, meta->resized_w, meta->src_w) : (double)fx[q];
            double v = meta ? unmap(fy[q], H, th, meta->pad_top, meta->resized_h, meta->src_h) : (double)fy[q];
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
    free(mask);
    free(scratch);
    free(fscratch);
    free(boxes);
    free(grown.p);
    free(b.p);
    free(b.start);
    return st;
}
