/* plan_fuse.c: the fusion passes of ptq_plan_create (step 3 in plan.c's summary). Each rewrites
 * the plan's steps in place: a fused step is marked skip, its consumer takes its output or its
 * epilogue, new weights are plan constants (plan_add_const); the written graph never changes. */
#include "plan_impl.h"
#include "ops/ewchain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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



/* A tensor fusion must keep: a graph output or an observed tensor. */
static int pinned(const ptq_plan *p, int v)
{
    return plan_is_graph_output(p, v) || plan_observes(p, v);
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
        TRY(plan_add_const(p, w, &wv));
        TRY(plan_add_const(p, &bshape, &bv));
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
        TRY(plan_step_infer(p, conv));
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
        TRY(plan_step_infer(p, s));
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
                TRY(plan_add_const(p, &p->vals[conv->in_vals[1]], &nw));
                memcpy(p->vals[nw].data, p->vals[conv->in_vals[1]].data, ptq_tensor_nbytes(&p->vals[nw]));
                TRY(plan_add_const(p, &bshape, &nb));
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
        if (changed) TRY(plan_step_infer(p, conv));
    }
done:
    return st;
}

/* keep_values plans: a Conv's single-use output followed by BatchNormalization or by Mul,
 * Add, Sub or Div with a constant (scalar or per channel) becomes steps of the conv's
 * epilogue (op.h: ptq_chan_op), each computed as the op computes it, so every value that
 * remains is bit for bit the unfused model's; the activation after them can then fuse too.
 * ConvTranspose's (a separate bias Add, a BatchNormalization: PP-OCR det's head) in every
 * plan (with_conv 0: only those), its weights never folded. */
static ptq_status fuse_channel_ops(ptq_plan *p, int with_conv)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *conv = &p->steps[i];
        if (conv->skip || conv->dyn || !(op_is(p, conv, "ConvTranspose") || (with_conv && op_is(p, conv, "Conv"))) ||
            conv->ctx.n_out != 1 || conv->ctx.act.kind != PTQ_ACT_NONE ||
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
                TRY(plan_add_const(p, &shape, &av));
                TRY(plan_add_const(p, &shape, &bv));
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
        if (changed) TRY(plan_step_infer(p, conv));
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
            TRY(plan_step_infer(p, prod));
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
        TRY(plan_step_infer(p, s));
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
        if (y < 0 || plan_is_graph_output(p, y) || consumers(p, y, &j) != 1) continue;
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
        TRY(plan_step_infer(p, q));
    }
done:
    return st;
}

static int is_cast_to(const ptq_plan *p, const plan_step *s, ptq_dtype from, ptq_dtype to)
{
    return op_is(p, s, "Cast") && s->ctx.n_in == 1 && s->ctx.n_out == 1 && s->ctx.in[0] && s->ctx.in[0]->dtype == from &&
           s->out_vals[0] >= 0 && p->vals[s->out_vals[0]].dtype == to;
}

/* Cast(float16) of a float32 tensor read only by a Cast(float) (how quant_fp16_simulate rounds
 * a value to FP16): one step (ptq_op_round_f16) that writes the Cast(float)'s output, bit for
 * bit, without the float16 tensor; and where the tensor rounded is the single-use output of a
 * step with one output, that step rounds its own output in place after running (round_f16),
 * so the rounding reads the values while they are still in cache. Last of the passes: the
 * fusions before it never see a rounding between the steps they fuse. */
static ptq_status fuse_f16_rounding(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *c = &p->steps[i];
        if (c->skip || c->dyn || !is_cast_to(p, c, PTQ_F32, PTQ_F16)) continue;
        int h = c->out_vals[0], j = -1;
        if (pinned(p, h) || consumers(p, h, &j) != 1) continue;
        plan_step *d = &p->steps[j];
        if (d->dyn || !is_cast_to(p, d, PTQ_F16, PTQ_F32) || d->in_vals[0] != h) continue;
        c->def = &ptq_op_round_f16;
        c->out_vals[0] = d->out_vals[0];
        c->out[0] = &p->vals[d->out_vals[0]];
        d->skip = 1;
        TRY(plan_step_infer(p, c));
        int x = c->in_vals[0], jx = producer_step(p, x), dummy;
        if (jx < 0 || pinned(p, x) || consumers(p, x, &dummy) != 1) continue;
        plan_step *prod = &p->steps[jx];
        if (prod->dyn || prod->round_f16 || prod->ctx.n_out != 1 || prod->out_vals[0] != x || p->vals[x].dtype != PTQ_F32)
            continue;
        prod->out_vals[0] = c->out_vals[0];
        prod->out[0] = &p->vals[c->out_vals[0]];
        c->skip = 1;
        TRY(plan_step_infer(p, prod));
        prod->round_f16 = 1;
    }
