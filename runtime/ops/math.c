/* math.c: element-wise math. Unary on float16/32/64: Sin Cos Tan Asin Acos Atan Sinh Cosh
 * Asinh Acosh Atanh, Softsign, ThresholdedRelu, Celu, Mish, Round (half to even); on every
 * numeric type: Sign, Shrink. Binary, broadcast: Mod (fmod attribute; integers and floats).
 *
 * Float ops compute in double from the exact input and round once to the output type.
 * Every function is ptq's own, the same bits on every CPU: exp/log family from
 * runtime/kernels/mathf.h, the circular functions from runtime/kernels/trig.h.
 * Mod: fmod = 0 (integers only) gives the remainder with the divisor's sign (Python's %);
 * fmod = 1 the C fmod/% (dividend's sign). An integer divisor of 0 is an error.
 * Element-wise only: threads split the output; results do not depend on the thread count. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "runtime/kernels/trig.h"
#include "runtime/op.h"
#include "runtime/ops/nary.h"
#include "runtime/shape.h"

#define PAR_MIN 65536

/* ------------------------------------------------------------ unary float functions */

typedef enum {
    UF_SIN, UF_COS, UF_TAN, UF_ASIN, UF_ACOS, UF_ATAN, UF_SINH, UF_COSH, UF_ASINH, UF_ACOSH, UF_ATANH,
    UF_SOFTSIGN, UF_THRESHOLDED_RELU, UF_CELU, UF_MISH, UF_ROUND
} ufun_kind;

typedef struct {
    ufun_kind kind;
    double alpha;
} ufun_state;

static double ufun(const ufun_state *s, double x)
{
    switch (s->kind) {
    case UF_SIN: return ptq_sin(x);
    case UF_COS: return ptq_cos(x);
    case UF_TAN: return ptq_tan(x);
    case UF_ASIN: return ptq_asin(x);
    case UF_ACOS: return ptq_acos(x);
    case UF_ATAN: return ptq_atan(x);
    case UF_SINH: { /* (e^x - e^-x) / 2 through expm1 to keep small x exact */
        double a = fabs(x), e = ptq_expm1(a), r = a < 22.0 ? 0.5 * (e + e / (e + 1.0)) : 0.5 * ptq_exp(a);
        return x < 0 ? -r : (x == 0 ? x : r);
    }
    case UF_COSH: {
        double a = fabs(x);
        if (a < 22.0) {
            double e = ptq_exp(a);
            return 0.5 * (e + 1.0 / e);
        }
        return 0.5 * ptq_exp(a);
    }
    case UF_ASINH: { /* sign(x) log(|x| + sqrt(x^2 + 1)) */
        double a = fabs(x), r;
        if (a > 1e150) r = ptq_log(a) + 0.69314718055994530942;
        else r = ptq_log1p(a + a * a / (1.0 + sqrt(1.0 + a * a)));
        return x < 0 ? -r : (x == 0 ? x : r);
    }
    case UF_ACOSH:
        if (x < 1.0) return NAN;
        if (x > 1e150) return ptq_log(x) + 0.69314718055994530942;
        return ptq_log1p((x - 1.0) + sqrt((x - 1.0) * (x + 1.0)));
    case UF_ATANH: { /* 0.5 log1p(2x / (1 - x)) */
        double a = fabs(x);
        if (a > 1.0) return NAN;
        double r = 0.5 * ptq_log1p(2.0 * a / (1.0 - a));
        return x < 0 ? -r : (x == 0 ? x : r);
    }
    case UF_SOFTSIGN: return x / (1.0 + fabs(x));
    case UF_THRESHOLDED_RELU: return x > s->alpha ? x : 0.0;
    case UF_CELU: /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)) */
        return x > 0 ? x : s->alpha * ptq_expm1(x / s->alpha);
    case UF_MISH: /* x tanh(softplus(x)), softplus = log1p(e^-|x|) + max(x, 0) */
        return x * ptq_tanh(ptq_log1p(ptq_exp(-fabs(x))) + (x > 0 ? x : 0.0));
    default: return rint(x); /* the default rounding mode: half to even */
    }
}

