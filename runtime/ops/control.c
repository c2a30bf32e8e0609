/* control.c: ops with subgraphs (PTQ_OP_CONTROL, op.h): If, Loop, Scan.
 *
 * A subgraph runs as a plan of its own (plan.h), made by the op from the body graph that
 * io/onnx.c decoded (ptq_attr.graph). Its inputs are the body's formal inputs, then the
 * values of enclosing graphs it reads (kind OUTER): those that are constants of the
 * enclosing plan are bound with their data (and fold), the others are fed at every run.
 * The plan is kept in the op's state and made again only when an input's shape, dtype or
 * constness changes, so a loop whose carried values keep their shape plans its body once.
 * Observers see the body's tensors (every iteration), reported with the control node's
 * index. If with a condition known at plan time plans only that branch, and its outputs
 * are static when the branch's are; Loop and Scan run at run time only (their outputs are
 * dynamic: known once they ran; never folded, whatever the trip count). */
#include <stdlib.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/plan.h"
#include "runtime/shape.h"

/* ---- subgraph plans */

typedef struct {
    const ptq_plan_options *parent; /* the enclosing plan's options */
    int node_index;
} sub_observer;

typedef struct {
    ptq_dtype dtype;
    int rank;
    int64_t dims[PTQ_MAX_RANK];
    const void *const_data; /* bound as a constant: its data; else NULL */
} bind_sig;

typedef struct {
    const ptq_graph *body;
    const char *what;       /* attribute name, for messages */
    ptq_plan *plan;
    int n_bind;             /* body inputs (formal, then outer) */
    bind_sig *sig;
    sub_observer obs;
    int quiet;              /* made without the observer (folding) */
    int executed;           /* infer already ran it for this run's outputs */
} sub_plan;

static void sub_clear(sub_plan *sp)
{
    ptq_plan_destroy(sp->plan);
    free(sp->sig);
    sp->plan = NULL;
    sp->sig = NULL;
    sp->n_bind = 0;
}

static ptq_status sub_observe(const char *name, int node, const ptq_tensor *t, void *user)
{
    const sub_observer *o = user;
    (void)node;
    return o->parent->observer(name, o->node_index, t, o->parent->observer_user);
}

static int sub_filter(const char *name, void *user)
{
    const sub_observer *o = user;
    return !o->parent->observe_filter || o->parent->observe_filter(name, o->parent->observer_user);
}

/* The tensor bound to body value v (formal input i < n_formal, else an outer value), and
 * whether it is a constant of the enclosing plan. */
static ptq_status sub_source(const ptq_op_ctx *ctx, const sub_plan *sp, int v, const ptq_tensor *const *formal,
                             const int *formal_const, int n_formal, const ptq_tensor **t, int *is_const)
{
    const ptq_graph *b = sp->body;
    for (int i = 0; i < b->n_inputs && i < n_formal; i++)
        if (b->inputs[i] == v) {
            *t = formal[i];
            *is_const = formal_const ? formal_const[i] : 0;
            return PTQ_OK;
        }
    for (int k = 0; k < ctx->n_outer; k++)
        if (strcmp(ctx->outer_names[k], b->values[v].name) == 0) {
            *t = ctx->outer[k];
            *is_const = ctx->in_const ? ctx->in_const[ctx->n_in + k] : 0;
            return PTQ_OK;
        }
    OP_FAIL(ctx, PTQ_ERR_INTERNAL, "subgraph '%s': '%s' is bound to nothing", sp->what, b->values[v].name);
}

