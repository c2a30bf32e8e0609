/* op.h: the operator interface. One ONNX op = one line in ops.def + a ptq_op_def
 * in runtime/ops/<family>.c (see runtime/ops/TEMPLATE.c, docs/adding-an-op.md).
 *
 * Life of a node in the executor (runtime/plan.c):
 *   1. infer(ctx) once per plan: in[i] carry dtype, rank, dims; in[i]->data is
 *      non-NULL only when that input is a constant (initializer or folded).
 *      infer validates EVERY attribute, rank and dtype (message names the node:
 *      use OP_FAIL), sets out[i]->dtype/rank/dims, may allocate ctx->state
 *      (e.g. packed weights) and sets ctx->scratch_bytes.
 *   2. run(ctx) per batch: in[i]->data and out[i]->data are valid (out is
 *      preallocated, uninitialised, never aliases an input); run trusts infer.
 *      When every input is constant the planner runs the node once at plan time
 *      (constant folding) and keeps the result.
 *   3. Dynamic part: a node whose output shape depends on data not known at plan time
 *      (PTQ_OP_DYNAMIC ops setting ctx->dynamic, or an infer failing on an input that "is
 *      not constant"), and every node downstream of it, is inferred again during each run
 *      (ctx->run_time = 1) with its inputs' data (large activations excepted, unless the op
 *      is PTQ_OP_DYNAMIC), just before its run; out[i]->data then points at heap buffers
 *      the planner owns. Ops need nothing special for this: infer/run as above.
 * Kernels parallelise with OpenMP inside run (ctx->nthreads threads) and must give
 * bit-identical results at any thread count: split work over outputs, never split
 * a floating-point reduction across threads. */
#ifndef PTQ_OP_H
#define PTQ_OP_H

#include <stddef.h>

#include "graph.h"
#include "status.h"
#include "tensor.h"

typedef enum {
    PTQ_ACT_NONE = 0,
    PTQ_ACT_RELU,
    PTQ_ACT_CLIP,         /* alpha = min, beta = max */
    PTQ_ACT_LEAKY_RELU,   /* alpha */
    PTQ_ACT_SIGMOID,
    PTQ_ACT_HARD_SIGMOID, /* max(0, min(1, alpha*x + beta)) */
    PTQ_ACT_HARD_SWISH,   /* x * max(0, min(1, x/6 + 0.5)) */
    PTQ_ACT_HARD_SWISH_DIV6 /* x * min(max(x + 3, 0), 6) / 6: the Add, Clip, Mul, Div form, bit for bit */
} ptq_act_kind;

/* An activation fused into the producing op by the planner. */
typedef struct {
    ptq_act_kind kind;
    float alpha, beta;
    int has_post;               /* then y = y * post_mul + post_add (a following scalar Mul and Add) */
    float post_mul, post_add;
} ptq_activation;

/* A per-channel (or scalar) step a Conv applies after its bias and before its activation,
 * exactly as the op it replaces computes it: y = y * v, y + v, y - v or y / v (a following
 * Mul, Add, Sub or Div by a constant; a BatchNormalization is Mul by a then Add of b with
 * norm.c's coefficients). Fused only by keep_values plans (ptq_plan_options). */
typedef enum { PTQ_CHAN_MUL = 0, PTQ_CHAN_ADD, PTQ_CHAN_SUB, PTQ_CHAN_DIV } ptq_chan_kind;
typedef struct {
    ptq_chan_kind kind;
    int per_channel;    /* v has one value per output channel, else one value */
    const float *v;     /* borrowed from the plan's constants */
} ptq_chan_op;
#define PTQ_MAX_CHAN_OPS 8

/* BatchNormalization's coefficients (y = x * a[c] + b[c]): a = scale * (1 / sqrt(var + eps)),
 * b = B - mean * a; shared by the op and the planner so that both give the same bits. */
void ptq_bn_coefficients(const float *scale, const float *bias, const float *mean, const float *var, float eps,
                         int64_t c, float *a, float *b);

/* Applies act to x[0..n) in place (serial; call it per thread chunk). */
void ptq_activation_apply(const ptq_activation *act, float *x, size_t n);

/* Receives a kernel's finished output tiles while they are still in cache (the planner sets
 * ctx->sink for ops flagged PTQ_OP_TILES whose out[0] an observer wants per tile; see
 * ptq_plan_options.tile_sink). tile() runs on the kernel's threads, concurrently for distinct
 * `thread` values (0 .. ctx->nthreads - 1): rows x cols floats, rows `stride` floats apart,
 * final values (bias and fused activation applied); together the tiles of one run cover
 * out[0] exactly once. */
typedef struct ptq_tile_sink {
    void (*tile)(struct ptq_tile_sink *sink, int thread, const float *y, int64_t rows, int64_t cols, int64_t stride);
} ptq_tile_sink;

