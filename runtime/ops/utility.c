/* utility.c: Cast, CastLike, CumSum, Trilu, EyeLike, OneHot, Det (ReverseSequence: index.c).
 *
 *   Cast / CastLike  every numeric dtype and bool to every other. Integers convert exactly
 *                    (or wrap to the narrower type, as C does for unsigned and ONNX Runtime for
 *                    all); floats round to nearest even (float64 -> float16 in one rounding);
 *                    a float to an integer truncates toward zero, saturating at the type's range,
 *                    NaN giving 0 (C leaves these undefined); anything -> bool is v != 0.
 *                    bfloat16, string and float8 are not ptq dtypes.
 *   CumSum           along a constant scalar axis; exclusive and reverse attributes; sums
 *                    in order along the axis in the input's type (float16 through float).
 *   Trilu            the upper (default) or lower triangle of the last two dims, diagonal
 *                    offset k (optional constant scalar input); the rest zeroed.
 *   EyeLike          2-D, ones on diagonal k; dtype attribute or the input's.
 *   OneHot           indices (any numeric, negative counts from depth), depth (constant scalar),
 *                    values [off, on]; a new axis of size depth at `axis` (default -1);
 *                    indices outside [-depth, depth) give a row of `off`.
 *   Det              [*, M, M] float: LU with partial pivoting in double, one matrix per thread.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/kernels/sgemm.h"
#include "runtime/ops/half.h"
#include "runtime/ops/nary.h"
#include "runtime/shape.h"

/* ------------------------------------------------------------ Cast, CastLike */

static int castable(ptq_dtype d)
{
    return ptq_dtype_is_float(d) || ptq_dtype_is_int(d) || d == PTQ_BOOL;
}

static ptq_status cast_infer_to(ptq_op_ctx *ctx, ptq_dtype to)
{
    ptq_dtype from = ctx->in[0]->dtype;
    if (!castable(from) || !castable(to))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "cast from %s to %s (type %d) is not supported", ptq_dtype_name(from),
                ptq_dtype_name(to), (int)to);
    ctx->out[0]->dtype = to;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status cast_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_attr *a = ptq_node_attr(ctx->node, "to");
    if (!a) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute 'to' is missing");
    int64_t to = ptq_attr_int(ctx->node, "to", 0);
    if (to <= 0 || to >= PTQ_DTYPE_COUNT) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "cast to type %lld is not supported", (long long)to);
    return cast_infer_to(ctx, (ptq_dtype)to);
}

static ptq_status cast_like_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    return cast_infer_to(ctx, ctx->in[1]->dtype);
}

/* Double to float16 in one rounding: round to float with round-to-odd, then to nearest even
 * (float carries 13 more bits than float16, so the two steps equal one). */
static uint16_t f64_to_f16(double v)
{
    float f = (float)v;
    if ((double)f != v && f == f && !isinf(f)) {
        uint32_t b;
        memcpy(&b, &f, sizeof b);
        if (!(b & 1u)) f = (double)f > v ? nextafterf(f, -INFINITY) : nextafterf(f, INFINITY);
    }
    return ptq_f32_to_f16(f);
}

/* Float v to an integer type of range [lo, hi]: truncated, saturated, NaN -> 0. */
static int64_t f_to_i(double v, double lo, double hi)
{
    if (v != v) return 0;
    v = trunc(v);
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return hi >= 9.2e18 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}

/* float32 <-> float16 over a block, in vectors of the widest ISA (the same bits on each: integer
 * operations and one exact float addition, half.h) */
static void block_to_half_c(const float *a, uint16_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) b[i] = half_from_f32(a[i]);
}

/* vcvtps2ph rounds to nearest even as half_from_f32 does (subnormals, overflow to infinity); a
 * block holding a NaN is done again by half_from_f32, whose NaN is always 0x7e00 with the sign */
