/* more.c: the rest of ptq's op list, first versions (weak, like basic.c: a family
 * file defining the same op replaces it, and the weak version is then deleted from
 * here; Gemm, GlobalMaxPool, InstanceNormalization, LayerNormalization, the Reduce
 * ops and QuantizeLinear/DequantizeLinear now live in gemm.c, pool.c, norm.c,
 * reduce.c and quantize.c). Correctness first; the hot ops of real image models live
 * in basic.c and the family files. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "runtime/op.h"
#include "runtime/shape.h"

#define WEAK __attribute__((weak))



/* Output element i's offset in t broadcast to y. */
static size_t bcast_offset(const int64_t *strides, const ptq_tensor *y, size_t i)
{
    size_t off = 0;
    for (int d = y->rank - 1; d >= 0; d--) {
        off += (i % (size_t)y->dims[d]) * (size_t)strides[d];
        i /= (size_t)y->dims[d];
    }
    return off;
}

static void set_f64(ptq_tensor *t, size_t i, double v)
{
    switch (t->dtype) {
    case PTQ_F32: ((float *)t->data)[i] = (float)v; break;
    case PTQ_F64: ((double *)t->data)[i] = v; break;
    case PTQ_F16: ((uint16_t *)t->data)[i] = ptq_f32_to_f16((float)v); break;
    case PTQ_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    case PTQ_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case PTQ_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case PTQ_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case PTQ_U8: case PTQ_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case PTQ_U16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case PTQ_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case PTQ_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    default: break;
    }
}

static void set_i64(ptq_tensor *t, size_t i, int64_t v)
{
    switch (t->dtype) {
    case PTQ_I64: ((int64_t *)t->data)[i] = v; break;
    case PTQ_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    default: set_f64(t, i, (double)v); break;
    }
}

static int is_float(ptq_dtype d)
{
    return d == PTQ_F32 || d == PTQ_F64 || d == PTQ_F16;
}

/* ------------------------------------------------------------ unary float ops */

static ptq_status funary_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if (!is_float(ctx->in[0]->dtype))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, a float type is required", ptq_dtype_name(ctx->in[0]->dtype));
    ctx->out[0]->dtype = ctx->in[0]->dtype;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

typedef double (*fun1)(const ptq_op_ctx *ctx, double x);
typedef float (*fun1f)(const ptq_op_ctx *ctx, float x);

/* Float tensors through ff (the float functions of mathf.h), the others through f in double. */
static ptq_status funary_run_with(ptq_op_ctx *ctx, fun1 f, fun1f ff)
{
    size_t n = ptq_tensor_numel(ctx->out[0]);
    if (ctx->in[0]->dtype == PTQ_F32) {
        const float *x = ctx->in[0]->data;
        float *y = ctx->out[0]->data;
        for (size_t i = 0; i < n; i++) y[i] = ff(ctx, x[i]);
        return PTQ_OK;
    }
    for (size_t i = 0; i < n; i++) set_f64(ctx->out[0], i, f(ctx, ptq_tensor_get_f64(ctx->in[0], i)));
    return PTQ_OK;
}

