/* index.c: indexing ops: GatherElements, GatherND, ScatterElements (and its deprecated
 * alias Scatter), ScatterND, TopK, ReverseSequence, MaxUnpool, DepthToSpace, SpaceToDepth.
 *
 * Element movement is dtype-blind (memcpy of ptq_dtype_size bytes); the scatter
 * reductions (add, mul, max, min) compute in the element's own type for float32,
 * float64, int32 and int64. Index tensors may be int32 or int64; an index outside
 * its axis fails the run naming the index and the axis length (negative indices count
 * from the end, as ONNX allows). Scatters apply their updates in index order, so a
 * duplicate index keeps the last update (reduction none) or folds every update in
 * order: the result is the same at any thread count. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/shape.h"

/* ------------------------------------------------------------ shared helpers */

static int is_index_dtype(ptq_dtype dt)
{
    return dt == PTQ_I32 || dt == PTQ_I64;
}

/* Reads and normalises index i of ix against an axis of length dim; -1 when out of range
 * (the raw value goes to *raw for the message). */
static int64_t read_index(const ptq_tensor *ix, size_t i, int64_t dim, int64_t *raw)
{
    int64_t j = ix->dtype == PTQ_I64 ? ((const int64_t *)ix->data)[i] : (int64_t)((const int32_t *)ix->data)[i];
    *raw = j;
    if (j < 0) j += dim;
    return j >= 0 && j < dim ? j : -1;
}

typedef enum { RED_NONE = 0, RED_ADD, RED_MUL, RED_MAX, RED_MIN } scatter_red;

/* Parses the reduction attribute of ScatterND / ScatterElements for the node's opset:
 * none, add, mul from opset 16, max, min from opset 18. */
static ptq_status parse_reduction(const ptq_op_ctx *ctx, ptq_dtype dt, scatter_red *red)
{
    const char *s = ptq_attr_string(ctx->node, "reduction", "none");
    if (strcmp(s, "none") == 0) *red = RED_NONE;
    else if (strcmp(s, "add") == 0 && ctx->opset >= 16) *red = RED_ADD;
    else if (strcmp(s, "mul") == 0 && ctx->opset >= 16) *red = RED_MUL;
    else if (strcmp(s, "max") == 0 && ctx->opset >= 18) *red = RED_MAX;
    else if (strcmp(s, "min") == 0 && ctx->opset >= 18) *red = RED_MIN;
    else OP_FAIL(ctx, PTQ_ERR_FORMAT, "reduction '%s' is not valid at opset %lld", s, (long long)ctx->opset);
    if (*red != RED_NONE && dt != PTQ_F32 && dt != PTQ_F64 && dt != PTQ_I32 && dt != PTQ_I64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "reduction '%s' on %s data (ptq reduces float32, float64, int32, int64)", s,
                ptq_dtype_name(dt));
    return PTQ_OK;
}

/* T the element type, U the type add and mul run in (integers wrap, in unsigned) */
#define RED_LOOP(T, U)                                                                  \
    do {                                                                                \
        T *d = dst;                                                                     \
        const T *s = src;                                                               \
        for (size_t i = 0; i < n; i++) {                                                \
            switch (red) {                                                              \
            case RED_ADD: d[i] = (T)((U)d[i] + (U)s[i]); break;                         \
            case RED_MUL: d[i] = (T)((U)d[i] * (U)s[i]); break;                         \
            case RED_MAX: d[i] = s[i] > d[i] ? s[i] : d[i]; break;                      \
            case RED_MIN: d[i] = s[i] < d[i] ? s[i] : d[i]; break;                      \
            default: d[i] = s[i]; break;                                                \
            }                                                                           \
        }                                                                               \
    } while (0)

/* dst[0..n) = dst (red) src, elements of dtype dt (reductions: parse_reduction's dtypes). */
static void scatter_apply(ptq_dtype dt, scatter_red red, void *dst, const void *src, size_t n)
{
    if (red == RED_NONE) {
        memcpy(dst, src, n * ptq_dtype_size(dt));
        return;
    }
    switch (dt) {
    case PTQ_F32: RED_LOOP(float, float); break;
    case PTQ_F64: RED_LOOP(double, double); break;
    case PTQ_I32: RED_LOOP(int32_t, uint32_t); break;
    case PTQ_I64: RED_LOOP(int64_t, uint64_t); break;
    default: break;
    }
}

