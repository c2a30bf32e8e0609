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
    TRY(ptq_graph_link(g)); /* producers may be stale after rewiring */
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
    for (int i = 0; i < g->n_nodes; i++) {
        const ptq_node *node = &g->nodes[i];
        for (int k = 0; k < node->n_inputs; k++) n += node->inputs[k] == v;
        for (int k = 0; k < node->n_attrs; k++) /* subgraphs reading v by name (values of kind OUTER) */
            for (int j = 0; j < (node->attrs[k].graph ? 1 : node->attrs[k].n_graphs); j++) {
                const ptq_graph *sub = node->attrs[k].graph ? node->attrs[k].graph : node->attrs[k].graphs[j];
                for (int u = 0; u < sub->n_values; u++) n += sub->values[u].kind == PTQ_VALUE_OUTER && sub->values[u].outer == v;
            }
    }
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

/* The tensor a Constant node holds, built into *t (owned); 0 if it holds something else. */
static int constant_tensor(const ptq_node *n, ptq_tensor *t, ptq_status *st)
{
    const ptq_attr *a = n->n_attrs == 1 ? &n->attrs[0] : NULL;
    memset(t, 0, sizeof *t);
    *st = PTQ_OK;
    if (!a) return 0;
    if (strcmp(a->name, "value") == 0 && a->type == PTQ_ATTR_TENSOR) {
        *st = ptq_tensor_copy(t, &a->tensor);
        return 1;
    }
    int is_f = strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_floats") == 0;
    int is_i = strcmp(a->name, "value_int") == 0 || strcmp(a->name, "value_ints") == 0;
    if (!is_f && !is_i) return 0;
    int list = a->type == PTQ_ATTR_FLOATS || a->type == PTQ_ATTR_INTS;
    t->dtype = is_f ? PTQ_F32 : PTQ_I64;
    t->rank = list ? 1 : 0;
    t->dims[0] = list ? (int64_t)a->n : 1;
    if ((*st = ptq_tensor_alloc(t)) != PTQ_OK) return 1;
    size_t count = list ? a->n : 1;
    for (size_t i = 0; i < count; i++) {
        if (is_f) ((float *)t->data)[i] = list ? a->floats[i] : a->f;
        else ((int64_t *)t->data)[i] = list ? a->ints[i] : a->i;
    }
    return 1;
}

ptq_status ptq_graph_constants_to_initializers(ptq_graph *g, int *n_converted)
{
    ptq_status st = PTQ_OK;
    int k = 0, i = 0;
    *n_converted = 0;
    int *list = realloc(g->initializers, sizeof(int) * ((size_t)g->n_initializers + (size_t)g->n_nodes + 1));
    CHECK_ALLOC(list);
    g->initializers = list;
    for (; i < g->n_nodes; i++) {
        ptq_node *n = &g->nodes[i];
        ptq_tensor t;
        int out = n->n_outputs == 1 ? n->outputs[0] : -1;
        if (strcmp(n->op_type, "Constant") != 0 || n->domain[0] || out < 0 || g->values[out].is_output ||
            !constant_tensor(n, &t, &st)) {
            g->nodes[k++] = *n;
            continue;
        }
        if (st != PTQ_OK) break;
        ptq_value *v = &g->values[out];
        ptq_tensor_free(&v->t);
        v->t = t;
        v->t.owns_data = 1;
        v->kind = PTQ_VALUE_INITIALIZER;
        v->producer = -1;
        g->initializers[g->n_initializers++] = out;
        ptq_node_clear(n);
        (*n_converted)++;
    }
    /* On an error the nodes not reached yet move down too: every node is kept exactly once
     * (a node's arrays are owned by one slot only), so the graph can still be destroyed. */
    for (; i < g->n_nodes; i++) g->nodes[k++] = g->nodes[i];
    g->n_nodes = k;
    TRY(st);
    TRY(ptq_graph_link(g));
done:
    return st;
}

/* Marks in need[] the values of `top` that subgraph `sub` (at any depth below top) reads by
 * name: its OUTER values, followed up through the enclosing subgraphs. */
static void need_outer_reads(const ptq_graph *top, const ptq_graph *sub, unsigned char *need)
{
    for (int u = 0; u < sub->n_values; u++) {
        const ptq_graph *gr = sub;
        int v = u;
        while (gr != top && gr && gr->values[v].kind == PTQ_VALUE_OUTER) {
            v = gr->values[v].outer;
            gr = gr->parent;
        }
        if (gr == top && v >= 0 && v < top->n_values && u != v) need[v] = 1;
    }
    for (int n = 0; n < sub->n_nodes; n++)
        for (int k = 0; k < sub->nodes[n].n_attrs; k++) {
            const ptq_attr *a = &sub->nodes[n].attrs[k];
            for (int j = 0; j < (a->graph ? 1 : a->n_graphs); j++) need_outer_reads(top, a->graph ? a->graph : a->graphs[j], need);
        }
}

/* A shallow copy of g that runs the nodes marked in use[], in g's order: g's names, opsets,
 * initializers and inputs shared; its own values (producers renumbered, none marked as an
 * output), nodes and room for out_cap outputs (none set). NULL when out of memory. Freed by
 * ptq_graph_view_destroy. */
