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
#include "plan.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "runtime/kernels/sgemm.h"

/* What a dynamic step's infer depended on, per input: dtype and shape, and for a small input
 * that is not a plan constant its bytes (shape, axes, repeats, counts...). */
#define DYN_SMALL_BYTES 1024
typedef struct {
    ptq_dtype dtype;
    int rank;
    int64_t dims[PTQ_MAX_RANK];
    size_t n;                 /* bytes kept (small inputs), else 0 */
    uint8_t bytes[DYN_SMALL_BYTES];
} dyn_sig;

typedef struct {
    int node;                 /* graph node index */
    const ptq_op_def *def;
    ptq_op_ctx ctx;
    const ptq_tensor **in;    /* ctx.in */
    ptq_tensor **out;         /* ctx.out */
    void **kept;              /* the outputs' buffers across an infer (step_infer) */
    int *in_vals, *out_vals;  /* value indices (plan numbering), -1 = omitted */
    int skip;                 /* folded at plan time or fused into another step */
    int has_state;
    int dyn;                  /* dynamic part: inferred at run time, outputs on the heap */
    int n_outer;              /* control ops: in[n_in ..) / in_vals[n_in ..) are the values of this
                                 graph its subgraphs read (implicit inputs) */
    const char **outer_names;
    unsigned char *in_const;  /* n_in + n_outer flags for ctx.in_const */
    void *dyn_scratch;        /* a dynamic step's own scratch */
    size_t dyn_scratch_cap;
    dyn_sig *sig;             /* a dynamic step's inputs as its last infer saw them (n_reads) */
    int sig_valid;
} plan_step;

struct ptq_plan {
    const ptq_graph *g;
    int nthreads;
    ptq_plan_options opt;
    int n_vals, cap_vals;     /* graph values + constants the planner makes (fused weights) */
    ptq_tensor *vals;
    uint8_t *is_const;        /* data known at plan time */
    uint8_t *owned;           /* plan owns vals[v].data (folded or fused constants) */
    int *last_use;            /* step index of the last reader, -1 none */
    int *input_vals, n_inputs;
    int *output_vals, n_outputs;
    plan_step *steps;
    int n_steps;
    uint8_t *arena;
    size_t arena_bytes, arena_cap; /* what the plan uses, what the arena holds */
    size_t *offsets;          /* each arena value's offset (opt.bound_memory: kept for binding) */
    void *scratch;
    size_t scratch_bytes;
    double flops;
    double *prof_ms;          /* per step, when PTQ_PROFILE is set */
    double prof_obs_ms;       /* in observer calls */
    int next_step;            /* ptq_plan_step's position; n_steps when idle */
    uint8_t *is_dyn;          /* value made by a dynamic step (shape known at run time only) */
    size_t *dyn_cap;          /* bytes of a dynamic value's heap buffer (vals[v].data), 0: none */
    int n_dyn;                /* dynamic steps */
    void **dyn_free;          /* heap buffers of dynamic values that died in this run, for the */
    size_t *dyn_free_cap;     /* dynamic outputs still to come (and the next runs) */
    int n_dyn_free;
    uint8_t **in_u8;          /* per input: float32 pixels converted for a uint8 input (ptq_plan_begin) */
    size_t *in_u8_cap;
};

/* Values a step reads: its inputs, then (control ops) the outer values its subgraphs read. */
static int n_reads(const plan_step *s)
{
    return s->ctx.n_in + s->n_outer;
}

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
static ptq_status add_const(ptq_plan *p, const ptq_tensor *shape, int *out)
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

static ptq_status step_infer(ptq_plan *p, plan_step *s)
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

/* Number of live steps reading value v, and the one reader if exactly one. */
static int consumers(const ptq_plan *p, int v, int *only)
{
    int count = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->skip) continue;
        for (int k = 0; k < n_reads(s); k++)
            if (s->in_vals[k] == v) {
                count++;
                *only = i;
                if (s->dyn) count += 1000; /* never fused into a dynamic step */
            }
    }
    return count;
}

static int is_graph_output(const ptq_plan *p, int v)
{
    for (int i = 0; i < p->n_outputs; i++)
        if (p->output_vals[i] == v) return 1;
    return 0;
}