static size_t prod_dims(const int64_t *dims, int from, int to)
{
    size_t p = 1;
    for (int d = from; d < to; d++) p *= (size_t)dims[d];
    return p;
}

/* ------------------------------------------------------------ GatherElements / ScatterElements
 * Both walk the index tensor in order; the element at coordinates c of `indices` addresses
 * data at c with c[axis] replaced by the index. */

static ptq_status elements_check(ptq_op_ctx *ctx, const ptq_tensor *x, const ptq_tensor *ix, int64_t *axis)
{
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "data dtype %s", ptq_dtype_name(x->dtype));
    if (!is_index_dtype(ix->dtype))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "indices dtype %s, expected int32 or int64", ptq_dtype_name(ix->dtype));
    if (x->rank < 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "data is a scalar, expected rank >= 1");
    if (ix->rank != x->rank) OP_FAIL(ctx, PTQ_ERR_SHAPE, "indices rank %d, data rank %d: expected equal", ix->rank, x->rank);
    int64_t a = ptq_attr_int(ctx->node, "axis", 0);
    if (ptq_norm_axis(a, x->rank, axis)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)a, x->rank);
    for (int d = 0; d < x->rank; d++)
        if (d != *axis && ix->dims[d] > x->dims[d])
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "indices dim %d is %lld, larger than data's %lld", d, (long long)ix->dims[d],
                    (long long)x->dims[d]);
    return PTQ_OK;
}

static ptq_status gather_elements_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1];
    int64_t axis;
    if ((st = elements_check(ctx, x, ix, &axis)) != PTQ_OK) return st;
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    ptq_shape_copy(y, ix);
    ctx->state = (void *)(intptr_t)axis;
    return PTQ_OK;
}

static ptq_status gather_elements_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1];
    int axis = (int)(intptr_t)ctx->state, r = x->rank;
    size_t es = ptq_dtype_size(x->dtype), n = ptq_tensor_numel(ix);
    int64_t xs[PTQ_MAX_RANK], c[PTQ_MAX_RANK] = {0};
    ptq_strides(x, xs);
    for (size_t i = 0; i < n; i++) {
        int64_t raw, j = read_index(ix, i, x->dims[axis], &raw);
        if (j < 0)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "index %lld out of range for axis %d of length %lld", (long long)raw, axis,
                    (long long)x->dims[axis]);
        int64_t off = 0;
        for (int d = 0; d < r; d++) off += (d == axis ? j : c[d]) * xs[d];
        memcpy((char *)ctx->out[0]->data + i * es, (const char *)x->data + (size_t)off * es, es);
        for (int d = r - 1; d >= 0; d--) {
            if (++c[d] < ix->dims[d]) break;
            c[d] = 0;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_gather_elements = {gather_elements_infer, gather_elements_run, NULL, 0};

/* state of the scatters: axis (ScatterElements) | reduction << 8 */
static ptq_status scatter_elements_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1], *u = ctx->in[2];
    int64_t axis;
    if ((st = elements_check(ctx, x, ix, &axis)) != PTQ_OK) return st;
    if (u->dtype != x->dtype)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "updates dtype %s, data %s: expected equal", ptq_dtype_name(u->dtype), ptq_dtype_name(x->dtype));
    if (!ptq_shape_equal(u, ix)) {
        char a[96], b[96];
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "updates shape %s, indices %s: expected equal", ptq_shape_str(u, a, sizeof a),
                ptq_shape_str(ix, b, sizeof b));
    }
    scatter_red red = RED_NONE;
    if (strcmp(ctx->node->op_type, "Scatter") != 0 && (st = parse_reduction(ctx, x->dtype, &red)) != PTQ_OK) return st;
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    ptq_shape_copy(y, x);
    ctx->state = (void *)(intptr_t)(axis | (int64_t)red << 8);
    return PTQ_OK;
}

