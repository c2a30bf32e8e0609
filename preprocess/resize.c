/* resize.c: 8-bit resizes that reproduce OpenCV's and PIL's results.
 *
 * linear:       OpenCV INTER_LINEAR's scalar path: source x = (dx + 0.5) * sw/dw - 0.5, taps
 *               clamped to the edge, weights rounded to 1/2048, horizontal sums kept as
 *               integers, rounded once after the vertical pass (>> 22).
 * pil-bilinear: Pillow's ImagingResample with the triangle filter: support scales with the
 *               shrink factor (antialiasing), weights normalised then rounded to 22 bits,
 *               a horizontal pass rounded to 8 bits, then a vertical pass.
 * nearest:      OpenCV INTER_NEAREST: sx = floor(dx * sw/dw).
 * area:         OpenCV INTER_AREA when shrinking: each destination pixel averages the
 *               source area it covers (fractional edges weighted); enlarging uses linear. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "preprocess/preprocess.h"

static inline uint8_t clip_u8(int v)
{
    return (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
}

/* OpenCV's taps for one axis: two source indices and two weights in 1/2048 per output. */
static void linear_taps(int in, int out, int *idx, short *w)
{
    double scale = (double)in / out;
    for (int d = 0; d < out; d++) {
        float f = (float)((d + 0.5) * scale - 0.5);
        int s = (int)floorf(f);
        f -= (float)s;
        if (s < 0) f = 0, s = 0;
        if (s >= in - 1) f = 0, s = in - 1;
        idx[2 * d] = s;
        idx[2 * d + 1] = s + 1 < in ? s + 1 : s;
        w[2 * d] = (short)lrintf((1.0f - f) * 2048.0f);
        w[2 * d + 1] = (short)lrintf(f * 2048.0f);
    }
}

static ptq_status resize_linear_cv(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, int ch)
{
    ptq_status st = PTQ_OK;
    int *xo = malloc(sizeof(int) * 2 * (size_t)dw), *yo = malloc(sizeof(int) * 2 * (size_t)dh);
    short *xa = malloc(sizeof(short) * 2 * (size_t)dw), *ya = malloc(sizeof(short) * 2 * (size_t)dh);
    int *row0 = malloc(sizeof(int) * (size_t)dw * (size_t)ch), *row1 = malloc(sizeof(int) * (size_t)dw * (size_t)ch);
    CHECK_ALLOC(xo);
    CHECK_ALLOC(yo);
    CHECK_ALLOC(xa);
    CHECK_ALLOC(ya);
    CHECK_ALLOC(row0);
    CHECK_ALLOC(row1);
    linear_taps(sw, dw, xo, xa);
    linear_taps(sh, dh, yo, ya);
    for (int dy = 0; dy < dh; dy++) {
        int *rows[2] = {row0, row1};
        for (int k = 0; k < 2; k++) {
            const uint8_t *s = src + (size_t)yo[2 * dy + k] * (size_t)sw * (size_t)ch;
            for (int dx = 0; dx < dw; dx++)
                for (int c = 0; c < ch; c++)
                    rows[k][dx * ch + c] = s[xo[2 * dx] * ch + c] * xa[2 * dx] + s[xo[2 * dx + 1] * ch + c] * xa[2 * dx + 1];
        }
        uint8_t *d = dst + (size_t)dy * (size_t)dw * (size_t)ch;
        for (int i = 0; i < dw * ch; i++) {
            int64_t v = (int64_t)row0[i] * ya[2 * dy] + (int64_t)row1[i] * ya[2 * dy + 1];
            d[i] = clip_u8((int)((v + (1 << 21)) >> 22));
        }
    }
done:
    free(xo);
    free(yo);
    free(xa);
    free(ya);
    free(row0);
    free(row1);
    return st;
}

/* Pillow's coefficients for one axis: for each output index, first tap and count, weights in 22-bit fixed point. */
typedef struct {
    int *first, *count;
    int *k; /* out * kmax */
    int kmax;
} pil_coeffs;

