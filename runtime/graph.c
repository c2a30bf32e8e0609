#include "graph.h"

#include <stdlib.h>
#include <string.h>

char *ptq_strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

ptq_graph *ptq_graph_create(void)
{
    ptq_graph *g = calloc(1, sizeof *g);
    if (g) g->ir_version = 8;
    return g;
}

void ptq_attr_clear(ptq_attr *a)
{
    if (!a) return;
    free(a->name);
    free(a->s);
    free(a->floats);
    free(a->ints);
    if (a->strings)
        for (size_t i = 0; i < a->n; i++) free(a->strings[i]);
    free(a->strings);
    ptq_tensor_free(&a->tensor);
    free(a->tensor_name);
    free(a->doc_string);
    free(a->ref_attr_name);
    free(a->opaque);
    ptq_graph_destroy(a->graph);
    for (int i = 0; i < a->n_graphs; i++) ptq_graph_destroy(a->graphs[i]);
    free(a->graphs);
    memset(a, 0, sizeof *a);
}

static void value_clear(ptq_value *v)
{
    free(v->name);
    ptq_tensor_free(&v->t);
    for (int i = 0; i < PTQ_MAX_RANK; i++) free(v->dim_params[i]);
    free(v->doc_string);
    free(v->opaque);
}

void ptq_node_clear(ptq_node *n)
{
    free(n->name);
    free(n->op_type);
    free(n->domain);
    free(n->doc_string);
    free(n->inputs);
    free(n->outputs);
    for (int i = 0; i < n->n_attrs; i++) ptq_attr_clear(&n->attrs[i]);
    free(n->attrs);
    free(n->opaque);
}

void ptq_graph_destroy(ptq_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_values; i++) value_clear(&g->values[i]);
    for (int i = 0; i < g->n_nodes; i++) ptq_node_clear(&g->nodes[i]);
    free(g->values);
    free(g->name_slots);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->initializers);
    free(g->value_infos);
    for (int i = 0; i < g->n_opsets; i++) free(g->opsets[i].domain);
    free(g->opsets);
    free(g->producer_name);
    free(g->producer_version);
    free(g->domain);
    free(g->doc_string);
    for (int i = 0; i < g->n_metadata; i++) {
        free(g->metadata[i].key);
        free(g->metadata[i].value);
    }
    free(g->metadata);
    free(g->graph_name);
    free(g->graph_doc_string);
    free(g->opaque_model);
    free(g);
}

/* FNV-1a 32 of a name: the start of its probe in name_slots */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* The slot of name in the index (linear probing): where its value is, or the empty slot
 * where it would go. Values are only ever added, never renamed or removed, so the index
 * stays true. */
static int *name_slot(const ptq_graph *g, const char *name)
{
    uint32_t mask = (uint32_t)g->cap_values * 2 - 1;
    for (uint32_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
        int *slot = &g->name_slots[i];
        if (*slot == 0 || strcmp(g->values[*slot - 1].name, name) == 0) return slot;
    }
}

int ptq_graph_find_value(const ptq_graph *g, const char *name)
{
    if (!g->name_slots) return -1;
    return *name_slot(g, name) - 1;
}

ptq_status ptq_graph_add_value(ptq_graph *g, const char *name, int *out)
{
    ptq_status st = PTQ_OK;
    if (ptq_graph_find_value(g, name) >= 0) FAIL(PTQ_ERR_FORMAT, "tensor name '%s' is defined twice", name);
    if (g->n_values == g->cap_values) { /* cap_values stays a power of two: the index is twice as big */
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        ptq_value *nv = realloc(g->values, (size_t)cap * sizeof *nv);
        CHECK_ALLOC(nv);
        g->values = nv;
        int *slots = calloc((size_t)cap * 2, sizeof *slots);
        CHECK_ALLOC(slots);
        free(g->name_slots);
        g->name_slots = slots;
        g->cap_values = cap;
        for (int i = 0; i < g->n_values; i++) *name_slot(g, g->values[i].name) = i + 1;
    }
    ptq_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = ptq_strdup(name);
    CHECK_ALLOC(v->name);
    v->t.rank = -1;
    v->producer = -1;
    *name_slot(g, v->name) = g->n_values + 1;
    *out = g->n_values++;
done:
    return st;
}