static ptq_status ufun_infer(ptq_op_ctx *ctx, ufun_kind kind)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if (!ptq_dtype_is_float(ctx->in[0]->dtype))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, expected float16, float32 or float64", ptq_dtype_name(ctx->in[0]->dtype));
    double alpha = 0.0;
    if (kind == UF_THRESHOLDED_RELU) alpha = ptq_attr_float(ctx->node, "alpha", 1.0f);
    if (kind == UF_CELU) {
        alpha = ptq_attr_float(ctx->node, "alpha", 1.0f);
        if (alpha == 0.0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "alpha is 0");
    }
    ufun_state *s = malloc(sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    s->kind = kind;
    s->alpha = alpha;
    ctx->state = s;
    ctx->out[0]->dtype = ctx->in[0]->dtype;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status ufun_run(ptq_op_ctx *ctx)
{
    const ufun_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    if (x->dtype == PTQ_F32) {
        const float *xd = x->data;
        float *yd = y->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (n > PAR_MIN)
        for (size_t i = 0; i < n; i++) yd[i] = (float)ufun(s, (double)xd[i]);
        return PTQ_OK;
    }
    for (size_t i = 0; i < n; i++) ptq_store_f64(y, i, ufun(s, ptq_tensor_get_f64(x, i)));
    return PTQ_OK;
}

#define UFUN(sym, KIND)                                                          \
    static ptq_status sym##_infer(ptq_op_ctx *ctx) { return ufun_infer(ctx, KIND); } \
    const ptq_op_def op_##sym = {sym##_infer, ufun_run, ptq_op_free_state, 0};

UFUN(sin, UF_SIN)
UFUN(cos, UF_COS)
UFUN(tan, UF_TAN)
UFUN(asin, UF_ASIN)
UFUN(acos, UF_ACOS)
UFUN(atan, UF_ATAN)
UFUN(sinh, UF_SINH)
UFUN(cosh, UF_COSH)
UFUN(asinh, UF_ASINH)
UFUN(acosh, UF_ACOSH)
UFUN(atanh, UF_ATANH)
UFUN(softsign, UF_SOFTSIGN)
UFUN(thresholded_relu, UF_THRESHOLDED_RELU)
UFUN(celu, UF_CELU)
UFUN(mish, UF_MISH)
UFUN(round, UF_ROUND)

/* ------------------------------------------------------------ Sign, Shrink: every numeric type */

static ptq_status numeric_unary_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    ptq_dtype dt = ctx->in[0]->dtype;
    if (!ptq_dtype_is_float(dt) && !ptq_dtype_is_int(dt))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s is not supported", ptq_dtype_name(dt));
    if (strcmp(ctx->node->op_type, "Shrink") == 0 && ptq_attr_float(ctx->node, "lambd", 0.5f) < 0.0f)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "lambd %g is negative", (double)ptq_attr_float(ctx->node, "lambd", 0.5f));
    ctx->out[0]->dtype = dt;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status sign_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    if (ptq_dtype_is_float(x->dtype)) {
        for (size_t i = 0; i < n; i++) {
            double v = ptq_tensor_get_f64(x, i);
            ptq_store_f64(y, i, v > 0 ? 1.0 : (v < 0 ? -1.0 : (v == v ? 0.0 : v)));
        }
    } else if (x->dtype == PTQ_U64) {
        for (size_t i = 0; i < n; i++) ptq_store_i64(y, i, ((const uint64_t *)x->data)[i] != 0);
    } else {
        for (size_t i = 0; i < n; i++) {
            int64_t v = ptq_tensor_get_i64(x, i);
            ptq_store_i64(y, i, v > 0 ? 1 : (v < 0 ? -1 : 0));
        }
    }
    return PTQ_OK;
}

/* Shrink: x < -lambd: x + bias; x > lambd: x - bias; else 0 (integers: computed in double,
 * exact for every integer the node tests and real models use, then wrapped to the type). */