static ptq_status scatter_elements_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1], *u = ctx->in[2];
    intptr_t stv = (intptr_t)ctx->state;
    int axis = (int)(stv & 0xff), r = x->rank;
    scatter_red red = (scatter_red)(stv >> 8);
    size_t es = ptq_dtype_size(x->dtype), n = ptq_tensor_numel(ix);
    char *y = ctx->out[0]->data;
    memcpy(y, x->data, ptq_tensor_nbytes(x));
    int64_t xs[PTQ_MAX_RANK], c[PTQ_MAX_RANK] = {0};
    ptq_strides(x, xs);
    for (size_t i = 0; i < n; i++) {
        int64_t raw, j = read_index(ix, i, x->dims[axis], &raw);
        if (j < 0)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "index %lld out of range for axis %d of length %lld", (long long)raw, axis,
                    (long long)x->dims[axis]);
        int64_t off = 0;
        for (int d = 0; d < r; d++) off += (d == axis ? j : c[d]) * xs[d];
        scatter_apply(x->dtype, red, y + (size_t)off * es, (const char *)u->data + i * es, 1);
        for (int d = r - 1; d >= 0; d--) {
            if (++c[d] < ix->dims[d]) break;
            c[d] = 0;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_scatter_elements = {scatter_elements_infer, scatter_elements_run, NULL, 0};
const ptq_op_def op_scatter = {scatter_elements_infer, scatter_elements_run, NULL, 0};

/* ------------------------------------------------------------ GatherND / ScatterND
 * indices [..., k] address slices data[i0, ..., ik-1, :] (after batch_dims leading dims
 * shared by data and indices, GatherND only). */

typedef struct {
    int b, k;              /* batch_dims, index tuple length */
    size_t batches;        /* product of the batch dims */
    size_t tuples;         /* index tuples per batch */
    size_t slice;          /* elements per addressed slice */
    size_t batch_stride;   /* data elements per batch */
    int64_t stride[PTQ_MAX_RANK], dim[PTQ_MAX_RANK]; /* per tuple entry: data stride and length */
    scatter_red red;
} nd_state;

static ptq_status nd_check(ptq_op_ctx *ctx, const ptq_tensor *x, const ptq_tensor *ix, int b, nd_state **out)
{
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "data dtype %s", ptq_dtype_name(x->dtype));
    if (!is_index_dtype(ix->dtype))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "indices dtype %s, expected int32 or int64", ptq_dtype_name(ix->dtype));
    if (x->rank < 1 || ix->rank < 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "data rank %d, indices rank %d: expected >= 1", x->rank, ix->rank);
    int q = ix->rank, r = x->rank;
    if (b < 0 || b >= q || b >= r)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "batch_dims %d, expected 0 to %d", b, (q < r ? q : r) - 1);
    int64_t k = ix->dims[q - 1];
    if (k < 1 || k > r - b)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "indices' last dim %lld, expected 1 to %d (data rank %d - batch_dims %d)", (long long)k,
                r - b, r, b);
    for (int d = 0; d < b; d++)
        if (x->dims[d] != ix->dims[d])
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "batch dim %d: data %lld, indices %lld", d, (long long)x->dims[d], (long long)ix->dims[d]);
    nd_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    s->b = b;
    s->k = (int)k;
    s->batches = prod_dims(x->dims, 0, b);
    s->tuples = prod_dims(ix->dims, b, q - 1);
    s->slice = prod_dims(x->dims, b + (int)k, r);
    s->batch_stride = prod_dims(x->dims, b, r);
    for (int j = 0; j < k; j++) {
        s->dim[j] = x->dims[b + j];
        s->stride[j] = (int64_t)prod_dims(x->dims, b + j + 1, r);
    }
    *out = s;
    return PTQ_OK;
}

/* Element offset within one batch of data of tuple t (global tuple number), or fails. */
static ptq_status nd_offset(ptq_op_ctx *ctx, const nd_state *s, const ptq_tensor *ix, size_t t, size_t *off)
{
    size_t o = 0;
    for (int j = 0; j < s->k; j++) {
        int64_t raw, v = read_index(ix, t * (size_t)s->k + (size_t)j, s->dim[j], &raw);
        if (v < 0)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "index %lld out of range for data dim %d of length %lld", (long long)raw, s->b + j,
                    (long long)s->dim[j]);
        o += (size_t)v * (size_t)s->stride[j];
    }
    *off = o;
    return PTQ_OK;
}

