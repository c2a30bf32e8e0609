/* plan.h: the FP32 executor. A plan binds a graph to concrete input shapes, folds
 * constants (shape subgraphs included), infers every shape, fuses what it may, lays
 * out one activation arena by liveness, then runs batches with no allocation.
 *
 *   ptq_plan_options opt = ptq_plan_defaults();
 *   ptq_input_shape shp = {.name = "x", .rank = 4, .dims = {1, 3, 640, 640}};
 *   ptq_plan *p = NULL;
 *   TRY(ptq_plan_create(g, &shp, 1, &opt, &p));   // g must outlive p
 *   TRY(ptq_plan_run(p, inputs, n));               // inputs in graph-input order
 *   const ptq_tensor *y = ptq_plan_output(p, 0);    // borrowed: valid until the next run
 *   ptq_plan_destroy(p);
 *
 * Observers see every float activation once, as it is produced, in plan order:
 * graph inputs first, then node outputs. The tensor is borrowed for the duration
 * of the call. Tensors an observer may see are never fused away. PTQ_PROFILE=1 prints the
 * time per op type, and the observers' time, when the plan is destroyed.
 *
 * Data-dependent shapes (NonZero, NonMaxSuppression, Loop...): a node whose output shape
 * depends on values not known at plan time (op.h: PTQ_OP_DYNAMIC), and every node
 * downstream of it, form the plan's dynamic part. Those nodes are inferred again at each
 * run, with their actual inputs, and their outputs live in heap buffers the plan owns
 * (reused from value to value and run to run, freed by destroy); ptq_plan_output gives a
 * dynamic output as of the last run, ptq_plan_value the shape of any value as of the last run. Everything else keeps the static
 * arena. Subgraphs (If, Loop, Scan) run as plans of their own, made by the control op. */
#ifndef PTQ_PLAN_H
#define PTQ_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "status.h"
#include "tensor.h"

/* A pool of activation arenas that plans created with it take their arena from and give it
 * back to when destroyed, so that a program running many plans one after the other (the
 * QDQ variants of compare and auto-exclusion, a plan per input shape) reuses memory the
 * kernel has already mapped instead of faulting in fresh pages for every plan. It keeps at
 * most 4 free arenas (the largest); an arena is taken when it is big enough and not more
 * than twice the plan's need. Thread-safe; destroy it after every plan made with it. */
typedef struct ptq_arena_pool ptq_arena_pool;
ptq_arena_pool *ptq_arena_pool_create(void);
void ptq_arena_pool_destroy(ptq_arena_pool *pool); /* NULL-safe; frees the free arenas */
/* A block of at least `bytes` (*cap: its size) from the pool (NULL pool: a new one); give it
 * back with ptq_arena_pool_put (which frees it when the pool is NULL). */
void *ptq_arena_pool_take(ptq_arena_pool *pool, size_t bytes, size_t *cap);
void ptq_arena_pool_put(ptq_arena_pool *pool, void *mem, size_t cap);

/* name: the tensor's ONNX name; node: producing node index in the graph, -1 for a graph input. */
typedef ptq_status (*ptq_observer_fn)(const char *name, int node, const ptq_tensor *t, void *user);

typedef struct {
    int nthreads;               /* 0: OpenMP's default */
    int fuse;                   /* fold BatchNormalization into Conv, fuse activations (default 1) */
    ptq_observer_fn observer;   /* NULL: none */
    void *observer_user;
    /* Which float tensors the observer sees (NULL: all); called at plan time with the
     * observer's user pointer. Tensors it does not see may be fused away, so a narrow
     * observer keeps most of the fused plan's speed. */
    int (*observe_filter)(const char *name, void *user);
    /* Per-tile observation (NULL: none): for an observed tensor that a PTQ_OP_TILES kernel
     * (Conv) produces, asked once at plan time; a sink it returns gets every tile of the
     * tensor from inside the kernel's parallel loop (op.h: ptq_tile_sink), before the
     * observer's usual call after the node. The sink must outlive the plan. */
    struct ptq_tile_sink *(*tile_sink)(const char *name, int node, void *user);
    /* 1: fuse only what leaves every tensor's values unchanged bit for bit (activations and
     * scalar epilogues into the producing kernel), never BatchNormalization or affine folding
     * into weights: a calibration plan then sees the unfused model's numbers. */
    int keep_values;
    size_t max_arena_bytes;     /* 0: no limit; else plans whose activation arena, or one folded
                                 * constant, needs more fail */
    ptq_arena_pool *pool;       /* NULL: the plan allocates its own arena; else from this pool
                                 * (which must outlive the plan) */
    /* 1: the plan allocates no activation memory: before running, ptq_plan_bind_memory gives
     * it a block of ptq_plan_memory_bytes, which plans of different shapes may share (one at a
     * time: binding another plan to the block ends the previous one's outputs). */
    int bound_memory;
} ptq_plan_options;

