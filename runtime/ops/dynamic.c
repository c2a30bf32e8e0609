/* dynamic.c: ops whose output shape depends on input values (PTQ_OP_DYNAMIC, op.h):
 * NonZero, NonMaxSuppression, Compress, Unique. Their infer needs the data that decides
 * the shape: at plan time they set ctx->dynamic when it is not a constant, and the planner
 * infers them again at run time with every input's data. NonMaxSuppression and Unique
 * compute their result in infer (kept in state); run copies it out. All serial: the
 * results are the same at any thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/shape.h"

/* Element i of t is not zero (NaN counts as not zero; -0.0 as zero). */
static int elem_nonzero(const ptq_tensor *t, size_t i)
{
    switch (t->dtype) {
    case PTQ_F32: return ((const float *)t->data)[i] != 0.0f;
    case PTQ_F64: return ((const double *)t->data)[i] != 0.0;
    case PTQ_F16: return (((const uint16_t *)t->data)[i] & 0x7fff) != 0;
    default: return ptq_tensor_get_i64(t, i) != 0;
    }
}

/* ---- NonZero: int64 [rank, count] of the indices of non-zero elements, row-major order */

static ptq_status nonzero_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s", ptq_dtype_name(x->dtype));
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_I64;
    y->rank = 2;
    y->dims[0] = x->rank > 0 ? x->rank : 1; /* a scalar counts as one element of rank 1 */
    if (!x->data) {
        ctx->dynamic = 1;
        return PTQ_OK;
    }
    size_t n = ptq_tensor_numel(x), count = 0;
    for (size_t i = 0; i < n; i++) count += (size_t)elem_nonzero(x, i);
    y->dims[1] = (int64_t)count;
    return PTQ_OK;
}

static ptq_status nonzero_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    int64_t *y = ctx->out[0]->data;
    int rank = x->rank > 0 ? x->rank : 1;
    size_t n = ptq_tensor_numel(x), count = (size_t)ctx->out[0]->dims[1], k = 0;
    int64_t idx[PTQ_MAX_RANK] = {0};
    for (size_t i = 0; i < n; i++) {
        if (elem_nonzero(x, i)) {
            for (int d = 0; d < rank; d++) y[(size_t)d * count + k] = idx[d];
            k++;
        }
        for (int d = x->rank - 1; d >= 0; d--) { /* next row-major index */
            if (++idx[d] < x->dims[d]) break;
            idx[d] = 0;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_nonzero = {nonzero_infer, nonzero_run, NULL, PTQ_OP_DYNAMIC};

/* ---- Compress: the slices along axis (or elements of the flattened input) where
 * condition is true; a shorter condition counts as false past its end */

static ptq_status compress_geometry(ptq_op_ctx *ctx, int *has_axis, int *axis, int64_t *outer, int64_t *len,
                                    int64_t *inner)
{
    const ptq_tensor *x = ctx->in[0];
    const ptq_attr *a = ptq_node_attr(ctx->node, "axis");
    *has_axis = a != NULL;
    *outer = 1;
    *inner = 1;
    *axis = 0;
    if (*has_axis) {
        int64_t ax;
        if (a->type != PTQ_ATTR_INT || ptq_norm_axis(a->i, x->rank, &ax) != 0)
            OP_FAIL(ctx, PTQ_ERR_ARG, "axis %lld out of range for rank %d", (long long)a->i, x->rank);
        *axis = (int)ax;
        for (int d = 0; d < *axis; d++) *outer *= x->dims[d];
        for (int d = *axis + 1; d < x->rank; d++) *inner *= x->dims[d];
        *len = x->dims[*axis];
    } else {
        *len = (int64_t)ptq_tensor_numel(x);
    }
    return PTQ_OK;
}

static ptq_status compress_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *c = ctx->in[1];
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s", ptq_dtype_name(x->dtype));
    if (c->dtype != PTQ_BOOL || c->rank != 1)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "condition must be a 1-D bool tensor (is %s of rank %d)", ptq_dtype_name(c->dtype),
                c->rank);
    int has_axis, axis;
    int64_t outer, len, inner;
    if ((st = compress_geometry(ctx, &has_axis, &axis, &outer, &len, &inner)) != PTQ_OK) return st;
    if (c->dims[0] > len)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "condition has %lld entries, the input %lld along the axis", (long long)c->dims[0],
                (long long)len);
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    if (has_axis) ptq_shape_copy(y, x);
    else y->rank = 1;
    if (!c->data) {
        ctx->dynamic = 1;
        return PTQ_OK;
    }
    int64_t count = 0;
    for (int64_t i = 0; i < c->dims[0]; i++) count += ((const uint8_t *)c->data)[i] != 0;
    y->dims[has_axis ? axis : 0] = count;
    return PTQ_OK;
}