/* EXPR in double on x, FEXPR in float on v (defaults to EXPR rounded). */
#define FUNARY2(sym, EXPR, FEXPR)                                           \
    static double sym##_f(const ptq_op_ctx *ctx, double x)                  \
    {                                                                       \
        (void)ctx;                                                          \
        return (EXPR);                                                      \
    }                                                                       \
    static float sym##_ff(const ptq_op_ctx *ctx, float v)                   \
    {                                                                       \
        (void)ctx;                                                          \
        return (FEXPR);                                                     \
    }                                                                       \
    static ptq_status sym##_run(ptq_op_ctx *ctx)                            \
    {                                                                       \
        return funary_run_with(ctx, sym##_f, sym##_ff);                     \
    }                                                                       \
    WEAK const ptq_op_def op_##sym = {funary_infer, sym##_run, NULL, 0};
#define FUNARY(sym, EXPR) FUNARY2(sym, EXPR, (float)sym##_f(ctx, v))

/* exp, log, erf and tanh are ptq's own (runtime/kernels/mathf.h): libm's differ by CPU. */
FUNARY(elu, x >= 0 ? x : (double)ptq_attr_float(ctx->node, "alpha", 1.0f) * ptq_expm1(x))
FUNARY(selu, (double)ptq_attr_float(ctx->node, "gamma", 1.05070102214813232421875f) *
                 (x > 0 ? x : (double)ptq_attr_float(ctx->node, "alpha", 1.67326319217681884765625f) * ptq_expm1(x)))
FUNARY2(softplus, ptq_log1p(ptq_exp(-fabs(x))) + (x > 0 ? x : 0), ptq_softplusf(v))
FUNARY2(erf, ptq_erf(x), ptq_erff(v))
FUNARY2(log, ptq_log(x), ptq_logf(v))
FUNARY(floor, floor(x))
FUNARY(ceil, ceil(x))
/* Gelu on floats: x/2 (1 + erf(x / sqrt 2)) in float with ptq_erff (as ONNX Runtime's
 * float kernel), or the tanh form with ptq_tanhf; doubles in double. */
static int gelu_is_tanh(const ptq_op_ctx *ctx)
{
    return strcmp(ptq_attr_string(ctx->node, "approximate", "none"), "tanh") == 0;
}
FUNARY2(gelu,
        gelu_is_tanh(ctx) ? 0.5 * x * (1 + ptq_tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))
                          : 0.5 * x * (1 + ptq_erf(x / sqrt(2.0))),
        gelu_is_tanh(ctx) ? 0.5f * v * (1.0f + ptq_tanhf(0.797884561f * (v + 0.044715f * v * v * v)))
                          : 0.5f * v * (1.0f + ptq_erff(v * 0.707106781f)))

/* ------------------------------------------------------------ broadcasting generic n-ary (double math) */

static ptq_status nary_infer_common(ptq_op_ctx *ctx, int lo, int hi, ptq_dtype out_dt)
{
    ptq_status st = ptq_op_check_inputs(ctx, lo, hi);
    if (st != PTQ_OK) return st;
    for (int i = 0; i < ctx->n_in; i++)
        if (!ctx->in[i] || ptq_dtype_size(ctx->in[i]->dtype) == 0)
            OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d: unsupported dtype", i);
    if ((st = ptq_broadcast_n(ctx->in, ctx->n_in, ctx->out[0])) != PTQ_OK) {
        ptq_error_prefix("%s '%s': ", ctx->node->op_type, ctx->node->name);
        return st;
    }
    ctx->out[0]->dtype = out_dt == PTQ_UNDEFINED ? ctx->in[0]->dtype : out_dt;
    return PTQ_OK;
}

typedef enum { NARY_MIN, NARY_MAX, NARY_SUM, NARY_MEAN, NARY_PRELU } nary_kind;

