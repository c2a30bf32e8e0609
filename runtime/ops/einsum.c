/* einsum.c: Einsum (opset 12), any equation: explicit ("bhwc,hkc->bhwk") or implicit
 * ("ij,jk": the labels seen once, in alphabetical order), repeated labels (diagonals,
 * "ii->i", "bii->bi"), sums over labels absent from the output, and "..." (broadcast
 * like numpy, right-aligned; in the implicit output first).
 *
 * Two float32 inputs whose labels are each a batch, M, N or K label (seen at most once per
 * input: the matmul-like equations of attention and relative-position terms) run as
 * gathers into [batch, M, K] and [batch, K, N], ptq's GEMM (one FMA chain per output in K
 * order) and a scatter. Everything else runs a reference loop: each output element
 * (threads split them) sums, in one fixed order (row-major over the summed labels), the
 * product of the inputs' addressed elements, carried in double for float32/float64 and in
 * int64 for int32/int64. Either way the result does not depend on the thread count.
 * Labels are parsed once in infer into per-input strides. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/sgemm.h"
#include "runtime/op.h"
#include "runtime/shape.h"

#define EIN_MAX_IN 8
#define EIN_LETTERS 52                          /* a-z, A-Z */
#define EIN_LABELS (EIN_LETTERS + PTQ_MAX_RANK) /* then the broadcast ("...") dims */
#define EIN_MAX_SUM 16

/* A strided walk: element q of a packed row-major [size[0], ..., size[nd-1]] buffer sits
 * at sum(c[d] * stride[d]) in the strided tensor. */
typedef struct {
    int nd;
    int64_t size[2 * PTQ_MAX_RANK], stride[2 * PTQ_MAX_RANK];
} ein_copy;

typedef struct {
    int n_in;
    int n_out_labels, n_sum;
    int64_t out_size[PTQ_MAX_RANK];
    int64_t sum_size[EIN_MAX_SUM];
    int64_t out_stride[EIN_MAX_IN][PTQ_MAX_RANK]; /* input i's element stride per output label */
    int64_t sum_stride[EIN_MAX_IN][EIN_MAX_SUM];  /* and per summed label */
    /* The GEMM path (float32, two inputs, every label of size > 1 a batch, M, N or K label
     * seen once per input): A' [Bt, M, K] and B' [Bt, K, N] gathered into scratch, one
     * kern_sgemm per batch and row block into C' [Bt, M, N], scattered to Y. */
    int gemm;
    int64_t Bt, M, N, K;
    ein_copy a_plan, b_plan, c_plan;
} ein_state;

static int label_of(char c)
{
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
    return -1;
}

/* ASCII order (uppercase first), as numpy orders the implicit output */
static int ascii_rank(int l)
{
    return l < 26 ? 26 + l : l - 26;
}

/* Parses one term (s[0..len)) into labels; "..." becomes -2. Returns the count, -1 on error. */
static int parse_term(const char *s, size_t len, int *labels, int cap, int *has_ell)
{
    int n = 0;
    *has_ell = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') continue;
        if (s[i] == '.') {
            if (*has_ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') return -1;
            *has_ell = 1;
            i += 2;
            if (n >= cap) return -1;
            labels[n++] = -2;
            continue;
        }
        int l = label_of(s[i]);
        if (l < 0 || n >= cap) return -1;
        labels[n++] = l;
    }
    return n;
}

