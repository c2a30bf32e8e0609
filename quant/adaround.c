/* adaround.c: AdaRound for one layer (see adaround.h for the contract).
 *
 * Setup: the quotient r = W/s is taken in float as quant_round_s8 does, base = floor(r),
 * V is set so that h(V) = r - base (the fraction kept 1e-3 away from 0 and 1, so every
 * trained weight starts with a live gradient); a weight with r an integer in range is
 * frozen at h = 0 (V = -30: the rectified sigmoid is clamped, so its gradient and Adam
 * step are exactly 0). x is multiplied once by W into the target yT [p x cout]; a sampled
 * position is one contiguous row of xq (of a tap-major copy for a depthwise layer).
 *
 * Iteration t: positions idx[0..batch) from splitmix64(seed, t); each thread copies their
 * rows (the columns of its groups) into its own G [batch x groups*k] and their targets (its
 * channels) into its ys [batch x cout]; then, for its share of the output channels (an even
 * split in runs of 8), it runs
 *   r  = s (Q G^T) - ys       (Q the soft codes W~ / s; kern_sgemm, or plain loops for
 *                              2 or 3 channels per group)
 *   gQ = (2 s / batch) r G    (the gradient of the mean squared error w.r.t. Q)
 * and the element-wise pass over its weights: the gradient through the clamp to
 * [-128, 127] and the rectified sigmoid (zero where either is clamped), the regulariser's
 * -2 lambda beta |2h-1|^(beta-1) sign(2h-1) after the warm-up, Adam, then the new h and W~
 * for the next iteration (one sigmoid per weight per iteration; baseline, AVX2 and
 * AVX-512 copies of that loop, the same bits: basic operations only, no FMA contraction
 * under -std=c11). Every output element of
 * every product is one sum in a fixed order, and tasks own their channels, so the thread
 * count changes nothing. A depthwise layer (one channel per group) keeps its weights' state
 * and its patches tap-major ([k x cout], [p x k x cout]) and runs the same sums across
 * channels, reading the sampled rows in place (ada_dw_impl).
 *
 * End: harden, evaluate learned and nearest codes per channel on all p positions (the loss
 * summed in double in position order); a channel keeps its learned codes unless their loss
 * is strictly higher. */
#include "quant/adaround.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "quant/qdq.h"
#include "runtime/kernels/mathf.h"
#include "runtime/kernels/sgemm.h"

#define ADA_SPAN 1.2f   /* zeta - gamma, zeta = 1.1 */
#define ADA_GAMMA -0.1f /* gamma */
#define ADA_FRAC_EPS 1e-3f
#define ADA_FROZEN_V -30.0f
#define ADA_ADAM_B1 0.9f
#define ADA_ADAM_B2 0.999f
#define ADA_ADAM_EPS 1e-8f
#define ADA_GEMM_MIN_ROWS 4          /* channels per group from which kern_sgemm is used */
#define ADA_TILE_ROWS 32             /* channels per evaluation task on the GEMM path */
#define ADA_PLAIN_TASK_FLOATS 2048   /* weights per task on the plain path */
#define ADA_THREAD_WEIGHTS 1024      /* weights per thread, at least (smaller layers use fewer) */
#define ADA_UNIT_ROWS 8              /* the iterations split channels among threads in runs of 8 */
#define ADA_EVAL_TILE 256            /* positions per evaluation block */

quant_adaround_options quant_adaround_defaults(void)
{
    quant_adaround_options o;
    memset(&o, 0, sizeof o);
    o.iters = 500;
    o.batch = 64;
    o.lambda = 0.01f;
    o.beta_hi = 20.0f;
    o.beta_lo = 2.0f;
    o.warmup = 0.2f;
    o.lr = 1e-2f;
    o.seed = 0;
    o.nthreads = 0;
    return o;
}

/* ------------------------------------------------------------ helpers */

static uint64_t ada_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Positions of iteration t: uniform in [0, p), with replacement. */
static void ada_sample(uint64_t seed, int t, int p, int batch, int *idx)
{
    uint64_t s = seed;
    uint64_t mix = ada_splitmix(&s) ^ (uint64_t)(uint32_t)t * 0xd1342543de82ef95u;
    s = mix;
    for (int b = 0; b < batch; b++) idx[b] = (int)(((ada_splitmix(&s) >> 32) * (uint64_t)p) >> 32);
}

/* C [m x n] = op(A) op(B), kern_sgemm's conventions (accumulate 0). gemm == 0: plain loops,
 * each element summed in k order (a depthwise layer's rows are too few to pack). */
static void ada_mm(int gemm, int ta, int tb, int64_t m, int64_t n, int64_t kk, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float *c, int64_t ldc)
{
    if (gemm) {
        kern_sgemm(ta, tb, m, n, kk, a, lda, b, ldb, 0, c, ldc);
        return;
    }
    int64_t sai = ta ? 1 : lda, sap = ta ? lda : 1, sbp = tb ? 1 : ldb, sbj = tb ? ldb : 1;
    if (tb) { /* rows of B contiguous: one dot product per element (the same sums) */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float acc = 0.0f;
                for (int64_t q = 0; q < kk; q++) acc += a[i * sai + q * sap] * b[j * ldb + q];
                c[i * ldc + j] = acc;
            }
        return;
    }
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        for (int64_t j = 0; j < n; j++) ci[j] = 0.0f;
        for (int64_t q = 0; q < kk; q++) {
            float av = a[i * sai + q * sap];
            const float *bq = b + q * sbp;
            for (int64_t j = 0; j < n; j++) ci[j] += av * bq[j * sbj];
        }
    }
}