static ptq_status compress_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0], *c = ctx->in[1];
    int has_axis, axis;
    int64_t outer, len, inner;
    ptq_status st = compress_geometry(ctx, &has_axis, &axis, &outer, &len, &inner);
    if (st != PTQ_OK) return st;
    size_t es = ptq_dtype_size(x->dtype), row = (size_t)inner * es;
    const uint8_t *cond = c->data, *src = x->data;
    uint8_t *dst = ctx->out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < c->dims[0]; i++)
            if (cond[i]) {
                memcpy(dst, src + ((size_t)o * (size_t)len + (size_t)i) * row, row);
                dst += row;
            }
    return PTQ_OK;
}

const ptq_op_def op_compress = {compress_infer, compress_run, NULL, PTQ_OP_DYNAMIC};

/* ---- Unique: distinct elements (or slices along axis), sorted ascending or in order of
 * first occurrence, with the first-occurrence indices, the inverse indices and the counts */

typedef struct {
    int64_t k;          /* distinct slices */
    int64_t n;          /* slices in the input */
    int64_t *first;     /* [k] input slice index of each output slice */
    int64_t *inverse;   /* [n] output slice of each input slice */
    int64_t *counts;    /* [k] */
} unique_state;

static void unique_free(void *p)
{
    unique_state *s = p;
    if (!s) return;
    free(s->first);
    free(s->inverse);
    free(s->counts);
    free(s);
}

typedef struct {
    const ptq_tensor *x;
    int64_t outer, len, inner; /* slice i: elements (o, i, r) for o < outer, r < inner */
    int is_float;
} slice_view;

/* Lexicographic comparison of slices a and b (row-major over their elements). */
static int slice_cmp(const slice_view *v, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < v->outer; o++)
        for (int64_t r = 0; r < v->inner; r++) {
            size_t ia = (size_t)((o * v->len + a) * v->inner + r), ib = (size_t)((o * v->len + b) * v->inner + r);
            if (v->is_float) {
                double x = ptq_tensor_get_f64(v->x, ia), y = ptq_tensor_get_f64(v->x, ib);
                if (x < y) return -1;
                if (x > y) return 1;
            } else {
                int64_t x = ptq_tensor_get_i64(v->x, ia), y = ptq_tensor_get_i64(v->x, ib);
                if (x < y) return -1;
                if (x > y) return 1;
            }
        }
    return 0;
}

/* Stable merge sort of idx[0..n) by slice (ties keep index order). */
static void slice_sort(const slice_view *v, int64_t *idx, int64_t *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2)
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = slice_cmp(v, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
            memcpy(idx + lo, tmp + lo, sizeof *idx * (size_t)(hi - lo));
        }
}

static ptq_status unique_geometry(ptq_op_ctx *ctx, slice_view *v, int *has_axis, int *axis)
{
    const ptq_tensor *x = ctx->in[0];
    const ptq_attr *a = ptq_node_attr(ctx->node, "axis");
    memset(v, 0, sizeof *v);
    v->x = x;
    v->outer = v->inner = 1;
    v->is_float = x->dtype == PTQ_F32 || x->dtype == PTQ_F64 || x->dtype == PTQ_F16;
    *has_axis = a != NULL;
    *axis = 0;
    if (*has_axis) {
        int64_t ax;
        if (a->type != PTQ_ATTR_INT || ptq_norm_axis(a->i, x->rank, &ax) != 0)
            OP_FAIL(ctx, PTQ_ERR_ARG, "axis %lld out of range for rank %d", (long long)a->i, x->rank);
        *axis = (int)ax;
        for (int d = 0; d < *axis; d++) v->outer *= x->dims[d];
        for (int d = *axis + 1; d < x->rank; d++) v->inner *= x->dims[d];
        v->len = x->dims[*axis];
    } else {
        v->len = (int64_t)ptq_tensor_numel(x);
    }
    return PTQ_OK;
}