static ptq_graph *graph_subset(const ptq_graph *g, const unsigned char *use, int out_cap)
{
    int *remap = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    ptq_graph *w = calloc(1, sizeof *w);
    if (!remap || !w) {
        free(remap);
        free(w);
        return NULL;
    }
    *w = *g;
    w->values = malloc(sizeof *w->values * ((size_t)g->n_values + 1));
    w->nodes = malloc(sizeof *w->nodes * ((size_t)g->n_nodes + 1));
    w->outputs = malloc(sizeof(int) * ((size_t)out_cap + 1));
    if (!w->values || !w->nodes || !w->outputs) {
        free(remap);
        ptq_graph_view_destroy(w);
        return NULL;
    }
    memcpy(w->values, g->values, sizeof *w->values * (size_t)g->n_values);
    w->n_nodes = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        remap[n] = use[n] ? w->n_nodes : -1;
        if (use[n]) w->nodes[w->n_nodes++] = g->nodes[n];
    }
    for (int v = 0; v < g->n_values; v++) {
        ptq_value *val = &w->values[v];
        val->producer = val->producer >= 0 ? remap[val->producer] : -1;
        val->is_output = 0;
    }
    w->n_outputs = 0;
    free(remap);
    return w;
}

ptq_status ptq_graph_view_create(const ptq_graph *g, const unsigned char *keep, ptq_graph **out, int *n_dropped)
{
    ptq_status st = PTQ_OK;
    ptq_graph *w = NULL;
    unsigned char *need = calloc((size_t)g->n_values + 1, 1), *use = calloc((size_t)g->n_nodes + 1, 1);
    *out = NULL;
    CHECK_ALLOC(need);
    CHECK_ALLOC(use);
    for (int v = 0; v < g->n_values; v++) need[v] = keep[v] != 0;
    /* walk back from the wanted values: a node is used when one of its outputs is needed */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int n = g->n_nodes - 1; n >= 0; n--) {
            const ptq_node *node = &g->nodes[n];
            if (use[n]) continue;
            for (int o = 0; o < node->n_outputs && !use[n]; o++)
                if (node->outputs[o] >= 0 && need[node->outputs[o]]) use[n] = 1;
            if (!use[n]) continue;
            changed = 1;
            for (int i = 0; i < node->n_inputs; i++)
                if (node->inputs[i] >= 0) need[node->inputs[i]] = 1;
            for (int k = 0; k < node->n_attrs; k++) { /* what its subgraphs (If, Loop, Scan) read by name */
                const ptq_attr *a = &node->attrs[k];
                for (int j = 0; j < (a->graph ? 1 : a->n_graphs); j++) need_outer_reads(g, a->graph ? a->graph : a->graphs[j], need);
            }
        }
    }
    if (!(w = graph_subset(g, use, g->n_values))) FAIL(PTQ_ERR_NOMEM, "out of memory for a view of the graph");
    for (int v = 0; v < g->n_values; v++)
        if (keep[v] && w->values[v].producer >= 0) {
            w->values[v].is_output = 1;
            w->outputs[w->n_outputs++] = v;
        }
    if (n_dropped) *n_dropped = g->n_nodes - w->n_nodes;
    *out = w;
done:
    free(need);
    free(use);
    return st;
}

void ptq_graph_view_destroy(ptq_graph *view)
{
    if (!view) return;
    free(view->values);
    free(view->nodes);
    free(view->outputs);
    free(view);
}

void ptq_graph_node_reads(const ptq_graph *g, int n, unsigned char *mark)
{
    const ptq_node *node = &g->nodes[n];
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] >= 0) mark[node->inputs[i]] = 1;
    for (int k = 0; k < node->n_attrs; k++) {
        const ptq_attr *a = &node->attrs[k];
        for (int j = 0; j < (a->graph ? 1 : a->n_graphs); j++) need_outer_reads(g, a->graph ? a->graph : a->graphs[j], mark);
    }
}

ptq_status ptq_graph_segment_create(const ptq_graph *g, const unsigned char *run, const int *inputs, const ptq_tensor *types,
                                    int n_inputs, const int *outputs, int n_outputs, ptq_graph **out)
{
    ptq_status st = PTQ_OK;
    ptq_graph *w = graph_subset(g, run, n_outputs);
    *out = NULL;
    if (!w) FAIL(PTQ_ERR_NOMEM, "out of memory for a segment of the graph");
    w->inputs = NULL; /* g's until then: the segment has its own */
    if (!(w->inputs = malloc(sizeof(int) * ((size_t)n_inputs + 1)))) FAIL(PTQ_ERR_NOMEM, "out of memory for a segment of the graph");
    for (int v = 0; v < g->n_values; v++) /* the model's inputs, unless listed below */
        if (w->values[v].kind == PTQ_VALUE_INPUT) w->values[v].kind = PTQ_VALUE_INTERMEDIATE;
    for (int i = 0; i < n_inputs; i++) {
        ptq_value *val = &w->values[inputs[i]];
        val->kind = PTQ_VALUE_INPUT;
        val->producer = -1;
        val->has_type = 1;
        val->t = types[i];
        val->t.data = NULL;
        val->t.owns_data = 0;
        memset(val->dim_params, 0, sizeof val->dim_params);
        w->inputs[i] = inputs[i];
    }
    w->n_inputs = n_inputs;
    for (int i = 0; i < n_outputs; i++) {
        w->values[outputs[i]].is_output = 1;
        w->outputs[i] = outputs[i];
    }
    w->n_outputs = n_outputs;
    *out = w;
    w = NULL;
done:
    ptq_graph_segment_destroy(w);
    return st;
}

void ptq_graph_segment_destroy(ptq_graph *view)
{
    if (!view) return;
    free(view->inputs);
    ptq_graph_view_destroy(view);
}
