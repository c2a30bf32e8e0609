/* quantize.c: QuantizeLinear and DequantizeLinear (opsets 10 to 18), per tensor and,
 * from opset 13, per axis.
 *
 *   QuantizeLinear:   y = saturate(round_half_to_even(x / y_scale) + y_zero_point)
 *                     x float32 (or int32), y int8 or uint8 (the zero point's type;
 *                     uint8 when it is absent); NaN quantizes to the zero point.
 *   DequantizeLinear: y = (x - x_zero_point) * x_scale, x int8, uint8 or int32.
 *
 * A scale with one element (rank 0 or 1) is per tensor, as ONNX Runtime reads it; a
 * longer 1-D scale is per axis: `axis` (default 1) of x, with one scale per index.
 * x / scale is a true division (not a multiplication by 1/scale), so results match
 * ONNX Runtime bit for bit; rounding uses rintf in the default round-to-nearest-even
 * mode. Parallel over flat ranges of big tensors: bit-identical at any thread count. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/shape.h"

#define PAR_MIN 65536

/* x viewed as [outer, ch, inner] with one scale per ch index (ch = 1: per tensor). */
typedef struct {
    size_t ch, inner, total;
} qdq_layout;

/* Validates scale and zero point against x and finds the layout. zp_dt: required
 * zero-point dtype, or PTQ_UNDEFINED for "int8 or uint8". */
static ptq_status qdq_check(const ptq_op_ctx *ctx, ptq_dtype zp_dt, qdq_layout *L)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 3);
    if (st != PTQ_OK) return st;
    if (ctx->n_out != 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected 1", ctx->n_out);
    const ptq_tensor *x = ctx->in[0], *sc = ctx->in[1], *zp = ctx->n_in > 2 ? ctx->in[2] : NULL;
    char a[96], b[96];
    if (sc->dtype != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "scale has dtype %s, supported: float32", ptq_dtype_name(sc->dtype));
    if (zp) {
        if (zp_dt != PTQ_UNDEFINED && zp->dtype != zp_dt)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "zero point has dtype %s but the input is %s", ptq_dtype_name(zp->dtype),
                    ptq_dtype_name(zp_dt));
        if (zp_dt == PTQ_UNDEFINED && zp->dtype != PTQ_I8 && zp->dtype != PTQ_U8)
            OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "zero point has dtype %s, supported: int8, uint8",
                    ptq_dtype_name(zp->dtype));
        size_t nz = ptq_tensor_numel(zp), ns = ptq_tensor_numel(sc);
        if (nz != ns || (zp->rank != sc->rank && !(ns == 1 && zp->rank <= 1 && sc->rank <= 1)))
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "zero point shape %s differs from scale shape %s", ptq_shape_str(zp, a, sizeof a),
                    ptq_shape_str(sc, b, sizeof b));
    }
    L->total = ptq_tensor_numel(x);
    L->ch = 1;
    L->inner = L->total;
    if (sc->rank <= 1 && ptq_tensor_numel(sc) == 1) return PTQ_OK;
    if (sc->rank != 1)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "scale has shape %s, expected a scalar or 1-D", ptq_shape_str(sc, a, sizeof a));
    if (ctx->opset < 13)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "a per-axis scale (%lld values) needs opset 13, the model has %lld",
                (long long)sc->dims[0], (long long)ctx->opset);
    const ptq_attr *ax = ptq_node_attr(ctx->node, "axis");
    if (ax && ax->type != PTQ_ATTR_INT) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute axis must be an int");
    int64_t axis = ax ? ax->i : 1, k;
    if (ptq_norm_axis(axis, x->rank, &k))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
    if (sc->dims[0] != x->dims[k])
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "%lld scales for axis %lld of size %lld", (long long)sc->dims[0], (long long)k,
                (long long)x->dims[k]);
    L->ch = (size_t)x->dims[k];
    L->inner = 1;
    for (int d = (int)k + 1; d < x->rank; d++) L->inner *= (size_t)x->dims[d];
    return PTQ_OK;
}

/* Calls seg(len, offset, channel) over [s, e) cut at channel boundaries. */
#define QDQ_WALK(L, s, e, BODY)                                                    \
    do {                                                                           \
        size_t row_ = (s) / (L)->inner, col_ = (s) % (L)->inner, pos_ = (s);       \
        while (pos_ < (e)) {                                                       \
            size_t len = (L)->inner - col_ < (e) - pos_ ? (L)->inner - col_ : (e) - pos_; \
            size_t off = pos_, c = row_ % (L)->ch;                                 \
            BODY;                                                                  \
            pos_ += len;                                                           \
            col_ = 0;                                                              \
            row_++;                                                                \
        }                                                                          \
    } while (0)

