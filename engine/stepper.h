/* stepper.h: a model advanced through all its images together, one segment at a time, the
 * tensors still needed kept between segments: what lets the accuracy algorithms (refine.h)
 * refine layer after layer in one pass over the network, where re-running the model's
 * prefix for each layer would cost a pass per layer.
 *
 *   eng_stepper *s = NULL;
 *   TRY(eng_stepper_create(g, &src, &opt, &s));       // reads every batch of src once
 *   TRY(eng_stepper_pin(s, "x"));                      // kept once computed, until released
 *   TRY(eng_stepper_advance(s, "x"));                  // runs what x needs, not yet run, on every batch
 *   for (int b = 0; b < eng_stepper_batches(s); b++) {
 *       ptq_tensor t;
 *       TRY(eng_stepper_get(s, "x", b, &t));           // borrowed until the next get or advance
 *       ...
 *   }
 *   eng_stepper_release(s, "x");
 *   eng_stepper_destroy(s);
 *
 * advance runs the nodes that the value needs and that have not run yet (its ancestors, in
 * the graph's order) as one segment: a plan of that part of the graph (ptq_graph_segment_create),
 * made when advance is called, so that edits to the graph's initializers made between two
 * advances (refined weights, biases and scales) are what the later segments compute with. A
 * value is kept while a node that has not run reads it, or while it is pinned; everything else
 * is dropped as soon as its last reader has run. Small integer tensors crossing a cut (shapes
 * computed from tensors) are given to the segment's plan as constants, so that what reads them
 * is folded at plan time as in a plan of the whole model.
 *
 * Every value is computed by the same kernels, in the same order, as a plan of the whole model
 * observing the pinned values computes it: the same bits, at any thread count.
 *
 * Memory: the kept tensors of all batches, in memory up to budget bytes, in a temporary file
 * (TMPDIR, unlinked at once) beyond it; plus one batch of the running segment's activations.
 * The graph is borrowed (it must outlive the stepper); initializers may be edited and added
 * between advances, nodes not. */
#ifndef PTQ_ENGINE_STEPPER_H
#define PTQ_ENGINE_STEPPER_H

#include <stddef.h>

#include "engine/source.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

typedef struct {
    int nthreads;            /* 0: OpenMP's default */
    size_t budget;           /* bytes of kept tensors held in memory (0: ENG_STEPPER_BUDGET_MB) */
    ptq_arena_pool *pool;    /* where segment plans' activation memory comes from (NULL: the heap) */
} eng_stepper_options;

enum { ENG_STEPPER_BUDGET_MB = 1024 };

typedef struct eng_stepper eng_stepper;

typedef struct {
    int segments;            /* segments run */
    size_t peak_memory;      /* most bytes of kept tensors in memory at once */
    size_t peak_spilled;     /* most bytes in the temporary file at once */
    double seconds_plans, seconds_runs;
} eng_stepper_stats;

/* Reads every batch of src (the graph's data input, eng_model_tensor's view of each batch). */
ptq_status eng_stepper_create(const ptq_graph *g, const eng_source *src, const eng_stepper_options *o, eng_stepper **out);
void eng_stepper_destroy(eng_stepper *s); /* NULL-safe */

int eng_stepper_batches(const eng_stepper *s);
int eng_stepper_images(const eng_stepper *s);
/* Index of batch b's first image. */
int eng_stepper_first(const eng_stepper *s, int b);
eng_stepper_stats eng_stepper_get_stats(const eng_stepper *s);

/* Keeps value `name` once it is computed (and now, if it is kept), until released. Fails for a
 * name the graph lacks, or a value already dropped. */
ptq_status eng_stepper_pin(eng_stepper *s, const char *name);
void eng_stepper_release(eng_stepper *s, const char *name);
/* Computes value `name` for every batch (nothing to do when it is kept already). */
ptq_status eng_stepper_advance(eng_stepper *s, const char *name);
/* Batch b of kept value `name` (data borrowed until the next get or advance). */
ptq_status eng_stepper_get(eng_stepper *s, const char *name, int b, ptq_tensor *t);

#endif
