/* gridsample.c: GridSample (opset 16; opset 20's mode names linear / cubic too), 2-D:
 * X [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, y in [-1, 1]) into Y [N, C, Ho, Wo];
 * from opset 20 also 3-D (X [N, C, D, H, W], grid [..., 3]; trilinear or nearest).
 *
 * As ONNX Runtime: a grid point becomes pixel coordinates ((g + 1) / 2 * (size - 1) with
 * align_corners, else ((g + 1) * size - 1) / 2); nearest rounds half to even; bilinear
 * reads the 2 x 2 and bicubic (A = -0.75) the 4 x 4 pixels around it, and a pixel outside
 * the image is 0 (zeros), the nearest edge pixel (border) or its mirror image about the
 * edges (reflection: about the pixel centres with align_corners, else the image borders).
 * float32; output pixels are split over threads. */
#include <math.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/shape.h"

enum { GS_BILINEAR = 0, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS = 0, GS_BORDER, GS_REFLECTION };

static ptq_status grid_sample_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *g = ctx->in[1];
    if (x->dtype != PTQ_F32 || g->dtype != PTQ_F32)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtypes %s and %s, expected float32", ptq_dtype_name(x->dtype), ptq_dtype_name(g->dtype));
    int nsp = x->rank - 2;
    if (x->rank != 4 && !(x->rank == 5 && ctx->opset >= 20))
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input rank %d: ptq samples 2-D images (rank 4) and, from opset 20, volumes (rank 5)",
                x->rank);
    if (g->rank != x->rank || g->dims[0] != x->dims[0] || g->dims[x->rank - 1] != nsp)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "grid must be [%lld, %s, %d]", (long long)x->dims[0], nsp == 2 ? "H_out, W_out" : "D_out, H_out, W_out",
                nsp);
    const char *m = ptq_attr_string(ctx->node, "mode", ctx->opset >= 20 ? "linear" : "bilinear");
    const char *p = ptq_attr_string(ctx->node, "padding_mode", "zeros");
    int64_t ac = ptq_attr_int(ctx->node, "align_corners", 0);
    int mode, pad;
    if (strcmp(m, "bilinear") == 0 || (ctx->opset >= 20 && strcmp(m, "linear") == 0)) mode = GS_BILINEAR;
    else if (strcmp(m, "nearest") == 0) mode = GS_NEAREST;
    else if (strcmp(m, "bicubic") == 0 || (ctx->opset >= 20 && strcmp(m, "cubic") == 0)) mode = GS_BICUBIC;
    else OP_FAIL(ctx, PTQ_ERR_FORMAT, "mode '%s' is not valid at opset %lld", m, (long long)ctx->opset);
    if (strcmp(p, "zeros") == 0) pad = GS_ZEROS;
    else if (strcmp(p, "border") == 0) pad = GS_BORDER;
    else if (strcmp(p, "reflection") == 0) pad = GS_REFLECTION;
    else OP_FAIL(ctx, PTQ_ERR_FORMAT, "padding_mode '%s', expected zeros, border or reflection", p);
    if (ac != 0 && ac != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "align_corners %lld, expected 0 or 1", (long long)ac);
    if (nsp == 3 && mode == GS_BICUBIC) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "cubic sampling of a volume (rank 5) is not supported");
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    y->rank = 4;
    y->dims[0] = x->dims[0];
    y->dims[1] = x->dims[1];
    y->rank = x->rank;
    for (int d = 0; d < nsp; d++) y->dims[2 + d] = g->dims[1 + d];
    ctx->state = (void *)(intptr_t)(mode | pad << 4 | (int)ac << 8);
    return PTQ_OK;
}

