/* compare.c: QDQ variants against FP32 on held-out images (see compare.h). */
#include "engine/compare.h"
#include "engine/model.h"
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

/* ---- output metrics ---- */

/* Sums that make cosine and SQNR of b against a: sum ab, aa, bb, (a - b)^2, and max |a - b|. */
typedef struct {
    double ab, aa, bb, dd, max_abs;
    double n; /* elements compared: none (every output of data-dependent size differed) makes the sums' metrics NaN */
} sums;

static void sums_add(sums *m, const float *a, const float *b, size_t n)
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

/* sums_add in 8 interleaved double lanes (element i goes to lane i mod 8, the lanes added
 * in a fixed order at the end): the same sums up to rounding, at any thread count the same
 * bits, and several times faster than one dependent chain per sum. For the layer-wise errors,
 * whose tensors are large; the output metrics keep sums_add's order (tests/e2e/compare.sh
 * recomputes them exactly). */
#define LANES 8
__attribute__((target_clones("avx512f", "avx2", "default")))
static void sums_add_lanes(sums *m, const float *a, const float *b, size_t n)
{
    double ab[LANES] = {0}, aa[LANES] = {0}, bb[LANES] = {0}, dd[LANES] = {0}, mx[LANES] = {0};
    int nan = 0;
    for (size_t i = 0; i < n; i += LANES) { /* past the end, both sides are 0: nothing added */
        int k = n - i < LANES ? (int)(n - i) : LANES;
        for (int l = 0; l < LANES; l++) {
            double x = l < k ? (double)a[i + l] : 0.0, y = l < k ? (double)b[i + l] : 0.0, d = x - y, ad = fabs(d);
            ab[l] += x * y;
            aa[l] += x * x;
            bb[l] += y * y;
            dd[l] += d * d;
            mx[l] = ad > mx[l] ? ad : mx[l];
            nan |= d != d;
        }
    }
    for (int l = 0; l < LANES; l++) {
        m->ab += ab[l];
        m->aa += aa[l];
        m->bb += bb[l];
        m->dd += dd[l];
        if (mx[l] > m->max_abs) m->max_abs = mx[l];
    }
    if (nan) m->max_abs = INFINITY;
    m->n += (double)n;
}

typedef struct {
    sums s;
    long agree, rows, correct, labelled;
    long seq_agree, seq_positions;   /* seq-top1 */
    long ctc_seqs, ctc_same;         /* seq-exact */
    long ctc_chars, ctc_edits;       /* seq-chars */
    long mask_and, mask_or;          /* mask-iou */
    long box_match, box_fp, box_q;   /* box-f1: matched boxes, FP32's and the QDQ model's */
} acc;

/* What output 0 is, from its shape: which of top1, seq-top1, mask-iou and box-f1 apply. */
enum { OUT_OTHER = 0, OUT_CLASSIFIER, OUT_SEQUENCE, OUT_MAP, OUT_BOXES, OUT_YOLO, OUT_DETECTIONS };

/* The float output holding the scores of final boxes y ([K, 4] or [N, K, 4]): the first one other
 * than output 0 whose shape is y's without its last dim; -1 when there is none. */
static int box_scores_output(const ptq_plan *p, const ptq_tensor *y)
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

static int output_kind(const ptq_plan *p, const ptq_tensor *x, int64_t batch, const cmp_metric *m)
{
    const ptq_tensor *y = ptq_plan_output(p, 0, NULL);
    int asked = m->kind == CMP_METRIC_BOX_F1, axis = m->axis;
    if (yolo_head(y, x, batch, asked)) return OUT_YOLO;
    if (y->dtype == PTQ_F32 && y->dims[y->rank - 1] == 6 && ((y->rank == 2 && (batch == 1 || asked)) ||
                                                             (y->rank == 3 && y->dims[0] == batch)))
        return OUT_DETECTIONS; /* [K, 6] or [N, K, 6]: x1 y1 x2 y2 score class, as YOLO exports with NMS give */
    if (y->dtype == PTQ_F32 && y->dims[y->rank - 1] == 4 &&
        ((y->rank == 2 && (batch == 1 || asked)) || (y->rank == 3 && y->dims[0] == batch)) && box_scores_output(p, y) > 0)
        return OUT_BOXES;
    if (y->dtype != PTQ_F32 || y->rank < 2 || y->dims[0] != batch) return OUT_OTHER;
    if (y->rank == 2) return y->dims[1] > 1 ? OUT_CLASSIFIER : OUT_OTHER;
    if (y->rank == 4 && y->dims[1] == 1) return OUT_MAP;
    int a = axis < 0 ? y->rank - 1 : axis;
    return a >= 1 && a < y->rank && y->dims[a] > 1 ? OUT_SEQUENCE : OUT_OTHER;
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
    default: snprintf(buf, cap, "cosine");
    }
}

/* The threshold mask-iou uses: the chosen metric's, else DB's usual 0.3. */
static float mask_threshold(const cmp_metric *m)
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
    default: return m->cosine;
    }
}

static double cosine_of(const sums *m)
{
    if (m->aa == 0 && m->bb == 0) return 1.0;
    if (m->aa == 0 || m->bb == 0) return 0.0;
    return m->ab / sqrt(m->aa * m->bb);
}

static double sqnr_of(const sums *m)
{
    if (m->dd == 0) return INFINITY;
    return 10.0 * log10(m->aa / m->dd);
}

static int argmax(const float *x, int64_t n)
{
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int)i;
    return best;
}

