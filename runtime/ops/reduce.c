/* reduce.c: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceL2, ReduceL1, ReduceProd,
 * ReduceSumSquare, ReduceLogSum, ReduceLogSumExp (ONNX opsets 1..18); ArgMax, ArgMin.
 *
 * Axes: the `axes` attribute (before opset 18; ReduceSum before 13) or the optional
 * `axes` input (int64/int32, must be a constant: initializer or folded). No axes, or an
 * empty list: reduce every axis, unless noop_with_empty_axes = 1 (then Y = X). Negative
 * axes count from the end; a repeated axis is an error. keepdims (default 1) keeps the
 * reduced dims as 1.
 *
 * Dtypes: float32, float64, float16 for all; int32 and int64 for Sum, Mean (integer
 * division), Max, Min, Prod, L1, SumSquare; int8 and uint8 for Max and Min (opset 18).
 * Empty reductions give the identity: Sum, L1, L2, SumSquare 0; Prod 1; Max -inf (int: the
 * type's minimum); Min +inf (int: maximum); Mean NaN (int: 0); LogSum, LogSumExp -inf.
 * NaN propagates through Max and Min. LogSumExp is m + log(sum exp(x - m)), m the maximum
 * (stable for large x; m = +-inf gives m). Prod and LogSumExp take the simple per-output
 * path (elements in row-major order), the others the blocked kernels below.
 *
 * Kernel: X's dims are collapsed into alternating kept/reduced blocks (size-1 dims
 * dropped). When the last block is reduced, each output reduces contiguous segments
 * (eight partial sums per segment, segments added in order); when it is kept, each
 * group of outputs accumulates whole contiguous rows (vectorised over the row). Every
 * output's order of operations is fixed by the shape alone; threads split outputs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "runtime/op.h"
#include "runtime/shape.h"

typedef enum { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_L2, RED_L1, RED_PROD, RED_SUMSQ, RED_LOGSUM, RED_LOGSUMEXP } red_kind;

typedef struct {
    red_kind kind;
    int noop;                                      /* Y = X */
    int nk, nr;                                    /* collapsed kept / reduced blocks */
    int64_t ksz[PTQ_MAX_RANK], kstr[PTQ_MAX_RANK]; /* kept blocks: size, stride in X (row-major order) */
    int64_t rsz[PTQ_MAX_RANK], rstr[PTQ_MAX_RANK]; /* reduced blocks */
    int last_reduced;                              /* X's innermost block is reduced */
    size_t count;                                  /* elements reduced into each output */
} reduce_state;

/* Column chunk of the kept-innermost float kernel (outputs per task). */
#define REDUCE_CHUNK 256