/* max(x, lo) and min(x, hi) by bit-mask selects (a ternary becomes a branch under
 * -ftrapping-math, which keeps gcc from vectorising the loop) */
static inline float ada_max(float x, float lo)
{
    return ptq_mathf_sel_f(x > lo, x, lo);
}

static inline float ada_min(float x, float hi)
{
    return ptq_mathf_sel_f(x < hi, x, hi);
}

/* h = clamp(sigmoid * (zeta - gamma) + gamma, 0, 1) from the sigmoid */
static inline float ada_h(float sg)
{
    return ada_min(ada_max(sg * ADA_SPAN + ADA_GAMMA, 0.0f), 1.0f);
}

/* the soft code clamp(base + h, -128, 127) (W~ / s) */
static inline float ada_code(float base, float h)
{
    return ada_min(ada_max(base + h, -128.0f), 127.0f);
}

/* sqrt(v) for a finite v >= 0 from basic operations: two Newton steps on the reciprocal
 * square root from the bit-trick estimate (relative error below 1e-6; 0 for v < 1e-30,
 * far below Adam's eps). libm's sqrtf sets errno, a branch that keeps gcc from vectorising. */
static inline float ada_sqrt(float v)
{
    float x = ada_max(v, 1e-30f);
    float y = ptq_mathf_from_bits_f(0x5f375a86u - (ptq_mathf_bits_f(x) >> 1));
    float hx = 0.5f * x;
    y = y * (1.5f - hx * y * y);
    y = y * (1.5f - hx * y * y);
    return ptq_mathf_sel_f(v > 1e-30f, x * y, 0.0f);
}

/* Float-only exponential and logarithm for the update loop, about 1e-7 relative error
 * (AdaRound's gradient needs no more; mathf.h's correctly rounded double-core versions cost
 * several times more in the loop that runs once per weight per iteration). Basic operations
 * only, so every ISA copy gives the same bits. */
#define ADA_ROUND_MAGIC 0x1.8p23f /* adding it rounds to an integer kept in the low bits */

/* e^x for x in [-80, 80] (clamped): 2^n e^g, n = round(x / ln 2), |g| <= ln 2 / 2, e^g by its
 * Taylor polynomial of degree 7 (remainder below 6e-9). */
static inline float ada_expf(float x)
{
    x = ada_min(ada_max(x, -80.0f), 80.0f);
    float t = x * 1.44269504f + ADA_ROUND_MAGIC;
    float n = t - ADA_ROUND_MAGIC;
    float g = (x - n * 0.693145752f) - n * 1.42860677e-6f; /* ln 2 in two parts: n * hi is exact */
    float p = 1.0f / 5040.0f;
    p = 1.0f / 720.0f + g * p;
    p = 1.0f / 120.0f + g * p;
    p = 1.0f / 24.0f + g * p;
    p = 1.0f / 6.0f + g * p;
    p = 0.5f + g * p;
    p = 1.0f + g * p;
    p = 1.0f + g * p;
    /* t's low bits hold n (two's complement): (n + 127) << 23 is 2^n, |n| <= 116 */
    float s = ptq_mathf_from_bits_f((ptq_mathf_bits_f(t) - 0x4b400000u + 127u) << 23);
    return p * s;
}

/* log x for a normal x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1,
 * s = f / (2 + f), log m = 2 atanh s by its series to s^9 (|s| < 0.172: remainder below 1e-9). */
static inline float ada_logf(float x)
{
    uint32_t u = ptq_mathf_bits_f(x);
    uint32_t k = (u - 0x3f3504f3u + (256u << 23)) >> 23; /* e + 256, kept non-negative */
    float f = ptq_mathf_from_bits_f(u - (k << 23) + (256u << 23)) - 1.0f;
    float e = (float)(int32_t)k - 256.0f;
    float sv = f / (2.0f + f), z = sv * sv;
    float r = 2.0f / 9.0f;
    r = 2.0f / 7.0f + z * r;
    r = 2.0f / 5.0f + z * r;
    r = 2.0f / 3.0f + z * r;
    r = 2.0f + z * r;
    return e * 0.693147182f + sv * r;
}

/* One Adam step on n weights, then their new sigmoid and soft code. gw is the gradient of
 * the loss w.r.t. the soft code (the scale already in).
 * reg: the regulariser is on (gradient factor lam2b = -2 lambda beta, exponent bm1 =
 * beta - 1). Branch-free, basic operations and mathf.h only: the AVX2 copy below (no FMA,
 * and ptq builds without contraction) gives the same bits as the baseline one. */
#define ADA_INLINE static inline __attribute__((always_inline))
ADA_INLINE void ada_update_impl(int reg, size_t n, const float *restrict base, const float *restrict gw,
                                float *restrict V, float *restrict m, float *restrict v, float *restrict sig,
                                float *restrict wt, float lam2b, float bm1, float step, float rs)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float sg = sig[i];
        float raw = sg * ADA_SPAN + ADA_GAMMA;
        float h = ada_min(ada_max(raw, 0.0f), 1.0f);
        float live = ptq_mathf_sel_f((raw > 0.0f) & (raw < 1.0f), 1.0f, 0.0f);
        float q = base[i] + h;
        float inr = ptq_mathf_sel_f((q >= -128.0f) & (q <= 127.0f), 1.0f, 0.0f);
        float gh = gw[i] * inr;
        if (reg) { /* a constant in each copy */
            float u = 2.0f * h - 1.0f;
            float au = ptq_mathf_from_bits_f(ptq_mathf_bits_f(u) & 0x7fffffffu);
            float pw = ada_expf(bm1 * ada_logf(ptq_mathf_sel_f(au > 0x1p-100f, au, 1.0f))); /* |u|^(beta-1) */
            pw = ptq_mathf_sel_f(au > 0x1p-100f, pw, 0.0f);
            gh += lam2b * ptq_mathf_copysign_f(pw, u);
        }
        float g = gh * (ADA_SPAN * sg * (1.0f - sg) * live);
        float mi = ADA_ADAM_B1 * m[i] + (1.0f - ADA_ADAM_B1) * g;
        float vi = ADA_ADAM_B2 * v[i] + (1.0f - ADA_ADAM_B2) * (g * g);
        m[i] = mi;
        v[i] = vi;
        float Vi = V[i] - step * mi / (ada_sqrt(vi) * rs + ADA_ADAM_EPS);
        V[i] = Vi;
        sg = 1.0f / (1.0f + ada_expf(-Vi));
        sig[i] = sg;
        wt[i] = ada_code(base[i], ada_h(sg));
    }
}