/* The observer sees v: a float tensor of the graph (not a constant the planner made)
 * that the filter, if any, accepts. */
static int observes(const ptq_plan *p, int v)
{
    if (!p->opt.observer || v < 0 || v >= p->g->n_values || p->vals[v].dtype != PTQ_F32) return 0;
    return !p->opt.observe_filter || p->opt.observe_filter(p->g->values[v].name, p->opt.observer_user);
}

/* A tensor fusion must keep: a graph output or an observed tensor. */
static int pinned(const ptq_plan *p, int v)
{
    return is_graph_output(p, v) || observes(p, v);
}

static int op_is(const ptq_plan *p, const plan_step *s, const char *type)
{
    return strcmp(p->g->nodes[s->node].op_type, type) == 0;
}

/* Points a conv step at weight value w and bias value b (adding the bias slot if absent). */
static ptq_status set_conv_weights(ptq_plan *p, plan_step *conv, int w, int b)
{
    ptq_status st = PTQ_OK;
    if (conv->ctx.n_in < 3) {
        int *iv = realloc(conv->in_vals, sizeof(int) * 3);
        if (iv) conv->in_vals = iv;
        CHECK_ALLOC(iv);
        const ptq_tensor **ip = realloc(conv->in, sizeof *ip * 3);
        if (ip) conv->in = ip;
        CHECK_ALLOC(ip);
        conv->ctx.in = conv->in;
        conv->ctx.n_in = 3;
    }
    conv->in_vals[1] = w;
    conv->in_vals[2] = b;
    conv->in[1] = &p->vals[w];
    conv->in[2] = &p->vals[b];
done:
    return st;
}

/* Conv -> BatchNormalization: W' = W * a[c], B' = (B - mean) * a[c] + beta, a = scale / sqrt(var + eps). */
static ptq_status fuse_batchnorm(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *conv = &p->steps[i];
        if (conv->skip || conv->dyn || !op_is(p, conv, "Conv") || conv->ctx.n_out != 1) continue;
        int y = conv->out_vals[0], j = -1;
        if (y < 0 || pinned(p, y) || consumers(p, y, &j) != 1) continue;
        plan_step *bn = &p->steps[j];
        if (!op_is(p, bn, "BatchNormalization") || bn->ctx.n_in != 5 || bn->in_vals[0] != y) continue;
        int ok = p->is_const[conv->in_vals[1]] && (conv->ctx.n_in < 3 || p->is_const[conv->in_vals[2]]);
        for (int k = 1; k < 5; k++) ok = ok && p->is_const[bn->in_vals[k]] && p->vals[bn->in_vals[k]].dtype == PTQ_F32;
        if (!ok || p->vals[conv->in_vals[1]].dtype != PTQ_F32) continue;
        if (bn->ctx.n_out > 1) {
            int extra = 0;
            for (int o = 1; o < bn->ctx.n_out; o++) extra |= bn->out_vals[o] >= 0;
            if (extra) continue;
        }
        const ptq_tensor *w = &p->vals[conv->in_vals[1]];
        int64_t cout = w->dims[0];
        const ptq_tensor *scale = &p->vals[bn->in_vals[1]], *beta = &p->vals[bn->in_vals[2]];
        const ptq_tensor *mean = &p->vals[bn->in_vals[3]], *var = &p->vals[bn->in_vals[4]];
        if ((int64_t)ptq_tensor_numel(scale) != cout || (int64_t)ptq_tensor_numel(beta) != cout ||
            (int64_t)ptq_tensor_numel(mean) != cout || (int64_t)ptq_tensor_numel(var) != cout)
            continue;
        float eps = ptq_attr_float(&p->g->nodes[bn->node], "epsilon", 1e-5f);
        int wv, bv;
        ptq_tensor bshape = {0};
        bshape.dtype = PTQ_F32;
        bshape.rank = 1;
        bshape.dims[0] = cout;
        TRY(add_const(p, w, &wv));
        TRY(add_const(p, &bshape, &bv));
        w = &p->vals[conv->in_vals[1]]; /* vals did not move (fixed capacity) */
        const float *src = w->data, *b0 = conv->ctx.n_in >= 3 ? p->vals[conv->in_vals[2]].data : NULL;
        float *dw = p->vals[wv].data, *db = p->vals[bv].data;
        size_t per = ptq_tensor_numel(w) / (size_t)cout;
        for (int64_t c = 0; c < cout; c++) {
            float a = ((const float *)scale->data)[c] / sqrtf(((const float *)var->data)[c] + eps);
            for (size_t k = 0; k < per; k++) dw[(size_t)c * per + k] = src[(size_t)c * per + k] * a;
            float b = b0 ? b0[c] : 0.0f;
            db[c] = (b - ((const float *)mean->data)[c]) * a + ((const float *)beta->data)[c];
        }
        /* rewire: conv reads W', B' and writes BN's output; BN disappears */
        TRY(set_conv_weights(p, conv, wv, bv));
        conv->out_vals[0] = bn->out_vals[0];
        conv->out[0] = &p->vals[bn->out_vals[0]];
        bn->skip = 1;
        TRY(step_infer(p, conv));
    }