/* Mirrors x into [lo, hi] (ONNX Runtime's reflection of a coordinate). */
static float gs_reflect(float x, float lo, float hi)
{
    float range = hi - lo;
    if (x < lo) {
        float dx = lo - x;
        int n = (int)(dx / range);
        float r = dx - (float)n * range;
        return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        float dx = x - hi;
        int n = (int)(dx / range);
        float r = dx - (float)n * range;
        return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

typedef struct {
    const float *img; /* one H x W plane */
    int64_t H, W;
    int pad;
    float bounds[4]; /* reflection limits: x_min, y_min, x_max, y_max */
} gs_plane;

static float gs_pixel(const gs_plane *p, int64_t r, int64_t c)
{
    if (p->pad == GS_ZEROS) {
        if (c < 0 || c >= p->W || r < 0 || r >= p->H) return 0.0f;
    } else if (p->pad == GS_BORDER) {
        c = c < 0 ? 0 : (c >= p->W ? p->W - 1 : c);
        r = r < 0 ? 0 : (r >= p->H ? p->H - 1 : r);
    } else {
        c = (int64_t)gs_reflect((float)c, p->bounds[0], p->bounds[2]);
        r = (int64_t)gs_reflect((float)r, p->bounds[1], p->bounds[3]);
        c = c < 0 ? 0 : (c >= p->W ? p->W - 1 : c); /* guards the truncation at the far edge */
        r = r < 0 ? 0 : (r >= p->H ? p->H - 1 : r);
    }
    return p->img[r * p->W + c];
}

static void gs_cubic_coeffs(float t, float *w)
{
    const float A = -0.75f;
    float x = fabsf(t);
    w[0] = ((A * (x + 1.0f) - 5.0f * A) * (x + 1.0f) + 8.0f * A) * (x + 1.0f) - 4.0f * A;
    w[1] = ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f;
    w[2] = ((A + 2.0f) * (1.0f - x) - (A + 3.0f)) * (1.0f - x) * (1.0f - x) + 1.0f;
    w[3] = ((A * (2.0f - x) - 5.0f * A) * (2.0f - x) + 8.0f * A) * (2.0f - x) - 4.0f * A;
}

static float gs_denorm(float g, int64_t size, int ac)
{
    return ac ? (g + 1.0f) / 2.0f * (float)(size - 1) : ((g + 1.0f) * (float)size - 1.0f) / 2.0f;
}

/* 3-D: X [N, C, D, H, W] at grid [N, Do, Ho, Wo, 3] (x, y, z); trilinear or nearest. */
static float gs_voxel(const float *img, int64_t D, int64_t H, int64_t W, int pad, const float *bounds, int64_t z, int64_t r,
                      int64_t c)
{
    if (pad == GS_ZEROS) {
        if (c < 0 || c >= W || r < 0 || r >= H || z < 0 || z >= D) return 0.0f;
    } else {
        if (pad == GS_REFLECTION) {
            c = (int64_t)gs_reflect((float)c, bounds[0], bounds[3]);
            r = (int64_t)gs_reflect((float)r, bounds[1], bounds[4]);
            z = (int64_t)gs_reflect((float)z, bounds[2], bounds[5]);
        }
        c = c < 0 ? 0 : (c >= W ? W - 1 : c);
        r = r < 0 ? 0 : (r >= H ? H - 1 : r);
        z = z < 0 ? 0 : (z >= D ? D - 1 : z);
    }
    return img[(z * H + r) * W + c];
}

static float gs_clamp_coord(float v)
{
    return v < -4194304.0f ? -4194304.0f : (v > 4194304.0f ? 4194304.0f : v);
}

static ptq_status grid_sample_run_3d(ptq_op_ctx *ctx, int mode, int pad, int ac)
{
    const ptq_tensor *xt = ctx->in[0], *gt = ctx->in[1];
    int64_t N = xt->dims[0], C = xt->dims[1], D = xt->dims[2], H = xt->dims[3], W = xt->dims[4];
    int64_t pts = gt->dims[1] * gt->dims[2] * gt->dims[3];
    const float *X = xt->data, *G = gt->data;
    float *Y = ctx->out[0]->data;
    float b[6]; /* reflection limits: x, y, z min, then max */
    if (ac) b[0] = b[1] = b[2] = 0.0f, b[3] = (float)(W - 1), b[4] = (float)(H - 1), b[5] = (float)(D - 1);
    else b[0] = b[1] = b[2] = -0.5f, b[3] = (float)W - 0.5f, b[4] = (float)H - 0.5f, b[5] = (float)D - 0.5f;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t q = 0; q < N * pts; q++) {
        int64_t n = q / pts, pix = q % pts;
        float x = gs_denorm(G[q * 3], W, ac), y = gs_denorm(G[q * 3 + 1], H, ac), z = gs_denorm(G[q * 3 + 2], D, ac);
        if (isnan(x) || isnan(y) || isnan(z)) {
            for (int64_t c = 0; c < C; c++) Y[(n * C + c) * pts + pix] = NAN;
            continue;
        }
        x = gs_clamp_coord(x), y = gs_clamp_coord(y), z = gs_clamp_coord(z);
        for (int64_t c = 0; c < C; c++) {
            const float *img = X + (n * C + c) * D * H * W;
            float v;
            if (mode == GS_NEAREST) {
                v = gs_voxel(img, D, H, W, pad, b, (int64_t)nearbyintf(z), (int64_t)nearbyintf(y), (int64_t)nearbyintf(x));
            } else {
                int64_t x1 = (int64_t)floorf(x), y1 = (int64_t)floorf(y), z1 = (int64_t)floorf(z);
                float dx1 = x - (float)x1, dx2 = (float)(x1 + 1) - x, dy1 = y - (float)y1, dy2 = (float)(y1 + 1) - y;
                float dz1 = z - (float)z1, dz2 = (float)(z1 + 1) - z;
                float p[2][2][2];
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 2; j++)
                        for (int k = 0; k < 2; k++) p[i][j][k] = gs_voxel(img, D, H, W, pad, b, z1 + i, y1 + j, x1 + k);
                v = dz2 * (dy2 * (dx2 * p[0][0][0] + dx1 * p[0][0][1]) + dy1 * (dx2 * p[0][1][0] + dx1 * p[0][1][1])) +
                    dz1 * (dy2 * (dx2 * p[1][0][0] + dx1 * p[1][0][1]) + dy1 * (dx2 * p[1][1][0] + dx1 * p[1][1][1]));
            }
            Y[(n * C + c) * pts + pix] = v;
        }
    }
    return PTQ_OK;
}

