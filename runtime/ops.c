/* ops.c: the op table generated from ops.def, lookup by name, shared op helpers. */
#include <math.h>

#include "runtime/kernels/mathf.h"
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* Weak references: an op whose kernel file is missing resolves to NULL and is
 * reported as unsupported instead of breaking the link. tests/unit/test_ops.c
 * checks that every op in ops.def has its kernel. */
#define OP(id, name, sym) extern const ptq_op_def op_##sym __attribute__((weak));
#include "ops.def"
#undef OP

static const ptq_op_def *const op_table[] = {
#define OP(id, name, sym) &op_##sym,
#include "ops.def"
#undef OP
};

static const char *const op_names[] = {
#define OP(id, name, sym) name,
#include "ops.def"
#undef OP
};

_Static_assert(sizeof op_table / sizeof op_table[0] == PTQ_OP_COUNT, "op table out of step with ops.def");
_Static_assert(sizeof op_names / sizeof op_names[0] == PTQ_OP_COUNT, "op names out of step with ops.def");

int ptq_op_find(const char *domain, const char *op_type)
{
    if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0) return -1;
    for (int i = 0; i < PTQ_OP_COUNT; i++)
        if (strcmp(op_names[i], op_type) == 0) return i;
    return -1;
}

const ptq_op_def *ptq_op_get(int id)
{
    return id >= 0 && id < PTQ_OP_COUNT ? op_table[id] : NULL;
}

const char *ptq_op_name(int id)
{
    return id >= 0 && id < PTQ_OP_COUNT ? op_names[id] : "?";
}

void ptq_op_free_state(void *state)
{
    free(state);
}

ptq_status ptq_op_check_inputs(const ptq_op_ctx *ctx, int lo, int hi)
{
    if (ctx->n_in < lo || ctx->n_in > hi) {
        if (lo == hi) OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d inputs, expected %d", ctx->n_in, lo);
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "%d inputs, expected %d to %d", ctx->n_in, lo, hi);
    }
    for (int i = 0; i < lo; i++)
        if (!ctx->in[i]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "required input %d is missing", i);
    return PTQ_OK;
}

void ptq_activation_apply(const ptq_activation *act, float *x, size_t n)
{
    switch (act->kind) {
    case PTQ_ACT_NONE:
        break;
    case PTQ_ACT_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case PTQ_ACT_CLIP:
        for (size_t i = 0; i < n; i++) {
            float v = x[i] < act->alpha ? act->alpha : x[i];
            x[i] = v > act->beta ? act->beta : v;
        }
        break;
    case PTQ_ACT_LEAKY_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] >= 0.0f ? x[i] : x[i] * act->alpha;
        break;
    case PTQ_ACT_SIGMOID:
        for (size_t i = 0; i < n; i++) x[i] = ptq_sigmoidf(x[i]);
        break;
    case PTQ_ACT_HARD_SIGMOID:
        for (size_t i = 0; i < n; i++) {
            float v = act->alpha * x[i] + act->beta;
            x[i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
        }
        break;
    case PTQ_ACT_HARD_SWISH:
        for (size_t i = 0; i < n; i++) {
            float v = x[i] / 6.0f + 0.5f;
            v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
            x[i] = x[i] * v;
        }
        break;
    case PTQ_ACT_HARD_SWISH_DIV6:
        for (size_t i = 0; i < n; i++) {
            float v = x[i] + 3.0f;
            v = v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
            x[i] = x[i] * v / 6.0f;
        }
        break;
    }
    if (act->has_post) {
        float m = act->post_mul, a = act->post_add;
        for (size_t i = 0; i < n; i++) x[i] = x[i] * m + a;
    }
}
