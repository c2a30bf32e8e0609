/* compare_truth.c: metrics against the user's labels (see compare_truth.h). */
#include "engine/compare_truth.h"

#include <float.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AREA_MAX 1e10 /* COCO's area range "all": [0, 1e5 ** 2] */

void cmp_map_result_free(cmp_map_result *r)
{
    if (!r) return;
    free(r->ap50);
    free(r->ap);
    r->ap50 = r->ap = NULL;
}

/* numpy.linspace(start, stop, num)[i] as numpy computes it: i * ((stop - start) / (num - 1)) + start,
 * the last exactly stop. */
static double linspace(double start, double stop, int num, int i)
{
    return i == num - 1 ? stop : (double)i * ((stop - start) / (double)(num - 1)) + start;
}

/* pycocotools' bbox IoU (maskApi.c bbIou): a crowd box's union is the detection's area. */
static double iou(const cmp_det *d, const cmp_gt *g)
{
    double w = fmin(d->x + d->w, g->x + g->w) - fmax(d->x, g->x);
    if (w <= 0) return 0;
    double h = fmin(d->y + d->h, g->y + g->h) - fmax(d->y, g->y);
    if (h <= 0) return 0;
    double i = w * h, da = d->w * d->h, u = g->crowd ? da : da + g->w * g->h - i;
    return i / u;
}

typedef struct {
    double score;
    int pos;
} ranked;

static int by_score(const void *pa, const void *pb) /* score descending, then position: a stable sort */
{
    const ranked *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* One category's detections over every image, in image order, each image's by score and cut
 * at CMP_MAP_MAX_DETS: score, and per IoU threshold matched / ignored. */
typedef struct {
    double *score;
    unsigned char *tp[CMP_MAP_IOUS], *ig[CMP_MAP_IOUS];
    int n, cap;
    long npig; /* ground truth boxes not ignored */
} cat_eval;

static int cat_grow(cat_eval *c, int more)
{
    if (c->n + more <= c->cap) return 0;
    int cap = c->cap * 2 > c->n + more ? c->cap * 2 : c->n + more + 64;
    double *s = realloc(c->score, sizeof *s * (size_t)cap);
    if (!s) return -1;
    c->score = s;
    for (int t = 0; t < CMP_MAP_IOUS; t++) {
        unsigned char *a = realloc(c->tp[t], (size_t)cap), *b;
        if (!a) return -1;
        c->tp[t] = a;
        if (!(b = realloc(c->ig[t], (size_t)cap))) return -1;
        c->ig[t] = b;
    }
    c->cap = cap;
    return 0;
}

/* COCOeval.evaluateImg for one image and category: gt (non-ignored first, stable) and dt (by
 * score) matched at each threshold; appends to c. scratch: room for the boxes. */
static int eval_image(cat_eval *c, const cmp_gt **g, int ng, const cmp_det **d, int nd, double *ious,
                      unsigned char *gtm, const double *thr)
{
    if (!ng && !nd) return 0;
    if (nd > CMP_MAP_MAX_DETS) nd = CMP_MAP_MAX_DETS;
    if (cat_grow(c, nd)) return -1;
    for (int j = 0; j < ng; j++) c->npig += !(g[j]->crowd || g[j]->area < 0 || g[j]->area > AREA_MAX);
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < ng; j++) ious[i * ng + j] = iou(d[i], g[j]);
    for (int t = 0; t < CMP_MAP_IOUS; t++) {
        memset(gtm, 0, (size_t)ng + 1);
        for (int i = 0; i < nd; i++) {
            double best = fmin(thr[t], 1 - 1e-10);
            int m = -1;
            for (int j = 0; j < ng; j++) {
                int gig = g[j]->crowd || g[j]->area < 0 || g[j]->area > AREA_MAX;
                if (gtm[j] && !g[j]->crowd) continue;
                if (m > -1 && !(g[m]->crowd || g[m]->area < 0 || g[m]->area > AREA_MAX) && gig) break;
                if (ious[i * ng + j] < best) continue;
                best = ious[i * ng + j];
                m = j;
            }
            int k = c->n + i;
            double area = d[i]->w * d[i]->h;
            if (m == -1) {
                c->tp[t][k] = 0;
                c->ig[t][k] = area < 0 || area > AREA_MAX;
                continue;
            }
            gtm[m] = 1;
            c->tp[t][k] = 1;
            c->ig[t][k] = (unsigned char)(g[m]->crowd || g[m]->area < 0 || g[m]->area > AREA_MAX);
        }
    }
    for (int i = 0; i < nd; i++) c->score[c->n + i] = d[i]->score;
    c->n += nd;
    return 0;
}