/* Makes (or keeps) the body's plan for these formal inputs and the outer values as they are. */
static ptq_status sub_prepare(ptq_op_ctx *ctx, sub_plan *sp, const ptq_tensor *const *formal, const int *formal_const,
                              int n_formal, int quiet)
{
    ptq_status st = PTQ_OK;
    const ptq_graph *b = sp->body;
    ptq_input_shape *shapes = NULL;
    bind_sig *sig = NULL;
    int n = 0;
    if (b->n_inputs != n_formal)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "subgraph '%s' has %d inputs, the op gives it %d", sp->what, b->n_inputs, n_formal);
    shapes = calloc((size_t)(b->n_inputs + b->n_values) + 1, sizeof *shapes);
    sig = calloc((size_t)(b->n_inputs + b->n_values) + 1, sizeof *sig);
    if (!shapes || !sig) {
        ptq_error("%s '%s': out of memory allocating the shapes of subgraph '%s'", ctx->node->op_type, ctx->node->name, sp->what);
        st = PTQ_ERR_NOMEM;
        goto done;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < (pass ? b->n_values : b->n_inputs); j++) {
            int v = pass ? j : b->inputs[j];
            if (pass && b->values[v].kind != PTQ_VALUE_OUTER) continue;
            if (!pass && b->values[v].kind == PTQ_VALUE_INITIALIZER) continue;
            const ptq_tensor *t;
            int is_const;
            if ((st = sub_source(ctx, sp, v, formal, formal_const, n_formal, &t, &is_const)) != PTQ_OK) goto done;
            if (!t) {
                ptq_error("%s '%s': subgraph '%s' input '%s' is missing", ctx->node->op_type, ctx->node->name, sp->what,
                          b->values[v].name);
                st = PTQ_ERR_FORMAT;
                goto done;
            }
            shapes[n].name = b->values[v].name;
            shapes[n].rank = t->rank;
            shapes[n].dtype = t->dtype;
            memcpy(shapes[n].dims, t->dims, sizeof t->dims);
            shapes[n].data = is_const ? t->data : NULL;
            sig[n].dtype = t->dtype;
            sig[n].rank = t->rank;
            memcpy(sig[n].dims, t->dims, sizeof t->dims);
            sig[n].const_data = shapes[n].data;
            n++;
        }
    if (sp->plan && sp->n_bind == n && sp->quiet == quiet && memcmp(sp->sig, sig, sizeof *sig * (size_t)n) == 0)
        goto done; /* the same plan serves */
    sub_clear(sp);
    ptq_plan_options opt = *(const ptq_plan_options *)ctx->plan_options;
    opt.nthreads = ctx->nthreads;
    opt.pool = NULL;
    opt.bound_memory = 0;
    opt.tile_sink = NULL;
    sp->obs.parent = ctx->plan_options;
    sp->obs.node_index = ctx->node_index;
    if (opt.observer && !quiet) {
        opt.observer = sub_observe;
        opt.observe_filter = sub_filter;
        opt.observer_user = &sp->obs;
    } else {
        opt.observer = NULL;
        opt.observe_filter = NULL;
    }
    st = ptq_plan_create(b, shapes, n, &opt, &sp->plan);
    if (st != PTQ_OK) {
        ptq_error_prefix("%s '%s' subgraph '%s': ", ctx->node->op_type, ctx->node->name, sp->what);
        goto done;
    }
    sp->quiet = quiet;
    sp->n_bind = n;
    sp->sig = sig;
    sig = NULL;
done:
    free(shapes);
    free(sig);
    return st;
}

/* 1 when every output of the body's plan has a shape known before it runs. */
static int sub_static(const sub_plan *sp)
{
    if (ptq_plan_n_dynamic(sp->plan) > 0) return 0; /* shapes that follow the data (an NMS inside) */
    for (int i = 0; i < ptq_plan_n_outputs(sp->plan); i++)
        if (ptq_dtype_size(ptq_plan_output(sp->plan, i, NULL)->dtype) == 0) return 0;
    return 1;
}

/* Runs the body's plan (made by sub_prepare with the same formal inputs). */
static ptq_status sub_run(const ptq_op_ctx *ctx, sub_plan *sp, const ptq_tensor *const *formal, int n_formal)
{
    ptq_status st = PTQ_OK;
    int n = ptq_plan_n_inputs(sp->plan);
    ptq_tensor *in = calloc((size_t)n + 1, sizeof *in);
    if (!in) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
    for (int i = 0; i < n; i++) {
        const char *name;
        ptq_plan_input(sp->plan, i, &name);
        int v = ptq_graph_find_value(sp->body, name), is_const;
        const ptq_tensor *t = NULL;
        if ((st = sub_source(ctx, sp, v, formal, NULL, n_formal, &t, &is_const)) != PTQ_OK) goto done;
        in[i] = *t;
        in[i].owns_data = 0;
    }
    st = ptq_plan_run(sp->plan, in, n);
    if (st != PTQ_OK) ptq_error_prefix("%s '%s' subgraph '%s': ", ctx->node->op_type, ctx->node->name, sp->what);
done:
    free(in);
    return st;
}

/* dst (owned) becomes a copy of src. */
static ptq_status tensor_set(ptq_tensor *dst, const ptq_tensor *src)
{
    ptq_tensor_free(dst);
    return ptq_tensor_copy(dst, src);
}

static void copy_out(ptq_tensor *dst, const ptq_tensor *src)
{
    size_t n = ptq_tensor_nbytes(src);
    if (n && dst->data != src->data) memcpy(dst->data, src->data, n);
}

static const ptq_graph *graph_attr(const ptq_op_ctx *ctx, const char *name)
{
    return ptq_attr_graph(ctx->node, name);
}

/* 1 when every input and outer value has data (run time, or all constant). */
static int all_data(const ptq_op_ctx *ctx)
{
    for (int i = 0; i < ctx->n_in; i++)
        if (ctx->in[i] && !ctx->in[i]->data && ptq_tensor_nbytes(ctx->in[i])) return 0;
    for (int k = 0; k < ctx->n_outer; k++)
        if (!ctx->outer[k]->data && ptq_tensor_nbytes(ctx->outer[k])) return 0;
    return 1;
}

/* 1 when every input and outer value is a constant of the enclosing plan. */
static int all_const(const ptq_op_ctx *ctx)
{
    for (int i = 0; i < ctx->n_in + ctx->n_outer; i++)
        if ((i >= ctx->n_in || ctx->in[i]) && !ctx->in_const[i]) return 0;
    return 1;
}

