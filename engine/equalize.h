/* equalize.h: activation equalization in front of depthwise convolutions, before
 * calibration (`ptq quantize --equalize`).
 *
 * A depthwise Conv (one input channel per group) quantizes its input X per tensor, so a
 * channel whose values span 1 while another's span 20 keeps a twentieth of the int8 levels.
 * When X is made per channel by a linear chain from a Conv, L1 -> [BatchNormalization] ->
 * [Relu] -> X -> depthwise L2, each tensor read by nothing else, channel c can be scaled:
 * L1's channel c (the BatchNormalization's scale and bias, else L1's weights and bias) times
 * s_c, L2's filter c divided by s_c. s_c is the power of two with r_c s_c in (R/2, R], r_c the
 * channel's max |x| over the images and R the largest r_c: every channel then spans at least
 * half of the tensor's range. Powers of two make the rewrite exact: the FP32 model computes
 * the same bits, the weights' int8 codes are the same (per-channel scales move by s_c), and
 * only the calibration of X sees the difference. TensorRT folds the BatchNormalization and
 * reads the rest as it reads any QDQ model: placement does not change.
 *
 *   eng_equalization eq = {0};
 *   TRY(eng_equalize_images(g, &dataset_options, &cfg, NULL, &eq));  // the three steps below on images, or:
 *   TRY(eng_equalize_find(g, &eq));                           // the pairs (g: constants as initializers)
 *   TRY(eng_equalize_measure(g, &src, nthreads, pool, &eq));  // per-channel ranges -> scales
 *   TRY(eng_equalize_apply(g, &eq));                          // any fresh load of the same model too
 *   eng_equalization_free(&eq);
 *
 * Deterministic: a max over the images, whatever the batch or thread count. */
#ifndef PTQ_ENGINE_EQUALIZE_H
#define PTQ_ENGINE_EQUALIZE_H

#include "engine/source.h"
#include "preprocess/dataset.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

typedef struct {
    char *producer;       /* L1, the Conv that makes the channels */
    char *bn;             /* its BatchNormalization, or NULL */
    char *consumer;       /* L2, the depthwise Conv */
    char *tensor;         /* X, L2's input */
    int64_t channels;
    float *range;         /* r_c: max |x| of channel c over the images */
    float *scale;         /* s_c (powers of two; 1 until measured) */
    double spread;        /* max r_c / min r_c over live channels before, and (spread_after) after */
    double spread_after;
} eng_eq_pair;

typedef struct {
    eng_eq_pair *pairs;
    int n;
    int images;           /* images measured */
    double seconds;
} eng_equalization;

/* The pairs of g (values and node names as in the file; constants already initializers). */
ptq_status eng_equalize_find(const ptq_graph *g, eng_equalization *eq);
/* One FP32 pass of g over src (stopping at the last X): the ranges and the scales. */
ptq_status eng_equalize_measure(const ptq_graph *g, const eng_source *src, int nthreads, ptq_arena_pool *pool,
                                eng_equalization *eq);
/* The three steps on the images of a dataset: g's constants become initializers, its pairs are
 * found, measured on the images of o (label "equalize") and applied to g. */
ptq_status eng_equalize_images(ptq_graph *g, const pp_dataset_options *o, const pp_config *cfg, ptq_arena_pool *pool,
                               eng_equalization *eq);
/* Scales g's initializers by eq (found on the same model; fails if a pair is missing). */
ptq_status eng_equalize_apply(ptq_graph *g, const eng_equalization *eq);
void eng_equalization_free(eng_equalization *eq);

#endif