static ptq_status nary_run(ptq_op_ctx *ctx, nary_kind k)
{
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    int64_t strides[16][PTQ_MAX_RANK];
    int m = ctx->n_in > 16 ? 16 : ctx->n_in;
    for (int j = 0; j < m; j++) ptq_broadcast_strides(ctx->in[j], y, strides[j]);
    int integer = !is_float(ctx->in[0]->dtype);
    for (size_t i = 0; i < n; i++) {
        if (integer && (k == NARY_MIN || k == NARY_MAX || k == NARY_SUM)) {
            int64_t acc = ptq_tensor_get_i64(ctx->in[0], bcast_offset(strides[0], y, i));
            for (int j = 1; j < m; j++) {
                int64_t v = ptq_tensor_get_i64(ctx->in[j], bcast_offset(strides[j], y, i));
                acc = k == NARY_MIN ? (v < acc ? v : acc) : k == NARY_MAX ? (v > acc ? v : acc) : acc + v;
            }
            set_i64(y, i, acc);
            continue;
        }
        double acc = ptq_tensor_get_f64(ctx->in[0], bcast_offset(strides[0], y, i));
        if (k == NARY_PRELU) {
            double s = ptq_tensor_get_f64(ctx->in[1], bcast_offset(strides[1], y, i));
            set_f64(y, i, acc < 0 ? (double)((float)acc * (float)s) : acc);
            continue;
        }
        if (y->dtype == PTQ_F32) { /* float math in input order, as ONNX Runtime does */
            float f = (float)acc;
            for (int j = 1; j < m; j++) {
                float v = (float)ptq_tensor_get_f64(ctx->in[j], bcast_offset(strides[j], y, i));
                if (k == NARY_MIN) f = isnan(v) || v < f ? v : f;
                else if (k == NARY_MAX) f = isnan(v) || v > f ? v : f;
                else f += v;
            }
            if (k == NARY_MEAN) f /= (float)m;
            ((float *)y->data)[i] = f;
            continue;
        }
        for (int j = 1; j < m; j++) {
            double v = ptq_tensor_get_f64(ctx->in[j], bcast_offset(strides[j], y, i));
            if (k == NARY_MIN) acc = isnan(v) || v < acc ? v : acc;
            else if (k == NARY_MAX) acc = isnan(v) || v > acc ? v : acc;
            else acc += v;
        }
        if (k == NARY_MEAN) acc /= m;
        set_f64(y, i, acc);
    }
    return PTQ_OK;
}

static ptq_status variadic_infer(ptq_op_ctx *ctx) { return nary_infer_common(ctx, 1, 16, PTQ_UNDEFINED); }
static ptq_status prelu_infer(ptq_op_ctx *ctx)
{
    ptq_status st = nary_infer_common(ctx, 2, 2, PTQ_UNDEFINED);
    if (st == PTQ_OK && !ptq_shape_equal(ctx->out[0], ctx->in[0]))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "slope does not broadcast to the input");
    return st;
}
static ptq_status min_run(ptq_op_ctx *ctx) { return nary_run(ctx, NARY_MIN); }
static ptq_status max_run(ptq_op_ctx *ctx) { return nary_run(ctx, NARY_MAX); }
static ptq_status sum_run(ptq_op_ctx *ctx) { return nary_run(ctx, NARY_SUM); }
static ptq_status mean_run(ptq_op_ctx *ctx) { return nary_run(ctx, NARY_MEAN); }
static ptq_status prelu_run(ptq_op_ctx *ctx) { return nary_run(ctx, NARY_PRELU); }

WEAK const ptq_op_def op_min = {variadic_infer, min_run, NULL, 0};
WEAK const ptq_op_def op_max = {variadic_infer, max_run, NULL, 0};
WEAK const ptq_op_def op_sum = {variadic_infer, sum_run, NULL, 0};
WEAK const ptq_op_def op_mean = {variadic_infer, mean_run, NULL, 0};
WEAK const ptq_op_def op_prelu = {prelu_infer, prelu_run, NULL, 0};

/* ------------------------------------------------------------ Identity, Dropout, Flatten, Size, Expand, Tile */

static ptq_status identity_infer(ptq_op_ctx *ctx)
{
    if (ctx->n_in < 1 || !ctx->in[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "no input");
    ctx->out[0]->dtype = ctx->in[0]->dtype;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    if (strcmp(ctx->node->op_type, "Dropout") == 0) {
        if (ctx->n_in > 2 && ctx->in[2]) {
            if (!ctx->in[2]->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "training_mode input is not constant");
            /* training_mode=1 with a constant ratio of 0 (torchvision's Swin attention exports
             * F.dropout(p=0.0) so) drops nothing: the identity, exactly */
            const ptq_tensor *ratio = ctx->n_in > 1 ? ctx->in[1] : NULL;
            int zero_ratio = ratio && ratio->data && ptq_tensor_numel(ratio) == 1 && ptq_tensor_get_f64(ratio, 0) == 0.0;
            if (ptq_tensor_get_i64(ctx->in[2], 0) && !zero_ratio)
                OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "training_mode=1 (inference only)");
        }
        if (ctx->n_out > 1 && ctx->out[1]) {
            ctx->out[1]->dtype = PTQ_BOOL;
            ptq_shape_copy(ctx->out[1], ctx->in[0]);
        }
    }
    return PTQ_OK;
}