typedef struct {
    const ptq_node *node;        /* attributes and names; borrowed from the graph */
    int64_t opset;               /* the model's default-domain opset */
    int n_in, n_out;
    const ptq_tensor *const *in; /* in[i] == NULL: omitted optional input */
    ptq_tensor *const *out;      /* out[i] == NULL: omitted optional output */
    void *state;                 /* op-private, set by infer, freed with def->free_state */
    size_t scratch_bytes;        /* infer: bytes of scratch run needs (all threads together) */
    void *scratch;               /* run: 64-byte aligned scratch of scratch_bytes */
    ptq_activation act;          /* fused activation (only for ops with PTQ_OP_FUSE_ACT) */
    int nthreads;                /* threads run may use (>= 1) */
    ptq_tile_sink *sink;         /* NULL, or out[0]'s tiles go there (PTQ_OP_TILES ops) */
    ptq_chan_op chan[PTQ_MAX_CHAN_OPS]; /* Conv and ConvTranspose: in order after the bias, before act */
    int n_chan;
    /* PTQ_OP_DYNAMIC ops: infer sets it when an output's shape depends on input data it does
     * not have yet (outputs' shapes then need not be set); the planner infers the node again
     * at run time, with every input's data, and everything downstream of it too. */
    int dynamic;
    int run_time;                     /* infer is called during a run (the plan's dynamic part) */
    /* PTQ_OP_CONTROL ops (subgraphs): what a subgraph needs from the enclosing plan. */
    int node_index;                   /* the node's index in its graph */
    int n_outer;                      /* values of enclosing scopes the subgraphs read ... */
    const ptq_tensor *const *outer;   /* ... their tensors (data as for in[]) ... */
    const char *const *outer_names;   /* ... and names */
    const unsigned char *in_const;    /* in_const[i] (i < n_in), then in_const[n_in + k] for outer[k]:
                                         the tensor is a constant of the plan (known at plan time) */
    const void *plan_options;         /* the enclosing plan's ptq_plan_options (plan.h) */
} ptq_op_ctx;

enum {
    PTQ_OP_FUSE_ACT = 1u << 0, /* run applies ctx->act to out[0] */
    PTQ_OP_TILES = 1u << 1,    /* run reports out[0]'s tiles to ctx->sink when set */
    /* Output shapes may depend on input values (NonZero, NonMaxSuppression, ...). infer gets
     * in[i]->data for every input it has data of (constants at plan time; all inputs when
     * the planner infers it again at run time) and sets ctx->dynamic when that is not enough.
     * A run-time infer may compute the whole result (kept in state) for run to copy. */
    PTQ_OP_DYNAMIC = 1u << 2,
    /* Has subgraphs (If, Loop, Scan): the planner fills the ctx's outer-scope fields, keeps
     * ctx->state across a run-time infer (infer reuses or replaces it; free_state frees
     * it once) and lets input 0 be omitted. Implies PTQ_OP_DYNAMIC. */
    PTQ_OP_CONTROL = 1u << 3
};

typedef struct {
    ptq_status (*infer)(ptq_op_ctx *ctx);
    ptq_status (*run)(ptq_op_ctx *ctx);
    void (*free_state)(void *state); /* may be NULL */
    unsigned flags;
} ptq_op_def;

/* The op enum, generated from ops.def. */
typedef enum {
#define OP(id, name, sym) PTQ_OP_##id,
#include "ops.def"
#undef OP
    PTQ_OP_COUNT
} ptq_op_id;

/* Looks up an op by type for the default ONNX domain ("" or "ai.onnx");
 * -1 when ptq does not know it. */
int ptq_op_find(const char *domain, const char *op_type);
/* The definition of op id, or NULL when its kernel file is not linked in. */
const ptq_op_def *ptq_op_get(int id);
const char *ptq_op_name(int id);

/* Fails with `code`, prefixing the node's type and name:
 *   OP_FAIL(ctx, PTQ_ERR_SHAPE, "weight rank %d, expected 4", r);
 *   -> "Conv 'stem/conv1': weight rank 3, expected 4" */
#define OP_FAIL(ctx, code, ...)                                                              \
    do {                                                                                     \
        ptq_error(__VA_ARGS__);                                                              \
        ptq_error_prefix("%s '%s': ", (ctx)->node->op_type, (ctx)->node->name);               \
        return (code);                                                                       \
    } while (0)

/* free_state for op state allocated with a single malloc. */
void ptq_op_free_state(void *state);

/* Checks the input count is within [lo, hi] and required inputs are present. */
ptq_status ptq_op_check_inputs(const ptq_op_ctx *ctx, int lo, int hi);

/* QuantizeLinear followed by a DequantizeLinear of the same scale, zero point and axis, as one
 * float step (the planner's fusion; runtime/ops/quantize.c): the pair's output bit for bit. */
extern const ptq_op_def ptq_op_quantize_dequantize;
/* Cast(float16) followed by Cast(float) of a float32 tensor, as one float step (the planner's
 * fusion; runtime/ops/utility.c): each value rounded to float16 and back, bit for bit. */
extern const ptq_op_def ptq_op_round_f16;
/* A chain of element-wise float steps over one value, in one pass (runtime/ops/ewchain.c). */
extern const ptq_op_def ptq_op_ew_chain;
/* The same rounding over n floats from a to b (a == b: in place), nthreads threads (0: one). */
void ptq_round_f16(const float *a, float *b, size_t n, int nthreads);
/* The same on the calling thread alone (inside another op's parallel loop). */
void ptq_round_f16_serial(const float *a, float *b, size_t n);

#endif
