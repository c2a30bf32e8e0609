/* pool.c: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool over [N, C, D1..Dk],
 * k = 1..3 spatial dims, float32.
 *
 * Geometry (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) comes from
 * ptq_spatial_resolve (runtime/shape.c). Internally the spatial dims are right-aligned
 * into three (a 2-D pool is 1 x H x W), so one kernel serves 1-D, 2-D and 3-D.
 *
 * Semantics (ONNX, opsets 1..19):
 *   MaxPool      padding never wins: only taps inside the input are compared; the first
 *                maximum in scan order wins a tie; NaN never wins (as in ONNX Runtime):
 *                a window of NaN and -inf gives -inf, index of its first tap; a window
 *                with no tap inside the input gives -inf, index -1.
 *                Indices (optional output 1, int64): flat index into X, row-major over
 *                the spatial dims, or column-major with storage_order = 1.
 *   AveragePool  sum of the taps inside the input divided by their count, or with
 *                count_include_pad = 1 by the taps inside the padded input
 *                [-pad_begin, in + pad_end) (ceil_mode windows are clipped there).
 * Every output is summed in the same tap order (dim 0, 1, 2 ascending), whatever the
 * thread count; threads split the N*C planes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/sum.h"
#include "runtime/op.h"
#include "runtime/shape.h"

/* Attribute values beyond this are refused before any geometry arithmetic. */
#define POOL_ATTR_MAX ((int64_t)1 << 31)

typedef struct {
    int is_max;
    int count_include_pad;
    int storage_order;
    int nsp;
    /* geometry right-aligned into 3 dims; unused leading dims have size 1 */
    int64_t in[3], out[3], k[3], str[3], dil[3], pb[3], pe[3];
} pool_state;

/* ------------------------------------------------------------ shared checks */

