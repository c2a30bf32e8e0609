/* qlinear.c: the integer operator set: DynamicQuantizeLinear, MatMulInteger, ConvInteger,
 * QLinearMatMul, QLinearConv (int8/uint8 operands, exact int32 accumulation).
 *
 *   DynamicQuantizeLinear  x float32 -> y uint8, scale = (max(0, max x) - min(0, min x)) / 255,
 *                          zp = saturate(round(0 - min / scale)), y = saturate(round(x / scale) + zp),
 *                          in float32 as the spec's formula; round is half to even (rintf).
 *                          An all-zero x gives scale 1, zero point 0 and y 0 as ONNX Runtime
 *                          (ONNX's Python reference gives scale 1/255; the spec says nothing);
 *                          a NaN in x is an error.
 *   MatMulInteger          int32 sum of (a - a_zp)(b - b_zp); numpy matmul shapes with batch
 *                          broadcasting; a_zp scalar or per row of A (M values: [M] or [M, 1]),
 *                          b_zp scalar or per column of B (N values); per-batch zero points
 *                          are refused.
 *   ConvInteger            Conv geometry (runtime/shape.h), group, int32 sum of (x - x_zp)(w - w_zp).
 *   QLinearMatMul, QLinearConv  the int32 sum (plus QLinearConv's int32 bias) times the float32
 *                          multiplier a_scale * b_scale[j] / y_scale, rounded half to even, plus
 *                          y_zp, saturated to y's type. Per-column (MatMul) or per-output-channel
 *                          (Conv) scales and zero points of the weight are honoured.
 * Operands minus their zero points are converted once to int16 in scratch (the reduced
 * dimension innermost: B transposed, convolution channels last); sums are int32
 * with two's-complement wrap-around (the spec's accumulator), exact and order-free, so the
 * thread count cannot change a result. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/ops/nary.h"
#include "runtime/shape.h"

static int is_q8(ptq_dtype d)
{
    return d == PTQ_I8 || d == PTQ_U8;
}

static inline int32_t q8(const ptq_tensor *t, size_t i)
{
    return t->dtype == PTQ_I8 ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
}

/* Zero point (or 0 when absent) of index i of a per-tensor or 1-D per-index tensor. */
static inline int32_t zp_at(const ptq_tensor *z, size_t i)
{
    if (!z) return 0;
    return q8(z, ptq_tensor_numel(z) == 1 ? 0 : i);
}

static inline float scale_at(const ptq_tensor *s, size_t i)
{
    return ((const float *)s->data)[ptq_tensor_numel(s) == 1 ? 0 : i];
}

/* Requantizes acc with multiplier m: round half to even, add zp, saturate to dt. */
static inline void requant_store(ptq_tensor *y, size_t i, int32_t acc, float m, int32_t zp)
{
    float v = rintf((float)acc * m) + (float)zp;
    float lo = y->dtype == PTQ_I8 ? -128.0f : 0.0f, hi = y->dtype == PTQ_I8 ? 127.0f : 255.0f;
    v = v < lo ? lo : (v > hi ? hi : v);
    if (y->dtype == PTQ_I8) ((int8_t *)y->data)[i] = (int8_t)v;
    else ((uint8_t *)y->data)[i] = (uint8_t)v;
}

/* Checks that input i, when present, is int8/uint8 of the dtype `like` has. */
static ptq_status check_zp(const ptq_op_ctx *ctx, int i, const ptq_tensor *like, size_t max_len, const char *what)
{
    const ptq_tensor *z = ctx->n_in > i ? ctx->in[i] : NULL;
    if (!z) return PTQ_OK;
    if (z->dtype != like->dtype)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "%s is %s, its operand is %s", what, ptq_dtype_name(z->dtype), ptq_dtype_name(like->dtype));
    size_t n = ptq_tensor_numel(z); /* any shape holding them: [M], [M, 1], [1, N] */
    if (n != 1 && n != max_len) OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s has %zu values, expected 1 or %zu", what, n, max_len);
    return PTQ_OK;
}

