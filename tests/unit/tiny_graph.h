/* tiny_graph.h: the graph builder of the executor's unit tests (test_plan.c, test_plan_dynamic.c):
 * values by name, float inputs, outputs, initializers of any dtype, one- or two-input nodes.
 * Header-only, static inline; every call adds to g (freed with ptq_graph_destroy). */
#ifndef PTQ_TESTS_TINY_GRAPH_H
#define PTQ_TESTS_TINY_GRAPH_H

#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"

static inline int val(ptq_graph *g, const char *name)
{
    int v = ptq_graph_find_value(g, name);
    if (v < 0) ptq_graph_add_value(g, name, &v);
    return v;
}

static inline void input(ptq_graph *g, const char *name, int rank, const int64_t *dims)
{
    int v = val(g, name);
    g->values[v].kind = PTQ_VALUE_INPUT;
    g->values[v].t.dtype = PTQ_F32;
    g->values[v].t.rank = rank;
    for (int d = 0; d < rank; d++) g->values[v].t.dims[d] = dims[d];
    g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
    g->inputs[g->n_inputs++] = v;
}

static inline void output(ptq_graph *g, const char *name)
{
    int v = val(g, name);
    g->values[v].is_output = 1;
    g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
    g->outputs[g->n_outputs++] = v;
}

static inline void init(ptq_graph *g, const char *name, ptq_dtype dt, int rank, const int64_t *dims, const void *data)
{
    int v = val(g, name);
    ptq_value *x = &g->values[v];
    x->kind = PTQ_VALUE_INITIALIZER;
    x->t.dtype = dt;
    x->t.rank = rank;
    for (int d = 0; d < rank; d++) x->t.dims[d] = dims[d];
    ptq_tensor_alloc(&x->t);
    memcpy(x->t.data, data, ptq_tensor_nbytes(&x->t));
    g->initializers = realloc(g->initializers, sizeof(int) * (size_t)(g->n_initializers + 1));
    g->initializers[g->n_initializers++] = v;
}

static inline int node(ptq_graph *g, const char *name, const char *op, const char *in0, const char *in1, const char *out)
{
    int ins[2], outs[1], n, n_in = 0;
    if (in0) ins[n_in++] = val(g, in0);
    if (in1) ins[n_in++] = val(g, in1);
    outs[0] = val(g, out);
    ptq_graph_add_node(g, name, op, "", ins, n_in, outs, 1, &n);
    return n;
}

#endif
