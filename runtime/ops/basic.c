/* basic.c: the lead's first versions of the ops the PaddleOCR models need, defined
 * weak: a family file (elementwise.c, movement.c, ...) that defines the same op
 * replaces it at link time, and the weak version is then deleted from here (Conv,
 * ConvTranspose, MatMul, MaxPool, AveragePool, GlobalAveragePool, BatchNormalization,
 * Softmax, LogSoftmax and ReduceMean now live in conv.c, gemm.c, pool.c, norm.c and
 * reduce.c). Float32 unless said otherwise. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "runtime/op.h"
#include "runtime/ops/nary.h"
#include "runtime/shape.h"

#define WEAK __attribute__((weak))


static ptq_status need_f32(const ptq_op_ctx *ctx, int i)
{
    if (ctx->in[i] && ctx->in[i]->dtype != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d is %s, only float32 is supported", i, ptq_dtype_name(ctx->in[i]->dtype));
    return PTQ_OK;
}

/* ------------------------------------------------------------ Constant */

static ptq_status constant_infer(ptq_op_ctx *ctx)
{
    const ptq_node *n = ctx->node;
    if (ctx->n_in != 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "Constant takes no inputs");
    if (n->n_attrs != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "Constant needs exactly one value attribute, has %d", n->n_attrs);
    const ptq_attr *a = &n->attrs[0];
    ptq_tensor *y = ctx->out[0];
    if (strcmp(a->name, "value") == 0 && a->type == PTQ_ATTR_TENSOR) {
        y->dtype = a->tensor.dtype;
        ptq_shape_copy(y, &a->tensor);
    } else if (strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_int") == 0) {
        y->dtype = a->name[6] == 'f' ? PTQ_F32 : PTQ_I64;
        y->rank = 0;
    } else if (strcmp(a->name, "value_floats") == 0 || strcmp(a->name, "value_ints") == 0) {
        y->dtype = a->name[6] == 'f' ? PTQ_F32 : PTQ_I64;
        y->rank = 1;
        y->dims[0] = (int64_t)a->n;
    } else {
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "attribute '%s' is not supported", a->name);
    }
    return PTQ_OK;
}

static ptq_status constant_run(ptq_op_ctx *ctx)
{
    const ptq_attr *a = &ctx->node->attrs[0];
    ptq_tensor *y = ctx->out[0];
    if (a->type == PTQ_ATTR_TENSOR) {
        memcpy(y->data, a->tensor.data, ptq_tensor_nbytes(y));
    } else if (a->type == PTQ_ATTR_FLOAT) {
        *(float *)y->data = a->f;
    } else if (a->type == PTQ_ATTR_INT) {
        *(int64_t *)y->data = a->i;
    } else if (a->type == PTQ_ATTR_FLOATS) {
        memcpy(y->data, a->floats, sizeof(float) * a->n);
    } else {
        memcpy(y->data, a->ints, sizeof(int64_t) * a->n);
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_constant = {constant_infer, constant_run, NULL, 0};

/* ------------------------------------------------------------ unary activations */

static ptq_status unary_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 3);
    if (st != PTQ_OK) return st;
    if ((st = need_f32(ctx, 0)) != PTQ_OK) return st;
    ctx->out[0]->dtype = PTQ_F32;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

#define UNARY(sym, expr, pre)                                                                    \
    static ptq_status sym##_run(ptq_op_ctx *ctx)                                                  \
    {                                                                                            \
        const float *x = ctx->in[0]->data;                                                       \
        float *y = ctx->out[0]->data;                                                            \
        size_t n = ptq_tensor_numel(ctx->out[0]);                                                \
        pre;                                                                                     \
        _Pragma("omp parallel for num_threads(ctx->nthreads) schedule(static) if (n > 65536)") \
        for (size_t i = 0; i < n; i++) {                                                         \
            float v = x[i];                                                                      \
            y[i] = (expr);                                                                       \
        }                                                                                        \
        return PTQ_OK;                                                                           \
    }                                                                                            \
    WEAK const ptq_op_def op_##sym = {unary_infer, sym##_run, NULL, 0};

/* The mathf.h functions, whose double cores are most of their cost, built for AVX-512, AVX2
 * and baseline x86-64 and picked at load time (the same IEEE operations: the same bits). */
#define UNARY_MATHF(sym, fn)                                                                     \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void sym##_loop(        \
        const float *restrict x, float *restrict y, size_t n)                                    \
    {                                                                                            \
        for (size_t i = 0; i < n; i++) y[i] = fn(x[i]);                                          \
    }                                                                                            \
    static ptq_status sym##_run(ptq_op_ctx *ctx)                                                  \
    {                                                                                            \
        const float *x = ctx->in[0]->data;                                                       \
        float *y = ctx->out[0]->data;                                                            \
        size_t n = ptq_tensor_numel(ctx->out[0]), blk = 16384, nb = (n + blk - 1) / blk;         \
        _Pragma("omp parallel for num_threads(ctx->nthreads) schedule(static) if (nb > 1)")     \
        for (size_t b = 0; b < nb; b++) sym##_loop(x + b * blk, y + b * blk, n - b * blk < blk ? n - b * blk : blk); \
        return PTQ_OK;                                                                           \
    }                                                                                            \
    WEAK const ptq_op_def op_##sym = {unary_infer, sym##_run, NULL, 0};

