/* norm.c: BatchNormalization (inference), InstanceNormalization, LayerNormalization,
 * Softmax and LogSoftmax, float32.
 *
 *   BatchNormalization  y = x * a[c] + b[c], a = scale / sqrt(var + eps), b = B - mean * a
 *                       (a, b precomputed at infer when the four are constants, else per
 *                       run into scratch). training_mode = 1, spatial = 0 and the training
 *                       outputs (running/saved mean and var) are refused as unsupported.
 *   InstanceNormalization  per (n, c) plane: (x - mean) / sqrt(var + eps) * scale[c] + B[c].
 *   LayerNormalization  per row of prod(dims[axis:]) elements: (x - mean) * inv_std * Scale + B,
 *                       Scale/B unidirectionally broadcast to X; optional Mean and InvStdDev
 *                       outputs of shape dims[:axis] + [1]*(rank - axis); stash_type 1 only.
 *   Softmax, LogSoftmax opset < 13: X seen as 2-D [prod(dims[:axis]), prod(dims[axis:])]
 *                       (axis default 1), softmax over each row; opset >= 13: over the one
 *                       axis (default -1). Stable: exp(x - max), then / sum (Log: x - max - log sum).
 * Means and variances are float sums in a fixed order (eight interleaved partial sums, see
 * sum8), two passes (mean, then squared deviations); threads split independent rows or
 * planes only, so results are bit-identical at any thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "runtime/kernels/sum.h"
#include "runtime/op.h"
#include "runtime/shape.h"

static ptq_status need_f32(const ptq_op_ctx *ctx, int i)
{
    if (ctx->in[i] && ctx->in[i]->dtype != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d is %s, only float32 is supported", i,
                ptq_dtype_name(ctx->in[i]->dtype));
    return PTQ_OK;
}


/* Sum of (x[i] - m)^2 over [0, n), same order as sum8. */
static float sumsq_dev8(const float *x, size_t n, float m)
{
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float d = x[i + j] - m;
            acc[j] += d * d;
        }
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (; i < n; i++) {
        float d = x[i] - m;
        s += d * d;
    }
    return s;
}

static size_t numel_range(const ptq_tensor *t, int from, int to)
{
    size_t n = 1;
    for (int d = from; d < to; d++) n *= (size_t)t->dims[d];
    return n;
}

/* ------------------------------------------------------------ BatchNormalization */

typedef struct {
    int64_t channels;
    int precomputed; /* a, b filled at infer (constant scale, B, mean, var); else run uses scratch */
    float *a, *b;    /* point into this block */
} bn_state;

/* a = scale * (1 / sqrt(var + eps)), b = B - mean * a: the form ONNX Runtime uses. */
void ptq_bn_coefficients(const float *scale, const float *bias, const float *mean, const float *var, float eps,
                         int64_t c, float *a, float *b)
{
    for (int64_t i = 0; i < c; i++) {
        float inv = 1.0f / sqrtf(var[i] + eps);
        a[i] = scale[i] * inv;
        b[i] = bias[i] - mean[i] * a[i];
    }
}

static ptq_status batch_normalization_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 5, 5);
    if (st != PTQ_OK) return st;
    for (int i = 0; i < 5; i++)
        if ((st = need_f32(ctx, i)) != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->rank < 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected at least 2 (N, C, ...)", x->rank);
    if (ptq_attr_int(ctx->node, "training_mode", 0) != 0)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "training_mode = %lld: ptq runs inference only",
                (long long)ptq_attr_int(ctx->node, "training_mode", 0));
    if (ptq_attr_int(ctx->node, "spatial", 1) != 1)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "spatial = %lld: only per-channel statistics (spatial = 1) are supported",
                (long long)ptq_attr_int(ctx->node, "spatial", 1));
    if (ctx->n_out < 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "output Y is missing");
    for (int o = 1; o < ctx->n_out; o++)
        if (ctx->out[o])
            OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "output %d (running or saved statistics) exists only in training", o);
    int64_t c = x->dims[1];
    static const char *const names[] = {"", "scale", "B", "mean", "var"};
    int all_const = 1;
    for (int i = 1; i < 5; i++) {
        const ptq_tensor *t = ctx->in[i];
        if (t->rank != 1 || t->dims[0] != c) {
            char buf[96];
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s has shape %s, expected %lld (the channels of X)", names[i],
                    ptq_shape_str(t, buf, sizeof buf), (long long)c);
        }
        if (!t->data) all_const = 0;
    }
    float eps = ptq_attr_float(ctx->node, "epsilon", 1e-5f);
    size_t coef_bytes = 2 * (size_t)c * sizeof(float);
    bn_state *s = calloc(1, sizeof *s + (all_const ? coef_bytes : 0));
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for %lld channels", (long long)c);
    ctx->state = s;
    s->channels = c;
    if (all_const) {
        s->a = (float *)(s + 1);
        s->b = s->a + c;
        ptq_bn_coefficients(ctx->in[1]->data, ctx->in[2]->data, ctx->in[3]->data, ctx->in[4]->data, eps, c, s->a, s->b);
        s->precomputed = 1;
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    ptq_shape_copy(y, x);
    ctx->scratch_bytes = all_const ? 0 : coef_bytes;
    return PTQ_OK;
}

