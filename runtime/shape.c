#include "shape.h"

#include <string.h>

void ptq_shape_copy(ptq_tensor *dst, const ptq_tensor *src)
{
    dst->rank = src->rank;
    for (int i = 0; i < src->rank; i++) dst->dims[i] = src->dims[i];
}

int ptq_norm_axis(int64_t axis, int rank, int64_t *out)
{
    if (axis < -rank || axis >= (rank ? rank : 1)) return -1;
    *out = axis < 0 ? axis + rank : axis;
    return 0;
}

ptq_status ptq_broadcast_n(const ptq_tensor *const *ts, int n, ptq_tensor *out)
{
    int rank = 0;
    for (int k = 0; k < n; k++)
        if (ts[k]->rank > rank) rank = ts[k]->rank;
    for (int d = 0; d < rank; d++) {
        int64_t dim = 1;
        for (int k = 0; k < n; k++) {
            int off = rank - ts[k]->rank;
            if (d < off) continue;
            int64_t v = ts[k]->dims[d - off];
            if (v == dim || v == 1) continue;
            if (dim == 1) {
                dim = v;
                continue;
            }
            char a[96], b[96];
            ptq_error("shapes %s and %s do not broadcast", ptq_shape_str(ts[0], a, sizeof a),
                      ptq_shape_str(ts[k], b, sizeof b));
            return PTQ_ERR_SHAPE;
        }
        out->dims[d] = dim;
    }
    out->rank = rank;
    return PTQ_OK;
}

ptq_status ptq_broadcast(const ptq_tensor *a, const ptq_tensor *b, ptq_tensor *out)
{
    const ptq_tensor *ts[2] = {a, b};
    return ptq_broadcast_n(ts, 2, out);
}

void ptq_strides(const ptq_tensor *t, int64_t *strides)
{
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= t->dims[d];
    }
}

void ptq_broadcast_strides(const ptq_tensor *t, const ptq_tensor *out, int64_t *strides)
{
    int off = out->rank - t->rank;
    int64_t s = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
        if (d < off) {
            strides[d] = 0;
            continue;
        }
        int64_t dim = t->dims[d - off];
        strides[d] = dim == 1 ? 0 : s;
        s *= dim;
    }
}

static ptq_status read_ints(const ptq_op_ctx *ctx, const char *name, int nsp, int64_t def, int64_t *dst)
{
    size_t n;
    const int64_t *v = ptq_attr_ints(ctx->node, name, &n);
    for (int i = 0; i < nsp; i++) dst[i] = def;
    if (!v) return PTQ_OK;
    if ((int)n != nsp) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute %s has %zu values, expected %d", name, n, nsp);
    for (int i = 0; i < nsp; i++) dst[i] = v[i];
    return PTQ_OK;
}