UNARY(relu, v > 0.0f ? v : 0.0f, (void)0)
UNARY_MATHF(sigmoid, ptq_sigmoidf)
UNARY(sqrt, sqrtf(v), (void)0)
UNARY_MATHF(tanh, ptq_tanhf)
UNARY_MATHF(exp, ptq_expf)
/* Neg and Abs also on integers (shape arithmetic) */
static ptq_status signed_unary_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    ptq_dtype dt = ctx->in[0]->dtype;
    if (dt != PTQ_F32 && dt != PTQ_I64 && dt != PTQ_I32 && dt != PTQ_I16 && dt != PTQ_I8 && dt != PTQ_F64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s is not supported", ptq_dtype_name(dt));
    ctx->out[0]->dtype = dt;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

#define SIGNED_UNARY(sym, EXPR)                                                          \
    static ptq_status sym##_run(ptq_op_ctx *ctx)                                         \
    {                                                                                    \
        size_t n = ptq_tensor_numel(ctx->out[0]);                                        \
        switch (ctx->in[0]->dtype) {                                                     \
        case PTQ_F32: { const float *x = ctx->in[0]->data; float *y = ctx->out[0]->data; \
            for (size_t i = 0; i < n; i++) { float v = x[i]; y[i] = (EXPR); } break; }    \
        case PTQ_F64: { const double *x = ctx->in[0]->data; double *y = ctx->out[0]->data; \
            for (size_t i = 0; i < n; i++) { double v = x[i]; y[i] = (EXPR); } break; }   \
        case PTQ_I64: { const int64_t *x = ctx->in[0]->data; int64_t *y = ctx->out[0]->data; \
            for (size_t i = 0; i < n; i++) { int64_t v = x[i]; y[i] = (EXPR); } break; }  \
        case PTQ_I32: { const int32_t *x = ctx->in[0]->data; int32_t *y = ctx->out[0]->data; \
            for (size_t i = 0; i < n; i++) { int32_t v = x[i]; y[i] = (EXPR); } break; }  \
        case PTQ_I16: { const int16_t *x = ctx->in[0]->data; int16_t *y = ctx->out[0]->data; \
            for (size_t i = 0; i < n; i++) { int16_t v = x[i]; y[i] = (int16_t)(EXPR); } break; } \
        default: { const int8_t *x = ctx->in[0]->data; int8_t *y = ctx->out[0]->data;    \
            for (size_t i = 0; i < n; i++) { int8_t v = x[i]; y[i] = (int8_t)(EXPR); } break; } \
        }                                                                                \
        return PTQ_OK;                                                                   \
    }                                                                                    \
    WEAK const ptq_op_def op_##sym = {signed_unary_infer, sym##_run, NULL, 0};

SIGNED_UNARY(neg, -v)
SIGNED_UNARY(abs, v < 0 ? -v : v)
UNARY(reciprocal, 1.0f / v, (void)0)
UNARY(hard_swish, v * fmaxf(0.0f, fminf(1.0f, v / 6.0f + 0.5f)), (void)0)
UNARY(hard_sigmoid, fmaxf(0.0f, fminf(1.0f, alpha * v + beta)),
      float alpha = ptq_attr_float(ctx->node, "alpha", 0.2f);
      float beta = ptq_attr_float(ctx->node, "beta", 0.5f))
UNARY(leaky_relu, v >= 0.0f ? v : v * alpha, float alpha = ptq_attr_float(ctx->node, "alpha", 0.01f))

/* Clip on float32, or on any integer type (bounds of the input's type, clamped in int64). */
static ptq_status clip_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 3);
    if (st != PTQ_OK) return st;
    ptq_dtype dt = ctx->in[0]->dtype;
    if (dt != PTQ_F32 && !ptq_dtype_is_int(dt))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, supported: float32 and the integer types", ptq_dtype_name(dt));
    for (int i = 1; i < ctx->n_in; i++)
        if (ctx->in[i] && ctx->in[i]->dtype != dt)
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "input %d is %s, the input is %s", i, ptq_dtype_name(ctx->in[i]->dtype), ptq_dtype_name(dt));
    ctx->out[0]->dtype = dt;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status clip_run_int(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    size_t n = ptq_tensor_numel(ctx->out[0]);
    int has_lo = ctx->n_in > 1 && ctx->in[1], has_hi = ctx->n_in > 2 && ctx->in[2];
    if (x->dtype == PTQ_U64) {
        uint64_t lo = has_lo ? ptq_load_u64(ctx->in[1], 0) : 0, hi = has_hi ? ptq_load_u64(ctx->in[2], 0) : UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = ((const uint64_t *)x->data)[i];
            v = v < lo ? lo : v;
            ((uint64_t *)ctx->out[0]->data)[i] = v > hi ? hi : v;
        }
        return PTQ_OK;
    }
    int64_t lo = has_lo ? ptq_tensor_get_i64(ctx->in[1], 0) : INT64_MIN, hi = has_hi ? ptq_tensor_get_i64(ctx->in[2], 0) : INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        int64_t v = ptq_tensor_get_i64(x, i);
        v = v < lo ? lo : v;
        ptq_store_i64(ctx->out[0], i, v > hi ? hi : v);
    }
    return PTQ_OK;
}

static ptq_status clip_run(ptq_op_ctx *ctx)
{
    if (ctx->in[0]->dtype != PTQ_F32) return clip_run_int(ctx);
    const float *x = ctx->in[0]->data;
    float *y = ctx->out[0]->data;
    size_t n = ptq_tensor_numel(ctx->out[0]);
    float lo = -INFINITY, hi = INFINITY;
    if (ctx->opset < 11) {
        lo = ptq_attr_float(ctx->node, "min", -INFINITY);
        hi = ptq_attr_float(ctx->node, "max", INFINITY);
    } else {
        if (ctx->n_in > 1 && ctx->in[1]) lo = *(const float *)ctx->in[1]->data;
        if (ctx->n_in > 2 && ctx->in[2]) hi = *(const float *)ctx->in[2]->data;
    }
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float v = x[i] < lo ? lo : x[i];
        y[i] = v > hi ? hi : v;
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_clip = {clip_infer, clip_run, NULL, 0};

/* ------------------------------------------------------------ binary arithmetic */

static ptq_status binary_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *a = ctx->in[0], *b = ctx->in[1];
    if (a->dtype != b->dtype)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "input dtypes differ (%s, %s)", ptq_dtype_name(a->dtype), ptq_dtype_name(b->dtype));
    if (a->dtype != PTQ_F32 && !ptq_dtype_is_int(a->dtype))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s is not supported", ptq_dtype_name(a->dtype));
    if ((st = ptq_broadcast(a, b, ctx->out[0])) != PTQ_OK) {
        ptq_error_prefix("%s '%s': ", ctx->node->op_type, ctx->node->name);
        return st;
    }
    ctx->out[0]->dtype = a->dtype;
    return PTQ_OK;
}

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_POW } bin_kind;

static inline int64_t bin_i(bin_kind k, int64_t a, int64_t b)
{
    switch (k) {
    case BIN_ADD: return (int64_t)((uint64_t)a + (uint64_t)b); /* wraps, no signed overflow */
    case BIN_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case BIN_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case BIN_DIV: return b == -1 ? (int64_t)(0 - (uint64_t)a) : (b ? a / b : 0); /* INT64_MIN / -1 traps */
    default: {
        int64_t r = 1;
        for (int64_t i = 0; i < b && i < 64; i++) r *= a;
        return r;
    }
    }
}

/* The output is walked as rows of `inner` elements over which each input is either
 * contiguous (step 1) or constant (step 0); trailing dims with the same pattern merge. */
typedef struct {
    size_t rows, inner;
    int outer_rank;
    int64_t dims[PTQ_MAX_RANK], sa[PTQ_MAX_RANK], sb[PTQ_MAX_RANK];
    int step_a, step_b;
} bin_layout;