static ptq_status einsum_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, EIN_MAX_IN);
    if (st != PTQ_OK) return st;
    int n = ctx->n_in;
    ptq_dtype dt = ctx->in[0]->dtype;
    if (dt != PTQ_F32 && dt != PTQ_F64 && dt != PTQ_I32 && dt != PTQ_I64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "dtype %s (ptq computes float32, float64, int32, int64)", ptq_dtype_name(dt));
    for (int i = 0; i < n; i++) {
        if (!ctx->in[i]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "input %d is missing", i);
        if (ctx->in[i]->dtype != dt)
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "input %d dtype %s, input 0 %s: expected equal", i, ptq_dtype_name(ctx->in[i]->dtype),
                    ptq_dtype_name(dt));
    }
    const char *eq = ptq_attr_string(ctx->node, "equation", NULL);
    if (!eq) OP_FAIL(ctx, PTQ_ERR_FORMAT, "attribute equation is missing");
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);

    /* the terms of the left-hand side */
    int labels[EIN_MAX_IN][PTQ_MAX_RANK + 1], nl[EIN_MAX_IN], ell[EIN_MAX_IN];
    int terms = 0;
    size_t start = 0;
    for (size_t i = 0; i <= lhs_len; i++) {
        if (i < lhs_len && eq[i] != ',') continue;
        if (terms >= n) OP_FAIL(ctx, PTQ_ERR_FORMAT, "equation '%s' has more terms than the %d inputs", eq, n);
        nl[terms] = parse_term(eq + start, i - start, labels[terms], PTQ_MAX_RANK + 1, &ell[terms]);
        if (nl[terms] < 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "equation '%s': term %d is not valid", eq, terms);
        terms++;
        start = i + 1;
    }
    if (terms != n) OP_FAIL(ctx, PTQ_ERR_FORMAT, "equation '%s' has %d terms for %d inputs", eq, terms, n);

    /* label sizes; input i's stride per label (a repeated label adds its strides) */
    int64_t size[EIN_LABELS], stride[EIN_MAX_IN][EIN_LABELS];
    int count[EIN_LABELS], occ[EIN_MAX_IN][EIN_LABELS]; /* occ: times input i names the label */
    memset(occ, 0, sizeof occ);
    for (int l = 0; l < EIN_LABELS; l++) size[l] = -1, count[l] = 0;
    memset(stride, 0, sizeof stride);
    int n_ell = 0; /* broadcast dims: the most any input's "..." stands for */
    for (int i = 0; i < n; i++) {
        const ptq_tensor *t = ctx->in[i];
        int named = nl[i] - ell[i];
        if ((!ell[i] && t->rank != named) || (ell[i] && t->rank < named))
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "input %d has rank %d, term %d of '%s' names %d dims", i, t->rank, i, eq, named);
        if (ell[i] && t->rank - named > n_ell) n_ell = t->rank - named;
    }
    for (int i = 0; i < n; i++) {
        const ptq_tensor *t = ctx->in[i];
        int64_t ts[PTQ_MAX_RANK];
        ptq_strides(t, ts);
        int e = t->rank - (nl[i] - ell[i]), d = 0;
        for (int j = 0; j < nl[i]; j++) {
            if (labels[i][j] == -2) {
                for (int k = 0; k < e; k++, d++) {
                    int l = EIN_LETTERS + n_ell - e + k;
                    int64_t sz = t->dims[d];
                    if (sz != 1) {
                        if (size[l] > 1 && size[l] != sz)
                            OP_FAIL(ctx, PTQ_ERR_SHAPE, "'...' dims of input %d (%lld) do not broadcast with %lld", i,
                                    (long long)sz, (long long)size[l]);
                        size[l] = sz;
                        stride[i][l] += ts[d];
                    } else if (size[l] < 1) {
                        size[l] = 1;
                    }
                    count[l]++;
                    occ[i][l] += sz != 1;
                }
                continue;
            }
            int l = labels[i][j];
            if (size[l] >= 0 && size[l] != t->dims[d])
                OP_FAIL(ctx, PTQ_ERR_SHAPE, "label '%c' is %lld in input %d, %lld before", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[l],
                        (long long)t->dims[d], i, (long long)size[l]);
            size[l] = t->dims[d];
            stride[i][l] += ts[d];
            count[l]++;
            occ[i][l]++;
            d++;
        }
    }

    /* output labels */
    int out_l[PTQ_MAX_RANK + EIN_LETTERS], n_out = 0, in_out[EIN_LABELS];
    memset(in_out, 0, sizeof in_out);
    if (arrow) {
        int ol[PTQ_MAX_RANK + 1], oell;
        int m = parse_term(arrow + 2, strlen(arrow + 2), ol, PTQ_MAX_RANK + 1, &oell);
        if (m < 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "equation '%s': the output term is not valid", eq);
        for (int j = 0; j < m; j++) {
            if (ol[j] == -2) {
                for (int k = 0; k < n_ell; k++) out_l[n_out++] = EIN_LETTERS + k;
                continue;
            }
            if (count[ol[j]] == 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "equation '%s': output label not in any input", eq);
            if (in_out[ol[j]]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "equation '%s': output label repeated", eq);
            in_out[ol[j]] = 1;
            out_l[n_out++] = ol[j];
        }
        if (!oell)
            for (int k = 0; k < n_ell; k++)
                if (size[EIN_LETTERS + k] != 1)
                    OP_FAIL(ctx, PTQ_ERR_FORMAT, "equation '%s': '...' dims must appear in the output", eq);
    } else {
        for (int k = 0; k < n_ell; k++) out_l[n_out++] = EIN_LETTERS + k;
        for (int r = 0; r < EIN_LETTERS; r++)
            for (int l = 0; l < EIN_LETTERS; l++)
                if (ascii_rank(l) == r && count[l] == 1) out_l[n_out++] = l;
    }
    for (int j = 0; j < n_out; j++) in_out[out_l[j]] = 1;
    if (n_out > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output rank %d, more than %d", n_out, PTQ_MAX_RANK);

    ein_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->n_in = n;
    s->n_out_labels = n_out;
    for (int j = 0; j < n_out; j++) {
        s->out_size[j] = size[out_l[j]];
        for (int i = 0; i < n; i++) s->out_stride[i][j] = stride[i][out_l[j]];
    }
    for (int l = 0; l < EIN_LABELS; l++) {
        if (count[l] == 0 || in_out[l]) continue;
        if (s->n_sum >= EIN_MAX_SUM) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "more than %d summed labels", EIN_MAX_SUM);
        s->sum_size[s->n_sum] = size[l];
        for (int i = 0; i < n; i++) s->sum_stride[i][s->n_sum] = stride[i][l];
        s->n_sum++;
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = dt;
    y->rank = n_out;
    for (int j = 0; j < n_out; j++) y->dims[j] = s->out_size[j];

    /* the GEMM path when every label of size > 1 is batch (A, B, Y), M (A, Y), N (B, Y) or
     * K (A, B) and no input names one twice */
    int gemm = n == 2 && dt == PTQ_F32;
    int cls[EIN_LABELS]; /* 0 ignore (size 1), 1 batch, 2 M, 3 N, 4 K */
    for (int l = 0; l < EIN_LABELS && gemm; l++) {
        cls[l] = 0;
        if (count[l] == 0 || size[l] == 1) continue;
        if (size[l] < 1 || occ[0][l] > 1 || occ[1][l] > 1) gemm = 0;
        int a = occ[0][l] == 1, b = occ[1][l] == 1, o = in_out[l];
        cls[l] = a && b && o ? 1 : a && o ? 2 : b && o ? 3 : a && b ? 4 : 0;
        if (!cls[l]) gemm = 0;
    }
    if (gemm) {
        int64_t ostr[EIN_LABELS];
        int64_t run = 1;
        for (int j = n_out - 1; j >= 0; j--) {
            ostr[out_l[j]] = run;
            run *= size[out_l[j]];
        }
        s->Bt = s->M = s->N = s->K = 1;
        const int a_order[3] = {1, 2, 4}, b_order[3] = {1, 4, 3}, c_order[3] = {1, 2, 3};
        for (int part = 0; part < 3; part++)
            for (int l = 0; l < EIN_LABELS; l++) {
                if (cls[l] == a_order[part]) {
                    s->a_plan.size[s->a_plan.nd] = size[l];
                    s->a_plan.stride[s->a_plan.nd++] = stride[0][l];
                }
                if (cls[l] == b_order[part]) {
                    s->b_plan.size[s->b_plan.nd] = size[l];
                    s->b_plan.stride[s->b_plan.nd++] = stride[1][l];
                }
                if (cls[l] == c_order[part]) {
                    s->c_plan.size[s->c_plan.nd] = size[l];
                    s->c_plan.stride[s->c_plan.nd++] = ostr[l];
                }
                if (part == 0 && cls[l]) {
                    int64_t *dim = cls[l] == 1 ? &s->Bt : cls[l] == 2 ? &s->M : cls[l] == 3 ? &s->N : &s->K;
                    *dim *= size[l];
                }
            }
        size_t fl = (size_t)(s->Bt * s->M * s->K + s->Bt * s->K * s->N + s->Bt * s->M * s->N);
        if (fl > SIZE_MAX / sizeof(float) / 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "scratch size overflows");
        s->gemm = 1;
        ctx->scratch_bytes = fl * sizeof(float);
    }
    return PTQ_OK;
}

