/* depthwise_isa.h: the ISA-specific rows of depthwise.c (depthwise_avx2.c). */
#ifndef PTQ_KERN_DEPTHWISE_ISA_H
#define PTQ_KERN_DEPTHWISE_ISA_H

#include <stdint.h>

/* rows output rows of width ow of a k x k (k = 3 or 5) depthwise filter w at column stride sw
 * (1 or 2), from the padded band pad (pitch pp, sh padded rows per output row), plus bias. */
void kern_dw_rows_avx2(const float *pad, int64_t pp, int64_t sh, float *y, int64_t ow, int64_t rows, const float *w,
                       float bias, int k, int sw);

#endif
