/* act.h: the fused-activation epilogue of the weighted ops, vectorised.
 *
 *   kern_act_f32(&ctx->act, row, n);     // row[0..n) = act(row), in place
 *
 * Computes exactly what ptq_activation_apply (runtime/op.h) computes, bit for bit (the
 * same float operations in the same order, no FMA contraction: ptq builds with
 * -std=c11), with the loops built for AVX-512, AVX2 and baseline x86-64 and picked at
 * load time. Sigmoid is ptq_sigmoidf (runtime/kernels/mathf.h) in both. */
#ifndef PTQ_KERN_ACT_H
#define PTQ_KERN_ACT_H

#include <stddef.h>

#include "runtime/op.h"

/* 1 when act changes anything (a kind other than NONE, or a post multiply-add). */
int kern_act_active(const ptq_activation *act);
void kern_act_f32(const ptq_activation *act, float *x, size_t n);

#endif