/* COCOeval.accumulate for one category at threshold t: the mean of the 101 interpolated
 * precisions. order: the detections by score; pr, rc: room for c->n. */
static double cat_ap(const cat_eval *c, int t, const ranked *order, double *pr, double *rc)
{
    double tp = 0, fp = 0, sum = 0;
    int nd = c->n;
    for (int i = 0; i < nd; i++) {
        int k = order[i].pos;
        if (!c->ig[t][k]) {
            tp += c->tp[t][k];
            fp += !c->tp[t][k];
        }
        rc[i] = tp / (double)c->npig;
        pr[i] = tp / (fp + tp + DBL_EPSILON);
    }
    for (int i = nd - 1; i > 0; i--)
        if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
    int p = 0;
    for (int r = 0; r < CMP_MAP_RECALLS; r++) { /* searchsorted(rc, thr, 'left'): the first rc >= thr */
        double want = linspace(0.0, 1.0, CMP_MAP_RECALLS, r);
        while (p < nd && rc[p] < want) p++;
        if (p < nd) sum += pr[p];
    }
    return sum / CMP_MAP_RECALLS;
}

/* What matching one image's detections of one class needs: the IoU thresholds and buffers
 * sized for the largest image. */
typedef struct {
    double thr[CMP_MAP_IOUS];
    const cmp_gt **g;
    const cmp_det **d;
    ranked *rk;
    double *ious;
    unsigned char *gtm;
} match_scratch;

static int scratch_init(match_scratch *m, const int *n_gt, const int *n_dt, int n_images)
{
    int max_g = 0, max_d = 0;
    for (int i = 0; i < n_images; i++) {
        if (n_gt[i] > max_g) max_g = n_gt[i];
        if (n_dt[i] > max_d) max_d = n_dt[i];
    }
    for (int t = 0; t < CMP_MAP_IOUS; t++) m->thr[t] = linspace(0.5, 0.95, CMP_MAP_IOUS, t);
    m->g = malloc(sizeof *m->g * (size_t)(max_g + 1));
    m->d = malloc(sizeof *m->d * (size_t)(max_d + 1));
    m->rk = malloc(sizeof *m->rk * (size_t)(max_d + 1));
    m->ious = malloc(sizeof *m->ious * (size_t)(max_g + 1) * (size_t)(CMP_MAP_MAX_DETS + 1));
    m->gtm = malloc((size_t)max_g + 1);
    return m->g && m->d && m->rk && m->ious && m->gtm;
}

static void scratch_free(match_scratch *m)
{
    free(m->g);
    free(m->d);
    free(m->rk);
    free(m->ious);
    free(m->gtm);
}

/* One image's ground truth and detections of class k matched into c (COCO's evaluateImg):
 * non-ignored ground truth first, each group in file order; detections by score. */
static int match_class(cat_eval *c, match_scratch *m, const cmp_gt *gt, int n_gt, const cmp_det *dt, int n_dt, int k)
{
    int ng = 0, nd = 0, nr = 0;
    for (int j = 0; j < n_gt; j++)
        if (gt[j].cls == k && !(gt[j].crowd || gt[j].area < 0 || gt[j].area > AREA_MAX)) m->g[ng++] = &gt[j];
    for (int j = 0; j < n_gt; j++)
        if (gt[j].cls == k && (gt[j].crowd || gt[j].area < 0 || gt[j].area > AREA_MAX)) m->g[ng++] = &gt[j];
    for (int j = 0; j < n_dt; j++)
        if (dt[j].cls == k) m->rk[nr++] = (ranked){dt[j].score, j};
    qsort(m->rk, (size_t)nr, sizeof *m->rk, by_score);
    for (int j = 0; j < nr; j++) m->d[nd++] = &dt[m->rk[j].pos];
    return eval_image(c, m->g, ng, m->d, nd, m->ious, m->gtm, m->thr);
}