static ptq_status unique_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (ptq_dtype_size(x->dtype) == 0 || x->dtype == PTQ_STRING)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s", ptq_dtype_name(x->dtype));
    int64_t sorted = ptq_attr_int(ctx->node, "sorted", 1);
    if (sorted != 0 && sorted != 1) OP_FAIL(ctx, PTQ_ERR_ARG, "sorted must be 0 or 1, is %lld", (long long)sorted);
    if (ctx->n_out > 4) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, at most 4", ctx->n_out);
    slice_view v;
    int has_axis, axis;
    if ((st = unique_geometry(ctx, &v, &has_axis, &axis)) != PTQ_OK) return st;
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    if (has_axis) ptq_shape_copy(y, x);
    else y->rank = 1;
    for (int o = 1; o < ctx->n_out; o++)
        if (ctx->out[o]) {
            ctx->out[o]->dtype = PTQ_I64;
            ctx->out[o]->rank = 1;
        }
    if (!x->data) {
        ctx->dynamic = 1;
        return PTQ_OK;
    }
    int64_t n = v.len, *idx = NULL, *tmp = NULL, *group_of_sorted = NULL;
    unique_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->n = n;
    size_t cnt = (size_t)n + 1;
    idx = malloc(sizeof *idx * cnt);
    tmp = malloc(sizeof *tmp * cnt);
    group_of_sorted = malloc(sizeof *group_of_sorted * cnt);
    s->first = malloc(sizeof *s->first * cnt);
    s->inverse = malloc(sizeof *s->inverse * cnt);
    s->counts = calloc(cnt, sizeof *s->counts);
    if (!idx || !tmp || !group_of_sorted || !s->first || !s->inverse || !s->counts) {
        free(idx);
        free(tmp);
        free(group_of_sorted);
        OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for %lld slices", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (v.outer * v.inner > 0) slice_sort(&v, idx, tmp, n);
    /* groups of equal slices in sorted order; the stable sort puts each group's first
     * occurrence first */
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || (v.outer * v.inner > 0 && slice_cmp(&v, idx[i - 1], idx[i]) != 0)) {
            s->first[k] = idx[i];
            k++;
        }
        group_of_sorted[i] = k - 1;
    }
    s->k = k;
    if (!sorted) { /* groups in order of first occurrence: pos[g], the output position of sorted group g */
        int64_t *pos = tmp, *mark = malloc(sizeof *mark * cnt), *nf = malloc(sizeof *nf * cnt);
        if (!mark || !nf) {
            free(mark);
            free(nf);
            free(idx);
            free(tmp);
            free(group_of_sorted);
            OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for %lld slices", (long long)n);
        }
        for (int64_t i = 0; i < n; i++) mark[i] = -1;
        for (int64_t g = 0; g < k; g++) mark[s->first[g]] = g;
        int64_t q = 0;
        for (int64_t i = 0; i < n; i++)
            if (mark[i] >= 0) pos[mark[i]] = q++;
        for (int64_t g = 0; g < k; g++) nf[pos[g]] = s->first[g];
        memcpy(s->first, nf, sizeof *nf * (size_t)k);
        for (int64_t i = 0; i < n; i++) group_of_sorted[i] = pos[group_of_sorted[i]];
        free(mark);
        free(nf);
    }
    for (int64_t i = 0; i < n; i++) {
        s->inverse[idx[i]] = group_of_sorted[i];
        s->counts[group_of_sorted[i]]++;
    }
    free(idx);
    free(tmp);
    free(group_of_sorted);
    y->dims[has_axis ? axis : 0] = k;
    for (int o = 1; o < ctx->n_out; o++)
        if (ctx->out[o]) ctx->out[o]->dims[0] = o == 2 ? n : k;
    return PTQ_OK;
}

