/* shape.h: shape arithmetic shared by all ops (never copy it into a kernel).
 *
 *   int64_t axis;  if (ptq_norm_axis(a, rank, &axis)) OP_FAIL(...);
 *   ptq_tensor out; TRY(ptq_broadcast(&a, &b, &out));    // sets out.rank/dims
 *   ptq_spatial sp; TRY(ptq_spatial_resolve(ctx, 2, in_dims, kernel, 0, &sp));
 */
#ifndef PTQ_SHAPE_H
#define PTQ_SHAPE_H

#include <stdint.h>

#include "op.h"
#include "tensor.h"

/* dst takes src's rank and dims (dtype and data untouched). */
void ptq_shape_copy(ptq_tensor *dst, const ptq_tensor *src);

/* Normalises a possibly negative axis into [0, rank); returns 0 on success, -1 if out of range. */
int ptq_norm_axis(int64_t axis, int rank, int64_t *out);

/* Multidirectional (numpy) broadcasting of a and b; sets out->rank and out->dims.
 * Fails with PTQ_ERR_SHAPE naming both shapes. */
ptq_status ptq_broadcast(const ptq_tensor *a, const ptq_tensor *b, ptq_tensor *out);
/* Same for n shapes (Sum, Max, Where...). */
ptq_status ptq_broadcast_n(const ptq_tensor *const *ts, int n, ptq_tensor *out);
/* Strides (in elements) of `t` broadcast to `out`'s rank: 0 where t's dim is 1 and out's is not.
 * strides has out->rank entries. */
void ptq_broadcast_strides(const ptq_tensor *t, const ptq_tensor *out, int64_t *strides);
/* Plain row-major strides of t (elements). */
void ptq_strides(const ptq_tensor *t, int64_t *strides);

/* y (rank dims, row-major, es-byte elements) = x[base + sum_d idx_d * strides[d]] (element
 * strides, any sign): the copy behind Transpose and Slice, one contiguous or strided run per
 * innermost row. */
void ptq_strided_copy(void *y, const void *x, int rank, const int64_t *dims, const int64_t *strides, int64_t base,
                      size_t es);

/* Convolution / pooling geometry over `nsp` spatial dims, from the node's attributes
 * kernel_shape (or `kernel` when given), strides, dilations, pads, auto_pad, ceil_mode
 * (pooling), output_padding/output_shape (transposed). */
typedef struct {
    int nsp;                           /* spatial dims (1..3) */
    int64_t in[3], kernel[3], stride[3], dilation[3];
    int64_t pad_begin[3], pad_end[3];
    int64_t out[3];
} ptq_spatial;

/* For Conv and pooling: in = input spatial dims, kernel = kernel dims (from weight
 * for Conv, NULL to read kernel_shape). ceil_mode honoured for pooling. */
ptq_status ptq_spatial_resolve(const ptq_op_ctx *ctx, int nsp, const int64_t *in, const int64_t *kernel,
                               ptq_spatial *sp);
/* For ConvTranspose: also reads output_padding and output_shape. */
ptq_status ptq_spatial_resolve_transposed(const ptq_op_ctx *ctx, int nsp, const int64_t *in, const int64_t *kernel,
                                          ptq_spatial *sp);

#endif
