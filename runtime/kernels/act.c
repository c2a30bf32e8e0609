/* act.c: vectorised fused activations (see act.h). Every formula mirrors
 * ptq_activation_apply in runtime/ops.c; test_ops_conv checks them bit for bit.
 *
 * Division by 6 (the hard-swish forms) is the slow part of a float division loop; it is
 * computed as div6(y) = (float)((double)y * (1.0 / 6.0)), which equals the correctly
 * rounded y / 6.0f for every float y. With u the float spacing at y / 6, y is a multiple
 * of 4u while 6 times a rounding midpoint (k + 1/2) u is an odd multiple of u, so y / 6
 * lies at least u / 6 (|y / 6| * 2^-26.6) from every midpoint; the double product is
 * within |y / 6| * 2^-52 of y / 6 and rounds to the same float. Infinities and NaN
 * pass through as with the division (checked over all 2^32 floats once; the unit test
 * samples them). */
#include "runtime/kernels/act.h"

#include "runtime/kernels/mathf.h"

static inline float div6(float y)
{
    return (float)((double)y * (1.0 / 6.0));
}

/* y / 6 correctly rounded in either exact form (gcc unswitches the loops on the invariant fdiv). */
static inline float by6(float y, int fdiv)
{
    return fdiv ? y / 6.0f : div6(y);
}

/* Which of the two exact forms of y / 6 is faster here: the division (vdivps) on AVX2 cores
 * (AMD Zen 3: 0.30 against 0.74 cycles per element for the hard-swish loop), the double
 * product where AVX-512 runs it (zmm division is the slow case there). Same bytes either way. */
static int use_fdiv(void)
{
    static int v = -1;
    if (v < 0) v = !__builtin_cpu_supports("avx512f");
    return v;
}

int kern_act_active(const ptq_activation *act)
{
    return act->kind != PTQ_ACT_NONE || act->has_post;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
act_loop(int kind, float alpha, float beta, int has_post, float pm, float pa, float *restrict x, size_t n, int fdiv)
{
    switch (kind) {
    case PTQ_ACT_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case PTQ_ACT_CLIP:
        for (size_t i = 0; i < n; i++) {
            float v = x[i] < alpha ? alpha : x[i];
            x[i] = v > beta ? beta : v;
        }
        break;
    case PTQ_ACT_LEAKY_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] >= 0.0f ? x[i] : x[i] * alpha;
        break;
    case PTQ_ACT_SIGMOID:
        for (size_t i = 0; i < n; i++) x[i] = ptq_sigmoidf(x[i]);
        break;
    case PTQ_ACT_HARD_SIGMOID:
        for (size_t i = 0; i < n; i++) {
            float v = alpha * x[i] + beta;
            x[i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
        }
        break;
    case PTQ_ACT_HARD_SWISH:
        for (size_t i = 0; i < n; i++) {
            float v = by6(x[i], fdiv) + 0.5f;
            v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
            x[i] = x[i] * v;
        }
        break;
    case PTQ_ACT_HARD_SWISH_DIV6:
        for (size_t i = 0; i < n; i++) {
            float v = x[i] + 3.0f;
            v = v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
            x[i] = by6(x[i] * v, fdiv);
        }
        break;
    default:
        break;
    }
    if (has_post)
        for (size_t i = 0; i < n; i++) x[i] = x[i] * pm + pa;
}

void kern_act_f32(const ptq_activation *act, float *x, size_t n)
{
    switch (act->kind) {
    case PTQ_ACT_NONE:
    case PTQ_ACT_RELU:
    case PTQ_ACT_CLIP:
    case PTQ_ACT_LEAKY_RELU:
    case PTQ_ACT_SIGMOID:
    case PTQ_ACT_HARD_SIGMOID:
    case PTQ_ACT_HARD_SWISH:
    case PTQ_ACT_HARD_SWISH_DIV6:
        if (act->kind != PTQ_ACT_NONE || act->has_post)
            act_loop((int)act->kind, act->alpha, act->beta, act->has_post, act->post_mul, act->post_add, x, n, use_fdiv());
        return;
    default: /* any kind added later: the shared scalar version */
        ptq_activation_apply(act, x, n);
        return;
    }
}
