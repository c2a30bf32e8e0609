/* qdq.h: Q/DQ insertion by TensorRT's explicit-quantization rules (quantization spec §5).
 *
 *   quant_options o = quant_defaults();
 *   o.range = my_lookup; o.range_user = ranges;        // amax of an activation tensor
 *   quant_report rep = {0};
 *   TRY(quant_insert_qdq(g, &o, &rep));                 // edits g in place (opset >= 13)
 *   for (int i = 0; i < rep.n_nodes; i++) printf("%s: %s\n", ..., rep.nodes[i].reason);
 *   quant_report_free(&rep);
 *
 * The rules are one table (quant/rules.c). Activations: per-tensor int8 symmetric,
 * zero point 0, scale = amax/127. Weights: per-channel on the output-channel axis,
 * stored as int8 initializers + DequantizeLinear (or float + Q + DQ with
 * weights_fp32). Inserted names derive from the quantized tensor:
 * <t>_QuantizeLinear, <t>_DequantizeLinear, <t>_quantized, <t>_dequantized,
 * <t>_scale, <t>_zero_point (a numeric suffix only when a name is taken). */
#ifndef PTQ_QUANT_QDQ_H
#define PTQ_QUANT_QDQ_H

#include "runtime/graph.h"

/* Looks up the amax of activation tensor `name`; returns 1 and sets *amax if known. */
typedef int (*quant_range_fn)(const char *name, float *amax, void *user);

typedef struct {
    const char *const *exclude_nodes;     /* node names or fnmatch globs */
    int n_exclude_nodes;
    const char *const *exclude_op_types;  /* op types, exact */
    int n_exclude_op_types;
    int dedicated_qdq;                    /* one Q/DQ pair per consumer instead of per tensor */
    int weights_fp32;                     /* keep float weights with Q and DQ */
    quant_range_fn range;
    void *range_user;
} quant_options;

typedef enum {
    QUANT_NODE_QUANTIZED = 0,
    QUANT_NODE_NO_RULE,     /* op not in the table: stays float */
    QUANT_NODE_EXCLUDED,    /* by --exclude-nodes or --exclude-op-types */
    QUANT_NODE_UNSUPPORTED  /* rule applies but dtype, missing range or weight layout prevents it */
} quant_node_state;

typedef struct {
    char *node_name, *op_type;
    quant_node_state state;
    char reason[160];
} quant_node_report;

typedef struct {
    quant_node_report *nodes;    /* one per node of the input graph, in file order */
    int n_nodes;
    int n_activations;           /* activation tensors given a Q/DQ pair */
    int n_weights;               /* weights quantized per channel */
    int n_excluded;
    int n_ort_float;             /* pools kept float so that ONNX Runtime runs the model (reason in nodes[]) */
    char **unmatched;            /* exclusion patterns that matched nothing */
    int n_unmatched;
} quant_report;

quant_options quant_defaults(void);
ptq_status quant_insert_qdq(ptq_graph *g, const quant_options *opt, quant_report *report);
void quant_report_free(quant_report *r);

/* What calibration must observe for quant_insert_qdq with any exclusion list. Prepares g as
 * `ptq quantize` does (constants to initializers, opset 13: pass a copy), then *want (owned,
 * g->n_values entries of the prepared g) is -1 for a value that never gets a Q/DQ pair; for an
 * activation that does with no exclusions, the value whose statistics stand for it: v itself,
 * or the tensor v is a view of through Reshape, Flatten, Squeeze, Unsqueeze, Identity or
 * Transpose (the same values), so that such a chain is observed once. */
ptq_status quant_calib_tensors(ptq_graph *g, int **want);

/* post[v] (g->n_values entries) = 1 for the values computed from a data-dependent selection
 * (NonZero, TopK, NonMaxSuppression, Compress, Unique, control flow): a detector's
 * post-processing, which TensorRT runs in float32 and where only weighted layers get Q/DQ. */
ptq_status quant_post_processing(const ptq_graph *g, uint8_t *post);

/* The weight rule: per-channel amax over `axis` of a float tensor; channels whose
 * amax is zero, tiny (< 2^-30) or not finite get 1.0. amax has dims[axis] entries. */
void quant_weight_amax(const ptq_tensor *w, int axis, float *amax);
/* q = saturate_int8(round_half_to_even(x / scale)) (ONNX QuantizeLinear, zero point 0). */
int8_t quant_round_s8(float x, float scale);

#endif
