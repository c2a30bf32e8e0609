/* logic.c: comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), boolean logic
 * (And, Or, Xor, Not), BitShift, BitwiseAnd/Or/Xor/Not (integers), IsNaN, IsInf and Where.
 * All broadcast (numpy rules); outputs are bool (one byte, 0 or 1) except those of BitShift and
 * the Bitwise ops (the input's type) and Where's (X's dtype, any size).
 *
 * Comparisons read both inputs in their own type: int64 and uint64 as such, every other
 * numeric type (float16/32/64, 8..32-bit integers, bool) exactly as double, so no value is
 * rounded before it is compared. NaN compares unequal and unordered, as IEEE says.
 * Kernels walk the output by rows of its innermost dim (offsets computed once per row).
 * Element-wise work only: threads split the output, so any thread count gives the same bits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/ops/nary.h"
#include "runtime/shape.h"

#define PAR_MIN 65536 /* elements below which a kernel runs on one thread */

static ptq_status bcast_out(ptq_op_ctx *ctx, int n, ptq_dtype out_dt)
{
    ptq_status st = ptq_broadcast_n(ctx->in, n, ctx->out[0]);
    if (st != PTQ_OK) {
        ptq_error_prefix("%s '%s': ", ctx->node->op_type, ctx->node->name);
        return st;
    }
    ctx->out[0]->dtype = out_dt;
    return PTQ_OK;
}

/* ------------------------------------------------------------ comparisons */

typedef enum { CMP_EQ, CMP_LT, CMP_GT, CMP_LE, CMP_GE } cmp_kind;

static ptq_status compare_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    ptq_dtype a = ctx->in[0]->dtype, b = ctx->in[1]->dtype;
    if (a != b) OP_FAIL(ctx, PTQ_ERR_FORMAT, "input dtypes differ (%s, %s)", ptq_dtype_name(a), ptq_dtype_name(b));
    int eq = strcmp(ctx->node->op_type, "Equal") == 0;
    if (!ptq_dtype_is_float(a) && !ptq_dtype_is_int(a) && !(eq && a == PTQ_BOOL))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s is not supported", ptq_dtype_name(a));
    return bcast_out(ctx, 2, PTQ_BOOL);
}

static inline int cmp_apply(cmp_kind k, int lt, int gt, int eq)
{
    switch (k) {
    case CMP_EQ: return eq;
    case CMP_LT: return lt;
    case CMP_GT: return gt;
    case CMP_LE: return lt || eq;
    default: return gt || eq;
    }
}

/* One row: o[k] = a[k * sa] CMP b[k * sb], both read as T (exact for the dtype). */
#define CMP_ROW(T, LOAD)                                                                  \
    do {                                                                                  \
        for (size_t e = 0; e < inner; e++) {                                              \
            T u = LOAD(a, off[0] + e * sa), v = LOAD(b, off[1] + e * sb);                 \
            o[e] = (uint8_t)cmp_apply(k, u < v, u > v, u == v);                           \
        }                                                                                 \
    } while (0)
#define LD_F32(t, i) ((const float *)(t)->data)[i]
#define LD_F64(t, i) ((const double *)(t)->data)[i]
#define LD_I64(t, i) ((const int64_t *)(t)->data)[i]
#define LD_I32(t, i) ((const int32_t *)(t)->data)[i]
#define LD_U64(t, i) ((const uint64_t *)(t)->data)[i]
#define LD_ANY(t, i) ptq_tensor_get_f64(t, i)

static ptq_status compare_run(ptq_op_ctx *ctx, cmp_kind k)
{
    const ptq_tensor *a = ctx->in[0], *b = ctx->in[1];
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    ptq_nary it;
    ptq_nary_init(&it, ctx->in, 2, y);
    size_t inner = ptq_nary_inner(&it), rows = inner ? n / inner : 0, sa = ptq_nary_step(&it, 0), sb = ptq_nary_step(&it, 1);
    ptq_dtype dt = a->dtype;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (n > PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        size_t off[2];
        ptq_nary_offsets(&it, r * inner, off);
        uint8_t *o = (uint8_t *)y->data + r * inner;
        switch (dt) {
        case PTQ_F32: CMP_ROW(float, LD_F32); break;
        case PTQ_F64: CMP_ROW(double, LD_F64); break;
        case PTQ_I64: CMP_ROW(int64_t, LD_I64); break;
        case PTQ_I32: CMP_ROW(int32_t, LD_I32); break;
        case PTQ_U64: CMP_ROW(uint64_t, LD_U64); break;
        default: CMP_ROW(double, LD_ANY); break; /* float16, 8/16-bit and uint32 integers, bool: exact in double */
        }
    }
    return PTQ_OK;
}