static void pil_coeffs_free(pil_coeffs *c)
{
    free(c->first);
    free(c->count);
    free(c->k);
}

static ptq_status pil_coeffs_make(int in_size, int out_size, pil_coeffs *c)
{
    ptq_status st = PTQ_OK;
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale; /* the triangle filter's support is 1 */
    memset(c, 0, sizeof *c);
    c->kmax = (int)ceil(support) * 2 + 1;
    c->first = malloc(sizeof(int) * (size_t)out_size);
    c->count = malloc(sizeof(int) * (size_t)out_size);
    c->k = calloc((size_t)out_size * (size_t)c->kmax, sizeof(int));
    double *w = malloc(sizeof(double) * (size_t)c->kmax);
    CHECK_ALLOC(c->first);
    CHECK_ALLOC(c->count);
    CHECK_ALLOC(c->k);
    CHECK_ALLOC(w);
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax;
        if (xmin < 0) xmin = 0;
        xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        if (xmax > c->kmax) xmax = c->kmax;
        for (int x = 0; x < xmax; x++) {
            double t = fabs((x + xmin - center + 0.5) * ss);
            w[x] = t < 1.0 ? 1.0 - t : 0.0;
            ww += w[x];
        }
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            c->k[xx * c->kmax + x] = v < 0 ? (int)(-0.5 + v * (1 << 22)) : (int)(0.5 + v * (1 << 22));
        }
        c->first[xx] = xmin;
        c->count[xx] = xmax;
    }
done:
    free(w);
    if (st != PTQ_OK) pil_coeffs_free(c);
    return st;
}

static ptq_status resize_pil_bilinear(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, int ch)
{
    ptq_status st = PTQ_OK;
    pil_coeffs cx = {0}, cy = {0};
    uint8_t *tmp = NULL;
    TRY(pil_coeffs_make(sw, dw, &cx));
    TRY(pil_coeffs_make(sh, dh, &cy));
    tmp = malloc((size_t)dw * (size_t)sh * (size_t)ch);
    CHECK_ALLOC(tmp);
    /* horizontal, rounded to 8 bits */
    for (int y = 0; y < sh; y++)
        for (int xx = 0; xx < dw; xx++)
            for (int c = 0; c < ch; c++) {
                int64_t acc = 1 << 21;
                const int *k = cx.k + xx * cx.kmax;
                for (int x = 0; x < cx.count[xx]; x++)
                    acc += (int64_t)src[((size_t)y * (size_t)sw + (size_t)(cx.first[xx] + x)) * (size_t)ch + (size_t)c] * k[x];
                tmp[((size_t)y * (size_t)dw + (size_t)xx) * (size_t)ch + (size_t)c] = clip_u8((int)(acc >> 22));
            }
    /* vertical */
    for (int yy = 0; yy < dh; yy++)
        for (int xx = 0; xx < dw; xx++)
            for (int c = 0; c < ch; c++) {
                int64_t acc = 1 << 21;
                const int *k = cy.k + yy * cy.kmax;
                for (int y = 0; y < cy.count[yy]; y++)
                    acc += (int64_t)tmp[((size_t)(cy.first[yy] + y) * (size_t)dw + (size_t)xx) * (size_t)ch + (size_t)c] * k[y];
                dst[((size_t)yy * (size_t)dw + (size_t)xx) * (size_t)ch + (size_t)c] = clip_u8((int)(acc >> 22));
            }
done:
    pil_coeffs_free(&cx);
    pil_coeffs_free(&cy);
    free(tmp);
    return st;
}