ptq_status cmp_coco_map(const cmp_gt *const *gt, const int *n_gt, const cmp_det *const *dt, const int *n_dt,
                        int n_images, int n_classes, cmp_map_result *out)
{
    ptq_status st = PTQ_OK;
    match_scratch m;
    int m_ok = scratch_init(&m, n_gt, n_dt, n_images);
    ranked *order = NULL;
    double *pr = NULL, *rc = NULL;
    cat_eval c = {0};
    memset(out, 0, sizeof *out);
    out->n_classes = n_classes;
    out->ap50 = malloc(sizeof *out->ap50 * (size_t)(n_classes + 1));
    out->ap = malloc(sizeof *out->ap * (size_t)(n_classes + 1));
    CHECK_ALLOC(m_ok && out->ap50 && out->ap ? out->ap : NULL);
    double s50 = 0, s = 0;
    int cats = 0;
    for (int k = 0; k < n_classes; k++) {
        c.n = 0;
        c.npig = 0;
        for (int i = 0; i < n_images; i++) {
            if (match_class(&c, &m, gt[i], n_gt[i], dt[i], n_dt[i], k)) FAIL(PTQ_ERR_NOMEM, "out of memory matching the detections of an image");
        }
        out->ap50[k] = out->ap[k] = NAN;
        if (!c.npig) continue;
        ranked *o2 = realloc(order, sizeof *o2 * (size_t)(c.n + 1));
        CHECK_ALLOC(o2);
        order = o2;
        double *p2 = realloc(pr, sizeof *p2 * (size_t)(c.n + 1));
        CHECK_ALLOC(p2);
        pr = p2;
        double *r2 = realloc(rc, sizeof *r2 * (size_t)(c.n + 1));
        CHECK_ALLOC(r2);
        rc = r2;
        for (int i = 0; i < c.n; i++) order[i] = (ranked){c.score[i], i};
        qsort(order, (size_t)c.n, sizeof *order, by_score);
        double all = 0;
        for (int t = 0; t < CMP_MAP_IOUS; t++) {
            double ap = cat_ap(&c, t, order, pr, rc);
            if (t == 0) out->ap50[k] = ap;
            all += ap;
        }
        out->ap[k] = all / CMP_MAP_IOUS;
        s50 += out->ap50[k];
        s += out->ap[k];
        cats++;
    }
    out->map50 = cats ? s50 / cats : (double)NAN;
    out->map = cats ? s / cats : (double)NAN;
done:
    scratch_free(&m);
    free(order);
    free(pr);
    free(rc);
    free(c.score);
    for (int t = 0; t < CMP_MAP_IOUS; t++) {
        free(c.tp[t]);
        free(c.ig[t]);
    }
    if (st != PTQ_OK) cmp_map_result_free(out);
    return st;
}

/* ---- mAP of resamples of the images (cmp_map_prepare) ---- */

/* One category's detections over every image, sorted as cmp_coco_map sorts them for the images in
 * their own order (score descending, then image, then the image's own order), each with its
 * matches at every threshold: bit t matched, bit CMP_MAP_IOUS + t ignored. */
typedef struct {
    int n;
    int *img, *within;   /* the image, the position among the image's detections of the category */
    uint32_t *flags;
    int *tie_end;         /* the end of the run of detections of its score */
    int n_pig;            /* images with ground truth boxes of the category not ignored */
    int *pig_img, *pig;   /* those images and their counts */
} prep_cat;

struct cmp_map_prep {
    int n_images, n_classes;
    prep_cat *cat;
};

void cmp_map_prep_free(cmp_map_prep *p)
{
    if (!p) return;
    for (int k = 0; p->cat && k < p->n_classes; k++) {
        prep_cat *c = &p->cat[k];
        free(c->img);
        free(c->within);
        free(c->flags);
        free(c->tie_end);
        free(c->pig_img);
        free(c->pig);
    }
    free(p->cat);
    free(p);
}