ptq_status ptq_graph_add_node(ptq_graph *g, const char *name, const char *op_type, const char *domain,
                              const int *inputs, int n_inputs, const int *outputs, int n_outputs, int *out)
{
    ptq_status st = PTQ_OK;
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        ptq_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
        CHECK_ALLOC(nn);
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    ptq_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->name = ptq_strdup(name ? name : "");
    n->op_type = ptq_strdup(op_type);
    n->domain = ptq_strdup(domain ? domain : "");
    n->inputs = malloc(sizeof(int) * (size_t)(n_inputs ? n_inputs : 1));
    n->outputs = malloc(sizeof(int) * (size_t)(n_outputs ? n_outputs : 1));
    if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs) {
        ptq_node_clear(n);
        FAIL(PTQ_ERR_NOMEM, "out of memory adding node %d '%s' (%s)", g->n_nodes, name ? name : "", op_type);
    }
    if (n_inputs) memcpy(n->inputs, inputs, sizeof(int) * (size_t)n_inputs);
    if (n_outputs) memcpy(n->outputs, outputs, sizeof(int) * (size_t)n_outputs);
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    for (int i = 0; i < n_outputs; i++)
        if (outputs[i] >= 0) g->values[outputs[i]].producer = g->n_nodes;
    *out = g->n_nodes++;
done:
    return st;
}

ptq_status ptq_node_add_attr(ptq_node *n, ptq_attr *a)
{
    ptq_status st = PTQ_OK;
    ptq_attr *na = realloc(n->attrs, sizeof *na * (size_t)(n->n_attrs + 1));
    CHECK_ALLOC(na);
    n->attrs = na;
    n->attrs[n->n_attrs++] = *a;
    memset(a, 0, sizeof *a);
done:
    return st;
}

ptq_status ptq_graph_link(ptq_graph *g)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < g->n_values; i++) g->values[i].producer = -1;
    for (int n = 0; n < g->n_nodes; n++) {
        const ptq_node *node = &g->nodes[n];
        for (int o = 0; o < node->n_outputs; o++) {
            int v = node->outputs[o];
            if (v < 0) continue;
            if (g->values[v].producer >= 0)
                FAIL(PTQ_ERR_FORMAT, "tensor '%s' is produced by two nodes ('%s' and '%s')", g->values[v].name,
                     g->nodes[g->values[v].producer].name, node->name);
            if (g->values[v].kind != PTQ_VALUE_INTERMEDIATE)
                FAIL(PTQ_ERR_FORMAT, "node '%s' writes graph input or initializer '%s'", node->name,
                     g->values[v].name);
            g->values[v].producer = n;
        }
    }
done:
    return st;
}

int64_t ptq_graph_opset(const ptq_graph *g, const char *domain)
{
    int def = !domain || !domain[0] || strcmp(domain, "ai.onnx") == 0;
    for (int i = 0; i < g->n_opsets; i++) {
        const char *d = g->opsets[i].domain ? g->opsets[i].domain : "";
        int ddef = !d[0] || strcmp(d, "ai.onnx") == 0;
        if (def ? ddef : strcmp(d, domain) == 0) return g->opsets[i].version;
    }
    return 0;
}

ptq_status ptq_graph_toposort(const ptq_graph *g, int *order)
{
    ptq_status st = PTQ_OK;
    int *ready = calloc((size_t)g->n_values + 1, sizeof(int));  /* value available */
    int *done_node = calloc((size_t)g->n_nodes + 1, sizeof(int));
    int count = 0;

    CHECK_ALLOC(ready);
    CHECK_ALLOC(done_node);
    for (int v = 0; v < g->n_values; v++) {
        const ptq_value *val = &g->values[v];
        if (val->kind != PTQ_VALUE_INTERMEDIATE) {
            ready[v] = 1;
        } else if (val->producer < 0) {
            /* referenced but never produced: find a consumer to name */
            for (int n = 0; n < g->n_nodes; n++)
                for (int i = 0; i < g->nodes[n].n_inputs; i++)
                    if (g->nodes[n].inputs[i] == v)
                        FAIL(PTQ_ERR_FORMAT, "node '%s' (%s): input '%s' is not a graph input, initializer or node output",
                             g->nodes[n].name, g->nodes[n].op_type, val->name);
        }
    }
    /* Repeated sweeps in file order keep a sorted file's order unchanged; graphs are
     * almost always sorted already, so this is linear in practice. */
    for (int progress = 1; progress && count < g->n_nodes;) {
        progress = 0;
        for (int n = 0; n < g->n_nodes; n++) {
            if (done_node[n]) continue;
            const ptq_node *node = &g->nodes[n];
            int ok = 1;
            for (int i = 0; i < node->n_inputs && ok; i++)
                if (node->inputs[i] >= 0 && !ready[node->inputs[i]]) ok = 0;
            if (!ok) continue;
            done_node[n] = 1;
            order[count++] = n;
            for (int o = 0; o < node->n_outputs; o++)
                if (node->outputs[o] >= 0) ready[node->outputs[o]] = 1;
            progress = 1;
        }
    }
    if (count < g->n_nodes) {
        for (int n = 0; n < g->n_nodes; n++)
            if (!done_node[n])
                FAIL(PTQ_ERR_FORMAT, "graph has a cycle through node '%s' (%s)", g->nodes[n].name,
                     g->nodes[n].op_type);
    }
done:

    free(ready);
    free(done_node);
    return st;
}

