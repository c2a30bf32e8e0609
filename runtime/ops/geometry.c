/* geometry.c: CenterCropPad (opset 18), Col2Im (opset 18), AffineGrid (opset 20).
 *
 *   CenterCropPad: each listed axis cropped or zero-padded to the target length about its
 *     centre (the extra element of an odd difference goes to the end), any dtype.
 *   Col2Im: the inverse of im2col, [N, C * prod(block), L] -> [N, C, image...], overlapping
 *     patches summed; threads split (n, c) planes and each plane sums its patches in one
 *     order (blocks row-major, then kernel positions), so the result does not depend on the
 *     thread count. float32.
 *   AffineGrid: the sampling grid of GridSample for 2-D ([N, 2, 3] -> [N, H, W, 2]) or 3-D
 *     ([N, 3, 4] -> [N, D, H, W, 3]) affine matrices, base coordinates in [-1, 1] (pixel
 *     centres, or corners with align_corners). float32.
 * Target shapes (shape, image_shape, block_shape, size) must be known at plan time. */
#include <stdlib.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/shape.h"

/* Reads a constant 1-D int64 input into v (at most cap entries); fails naming it. */
static ptq_status const_ints(ptq_op_ctx *ctx, int i, const char *what, int64_t *v, int cap, int *n)
{
    const ptq_tensor *t = ctx->in[i];
    if (t->dtype != PTQ_I64 || t->rank != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%s must be a 1-D int64 tensor", what);
    if (t->dims[0] > cap) OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s has %lld entries, at most %d", what, (long long)t->dims[0], cap);
    if (!t->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "%s input is not constant (ptq needs it at plan time)", what);
    *n = (int)t->dims[0];
    for (int k = 0; k < *n; k++) v[k] = ((const int64_t *)t->data)[k];
    return PTQ_OK;
}

/* ------------------------------------------------------------ CenterCropPad */

typedef struct {
    int64_t shift[PTQ_MAX_RANK]; /* input index = output index + shift (per axis) */
} ccp_state;

static ptq_status ccp_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (ptq_dtype_size(x->dtype) == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s", ptq_dtype_name(x->dtype));
    int64_t shape[PTQ_MAX_RANK];
    int ns;
    if ((st = const_ints(ctx, 1, "shape", shape, PTQ_MAX_RANK, &ns)) != PTQ_OK) return st;
    size_t na = 0;
    const int64_t *axes = ptq_attr_ints(ctx->node, "axes", &na);
    int nax = axes ? (int)na : x->rank;
    if (ns != nax) OP_FAIL(ctx, PTQ_ERR_SHAPE, "shape has %d entries for %d axes", ns, nax);
    ccp_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    ptq_shape_copy(y, x);
    int seen[PTQ_MAX_RANK] = {0};
    for (int k = 0; k < nax; k++) {
        int64_t a = k;
        if (axes && ptq_norm_axis(axes[k], x->rank, &a))
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)axes[k], x->rank);
        if (seen[a]++) OP_FAIL(ctx, PTQ_ERR_FORMAT, "axis %lld listed twice", (long long)a);
        if (shape[k] < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "shape[%d] = %lld, expected >= 0", k, (long long)shape[k]);
        int64_t dim = x->dims[a];
        s->shift[a] = dim >= shape[k] ? (dim - shape[k]) / 2 : -((shape[k] - dim) / 2);
        y->dims[a] = shape[k];
    }
    return PTQ_OK;
}

static ptq_status ccp_run(ptq_op_ctx *ctx)
{
    const ccp_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    size_t es = ptq_dtype_size(x->dtype), n = ptq_tensor_numel(y);
    int r = y->rank;
    int64_t xs[PTQ_MAX_RANK];
    ptq_strides(x, xs);
    int64_t last = r ? y->dims[r - 1] : 1;
    /* one output row (last axis) at a time: its in-range part is one copy */
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t row = 0; row < (last ? n / (size_t)last : 0); row++) {
        char *yo = (char *)y->data + row * (size_t)last * es;
        memset(yo, 0, (size_t)last * es);
        int64_t off = 0, rest = (int64_t)row;
        int inside = 1;
        for (int d = r - 2; d >= 0; d--) {
            int64_t c = rest % y->dims[d] + s->shift[d];
            rest /= y->dims[d];
            if (c < 0 || c >= x->dims[d]) inside = 0;
            off += c * xs[d];
        }
        if (!inside) continue;
        int64_t sh = r ? s->shift[r - 1] : 0, xd = r ? x->dims[r - 1] : 1;
        int64_t lo = -sh > 0 ? -sh : 0, hi = xd - sh < last ? xd - sh : last; /* output range that is inside */
        if (hi > lo) memcpy(yo + (size_t)lo * es, (const char *)x->data + (size_t)(off + lo + sh) * es, (size_t)(hi - lo) * es);
    }
    return PTQ_OK;
}