done:
    return st;
}

/* The activation a step computes, if it is one that kernels can fuse. */
static int activation_of(const ptq_plan *p, const plan_step *s, ptq_activation *act)
{
    const ptq_node *node = &p->g->nodes[s->node];
    memset(act, 0, sizeof *act);
    if (s->ctx.n_out != 1 || p->vals[s->in_vals[0]].dtype != PTQ_F32) return 0;
    if (strcmp(node->op_type, "Relu") == 0) {
        act->kind = PTQ_ACT_RELU;
    } else if (strcmp(node->op_type, "LeakyRelu") == 0) {
        act->kind = PTQ_ACT_LEAKY_RELU;
        act->alpha = ptq_attr_float(node, "alpha", 0.01f);
    } else if (strcmp(node->op_type, "Sigmoid") == 0) {
        act->kind = PTQ_ACT_SIGMOID;
    } else if (strcmp(node->op_type, "HardSigmoid") == 0) {
        act->kind = PTQ_ACT_HARD_SIGMOID;
        act->alpha = ptq_attr_float(node, "alpha", 0.2f);
        act->beta = ptq_attr_float(node, "beta", 0.5f);
    } else if (strcmp(node->op_type, "HardSwish") == 0) {
        act->kind = PTQ_ACT_HARD_SWISH;
    } else if (strcmp(node->op_type, "Clip") == 0) {
        act->kind = PTQ_ACT_CLIP;
        act->alpha = -INFINITY;
        act->beta = INFINITY;
        if (s->ctx.opset < 11) {
            act->alpha = ptq_attr_float(node, "min", -INFINITY);
            act->beta = ptq_attr_float(node, "max", INFINITY);
        } else {
            for (int k = 1; k < s->ctx.n_in; k++) {
                int v = s->in_vals[k];
                if (v < 0) continue;
                if (!p->is_const[v] || p->vals[v].dtype != PTQ_F32 || ptq_tensor_numel(&p->vals[v]) != 1) return 0;
                float x = *(const float *)p->vals[v].data;
                if (k == 1) act->alpha = x;
                else act->beta = x;
            }
        }
    } else {
        return 0;
    }
    return 1;
}

static ptq_status fuse_activations(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s = &p->steps[i];
        if (s->skip || s->dyn || !(s->def->flags & PTQ_OP_FUSE_ACT) || s->ctx.act.kind != PTQ_ACT_NONE) continue;
        int y = s->out_vals[0], j = -1;
        if (y < 0 || p->vals[y].dtype != PTQ_F32 || pinned(p, y) || consumers(p, y, &j) != 1) continue;
        plan_step *a = &p->steps[j];
        ptq_activation act;
        if (a->in_vals[0] != y || !activation_of(p, a, &act)) continue;
        s->ctx.act = act;
        s->out_vals[0] = a->out_vals[0];
        s->out[0] = &p->vals[a->out_vals[0]];
        a->skip = 1;
        TRY(step_infer(p, s));
        s->ctx.act = act; /* infer must not reset it, but be sure */
    }
done:
    return st;
}

