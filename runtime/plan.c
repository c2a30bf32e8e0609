/* plan.c: the executor. ptq_plan_create does all the work once per input shape:
 *   1. check every op is supported (all unknown ops reported together), sort nodes;
 *   2. bind input shapes, then infer node by node; a node whose inputs are all
 *      constant is run at once and its outputs become constants (this folds shape
 *      subgraphs: Shape -> Gather -> Concat -> Reshape);
 *   3. fuse, never removing a graph output or a tensor the observer sees (all float
 *      tensors unless options.observe_filter narrows them):
 *      BatchNormalization into the preceding Conv's weights, then a single-use
 *      activation into the op that produces its input;
 *   4. lay out one activation arena by liveness (first fit, 64-byte aligned); graph
 *      outputs are never reused; one scratch buffer sized by the largest query.
 * ptq_plan_run then only sets input pointers, runs kernels and calls the observer.
 *
 * Dynamic part (data-dependent shapes): in step 2 a node is marked dynamic when its infer
 * sets ctx.dynamic (PTQ_OP_DYNAMIC ops missing the data that decides their shape), when it
 * fails because an input "is not constant" while some input is computed at run time, or when
 * it reads a value a dynamic node makes; a dynamic node is neither folded nor fused, and its
 * outputs stay out of the arena. At run time (dyn_prepare, inside ptq_plan_step, so begin/step
 * and the observers' order are unchanged) it is inferred again with its inputs as they are
 * (an ordinary op only when its inputs' shapes or small inputs' bytes changed since its last
 * infer), and its outputs get heap buffers owned by the plan: each from the plan's free
 * buffers (the smallest that fits) or newly allocated, back to the free list once the value's
 * last reader ran (a graph output's at the next run: valid, like every output, until then);
 * destroy frees them all. Static values a dynamic node reads stay alive in the arena through
 * liveness as usual. A fully static graph takes none of these paths.
 * Control ops (If, Loop, Scan) also read, as implicit inputs (step.n_outer, after ctx.n_in),
 * the values of this graph their subgraphs name (kind OUTER there): liveness, folding and
 * dynamic marking count them; runtime/ops/control.c runs the subgraphs as plans of their own. */
#include "plan_impl.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "runtime/kernels/sgemm.h"



ptq_plan_options ptq_plan_defaults(void)
{
    ptq_plan_options o;
    memset(&o, 0, sizeof o);
    o.fuse = 1;
    return o;
}

ptq_status ptq_graph_check_ops(const ptq_graph *g)
{
    /* one entry per unsupported op type: count and the first node's name */
    char msg[900];
    size_t len = 0;
    int bad = 0, types = 0;
    msg[0] = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const ptq_node *node = &g->nodes[n];
        int id = ptq_op_find(node->domain, node->op_type);
        if (id >= 0 && ptq_op_get(id)) continue;
        bad++;
        int seen = 0;
        for (int m = 0; m < n && !seen; m++)
            seen = strcmp(g->nodes[m].op_type, node->op_type) == 0 && strcmp(g->nodes[m].domain, node->domain) == 0;
        if (seen) continue;
        int count = 0;
        for (int m = n; m < g->n_nodes; m++)
            count += strcmp(g->nodes[m].op_type, node->op_type) == 0 && strcmp(g->nodes[m].domain, node->domain) == 0;
        types++;
        if (len < sizeof msg - 120) {
            int w = snprintf(msg + len, sizeof msg - len, "%s%s%s%s (%d node%s, first '%s')", types > 1 ? ", " : "",
                             node->domain, node->domain[0] ? "." : "", node->op_type, count, count > 1 ? "s" : "",
                             node->name);
            if (w > 0) len += (size_t)w;
        } else if (len < sizeof msg - 8) {
            len += (size_t)snprintf(msg + len, sizeof msg - len, ", ...");
        }
    }
    if (bad) {
        ptq_error("%d node%s with unsupported ops: %s", bad, bad > 1 ? "s" : "", msg);
        return PTQ_ERR_UNSUPPORTED;
    }
    for (int n = 0; n < g->n_nodes; n++) { /* subgraphs: the first one with unsupported ops */
        const ptq_node *node = &g->nodes[n];
        for (int k = 0; k < node->n_attrs; k++) {
            const ptq_attr *a = &node->attrs[k];
            for (int i = 0; i < (a->graph ? 1 : a->n_graphs); i++) {
                ptq_status st = ptq_graph_check_ops(a->graph ? a->graph : a->graphs[i]);
                if (st != PTQ_OK) {
                    ptq_error_prefix("%s '%s' subgraph '%s': ", node->op_type, node->name, a->name);
                    return st;
                }
            }
        }
    }
    return PTQ_OK;
}

static void print_profile(const ptq_plan *p);

/* Points every arena value at its offset in `arena` and every step at `scratch`. */
static void bind(ptq_plan *p, uint8_t *arena, void *scratch)
{
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s = &p->steps[i];
        if (s->dyn) continue; /* own scratch, heap outputs */
        s->ctx.scratch = scratch;
        if (s->skip) continue;
        for (int o = 0; o < s->ctx.n_out; o++)
            if (s->out_vals[o] >= 0) p->vals[s->out_vals[o]].data = arena + p->offsets[s->out_vals[o]];
    }
    p->arena = arena;
    p->scratch = scratch;
}

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

size_t ptq_plan_memory_bytes(const ptq_plan *p)
{
    size_t n = ALIGN64(p->arena_bytes) + p->scratch_bytes;
    return n ? n : 64;
}

void ptq_plan_bind_memory(ptq_plan *p, void *mem)
{
    uint8_t *m = mem;
    bind(p, m, p->scratch_bytes ? m + ALIGN64(p->arena_bytes) : NULL);
}

static void step_clear(plan_step *s)
{
    if (s->has_state && s->def && s->def->free_state) s->def->free_state(s->ctx.state);
    s->ctx.state = NULL;
    s->has_state = 0;
    free(s->in);
    free(s->out);
    free(s->kept);
    free(s->in_vals);
    free(s->out_vals);
    free(s->outer_names);
    free(s->in_const);
    ptq_aligned_free(s->dyn_scratch);
    free(s->sig);
}

/* ---- arena pool ---- */

enum { POOL_SLOTS = 4 };

struct ptq_arena_pool {
    pthread_mutex_t mu;
    void *mem[POOL_SLOTS];
    size_t cap[POOL_SLOTS];
};

ptq_arena_pool *ptq_arena_pool_create(void)
{
    ptq_arena_pool *pool = calloc(1, sizeof *pool);
    if (pool && pthread_mutex_init(&pool->mu, NULL) != 0) {
        free(pool);
        return NULL;
    }
    return pool;
}