static ptq_status grid_sample_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *xt = ctx->in[0], *gt = ctx->in[1];
    intptr_t stv = (intptr_t)ctx->state;
    int mode = (int)(stv & 15), pad = (int)(stv >> 4 & 15), ac = (int)(stv >> 8 & 1);
    if (xt->rank == 5) return grid_sample_run_3d(ctx, mode, pad, ac);
    int64_t N = xt->dims[0], C = xt->dims[1], H = xt->dims[2], W = xt->dims[3];
    int64_t Ho = gt->dims[1], Wo = gt->dims[2];
    const float *X = xt->data, *G = gt->data;
    float *Y = ctx->out[0]->data;
    float bounds[4];
    if (ac) bounds[0] = 0.0f, bounds[1] = 0.0f, bounds[2] = (float)(W - 1), bounds[3] = (float)(H - 1);
    else bounds[0] = -0.5f, bounds[1] = -0.5f, bounds[2] = (float)W - 0.5f, bounds[3] = (float)H - 0.5f;
    int64_t total = N * Ho * Wo;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t q = 0; q < total; q++) {
        int64_t n = q / (Ho * Wo), pix = q % (Ho * Wo);
        float x = gs_denorm(G[q * 2], W, ac), y = gs_denorm(G[q * 2 + 1], H, ac);
        if (isnan(x) || isnan(y)) { /* no pixel to read: NaN out, as the grid */
            for (int64_t c = 0; c < C; c++) Y[(n * C + c) * Ho * Wo + pix] = NAN;
            continue;
        }
        /* coordinates are clamped to +-2^22 pixels so that the integer conversions below stay
         * defined: zeros and border read the same pixels either way; reflection mirrors the
         * clamped coordinate (a grid that far out is garbage, whatever is read for it) */
        x = gs_clamp_coord(x);
        y = gs_clamp_coord(y);
        for (int64_t c = 0; c < C; c++) {
            gs_plane p = {X + (n * C + c) * H * W, H, W, pad, {bounds[0], bounds[1], bounds[2], bounds[3]}};
            float v;
            if (mode == GS_NEAREST) {
                v = gs_pixel(&p, (int64_t)nearbyintf(y), (int64_t)nearbyintf(x));
            } else if (mode == GS_BILINEAR) {
                int64_t x1 = (int64_t)floorf(x), y1 = (int64_t)floorf(y), x2 = x1 + 1, y2 = y1 + 1;
                float p11 = gs_pixel(&p, y1, x1), p12 = gs_pixel(&p, y1, x2);
                float p21 = gs_pixel(&p, y2, x1), p22 = gs_pixel(&p, y2, x2);
                float dx2 = (float)x2 - x, dx1 = x - (float)x1, dy2 = (float)y2 - y, dy1 = y - (float)y1;
                v = dy2 * (dx2 * p11 + dx1 * p12) + dy1 * (dx2 * p21 + dx1 * p22);
            } else {
                int64_t x0 = (int64_t)floorf(x) - 1, y0 = (int64_t)floorf(y) - 1;
                float wx[4], wy[4];
                gs_cubic_coeffs(x - (float)x0 - 1.0f, wx);
                gs_cubic_coeffs(y - (float)y0 - 1.0f, wy);
                v = 0.0f;
                for (int i = 0; i < 4; i++) {
                    float row = 0.0f;
                    for (int j = 0; j < 4; j++) row += wx[j] * gs_pixel(&p, y0 + i, x0 + j);
                    v += wy[i] * row;
                }
            }
            Y[(n * C + c) * Ho * Wo + pix] = v;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_grid_sample = {grid_sample_infer, grid_sample_run, NULL, 0};