#define ADA_UPDATE_ARGS                                                                                             \
    int reg, size_t n, const float *restrict base, const float *restrict gw, float *restrict V,           \
        float *restrict m, float *restrict v, float *restrict sig, float *restrict wt, float lam2b, float bm1,      \
        float step, float rs
#define ADA_UPDATE_BODY                                                                                             \
    if (reg)                                                                                                        \
        ada_update_impl(1, n, base, gw, V, m, v, sig, wt, lam2b, bm1, step, rs);                                 \
    else                                                                                                            \
        ada_update_impl(0, n, base, gw, V, m, v, sig, wt, lam2b, bm1, step, rs);

static void ada_update_base(ADA_UPDATE_ARGS)
{
    ADA_UPDATE_BODY
}

/* baseline x86-64 (SSE2) lacks the 64-bit lane operations of mathf.h's double cores, so
 * only these copies are vectorised (4 or 8 doubles a vector) */
__attribute__((target("avx2"))) static void ada_update_avx2(ADA_UPDATE_ARGS)
{
    ADA_UPDATE_BODY
}

__attribute__((target("avx512f"))) static void ada_update_avx512(ADA_UPDATE_ARGS)
{
    ADA_UPDATE_BODY
}

typedef void (*ada_update_fn)(ADA_UPDATE_ARGS);

/* out[c] = sum over taps i of w[i * C + c] x[i * C + c] for c < n (tap-major rows of stride
 * C), each from 0 in tap order, as ada_mm's plain loops sum it: a depthwise layer's outputs
 * across channels. */
ADA_INLINE void ada_dw_dot(int k, size_t C, int n, const float *restrict w, const float *restrict x,
                           float *restrict out)
{
#pragma omp simd
    for (int c = 0; c < n; c++) out[c] = 0.0f;
    for (int i = 0; i < k; i++) {
        const float *restrict wi = w + (size_t)i * C, *restrict xi = x + (size_t)i * C;
#pragma omp simd
        for (int c = 0; c < n; c++) out[c] += wi[c] * xi[c];
    }
}

/* Channels c0 .. c1 of one position's int8 patch row [k x C] as the floats they stand for,
 * (float)code * xstep: the input DequantizeLinear's own product, so the same bits. */
ADA_INLINE void ada_dw_expand(int k, size_t C, int c0, int c1, const int8_t *restrict q, float xstep, float *restrict out)
{
    for (int i = 0; i < k; i++) {
        const int8_t *restrict qi = q + (size_t)i * C;
        float *restrict oi = out + (size_t)i * C;
#pragma omp simd
        for (int c = c0; c < c1; c++) oi[c] = (float)qi[c] * xstep;
    }
}

/* One iteration's products for channels c0 .. c1 of a depthwise layer (one channel per
 * group), vectorised across channels. Layout: the weights' state and gw are [k x cout], the
 * patches xqT [p x k x cout] (tap-major, channel fastest), the targets yT [p x cout] and r
 * [batch x cout]; the sampled rows idx are read where they lie, without a gathered copy (or,
 * kept as int8 codes xq8, expanded one at a time into row).
 * Every element is the same sum in the same order as the plain loops of ada_mm (the dot
 * product over the taps from 0, then the gradient over the positions from 0), with
 * separate multiplies and adds: the same bits in every copy. */
ADA_INLINE void ada_dw_impl(int k, int B, int cout, int c0, int c1, const float *restrict wt, const float *restrict xqT,
                            const int8_t *restrict xq8, float xstep, float *restrict row, const float *restrict yT,
                            const int *restrict idx, const float *restrict scale, float *restrict r,
                            float *restrict gw)
{
    const float twob = 2.0f / (float)B;
    const size_t gk = (size_t)k * cout;
    for (int i = 0; i < k; i++) {
        float *restrict gi = gw + (size_t)i * cout;
#pragma omp simd
        for (int c = c0; c < c1; c++) gi[c] = 0.0f;
    }
    /* position by position: its residual, then its share of the gradient while its patch
     * is in cache (each gradient element still summed over the positions in order) */
    for (int b = 0; b < B; b++) {
        float *restrict rb = r + (size_t)b * cout;
        const float *restrict gb = xq8 ? row : xqT + (size_t)idx[b] * gk;
        if (xq8) ada_dw_expand(k, (size_t)cout, c0, c1, xq8 + (size_t)idx[b] * gk, xstep, row);
        ada_dw_dot(k, (size_t)cout, c1 - c0, wt + c0, gb + c0, rb + c0);
        const float *restrict yb = yT + (size_t)idx[b] * cout;
#pragma omp simd
        for (int c = c0; c < c1; c++) rb[c] = (scale[c] * rb[c] - yb[c]) * (twob * scale[c]);
        for (int i = 0; i < k; i++) {
            float *restrict gi = gw + (size_t)i * cout;
            const float *restrict xi = gb + (size_t)i * cout;
#pragma omp simd
            for (int c = c0; c < c1; c++) gi[c] += rb[c] * xi[c];
        }
    }
}