/* The live step producing value v, or -1. */
static int producer_step(const ptq_plan *p, int v)
{
    for (int i = 0; i < p->n_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->skip) continue;
        for (int o = 0; o < s->ctx.n_out; o++)
            if (s->out_vals[o] == v) return i;
    }
    return -1;
}

/* A constant float32 usable as a per-channel factor of a [N, C, ...] conv output:
 * one value (per_channel 0) or C values laid out as [C,1,1] / [1,C,1,1]. */
static int channel_const(const ptq_plan *p, int v, int64_t cout, int out_rank, const float **vals, int *per_channel)
{
    if (v < 0 || !p->is_const[v] || p->vals[v].dtype != PTQ_F32) return 0;
    const ptq_tensor *t = &p->vals[v];
    size_t n = ptq_tensor_numel(t);
    *vals = t->data;
    if (n == 1 && t->rank <= out_rank) {
        *per_channel = 0;
        return 1;
    }
    if ((int64_t)n != cout || t->rank > out_rank || t->rank < out_rank - 1) return 0;
    int c_axis = t->rank - (out_rank - 1); /* position of C in t when right-aligned */
    for (int d = 0; d < t->rank; d++)
        if (d != c_axis && t->dims[d] != 1) return 0;
    *per_channel = 1;
    return 1;
}

/* The step reading conv's output y when it is y (op) constant with Mul, Add, Sub or Div (y
 * first for Sub and Div), the constant one value or one per channel that does not broadcast
 * y: its index, with *kind, *k and *per_channel; else -1. */
static int channel_affine_consumer(const ptq_plan *p, int y, int64_t cout, ptq_chan_kind *kind, const float **k,
                                   int *per_channel)
{
    int j = -1;
    if (y < 0 || pinned(p, y) || consumers(p, y, &j) != 1) return -1;
    const plan_step *c = &p->steps[j];
    int is_mul = op_is(p, c, "Mul"), is_add = op_is(p, c, "Add"), is_sub = op_is(p, c, "Sub"), is_div = op_is(p, c, "Div");
    if (!(is_mul || is_add || is_sub || is_div) || c->ctx.n_in != 2 || c->ctx.n_out != 1) return -1;
    if (c->in_vals[0] == y && c->in_vals[1] == y) return -1;
    if ((is_sub || is_div) && c->in_vals[0] != y) return -1;
    int other = c->in_vals[0] == y ? c->in_vals[1] : c->in_vals[0];
    if (!channel_const(p, other, cout, p->vals[y].rank, k, per_channel)) return -1;
    if (!ptq_shape_equal(&p->vals[c->out_vals[0]], &p->vals[y])) return -1; /* the constant must not broadcast y */
    *kind = is_mul ? PTQ_CHAN_MUL : is_add ? PTQ_CHAN_ADD : is_sub ? PTQ_CHAN_SUB : PTQ_CHAN_DIV;
    return j;
}

/* conv now writes what step c wrote; c is skipped. */
static void absorb_step(ptq_plan *p, plan_step *conv, plan_step *c)
{
    conv->out_vals[0] = c->out_vals[0];
    conv->out[0] = &p->vals[c->out_vals[0]];
    c->skip = 1;
}

/* Conv followed by Mul, Add, Sub or Div with a constant (scalar or per channel):
 * folded into the conv's weights and bias, repeatedly (learnable affine blocks). */