void ptq_arena_pool_destroy(ptq_arena_pool *pool)
{
    if (!pool) return;
    for (int i = 0; i < POOL_SLOTS; i++) ptq_aligned_free(pool->mem[i]);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

/* An arena of at least `bytes` (*cap: its size): the smallest pooled one that fits and is
 * at most twice the need, else a new one. */
static void *arena_take(ptq_arena_pool *pool, size_t bytes, size_t *cap)
{
    void *m = NULL;
    *cap = bytes;
    if (pool) {
        pthread_mutex_lock(&pool->mu);
        int best = -1;
        for (int i = 0; i < POOL_SLOTS; i++)
            if (pool->mem[i] && pool->cap[i] >= bytes && pool->cap[i] / 2 <= bytes &&
                (best < 0 || pool->cap[i] < pool->cap[best]))
                best = i;
        if (best >= 0) {
            m = pool->mem[best];
            *cap = pool->cap[best];
            pool->mem[best] = NULL;
        }
        pthread_mutex_unlock(&pool->mu);
    }
    return m ? m : ptq_aligned_alloc(bytes);
}

/* Gives an arena back: into a free slot, or in place of a smaller pooled one (freed). */
static void arena_put(ptq_arena_pool *pool, void *m, size_t cap)
{
    if (pool && m) {
        pthread_mutex_lock(&pool->mu);
        int slot = -1;
        for (int i = 0; i < POOL_SLOTS && slot < 0; i++)
            if (!pool->mem[i]) slot = i;
        if (slot < 0)
            for (int i = 0; i < POOL_SLOTS; i++)
                if (pool->cap[i] < cap && (slot < 0 || pool->cap[i] < pool->cap[slot])) slot = i;
        if (slot >= 0) {
            void *old = pool->mem[slot];
            pool->mem[slot] = m;
            pool->cap[slot] = cap;
            m = old;
        }
        pthread_mutex_unlock(&pool->mu);
    }
    ptq_aligned_free(m);
}

void *ptq_arena_pool_take(ptq_arena_pool *pool, size_t bytes, size_t *cap)
{
    return arena_take(pool, bytes, cap);
}

void ptq_arena_pool_put(ptq_arena_pool *pool, void *mem, size_t cap)
{
    arena_put(pool, mem, cap);
}

void ptq_plan_destroy(ptq_plan *p)
{
    if (!p) return;
    if (p->prof_ms) print_profile(p);
    free(p->prof_ms);
    for (int i = 0; i < p->n_steps; i++) step_clear(&p->steps[i]);
    free(p->steps);
    for (int v = 0; v < p->n_vals; v++)
        if (p->owned[v] || (p->dyn_cap && p->dyn_cap[v])) ptq_aligned_free(p->vals[v].data);
    free(p->vals);
    free(p->is_dyn);
    free(p->dyn_cap);
    for (int i = 0; i < p->n_dyn_free; i++) ptq_aligned_free(p->dyn_free[i]);
    free(p->dyn_free);
    free(p->dyn_free_cap);
    free(p->is_const);
    free(p->owned);
    free(p->last_use);
    for (int i = 0; p->in_u8 && i < p->n_inputs; i++) free(p->in_u8[i]);
    free(p->in_u8);
    free(p->in_u8_cap);
    free(p->input_vals);
    free(p->output_vals);
    free(p->offsets);
    if (!p->opt.bound_memory) {
        arena_put(p->opt.pool, p->arena, p->arena_cap);
        ptq_aligned_free(p->scratch);
    }
    free(p);
}

/* Appends a plan-owned constant value (used for fused weights); returns its index. */
ptq_status plan_add_const(ptq_plan *p, const ptq_tensor *shape, int *out)
{
    ptq_status st = PTQ_OK;
    if (p->n_vals == p->cap_vals) FAIL(PTQ_ERR_INTERNAL, "plan: constant pool full");
    int v = p->n_vals;
    ptq_tensor *t = &p->vals[v];
    *t = *shape;
    t->data = NULL;
    t->owns_data = 0;
    TRY(ptq_tensor_alloc(t));
    t->owns_data = 0; /* released through p->owned */
    p->is_const[v] = 1;
    p->owned[v] = 1;
    p->last_use[v] = -1;
    p->n_vals++;
    *out = v;
done:
    return st;
}

static ptq_status bind_inputs(ptq_plan *p, const ptq_input_shape *shapes, int n_shapes)
{
    ptq_status st = PTQ_OK;
    const ptq_graph *g = p->g;
    int *bindable = NULL, n_bindable = 0; /* graph inputs, then (subgraphs) outer values */
    CHECK_ALLOC(bindable = malloc(sizeof(int) * (size_t)(g->n_inputs + g->n_values + 1)));
    for (int i = 0; i < g->n_inputs; i++) bindable[n_bindable++] = g->inputs[i];
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == PTQ_VALUE_OUTER) bindable[n_bindable++] = v;
    for (int k = 0; k < n_shapes; k++) {
        int found = 0;
        for (int i = 0; i < n_bindable; i++)
            if (strcmp(g->values[bindable[i]].name, shapes[k].name) == 0) found = 1;
        if (!found) FAIL(PTQ_ERR_ARG, "--input-shape names '%s', which is not an input of the model", shapes[k].name);
    }
    p->input_vals = malloc(sizeof(int) * (size_t)(n_bindable + 1));
    CHECK_ALLOC(p->input_vals);
    for (int i = 0; i < n_bindable; i++) {
        int v = bindable[i];
        const ptq_value *val = &g->values[v];
        if (val->kind == PTQ_VALUE_INITIALIZER) continue; /* a constant with a default: stays constant */
        ptq_tensor *t = &p->vals[v];
        const ptq_input_shape *b = NULL;
        for (int k = 0; k < n_shapes; k++)
            if (strcmp(shapes[k].name, val->name) == 0) b = &shapes[k];
        if (val->kind == PTQ_VALUE_OUTER && !b)
            FAIL(PTQ_ERR_ARG, "subgraph '%s' reads '%s' of an enclosing graph, which was not bound",
                 g->graph_name ? g->graph_name : "", val->name);
        /* a binding's dtype counts for subgraphs only (callers of a model's plan may leave it unset) */
        t->dtype = b && g->parent && b->dtype != PTQ_UNDEFINED ? b->dtype : val->t.dtype;
        if (ptq_dtype_size(t->dtype) == 0)
            FAIL(PTQ_ERR_UNSUPPORTED, "input '%s': element type %s is not supported", val->name,
                 ptq_dtype_name(t->dtype));
        if (b) {
            /* a subgraph's declared input shapes are hints: the enclosing node's values win */
            int sub = g->parent != NULL || val->kind == PTQ_VALUE_OUTER;
            if (b->rank < 0 || b->rank > PTQ_MAX_RANK) FAIL(PTQ_ERR_ARG, "input '%s': bad rank %d", val->name, b->rank);
            if (!sub && val->t.rank >= 0 && b->rank != val->t.rank)
                FAIL(PTQ_ERR_SHAPE, "input '%s': shape given has rank %d, the model declares rank %d", val->name,
                     b->rank, val->t.rank);
            t->rank = b->rank;
            for (int d = 0; d < b->rank; d++) {
                if (b->dims[d] < 0) FAIL(PTQ_ERR_ARG, "input '%s': negative dim %d", val->name, d);
                if (!sub && val->t.rank >= 0 && val->t.dims[d] >= 0 && val->t.dims[d] != b->dims[d])
                    FAIL(PTQ_ERR_SHAPE, "input '%s': dim %d given as %lld, the model fixes it to %lld", val->name, d,
                         (long long)b->dims[d], (long long)val->t.dims[d]);
                t->dims[d] = b->dims[d];
            }
        } else {
            if (val->t.rank < 0)
                FAIL(PTQ_ERR_ARG, "input '%s' has no declared shape; pass --input-shape %s:D1xD2x...", val->name,
                     val->name);
            t->rank = val->t.rank;
            for (int d = 0; d < t->rank; d++) {
                if (val->t.dims[d] < 0) {
                    char want[64];
                    snprintf(want, sizeof want, "%s", val->dim_params[d] ? val->dim_params[d] : "?");
                    FAIL(PTQ_ERR_ARG, "input '%s': dim %d ('%s') is symbolic and not bound; pass --input-shape %s:D1xD2x...",
                         val->name, d, want, val->name);
                }
                t->dims[d] = val->t.dims[d];
            }
        }
        if (b && b->data) { /* bound to data: a constant from here on */
            t->data = (void *)b->data;
            p->is_const[v] = 1;
            continue;
        }
        p->input_vals[p->n_inputs++] = v;
    }
done:
    free(bindable);
    return st;
}

