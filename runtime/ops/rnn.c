/* rnn.c: the recurrent ops RNN, GRU and LSTM (opset 7; layout from opset 14), as used by
 * CRNN-style OCR recognisers: forward, reverse and bidirectional; per-batch sequence_lens
 * (steps past a sequence's end give Y = 0 and leave its state as it was); initial_h /
 * initial_c; LSTM peepholes and input_forget; GRU linear_before_reset; clip; the
 * activations attribute (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu,
 * ScaledTanh, HardSigmoid, Elu, Softsign, Softplus), alpha and beta taken in order by the
 * functions that use them.
 *
 * Gate pre-activations are sums in one fixed order (x . W row, then h . R row, then Wb,
 * then Rb) in float32. Batch entries are independent through the whole sequence, so threads
 * split (direction, batch) pairs, each running its recurrence in its own scratch: the
 * result is the same at any thread count. Gate order in W, R, B: RNN i; GRU z, r, h;
 * LSTM i, o, f, c (peepholes i, o, f), as ONNX specifies. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/kernels/mathf.h"
#include "runtime/op.h"
#include "runtime/shape.h"

typedef enum { CELL_RNN = 0, CELL_GRU, CELL_LSTM } cell_kind;

typedef enum {
    ACT_RELU = 0, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKY_RELU, ACT_THRESHOLDED_RELU,
    ACT_SCALED_TANH, ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS
} act_kind;

typedef struct {
    act_kind kind;
    float alpha, beta;
} rnn_act;

typedef struct {
    cell_kind cell;
    int G;                 /* gates: 1, 3, 4 */
    int D;                 /* directions: 1 or 2 */
    int reverse_only;      /* direction = reverse */
    int layout;
    int64_t T, B, I, Hd;
    float clip;            /* 0: none */
    int linear_before_reset, input_forget;
    rnn_act act[2][3];     /* per direction: f, g, h */
} rnn_state;

static const struct {
    const char *name;
    act_kind kind;
    int n_params; /* 0: none, 1: alpha, 2: alpha and beta */
    float alpha, beta;
} act_table[] = {
    {"Relu", ACT_RELU, 0, 0.0f, 0.0f},
    {"Tanh", ACT_TANH, 0, 0.0f, 0.0f},
    {"Sigmoid", ACT_SIGMOID, 0, 0.0f, 0.0f},
    {"Affine", ACT_AFFINE, 2, 1.0f, 0.0f},
    {"LeakyRelu", ACT_LEAKY_RELU, 1, 0.01f, 0.0f},
    {"ThresholdedRelu", ACT_THRESHOLDED_RELU, 1, 1.0f, 0.0f},
    {"ScaledTanh", ACT_SCALED_TANH, 2, 1.0f, 1.0f},
    {"HardSigmoid", ACT_HARD_SIGMOID, 2, 0.2f, 0.5f},
    {"Elu", ACT_ELU, 1, 1.0f, 0.0f},
    {"Softsign", ACT_SOFTSIGN, 0, 0.0f, 0.0f},
    {"Softplus", ACT_SOFTPLUS, 0, 0.0f, 0.0f},
};

static float act_apply(const rnn_act *a, float x)
{
    switch (a->kind) {
    case ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ACT_TANH: return ptq_tanhf(x);
    case ACT_SIGMOID: return ptq_sigmoidf(x);
    case ACT_AFFINE: return a->alpha * x + a->beta;
    case ACT_LEAKY_RELU: return x >= 0.0f ? x : a->alpha * x;
    case ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0.0f;
    case ACT_SCALED_TANH: return a->alpha * ptq_tanhf(a->beta * x);
    case ACT_HARD_SIGMOID: {
        float v = a->alpha * x + a->beta;
        return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
    }
    case ACT_ELU: return x >= 0.0f ? x : a->alpha * ptq_expm1f(x);
    case ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case ACT_SOFTPLUS: return ptq_softplusf(x);
    }
    return x;
}

static ptq_status check_weight(ptq_op_ctx *ctx, const ptq_tensor *t, const char *what, int rank, const int64_t *dims)
{
    int ok = t->dtype == PTQ_F32 && t->rank == rank;
    for (int d = 0; ok && d < rank; d++) ok = t->dims[d] == dims[d];
    if (!ok) {
        char a[96];
        if (rank == 2)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s is %s %s, expected float32 [%lld, %lld]", what, ptq_dtype_name(t->dtype),
                    ptq_shape_str(t, a, sizeof a), (long long)dims[0], (long long)dims[1]);
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s is %s %s, expected float32 [%lld, %lld, %lld]", what, ptq_dtype_name(t->dtype),
                ptq_shape_str(t, a, sizeof a), (long long)dims[0], (long long)dims[1], (long long)dims[2]);
    }
    return PTQ_OK;
}