static ptq_status fold_affine(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *conv = &p->steps[i];
        if (conv->skip || conv->dyn || !op_is(p, conv, "Conv") || conv->ctx.n_out != 1 || conv->ctx.act.kind != PTQ_ACT_NONE) continue;
        int wv = conv->in_vals[1];
        if (!p->is_const[wv] || p->vals[wv].dtype != PTQ_F32) continue;
        if (conv->ctx.n_in > 2 && conv->in_vals[2] >= 0 && (!p->is_const[conv->in_vals[2]] || p->vals[conv->in_vals[2]].dtype != PTQ_F32))
            continue;
        int64_t cout = p->vals[wv].dims[0];
        int copied = 0, changed = 0;
        for (;;) {
            ptq_chan_kind kind;
            const float *k;
            int per_channel;
            int j = channel_affine_consumer(p, conv->out_vals[0], cout, &kind, &k, &per_channel);
            if (j < 0) break;
            plan_step *c = &p->steps[j];
            int is_mul = kind == PTQ_CHAN_MUL, is_add = kind == PTQ_CHAN_ADD, is_div = kind == PTQ_CHAN_DIV;
            if (!copied) { /* private copies of W and B before changing them */
                ptq_tensor bshape = {0};
                int nw, nb;
                bshape.dtype = PTQ_F32;
                bshape.rank = 1;
                bshape.dims[0] = cout;
                TRY(add_const(p, &p->vals[conv->in_vals[1]], &nw));
                memcpy(p->vals[nw].data, p->vals[conv->in_vals[1]].data, ptq_tensor_nbytes(&p->vals[nw]));
                TRY(add_const(p, &bshape, &nb));
                if (conv->ctx.n_in > 2 && conv->in_vals[2] >= 0)
                    memcpy(p->vals[nb].data, p->vals[conv->in_vals[2]].data, sizeof(float) * (size_t)cout);
                TRY(set_conv_weights(p, conv, nw, nb));
                copied = 1;
            }
            float *w = p->vals[conv->in_vals[1]].data, *b = p->vals[conv->in_vals[2]].data;
            size_t per = ptq_tensor_numel(&p->vals[conv->in_vals[1]]) / (size_t)cout;
            for (int64_t ch = 0; ch < cout; ch++) {
                float a = k[per_channel ? ch : 0];
                if (is_mul || is_div) {
                    for (size_t q = 0; q < per; q++) w[(size_t)ch * per + q] = is_mul ? w[(size_t)ch * per + q] * a : w[(size_t)ch * per + q] / a;
                    b[ch] = is_mul ? b[ch] * a : b[ch] / a;
                } else {
                    b[ch] = is_add ? b[ch] + a : b[ch] - a;
                }
            }
            absorb_step(p, conv, c);
            changed = 1;
        }
        if (changed) TRY(step_infer(p, conv));
    }
done:
    return st;
}

/* keep_values plans: a Conv's single-use output followed by BatchNormalization or by Mul,
 * Add, Sub or Div with a constant (scalar or per channel) becomes steps of the conv's
 * epilogue (op.h: ptq_chan_op), each computed as the op computes it, so every value that
 * remains is bit for bit the unfused model's; the activation after them can then fuse too. */
static ptq_status fuse_channel_ops(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *conv = &p->steps[i];
        if (conv->skip || conv->dyn || !op_is(p, conv, "Conv") || conv->ctx.n_out != 1 || conv->ctx.act.kind != PTQ_ACT_NONE ||
            conv->ctx.act.has_post || conv->out_vals[0] < 0)
            continue;
        const ptq_tensor *y0 = &p->vals[conv->out_vals[0]];
        if (y0->dtype != PTQ_F32 || y0->rank < 2) continue;
        int64_t cout = y0->dims[1];
        int changed = 0;
        while (conv->ctx.n_chan + 2 <= PTQ_MAX_CHAN_OPS) {
            int y = conv->out_vals[0], j = -1;
            if (pinned(p, y) || consumers(p, y, &j) != 1) break;
            plan_step *c = &p->steps[j];
            if (c->in_vals[0] != y && !(c->ctx.n_in == 2 && c->in_vals[1] == y)) break;
            if (op_is(p, c, "BatchNormalization")) {
                if (c->ctx.n_in != 5 || c->in_vals[0] != y) break;
                int ok = 1, extra = 0;
                for (int k = 1; k < 5; k++)
                    ok = ok && c->in_vals[k] >= 0 && p->is_const[c->in_vals[k]] && p->vals[c->in_vals[k]].dtype == PTQ_F32 &&
                         (int64_t)ptq_tensor_numel(&p->vals[c->in_vals[k]]) == cout;
                for (int o = 1; o < c->ctx.n_out; o++) extra |= c->out_vals[o] >= 0;
                if (!ok || extra || !ptq_shape_equal(&p->vals[c->out_vals[0]], &p->vals[y])) break;
                ptq_tensor shape = {0};
                int av, bv;
                shape.dtype = PTQ_F32;
                shape.rank = 1;
                shape.dims[0] = cout;
                TRY(add_const(p, &shape, &av));
                TRY(add_const(p, &shape, &bv));
                ptq_bn_coefficients(p->vals[c->in_vals[1]].data, p->vals[c->in_vals[2]].data, p->vals[c->in_vals[3]].data,
                                    p->vals[c->in_vals[4]].data, ptq_attr_float(&p->g->nodes[c->node], "epsilon", 1e-5f),
                                    cout, p->vals[av].data, p->vals[bv].data);
                conv->ctx.chan[conv->ctx.n_chan++] = (ptq_chan_op){PTQ_CHAN_MUL, 1, p->vals[av].data};
                conv->ctx.chan[conv->ctx.n_chan++] = (ptq_chan_op){PTQ_CHAN_ADD, 1, p->vals[bv].data};
            } else {
                ptq_chan_kind kind;
                const float *k;
                int per_channel;
                if (channel_affine_consumer(p, y, cout, &kind, &k, &per_channel) != j) break;
                conv->ctx.chan[conv->ctx.n_chan++] = (ptq_chan_op){kind, per_channel, k};
            }
            absorb_step(p, conv, c);
            changed = 1;
        }
        if (changed) TRY(step_infer(p, conv));
    }
