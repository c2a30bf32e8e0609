/* normalize.c: Hardmax, LRN, MeanVarianceNormalization, GroupNormalization, LpNormalization
 * (float types).
 *
 *   Hardmax  opset >= 13: 1 at the first maximum along `axis` (default -1), 0 elsewhere;
 *            opset < 13: X seen as 2-D [prod(dims[:axis]), prod(dims[axis:])] (axis default 1),
 *            one 1 per row. A NaN counts as the maximum (the first NaN wins).
 *   LRN      [N, C, ...]: y = x / (bias + alpha / size * sum of x^2 over channels
 *            [c - (size-1)/2, c + ceil((size-1)/2)])^beta (size required, odd or even).
 *   MeanVarianceNormalization  over `axes` (default [0, 2, 3]):
 *            (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9), as the ONNX function body.
 *   GroupNormalization  [N, C, ...], num_groups dividing C: per (n, group) mean and population
 *            variance (two passes), y = scale * (x - mean) / sqrt(var + epsilon) + bias; scale
 *            and bias one per group at opset 18, one per channel from opset 21.
 *   LpNormalization  x / ||x||_p along `axis` (default -1), p 1 or 2 (default 2); a zero norm
 *            gives zeros (as ONNX Runtime).
 * Computed in double, rounded once to the output type; every output's sums run in a fixed
 * order, threads split independent rows or channels only. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "runtime/op.h"
#include "runtime/ops/nary.h"
#include "runtime/shape.h"

static ptq_status float_in(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if (!ptq_dtype_is_float(ctx->in[0]->dtype))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, expected float16, float32 or float64", ptq_dtype_name(ctx->in[0]->dtype));
    ctx->out[0]->dtype = ctx->in[0]->dtype;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

/* ------------------------------------------------------------ Hardmax */

typedef struct {
    size_t outer, len, inner;
} hardmax_state;

static ptq_status hardmax_infer(ptq_op_ctx *ctx)
{
    ptq_status st = float_in(ctx);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int64_t a = ptq_attr_int(ctx->node, "axis", ctx->opset >= 13 ? -1 : 1), axis;
    if (ctx->opset >= 13 ? ptq_norm_axis(a, x->rank, &axis) || x->rank == 0
                         : (axis = a < 0 ? a + x->rank : a) < 0 || axis > x->rank)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for input rank %d", (long long)a, x->rank);
    hardmax_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->outer = s->len = s->inner = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < axis) s->outer *= (size_t)x->dims[d];
        else if (d == axis || ctx->opset < 13) s->len *= (size_t)x->dims[d];
        else s->inner *= (size_t)x->dims[d];
    }
    return PTQ_OK;
}

static ptq_status hardmax_run(ptq_op_ctx *ctx)
{
    const hardmax_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    for (size_t i = 0; i < n; i++) ptq_store_f64(y, i, 0.0);
    if (s->len == 0) return PTQ_OK;
    for (size_t o = 0; o < s->outer; o++)
        for (size_t in = 0; in < s->inner; in++) {
            size_t base = o * s->len * s->inner + in, best = 0;
            double b = ptq_tensor_get_f64(x, base);
            for (size_t j = 1; j < s->len && b == b; j++) {
                double v = ptq_tensor_get_f64(x, base + j * s->inner);
                if (v > b || v != v) best = j, b = v;
            }
            ptq_store_f64(y, base + best * s->inner, 1.0);
        }
    return PTQ_OK;
}