/* ---- If */

typedef struct {
    sub_plan br[2]; /* then, else */
    int chosen;     /* branch whose outputs out[] take, -1: by the condition at run time */
} if_state;

static void if_free(void *p)
{
    if_state *s = p;
    if (!s) return;
    sub_clear(&s->br[0]);
    sub_clear(&s->br[1]);
    free(s);
}

static ptq_status set_outputs_from(ptq_op_ctx *ctx, const ptq_plan *plan)
{
    if (ptq_plan_n_outputs(plan) != ctx->n_out)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "the branch has %d outputs, the node %d", ptq_plan_n_outputs(plan), ctx->n_out);
    for (int o = 0; o < ctx->n_out; o++)
        if (ctx->out[o]) {
            const ptq_tensor *t = ptq_plan_output(plan, o, NULL);
            ptq_shape_copy(ctx->out[o], t);
            ctx->out[o]->dtype = t->dtype;
        }
    return PTQ_OK;
}

static ptq_status if_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    const ptq_tensor *c = ctx->in[0];
    const ptq_graph *g[2] = {graph_attr(ctx, "then_branch"), graph_attr(ctx, "else_branch")};
    if (!g[0] || !g[1]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "then_branch and else_branch graphs are required");
    if (ptq_tensor_numel(c) != 1 || (c->dtype != PTQ_BOOL && ptq_dtype_size(c->dtype) == 0))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "the condition must hold one bool");
    if_state *s = ctx->state;
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
        ctx->state = s;
    }
    for (int b = 0; b < 2; b++) {
        if (s->br[b].body != g[b]) sub_clear(&s->br[b]);
        s->br[b].body = g[b];
        s->br[b].what = b ? "else_branch" : "then_branch";
        s->br[b].executed = 0;
    }
    int quiet = all_const(ctx);
    if (c->data) { /* the branch is known: plan only it */
        int b = ptq_tensor_get_i64(c, 0) ? 0 : 1;
        s->chosen = b;
        if ((st = sub_prepare(ctx, &s->br[b], NULL, NULL, 0, quiet)) != PTQ_OK) return st;
        if (!sub_static(&s->br[b])) { /* runs to know its shapes: at run time only */
            if (!ctx->run_time || !all_data(ctx)) {
                ctx->dynamic = 1;
                return PTQ_OK;
            }
            if ((st = sub_run(ctx, &s->br[b], NULL, 0)) != PTQ_OK) return st;
            s->br[b].executed = 1;
        }
        return set_outputs_from(ctx, s->br[b].plan);
    }
    /* condition known at run time only: static when both branches give the same shapes */
    s->chosen = -1;
    for (int b = 0; b < 2; b++)
        if ((st = sub_prepare(ctx, &s->br[b], NULL, NULL, 0, quiet)) != PTQ_OK) return st;
    int same = sub_static(&s->br[0]) && sub_static(&s->br[1]) &&
               ptq_plan_n_outputs(s->br[0].plan) == ptq_plan_n_outputs(s->br[1].plan);
    for (int o = 0; same && o < ptq_plan_n_outputs(s->br[0].plan); o++) {
        const ptq_tensor *a = ptq_plan_output(s->br[0].plan, o, NULL), *b = ptq_plan_output(s->br[1].plan, o, NULL);
        same = a->dtype == b->dtype && ptq_shape_equal(a, b);
    }
    if (!same) {
        ctx->dynamic = 1;
        return PTQ_OK;
    }
    return set_outputs_from(ctx, s->br[0].plan);
}

static ptq_status if_run(ptq_op_ctx *ctx)
{
    if_state *s = ctx->state;
    int b = s->chosen >= 0 ? s->chosen : (ptq_tensor_get_i64(ctx->in[0], 0) ? 0 : 1);
    sub_plan *sp = &s->br[b];
    if (!sp->executed) {
        ptq_status st = sub_run(ctx, sp, NULL, 0);
        if (st != PTQ_OK) return st;
    }
    sp->executed = 0;
    for (int o = 0; o < ctx->n_out; o++)
        if (ctx->out[o]) {
            const ptq_tensor *t = ptq_plan_output(sp->plan, o, NULL);
            if (!ptq_shape_equal(t, ctx->out[o]) || t->dtype != ctx->out[o]->dtype)
                OP_FAIL(ctx, PTQ_ERR_INTERNAL, "branch output %d changed shape since planning", o);
            copy_out(ctx->out[o], t);
        }
    return PTQ_OK;
}

const ptq_op_def op_if = {if_infer, if_run, if_free, PTQ_OP_DYNAMIC | PTQ_OP_CONTROL};

/* ---- Loop and Scan share the iteration results: final values and stacked outputs */

typedef struct {
    sub_plan body;
    int n_res;
    ptq_tensor *res;       /* [n_out]: results, owned; run copies them out */
} iter_state;