static void resize_nearest_cv(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, int ch)
{
    /* OpenCV: ifx = 1 / inv_scale_x with inv_scale_x = dw / sw (not sw / dw: they differ in the last bit) */
    double fx = 1.0 / ((double)dw / sw), fy = 1.0 / ((double)dh / sh);
    for (int dy = 0; dy < dh; dy++) {
        int sy = (int)floor(dy * fy);
        if (sy > sh - 1) sy = sh - 1;
        for (int dx = 0; dx < dw; dx++) {
            int sx = (int)floor(dx * fx);
            if (sx > sw - 1) sx = sw - 1;
            memcpy(dst + ((size_t)dy * (size_t)dw + (size_t)dx) * (size_t)ch, src + ((size_t)sy * (size_t)sw + (size_t)sx) * (size_t)ch,
                   (size_t)ch);
        }
    }
}

/* Area weights of one axis when shrinking: output i covers [i*s, (i+1)*s) of the input. */
static ptq_status area_weights(int in, int out, float **w_out)
{
    double s = (double)in / out;
    float *w = calloc((size_t)out * (size_t)in, sizeof(float));
    if (!w) {
        ptq_error("out of memory allocating %dx%d resize weights", out, in);
        return PTQ_ERR_NOMEM;
    }
    for (int i = 0; i < out; i++) {
        double a = i * s, b = (i + 1) * s;
        for (int k = (int)floor(a); k < in && k < b; k++) {
            double lo = k > a ? k : a, hi = k + 1 < b ? k + 1 : b;
            if (hi > lo) w[(size_t)i * (size_t)in + (size_t)k] = (float)((hi - lo) / s);
        }
    }
    *w_out = w;
    return PTQ_OK;
}

static ptq_status resize_area_cv(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, int ch)
{
    ptq_status st = PTQ_OK;
    float *wx = NULL, *wy = NULL, *tmp = NULL;
    TRY(area_weights(sw, dw, &wx));
    TRY(area_weights(sh, dh, &wy));
    tmp = calloc((size_t)dw * (size_t)sh * (size_t)ch, sizeof(float));
    CHECK_ALLOC(tmp);
    for (int y = 0; y < sh; y++)
        for (int i = 0; i < dw; i++)
            for (int k = 0; k < sw; k++) {
                float w = wx[(size_t)i * (size_t)sw + (size_t)k];
                if (w == 0.0f) continue;
                for (int c = 0; c < ch; c++)
                    tmp[((size_t)y * (size_t)dw + (size_t)i) * (size_t)ch + (size_t)c] +=
                        w * src[((size_t)y * (size_t)sw + (size_t)k) * (size_t)ch + (size_t)c];
            }
    for (int j = 0; j < dh; j++)
        for (int i = 0; i < dw; i++)
            for (int c = 0; c < ch; c++) {
                float acc = 0.0f;
                for (int y = 0; y < sh; y++) {
                    float w = wy[(size_t)j * (size_t)sh + (size_t)y];
                    if (w != 0.0f) acc += w * tmp[((size_t)y * (size_t)dw + (size_t)i) * (size_t)ch + (size_t)c];
                }
                dst[((size_t)j * (size_t)dw + (size_t)i) * (size_t)ch + (size_t)c] = clip_u8((int)lrintf(acc));
            }
done:
    free(wx);
    free(wy);
    free(tmp);
    return st;
}

ptq_status pp_resize_u8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, int ch, pp_interp interp)
{
    if (sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0) {
        ptq_error("resize from %dx%d to %dx%d", sw, sh, dw, dh);
        return PTQ_ERR_ARG;
    }
    if (sw == dw && sh == dh) {
        memcpy(dst, src, (size_t)sw * (size_t)sh * (size_t)ch);
        return PTQ_OK;
    }
    switch (interp) {
    case PP_INTERP_PIL_BILINEAR: return resize_pil_bilinear(src, sw, sh, dst, dw, dh, ch);
    case PP_INTERP_NEAREST: resize_nearest_cv(src, sw, sh, dst, dw, dh, ch); return PTQ_OK;
    case PP_INTERP_AREA:
        if (dw <= sw && dh <= sh) return resize_area_cv(src, sw, sh, dst, dw, dh, ch);
        return resize_linear_cv(src, sw, sh, dst, dw, dh, ch);
    default: return resize_linear_cv(src, sw, sh, dst, dw, dh, ch);
    }
}
