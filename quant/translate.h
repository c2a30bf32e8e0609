/* translate.h: a QDQ model to TensorRT's implicit quantization (quantization spec §6, the job
 * of NVIDIA's qdq_translator): the same network without QuantizeLinear/DequantizeLinear,
 * plus the INT8 scale of every tensor that had a Q/DQ pair and the nodes left in float.
 *
 *   quant_translate_options o = quant_translate_defaults();
 *   quant_translation tr = {0};
 *   TRY(quant_translate(g, &o, &tr));      // edits g in place
 *   ... tr.scales[i].name, tr.scales[i].scale, tr.fp16_nodes[j] ...
 *   quant_translation_free(&tr);
 *
 * What it does, in order:
 *  1. weights: an int8 initializer -> DequantizeLinear (or float -> Q -> DQ) becomes a float
 *     initializer holding the dequantized values, under the DequantizeLinear's output name;
 *  2. activations: x -> Q -> DQ -> consumers becomes x -> consumers; the Q's scale is x's
 *     INT8 scale (symmetric int8 only: a non-zero or uint8 zero point is refused);
 *  3. BatchNormalization folds into the Conv before it (its only consumer), in double;
 *  4. scales propagate forward through ops that keep the range (Pad, Transpose, MaxPool,
 *     Flatten, Relu, Squeeze, Reshape, Sigmoid), optionally through Concat (the largest input
 *     scale), AveragePool/GlobalAveragePool/ReduceMean and Mul; with `dla`, a Conv output
 *     without a scale that feeds an element-wise node gets scale 1.0;
 *  5. fp16 nodes: the weighted nodes (Conv, ConvTranspose, Gemm, MatMul) whose activation
 *     inputs have no INT8 scale, in graph order (trtexec --layerPrecisions=name:fp16,...).
 * Scales are sorted by name. Names in the result are owned by it. */
#ifndef PTQ_QUANT_TRANSLATE_H
#define PTQ_QUANT_TRANSLATE_H

#include "runtime/graph.h"

typedef struct {
    int propagate_concat;  /* Concat output: the largest of its inputs' scales (all must have one) */
    int propagate_pool;    /* AveragePool, GlobalAveragePool, ReduceMean: the input's scale */
    int propagate_mul;     /* Mul: the largest scale of its non-constant inputs (all must have one) */
    int dla;               /* scale 1.0 for Conv outputs without one that feed element-wise nodes */
} quant_translate_options;

typedef struct {
    char *name;
    float scale;
} quant_scale;

typedef struct {
    quant_scale *scales;   /* INT8 tensor scales, sorted byte-wise by name */
    int n_scales;
    char **fp16_nodes;     /* weighted nodes left in float compute, graph order */
    int n_fp16;
    int n_activation_pairs, n_weights, n_bn_folded, n_propagated;
    int n_conflicts;       /* tensors quantized with different scales: the largest is kept */
} quant_translation;

quant_translate_options quant_translate_defaults(void);
ptq_status quant_translate(ptq_graph *g, const quant_translate_options *o, quant_translation *out);
void quant_translation_free(quant_translation *t); /* NULL-safe */

#endif
