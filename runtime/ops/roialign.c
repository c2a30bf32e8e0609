/* roialign.c: RoiAlign (opset 10 and 16), as ONNX Runtime computes it (the semantics
 * torchvision's Faster R-CNN / Mask R-CNN exports rely on).
 *
 * Per RoI (x1, y1, x2, y2) * spatial_scale, shifted by -0.5 under half_pixel (opset 16's
 * default; opset 10 has no attribute and behaves as output_half_pixel, which also forces a
 * malformed RoI to at least 1 x 1): the RoI is cut into output_height x output_width bins,
 * each sampled on a grid of sampling_ratio^2 points (0: ceil(bin size) per axis, adaptive);
 * each sample is bilinear over the four neighbours (a sample more than one pixel outside
 * the map counts 0; one within a pixel of the border is clamped onto it). avg: the samples'
 * mean; max: the largest weighted corner value of any sample (ONNX Runtime's max mode).
 * Everything is float32 in ONNX Runtime's order of operations; RoIs are split over threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/shape.h"

typedef struct {
    int64_t ph, pw, sampling;
    float scale;
    int half_pixel, max_mode;
} roi_state;

static ptq_status roi_align_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 3, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *rois = ctx->in[1], *bi = ctx->in[2];
    if (x->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s, expected float32", ptq_dtype_name(x->dtype));
    if (rois->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_FORMAT, "rois dtype %s, expected float32", ptq_dtype_name(rois->dtype));
    if (bi->dtype != PTQ_I64) OP_FAIL(ctx, PTQ_ERR_FORMAT, "batch_indices dtype %s, expected int64", ptq_dtype_name(bi->dtype));
    if (x->rank != 4) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected 4 (N, C, H, W)", x->rank);
    if (rois->rank != 2 || rois->dims[1] != 4)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "rois rank %d (last dim %lld), expected [num_rois, 4]", rois->rank,
                rois->rank ? (long long)rois->dims[rois->rank - 1] : 0LL);
    if (bi->rank != 1 || bi->dims[0] != rois->dims[0])
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "batch_indices must be [%lld] (one per RoI)", (long long)rois->dims[0]);
    roi_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->ph = ptq_attr_int(ctx->node, "output_height", 1);
    s->pw = ptq_attr_int(ctx->node, "output_width", 1);
    s->sampling = ptq_attr_int(ctx->node, "sampling_ratio", 0);
    s->scale = ptq_attr_float(ctx->node, "spatial_scale", 1.0f);
    if (s->ph < 1 || s->pw < 1)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "output_height %lld, output_width %lld: expected >= 1", (long long)s->ph, (long long)s->pw);
    if (s->sampling < 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "sampling_ratio %lld, expected >= 0", (long long)s->sampling);
    if (!isfinite(s->scale)) OP_FAIL(ctx, PTQ_ERR_FORMAT, "spatial_scale is not finite");
    const char *mode = ptq_attr_string(ctx->node, "mode", "avg");
    if (strcmp(mode, "avg") == 0) s->max_mode = 0;
    else if (strcmp(mode, "max") == 0) s->max_mode = 1;
    else OP_FAIL(ctx, PTQ_ERR_FORMAT, "mode '%s', expected avg or max", mode);
    if (ctx->opset >= 16) {
        const char *ct = ptq_attr_string(ctx->node, "coordinate_transformation_mode", "half_pixel");
        if (strcmp(ct, "half_pixel") == 0) s->half_pixel = 1;
        else if (strcmp(ct, "output_half_pixel") == 0) s->half_pixel = 0;
        else OP_FAIL(ctx, PTQ_ERR_FORMAT, "coordinate_transformation_mode '%s', expected half_pixel or output_half_pixel", ct);
    } else if (ptq_node_attr(ctx->node, "coordinate_transformation_mode")) {
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "coordinate_transformation_mode needs opset 16 (model: %lld)", (long long)ctx->opset);
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    y->rank = 4;
    y->dims[0] = rois->dims[0];
    y->dims[1] = x->dims[1];
    y->dims[2] = s->ph;
    y->dims[3] = s->pw;
    return PTQ_OK;
}

/* One bilinear sample's four positions (in one H x W plane) and weights. */
typedef struct {
    int64_t pos[4];
    float w[4];
} roi_sample;

static roi_sample roi_sample_at(float y, float x, int64_t H, int64_t W)
{
    roi_sample s;
    memset(&s, 0, sizeof s);
    if (y < -1.0f || y > (float)H || x < -1.0f || x > (float)W) return s; /* outside: weight 0 */
    if (y <= 0.0f) y = 0.0f;
    if (x <= 0.0f) x = 0.0f;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= H - 1) {
        yh = yl = H - 1;
        y = (float)yl;
    } else {
        yh = yl + 1;
    }
    if (xl >= W - 1) {
        xh = xl = W - 1;
        x = (float)xl;
    } else {
        xh = xl + 1;
    }
    float ly = y - (float)yl, lx = x - (float)xl, hy = 1.0f - ly, hx = 1.0f - lx;
    s.pos[0] = yl * W + xl;
    s.pos[1] = yl * W + xh;
    s.pos[2] = yh * W + xl;
    s.pos[3] = yh * W + xh;
    s.w[0] = hy * hx;
    s.w[1] = hy * lx;
    s.w[2] = ly * hx;
    s.w[3] = ly * lx;
    return s;
}