done:
    return st;
}

/* The instruction step s computes in a chain over value x (ewchain.h), reading registers
 * through reg (value -> register, -1: not in the chain); 0 when s is not such a step. */
static int chain_instr(const ptq_plan *p, const plan_step *s, int x, const int *reg, int32_t *in, int *kin, int *n_k)
{
    const ptq_tensor *xt = &p->vals[x];
    memset(in, 0, sizeof(int32_t) * EW_FIELDS);
    if (s->skip || s->dyn || s->ctx.n_out != 1 || s->out_vals[0] < 0 || p->vals[s->out_vals[0]].dtype != PTQ_F32 ||
        !ptq_shape_equal(&p->vals[s->out_vals[0]], xt))
        return 0;
    int is_clip = op_is(p, s, "Clip"), any = 0;
    if (is_clip) {
        ptq_activation a;
        if (!activation_of(p, s, &a) || s->in_vals[0] < 0 || reg[s->in_vals[0]] < 0) return 0;
        in[0] = EW_CLIP;
        in[2] = reg[s->in_vals[0]];
        memcpy(&in[7], &a.alpha, sizeof a.alpha);
        memcpy(&in[8], &a.beta, sizeof a.beta);
        in[6] = s->round_f16;
        return 1;
    }
    if (op_is(p, s, "Add")) in[0] = EW_ADD;
    else if (op_is(p, s, "Sub")) in[0] = EW_SUB;
    else if (op_is(p, s, "Mul")) in[0] = EW_MUL;
    else if (op_is(p, s, "Div")) in[0] = EW_DIV;
    else return 0;
    if (s->ctx.n_in != 2) return 0;
    for (int side = 0; side < 2; side++) {
        int v = s->in_vals[side];
        const float *k;
        int per_channel;
        if (v >= 0 && reg[v] >= 0) {
            in[2 + side] = reg[v];
            any = 1;
        } else if (v >= 0 && channel_const(p, v, xt->dims[1], xt->rank, &k, &per_channel)) {
            if (*n_k >= EW_MAX_INSTR * 2) return 0;
            in[2 + side] = -1;
            in[4 + side] = 2 + *n_k;
            kin[(*n_k)++] = v;
        } else {
            return 0;
        }
    }
    in[6] = s->round_f16;
    return any;
}

/* Element-wise float steps (Add, Sub, Mul, Div with a value or per-channel constant, Clip with
 * constant bounds; each optionally rounding to FP16) that read only one value x [N, C, ...] of
 * their shape and each other's outputs, only the last read elsewhere: one ptq_op_ew_chain step
 * in the last one's place, each value computed as its op computes it, so the output is bit for
 * bit the unfused steps'. QDQ models simulated in FP16 have them after each INT8 layer (an
 * affine block, hard-swish, an affine block), where a rounding between every two steps keeps
 * the fusions above from applying. After fuse_f16_rounding: the roundings are flags by then. */