static ptq_status identity_run(ptq_op_ctx *ctx)
{
    memcpy(ctx->out[0]->data, ctx->in[0]->data, ptq_tensor_nbytes(ctx->in[0]));
    if (ctx->n_out > 1 && ctx->out[1]) memset(ctx->out[1]->data, 1, ptq_tensor_nbytes(ctx->out[1]));
    return PTQ_OK;
}

WEAK const ptq_op_def op_identity = {identity_infer, identity_run, NULL, 0};
WEAK const ptq_op_def op_dropout = {identity_infer, identity_run, NULL, 0};

static ptq_status flatten_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int64_t axis = ptq_attr_int(ctx->node, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis out of range");
    int64_t a = 1, b = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < axis) a *= x->dims[d];
        else b *= x->dims[d];
    }
    ctx->out[0]->dtype = x->dtype;
    ctx->out[0]->rank = 2;
    ctx->out[0]->dims[0] = a;
    ctx->out[0]->dims[1] = b;
    return PTQ_OK;
}

WEAK const ptq_op_def op_flatten = {flatten_infer, identity_run, NULL, 0};

static ptq_status size_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    ctx->out[0]->dtype = PTQ_I64;
    ctx->out[0]->rank = 0;
    return PTQ_OK;
}

static ptq_status size_run(ptq_op_ctx *ctx)
{
    *(int64_t *)ctx->out[0]->data = (int64_t)ptq_tensor_numel(ctx->in[0]);
    return PTQ_OK;
}

WEAK const ptq_op_def op_size = {size_infer, size_run, NULL, 0};

/* copies x broadcast to y (Expand, and the core of Tile with explicit strides) */
static void broadcast_copy(const ptq_tensor *x, ptq_tensor *y)
{
    int64_t s[PTQ_MAX_RANK];
    ptq_broadcast_strides(x, y, s);
    size_t n = ptq_tensor_numel(y), es = ptq_dtype_size(y->dtype);
    for (size_t i = 0; i < n; i++)
        memcpy((char *)y->data + i * es, (const char *)x->data + bcast_offset(s, y, i) * es, es);
}

static ptq_status expand_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *sh = ctx->in[1];
    if (!sh->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "shape input is not constant");
    if (ptq_tensor_numel(sh) > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "shape too long");
    ptq_tensor want = {0};
    want.rank = (int)ptq_tensor_numel(sh);
    for (int i = 0; i < want.rank; i++) want.dims[i] = ptq_tensor_get_i64(sh, (size_t)i);
    if ((st = ptq_broadcast(ctx->in[0], &want, ctx->out[0])) != PTQ_OK) return st;
    ctx->out[0]->dtype = ctx->in[0]->dtype;
    return PTQ_OK;
}

static ptq_status expand_run(ptq_op_ctx *ctx)
{
    broadcast_copy(ctx->in[0], ctx->out[0]);
    return PTQ_OK;
}

WEAK const ptq_op_def op_expand = {expand_infer, expand_run, NULL, 0};

static ptq_status tile_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *r = ctx->in[1];
    if (!r->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "repeats input is not constant");
    if ((int)ptq_tensor_numel(r) != x->rank) OP_FAIL(ctx, PTQ_ERR_SHAPE, "repeats has %zu values for rank %d", ptq_tensor_numel(r), x->rank);
    ctx->out[0]->dtype = x->dtype;
    ctx->out[0]->rank = x->rank;
    for (int d = 0; d < x->rank; d++) {
        int64_t k = ptq_tensor_get_i64(r, (size_t)d);
        if (k < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "negative repeat");
        ctx->out[0]->dims[d] = x->dims[d] * k;
    }
    return PTQ_OK;
}