#define ADA_DW_ARGS                                                                                                 \
    int k, int B, int cout, int c0, int c1, const float *restrict wt, const float *restrict xqT,                    \
        const int8_t *restrict xq8, float xstep, float *restrict row, const float *restrict yT,                    \
        const int *restrict idx, const float *restrict scale, float *restrict r, float *restrict gw

static void ada_dw_base(ADA_DW_ARGS)
{
    ada_dw_impl(k, B, cout, c0, c1, wt, xqT, xq8, xstep, row, yT, idx, scale, r, gw);
}

__attribute__((target("avx2"))) static void ada_dw_avx2(ADA_DW_ARGS)
{
    ada_dw_impl(k, B, cout, c0, c1, wt, xqT, xq8, xstep, row, yT, idx, scale, r, gw);
}

__attribute__((target("avx512f"))) static void ada_dw_avx512(ADA_DW_ARGS)
{
    ada_dw_impl(k, B, cout, c0, c1, wt, xqT, xq8, xstep, row, yT, idx, scale, r, gw);
}

typedef void (*ada_dw_fn)(ADA_DW_ARGS);

/* ------------------------------------------------------------ state */

typedef struct {
    int cout, k, groups, cg, p, batch, gemm;
    int dw;                                  /* one channel per group (depthwise): the layout below */
    const float *scale;
    float *base, *V, *m, *v, *sig, *wt, *gw; /* [cout x k]; wt: soft codes W~ / s */
    const float *xqT;                        /* [p x groups*k]: position j's patches, all groups */
    float *xq_dw;                            /* depthwise: the tap-major copy xqT points to */
    int8_t *xq8;                             /* or, depthwise on a quantized input: its codes, tap-major */
    float xstep;                             /* the codes' scale */
    float *yT;                               /* [p x cout] target W x */
    float *G;                                /* per thread [batch x groups*k]: sampled rows of xqT
                                              * (depthwise: one row, the int8 codes as floats) */
    float *ys;                               /* per thread [batch x cout]: sampled targets */
    float *r;                                /* [cout x batch] residuals */
    int *idx;                                /* [threads x batch] sampled positions */
    int ntask;
    int *task; /* task i: channels task[i] .. task[i+1] */
    ada_update_fn update;
    ada_dw_fn dw_task;
} ada_state;

static void ada_free(ada_state *a)
{
    free(a->base);
    free(a->V);
    free(a->m);
    free(a->v);
    free(a->sig);
    free(a->wt);
    free(a->gw);
    free(a->xq_dw);
    free(a->xq8);
    free(a->yT);
    free(a->G);
    free(a->ys);
    free(a->r);
    free(a->idx);
    free(a->task);
}

/* Where weight (c, i) lives in the state arrays: [cout x k], or [k x cout] for a depthwise
 * layer (so that its products run across channels). */
static inline size_t ada_at(const ada_state *a, int c, int i)
{
    return a->dw ? (size_t)i * (size_t)a->cout + (size_t)c : (size_t)c * (size_t)a->k + (size_t)i;
}

/* Channel tiles: on the GEMM path up to ADA_TILE_ROWS channels inside one group, else
 * about ADA_PLAIN_TASK_FLOATS weights' worth of channels. From the shapes alone. */
static int ada_tasks(ada_state *a)
{
    int per = a->gemm ? ADA_TILE_ROWS : (int)(ADA_PLAIN_TASK_FLOATS / a->k > 0 ? ADA_PLAIN_TASK_FLOATS / a->k : 1);
    int n = 0, cap = a->cout + 1;
    a->task = malloc(sizeof(int) * (size_t)(cap + 1));
    if (!a->task) return -1;
    if (a->gemm) {
        for (int g = 0; g < a->groups; g++)
            for (int c = 0; c < a->cg; c += per) a->task[n++] = g * a->cg + c;
    } else {
        for (int c = 0; c < a->cout; c += per) a->task[n++] = c;
    }
    a->task[n] = a->cout;
    a->ntask = n;
    return 0;
}

/* One iteration's products and update for channels c0 .. c1: the sampled patches and
 * targets gathered into G0 and ys, or (depthwise) read in place at rows idx, G0 then the
 * thread's row for int8 patches. */