static ptq_status batch_normalization_run(ptq_op_ctx *ctx)
{
    const bn_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    int64_t c = s->channels, planes = x->dims[0] * c;
    const float *a = s->a, *b = s->b;
    if (!s->precomputed) {
        float *sa = ctx->scratch, *sb = sa + c;
        ptq_bn_coefficients(ctx->in[1]->data, ctx->in[2]->data, ctx->in[3]->data, ctx->in[4]->data,
                        ptq_attr_float(ctx->node, "epsilon", 1e-5f), c, sa, sb);
        a = sa;
        b = sb;
    }
    size_t inner = numel_range(x, 2, x->rank);
    const float *xd = x->data;
    float *yd = ctx->out[0]->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        float ap = a[p % c], bp = b[p % c];
        const float *xp = xd + (size_t)p * inner;
        float *yp = yd + (size_t)p * inner;
        for (size_t i = 0; i < inner; i++) yp[i] = xp[i] * ap + bp;
    }
    return PTQ_OK;
}

const ptq_op_def op_batch_normalization = {batch_normalization_infer, batch_normalization_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ InstanceNormalization */

static ptq_status instance_normalization_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    for (int i = 0; i < 3; i++)
        if ((st = need_f32(ctx, i)) != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->rank < 3) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected at least 3 (N, C, spatial dims)", x->rank);
    if (ctx->n_out != 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected 1", ctx->n_out);
    for (int i = 1; i < 3; i++) {
        const ptq_tensor *t = ctx->in[i];
        if (t->rank != 1 || t->dims[0] != x->dims[1]) {
            char buf[96];
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s has shape %s, expected %lld (the channels of X)", i == 1 ? "scale" : "B",
                    ptq_shape_str(t, buf, sizeof buf), (long long)x->dims[1]);
        }
    }
    ctx->out[0]->dtype = PTQ_F32;
    ptq_shape_copy(ctx->out[0], x);
    ctx->scratch_bytes = 0;
    return PTQ_OK;
}

static ptq_status instance_normalization_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    int64_t c = x->dims[1], planes = x->dims[0] * c;
    size_t inner = numel_range(x, 2, x->rank);
    float eps = ptq_attr_float(ctx->node, "epsilon", 1e-5f);
    const float *xd = x->data, *scale = ctx->in[1]->data, *bias = ctx->in[2]->data;
    float *yd = ctx->out[0]->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = xd + (size_t)p * inner;
        float *yp = yd + (size_t)p * inner;
        float mean = kern_sum8_f32(xp, inner) / (float)inner;
        float var = sumsq_dev8(xp, inner, mean) / (float)inner;
        float a = scale[p % c] / sqrtf(var + eps), b = bias[p % c];
        for (size_t i = 0; i < inner; i++) yp[i] = (xp[i] - mean) * a + b;
    }
    return PTQ_OK;
}

const ptq_op_def op_instance_normalization = {instance_normalization_infer, instance_normalization_run, NULL, 0};

/* ------------------------------------------------------------ LayerNormalization */

typedef struct {
    int axis;
    float eps;
    /* Scale (k = 0) and B (k = 1) strides in X's coordinates (0 on broadcast dims), and
     * whether each is one contiguous row repeated (or not) over the leading dims */
    int64_t strides[2][PTQ_MAX_RANK];
    int row_contiguous[2];
} ln_state;