/* Prefixes the node's name unless the message already names it (OP_FAIL does). */
static void name_node_in_error(const ptq_node *node)
{
    const char *m = ptq_last_error();
    size_t n = strlen(node->op_type);
    if (strncmp(m, node->op_type, n) == 0 && m[n] == ' ' && m[n + 1] == '\'') return;
    ptq_error_prefix("%s '%s': ", node->op_type, node->name);
}

ptq_status plan_step_infer(ptq_plan *p, plan_step *s)
{
    const ptq_node *node = &p->g->nodes[s->node];
    int control = (s->def->flags & PTQ_OP_CONTROL) != 0;
    if (!control) { /* control ops keep their subgraphs' plans from one infer to the next */
        if (s->has_state && s->def->free_state) s->def->free_state(s->ctx.state);
        s->ctx.state = NULL;
        s->has_state = 0;
    }
    s->ctx.scratch_bytes = 0;
    s->ctx.dynamic = 0;
    if (s->in_const)
        for (int i = 0; i < n_reads(s); i++) s->in_const[i] = s->in_vals[i] >= 0 && p->is_const[s->in_vals[i]];
    for (int o = 0; o < s->ctx.n_out; o++)
        if (s->out[o]) {
            s->out[o]->dtype = PTQ_UNDEFINED;
            s->out[o]->rank = 0;
        }
    /* every ONNX op has a required first output, but for the recurrent ones (Y of RNN, GRU, LSTM
     * is optional: a model may keep only Y_h) */
    int y_optional = strcmp(node->op_type, "RNN") == 0 || strcmp(node->op_type, "GRU") == 0 ||
                     strcmp(node->op_type, "LSTM") == 0;
    if (s->ctx.n_out < 1 || (!s->out[0] && !y_optional)) {
        ptq_error("%s '%s': output 0 is missing", node->op_type, node->name);
        return PTQ_ERR_FORMAT;
    }
    if (s->ctx.n_in > 0 && !s->ctx.in[0] && !control) { /* and, when it has inputs, a required first input */
        ptq_error("%s '%s': input 0 is missing", node->op_type, node->name);
        return PTQ_ERR_FORMAT;
    }
    /* infer sets types and shapes only: an output's buffer (a dynamic value's, kept from the last
     * run) survives an infer that resets the whole tensor */
    for (int o = 0; o < s->ctx.n_out; o++) s->kept[o] = s->out[o] ? s->out[o]->data : NULL;
    ptq_status st = s->def->infer(&s->ctx);
    for (int o = 0; o < s->ctx.n_out; o++)
        if (s->out[o]) s->out[o]->data = s->kept[o];
    s->has_state = 1;
    if (st != PTQ_OK) {
        name_node_in_error(node);
        return st;
    }
    if (s->ctx.dynamic) {
        if (!(s->def->flags & (PTQ_OP_DYNAMIC | PTQ_OP_CONTROL))) {
            ptq_error("%s '%s': a dynamic output from an op not flagged dynamic (internal error)", node->op_type, node->name);
            return PTQ_ERR_INTERNAL;
        }
        return PTQ_OK; /* shapes known at run time */
    }
    for (int o = 0; o < s->ctx.n_out; o++) {
        ptq_tensor *t = s->out[o];
        if (!t) continue;
        if (ptq_dtype_size(t->dtype) == 0 || t->rank < 0 || t->rank > PTQ_MAX_RANK) {
            ptq_error("%s '%s': output %d was not inferred (internal error)", node->op_type, node->name, o);
            return PTQ_ERR_INTERNAL;
        }
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] < 0) {
                ptq_error("%s '%s': output %d has negative dim %lld", node->op_type, node->name, o,
                          (long long)t->dims[d]);
                return PTQ_ERR_SHAPE;
            }
    }
    return PTQ_OK;
}