static ptq_status need_f32_input(const ptq_op_ctx *ctx)
{
    if (ctx->in[0]->dtype != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, only float32 is supported", ptq_dtype_name(ctx->in[0]->dtype));
    return PTQ_OK;
}

/* Refuses absurd integer attributes (they would overflow the geometry arithmetic). */
static ptq_status check_ints_range(const ptq_op_ctx *ctx, const char *name)
{
    size_t n = 0;
    const int64_t *v = ptq_attr_ints(ctx->node, name, &n);
    for (size_t i = 0; v && i < n; i++)
        if (v[i] < -POOL_ATTR_MAX || v[i] > POOL_ATTR_MAX)
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute %s[%zu] = %lld is out of range", name, i, (long long)v[i]);
    return PTQ_OK;
}

static ptq_status check_flag(const ptq_op_ctx *ctx, const char *name, int64_t *out)
{
    int64_t v = ptq_attr_int(ctx->node, name, 0);
    if (v != 0 && v != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute %s = %lld, expected 0 or 1", name, (long long)v);
    *out = v;
    return PTQ_OK;
}

/* ------------------------------------------------------------ MaxPool, AveragePool */

static ptq_status pool_infer(ptq_op_ctx *ctx, int is_max)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if ((st = need_f32_input(ctx)) != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    int nsp = x->rank - 2;
    if (nsp < 1 || nsp > 3)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input rank %d, expected 3 to 5 (1 to 3 spatial dims)", x->rank);
    if (ctx->n_out < 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "output Y is missing");
    if (ctx->n_out > (is_max ? 2 : 1))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected at most %d", ctx->n_out, is_max ? 2 : 1);
    static const char *const int_attrs[] = {"kernel_shape", "strides", "dilations", "pads"};
    for (size_t i = 0; i < sizeof int_attrs / sizeof int_attrs[0]; i++)
        if ((st = check_ints_range(ctx, int_attrs[i])) != PTQ_OK) return st;
    int64_t ceil_mode, cip = 0, order = 0;
    if ((st = check_flag(ctx, "ceil_mode", &ceil_mode)) != PTQ_OK) return st;
    if (!is_max && (st = check_flag(ctx, "count_include_pad", &cip)) != PTQ_OK) return st;
    if (is_max && (st = check_flag(ctx, "storage_order", &order)) != PTQ_OK) return st;

    ptq_spatial sp;
    if ((st = ptq_spatial_resolve(ctx, nsp, &x->dims[2], NULL, &sp)) != PTQ_OK) return st;

    pool_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->is_max = is_max;
    s->count_include_pad = (int)cip;
    s->storage_order = (int)order;
    s->nsp = nsp;
    for (int d = 0; d < 3; d++) {
        s->in[d] = s->out[d] = s->k[d] = s->str[d] = s->dil[d] = 1;
        s->pb[d] = s->pe[d] = 0;
    }
    for (int d = 0; d < nsp; d++) {
        int e = 3 - nsp + d;
        s->in[e] = sp.in[d];
        s->out[e] = sp.out[d];
        s->k[e] = sp.kernel[d];
        s->str[e] = sp.stride[d];
        s->dil[e] = sp.dilation[d];
        s->pb[e] = sp.pad_begin[d];
        s->pe[e] = sp.pad_end[d];
        if (sp.out[d] < 1)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "output spatial dim %d would be %lld", d, (long long)sp.out[d]);
    }
    for (int o = 0; o < ctx->n_out; o++) {
        ptq_tensor *y = ctx->out[o];
        if (!y) continue;
        y->dtype = o == 0 ? PTQ_F32 : PTQ_I64;
        y->rank = x->rank;
        y->dims[0] = x->dims[0];
        y->dims[1] = x->dims[1];
        for (int d = 0; d < nsp; d++) y->dims[2 + d] = sp.out[d];
    }
    ctx->scratch_bytes = 0;
    return PTQ_OK;
}

static ptq_status max_pool_infer(ptq_op_ctx *ctx)
{
    return pool_infer(ctx, 1);
}

static ptq_status average_pool_infer(ptq_op_ctx *ctx)
{
    return pool_infer(ctx, 0);
}

/* Taps t in [*lo, *hi) of one dim whose input position start + t*dil lies in [0, in). */
static void valid_taps(int64_t start, int64_t k, int64_t dil, int64_t in, int64_t *lo, int64_t *hi)
{
    int64_t a = start < 0 ? (-start + dil - 1) / dil : 0;
    int64_t b = start > in - 1 ? 0 : (in - 1 - start) / dil + 1;
    if (b > k) b = k;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* Taps of one dim inside the padded input [-pb, in + pe) (count_include_pad divisor). */
static int64_t padded_taps(int64_t start, int64_t k, int64_t dil, int64_t in, int64_t pb, int64_t pe)
{
    int64_t lo, hi;
    valid_taps(start + pb, k, dil, in + pb + pe, &lo, &hi);
    return hi - lo;
}

/* Reference kernel: one output at a time, every tap bounds-checked. Also the Indices path. */
static void pool_plane_ref(const pool_state *s, const float *xp, float *yp, int64_t *ip, int64_t plane_base)
{
    for (int64_t o0 = 0; o0 < s->out[0]; o0++)
        for (int64_t o1 = 0; o1 < s->out[1]; o1++)
            for (int64_t o2 = 0; o2 < s->out[2]; o2++) {
                int64_t st0 = o0 * s->str[0] - s->pb[0], st1 = o1 * s->str[1] - s->pb[1], st2 = o2 * s->str[2] - s->pb[2];
                int64_t a0, b0, a1, b1, a2, b2;
                valid_taps(st0, s->k[0], s->dil[0], s->in[0], &a0, &b0);
                valid_taps(st1, s->k[1], s->dil[1], s->in[1], &a1, &b1);
                valid_taps(st2, s->k[2], s->dil[2], s->in[2], &a2, &b2);
                float acc = s->is_max ? -INFINITY : 0.0f;
                int64_t best = -1, first = -1; /* first: index when no tap beats -inf (all -inf or NaN) */
                for (int64_t t0 = a0; t0 < b0; t0++)
                    for (int64_t t1 = a1; t1 < b1; t1++)
                        for (int64_t t2 = a2; t2 < b2; t2++) {
                            int64_t i0 = st0 + t0 * s->dil[0], i1 = st1 + t1 * s->dil[1], i2 = st2 + t2 * s->dil[2];
                            int64_t flat = (i0 * s->in[1] + i1) * s->in[2] + i2;
                            float v = xp[flat];
                            if (s->is_max) {
                                if (v > acc) {
                                    acc = v;
                                    best = flat;
                                } else if (first < 0) {
                                    first = flat;
                                }
                            } else {
                                acc += v;
                            }
                        }
                size_t oi = (size_t)((o0 * s->out[1] + o1) * s->out[2] + o2);
                if (!s->is_max) {
                    int64_t cnt = s->count_include_pad
                                      ? padded_taps(st0, s->k[0], s->dil[0], s->in[0], s->pb[0], s->pe[0]) *
                                            padded_taps(st1, s->k[1], s->dil[1], s->in[1], s->pb[1], s->pe[1]) *
                                            padded_taps(st2, s->k[2], s->dil[2], s->in[2], s->pb[2], s->pe[2])
                                      : (b0 - a0) * (b1 - a1) * (b2 - a2);
                    acc = acc / (float)cnt; /* cnt 0 only for an all-padding window: NaN, as 0/0 */
                }
                yp[oi] = acc;
                if (ip) {
                    int64_t f = best >= 0 ? best : first;
                    if (f >= 0 && s->storage_order) {
                        /* column-major over the real spatial dims: the first one varies fastest */
                        int64_t c0 = f / (s->in[1] * s->in[2]), c1 = (f / s->in[2]) % s->in[1], c2 = f % s->in[2];
                        if (s->nsp == 1) f = c2;
                        else if (s->nsp == 2) f = c1 + c2 * s->in[1];
                        else f = c0 + (c1 + c2 * s->in[1]) * s->in[0];
                    }
                    ip[oi] = f >= 0 ? plane_base + f : -1;
                }
            }
}

/* One row of outputs o2 in [lo, hi) whose windows lie inside the input along dim 2:
 * acc[o2] op= row[o2*stride + t*dil - pb] for every tap t. STRIDE is a literal at the
 * call sites below so the loop vectorises. */
static inline __attribute__((always_inline)) void row_taps(float *acc, const float *row, int64_t lo, int64_t hi,
                                                          int64_t stride, int64_t k, int64_t dil, int64_t pb,
                                                          int is_max)
{
    for (int64_t t = 0; t < k; t++) {
        const float *q = row + t * dil - pb;
        if (is_max) {
            for (int64_t o = lo; o < hi; o++) {
                float v = q[o * stride];
                acc[o] = v > acc[o] ? v : acc[o];
            }
        } else {
            for (int64_t o = lo; o < hi; o++) acc[o] += q[o * stride];
        }
    }
}

/* Fast kernel for Y only: per output row, the interior outputs (whole window inside
 * along dim 2) run as vector loops over the row, the border ones tap by tap. The tap
 * order per output is the reference's, so both give identical sums. */
static void pool_plane_fast(const pool_state *s, const float *xp, float *yp)
{
    int64_t in2 = s->in[2], out2 = s->out[2], k2 = s->k[2], d2 = s->dil[2], str2 = s->str[2], pb2 = s->pb[2];
    /* interior along dim 2: o*str - pb >= 0 and o*str - pb + (k-1)*dil <= in - 1 */
    int64_t lo = (pb2 + str2 - 1) / str2;
    int64_t last = in2 - 1 - (k2 - 1) * d2 + pb2;
    int64_t hi = last < 0 ? 0 : last / str2 + 1;
    if (hi > out2) hi = out2;
    if (lo > out2) lo = out2;
    if (hi < lo) hi = lo;
    for (int64_t o0 = 0; o0 < s->out[0]; o0++)
        for (int64_t o1 = 0; o1 < s->out[1]; o1++) {
            int64_t st0 = o0 * s->str[0] - s->pb[0], st1 = o1 * s->str[1] - s->pb[1];
            int64_t a0, b0, a1, b1;
            valid_taps(st0, s->k[0], s->dil[0], s->in[0], &a0, &b0);
            valid_taps(st1, s->k[1], s->dil[1], s->in[1], &a1, &b1);
            float *acc = yp + (o0 * s->out[1] + o1) * out2;
            float init = s->is_max ? -INFINITY : 0.0f;
            for (int64_t o = 0; o < out2; o++) acc[o] = init;
            for (int64_t t0 = a0; t0 < b0; t0++)
                for (int64_t t1 = a1; t1 < b1; t1++) {
                    int64_t i0 = st0 + t0 * s->dil[0], i1 = st1 + t1 * s->dil[1];
                    const float *row = xp + (i0 * s->in[1] + i1) * in2;
                    /* border outputs, left and right of the interior */
                    for (int64_t o = 0; o < out2; o++) {
                        if (o == lo) o = hi; /* skip the interior */
                        if (o >= out2) break;
                        int64_t st2 = o * str2 - pb2, a2, b2;
                        valid_taps(st2, k2, d2, in2, &a2, &b2);
                        for (int64_t t2 = a2; t2 < b2; t2++) {
                            float v = row[st2 + t2 * d2];
                            if (s->is_max) acc[o] = v > acc[o] ? v : acc[o];
                            else acc[o] += v;
                        }
                    }
                    if (hi <= lo) continue;
                    if (s->is_max) {
                        if (str2 == 1) row_taps(acc, row, lo, hi, 1, k2, d2, pb2, 1);
                        else if (str2 == 2) row_taps(acc, row, lo, hi, 2, k2, d2, pb2, 1);
                        else row_taps(acc, row, lo, hi, str2, k2, d2, pb2, 1);
                    } else {
                        if (str2 == 1) row_taps(acc, row, lo, hi, 1, k2, d2, pb2, 0);
                        else if (str2 == 2) row_taps(acc, row, lo, hi, 2, k2, d2, pb2, 0);
                        else row_taps(acc, row, lo, hi, str2, k2, d2, pb2, 0);
                    }
                }
            if (!s->is_max) {
                int64_t c01;
                if (s->count_include_pad)
                    c01 = padded_taps(st0, s->k[0], s->dil[0], s->in[0], s->pb[0], s->pe[0]) *
                          padded_taps(st1, s->k[1], s->dil[1], s->in[1], s->pb[1], s->pe[1]);
                else
                    c01 = (b0 - a0) * (b1 - a1);
                for (int64_t o = 0; o < out2; o++) {
                    int64_t st2 = o * str2 - pb2, c2;
                    if (o >= lo && o < hi) {
                        c2 = k2; /* interior: every tap inside, padded or not */
                    } else if (s->count_include_pad) {
                        c2 = padded_taps(st2, k2, d2, in2, pb2, s->pe[2]);
                    } else {
                        int64_t a2, b2;
                        valid_taps(st2, k2, d2, in2, &a2, &b2);
                        c2 = b2 - a2;
                    }
                    acc[o] = acc[o] / (float)(c01 * c2);
                }
            }
        }
}

static ptq_status pool_run(ptq_op_ctx *ctx)
{
    const pool_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    int64_t planes = x->dims[0] * x->dims[1];
    int64_t in_sz = s->in[0] * s->in[1] * s->in[2], out_sz = s->out[0] * s->out[1] * s->out[2];
    const float *xd = x->data;
    float *yd = ctx->out[0]->data;
    int64_t *id = ctx->n_out > 1 && ctx->out[1] ? ctx->out[1]->data : NULL;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        if (id)
            pool_plane_ref(s, xd + p * in_sz, yd + p * out_sz, id + p * out_sz, p * in_sz);
        else
            pool_plane_fast(s, xd + p * in_sz, yd + p * out_sz);
    }
    return PTQ_OK;
}

const ptq_op_def op_max_pool = {max_pool_infer, pool_run, ptq_op_free_state, 0};
const ptq_op_def op_average_pool = {average_pool_infer, pool_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ GlobalAveragePool, GlobalMaxPool */

static ptq_status global_pool_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    if ((st = need_f32_input(ctx)) != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->rank < 3) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected at least 3 (N, C, spatial dims)", x->rank);
    if (ctx->n_out != 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected 1", ctx->n_out);
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    ptq_shape_copy(y, x);
    for (int d = 2; d < x->rank; d++) y->dims[d] = 1;
    ctx->scratch_bytes = 0;
    return PTQ_OK;
}


static ptq_status global_average_pool_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    int64_t planes = x->dims[0] * x->dims[1];
    size_t inner = 1;
    for (int d = 2; d < x->rank; d++) inner *= (size_t)x->dims[d];
    const float *xd = x->data;
    float *yd = ctx->out[0]->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t p = 0; p < planes; p++) yd[p] = kern_sum8_f32(xd + (size_t)p * inner, inner) / (float)inner;
    return PTQ_OK;
}

static ptq_status global_max_pool_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    int64_t planes = x->dims[0] * x->dims[1];
    size_t inner = 1;
    for (int d = 2; d < x->rank; d++) inner *= (size_t)x->dims[d];
    const float *xd = x->data;
    float *yd = ctx->out[0]->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const float *q = xd + (size_t)p * inner;
        float m = -INFINITY;
        for (size_t i = 0; i < inner; i++) m = q[i] > m ? q[i] : m;
        yd[p] = m;
    }
    return PTQ_OK;
}

const ptq_op_def op_global_average_pool = {global_pool_infer, global_average_pool_run, NULL, 0};
const ptq_op_def op_global_max_pool = {global_pool_infer, global_max_pool_run, NULL, 0};