static void metrics_of(const acc *m, int kind, int labelled, int images, float threshold, cmp_metrics *out)
{
    int classifier = kind == OUT_CLASSIFIER;
    out->cosine = m->s.n == 0 ? (double)NAN : cosine_of(&m->s); /* n/a: no output compared element by element */
    out->sqnr_db = m->s.n == 0 ? (double)NAN : sqnr_of(&m->s);
    out->max_abs = m->s.n == 0 ? (double)NAN : m->s.max_abs;
    out->top1_agree = classifier && m->rows ? (double)m->agree / (double)m->rows : (double)NAN;
    out->top1_acc = classifier && labelled && m->labelled ? (double)m->correct / (double)m->labelled : (double)NAN;
    out->seq_top1 = kind == OUT_SEQUENCE && m->seq_positions ? (double)m->seq_agree / (double)m->seq_positions : (double)NAN;
    out->seq_exact = kind == OUT_SEQUENCE && m->ctc_seqs ? (double)m->ctc_same / (double)m->ctc_seqs : (double)NAN;
    out->seq_chars = kind == OUT_SEQUENCE && m->ctc_seqs ? 1.0 - (double)m->ctc_edits / (double)(m->ctc_chars ? m->ctc_chars : 1)
                                                         : (double)NAN;
    out->mask_iou = kind != OUT_MAP ? (double)NAN : m->mask_or ? (double)m->mask_and / (double)m->mask_or : 1.0;
    out->mask_threshold = threshold;
    int boxes = kind == OUT_BOXES || kind == OUT_YOLO || kind == OUT_DETECTIONS;
    out->box_f1 = !boxes ? (double)NAN : m->box_fp + m->box_q ? 2.0 * (double)m->box_match / (double)(m->box_fp + m->box_q) : 1.0;
    out->images = images;
}