static ptq_status step_setup(ptq_plan *p, plan_step *s, int node_index, int64_t opset)
{
    ptq_status st = PTQ_OK;
    const ptq_node *node = &p->g->nodes[node_index];
    s->node = node_index;
    s->def = ptq_op_get(ptq_op_find(node->domain, node->op_type));
    /* outer values the node's subgraphs read (each once) */
    int n_outer = 0, max_outer = 0;
    for (int k = 0; k < node->n_attrs; k++)
        for (int i = 0; i < (node->attrs[k].graph ? 1 : node->attrs[k].n_graphs); i++)
            max_outer += (node->attrs[k].graph ? node->attrs[k].graph : node->attrs[k].graphs[i])->n_values;
    s->in = calloc((size_t)(node->n_inputs + max_outer) + 1, sizeof *s->in);
    s->out = calloc((size_t)node->n_outputs + 1, sizeof *s->out);
    s->kept = calloc((size_t)node->n_outputs + 1, sizeof *s->kept);
    s->in_vals = malloc(sizeof(int) * ((size_t)(node->n_inputs + max_outer) + 1));
    s->out_vals = malloc(sizeof(int) * ((size_t)node->n_outputs + 1));
    CHECK_ALLOC(s->in);
    CHECK_ALLOC(s->out);
    CHECK_ALLOC(s->kept);
    CHECK_ALLOC(s->in_vals);
    CHECK_ALLOC(s->out_vals);
    /* trailing omitted inputs are dropped, as ONNX treats them as absent */
    int n_in = node->n_inputs;
    while (n_in > 0 && node->inputs[n_in - 1] < 0) n_in--;
    for (int i = 0; i < n_in; i++) {
        int v = node->inputs[i];
        s->in_vals[i] = v;
        s->in[i] = v >= 0 ? &p->vals[v] : NULL;
    }
    for (int o = 0; o < node->n_outputs; o++) {
        int v = node->outputs[o];
        s->out_vals[o] = v;
        s->out[o] = v >= 0 ? &p->vals[v] : NULL;
    }
    for (int k = 0; k < node->n_attrs; k++)
        for (int i = 0; i < (node->attrs[k].graph ? 1 : node->attrs[k].n_graphs); i++) {
            const ptq_graph *sub = node->attrs[k].graph ? node->attrs[k].graph : node->attrs[k].graphs[i];
            for (int v = 0; v < sub->n_values; v++) {
                int ov = sub->values[v].outer, seen = 0;
                if (sub->values[v].kind != PTQ_VALUE_OUTER) continue;
                if (ov < 0 || ov >= p->g->n_values)
                    FAIL(PTQ_ERR_FORMAT, "%s '%s': subgraph '%s' reads '%s', unknown here", node->op_type, node->name,
                         node->attrs[k].name, sub->values[v].name);
                for (int j = 0; j < n_outer && !seen; j++) seen = s->in_vals[n_in + j] == ov;
                if (seen) continue;
                s->in_vals[n_in + n_outer] = ov;
                s->in[n_in + n_outer] = &p->vals[ov];
                n_outer++;
            }
        }
    s->n_outer = n_outer;
    if (s->def && (s->def->flags & PTQ_OP_CONTROL)) {
        CHECK_ALLOC(s->outer_names = calloc((size_t)n_outer + 1, sizeof *s->outer_names));
        CHECK_ALLOC(s->in_const = calloc((size_t)(n_in + n_outer) + 1, 1));
        for (int j = 0; j < n_outer; j++) s->outer_names[j] = p->g->values[s->in_vals[n_in + j]].name;
        s->ctx.n_outer = n_outer;
        s->ctx.outer = s->in + n_in;
        s->ctx.outer_names = s->outer_names;
        s->ctx.in_const = s->in_const;
        s->ctx.node_index = node_index;
        s->ctx.plan_options = &p->opt;
    }
    s->ctx.node = node;
    s->ctx.opset = opset;
    s->ctx.n_in = n_in;
    s->ctx.n_out = node->n_outputs;
    s->ctx.in = s->in;
    s->ctx.out = s->out;
    s->ctx.nthreads = p->nthreads;
done:
    return st;
}

/* 1 when the step reads a value that is not a plan constant. */
static int has_runtime_input(const ptq_plan *p, const plan_step *s)
{
    for (int i = 0; i < n_reads(s); i++)
        if (s->in_vals[i] >= 0 && !p->is_const[s->in_vals[i]]) return 1;
    return 0;
}

/* The most one tensor, a plan's arena or its scratch may take, whatever max_arena_bytes says:
 * 1 TiB is more than any machine ptq runs on holds, and sizes past it come from corrupt or
 * hostile shapes (and would overflow the arena's offsets long before 2^64). */
#define PLAN_MAX_BYTES ((double)(1ull << 40))

/* A tensor's bytes, computed in double so that no product of dims wraps around. */
static double tensor_bytes(const ptq_tensor *t)
{
    double n = (double)ptq_dtype_size(t->dtype);
    for (int i = 0; i < t->rank; i++) n *= (double)t->dims[i];
    return n;
}

/* Runs a step whose inputs are all constant and makes its outputs constants. */
static ptq_status fold_step(ptq_plan *p, plan_step *s)
{
    ptq_status st = PTQ_OK;
    void *scratch = NULL;
    for (int o = 0; o < s->ctx.n_out; o++) {
        int v = s->out_vals[o];
        if (v < 0) continue;
        ptq_tensor *t = &p->vals[v];
        if (tensor_bytes(t) > PLAN_MAX_BYTES)
            FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': folding output %d needs %.0f bytes, more than the %.0f (1 TiB) a plan may hold",
                 p->g->nodes[s->node].op_type, p->g->nodes[s->node].name, o, tensor_bytes(t), PLAN_MAX_BYTES);
        if (p->opt.max_arena_bytes && ptq_tensor_nbytes(t) > p->opt.max_arena_bytes)
            FAIL(PTQ_ERR_NOMEM, "%s '%s': folding output %d needs %.1f MiB, over the limit of %.1f MiB",
                 p->g->nodes[s->node].op_type, p->g->nodes[s->node].name, o, (double)ptq_tensor_nbytes(t) / 1048576.0,
                 (double)p->opt.max_arena_bytes / 1048576.0);
        TRY(ptq_tensor_alloc(t));
        t->owns_data = 0;
        p->owned[v] = 1;
        p->is_const[v] = 1;
    }
    if (s->ctx.scratch_bytes) {
        scratch = ptq_aligned_alloc(s->ctx.scratch_bytes);
        CHECK_ALLOC(scratch);
    }
    s->ctx.scratch = scratch;
    st = s->def->run(&s->ctx);
    if (st != PTQ_OK) name_node_in_error(&p->g->nodes[s->node]);
    s->ctx.scratch = NULL;
    s->skip = 1;
done:
    ptq_aligned_free(scratch);
    return st;
}

int plan_is_graph_output(const ptq_plan *p, int v)
{
    for (int i = 0; i < p->n_outputs; i++)
        if (p->output_vals[i] == v) return 1;
    return 0;
}
/* The observer sees v: a float tensor of the graph (not a constant the planner made)
 * that the filter, if any, accepts. */
int plan_observes(const ptq_plan *p, int v)
{
    if (!p->opt.observer || v < 0 || v >= p->g->n_values || p->vals[v].dtype != PTQ_F32) return 0;
    return !p->opt.observe_filter || p->opt.observe_filter(p->g->values[v].name, p->opt.observer_user);
}

typedef struct {
    size_t off, size;
} block;


