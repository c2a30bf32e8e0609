/* compare_metrics.c: the output metrics of `ptq compare` (see compare.h, compare_metrics.h). */
#include "engine/compare_metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cmp_sums_add(cmp_sums *m, const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0, dd = 0, mx = m->max_abs;
    for (size_t i = 0; i < n; i++) {
        double x = a[i], y = b[i], d = x - y;
        ab += x * y;
        aa += x * x;
        bb += y * y;
        dd += d * d;
        if (fabs(d) > mx || d != d) mx = d != d ? (double)INFINITY : fabs(d);
    }
    m->ab += ab;
    m->aa += aa;
    m->bb += bb;
    m->dd += dd;
    m->max_abs = mx;
    m->n += (double)n;
}

void cmp_sums_add_images(cmp_sums *m, const float *a, const float *b, size_t n, int images)
{
    size_t per = images > 1 && n % (size_t)images == 0 ? n / (size_t)images : n;
    for (size_t off = 0; off < n; off += per) cmp_sums_add(m, a + off, b + off, per);
}

/* The float output holding the scores of final boxes y ([K, 4] or [N, K, 4]): the first one other
 * than output 0 whose shape is y's without its last dim; -1 when there is none. */
int cmp_box_scores_output(const ptq_plan *p, const ptq_tensor *y)
{
    for (int o = 1; o < ptq_plan_n_outputs(p); o++) {
        const ptq_tensor *s = ptq_plan_output(p, o, NULL);
        int same = s->dtype == PTQ_F32 && s->rank == y->rank - 1;
        for (int d = 0; same && d < s->rank; d++) same = s->dims[d] == y->dims[d];
        if (same) return o;
    }
    return -1;
}

/* 1 when output y looks like a YOLOv8-style raw head for input x: [N, 4 + classes, anchors], the
 * anchors being the cells of strides 8, 16 and 32 (or any count when `asked`). */
static int yolo_head(const ptq_tensor *y, const ptq_tensor *x, int64_t batch, int asked)
{
    if (y->dtype != PTQ_F32 || y->rank != 3 || y->dims[0] != batch || y->dims[1] < 5 || y->dims[2] <= y->dims[1]) return 0;
    if (asked) return 1;
    if (x->rank < 3) return 0;
    int64_t h = x->dims[x->rank - 2], w = x->dims[x->rank - 1], cells = 0;
    for (int s = 8; s <= 32; s *= 2) cells += ((h + s - 1) / s) * ((w + s - 1) / s);
    return y->dims[2] == cells;
}

int cmp_output_kind(const ptq_plan *p, const ptq_tensor *x, int64_t batch, const cmp_metric *m)
{
    const ptq_tensor *y = ptq_plan_output(p, 0, NULL);
    int asked = m->kind == CMP_METRIC_BOX_F1 || m->kind == CMP_METRIC_MAP50 || m->kind == CMP_METRIC_MAP, axis = m->axis;
    if (yolo_head(y, x, batch, asked)) return CMP_OUT_YOLO;
    if (y->dtype == PTQ_F32 && y->dims[y->rank - 1] == 6 && ((y->rank == 2 && (batch == 1 || asked)) ||
                                                             (y->rank == 3 && y->dims[0] == batch)))
        return CMP_OUT_DETECTIONS; /* [K, 6] or [N, K, 6]: x1 y1 x2 y2 score class, as YOLO exports with NMS give */
    if (y->dtype == PTQ_F32 && y->dims[y->rank - 1] == 4 &&
        ((y->rank == 2 && (batch == 1 || asked)) || (y->rank == 3 && y->dims[0] == batch)) && cmp_box_scores_output(p, y) > 0)
        return CMP_OUT_BOXES;
    if (y->dtype != PTQ_F32 || y->rank < 2 || y->dims[0] != batch) return CMP_OUT_OTHER;
    if (y->rank == 2) return y->dims[1] > 1 ? CMP_OUT_CLASSIFIER : CMP_OUT_OTHER;
    if (y->rank == 4 && y->dims[1] == 1) return CMP_OUT_MAP;
    int a = axis < 0 ? y->rank - 1 : axis;
    return a >= 1 && a < y->rank && y->dims[a] > 1 ? CMP_OUT_SEQUENCE : CMP_OUT_OTHER;
}