static ptq_status gather_nd_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1];
    int64_t b = ctx->opset >= 12 ? ptq_attr_int(ctx->node, "batch_dims", 0) : 0;
    if (b < 0 || b >= PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "batch_dims %lld out of range", (long long)b);
    nd_state *s;
    if ((st = nd_check(ctx, x, ix, (int)b, &s)) != PTQ_OK) return st;
    ctx->state = s;
    int rank = ix->rank - 1 + x->rank - (int)b - s->k;
    if (rank > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output rank %d, more than %d", rank, PTQ_MAX_RANK);
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = 0;
    for (int d = 0; d < ix->rank - 1; d++) y->dims[y->rank++] = ix->dims[d];
    for (int d = (int)b + s->k; d < x->rank; d++) y->dims[y->rank++] = x->dims[d];
    return PTQ_OK;
}

static ptq_status gather_nd_run(ptq_op_ctx *ctx)
{
    const nd_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1];
    size_t es = ptq_dtype_size(x->dtype), bytes = s->slice * es;
    char *y = ctx->out[0]->data;
    for (size_t bi = 0; bi < s->batches; bi++)
        for (size_t m = 0; m < s->tuples; m++) {
            size_t t = bi * s->tuples + m, off;
            ptq_status st = nd_offset(ctx, s, ix, t, &off);
            if (st != PTQ_OK) return st;
            memcpy(y + t * bytes, (const char *)x->data + (bi * s->batch_stride + off) * es, bytes);
        }
    return PTQ_OK;
}

const ptq_op_def op_gather_nd = {gather_nd_infer, gather_nd_run, ptq_op_free_state, 0};

static ptq_status scatter_nd_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1], *u = ctx->in[2];
    nd_state *s;
    if ((st = nd_check(ctx, x, ix, 0, &s)) != PTQ_OK) return st;
    ctx->state = s;
    if (u->dtype != x->dtype)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "updates dtype %s, data %s: expected equal", ptq_dtype_name(u->dtype), ptq_dtype_name(x->dtype));
    /* updates: indices.shape[:-1] + data.shape[k:] */
    int want_rank = ix->rank - 1 + x->rank - s->k, ok = u->rank == want_rank;
    for (int d = 0; ok && d < ix->rank - 1; d++) ok = u->dims[d] == ix->dims[d];
    for (int d = s->k; ok && d < x->rank; d++) ok = u->dims[ix->rank - 1 + d - s->k] == x->dims[d];
    if (!ok) {
        char a[96], b[96], c[96];
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "updates shape %s does not fit indices %s into data %s", ptq_shape_str(u, a, sizeof a),
                ptq_shape_str(ix, b, sizeof b), ptq_shape_str(x, c, sizeof c));
    }
    if ((st = parse_reduction(ctx, x->dtype, &s->red)) != PTQ_OK) return st;
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    ptq_shape_copy(y, x);
    return PTQ_OK;
}

static ptq_status scatter_nd_run(ptq_op_ctx *ctx)
{
    const nd_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1], *u = ctx->in[2];
    size_t es = ptq_dtype_size(x->dtype);
    char *y = ctx->out[0]->data;
    memcpy(y, x->data, ptq_tensor_nbytes(x));
    for (size_t t = 0; t < s->tuples; t++) {
        size_t off;
        ptq_status st = nd_offset(ctx, s, ix, t, &off);
        if (st != PTQ_OK) return st;
        scatter_apply(x->dtype, s->red, y + off * es, (const char *)u->data + t * s->slice * es, s->slice);
    }
    return PTQ_OK;
}