__attribute__((target("avx512f")))
static void block_to_half_avx512(const float *a, uint16_t *b, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(a + i);
        _mm256_storeu_si256((__m256i *)(b + i), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) block_to_half_c(a + i, b + i, 16);
    }
    block_to_half_c(a + i, b + i, n - i);
}

__attribute__((target("avx2,f16c")))
static void block_to_half_f16c(const float *a, uint16_t *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(a + i);
        _mm_storeu_si128((__m128i *)(b + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) block_to_half_c(a + i, b + i, 8);
    }
    block_to_half_c(a + i, b + i, n - i);
}

/* isa: kern_isa_current() (PTQ_ISA picks one to test), the same bits on each */
static void block_to_half(const float *a, uint16_t *b, size_t n, kern_isa isa)
{
    if (isa == KERN_ISA_AVX512) block_to_half_avx512(a, b, n);
    else if (isa == KERN_ISA_AVX2 && kern_cpu_has_f16c()) block_to_half_f16c(a, b, n);
    else block_to_half_c(a, b, n);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void block_from_half(const uint16_t *a, float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) b[i] = half_to_f32(a[i]);
}

enum { HALF_BLOCK = 16384 };

static ptq_status cast_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    size_t n = ptq_tensor_numel(y);
    if (x->dtype == y->dtype) {
        memcpy(y->data, x->data, ptq_tensor_nbytes(y));
        return PTQ_OK;
    }
    if (x->dtype == PTQ_F32 && y->dtype == PTQ_F16) { /* the float16 round trips of mixed-precision graphs */
        const float *a = x->data;
        uint16_t *b = y->data;
        size_t nb = (n + HALF_BLOCK - 1) / HALF_BLOCK;
        kern_isa isa = kern_isa_current();
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (nb > 4)
        for (size_t k = 0; k < nb; k++) block_to_half(a + k * HALF_BLOCK, b + k * HALF_BLOCK, k + 1 < nb ? HALF_BLOCK : n - k * HALF_BLOCK, isa);
        return PTQ_OK;
    }
    if (x->dtype == PTQ_F16 && y->dtype == PTQ_F32) {
        const uint16_t *a = x->data;
        float *b = y->data;
        size_t nb = (n + HALF_BLOCK - 1) / HALF_BLOCK;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (nb > 4)
        for (size_t k = 0; k < nb; k++) block_from_half(a + k * HALF_BLOCK, b + k * HALF_BLOCK, k + 1 < nb ? HALF_BLOCK : n - k * HALF_BLOCK);
        return PTQ_OK;
    }
    int from_f = ptq_dtype_is_float(x->dtype), from_u64 = x->dtype == PTQ_U64;
    for (size_t i = 0; i < n; i++) {
        if (y->dtype == PTQ_BOOL) {
            ((uint8_t *)y->data)[i] = from_f ? ptq_tensor_get_f64(x, i) != 0.0 : ptq_load_u64(x, i) != 0;
            continue;
        }
        if (from_f) {
            double v = ptq_tensor_get_f64(x, i);
            switch (y->dtype) {
            case PTQ_F32: ((float *)y->data)[i] = (float)v; break;
            case PTQ_F64: ((double *)y->data)[i] = v; break;
            case PTQ_F16: ((uint16_t *)y->data)[i] = f64_to_f16(v); break;
            case PTQ_I8: ((int8_t *)y->data)[i] = (int8_t)f_to_i(v, INT8_MIN, INT8_MAX); break;
            case PTQ_I16: ((int16_t *)y->data)[i] = (int16_t)f_to_i(v, INT16_MIN, INT16_MAX); break;
            case PTQ_I32: ((int32_t *)y->data)[i] = (int32_t)f_to_i(v, INT32_MIN, INT32_MAX); break;
            case PTQ_I64: ((int64_t *)y->data)[i] = f_to_i(v, -9223372036854775808.0, 9223372036854775807.0); break;
            case PTQ_U8: ((uint8_t *)y->data)[i] = (uint8_t)f_to_i(v, 0, UINT8_MAX); break;
            case PTQ_U16: ((uint16_t *)y->data)[i] = (uint16_t)f_to_i(v, 0, UINT16_MAX); break;
            case PTQ_U32: ((uint32_t *)y->data)[i] = (uint32_t)f_to_i(v, 0, UINT32_MAX); break;
            default: /* U64 */
                ((uint64_t *)y->data)[i] = v != v || v <= 0 ? 0 : (v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v);
                break;
            }
            continue;
        }
        /* from an integer or bool: exact conversions (C rounds int -> float to nearest) */
        if (from_u64) {
            uint64_t u = ((const uint64_t *)x->data)[i];
            switch (y->dtype) {
            case PTQ_F32: ((float *)y->data)[i] = (float)u; break;
            case PTQ_F64: ((double *)y->data)[i] = (double)u; break;
            case PTQ_F16: ((uint16_t *)y->data)[i] = f64_to_f16((double)u); break;
            default: ptq_store_i64(y, i, (int64_t)u); break;
            }
        } else {
            int64_t v = ptq_tensor_get_i64(x, i);
            switch (y->dtype) {
            case PTQ_F32: ((float *)y->data)[i] = (float)v; break;
            case PTQ_F64: ((double *)y->data)[i] = (double)v; break;
            case PTQ_F16: ((uint16_t *)y->data)[i] = f64_to_f16((double)v); break;
            default: ptq_store_i64(y, i, v); break;
            }
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_cast = {cast_infer, cast_run, NULL, 0};
const ptq_op_def op_cast_like = {cast_like_infer, cast_run, NULL, 0};

/* The float16 rounding of a float32 value, back in float32 (quant_fp16_simulate's Cast(float16)
 * -> Cast(float) pair, fused by the planner): per element half_to_f32(half_from_f32(x)), so the
 * pair's output bit for bit. F16C where the CPU has it and PTQ_ISA allows vectors: vcvtps2ph
 * (half_round8) where the CPU has it and PTQ_ISA allows vectors. */
static void round_half_c(const float *a, float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) b[i] = half_to_f32(half_from_f32(a[i]));
}

__attribute__((target("avx2,f16c")))
static void round_half_f16c(const float *a, float *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(b + i, half_round8(_mm256_loadu_ps(a + i)));
    round_half_c(a + i, b + i, n - i);
}

void ptq_round_f16_serial(const float *a, float *b, size_t n)
{
    if (kern_isa_current() != KERN_ISA_GENERIC && kern_cpu_has_f16c()) round_half_f16c(a, b, n);
    else round_half_c(a, b, n);
}

void ptq_round_f16(const float *a, float *b, size_t n, int nthreads)
{
    size_t nb = (n + HALF_BLOCK - 1) / HALF_BLOCK;
#pragma omp parallel for num_threads(nthreads > 0 ? nthreads : 1) schedule(static) if (nb > 4)
    for (size_t k = 0; k < nb; k++)
        ptq_round_f16_serial(a + k * HALF_BLOCK, b + k * HALF_BLOCK, k + 1 < nb ? HALF_BLOCK : n - k * HALF_BLOCK);
}

static ptq_status round_f16_infer(ptq_op_ctx *ctx)
{
    if (ctx->in[0]->dtype != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input has dtype %s, supported: float32", ptq_dtype_name(ctx->in[0]->dtype));
    ctx->out[0]->dtype = PTQ_F32;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    return PTQ_OK;
}

static ptq_status round_f16_run(ptq_op_ctx *ctx)
{
    ptq_round_f16(ctx->in[0]->data, ctx->out[0]->data, ptq_tensor_numel(ctx->in[0]), ctx->nthreads);
    return PTQ_OK;
}

const ptq_op_def ptq_op_round_f16 = {round_f16_infer, round_f16_run, NULL, 0};

/* ------------------------------------------------------------ CumSum */

typedef struct {
    size_t outer, len, inner;
    int exclusive, reverse;
} cumsum_state;

static ptq_status cumsum_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *a = ctx->in[1];
    ptq_dtype dt = x->dtype;
    if (dt != PTQ_F32 && dt != PTQ_F64 && dt != PTQ_F16 && dt != PTQ_I32 && dt != PTQ_I64 && dt != PTQ_U32 && dt != PTQ_U64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s is not supported", ptq_dtype_name(dt));
    if (a->dtype != PTQ_I32 && a->dtype != PTQ_I64) OP_FAIL(ctx, PTQ_ERR_FORMAT, "axis is %s, expected int32 or int64", ptq_dtype_name(a->dtype));
    if (ptq_tensor_numel(a) != 1 || a->rank > 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis must be a scalar");
    if (!a->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "axis input is not constant (needs an initializer or a folded value)");
    int64_t axis, ex = ptq_attr_int(ctx->node, "exclusive", 0), rev = ptq_attr_int(ctx->node, "reverse", 0);
    if ((ex != 0 && ex != 1) || (rev != 0 && rev != 1))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "exclusive = %lld, reverse = %lld, expected 0 or 1", (long long)ex, (long long)rev);
    if (x->rank == 0 || ptq_norm_axis(ptq_tensor_get_i64(a, 0), x->rank, &axis))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for input rank %d", (long long)ptq_tensor_get_i64(a, 0), x->rank);
    cumsum_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->outer = s->inner = 1;
    s->len = (size_t)x->dims[axis];
    for (int d = 0; d < x->rank; d++) {
        if (d < axis) s->outer *= (size_t)x->dims[d];
        if (d > axis) s->inner *= (size_t)x->dims[d];
    }
    s->exclusive = (int)ex;
    s->reverse = (int)rev;
    ctx->out[0]->dtype = dt;
    ptq_shape_copy(ctx->out[0], x);
    return PTQ_OK;
}

static ptq_status cumsum_run(ptq_op_ctx *ctx)
{
    const cumsum_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    ptq_dtype dt = x->dtype;
    for (size_t o = 0; o < s->outer; o++)
        for (size_t in = 0; in < s->inner; in++) {
            double facc = 0.0;
            float f32 = 0.0f;
            uint64_t iacc = 0; /* integers wrap as their type does */
            for (size_t jj = 0; jj < s->len; jj++) {
                size_t j = s->reverse ? s->len - 1 - jj : jj;
                size_t i = (o * s->len + j) * s->inner + in;
                if (s->exclusive) {
                    if (dt == PTQ_F32 || dt == PTQ_F16) ptq_store_f64(y, i, (double)f32);
                    else if (dt == PTQ_F64) ((double *)y->data)[i] = facc;
                    else ptq_store_i64(y, i, (int64_t)iacc);
                }
                if (dt == PTQ_F32 || dt == PTQ_F16) f32 += (float)ptq_tensor_get_f64(x, i);
                else if (dt == PTQ_F64) facc += ((const double *)x->data)[i];
                else iacc += ptq_load_u64(x, i);
                if (!s->exclusive) {
                    if (dt == PTQ_F32 || dt == PTQ_F16) ptq_store_f64(y, i, (double)f32);
                    else if (dt == PTQ_F64) ((double *)y->data)[i] = facc;
                    else ptq_store_i64(y, i, (int64_t)iacc);
                }
            }
        }
    return PTQ_OK;
}

const ptq_op_def op_cum_sum = {cumsum_infer, cumsum_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ Trilu */

static ptq_status trilu_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *k = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (x->rank < 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected at least 2", x->rank);
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s is not supported", ptq_dtype_name(x->dtype));
    int64_t upper = ptq_attr_int(ctx->node, "upper", 1);
    if (upper != 0 && upper != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "upper = %lld, expected 0 or 1", (long long)upper);
    int64_t kv = 0;
    if (k) {
        if (k->dtype != PTQ_I64) OP_FAIL(ctx, PTQ_ERR_FORMAT, "k is %s, expected int64", ptq_dtype_name(k->dtype));
        if (ptq_tensor_numel(k) != 1 || k->rank > 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "k must be a scalar");
        if (!k->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "k input is not constant (needs an initializer or a folded value)");
        kv = ptq_tensor_get_i64(k, 0);
    }
    int64_t *s = malloc(2 * sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    s[0] = upper;
    s[1] = kv;
    ctx->state = s;
    ctx->out[0]->dtype = x->dtype;
    ptq_shape_copy(ctx->out[0], x);
    return PTQ_OK;
}

static ptq_status trilu_run(ptq_op_ctx *ctx)
{
    const int64_t *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1], upper = s[0], k = s[1];
    size_t es = ptq_dtype_size(x->dtype), mats = R && C ? ptq_tensor_numel(x) / (size_t)(R * C) : 0;
    for (size_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < R; i++) {
            const char *src = (const char *)x->data + (m * (size_t)(R * C) + (size_t)(i * C)) * es;
            char *dst = (char *)y->data + (m * (size_t)(R * C) + (size_t)(i * C)) * es;
            for (int64_t j = 0; j < C; j++) {
                int keep = upper ? j - i >= k : j - i <= k;
                if (keep) memcpy(dst + (size_t)j * es, src + (size_t)j * es, es);
                else memset(dst + (size_t)j * es, 0, es);
            }
        }
    return PTQ_OK;
}

const ptq_op_def op_trilu = {trilu_infer, trilu_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ EyeLike */

static ptq_status eye_like_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->rank != 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected 2", x->rank);
    ptq_dtype dt = ptq_node_attr(ctx->node, "dtype") ? (ptq_dtype)ptq_attr_int(ctx->node, "dtype", 1) : x->dtype;
    if (!castable(dt)) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s (%d) is not supported", ptq_dtype_name(dt), (int)dt);
    ctx->out[0]->dtype = dt;
    ptq_shape_copy(ctx->out[0], x);
    return PTQ_OK;
}

static ptq_status eye_like_run(ptq_op_ctx *ctx)
{
    ptq_tensor *y = ctx->out[0];
    int64_t k = ptq_attr_int(ctx->node, "k", 0), R = y->dims[0], C = y->dims[1];
    memset(y->data, 0, ptq_tensor_nbytes(y));
    for (int64_t i = 0; i < R; i++) {
        int64_t j = i + k;
        if (j < 0 || j >= C) continue;
        if (ptq_dtype_is_float(y->dtype)) ptq_store_f64(y, (size_t)(i * C + j), 1.0);
        else ptq_store_i64(y, (size_t)(i * C + j), 1);
    }
    return PTQ_OK;
}

const ptq_op_def op_eye_like = {eye_like_infer, eye_like_run, NULL, 0};

/* ------------------------------------------------------------ OneHot */

typedef struct {
    int64_t depth;
    size_t outer, inner; /* indices split at axis */
} onehot_state;

static ptq_status one_hot_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *ix = ctx->in[0], *dp = ctx->in[1], *v = ctx->in[2];
    if (!ptq_dtype_is_float(ix->dtype) && !ptq_dtype_is_int(ix->dtype))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "indices are %s, expected a numeric type", ptq_dtype_name(ix->dtype));
    if (ptq_tensor_numel(dp) != 1 || dp->rank > 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "depth must be a scalar");
    if (!dp->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "depth input is not constant (needs an initializer or a folded value)");
    if (v->rank != 1 || v->dims[0] != 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "values must be 1-D of 2 elements [off, on]");
    if (ptq_dtype_size(v->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "values dtype %s is not supported", ptq_dtype_name(v->dtype));
    double dd = ptq_tensor_get_f64(dp, 0);
    if (!(dd >= 1.0) || dd > 1e12) OP_FAIL(ctx, PTQ_ERR_SHAPE, "depth %g must be at least 1", dd);
    if (ix->rank + 1 > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output rank %d too large", ix->rank + 1);
    int64_t axis;
    if (ptq_norm_axis(ptq_attr_int(ctx->node, "axis", -1), ix->rank + 1, &axis))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for output rank %d", (long long)ptq_attr_int(ctx->node, "axis", -1), ix->rank + 1);
    onehot_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->depth = (int64_t)dd;
    s->outer = s->inner = 1;
    ptq_tensor *y = ctx->out[0];
    y->dtype = v->dtype;
    y->rank = ix->rank + 1;
    for (int d = 0, k = 0; d < y->rank; d++) {
        if (d == axis) {
            y->dims[d] = s->depth;
            continue;
        }
        y->dims[d] = ix->dims[k];
        if (d < axis) s->outer *= (size_t)ix->dims[k];
        else s->inner *= (size_t)ix->dims[k];
        k++;
    }
    return PTQ_OK;
}

static ptq_status one_hot_run(ptq_op_ctx *ctx)
{
    const onehot_state *s = ctx->state;
    const ptq_tensor *ix = ctx->in[0], *v = ctx->in[2];
    ptq_tensor *y = ctx->out[0];
    size_t es = ptq_dtype_size(y->dtype), D = (size_t)s->depth;
    const char *off = v->data, *on = (const char *)v->data + es;
    for (size_t o = 0; o < s->outer; o++)
        for (size_t d = 0; d < D; d++)
            for (size_t in = 0; in < s->inner; in++)
                memcpy((char *)y->data + ((o * D + d) * s->inner + in) * es, off, es);
    for (size_t o = 0; o < s->outer; o++)
        for (size_t in = 0; in < s->inner; in++) {
            size_t k = o * s->inner + in;
            int64_t i = ptq_dtype_is_float(ix->dtype) ? (int64_t)ptq_tensor_get_f64(ix, k) : ptq_tensor_get_i64(ix, k);
            if (i < 0) i += s->depth;
            if (i < 0 || i >= s->depth) continue;
            memcpy((char *)y->data + ((o * D + (size_t)i) * s->inner + in) * es, on, es);
        }
    return PTQ_OK;
}

const ptq_op_def op_one_hot = {one_hot_infer, one_hot_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ Det */

static ptq_status det_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (!ptq_dtype_is_float(x->dtype)) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, expected a float type", ptq_dtype_name(x->dtype));
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "input must be [*, M, M]");
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = x->rank - 2;
    for (int d = 0; d < y->rank; d++) y->dims[d] = x->dims[d];
    int64_t m = x->dims[x->rank - 1];
    ctx->scratch_bytes = sizeof(double) * (size_t)(m * m) * (size_t)ctx->nthreads;
    return PTQ_OK;
}

static ptq_status det_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    size_t M = (size_t)x->dims[x->rank - 1], mats = ptq_tensor_numel(y);
    double *scratch = ctx->scratch;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t b = 0; b < mats; b++) {
        double *a = scratch + (size_t)omp_get_thread_num() * M * M, det = 1.0;
        for (size_t i = 0; i < M * M; i++) a[i] = ptq_tensor_get_f64(x, b * M * M + i);
        for (size_t c = 0; c < M && det != 0.0; c++) {
            size_t p = c;
            for (size_t r = c + 1; r < M; r++)
                if (fabs(a[r * M + c]) > fabs(a[p * M + c])) p = r;
            if (a[p * M + c] == 0.0) {
                det = 0.0;
                break;
            }
            if (p != c) {
                for (size_t j = 0; j < M; j++) {
                    double t = a[c * M + j];
                    a[c * M + j] = a[p * M + j];
                    a[p * M + j] = t;
                }
                det = -det;
            }
            det *= a[c * M + c];
            for (size_t r = c + 1; r < M; r++) {
                double f = a[r * M + c] / a[c * M + c];
                for (size_t j = c; j < M; j++) a[r * M + j] -= f * a[c * M + j];
            }
        }
        ptq_store_f64(y, b, det);
    }
    return PTQ_OK;
}

const ptq_op_def op_det = {det_infer, det_run, NULL, 0};