/* "NAME" or "NAME:AXIS" (1 <= AXIS < PTQ_MAX_RANK; else axis -2): 1 and out set; 0 when s is
 * another metric. */
static int seq_metric(const char *s, const char *name, cmp_metric_kind kind, cmp_metric *out)
{
    size_t n = strlen(name);
    if (strncmp(s, name, n) || (s[n] && s[n] != ':')) return 0;
    out->kind = kind;
    if (!s[n]) return 1;
    char *end;
    long a = strtol(s + n + 1, &end, 10);
    out->axis = *end || end == s + n + 1 || a < 1 || a >= PTQ_MAX_RANK ? -2 : (int)a;
    return 1;
}

int cmp_metric_parse(const char *s, cmp_metric *out)
{
    memset(out, 0, sizeof *out);
    out->axis = -1;
    out->threshold = 0.3f;
    char *end;
    if (!strcmp(s, "cosine")) out->kind = CMP_METRIC_COSINE;
    else if (!strcmp(s, "sqnr")) out->kind = CMP_METRIC_SQNR;
    else if (!strcmp(s, "top1")) out->kind = CMP_METRIC_TOP1;
    else if (!strcmp(s, "box-f1")) out->kind = CMP_METRIC_BOX_F1;
    else if (!strcmp(s, "map50")) out->kind = CMP_METRIC_MAP50;
    else if (!strcmp(s, "map")) out->kind = CMP_METRIC_MAP;
    else if (!strcmp(s, "text-chars")) out->kind = CMP_METRIC_TEXT_CHARS;
    else if (!strcmp(s, "miou")) out->kind = CMP_METRIC_MIOU;
    else if (!strcmp(s, "hmean")) out->kind = CMP_METRIC_HMEAN;
    else if (!strcmp(s, "text-lines")) out->kind = CMP_METRIC_TEXT_LINES;
    else if (seq_metric(s, "seq-top1", CMP_METRIC_SEQ_TOP1, out) || seq_metric(s, "seq-chars", CMP_METRIC_SEQ_CHARS, out) ||
             seq_metric(s, "seq-exact", CMP_METRIC_SEQ_EXACT, out)) {
        if (out->axis == -2) return -1;
    } else if (!strncmp(s, "mask-iou:", 9)) {
        double t = strtod(s + 9, &end);
        if (*end || end == s + 9 || !(t == t) || t < -1e30 || t > 1e30) return -1;
        out->kind = CMP_METRIC_MASK_IOU;
        out->threshold = (float)t;
    } else
        return -1;
    return 0;
}

void cmp_metric_name(const cmp_metric *m, char *buf, size_t cap)
{
    switch (m->kind) {
    case CMP_METRIC_SQNR: snprintf(buf, cap, "sqnr"); break;
    case CMP_METRIC_TOP1: snprintf(buf, cap, "top1"); break;
    case CMP_METRIC_SEQ_TOP1:
    case CMP_METRIC_SEQ_CHARS:
    case CMP_METRIC_SEQ_EXACT: {
        const char *base = m->kind == CMP_METRIC_SEQ_TOP1 ? "seq-top1" : m->kind == CMP_METRIC_SEQ_CHARS ? "seq-chars" : "seq-exact";
        if (m->axis < 0) snprintf(buf, cap, "%s", base);
        else snprintf(buf, cap, "%s:%d", base, m->axis);
        break;
    }
    case CMP_METRIC_MASK_IOU: snprintf(buf, cap, "mask-iou:%g", (double)m->threshold); break;
    case CMP_METRIC_BOX_F1: snprintf(buf, cap, "box-f1"); break;
    case CMP_METRIC_MAP50: snprintf(buf, cap, "map50"); break;
    case CMP_METRIC_MAP: snprintf(buf, cap, "map"); break;
    case CMP_METRIC_TEXT_CHARS: snprintf(buf, cap, "text-chars"); break;
    case CMP_METRIC_MIOU: snprintf(buf, cap, "miou"); break;
    case CMP_METRIC_HMEAN: snprintf(buf, cap, "hmean"); break;
    case CMP_METRIC_TEXT_LINES: snprintf(buf, cap, "text-lines"); break;
    default: snprintf(buf, cap, "cosine");
    }
}