static ptq_status reduce_infer(ptq_op_ctx *ctx, red_kind kind)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int int_ok = kind != RED_L2 && kind != RED_LOGSUM && kind != RED_LOGSUMEXP;
    int small_ok = kind == RED_MAX || kind == RED_MIN; /* int8, uint8: opset 18's Max and Min */
    if (x->dtype != PTQ_F32 && x->dtype != PTQ_F64 && x->dtype != PTQ_F16 &&
        !(int_ok && (x->dtype == PTQ_I32 || x->dtype == PTQ_I64)) && !(small_ok && (x->dtype == PTQ_I8 || x->dtype == PTQ_U8)))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, supported: float32, float64, float16%s", ptq_dtype_name(x->dtype),
                small_ok ? ", int32, int64, int8, uint8" : int_ok ? ", int32, int64" : "");
    if (ctx->n_out != 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected 1", ctx->n_out);
    int64_t keep = ptq_attr_int(ctx->node, "keepdims", 1), noop = ptq_attr_int(ctx->node, "noop_with_empty_axes", 0);
    if (keep != 0 && keep != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "keepdims = %lld, expected 0 or 1", (long long)keep);
    if (noop != 0 && noop != 1)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "noop_with_empty_axes = %lld, expected 0 or 1", (long long)noop);

    /* axes: attribute, else constant input */
    int64_t axes[PTQ_MAX_RANK];
    size_t n_axes = 0;
    const ptq_tensor *ax_in = ctx->n_in > 1 ? ctx->in[1] : NULL;
    const int64_t *ax_attr = ptq_attr_ints(ctx->node, "axes", &n_axes);
    if (ax_attr && ax_in) OP_FAIL(ctx, PTQ_ERR_FORMAT, "axes given both as attribute and as input");
    if (ax_attr) {
        if (n_axes > (size_t)x->rank)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "%zu axes for input rank %d", n_axes, x->rank);
        for (size_t i = 0; i < n_axes; i++) axes[i] = ax_attr[i];
    } else if (ax_in) {
        if (ax_in->dtype != PTQ_I64 && ax_in->dtype != PTQ_I32)
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "axes input is %s, expected int64", ptq_dtype_name(ax_in->dtype));
        if (ax_in->rank > 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axes input has rank %d, expected 1", ax_in->rank);
        n_axes = ptq_tensor_numel(ax_in);
        if (n_axes > (size_t)x->rank)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "%zu axes for input rank %d", n_axes, x->rank);
        if (n_axes && !ax_in->data)
            OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "axes input is not constant (needs an initializer or a folded value)");
        for (size_t i = 0; i < n_axes; i++) axes[i] = ptq_tensor_get_i64(ax_in, i);
    }

    reduce_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->kind = kind;
    int red[PTQ_MAX_RANK] = {0};
    for (size_t i = 0; i < n_axes; i++) {
        int64_t a;
        if (ptq_norm_axis(axes[i], x->rank, &a) || x->rank == 0)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for input rank %d", (long long)axes[i], x->rank);
        if (red[a]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "axis %lld repeated", (long long)axes[i]);
        red[a] = 1;
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    if (n_axes == 0 && noop) {
        s->noop = 1;
        ptq_shape_copy(y, x);
        ctx->scratch_bytes = 0;
        return PTQ_OK;
    }
    if (n_axes == 0)
        for (int d = 0; d < x->rank; d++) red[d] = 1;

    y->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (!red[d]) y->dims[y->rank++] = x->dims[d];
        else if (keep) y->dims[y->rank++] = 1;
    }
    /* collapse into alternating blocks, innermost first; size-1 dims do not matter */
    int64_t stride = 1;
    int64_t bsz[PTQ_MAX_RANK], bstr[PTQ_MAX_RANK];
    int bred[PTQ_MAX_RANK], nb = 0;
    s->count = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        int64_t dim = x->dims[d];
        if (red[d]) s->count *= (size_t)dim;
        if (dim != 1) {
            if (nb > 0 && bred[nb - 1] == red[d] && bstr[nb - 1] * bsz[nb - 1] == stride) {
                bsz[nb - 1] *= dim;
            } else {
                bsz[nb] = dim;
                bstr[nb] = stride;
                bred[nb] = red[d];
                nb++;
            }
        }
        stride *= dim;
    }
    s->last_reduced = nb > 0 && bred[0];
    for (int b = nb - 1; b >= 0; b--) { /* outermost first */
        if (bred[b]) {
            s->rsz[s->nr] = bsz[b];
            s->rstr[s->nr++] = bstr[b];
        } else {
            s->ksz[s->nk] = bsz[b];
            s->kstr[s->nk++] = bstr[b];
        }
    }
    ctx->scratch_bytes = 0;
    return PTQ_OK;
}

static ptq_status reduce_sum_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_SUM); }
static ptq_status reduce_mean_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_MEAN); }
static ptq_status reduce_max_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_MAX); }
static ptq_status reduce_min_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_MIN); }
static ptq_status reduce_l2_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_L2); }
static ptq_status reduce_l1_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_L1); }
static ptq_status reduce_prod_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_PROD); }
static ptq_status reduce_sum_square_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_SUMSQ); }
static ptq_status reduce_log_sum_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_LOGSUM); }
static ptq_status reduce_log_sum_exp_infer(ptq_op_ctx *ctx) { return reduce_infer(ctx, RED_LOGSUMEXP); }

/* Offset in X of the idx-th combination (row-major) of n blocks. */
static size_t block_offset(size_t idx, int n, const int64_t *sz, const int64_t *str)
{
    size_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (idx % (size_t)sz[d]) * (size_t)str[d];
        idx /= (size_t)sz[d];
    }
    return off;
}

