/* einsum.c: Einsum (opset 12), any equation: explicit ("bhwc,hkc->bhwk") or implicit
 * ("ij,jk": the labels seen once, in alphabetical order), repeated labels (diagonals,
 * "ii->i", "bii->bi"), sums over labels absent from the output, and "..." (broadcast
 * like numpy, right-aligned; in the implicit output first).
 *
 * A reference loop: each output element (threads split them) sums, in one fixed order
 * (row-major over the summed labels), the product of the inputs' addressed elements.
 * Sums and products are carried in double for float32/float64 and in int64 for
 * int32/int64, then stored in the output's type, so the result does not depend on the
 * thread count. Labels are parsed once in infer into per-input strides. */
#include <stdlib.h>
#include <string.h>

#include "runtime/op.h"
#include "runtime/shape.h"

#define EIN_MAX_IN 8
#define EIN_LETTERS 52                          /* a-z, A-Z */
#define EIN_LABELS (EIN_LETTERS + PTQ_MAX_RANK) /* then the broadcast ("...") dims */
#define EIN_MAX_SUM 16

typedef struct {
    int n_in;
    int n_out_labels, n_sum;
    int64_t out_size[PTQ_MAX_RANK];
    int64_t sum_size[EIN_MAX_SUM];
    int64_t out_stride[EIN_MAX_IN][PTQ_MAX_RANK]; /* input i's element stride per output label */
    int64_t sum_stride[EIN_MAX_IN][EIN_MAX_SUM];  /* and per summed label */
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
    int count[EIN_LABELS];
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
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory");
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

static ptq_status einsum_run(ptq_op_ctx *ctx)
{
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