/* The threshold mask-iou uses: the chosen metric's, else DB's usual 0.3. */
float cmp_mask_threshold(const cmp_metric *m)
{
    return m->kind == CMP_METRIC_MASK_IOU ? m->threshold : 0.3f;
}

double cmp_metric_value(const cmp_metric *k, const cmp_metrics *m)
{
    switch (k->kind) {
    case CMP_METRIC_SQNR: return m->sqnr_db;
    case CMP_METRIC_TOP1: return !isnan(m->top1_acc) ? m->top1_acc : m->top1_agree;
    case CMP_METRIC_SEQ_TOP1: return m->seq_top1;
    case CMP_METRIC_SEQ_CHARS: return m->seq_chars;
    case CMP_METRIC_SEQ_EXACT: return m->seq_exact;
    case CMP_METRIC_MASK_IOU: return m->mask_iou;
    case CMP_METRIC_BOX_F1: return m->box_f1;
    case CMP_METRIC_MAP50: return m->map50;
    case CMP_METRIC_MAP: return m->map;
    case CMP_METRIC_TEXT_CHARS: return 1.0 - m->cer;
    case CMP_METRIC_MIOU: return m->miou;
    case CMP_METRIC_HMEAN: return m->hmean;
    case CMP_METRIC_TEXT_LINES: return m->line_acc;
    default: return m->cosine;
    }
}

double cmp_cosine_of(const cmp_sums *m)
{
    if (m->aa == 0 && m->bb == 0) return 1.0;
    if (m->aa == 0 || m->bb == 0) return 0.0;
    return m->ab / sqrt(m->aa * m->bb);
}

double cmp_sqnr_of(const cmp_sums *m)
{
    if (m->dd == 0) return INFINITY;
    return 10.0 * log10(m->aa / m->dd);
}

int cmp_argmax(const float *x, int64_t n)
{
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int)i;
    return best;
}

void cmp_metrics_of(const cmp_acc *m, int kind, int labelled, int images, float threshold, cmp_metrics *out)
{
    int classifier = kind == CMP_OUT_CLASSIFIER;
    out->cosine = m->s.n == 0 ? (double)NAN : cmp_cosine_of(&m->s); /* n/a: no output compared element by element */
    out->sqnr_db = m->s.n == 0 ? (double)NAN : cmp_sqnr_of(&m->s);
    out->max_abs = m->s.n == 0 ? (double)NAN : m->s.max_abs;
    out->top1_agree = classifier && m->rows ? (double)m->agree / (double)m->rows : (double)NAN;
    out->top1_acc = classifier && labelled && m->labelled ? (double)m->correct / (double)m->labelled : (double)NAN;
    out->seq_top1 = kind == CMP_OUT_SEQUENCE && m->seq_positions ? (double)m->seq_agree / (double)m->seq_positions : (double)NAN;
    out->seq_exact = kind == CMP_OUT_SEQUENCE && m->ctc_seqs ? (double)m->ctc_same / (double)m->ctc_seqs : (double)NAN;
    out->seq_chars = kind == CMP_OUT_SEQUENCE && m->ctc_seqs ? 1.0 - (double)m->ctc_edits / (double)(m->ctc_chars ? m->ctc_chars : 1)
                                                         : (double)NAN;
    out->mask_iou = kind != CMP_OUT_MAP ? (double)NAN : m->mask_or ? (double)m->mask_and / (double)m->mask_or : 1.0;
    out->mask_threshold = threshold;
    int boxes = kind == CMP_OUT_BOXES || kind == CMP_OUT_YOLO || kind == CMP_OUT_DETECTIONS;
    out->box_f1 = !boxes ? (double)NAN : m->box_fp + m->box_q ? 2.0 * (double)m->box_match / (double)(m->box_fp + m->box_q) : 1.0;
    out->images = images;
}