static size_t block_count(int n, const int64_t *sz)
{
    size_t c = 1;
    for (int d = 0; d < n; d++) c *= (size_t)sz[d];
    return c;
}

/* ------------------------------------------------------------ float32 */

static float identity_f32(red_kind k)
{
    if (k == RED_MAX) return -INFINITY;
    if (k == RED_MIN) return INFINITY;
    if (k == RED_PROD) return 1.0f;
    if (k == RED_LOGSUMEXP) return -INFINITY;
    return 0.0f;
}

static float finish_f32(red_kind k, float acc, size_t count)
{
    if (k == RED_MEAN) return acc / (float)count; /* count 0: 0/0 = NaN */
    if (k == RED_L2) return sqrtf(acc);
    if (k == RED_LOGSUM) return ptq_logf(acc);
    return acc;
}

static inline float combine_f32(red_kind k, float acc, float v)
{
    switch (k) {
    case RED_MAX: return (v > acc || v != v) ? v : acc;
    case RED_MIN: return (v < acc || v != v) ? v : acc;
    case RED_L2: case RED_SUMSQ: return acc + v * v;
    case RED_L1: return acc + fabsf(v);
    default: return acc + v;
    }
}

/* Reduction of one contiguous segment; Sum/Mean/L2 with eight partial sums. */
static float segment_f32(red_kind k, const float *x, size_t n)
{
    if (k == RED_MAX || k == RED_MIN) {
        float m = k == RED_MAX ? -INFINITY : INFINITY;
        int nan = 0;
        if (k == RED_MAX)
            for (size_t i = 0; i < n; i++) {
                m = x[i] > m ? x[i] : m;
                nan |= x[i] != x[i];
            }
        else
            for (size_t i = 0; i < n; i++) {
                m = x[i] < m ? x[i] : m;
                nan |= x[i] != x[i];
            }
        return nan ? NAN : m;
    }
    float acc[8] = {0};
    size_t i = 0;
    if (k == RED_L2 || k == RED_SUMSQ)
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += x[i + j] * x[i + j];
    else if (k == RED_L1)
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += fabsf(x[i + j]);
    else
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += x[i + j];
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += k == RED_L2 || k == RED_SUMSQ ? x[i] * x[i] : (k == RED_L1 ? fabsf(x[i]) : x[i]);
    return s;
}

/* acc[0..w) combined with row v[0..w), vectorisable per kind. */
static void row_combine_f32(red_kind k, float *acc, const float *v, size_t w)
{
    switch (k) {
    case RED_MAX:
        for (size_t i = 0; i < w; i++) acc[i] = (v[i] > acc[i] || v[i] != v[i]) ? v[i] : acc[i];
        break;
    case RED_MIN:
        for (size_t i = 0; i < w; i++) acc[i] = (v[i] < acc[i] || v[i] != v[i]) ? v[i] : acc[i];
        break;
    case RED_L2: case RED_SUMSQ:
        for (size_t i = 0; i < w; i++) acc[i] += v[i] * v[i];
        break;
    case RED_L1:
        for (size_t i = 0; i < w; i++) acc[i] += fabsf(v[i]);
        break;
    default:
        for (size_t i = 0; i < w; i++) acc[i] += v[i];
        break;
    }
}