static void ada_task(ada_state *a, float *G0, const float *ys, const int *idx, int c0, int c1, int reg,
                     float lam2b, float bm1, float step, float rs)
{
    const int k = a->k, B = a->batch, cout = a->cout;
    if (a->dw) {
        a->dw_task(k, B, cout, c0, c1, a->wt, a->xqT, a->xq8, a->xstep, G0, a->yT, idx, a->scale, a->r, a->gw);
        for (int i = 0; i < k; i++) {
            size_t o = (size_t)i * cout + (size_t)c0;
            a->update(reg, (size_t)(c1 - c0), a->base + o, a->gw + o, a->V + o, a->m + o, a->v + o, a->sig + o,
                      a->wt + o, lam2b, bm1, step, rs);
        }
        return;
    }
    const int64_t ldg = (int64_t)a->groups * k;
    const float twob = 2.0f / (float)B;
    for (int c = c0; c < c1;) {
        int g = c / a->cg, ce = (g + 1) * a->cg < c1 ? (g + 1) * a->cg : c1;
        const float *G = G0 + (size_t)g * k;
        float *r = a->r + (size_t)c * B;
        ada_mm(a->gemm, 0, 1, ce - c, B, k, a->wt + (size_t)c * k, k, G, ldg, r, B);
        for (int i = c; i < ce; i++, r += B) {
            float s = a->scale[i], f = twob * s; /* d loss / d code = s * d loss / d W~ */
            for (int b = 0; b < B; b++) r[b] = (s * r[b] - ys[(size_t)b * cout + i]) * f;
        }
        ada_mm(a->gemm, 0, 0, ce - c, k, B, a->r + (size_t)c * B, B, G, ldg, a->gw + (size_t)c * k, k);
        c = ce;
    }
    size_t o = (size_t)c0 * k;
    a->update(reg, (size_t)(c1 - c0) * k, a->base + o, a->gw + o, a->V + o, a->m + o, a->v + o, a->sig + o,
              a->wt + o, lam2b, bm1, step, rs);
}

/* One position's patches [groups x k] tap-major: [k x groups]. */
static void ada_tap_major(const float *src, float *dst, int groups, int k)
{
    for (int g = 0; g < groups; g++)
        for (int i = 0; i < k; i++) dst[(size_t)i * groups + g] = src[(size_t)g * k + i];
}

/* One position's patches [groups x k] as int8 codes, tap-major ([k x groups]): the code
 * rint(xq / xstep), found through the reciprocal and kept only where (float)code * xstep
 * gives xq back bit for bit (what ada_dw_expand computes; +0 for -0). Returns 0 when some
 * element is not such a product. */
static int ada_tap_major8(const float *src, int8_t *dst, int groups, int k, float xstep, float inv)
{
    int bad = 0;
    for (int g = 0; g < groups; g++)
        for (int i = 0; i < k; i++) {
            float v = src[(size_t)g * k + i], q = rintf(v * inv);
            int in = q >= -128.0f && q <= 127.0f;
            int8_t c = (int8_t)(in ? (int)q : 0);
            float y = (float)c * xstep;
            bad |= !in || memcmp(&y, &v, sizeof y) != 0;
            dst[(size_t)i * groups + g] = c;
        }
    return !bad;
}

/* A depthwise layer's setup: xq copied tap-major, as int8 codes (a.xq8: a quarter of the
 * bytes the iterations read) when every element is xstep times one, else as floats
 * (a.xq_dw); and the target yT[j][g] = sum_i w[g][i] x[j][g][i], summed as ada_mm's plain
 * loops do (from 0, in tap order), across channels. */
static ptq_status ada_dw_setup(ada_state *a, const float *w, const float *x, const float *xq, float xstep, int nte)
{
    ptq_status st = PTQ_OK;
    const int k = a->k, G = a->groups;
    const size_t gk = (size_t)G * k;
    float *wT = malloc(sizeof(float) * gk), *xr = malloc(sizeof(float) * gk * (size_t)nte);
    CHECK_ALLOC(wT && xr);
    if (xstep > 0.0f && isfinite(xstep)) {
        const float inv = 1.0f / xstep;
        int bad = 0;
        CHECK_ALLOC(a->xq8 = malloc(gk * (size_t)a->p));
#pragma omp parallel for num_threads(nte) schedule(static) reduction(| : bad)
        for (int j = 0; j < a->p; j++) bad |= !ada_tap_major8(xq + (size_t)j * gk, a->xq8 + (size_t)j * gk, G, k, xstep, inv);
        if (bad) { /* not on the grid: the floats */
            free(a->xq8);
            a->xq8 = NULL;
        } else {
            a->xstep = xstep;
        }
    }
    if (!a->xq8) CHECK_ALLOC(a->xq_dw = malloc(sizeof(float) * gk * (size_t)a->p));
    a->xqT = a->xq_dw;
    ada_tap_major(w, wT, G, k);
#pragma omp parallel num_threads(nte)
    {
        float *xt = xr + gk * (size_t)omp_get_thread_num();
#pragma omp for schedule(static)
        for (int j = 0; j < a->p; j++) {
            if (!a->xq8) ada_tap_major(xq + (size_t)j * gk, a->xq_dw + (size_t)j * gk, G, k);
            ada_tap_major(x + (size_t)j * gk, xt, G, k);
            ada_dw_dot(k, (size_t)G, G, wT, xt, a->yT + (size_t)j * a->cout);
        }
    }
done:
    free(wT);
    free(xr);
    return st;
}

/* A depthwise layer's per-channel loss, across channels on the tap-major copy: each output
 * summed as ada_mm's plain loops do, each channel's loss in position order. */