done:
    return st;
}

static int scalar_const_is(const ptq_plan *p, int v, float want)
{
    return v >= 0 && p->is_const[v] && p->vals[v].dtype == PTQ_F32 && ptq_tensor_numel(&p->vals[v]) == 1 &&
           *(const float *)p->vals[v].data == want;
}

/* x * Clip(x + 3, 0, 6) / 6 (how paddle2onnx writes hard-swish) after a kernel that can
 * fuse an activation: becomes that kernel's epilogue, bit for bit. */
static ptq_status fuse_hardswish_pattern(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *d = &p->steps[i];
        if (d->skip || d->dyn || !op_is(p, d, "Div") || d->ctx.n_in != 2 || !scalar_const_is(p, d->in_vals[1], 6.0f)) continue;
        int m = d->in_vals[0], jm = producer_step(p, m), dummy;
        if (jm < 0 || consumers(p, m, &dummy) != 1) continue;
        plan_step *mul = &p->steps[jm];
        if (!op_is(p, mul, "Mul") || mul->ctx.n_in != 2) continue;
        for (int side = 0; side < 2; side++) {
            int x = mul->in_vals[side], cv = mul->in_vals[1 - side], jc = producer_step(p, cv);
            if (jc < 0 || consumers(p, cv, &dummy) != 1) continue;
            plan_step *clip = &p->steps[jc];
            ptq_activation ca;
            if (!op_is(p, clip, "Clip") || !activation_of(p, clip, &ca) || ca.alpha != 0.0f || ca.beta != 6.0f) continue;
            int t = clip->in_vals[0], ja = producer_step(p, t);
            if (ja < 0 || consumers(p, t, &dummy) != 1) continue;
            plan_step *add = &p->steps[ja];
            if (!op_is(p, add, "Add") || add->ctx.n_in != 2) continue;
            int three = add->in_vals[0] == x ? add->in_vals[1] : (add->in_vals[1] == x ? add->in_vals[0] : -1);
            if (!scalar_const_is(p, three, 3.0f)) continue;
            int jx = producer_step(p, x);
            if (jx < 0 || pinned(p, x) || pinned(p, t) || pinned(p, cv) || pinned(p, m) || consumers(p, x, &dummy) != 2)
                continue;
            plan_step *prod = &p->steps[jx];
            if (!(prod->def->flags & PTQ_OP_FUSE_ACT) || prod->ctx.act.kind != PTQ_ACT_NONE || prod->ctx.act.has_post ||
                prod->out_vals[0] != x || p->vals[x].dtype != PTQ_F32 || !ptq_shape_equal(&p->vals[x], &p->vals[d->out_vals[0]]))
                continue;
            prod->out_vals[0] = d->out_vals[0];
            prod->out[0] = &p->vals[d->out_vals[0]];
            add->skip = clip->skip = mul->skip = d->skip = 1;
            TRY(step_infer(p, prod));
            prod->ctx.act.kind = PTQ_ACT_HARD_SWISH_DIV6;
            break;
        }
    }