const ptq_op_def op_scatter_nd = {scatter_nd_infer, scatter_nd_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ TopK
 * Per row along axis: the k largest (or smallest) values, ties broken by the lower index,
 * as ONNX specifies; NaN ranks above every number. The result is always sorted (sorted = 0
 * leaves the order unspecified). K must be known at plan time (an initializer or a folded
 * shape computation, as in torchvision's detector exports). Rows are split over threads,
 * each selecting in its own scratch of k items. */

typedef struct {
    double f;    /* float32 / float64 key */
    int64_t i;   /* int32 / int64 key */
    int64_t idx; /* position along the axis */
} topk_item;

typedef struct {
    int64_t k, n;          /* k of n along the axis */
    size_t outer, inner;
    int largest;
} topk_state;

static int cmp_idx(const topk_item *a, const topk_item *b)
{
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* NaN above everything, then numeric order */
static int cmp_f(const topk_item *a, const topk_item *b)
{
    int na = isnan(a->f), nb = isnan(b->f);
    if (na || nb) return na - nb;
    return (a->f > b->f) - (a->f < b->f);
}

static int topk_cmp_largest_f(const void *pa, const void *pb)
{
    int c = cmp_f(pb, pa);
    return c ? c : cmp_idx(pa, pb);
}

static int topk_cmp_smallest_f(const void *pa, const void *pb)
{
    int c = cmp_f(pa, pb);
    return c ? c : cmp_idx(pa, pb);
}

static int topk_cmp_largest_i(const void *pa, const void *pb)
{
    const topk_item *a = pa, *b = pb;
    int c = (b->i > a->i) - (b->i < a->i);
    return c ? c : cmp_idx(a, b);
}

static int topk_cmp_smallest_i(const void *pa, const void *pb)
{
    const topk_item *a = pa, *b = pb;
    int c = (a->i > b->i) - (a->i < b->i);
    return c ? c : cmp_idx(a, b);
}

static ptq_status topk_infer(ptq_op_ctx *ctx)
{
    int v10 = ctx->opset >= 10;
    ptq_status st = ptq_op_check_inputs(ctx, v10 ? 2 : 1, v10 ? 2 : 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->dtype != PTQ_F32 && x->dtype != PTQ_F64 && x->dtype != PTQ_I32 && x->dtype != PTQ_I64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s (ptq sorts float32, float64, int32, int64)", ptq_dtype_name(x->dtype));
    if (x->rank < 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input is a scalar, expected rank >= 1");
    int64_t a = ptq_attr_int(ctx->node, "axis", -1), axis;
    if (ptq_norm_axis(a, x->rank, &axis)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)a, x->rank);
    int64_t k;
    if (v10) {
        const ptq_tensor *kt = ctx->in[1];
        if (kt->dtype != PTQ_I64) OP_FAIL(ctx, PTQ_ERR_FORMAT, "K dtype %s, expected int64", ptq_dtype_name(kt->dtype));
        if (ptq_tensor_numel(kt) != 1 || kt->rank > 1)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "K has %zu elements (rank %d), expected one (shape [1])", ptq_tensor_numel(kt), kt->rank);
        if (!kt->data)
            OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "K input is not constant (ptq needs it at plan time for the output shape)");
        k = ((const int64_t *)kt->data)[0];
    } else {
        if (!ptq_node_attr(ctx->node, "k")) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute k is missing");
        k = ptq_attr_int(ctx->node, "k", 0);
    }
    if (k < 0 || k > x->dims[axis])
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "K %lld out of range for axis %lld of length %lld", (long long)k, (long long)axis,
                (long long)x->dims[axis]);
    int64_t largest = ctx->opset >= 11 ? ptq_attr_int(ctx->node, "largest", 1) : 1;
    int64_t sorted = ctx->opset >= 11 ? ptq_attr_int(ctx->node, "sorted", 1) : 1;
    if (largest != 0 && largest != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "largest %lld, expected 0 or 1", (long long)largest);
    if (sorted != 0 && sorted != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "sorted %lld, expected 0 or 1", (long long)sorted);
    topk_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->k = k;
    s->n = x->dims[axis];
    s->outer = prod_dims(x->dims, 0, (int)axis);
    s->inner = prod_dims(x->dims, (int)axis + 1, x->rank);
    s->largest = (int)largest;
    for (int o = 0; o < 2 && o < ctx->n_out; o++) {
        ptq_tensor *y = ctx->out[o];
        if (!y) continue;
        y->dtype = o == 0 ? x->dtype : PTQ_I64;
        ptq_shape_copy(y, x);
        y->dims[axis] = k;
    }
    if ((size_t)s->k > SIZE_MAX / sizeof(topk_item) / (size_t)ctx->nthreads) OP_FAIL(ctx, PTQ_ERR_SHAPE, "scratch size overflows");
    ctx->scratch_bytes = (size_t)s->k * sizeof(topk_item) * (size_t)ctx->nthreads;
    return PTQ_OK;
}

/* 1 when a ranks before b (qsort's comparator says so) */
static int topk_before(int (*cmp)(const void *, const void *), const topk_item *a, const topk_item *b)
{
    return cmp(a, b) < 0;
}

/* Restores the heap below slot i: the root holds the kept item that ranks last. */
static void topk_sift_down(topk_item *h, size_t n, size_t i, int (*cmp)(const void *, const void *))
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && topk_before(cmp, &h[w], &h[l])) w = l;
        if (r < n && topk_before(cmp, &h[w], &h[r])) w = r;
        if (w == i) return;
        topk_item t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void topk_sift_up(topk_item *h, size_t i, int (*cmp)(const void *, const void *))
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!topk_before(cmp, &h[p], &h[i])) return;
        topk_item t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

