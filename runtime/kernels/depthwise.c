/* depthwise.c: banded direct depthwise convolution (see depthwise.h). */
#include <string.h>

#include "runtime/kernels/act.h"
#include "runtime/kernels/depthwise.h"
#include "runtime/kernels/depthwise_isa.h"
#include "runtime/kernels/sgemm.h"

#define DW_BAND_FLOATS (32 * 1024) /* padded input rows per band: about 128 KiB */

int kern_depthwise_fits(const kern_conv_geom *g)
{
    return g->in[0] == 1 && g->out[0] == 1 && g->k[0] == 1 && g->stride[0] == 1 && g->pad[0] == 0;
}

static int64_t padded_width(const kern_conv_geom *g)
{
    return (g->out[2] - 1) * g->stride[2] + (g->k[2] - 1) * g->dil[2] + 1;
}

size_t kern_depthwise_scratch(const kern_conv_geom *g, int64_t *band)
{
    int64_t pw = padded_width(g), ekh = (g->k[1] - 1) * g->dil[1] + 1, sh = g->stride[1];
    int64_t rows = DW_BAND_FLOATS / (pw > 0 ? pw : 1), b = 1;
    if (rows >= ekh) b = (rows - ekh) / sh + 1;
    if (b > g->out[1]) b = g->out[1];
    if (b < 1) b = 1;
    *band = b;
    /* + 16: the AVX2 rows at stride 2 load up to one float past a row's end (lanes unused) */
    return (size_t)((b - 1) * sh + ekh) * (size_t)pw + 16;
}

/* One output row from kh padded rows (pitch pp): o[x] = (sum w[i][j] * p[i][x*SW + j]) + bias,
 * taps summed in row-major order from zero, the bias added last (as ONNX Runtime does). Inlined with constant KH, KW, SW: fully unrolled taps, vector x. */
static inline __attribute__((always_inline)) void dw_row(const float *restrict p, int64_t pp,
                                                         const float *restrict w, float bias, float *restrict o,
                                                         int64_t ow, int KH, int KW, int SW)
{
    for (int64_t x = 0; x < ow; x++) {
        float acc = 0.0f;
        for (int i = 0; i < KH; i++)
            for (int j = 0; j < KW; j++) acc += w[i * KW + j] * p[i * pp + x * SW + j];
        o[x] = acc + bias;
    }
}

/* `rows` output rows of width ow from the padded band pad (pitch pp, row step sh). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
dw_band(const float *restrict pad, int64_t pp, int64_t sh, float *restrict y, int64_t ow, int64_t rows,
        const float *restrict w, float bias, int64_t kh, int64_t kw, int64_t sw, int64_t dh, int64_t dw)
{
    if (dh == 1 && dw == 1 && kh == kw && (kh == 3 || kh == 5) && (sw == 1 || sw == 2)) {
        float wk[25];
        for (int64_t i = 0; i < kh * kw; i++) wk[i] = w[i];
        for (int64_t r = 0; r < rows; r++) {
            const float *p = pad + r * sh * pp;
            float *o = y + r * ow;
            if (kh == 3 && sw == 1)
                dw_row(p, pp, wk, bias, o, ow, 3, 3, 1);
            else if (kh == 3)
                dw_row(p, pp, wk, bias, o, ow, 3, 3, 2);
            else if (sw == 1)
                dw_row(p, pp, wk, bias, o, ow, 5, 5, 1);
            else
                dw_row(p, pp, wk, bias, o, ow, 5, 5, 2);
        }
        return;
    }
    /* generic: tap by tap over the row, the same terms in the same order */
    for (int64_t r = 0; r < rows; r++) {
        float *o = y + r * ow;
        for (int64_t x = 0; x < ow; x++) o[x] = 0.0f;
        for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++) {
                float wv = w[i * kw + j];
                const float *p = pad + (r * sh + i * dh) * pp + j * dw;
                if (sw == 1)
                    for (int64_t x = 0; x < ow; x++) o[x] += wv * p[x];
                else
                    for (int64_t x = 0; x < ow; x++) o[x] += wv * p[x * sw];
            }
        for (int64_t x = 0; x < ow; x++) o[x] += bias;
    }
}

void kern_depthwise_plane_f32(const kern_conv_geom *g, int64_t band, const float *x, const float *w, float bias,
                              const ptq_activation *act, float *y, float *scratch)
{
    const int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2];
    const int64_t sh = g->stride[1], ph = g->pad[1], pwb = g->pad[2], kh = g->k[1], dh = g->dil[1];
    const int64_t pp = padded_width(g), ekh = (kh - 1) * dh + 1;
    /* columns of a padded row that come from the input: [c0, c0 + cn) */
    int64_t c0 = pwb < pp ? pwb : pp, cn = W < pp - c0 ? W : pp - c0;
    const int avx2 = kern_isa_current() >= KERN_ISA_AVX2;
    for (int64_t oy0 = 0; oy0 < OH; oy0 += band) {
        int64_t rows = OH - oy0 < band ? OH - oy0 : band, prows = (rows - 1) * sh + ekh;
        for (int64_t r = 0; r < prows; r++) {
            int64_t iy = oy0 * sh - ph + r;
            float *d = scratch + r * pp;
            if (iy < 0 || iy >= H || cn <= 0) {
                memset(d, 0, sizeof(float) * (size_t)pp);
                continue;
            }
            memset(d, 0, sizeof(float) * (size_t)c0);
            memcpy(d + c0, x + iy * W, sizeof(float) * (size_t)cn);
            memset(d + c0 + cn, 0, sizeof(float) * (size_t)(pp - c0 - cn));
        }
        float *yb = y + oy0 * OW;
        if (avx2 && dh == 1 && g->dil[2] == 1 && kh == g->k[2] && (kh == 3 || kh == 5) && (g->stride[2] == 1 || g->stride[2] == 2))
            kern_dw_rows_avx2(scratch, pp, sh, yb, OW, rows, w, bias, (int)kh, (int)g->stride[2]);
        else
            dw_band(scratch, pp, sh, yb, OW, rows, w, bias, kh, g->k[2], g->stride[2], dh, g->dil[2]);
        if (kern_act_active(act)) kern_act_f32(act, yb, (size_t)(rows * OW));
    }
}

void kern_depthwise_plane_ref(const kern_conv_geom *g, const float *x, const float *w, float bias, float *y)
{
    const int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2];
    for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++) {
            double s = (double)bias;
            for (int64_t i = 0; i < g->k[1]; i++)
                for (int64_t j = 0; j < g->k[2]; j++) {
                    int64_t iy = oy * g->stride[1] - g->pad[1] + i * g->dil[1];
                    int64_t ix = ox * g->stride[2] - g->pad[2] + j * g->dil[2];
                    if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                    s += (double)w[i * g->k[2] + j] * (double)x[iy * W + ix];
                }
            y[oy * OW + ox] = (float)s;
        }
}