static ptq_status roi_align_run(ptq_op_ctx *ctx)
{
    const roi_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0], *rt = ctx->in[1], *bt = ctx->in[2];
    const float *X = x->data, *rois = rt->data;
    const int64_t *bidx = bt->data;
    float *Y = ctx->out[0]->data;
    int64_t nr = rt->dims[0], N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t PH = s->ph, PW = s->pw;
    const float offset = s->half_pixel ? 0.5f : 0.0f;
    for (int64_t r = 0; r < nr; r++) {
        if (bidx[r] < 0 || bidx[r] >= N)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "batch_indices[%lld] = %lld, batch is %lld", (long long)r, (long long)bidx[r], (long long)N);
        /* a RoI must be finite, and (adaptive sampling) not need more than 2^24 samples per bin */
        const float *roi = rois + r * 4;
        float rw = (roi[2] - roi[0]) * s->scale, rh = (roi[3] - roi[1]) * s->scale;
        if (!(isfinite(roi[0] * s->scale) && isfinite(roi[1] * s->scale) && isfinite(roi[2] * s->scale) &&
              isfinite(roi[3] * s->scale) && isfinite(rw) && isfinite(rh)))
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "RoI %lld (%g, %g, %g, %g) is not finite at spatial_scale %g", (long long)r,
                    (double)roi[0], (double)roi[1], (double)roi[2], (double)roi[3], (double)s->scale);
        if (s->sampling == 0 && (fabsf(rh) / (float)PH > 4096.0f || fabsf(rw) / (float)PW > 4096.0f))
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "RoI %lld spans %g x %g pixels: adaptive sampling would take more than 2^24 samples per bin",
                    (long long)r, (double)rh, (double)rw);
    }
#pragma omp parallel for num_threads(ctx->nthreads) schedule(dynamic, 1)
    for (int64_t r = 0; r < nr; r++) {
        const float *roi = rois + r * 4;
        float x1 = roi[0] * s->scale - offset, y1 = roi[1] * s->scale - offset;
        float x2 = roi[2] * s->scale - offset, y2 = roi[3] * s->scale - offset;
        float rw = x2 - x1, rh = y2 - y1;
        if (!s->half_pixel) {
            rw = rw > 1.0f ? rw : 1.0f;
            rh = rh > 1.0f ? rh : 1.0f;
        }
        float bh = rh / (float)PH, bw = rw / (float)PW;
        int64_t gh = s->sampling > 0 ? s->sampling : (int64_t)ceilf(rh / (float)PH);
        int64_t gw = s->sampling > 0 ? s->sampling : (int64_t)ceilf(rw / (float)PW);
        if (gh < 0) gh = 0; /* an inverted RoI under half_pixel samples nothing */
        if (gw < 0) gw = 0;
        int64_t count = gh * gw > 1 ? gh * gw : 1;
        const float *plane0 = X + bidx[r] * C * H * W;
        float *yr = Y + r * C * PH * PW;
        for (int64_t ph = 0; ph < PH; ph++)
            for (int64_t pw = 0; pw < PW; pw++) {
                float *yo = yr + ph * PW + pw; /* channel c at yo[c * PH * PW] */
                for (int64_t c = 0; c < C; c++) yo[c * PH * PW] = 0.0f;
                for (int64_t iy = 0; iy < gh; iy++) {
                    float yy = y1 + (float)ph * bh + ((float)iy + 0.5f) * bh / (float)gh;
                    for (int64_t ix = 0; ix < gw; ix++) {
                        float xx = x1 + (float)pw * bw + ((float)ix + 0.5f) * bw / (float)gw;
                        roi_sample sm = roi_sample_at(yy, xx, H, W);
                        int first = iy == 0 && ix == 0;
                        for (int64_t c = 0; c < C; c++) {
                            const float *p = plane0 + c * H * W;
                            float *o = yo + c * PH * PW;
                            if (!s->max_mode) {
                                *o += sm.w[0] * p[sm.pos[0]] + sm.w[1] * p[sm.pos[1]] + sm.w[2] * p[sm.pos[2]] +
                                      sm.w[3] * p[sm.pos[3]];
                            } else {
                                float v = sm.w[0] * p[sm.pos[0]];
                                for (int q = 1; q < 4; q++) {
                                    float t = sm.w[q] * p[sm.pos[q]];
                                    v = t > v ? t : v;
                                }
                                *o = first || v > *o ? v : *o;
                            }
                        }
                    }
                }
                if (!s->max_mode)
                    for (int64_t c = 0; c < C; c++) yo[c * PH * PW] /= (float)count;
            }
    }
    return PTQ_OK;
}

const ptq_op_def op_roi_align = {roi_align_infer, roi_align_run, ptq_op_free_state, 0};