static ptq_status check_scale(const ptq_op_ctx *ctx, int i, size_t max_len, const char *what)
{
    const ptq_tensor *s = ctx->in[i];
    if (s->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%s is %s, expected float32", what, ptq_dtype_name(s->dtype));
    size_t n = ptq_tensor_numel(s);
    if (s->rank > 1 || (n != 1 && n != max_len)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s has %zu values, expected 1 or %zu", what, n, max_len);
    return PTQ_OK;
}

/* ------------------------------------------------------------ DynamicQuantizeLinear */

static ptq_status dql_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if (ctx->in[0]->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, expected float32", ptq_dtype_name(ctx->in[0]->dtype));
    if (ctx->n_out != 3) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected 3", ctx->n_out);
    for (int o = 0; o < 3; o++)
        if (!ctx->out[o]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "output %d is missing", o);
    ctx->out[0]->dtype = PTQ_U8;
    ptq_shape_copy(ctx->out[0], ctx->in[0]);
    ctx->out[1]->dtype = PTQ_F32;
    ctx->out[1]->rank = 0;
    ctx->out[2]->dtype = PTQ_U8;
    ctx->out[2]->rank = 0;
    return PTQ_OK;
}

static ptq_status dql_run(ptq_op_ctx *ctx)
{
    const float *x = ctx->in[0]->data;
    size_t n = ptq_tensor_numel(ctx->in[0]);
    float lo = 0.0f, hi = 0.0f;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i]) OP_FAIL(ctx, PTQ_ERR_ARG, "input element %zu is NaN", i);
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f; /* an all-zero x: scale 1, as ONNX Runtime */
    float zpf = rintf(0.0f - lo / scale);
    zpf = zpf < 0.0f ? 0.0f : (zpf > 255.0f ? 255.0f : zpf);
    uint8_t *y = ctx->out[0]->data;
    for (size_t i = 0; i < n; i++) {
        float v = rintf(x[i] / scale) + zpf;
        y[i] = (uint8_t)(v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v));
    }
    *(float *)ctx->out[1]->data = scale;
    *(uint8_t *)ctx->out[2]->data = (uint8_t)zpf;
    return PTQ_OK;
}

const ptq_op_def op_dynamic_quantize_linear = {dql_infer, dql_run, NULL, 0};

/* ------------------------------------------------------------ MatMulInteger, QLinearMatMul */

typedef struct {
    int qlinear;
    int ia, ib, iaz, ibz; /* input indices of A, B and their zero points (-1: none) */
    int a1, b1;           /* A, B were 1-D */
    int64_t M, K, N;
    int rank;             /* batch rank of the output */
    int64_t bdims[PTQ_MAX_RANK], sa[PTQ_MAX_RANK], sb[PTQ_MAX_RANK]; /* batch dims and strides (in matrices) */
} mm_state;

static ptq_status mm_infer_common(ptq_op_ctx *ctx, int qlinear)
{
    ptq_status st = qlinear ? ptq_op_check_inputs(ctx, 8, 8) : ptq_op_check_inputs(ctx, 2, 4);
    if (st != PTQ_OK) return st;
    mm_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->qlinear = qlinear;
    s->ia = 0;
    s->ib = qlinear ? 3 : 1;
    s->iaz = qlinear ? 2 : 2;
    s->ibz = qlinear ? 5 : 3;
    const ptq_tensor *a = ctx->in[s->ia], *b = ctx->in[s->ib];
    if (!is_q8(a->dtype) || !is_q8(b->dtype))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "A is %s and B %s, expected int8 or uint8", ptq_dtype_name(a->dtype), ptq_dtype_name(b->dtype));
    if (a->rank < 1 || b->rank < 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "A and B need rank 1 or more");
    s->a1 = a->rank == 1;
    s->b1 = b->rank == 1;
    s->M = s->a1 ? 1 : a->dims[a->rank - 2];
    s->K = a->dims[a->rank - 1];
    int64_t kb = s->b1 ? b->dims[0] : b->dims[b->rank - 2];
    s->N = s->b1 ? 1 : b->dims[b->rank - 1];
    if (kb != s->K) OP_FAIL(ctx, PTQ_ERR_SHAPE, "A has K = %lld, B has %lld", (long long)s->K, (long long)kb);
    /* batch broadcasting */
    ptq_tensor ba = {0}, bb = {0}, out = {0};
    ba.rank = a->rank > 2 ? a->rank - 2 : 0;
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    for (int d = 0; d < ba.rank; d++) ba.dims[d] = a->dims[d];
    for (int d = 0; d < bb.rank; d++) bb.dims[d] = b->dims[d];
    if ((st = ptq_broadcast(&ba, &bb, &out)) != PTQ_OK) {
        ptq_error_prefix("%s '%s': ", ctx->node->op_type, ctx->node->name);
        return st;
    }
    s->rank = out.rank;
    for (int d = 0; d < out.rank; d++) s->bdims[d] = out.dims[d];
    ptq_broadcast_strides(&ba, &out, s->sa);
    ptq_broadcast_strides(&bb, &out, s->sb);
    if ((st = check_zp(ctx, s->iaz, a, (size_t)s->M, "A's zero point")) != PTQ_OK) return st;
    if ((st = check_zp(ctx, s->ibz, b, (size_t)s->N, "B's zero point")) != PTQ_OK) return st;
    ptq_tensor *y = ctx->out[0];
    y->rank = 0;
    for (int d = 0; d < out.rank; d++) y->dims[y->rank++] = out.dims[d];
    if (!s->a1) y->dims[y->rank++] = s->M;
    if (!s->b1) y->dims[y->rank++] = s->N;
    ctx->scratch_bytes = sizeof(int16_t) * (ptq_tensor_numel(b) + (size_t)s->K * (size_t)ctx->nthreads);
    if (qlinear) {
        if ((st = check_scale(ctx, 1, (size_t)s->M, "a_scale")) != PTQ_OK) return st;
        if ((st = check_scale(ctx, 4, (size_t)s->N, "b_scale")) != PTQ_OK) return st;
        if ((st = check_scale(ctx, 6, 1, "y_scale")) != PTQ_OK) return st;
        const ptq_tensor *yz = ctx->in[7];
        if (!is_q8(yz->dtype) || ptq_tensor_numel(yz) != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "y_zero_point must be one int8 or uint8");
        y->dtype = yz->dtype;
    } else {
        y->dtype = PTQ_I32;
    }
    return PTQ_OK;
}