static double ein_get_f(const void *p, ptq_dtype dt, int64_t i)
{
    return dt == PTQ_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static int64_t ein_get_i(const void *p, ptq_dtype dt, int64_t i)
{
    return dt == PTQ_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

/* packed[q] = src[offset of q] (gather) or dst[offset of q] = packed[q] (scatter), q < total;
 * each thread walks its own range of q with an odometer (one division per dim to start). */
static void ein_copy_run(const ein_copy *c, const float *src, float *dst, int64_t total, int gather, int nthreads)
{
#pragma omp parallel num_threads(nthreads)
    {
        int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
        int64_t q0 = total / nt * tid + (tid < total % nt ? tid : total % nt);
        int64_t q1 = q0 + total / nt + (tid < total % nt);
        int64_t cd[2 * PTQ_MAX_RANK], off = 0, rest = q0;
        for (int d = c->nd - 1; d >= 0; d--) {
            cd[d] = rest % c->size[d];
            rest /= c->size[d];
            off += cd[d] * c->stride[d];
        }
        for (int64_t q = q0; q < q1; q++) {
            if (gather) dst[q] = src[off];
            else dst[off] = src[q];
            for (int d = c->nd - 1; d >= 0; d--) {
                off += c->stride[d];
                if (++cd[d] < c->size[d]) break;
                off -= c->stride[d] * c->size[d];
                cd[d] = 0;
            }
        }
    }
}

/* The GEMM path: each output element is one FMA chain over K in row-major K-label order
 * (kern_sgemm's contract), whatever the thread count. */
static ptq_status einsum_run_gemm(ptq_op_ctx *ctx)
{
    const ein_state *s = ctx->state;
    const int64_t Bt = s->Bt, M = s->M, N = s->N, K = s->K;
    float *A = ctx->scratch, *B = A + Bt * M * K, *C = B + Bt * K * N;
    ein_copy_run(&s->a_plan, ctx->in[0]->data, A, Bt * M * K, 1, ctx->nthreads);
    ein_copy_run(&s->b_plan, ctx->in[1]->data, B, Bt * K * N, 1, ctx->nthreads);
    const int64_t rows = 64, blocks = (M + rows - 1) / rows;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (int64_t t = 0; t < Bt * blocks; t++) {
        int64_t b = t / blocks, r0 = t % blocks * rows, m = M - r0 < rows ? M - r0 : rows;
        kern_sgemm(0, 0, m, N, K, A + (b * M + r0) * K, K, B + b * K * N, N, 0, C + (b * M + r0) * N, N);
    }
    ein_copy_run(&s->c_plan, C, ctx->out[0]->data, Bt * M * N, 0, ctx->nthreads);
    return PTQ_OK;
}

static ptq_status einsum_run(ptq_op_ctx *ctx)
{
    if (((const ein_state *)ctx->state)->gemm) return einsum_run_gemm(ctx);
    const ein_state *s = ctx->state;
    ptq_tensor *y = ctx->out[0];
    ptq_dtype dt = y->dtype;
    int is_f = dt == PTQ_F32 || dt == PTQ_F64, n = s->n_in, ns = s->n_sum;
    size_t total = ptq_tensor_numel(y), nsum = 1;
    for (int k = 0; k < ns; k++) nsum *= (size_t)s->sum_size[k];
    const void *data[EIN_MAX_IN];
    for (int i = 0; i < n; i++) data[i] = ctx->in[i]->data;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t o = 0; o < total; o++) {
        int64_t base[EIN_MAX_IN] = {0}, off[EIN_MAX_IN], c[EIN_MAX_SUM] = {0};
        size_t rest = o;
        for (int j = s->n_out_labels - 1; j >= 0; j--) {
            int64_t cj = (int64_t)(rest % (size_t)s->out_size[j]);
            rest /= (size_t)s->out_size[j];
            for (int i = 0; i < n; i++) base[i] += cj * s->out_stride[i][j];
        }
        for (int i = 0; i < n; i++) off[i] = base[i];
        double accf = 0.0;
        int64_t acci = 0;
        /* the last summed label runs innermost (L steps of strides st[i]); the others step
         * like an odometer: the same row-major order either way */
        int64_t L = ns > 0 ? s->sum_size[ns - 1] : 1, st[EIN_MAX_IN];
        for (int i = 0; i < n; i++) st[i] = ns > 0 ? s->sum_stride[i][ns - 1] : 0;
        for (size_t q = 0; q < nsum; q += (size_t)L) {
            if (dt == PTQ_F32 && n == 2) {
                const float *a = (const float *)data[0] + off[0], *b = (const float *)data[1] + off[1];
                for (int64_t t = 0; t < L; t++) accf += (double)a[t * st[0]] * (double)b[t * st[1]];
            } else if (is_f) {
                for (int64_t t = 0; t < L; t++) {
                    double p = ein_get_f(data[0], dt, off[0] + t * st[0]);
                    for (int i = 1; i < n; i++) p *= ein_get_f(data[i], dt, off[i] + t * st[i]);
                    accf += p;
                }
            } else {
                for (int64_t t = 0; t < L; t++) {
                    int64_t p = ein_get_i(data[0], dt, off[0] + t * st[0]);
                    for (int i = 1; i < n; i++) p = (int64_t)((uint64_t)p * (uint64_t)ein_get_i(data[i], dt, off[i] + t * st[i]));
                    acci = (int64_t)((uint64_t)acci + (uint64_t)p);
                }
            }
            for (int k = ns - 2; k >= 0; k--) { /* odometer over the other summed labels */
                for (int i = 0; i < n; i++) off[i] += s->sum_stride[i][k];
                if (++c[k] < s->sum_size[k]) break;
                for (int i = 0; i < n; i++) off[i] -= s->sum_stride[i][k] * s->sum_size[k];
                c[k] = 0;
            }
        }
        switch (dt) {
        case PTQ_F32: ((float *)y->data)[o] = (float)accf; break;
        case PTQ_F64: ((double *)y->data)[o] = accf; break;
        case PTQ_I32: ((int32_t *)y->data)[o] = (int32_t)acci; break;
        default: ((int64_t *)y->data)[o] = acci; break;
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_einsum = {einsum_infer, einsum_run, ptq_op_free_state, 0};