static void iter_free(void *p)
{
    iter_state *s = p;
    if (!s) return;
    sub_clear(&s->body);
    for (int i = 0; i < s->n_res; i++) ptq_tensor_free(&s->res[i]);
    free(s->res);
    free(s);
}

static ptq_status iter_state_get(ptq_op_ctx *ctx, const ptq_graph *body, iter_state **out)
{
    iter_state *s = ctx->state;
    if (!s) {
        if (!(s = calloc(1, sizeof *s)) || !(s->res = calloc((size_t)ctx->n_out + 1, sizeof *s->res))) {
            free(s);
            OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
        }
        s->n_res = ctx->n_out;
        ctx->state = s;
    }
    if (s->body.body != body) sub_clear(&s->body);
    s->body.body = body;
    s->body.what = "body";
    for (int i = 0; i < s->n_res; i++) ptq_tensor_free(&s->res[i]);
    *out = s;
    return PTQ_OK;
}

/* Growing stack of equally shaped per-iteration tensors. */
typedef struct {
    ptq_tensor first;   /* shape and dtype of one iteration's tensor */
    uint8_t *data;
    size_t n, cap;      /* iterations, bytes */
} stack;

static ptq_status stack_push(const ptq_op_ctx *ctx, stack *sk, const ptq_tensor *t, int index)
{
    size_t nb = ptq_tensor_nbytes(t);
    if (sk->n == 0) {
        sk->first = *t;
        sk->first.data = NULL;
        sk->first.owns_data = 0;
    } else if (t->dtype != sk->first.dtype || !ptq_shape_equal(t, &sk->first)) {
        char a[96], b[96];
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "scan output %d is %s in one iteration and %s in another", index,
                ptq_shape_str(&sk->first, a, sizeof a), ptq_shape_str(t, b, sizeof b));
    }
    size_t limit = ((const ptq_plan_options *)ctx->plan_options)->max_arena_bytes;
    if (limit && (sk->n + 1) * nb > limit)
        OP_FAIL(ctx, PTQ_ERR_NOMEM, "scan output %d grows past %.1f MiB after %zu iterations", index,
                (double)limit / 1048576.0, sk->n);
    if ((sk->n + 1) * nb > sk->cap) {
        size_t cap = sk->cap ? sk->cap * 2 : nb * 4 + 64;
        while (cap < (sk->n + 1) * nb) cap *= 2;
        uint8_t *d = realloc(sk->data, cap);
        if (!d) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory stacking scan output %d", index);
        sk->data = d;
        sk->cap = cap;
    }
    if (nb) memcpy(sk->data + sk->n * nb, t->data, nb);
    sk->n++;
    return PTQ_OK;
}

/* The stacked iterations as one tensor, the iteration axis inserted at `axis` (iterations in
 * reverse when reverse is set). With no iteration, the body's declared shape if known. */
static ptq_status stack_finish(const ptq_op_ctx *ctx, stack *sk, int axis, int reverse, const ptq_value *declared,
                               ptq_tensor *out)
{
    ptq_status st = PTQ_OK;
    ptq_tensor one = sk->first;
    if (sk->n == 0) {
        memset(&one, 0, sizeof one);
        one.dtype = declared->t.dtype != PTQ_UNDEFINED ? declared->t.dtype : PTQ_F32;
        one.rank = declared->t.rank > 0 ? declared->t.rank : 0;
        for (int d = 0; d < one.rank; d++) one.dims[d] = declared->t.dims[d] > 0 ? declared->t.dims[d] : 0;
    }
    if (one.rank + 1 > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "scan output of rank %d", one.rank + 1);
    if (axis < 0) axis += one.rank + 1;
    if (axis < 0 || axis > one.rank) OP_FAIL(ctx, PTQ_ERR_ARG, "scan output axis out of range for rank %d", one.rank + 1);
    memset(out, 0, sizeof *out);
    out->dtype = one.dtype;
    out->rank = one.rank + 1;
    for (int d = 0, k = 0; d < out->rank; d++) out->dims[d] = d == axis ? (int64_t)sk->n : one.dims[k++];
    if ((st = ptq_tensor_alloc(out)) != PTQ_OK) return st;
    size_t outer = 1, inner = ptq_dtype_size(one.dtype);
    for (int d = 0; d < axis; d++) outer *= (size_t)one.dims[d];
    for (int d = axis; d < one.rank; d++) inner *= (size_t)one.dims[d];
    size_t nb = outer * inner;
    for (size_t t = 0; t < sk->n; t++) {
        size_t pos = reverse ? sk->n - 1 - t : t;
        for (size_t o = 0; o < outer; o++)
            memcpy((uint8_t *)out->data + (o * sk->n + pos) * inner, sk->data + t * nb + o * inner, inner);
    }
    return PTQ_OK;
}

static void stacks_free(stack *sk, int n)
{
    if (!sk) return;
    for (int i = 0; i < n; i++) free(sk[i].data);
    free(sk);
}