/* First-fit placement of every runtime tensor by liveness. */
static ptq_status plan_memory(ptq_plan *p, size_t *offsets)
{
    ptq_status st = PTQ_OK;
    block *live = calloc((size_t)p->n_vals + 1, sizeof *live);
    int *live_val = calloc((size_t)p->n_vals + 1, sizeof *live_val);
    int n_live = 0;
    size_t peak = 0;
    CHECK_ALLOC(live);
    CHECK_ALLOC(live_val);
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s = &p->steps[i];
        if (s->skip) continue;
        for (int o = 0; o < s->ctx.n_out && !s->dyn; o++) { /* dynamic outputs live on the heap */
            int v = s->out_vals[o];
            if (v < 0) continue;
            double want = tensor_bytes(&p->vals[v]);
            if (want > PLAN_MAX_BYTES)
                FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': output %d needs %.0f bytes, more than the %.0f (1 TiB) a plan may hold",
                     p->g->nodes[s->node].op_type, p->g->nodes[s->node].name, o, want, PLAN_MAX_BYTES);
            size_t size = (ptq_tensor_nbytes(&p->vals[v]) + 63) / 64 * 64;
            /* lowest gap between live blocks (sorted by offset) that fits */
            size_t off = 0;
            int pos = 0;
            for (; pos < n_live; pos++) {
                if (live[pos].off >= off + size) break;
                if (live[pos].off + live[pos].size > off) off = live[pos].off + live[pos].size;
            }
            memmove(&live[pos + 1], &live[pos], sizeof *live * (size_t)(n_live - pos));
            memmove(&live_val[pos + 1], &live_val[pos], sizeof *live_val * (size_t)(n_live - pos));
            live[pos].off = off;
            live[pos].size = size;
            live_val[pos] = v;
            n_live++;
            offsets[v] = off;
            if (off + size > peak) peak = off + size;
            if ((double)peak > PLAN_MAX_BYTES)
                FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': the activations live at once need %.0f bytes, more than the %.0f (1 TiB) a plan may hold",
                     p->g->nodes[s->node].op_type, p->g->nodes[s->node].name, (double)peak, PLAN_MAX_BYTES);
        }
        /* release what dies here: values whose last reader is this step, and outputs
         * nobody reads (graph outputs never die) */
        for (int k = 0; k < n_live;) {
            int v = live_val[k];
            int dead = !plan_is_graph_output(p, v) && p->last_use[v] <= i;
            if (dead) {
                memmove(&live[k], &live[k + 1], sizeof *live * (size_t)(n_live - k - 1));
                memmove(&live_val[k], &live_val[k + 1], sizeof *live_val * (size_t)(n_live - k - 1));
                n_live--;
            } else {
                k++;
            }
        }
    }
    p->arena_bytes = peak;
done:
    free(live);
    free(live_val);
    return st;
}

static double step_flops(const ptq_plan *p, const plan_step *s)
{
    const char *op = p->g->nodes[s->node].op_type;
    const ptq_tensor *y = s->out[0];
    if (!y || s->ctx.n_in < 2) return 0;
    const ptq_tensor *w = s->in[1];
    if (strcmp(op, "Conv") == 0) {
        double k = 1;
        for (int d = 1; d < w->rank; d++) k *= (double)w->dims[d];
        return 2.0 * (double)ptq_tensor_numel(y) * k;
    }
    if (strcmp(op, "ConvTranspose") == 0) {
        double k = 1;
        for (int d = 1; d < w->rank; d++) k *= (double)w->dims[d];
        return 2.0 * (double)ptq_tensor_numel(s->in[0]) * k;
    }
    if (strcmp(op, "MatMul") == 0 || strcmp(op, "Gemm") == 0) {
        const ptq_tensor *a = s->in[0];
        int64_t kdim = a->rank ? a->dims[a->rank - 1] : 1;
        if (strcmp(op, "Gemm") == 0 && ptq_attr_int(&p->g->nodes[s->node], "transA", 0)) kdim = a->dims[0];
        return 2.0 * (double)ptq_tensor_numel(y) * (double)kdim;
    }
    return 0;
}

ptq_status ptq_plan_create(const ptq_graph *g, const ptq_input_shape *shapes, int n_shapes,
                           const ptq_plan_options *opt, ptq_plan **out)
{
    ptq_status st = PTQ_OK;
    ptq_plan *p = NULL;
    int *order = NULL;
    size_t *offsets = NULL;
    *out = NULL;
    char why[160];
    if (kern_isa_check(why, sizeof why) != 0) {
        ptq_error("%s", why);
        return PTQ_ERR_ARG;
    }
    TRY(ptq_graph_check_ops(g));
    p = calloc(1, sizeof *p);
    CHECK_ALLOC(p);
    p->g = g;
    p->opt = opt ? *opt : ptq_plan_defaults();
    p->nthreads = p->opt.nthreads > 0 ? p->opt.nthreads : omp_get_max_threads();
    p->cap_vals = g->n_values + 2 * g->n_nodes + 1;
    p->vals = calloc((size_t)p->cap_vals, sizeof *p->vals);
    p->is_const = calloc((size_t)p->cap_vals, 1);
    p->owned = calloc((size_t)p->cap_vals, 1);
    p->last_use = malloc(sizeof(int) * (size_t)p->cap_vals);
    p->is_dyn = calloc((size_t)p->cap_vals, 1);
    p->dyn_cap = calloc((size_t)p->cap_vals, sizeof *p->dyn_cap);
    p->dyn_free = calloc((size_t)p->cap_vals + 1, sizeof *p->dyn_free);
    p->dyn_free_cap = calloc((size_t)p->cap_vals + 1, sizeof *p->dyn_free_cap);
    CHECK_ALLOC(p->is_dyn);
    CHECK_ALLOC(p->dyn_cap);
    CHECK_ALLOC(p->dyn_free);
    CHECK_ALLOC(p->dyn_free_cap);
    order = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    p->steps = calloc((size_t)g->n_nodes + 1, sizeof *p->steps);
    p->output_vals = malloc(sizeof(int) * ((size_t)g->n_outputs + 1));
    CHECK_ALLOC(p->vals);
    CHECK_ALLOC(p->is_const);
    CHECK_ALLOC(p->owned);
    CHECK_ALLOC(p->last_use);
    CHECK_ALLOC(order);
    CHECK_ALLOC(p->steps);
    CHECK_ALLOC(p->output_vals);
    p->n_vals = g->n_values;
    for (int v = 0; v < g->n_values; v++) {
        const ptq_value *val = &g->values[v];
        p->vals[v].rank = 0;
        if (val->kind == PTQ_VALUE_INITIALIZER) {
            p->vals[v] = val->t;
            p->vals[v].owns_data = 0;
            if (!val->t.data) FAIL(PTQ_ERR_FORMAT, "initializer '%s' has no data", val->name);
            p->is_const[v] = 1;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) p->output_vals[i] = g->outputs[i];
    p->n_outputs = g->n_outputs;
    TRY(bind_inputs(p, shapes, n_shapes));
    TRY(ptq_graph_toposort(g, order));

    /* infer and fold, in order */
    int64_t opset = ptq_graph_opset(g, "");
    for (int k = 0; k < g->n_nodes; k++) {
        plan_step *s = &p->steps[p->n_steps++];
        TRY(step_setup(p, s, order[k], opset));
        /* downstream of a dynamic value: dynamic too, inferred at run time only */
        for (int i = 0; i < n_reads(s) && !s->dyn; i++) s->dyn = s->in_vals[i] >= 0 && p->is_dyn[s->in_vals[i]];
        if (!s->dyn) {
            st = plan_step_infer(p, s);
            if (st == PTQ_ERR_UNSUPPORTED && strstr(ptq_last_error(), "not constant") && has_runtime_input(p, s)) {
                /* a shape, axes or repeats input computed at run time (a loop's counter...):
                 * inferred at run time, with that input's data */
                st = PTQ_OK;
                s->ctx.dynamic = 1;
            }
            if (st != PTQ_OK) goto done;
            s->dyn = s->ctx.dynamic;
        }
        if (s->dyn) {
            p->n_dyn++;
            for (int o = 0; o < s->ctx.n_out; o++)
                if (s->out_vals[o] >= 0) {
                    p->is_dyn[s->out_vals[o]] = 1;
                    p->vals[s->out_vals[o]].dtype = PTQ_UNDEFINED;
                    p->vals[s->out_vals[o]].rank = 0;
                }
            continue;
        }
        /* Shape and Size only read the (known) input shape: always foldable */
        const char *op = g->nodes[order[k]].op_type;
        int all_const = strcmp(op, "Shape") == 0 || strcmp(op, "Size") == 0;
        if (!all_const) {
            all_const = 1;
            for (int i = 0; i < n_reads(s); i++)
                if (s->in_vals[i] >= 0 && !p->is_const[s->in_vals[i]]) all_const = 0;
        }
        if (all_const) TRY(fold_step(p, s));
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        if (g->values[v].kind == PTQ_VALUE_INTERMEDIATE && g->values[v].producer < 0)
            FAIL(PTQ_ERR_FORMAT, "graph output '%s' is produced by no node", g->values[v].name);
    }
    if (p->opt.fuse) { /* observed tensors are pinned: with every tensor observed nothing fuses */
        TRY(plan_fuse(p));
    }

    /* liveness: last step reading each value */
    for (int v = 0; v < p->n_vals; v++) p->last_use[v] = -1;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s = &p->steps[i];
        if (s->skip) continue;
        for (int k = 0; k < n_reads(s); k++)
            if (s->in_vals[k] >= 0) p->last_use[s->in_vals[k]] = i;
    }
    offsets = calloc((size_t)p->n_vals + 1, sizeof *offsets);
    CHECK_ALLOC(offsets);
    TRY(plan_memory(p, offsets));
    if (p->opt.max_arena_bytes && p->arena_bytes > p->opt.max_arena_bytes)
        FAIL(PTQ_ERR_NOMEM, "the plan needs %.1f MiB of activation memory, over the limit of %.1f MiB",
             (double)p->arena_bytes / 1048576.0, (double)p->opt.max_arena_bytes / 1048576.0);
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s = &p->steps[i];
        if (s->skip || s->dyn) continue;
        if ((double)s->ctx.scratch_bytes > PLAN_MAX_BYTES)
            FAIL(PTQ_ERR_UNSUPPORTED, "%s '%s': needs %.0f bytes of scratch, more than the %.0f (1 TiB) a plan may hold",
                 p->g->nodes[s->node].op_type, p->g->nodes[s->node].name, (double)s->ctx.scratch_bytes, PLAN_MAX_BYTES);
        if (s->ctx.scratch_bytes > p->scratch_bytes) p->scratch_bytes = s->ctx.scratch_bytes;
        p->flops += step_flops(p, s);
    }
    p->offsets = offsets;
    offsets = NULL;
    if (!p->opt.bound_memory) {
        p->arena = arena_take(p->opt.pool, p->arena_bytes ? p->arena_bytes : 64, &p->arena_cap);
        CHECK_ALLOC(p->arena);
        void *scratch = NULL;
        if (p->scratch_bytes) {
            scratch = ptq_aligned_alloc(p->scratch_bytes);
            CHECK_ALLOC(scratch);
        }
        bind(p, p->arena, scratch);
    }
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s = &p->steps[i];
        if (!s->skip && !s->dyn && p->opt.tile_sink && (s->def->flags & PTQ_OP_TILES) && s->ctx.n_out >= 1 && plan_observes(p, s->out_vals[0]))
            s->ctx.sink = p->opt.tile_sink(g->values[s->out_vals[0]].name, s->node, p->opt.observer_user);
    }
    if (getenv("PTQ_PROFILE")) {
        p->prof_ms = calloc((size_t)p->n_steps + 1, sizeof *p->prof_ms);
        CHECK_ALLOC(p->prof_ms);
        p->prof_cpu = !strcmp(getenv("PTQ_PROFILE"), "cpu");
    }
    *out = p;
    p = NULL;