done:
    return st;
}

/* A scalar Mul (and an optional scalar Add) after a fused activation: applied in the
 * same epilogue, in the same order, so the result is unchanged. */
static ptq_status fuse_post_affine(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s = &p->steps[i];
        if (s->skip || s->dyn || !(s->def->flags & PTQ_OP_FUSE_ACT) || s->ctx.act.kind == PTQ_ACT_NONE || s->ctx.act.has_post) continue;
        int y = s->out_vals[0], j = -1;
        if (y < 0 || pinned(p, y) || consumers(p, y, &j) != 1) continue;
        plan_step *mul = &p->steps[j];
        if (!op_is(p, mul, "Mul") || mul->ctx.n_in != 2) continue;
        int kv = mul->in_vals[0] == y ? mul->in_vals[1] : mul->in_vals[0];
        if (kv < 0 || !p->is_const[kv] || p->vals[kv].dtype != PTQ_F32 || ptq_tensor_numel(&p->vals[kv]) != 1 ||
            !ptq_shape_equal(&p->vals[mul->out_vals[0]], &p->vals[y]))
            continue;
        int z = mul->out_vals[0], ja = -1;
        plan_step *add = NULL;
        if (!pinned(p, z) && consumers(p, z, &ja) == 1) {
            plan_step *c = &p->steps[ja];
            int bv = c->ctx.n_in == 2 ? (c->in_vals[0] == z ? c->in_vals[1] : c->in_vals[0]) : -1;
            if (op_is(p, c, "Add") && bv >= 0 && p->is_const[bv] && p->vals[bv].dtype == PTQ_F32 &&
                ptq_tensor_numel(&p->vals[bv]) == 1 && ptq_shape_equal(&p->vals[c->out_vals[0]], &p->vals[z]))
                add = c;
        }
        ptq_activation act = s->ctx.act;
        act.has_post = 1;
        act.post_mul = *(const float *)p->vals[kv].data;
        act.post_add = 0.0f;
        if (add) {
            int bv = add->in_vals[0] == z ? add->in_vals[1] : add->in_vals[0];
            act.post_add = *(const float *)p->vals[bv].data;
        }
        plan_step *last = add ? add : mul;
        s->out_vals[0] = last->out_vals[0];
        s->out[0] = &p->vals[last->out_vals[0]];
        mul->skip = 1;
        if (add) add->skip = 1;
        TRY(step_infer(p, s));
        s->ctx.act = act;
    }
done:
    return st;
}

/* Constant inputs a and b of two steps (-1: absent) hold the same values. */
static int same_const(const ptq_plan *p, int a, int b)
{
    if (a < 0 || b < 0) return a == b;
    const ptq_tensor *x = &p->vals[a], *y = &p->vals[b];
    return p->is_const[a] && p->is_const[b] && x->dtype == y->dtype && ptq_tensor_numel(x) == ptq_tensor_numel(y) &&
           memcmp(x->data, y->data, ptq_tensor_nbytes(x)) == 0;
}

static int64_t axis_attr(const ptq_plan *p, const plan_step *s)
{
    const ptq_attr *a = ptq_node_attr(&p->g->nodes[s->node], "axis");
    return a && a->type == PTQ_ATTR_INT ? a->i : 1;
}

/* QuantizeLinear of a float tensor read only by a DequantizeLinear with the same scale,
 * zero point and axis: one step that writes the DequantizeLinear's output, bit for bit
 * (ptq_op_quantize_dequantize), without the int8 tensor in between. */