static ptq_status iter_set_outputs(ptq_op_ctx *ctx, const iter_state *s)
{
    for (int o = 0; o < ctx->n_out; o++)
        if (ctx->out[o]) {
            ptq_shape_copy(ctx->out[o], &s->res[o]);
            ctx->out[o]->dtype = s->res[o].dtype;
        }
    return PTQ_OK;
}

static ptq_status iter_run(ptq_op_ctx *ctx)
{
    const iter_state *s = ctx->state;
    for (int o = 0; o < ctx->n_out; o++)
        if (ctx->out[o]) copy_out(ctx->out[o], &s->res[o]);
    return PTQ_OK;
}

/* ---- Loop: inputs M (max trip count, optional), cond (optional), v_initial...; body
 * (iteration_num, condition, carried...) -> (condition, carried..., scan outputs...) */

static ptq_status loop_infer(ptq_op_ctx *ctx)
{
    ptq_status st = PTQ_OK;
    const ptq_graph *body = graph_attr(ctx, "body");
    if (!body) OP_FAIL(ctx, PTQ_ERR_FORMAT, "the body graph is required");
    int n_carried = ctx->n_in > 2 ? ctx->n_in - 2 : 0;
    int n_scan = ctx->n_out - n_carried;
    if (n_scan < 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs for %d loop-carried values", ctx->n_out, n_carried);
    if (body->n_inputs != 2 + n_carried || body->n_outputs != 1 + n_carried + n_scan)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "the body has %d inputs and %d outputs, expected %d and %d", body->n_inputs,
                body->n_outputs, 2 + n_carried, 1 + n_carried + n_scan);
    const ptq_tensor *m = ctx->n_in > 0 ? ctx->in[0] : NULL, *c = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (m && (ptq_tensor_numel(m) != 1 || (m->dtype != PTQ_I64 && m->dtype != PTQ_I32)))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "M must hold one int64");
    if (c && (ptq_tensor_numel(c) != 1 || c->dtype != PTQ_BOOL)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "cond must hold one bool");
    for (int i = 0; i < n_carried; i++) {
        if (!ctx->in[2 + i]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "loop-carried input %d is missing", i);
        if (ctx->out[i]) ctx->out[i]->dtype = ctx->in[2 + i]->dtype;
    }
    if (!ctx->run_time || !all_data(ctx)) { /* trip count and shapes known once it runs; never
                                                * folded at plan time (a constant trip count may be huge) */
        ctx->dynamic = 1;
        return PTQ_OK;
    }
    iter_state *s;
    if ((st = iter_state_get(ctx, body, &s)) != PTQ_OK) return st;
    int quiet = all_const(ctx);
    int64_t max_trip = m ? ptq_tensor_get_i64(m, 0) : INT64_MAX;
    int cond = c ? ptq_tensor_get_i64(c, 0) != 0 : 1;
    int n_formal = 2 + n_carried;
    const ptq_tensor **formal = calloc((size_t)n_formal, sizeof *formal);
    ptq_tensor *carried = calloc((size_t)n_carried + 1, sizeof *carried);
    stack *sk = calloc((size_t)n_scan + 1, sizeof *sk);
    int64_t iter = 0;
    uint8_t cond_b = 1;
    ptq_tensor it_t = {0}, cond_t = {0};
    if (!formal || !carried || !sk) {
        ptq_error("%s '%s': out of memory allocating the loop's carried values", ctx->node->op_type, ctx->node->name);
        st = PTQ_ERR_NOMEM;
        goto done;
    }
    it_t.dtype = PTQ_I64;
    it_t.data = &iter;
    cond_t.dtype = PTQ_BOOL;
    cond_t.data = &cond_b;
    for (int i = 0; i < n_carried; i++)
        if ((st = tensor_set(&carried[i], ctx->in[2 + i])) != PTQ_OK) goto done;
    formal[0] = &it_t;
    formal[1] = &cond_t;
    for (int i = 0; i < n_carried; i++) formal[2 + i] = &carried[i];
    for (; iter < max_trip && cond; iter++) {
        cond_b = 1;
        if ((st = sub_prepare(ctx, &s->body, formal, NULL, n_formal, quiet)) != PTQ_OK) goto done;
        if ((st = sub_run(ctx, &s->body, formal, n_formal)) != PTQ_OK) goto done;
        const ptq_tensor *co = ptq_plan_output(s->body.plan, 0, NULL);
        if (ptq_tensor_numel(co) != 1) {
            ptq_error("%s '%s': the body's condition output holds %zu values", ctx->node->op_type, ctx->node->name,
                      ptq_tensor_numel(co));
            st = PTQ_ERR_SHAPE;
            goto done;
        }
        cond = ptq_tensor_get_i64(co, 0) != 0;
        for (int k = 0; k < n_scan; k++)
            if ((st = stack_push(ctx, &sk[k], ptq_plan_output(s->body.plan, 1 + n_carried + k, NULL), k)) != PTQ_OK)
                goto done;
        for (int i = 0; i < n_carried; i++) { /* copied: the plan's outputs may be its inputs */
            ptq_tensor next = {0};
            if ((st = ptq_tensor_copy(&next, ptq_plan_output(s->body.plan, 1 + i, NULL))) != PTQ_OK) goto done;
            ptq_tensor_free(&carried[i]);
            carried[i] = next;
        }
    }
    for (int i = 0; i < n_carried; i++) {
        s->res[i] = carried[i];
        memset(&carried[i], 0, sizeof carried[i]);
    }
    for (int k = 0; k < n_scan; k++)
        if ((st = stack_finish(ctx, &sk[k], 0, 0, &body->values[body->outputs[1 + n_carried + k]], &s->res[n_carried + k])) !=
            PTQ_OK)
            goto done;
    st = iter_set_outputs(ctx, s);