static ptq_status mmi_infer(ptq_op_ctx *ctx) { return mm_infer_common(ctx, 0); }
static ptq_status qlmm_infer(ptq_op_ctx *ctx) { return mm_infer_common(ctx, 1); }

/* Dot product of two int16 vectors with int32 wrap-around (products fit int32; the sum
 * wraps as the spec's int32 accumulator does, without C's signed overflow). */
static inline int32_t dot_i16(const int16_t *a, const int16_t *b, size_t k)
{
    uint32_t acc = 0;
    for (size_t i = 0; i < k; i++) acc += (uint32_t)((int32_t)a[i] * (int32_t)b[i]);
    return (int32_t)acc;
}

/* B - b_zp packed as int16 [batch][N][K] (transposed) into scratch, then every output row
 * converts its row of A - a_zp to int16 (per-thread scratch) and takes N dot products. */
static ptq_status mm_run(ptq_op_ctx *ctx)
{
    const mm_state *s = ctx->state;
    const ptq_tensor *a = ctx->in[s->ia], *b = ctx->in[s->ib];
    const ptq_tensor *az = ctx->n_in > s->iaz ? ctx->in[s->iaz] : NULL, *bz = ctx->n_in > s->ibz ? ctx->in[s->ibz] : NULL;
    ptq_tensor *y = ctx->out[0];
    size_t M = (size_t)s->M, K = (size_t)s->K, N = (size_t)s->N;
    size_t nb = K && N ? ptq_tensor_numel(b) / (K * N) : 0, batches = 1;
    for (int d = 0; d < s->rank; d++) batches *= (size_t)s->bdims[d];
    int16_t *bt = ctx->scratch, *arow = bt + nb * N * K;
    for (size_t q = 0; q < nb; q++)
        for (size_t k = 0; k < K; k++)
            for (size_t n = 0; n < N; n++)
                bt[(q * N + n) * K + k] = (int16_t)(q8(b, (q * K + k) * N + n) - zp_at(bz, n));
    float ysc = s->qlinear ? ((const float *)ctx->in[6]->data)[0] : 0.0f;
    int32_t yzp = s->qlinear ? q8(ctx->in[7], 0) : 0;
    size_t rows = batches * M;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (rows * N * K > 65536)
    for (size_t row = 0; row < rows; row++) {
        size_t bi = row / M, m = row % M, rem = bi, oa = 0, ob = 0;
        for (int d = s->rank - 1; d >= 0; d--) {
            size_t k = rem % (size_t)s->bdims[d];
            rem /= (size_t)s->bdims[d];
            oa += k * (size_t)s->sa[d];
            ob += k * (size_t)s->sb[d];
        }
        int16_t *ar = arow + (size_t)omp_get_thread_num() * K;
        int32_t za = zp_at(az, m);
        for (size_t k = 0; k < K; k++) ar[k] = (int16_t)(q8(a, (oa * M + m) * K + k) - za);
        for (size_t n = 0; n < N; n++) {
            int32_t acc = dot_i16(ar, bt + (ob * N + n) * K, K);
            size_t o = row * N + n;
            if (s->qlinear) requant_store(y, o, acc, scale_at(ctx->in[1], m) * scale_at(ctx->in[4], n) / ysc, yzp);
            else ((int32_t *)y->data)[o] = acc;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_mat_mul_integer = {mmi_infer, mm_run, ptq_op_free_state, 0};
const ptq_op_def op_q_linear_mat_mul = {qlmm_infer, mm_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ ConvInteger, QLinearConv */

typedef struct {
    int qlinear, ix, iw, ixz, iwz, ib;
    int64_t group;
    ptq_spatial sp;
} qconv_state;

static ptq_status qconv_infer_common(ptq_op_ctx *ctx, int qlinear)
{
    ptq_status st = qlinear ? ptq_op_check_inputs(ctx, 8, 9) : ptq_op_check_inputs(ctx, 2, 4);
    if (st != PTQ_OK) return st;
    qconv_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->qlinear = qlinear;
    s->ix = 0;
    s->iw = qlinear ? 3 : 1;
    s->ixz = 2;
    s->iwz = qlinear ? 5 : 3;
    s->ib = qlinear ? 8 : -1;
    const ptq_tensor *x = ctx->in[s->ix], *w = ctx->in[s->iw];
    if (!is_q8(x->dtype) || !is_q8(w->dtype))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "x is %s and w %s, expected int8 or uint8", ptq_dtype_name(x->dtype), ptq_dtype_name(w->dtype));
    if (x->rank < 3 || x->rank > 5 || w->rank != x->rank)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "x rank %d and w rank %d, expected equal ranks 3 to 5", x->rank, w->rank);
    s->group = ptq_attr_int(ctx->node, "group", 1);
    int64_t C = x->dims[1], M = w->dims[0];
    if (s->group < 1 || C % s->group || M % s->group || w->dims[1] != C / s->group)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "group %lld does not fit %lld input channels, w %lld x %lld", (long long)s->group,
                (long long)C, (long long)M, (long long)w->dims[1]);
    int nsp = x->rank - 2;
    if ((st = ptq_spatial_resolve(ctx, nsp, &x->dims[2], &w->dims[2], &s->sp)) != PTQ_OK) return st;
    if ((st = check_zp(ctx, s->ixz, x, 1, "x's zero point")) != PTQ_OK) return st;
    if ((st = check_zp(ctx, s->iwz, w, (size_t)M, "w's zero point")) != PTQ_OK) return st;
    ctx->scratch_bytes = sizeof(int16_t) * (ptq_tensor_numel(x) + ptq_tensor_numel(w));
    ptq_tensor *y = ctx->out[0];
    y->rank = x->rank;
    y->dims[0] = x->dims[0];
    y->dims[1] = M;
    for (int d = 0; d < nsp; d++) y->dims[2 + d] = s->sp.out[d];
    if (qlinear) {
        if ((st = check_scale(ctx, 1, 1, "x_scale")) != PTQ_OK) return st;
        if ((st = check_scale(ctx, 4, (size_t)M, "w_scale")) != PTQ_OK) return st;
        if ((st = check_scale(ctx, 6, 1, "y_scale")) != PTQ_OK) return st;
        const ptq_tensor *yz = ctx->in[7];
        if (!is_q8(yz->dtype) || ptq_tensor_numel(yz) != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "y_zero_point must be one int8 or uint8");
        const ptq_tensor *bias = ctx->n_in > 8 ? ctx->in[8] : NULL;
        if (bias && (bias->dtype != PTQ_I32 || ptq_tensor_numel(bias) != (size_t)M))
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "bias must be int32 with %lld values", (long long)M);
        y->dtype = yz->dtype;
    } else {
        y->dtype = PTQ_I32;
    }
    return PTQ_OK;
}

