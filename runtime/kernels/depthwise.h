/* depthwise.h: direct 2-D depthwise convolution of one channel plane (one input
 * plane, one kh x kw filter, one output plane), with bias and a fused activation.
 *
 *   int64_t band; size_t per = kern_depthwise_scratch(&g, &band);   // floats per thread
 *   kern_depthwise_plane_f32(&g, band, x_plane, w_c, bias_c, &act, y_plane, thread_scratch);
 *
 * Only geometries with a trivial D dim (kern_depthwise_fits): 1-D and 2-D convs. The
 * plane is processed in bands of output rows: the band's input rows are copied with
 * their zero padding into scratch, then every output is the taps summed from zero in
 * row-major tap order, plus the bias last (3x3 and 5x5 at column stride 1 or 2 have
 * AVX2 rows, depthwise_avx2.c, on the avx2 and avx512 paths, and unrolled loops that gcc
 * vectorises otherwise; the generic loop adds the same terms in the same order). Pointers
 * are borrowed. */
#ifndef PTQ_KERN_DEPTHWISE_H
#define PTQ_KERN_DEPTHWISE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/kernels/im2col.h"
#include "runtime/op.h"

/* 1 when g's D dim is trivial (kernel, stride, input and output 1, no padding). */
int kern_depthwise_fits(const kern_conv_geom *g);

/* Floats of scratch one thread needs, and the band height (output rows) used. */
size_t kern_depthwise_scratch(const kern_conv_geom *g, int64_t *band);

/* y (out[1] x out[2]) = act(conv(x (in[1] x in[2]), w (k[1] x k[2])) + bias). */
void kern_depthwise_plane_f32(const kern_conv_geom *g, int64_t band, const float *x, const float *w, float bias,
                              const ptq_activation *act, float *y, float *scratch);

/* Scalar reference of the same plane (double sums, bounds checks, no activation). */
void kern_depthwise_plane_ref(const kern_conv_geom *g, const float *x, const float *w, float bias, float *y);

#endif