/* Per row: a heap of the k best seen so far (most elements are turned away by one
 * comparison with its root), then the k sorted. The order is total (value, then index),
 * so the result is that of a full sort. */
static ptq_status topk_run(ptq_op_ctx *ctx)
{
    const topk_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *yv = ctx->out[0], *yi = ctx->n_out > 1 ? ctx->out[1] : NULL;
    ptq_dtype dt = x->dtype;
    int is_f = dt == PTQ_F32 || dt == PTQ_F64;
    int (*cmp)(const void *, const void *) = s->largest ? (is_f ? topk_cmp_largest_f : topk_cmp_largest_i)
                                                        : (is_f ? topk_cmp_smallest_f : topk_cmp_smallest_i);
    size_t rows = s->outer * s->inner, n = (size_t)s->n, k = (size_t)s->k, inner = s->inner, es = ptq_dtype_size(dt);
    if (k == 0) return PTQ_OK;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t row = 0; row < rows; row++) {
        topk_item *h = (topk_item *)ctx->scratch + (size_t)omp_get_thread_num() * k;
        size_t o = row / inner, in = row % inner, base = o * n * inner + in, obase = o * k * inner + in, kept = 0;
        for (size_t j = 0; j < n; j++) {
            size_t e = base + j * inner;
            topk_item it = {0.0, 0, (int64_t)j};
            switch (dt) {
            case PTQ_F32: it.f = (double)((const float *)x->data)[e]; break;
            case PTQ_F64: it.f = ((const double *)x->data)[e]; break;
            case PTQ_I32: it.i = ((const int32_t *)x->data)[e]; break;
            default: it.i = ((const int64_t *)x->data)[e]; break;
            }
            if (kept < k) {
                h[kept] = it;
                topk_sift_up(h, kept++, cmp);
            } else if (topk_before(cmp, &it, &h[0])) {
                h[0] = it;
                topk_sift_down(h, k, 0, cmp);
            }
        }
        qsort(h, k, sizeof *h, cmp);
        for (size_t j = 0; j < k; j++) {
            size_t e = obase + j * inner, src = base + (size_t)h[j].idx * inner;
            if (yv) memcpy((char *)yv->data + e * es, (const char *)x->data + src * es, es);
            if (yi) ((int64_t *)yi->data)[e] = h[j].idx;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_top_k = {topk_infer, topk_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ ReverseSequence
 * input [seq, batch, ...] (time_axis 0, batch_axis 1) or [batch, seq, ...]: the first
 * sequence_lens[b] steps of batch b reversed, the rest copied. */

static ptq_status reverse_sequence_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *len = ctx->in[1];
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s", ptq_dtype_name(x->dtype));
    if (x->rank < 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected >= 2", x->rank);
    int64_t ba = ptq_attr_int(ctx->node, "batch_axis", 1), ta = ptq_attr_int(ctx->node, "time_axis", 0);
    if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "batch_axis %lld, time_axis %lld: expected 0 and 1 in either order", (long long)ba,
                (long long)ta);
    if (len->dtype != PTQ_I64) OP_FAIL(ctx, PTQ_ERR_FORMAT, "sequence_lens dtype %s, expected int64", ptq_dtype_name(len->dtype));
    if (len->rank != 1 || len->dims[0] != x->dims[ba])
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "sequence_lens has %lld entries (rank %d), batch is %lld", len->rank ? (long long)len->dims[0] : 1LL,
                len->rank, (long long)x->dims[ba]);
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    ptq_shape_copy(y, x);
    ctx->state = (void *)(intptr_t)ba;
    return PTQ_OK;
}

static ptq_status reverse_sequence_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0], *len = ctx->in[1];
    int ba = (int)(intptr_t)ctx->state, ta = 1 - ba;
    int64_t B = x->dims[ba], T = x->dims[ta];
    size_t es = ptq_dtype_size(x->dtype), inner = prod_dims(x->dims, 2, x->rank) * es;
    size_t bstride = (ba == 0 ? (size_t)T : 1) * inner, tstride = (ta == 0 ? (size_t)B : 1) * inner;
    for (int64_t b = 0; b < B; b++) {
        int64_t l = ((const int64_t *)len->data)[b];
        if (l < 0 || l > T)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "sequence_lens[%lld] = %lld, expected 0 to %lld", (long long)b, (long long)l, (long long)T);
        for (int64_t t = 0; t < T; t++) {
            int64_t src = t < l ? l - 1 - t : t;
            memcpy((char *)ctx->out[0]->data + (size_t)b * bstride + (size_t)t * tstride,
                   (const char *)x->data + (size_t)b * bstride + (size_t)src * tstride, inner);
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_reverse_sequence = {reverse_sequence_infer, reverse_sequence_run, NULL, 0};

/* ------------------------------------------------------------ MaxUnpool
 * Y (zeros) takes X[i] at the flat position I[i] (MaxPool's Indices: flat over the
 * whole N x C x spatial output). The output shape is the third input when given (it
 * must be constant), else (in - 1) * stride + kernel - pads per spatial dim. */

static ptq_status max_unpool_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1], *shape = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (x->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s, expected float32", ptq_dtype_name(x->dtype));
    if (ix->dtype != PTQ_I64) OP_FAIL(ctx, PTQ_ERR_FORMAT, "indices dtype %s, expected int64", ptq_dtype_name(ix->dtype));
    if (x->rank < 3 || x->rank > 5) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected 3 to 5", x->rank);
    if (!ptq_shape_equal(x, ix)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "indices' shape differs from the input's");
    int nsp = x->rank - 2;
    size_t nk;
    ptq_attr_ints(ctx->node, "kernel_shape", &nk);
    if ((int)nk != nsp) OP_FAIL(ctx, PTQ_ERR_FORMAT, "kernel_shape has %zu entries, expected %d", nk, nsp);
    ptq_spatial sp;
    if ((st = ptq_spatial_resolve_transposed(ctx, nsp, x->dims + 2, NULL, &sp)) != PTQ_OK) return st;
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    y->rank = x->rank;
    y->dims[0] = x->dims[0];
    y->dims[1] = x->dims[1];
    for (int d = 0; d < nsp; d++) y->dims[2 + d] = sp.out[d];
    /* the indices address the default shape; state keeps it for the remap to output_shape */
    int64_t *def = calloc(PTQ_MAX_RANK, sizeof *def);
    if (!def) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
    ctx->state = def;
    for (int d = 0; d < x->rank; d++) def[d] = y->dims[d];
    if (shape) {
        if (!shape->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "output_shape input is not constant");
        if (shape->dtype != PTQ_I64 || shape->rank != 1 || shape->dims[0] != x->rank)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "output_shape must be int64 with %d entries", x->rank);
        const int64_t *v = shape->data;
        for (int d = 0; d < x->rank; d++) {
            if (v[d] < 0 || (d < 2 && v[d] != x->dims[d]))
                OP_FAIL(ctx, PTQ_ERR_SHAPE, "output_shape[%d] = %lld does not fit the input", d, (long long)v[d]);
            y->dims[d] = v[d];
        }
    }
    return PTQ_OK;
}