static ptq_status unique_run(ptq_op_ctx *ctx)
{
    const unique_state *s = ctx->state;
    slice_view v;
    int has_axis, axis;
    ptq_status st = unique_geometry(ctx, &v, &has_axis, &axis);
    if (st != PTQ_OK) return st;
    size_t es = ptq_dtype_size(v.x->dtype), row = (size_t)v.inner * es;
    const uint8_t *src = v.x->data;
    uint8_t *dst = ctx->out[0]->data;
    for (int64_t o = 0; o < v.outer; o++)
        for (int64_t q = 0; q < s->k; q++)
            memcpy(dst + ((size_t)o * (size_t)s->k + (size_t)q) * row,
                   src + ((size_t)o * (size_t)v.len + (size_t)s->first[q]) * row, row);
    if (ctx->n_out > 1 && ctx->out[1]) memcpy(ctx->out[1]->data, s->first, sizeof(int64_t) * (size_t)s->k);
    if (ctx->n_out > 2 && ctx->out[2]) memcpy(ctx->out[2]->data, s->inverse, sizeof(int64_t) * (size_t)s->n);
    if (ctx->n_out > 3 && ctx->out[3]) memcpy(ctx->out[3]->data, s->counts, sizeof(int64_t) * (size_t)s->k);
    return PTQ_OK;
}

const ptq_op_def op_unique = {unique_infer, unique_run, unique_free, PTQ_OP_DYNAMIC};

/* ---- NonMaxSuppression, as ONNX Runtime (1.x CPU) computes it: per batch and class, the
 * boxes whose score exceeds score_threshold (when given) in order of score (descending; equal
 * scores by box index), each kept unless its IoU with one already kept exceeds iou_threshold,
 * until max_output_boxes_per_class are kept. Corners and areas are computed once per box
 * (a center box's area is width * height), the union as candidate's area + kept's area -
 * intersection, all in float, so the selection matches ORT's bit for bit. Output rows
 * [batch, class, box] in that order. */

typedef struct {
    int64_t n;        /* selected rows */
    int64_t *rows;    /* [n * 3] */
} nms_state;

static void nms_free(void *p)
{
    nms_state *s = p;
    if (!s) return;
    free(s->rows);
    free(s);
}

typedef struct {
    float score;
    int64_t index;
} score_index;

static int score_index_cmp(const void *a, const void *b)
{
    const score_index *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A box as NonMaxSuppression compares it: y_min, x_min, y_max, x_max and its area. */
typedef struct {
    float y0, x0, y1, x1, area;
} nms_box;

static void minmax(float a, float b, float *lo, float *hi)
{
    *lo = a < b ? a : b;
    *hi = a < b ? b : a;
}

static nms_box nms_box_of(const float *b, int center)
{
    nms_box r;
    if (!center) { /* [y1, x1, y2, x2], either corner order */
        minmax(b[0], b[2], &r.y0, &r.y1);
        minmax(b[1], b[3], &r.x0, &r.x1);
        r.area = (r.y1 - r.y0) * (r.x1 - r.x0);
    } else { /* [x_center, y_center, width, height]: the area is width * height */
        float wh = b[2] / 2, hh = b[3] / 2;
        r.x0 = b[0] - wh;
        r.x1 = b[0] + wh;
        r.y0 = b[1] - hh;
        r.y1 = b[1] + hh;
        r.area = b[2] * b[3];
    }
    return r;
}

/* The IoU of candidate a with kept box b exceeds the threshold (a's area first in the union). */
static int suppressed_by_iou(const nms_box *a, const nms_box *b, float iou_threshold)
{
    float ix0 = a->x0 > b->x0 ? a->x0 : b->x0, ix1 = a->x1 < b->x1 ? a->x1 : b->x1;
    if (ix1 <= ix0) return 0;
    float iy0 = a->y0 > b->y0 ? a->y0 : b->y0, iy1 = a->y1 < b->y1 ? a->y1 : b->y1;
    if (iy1 <= iy0) return 0;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0.0f) return 0;
    float uni = a->area + b->area - inter;
    return inter / uni > iou_threshold;
}