const ptq_attr *ptq_node_attr(const ptq_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t ptq_attr_int(const ptq_node *n, const char *name, int64_t def)
{
    const ptq_attr *a = ptq_node_attr(n, name);
    return a && a->type == PTQ_ATTR_INT ? a->i : def;
}

float ptq_attr_float(const ptq_node *n, const char *name, float def)
{
    const ptq_attr *a = ptq_node_attr(n, name);
    if (!a) return def;
    if (a->type == PTQ_ATTR_FLOAT) return a->f;
    if (a->type == PTQ_ATTR_INT) return (float)a->i;
    return def;
}

const char *ptq_attr_string(const ptq_node *n, const char *name, const char *def)
{
    const ptq_attr *a = ptq_node_attr(n, name);
    return a && a->type == PTQ_ATTR_STRING ? a->s : def;
}

const int64_t *ptq_attr_ints(const ptq_node *n, const char *name, size_t *count)
{
    const ptq_attr *a = ptq_node_attr(n, name);
    if (!a || a->type != PTQ_ATTR_INTS) {
        *count = 0;
        return NULL;
    }
    *count = a->n;
    return a->ints;
}

const float *ptq_attr_floats(const ptq_node *n, const char *name, size_t *count)
{
    const ptq_attr *a = ptq_node_attr(n, name);
    if (!a || a->type != PTQ_ATTR_FLOATS) {
        *count = 0;
        return NULL;
    }
    *count = a->n;
    return a->floats;
}

const ptq_tensor *ptq_attr_tensor(const ptq_node *n, const char *name)
{
    const ptq_attr *a = ptq_node_attr(n, name);
    return a && a->type == PTQ_ATTR_TENSOR ? &a->tensor : NULL;
}

const ptq_graph *ptq_attr_graph(const ptq_node *n, const char *name)
{
    const ptq_attr *a = ptq_node_attr(n, name);
    return a && a->type == PTQ_ATTR_GRAPH ? a->graph : NULL;
}

struct ptq_name_index {
    const ptq_graph *g;
    size_t cap;
    int *slots; /* value index + 1, 0 = empty */
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

ptq_name_index *ptq_name_index_build(const ptq_graph *g)
{
    ptq_name_index *ix = calloc(1, sizeof *ix);
    if (!ix) return NULL;
    ix->g = g;
    ix->cap = 16;
    while (ix->cap < (size_t)g->n_values * 2 + 1) ix->cap *= 2;
    ix->slots = calloc(ix->cap, sizeof(int));
    if (!ix->slots) {
        free(ix);
        return NULL;
    }
    for (int v = 0; v < g->n_values; v++) {
        size_t h = hash_str(g->values[v].name) & (ix->cap - 1);
        while (ix->slots[h]) h = (h + 1) & (ix->cap - 1);
        ix->slots[h] = v + 1;
    }
    return ix;
}

int ptq_name_index_find(const ptq_name_index *ix, const char *name)
{
    size_t h = hash_str(name) & (ix->cap - 1);
    while (ix->slots[h]) {
        int v = ix->slots[h] - 1;
        if (strcmp(ix->g->values[v].name, name) == 0) return v;
        h = (h + 1) & (ix->cap - 1);
    }
    return -1;
}

void ptq_name_index_destroy(ptq_name_index *ix)
{
    if (!ix) return;
    free(ix->slots);
    free(ix);
}