static void bin_layout_make(const ptq_tensor *a, const ptq_tensor *b, const ptq_tensor *y, bin_layout *L)
{
    int64_t sa[PTQ_MAX_RANK], sb[PTQ_MAX_RANK];
    int r = y->rank;
    ptq_broadcast_strides(a, y, sa);
    ptq_broadcast_strides(b, y, sb);
    L->inner = 1;
    int d = r - 1;
    /* skip trailing dims of size 1 */
    while (d >= 0 && y->dims[d] == 1) d--;
    L->step_a = d >= 0 && sa[d] != 0;
    L->step_b = d >= 0 && sb[d] != 0;
    int64_t expect_a = 1, expect_b = 1;
    for (; d >= 0; d--) {
        if (y->dims[d] == 1) continue;
        int ca = sa[d] != 0, cb = sb[d] != 0;
        if (ca != L->step_a || cb != L->step_b) break;
        if ((ca && sa[d] != expect_a) || (cb && sb[d] != expect_b)) break;
        L->inner *= (size_t)y->dims[d];
        expect_a *= ca ? y->dims[d] : 1;
        expect_b *= cb ? y->dims[d] : 1;
    }
    L->outer_rank = d + 1;
    L->rows = 1;
    for (int k = 0; k < L->outer_rank; k++) {
        L->dims[k] = y->dims[k];
        L->sa[k] = sa[k];
        L->sb[k] = sb[k];
        L->rows *= (size_t)y->dims[k];
    }
}

static inline void bin_row_offsets(const bin_layout *L, size_t row, int64_t *oa, int64_t *ob)
{
    size_t rem = row;
    *oa = 0;
    *ob = 0;
    for (int d = L->outer_rank - 1; d >= 0; d--) {
        int64_t idx = (int64_t)(rem % (size_t)L->dims[d]);
        rem /= (size_t)L->dims[d];
        *oa += idx * L->sa[d];
        *ob += idx * L->sb[d];
    }
}

/* Rows of the layout, each cut into blocks of BIN_BLOCK elements when there are too few rows
 * to keep every thread busy (two tensors of one shape are a single row): elementwise, so the
 * bits do not depend on the split. Each finished row or block goes to the sink (PTQ_OP_TILES)
 * while it is in cache. */
#define BIN_BLOCK 16384

#define BIN_F32(name, EXPR)                                                                        \
    static void name(const bin_layout *L, const float *x0, const float *x1, float *out, int nt,     \
                     ptq_tile_sink *sink)                                                          \
    {                                                                                              \
        size_t inner = L->inner, blk = inner, nblk = 1;                                            \
        if (L->rows < (size_t)nt * 4 && inner > 2 * BIN_BLOCK) {                                   \
            blk = BIN_BLOCK;                                                                       \
            nblk = (inner + blk - 1) / blk;                                                        \
        }                                                                                          \
        size_t total = L->rows * nblk;                                                             \
        _Pragma("omp parallel for num_threads(nt) schedule(static) if (L->rows * inner > 65536)") \
        for (size_t t = 0; t < total; t++) {                                                       \
            size_t row = t / nblk, i0 = (t % nblk) * blk, i1 = i0 + blk < inner ? i0 + blk : inner; \
            int64_t oa, ob;                                                                        \
            bin_row_offsets(L, row, &oa, &ob);                                                     \
            const float *restrict p = x0 + oa, *restrict q = x1 + ob;                              \
            float *restrict o = out + row * inner;                                                 \
            if (L->step_a && L->step_b) {                                                          \
                for (size_t i = i0; i < i1; i++) {                                                 \
                    float a = p[i], b = q[i];                                                      \
                    o[i] = (EXPR);                                                                 \
                }                                                                                  \
            } else if (L->step_a) {                                                                \
                float b = q[0];                                                                    \
                for (size_t i = i0; i < i1; i++) {                                                 \
                    float a = p[i];                                                                \
                    o[i] = (EXPR);                                                                 \
                }                                                                                  \
            } else if (L->step_b) {                                                                \
                float a = p[0];                                                                    \
                for (size_t i = i0; i < i1; i++) {                                                 \
                    float b = q[i];                                                                \
                    o[i] = (EXPR);                                                                 \
                }                                                                                  \
            } else {                                                                               \
                float a = p[0], b = q[0];                                                          \
                for (size_t i = i0; i < i1; i++) o[i] = (EXPR);                                    \
            }                                                                                      \
            if (sink) sink->tile(sink, omp_get_thread_num(), o + i0, 1, (int64_t)(i1 - i0),        \
                                 (int64_t)(i1 - i0));                                              \
        }                                                                                          \
    }

BIN_F32(bin_add_f32, a + b)
BIN_F32(bin_sub_f32, a - b)
BIN_F32(bin_mul_f32, a * b)
BIN_F32(bin_div_f32, a / b)
BIN_F32(bin_pow_f32, ptq_powf(a, b))

static ptq_status binary_run_kind(ptq_op_ctx *ctx, bin_kind k)
{
    const ptq_tensor *a = ctx->in[0], *b = ctx->in[1];
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    if (y->dtype == PTQ_F32) {
        bin_layout L;
        bin_layout_make(a, b, y, &L);
        switch (k) {
        case BIN_ADD: bin_add_f32(&L, a->data, b->data, y->data, ctx->nthreads, ctx->sink); break;
        case BIN_SUB: bin_sub_f32(&L, a->data, b->data, y->data, ctx->nthreads, ctx->sink); break;
        case BIN_MUL: bin_mul_f32(&L, a->data, b->data, y->data, ctx->nthreads, ctx->sink); break;
        case BIN_DIV: bin_div_f32(&L, a->data, b->data, y->data, ctx->nthreads, ctx->sink); break;
        default: bin_pow_f32(&L, a->data, b->data, y->data, ctx->nthreads, NULL); break; /* Pow has no PTQ_OP_TILES */
        }
        return PTQ_OK;
    }
    int r = y->rank;
    int64_t sa[PTQ_MAX_RANK], sb[PTQ_MAX_RANK];
    ptq_broadcast_strides(a, y, sa);
    ptq_broadcast_strides(b, y, sb);
    for (size_t i = 0; i < n; i++) {
        size_t rem = i;
        int64_t oa = 0, ob = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t idx = (int64_t)(rem % (size_t)y->dims[d]);
            rem /= (size_t)y->dims[d];
            oa += idx * sa[d];
            ob += idx * sb[d];
        }
        int64_t va = ptq_tensor_get_i64(a, (size_t)oa), vb = ptq_tensor_get_i64(b, (size_t)ob), v;
        if (y->dtype == PTQ_U64 && k == BIN_DIV) { /* unsigned 64-bit division */
            uint64_t ua = (uint64_t)va, ub = (uint64_t)vb;
            v = (int64_t)(ub ? ua / ub : 0);
        } else {
            v = bin_i(k, va, vb);
        }
        ptq_store_i64(y, i, v); /* wraps to the type's width, as its own arithmetic does */
    }
    return PTQ_OK;
}

