/* ewchain.c: ptq_op_ew_chain, the step fuse_elementwise_chains (runtime/plan_fuse.c) makes of a
 * chain of element-wise float steps over one value x [N, C, ...] (Add, Sub, Mul, Div with one
 * value or per-channel constants, Clip with constant bounds, each optionally rounding its
 * output to FP16: a QDQ model's float part simulated in FP16 writes such chains after every
 * INT8 layer). One pass over memory instead of one per step, bit for bit the steps' values:
 * every instruction computes what its op computes (basic.c: a + b, a - b, a * b, a / b;
 * Clip's two comparisons) in float32 and rounds as ptq_round_f16 does.
 *
 * Inputs: x, the program (int32 [n_instr * EW_FIELDS]), then the constants it reads.
 * Registers: 0 is x, instruction i writes register i + 1; the last one is the output. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/kernels/sgemm.h"
#include "runtime/ops/ewchain.h"
#include "runtime/ops/half.h"
#include "runtime/shape.h"

enum { EW_BLOCK = 512 };

static ptq_status ew_infer(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0], *prog = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (x->dtype != PTQ_F32 || x->rank < 2) OP_FAIL(ctx, PTQ_ERR_INTERNAL, "element-wise chain: input is not float32 [N, C, ...]");
    if (!prog || prog->dtype != PTQ_I32 || !prog->data || ptq_tensor_numel(prog) % EW_FIELDS != 0 ||
        ptq_tensor_numel(prog) / EW_FIELDS > EW_MAX_INSTR || ptq_tensor_numel(prog) == 0)
        OP_FAIL(ctx, PTQ_ERR_INTERNAL, "element-wise chain: bad program");
    ctx->out[0]->dtype = PTQ_F32;
    ptq_shape_copy(ctx->out[0], x);
    return PTQ_OK;
}

/* operand: register r (>= 0), or constant input k (r < 0): one value or one per channel */
static const float *operand(const ptq_op_ctx *ctx, float (*reg)[EW_BLOCK], const float *x0, int r, int k, int64_t c,
                            float *kv)
{
    if (r == 0) return x0;
    if (r > 0) return reg[r];
    const ptq_tensor *t = ctx->in[k];
    *kv = ((const float *)t->data)[ptq_tensor_numel(t) == 1 ? 0 : c];
    return NULL;
}

/* One instruction over e0..len of a block, in C: each op as basic.c computes it, the rounding
 * as half_to_f32(half_from_f32(v)) (ptq_round_f16's bits). */
static void instr_c(int op, int round, const float *pa, const float *pb, float ka, float kb, float lo, float hi, float *d,
                    int64_t e0, int64_t len)
{
    for (int64_t e = e0; e < len; e++) {
        float a = pa ? pa[e] : ka, b = pb ? pb[e] : kb, v;
        switch (op) {
        case EW_ADD: v = a + b; break;
        case EW_SUB: v = a - b; break;
        case EW_MUL: v = a * b; break;
        case EW_DIV: v = a / b; break;
        default: v = a < lo ? lo : a; v = v > hi ? hi : v; break;
        }
        d[e] = round ? half_to_f32(half_from_f32(v)) : v;
    }
}

/* The same eight at a time with AVX2 and F16C, which give the same bits (half_round8). */
__attribute__((target("avx2,f16c")))
static int64_t instr_avx2(int op, int round, const float *pa, const float *pb, float ka, float kb, float lo, float hi,
                          float *d, int64_t len)
{
    const __m256 vka = _mm256_set1_ps(ka), vkb = _mm256_set1_ps(kb), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    int64_t e = 0;
    for (; e + 8 <= len; e += 8) {
        __m256 a = pa ? _mm256_loadu_ps(pa + e) : vka, b = pb ? _mm256_loadu_ps(pb + e) : vkb, v;
        switch (op) {
        case EW_ADD: v = _mm256_add_ps(a, b); break;
        case EW_SUB: v = _mm256_sub_ps(a, b); break;
        case EW_MUL: v = _mm256_mul_ps(a, b); break;
        case EW_DIV: v = _mm256_div_ps(a, b); break;
        default:
            v = _mm256_blendv_ps(a, vlo, _mm256_cmp_ps(a, vlo, _CMP_LT_OQ));
            v = _mm256_blendv_ps(v, vhi, _mm256_cmp_ps(v, vhi, _CMP_GT_OQ));
            break;
        }
        if (round) v = half_round8(v);
        _mm256_storeu_ps(d + e, v);
    }
    return e;
}

static ptq_status ew_run(ptq_op_ctx *ctx)
{
    const ptq_tensor *x = ctx->in[0];
    const int32_t *prog = ctx->in[1]->data;
    int n_instr = (int)(ptq_tensor_numel(ctx->in[1]) / EW_FIELDS);
    int64_t nn = x->dims[0], cc = x->dims[1], s = (int64_t)ptq_tensor_numel(x) / (nn * cc > 0 ? nn * cc : 1);
    int64_t nblk = (s + EW_BLOCK - 1) / EW_BLOCK, total = nn * cc * nblk;
    const float *xd = x->data;
    float *yd = ctx->out[0]->data;
    int vec = kern_isa_current() != KERN_ISA_GENERIC && kern_cpu_has_f16c();
    if (nn * cc == 0 || s == 0) return PTQ_OK;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static) if (total > 16 && (int64_t)ptq_tensor_numel(x) > 65536)
    for (int64_t t = 0; t < total; t++) {
        float reg[EW_MAX_INSTR + 1][EW_BLOCK];
        int64_t row = t / nblk, c = row % cc, i0 = (t % nblk) * EW_BLOCK, len = s - i0 < EW_BLOCK ? s - i0 : EW_BLOCK;
        const float *x0 = xd + row * s + i0;
        for (int i = 0; i < n_instr; i++) {
            const int32_t *in = prog + (size_t)i * EW_FIELDS;
            float ka = 0.0f, kb = 0.0f, lo, hi;
            const float *pa = operand(ctx, reg, x0, in[2], in[4], c, &ka);
            const float *pb = in[0] == EW_CLIP ? NULL : operand(ctx, reg, x0, in[3], in[5], c, &kb);
            float *d = i == n_instr - 1 ? yd + row * s + i0 : reg[i + 1];
            memcpy(&lo, &in[7], sizeof lo);
            memcpy(&hi, &in[8], sizeof hi);
            int64_t e = vec ? instr_avx2(in[0], in[6], pa, pb, ka, kb, lo, hi, d, len) : 0;
            instr_c(in[0], in[6], pa, pb, ka, kb, lo, hi, d, e, len);
        }
    }
    return PTQ_OK;
}

const ptq_op_def ptq_op_ew_chain = {ew_infer, ew_run, NULL, 0};