static ptq_status rnn_infer_cell(ptq_op_ctx *ctx, cell_kind cell)
{
    int max_in = cell == CELL_LSTM ? 8 : 6;
    ptq_status st = ptq_op_check_inputs(ctx, 3, max_in);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *w = ctx->in[1], *r = ctx->in[2];
    rnn_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->cell = cell;
    s->G = cell == CELL_RNN ? 1 : cell == CELL_GRU ? 3 : 4;
    s->layout = ctx->opset >= 14 ? (int)ptq_attr_int(ctx->node, "layout", 0) : 0;
    if (s->layout != 0 && s->layout != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "layout %d, expected 0 or 1", s->layout);
    const char *dir = ptq_attr_string(ctx->node, "direction", "forward");
    if (strcmp(dir, "forward") == 0) s->D = 1;
    else if (strcmp(dir, "reverse") == 0) s->D = 1, s->reverse_only = 1;
    else if (strcmp(dir, "bidirectional") == 0) s->D = 2;
    else OP_FAIL(ctx, PTQ_ERR_FORMAT, "direction '%s', expected forward, reverse or bidirectional", dir);
    if (x->dtype != PTQ_F32) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "X dtype %s, expected float32", ptq_dtype_name(x->dtype));
    if (x->rank != 3) OP_FAIL(ctx, PTQ_ERR_SHAPE, "X rank %d, expected 3", x->rank);
    s->T = x->dims[s->layout ? 1 : 0];
    s->B = x->dims[s->layout ? 0 : 1];
    s->I = x->dims[2];
    if (r->rank != 3) OP_FAIL(ctx, PTQ_ERR_SHAPE, "R rank %d, expected 3", r->rank);
    s->Hd = ptq_attr_int(ctx->node, "hidden_size", r->dims[2]);
    if (s->Hd < 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "hidden_size %lld, expected >= 1", (long long)s->Hd);
    int64_t D = s->D, G = s->G, Hd = s->Hd;
    int64_t wd[3] = {D, G * Hd, s->I}, rd[3] = {D, G * Hd, Hd}, bd[2] = {D, 2 * G * Hd}, pd[2] = {D, 3 * Hd};
    if ((st = check_weight(ctx, w, "W", 3, wd)) != PTQ_OK) return st;
    if ((st = check_weight(ctx, r, "R", 3, rd)) != PTQ_OK) return st;
    if (ctx->n_in > 3 && ctx->in[3] && (st = check_weight(ctx, ctx->in[3], "B", 2, bd)) != PTQ_OK) return st;
    if (ctx->n_in > 4 && ctx->in[4]) {
        const ptq_tensor *sl = ctx->in[4];
        if (sl->dtype != PTQ_I32 || sl->rank != 1 || sl->dims[0] != s->B)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "sequence_lens must be int32 [%lld]", (long long)s->B);
    }
    int64_t hd[3] = {s->layout ? s->B : D, s->layout ? D : s->B, Hd};
    if (ctx->n_in > 5 && ctx->in[5] && (st = check_weight(ctx, ctx->in[5], "initial_h", 3, hd)) != PTQ_OK) return st;
    if (cell == CELL_LSTM) {
        if (ctx->n_in > 6 && ctx->in[6] && (st = check_weight(ctx, ctx->in[6], "initial_c", 3, hd)) != PTQ_OK) return st;
        if (ctx->n_in > 7 && ctx->in[7] && (st = check_weight(ctx, ctx->in[7], "P", 2, pd)) != PTQ_OK) return st;
        s->input_forget = (int)ptq_attr_int(ctx->node, "input_forget", 0);
    }
    if (cell == CELL_GRU) s->linear_before_reset = ptq_attr_int(ctx->node, "linear_before_reset", 0) != 0;
    const ptq_attr *clip = ptq_node_attr(ctx->node, "clip");
    if (clip) {
        s->clip = clip->f;
        if (!(s->clip > 0.0f)) OP_FAIL(ctx, PTQ_ERR_FORMAT, "clip %g, expected > 0", (double)s->clip);
    }

    /* activations: f (RNN), f g (GRU), f g h (LSTM) per direction */
    int per = cell == CELL_RNN ? 1 : cell == CELL_GRU ? 2 : 3;
    static const char *const defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    const ptq_attr *acts = ptq_node_attr(ctx->node, "activations");
    size_t na = 0, nb = 0, ia = 0, ib = 0;
    const float *alphas = ptq_attr_floats(ctx->node, "activation_alpha", &na);
    const float *betas = ptq_attr_floats(ctx->node, "activation_beta", &nb);
    if (acts && acts->type != PTQ_ATTR_STRINGS) OP_FAIL(ctx, PTQ_ERR_FORMAT, "activations must be a list of strings");
    if (acts && acts->n != (size_t)(per * D))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "%zu activations, expected %d (%d per direction)", acts->n, per * (int)D, per);
    for (int d = 0; d < D; d++)
        for (int k = 0; k < per; k++) {
            const char *name = acts ? acts->strings[d * per + k] : defaults[cell][k];
            size_t e = 0, ne = sizeof act_table / sizeof act_table[0];
            while (e < ne && strcasecmp(act_table[e].name, name) != 0) e++;
            if (e == ne) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "activation '%s' is not supported", name);
            rnn_act *a = &s->act[d][k];
            a->kind = act_table[e].kind;
            a->alpha = act_table[e].alpha;
            a->beta = act_table[e].beta;
            if (act_table[e].n_params >= 1 && ia < na) a->alpha = alphas[ia++];
            if (act_table[e].n_params >= 2 && ib < nb) a->beta = betas[ib++];
        }

    /* outputs: Y, Y_h, Y_c */
    for (int o = 0; o < ctx->n_out; o++) {
        ptq_tensor *y = ctx->out[o];
        if (!y) continue;
        if (o > (cell == CELL_LSTM ? 2 : 1)) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected at most %d", ctx->n_out, cell == CELL_LSTM ? 3 : 2);
        y->dtype = PTQ_F32;
        if (o == 0) {
            y->rank = 4;
            int64_t yd[4] = {s->T, D, s->B, Hd}, yl[4] = {s->B, s->T, D, Hd};
            memcpy(y->dims, s->layout ? yl : yd, sizeof yd);
        } else {
            y->rank = 3;
            memcpy(y->dims, hd, sizeof hd);
        }
    }
    /* per thread: gates G*Hd, h, c, and GRU's R.h row products Hd */
    size_t per_thread = (size_t)(G * Hd + 3 * Hd);
    ctx->scratch_bytes = per_thread * sizeof(float) * (size_t)ctx->nthreads;
    return PTQ_OK;
}

