/* refine.h: the accuracy algorithms that change a QDQ model's activation scales, int8 weight
 * codes and float biases after calibration (../shared/docs/accuracy-algorithms.md), in this
 * order: output-aware activation scales, learned weight rounding (AdaRound), empirical bias
 * correction. They keep TensorRT's
 * placement: no Q/DQ pair is added, moved or removed.
 *
 *   eng_refine_options o = eng_refine_defaults();
 *   o.adaround_iters = 2000;                        // 0: nearest rounding stays
 *   eng_refine_report rep;
 *   TRY(eng_refine(qdq, fp32, &src, &o, &rep));   // src: the images (engine/source.h); qdq edited in place
 *
 * Layers are the quantized Conv (2-D, any group count), Gemm (transA 0) and MatMul nodes
 * whose weight is an int8 initializer with a per-channel DequantizeLinear and whose data
 * input is a dequantized activation. They are processed in topological order, grouped by
 * the activation they read, in one sweep over the network (engine/stepper.h): an FP32 and a
 * QDQ model advanced together over all the refinement images, segment by segment, the layer
 * inputs still needed kept between segments; each QDQ segment is planned when it is reached,
 * so each layer sees x~, the input the layers before it, already refined, feed it. The
 * output-aware scales take a sweep of their own before the weights' (each scale chosen as
 * the scales before it make x~). The results are those of running the whole partly refined
 * model again for each activation, at the cost of one pass.
 *
 * Bias correction, per output channel c: b_c += E[W x]_c - E[W~ x~]_c over the images and
 * every output position. Both means are exact through linearity: E[W x] = W E[patch(x)],
 * with the mean of the layer's input patches (im2col columns, zero padding included)
 * accumulated in double over every position. A Conv without bias gets one (zeros + the
 * correction); a MatMul's bias is the per-channel initializer of the Add that alone consumes
 * it (otherwise that MatMul is not corrected).
 *
 * Everything is deterministic: sums run in a fixed order (images in dataset order, positions
 * in row-major order), sampled positions come from a counter-based generator, and the
 * results are the same bytes at any thread count, batch size and memory budget. Memory: the
 * layer inputs the sweep still needs, for every image (up to memory_budget bytes in memory,
 * the rest in a temporary file), one batch of a segment's activations, the patch sums, and
 * `positions` sampled patches per layer. */
#ifndef PTQ_ENGINE_REFINE_H
#define PTQ_ENGINE_REFINE_H

#include <stdint.h>

#include "engine/source.h"
#include "runtime/graph.h"

/* The candidate amax values of activation `name` (the calibration methods' answers);
 * returns how many were written (at most cap), 0 when the tensor has no statistics, -1 (with
 * the error message set) when they could not be computed: the refinement then fails. */
typedef int (*eng_candidates_fn)(const char *name, float *amax, int cap, void *user);

typedef struct {
    int bias_correction;     /* 1 */
    /* Output-aware activation scales (before the weights): each quantized activation's amax
     * chosen among candidates() and a geometric grid of 20 between their extremes, by the
     * relative output error of the layers reading it; on_amax() hears each choice. */
    int output_aware;
    eng_candidates_fn candidates;
    void (*on_amax)(const char *name, float amax, void *user);
    void *user;
    int adaround_iters;      /* Adam iterations of AdaRound per layer; 0: off (default) */
    int positions;           /* sampled output positions per layer (4096; AdaRound, output-aware scales) */
    uint64_t seed;           /* sampling (0) */
    int nthreads;            /* 0: OpenMP's default */
    size_t memory_budget;    /* bytes of layer inputs kept in memory between layers (0: 1 GiB);
                              * beyond it they go to a temporary file */
    int quiet;               /* no progress */
    pp_log log;              /* where progress goes (zero: a terminal's stderr) */
} eng_refine_options;

typedef struct {
    int layers;              /* layers found */
    int corrected;           /* layers whose bias was corrected */
    int rounded;             /* layers whose weights AdaRound learned */
    int scales;              /* activations whose amax the output-aware search chose */
    int passes;              /* sweeps over the network (each runs every layer once on every image) */
    int segments;            /* the parts of the network the sweeps ran one after the other */
    size_t peak_memory;      /* most bytes of layer inputs kept in memory at once */
    size_t peak_spilled;     /* most bytes of them in the temporary file at once */
    int images;              /* refinement images */
    long codes_changed;      /* int8 weight codes that differ from nearest rounding */
    double max_shift;        /* the largest |bias correction| relative to the channel's output mean magnitude */
    double seconds_passes, seconds_scales, seconds_adaround, seconds_total;
} eng_refine_report;

eng_refine_options eng_refine_defaults(void);

/* Refines qdq (made by quant_insert_qdq from fp32, both opset >= 13, same tensor names) in
 * place on the batches of src, which is read once per pass. */
ptq_status eng_refine(ptq_graph *qdq, const ptq_graph *fp32, const eng_source *src, const eng_refine_options *opt,
                      eng_refine_report *rep);

#endif