/* seq-top1 of one output of rank > 3: argmax over `axis` at every other index, FP32 a against QDQ b. */
void cmp_seq_add(cmp_acc *m, const ptq_tensor *y, int axis, const float *a, const float *b)
{
    int ax = axis < 0 ? y->rank - 1 : axis;
    int64_t len = y->dims[ax], inner = 1, outer = 1;
    for (int d = ax + 1; d < y->rank; d++) inner *= y->dims[d];
    for (int d = 0; d < ax; d++) outer *= y->dims[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *pa = a + o * len * inner + i, *pb = b + o * len * inner + i;
            int64_t ba = 0, bb = 0;
            for (int64_t k = 1; k < len; k++) {
                if (pa[k * inner] > pa[ba * inner]) ba = k;
                if (pb[k * inner] > pb[bb * inner]) bb = k;
            }
            m->seq_agree += ba == bb;
            m->seq_positions++;
        }
}

/* The argmax class of each of T positions, x[t * t_stride + c * c_stride] (first of equal maxima). */
static void argmax_positions(const float *x, int64_t T, int64_t C, int64_t t_stride, int64_t c_stride, int *lab)
{
    for (int64_t t = 0; t < T; t++) {
        const float *p = x + t * t_stride;
        int best = 0;
        for (int64_t c = 1; c < C; c++)
            if (p[c * c_stride] > p[best * c_stride]) best = (int)c;
        lab[t] = best;
    }
}

/* Greedy CTC collapse of T labels, in place: repeats merged, `blank` dropped; the new length. */
static int64_t ctc_collapse(int *lab, int64_t T, int blank)
{
    int64_t n = 0;
    int prev = -1;
    for (int64_t t = 0; t < T; t++) {
        int l = lab[t];
        if (l != prev && l != blank) lab[n++] = l;
        prev = l;
    }
    return n;
}

int64_t cmp_ctc_greedy(const float *x, int64_t T, int64_t C, int64_t t_stride, int64_t c_stride, int blank, int *out)
{
    argmax_positions(x, T, C, t_stride, c_stride, out);
    return ctc_collapse(out, T, blank);
}