static void reduce_run_f32(const ptq_op_ctx *ctx, const reduce_state *s, const float *x, float *y)
{
    red_kind k = s->kind;
    size_t ny = ptq_tensor_numel(ctx->out[0]), nx = ptq_tensor_numel(ctx->in[0]);
    if (nx == 0) {
        for (size_t i = 0; i < ny; i++) y[i] = finish_f32(k, identity_f32(k), 0);
        return;
    }
    if (s->nr == 0) { /* only size-1 dims reduced: one element per output */
        int same = k == RED_SUM || k == RED_MEAN || k == RED_MAX || k == RED_MIN || k == RED_PROD || k == RED_LOGSUMEXP;
        for (size_t i = 0; i < ny; i++) y[i] = same ? x[i] : finish_f32(k, combine_f32(k, identity_f32(k), x[i]), 1);
        return;
    }
    if (k == RED_PROD || k == RED_LOGSUMEXP) { /* simple path: each output's elements in row-major order */
        size_t nred = block_count(s->nr, s->rsz);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
        for (size_t o = 0; o < ny; o++) {
            size_t base = block_offset(o, s->nk, s->ksz, s->kstr);
            float acc = k == RED_PROD ? 1.0f : -INFINITY;
            for (size_t r = 0; r < nred; r++) {
                float v = x[base + block_offset(r, s->nr, s->rsz, s->rstr)];
                acc = k == RED_PROD ? acc * v : ((v > acc || v != v) ? v : acc);
            }
            if (k == RED_LOGSUMEXP && acc == acc && acc != INFINITY && acc != -INFINITY) {
                float m = acc, sum = 0.0f;
                for (size_t r = 0; r < nred; r++) sum += ptq_expf(x[base + block_offset(r, s->nr, s->rsz, s->rstr)] - m);
                acc = m + ptq_logf(sum);
            }
            y[o] = acc;
        }
        return;
    }
    if (s->last_reduced) {
        size_t seg = (size_t)s->rsz[s->nr - 1], nseg = block_count(s->nr - 1, s->rsz);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
        for (size_t o = 0; o < ny; o++) {
            size_t base = block_offset(o, s->nk, s->ksz, s->kstr);
            float acc = identity_f32(k);
            for (size_t r = 0; r < nseg; r++) {
                float v = segment_f32(k, x + base + block_offset(r, s->nr - 1, s->rsz, s->rstr), seg);
                acc = k == RED_MAX || k == RED_MIN ? combine_f32(k, acc, v) : acc + v;
            }
            y[o] = finish_f32(k, acc, s->count);
        }
        return;
    }
    size_t w = (size_t)s->ksz[s->nk - 1], groups = block_count(s->nk - 1, s->ksz), nred = block_count(s->nr, s->rsz);
    size_t chunks = (w + REDUCE_CHUNK - 1) / REDUCE_CHUNK;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t t = 0; t < groups * chunks; t++) {
        size_t g = t / chunks, c0 = (t % chunks) * REDUCE_CHUNK;
        size_t cw = w - c0 < REDUCE_CHUNK ? w - c0 : REDUCE_CHUNK;
        size_t base = block_offset(g, s->nk - 1, s->ksz, s->kstr) + c0;
        float *acc = y + g * w + c0;
        float init = identity_f32(k);
        for (size_t i = 0; i < cw; i++) acc[i] = init;
        for (size_t r = 0; r < nred; r++)
            row_combine_f32(k, acc, x + base + block_offset(r, s->nr, s->rsz, s->rstr), cw);
        for (size_t i = 0; i < cw; i++) acc[i] = finish_f32(k, acc[i], s->count);
    }
}

/* ------------------------------------------------------------ int32, int64 (shape arithmetic: simple loops) */

static void reduce_run_int(const ptq_op_ctx *ctx, const reduce_state *s)
{
    const ptq_tensor *xt = ctx->in[0];
    ptq_tensor *yt = ctx->out[0];
    size_t ny = ptq_tensor_numel(yt), nx = ptq_tensor_numel(xt);
    int is64 = xt->dtype == PTQ_I64;
    int64_t lo = is64 ? INT64_MIN : INT32_MIN, hi = is64 ? INT64_MAX : INT32_MAX;
    if (xt->dtype == PTQ_I8) lo = INT8_MIN, hi = INT8_MAX;
    if (xt->dtype == PTQ_U8) lo = 0, hi = UINT8_MAX;
    size_t nred = nx ? block_count(s->nr, s->rsz) : 0;
    for (size_t o = 0; o < ny; o++) {
        size_t base = nx ? block_offset(o, s->nk, s->ksz, s->kstr) : 0;
        uint64_t sum = 0, prod = 1; /* wrap like the type's own arithmetic */
        int64_t m = s->kind == RED_MAX ? lo : hi;
        for (size_t r = 0; r < nred; r++) {
            size_t i = base + block_offset(r, s->nr, s->rsz, s->rstr);
            int64_t v = ptq_tensor_get_i64(xt, i);
            if (s->kind == RED_L1) sum += (uint64_t)(v < 0 ? -(uint64_t)v : (uint64_t)v);
            else if (s->kind == RED_SUMSQ) sum += (uint64_t)v * (uint64_t)v;
            else sum += (uint64_t)v;
            prod *= (uint64_t)v;
            if (s->kind == RED_MAX ? v > m : v < m) m = v;
        }
        int64_t r;
        if (s->kind == RED_MAX || s->kind == RED_MIN) {
            r = m;
        } else {
            uint64_t u = s->kind == RED_PROD ? prod : sum;
            r = is64 ? (int64_t)u : (int64_t)(int32_t)(uint32_t)u;
            if (s->kind == RED_MEAN) r = s->count ? r / (int64_t)s->count : 0;
        }
        switch (yt->dtype) {
        case PTQ_I64: ((int64_t *)yt->data)[o] = r; break;
        case PTQ_I32: ((int32_t *)yt->data)[o] = (int32_t)r; break;
        case PTQ_I8: ((int8_t *)yt->data)[o] = (int8_t)r; break; /* Max, Min: in range */
        default: ((uint8_t *)yt->data)[o] = (uint8_t)r; break;
        }
    }
}