/* seq-top1 of one output of rank > 3: argmax over `axis` at every other index, FP32 a against QDQ b. */
static void seq_add(acc *m, const ptq_tensor *y, int axis, const float *a, const float *b)
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
static ptq_status seq3_add(acc *m, const ptq_tensor *y, int axis, const float *a, const float *b)
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
static void mask_add(acc *m, const float *a, const float *b, size_t n, float t)
{
    long both = 0, either = 0;
    for (size_t i = 0; i < n; i++) {
        int x = a[i] > t, y = b[i] > t;
        both += x & y;
        either += x | y;
    }
    m->mask_and += both;
    m->mask_or += either;
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

/* Detections [k, 6] (x1 y1 x2 y2 score class) scoring >= BOX_CONF, by score. */
static int detections(const float *d, int64_t k, det_box *out)
{
    int n = 0;
    for (int64_t i = 0; i < k; i++) {
        const float *r = d + 6 * i;
        if (r[4] >= BOX_CONF && r[4] == r[4] && r[5] > -1e9f && r[5] < 1e9f)
            out[n++] = (det_box){r[0], r[1], r[2], r[3], r[4], (int)r[5], i};
    }
    qsort(out, (size_t)n, sizeof *out, by_score);
    return n;
}

/* A YOLOv8-style raw head of one image, y [4 + classes, a] (cx cy w h, class scores), decoded:
 * each anchor's best class at >= BOX_CONF, then per-class NMS at BOX_NMS_IOU, BOX_MAX at most.
 * cand holds a entries. */
static int yolo_boxes(const float *y, int64_t rows, int64_t a, det_box *cand, det_box *out)
{
    int n = 0, kept = 0;
    for (int64_t j = 0; j < a; j++) {
        int best = 0;
        for (int64_t c = 1; c < rows - 4; c++)
            if (y[(4 + c) * a + j] > y[(4 + best) * a + j]) best = (int)c;
        float s = y[(4 + best) * a + j];
        if (!(s >= BOX_CONF)) continue;
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
static void boxes_add(acc *m, const det_box *f, int nf, const det_box *q, int nq, unsigned char *used)
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

/* box-f1 of one batch: FP32's output 0 fp (fp_n floats) and scores (fs, OUT_BOXES) against the QDQ
 * model's plan outputs. */
static ptq_status box_add(acc *m, int kind, const ptq_plan *p, int nb, const float *fp, size_t fp_n, const float *fs)
{
    ptq_status st = PTQ_OK;
    const ptq_tensor *y = ptq_plan_output(p, 0, NULL);
    det_box *a = NULL, *b = NULL, *cand = NULL;
    unsigned char *used = NULL;
    if (kind == OUT_YOLO) {
        int64_t rows = y->dims[1], na = y->dims[2];
        a = malloc(sizeof *a * BOX_MAX);
        b = malloc(sizeof *b * BOX_MAX);
        cand = malloc(sizeof *cand * (size_t)na);
        used = malloc(BOX_MAX + 1);
        CHECK_ALLOC(a && b && cand && used ? a : NULL);
        for (int i = 0; i < nb; i++) {
            int nf = yolo_boxes(fp + (size_t)i * (size_t)(rows * na), rows, na, cand, a);
            int nq = yolo_boxes((const float *)y->data + (size_t)i * (size_t)(rows * na), rows, na, cand, b);
            boxes_add(m, a, nf, b, nq, used);
        }
    } else if (kind == OUT_DETECTIONS) {
        int per = y->rank == 3 ? nb : 1;
        int64_t kq = y->rank == 3 ? y->dims[1] : y->dims[0], kf = (int64_t)(fp_n / 6) / per;
        a = malloc(sizeof *a * (size_t)(kf + 1));
        b = malloc(sizeof *b * (size_t)(kq + 1));
        used = malloc((size_t)kq + 1);
        CHECK_ALLOC(a && b && used ? a : NULL);
        for (int i = 0; i < per; i++) {
            int nf = detections(fp + (size_t)(i * kf * 6), kf, a);
            int nq = detections((const float *)y->data + (size_t)(i * kq * 6), kq, b);
            boxes_add(m, a, nf, b, nq, used);
        }
    } else {
        int so = box_scores_output(p, y);
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
 * output whose size differs, as data-dependent ones may, adds to no sums). */
static ptq_status score_batch(eng_runner *rs, int n, const ptq_tensor *x, float *const *fp32, const size_t *fp32_n,
                              int n_out, const int *labels, int kind, const cmp_metric *metric, acc *accs)
{
    ptq_status st = PTQ_OK;
    int nb = (int)x->dims[0];
    for (int k = 0; k < n; k++) {
        TRY(eng_runner_run(&rs[k], x));
        for (int o = 0; o < n_out; o++) {
            const ptq_tensor *y = ptq_plan_output(rs[k].plan, o, NULL);
            if (y->dtype == PTQ_F32 && fp32[o] && fp32_n[o] == ptq_tensor_numel(y))
                sums_add(&accs[k].s, fp32[o], y->data, ptq_tensor_numel(y));
        }
        if (kind == OUT_BOXES || kind == OUT_YOLO || kind == OUT_DETECTIONS) {
            int so = kind == OUT_BOXES ? box_scores_output(rs[k].plan, ptq_plan_output(rs[k].plan, 0, NULL)) : 0;
            TRY(box_add(&accs[k], kind, rs[k].plan, nb, fp32[0], fp32_n[0], so > 0 ? fp32[so] : NULL));
            continue;
        }
        const ptq_tensor *y = ptq_plan_output(rs[k].plan, 0, NULL);
        if (kind == OUT_SEQUENCE && y->rank == 3) TRY(seq3_add(&accs[k], y, metric->axis, fp32[0], y->data));
        else if (kind == OUT_SEQUENCE) seq_add(&accs[k], y, metric->axis, fp32[0], y->data);
        if (kind == OUT_MAP) mask_add(&accs[k], fp32[0], y->data, ptq_tensor_numel(y), mask_threshold(metric));
        if (kind != OUT_CLASSIFIER) continue;
        int64_t C = y->dims[1];
        for (int i = 0; i < nb; i++) {
            int want = argmax(fp32[0] + i * C, C), got = argmax((const float *)y->data + i * C, C);
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
    acc *accs = calloc((size_t)n + 1, sizeof *accs);
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
        if (kind < 0) kind = output_kind(ref.plan, &t, nb, &ev->metric);
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
        metrics_of(&accs[k], kind, ev->labels != NULL, images, mask_threshold(&ev->metric), &out[k]);
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

/* ---- layer-wise ---- */

typedef struct {
    const char *tensor, *dq;  /* names in the QDQ graph (borrowed) */
    float scale;
    sums acc, iso;                   /* accumulated, isolated */
    float *copy;                     /* the QDQ side, when it came first */
    size_t copy_n, copy_cap;
    int order;                       /* FP32 execution order, -1 unseen */
} layer_acc;

/* Copies of the QDQ side go back to a list of spare buffers when compared, and the next copy
 * takes the smallest spare that fits, else a new buffer cut from a slab (a block of the
 * evaluations' pool the size of the QDQ plan's activations), else malloc: memory the kernel has mapped
 * already, not fresh pages for every tensor of every batch. */
typedef struct {
    float **buf;
    size_t *cap;
    int n;
    char *slab;          /* borrowed from the pool; buffers cut from it are not freed alone */
    size_t slab_cap, slab_used;
} spares;

static int from_slab(const spares *s, const float *p)
{
    return s->slab && (const char *)p >= s->slab && (const char *)p < s->slab + s->slab_cap;
}

static void spare_put(spares *s, float *p, size_t cap)
{
    if (!p) return;
    s->buf[s->n] = p;
    s->cap[s->n++] = cap;
}

static float *spare_take(spares *s, size_t n, size_t *cap)
{
    int best = -1;
    for (int i = 0; i < s->n; i++)
        if (s->cap[i] >= n && (best < 0 || s->cap[i] < s->cap[best])) best = i;
    if (best < 0) {
        size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
        *cap = n;
        if (s->slab && s->slab_cap - s->slab_used >= bytes) {
            s->slab_used += bytes;
            return (float *)(void *)(s->slab + s->slab_used - bytes);
        }
        return malloc(n * sizeof(float));
    }
    float *p = s->buf[best];
    *cap = s->cap[best];
    s->buf[best] = s->buf[--s->n];
    s->cap[best] = s->cap[s->n];
    return p;
}

typedef struct {
    layer_acc *l;
    int n, seen;
    ptq_name_index *by_tensor;       /* FP32 graph value -> index in l (via tensor_slot) */
    ptq_name_index *by_qvalue;       /* QDQ graph values by name */
    int *tensor_slot, *dq_slot;      /* per FP32 value / QDQ node index: layer or -1 */
    const ptq_graph *gq;
    ptq_plan *qplan;
    int q_finished;
    int pending;                     /* layer the QDQ plan is being stepped to, or -1 */
    spares spare;                    /* one slot per layer: a layer holds a copy or a spare */
    int nthreads;
    const float *fp32;               /* that layer's FP32 data */
} lockstep;

/* What each plan's observer sees (everything else may fuse): the quantized tensors on
 * the FP32 side, their dequantized forms on the QDQ side. */
static int wants_fp32(const char *name, void *user)
{
    const lockstep *ls = user;
    int v = ptq_name_index_find(ls->by_tensor, name);
    return v >= 0 && ls->tensor_slot[v] >= 0;
}

static int wants_qdq(const char *name, void *user)
{
    const lockstep *ls = user;
    int v = ptq_name_index_find(ls->by_qvalue, name);
    int node = v >= 0 ? ls->gq->values[v].producer : -1;
    return node >= 0 && ls->dq_slot[node] >= 0;
}

static ptq_status layer_sums(const float *a, const float *b, size_t n, float scale, int nthreads, sums *m);

/* QDQ side: a dequantized tensor. Compared at once when the FP32 side is waiting for it,
 * copied when it came first. */
static ptq_status observe_qdq(const char *name, int node, const ptq_tensor *t, void *user)
{
    lockstep *ls = user;
    (void)name;
    if (node < 0) return PTQ_OK;
    int k = ls->dq_slot[node];
    if (k < 0) return PTQ_OK;
    layer_acc *l = &ls->l[k];
    size_t n = ptq_tensor_numel(t);
    if (k == ls->pending) {
        ls->pending = -1;
        return layer_sums(ls->fp32, t->data, n, 0.0f, ls->nthreads, &l->acc);
    }
    spare_put(&ls->spare, l->copy, l->copy_cap);
    l->copy = spare_take(&ls->spare, n, &l->copy_cap);
    if (!l->copy) {
        ptq_error("out of memory comparing layers");
        return PTQ_ERR_NOMEM;
    }
    memcpy(l->copy, t->data, n * sizeof(float));
    l->copy_n = n;
    return PTQ_OK;
}

/* Sums of x y, x x, y y and (x - y)^2 for y = DQ(Q(x)) as the QDQ model computes it
 * (quant_round_s8: round half to even, saturate to [-128, 127], NaN to 0; then q * scale
 * in float), in sums_add_lanes' 8 double lanes. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void isolated_sums(const float *a, size_t n, float scale, sums *m)
{
    double ab[LANES] = {0}, aa[LANES] = {0}, bb[LANES] = {0}, dd[LANES] = {0};
    float y[LANES];
    for (size_t i = 0; i < n; i += LANES) { /* lanes as in sums_add_lanes */
        int k = n - i < LANES ? (int)(n - i) : LANES;
        for (int l = 0; l < LANES; l++) {
            float x = l < k ? a[i + l] : 0.0f, q = rintf(x / scale);
            q = q >= -128.0f ? q : (q != q ? 0.0f : -128.0f);
            q = q > 127.0f ? 127.0f : q;
            y[l] = q * scale;
        }
        for (int l = 0; l < LANES; l++) {
            double xd = l < k ? (double)a[i + l] : 0.0, yd = y[l], d = xd - yd;
            ab[l] += xd * yd;
            aa[l] += xd * xd;
            bb[l] += yd * yd;
            dd[l] += d * d;
        }
    }
    for (int l = 0; l < LANES; l++) {
        m->ab += ab[l];
        m->aa += aa[l];
        m->bb += bb[l];
        m->dd += dd[l];
    }
}

/* The layer-wise sums of a (and b, or DQ(Q(a)) with `scale` when b is NULL) over blocks of
 * 2^16 elements, the blocks in parallel and their sums added in block order: the same bits at
 * any thread count. */
#define SUM_BLOCK ((size_t)1 << 16)
static ptq_status layer_sums(const float *a, const float *b, size_t n, float scale, int nthreads, sums *m)
{
    size_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    sums *part = calloc(nb + 1, sizeof *part);
    if (!part) {
        ptq_error("out of memory comparing layers");
        return PTQ_ERR_NOMEM;
    }
    int nt = nthreads > 1 && nb > 1 ? nthreads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t k = 0; k < nb; k++) {
        size_t off = k * SUM_BLOCK, len = n - off < SUM_BLOCK ? n - off : SUM_BLOCK;
        if (b) sums_add_lanes(&part[k], a + off, b + off, len);
        else isolated_sums(a + off, len, scale, &part[k]);
    }
    for (size_t k = 0; k < nb; k++) {
        m->ab += part[k].ab;
        m->aa += part[k].aa;
        m->bb += part[k].bb;
        m->dd += part[k].dd;
        if (part[k].max_abs > m->max_abs) m->max_abs = part[k].max_abs;
    }
    free(part);
    return PTQ_OK;
}

/* FP32 side: a tensor the QDQ model quantizes. Isolated error at once; accumulated
 * against the copy, or by stepping the QDQ plan until it dequantizes the same tensor. */
static ptq_status observe_fp32(const char *name, int node, const ptq_tensor *t, void *user)
{
    lockstep *ls = user;
    ptq_status st = PTQ_OK;
    int k = ptq_name_index_find(ls->by_tensor, name);
    k = k >= 0 ? ls->tensor_slot[k] : -1;
    (void)node;
    if (k < 0) return PTQ_OK;
    layer_acc *l = &ls->l[k];
    const float *a = t->data;
    size_t n = ptq_tensor_numel(t);
    if (l->order < 0) l->order = ls->seen++;
    TRY(layer_sums(a, NULL, n, l->scale, ls->nthreads, &l->iso));
    if (l->copy) {
        if (l->copy_n == n) TRY(layer_sums(a, l->copy, n, 0.0f, ls->nthreads, &l->acc));
        spare_put(&ls->spare, l->copy, l->copy_cap);
        l->copy = NULL;
        return PTQ_OK;
    }
    ls->pending = k;
    ls->fp32 = a;
    while (ls->pending == k && !ls->q_finished) TRY(ptq_plan_step(ls->qplan, &ls->q_finished));
    ls->pending = -1;
done:
    return st;
}

ptq_status cmp_layers(const cmp_eval *ev, const ptq_graph *gq, cmp_layer **out, int *n_out)
{
    ptq_status st = PTQ_OK;
    pp_dataset *d = NULL;
    lockstep ls = {.gq = gq, .pending = -1};
    eng_runner ra = {.g = ev->g}, rb = {.g = gq};
    *out = NULL;
    *n_out = 0;
    ls.l = calloc((size_t)gq->n_nodes + 1, sizeof *ls.l);
    ls.tensor_slot = malloc(sizeof(int) * ((size_t)ev->g->n_values + 1));
    ls.dq_slot = malloc(sizeof(int) * ((size_t)gq->n_nodes + 1));
    ls.spare.buf = malloc(sizeof(float *) * ((size_t)gq->n_nodes + 1));
    ls.spare.cap = malloc(sizeof(size_t) * ((size_t)gq->n_nodes + 1));
    CHECK_ALLOC(ls.spare.buf);
    CHECK_ALLOC(ls.spare.cap);
    ls.by_tensor = ptq_name_index_build(ev->g);
    ls.by_qvalue = ptq_name_index_build(gq);
    CHECK_ALLOC(ls.by_qvalue);
    CHECK_ALLOC(ls.l);
    CHECK_ALLOC(ls.tensor_slot);
    CHECK_ALLOC(ls.dq_slot);
    CHECK_ALLOC(ls.by_tensor);
    for (int v = 0; v < ev->g->n_values; v++) ls.tensor_slot[v] = -1;
    for (int i = 0; i < gq->n_nodes; i++) ls.dq_slot[i] = -1;
    /* the quantized activations: DequantizeLinear(QuantizeLinear(t)) with t a tensor of
     * the FP32 model that is not a constant */
    for (int i = 0; i < gq->n_nodes; i++) {
        const ptq_node *dq = &gq->nodes[i];
        if (strcmp(dq->op_type, "DequantizeLinear") || dq->n_inputs < 2 || dq->inputs[0] < 0) continue;
        int qi = gq->values[dq->inputs[0]].producer;
        if (qi < 0 || strcmp(gq->nodes[qi].op_type, "QuantizeLinear") || gq->nodes[qi].inputs[0] < 0) continue;
        const ptq_value *src = &gq->values[gq->nodes[qi].inputs[0]];
        int fv = ptq_name_index_find(ls.by_tensor, src->name);
        if (fv < 0 || ev->g->values[fv].kind == PTQ_VALUE_INITIALIZER || ls.tensor_slot[fv] >= 0) continue;
        const ptq_value *sc = &gq->values[dq->inputs[1]];
        if (sc->kind != PTQ_VALUE_INITIALIZER || sc->t.dtype != PTQ_F32 || ptq_tensor_numel(&sc->t) != 1) continue;
        layer_acc *l = &ls.l[ls.n];
        l->tensor = src->name;
        l->dq = gq->values[dq->outputs[0]].name;
        l->scale = *(const float *)sc->t.data;
        l->order = -1;
        ls.tensor_slot[fv] = ls.n;
        ls.dq_slot[i] = ls.n;
        ls.n++;
    }
    ra.popt = ptq_plan_defaults();
    ra.popt.nthreads = ev->nthreads;
    ls.nthreads = ev->nthreads > 0 ? ev->nthreads : omp_get_max_threads();
    ra.popt.pool = ev->cache ? ev->cache->pool : NULL;
    ra.popt.observer = observe_fp32;
    ra.popt.observe_filter = wants_fp32;
    ra.popt.observer_user = &ls;
    rb.popt = ra.popt;
    rb.popt.observer = observe_qdq;
    rb.popt.observe_filter = wants_qdq;
    pp_dataset_options eo = ev->o;
    TRY(eng_fit_batch(ev->g, ev->model, &eo));
    TRY(pp_dataset_open(&eo, &ev->cfg, &d));
    for (;;) {
        const float *x;
        int nb, w, h;
        TRY(pp_dataset_next(d, &x, &nb, NULL, NULL));
        if (nb == 0) break;
        pp_dataset_batch_shape(d, &w, &h);
        ptq_tensor t = eng_shaped_tensor(&ev->cfg, w, h, x, nb);
        TRY(eng_runner_ready(&ra, &t));
        TRY(eng_runner_ready(&rb, &t));
        if (ev->cache && !ls.spare.slab) /* after both plans took their blocks; the QDQ plan's
                                            * activations' size: room for its early copies */
            ls.spare.slab = ptq_arena_pool_take(ev->cache->pool, ptq_plan_arena_bytes(rb.plan), &ls.spare.slab_cap);
        ls.qplan = rb.plan;
        ls.q_finished = 0;
        ptq_tensor tm = eng_model_tensor(ev->g, &t);
        TRY(ptq_plan_begin(rb.plan, &tm, 1));
        TRY(ptq_plan_run(ra.plan, &tm, 1));
        for (int k = 0; k < ls.n; k++) { /* the QDQ side of a tensor FP32 never showed */
            spare_put(&ls.spare, ls.l[k].copy, ls.l[k].copy_cap);
            ls.l[k].copy = NULL;
        }
    }
    /* results in FP32 execution order */
    cmp_layer *res = calloc((size_t)ls.n + 1, sizeof *res);
    CHECK_ALLOC(res);
    int m = 0;
    for (int ord = 0; ord < ls.seen; ord++)
        for (int k = 0; k < ls.n; k++) {
            layer_acc *l = &ls.l[k];
            if (l->order != ord) continue;
            cmp_layer *r = &res[m++];
            r->tensor = ptq_strdup(l->tensor);
            int v = ptq_graph_find_value(gq, l->dq);
            const char *node = "", *op = "";
            for (int i = 0; v >= 0 && i < gq->n_nodes && !*op; i++)
                for (int j = 0; j < gq->nodes[i].n_inputs; j++)
                    if (gq->nodes[i].inputs[j] == v) {
                        node = gq->nodes[i].name;
                        op = gq->nodes[i].op_type;
                        break;
                    }
            r->node = ptq_strdup(node);
            r->op_type = op;
            r->amax = l->scale * 127.0f;
            r->acc_cosine = cosine_of(&l->acc);
            r->acc_sqnr_db = sqnr_of(&l->acc);
            r->iso_cosine = cosine_of(&l->iso);
            r->iso_sqnr_db = sqnr_of(&l->iso);
            if (!r->tensor || !r->node) {
                cmp_layers_free(res, m);
                FAIL(PTQ_ERR_NOMEM, "out of memory");
            }
        }
    *out = res;
    *n_out = m;
done:
    pp_dataset_close(d);
    eng_runner_free(&ra);
    eng_runner_free(&rb);
    for (int k = 0; ls.l && k < ls.n; k++)
        if (!from_slab(&ls.spare, ls.l[k].copy)) free(ls.l[k].copy);
    for (int k = 0; k < ls.spare.n; k++)
        if (!from_slab(&ls.spare, ls.spare.buf[k])) free(ls.spare.buf[k]);
    if (ls.spare.slab) ptq_arena_pool_put(ev->cache->pool, ls.spare.slab, ls.spare.slab_cap);
    free(ls.spare.buf);
    free(ls.spare.cap);
    free(ls.l);
    free(ls.tensor_slot);
    free(ls.dq_slot);
    ptq_name_index_destroy(ls.by_tensor);
    ptq_name_index_destroy(ls.by_qvalue);
    return st;
}

void cmp_layers_free(cmp_layer *l, int n)
{
    for (int i = 0; l && i < n; i++) {
        free(l[i].tensor);
        free(l[i].node);
    }
    free(l);
}

/* ---- auto-exclusion ---- */

int cmp_meets(const cmp_target *t, const cmp_metrics *m)
{
    if (!isnan(t->cosine) && !(m->cosine >= t->cosine)) return 0;
    if (!isnan(t->metric) && !(cmp_metric_value(&t->kind, m) >= t->metric)) return 0;
    if (!isnan(t->top1_drop)) {
        double top1 = !isnan(m->top1_acc) ? m->top1_acc : m->top1_agree;
        if (isnan(top1) || !(t->fp32_top1 - top1 <= t->top1_drop)) return 0;
    }
    return 1;
}

ptq_status cmp_target_baseline(const cmp_eval *ev, cmp_target *t)
{
    ptq_status st = PTQ_OK;
    cmp_metrics fm;
    t->fp32_top1 = 1.0; /* agreement of FP32 with itself */
    if (isnan(t->top1_drop) || !ev->labels) return PTQ_OK;
    ptq_graph *g = (ptq_graph *)ev->g; /* only read */
    TRY(cmp_evaluate(ev, &g, 1, &fm));
    t->fp32_top1 = fm.top1_acc;
done:
    return st;
}

/* Appends to names the nodes that consume the dequantized form of `tensor` in gq. */
static int consumers_of(const ptq_graph *gq, const char *tensor, const char **names, int cap)
{
    int n = 0;
    for (int i = 0; i < gq->n_nodes; i++) {
        const ptq_node *q = &gq->nodes[i];
        if (strcmp(q->op_type, "QuantizeLinear") || q->inputs[0] < 0 || strcmp(gq->values[q->inputs[0]].name, tensor))
            continue;
        for (int j = 0; j < gq->n_nodes; j++) { /* Q -> DQ -> consumers */
            const ptq_node *dq = &gq->nodes[j];
            if (strcmp(dq->op_type, "DequantizeLinear") || dq->inputs[0] != q->outputs[0]) continue;
            for (int k = 0; k < gq->n_nodes; k++)
                for (int a = 0; a < gq->nodes[k].n_inputs; a++)
                    if (gq->nodes[k].inputs[a] == dq->outputs[0] && gq->nodes[k].name[0] && n < cap) {
                        names[n++] = gq->nodes[k].name;
                        break;
                    }
        }
    }
    return n;
}

typedef struct {
    const cmp_eval *ev;
    const io_range *ranges;
    int n_ranges;
    const quant_options *qo;      /* the user's exclusions come first */
    const char **nodes;           /* candidate c's nodes: nodes[start[c] .. start[c + 1]) */
    int *start, n_cand, evaluations;
} search;

/* The metrics with the nodes of the candidates flagged in use excluded. */
static ptq_status eval_excluding(search *s, const int *use, cmp_metrics *m)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    quant_report rep = {0};
    int cap = s->qo->n_exclude_nodes + s->start[s->n_cand] + 1, n = 0;
    const char **list = malloc(sizeof *list * (size_t)cap);
    CHECK_ALLOC(list);
    for (int i = 0; i < s->qo->n_exclude_nodes; i++) list[n++] = s->qo->exclude_nodes[i];
    for (int c = 0; c < s->n_cand; c++)
        for (int j = s->start[c]; use[c] && j < s->start[c + 1]; j++) list[n++] = s->nodes[j];
    quant_options qo = *s->qo;
    qo.exclude_nodes = list;
    qo.n_exclude_nodes = n;
    cmp_eval ev = *s->ev;
    ev.o.label = "exclusion search";
    TRY(cmp_build_qdq(s->ev, s->ranges, s->n_ranges, &qo, &g, &rep));
    TRY(cmp_evaluate(&ev, &g, 1, m));
    s->evaluations++;
done:
    free(list);
    quant_report_free(&rep);
    ptq_graph_destroy(g);
    return st;
}

static int by_iso_sqnr(const void *a, const void *b)
{
    const cmp_layer *x = *(const cmp_layer *const *)a, *y = *(const cmp_layer *const *)b;
    int c = (x->iso_sqnr_db > y->iso_sqnr_db) - (x->iso_sqnr_db < y->iso_sqnr_db);
    return c ? c : (x > y) - (x < y); /* ties: execution order */
}

void cmp_layers_by_harm(const cmp_layer *layers, int n, const cmp_layer **order)
{
    for (int i = 0; i < n; i++) order[i] = &layers[i];
    qsort(order, (size_t)n, sizeof *order, by_iso_sqnr);
}

/* Output-metric sensitivity of the candidates (accuracy-algorithms.md): all_but[c], the metric
 * with only candidate c in float, for every candidate; then only[c], the metric with only c
 * quantized, for the candidates whose gain ties another's (the tie-break; NAN elsewhere). Each
 * is one evaluation pass. */
static ptq_status sensitivity(search *s, const cmp_metric *k, double all, double *all_but, double *only)
{
    ptq_status st = PTQ_OK;
    cmp_metrics m;
    int *use = calloc((size_t)s->n_cand + 1, sizeof *use);
    double t0 = omp_get_wtime();
    CHECK_ALLOC(use);
    for (int c = 0; c < s->n_cand; c++) {
        for (int j = 0; j < s->n_cand; j++) use[j] = j == c;
        TRY(eval_excluding(s, use, &m));
        all_but[c] = cmp_metric_value(k, &m);
        only[c] = NAN;
        if (!s->ev->quiet) pp_log_progress(&s->ev->o.log, "sensitivity: candidates", c + 1, s->n_cand, omp_get_wtime() - t0,
                                            c + 1 == s->n_cand);
    }
    for (int c = 0; c < s->n_cand; c++) {
        int tied = 0;
        for (int j = 0; j < s->n_cand && !tied; j++) tied = j != c && all_but[j] - all == all_but[c] - all;
        if (!tied) continue;
        for (int j = 0; j < s->n_cand; j++) use[j] = j != c;
        TRY(eval_excluding(s, use, &m));
        only[c] = cmp_metric_value(k, &m);
    }
done:
    free(use);
    return st;
}

typedef struct {
    int c;
    double gain, only;
} ranked;

/* One point of the curve metric(tensors in float), a message through the log. */
static void curve_point(const pp_log *log, const char *kname, const cmp_metric *k, int n, const cmp_metrics *m)
{
    char cos[64] = "";
    if (k->kind != CMP_METRIC_COSINE) snprintf(cos, sizeof cos, ", cosine %.6f", m->cosine);
    pp_log_message(log, PP_LOG_INFO, "%d quantized tensor%s in float: %s %.6f%s", n, n == 1 ? "" : "s", kname,
                   cmp_metric_value(k, m), cos);
}

static int by_gain(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    /* NaN (metric not applicable) last */
    int c = (y->gain > x->gain || (x->gain != x->gain && y->gain == y->gain)) - (x->gain > y->gain || (y->gain != y->gain && x->gain == x->gain));
    if (!c && x->only == x->only && y->only == y->only) c = (x->only > y->only) - (x->only < y->only);
    return c ? c : (x->c > y->c) - (x->c < y->c);
}

ptq_status cmp_auto_exclude(const cmp_eval *ev, const io_range *ranges, int n_ranges, const quant_options *qopt,
                            const ptq_graph *gq, const cmp_layer *layers, int n_layers, const cmp_target *t,
                            cmp_exclusion *out)
{
    ptq_status st = PTQ_OK;
    search s = {.ev = ev, .ranges = ranges, .n_ranges = n_ranges, .qo = qopt};
    const char **cand_nodes = malloc(sizeof *cand_nodes * ((size_t)n_layers * 8 + 1));
    int *cand_start = malloc(sizeof *cand_start * ((size_t)n_layers + 2));
    int *use = calloc((size_t)n_layers + 1, sizeof *use);
    ranked *rk = calloc((size_t)n_layers + 1, sizeof *rk);
    double *all_but = calloc((size_t)n_layers + 1, sizeof(double)), *only = calloc((size_t)n_layers + 1, sizeof(double));
    s.nodes = malloc(sizeof *s.nodes * ((size_t)n_layers * 8 + 1));
    s.start = malloc(sizeof *s.start * ((size_t)n_layers + 2));
    memset(out, 0, sizeof *out);
    CHECK_ALLOC(cand_nodes);
    CHECK_ALLOC(cand_start);
    CHECK_ALLOC(use);
    CHECK_ALLOC(rk);
    CHECK_ALLOC(all_but);
    CHECK_ALLOC(only);
    CHECK_ALLOC(s.nodes);
    CHECK_ALLOC(s.start);
    const cmp_metric *k = &ev->metric;
    char kname[48];
    cmp_metric_name(k, kname, sizeof kname);
    /* candidates: the quantized tensors, in execution order, as the nodes consuming them */
    int nk = 0;
    for (int i = 0; i < n_layers; i++) {
        s.start[s.n_cand] = nk;
        int got = consumers_of(gq, layers[i].tensor, s.nodes + nk, 8);
        if (got) {
            nk += got;
            s.n_cand++;
        }
    }
    s.start[s.n_cand] = nk;
    /* ranked by the gain in the output metric from leaving each one alone in float */
    cmp_metrics m;
    for (int c = 0; c < s.n_cand; c++) use[c] = 0;
    TRY(eval_excluding(&s, use, &m));
    double all = cmp_metric_value(k, &m);
    TRY(sensitivity(&s, k, all, all_but, only));
    for (int c = 0; c < s.n_cand; c++) rk[c] = (ranked){c, all_but[c] - all, only[c]};
    qsort(rk, (size_t)s.n_cand, sizeof *rk, by_gain);
    if (!ev->quiet) {
        pp_log_message(&ev->o.log, PP_LOG_INFO, "sensitivity by %s (all quantized: %.6f), most harmful first:", kname, all);
        for (int r = 0; r < s.n_cand && r < 10; r++) {
            char only_text[64] = "";
            if (rk[r].only == rk[r].only) /* measured for ties only */
                snprintf(only_text, sizeof only_text, ", quantized alone %.6f", rk[r].only);
            pp_log_message(&ev->o.log, PP_LOG_INFO, "  %-40s float alone %+.6f%s", s.nodes[s.start[rk[r].c]], rk[r].gain, only_text);
        }
    }
    /* the candidates in that order */
    memcpy(cand_nodes, s.nodes, sizeof *cand_nodes * (size_t)nk);
    memcpy(cand_start, s.start, sizeof *cand_start * (size_t)(s.n_cand + 1));
    for (int r = 0, j = 0; r < s.n_cand; r++) {
        int c = rk[r].c;
        s.start[r] = j;
        for (int e = cand_start[c]; e < cand_start[c + 1]; e++) s.nodes[j++] = cand_nodes[e];
    }
    /* the smallest prefix that meets the target: doubling, then bisection (lo fails, hi meets);
     * each evaluation is a point of the curve metric(number of tensors in float) */
    int lo = 0, hi = 1, found = 0;
    while (!found && lo < s.n_cand) {
        if (hi > s.n_cand) hi = s.n_cand;
        for (int c = 0; c < s.n_cand; c++) use[c] = c < hi;
        TRY(eval_excluding(&s, use, &m));
        if (!ev->quiet) curve_point(&ev->o.log, kname, k, hi, &m);
        if (cmp_meets(t, &m)) {
            found = 1;
            out->reached = m;
        } else {
            lo = hi;
            hi *= 2;
        }
    }
    if (!found) FAIL(PTQ_ERR_ARG, "the target is not reached even with all %d quantized tensors in float", s.n_cand);
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        for (int c = 0; c < s.n_cand; c++) use[c] = c < mid;
        TRY(eval_excluding(&s, use, &m));
        if (!ev->quiet) curve_point(&ev->o.log, kname, k, mid, &m);
        if (cmp_meets(t, &m)) {
            hi = mid;
            out->reached = m;
        } else {
            lo = mid;
        }
    }
    /* then each chosen candidate back in, least harmful first, kept quantized when the target holds */
    for (int c = 0; c < s.n_cand; c++) use[c] = c < hi;
    for (int c = hi - 2; c >= 0; c--) {
        use[c] = 0;
        TRY(eval_excluding(&s, use, &m));
        if (cmp_meets(t, &m)) out->reached = m;
        else use[c] = 1;
    }
    out->nodes = malloc(sizeof *out->nodes * ((size_t)nk + 1));
    CHECK_ALLOC(out->nodes);
    for (int c = 0; c < s.n_cand; c++)
        for (int j = s.start[c]; use[c] && j < s.start[c + 1]; j++) {
            int dup = 0;
            for (int e = 0; e < out->n_nodes; e++) dup |= !strcmp(out->nodes[e], s.nodes[j]);
            if (dup) continue;
            if (!(out->nodes[out->n_nodes] = ptq_strdup(s.nodes[j]))) FAIL(PTQ_ERR_NOMEM, "out of memory");
            out->n_nodes++;
        }
    out->evaluations = s.evaluations;
done:
    if (st != PTQ_OK) cmp_exclusion_free(out);
    free(cand_nodes);
    free(cand_start);
    free(use);
    free(rk);
    free(all_but);
    free(only);
    free(s.nodes);
    free(s.start);
    return st;
}

void cmp_exclusion_free(cmp_exclusion *x)
{
    for (int i = 0; x->nodes && i < x->n_nodes; i++) free(x->nodes[i]);
    free(x->nodes);
    memset(x, 0, sizeof *x);
}

char *cmp_layer_precisions(const cmp_exclusion *x)
{
    size_t len = 32;
    for (int e = 0; e < x->n_nodes; e++) len += strlen(x->nodes[e]) + 8;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    p += sprintf(p, "--layerPrecisions=");
    for (int e = 0; e < x->n_nodes; e++) p += sprintf(p, "%s%s:fp16", e ? "," : "", x->nodes[e]);
    return s;
}