static ptq_status conv_integer_infer(ptq_op_ctx *ctx) { return qconv_infer_common(ctx, 0); }
static ptq_status qlinear_conv_infer(ptq_op_ctx *ctx) { return qconv_infer_common(ctx, 1); }

/* x - x_zp and w - w_zp as int16 in scratch, channels innermost within each group
 * (x: [N][G][spatial][Cg], w: [M][kernel][Cg]); every output element then sums, over the
 * kernel taps inside the input, int32 dot products over the group's channels (wrapping). */
static ptq_status qconv_run(ptq_op_ctx *ctx)
{
    const qconv_state *s = ctx->state;
    const ptq_spatial *sp = &s->sp;
    const ptq_tensor *x = ctx->in[s->ix], *w = ctx->in[s->iw];
    const ptq_tensor *xz = ctx->n_in > s->ixz ? ctx->in[s->ixz] : NULL, *wz = ctx->n_in > s->iwz ? ctx->in[s->iwz] : NULL;
    const ptq_tensor *bias = s->ib >= 0 && ctx->n_in > s->ib ? ctx->in[s->ib] : NULL;
    ptq_tensor *y = ctx->out[0];
    int nsp = sp->nsp;
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0], G = s->group, Cg = C / G, Mg = M / G;
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
    for (int d = 0; d < nsp; d++) {
        in[d] = sp->in[d], out[d] = sp->out[d], k[d] = sp->kernel[d];
        st[d] = sp->stride[d], dl[d] = sp->dilation[d], pb[d] = sp->pad_begin[d];
    }
    size_t in_sz = (size_t)(in[0] * in[1] * in[2]), out_sz = (size_t)(out[0] * out[1] * out[2]), k_sz = (size_t)(k[0] * k[1] * k[2]);
    size_t cg = (size_t)Cg;
    int16_t *xs16 = ctx->scratch, *ws16 = xs16 + ptq_tensor_numel(x);
    int32_t zx = zp_at(xz, 0);
    for (int64_t n = 0; n < N; n++) /* [N][C][sp] -> [N][G][sp][Cg] */
        for (int64_t c = 0; c < C; c++) {
            size_t g = (size_t)(c / Cg), cc = (size_t)(c % Cg), src = (size_t)(n * C + c) * in_sz;
            int16_t *dst = xs16 + ((size_t)n * (size_t)G + g) * in_sz * cg + cc;
            for (size_t i = 0; i < in_sz; i++) dst[i * cg] = (int16_t)(q8(x, src + i) - zx);
        }
    for (int64_t m = 0; m < M; m++) /* [M][Cg][kernel] -> [M][kernel][Cg] */
        for (size_t c = 0; c < cg; c++)
            for (size_t t = 0; t < k_sz; t++)
                ws16[((size_t)m * k_sz + t) * cg + c] = (int16_t)(q8(w, ((size_t)m * cg + c) * k_sz + t) - zp_at(wz, (size_t)m));
    float xs = s->qlinear ? scale_at(ctx->in[1], 0) : 0.0f, ys = s->qlinear ? scale_at(ctx->in[6], 0) : 0.0f;
    int32_t yzp = s->qlinear ? q8(ctx->in[7], 0) : 0;
    size_t total = (size_t)(N * M);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t nm = 0; nm < total; nm++) {
        int64_t n = (int64_t)nm / M, m = (int64_t)nm % M, g = m / Mg;
        float mult = s->qlinear ? xs * scale_at(ctx->in[4], (size_t)m) / ys : 0.0f;
        const int16_t *xg = xs16 + (size_t)(n * G + g) * in_sz * cg, *wm = ws16 + (size_t)m * k_sz * cg;
        uint32_t b0 = bias ? (uint32_t)((const int32_t *)bias->data)[m] : 0;
        for (size_t o = 0; o < out_sz; o++) {
            int64_t o0 = (int64_t)o / (out[1] * out[2]), o1 = ((int64_t)o / out[2]) % out[1], o2 = (int64_t)o % out[2];
            uint32_t acc = b0;
            for (int64_t k0 = 0; k0 < k[0]; k0++) {
                int64_t i0 = o0 * st[0] - pb[0] + k0 * dl[0];
                if (i0 < 0 || i0 >= in[0]) continue;
                for (int64_t k1 = 0; k1 < k[1]; k1++) {
                    int64_t i1 = o1 * st[1] - pb[1] + k1 * dl[1];
                    if (i1 < 0 || i1 >= in[1]) continue;
                    for (int64_t k2 = 0; k2 < k[2]; k2++) {
                        int64_t i2 = o2 * st[2] - pb[2] + k2 * dl[2];
                        if (i2 < 0 || i2 >= in[2]) continue;
                        size_t xi = (size_t)((i0 * in[1] + i1) * in[2] + i2), t = (size_t)((k0 * k[1] + k1) * k[2] + k2);
                        acc += (uint32_t)dot_i16(xg + xi * cg, wm + t * cg, cg);
                    }
                }
            }
            size_t yi = nm * out_sz + o;
            if (s->qlinear) requant_store(y, yi, (int32_t)acc, mult, yzp);
            else ((int32_t *)y->data)[yi] = (int32_t)acc;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_conv_integer = {conv_integer_infer, qconv_run, ptq_op_free_state, 0};
const ptq_op_def op_q_linear_conv = {qlinear_conv_infer, qconv_run, ptq_op_free_state, 0};