/* Runs range(ctx, L, s, e) over [0, total) cut into equal flat parts, one per thread
 * (one part below PAR_MIN elements); every element is computed alone, so the result
 * does not depend on the split. */
typedef void (*qdq_range_fn)(const ptq_op_ctx *ctx, const qdq_layout *L, size_t s, size_t e);
static void run_split(const ptq_op_ctx *ctx, const qdq_layout *L, qdq_range_fn range)
{
    size_t n = L->total;
    int T = n > PAR_MIN && ctx->nthreads > 1 ? ctx->nthreads : 1;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int t = 0; t < T; t++) {
        size_t q = n / (size_t)T, r = n % (size_t)T, ut = (size_t)t;
        size_t s = q * ut + (ut < r ? ut : r), e = s + q + (ut < r ? 1 : 0);
        range(ctx, L, s, e);
    }
}

/* Checks the inputs (zero point of dtype zp_dt, see qdq_check) and runs range over every
 * element. */
static ptq_status qdq_run(ptq_op_ctx *ctx, ptq_dtype zp_dt, qdq_range_fn range)
{
    qdq_layout L;
    ptq_status st = qdq_check(ctx, zp_dt, &L);
    if (st != PTQ_OK || L.total == 0) return st;
    run_split(ctx, &L, range);
    return PTQ_OK;
}

/* ------------------------------------------------------------ QuantizeLinear */

/* avx512f and avx2 clones: rintf becomes one vrndscaleps / vroundps (the default build has no
 * SSE4.1 and calls libm); the division and rounding are IEEE's in every clone: the same bits */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void quant_seg(const float *restrict x, size_t n, float scale, float zp, float lo, float hi, float *restrict tmp)
{
    for (size_t i = 0; i < n; i++) {
        float v = rintf(x[i] / scale) + zp;
        v = v < lo ? lo : (v > hi ? hi : v);
        tmp[i] = v != v ? zp : v;
    }
}

static void quant_range(const ptq_op_ctx *ctx, const qdq_layout *L, size_t s, size_t e)
{
    const ptq_tensor *x = ctx->in[0], *zpt = ctx->n_in > 2 ? ctx->in[2] : NULL;
    ptq_tensor *y = ctx->out[0];
    const float *scale = ctx->in[1]->data;
    int s8 = y->dtype == PTQ_I8;
    float lo = s8 ? -128.0f : 0.0f, hi = s8 ? 127.0f : 255.0f;
    float xb[256], tb[256];
    QDQ_WALK(L, s, e, {
        float zp = zpt ? (s8 ? (float)((const int8_t *)zpt->data)[c] : (float)((const uint8_t *)zpt->data)[c]) : 0.0f;
        for (size_t b = 0; b < len; b += 256) {
            size_t m = len - b < 256 ? len - b : 256;
            const float *src;
            if (x->dtype == PTQ_F32) {
                src = (const float *)x->data + off + b;
            } else {
                for (size_t i = 0; i < m; i++) xb[i] = (float)((const int32_t *)x->data)[off + b + i];
                src = xb;
            }
            quant_seg(src, m, scale[c], zp, lo, hi, tb);
            if (s8)
                for (size_t i = 0; i < m; i++) ((int8_t *)y->data)[off + b + i] = (int8_t)tb[i];
            else
                for (size_t i = 0; i < m; i++) ((uint8_t *)y->data)[off + b + i] = (uint8_t)tb[i];
        }
    });
}