done:
    if (carried)
        for (int i = 0; i < n_carried; i++) ptq_tensor_free(&carried[i]);
    free(carried);
    free(formal);
    stacks_free(sk, n_scan);
    return st;
}

const ptq_op_def op_loop = {loop_infer, iter_run, iter_free, PTQ_OP_DYNAMIC | PTQ_OP_CONTROL};

/* ---- Scan (opset 9+: state..., scan inputs... along scan_input_axes; opset 8: a leading
 * optional sequence_lens and a batch axis 0 on every input and output) */

/* Slice `index` of t along axis into dst (allocated once by the caller's shape). */
static void take_slice(const ptq_tensor *t, int axis, int64_t index, ptq_tensor *dst)
{
    size_t es = ptq_dtype_size(t->dtype), outer = 1, inner = es;
    for (int d = 0; d < axis; d++) outer *= (size_t)t->dims[d];
    for (int d = axis + 1; d < t->rank; d++) inner *= (size_t)t->dims[d];
    size_t len = (size_t)t->dims[axis];
    for (size_t o = 0; o < outer; o++)
        memcpy((uint8_t *)dst->data + o * inner, (const uint8_t *)t->data + (o * len + (size_t)index) * inner, inner);
}

/* One scan over state[n_state] and scan inputs xs[n_scan_in] (no batch axis). */
static ptq_status scan_one(ptq_op_ctx *ctx, iter_state *s, const ptq_tensor *const *state, int n_state,
                           const ptq_tensor *const *xs, int n_scan_in, const int64_t *in_axes, const int64_t *in_dirs,
                           const int64_t *out_axes, const int64_t *out_dirs, int n_scan_out, int quiet,
                           ptq_tensor *res)
{
    ptq_status st = PTQ_OK;
    const ptq_graph *body = s->body.body;
    int n_formal = n_state + n_scan_in;
    const ptq_tensor **formal = calloc((size_t)n_formal + 1, sizeof *formal);
    ptq_tensor *cur = calloc((size_t)n_state + 1, sizeof *cur), *slices = calloc((size_t)n_scan_in + 1, sizeof *slices);
    stack *sk = calloc((size_t)n_scan_out + 1, sizeof *sk);
    int64_t len = -1;
    int axes[PTQ_MAX_RANK * 4];
    if (!formal || !cur || !slices || !sk) {
        ptq_error("%s '%s': out of memory allocating the scan's state and slices", ctx->node->op_type, ctx->node->name);
        st = PTQ_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n_state; i++)
        if ((st = tensor_set(&cur[i], state[i])) != PTQ_OK) goto done;
    for (int j = 0; j < n_scan_in; j++) {
        int64_t ax = in_axes ? in_axes[j] : 0;
        if (ptq_norm_axis(ax, xs[j]->rank, &ax) != 0) {
            ptq_error("%s '%s': scan input %d axis %lld out of range for rank %d", ctx->node->op_type, ctx->node->name, j,
                      (long long)(in_axes ? in_axes[j] : 0), xs[j]->rank);
            st = PTQ_ERR_ARG;
            goto done;
        }
        axes[j % (PTQ_MAX_RANK * 4)] = (int)ax;
        if (len >= 0 && xs[j]->dims[ax] != len) {
            ptq_error("%s '%s': scan inputs have %lld and %lld iterations", ctx->node->op_type, ctx->node->name,
                      (long long)len, (long long)xs[j]->dims[ax]);
            st = PTQ_ERR_SHAPE;
            goto done;
        }
        len = xs[j]->dims[ax];
        slices[j].dtype = xs[j]->dtype;
        for (int d = 0, k = 0; d < xs[j]->rank; d++)
            if (d != ax) slices[j].dims[k++] = xs[j]->dims[d];
        slices[j].rank = xs[j]->rank - 1;
        if ((st = ptq_tensor_alloc(&slices[j])) != PTQ_OK) goto done;
    }
    if (n_scan_in > PTQ_MAX_RANK * 4) {
        ptq_error("%s '%s': %d scan inputs, at most %d", ctx->node->op_type, ctx->node->name, n_scan_in, PTQ_MAX_RANK * 4);
        st = PTQ_ERR_UNSUPPORTED;
        goto done;
    }
    if (len < 0) len = 0;
    for (int i = 0; i < n_state; i++) formal[i] = &cur[i];
    for (int j = 0; j < n_scan_in; j++) formal[n_state + j] = &slices[j];
    for (int64_t t = 0; t < len; t++) {
        for (int j = 0; j < n_scan_in; j++) take_slice(xs[j], axes[j], in_dirs && in_dirs[j] ? len - 1 - t : t, &slices[j]);
        if ((st = sub_prepare(ctx, &s->body, formal, NULL, n_formal, quiet)) != PTQ_OK) goto done;
        if ((st = sub_run(ctx, &s->body, formal, n_formal)) != PTQ_OK) goto done;
        for (int k = 0; k < n_scan_out; k++)
            if ((st = stack_push(ctx, &sk[k], ptq_plan_output(s->body.plan, n_state + k, NULL), k)) != PTQ_OK) goto done;
        for (int i = 0; i < n_state; i++) {
            ptq_tensor next = {0};
            if ((st = ptq_tensor_copy(&next, ptq_plan_output(s->body.plan, i, NULL))) != PTQ_OK) goto done;
            ptq_tensor_free(&cur[i]);
            cur[i] = next;
        }
    }
    for (int i = 0; i < n_state; i++) {
        res[i] = cur[i];
        memset(&cur[i], 0, sizeof cur[i]);
    }
    for (int k = 0; k < n_scan_out; k++)
        if ((st = stack_finish(ctx, &sk[k], out_axes ? (int)out_axes[k] : 0, out_dirs ? (int)out_dirs[k] : 0,
                               &body->values[body->outputs[n_state + k]], &res[n_state + k])) != PTQ_OK)
            goto done;
done:
    if (cur)
        for (int i = 0; i < n_state; i++) ptq_tensor_free(&cur[i]);
    if (slices)
        for (int j = 0; j < n_scan_in; j++) ptq_tensor_free(&slices[j]);
    free(cur);
    free(slices);
    free(formal);
    stacks_free(sk, n_scan_out);
    return st;
}

