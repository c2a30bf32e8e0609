/* loss.c: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12..13), as the
 * ONNX operator spec and its reference implementation define them.
 *
 *   input/scores [N, C, d1..dk] (k >= 0; float16/32/64), target/labels [N, d1..dk]
 *   (int32/int64), optional weight [C]. D = d1 * .. * dk (1 when k = 0).
 *   NLL:  loss[n, d] = -w[t] * input[n, t, d], t = target[n, d], w = weight or 1;
 *         a target equal to ignore_index gives loss 0 and weight 0.
 *   SCE:  log_prob = log_softmax(scores, axis 1) (optional second output), then NLL on it.
 *   reduction: none -> [N, d1..dk]; sum -> scalar sum; mean -> sum(w * loss) / sum(w)
 *   (no weight and no ignore_index: the plain mean over N * D; 0 / 0 = NaN as in the reference).
 * A target outside [0, C) that is not ignore_index is an error naming the element.
 * Computed in double, summed serially in element order (one thread: the bits never depend
 * on the thread count), rounded once to the output type. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "runtime/op.h"
#include "runtime/ops/nary.h"
#include "runtime/shape.h"

typedef enum { RED_NONE, RED_SUM, RED_MEAN } loss_red;

typedef struct {
    loss_red red;
    int has_ignore;
    int64_t ignore;
    int64_t n, c, d; /* N, C, D */
    int softmax;
} loss_state;

static ptq_status loss_infer(ptq_op_ctx *ctx, int softmax)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 3);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *t = ctx->in[1], *w = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!ptq_dtype_is_float(x->dtype)) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input is %s, expected a float type", ptq_dtype_name(x->dtype));
    if (t->dtype != PTQ_I32 && t->dtype != PTQ_I64)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "target is %s, expected int32 or int64", ptq_dtype_name(t->dtype));
    if (x->rank < 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected at least 2 ([N, C, ...])", x->rank);
    if (t->rank != x->rank - 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "target rank %d, expected %d", t->rank, x->rank - 1);
    if (t->dims[0] != x->dims[0]) OP_FAIL(ctx, PTQ_ERR_SHAPE, "target dim 0 is %lld, input's N is %lld", (long long)t->dims[0], (long long)x->dims[0]);
    for (int d = 2; d < x->rank; d++)
        if (t->dims[d - 1] != x->dims[d])
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "target dim %d is %lld, input dim %d is %lld", d - 1, (long long)t->dims[d - 1], d,
                    (long long)x->dims[d]);
    if (w) {
        if (w->dtype != x->dtype) OP_FAIL(ctx, PTQ_ERR_FORMAT, "weight is %s, input is %s", ptq_dtype_name(w->dtype), ptq_dtype_name(x->dtype));
        if (w->rank != 1 || w->dims[0] != x->dims[1])
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "weight must be 1-D of C = %lld values", (long long)x->dims[1]);
    }
    const char *r = ptq_attr_string(ctx->node, "reduction", "mean");
    loss_red red;
    if (strcmp(r, "none") == 0) red = RED_NONE;
    else if (strcmp(r, "sum") == 0) red = RED_SUM;
    else if (strcmp(r, "mean") == 0) red = RED_MEAN;
    else OP_FAIL(ctx, PTQ_ERR_FORMAT, "reduction '%s', expected none, sum or mean", r);
    if (ctx->n_out < 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "output 0 is missing");
    if (ctx->n_out > (softmax ? 2 : 1)) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d outputs, expected at most %d", ctx->n_out, softmax ? 2 : 1);
    loss_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->red = red;
    s->softmax = softmax;
    s->has_ignore = ptq_node_attr(ctx->node, "ignore_index") != NULL;
    s->ignore = ptq_attr_int(ctx->node, "ignore_index", 0);
    s->n = x->dims[0];
    s->c = x->dims[1];
    s->d = 1;
    for (int d = 2; d < x->rank; d++) s->d *= x->dims[d];
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    if (red == RED_NONE) ptq_shape_copy(y, t);
    else y->rank = 0;
    if (softmax && ctx->n_out > 1 && ctx->out[1]) {
        ctx->out[1]->dtype = x->dtype;
        ptq_shape_copy(ctx->out[1], x);
    }
    /* scratch: log_prob in double when the second output is absent or not double */
    ctx->scratch_bytes = softmax ? sizeof(double) * ptq_tensor_numel(x) : 0;
    return PTQ_OK;
}

static ptq_status nll_infer(ptq_op_ctx *ctx) { return loss_infer(ctx, 0); }
static ptq_status sce_infer(ptq_op_ctx *ctx) { return loss_infer(ctx, 1); }

static ptq_status loss_run(ptq_op_ctx *ctx)
{
    const loss_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0], *t = ctx->in[1], *w = ctx->n_in > 2 ? ctx->in[2] : NULL;
    ptq_tensor *y = ctx->out[0];
    int64_t N = s->n, C = s->c, D = s->d;
    double *lp = ctx->scratch;
    if (s->softmax) { /* log_softmax over C for every (n, d) */
        for (int64_t n = 0; n < N; n++)
            for (int64_t d = 0; d < D; d++) {
                size_t base = (size_t)(n * C * D + d);
                double m = -(double)INFINITY, sum = 0.0;
                for (int64_t c = 0; c < C; c++) {
                    double v = ptq_tensor_get_f64(x, base + (size_t)(c * D));
                    m = v > m ? v : m;
                }
                for (int64_t c = 0; c < C; c++) sum += ptq_exp(ptq_tensor_get_f64(x, base + (size_t)(c * D)) - m);
                double ls = ptq_log(sum);
                for (int64_t c = 0; c < C; c++) {
                    size_t i = base + (size_t)(c * D);
                    lp[i] = ptq_tensor_get_f64(x, i) - m - ls;
                }
            }
        if (ctx->n_out > 1 && ctx->out[1]) {
            size_t nx = ptq_tensor_numel(x);
            for (size_t i = 0; i < nx; i++) ptq_store_f64(ctx->out[1], i, lp[i]);
        }
    }
    double total = 0.0, wsum = 0.0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            size_t ti = (size_t)(n * D + d);
            int64_t tc = ptq_tensor_get_i64(t, ti);
            double l = 0.0, wt = 0.0;
            if (!(s->has_ignore && tc == s->ignore)) {
                if (tc < 0 || tc >= C)
                    OP_FAIL(ctx, PTQ_ERR_ARG, "target %lld at element %zu is outside [0, %lld)", (long long)tc, ti, (long long)C);
                size_t xi = (size_t)((n * C + tc) * D + d);
                double v = s->softmax ? lp[xi] : ptq_tensor_get_f64(x, xi);
                wt = w ? ptq_tensor_get_f64(w, (size_t)tc) : 1.0;
                l = -v * wt;
            }
            if (s->red == RED_NONE) ptq_store_f64(y, ti, l);
            total += l;
            wsum += wt;
        }
    if (s->red == RED_SUM) ptq_store_f64(y, 0, total);
    else if (s->red == RED_MEAN) ptq_store_f64(y, 0, total / wsum);
    return PTQ_OK;
}

const ptq_op_def op_negative_log_likelihood_loss = {nll_infer, loss_run, ptq_op_free_state, 0};
const ptq_op_def op_softmax_cross_entropy_loss = {sce_infer, loss_run, ptq_op_free_state, 0};