const ptq_op_def op_hardmax = {hardmax_infer, hardmax_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ LRN */

static ptq_status lrn_infer(ptq_op_ctx *ctx)
{
    ptq_status st = float_in(ctx);
    if (st != PTQ_OK) return st;
    if (ctx->in[0]->rank < 3) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected at least 3 ([N, C, ...])", ctx->in[0]->rank);
    if (!ptq_node_attr(ctx->node, "size")) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute 'size' is missing");
    int64_t size = ptq_attr_int(ctx->node, "size", 1);
    if (size < 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "size = %lld, expected at least 1", (long long)size);
    return PTQ_OK;
}

static ptq_status lrn_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int64_t size = ptq_attr_int(ctx->node, "size", 1);
    double alpha = ptq_attr_float(ctx->node, "alpha", 1e-4f), beta = ptq_attr_float(ctx->node, "beta", 0.75f),
           bias = ptq_attr_float(ctx->node, "bias", 1.0f);
    int64_t N = x->dims[0], C = x->dims[1], lo = (size - 1) / 2, hi = size - 1 - lo;
    if (N == 0 || C == 0) return PTQ_OK;
    size_t inner = ptq_tensor_numel(x) / (size_t)(N * C);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t nc = 0; nc < N * C; nc++) {
        int64_t n = nc / C, c = nc % C;
        int64_t c0 = c - lo < 0 ? 0 : c - lo, c1 = c + hi > C - 1 ? C - 1 : c + hi;
        for (size_t i = 0; i < inner; i++) {
            double sq = 0.0;
            for (int64_t k = c0; k <= c1; k++) {
                double v = ptq_tensor_get_f64(x, (size_t)(n * C + k) * inner + i);
                sq += v * v;
            }
            size_t at = (size_t)nc * inner + i;
            ptq_store_f64(y, at, ptq_tensor_get_f64(x, at) / ptq_pow(bias + alpha / (double)size * sq, beta));
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_lrn = {lrn_infer, lrn_run, NULL, 0};

/* ------------------------------------------------------------ MeanVarianceNormalization */

typedef struct {
    int red[PTQ_MAX_RANK];
} mvn_state;

static ptq_status mvn_infer(ptq_op_ctx *ctx)
{
    ptq_status st = float_in(ctx);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    static const int64_t def_axes[3] = {0, 2, 3};
    size_t na = 0;
    const int64_t *axes = ptq_attr_ints(ctx->node, "axes", &na);
    if (!axes) {
        axes = def_axes;
        na = 3;
    }
    mvn_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    for (size_t i = 0; i < na; i++) {
        int64_t a;
        if (ptq_norm_axis(axes[i], x->rank, &a)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for input rank %d", (long long)axes[i], x->rank);
        if (s->red[a]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "axis %lld repeated", (long long)axes[i]);
        s->red[a] = 1;
    }
    return PTQ_OK;
}

static ptq_status mvn_run(ptq_op_ctx *ctx)
{
    const mvn_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int r = x->rank;
    /* kept dims index the groups; reduced dims the elements of each group (row-major) */
    int64_t kd[PTQ_MAX_RANK], ks[PTQ_MAX_RANK], rd[PTQ_MAX_RANK], rs[PTQ_MAX_RANK], xs[PTQ_MAX_RANK];
    int nk = 0, nr = 0;
    ptq_strides(x, xs);
    size_t groups = 1, cnt = 1;
    for (int d = 0; d < r; d++) {
        if (s->red[d]) rd[nr] = x->dims[d], rs[nr++] = xs[d], cnt *= (size_t)x->dims[d];
        else kd[nk] = x->dims[d], ks[nk++] = xs[d], groups *= (size_t)x->dims[d];
    }
    if (cnt == 0) return PTQ_OK;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t g = 0; g < groups; g++) {
        size_t base = 0, rem = g;
        for (int d = nk - 1; d >= 0; d--) base += (rem % (size_t)kd[d]) * (size_t)ks[d], rem /= (size_t)kd[d];
        double sum = 0.0, sum2 = 0.0;
        for (int pass = 0; pass < 2; pass++) {
            double mean = sum / (double)cnt, sd = sqrt(sum2 / (double)cnt - mean * mean) + 1e-9;
            for (size_t e = 0; e < cnt; e++) {
                size_t off = base, q = e;
                for (int d = nr - 1; d >= 0; d--) off += (q % (size_t)rd[d]) * (size_t)rs[d], q /= (size_t)rd[d];
                double v = ptq_tensor_get_f64(x, off);
                if (pass == 0) sum += v, sum2 += v * v;
                else ptq_store_f64(y, off, (v - mean) / sd);
            }
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_mean_variance_normalization = {mvn_infer, mvn_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ GroupNormalization (opsets 18, 21) */

typedef struct {
    int64_t groups;
    int per_channel; /* opset >= 21: scale and bias [C]; opset 18: [num_groups] */
    double eps;
} groupnorm_state;

static ptq_status group_norm_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *sc = ctx->in[1], *b = ctx->in[2];
    if (!ptq_dtype_is_float(x->dtype)) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, expected a float type", ptq_dtype_name(x->dtype));
    if (sc->dtype != x->dtype || b->dtype != x->dtype)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "scale is %s and bias %s, the input is %s", ptq_dtype_name(sc->dtype), ptq_dtype_name(b->dtype),
                ptq_dtype_name(x->dtype));
    if (x->rank < 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected at least 2 ([N, C, ...])", x->rank);
    if (!ptq_node_attr(ctx->node, "num_groups")) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute 'num_groups' is missing");
    int64_t g = ptq_attr_int(ctx->node, "num_groups", 1), C = x->dims[1];
    if (g < 1 || C % g) OP_FAIL(ctx, PTQ_ERR_SHAPE, "num_groups %lld does not divide %lld channels", (long long)g, (long long)C);
    int64_t stash = ptq_attr_int(ctx->node, "stash_type", 1);
    if (stash != 1) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "stash_type %lld (only 1, float32 statistics)", (long long)stash);
    int per_channel = ctx->opset >= 21;
    int64_t want = per_channel ? C : g;
    if (sc->rank != 1 || sc->dims[0] != want || b->rank != 1 || b->dims[0] != want)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "scale and bias must be 1-D of %lld values (%s at opset %lld)", (long long)want,
                per_channel ? "one per channel" : "one per group", (long long)ctx->opset);
    groupnorm_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->groups = g;
    s->per_channel = per_channel;
    s->eps = ptq_attr_float(ctx->node, "epsilon", 1e-5f);
    ctx->out[0]->dtype = x->dtype;
    ptq_shape_copy(ctx->out[0], x);
    return PTQ_OK;
}

/* Per (n, group): mean and population variance in double over its channels and spatial
 * elements (in order), then y = scale * (x - mean) / sqrt(var + eps) + bias. */
static ptq_status group_norm_run(ptq_op_ctx *ctx)
{
    const groupnorm_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0], *sc = ctx->in[1], *b = ctx->in[2];
    ptq_tensor *y = ctx->out[0];
    int64_t N = x->dims[0], C = x->dims[1], G = s->groups, Cg = C / G;
    size_t inner = 1;
    for (int d = 2; d < x->rank; d++) inner *= (size_t)x->dims[d];
    size_t len = (size_t)Cg * inner;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t ng = 0; ng < N * G; ng++) {
        size_t base = (size_t)ng * len;
        double sum = 0.0, sq = 0.0;
        for (size_t i = 0; i < len; i++) sum += ptq_tensor_get_f64(x, base + i);
        double mean = len ? sum / (double)len : 0.0;
        for (size_t i = 0; i < len; i++) {
            double dv = ptq_tensor_get_f64(x, base + i) - mean;
            sq += dv * dv;
        }
        double inv = 1.0 / sqrt((len ? sq / (double)len : 0.0) + s->eps);
        int64_t g = ng % G;
        for (int64_t c = 0; c < Cg; c++) {
            size_t k = s->per_channel ? (size_t)(g * Cg + c) : (size_t)g;
            double a = ptq_tensor_get_f64(sc, k), bb = ptq_tensor_get_f64(b, k);
            for (size_t i = 0; i < inner; i++) {
                size_t at = base + (size_t)c * inner + i;
                ptq_store_f64(y, at, a * ((ptq_tensor_get_f64(x, at) - mean) * inv) + bb);
            }
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_group_normalization = {group_norm_infer, group_norm_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ LpNormalization */

typedef struct {
    int p;
    size_t outer, len, inner;
} lpnorm_state;

static ptq_status lp_norm_infer(ptq_op_ctx *ctx)
{
    ptq_status st = float_in(ctx);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int64_t p = ptq_attr_int(ctx->node, "p", 2), a = ptq_attr_int(ctx->node, "axis", -1), axis;
    if (p != 1 && p != 2) OP_FAIL(ctx, PTQ_ERR_FORMAT, "p = %lld, expected 1 or 2", (long long)p);
    if (x->rank == 0 || ptq_norm_axis(a, x->rank, &axis))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for input rank %d", (long long)a, x->rank);
    lpnorm_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->p = (int)p;
    s->outer = s->inner = 1;
    s->len = (size_t)x->dims[axis];
    for (int d = 0; d < x->rank; d++) {
        if (d < axis) s->outer *= (size_t)x->dims[d];
        if (d > axis) s->inner *= (size_t)x->dims[d];
    }
    return PTQ_OK;
}

/* y = x / ||x||_p along the axis, the norm in double (no overflow for float inputs); a zero
 * norm gives zeros, as ONNX Runtime. */
static ptq_status lp_norm_run(ptq_op_ctx *ctx)
{
    const lpnorm_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    size_t lines = s->outer * s->inner;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (lines * s->len > 65536)
    for (size_t l = 0; l < lines; l++) {
        size_t base = (l / s->inner) * s->len * s->inner + l % s->inner;
        double acc = 0.0;
        for (size_t j = 0; j < s->len; j++) {
            double v = ptq_tensor_get_f64(x, base + j * s->inner);
            acc += s->p == 1 ? fabs(v) : v * v;
        }
        double norm = s->p == 1 ? acc : sqrt(acc);
        for (size_t j = 0; j < s->len; j++) {
            size_t at = base + j * s->inner;
            ptq_store_f64(y, at, norm == 0.0 ? 0.0 : ptq_tensor_get_f64(x, at) / norm);
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_lp_normalization = {lp_norm_infer, lp_norm_run, ptq_op_free_state, 0};