/* An INTS attribute of `want` entries each 0 or 1 (directions), or any axis values. */
static ptq_status ints_attr(const ptq_op_ctx *ctx, const char *name, size_t want, int binary, const int64_t **out)
{
    size_t n = 0;
    *out = ptq_attr_ints(ctx->node, name, &n);
    if (!*out) return PTQ_OK;
    if (n != want) OP_FAIL(ctx, PTQ_ERR_ARG, "%s has %zu entries, expected %zu", name, n, want);
    for (size_t i = 0; binary && i < n; i++)
        if ((*out)[i] != 0 && (*out)[i] != 1) OP_FAIL(ctx, PTQ_ERR_ARG, "%s[%zu] must be 0 or 1", name, i);
    return PTQ_OK;
}

static ptq_status scan_infer(ptq_op_ctx *ctx)
{
    ptq_status st = PTQ_OK;
    const ptq_graph *body = graph_attr(ctx, "body");
    if (!body) OP_FAIL(ctx, PTQ_ERR_FORMAT, "the body graph is required");
    int v8 = ctx->opset < 9, first = v8 ? 1 : 0;
    int64_t m = ptq_attr_int(ctx->node, "num_scan_inputs", -1);
    int n_all = ctx->n_in - first;
    if (m < 1 || m > n_all) OP_FAIL(ctx, PTQ_ERR_ARG, "num_scan_inputs %lld for %d inputs", (long long)m, n_all);
    int n_scan_in = (int)m, n_state = n_all - n_scan_in, n_scan_out = ctx->n_out - n_state;
    if (n_scan_out < 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs for %d state values", ctx->n_out, n_state);
    if (body->n_inputs != n_all || body->n_outputs != ctx->n_out)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "the body has %d inputs and %d outputs, expected %d and %d", body->n_inputs,
                body->n_outputs, n_all, ctx->n_out);
    for (int i = first; i < ctx->n_in; i++)
        if (!ctx->in[i]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "input %d is missing", i);
    const int64_t *in_axes = NULL, *in_dirs = NULL, *out_axes = NULL, *out_dirs = NULL;
    if (v8) {
        if ((st = ints_attr(ctx, "directions", (size_t)n_scan_in, 1, &in_dirs)) != PTQ_OK) return st;
    } else {
        if ((st = ints_attr(ctx, "scan_input_axes", (size_t)n_scan_in, 0, &in_axes)) != PTQ_OK) return st;
        if ((st = ints_attr(ctx, "scan_input_directions", (size_t)n_scan_in, 1, &in_dirs)) != PTQ_OK) return st;
        if ((st = ints_attr(ctx, "scan_output_axes", (size_t)n_scan_out, 0, &out_axes)) != PTQ_OK) return st;
        if ((st = ints_attr(ctx, "scan_output_directions", (size_t)n_scan_out, 1, &out_dirs)) != PTQ_OK) return st;
    }
    for (int i = 0; i < n_state; i++)
        if (ctx->out[i]) ctx->out[i]->dtype = ctx->in[first + i]->dtype;
    if (!ctx->run_time || !all_data(ctx)) { /* run at run time only, as Loop */
        ctx->dynamic = 1;
        return PTQ_OK;
    }
    iter_state *s;
    if ((st = iter_state_get(ctx, body, &s)) != PTQ_OK) return st;
    int quiet = all_const(ctx);
    if (!v8) {
        st = scan_one(ctx, s, ctx->in + first, n_state, ctx->in + first + n_state, n_scan_in, in_axes, in_dirs, out_axes,
                      out_dirs, n_scan_out, quiet, s->res);
        return st == PTQ_OK ? iter_set_outputs(ctx, s) : st;
    }
    /* opset 8: every input has a batch axis 0; each batch entry scans on its own */
    int64_t batch = ctx->in[first]->rank > 0 ? ctx->in[first]->dims[0] : 0;
    for (int i = first; i < ctx->n_in; i++)
        if (ctx->in[i]->rank < 1 || ctx->in[i]->dims[0] != batch)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "input %d has no batch axis of %lld", i, (long long)batch);
    if (first && ctx->in[0]) { /* sequence_lens: only full lengths are supported */
        const ptq_tensor *sl = ctx->in[0];
        int64_t full = ctx->in[first + n_state]->rank > 1 ? ctx->in[first + n_state]->dims[1] : 0;
        for (size_t i = 0; i < ptq_tensor_numel(sl); i++)
            if (ptq_tensor_get_i64(sl, i) != full)
                OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "sequence_lens shorter than the sequence are not supported");
    }
    int n_x = n_all;
    ptq_tensor *part = calloc((size_t)n_x + 1, sizeof *part), *one = calloc((size_t)ctx->n_out + 1, sizeof *one);
    const ptq_tensor **pp = calloc((size_t)n_x + 1, sizeof *pp);
    if (!part || !one || !pp) {
        free(part);
        free(one);
        free(pp);
        OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its buffers");
    }
    for (int64_t b = 0; b < batch && st == PTQ_OK; b++) {
        for (int i = 0; i < n_x && st == PTQ_OK; i++) {
            const ptq_tensor *x = ctx->in[first + i];
            ptq_tensor_free(&part[i]);
            part[i].dtype = x->dtype;
            part[i].rank = x->rank - 1;
            for (int d = 1; d < x->rank; d++) part[i].dims[d - 1] = x->dims[d];
            if ((st = ptq_tensor_alloc(&part[i])) == PTQ_OK) take_slice(x, 0, b, &part[i]);
            pp[i] = &part[i];
        }
        if (st != PTQ_OK) break;
        for (int o = 0; o < ctx->n_out; o++) ptq_tensor_free(&one[o]);
        st = scan_one(ctx, s, pp, n_state, pp + n_state, n_scan_in, NULL, in_dirs, NULL, NULL, n_scan_out, quiet, one);
        for (int o = 0; o < ctx->n_out && st == PTQ_OK; o++) {
            ptq_tensor *r = &s->res[o];
            if (b == 0) {
                r->dtype = one[o].dtype;
                r->rank = one[o].rank + 1;
                r->dims[0] = batch;
                for (int d = 0; d < one[o].rank; d++) r->dims[d + 1] = one[o].dims[d];
                if (r->rank > PTQ_MAX_RANK) {
                    ptq_error("%s '%s': output rank %d", ctx->node->op_type, ctx->node->name, r->rank);
                    st = PTQ_ERR_UNSUPPORTED;
                    break;
                }
                if ((st = ptq_tensor_alloc(r)) != PTQ_OK) break;
            } else if (one[o].dtype != r->dtype || one[o].rank + 1 != r->rank ||
                       memcmp(one[o].dims, r->dims + 1, sizeof(int64_t) * (size_t)one[o].rank) != 0) {
                ptq_error("%s '%s': output %d differs in shape between batch entries", ctx->node->op_type,
                          ctx->node->name, o);
                st = PTQ_ERR_SHAPE;
                break;
            }
            size_t nb = ptq_tensor_nbytes(&one[o]);
            if (nb) memcpy((uint8_t *)r->data + (size_t)b * nb, one[o].data, nb);
        }
    }
    for (int i = 0; i < n_x; i++) ptq_tensor_free(&part[i]);
    for (int o = 0; o < ctx->n_out; o++) ptq_tensor_free(&one[o]);
    free(part);
    free(one);
    free(pp);
    if (st != PTQ_OK) return st;
    if (batch == 0) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "a batch of 0");
    return iter_set_outputs(ctx, s);
}

const ptq_op_def op_scan = {scan_infer, iter_run, iter_free, PTQ_OP_DYNAMIC | PTQ_OP_CONTROL};