static ptq_status equal_run(ptq_op_ctx *ctx) { return compare_run(ctx, CMP_EQ); }
static ptq_status less_run(ptq_op_ctx *ctx) { return compare_run(ctx, CMP_LT); }
static ptq_status greater_run(ptq_op_ctx *ctx) { return compare_run(ctx, CMP_GT); }
static ptq_status less_or_equal_run(ptq_op_ctx *ctx) { return compare_run(ctx, CMP_LE); }
static ptq_status greater_or_equal_run(ptq_op_ctx *ctx) { return compare_run(ctx, CMP_GE); }

const ptq_op_def op_equal = {compare_infer, equal_run, NULL, 0};
const ptq_op_def op_less = {compare_infer, less_run, NULL, 0};
const ptq_op_def op_greater = {compare_infer, greater_run, NULL, 0};
const ptq_op_def op_less_or_equal = {compare_infer, less_or_equal_run, NULL, 0};
const ptq_op_def op_greater_or_equal = {compare_infer, greater_or_equal_run, NULL, 0};

/* ------------------------------------------------------------ And, Or, Xor, Not */

typedef enum { LOG_AND, LOG_OR, LOG_XOR } logic_kind;

static ptq_status logic_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    for (int i = 0; i < 2; i++)
        if (ctx->in[i]->dtype != PTQ_BOOL)
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "input %d is %s, expected bool", i, ptq_dtype_name(ctx->in[i]->dtype));
    return bcast_out(ctx, 2, PTQ_BOOL);
}

static ptq_status logic_run(ptq_op_ctx *ctx, logic_kind k)
{
    const uint8_t *a = ctx->in[0]->data, *b = ctx->in[1]->data;
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    ptq_nary it;
    ptq_nary_init(&it, ctx->in, 2, y);
    size_t inner = ptq_nary_inner(&it), rows = inner ? n / inner : 0, sa = ptq_nary_step(&it, 0), sb = ptq_nary_step(&it, 1);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (n > PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        size_t off[2];
        ptq_nary_offsets(&it, r * inner, off);
        const uint8_t *p = a + off[0], *q = b + off[1];
        uint8_t *o = (uint8_t *)y->data + r * inner;
        for (size_t e = 0; e < inner; e++) {
            int u = p[e * sa] != 0, v = q[e * sb] != 0;
            o[e] = (uint8_t)(k == LOG_AND ? (u & v) : k == LOG_OR ? (u | v) : (u ^ v));
        }
    }
    return PTQ_OK;
}

static ptq_status and_run(ptq_op_ctx *ctx) { return logic_run(ctx, LOG_AND); }
static ptq_status or_run(ptq_op_ctx *ctx) { return logic_run(ctx, LOG_OR); }
static ptq_status xor_run(ptq_op_ctx *ctx) { return logic_run(ctx, LOG_XOR); }

const ptq_op_def op_and = {logic_infer, and_run, NULL, 0};
const ptq_op_def op_or = {logic_infer, or_run, NULL, 0};
const ptq_op_def op_xor = {logic_infer, xor_run, NULL, 0};

static ptq_status not_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if (ctx->in[0]->dtype != PTQ_BOOL) OP_FAIL(ctx, PTQ_ERR_FORMAT, "input is %s, expected bool", ptq_dtype_name(ctx->in[0]->dtype));
    ctx->out[0]->dtype = PTQ_BOOL;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status not_run(ptq_op_ctx *ctx)
{
    const uint8_t *x = ctx->in[0]->data;
    uint8_t *y = ctx->out[0]->data;
    size_t n = ptq_tensor_numel(ctx->out[0]);
    for (size_t i = 0; i < n; i++) y[i] = x[i] == 0;
    return PTQ_OK;
}

const ptq_op_def op_not = {not_infer, not_run, NULL, 0};

/* ------------------------------------------------------------ BitShift (unsigned integers) */