static ptq_status layer_normalization_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 3);
    if (st != PTQ_OK) return st;
    for (int i = 0; i < ctx->n_in; i++)
        if ((st = need_f32(ctx, i)) != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int64_t axis;
    int64_t axis_attr = ptq_attr_int(ctx->node, "axis", -1);
    if (x->rank < 1 || ptq_norm_axis(axis_attr, x->rank, &axis))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for input rank %d", (long long)axis_attr, x->rank);
    int64_t stash = ptq_attr_int(ctx->node, "stash_type", 1);
    if (stash != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "stash_type %lld: only 1 (float32) is supported", (long long)stash);
    if (ctx->n_out < 1 || ctx->n_out > 3 || !ctx->out[0])
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs (Y required), expected 1 to 3", ctx->n_out);
    ln_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->axis = (int)axis;
    s->eps = ptq_attr_float(ctx->node, "epsilon", 1e-5f);
    for (int k = 0; k < 2; k++) {
        const ptq_tensor *t = ctx->n_in > 1 + k ? ctx->in[1 + k] : NULL;
        if (!t) continue;
        int ok = t->rank <= x->rank;
        for (int d = 0; ok && d < t->rank; d++) {
            int64_t td = t->dims[d], xd = x->dims[x->rank - t->rank + d];
            if (td != xd && td != 1) ok = 0;
        }
        if (!ok) {
            char a[96], b[96];
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s of shape %s does not broadcast to X of shape %s", k ? "B" : "Scale",
                    ptq_shape_str(t, a, sizeof a), ptq_shape_str(x, b, sizeof b));
        }
        ptq_broadcast_strides(t, x, s->strides[k]);
        /* contiguous row: no stride on the leading dims, row-major over the normalised ones */
        int contiguous = 1;
        int64_t expect = 1;
        for (int d = x->rank - 1; d >= 0; d--) {
            if (d < axis) {
                if (s->strides[k][d] != 0 && x->dims[d] != 1) contiguous = 0;
            } else {
                if (s->strides[k][d] != expect && x->dims[d] != 1) contiguous = 0;
                expect *= x->dims[d];
            }
        }
        s->row_contiguous[k] = contiguous;
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    ptq_shape_copy(y, x);
    for (int o = 1; o < ctx->n_out; o++) {
        ptq_tensor *t = ctx->out[o];
        if (!t) continue;
        t->dtype = PTQ_F32;
        ptq_shape_copy(t, x);
        for (int d = (int)axis; d < x->rank; d++) t->dims[d] = 1;
    }
    ctx->scratch_bytes = 0;
    return PTQ_OK;
}

/* Offset of element (row r, position j in the row) of a broadcast operand. */
static size_t ln_offset(const ptq_tensor *x, const int64_t *strides, size_t r, size_t j, int axis)
{
    size_t off = 0;
    for (int d = x->rank - 1; d >= axis; d--) {
        off += (j % (size_t)x->dims[d]) * (size_t)strides[d];
        j /= (size_t)x->dims[d];
    }
    for (int d = axis - 1; d >= 0; d--) {
        off += (r % (size_t)x->dims[d]) * (size_t)strides[d];
        r /= (size_t)x->dims[d];
    }
    return off;
}