static ptq_status tile_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int64_t xs[PTQ_MAX_RANK];
    ptq_strides(x, xs);
    size_t n = ptq_tensor_numel(y), es = ptq_dtype_size(y->dtype);
    for (size_t i = 0; i < n; i++) {
        size_t rem = i, off = 0;
        for (int d = y->rank - 1; d >= 0; d--) {
            off += (rem % (size_t)y->dims[d]) % (size_t)x->dims[d] * (size_t)xs[d];
            rem /= (size_t)y->dims[d];
        }
        memcpy((char *)y->data + i * es, (const char *)x->data + off * es, es);
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_tile = {tile_infer, tile_run, NULL, 0};

/* ------------------------------------------------------------ ConstantOfShape, Range */

static ptq_status cos_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *sh = ctx->in[0], *v = ptq_attr_tensor(ctx->node, "value");
    if (!sh->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "shape input is not constant");
    if (ptq_tensor_numel(sh) > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "shape too long");
    if (v && ptq_tensor_numel(v) != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "value must hold one element");
    ctx->out[0]->dtype = v ? v->dtype : PTQ_F32;
    ctx->out[0]->rank = (int)ptq_tensor_numel(sh);
    for (int i = 0; i < ctx->out[0]->rank; i++) {
        ctx->out[0]->dims[i] = ptq_tensor_get_i64(sh, (size_t)i);
        if (ctx->out[0]->dims[i] < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "negative dim");
    }
    return PTQ_OK;
}