static ptq_status bit_shift_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    ptq_dtype a = ctx->in[0]->dtype, b = ctx->in[1]->dtype;
    if (a != b) OP_FAIL(ctx, PTQ_ERR_FORMAT, "input dtypes differ (%s, %s)", ptq_dtype_name(a), ptq_dtype_name(b));
    if (a != PTQ_U8 && a != PTQ_U16 && a != PTQ_U32 && a != PTQ_U64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s, expected uint8, uint16, uint32 or uint64", ptq_dtype_name(a));
    const char *dir = ptq_attr_string(ctx->node, "direction", NULL);
    if (!dir) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute 'direction' is missing");
    if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "direction '%s', expected LEFT or RIGHT", dir);
    ctx->state = (void *)(intptr_t)(dir[0] == 'L');
    return bcast_out(ctx, 2, a);
}

static ptq_status bit_shift_run(ptq_op_ctx *ctx)
{
    int left = (int)(intptr_t)ctx->state;
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y), bits = 8 * ptq_dtype_size(y->dtype);
    ptq_nary it;
    ptq_nary_init(&it, ctx->in, 2, y);
    for (size_t i = 0; i < n; i++) {
        size_t off[2];
        ptq_nary_offsets(&it, i, off);
        uint64_t v = ptq_load_u64(ctx->in[0], off[0]), s = ptq_load_u64(ctx->in[1], off[1]);
        uint64_t r = s >= bits ? 0 : (left ? v << s : v >> s); /* shifting out every bit gives 0 */
        ptq_store_i64(y, i, (int64_t)r);
    }
    return PTQ_OK;
}

const ptq_op_def op_bit_shift = {bit_shift_infer, bit_shift_run, NULL, 0};

/* ------------------------------------------------------------ IsNaN, IsInf */

static ptq_status isx_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if (!ptq_dtype_is_float(ctx->in[0]->dtype))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, expected a float type", ptq_dtype_name(ctx->in[0]->dtype));
    int64_t pos = ptq_attr_int(ctx->node, "detect_positive", 1), neg = ptq_attr_int(ctx->node, "detect_negative", 1);
    if ((pos != 0 && pos != 1) || (neg != 0 && neg != 1))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "detect_positive = %lld, detect_negative = %lld, expected 0 or 1", (long long)pos,
                (long long)neg);
    ctx->out[0]->dtype = PTQ_BOOL;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status is_nan_run(ptq_op_ctx *ctx)
{
    uint8_t *y = ctx->out[0]->data;
    size_t n = ptq_tensor_numel(ctx->out[0]);
    for (size_t i = 0; i < n; i++) y[i] = isnan(ptq_tensor_get_f64(ctx->in[0], i)) != 0;
    return PTQ_OK;
}

static ptq_status is_inf_run(ptq_op_ctx *ctx)
{
    int pos = (int)ptq_attr_int(ctx->node, "detect_positive", 1), neg = (int)ptq_attr_int(ctx->node, "detect_negative", 1);
    uint8_t *y = ctx->out[0]->data;
    size_t n = ptq_tensor_numel(ctx->out[0]);
    for (size_t i = 0; i < n; i++) {
        double v = ptq_tensor_get_f64(ctx->in[0], i);
        y[i] = (pos && v == (double)INFINITY) || (neg && v == -(double)INFINITY);
    }
    return PTQ_OK;
}

const ptq_op_def op_is_nan = {isx_infer, is_nan_run, NULL, 0};
const ptq_op_def op_is_inf = {isx_infer, is_inf_run, NULL, 0};

/* ------------------------------------------------------------ Where (every dtype) */

static ptq_status where_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *c = ctx->in[0], *x = ctx->in[1], *y = ctx->in[2];
    if (c->dtype != PTQ_BOOL) OP_FAIL(ctx, PTQ_ERR_FORMAT, "condition is %s, expected bool", ptq_dtype_name(c->dtype));
    if (x->dtype != y->dtype) OP_FAIL(ctx, PTQ_ERR_FORMAT, "X is %s and Y %s, expected one dtype", ptq_dtype_name(x->dtype), ptq_dtype_name(y->dtype));
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s is not supported", ptq_dtype_name(x->dtype));
    return bcast_out(ctx, 3, x->dtype);
}