enum { ADA_DW_EVAL_CH = 64 };
static ptq_status ada_eval_dw(const ada_state *a, const float *wq, double *loss, int nte)
{
    ptq_status st = PTQ_OK;
    const int k = a->k, C = a->cout, p = a->p;
    const size_t gk = (size_t)C * k;
    float *wT = malloc(sizeof(float) * gk), *rows = a->xq8 ? malloc(sizeof(float) * gk * (size_t)nte) : NULL;
    CHECK_ALLOC(wT && (rows || !a->xq8));
    ada_tap_major(wq, wT, C, k);
#pragma omp parallel for num_threads(nte) schedule(static)
    for (int c0 = 0; c0 < C; c0 += ADA_DW_EVAL_CH) {
        float *row = rows ? rows + gk * (size_t)omp_get_thread_num() : NULL;
        const int n = C - c0 < ADA_DW_EVAL_CH ? C - c0 : ADA_DW_EVAL_CH;
        float o[ADA_DW_EVAL_CH];
        double l[ADA_DW_EVAL_CH];
        for (int c = 0; c < n; c++) l[c] = 0.0;
        for (int j = 0; j < p; j++) {
            const float *yj = a->yT + (size_t)j * C + c0;
            const float *xj = a->xq_dw + (size_t)j * gk;
            if (row) {
                ada_dw_expand(k, (size_t)C, c0, c0 + n, a->xq8 + (size_t)j * gk, a->xstep, row);
                xj = row;
            }
            ada_dw_dot(k, (size_t)C, n, wT + c0, xj + c0, o);
#pragma omp simd
            for (int c = 0; c < n; c++) {
                double d = (double)o[c] - (double)yj[c];
                l[c] += d * d;
            }
        }
        for (int c = 0; c < n; c++) loss[c0 + c] = l[c] / (double)p;
    }
done:
    free(wT);
    free(rows);
    return st;
}

/* Per-channel loss (mean over all p positions) of weights wq [cout x k] on xq, against yT;
 * out: [cout], buf: [cout x ADA_EVAL_TILE]. Channel tiles in parallel, positions in order. */
static ptq_status ada_eval(const ada_state *a, const float *wq, const float *xq, double *loss, float *buf, int nte)
{
    if (a->dw) return ada_eval_dw(a, wq, loss, nte);
    const int k = a->k, p = a->p, cout = a->cout;
    const int64_t gk = (int64_t)a->groups * k;
    for (int c = 0; c < cout; c++) loss[c] = 0.0;
    for (int j0 = 0; j0 < p; j0 += ADA_EVAL_TILE) {
        int nj = p - j0 < ADA_EVAL_TILE ? p - j0 : ADA_EVAL_TILE;
#pragma omp parallel for num_threads(nte) schedule(dynamic, 1)
        for (int t = 0; t < a->ntask; t++) {
            for (int c = a->task[t]; c < a->task[t + 1];) {
                int g = c / a->cg, ce = (g + 1) * a->cg < a->task[t + 1] ? (g + 1) * a->cg : a->task[t + 1];
                ada_mm(a->gemm, 0, 1, ce - c, nj, k, wq + (size_t)c * k, k, xq + (size_t)j0 * gk + (size_t)g * k, gk,
                       buf + (size_t)c * ADA_EVAL_TILE, ADA_EVAL_TILE);
                for (int i = c; i < ce; i++) {
                    const float *o = buf + (size_t)i * ADA_EVAL_TILE;
                    double s = loss[i];
                    for (int j = 0; j < nj; j++) {
                        double d = (double)o[j] - (double)a->yT[(size_t)(j0 + j) * cout + i];
                        s += d * d;
                    }
                    loss[i] = s;
                }
                c = ce;
            }
        }
    }
    for (int c = 0; c < cout; c++) loss[c] /= (double)p;
    return PTQ_OK;
}

static ptq_status ada_check(const float *w, int cout, int k, int groups, const float *scale, const float *x,
                            const float *xq, int p, const quant_adaround_options *o, const int8_t *codes)
{
    if (!w || !scale || !x || !xq || !o || !codes) {
        ptq_error("adaround: NULL argument");
        return PTQ_ERR_ARG;
    }
    if (cout < 1 || k < 1 || groups < 1 || cout % groups != 0 || p < 1) {
        ptq_error("adaround: bad shape cout %d, k %d, groups %d, p %d (need >= 1, cout a multiple of groups)",
                  cout, k, groups, p);
        return PTQ_ERR_ARG;
    }
    if ((int64_t)cout * k > INT32_MAX / 8 || (int64_t)groups * k * p > INT64_MAX / 8) {
        ptq_error("adaround: layer too large (cout %d x k %d, p %d)", cout, k, p);
        return PTQ_ERR_ARG;
    }
    if (o->iters < 0 || o->batch < 1 || !(o->lambda >= 0.0f) || !isfinite(o->lambda) || !(o->beta_hi >= 1.0f) ||
        !(o->beta_lo >= 1.0f) || !isfinite(o->beta_hi) || !isfinite(o->beta_lo) || !(o->warmup >= 0.0f) ||
        !(o->warmup <= 1.0f) || !(o->lr > 0.0f) || !isfinite(o->lr) || o->nthreads < 0) {
        ptq_error("adaround: bad options (iters %d, batch %d, lambda %g, beta %g -> %g, warmup %g, lr %g, "
                  "nthreads %d)",
                  o->iters, o->batch, (double)o->lambda, (double)o->beta_hi, (double)o->beta_lo, (double)o->warmup,
                  (double)o->lr, o->nthreads);
        return PTQ_ERR_ARG;
    }
    for (int c = 0; c < cout; c++)
        if (!(scale[c] > 0.0f) || !isfinite(scale[c])) {
            ptq_error("adaround: scale[%d] = %g, expected finite and > 0", c, (double)scale[c]);
            return PTQ_ERR_ARG;
        }
    for (int64_t i = 0; i < (int64_t)cout * k; i++)
        if (!isfinite(w[i])) {
            ptq_error("adaround: weight %lld (channel %lld) is %g", (long long)i, (long long)(i / k), (double)w[i]);
            return PTQ_ERR_ARG;
        }
    int64_t n = (int64_t)groups * k * p;
    int bad = 0; /* a parallel scan; the serial one below only names the first bad element */
#pragma omp parallel for num_threads(o->nthreads > 0 ? o->nthreads : omp_get_max_threads()) schedule(static) \
    reduction(| : bad) if (n > 65536)
    for (int64_t i = 0; i < n; i++) bad |= !isfinite(x[i]) || !isfinite(xq[i]);
    for (int64_t i = 0; i < n && bad; i++)
        if (!isfinite(x[i]) || !isfinite(xq[i])) {
            ptq_error("adaround: input element %lld is not finite (x %g, xq %g)", (long long)i, (double)x[i],
                      (double)xq[i]);
            return PTQ_ERR_ARG;
        }
    return PTQ_OK;
}