ptq_status cmp_map_prepare(const cmp_gt *const *gt, const int *n_gt, const cmp_det *const *dt, const int *n_dt,
                           int n_images, int n_classes, cmp_map_prep **out)
{
    ptq_status st = PTQ_OK;
    match_scratch m;
    int m_ok = scratch_init(&m, n_gt, n_dt, n_images);
    int *img = NULL, *within = NULL, *pig_img = malloc(sizeof *pig_img * (size_t)(n_images + 1)),
        *pig = malloc(sizeof *pig * (size_t)(n_images + 1));
    ranked *order = NULL;
    cat_eval c = {0};
    cmp_map_prep *p = calloc(1, sizeof *p);
    *out = NULL;
    CHECK_ALLOC(m_ok && pig_img && pig && p ? p : NULL);
    p->n_images = n_images;
    p->n_classes = n_classes;
    CHECK_ALLOC(p->cat = calloc((size_t)n_classes + 1, sizeof *p->cat));
    for (int k = 0; k < n_classes; k++) {
        prep_cat *pc = &p->cat[k];
        int np = 0;
        c.n = 0;
        c.npig = 0;
        for (int i = 0; i < n_images; i++) {
            int n0 = c.n;
            long pig0 = c.npig;
            if (match_class(&c, &m, gt[i], n_gt[i], dt[i], n_dt[i], k)) FAIL(PTQ_ERR_NOMEM, "out of memory matching the detections of an image");
            if (c.npig > pig0) {
                pig_img[np] = i;
                pig[np++] = (int)(c.npig - pig0);
            }
            if (c.n > n0) {
                int *a = realloc(img, sizeof *a * (size_t)c.n), *b;
                CHECK_ALLOC(a);
                img = a;
                CHECK_ALLOC(b = realloc(within, sizeof *b * (size_t)c.n));
                within = b;
                for (int j = n0; j < c.n; j++) {
                    img[j] = i;
                    within[j] = j - n0;
                }
            }
        }
        pc->n = c.n;
        pc->n_pig = np;
        pc->img = malloc(sizeof *pc->img * (size_t)(c.n + 1));
        pc->within = malloc(sizeof *pc->within * (size_t)(c.n + 1));
        pc->flags = malloc(sizeof *pc->flags * (size_t)(c.n + 1));
        pc->tie_end = malloc(sizeof *pc->tie_end * (size_t)(c.n + 1));
        pc->pig_img = malloc(sizeof *pc->pig_img * (size_t)(np + 1));
        pc->pig = malloc(sizeof *pc->pig * (size_t)(np + 1));
        ranked *o2 = realloc(order, sizeof *o2 * (size_t)(c.n + 1));
        CHECK_ALLOC(pc->img && pc->within && pc->flags && pc->tie_end && pc->pig_img && pc->pig && o2 ? o2 : NULL);
        order = o2;
        memcpy(pc->pig_img, pig_img, sizeof *pig_img * (size_t)np);
        memcpy(pc->pig, pig, sizeof *pig * (size_t)np);
        for (int i = 0; i < c.n; i++) order[i] = (ranked){c.score[i], i};
        qsort(order, (size_t)c.n, sizeof *order, by_score);
        for (int i = 0; i < c.n; i++) {
            int e = order[i].pos;
            uint32_t f = 0;
            for (int t = 0; t < CMP_MAP_IOUS; t++)
                f |= (uint32_t)(c.tp[t][e] != 0) << t | (uint32_t)(c.ig[t][e] != 0) << (CMP_MAP_IOUS + t);
            pc->img[i] = img[e];
            pc->within[i] = within[e];
            pc->flags[i] = f;
        }
        for (int i = c.n - 1; i >= 0; i--)
            pc->tie_end[i] = i + 1 < c.n && order[i + 1].score == order[i].score ? pc->tie_end[i + 1] : i + 1;
    }
    *out = p;
    p = NULL;
done:
    cmp_map_prep_free(p);
    scratch_free(&m);
    free(img);
    free(within);
    free(pig_img);
    free(pig);
    free(order);
    free(c.score);
    for (int t = 0; t < CMP_MAP_IOUS; t++) {
        free(c.tp[t]);
        free(c.ig[t]);
    }
    return st;
}

typedef struct {
    int pos, within, e;
} copy;

static int by_copy(const void *pa, const void *pb) /* where the copy's image was drawn, then its own order */
{
    const copy *a = pa, *b = pb;
    if (a->pos != b->pos) return (a->pos > b->pos) - (a->pos < b->pos);
    return (a->within > b->within) - (a->within < b->within);
}

/* cat_ap over the detections seq[0..nd) at threshold t, with the same doubles: precision and recall
 * are only computed where a detection is matched (tp grows). There recall takes each of its values
 * first; after it, until the next match, precision only falls (fp grows) or stays (ignored), so the
 * precision made monotone from the right at any position is the largest at the matches from there
 * on (0 before the first match). pr, rc: room for the matches. */