static ptq_status resolve_common(const ptq_op_ctx *ctx, int nsp, const int64_t *in, const int64_t *kernel,
                                 ptq_spatial *sp)
{
    ptq_status st;
    size_t n;
    memset(sp, 0, sizeof *sp);
    if (nsp < 1 || nsp > 3) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "%d spatial dims (1 to 3 supported)", nsp);
    sp->nsp = nsp;
    for (int i = 0; i < nsp; i++) sp->in[i] = in[i];
    if (kernel) {
        const int64_t *ks = ptq_attr_ints(ctx->node, "kernel_shape", &n);
        if (ks && (int)n != nsp) OP_FAIL(ctx, PTQ_ERR_FORMAT, "kernel_shape has %zu values, expected %d", n, nsp);
        for (int i = 0; i < nsp; i++) {
            if (ks && ks[i] != kernel[i])
                OP_FAIL(ctx, PTQ_ERR_SHAPE, "kernel_shape[%d] = %lld but the weight has %lld", i, (long long)ks[i],
                        (long long)kernel[i]);
            sp->kernel[i] = kernel[i];
        }
    } else {
        const int64_t *ks = ptq_attr_ints(ctx->node, "kernel_shape", &n);
        if (!ks) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute kernel_shape is required");
        if ((int)n != nsp) OP_FAIL(ctx, PTQ_ERR_FORMAT, "kernel_shape has %zu values, expected %d", n, nsp);
        for (int i = 0; i < nsp; i++) sp->kernel[i] = ks[i];
    }
    if ((st = read_ints(ctx, "strides", nsp, 1, sp->stride)) != PTQ_OK) return st;
    if ((st = read_ints(ctx, "dilations", nsp, 1, sp->dilation)) != PTQ_OK) return st;
    const int64_t *pads = ptq_attr_ints(ctx->node, "pads", &n);
    if (pads && (int)n != 2 * nsp) OP_FAIL(ctx, PTQ_ERR_FORMAT, "pads has %zu values, expected %d", n, 2 * nsp);
    for (int i = 0; i < nsp; i++) {
        if (sp->kernel[i] < 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "kernel dim %d is %lld", i, (long long)sp->kernel[i]);
        if (sp->stride[i] < 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "stride %d is %lld", i, (long long)sp->stride[i]);
        if (sp->dilation[i] < 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "dilation %d is %lld", i, (long long)sp->dilation[i]);
        sp->pad_begin[i] = pads ? pads[i] : 0;
        sp->pad_end[i] = pads ? pads[i + nsp] : 0;
        if (sp->pad_begin[i] < 0 || sp->pad_end[i] < 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "negative pad");
    }
    return PTQ_OK;
}

ptq_status ptq_spatial_resolve(const ptq_op_ctx *ctx, int nsp, const int64_t *in, const int64_t *kernel,
                               ptq_spatial *sp)
{
    ptq_status st = resolve_common(ctx, nsp, in, kernel, sp);
    if (st != PTQ_OK) return st;
    const char *auto_pad = ptq_attr_string(ctx->node, "auto_pad", "NOTSET");
    int ceil_mode = (int)ptq_attr_int(ctx->node, "ceil_mode", 0);
    for (int i = 0; i < nsp; i++) {
        int64_t ek = (sp->kernel[i] - 1) * sp->dilation[i] + 1;
        if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
            int64_t out = (in[i] + sp->stride[i] - 1) / sp->stride[i];
            int64_t total = (out - 1) * sp->stride[i] + ek - in[i];
            if (total < 0) total = 0;
            int upper = strcmp(auto_pad, "SAME_UPPER") == 0;
            sp->pad_begin[i] = upper ? total / 2 : total - total / 2;
            sp->pad_end[i] = total - sp->pad_begin[i];
            sp->out[i] = out;
            continue;
        }
        if (strcmp(auto_pad, "VALID") == 0) {
            sp->pad_begin[i] = sp->pad_end[i] = 0;
        } else if (strcmp(auto_pad, "NOTSET") != 0) {
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "unknown auto_pad '%s'", auto_pad);
        }
        int64_t span = in[i] + sp->pad_begin[i] + sp->pad_end[i] - ek;
        if (span < 0)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "kernel %lld (dilated %lld) larger than padded input %lld in spatial dim %d",
                    (long long)sp->kernel[i], (long long)ek, (long long)(in[i] + sp->pad_begin[i] + sp->pad_end[i]), i);
        int64_t out = ceil_mode ? (span + sp->stride[i] - 1) / sp->stride[i] + 1 : span / sp->stride[i] + 1;
        /* ceil mode: the last window must start inside the input or left padding */
        if (ceil_mode && (out - 1) * sp->stride[i] >= in[i] + sp->pad_begin[i]) out--;
        sp->out[i] = out;
    }
    return PTQ_OK;
}