/* ------------------------------------------------------------ float64, float16: in double, elements in row-major order */

static void reduce_run_f64(const ptq_op_ctx *ctx, const reduce_state *s)
{
    const ptq_tensor *xt = ctx->in[0];
    ptq_tensor *yt = ctx->out[0];
    red_kind k = s->kind;
    size_t ny = ptq_tensor_numel(yt), nx = ptq_tensor_numel(xt);
    size_t nred = nx ? block_count(s->nr, s->rsz) : 0;
    for (size_t o = 0; o < ny; o++) {
        size_t base = nx ? block_offset(o, s->nk, s->ksz, s->kstr) : 0;
        double acc = k == RED_PROD ? 1.0 : (k == RED_MAX || k == RED_LOGSUMEXP ? -(double)INFINITY : (k == RED_MIN ? (double)INFINITY : 0.0));
        for (size_t r = 0; r < nred; r++) {
            double v = ptq_tensor_get_f64(xt, base + block_offset(r, s->nr, s->rsz, s->rstr));
            switch (k) {
            case RED_MAX: case RED_LOGSUMEXP: acc = (v > acc || v != v) ? v : acc; break;
            case RED_MIN: acc = (v < acc || v != v) ? v : acc; break;
            case RED_PROD: acc *= v; break;
            case RED_L1: acc += fabs(v); break;
            case RED_L2: case RED_SUMSQ: acc += v * v; break;
            default: acc += v; break;
            }
        }
        if (k == RED_LOGSUMEXP && acc == acc && acc != (double)INFINITY && acc != -(double)INFINITY) {
            double m = acc, sum = 0.0;
            for (size_t r = 0; r < nred; r++)
                sum += ptq_exp(ptq_tensor_get_f64(xt, base + block_offset(r, s->nr, s->rsz, s->rstr)) - m);
            acc = m + ptq_log(sum);
        }
        if (k == RED_MEAN) acc /= (double)s->count;
        else if (k == RED_L2) acc = sqrt(acc);
        else if (k == RED_LOGSUM) acc = ptq_log(acc);
        if (yt->dtype == PTQ_F64) ((double *)yt->data)[o] = acc;
        else ((uint16_t *)yt->data)[o] = ptq_f32_to_f16((float)acc);
    }
}

static ptq_status reduce_run(ptq_op_ctx *ctx)
{
    const reduce_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    if (s->noop) {
        memcpy(ctx->out[0]->data, x->data, ptq_tensor_nbytes(x));
        return PTQ_OK;
    }
    if (x->dtype == PTQ_F32) reduce_run_f32(ctx, s, x->data, ctx->out[0]->data);
    else if (x->dtype == PTQ_F64 || x->dtype == PTQ_F16) reduce_run_f64(ctx, s);
    else reduce_run_int(ctx, s);
    return PTQ_OK;
}

