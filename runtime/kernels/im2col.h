/* im2col.h: convolution geometry normalised to three spatial dims, and the column
 * transforms that turn (transposed) convolution into GEMM.
 *
 *   kern_conv_geom g;
 *   kern_conv_geom_set(&g, &sp, n, c_in, c_out, group);     // sp from ptq_spatial_resolve
 *   kern_im2col_f32(&g, cin_g, x_group, p0, np, col);       // col: (cin_g * kvol) x np
 *   sgemm(W_group [cout_g x cin_g*kvol], col) -> y columns [p0, p0 + np)
 *
 * Spatial dims are (D, H, W): a 1-D op has D = H = 1, a 2-D op D = 1 (kernel 1,
 * stride 1, dilation 1, pad 0 in the dims it lacks). For Conv, in/out are the input
 * and output spatial dims; for ConvTranspose too (in = the smaller one: x's dims).
 * Positions are flattened row-major over (D, H, W). Pointers are borrowed. */
#ifndef PTQ_KERN_IM2COL_H
#define PTQ_KERN_IM2COL_H

#include <stdint.h>

#include "runtime/shape.h"

typedef struct {
    int64_t batch, c_in, c_out, group; /* channels are totals over all groups */
    int64_t in[3], out[3];             /* spatial (D, H, W) */
    int64_t k[3], stride[3], dil[3], pad[3]; /* pad: leading (begin) padding */
} kern_conv_geom;

/* Fills g from a resolved ptq_spatial (1 to 3 dims) and the channel counts. */
void kern_conv_geom_set(kern_conv_geom *g, const ptq_spatial *sp, int64_t batch, int64_t c_in, int64_t c_out,
                        int64_t group);
/* Elements of one input plane, one output plane, one kernel. */
int64_t kern_geom_in_vol(const kern_conv_geom *g);
int64_t kern_geom_out_vol(const kern_conv_geom *g);
int64_t kern_geom_kvol(const kern_conv_geom *g);

/* The [j0, j1) range of j in [0, n) for which j * s + off lies in [0, limit). */
void kern_tap_range(int64_t off, int64_t s, int64_t limit, int64_t n, int64_t *j0, int64_t *j1);

/* Conv: columns [p0, p0 + np) (output positions) of the im2col matrix of cin_g input
 * planes x (each in_vol long): col[r * np + j] with r = ((ci * k0 + a) * k1 + b) * k2 + c,
 * zero where the tap falls in the padding. */
void kern_im2col_f32(const kern_conv_geom *g, int64_t cin_g, const float *x, int64_t p0, int64_t np, float *col);

/* ConvTranspose: adds the kvol rows of one output channel's column block (col[kk * ldcol
 * + j], j = input position p0 + j) into that channel's output plane y (out_vol long),
 * skipping taps that land outside it; kernel taps in order, positions in order. */
void kern_col2im_add_f32(const kern_conv_geom *g, const float *col, int64_t ldcol, int64_t p0, int64_t np, float *y);

#endif