static double seq_ap(const prep_cat *c, const int *seq, size_t nd, long npig, int t, double *pr, double *rc)
{
    double tp = 0, fp = 0, sum = 0;
    size_t nm = 0;
    uint32_t mt = 1u << t, mi = 1u << (CMP_MAP_IOUS + t);
    for (size_t i = 0; i < nd; i++) {
        uint32_t f = c->flags[seq[i]];
        if (f & mi) continue;
        if (!(f & mt)) {
            fp += 1;
            continue;
        }
        tp += 1;
        rc[nm] = tp / (double)npig;
        pr[nm++] = tp / (fp + tp + DBL_EPSILON);
    }
    for (size_t i = nm - (nm > 0); i > 0; i--)
        if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
    size_t p = 0;
    for (int r = 0; r < CMP_MAP_RECALLS; r++) {
        double want = linspace(0.0, 1.0, CMP_MAP_RECALLS, r);
        while (p < nm && rc[p] < want) p++;
        if (p < nm) sum += pr[p];
    }
    return sum / CMP_MAP_RECALLS;
}

int cmp_map_resample(const cmp_map_prep *p, const int *idx, int n, double *map50, double *map)
{
    int rc = -1, ni = p->n_images;
    int *cnt = calloc((size_t)ni + 1, sizeof *cnt), *start = malloc(sizeof *start * (size_t)(ni + 2)),
        *at = malloc(sizeof *at * (size_t)(n + 1)), *fill = malloc(sizeof *fill * (size_t)(ni + 1)), *seq = NULL;
    copy *cp = NULL;
    double *pr = NULL, *rcl = NULL;
    size_t cap = 0, cp_cap = 0;
    *map50 = *map = NAN;
    if (!cnt || !start || !at || !fill) goto done;
    for (int i = 0; i < n; i++) cnt[idx[i]]++;
    start[0] = 0; /* at[start[i] .. start[i + 1]): where image i was drawn, in order */
    for (int i = 0; i < ni; i++) start[i + 1] = start[i] + cnt[i];
    memcpy(fill, start, sizeof *fill * (size_t)ni);
    for (int i = 0; i < n; i++) at[fill[idx[i]]++] = i;
    double s50 = 0, s = 0;
    int cats = 0;
    for (int k = 0; k < p->n_classes; k++) {
        const prep_cat *c = &p->cat[k];
        long npig = 0;
        for (int j = 0; j < c->n_pig; j++) npig += (long)cnt[c->pig_img[j]] * c->pig[j];
        if (!npig) continue;
        size_t nd = 0;
        for (int e = 0; e < c->n; e++) nd += (size_t)cnt[c->img[e]];
        if (nd + 1 > cap) {
            int *q = realloc(seq, sizeof *q * (nd + 1));
            double *a, *b;
            if (!q) goto done;
            seq = q;
            if (!(a = realloc(pr, sizeof *a * (nd + 1)))) goto done;
            pr = a;
            if (!(b = realloc(rcl, sizeof *b * (nd + 1)))) goto done;
            rcl = b;
            cap = nd + 1;
        }
        /* the order cmp_coco_map's stable sort gives the drawn images' detections: a detection whose
         * score no other has, its copies in a row; detections of one score, by where their images
         * were drawn, then each image's own order */
        size_t m = 0;
        for (int e = 0; e < c->n;) {
            int e1 = c->tie_end[e];
            if (e1 == e + 1) {
                for (int r = cnt[c->img[e]]; r > 0; r--) seq[m++] = e;
                e = e1;
                continue;
            }
            size_t nc = 0;
            for (int j = e; j < e1; j++) nc += (size_t)cnt[c->img[j]];
            if (nc > cp_cap) {
                copy *q = realloc(cp, sizeof *q * nc);
                if (!q) goto done;
                cp = q;
                cp_cap = nc;
            }
            nc = 0;
            for (int j = e; j < e1; j++)
                for (int r = start[c->img[j]]; r < start[c->img[j] + 1]; r++) cp[nc++] = (copy){at[r], c->within[j], j};
            qsort(cp, nc, sizeof *cp, by_copy);
            for (size_t j = 0; j < nc; j++) seq[m++] = cp[j].e;
            e = e1;
        }
        double all = 0, ap50 = 0;
        for (int t = 0; t < CMP_MAP_IOUS; t++) {
            double ap = seq_ap(c, seq, m, npig, t, pr, rcl);
            if (t == 0) ap50 = ap;
            all += ap;
        }
        s50 += ap50;
        s += all / CMP_MAP_IOUS;
        cats++;
    }
    rc = 0;
    *map50 = cats ? s50 / cats : (double)NAN;
    *map = cats ? s / cats : (double)NAN;
done:
    free(cnt);
    free(start);
    free(at);
    free(fill);
    free(seq);
    free(cp);
    free(pr);
    free(rcl);
    return rc;
}

