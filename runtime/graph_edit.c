#include "graph_edit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ptq_status ptq_graph_sort_nodes(ptq_graph *g)
{
    ptq_status st = PTQ_OK;
    int *order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    ptq_node *sorted = malloc(sizeof *sorted * ((size_t)g->n_nodes + 1));
    CHECK_ALLOC(order);
    CHECK_ALLOC(sorted);
    TRY(ptq_graph_toposort(g, order));
    for (int i = 0; i < g->n_nodes; i++) sorted[i] = g->nodes[order[i]];
    memcpy(g->nodes, sorted, sizeof *sorted * (size_t)g->n_nodes);
    TRY(ptq_graph_link(g));
done:
    free(order);
    free(sorted);
    return st;
}

int ptq_graph_count_uses(const ptq_graph *g, int v)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) n += g->nodes[i].inputs[k] == v;
    for (int i = 0; i < g->n_outputs; i++) n += g->outputs[i] == v;
    return n;
}

ptq_status ptq_graph_add_initializer(ptq_graph *g, const char *name, ptq_tensor *t, int *out)
{
    ptq_status st = PTQ_OK;
    int v;
    int *list = realloc(g->initializers, sizeof(int) * ((size_t)g->n_initializers + 1));
    CHECK_ALLOC(list);
    g->initializers = list;
    TRY(ptq_graph_add_value(g, name, &v));
    ptq_value *val = &g->values[v];
    val->kind = PTQ_VALUE_INITIALIZER;
    val->t = *t;
    val->t.owns_data = 1;
    memset(t, 0, sizeof *t);
    g->initializers[g->n_initializers++] = v;
    *out = v;
done:
    return st;
}

void ptq_graph_drop_initializer_if_unused(ptq_graph *g, int v)
{
    if (ptq_graph_count_uses(g, v) > 0) return;
    int k = 0;
    for (int i = 0; i < g->n_initializers; i++)
        if (g->initializers[i] != v) g->initializers[k++] = g->initializers[i];
    g->n_initializers = k;
    k = 0;
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] != v) g->inputs[k++] = g->inputs[i];
    g->n_inputs = k;
    ptq_tensor_free(&g->values[v].t);
    g->values[v].kind = PTQ_VALUE_INTERMEDIATE;
    g->values[v].in_value_info = 0;
}

static int name_taken(const ptq_graph *g, const char *name)
{
    if (ptq_graph_find_value(g, name) >= 0) return 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return 1;
    return 0;
}

void ptq_graph_unique_name(const ptq_graph *g, const char *base, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", base);
    for (int k = 1; name_taken(g, buf); k++) snprintf(buf, cap, "%s_%d", base, k);
}
