/* runner.c: see runner.h. */
#include "cli/runner.h"

#include <string.h>

int cli_graph_input(const ptq_graph *g)
{
    for (int i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].kind == PTQ_VALUE_INPUT) return g->inputs[i];
    return -1;
}

ptq_tensor cli_batch_tensor(const pp_config *cfg, const float *data, int n)
{
    ptq_tensor t = {0};
    t.dtype = PTQ_F32;
    t.rank = 4;
    t.dims[0] = n;
    t.dims[1] = cfg->nhwc ? cfg->height : 3;
    t.dims[2] = cfg->nhwc ? cfg->width : cfg->height;
    t.dims[3] = cfg->nhwc ? 3 : cfg->width;
    t.data = (void *)data;
    return t;
}

ptq_status cli_runner_ready(cli_runner *r, const ptq_tensor *x)
{
    ptq_status st = PTQ_OK;
    if (r->plan && r->batch == x->dims[0]) return PTQ_OK;
    ptq_plan_destroy(r->plan);
    r->plan = NULL;
    int in = cli_graph_input(r->g);
    if (in < 0) FAIL(PTQ_ERR_FORMAT, "the model has no input");
    ptq_input_shape s = {.name = r->g->values[in].name, .rank = x->rank};
    memcpy(s.dims, x->dims, sizeof s.dims);
    TRY(ptq_plan_create(r->g, &s, 1, &r->popt, &r->plan));
    r->batch = x->dims[0];
done:
    return st;
}

ptq_status cli_runner_run(cli_runner *r, const ptq_tensor *x)
{
    ptq_status st = cli_runner_ready(r, x);
    return st == PTQ_OK ? ptq_plan_run(r->plan, x, 1) : st;
}

void cli_runner_free(cli_runner *r)
{
    ptq_plan_destroy(r->plan);
    r->plan = NULL;
}