static ptq_status max_unpool_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1], *yt = ctx->out[0];
    const int64_t *def = ctx->state;
    float *y = yt->data;
    size_t n = ptq_tensor_numel(x), ny = ptq_tensor_numel(yt), ndef = 1;
    for (int d = 0; d < yt->rank; d++) ndef *= (size_t)def[d];
    memset(y, 0, ny * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        int64_t j = ((const int64_t *)ix->data)[i];
        if (j < 0 || (uint64_t)j >= ndef)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "index %lld out of range for the unpooled %zu elements", (long long)j, ndef);
        /* coordinates in the default shape, placed at the same coordinates of the output */
        int64_t off = 0, rest = j, mul = 1;
        for (int d = yt->rank - 1; d >= 0; d--) {
            int64_t c = rest % def[d];
            rest /= def[d];
            if (c >= yt->dims[d])
                OP_FAIL(ctx, PTQ_ERR_SHAPE, "index %lld lies outside output_shape (dim %d: %lld >= %lld)", (long long)j, d,
                        (long long)c, (long long)yt->dims[d]);
            off += c * mul;
            mul *= yt->dims[d];
        }
        y[off] = ((const float *)x->data)[i];
    }
    return PTQ_OK;
}

const ptq_op_def op_max_unpool = {max_unpool_infer, max_unpool_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ DepthToSpace / SpaceToDepth
 * Y[n, c, h, w] of DepthToSpace reads X[n, ic, h / b, w / b] with, for (bh, bw) = (h % b,
 * w % b), ic = (bh * b + bw) * C + c (mode DCR, the default) or c * b * b + bh * b + bw
 * (CRD, opset 11); SpaceToDepth is the inverse of DCR. Rows of Y are split over threads. */

typedef struct {
    int64_t b;
    int to_space, crd;
} d2s_state;

static ptq_status d2s_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int to_space = strcmp(ctx->node->op_type, "DepthToSpace") == 0;
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s", ptq_dtype_name(x->dtype));
    if (x->rank != 4) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected 4 (N, C, H, W)", x->rank);
    if (!ptq_node_attr(ctx->node, "blocksize")) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute blocksize is missing");
    int64_t b = ptq_attr_int(ctx->node, "blocksize", 0);
    if (b < 1 || b > 65536) OP_FAIL(ctx, PTQ_ERR_FORMAT, "blocksize %lld, expected >= 1", (long long)b);
    int crd = 0;
    if (to_space) {
        const char *mode = ptq_attr_string(ctx->node, "mode", "DCR");
        if (strcmp(mode, "CRD") == 0 && ctx->opset >= 11) crd = 1;
        else if (strcmp(mode, "DCR") != 0)
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "mode '%s' is not valid at opset %lld (DCR, or CRD from opset 11)", mode,
                    (long long)ctx->opset);
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = 4;
    y->dims[0] = x->dims[0];
    if (to_space) {
        if (x->dims[1] % (b * b))
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "%lld channels, not a multiple of blocksize^2 = %lld", (long long)x->dims[1],
                    (long long)(b * b));
        y->dims[1] = x->dims[1] / (b * b);
        y->dims[2] = x->dims[2] * b;
        y->dims[3] = x->dims[3] * b;
    } else {
        if (x->dims[2] % b || x->dims[3] % b)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "spatial dims %lldx%lld, not multiples of blocksize %lld", (long long)x->dims[2],
                    (long long)x->dims[3], (long long)b);
        y->dims[1] = x->dims[1] * b * b;
        y->dims[2] = x->dims[2] / b;
        y->dims[3] = x->dims[3] / b;
    }
    d2s_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->b = b;
    s->to_space = to_space;
    s->crd = crd;
    return PTQ_OK;
}

