/* adaround.h: AdaRound (Nagel et al. 2020, "Up or Down?") for ONE layer: FP32 weights, their
 * per-channel scales and sampled input patches in, int8 codes out. No graph, no files.
 *
 *   quant_adaround_options o = quant_adaround_defaults();
 *   o.seed = 7;
 *   quant_adaround_result r;
 *   TRY(quant_adaround_layer(w, cout, k, groups, scale, x, xq, p, &o, codes, &r));
 *   // codes[c * k + i] * scale[c] is the dequantized weight
 *
 * Layout: w and codes are [cout x k] (row c = output channel c). Output channel c reads
 * input block g = c / (cout / groups); x and xq are [p x groups*k], row j the input patches
 * of sampled position j (im2col), block g's k values at g * k. x is what the
 * FP32 model feeds the layer, xq what the partly quantized model feeds it (already through
 * the input's Q/DQ). The target is y = W x (FP32 weights on FP32 input); the learned layer
 * computes W~ xq with W~ = s * clamp(floor(W/s) + h(V), -128, 127),
 * h(V) = clamp(sigmoid(V) * 1.2 - 0.1, 0, 1).
 *
 * Per output channel c the loss is mean over the iteration's sampled positions of
 * (y_cj - W~_c . xq_j)^2, plus lambda * sum (1 - |2h - 1|^beta) once the warm-up is over,
 * beta falling LINEARLY from beta_hi to beta_lo over the remaining iterations; the layer's
 * loss is the sum over channels (AIMET's "sum over channels, mean over positions"). Adam on V
 * (PyTorch's form). Hardening: code = clamp(floor(W/s) + (h >= 0.5), -128, 127).
 *
 * Guarantees:
 *   - a channel's learned codes are kept only where their reconstruction loss over ALL p
 *     positions is not higher than that of nearest rounding (quant_round_s8: ptq's weight
 *     quantizer, rint of the float quotient W/s, half to even, saturated); elsewhere the
 *     channel gets the nearest codes (counted in fell_back);
 *   - a weight whose W/s is an integer in [-128, 127] keeps that code (it is not trained);
 *   - the codes depend on the inputs and options only, never on nthreads: every sum has one
 *     order (kern_sgemm's k-ordered FMA chains, per-channel sums in position order), threads
 *     split output channels, positions are drawn by splitmix64 from (seed, iteration), and
 *     the nonlinearities come from runtime/kernels/mathf.h (no libm).
 * Cost per iteration: two GEMMs of cout x k x batch (kern_sgemm; loops across channels for
 * a depthwise layer, plain loops for 2 or 3 channels per group) and one element-wise pass
 * over the cout x k weights (vectorised in an AVX2 and an AVX-512 copy picked like
 * kern_sgemm's path, PTQ_ISA included; same bits). Memory: about 8 cout*k + cout*p floats,
 * plus groups*k*p for a depthwise layer (its patches copied tap-major: floats, or int8 codes
 * where x_step is their grid), whatever iters.
 * All pointers are borrowed for the call. */
#ifndef PTQ_QUANT_ADAROUND_H
#define PTQ_QUANT_ADAROUND_H

#include <stdint.h>

#include "runtime/status.h"

typedef struct {
    int iters;              /* Adam iterations (default 500: on the labelled pages of docs/results.md as
                             * accurate as 2000 in a quarter of the time; 0: harden the starting point) */
    int batch;              /* positions sampled (with replacement) per iteration (64) */
    float lambda;           /* regulariser weight (0.01) */
    float beta_hi, beta_lo; /* beta falls linearly 20 -> 2 after the warm-up (both >= 1) */
    float warmup;           /* share of the iterations with the regulariser off (0.2), in [0, 1] */
    float lr;               /* Adam learning rate (1e-2; betas 0.9, 0.999, eps 1e-8): the paper's 1e-3 is for
                             * 10,000 iterations and leaves most h(V) undecided after 2000 */
    uint64_t seed;          /* sampling seed (0) */
    float x_step;           /* > 0: the scale of xq's DequantizeLinear (zero point 0). A depthwise layer whose
                             * xq elements are all (float)code * x_step, bit for bit, with int8 codes keeps
                             * them as codes: a quarter of the bytes per iteration, the same results */
    int nthreads;           /* 0: OpenMP's default; the codes do not depend on it */
} quant_adaround_options;

quant_adaround_options quant_adaround_defaults(void);

typedef struct {
    double loss_nearest; /* sum over channels of the mean over all p positions, nearest codes */
    double loss_learned; /* the same for the codes written (never above loss_nearest per channel) */
    int changed;         /* codes written that differ from nearest rounding */
    int fell_back;       /* channels whose learned codes lost to nearest and were replaced */
    int codes_in;        /* a depthwise layer kept xq as int8 codes (options.x_step) */
} quant_adaround_result;

/* Learns the rounding of one layer's weights; writes codes[cout x k] and *res (res may be
 * NULL). PTQ_ERR_ARG (with a message) for bad shapes, options, a scale that is not finite
 * and > 0, or a weight or input that is not finite; PTQ_ERR_NOMEM. codes is untouched on
 * error. */
ptq_status quant_adaround_layer(const float *w, int cout, int k, int groups, const float *scale, const float *x,
                                const float *xq, int p, const quant_adaround_options *o, int8_t *codes,
                                quant_adaround_result *res);

#endif