static ptq_status fuse_qdq_pairs(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *q = &p->steps[i];
        if (q->skip || q->dyn || !op_is(p, q, "QuantizeLinear") || q->ctx.n_in < 2 || !q->ctx.in[0] || q->ctx.in[0]->dtype != PTQ_F32)
            continue;
        int y = q->out_vals[0], j = -1;
        if (y < 0 || is_graph_output(p, y) || consumers(p, y, &j) != 1) continue;
        plan_step *d = &p->steps[j];
        int qz = q->ctx.n_in > 2 ? q->in_vals[2] : -1, dz = d->ctx.n_in > 2 ? d->in_vals[2] : -1;
        if (!op_is(p, d, "DequantizeLinear") || d->in_vals[0] != y || d->ctx.n_in < 2 ||
            !same_const(p, q->in_vals[1], d->in_vals[1]) || !same_const(p, qz, dz) || q->in_vals[1] < 0 ||
            (ptq_tensor_numel(&p->vals[q->in_vals[1]]) > 1 && axis_attr(p, q) != axis_attr(p, d)))
            continue;
        q->def = &ptq_op_quantize_dequantize;
        q->out_vals[0] = d->out_vals[0];
        q->out[0] = &p->vals[d->out_vals[0]];
        d->skip = 1;
        TRY(step_infer(p, q));
    }
done:
    return st;
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
            int dead = !is_graph_output(p, v) && p->last_use[v] <= i;
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
            st = step_infer(p, s);
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
        if (!p->opt.keep_values) {
            TRY(fuse_batchnorm(p));
            TRY(fold_affine(p));
        } else {
            TRY(fuse_channel_ops(p));
        }
        TRY(fuse_activations(p));
        TRY(fuse_hardswish_pattern(p));
        TRY(fuse_post_affine(p));
        TRY(fuse_qdq_pairs(p));
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
        if (!s->skip && !s->dyn && p->opt.tile_sink && (s->def->flags & PTQ_OP_TILES) && s->ctx.n_out >= 1 && observes(p, s->out_vals[0]))
            s->ctx.sink = p->opt.tile_sink(g->values[s->out_vals[0]].name, s->node, p->opt.observer_user);
    }
    if (getenv("PTQ_PROFILE")) {
        p->prof_ms = calloc((size_t)p->n_steps + 1, sizeof *p->prof_ms);
        CHECK_ALLOC(p->prof_ms);
    }
    *out = p;
    p = NULL;
done:
    free(order);
    free(offsets);
    ptq_plan_destroy(p);
    return st;
}

/* PTQ_PROFILE=1: time per op type, printed to stderr when the plan is destroyed. */
static void print_profile(const ptq_plan *p)
{
    double total = 0;
    for (int i = 0; i < p->n_steps; i++) total += p->prof_ms[i];
    fprintf(stderr, "profile: %.1f ms in all, observers %.1f ms more\n", total, p->prof_obs_ms);
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
    if (!observes(p, v)) return PTQ_OK;
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
        if (v >= 0 && p->is_dyn[v] && p->last_use[v] == i && !is_graph_output(p, v)) dyn_release(p, v);
    }
    for (int o = 0; o < s->ctx.n_out; o++) {
        int v = s->out_vals[o];
        if (v >= 0 && p->is_dyn[v] && p->last_use[v] < 0 && !is_graph_output(p, v)) dyn_release(p, v);
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
        TRY(step_infer(p, s)); /* every input's data, every time */
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
            st = step_infer(p, s);
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

ptq_status ptq_plan_step(ptq_plan *p, int *finished)
{
    ptq_status st = PTQ_OK;
    while (p->next_step < p->n_steps && p->steps[p->next_step].skip) p->next_step++;
    *finished = p->next_step >= p->n_steps;
    if (*finished) return PTQ_OK;
    int i = p->next_step++;
    plan_step *s = &p->steps[i];
    double t0 = p->prof_ms ? omp_get_wtime() : 0;
    st = s->dyn ? dyn_prepare(p, s) : PTQ_OK;
    if (st == PTQ_OK) st = s->def->run(&s->ctx);
    if (p->prof_ms) p->prof_ms[i] += (omp_get_wtime() - t0) * 1e3;
    if (st != PTQ_OK) {
        p->next_step = p->n_steps;
        name_node_in_error(&p->g->nodes[s->node]);
        return st;
    }
    if (p->opt.observer) {
        t0 = p->prof_ms ? omp_get_wtime() : 0;
        for (int o = 0; o < s->ctx.n_out; o++)
            if (s->out_vals[o] >= 0) TRY(observe(p, s->out_vals[o]));
        if (p->prof_ms) p->prof_obs_ms += (omp_get_wtime() - t0) * 1e3;
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
