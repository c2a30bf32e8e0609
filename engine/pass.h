/* pass.h: one pass of a model over the batches of a source, with an observer on some of its
 * tensors: what the accuracy algorithms (refine.h, equalize.h) measure the model with.
 *
 *   eng_pass ps = {.names = names, .n_names = n, .stop = last, .fn = see, .user = me};
 *   TRY(eng_run_pass(g, &ps, NULL, NULL, &src, nthreads, pool, &images));
 *
 * fn sees each named tensor of each batch (ps->first: the index of the batch's first image);
 * with stop set, a batch stops running once that tensor was seen. Plans are made per batch
 * shape (at most two alive: the full batch and the last one) and run in one shared block. */
#ifndef PTQ_ENGINE_PASS_H
#define PTQ_ENGINE_PASS_H

#include "engine/source.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

typedef struct eng_pass eng_pass;
typedef ptq_status (*eng_pass_fn)(eng_pass *ps, const char *name, const ptq_tensor *t);
struct eng_pass {
    const char *const *names;   /* the tensors fn sees */
    int n_names;
    const char *stop;           /* NULL: every batch runs to the end */
    int stopped;
    eng_pass_fn fn;
    void *user;
    int first;                  /* index of the batch's first image */
};

/* Runs every batch of src through g. With a second graph (g2 non-NULL), each batch runs
 * through g first and then g2, so ps2's observer can use what ps saw of the same images.
 * *images (may be NULL): the images of the pass. */
ptq_status eng_run_pass(const ptq_graph *g, eng_pass *ps, const ptq_graph *g2, eng_pass *ps2, const eng_source *src,
                        int nthreads, ptq_arena_pool *pool, int *images);

#endif
