/* plan_impl.h: the executor's internals, shared by plan.c (create, memory, run) and plan_fuse.c
 * (the fusion passes of ptq_plan_create's step 3). Nothing outside runtime/plan*.c includes it. */
#ifndef PTQ_RUNTIME_PLAN_IMPL_H
#define PTQ_RUNTIME_PLAN_IMPL_H

#include "plan.h"

#include <stddef.h>
#include <stdint.h>

#include "op.h"

/* What a dynamic step's infer depended on, per input: dtype and shape, and for a small input
 * that is not a plan constant its bytes (shape, axes, repeats, counts...). */
#define DYN_SMALL_BYTES 1024
typedef struct {
    ptq_dtype dtype;
    int rank;
    int64_t dims[PTQ_MAX_RANK];
    size_t n;                 /* bytes kept (small inputs), else 0 */
    uint8_t bytes[DYN_SMALL_BYTES];
} dyn_sig;

typedef struct {
    int node;                 /* graph node index */
    const ptq_op_def *def;
    ptq_op_ctx ctx;
    const ptq_tensor **in;    /* ctx.in */
    ptq_tensor **out;         /* ctx.out */
    void **kept;              /* the outputs' buffers across an infer (step_infer) */
    int *in_vals, *out_vals;  /* value indices (plan numbering), -1 = omitted */
    int skip;                 /* folded at plan time or fused into another step */
    int round_f16;            /* rounds its output 0 to float16 in place after running (fuse_f16_rounding) */
    int has_state;
    int dyn;                  /* dynamic part: inferred at run time, outputs on the heap */
    int n_outer;              /* control ops: in[n_in ..) / in_vals[n_in ..) are the values of this
                                 graph its subgraphs read (implicit inputs) */
    const char **outer_names;
    unsigned char *in_const;  /* n_in + n_outer flags for ctx.in_const */
    void *dyn_scratch;        /* a dynamic step's own scratch */
    size_t dyn_scratch_cap;
    dyn_sig *sig;             /* a dynamic step's inputs as its last infer saw them (n_reads) */
    int sig_valid;
} plan_step;

struct ptq_plan {
    const ptq_graph *g;
    int nthreads;
    ptq_plan_options opt;
    int n_vals, cap_vals;     /* graph values + constants the planner makes (fused weights) */
    ptq_tensor *vals;
    uint8_t *is_const;        /* data known at plan time */
    uint8_t *owned;           /* plan owns vals[v].data (folded or fused constants) */
    int *last_use;            /* step index of the last reader, -1 none */
    int *input_vals, n_inputs;
    int *output_vals, n_outputs;
    plan_step *steps;
    int n_steps;
    uint8_t *arena;
    size_t arena_bytes, arena_cap; /* what the plan uses, what the arena holds */
    size_t *offsets;          /* each arena value's offset (opt.bound_memory: kept for binding) */
    void *scratch;
    size_t scratch_bytes;
    double flops;
    double *prof_ms;          /* per step, when PTQ_PROFILE is set */
    double prof_obs_ms;       /* in observer calls */
    int prof_cpu;             /* PTQ_PROFILE=cpu: CPU time, not wall-clock */
    int next_step;            /* ptq_plan_step's position; n_steps when idle */
    uint8_t *is_dyn;          /* value made by a dynamic step (shape known at run time only) */
    size_t *dyn_cap;          /* bytes of a dynamic value's heap buffer (vals[v].data), 0: none */
    int n_dyn;                /* dynamic steps */
    void **dyn_free;          /* heap buffers of dynamic values that died in this run, for the */
    size_t *dyn_free_cap;     /* dynamic outputs still to come (and the next runs) */
    int n_dyn_free;
    uint8_t **in_u8;          /* per input: float32 pixels converted for a uint8 input (ptq_plan_begin) */
    size_t *in_u8_cap;
};

/* Values a step reads: its inputs, then (control ops) the outer values its subgraphs read. */
static inline int n_reads(const plan_step *s)
{
    return s->ctx.n_in + s->n_outer;
}

/* A value the plan makes (a fused weight or bias) of shape's dtype and dims, owned by the plan. */
ptq_status plan_add_const(ptq_plan *p, const ptq_tensor *shape, int *out);
/* Infers step s again (after fusion changed its inputs or epilogue). */
ptq_status plan_step_infer(ptq_plan *p, plan_step *s);
int plan_is_graph_output(const ptq_plan *p, int v);
/* The observer sees v: fusion must keep it. */
int plan_observes(const ptq_plan *p, int v);
/* Step 3 of ptq_plan_create: folds BatchNormalization and per-channel affine ops into the
 * convolutions before them, activations and hard-swish into their producer's epilogue, a
 * following scalar affine, and Q->DQ pairs of one scale into one float step; never removes a
 * graph output or an observed tensor (plan_fuse.c). */
ptq_status plan_fuse(ptq_plan *p);

#endif