static ptq_status add_run(ptq_op_ctx *ctx) { return binary_run_kind(ctx, BIN_ADD); }
static ptq_status sub_run(ptq_op_ctx *ctx) { return binary_run_kind(ctx, BIN_SUB); }
static ptq_status mul_run(ptq_op_ctx *ctx) { return binary_run_kind(ctx, BIN_MUL); }
static ptq_status div_run(ptq_op_ctx *ctx) { return binary_run_kind(ctx, BIN_DIV); }

/* Pow: the output has the base's dtype; the exponent may be any numeric type. */
static ptq_status pow_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    ptq_dtype dt = ctx->in[0]->dtype;
    if (dt != PTQ_F32 && dt != PTQ_F64 && dt != PTQ_I32 && dt != PTQ_I64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "base dtype %s is not supported", ptq_dtype_name(dt));
    if (ptq_dtype_size(ctx->in[1]->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "exponent dtype");
    if ((st = ptq_broadcast(ctx->in[0], ctx->in[1], ctx->out[0])) != PTQ_OK) return st;
    ctx->out[0]->dtype = dt;
    return PTQ_OK;
}

static ptq_status pow_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *a = ctx->in[0], *b = ctx->in[1];
    ptq_tensor *y = ctx->out[0];
    if (a->dtype == PTQ_F32 && b->dtype == PTQ_F32) return binary_run_kind(ctx, BIN_POW);
    int64_t sa[PTQ_MAX_RANK], sb[PTQ_MAX_RANK];
    ptq_broadcast_strides(a, y, sa);
    ptq_broadcast_strides(b, y, sb);
    size_t n = ptq_tensor_numel(y);
    for (size_t i = 0; i < n; i++) {
        size_t rem = i, oa = 0, ob = 0;
        for (int d = y->rank - 1; d >= 0; d--) {
            size_t idx = rem % (size_t)y->dims[d];
            rem /= (size_t)y->dims[d];
            oa += idx * (size_t)sa[d];
            ob += idx * (size_t)sb[d];
        }
        double v = ptq_pow(ptq_tensor_get_f64(a, oa), ptq_tensor_get_f64(b, ob));
        switch (y->dtype) {
        case PTQ_F32: ((float *)y->data)[i] = (float)v; break;
        case PTQ_F64: ((double *)y->data)[i] = v; break;
        case PTQ_I32: ((int32_t *)y->data)[i] = (int32_t)v; break;
        default: ((int64_t *)y->data)[i] = (int64_t)v; break;
        }
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_add = {binary_infer, add_run, NULL, PTQ_OP_TILES};
WEAK const ptq_op_def op_sub = {binary_infer, sub_run, NULL, PTQ_OP_TILES};
WEAK const ptq_op_def op_mul = {binary_infer, mul_run, NULL, PTQ_OP_TILES};
WEAK const ptq_op_def op_div = {binary_infer, div_run, NULL, PTQ_OP_TILES};
WEAK const ptq_op_def op_pow = {pow_infer, pow_run, NULL, 0};

/* ------------------------------------------------------------ Shape, Reshape, Squeeze, Unsqueeze, Flatten */

static ptq_status shape_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    int r = ctx->in[0]->rank;
    int64_t start = ptq_attr_int(ctx->node, "start", 0), end = ptq_attr_int(ctx->node, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : (start > r ? r : start);
    end = end < 0 ? 0 : (end > r ? r : end);
    ctx->out[0]->dtype = PTQ_I64;
    ctx->out[0]->rank = 1;
    ctx->out[0]->dims[0] = end > start ? end - start : 0;
    ctx->state = (void *)(intptr_t)start;
    return PTQ_OK;
}

static ptq_status shape_run(ptq_op_ctx *ctx)
{
    int64_t start = (int64_t)(intptr_t)ctx->state;
    for (int64_t i = 0; i < ctx->out[0]->dims[0]; i++) ((int64_t *)ctx->out[0]->data)[i] = ctx->in[0]->dims[start + i];
    return PTQ_OK;
}

WEAK const ptq_op_def op_shape = {shape_infer, shape_run, NULL, 0};

static ptq_status copy_run(ptq_op_ctx *ctx)
{
    memcpy(ctx->out[0]->data, ctx->in[0]->data, ptq_tensor_nbytes(ctx->in[0]));
    return PTQ_OK;
}

static ptq_status reshape_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *s = ctx->in[1];
    if (!s->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "shape input is not constant");
    if (s->rank != 1 || s->dims[0] > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "shape input must be 1-D of at most %d", PTQ_MAX_RANK);
    int allowzero = (int)ptq_attr_int(ctx->node, "allowzero", 0), infer_at = -1;
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = (int)s->dims[0];
    int64_t known = 1;
    for (int i = 0; i < y->rank; i++) {
        int64_t d = ptq_tensor_get_i64(s, (size_t)i);
        if (d == 0 && !allowzero) {
            if (i >= x->rank) OP_FAIL(ctx, PTQ_ERR_SHAPE, "shape[%d] = 0 copies a dim the input does not have", i);
            d = x->dims[i];
        }
        if (d == -1) {
            if (infer_at >= 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "more than one -1 in shape");
            infer_at = i;
            continue;
        }
        if (d < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "negative dim %lld in shape", (long long)d);
        if (d != 0 && known > INT64_MAX / d) OP_FAIL(ctx, PTQ_ERR_SHAPE, "shape's element count overflows");
        y->dims[i] = d;
        known *= d;
    }
    int64_t total = (int64_t)ptq_tensor_numel(x);
    if (infer_at >= 0) {
        if (known == 0 || total % known) OP_FAIL(ctx, PTQ_ERR_SHAPE, "cannot infer -1: %lld elements into %lld", (long long)total, (long long)known);
        y->dims[infer_at] = total / known;
    } else if (known != total) {
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "%lld elements cannot be reshaped to %lld", (long long)total, (long long)known);
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_reshape = {reshape_infer, copy_run, NULL, 0};

/* axes from the attribute (opset < 13) or input 1 */
static ptq_status read_axes(const ptq_op_ctx *ctx, int64_t *axes, int *n)
{
    size_t cnt = 0;
    *n = 0;
    if (ctx->opset < 13) {
        const int64_t *a = ptq_attr_ints(ctx->node, "axes", &cnt);
        if (cnt > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "too many axes");
        for (size_t i = 0; i < cnt; i++) axes[i] = a[i];
        *n = (int)cnt;
        return PTQ_OK;
    }
    if (ctx->n_in < 2 || !ctx->in[1]) return PTQ_OK;
    if (!ctx->in[1]->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "axes input is not constant");
    cnt = ptq_tensor_numel(ctx->in[1]);
    if (cnt > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "too many axes");
    for (size_t i = 0; i < cnt; i++) axes[i] = ptq_tensor_get_i64(ctx->in[1], i);
    *n = (int)cnt;
    return PTQ_OK;
}

static ptq_status squeeze_infer(ptq_op_ctx *ctx)
{
    int64_t axes[PTQ_MAX_RANK];
    int na;
    ptq_status st = ptq_op_check_inputs(ctx, 1, 2);
    if (st != PTQ_OK || (st = read_axes(ctx, axes, &na)) != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int drop[PTQ_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (ptq_norm_axis(axes[i], x->rank, &a)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range", (long long)axes[i]);
        if (x->dims[a] != 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "cannot squeeze axis %lld of size %lld", (long long)a, (long long)x->dims[a]);
        drop[a] = 1;
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!(na ? drop[d] : x->dims[d] == 1)) y->dims[y->rank++] = x->dims[d];
    return PTQ_OK;
}

static ptq_status unsqueeze_infer(ptq_op_ctx *ctx)
{
    int64_t axes[PTQ_MAX_RANK];
    int na;
    ptq_status st = ptq_op_check_inputs(ctx, 1, 2);
    if (st != PTQ_OK || (st = read_axes(ctx, axes, &na)) != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int r = x->rank + na, ins[PTQ_MAX_RANK] = {0};
    if (r > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "rank %d too large", r);
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (ptq_norm_axis(axes[i], r, &a) || ins[a]) OP_FAIL(ctx, PTQ_ERR_SHAPE, "bad axis %lld", (long long)axes[i]);
        ins[a] = 1;
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = r;
    for (int d = 0, k = 0; d < r; d++) y->dims[d] = ins[d] ? 1 : x->dims[k++];
    return PTQ_OK;
}

WEAK const ptq_op_def op_squeeze = {squeeze_infer, copy_run, NULL, 0};
WEAK const ptq_op_def op_unsqueeze = {unsqueeze_infer, copy_run, NULL, 0};

/* ------------------------------------------------------------ Transpose */

static ptq_status transpose_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    size_t n;
    const int64_t *perm = ptq_attr_ints(ctx->node, "perm", &n);
    if (perm && (int)n != x->rank) OP_FAIL(ctx, PTQ_ERR_SHAPE, "perm has %zu entries for rank %d", n, x->rank);
    int64_t *p = malloc(sizeof(int64_t) * PTQ_MAX_RANK);
    if (!p) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
    int seen[PTQ_MAX_RANK] = {0};
    for (int i = 0; i < x->rank; i++) {
        p[i] = perm ? perm[i] : x->rank - 1 - i;
        if (p[i] < 0 || p[i] >= x->rank || seen[p[i]]) {
            free(p);
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "bad perm");
        }
        seen[p[i]] = 1;
        ctx->out[0]->dims[i] = x->dims[p[i]];
    }
    ctx->out[0]->rank = x->rank;
    ctx->out[0]->dtype = x->dtype;
    ctx->state = p;
    return PTQ_OK;
}

static ptq_status transpose_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    const int64_t *p = ctx->state;
    int64_t xs[PTQ_MAX_RANK], st[PTQ_MAX_RANK];
    ptq_strides(x, xs);
    for (int i = 0; i < y->rank; i++) st[i] = xs[p[i]];
    ptq_strided_copy(y->data, x->data, y->rank, y->dims, st, 0, ptq_dtype_size(y->dtype));
    return PTQ_OK;
}


WEAK const ptq_op_def op_transpose = {transpose_infer, transpose_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ Concat */

static ptq_status concat_infer(ptq_op_ctx *ctx)
{
    if (ctx->n_in < 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "no inputs");
    const ptq_tensor *x0 = ctx->in[0];
    int64_t axis;
    if (ptq_norm_axis(ptq_attr_int(ctx->node, "axis", 0), x0->rank, &axis)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis out of range");
    ptq_tensor *y = ctx->out[0];
    y->dtype = x0->dtype;
    ptq_shape_copy(y, x0);
    y->dims[axis] = 0;
    for (int i = 0; i < ctx->n_in; i++) {
        const ptq_tensor *x = ctx->in[i];
        if (!x || x->rank != x0->rank || x->dtype != x0->dtype) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input %d rank or dtype differs", i);
        for (int d = 0; d < x->rank; d++)
            if (d != axis && x->dims[d] != x0->dims[d]) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input %d dim %d differs", i, d);
        y->dims[axis] += x->dims[axis];
    }
    ctx->state = (void *)(intptr_t)axis;
    return PTQ_OK;
}

static ptq_status concat_run(ptq_op_ctx *ctx)
{
    int axis = (int)(intptr_t)ctx->state;
    ptq_tensor *y = ctx->out[0];
    size_t es = ptq_dtype_size(y->dtype), outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= (size_t)y->dims[d];
    for (int d = axis + 1; d < y->rank; d++) inner *= (size_t)y->dims[d];
    size_t yrow = (size_t)y->dims[axis] * inner * es, off = 0;
    for (int i = 0; i < ctx->n_in; i++) {
        size_t row = (size_t)ctx->in[i]->dims[axis] * inner * es;
        for (size_t o = 0; o < outer; o++)
            memcpy((char *)y->data + o * yrow + off, (const char *)ctx->in[i]->data + o * row, row);
        off += row;
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_concat = {concat_infer, concat_run, NULL, 0};

/* ------------------------------------------------------------ Slice (opset 10+ inputs, or < 10 attributes) */

typedef struct {
    int64_t start[PTQ_MAX_RANK], step[PTQ_MAX_RANK];
} slice_state;

static ptq_status slice_infer(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    int64_t starts[PTQ_MAX_RANK], ends[PTQ_MAX_RANK], axes[PTQ_MAX_RANK], steps[PTQ_MAX_RANK];
    int n = 0;
    if (!x) OP_FAIL(ctx, PTQ_ERR_FORMAT, "no data input");
    if (ctx->opset < 10) {
        size_t ns, ne, na;
        const int64_t *s = ptq_attr_ints(ctx->node, "starts", &ns), *e = ptq_attr_ints(ctx->node, "ends", &ne),
                      *a = ptq_attr_ints(ctx->node, "axes", &na);
        if (!s || !e || ns != ne || ns > PTQ_MAX_RANK || (a && na != ns)) OP_FAIL(ctx, PTQ_ERR_FORMAT, "bad starts/ends/axes");
        n = (int)ns;
        for (int i = 0; i < n; i++) {
            starts[i] = s[i];
            ends[i] = e[i];
            axes[i] = a ? a[i] : i;
            steps[i] = 1;
        }
    } else {
        if (ctx->n_in < 3) OP_FAIL(ctx, PTQ_ERR_FORMAT, "needs starts and ends");
        for (int i = 1; i < ctx->n_in; i++)
            if (ctx->in[i] && !ctx->in[i]->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d is not constant", i);
        if (!ctx->in[1] || !ctx->in[2]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "starts and ends are required");
        size_t ns = ptq_tensor_numel(ctx->in[1]);
        if (ns > PTQ_MAX_RANK || ptq_tensor_numel(ctx->in[2]) != ns) OP_FAIL(ctx, PTQ_ERR_SHAPE, "starts/ends sizes differ");
        n = (int)ns;
        for (int i = 3; i < ctx->n_in && i < 5; i++)
            if (ctx->in[i] && ptq_tensor_numel(ctx->in[i]) != ns)
                OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s has %zu values for %zu starts", i == 3 ? "axes" : "steps",
                        ptq_tensor_numel(ctx->in[i]), ns);
        for (int i = 0; i < n; i++) {
            starts[i] = ptq_tensor_get_i64(ctx->in[1], (size_t)i);
            ends[i] = ptq_tensor_get_i64(ctx->in[2], (size_t)i);
            axes[i] = ctx->n_in > 3 && ctx->in[3] ? ptq_tensor_get_i64(ctx->in[3], (size_t)i) : i;
            steps[i] = ctx->n_in > 4 && ctx->in[4] ? ptq_tensor_get_i64(ctx->in[4], (size_t)i) : 1;
        }
    }
    slice_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    ptq_shape_copy(y, x);
    for (int d = 0; d < x->rank; d++) s->step[d] = 1;
    for (int i = 0; i < n; i++) {
        int64_t a;
        if (ptq_norm_axis(axes[i], x->rank, &a)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis out of range");
        int64_t dim = x->dims[a], st = starts[i], en = ends[i], sp = steps[i];
        if (sp == 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "step 0");
        if (st < 0) st += dim;
        if (en < 0) en += dim;
        if (sp > 0) {
            st = st < 0 ? 0 : (st > dim ? dim : st);
            en = en < 0 ? 0 : (en > dim ? dim : en);
            y->dims[a] = en > st ? (en - st + sp - 1) / sp : 0;
        } else {
            st = st < 0 ? -1 : (st > dim - 1 ? dim - 1 : st);
            en = en < -1 ? -1 : (en > dim - 1 ? dim - 1 : en);
            y->dims[a] = st > en ? (st - en + (-sp) - 1) / (-sp) : 0;
        }
        s->start[a] = st;
        s->step[a] = sp;
    }
    return PTQ_OK;
}

static ptq_status slice_run(ptq_op_ctx *ctx)
{
    const slice_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int64_t xs[PTQ_MAX_RANK], st[PTQ_MAX_RANK], base = 0;
    ptq_strides(x, xs);
    for (int d = 0; d < y->rank; d++) {
        st[d] = s->step[d] * xs[d];
        base += s->start[d] * xs[d];
    }
    ptq_strided_copy(y->data, x->data, y->rank, y->dims, st, base, ptq_dtype_size(y->dtype));
    return PTQ_OK;
}

WEAK const ptq_op_def op_slice = {slice_infer, slice_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ Gather (axis, int64/int32 indices) */

static ptq_status gather_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1];
    int64_t axis;
    if (ptq_norm_axis(ptq_attr_int(ctx->node, "axis", 0), x->rank, &axis)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis out of range");
    if (x->rank + ix->rank - 1 > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "rank too large");
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = 0;
    for (int d = 0; d < axis; d++) y->dims[y->rank++] = x->dims[d];
    for (int d = 0; d < ix->rank; d++) y->dims[y->rank++] = ix->dims[d];
    for (int d = (int)axis + 1; d < x->rank; d++) y->dims[y->rank++] = x->dims[d];
    ctx->state = (void *)(intptr_t)axis;
    return PTQ_OK;
}

static ptq_status gather_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0], *ix = ctx->in[1];
    int axis = (int)(intptr_t)ctx->state;
    size_t outer = 1, inner = 1, es = ptq_dtype_size(x->dtype), ni = ptq_tensor_numel(ix);
    for (int d = 0; d < axis; d++) outer *= (size_t)x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= (size_t)x->dims[d];
    int64_t dim = x->dims[axis];
    for (size_t o = 0; o < outer; o++)
        for (size_t k = 0; k < ni; k++) {
            int64_t j = ptq_tensor_get_i64(ix, k);
            if (j < 0) j += dim;
            if (j < 0 || j >= dim) OP_FAIL(ctx, PTQ_ERR_SHAPE, "index %lld out of range [0, %lld)", (long long)j, (long long)dim);
            memcpy((char *)ctx->out[0]->data + ((o * ni + k) * inner) * es,
                   (const char *)x->data + ((o * (size_t)dim + (size_t)j) * inner) * es, inner * es);
        }
    return PTQ_OK;
}

WEAK const ptq_op_def op_gather = {gather_infer, gather_run, NULL, 0};

/* ------------------------------------------------------------ Resize / Upsample
 * Separable: for every axis, each output index reads T taps (1 nearest, 2 linear,
 * 4 cubic) with weights computed once in infer from the coordinate transformation;
 * axes are applied one after the other (exact for all three modes, as in the ONNX
 * reference). Nearest resizes of the last two axes only (the common upsampling in
 * detectors) gather directly through two index tables. */

typedef struct {
    int64_t out, taps;
    int64_t *idx;   /* out * taps */
    float *w;       /* out * taps */
    uint8_t *outside; /* tf_crop_and_resize: output index maps outside the input */
} resize_axis;

typedef struct {
    int rank, mode; /* 0 nearest, 1 linear, 2 cubic */
    int64_t in_dims[PTQ_MAX_RANK];
    resize_axis ax[PTQ_MAX_RANK];
    int active[PTQ_MAX_RANK];
    int fast2d;
    int wdup; /* fast2d: output column ow reads input column ow / wdup for every ow (an integer upsampling), else 0 */
    float extrapolation;
    int has_outside;
} resize_state;

static void resize_free(void *p)
{
    resize_state *s = p;
    if (!s) return;
    for (int d = 0; d < PTQ_MAX_RANK; d++) {
        free(s->ax[d].idx);
        free(s->ax[d].w);
        free(s->ax[d].outside);
    }
    free(s);
}

static float cubic_w(float t, float A)
{
    t = fabsf(t);
    if (t <= 1.0f) return ((A + 2.0f) * t - (A + 3.0f)) * t * t + 1.0f;
    if (t < 2.0f) return ((A * t - 5.0f * A) * t + 8.0f * A) * t - 4.0f * A;
    return 0.0f;
}

static int64_t clamp_i(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static ptq_status resize_infer(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    const ptq_node *node = ctx->node;
    int upsample = strcmp(node->op_type, "Upsample") == 0;
    if (!x) OP_FAIL(ctx, PTQ_ERR_FORMAT, "no input");
    int r = x->rank;
    const ptq_tensor *roi = NULL, *scales = NULL, *sizes = NULL;
    if (upsample || ctx->opset < 11) {
        if (ctx->n_in > 1 && ctx->in[1] && ptq_tensor_numel(ctx->in[1])) scales = ctx->in[1];
    } else {
        if (ctx->n_in > 1 && ctx->in[1] && ptq_tensor_numel(ctx->in[1])) roi = ctx->in[1];
        if (ctx->n_in > 2 && ctx->in[2] && ptq_tensor_numel(ctx->in[2])) scales = ctx->in[2];
        if (ctx->n_in > 3 && ctx->in[3] && ptq_tensor_numel(ctx->in[3])) sizes = ctx->in[3];
    }
    if ((scales && !scales->data) || (sizes && !sizes->data) || (roi && !roi->data))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "scales/sizes/roi are not constant");
    float sc[PTQ_MAX_RANK];
    size_t na = 0;
    const float *as = upsample && !scales ? ptq_attr_floats(node, "scales", &na) : NULL;
    if (as && (int)na != r) OP_FAIL(ctx, PTQ_ERR_SHAPE, "scales has %zu values for rank %d", na, r);
    if (!scales && !sizes && !as) OP_FAIL(ctx, PTQ_ERR_FORMAT, "neither scales nor sizes");
    if (scales && (int)ptq_tensor_numel(scales) != r) OP_FAIL(ctx, PTQ_ERR_SHAPE, "scales has %zu values for rank %d", ptq_tensor_numel(scales), r);
    if (sizes && (int)ptq_tensor_numel(sizes) != r) OP_FAIL(ctx, PTQ_ERR_SHAPE, "sizes has %zu values for rank %d", ptq_tensor_numel(sizes), r);
    if (roi && (int)ptq_tensor_numel(roi) != 2 * r) OP_FAIL(ctx, PTQ_ERR_SHAPE, "roi has %zu values for rank %d", ptq_tensor_numel(roi), r);
    if (x->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, only float32", ptq_dtype_name(x->dtype));
    const char *mode = ptq_attr_string(node, "mode", "nearest");
    const char *ct = ptq_attr_string(node, "coordinate_transformation_mode", upsample || ctx->opset < 11 ? "asymmetric" : "half_pixel");
    const char *nm = ptq_attr_string(node, "nearest_mode", upsample || ctx->opset < 11 ? "floor" : "round_prefer_floor");
    float A = ptq_attr_float(node, "cubic_coeff_a", -0.75f);
    int exclude = (int)ptq_attr_int(node, "exclude_outside", 0);
    resize_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->rank = r;
    s->extrapolation = ptq_attr_float(node, "extrapolation_value", 0.0f);
    if (strcmp(mode, "nearest") == 0) s->mode = 0;
    else if (strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0) s->mode = 1;
    else if (strcmp(mode, "cubic") == 0) s->mode = 2;
    else OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "mode '%s'", mode);
    int ctk;
    if (strcmp(ct, "half_pixel") == 0) ctk = 0;
    else if (strcmp(ct, "asymmetric") == 0) ctk = 1;
    else if (strcmp(ct, "align_corners") == 0) ctk = 2;
    else if (strcmp(ct, "pytorch_half_pixel") == 0) ctk = 3;
    else if (strcmp(ct, "tf_half_pixel_for_nearest") == 0 || strcmp(ct, "tf_half_pixel_for_nn") == 0) ctk = 4;
    else if (strcmp(ct, "tf_crop_and_resize") == 0) ctk = 5;
    else if (strcmp(ct, "half_pixel_symmetric") == 0) ctk = 6;
    else OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s'", ct);
    int nmk;
    if (strcmp(nm, "round_prefer_floor") == 0) nmk = 0;
    else if (strcmp(nm, "round_prefer_ceil") == 0) nmk = 1;
    else if (strcmp(nm, "floor") == 0) nmk = 2;
    else if (strcmp(nm, "ceil") == 0) nmk = 3;
    else OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "nearest_mode '%s'", nm);
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    y->rank = r;
    int changed_other = 0;
    for (int d = 0; d < r; d++) {
        int64_t in = x->dims[d], out;
        s->in_dims[d] = in;
        if (sizes) {
            out = ptq_tensor_get_i64(sizes, (size_t)d);
            sc[d] = in ? (float)out / (float)in : 1.0f;
        } else {
            sc[d] = scales ? (float)ptq_tensor_get_f64(scales, (size_t)d) : as[d];
            if (!(sc[d] > 0.0f)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "scale %d is not positive", d);
            out = (int64_t)floorf((float)in * sc[d]);
        }
        if (out < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output dim %d is negative", d);
        y->dims[d] = out;
        /* resized length used by the transforms: the unrounded in*scale when scales are given */
        float len_r = sizes ? (float)out : (float)in * sc[d];
        float roi_s = roi ? (float)ptq_tensor_get_f64(roi, (size_t)d) : 0.0f;
        float roi_e = roi ? (float)ptq_tensor_get_f64(roi, (size_t)(d + r)) : 1.0f;
        int identity = out == in && sc[d] == 1.0f && ctk != 5;
        s->active[d] = !identity;
        if (identity) continue;
        if (d < r - 2) changed_other = 1;
        resize_axis *ax = &s->ax[d];
        ax->out = out;
        ax->taps = s->mode == 0 ? 1 : (s->mode == 1 ? 2 : 4);
        ax->idx = malloc(sizeof(int64_t) * (size_t)(out * ax->taps + 1));
        ax->w = malloc(sizeof(float) * (size_t)(out * ax->taps + 1));
        ax->outside = calloc((size_t)out + 1, 1);
        if (!ax->idx || !ax->w || !ax->outside) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
        for (int64_t o = 0; o < out; o++) {
            float c;
            switch (ctk) {
            case 0: c = ((float)o + 0.5f) / sc[d] - 0.5f; break;
            case 1: c = (float)o / sc[d]; break;
            case 2: c = len_r == 1.0f ? 0.0f : (float)o * (float)(in - 1) / (len_r - 1.0f); break;
            case 3: c = len_r > 1.0f ? ((float)o + 0.5f) / sc[d] - 0.5f : 0.0f; break;
            case 4: c = ((float)o + 0.5f) / sc[d]; break;
            case 5:
                c = len_r > 1.0f ? roi_s * (float)(in - 1) + (float)o * (roi_e - roi_s) * (float)(in - 1) / (len_r - 1.0f)
                                 : 0.5f * (roi_s + roi_e) * (float)(in - 1);
                if (c < 0.0f || c > (float)(in - 1)) {
                    ax->outside[o] = 1;
                    s->has_outside = 1;
                }
                break;
            default: {
                float adj = (float)in * sc[d] / len_r, center = (float)in / 2.0f;
                c = center * (1.0f - adj) + ((float)o + 0.5f) / sc[d] - 0.5f;
                break;
            }
            }
            int64_t *ix = ax->idx + o * ax->taps;
            float *w = ax->w + o * ax->taps;
            if (s->mode == 0) {
                float f = floorf(c);
                int64_t i;
                if (nmk == 0) i = c - f == 0.5f ? (int64_t)f : (int64_t)roundf(c);
                else if (nmk == 1) i = c - f == 0.5f ? (int64_t)f + 1 : (int64_t)roundf(c);
                else if (nmk == 2) i = (int64_t)f;
                else i = (int64_t)ceilf(c);
                ix[0] = clamp_i(i, 0, in - 1);
                w[0] = 1.0f;
            } else if (s->mode == 1) {
                float cc = c < 0.0f ? 0.0f : (c > (float)(in - 1) ? (float)(in - 1) : c);
                int64_t i0 = (int64_t)floorf(cc);
                float t = cc - (float)i0;
                ix[0] = clamp_i(i0, 0, in - 1);
                ix[1] = clamp_i(i0 + 1, 0, in - 1);
                w[0] = 1.0f - t;
                w[1] = t;
            } else {
                int64_t i0 = (int64_t)floorf(c);
                float t = c - (float)i0, sum = 0.0f;
                for (int k = 0; k < 4; k++) {
                    int64_t i = i0 - 1 + k;
                    float wk = cubic_w(t - (float)(k - 1), A);
                    if (exclude && (i < 0 || i >= in)) wk = 0.0f;
                    ix[k] = clamp_i(i, 0, in - 1);
                    w[k] = wk;
                    sum += wk;
                }
                if (exclude && sum != 0.0f)
                    for (int k = 0; k < 4; k++) w[k] /= sum;
            }
        }
    }
    s->fast2d = s->mode == 0 && r >= 2 && !changed_other && !s->has_outside;
    if (s->fast2d && s->active[r - 1] && s->ax[r - 1].out > 0 && s->in_dims[r - 1] > 0 &&
        s->ax[r - 1].out % s->in_dims[r - 1] == 0) {
        int64_t f = s->ax[r - 1].out / s->in_dims[r - 1];
        s->wdup = (int)f;
        for (int64_t ow = 0; ow < s->ax[r - 1].out && s->wdup; ow++)
            if (s->ax[r - 1].idx[ow] != ow / f) s->wdup = 0;
    }
    /* scratch: two ping-pong buffers of the largest intermediate */
    int64_t cur[PTQ_MAX_RANK];
    size_t biggest = ptq_tensor_numel(x);
    for (int d = 0; d < r; d++) cur[d] = x->dims[d];
    for (int d = 0; d < r; d++) {
        if (!s->active[d]) continue;
        cur[d] = y->dims[d];
        size_t n = 1;
        for (int k = 0; k < r; k++) n *= (size_t)cur[k];
        if (n > biggest) biggest = n;
    }
    ctx->scratch_bytes = s->fast2d ? 0 : 2 * sizeof(float) * biggest;
    return PTQ_OK;
}

static ptq_status resize_run(ptq_op_ctx *ctx)
{
    const resize_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int r = s->rank;
    if (s->fast2d) {
        const resize_axis *ah = &s->ax[r - 2], *aw = &s->ax[r - 1];
        int64_t IH = x->dims[r - 2], IW = x->dims[r - 1], OH = y->dims[r - 2], OW = y->dims[r - 1];
        size_t planes = (IH * IW) != 0 ? ptq_tensor_numel(x) / (size_t)(IH * IW) : 0;
        const float *xd = x->data;
        float *yd = y->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
        for (size_t p = 0; p < planes; p++)
            for (int64_t oh = 0; oh < OH; oh++) {
                const float *src = xd + p * (size_t)(IH * IW) + (s->active[r - 2] ? ah->idx[oh] : oh) * IW;
                float *dst = yd + p * (size_t)(OH * OW) + oh * OW;
                if (oh > 0 && s->active[r - 2] && ah->idx[oh] == ah->idx[oh - 1]) /* the row above again */
                    memcpy(dst, dst - OW, sizeof(float) * (size_t)OW);
                else if (s->wdup == 2)
                    for (int64_t iw = 0; iw < IW; iw++) dst[2 * iw] = dst[2 * iw + 1] = src[iw];
                else if (s->active[r - 1])
                    for (int64_t ow = 0; ow < OW; ow++) dst[ow] = src[aw->idx[ow]];
                else
                    memcpy(dst, src, sizeof(float) * (size_t)OW);
            }
        return PTQ_OK;
    }
    /* separable: axis by axis through the scratch buffers, last pass into y */
    int64_t cur[PTQ_MAX_RANK];
    for (int d = 0; d < r; d++) cur[d] = x->dims[d];
    const float *src = x->data;
    float *bufs[2] = {ctx->scratch, (float *)ctx->scratch + ctx->scratch_bytes / sizeof(float) / 2};
    int last = -1, pass = 0;
    for (int d = 0; d < r; d++)
        if (s->active[d]) last = d;
    if (last < 0) {
        memcpy(y->data, x->data, ptq_tensor_nbytes(x));
        return PTQ_OK;
    }
    for (int d = 0; d < r; d++) {
        if (!s->active[d]) continue;
        const resize_axis *ax = &s->ax[d];
        size_t outer = 1, inner = 1;
        for (int k = 0; k < d; k++) outer *= (size_t)cur[k];
        for (int k = d + 1; k < r; k++) inner *= (size_t)cur[k];
        int64_t in_len = cur[d];
        float *dst = d == last ? (float *)y->data : bufs[pass++ & 1];
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
        for (size_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < ax->out; j++) {
                float *drow = dst + (o * (size_t)ax->out + (size_t)j) * inner;
                const int64_t *ix = ax->idx + j * ax->taps;
                const float *w = ax->w + j * ax->taps;
                for (size_t i = 0; i < inner; i++) drow[i] = 0.0f;
                for (int64_t t = 0; t < ax->taps; t++) {
                    const float *srow = src + (o * (size_t)in_len + (size_t)ix[t]) * inner;
                    float wt = w[t];
                    if (ax->taps == 1) {
                        memcpy(drow, srow, sizeof(float) * inner);
                        break;
                    }
                    for (size_t i = 0; i < inner; i++) drow[i] += wt * srow[i];
                }
            }
        cur[d] = ax->out;
        src = dst;
    }
    if (s->has_outside) { /* tf_crop_and_resize: points outside the input get extrapolation_value */
        size_t n = ptq_tensor_numel(y);
        float *yd = y->data;
        for (size_t i = 0; i < n; i++) {
            size_t rem = i;
            int out = 0;
            for (int d = r - 1; d >= 0; d--) {
                size_t k = rem % (size_t)y->dims[d];
                rem /= (size_t)y->dims[d];
                if (s->active[d] && s->ax[d].outside[k]) out = 1;
            }
            if (out) yd[i] = s->extrapolation;
        }
    }
    return PTQ_OK;
}

WEAK const ptq_op_def op_resize = {resize_infer, resize_run, resize_free, 0};
WEAK const ptq_op_def op_upsample = {resize_infer, resize_run, resize_free, 0};