static ptq_status d2s_run(ptq_op_ctx *ctx)
{
    const d2s_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    const int64_t b = s->b, N = y->dims[0], C = y->dims[1], H = y->dims[2], W = y->dims[3];
    const int64_t XC = x->dims[1], XH = x->dims[2], XW = x->dims[3];
    const size_t es = ptq_dtype_size(x->dtype);
    const char *xs = x->data;
    char *yd = y->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t row = 0; row < N * C * H; row++) {
        int64_t h = row % H, c = row / H % C, n = row / H / C;
        for (int64_t w = 0; w < W; w++) {
            int64_t src;
            if (s->to_space) {
                int64_t bh = h % b, bw = w % b, ic = s->crd ? c * b * b + bh * b + bw : (bh * b + bw) * C + c;
                src = ((n * XC + ic) * XH + h / b) * XW + w / b;
            } else {
                int64_t ic = c % XC, blk = c / XC, bh = blk / b, bw = blk % b;
                src = ((n * XC + ic) * XH + h * b + bh) * XW + w * b + bw;
            }
            memcpy(yd + (size_t)(row * W + w) * es, xs + (size_t)src * es, es);
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_depth_to_space = {d2s_infer, d2s_run, ptq_op_free_state, 0};
const ptq_op_def op_space_to_depth = {d2s_infer, d2s_run, ptq_op_free_state, 0};