static ptq_status quantize_infer(ptq_op_ctx *ctx)
{
    qdq_layout L;
    ptq_status st = qdq_check(ctx, PTQ_UNDEFINED, &L);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *zp = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (x->dtype != PTQ_F32 && x->dtype != PTQ_I32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input has dtype %s, supported: float32, int32", ptq_dtype_name(x->dtype));
    ctx->out[0]->dtype = zp ? zp->dtype : PTQ_U8;
    ptq_shape_copy(ctx->out[0], x);
    return PTQ_OK;
}

static ptq_status quantize_run(ptq_op_ctx *ctx)
{
    return qdq_run(ctx, PTQ_UNDEFINED, quant_range);
}

const ptq_op_def op_quantize_linear = {quantize_infer, quantize_run, NULL, 0};

/* ------------------------------------------------------------ DequantizeLinear */

static void dequant_range(const ptq_op_ctx *ctx, const qdq_layout *L, size_t s, size_t e)
{
    const ptq_tensor *x = ctx->in[0], *zpt = ctx->n_in > 2 ? ctx->in[2] : NULL;
    const float *scale = ctx->in[1]->data;
    float *restrict y = ctx->out[0]->data;
    QDQ_WALK(L, s, e, {
        const float sc = scale[c];
        if (x->dtype == PTQ_I8) {
            const int8_t *restrict q = (const int8_t *)x->data + off;
            const int32_t z = zpt ? ((const int8_t *)zpt->data)[c] : 0;
            for (size_t i = 0; i < len; i++) y[off + i] = (float)((int32_t)q[i] - z) * sc;
        } else if (x->dtype == PTQ_U8) {
            const uint8_t *restrict q = (const uint8_t *)x->data + off;
            const int32_t z = zpt ? ((const uint8_t *)zpt->data)[c] : 0;
            for (size_t i = 0; i < len; i++) y[off + i] = (float)((int32_t)q[i] - z) * sc;
        } else {
            const int32_t *restrict q = (const int32_t *)x->data + off;
            const int64_t z = zpt ? ((const int32_t *)zpt->data)[c] : 0;
            for (size_t i = 0; i < len; i++) y[off + i] = (float)((int64_t)q[i] - z) * sc;
        }
    });
}

static ptq_status dequantize_infer(ptq_op_ctx *ctx)
{
    qdq_layout L;
    ptq_status st = ptq_op_check_inputs(ctx, 2, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->dtype != PTQ_I8 && x->dtype != PTQ_U8 && x->dtype != PTQ_I32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input has dtype %s, supported: int8, uint8, int32", ptq_dtype_name(x->dtype));
    if ((st = qdq_check(ctx, x->dtype, &L)) != PTQ_OK) return st;
    ctx->out[0]->dtype = PTQ_F32;
    ptq_shape_copy(ctx->out[0], x);
    return PTQ_OK;
}

static ptq_status dequantize_run(ptq_op_ctx *ctx)
{
    return qdq_run(ctx, ctx->in[0]->dtype, dequant_range);
}

const ptq_op_def op_dequantize_linear = {dequantize_infer, dequantize_run, NULL, 0};

/* ------------------------------------------------------------ QuantizeLinear -> DequantizeLinear */

/* The planner's fusion (plan.c, fuse_qdq_pairs) of a float QuantizeLinear whose only reader is
 * a DequantizeLinear with the same scale, zero point and axis: y = (q - zp) * scale with q
 * computed as QuantizeLinear does, all in float. q and q - zp are small integers (exact), so y
 * is the pair's output bit for bit, and the int8 tensor is never written. Inputs: the
 * QuantizeLinear's (x, scale[, zero point]). */
static void fake_range(const ptq_op_ctx *ctx, const qdq_layout *L, size_t s, size_t e)
{
    const ptq_tensor *zpt = ctx->n_in > 2 ? ctx->in[2] : NULL;
    const float *x = ctx->in[0]->data, *scale = ctx->in[1]->data;
    float *y = ctx->out[0]->data;
    int s8 = zpt && zpt->dtype == PTQ_I8;
    float lo = s8 ? -128.0f : 0.0f, hi = s8 ? 127.0f : 255.0f;
    QDQ_WALK(L, s, e, {
        float zp = zpt ? (s8 ? (float)((const int8_t *)zpt->data)[c] : (float)((const uint8_t *)zpt->data)[c]) : 0.0f;
        const float sc = scale[c];
        quant_seg(x + off, len, sc, zp, lo, hi, y + off);
        for (size_t i = 0; i < len; i++) y[off + i] = (y[off + i] - zp) * sc;
    });
}

static ptq_status fake_infer(ptq_op_ctx *ctx)
{
    qdq_layout L;
    ptq_status st = qdq_check(ctx, PTQ_UNDEFINED, &L);
    if (st != PTQ_OK) return st;
    if (ctx->in[0]->dtype != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input has dtype %s, supported: float32", ptq_dtype_name(ctx->in[0]->dtype));
    ctx->out[0]->dtype = PTQ_F32;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status fake_run(ptq_op_ctx *ctx)
{
    return qdq_run(ctx, PTQ_UNDEFINED, fake_range);
}

const ptq_op_def ptq_op_quantize_dequantize = {fake_infer, fake_run, NULL, 0};
