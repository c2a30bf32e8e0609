/* sum.h: a float sum whose order is fixed by n alone (bit-identical on every run and
 * at any thread count), shared by the pooling and normalisation ops.
 *
 *   float mean = kern_sum8_f32(x, n) / (float)n;
 */
#ifndef PTQ_KERN_SUM_H
#define PTQ_KERN_SUM_H

#include <stddef.h>

/* Sum of x[0..n): eight interleaved partial sums (a vector register), then a fixed
 * pairwise combination and the tail. */
static inline float kern_sum8_f32(const float *x, size_t n)
{
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += x[i + j];
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += x[i];
    return s;
}

#endif