static float clipf(float v, float c)
{
    if (c <= 0.0f) return v;
    return v < -c ? -c : (v > c ? c : v);
}

/* dot product of n floats, in order */
static float dotf(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
    for (int64_t k = 0; k < n; k++) s += a[k] * b[k];
    return s;
}

static ptq_status rnn_run(ptq_op_ctx *ctx)
{
    const rnn_state *s = ctx->state;
    const float *X = ctx->in[0]->data, *W = ctx->in[1]->data, *R = ctx->in[2]->data;
    const float *Bias = ctx->n_in > 3 && ctx->in[3] ? ctx->in[3]->data : NULL;
    const int32_t *lens = ctx->n_in > 4 && ctx->in[4] ? ctx->in[4]->data : NULL;
    const float *H0 = ctx->n_in > 5 && ctx->in[5] ? ctx->in[5]->data : NULL;
    const float *C0 = s->cell == CELL_LSTM && ctx->n_in > 6 && ctx->in[6] ? ctx->in[6]->data : NULL;
    const float *P = s->cell == CELL_LSTM && ctx->n_in > 7 && ctx->in[7] ? ctx->in[7]->data : NULL;
    float *Y = ctx->n_out > 0 && ctx->out[0] ? ctx->out[0]->data : NULL;
    float *Yh = ctx->n_out > 1 && ctx->out[1] ? ctx->out[1]->data : NULL;
    float *Yc = ctx->n_out > 2 && ctx->out[2] ? ctx->out[2]->data : NULL;
    const int64_t T = s->T, B = s->B, I = s->I, Hd = s->Hd, G = s->G, D = s->D;
    const int layout = s->layout;
    if (lens)
        for (int64_t b = 0; b < B; b++)
            if (lens[b] < 0 || lens[b] > T)
                OP_FAIL(ctx, PTQ_ERR_SHAPE, "sequence_lens[%lld] = %d, expected 0 to %lld", (long long)b, lens[b], (long long)T);
    size_t per_thread = (size_t)(G * Hd + 3 * Hd);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t db = 0; db < D * B; db++) {
        int64_t d = db / B, b = db % B;
        int rev = s->reverse_only || d == 1;
        float *gates = (float *)ctx->scratch + per_thread * (size_t)omp_get_thread_num();
        float *h = gates + G * Hd, *c = h + Hd, *tmp = c + Hd;
        const float *Wd = W + d * G * Hd * I, *Rd = R + d * G * Hd * Hd;
        const float *Wb = Bias ? Bias + d * 2 * G * Hd : NULL, *Rb = Bias ? Wb + G * Hd : NULL;
        const float *Pd = P ? P + d * 3 * Hd : NULL;
        const rnn_act *f = &s->act[d][0], *g = &s->act[d][1], *hact = &s->act[d][2];
        int64_t hoff = layout ? (b * D + d) * Hd : (d * B + b) * Hd;
        for (int64_t j = 0; j < Hd; j++) {
            h[j] = H0 ? H0[hoff + j] : 0.0f;
            c[j] = C0 ? C0[hoff + j] : 0.0f;
        }
        int64_t L = lens ? lens[b] : T;
        for (int64_t step = 0; step < T; step++) {
            int64_t t = rev ? T - 1 - step : step;
            float *yt = Y ? Y + (layout ? ((b * T + t) * D + d) * Hd : ((t * D + d) * B + b) * Hd) : NULL;
            if (t >= L) { /* past the sequence's end (reverse: the steps it starts with) */
                if (yt) memset(yt, 0, (size_t)Hd * sizeof(float));
                continue;
            }
            const float *xt = X + (layout ? (b * T + t) * I : (t * B + b) * I);
            /* gate pre-activations: x.W + h.R + Wb + Rb (GRU's h gate: handled below) */
            for (int64_t j = 0; j < G * Hd; j++) {
                float v = dotf(xt, Wd + j * I, I);
                int gru_h = s->cell == CELL_GRU && j >= 2 * Hd;
                if (!gru_h) v += dotf(h, Rd + j * Hd, Hd);
                if (Wb) v += Wb[j];
                if (Wb && !gru_h) v += Rb[j];
                gates[j] = v;
            }
            if (s->cell == CELL_RNN) {
                for (int64_t j = 0; j < Hd; j++) h[j] = act_apply(f, clipf(gates[j], s->clip));
            } else if (s->cell == CELL_GRU) {
                float *z = gates, *r = gates + Hd, *hh = gates + 2 * Hd;
                for (int64_t j = 0; j < 2 * Hd; j++) gates[j] = act_apply(f, clipf(gates[j], s->clip));
                const float *Rh = Rd + 2 * Hd * Hd, *Rbh = Rb ? Rb + 2 * Hd : NULL;
                for (int64_t j = 0; j < Hd; j++) {
                    float v;
                    if (s->linear_before_reset) {
                        float rh = dotf(h, Rh + j * Hd, Hd);
                        if (Rbh) rh += Rbh[j];
                        v = hh[j] + r[j] * rh;
                    } else {
                        float rh = 0.0f;
                        for (int64_t k = 0; k < Hd; k++) rh += r[k] * h[k] * Rh[j * Hd + k];
                        v = hh[j] + rh;
                        if (Rbh) v += Rbh[j];
                    }
                    tmp[j] = act_apply(g, clipf(v, s->clip));
                }
                for (int64_t j = 0; j < Hd; j++) h[j] = (1.0f - z[j]) * tmp[j] + z[j] * h[j];
            } else {
                float *gi = gates, *go = gates + Hd, *gf = gates + 2 * Hd, *gc = gates + 3 * Hd;
                for (int64_t j = 0; j < Hd; j++) {
                    float vi = gi[j], vf = gf[j];
                    if (Pd) vi += Pd[j] * c[j], vf += Pd[2 * Hd + j] * c[j];
                    float it = act_apply(f, clipf(vi, s->clip));
                    float ft = s->input_forget ? 1.0f - it : act_apply(f, clipf(vf, s->clip));
                    float ct = act_apply(g, clipf(gc[j], s->clip));
                    c[j] = ft * c[j] + it * ct;
                    float vo = go[j];
                    if (Pd) vo += Pd[Hd + j] * c[j];
                    float ot = act_apply(f, clipf(vo, s->clip));
                    tmp[j] = ot * act_apply(hact, c[j]);
                }
                memcpy(h, tmp, (size_t)Hd * sizeof(float));
            }
            if (yt) memcpy(yt, h, (size_t)Hd * sizeof(float));
        }
        if (Yh) memcpy(Yh + hoff, h, (size_t)Hd * sizeof(float));
        if (Yc) memcpy(Yc + hoff, c, (size_t)Hd * sizeof(float));
    }
    return PTQ_OK;
}

static ptq_status rnn_infer(ptq_op_ctx *ctx)
{
    return rnn_infer_cell(ctx, CELL_RNN);
}

static ptq_status gru_infer(ptq_op_ctx *ctx)
{
    return rnn_infer_cell(ctx, CELL_GRU);
}

static ptq_status lstm_infer(ptq_op_ctx *ctx)
{
    return rnn_infer_cell(ctx, CELL_LSTM);
}

const ptq_op_def op_rnn = {rnn_infer, rnn_run, ptq_op_free_state, 0};
const ptq_op_def op_gru = {gru_infer, rnn_run, ptq_op_free_state, 0};
const ptq_op_def op_lstm = {lstm_infer, rnn_run, ptq_op_free_state, 0};