done:
    free(order);
    free(offsets);
    ptq_plan_destroy(p);
    return st;
}

/* PTQ_PROFILE=1 (wall-clock) or cpu (CPU time): time per op type, printed to stderr when the plan is destroyed. */
static void print_profile(const ptq_plan *p)
{
    double total = 0;
    for (int i = 0; i < p->n_steps; i++) total += p->prof_ms[i];
    fprintf(stderr, "profile: %.1f ms %s in all, observers %.1f ms more\n", total, p->prof_cpu ? "CPU" : "wall-clock", p->prof_obs_ms);
    if (p->n_dyn) fprintf(stderr, "  %d of %d nodes dynamic (inferred during the run; their time includes it)\n", p->n_dyn, p->n_steps);
    for (int i = 0; i < p->n_steps; i++) {
        const char *op = p->g->nodes[p->steps[i].node].op_type;
        int first = 1;
        for (int j = 0; j < i && first; j++) first = strcmp(p->g->nodes[p->steps[j].node].op_type, op) != 0;
        if (!first) continue;
        double t = 0;
        int n = 0;
        for (int j = i; j < p->n_steps; j++)
            if (strcmp(p->g->nodes[p->steps[j].node].op_type, op) == 0 && !p->steps[j].skip) {
                t += p->prof_ms[j];
                n++;
            }
        if (n) fprintf(stderr, "  %-22s %4d nodes %9.1f ms %5.1f%%\n", op, n, t, 100 * t / (total > 0 ? total : 1));
    }
    if (!getenv("PTQ_PROFILE_NODES")) return;
    for (int i = 0; i < p->n_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->skip) continue;
        char shape[96];
        if (s->out[0]) ptq_shape_str(s->out[0], shape, sizeof shape);
        else snprintf(shape, sizeof shape, "-");
        fprintf(stderr, "  node %-28s %-14s %-20s %8.2f ms%s\n", p->g->nodes[s->node].name, p->g->nodes[s->node].op_type,
                shape, p->prof_ms[i], s->dyn ? " (dynamic)" : "");
    }
}

/* The observer's call for value v, with v's own producer (also when a fused step made it;
 * -1 for a graph input). */
static ptq_status observe(ptq_plan *p, int v)
{
    const ptq_tensor *t = &p->vals[v];
    if (!plan_observes(p, v)) return PTQ_OK;
    return p->opt.observer(p->g->values[v].name, p->g->values[v].producer, t, p->opt.observer_user);
}

/* A uint8 input fed float32 pixels (preprocessing with scale 1, mean 0, std 1: whole numbers
 * 0..255, as a model that normalises inside its graph takes them): converted exactly into a
 * buffer the plan keeps; any other value is refused, never rounded. */