ptq_status quant_adaround_layer(const float *w, int cout, int k, int groups, const float *scale, const float *x,
                                const float *xq, int p, const quant_adaround_options *o, int8_t *codes,
                                quant_adaround_result *res)
{
    ptq_status st = ada_check(w, cout, k, groups, scale, x, xq, p, o, codes);
    if (st != PTQ_OK) return st;

    ada_state a;
    memset(&a, 0, sizeof a);
    int8_t *learned = NULL;
    float *wq = NULL, *buf = NULL;
    double *loss_n = NULL, *loss_l = NULL;
    a.cout = cout;
    a.k = k;
    a.groups = groups;
    a.cg = cout / groups;
    a.p = p;
    a.batch = o->batch;
    a.gemm = a.cg >= ADA_GEMM_MIN_ROWS;
    a.dw = a.cg == 1;
    a.scale = scale;
    /* the copy of kern_sgemm's path (PTQ_ISA picks it too); all give the same bits */
    kern_isa isa = kern_isa_current();
    a.update = isa == KERN_ISA_AVX512 ? ada_update_avx512 : isa == KERN_ISA_AVX2 ? ada_update_avx2 : ada_update_base;
    a.dw_task = isa == KERN_ISA_AVX512 ? ada_dw_avx512 : isa == KERN_ISA_AVX2 ? ada_dw_avx2 : ada_dw_base;
    const int B = a.batch;
    const size_t nw = (size_t)cout * k;
    const int nt = o->nthreads > 0 ? o->nthreads : omp_get_max_threads();

    a.base = malloc(sizeof(float) * nw);
    a.V = malloc(sizeof(float) * nw);
    a.m = calloc(nw, sizeof(float));
    a.v = calloc(nw, sizeof(float));
    a.sig = malloc(sizeof(float) * nw);
    a.wt = malloc(sizeof(float) * nw);
    a.gw = malloc(sizeof(float) * nw);
    a.yT = malloc(sizeof(float) * (size_t)p * cout);
    a.r = malloc(sizeof(float) * (size_t)cout * B);
    /* per-thread gathered patches and targets (a depthwise layer reads them in place, and
     * gets one patch row per thread for its int8 codes as floats) */
    a.G = malloc(sizeof(float) * (size_t)nt * (size_t)groups * (a.dw ? 1 : B) * k);
    a.ys = malloc(a.dw ? 1 : sizeof(float) * (size_t)nt * (size_t)B * cout);
    a.idx = malloc(sizeof(int) * (size_t)B * (size_t)nt);
    learned = malloc(nw);
    wq = malloc(sizeof(float) * nw);
    buf = malloc(sizeof(float) * (size_t)cout * ADA_EVAL_TILE);
    loss_n = malloc(sizeof(double) * (size_t)cout);
    loss_l = malloc(sizeof(double) * (size_t)cout);
    CHECK_ALLOC(a.base && a.V && a.m && a.v && a.sig && a.wt && a.gw && a.yT && a.r && a.G && a.ys && a.idx);
    CHECK_ALLOC(learned && wq && buf && loss_n && loss_l);
    if (ada_tasks(&a) != 0) FAIL(PTQ_ERR_NOMEM, "out of memory at %s:%d", __FILE__, __LINE__);
    /* the team: at most one thread per ADA_THREAD_WEIGHTS weights and per run of
     * ADA_UNIT_ROWS channels (the evaluation's tiles may be fewer: some threads then wait
     * there, where capping the team by them cost the iterations a fifth on 16 cores) */
    int nte = (int)((int64_t)nw / ADA_THREAD_WEIGHTS);
    const int nunits = (cout + ADA_UNIT_ROWS - 1) / ADA_UNIT_ROWS;
    nte = nte < nt ? nte : nt;
    nte = nte < nunits ? nte : nunits;
    nte = nte > 1 ? nte : 1;

    /* starting point: h(V) = W/s - floor(W/s); exact weights frozen at h = 0 */
    for (int c = 0; c < cout; c++)
        for (int i = 0; i < k; i++) {
            size_t e = ada_at(&a, c, i);
            float r = w[(size_t)c * k + i] / scale[c], fl = floorf(r), frac = r - fl;
            int exact = r == fl && r >= -128.0f && r <= 127.0f;
            frac = frac > ADA_FRAC_EPS ? frac : ADA_FRAC_EPS;
            frac = frac < 1.0f - ADA_FRAC_EPS ? frac : 1.0f - ADA_FRAC_EPS;
            float sg0 = (frac - ADA_GAMMA) / ADA_SPAN; /* in (0.08, 0.92) */
            float V0 = ptq_logf(sg0 / (1.0f - sg0));
            a.base[e] = fl > 128.0f ? 128.0f : (fl < -129.0f ? -129.0f : fl); /* same clamp result */
            a.V[e] = exact ? ADA_FROZEN_V : V0;
            a.sig[e] = ptq_sigmoidf(a.V[e]);
            a.wt[e] = ada_code(a.base[e], ada_h(a.sig[e]));
        }

    /* target yT [p x cout] = (W x)^T; a depthwise layer's xq copied tap-major */
    a.xqT = xq;
    if (a.dw) {
        TRY(ada_dw_setup(&a, w, x, xq, o->x_step, nte));
    } else {
        int64_t pt = 64; /* positions per task */
        int64_t npt = kern_ceil_div(p, pt);
        const int64_t gk = (int64_t)groups * k;
#pragma omp parallel for num_threads(nte) schedule(dynamic, 1)
        for (int64_t t = 0; t < (int64_t)groups * npt; t++) {
            int g = (int)(t / npt);
            int64_t j0 = (t % npt) * pt, nj = p - j0 < pt ? p - j0 : pt;
            ada_mm(a.gemm, 0, 1, nj, a.cg, k, x + j0 * gk + (int64_t)g * k, gk, w + (size_t)g * a.cg * k, k,
                   a.yT + (size_t)j0 * cout + (size_t)g * a.cg, cout);
        }
    }

    /* Adam. One parallel region, no barrier: each thread owns an even share of the channels
     * (runs of ADA_UNIT_ROWS) and, per iteration, draws the positions
     * itself (the same for every thread: they depend on the seed and t alone), copies the
     * sampled patches of its groups and the targets of its channels into its own buffers,
     * and runs its channels' products and update. Threads share nothing, so none waits for
     * another, and the team size changes no result (each element of a product is one chain,
     * however the rows are split: sgemm.h). */
    {
        const int warm = (int)((double)o->warmup * o->iters);
        const size_t gk = (size_t)groups * k;
#pragma omp parallel num_threads(nte)
        {
            const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
            const int u0 = (int)((int64_t)nunits * tid / nth), u1 = (int)((int64_t)nunits * (tid + 1) / nth);
            const int c0 = u0 * ADA_UNIT_ROWS < cout ? u0 * ADA_UNIT_ROWS : cout;
            const int c1 = u1 * ADA_UNIT_ROWS < cout ? u1 * ADA_UNIT_ROWS : cout;
            int *idx = a.idx + (size_t)tid * B;
            float *G = a.G + (size_t)tid * (a.dw ? 1 : B) * gk, *ys = a.ys + (size_t)tid * B * cout;
            const size_t col0 = c0 < c1 ? (size_t)(c0 / a.cg) * k : 0;
            const size_t ncol = c0 < c1 ? (size_t)((c1 - 1) / a.cg + 1) * k - col0 : 0;
            double pb1 = 1.0, pb2 = 1.0;
            for (int t = 0; t < o->iters && c0 < c1; t++) {
                pb1 *= (double)ADA_ADAM_B1;
                pb2 *= (double)ADA_ADAM_B2;
                float step = (float)((double)o->lr / (1.0 - pb1));
                float rs = (float)(1.0 / sqrt(1.0 - pb2));
                int reg = t >= warm && o->lambda > 0.0f;
                float beta = o->beta_hi;
                if (reg) { /* linear from beta_hi at the warm-up's end towards beta_lo */
                    double rel = (double)(t - warm) / (double)(o->iters - warm);
                    beta = (float)((double)o->beta_hi + (double)(o->beta_lo - o->beta_hi) * rel);
                }
                float lam2b = -2.0f * o->lambda * beta, bm1 = beta - 1.0f;
                ada_sample(o->seed, t, p, B, idx);
                for (int b = 0; b < B && !a.dw; b++) {
                    memcpy(G + b * gk + col0, a.xqT + (size_t)idx[b] * gk + col0, sizeof(float) * ncol);
                    memcpy(ys + (size_t)b * cout + c0, a.yT + (size_t)idx[b] * cout + c0, sizeof(float) * (size_t)(c1 - c0));
                }
                ada_task(&a, G, ys, idx, c0, c1, reg, lam2b, bm1, step, rs);
            }
        }
    }

    /* harden, evaluate both roundings on all positions, keep the better per channel */
    for (int c = 0; c < cout; c++)
        for (int i = 0; i < k; i++) {
            size_t e = (size_t)c * k + i, s = ada_at(&a, c, i);
            float q = a.base[s] + (ada_h(a.sig[s]) >= 0.5f ? 1.0f : 0.0f);
            q = q > -128.0f ? q : -128.0f;
            q = q < 127.0f ? q : 127.0f;
            learned[e] = (int8_t)q;
            wq[e] = scale[c] * (float)quant_round_s8(w[e], scale[c]);
        }
    TRY(ada_eval(&a, wq, xq, loss_n, buf, nte));
    for (int c = 0; c < cout; c++)
        for (int i = 0; i < k; i++) wq[(size_t)c * k + i] = scale[c] * (float)learned[(size_t)c * k + i];
    TRY(ada_eval(&a, wq, xq, loss_l, buf, nte));

    quant_adaround_result r;
    memset(&r, 0, sizeof r);
    for (int c = 0; c < cout; c++) {
        int keep = !(loss_l[c] > loss_n[c]);
        int diff = 0;
        for (int i = 0; i < k; i++) {
            size_t e = (size_t)c * k + i;
            int8_t nq = quant_round_s8(w[e], scale[c]);
            codes[e] = keep ? learned[e] : nq;
            diff += codes[e] != nq;
        }
        r.changed += diff;
        r.fell_back += !keep;
        r.loss_nearest += loss_n[c];
        r.loss_learned += keep ? loss_l[c] : loss_n[c];
    }
    r.codes_in = a.xq8 != NULL;
    if (res) *res = r;

done:
    ada_free(&a);
    free(learned);
    free(wq);
    free(buf);
    free(loss_n);
    free(loss_l);
    return st;
}