ptq_status ptq_spatial_resolve_transposed(const ptq_op_ctx *ctx, int nsp, const int64_t *in, const int64_t *kernel,
                                          ptq_spatial *sp)
{
    ptq_status st = resolve_common(ctx, nsp, in, kernel, sp);
    if (st != PTQ_OK) return st;
    int64_t out_pad[3], out_shape[3];
    size_t n;
    if ((st = read_ints(ctx, "output_padding", nsp, 0, out_pad)) != PTQ_OK) return st;
    const int64_t *os = ptq_attr_ints(ctx->node, "output_shape", &n);
    if (os && (int)n != nsp && (int)n != nsp + 2)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "output_shape has %zu values, expected %d", n, nsp);
    const char *auto_pad = ptq_attr_string(ctx->node, "auto_pad", "NOTSET");
    for (int i = 0; i < nsp; i++) {
        int64_t ek = (sp->kernel[i] - 1) * sp->dilation[i] + 1;
        if (os) {
            out_shape[i] = os[(int)n - nsp + i];
            int64_t total = sp->stride[i] * (in[i] - 1) + out_pad[i] + ek - out_shape[i];
            if (total < 0) total = 0;
            if (strcmp(auto_pad, "SAME_UPPER") == 0) {
                sp->pad_begin[i] = total / 2;
                sp->pad_end[i] = total - total / 2;
            } else {
                sp->pad_begin[i] = total - total / 2;
                sp->pad_end[i] = total / 2;
            }
            sp->out[i] = out_shape[i];
            continue;
        }
        if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
            int64_t out = in[i] * sp->stride[i];
            int64_t total = sp->stride[i] * (in[i] - 1) + out_pad[i] + ek - out;
            if (total < 0) total = 0;
            int upper = strcmp(auto_pad, "SAME_UPPER") == 0;
            sp->pad_begin[i] = upper ? total / 2 : total - total / 2;
            sp->pad_end[i] = total - sp->pad_begin[i];
            sp->out[i] = out;
            continue;
        }
        if (strcmp(auto_pad, "VALID") == 0) sp->pad_begin[i] = sp->pad_end[i] = 0;
        sp->out[i] = sp->stride[i] * (in[i] - 1) + out_pad[i] + ek - sp->pad_begin[i] - sp->pad_end[i];
        if (sp->out[i] < 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output spatial dim %d would be %lld", i, (long long)sp->out[i]);
    }
    return PTQ_OK;
}

/* One innermost row of n elements, x's stride st (elements), typed copies for the common sizes. */
static void strided_row(char *restrict y, const char *restrict x, int64_t n, int64_t st, size_t es)
{
    if (st == 1) {
        memcpy(y, x, (size_t)n * es);
        return;
    }
    switch (es) {
    case 4:
        for (int64_t j = 0; j < n; j++) memcpy(y + 4 * j, x + 4 * j * st, 4);
        break;
    case 8:
        for (int64_t j = 0; j < n; j++) memcpy(y + 8 * j, x + 8 * j * st, 8);
        break;
    case 2:
        for (int64_t j = 0; j < n; j++) memcpy(y + 2 * j, x + 2 * j * st, 2);
        break;
    case 1:
        for (int64_t j = 0; j < n; j++) y[j] = x[j * st];
        break;
    default:
        for (int64_t j = 0; j < n; j++) memcpy(y + (size_t)j * es, x + (size_t)(j * st) * es, es);
        break;
    }
}

void ptq_strided_copy(void *y, const void *x, int rank, const int64_t *dims, const int64_t *strides, int64_t base,
                      size_t es)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= dims[d];
    if (n == 0) return;
    if (rank == 0) {
        memcpy(y, (const char *)x + (size_t)base * es, es);
        return;
    }
    int64_t inner = dims[rank - 1], ist = strides[rank - 1], idx[PTQ_MAX_RANK] = {0}, off = base;
    char *o = y;
    for (int64_t done = 0; done < n; done += inner) {
        strided_row(o, (const char *)x + off * (int64_t)es, inner, ist, es);
        o += (size_t)inner * es;
        for (int d = rank - 2; d >= 0; d--) { /* the odometer over the outer dims */
            off += strides[d];
            if (++idx[d] < dims[d]) break;
            off -= strides[d] * dims[d];
            idx[d] = 0;
        }
    }
}