static ptq_status pixels_to_u8(ptq_plan *p, int i, const ptq_tensor *x, const char *name, const void **out)
{
    ptq_status st = PTQ_OK;
    size_t n = ptq_tensor_numel(x);
    const float *f = x->data;
    if (!p->in_u8) {
        CHECK_ALLOC(p->in_u8 = calloc((size_t)p->n_inputs, sizeof *p->in_u8));
        CHECK_ALLOC(p->in_u8_cap = calloc((size_t)p->n_inputs, sizeof *p->in_u8_cap));
    }
    if (p->in_u8_cap[i] < n) {
        free(p->in_u8[i]);
        p->in_u8_cap[i] = 0;
        CHECK_ALLOC(p->in_u8[i] = malloc(n ? n : 1));
        p->in_u8_cap[i] = n;
    }
    for (size_t k = 0; k < n; k++) {
        if (!(f[k] >= 0.0f && f[k] <= 255.0f && f[k] == (float)(int)f[k]))
            FAIL(PTQ_ERR_ARG, "input '%s' is uint8 but element %zu of the float32 tensor fed to it is %g, not a whole "
                 "number in 0..255; feed it pixels with scale 1, mean 0, std 1", name, k, (double)f[k]);
        p->in_u8[i][k] = (uint8_t)f[k];
    }
    *out = p->in_u8[i];
done:
    return st;
}

ptq_status ptq_plan_begin(ptq_plan *p, const ptq_tensor *inputs, int n_inputs)
{
    ptq_status st = PTQ_OK;
    p->next_step = p->n_steps;
    if (!p->arena) FAIL(PTQ_ERR_ARG, "the plan has no memory bound (ptq_plan_bind_memory)");
    if (n_inputs != p->n_inputs) FAIL(PTQ_ERR_ARG, "%d inputs given, the model has %d", n_inputs, p->n_inputs);
    for (int i = 0; i < n_inputs; i++) {
        ptq_tensor *t = &p->vals[p->input_vals[i]];
        const char *name = p->g->values[p->input_vals[i]].name;
        char a[96], b[96];
        const void *data = inputs[i].data;
        if (inputs[i].dtype == PTQ_F32 && t->dtype == PTQ_U8 && !p->g->parent && ptq_shape_equal(&inputs[i], t))
            TRY(pixels_to_u8(p, i, &inputs[i], name, &data));
        else if (inputs[i].dtype != t->dtype)
            FAIL(PTQ_ERR_SHAPE, "input '%s': dtype %s, the model expects %s", name, ptq_dtype_name(inputs[i].dtype),
                 ptq_dtype_name(t->dtype));
        if (!ptq_shape_equal(&inputs[i], t))
            FAIL(PTQ_ERR_SHAPE, "input '%s': shape %s, the plan expects %s", name, ptq_shape_str(&inputs[i], a, sizeof a),
                 ptq_shape_str(t, b, sizeof b));
        if (!data && ptq_tensor_numel(t)) FAIL(PTQ_ERR_ARG, "input '%s' has no data", name);
        t->data = (void *)data;
    }
    if (p->opt.observer) /* (a subgraph's outer values were seen in their own graph) */
        for (int i = 0; i < n_inputs; i++)
            if (p->g->values[p->input_vals[i]].kind != PTQ_VALUE_OUTER) TRY(observe(p, p->input_vals[i]));
    p->next_step = 0;
done:
    return st;
}

/* Dynamic value v's buffer goes to the free list (the smallest listed one is freed when the
 * list holds one buffer per value already). */
static void dyn_release(ptq_plan *p, int v)
{
    if (!p->dyn_cap[v]) return;
    if (!p->vals[v].data) { /* no buffer to give back: never list NULL (step_infer keeps buffers) */
        p->dyn_cap[v] = 0;
        return;
    }
    if (p->n_dyn_free >= p->cap_vals) {
        int small = 0;
        for (int k = 1; k < p->n_dyn_free; k++)
            if (p->dyn_free_cap[k] < p->dyn_free_cap[small]) small = k;
        ptq_aligned_free(p->dyn_free[small]);
        p->n_dyn_free--;
        p->dyn_free[small] = p->dyn_free[p->n_dyn_free];
        p->dyn_free_cap[small] = p->dyn_free_cap[p->n_dyn_free];
    }
    p->dyn_free[p->n_dyn_free] = p->vals[v].data;
    p->dyn_free_cap[p->n_dyn_free++] = p->dyn_cap[v];
    p->vals[v].data = NULL;
    p->dyn_cap[v] = 0;
}

/* After step i: the buffers of dynamic values it read last (or made for no reader) are free
 * for the dynamic outputs after it; graph outputs keep theirs until the next run. */
static void dyn_release_dead(ptq_plan *p, int i)
{
    const plan_step *s = &p->steps[i];
    for (int k = 0; k < n_reads(s); k++) {
        int v = s->in_vals[k];
        if (v >= 0 && p->is_dyn[v] && p->last_use[v] == i && !plan_is_graph_output(p, v)) dyn_release(p, v);
    }
    for (int o = 0; o < s->ctx.n_out; o++) {
        int v = s->out_vals[o];
        if (v >= 0 && p->is_dyn[v] && p->last_use[v] < 0 && !plan_is_graph_output(p, v)) dyn_release(p, v);
    }
}

/* A dynamic step before its run: inferred with its inputs as they are now (data included),
 * outputs given heap buffers (grown as needed, kept for the next run), scratch its own. */