#define WHERE_LOOP(T)                                                                     \
    do {                                                                                  \
        const T *xa = ctx->in[1]->data, *ya = ctx->in[2]->data;                           \
        _Pragma("omp parallel for num_threads(ctx->nthreads) schedule(static) if (n > PAR_MIN)") \
        for (size_t r = 0; r < rows; r++) {                                               \
            size_t off[3];                                                                \
            ptq_nary_offsets(&it, r * inner, off);                                        \
            const uint8_t *c = cond + off[0];                                             \
            const T *p = xa + off[1], *q = ya + off[2];                                   \
            T *o = (T *)out->data + r * inner;                                            \
            for (size_t e = 0; e < inner; e++) o[e] = c[e * s0] ? p[e * s1] : q[e * s2];  \
        }                                                                                 \
    } while (0)

static ptq_status where_run(ptq_op_ctx *ctx)
{
    ptq_tensor *out = ctx->out[0];
    const uint8_t *cond = ctx->in[0]->data;
    size_t n = ptq_tensor_numel(out);
    ptq_nary it;
    ptq_nary_init(&it, ctx->in, 3, out);
    size_t inner = ptq_nary_inner(&it), rows = inner ? n / inner : 0;
    size_t s0 = ptq_nary_step(&it, 0), s1 = ptq_nary_step(&it, 1), s2 = ptq_nary_step(&it, 2);
    switch (ptq_dtype_size(out->dtype)) {
    case 1: WHERE_LOOP(uint8_t); break;
    case 2: WHERE_LOOP(uint16_t); break;
    case 4: WHERE_LOOP(uint32_t); break;
    default: WHERE_LOOP(uint64_t); break;
    }
    return PTQ_OK;
}

const ptq_op_def op_where = {where_infer, where_run, NULL, 0};

/* ------------------------------------------------------------ BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot (opset 18) */

typedef enum { BIT_AND, BIT_OR, BIT_XOR } bitwise_kind;

static ptq_status bitwise_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    ptq_dtype a = ctx->in[0]->dtype, b = ctx->in[1]->dtype;
    if (a != b) OP_FAIL(ctx, PTQ_ERR_FORMAT, "input dtypes differ (%s, %s)", ptq_dtype_name(a), ptq_dtype_name(b));
    if (!ptq_dtype_is_int(a)) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s, expected an integer type", ptq_dtype_name(a));
    return bcast_out(ctx, 2, a);
}

static ptq_status bitwise_run(ptq_op_ctx *ctx, bitwise_kind k)
{
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    ptq_nary it;
    ptq_nary_init(&it, ctx->in, 2, y);
    for (size_t i = 0; i < n; i++) {
        size_t off[2];
        ptq_nary_offsets(&it, i, off);
        uint64_t u = ptq_load_u64(ctx->in[0], off[0]), v = ptq_load_u64(ctx->in[1], off[1]);
        ptq_store_i64(y, i, (int64_t)(k == BIT_AND ? u & v : k == BIT_OR ? u | v : u ^ v)); /* truncated to the type */
    }
    return PTQ_OK;
}

static ptq_status bitwise_and_run(ptq_op_ctx *ctx) { return bitwise_run(ctx, BIT_AND); }
static ptq_status bitwise_or_run(ptq_op_ctx *ctx) { return bitwise_run(ctx, BIT_OR); }
static ptq_status bitwise_xor_run(ptq_op_ctx *ctx) { return bitwise_run(ctx, BIT_XOR); }

const ptq_op_def op_bitwise_and = {bitwise_infer, bitwise_and_run, NULL, 0};
const ptq_op_def op_bitwise_or = {bitwise_infer, bitwise_or_run, NULL, 0};
const ptq_op_def op_bitwise_xor = {bitwise_infer, bitwise_xor_run, NULL, 0};

static ptq_status bitwise_not_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if (!ptq_dtype_is_int(ctx->in[0]->dtype))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s, expected an integer type", ptq_dtype_name(ctx->in[0]->dtype));
    ctx->out[0]->dtype = ctx->in[0]->dtype;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status bitwise_not_run(ptq_op_ctx *ctx)
{
    size_t n = ptq_tensor_numel(ctx->out[0]);
    for (size_t i = 0; i < n; i++) ptq_store_i64(ctx->out[0], i, (int64_t)~ptq_load_u64(ctx->in[0], i));
    return PTQ_OK;
}

const ptq_op_def op_bitwise_not = {bitwise_not_infer, bitwise_not_run, NULL, 0};