static ptq_status shrink_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    float lf = ptq_attr_float(ctx->node, "lambd", 0.5f), bf = ptq_attr_float(ctx->node, "bias", 0.0f);
    if (x->dtype == PTQ_F32) {
        const float *xd = x->data;
        float *yd = y->data;
        for (size_t i = 0; i < n; i++) yd[i] = xd[i] < -lf ? xd[i] + bf : (xd[i] > lf ? xd[i] - bf : 0.0f);
        return PTQ_OK;
    }
    double l = lf, b = bf;
    for (size_t i = 0; i < n; i++) {
        double v = ptq_tensor_get_f64(x, i), r = v < -l ? v + b : (v > l ? v - b : 0.0);
        if (ptq_dtype_is_float(y->dtype)) ptq_store_f64(y, i, r);
        else ptq_store_i64(y, i, (int64_t)r);
    }
    return PTQ_OK;
}

const ptq_op_def op_sign = {numeric_unary_infer, sign_run, NULL, 0};
const ptq_op_def op_shrink = {numeric_unary_infer, shrink_run, NULL, 0};

/* ------------------------------------------------------------ Mod */

static ptq_status mod_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    ptq_dtype a = ctx->in[0]->dtype, b = ctx->in[1]->dtype;
    if (a != b) OP_FAIL(ctx, PTQ_ERR_FORMAT, "input dtypes differ (%s, %s)", ptq_dtype_name(a), ptq_dtype_name(b));
    if (!ptq_dtype_is_float(a) && !ptq_dtype_is_int(a)) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s is not supported", ptq_dtype_name(a));
    int64_t f = ptq_attr_int(ctx->node, "fmod", 0);
    if (f != 0 && f != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "fmod = %lld, expected 0 or 1", (long long)f);
    if (f == 0 && ptq_dtype_is_float(a)) OP_FAIL(ctx, PTQ_ERR_FORMAT, "fmod = 0 with %s inputs (floats need fmod = 1)", ptq_dtype_name(a));
    ctx->state = (void *)(intptr_t)f;
    if ((st = ptq_broadcast(ctx->in[0], ctx->in[1], ctx->out[0])) != PTQ_OK) {
        ptq_error_prefix("%s '%s': ", ctx->node->op_type, ctx->node->name);
        return st;
    }
    ctx->out[0]->dtype = a;
    return PTQ_OK;
}

static ptq_status mod_run(ptq_op_ctx *ctx)
{
    int f = (int)(intptr_t)ctx->state;
    const ptq_tensor *a = ctx->in[0], *b = ctx->in[1];
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    ptq_nary it;
    ptq_nary_init(&it, ctx->in, 2, y);
    ptq_dtype dt = y->dtype;
    for (size_t i = 0; i < n; i++) {
        size_t off[2];
        ptq_nary_offsets(&it, i, off);
        if (ptq_dtype_is_float(dt)) { /* fmod is exact: the rounding happens only in the store */
            ptq_store_f64(y, i, fmod(ptq_tensor_get_f64(a, off[0]), ptq_tensor_get_f64(b, off[1])));
        } else if (dt == PTQ_U64 || !ptq_dtype_is_signed_int(dt)) {
            uint64_t u = ptq_load_u64(a, off[0]), v = ptq_load_u64(b, off[1]);
            if (v == 0) OP_FAIL(ctx, PTQ_ERR_ARG, "integer division by zero (element %zu)", i);
            ptq_store_i64(y, i, (int64_t)(u % v));
        } else {
            int64_t u = ptq_tensor_get_i64(a, off[0]), v = ptq_tensor_get_i64(b, off[1]);
            if (v == 0) OP_FAIL(ctx, PTQ_ERR_ARG, "integer division by zero (element %zu)", i);
            int64_t r = v == -1 ? 0 : u % v; /* INT64_MIN % -1 traps on x86 */
            if (!f && r != 0 && ((r < 0) != (v < 0))) r += v;
            ptq_store_i64(y, i, r);
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_mod = {mod_infer, mod_run, NULL, 0};