static ptq_status cos_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *v = ptq_attr_tensor(ctx->node, "value");
    size_t n = ptq_tensor_numel(ctx->out[0]), es = ptq_dtype_size(ctx->out[0]->dtype);
    for (size_t i = 0; i < n; i++) {
        if (v) memcpy((char *)ctx->out[0]->data + i * es, v->data, es);
        else ((float *)ctx->out[0]->data)[i] = 0.0f;
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_constant_of_shape = {cos_infer, cos_run, NULL, 0};

static ptq_status range_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    for (int i = 0; i < 3; i++)
        if (!ctx->in[i]->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d is not constant", i);
    double start = ptq_tensor_get_f64(ctx->in[0], 0), limit = ptq_tensor_get_f64(ctx->in[1], 0),
           delta = ptq_tensor_get_f64(ctx->in[2], 0);
    if (delta == 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "delta is 0");
    double cnt = ceil((limit - start) / delta);
    ctx->out[0]->dtype = ctx->in[0]->dtype;
    ctx->out[0]->rank = 1;
    ctx->out[0]->dims[0] = cnt > 0 ? (int64_t)cnt : 0;
    return PTQ_OK;
}

static ptq_status range_run(ptq_op_ctx *ctx)
{
    ptq_tensor *y = ctx->out[0];
    if (is_float(y->dtype)) {
        double start = ptq_tensor_get_f64(ctx->in[0], 0), delta = ptq_tensor_get_f64(ctx->in[2], 0);
        float v = (float)start;
        for (int64_t i = 0; i < y->dims[0]; i++) {
            set_f64(y, (size_t)i, y->dtype == PTQ_F32 ? (double)v : start + (double)i * delta);
            v += (float)delta;
        }
    } else {
        int64_t start = ptq_tensor_get_i64(ctx->in[0], 0), delta = ptq_tensor_get_i64(ctx->in[2], 0);
        for (int64_t i = 0; i < y->dims[0]; i++) set_i64(y, (size_t)i, start + i * delta);
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_range = {range_infer, range_run, NULL, 0};

/* ------------------------------------------------------------ Split */

static ptq_status split_infer(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    if (!x) OP_FAIL(ctx, PTQ_ERR_FORMAT, "no input");
    int64_t axis;
    if (ptq_norm_axis(ptq_attr_int(ctx->node, "axis", 0), x->rank, &axis)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis out of range");
    int64_t parts[64];
    int n = ctx->n_out;
    if (n > 64) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "more than 64 outputs");
    size_t cnt = 0;
    const int64_t *sp = ptq_attr_ints(ctx->node, "split", &cnt);
    if (ctx->n_in > 1 && ctx->in[1]) {
        if (!ctx->in[1]->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "split input is not constant");
        cnt = ptq_tensor_numel(ctx->in[1]);
        if ((int)cnt != n) OP_FAIL(ctx, PTQ_ERR_SHAPE, "split has %zu values for %d outputs", cnt, n);
        for (int i = 0; i < n; i++) parts[i] = ptq_tensor_get_i64(ctx->in[1], (size_t)i);
    } else if (sp) {
        if ((int)cnt != n) OP_FAIL(ctx, PTQ_ERR_SHAPE, "split has %zu values for %d outputs", cnt, n);
        for (int i = 0; i < n; i++) parts[i] = sp[i];
    } else {
        int64_t dim = x->dims[axis], chunk = (dim + n - 1) / n;
        for (int i = 0; i < n; i++) {
            int64_t left = dim - chunk * i;
            parts[i] = left < chunk ? (left > 0 ? left : 0) : chunk;
        }
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += parts[i];
    if (total != x->dims[axis]) OP_FAIL(ctx, PTQ_ERR_SHAPE, "split sizes sum to %lld, the axis has %lld", (long long)total, (long long)x->dims[axis]);
    for (int i = 0; i < n; i++) {
        if (!ctx->out[i]) continue;
        ctx->out[i]->dtype = x->dtype;
        ptq_shape_copy(ctx->out[i], x);
        ctx->out[i]->dims[axis] = parts[i];
    }
    ctx->state = (void *)(intptr_t)axis;
    return PTQ_OK;
}

static ptq_status split_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    int axis = (int)(intptr_t)ctx->state;
    size_t outer = 1, inner = 1, es = ptq_dtype_size(x->dtype);
    for (int d = 0; d < axis; d++) outer *= (size_t)x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= (size_t)x->dims[d];
    size_t xrow = (size_t)x->dims[axis] * inner * es, off = 0;
    for (int i = 0; i < ctx->n_out; i++) {
        size_t len = 0;
        if (ctx->out[i]) {
            len = (size_t)ctx->out[i]->dims[axis] * inner * es;
            for (size_t o = 0; o < outer; o++)
                memcpy((char *)ctx->out[i]->data + o * len, (const char *)x->data + o * xrow + off, len);
        }
        off += len;
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_split = {split_infer, split_run, NULL, 0};

/* ------------------------------------------------------------ Pad */

typedef struct {
    int64_t begin[PTQ_MAX_RANK];
    int mode; /* 0 constant, 1 reflect, 2 edge, 3 wrap */
    double value;
} pad_state;

static ptq_status pad_infer(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    if (!x) OP_FAIL(ctx, PTQ_ERR_FORMAT, "no input");
    int64_t pads[2 * PTQ_MAX_RANK];
    int r = x->rank;
    pad_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    for (int i = 0; i < 2 * r; i++) pads[i] = 0;
    if (ctx->opset < 11) {
        size_t n;
        const int64_t *p = ptq_attr_ints(ctx->node, "pads", &n);
        if (!p || (int)n != 2 * r) OP_FAIL(ctx, PTQ_ERR_FORMAT, "pads must have %d values", 2 * r);
        for (int i = 0; i < 2 * r; i++) pads[i] = p[i];
        s->value = ptq_attr_float(ctx->node, "value", 0.0f);
    } else {
        if (ctx->n_in < 2 || !ctx->in[1]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "pads input is required");
        for (int i = 1; i < ctx->n_in; i++)
            if (ctx->in[i] && !ctx->in[i]->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d is not constant", i);
        int n = (int)ptq_tensor_numel(ctx->in[1]);
        int64_t axes[PTQ_MAX_RANK];
        int na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
        if (ctx->n_in > 3 && ctx->in[3]) {
            na = (int)ptq_tensor_numel(ctx->in[3]);
            if (na > r) OP_FAIL(ctx, PTQ_ERR_SHAPE, "too many axes");
            for (int i = 0; i < na; i++)
                if (ptq_norm_axis(ptq_tensor_get_i64(ctx->in[3], (size_t)i), r, &axes[i])) OP_FAIL(ctx, PTQ_ERR_SHAPE, "bad axis");
        }
        if (n != 2 * na) OP_FAIL(ctx, PTQ_ERR_SHAPE, "pads has %d values for %d axes", n, na);
        for (int i = 0; i < na; i++) {
            pads[axes[i]] = ptq_tensor_get_i64(ctx->in[1], (size_t)i);
            pads[axes[i] + r] = ptq_tensor_get_i64(ctx->in[1], (size_t)(i + na));
        }
        if (ctx->n_in > 2 && ctx->in[2] && ptq_tensor_numel(ctx->in[2])) s->value = ptq_tensor_get_f64(ctx->in[2], 0);
    }
    const char *mode = ptq_attr_string(ctx->node, "mode", "constant");
    s->mode = strcmp(mode, "constant") == 0 ? 0 : strcmp(mode, "reflect") == 0 ? 1 : strcmp(mode, "edge") == 0 ? 2 : strcmp(mode, "wrap") == 0 ? 3 : -1;
    if (s->mode < 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "mode %s", mode);
    ctx->out[0]->dtype = x->dtype;
    ctx->out[0]->rank = r;
    for (int d = 0; d < r; d++) {
        s->begin[d] = pads[d];
        ctx->out[0]->dims[d] = x->dims[d] + pads[d] + pads[d + r];
        if (ctx->out[0]->dims[d] < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "negative output dim");
        if (s->mode == 1 && (pads[d] >= x->dims[d] || pads[d + r] >= x->dims[d]) && (pads[d] > 0 || pads[d + r] > 0))
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "reflect pad larger than the input");
    }
    return PTQ_OK;
}

static ptq_status pad_run(ptq_op_ctx *ctx)
{
    const pad_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int64_t xs[PTQ_MAX_RANK];
    ptq_strides(x, xs);
    size_t n = ptq_tensor_numel(y), es = ptq_dtype_size(y->dtype);
    for (size_t i = 0; i < n; i++) {
        size_t rem = i, off = 0;
        int outside = 0;
        for (int d = y->rank - 1; d >= 0; d--) {
            int64_t k = (int64_t)(rem % (size_t)y->dims[d]) - s->begin[d], dim = x->dims[d];
            rem /= (size_t)y->dims[d];
            if (k < 0 || k >= dim) {
                if (s->mode == 0 || dim == 0) {
                    outside = 1;
                    continue;
                }
                if (s->mode == 1) {
                    int64_t period = 2 * (dim - 1);
                    k = period ? ((k % period) + period) % period : 0;
                    if (k >= dim) k = period - k;
                } else if (s->mode == 2) {
                    k = k < 0 ? 0 : dim - 1;
                } else {
                    k = ((k % dim) + dim) % dim;
                }
            }
            off += (size_t)k * (size_t)xs[d];
        }
        if (outside) set_f64(y, i, s->value);
        else memcpy((char *)y->data + i * es, (const char *)x->data + off * es, es);
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_pad = {pad_infer, pad_run, ptq_op_free_state, 0};

/* DepthToSpace, SpaceToDepth: runtime/ops/index.c */

/* QuantizeLinear, DequantizeLinear: runtime/ops/quantize.c */