static ptq_status layer_normalization_run(ptq_op_ctx *ctx)
{
    const ln_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    size_t rows = numel_range(x, 0, s->axis), n = numel_range(x, s->axis, x->rank);
    const float *xd = x->data, *scale = ctx->in[1]->data;
    const float *bias = ctx->n_in > 2 && ctx->in[2] ? ctx->in[2]->data : NULL;
    float *yd = ctx->out[0]->data;
    float *mean_out = ctx->n_out > 1 && ctx->out[1] ? ctx->out[1]->data : NULL;
    float *inv_out = ctx->n_out > 2 && ctx->out[2] ? ctx->out[2]->data : NULL;
    int fast = s->row_contiguous[0] && (!bias || s->row_contiguous[1]);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = xd + r * n;
        float *yr = yd + r * n;
        float mean = n ? kern_sum8_f32(xr, n) / (float)n : 0.0f;
        float var = n ? sumsq_dev8(xr, n, mean) / (float)n : 0.0f;
        float inv = 1.0f / sqrtf(var + s->eps);
        if (mean_out) mean_out[r] = mean;
        if (inv_out) inv_out[r] = inv;
        if (fast) {
            if (bias)
                for (size_t j = 0; j < n; j++) yr[j] = (xr[j] - mean) * inv * scale[j] + bias[j];
            else
                for (size_t j = 0; j < n; j++) yr[j] = (xr[j] - mean) * inv * scale[j];
        } else {
            for (size_t j = 0; j < n; j++) {
                float v = (xr[j] - mean) * inv * scale[ln_offset(x, s->strides[0], r, j, s->axis)];
                if (bias) v += bias[ln_offset(x, s->strides[1], r, j, s->axis)];
                yr[j] = v;
            }
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_layer_normalization = {layer_normalization_infer, layer_normalization_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ Softmax, LogSoftmax */

/* Softmax geometry: outer x len x inner, the softmax runs over len (stride inner). */
typedef struct {
    size_t outer, len, inner;
} softmax_geom;

static ptq_status softmax_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if ((st = need_f32(ctx, 0)) != PTQ_OK) return st;
    if (ctx->n_out != 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected 1", ctx->n_out);
    const ptq_tensor *x = ctx->in[0];
    int coerced = ctx->opset < 13;
    int64_t axis_attr = ptq_attr_int(ctx->node, "axis", coerced ? 1 : -1), axis;
    if (ptq_norm_axis(axis_attr, x->rank, &axis))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for input rank %d", (long long)axis_attr, x->rank);
    softmax_geom *g = calloc(1, sizeof *g);
    if (!g) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
    ctx->state = g;
    g->outer = numel_range(x, 0, (int)axis);
    if (x->rank == 0) {
        g->len = g->inner = 1;
    } else if (coerced) {
        g->len = numel_range(x, (int)axis, x->rank);
        g->inner = 1;
    } else {
        g->len = (size_t)x->dims[axis];
        g->inner = numel_range(x, (int)axis + 1, x->rank);
    }
    ctx->out[0]->dtype = PTQ_F32;
    ptq_shape_copy(ctx->out[0], x);
    ctx->scratch_bytes = 0;
    return PTQ_OK;
}

/* One contiguous row. The exp loops are built for AVX-512, AVX2 and baseline x86-64
 * (picked at load time); ptq_expf gives the same bits on each. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
softmax_row(const float *x, float *y, size_t n, int log_out)
{
    if (n == 0) return;
    float m = -INFINITY;
    for (size_t k = 0; k < n; k++) m = x[k] > m ? x[k] : m;
    for (size_t k = 0; k < n; k++) y[k] = ptq_expf(x[k] - m);
    float s = kern_sum8_f32(y, n);
    if (log_out) {
        float ls = ptq_logf(s);
        for (size_t k = 0; k < n; k++) y[k] = x[k] - m - ls;
    } else {
        for (size_t k = 0; k < n; k++) y[k] /= s;
    }
}

#define SOFTMAX_CHUNK 64

/* Columns [i0, i0 + w) of one outer block (len x inner, row-major), w <= SOFTMAX_CHUNK:
 * vector loops over the columns, each column's sum in row order. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
softmax_cols(const float *x, float *y, size_t len, size_t inner, size_t w, int log_out)
{
    float m[SOFTMAX_CHUNK], s[SOFTMAX_CHUNK];
    for (size_t i = 0; i < w; i++) {
        m[i] = -INFINITY;
        s[i] = 0.0f;
    }
    for (size_t k = 0; k < len; k++)
        for (size_t i = 0; i < w; i++) {
            float v = x[k * inner + i];
            m[i] = v > m[i] ? v : m[i];
        }
    for (size_t k = 0; k < len; k++)
        for (size_t i = 0; i < w; i++) {
            float e = ptq_expf(x[k * inner + i] - m[i]);
            y[k * inner + i] = e;
            s[i] += e;
        }
    if (log_out) {
        for (size_t i = 0; i < w; i++) s[i] = ptq_logf(s[i]);
        for (size_t k = 0; k < len; k++)
            for (size_t i = 0; i < w; i++) y[k * inner + i] = x[k * inner + i] - m[i] - s[i];
    } else {
        for (size_t k = 0; k < len; k++)
            for (size_t i = 0; i < w; i++) y[k * inner + i] /= s[i];
    }
}

static ptq_status softmax_run_kind(ptq_op_ctx *ctx, int log_out)
{
    const softmax_geom *g = ctx->state;
    const float *xd = ctx->in[0]->data;
    float *yd = ctx->out[0]->data;
    size_t len = g->len, inner = g->inner;
    if (inner == 1) {
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
        for (size_t o = 0; o < g->outer; o++) softmax_row(xd + o * len, yd + o * len, len, log_out);
        return PTQ_OK;
    }
    size_t chunks = (inner + SOFTMAX_CHUNK - 1) / SOFTMAX_CHUNK, tasks = g->outer * chunks;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t t = 0; t < tasks; t++) {
        size_t o = t / chunks, i0 = (t % chunks) * SOFTMAX_CHUNK;
        size_t w = inner - i0 < SOFTMAX_CHUNK ? inner - i0 : SOFTMAX_CHUNK;
        size_t base = o * len * inner + i0;
        softmax_cols(xd + base, yd + base, len, inner, w, log_out);
    }
    return PTQ_OK;
}

static ptq_status softmax_run(ptq_op_ctx *ctx)
{
    return softmax_run_kind(ctx, 0);
}

static ptq_status log_softmax_run(ptq_op_ctx *ctx)
{
    return softmax_run_kind(ctx, 1);
}

const ptq_op_def op_softmax = {softmax_infer, softmax_run, ptq_op_free_state, 0};
const ptq_op_def op_log_softmax = {softmax_infer, log_softmax_run, ptq_op_free_state, 0};