/* ---- bootstrap intervals ---- */

typedef struct {
    uint32_t s[624];
    int i;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) /* numpy's mt19937_seed (init_genrand) */
{
    for (int k = 0; k < 624; k++) {
        m->s[k] = seed;
        seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)k + 1u;
    }
    m->i = 624;
}

static uint32_t mt_next(mt19937 *m)
{
    if (m->i >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % 624] & 0x7fffffffu);
            m->s[k] = m->s[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* numpy's randint(0, n): a 32-bit draw masked to the smallest power of two above n - 1, redrawn while >= n. */
static int mt_below(mt19937 *m, uint32_t n)
{
    uint32_t rng = n - 1, mask = rng;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    if (!rng) return 0;
    uint32_t v;
    while ((v = mt_next(m) & mask) > rng) {
    }
    return (int)v;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy.percentile(sorted x, q), linear */
static double percentile(const double *x, int n, double q)
{
    double pos = q / 100.0 * (n - 1);
    int lo = (int)floor(pos);
    if (lo >= n - 1) return x[n - 1];
    double t = pos - lo;
    return t >= 0.5 ? x[lo + 1] - (x[lo + 1] - x[lo]) * (1 - t) : x[lo] + (x[lo + 1] - x[lo]) * t;
}

ptq_status cmp_bootstrap_ratio(const double *num, const double *num_a, const double *den, int n, double *lo, double *hi)
{
    ptq_status st = PTQ_OK;
    double *stats = malloc(sizeof *stats * CMP_BOOT);
    mt19937 *m = malloc(sizeof *m);
    CHECK_ALLOC(stats && m ? stats : NULL);
    *lo = *hi = NAN;
    if (n < 1) goto done;
    mt_seed(m, CMP_BOOT_SEED);
    for (int b = 0; b < CMP_BOOT; b++) {
        double s = 0, sa = 0, d = 0;
        for (int i = 0; i < n; i++) {
            int k = mt_below(m, (uint32_t)n);
            s += num[k];
            if (num_a) sa += num_a[k];
            d += den[k];
        }
        d = fmax(d, 1e-300);
        stats[b] = s / d - (num_a ? sa / d : 0.0);
    }
    qsort(stats, CMP_BOOT, sizeof *stats, by_value);
    *lo = percentile(stats, CMP_BOOT, 2.5);
    *hi = percentile(stats, CMP_BOOT, 97.5);
done:
    free(stats);
    free(m);
    return st;
}

ptq_status cmp_bootstrap_stats(int n, int boot, int k, int (*stat)(const int *idx, int n, void *user, double *v), void *user,
                               double *lo, double *hi)
{
    ptq_status st = PTQ_OK;
    size_t nb = (size_t)(boot > 0 ? boot : 1), nn = (size_t)(n > 0 ? n : 1);
    double *stats = malloc(sizeof *stats * nb * (size_t)k), *col = malloc(sizeof *col * nb);
    int *idx = malloc(sizeof *idx * nn * nb), failed = 0;
    mt19937 *m = malloc(sizeof *m);
    CHECK_ALLOC(stats && col && idx && m ? stats : NULL);
    for (int j = 0; j < k; j++) lo[j] = hi[j] = NAN;
    if (n < 1) goto done;
    mt_seed(m, CMP_BOOT_SEED);
    for (size_t b = 0; b < (size_t)boot; b++) /* every draw first, in numpy's order */
        for (size_t i = 0; i < nn; i++) idx[b * nn + i] = mt_below(m, (uint32_t)n);
#pragma omp parallel for schedule(dynamic) reduction(| : failed)
    for (int b = 0; b < boot; b++)
        failed |= stat(idx + (size_t)b * nn, n, user, stats + (size_t)b * (size_t)k) != 0;
    if (failed) FAIL(PTQ_ERR_NOMEM, "out of memory in the bootstrap intervals");
    for (int j = 0; j < k; j++) {
        int c = 0;
        for (int b = 0; b < boot; b++)
            if (!isnan(stats[(size_t)b * (size_t)k + (size_t)j])) col[c++] = stats[(size_t)b * (size_t)k + (size_t)j];
        if (!c) continue;
        qsort(col, (size_t)c, sizeof *col, by_value);
        lo[j] = percentile(col, c, 2.5);
        hi[j] = percentile(col, c, 97.5);
    }
done:
    free(stats);
    free(col);
    free(idx);
    free(m);
    return st;
}