/* Shape of one graph input (for a subgraph's plan, also of a value of an enclosing graph it
 * reads, a value of kind OUTER: these are its inputs after the formal ones); dims fully known (>= 1 except a 0-sized dim).
 * data: when set, the input is a constant of the input's declared dtype (borrowed,
 * must outlive the plan): it folds at plan time like an initializer and is no
 * longer passed to ptq_plan_run (shape, axes or scales tensors given as inputs). */
typedef struct {
    const char *name;
    int rank;
    int64_t dims[PTQ_MAX_RANK];
    const void *data;
    ptq_dtype dtype;    /* subgraph plans only (ptq_graph.parent set): the input's dtype, which
                         * the body may not declare; PTQ_UNDEFINED: the declared one */
} ptq_input_shape;

typedef struct ptq_plan ptq_plan;

ptq_plan_options ptq_plan_defaults(void);

/* shapes: bindings for graph inputs whose declared shape has symbolic or unknown dims
 * (and optionally for any other input; a binding must agree with fixed dims).
 * Fails naming the first input left unbound, an unsupported op (all of them at once),
 * or the first node whose inference fails. */
ptq_status ptq_plan_create(const ptq_graph *g, const ptq_input_shape *shapes, int n_shapes,
                           const ptq_plan_options *opt, ptq_plan **out);
void ptq_plan_destroy(ptq_plan *p);

/* Runs one batch. inputs[i] matches graph input i (non-initializer inputs, in order)
 * in dtype and shape; data is read, never kept. */
ptq_status ptq_plan_run(ptq_plan *p, const ptq_tensor *inputs, int n_inputs);
/* The same one node at a time, so that two plans can run in lockstep (ptq compare):
 * begin binds the inputs (observers see them), each step runs the next node (and its
 * observer calls); *finished = 1, nothing run, once every node has run. */
ptq_status ptq_plan_begin(ptq_plan *p, const ptq_tensor *inputs, int n_inputs);
ptq_status ptq_plan_step(ptq_plan *p, int *finished);

int ptq_plan_n_inputs(const ptq_plan *p);
/* Name, dtype and shape of input i (data NULL); borrowed until destroy. */
const ptq_tensor *ptq_plan_input(const ptq_plan *p, int i, const char **name);
int ptq_plan_n_outputs(const ptq_plan *p);
/* Output i after a run; borrowed, valid until the next run or destroy. */
const ptq_tensor *ptq_plan_output(const ptq_plan *p, int i, const char **name);
/* Shape and dtype inferred for any graph value, or NULL if it was never reached. */
const ptq_tensor *ptq_plan_value(const ptq_plan *p, int value_index);
/* Peak bytes of the activation arena (+ scratch), and constants folded at plan time. */
size_t ptq_plan_arena_bytes(const ptq_plan *p);
size_t ptq_plan_scratch_bytes(const ptq_plan *p);
/* Bytes of the block a plan made with bound_memory needs (arena, then scratch). */
size_t ptq_plan_memory_bytes(const ptq_plan *p);
/* Gives the plan `mem` (64-byte aligned, ptq_plan_memory_bytes at least, outliving its use)
 * for its activations and scratch; it may be rebound, to the same block or another, between
 * runs. Running a bound_memory plan never bound fails. */
void ptq_plan_bind_memory(ptq_plan *p, void *mem);
/* Number of nodes inferred at run time (0 for a fully static plan). */
int ptq_plan_n_dynamic(const ptq_plan *p);
/* FLOPs of one run (multiply-add = 2) of Conv, ConvTranspose, Gemm, MatMul. */
double ptq_plan_flops(const ptq_plan *p);

/* Lists, in one message, every node whose op ptq does not support; returns
 * PTQ_ERR_UNSUPPORTED with that message, PTQ_OK when all are supported. */
ptq_status ptq_graph_check_ops(const ptq_graph *g);

#endif