static ptq_status nms_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 5);
    if (st != PTQ_OK) return st;
    const ptq_tensor *boxes = ctx->in[0], *scores = ctx->in[1];
    const ptq_tensor *maxo = ctx->n_in > 2 ? ctx->in[2] : NULL, *iou = ctx->n_in > 3 ? ctx->in[3] : NULL,
                     *sth = ctx->n_in > 4 ? ctx->in[4] : NULL;
    int64_t center = ptq_attr_int(ctx->node, "center_point_box", 0);
    if (center != 0 && center != 1)
        OP_FAIL(ctx, PTQ_ERR_ARG, "center_point_box must be 0 or 1, is %lld", (long long)center);
    if (boxes->dtype != PTQ_F32 || scores->dtype != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "boxes and scores must be float32 (are %s, %s)", ptq_dtype_name(boxes->dtype),
                ptq_dtype_name(scores->dtype));
    if (boxes->rank != 3 || boxes->dims[2] != 4)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "boxes must be [batch, boxes, 4] (rank %d)", boxes->rank);
    if (scores->rank != 3 || scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "scores must be [%lld, classes, %lld]", (long long)boxes->dims[0],
                (long long)boxes->dims[1]);
    if (maxo && (maxo->dtype != PTQ_I64 || ptq_tensor_numel(maxo) != 1))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "max_output_boxes_per_class must be one int64");
    if (iou && (iou->dtype != PTQ_F32 || ptq_tensor_numel(iou) != 1))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "iou_threshold must be one float32");
    if (sth && (sth->dtype != PTQ_F32 || ptq_tensor_numel(sth) != 1))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "score_threshold must be one float32");
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_I64;
    y->rank = 2;
    y->dims[1] = 3;
    if (!boxes->data || !scores->data || (maxo && !maxo->data) || (iou && !iou->data) || (sth && !sth->data)) {
        ctx->dynamic = 1;
        return PTQ_OK;
    }
    int64_t max_out = maxo ? *(const int64_t *)maxo->data : 0;
    float iou_t = iou ? *(const float *)iou->data : 0.0f;
    if (!(iou_t >= 0.0f && iou_t <= 1.0f)) OP_FAIL(ctx, PTQ_ERR_ARG, "iou_threshold %g is outside [0, 1]", (double)iou_t);
    int64_t nb = boxes->dims[0], nbox = boxes->dims[1], ncls = scores->dims[1];
    nms_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    score_index *cand = malloc(sizeof *cand * ((size_t)nbox + 1));
    int64_t *kept = malloc(sizeof *kept * ((size_t)nbox + 1));
    nms_box *bx = malloc(sizeof *bx * ((size_t)nbox + 1));
    size_t cap = 0;
    if (!cand || !kept || !bx) goto oom;
    for (int64_t b = 0; b < nb && max_out > 0; b++) {
        const float *raw = (const float *)boxes->data + (size_t)b * (size_t)nbox * 4;
        for (int64_t i = 0; i < nbox; i++) bx[i] = nms_box_of(raw + 4 * i, (int)center);
        for (int64_t c = 0; c < ncls; c++) {
            const float *sc = (const float *)scores->data + ((size_t)b * (size_t)ncls + (size_t)c) * (size_t)nbox;
            int64_t nc = 0, nk = 0;
            for (int64_t i = 0; i < nbox; i++)
                if (!sth || sc[i] > *(const float *)sth->data) cand[nc++] = (score_index){sc[i], i};
            qsort(cand, (size_t)nc, sizeof *cand, score_index_cmp);
            for (int64_t i = 0; i < nc && nk < max_out; i++) {
                int keep = 1;
                for (int64_t j = 0; j < nk && keep; j++)
                    keep = !suppressed_by_iou(&bx[cand[i].index], &bx[kept[j]], iou_t);
                if (!keep) continue;
                kept[nk++] = cand[i].index;
                if ((size_t)s->n == cap) {
                    size_t nc2 = cap ? cap * 2 : 64;
                    int64_t *nr = realloc(s->rows, sizeof *nr * 3 * nc2);
                    if (!nr) goto oom;
                    s->rows = nr;
                    cap = nc2;
                }
                s->rows[3 * s->n] = b;
                s->rows[3 * s->n + 1] = c;
                s->rows[3 * s->n + 2] = cand[i].index;
                s->n++;
            }
        }
    }
    free(cand);
    free(kept);
    free(bx);
    y->dims[0] = s->n;
    return PTQ_OK;
oom:
    free(cand);
    free(kept);
    free(bx);
    OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
}

static ptq_status nms_run(ptq_op_ctx *ctx)
{
    const nms_state *s = ctx->state;
    if (s->n) memcpy(ctx->out[0]->data, s->rows, sizeof(int64_t) * 3 * (size_t)s->n);
    return PTQ_OK;
}

const ptq_op_def op_non_max_suppression = {nms_infer, nms_run, nms_free, PTQ_OP_DYNAMIC};