int64_t cmp_edit_distance(const int *a, int64_t na, const int *b, int64_t nb, int64_t *row)
{
    for (int64_t j = 0; j <= nb; j++) row[j] = j;
    for (int64_t i = 1; i <= na; i++) {
        int64_t diag = row[0]; /* row[i-1][j-1] */
        row[0] = i;
        for (int64_t j = 1; j <= nb; j++) {
            int64_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[nb];
}

/* seq-top1, seq-chars and seq-exact of one rank-3 output (C on `axis`, T on the other non-batch
 * axis), from one argmax per position: the positions' agreement, then every sequence read by
 * greedy CTC (blank 0) in FP32 a and QDQ b. */
ptq_status cmp_seq3_add(cmp_acc *m, const ptq_tensor *y, int axis, const float *a, const float *b)
{
    ptq_status st = PTQ_OK;
    int ax = axis < 0 ? 2 : axis, tax = ax == 2 ? 1 : 2;
    int64_t N = y->dims[0], T = y->dims[tax], C = y->dims[ax];
    int64_t cs = ax == 2 ? 1 : T, ts = ax == 2 ? C : 1;
    int *la = malloc(sizeof(int) * (size_t)(2 * T + 1));
    int64_t *row = malloc(sizeof(int64_t) * (size_t)(T + 1));
    CHECK_ALLOC(la);
    CHECK_ALLOC(row);
    int *lb = la + T;
    for (int64_t n = 0; n < N; n++) {
        argmax_positions(a + n * T * C, T, C, ts, cs, la);
        argmax_positions(b + n * T * C, T, C, ts, cs, lb);
        for (int64_t t = 0; t < T; t++) m->seq_agree += la[t] == lb[t];
        m->seq_positions += (long)T;
        int64_t na = ctc_collapse(la, T, 0), nb = ctc_collapse(lb, T, 0);
        int64_t e = cmp_edit_distance(la, na, lb, nb, row);
        m->ctc_seqs++;
        m->ctc_same += e == 0;
        m->ctc_chars += (long)na;
        m->ctc_edits += (long)e;
    }
done:
    free(la);
    free(row);
    return st;
}

/* mask-iou of one map: pixels > t in FP32 a and in QDQ b. */
void cmp_mask_add(cmp_acc *m, const float *a, const float *b, size_t n, float t)
{
    long both = 0, either = 0;
    for (size_t i = 0; i < n; i++) {
        int x = a[i] > t, y = b[i] > t;
        both += x & y;
        either += x | y;
    }
    m->mask_and += both;
    m->mask_or += either;
    for (size_t i = 0; i < n; i++) {
        m->mask_fp_on += a[i] > t;
        m->mask_q_on += b[i] > t;
    }
}

/* ---- box-f1: a detector's boxes against FP32's ---- */

#define BOX_CONF 0.25f      /* boxes scoring below are not counted */
#define BOX_MATCH_IOU 0.5f  /* a QDQ box agrees with an FP32 box of the same class at this IoU */
#define BOX_NMS_IOU 0.7f    /* YOLOv8's NMS for raw heads */
enum { BOX_MAX = 300 };     /* boxes kept per image after NMS */

typedef struct {
    float x1, y1, x2, y2, score;
    int cls;       /* -1: class-agnostic */
    int64_t idx;   /* position in the output: the tie-break */
} det_box;

static float box_iou(const det_box *a, const det_box *b)
{
    float w = fminf(a->x2, b->x2) - fmaxf(a->x1, b->x1), h = fminf(a->y2, b->y2) - fmaxf(a->y1, b->y1);
    if (w <= 0 || h <= 0) return 0;
    float inter = w * h, ua = (a->x2 - a->x1) * (a->y2 - a->y1) + (b->x2 - b->x1) * (b->y2 - b->y1) - inter;
    return ua > 0 ? inter / ua : 0;
}

static int by_score(const void *pa, const void *pb) /* score descending, then position */
{
    const det_box *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Final boxes (x1 y1 x2 y2) and their scores, K of them: those scoring >= BOX_CONF, by score. */
static int final_boxes(const float *boxes, const float *scores, int64_t k, det_box *out)
{
    int n = 0;
    for (int64_t i = 0; i < k; i++)
        if (scores[i] >= BOX_CONF && scores[i] == scores[i])
            out[n++] = (det_box){boxes[4 * i], boxes[4 * i + 1], boxes[4 * i + 2], boxes[4 * i + 3], scores[i], -1, i};
    qsort(out, (size_t)n, sizeof *out, by_score);
    return n;
}

/* Detections [k, 6] (x1 y1 x2 y2 score class) scoring >= conf, by score. */
static int detections(const float *d, int64_t k, float conf, det_box *out)
{
    int n = 0;
    for (int64_t i = 0; i < k; i++) {
        const float *r = d + 6 * i;
        if (r[4] >= conf && r[4] == r[4] && r[5] > -1e9f && r[5] < 1e9f)
            out[n++] = (det_box){r[0], r[1], r[2], r[3], r[4], (int)r[5], i};
    }
    qsort(out, (size_t)n, sizeof *out, by_score);
    return n;
}

/* A YOLOv8-style raw head of one image, y [4 + classes, a] (cx cy w h, class scores), decoded:
 * each anchor's best class at >= conf, then per-class NMS at BOX_NMS_IOU, BOX_MAX at most.
 * cand holds a entries. */
static int yolo_boxes(const float *y, int64_t rows, int64_t a, float conf, det_box *cand, det_box *out)
{
    int n = 0, kept = 0;
    for (int64_t j = 0; j < a; j++) {
        int best = 0;
        for (int64_t c = 1; c < rows - 4; c++)
            if (y[(4 + c) * a + j] > y[(4 + best) * a + j]) best = (int)c;
        float s = y[(4 + best) * a + j];
        if (!(s >= conf)) continue;
        float cx = y[j], cy = y[a + j], w = y[2 * a + j], h = y[3 * a + j];
        cand[n++] = (det_box){cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, s, best, j};
    }
    qsort(cand, (size_t)n, sizeof *cand, by_score);
    for (int i = 0; i < n && kept < BOX_MAX; i++) {
        int suppressed = 0;
        for (int k = 0; k < kept && !suppressed; k++) suppressed = out[k].cls == cand[i].cls && box_iou(&out[k], &cand[i]) > BOX_NMS_IOU;
        if (!suppressed) out[kept++] = cand[i];
    }
    return kept;
}

/* Matches q to f (both by score): each FP32 box takes the unmatched QDQ box of its class with the
 * highest IoU, at >= BOX_MATCH_IOU (the first on ties). used holds nq flags. */
static void boxes_add(cmp_acc *m, const det_box *f, int nf, const det_box *q, int nq, unsigned char *used)
{
    memset(used, 0, (size_t)nq + 1);
    for (int i = 0; i < nf; i++) {
        int best = -1;
        float bi = BOX_MATCH_IOU;
        for (int j = 0; j < nq; j++) {
            if (used[j] || q[j].cls != f[i].cls) continue;
            float v = box_iou(&f[i], &q[j]);
            if (v >= bi && (best < 0 || v > bi)) {
                best = j;
                bi = v;
            }
        }
        if (best >= 0) {
            used[best] = 1;
            m->box_match++;
        }
    }
    m->box_fp += nf;
    m->box_q += nq;
}

/* box-f1 of one batch: FP32's output 0 fp (fp_n floats) and scores (fs, CMP_OUT_BOXES) against the QDQ
 * model's plan outputs. */
ptq_status cmp_box_add(cmp_acc *m, int kind, const ptq_plan *p, int nb, const float *fp, size_t fp_n, const float *fs)
{
    ptq_status st = PTQ_OK;
    const ptq_tensor *y = ptq_plan_output(p, 0, NULL);
    det_box *a = NULL, *b = NULL, *cand = NULL;
    unsigned char *used = NULL;
    if (kind == CMP_OUT_YOLO) {
        int64_t rows = y->dims[1], na = y->dims[2];
        a = malloc(sizeof *a * BOX_MAX);
        b = malloc(sizeof *b * BOX_MAX);
        cand = malloc(sizeof *cand * (size_t)na);
        used = malloc(BOX_MAX + 1);
        CHECK_ALLOC(a && b && cand && used ? a : NULL);
        for (int i = 0; i < nb; i++) {
            int nf = yolo_boxes(fp + (size_t)i * (size_t)(rows * na), rows, na, BOX_CONF, cand, a);
            int nq = yolo_boxes((const float *)y->data + (size_t)i * (size_t)(rows * na), rows, na, BOX_CONF, cand, b);
            boxes_add(m, a, nf, b, nq, used);
        }
    } else if (kind == CMP_OUT_DETECTIONS) {
        int per = y->rank == 3 ? nb : 1;
        int64_t kq = y->rank == 3 ? y->dims[1] : y->dims[0], kf = (int64_t)(fp_n / 6) / per;
        a = malloc(sizeof *a * (size_t)(kf + 1));
        b = malloc(sizeof *b * (size_t)(kq + 1));
        used = malloc((size_t)kq + 1);
        CHECK_ALLOC(a && b && used ? a : NULL);
        for (int i = 0; i < per; i++) {
            int nf = detections(fp + (size_t)(i * kf * 6), kf, BOX_CONF, a);
            int nq = detections((const float *)y->data + (size_t)(i * kq * 6), kq, BOX_CONF, b);
            boxes_add(m, a, nf, b, nq, used);
        }
    } else {
        int so = cmp_box_scores_output(p, y);
        const ptq_tensor *s = ptq_plan_output(p, so, NULL);
        int64_t kq = y->rank == 3 ? y->dims[1] : y->dims[0], kf = (int64_t)(fp_n / 4) / (y->rank == 3 ? nb : 1);
        a = malloc(sizeof *a * (size_t)(kf + 1));
        b = malloc(sizeof *b * (size_t)(kq + 1));
        used = malloc((size_t)kq + 1);
        CHECK_ALLOC(a && b && used ? a : NULL);
        for (int i = 0; i < (y->rank == 3 ? nb : 1); i++) {
            int nf = final_boxes(fp + (size_t)(i * kf * 4), fs + (size_t)(i * kf), kf, a);
            int nq = final_boxes((const float *)y->data + (size_t)(i * kq * 4), (const float *)s->data + (size_t)(i * kq), kq, b);
            boxes_add(m, a, nf, b, nq, used);
        }
    }
done:
    free(a);
    free(b);
    free(cand);
    free(used);
    return st;
}

/* Python's round(): half to even. */
static double round_half_even(double v)
{
    double r = round(v);
    if (fabs(v - trunc(v)) == 0.5) r = 2.0 * round(v / 2.0);
    return r;
}

ptq_status cmp_image_dets(int kind, const ptq_tensor *y0, int nb, const float *y, size_t y_n, int i, const pp_config *cfg,
                          int tw, int th, const pp_meta *meta, cmp_det **out, int *n_out)
{
    ptq_status st = PTQ_OK;
    det_box *cand = NULL, *b = NULL;
    int n = 0;
    *out = NULL;
    *n_out = 0;
    if (kind == CMP_OUT_YOLO) {
        int64_t rows = y0->dims[1], na = y0->dims[2];
        if (y_n != (size_t)(nb * rows * na)) return PTQ_OK;
        cand = malloc(sizeof *cand * (size_t)(na + 1));
        b = malloc(sizeof *b * BOX_MAX);
        CHECK_ALLOC(cand && b ? b : NULL);
        n = yolo_boxes(y + (size_t)i * (size_t)(rows * na), rows, na, CMP_TRUTH_CONF, cand, b);
    } else if (kind == CMP_OUT_DETECTIONS) {
        int per = y0->rank == 3 ? nb : 1;
        int64_t k = (int64_t)(y_n / 6) / per;
        if (y0->rank != 3 && i > 0) return PTQ_OK; /* [K, 6]: a batch of one */
        b = malloc(sizeof *b * (size_t)(k + 1));
        CHECK_ALLOC(b);
        n = detections(y + (size_t)(i * k * 6), k, CMP_TRUTH_CONF, b);
    } else
        FAIL(PTQ_ERR_UNSUPPORTED, "mAP needs a detector's classes: output 0 is neither a YOLO head nor detections [K, 6]");
    *out = malloc(sizeof **out * (size_t)(n + 1));
    CHECK_ALLOC(*out);
    /* back to the image as Ultralytics' scale_boxes: a letterbox by its gain and padding, other
     * geometries by the scale and offset preprocessing used; clipped to the image */
    double gain_x = meta->scale_x, gain_y = meta->scale_y, pad_x = meta->pad_left, pad_y = meta->pad_top;
    double w = meta->src_w, h = meta->src_h;
    if (cfg->mode == PP_MODE_LETTERBOX) {
        double g = fmin((double)th / h, (double)tw / w);
        if (!cfg->scaleup && g > 1.0) g = 1.0;
        gain_x = gain_y = g;
        pad_x = round_half_even((tw - w * g) / 2 - 0.1);
        pad_y = round_half_even((th - h * g) / 2 - 0.1);
    }
    for (int j = 0; j < n; j++) {
        double x1 = fmin(fmax(((double)b[j].x1 - pad_x) / gain_x, 0.0), w);
        double y1 = fmin(fmax(((double)b[j].y1 - pad_y) / gain_y, 0.0), h);
        double x2 = fmin(fmax(((double)b[j].x2 - pad_x) / gain_x, 0.0), w);
        double y2 = fmin(fmax(((double)b[j].y2 - pad_y) / gain_y, 0.0), h);
        (*out)[j] = (cmp_det){x1, y1, x2 - x1, y2 - y1, b[j].score, b[j].cls};
    }
    *n_out = n;
done:
    free(cand);
    free(b);
    return st;
}
