/* pass.c: a model over the batches of a source, observed (see pass.h). */
#include "engine/pass.h"

#include <string.h>

#include "engine/runner.h"

static int pass_wants(const char *name, void *user)
{
    eng_pass *ps = user;
    for (int i = 0; i < ps->n_names; i++)
        if (!strcmp(ps->names[i], name)) return 1;
    return 0;
}

static ptq_status pass_observe(const char *name, int node, const ptq_tensor *t, void *user)
{
    eng_pass *ps = user;
    (void)node;
    if (!pass_wants(name, ps)) return PTQ_OK;
    ptq_status st = ps->fn(ps, name, t);
    if (ps->stop && !strcmp(ps->stop, name)) ps->stopped = 1;
    return st;
}

ptq_status eng_run_pass(const ptq_graph *g, eng_pass *ps, const ptq_graph *g2, eng_pass *ps2, const eng_source *src,
                        int nthreads, ptq_arena_pool *pool, int *images)
{
    ptq_status st = PTQ_OK;
    ptq_plan *plan[2][2] = {{NULL, NULL}, {NULL, NULL}};
    eng_memory mem = {.pool = pool}; /* one block for all: g's observer copies what g2's needs */
    ptq_tensor shape[2] = {{0}, {0}};
    int in_v = eng_graph_input(g), opened = 0, done = 0;
    if (in_v < 0) FAIL(PTQ_ERR_FORMAT, "the model has no data input");
    TRY(src->open(src->user));
    opened = 1;
    for (;;) {
        ptq_tensor t;
        TRY(src->next(src->user, &t));
        if (t.rank < 1 || t.dims[0] == 0) break;
        int slot = plan[0][0] && !ptq_shape_equal(&shape[0], &t) ? 1 : 0;
        for (int k = 0; k < (g2 ? 2 : 1); k++) {
            const ptq_graph *gk = k ? g2 : g;
            eng_pass *pk = k ? ps2 : ps;
            if (plan[slot][k] && !ptq_shape_equal(&shape[slot], &t)) {
                ptq_plan_destroy(plan[slot][k]);
                plan[slot][k] = NULL;
            }
            if (!plan[slot][k]) {
                ptq_plan_options po = ptq_plan_defaults();
                po.nthreads = nthreads;
                po.bound_memory = 1;
                po.observer = pass_observe;
                po.observer_user = pk;
                po.observe_filter = pass_wants;
                ptq_tensor tm = eng_model_tensor(gk, &t);
                ptq_input_shape s = {.name = gk->values[eng_graph_input(gk)].name, .rank = tm.rank};
                memcpy(s.dims, tm.dims, sizeof s.dims);
                TRY(ptq_plan_create(gk, &s, 1, &po, &plan[slot][k]));
            }
            pk->first = done;
            pk->stopped = 0;
            TRY(eng_memory_bind(&mem, plan[slot][k]));
            ptq_tensor tm = eng_model_tensor(gk, &t);
            TRY(ptq_plan_begin(plan[slot][k], &tm, 1));
            for (int fin = 0; !fin && !pk->stopped;) TRY(ptq_plan_step(plan[slot][k], &fin));
        }
        shape[slot] = t;
        shape[slot].data = NULL;
        done += (int)t.dims[0];
    }
    if (images) *images = done;
done:
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) ptq_plan_destroy(plan[i][k]);
    eng_memory_free(&mem); /* back to the pool: the next pass reuses it */
    if (opened) src->close(src->user);
    return st;
}
