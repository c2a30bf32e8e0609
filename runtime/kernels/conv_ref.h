/* conv_ref.h: scalar references of Conv and ConvTranspose (1-D to 3-D, groups,
 * strides, dilations, pads), the ground truth the optimised kernels are tested against.
 *
 *   kern_conv_geom g; kern_conv_geom_set(&g, &sp, n, c_in, c_out, group);
 *   kern_conv_ref_f32(&g, x, w, bias_or_NULL, y);            // y: n x c_out x out volume
 *
 * Layouts: x [N, C_in, in...], y [N, C_out, out...]; Conv weight [C_out, C_in/group, k...],
 * ConvTranspose weight [C_in, C_out/group, k...]. Sums in double, in a fixed order;
 * slow (one pass per output element), meant for tests. Pointers are borrowed. */
#ifndef PTQ_KERN_CONV_REF_H
#define PTQ_KERN_CONV_REF_H

#include "runtime/kernels/im2col.h"

/* Conv (the "conv2d_ref" of every optimised conv kernel, for 1 to 3 spatial dims). */
void kern_conv_ref_f32(const kern_conv_geom *g, const float *x, const float *w, const float *bias, float *y);
/* ConvTranspose: y[o] = bias + sum over inputs i and taps t with o = i * stride - pad + t * dil. */
void kern_conv_transpose_ref_f32(const kern_conv_geom *g, const float *x, const float *w, const float *bias, float *y);

#endif