static ptq_status dyn_prepare(ptq_plan *p, plan_step *s)
{
    ptq_status st = PTQ_OK;
    const ptq_node *node = &p->g->nodes[s->node];
    int n = n_reads(s);
    s->ctx.run_time = 1;
    if (s->def->flags & (PTQ_OP_DYNAMIC | PTQ_OP_CONTROL)) {
        TRY(plan_step_infer(p, s)); /* every input's data, every time */
    } else {
        /* An op whose shapes follow from its inputs' shapes (and small inputs' values): inferred
         * again only when those changed. Like at plan time, its infer sees the data of plan
         * constants and of small inputs only, never of a large activation (which it would
         * take for a constant and, say, pack). */
        int same = s->sig_valid;
        if (!s->sig) CHECK_ALLOC(s->sig = calloc((size_t)n + 1, sizeof *s->sig));
        for (int i = 0; i < n && same; i++) {
            const dyn_sig *g = &s->sig[i];
            const ptq_tensor *t = s->in_vals[i] >= 0 ? &p->vals[s->in_vals[i]] : NULL;
            if (!t) continue;
            same = g->dtype == t->dtype && g->rank == t->rank && memcmp(g->dims, t->dims, sizeof(int64_t) * (size_t)t->rank) == 0 &&
                   (g->n == 0 || memcmp(g->bytes, t->data, g->n) == 0);
        }
        if (!same) {
            void *hidden[PTQ_MAX_RANK * 8];
            int n_hide = n < PTQ_MAX_RANK * 8 ? n : PTQ_MAX_RANK * 8;
            for (int i = 0; i < n_hide; i++) {
                int v = s->in_vals[i];
                hidden[i] = NULL;
                if (v < 0 || p->is_const[v] || ptq_tensor_nbytes(&p->vals[v]) <= DYN_SMALL_BYTES) continue;
                hidden[i] = p->vals[v].data;
                p->vals[v].data = NULL;
            }
            s->sig_valid = 0;
            st = plan_step_infer(p, s);
            for (int i = 0; i < n_hide; i++)
                if (hidden[i]) p->vals[s->in_vals[i]].data = hidden[i];
            if (st != PTQ_OK) goto done;
            for (int i = 0; i < n; i++) {
                dyn_sig *g = &s->sig[i];
                const ptq_tensor *t = s->in_vals[i] >= 0 ? &p->vals[s->in_vals[i]] : NULL;
                memset(g, 0, sizeof *g);
                if (!t) continue;
                g->dtype = t->dtype;
                g->rank = t->rank;
                memcpy(g->dims, t->dims, sizeof g->dims);
                size_t nb = ptq_tensor_nbytes(t);
                if (!p->is_const[s->in_vals[i]] && nb <= DYN_SMALL_BYTES && t->data) {
                    g->n = nb;
                    memcpy(g->bytes, t->data, nb);
                }
            }
            s->sig_valid = n <= PTQ_MAX_RANK * 8;
        }
    }
    if (s->ctx.dynamic)
        FAIL(PTQ_ERR_INTERNAL, "%s '%s': output shape still unknown with every input known", node->op_type, node->name);
    for (int o = 0; o < s->ctx.n_out; o++) {
        int v = s->out_vals[o];
        if (v < 0) continue;
        size_t need = ptq_tensor_nbytes(&p->vals[v]);
        if (need > p->dyn_cap[v] || !p->vals[v].data) {
            if (p->opt.max_arena_bytes && need > p->opt.max_arena_bytes)
                FAIL(PTQ_ERR_NOMEM, "%s '%s': output %d needs %.1f MiB, over the limit of %.1f MiB", node->op_type,
                     node->name, o, (double)need / 1048576.0, (double)p->opt.max_arena_bytes / 1048576.0);
            dyn_release(p, v); /* too small (or a graph output's from the last run) */
            int best = -1;     /* the smallest free buffer that fits */
            for (int k = 0; k < p->n_dyn_free; k++)
                if (p->dyn_free_cap[k] >= need && (best < 0 || p->dyn_free_cap[k] < p->dyn_free_cap[best])) best = k;
            if (best >= 0) {
                p->vals[v].data = p->dyn_free[best];
                p->dyn_cap[v] = p->dyn_free_cap[best];
                p->n_dyn_free--;
                p->dyn_free[best] = p->dyn_free[p->n_dyn_free];
                p->dyn_free_cap[best] = p->dyn_free_cap[p->n_dyn_free];
            } else {
                size_t cap = need > 64 ? need + need / 4 : 64;
                CHECK_ALLOC(p->vals[v].data = ptq_aligned_alloc(cap));
                p->dyn_cap[v] = cap;
            }
        }
        p->vals[v].owns_data = 0;
    }
    if (s->ctx.scratch_bytes > s->dyn_scratch_cap) {
        ptq_aligned_free(s->dyn_scratch);
        s->dyn_scratch_cap = 0;
        CHECK_ALLOC(s->dyn_scratch = ptq_aligned_alloc(s->ctx.scratch_bytes));
        s->dyn_scratch_cap = s->ctx.scratch_bytes;
    }
    s->ctx.scratch = s->ctx.scratch_bytes ? s->dyn_scratch : NULL;
done:
    return st;
}

/* The profile's clock in seconds: wall-clock, or with PTQ_PROFILE=cpu the process's CPU time
 * (all threads' together: at one thread, the node's own work, whatever else the machine runs). */
static double prof_now(const ptq_plan *p)
{
    if (!p->prof_cpu) return omp_get_wtime();
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

ptq_status ptq_plan_step(ptq_plan *p, int *finished)
{
    ptq_status st = PTQ_OK;
    while (p->next_step < p->n_steps && p->steps[p->next_step].skip) p->next_step++;
    *finished = p->next_step >= p->n_steps;
    if (*finished) return PTQ_OK;
    int i = p->next_step++;
    plan_step *s = &p->steps[i];
    double t0 = p->prof_ms ? prof_now(p) : 0;
    st = s->dyn ? dyn_prepare(p, s) : PTQ_OK;
    if (st == PTQ_OK) st = s->def->run(&s->ctx);
    if (st == PTQ_OK && s->round_f16) /* fuse_f16_rounding */
        ptq_round_f16(s->ctx.out[0]->data, s->ctx.out[0]->data, ptq_tensor_numel(s->ctx.out[0]), s->ctx.nthreads);
    if (p->prof_ms) p->prof_ms[i] += (prof_now(p) - t0) * 1e3;
    if (st != PTQ_OK) {
        p->next_step = p->n_steps;
        name_node_in_error(&p->g->nodes[s->node]);
        return st;
    }
    if (p->opt.observer) {
        t0 = p->prof_ms ? prof_now(p) : 0;
        for (int o = 0; o < s->ctx.n_out; o++)
            if (s->out_vals[o] >= 0) TRY(observe(p, s->out_vals[o]));
        if (p->prof_ms) p->prof_obs_ms += (prof_now(p) - t0) * 1e3;
    }
    if (p->n_dyn) dyn_release_dead(p, i);
done:
    if (st != PTQ_OK) p->next_step = p->n_steps;
    return st;
}

ptq_status ptq_plan_run(ptq_plan *p, const ptq_tensor *inputs, int n_inputs)
{
    ptq_status st = ptq_plan_begin(p, inputs, n_inputs);
    for (int finished = 0; st == PTQ_OK && !finished;) st = ptq_plan_step(p, &finished);
    return st;
}

int ptq_plan_n_dynamic(const ptq_plan *p)
{
    return p->n_dyn;
}

int ptq_plan_n_inputs(const ptq_plan *p)
{
    return p->n_inputs;
}

const ptq_tensor *ptq_plan_input(const ptq_plan *p, int i, const char **name)
{
    if (i < 0 || i >= p->n_inputs) return NULL;
    if (name) *name = p->g->values[p->input_vals[i]].name;
    return &p->vals[p->input_vals[i]];
}

int ptq_plan_n_outputs(const ptq_plan *p)
{
    return p->n_outputs;
}

const ptq_tensor *ptq_plan_output(const ptq_plan *p, int i, const char **name)
{
    if (i < 0 || i >= p->n_outputs) return NULL;
    if (name) *name = p->g->values[p->output_vals[i]].name;
    return &p->vals[p->output_vals[i]];
}

const ptq_tensor *ptq_plan_value(const ptq_plan *p, int v)
{
    if (v < 0 || v >= p->g->n_values) return NULL;
    if (ptq_dtype_size(p->vals[v].dtype) == 0) return NULL;
    return &p->vals[v];
}

size_t ptq_plan_arena_bytes(const ptq_plan *p)
{
    return p->arena_bytes;
}

size_t ptq_plan_scratch_bytes(const ptq_plan *p)
{
    return p->scratch_bytes;
}

double ptq_plan_flops(const ptq_plan *p)
{
    return p->flops;
}
