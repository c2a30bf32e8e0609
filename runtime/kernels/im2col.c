/* im2col.c: geometry helpers, im2col and col2im over three spatial dims.
 *
 * Both transforms walk their positions one output (im2col) or input (col2im) row of
 * the W dim at a time, so the inner loop is a contiguous copy (stride 1) or a
 * strided gather/scatter over the taps that fall inside, computed once per row. */
#include <string.h>

#include "runtime/kernels/im2col.h"

void kern_conv_geom_set(kern_conv_geom *g, const ptq_spatial *sp, int64_t batch, int64_t c_in, int64_t c_out,
                        int64_t group)
{
    memset(g, 0, sizeof *g);
    g->batch = batch;
    g->c_in = c_in;
    g->c_out = c_out;
    g->group = group;
    int lead = 3 - sp->nsp;
    for (int d = 0; d < 3; d++) {
        if (d < lead) {
            g->in[d] = g->out[d] = g->k[d] = g->stride[d] = g->dil[d] = 1;
            g->pad[d] = 0;
            continue;
        }
        int s = d - lead;
        g->in[d] = sp->in[s];
        g->out[d] = sp->out[s];
        g->k[d] = sp->kernel[s];
        g->stride[d] = sp->stride[s];
        g->dil[d] = sp->dilation[s];
        g->pad[d] = sp->pad_begin[s];
    }
}

int64_t kern_geom_in_vol(const kern_conv_geom *g)
{
    return g->in[0] * g->in[1] * g->in[2];
}

int64_t kern_geom_out_vol(const kern_conv_geom *g)
{
    return g->out[0] * g->out[1] * g->out[2];
}

int64_t kern_geom_kvol(const kern_conv_geom *g)
{
    return g->k[0] * g->k[1] * g->k[2];
}

void kern_tap_range(int64_t off, int64_t s, int64_t limit, int64_t n, int64_t *j0, int64_t *j1)
{
    int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t hi = limit - off <= 0 ? 0 : (limit - off + s - 1) / s;
    if (hi > n) hi = n;
    if (lo > hi) lo = hi;
    *j0 = lo;
    *j1 = hi;
}

void kern_im2col_f32(const kern_conv_geom *g, int64_t cin_g, const float *x, int64_t p0, int64_t np, float *col)
{
    const int64_t O1 = g->out[1], O2 = g->out[2], I1 = g->in[1], I2 = g->in[2], s2 = g->stride[2];
    const int64_t in_vol = kern_geom_in_vol(g), kvol = kern_geom_kvol(g);
    for (int64_t r = 0; r < cin_g * kvol; r++) {
        int64_t ci = r / kvol, kk = r % kvol;
        int64_t ka = kk / (g->k[1] * g->k[2]), kb = (kk / g->k[2]) % g->k[1], kc = kk % g->k[2];
        const float *plane = x + ci * in_vol;
        int64_t off2 = kc * g->dil[2] - g->pad[2], lo, hi;
        kern_tap_range(off2, s2, I2, O2, &lo, &hi);
        float *dst = col + r * np;
        int64_t p = p0, end = p0 + np;
        while (p < end) {
            int64_t ow = p % O2, row = p / O2, oh = row % O1, od = row / O1;
            int64_t n = O2 - ow < end - p ? O2 - ow : end - p; /* this output row's part */
            int64_t id = od * g->stride[0] - g->pad[0] + ka * g->dil[0];
            int64_t ih = oh * g->stride[1] - g->pad[1] + kb * g->dil[1];
            float *o = dst + (p - p0);
            if (id < 0 || id >= g->in[0] || ih < 0 || ih >= I1) {
                memset(o, 0, sizeof(float) * (size_t)n);
            } else {
                const float *src = plane + (id * I1 + ih) * I2;
                int64_t a = lo > ow ? lo : ow, b = hi < ow + n ? hi : ow + n;
                if (a > b) a = b = ow;
                for (int64_t j = ow; j < a; j++) o[j - ow] = 0.0f;
                if (s2 == 1)
                    memcpy(o + (a - ow), src + a + off2, sizeof(float) * (size_t)(b - a));
                else
                    for (int64_t j = a; j < b; j++) o[j - ow] = src[j * s2 + off2];
                for (int64_t j = b; j < ow + n; j++) o[j - ow] = 0.0f;
            }
            p += n;
        }
    }
}

void kern_col2im_add_f32(const kern_conv_geom *g, const float *col, int64_t ldcol, int64_t p0, int64_t np, float *y)
{
    const int64_t I1 = g->in[1], I2 = g->in[2], O1 = g->out[1], O2 = g->out[2], s2 = g->stride[2];
    const int64_t kvol = kern_geom_kvol(g);
    for (int64_t kk = 0; kk < kvol; kk++) {
        int64_t ka = kk / (g->k[1] * g->k[2]), kb = (kk / g->k[2]) % g->k[1], kc = kk % g->k[2];
        int64_t off2 = kc * g->dil[2] - g->pad[2], lo, hi;
        kern_tap_range(off2, s2, O2, I2, &lo, &hi);
        const float *src = col + kk * ldcol;
        int64_t p = p0, end = p0 + np;
        while (p < end) {
            int64_t iw = p % I2, row = p / I2, ih = row % I1, id = row / I1;
            int64_t n = I2 - iw < end - p ? I2 - iw : end - p;
            int64_t od = id * g->stride[0] - g->pad[0] + ka * g->dil[0];
            int64_t oh = ih * g->stride[1] - g->pad[1] + kb * g->dil[1];
            if (od >= 0 && od < g->out[0] && oh >= 0 && oh < O1) {
                float *dst = y + (od * O1 + oh) * O2;
                const float *s = src + (p - p0); /* s[0] is column iw */
                int64_t a = lo > iw ? lo : iw, b = hi < iw + n ? hi : iw + n;
                for (int64_t j = a; j < b; j++) dst[j * s2 + off2] += s[j - iw];
            }
            p += n;
        }
    }
}