const ptq_op_def op_reduce_sum = {reduce_sum_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_mean = {reduce_mean_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_max = {reduce_max_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_min = {reduce_min_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_l2 = {reduce_l2_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_l1 = {reduce_l1_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_prod = {reduce_prod_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_sum_square = {reduce_sum_square_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_log_sum = {reduce_log_sum_infer, reduce_run, ptq_op_free_state, 0};
const ptq_op_def op_reduce_log_sum_exp = {reduce_log_sum_exp_infer, reduce_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ ArgMax, ArgMin
 * Index (int64) of the largest / smallest element along `axis` (default 0); ties give the
 * first index, or the last with select_last_index = 1. A NaN counts as larger and smaller
 * than every number (the first NaN wins, as numpy's argmax). keepdims (default 1). Any
 * numeric input; integers are compared as int64 (uint64 as such), floats as double. */

typedef struct {
    int is_max, last;
    size_t outer, len, inner;
} arg_state;

static ptq_status arg_infer(ptq_op_ctx *ctx, int is_max)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    ptq_dtype dt = x->dtype;
    if (ptq_dtype_size(dt) == 0 || dt == PTQ_BOOL) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s is not supported", ptq_dtype_name(dt));
    int64_t axis, keep = ptq_attr_int(ctx->node, "keepdims", 1), last = ptq_attr_int(ctx->node, "select_last_index", 0);
    if (keep != 0 && keep != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "keepdims = %lld, expected 0 or 1", (long long)keep);
    if (last != 0 && last != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "select_last_index = %lld, expected 0 or 1", (long long)last);
    if (ptq_norm_axis(ptq_attr_int(ctx->node, "axis", 0), x->rank, &axis) || x->rank == 0)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for input rank %d", (long long)ptq_attr_int(ctx->node, "axis", 0), x->rank);
    if (x->dims[axis] == 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld has size 0", (long long)axis);
    arg_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->is_max = is_max;
    s->last = (int)last;
    s->outer = s->inner = 1;
    s->len = (size_t)x->dims[axis];
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_I64;
    y->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d < axis) s->outer *= (size_t)x->dims[d];
        if (d > axis) s->inner *= (size_t)x->dims[d];
        if (d != axis) y->dims[y->rank++] = x->dims[d];
        else if (keep) y->dims[y->rank++] = 1;
    }
    return PTQ_OK;
}

static ptq_status arg_max_infer(ptq_op_ctx *ctx) { return arg_infer(ctx, 1); }
static ptq_status arg_min_infer(ptq_op_ctx *ctx) { return arg_infer(ctx, 0); }

static ptq_status arg_run(ptq_op_ctx *ctx)
{
    const arg_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    int64_t *y = ctx->out[0]->data;
    int fl = x->dtype == PTQ_F32 || x->dtype == PTQ_F64 || x->dtype == PTQ_F16, u64 = x->dtype == PTQ_U64;
    size_t ny = s->outer * s->inner;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (ny * s->len > 65536)
    for (size_t o = 0; o < ny; o++) {
        size_t base = (o / s->inner) * s->len * s->inner + o % s->inner;
        size_t best = 0;
        if (fl) {
            double b = ptq_tensor_get_f64(x, base);
            for (size_t j = 1; j < s->len && b == b; j++) {
                double v = ptq_tensor_get_f64(x, base + j * s->inner);
                int better = v != v || (s->is_max ? v > b : v < b) || (s->last && v == b);
                if (better) best = j, b = v;
            }
        } else if (u64) {
            uint64_t b = ((const uint64_t *)x->data)[base];
            for (size_t j = 1; j < s->len; j++) {
                uint64_t v = ((const uint64_t *)x->data)[base + j * s->inner];
                if ((s->is_max ? v > b : v < b) || (s->last && v == b)) best = j, b = v;
            }
        } else {
            int64_t b = ptq_tensor_get_i64(x, base);
            for (size_t j = 1; j < s->len; j++) {
                int64_t v = ptq_tensor_get_i64(x, base + j * s->inner);
                if ((s->is_max ? v > b : v < b) || (s->last && v == b)) best = j, b = v;
            }
        }
        y[o] = (int64_t)best;
    }
    return PTQ_OK;
}

const ptq_op_def op_arg_max = {arg_max_infer, arg_run, ptq_op_free_state, 0};
const ptq_op_def op_arg_min = {arg_min_infer, arg_run, ptq_op_free_state, 0};
