/* conv_ref.c: scalar Conv and ConvTranspose references (see conv_ref.h). */
#include <stdlib.h>

#include "runtime/kernels/conv_ref.h"

void kern_conv_ref_f32(const kern_conv_geom *g, const float *x, const float *w, const float *bias, float *y)
{
    const int64_t cin_g = g->c_in / g->group, cout_g = g->c_out / g->group;
    const int64_t in_vol = kern_geom_in_vol(g), out_vol = kern_geom_out_vol(g), kvol = kern_geom_kvol(g);
    for (int64_t n = 0; n < g->batch; n++)
        for (int64_t oc = 0; oc < g->c_out; oc++) {
            int64_t grp = oc / cout_g;
            const float *wo = w + oc * cin_g * kvol;
            float *yo = y + (n * g->c_out + oc) * out_vol;
            for (int64_t od = 0; od < g->out[0]; od++)
                for (int64_t oh = 0; oh < g->out[1]; oh++)
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {
                        double s = bias ? (double)bias[oc] : 0.0;
                        for (int64_t ci = 0; ci < cin_g; ci++) {
                            const float *xp = x + (n * g->c_in + grp * cin_g + ci) * in_vol;
                            for (int64_t a = 0; a < g->k[0]; a++) {
                                int64_t id = od * g->stride[0] - g->pad[0] + a * g->dil[0];
                                if (id < 0 || id >= g->in[0]) continue;
                                for (int64_t b = 0; b < g->k[1]; b++) {
                                    int64_t ih = oh * g->stride[1] - g->pad[1] + b * g->dil[1];
                                    if (ih < 0 || ih >= g->in[1]) continue;
                                    for (int64_t c = 0; c < g->k[2]; c++) {
                                        int64_t iw = ow * g->stride[2] - g->pad[2] + c * g->dil[2];
                                        if (iw < 0 || iw >= g->in[2]) continue;
                                        s += (double)wo[((ci * g->k[0] + a) * g->k[1] + b) * g->k[2] + c] *
                                             (double)xp[(id * g->in[1] + ih) * g->in[2] + iw];
                                    }
                                }
                            }
                        }
                        yo[(od * g->out[1] + oh) * g->out[2] + ow] = (float)s;
                    }
        }
}

void kern_conv_transpose_ref_f32(const kern_conv_geom *g, const float *x, const float *w, const float *bias, float *y)
{
    const int64_t cin_g = g->c_in / g->group, cout_g = g->c_out / g->group;
    const int64_t in_vol = kern_geom_in_vol(g), out_vol = kern_geom_out_vol(g), kvol = kern_geom_kvol(g);
    double *acc = malloc(sizeof(double) * (size_t)(out_vol > 0 ? out_vol : 1));
    if (!acc) return; /* tests only: the caller's comparison then fails */
    for (int64_t n = 0; n < g->batch; n++)
        for (int64_t oc = 0; oc < g->c_out; oc++) {
            int64_t grp = oc / cout_g, oc_g = oc % cout_g;
            for (int64_t i = 0; i < out_vol; i++) acc[i] = bias ? (double)bias[oc] : 0.0;
            for (int64_t ci = 0; ci < cin_g; ci++) {
                const float *xp = x + (n * g->c_in + grp * cin_g + ci) * in_vol;
                const float *wp = w + ((grp * cin_g + ci) * cout_g + oc_g) * kvol;
                for (int64_t id = 0; id < g->in[0]; id++)
                    for (int64_t ih = 0; ih < g->in[1]; ih++)
                        for (int64_t iw = 0; iw < g->in[2]; iw++) {
                            double xv = (double)xp[(id * g->in[1] + ih) * g->in[2] + iw];
                            for (int64_t a = 0; a < g->k[0]; a++) {
                                int64_t od = id * g->stride[0] - g->pad[0] + a * g->dil[0];
                                if (od < 0 || od >= g->out[0]) continue;
                                for (int64_t b = 0; b < g->k[1]; b++) {
                                    int64_t oh = ih * g->stride[1] - g->pad[1] + b * g->dil[1];
                                    if (oh < 0 || oh >= g->out[1]) continue;
                                    for (int64_t c = 0; c < g->k[2]; c++) {
                                        int64_t ow = iw * g->stride[2] - g->pad[2] + c * g->dil[2];
                                        if (ow < 0 || ow >= g->out[2]) continue;
                                        acc[(od * g->out[1] + oh) * g->out[2] + ow] +=
                                            xv * (double)wp[(a * g->k[1] + b) * g->k[2] + c];
                                    }
                                }
                            }
                        }
            }
            float *yo = y + (n * g->c_out + oc) * out_vol;
            for (int64_t i = 0; i < out_vol; i++) yo[i] = (float)acc[i];
        }
    free(acc);
}
