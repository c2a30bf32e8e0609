/* graph_build.h: small graphs and in-memory image sources for the engine's unit tests
 * (test_refine.c, test_equalize.c). Header-only, static inline.
 *
 *   ptq_graph *g = gb_graph(4, (const int64_t[]){1, 4, 8, 8});   // input "x", batch dim free
 *   gb_weight(g, "w", 4, (const int64_t[]){6, 4, 3, 3}, 11);      // 0.3 * uniform[-1, 1), seeded
 *   int n = gb_node(g, "c", "Conv", (const char *const[]){"x", "w"}, 2, "y");
 *   gb_ints_attr(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
 *   gb_output(g, "y");
 *   gb_source m = gb_images(4, (const int64_t[]){6, 4, 8, 8}, 6);  // 6 images, batches of 4
 *   eng_source src = gb_source_of(&m); */
#ifndef PTQ_TESTS_GRAPH_BUILD_H
#define PTQ_TESTS_GRAPH_BUILD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/source.h"
#include "runtime/graph.h"

static uint32_t gb_lcg;

static inline float gb_rnd(void) /* uniform [-1, 1) */
{
    gb_lcg = gb_lcg * 1664525u + 1013904223u;
    return (float)(gb_lcg >> 8) / (float)(1u << 23) - 1.0f;
}

static inline int gb_val(ptq_graph *g, const char *name)
{
    int v = ptq_graph_find_value(g, name);
    if (v < 0) ptq_graph_add_value(g, name, &v);
    return v;
}

/* A float initializer of 0.3 * uniform[-1, 1) values from seed; returns its data. */
static inline float *gb_weight(ptq_graph *g, const char *name, int rank, const int64_t *dims, uint32_t seed)
{
    int v = gb_val(g, name);
    ptq_value *x = &g->values[v];
    x->kind = PTQ_VALUE_INITIALIZER;
    x->t.dtype = PTQ_F32;
    x->t.rank = rank;
    memcpy(x->t.dims, dims, sizeof(int64_t) * (size_t)rank);
    ptq_tensor_alloc(&x->t);
    gb_lcg = seed;
    float *p = x->t.data;
    for (size_t i = 0; i < ptq_tensor_numel(&x->t); i++) p[i] = 0.3f * gb_rnd();
    g->initializers = realloc(g->initializers, sizeof(int) * (size_t)(g->n_initializers + 1));
    g->initializers[g->n_initializers++] = v;
    return p;
}

static inline int gb_node(ptq_graph *g, const char *name, const char *op, const char *const *ins, int n_in, const char *out)
{
    int iv[8], o = gb_val(g, out), n;
    for (int i = 0; i < n_in && i < 8; i++) iv[i] = gb_val(g, ins[i]);
    ptq_graph_add_node(g, name, op, "", iv, n_in, &o, 1, &n);
    return n;
}

static inline void gb_ints_attr(ptq_graph *g, int n, const char *name, const int64_t *v, int count)
{
    ptq_attr a = {.name = ptq_strdup(name), .type = PTQ_ATTR_INTS, .n = (size_t)count};
    a.ints = malloc(sizeof(int64_t) * (size_t)count);
    memcpy(a.ints, v, sizeof(int64_t) * (size_t)count);
    ptq_node_add_attr(&g->nodes[n], &a);
}

static inline void gb_int_attr(ptq_graph *g, int n, const char *name, int64_t v)
{
    ptq_attr a = {.name = ptq_strdup(name), .type = PTQ_ATTR_INT, .i = v};
    ptq_node_add_attr(&g->nodes[n], &a);
}

/* An opset-13 graph with one float input "x" of these dims (dims[0], the batch, left free). */
static inline ptq_graph *gb_graph(int rank, const int64_t *dims)
{
    ptq_graph *g = ptq_graph_create();
    g->opsets = calloc(1, sizeof *g->opsets);
    g->opsets[0].domain = ptq_strdup("");
    g->opsets[0].version = 13;
    g->n_opsets = 1;
    int v = gb_val(g, "x");
    g->values[v].kind = PTQ_VALUE_INPUT;
    g->values[v].t.dtype = PTQ_F32;
    g->values[v].t.rank = rank;
    memcpy(g->values[v].t.dims, dims, sizeof(int64_t) * (size_t)rank);
    g->values[v].t.dims[0] = -1;
    g->inputs = malloc(sizeof(int));
    g->inputs[0] = v;
    g->n_inputs = 1;
    return g;
}

static inline void gb_output(ptq_graph *g, const char *name)
{
    int v = gb_val(g, name);
    g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
    g->outputs[g->n_outputs++] = v;
    g->values[v].is_output = 1;
}

/* n deterministic images (0.5 * uniform[-1, 1) + 0.2, seed 99) of dims[1..], served in batches of `batch`. */
typedef struct {
    float *data;
    int64_t dims[4];
    int rank, n, batch, next;
} gb_source;

static inline ptq_status gb_open(void *u)
{
    ((gb_source *)u)->next = 0;
    return PTQ_OK;
}

static inline ptq_status gb_next(void *u, ptq_tensor *x)
{
    gb_source *m = u;
    memset(x, 0, sizeof *x);
    int n = m->n - m->next < m->batch ? m->n - m->next : m->batch;
    if (n <= 0) return PTQ_OK;
    x->dtype = PTQ_F32;
    x->rank = m->rank;
    memcpy(x->dims, m->dims, sizeof m->dims);
    x->dims[0] = n;
    size_t per = 1;
    for (int d = 1; d < m->rank; d++) per *= (size_t)m->dims[d];
    x->data = m->data + (size_t)m->next * per;
    m->next += n;
    return PTQ_OK;
}

static inline void gb_close(void *u)
{
    (void)u;
}

static inline gb_source gb_images(int rank, const int64_t *dims, int n)
{
    gb_source m = {.rank = rank, .n = n, .batch = 4};
    memcpy(m.dims, dims, sizeof(int64_t) * (size_t)rank);
    size_t per = 1;
    for (int d = 1; d < rank; d++) per *= (size_t)dims[d];
    m.data = malloc(sizeof(float) * per * (size_t)n);
    gb_lcg = 99;
    for (size_t i = 0; i < per * (size_t)n; i++) m.data[i] = 0.5f * gb_rnd() + 0.2f;
    return m;
}

static inline eng_source gb_source_of(gb_source *m)
{
    return (eng_source){.open = gb_open, .next = gb_next, .close = gb_close, .user = m};
}

#endif