const ptq_op_def op_center_crop_pad = {ccp_infer, ccp_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ Col2Im */

typedef struct {
    int nsp;
    int64_t img[3], blk[3], dil[3], str[3], pb[3], nb[3]; /* nb: blocks per spatial dim */
    int64_t kprod, L;
} col2im_state;

static ptq_status col2im_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s, expected float32", ptq_dtype_name(x->dtype));
    if (x->rank != 3) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected 3 ([N, C * prod(block_shape), L])", x->rank);
    col2im_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    int ni, nbk;
    if ((st = const_ints(ctx, 1, "image_shape", s->img, 3, &ni)) != PTQ_OK) return st;
    if ((st = const_ints(ctx, 2, "block_shape", s->blk, 3, &nbk)) != PTQ_OK) return st;
    if (ni < 1 || ni != nbk) OP_FAIL(ctx, PTQ_ERR_SHAPE, "image_shape has %d entries, block_shape %d: expected equal, 1 to 3", ni, nbk);
    s->nsp = ni;
    size_t nd = 0, ns = 0, np = 0;
    const int64_t *dil = ptq_attr_ints(ctx->node, "dilations", &nd), *str = ptq_attr_ints(ctx->node, "strides", &ns);
    const int64_t *pads = ptq_attr_ints(ctx->node, "pads", &np);
    if ((dil && nd != (size_t)ni) || (str && ns != (size_t)ni) || (pads && np != (size_t)(2 * ni)))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "dilations, strides need %d entries and pads %d", ni, 2 * ni);
    s->kprod = 1;
    s->L = 1;
    for (int d = 0; d < ni; d++) {
        s->dil[d] = dil ? dil[d] : 1;
        s->str[d] = str ? str[d] : 1;
        s->pb[d] = pads ? pads[d] : 0;
        int64_t pe = pads ? pads[ni + d] : 0;
        if (s->img[d] < 1 || s->blk[d] < 1 || s->dil[d] < 1 || s->str[d] < 1 || s->pb[d] < 0 || pe < 0)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "dim %d: image %lld, block %lld, dilation %lld, stride %lld, pads %lld/%lld out of range", d,
                    (long long)s->img[d], (long long)s->blk[d], (long long)s->dil[d], (long long)s->str[d], (long long)s->pb[d],
                    (long long)pe);
        int64_t span = s->img[d] + s->pb[d] + pe - s->dil[d] * (s->blk[d] - 1) - 1;
        if (span < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "dim %d: block %lld (dilated) larger than the padded image", d, (long long)s->blk[d]);
        s->nb[d] = span / s->str[d] + 1;
        s->kprod *= s->blk[d];
        s->L *= s->nb[d];
    }
    if (x->dims[1] % s->kprod)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "input dim 1 is %lld, not a multiple of prod(block_shape) = %lld", (long long)x->dims[1],
                (long long)s->kprod);
    if (x->dims[2] != s->L)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "input has %lld blocks, the geometry gives %lld", (long long)x->dims[2], (long long)s->L);
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    y->rank = 2 + ni;
    y->dims[0] = x->dims[0];
    y->dims[1] = x->dims[1] / s->kprod;
    for (int d = 0; d < ni; d++) y->dims[2 + d] = s->img[d];
    return PTQ_OK;
}