static ptq_status fuse_elementwise_chains(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    int *reg = malloc(sizeof(int) * (size_t)p->n_vals + 1);
    CHECK_ALLOC(reg);
    for (int v = 0; v < p->n_vals; v++) reg[v] = -1;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *h = &p->steps[i];
        if (h->skip || h->dyn || h->ctx.n_out < 1) continue;
        int x = h->out_vals[0];
        if (x < 0 || p->vals[x].dtype != PTQ_F32 || p->vals[x].rank < 2 || p->is_dyn[x] || p->vals[x].dims[1] < 1) continue;
        int member[EW_MAX_INSTR], n = 0, kin[EW_MAX_INSTR][2 * EW_MAX_INSTR], nk[EW_MAX_INSTR];
        int32_t prog[EW_MAX_INSTR][EW_FIELDS];
        reg[x] = 0;
        for (int j = i + 1; j < p->n_steps && n < EW_MAX_INSTR; j++) {
            plan_step *s = &p->steps[j];
            if (s->skip) continue;
            int reads = 0;
            for (int k = 0; k < n_reads(s); k++) reads |= s->in_vals[k] >= 0 && reg[s->in_vals[k]] >= 0;
            if (!reads) continue;
            nk[n] = n ? nk[n - 1] : 0;
            if (!chain_instr(p, s, x, reg, prog[n], kin[n], &nk[n])) break;
            if (n) memcpy(kin[n], kin[n - 1], sizeof(int) * (size_t)nk[n - 1]);
            member[n++] = j;
            reg[s->out_vals[0]] = n;
        }
        /* the longest prefix whose values other than the last are read only inside it */
        int len = 0;
        for (int k = 2; k <= n; k++) {
            int ok = 1;
            for (int m = 0; m < k - 1 && ok; m++) {
                int v = p->steps[member[m]].out_vals[0], dummy, inside = 0;
                for (int q = 0; q < k; q++)
                    for (int r = 0; r < n_reads(&p->steps[member[q]]); r++) inside += p->steps[member[q]].in_vals[r] == v;
                ok = !pinned(p, v) && consumers(p, v, &dummy) == inside;
            }
            if (ok) len = k;
        }
        reg[x] = -1;
        for (int m = 0; m < n; m++) reg[p->steps[member[m]].out_vals[0]] = -1;
        if (len < 2 || plan_observes(p, p->steps[member[len - 1]].out_vals[0])) continue;
        /* the program (a constant of the plan) and the last step made the chain */
        plan_step *last = &p->steps[member[len - 1]];
        int n_k = nk[len - 1], n_in = 2 + n_k, pv;
        ptq_tensor shape = {0};
        shape.dtype = PTQ_I32;
        shape.rank = 1;
        shape.dims[0] = (int64_t)len * EW_FIELDS;
        TRY(plan_add_const(p, &shape, &pv));
        memcpy(p->vals[pv].data, prog, sizeof(int32_t) * EW_FIELDS * (size_t)len);
        int *iv = realloc(last->in_vals, sizeof(int) * (size_t)(n_in + last->n_outer) + 1);
        if (iv) last->in_vals = iv;
        CHECK_ALLOC(iv);
        const ptq_tensor **ip = realloc(last->in, sizeof *ip * (size_t)(n_in + last->n_outer) + 1);
        if (ip) last->in = ip;
        CHECK_ALLOC(ip);
        unsigned char *ic = realloc(last->in_const, (size_t)(n_in + last->n_outer) + 1);
        if (ic) last->in_const = ic;
        CHECK_ALLOC(ic);
        last->in_vals[0] = x;
        last->in_vals[1] = pv;
        for (int k = 0; k < n_k; k++) last->in_vals[2 + k] = kin[len - 1][k];
        for (int k = 0; k < n_in; k++) last->in[k] = &p->vals[last->in_vals[k]];
        last->ctx.in = last->in;
        last->ctx.in_const = last->in_const;
        last->ctx.n_in = n_in;
        last->def = &ptq_op_ew_chain;
        last->round_f16 = 0; /* the program's last instruction rounds */
        for (int m = 0; m < len - 1; m++) p->steps[member[m]].skip = 1;
        TRY(plan_step_infer(p, last));
    }
done:
    free(reg);
    return st;
}

ptq_status plan_fuse(ptq_plan *p)
{
    ptq_status st = PTQ_OK;
    if (!p->opt.keep_values) {
        TRY(fuse_batchnorm(p));
        TRY(fold_affine(p));
        TRY(fuse_channel_ops(p, 0));
    } else {
        TRY(fuse_channel_ops(p, 1));
    }
    TRY(fuse_activations(p));
    TRY(fuse_hardswish_pattern(p));
    TRY(fuse_post_affine(p));
    TRY(fuse_qdq_pairs(p));
    TRY(fuse_f16_rounding(p));
    TRY(fuse_elementwise_chains(p));
done:
    return st;
}