static ptq_status col2im_run(ptq_op_ctx *ctx)
{
    const col2im_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int64_t planes = y->dims[0] * y->dims[1], img = 1;
    for (int d = 0; d < s->nsp; d++) img *= s->img[d];
    const float *X = x->data;
    float *Y = y->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        float *yp = Y + p * img;
        memset(yp, 0, (size_t)img * sizeof(float));
        const float *xp = X + p * s->kprod * s->L; /* rows c * kprod .. of image n */
        for (int64_t l = 0; l < s->L; l++) {
            int64_t bpos[3] = {0, 0, 0}, rest = l;
            for (int d = s->nsp - 1; d >= 0; d--) bpos[d] = rest % s->nb[d], rest /= s->nb[d];
            for (int64_t k = 0; k < s->kprod; k++) {
                int64_t krest = k, off = 0, mul = 1;
                int inside = 1;
                for (int d = s->nsp - 1; d >= 0; d--) {
                    int64_t kd = krest % s->blk[d];
                    krest /= s->blk[d];
                    int64_t pos = bpos[d] * s->str[d] - s->pb[d] + kd * s->dil[d];
                    if (pos < 0 || pos >= s->img[d]) inside = 0;
                    off += pos * mul;
                    mul *= s->img[d];
                }
                if (inside) yp[off] += xp[k * s->L + l];
            }
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_col2im = {col2im_infer, col2im_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ AffineGrid */

typedef struct {
    int nsp;              /* 2 or 3 */
    int64_t n, sz[3];     /* spatial output sizes (H, W) or (D, H, W) */
    int align_corners;
} ag_state;

static ptq_status affine_grid_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *th = ctx->in[0];
    int64_t size[5];
    int nsz;
    if ((st = const_ints(ctx, 1, "size", size, 5, &nsz)) != PTQ_OK) return st;
    if (nsz != 4 && nsz != 5) OP_FAIL(ctx, PTQ_ERR_SHAPE, "size has %d entries, expected 4 (N, C, H, W) or 5 (N, C, D, H, W)", nsz);
    int nsp = nsz - 2;
    if (th->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "theta dtype %s, expected float32", ptq_dtype_name(th->dtype));
    if (th->rank != 3 || th->dims[0] != size[0] || th->dims[1] != nsp || th->dims[2] != nsp + 1)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "theta must be [%lld, %d, %d] for size of %d entries", (long long)size[0], nsp, nsp + 1, nsz);
    int64_t ac = ptq_attr_int(ctx->node, "align_corners", 0);
    if (ac != 0 && ac != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "align_corners %lld, expected 0 or 1", (long long)ac);
    ag_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->nsp = nsp;
    s->n = size[0];
    s->align_corners = (int)ac;
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    y->rank = nsp + 2;
    y->dims[0] = size[0];
    for (int d = 0; d < nsp; d++) {
        if (size[2 + d] < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "size[%d] = %lld, expected >= 0", 2 + d, (long long)size[2 + d]);
        s->sz[d] = size[2 + d];
        y->dims[1 + d] = size[2 + d];
    }
    y->dims[nsp + 1] = nsp;
    return PTQ_OK;
}

/* base coordinate i of n in [-1, 1]: pixel centres, or corners with align_corners */
static float ag_base(int64_t i, int64_t n, int ac)
{
    if (ac) return n > 1 ? -1.0f + 2.0f * (float)i / (float)(n - 1) : -1.0f;
    return -1.0f + (2.0f * (float)i + 1.0f) / (float)n;
}

static ptq_status affine_grid_run(ptq_op_ctx *ctx)
{
    const ag_state *s = ctx->state;
    const float *T = ctx->in[0]->data;
    float *Y = ctx->out[0]->data;
    int nsp = s->nsp;
    int64_t pts = 1;
    for (int d = 0; d < nsp; d++) pts *= s->sz[d];
    int64_t total = s->n * pts;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t q = 0; q < total; q++) {
        int64_t n = q / pts, rest = q % pts, idx[3] = {0, 0, 0};
        for (int d = nsp - 1; d >= 0; d--) idx[d] = rest % s->sz[d], rest /= s->sz[d];
        /* homogeneous base point (x, y[, z], 1): x runs along the last spatial dim */
        float b[4];
        for (int k = 0; k < nsp; k++) b[k] = ag_base(idx[nsp - 1 - k], s->sz[nsp - 1 - k], s->align_corners);
        b[nsp] = 1.0f;
        const float *t = T + n * nsp * (nsp + 1);
        for (int r = 0; r < nsp; r++) {
            float v = 0.0f;
            for (int k = 0; k <= nsp; k++) v += t[r * (nsp + 1) + k] * b[k];
            Y[q * nsp + r] = v;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_affine_grid = {affine_grid_infer, affine_grid_run, ptq_op_free_state, 0};
