/* gemm.c: Gemm and MatMul, float32, through kern_sgemm, with the fused activation.
 *
 * Gemm: Y = alpha * op(A) * op(B) + beta * C, A and B 2-D, C (optional from opset 11)
 * unidirectionally broadcast to [M, N]. MatMul: numpy semantics (a 1-D A is a row,
 * a 1-D B a column, both dims removed from the result; batch dims broadcast).
 *
 * Both split the output into tiles fixed by the shapes (columns in tiles of at most
 * MATMUL_TN, rows in tiles of at most MATMUL_TM) and run one single-threaded kern_sgemm per tile
 * in parallel with OpenMP, the epilogue on the tile while it is in cache. Each output
 * element is one FMA chain in k order from zero (sgemm.h), then alpha * product + beta * C
 * (C added last, as ONNX Runtime's kernels do), so results do not
 * depend on the thread count, the tiling, the ISA path or the batch size (an image's
 * outputs are the same in a batch of 1 or of 64: statistics of shards merge exactly
 * whatever --batch each ran with). A MatMul whose B has no batch (or batch dims of 1)
 * folds A's batch into M: one GEMM; otherwise each matrix is one row tile. */
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/act.h"
#include "runtime/kernels/sgemm.h"
#include "runtime/op.h"
#include "runtime/shape.h"

#define GEMM_SERIAL_WORK (1 << 16)    /* multiply-adds below which one thread runs it all */
#define MATMUL_TM 96                  /* rows per tile at most: 16 strips of AVX2's 6 rows, 12 of AVX-512's 8 */
#define MATMUL_TN 128                 /* columns per tile at most (a multiple of 16) */

static ptq_status need_f32(const ptq_op_ctx *ctx)
{
    if (ctx->n_out < 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "output 0 is missing");
    for (int i = 0; i < ctx->n_in; i++)
        if (ctx->in[i] && ctx->in[i]->dtype != PTQ_F32)
            OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d has dtype %s; only float32 is supported", i,
                    ptq_dtype_name(ctx->in[i]->dtype));
    return PTQ_OK;
}

static int team_size(const ptq_op_ctx *ctx, int64_t ntasks, int serial)
{
    int nt = ctx->nthreads;
    if (serial || nt < 1) nt = 1;
    if ((int64_t)nt > ntasks) nt = ntasks > 0 ? (int)ntasks : 1;
    return nt;
}

/* ------------------------------------------------------------ Gemm */

typedef struct {
    int64_t M, N, K;
    int trans_a, trans_b;
    float alpha, beta;
    int use_c;              /* C present and beta != 0 */
    int64_t cs_m, cs_n;     /* C's element strides along M and N (0: broadcast) */
    int64_t tm, tn, n_tm, n_tn, ntasks;
    int serial;
} gemm_state;

/* Columns per tile: N alone decides. */
static int64_t tile_cols(int64_t N)
{
    return N < MATMUL_TN ? (N > 0 ? N : 1) : MATMUL_TN;
}

static ptq_status gemm_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 3);
    if (st != PTQ_OK || (st = need_f32(ctx)) != PTQ_OK) return st;
    const ptq_tensor *a = ctx->in[0], *b = ctx->in[1], *c = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!c && ctx->opset < 11) OP_FAIL(ctx, PTQ_ERR_FORMAT, "input C is required before opset 11 (opset %lld)", (long long)ctx->opset);
    if (a->rank != 2 || b->rank != 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "A has rank %d and B rank %d, expected 2 and 2", a->rank, b->rank);
    int64_t ta = ptq_attr_int(ctx->node, "transA", 0), tb = ptq_attr_int(ctx->node, "transB", 0);
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "transA %lld, transB %lld: expected 0 or 1", (long long)ta, (long long)tb);
    int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
    int64_t K2 = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
    if (K != K2)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "op(A) is %lldx%lld but op(B) is %lldx%lld (inner dims differ)", (long long)M,
                (long long)K, (long long)K2, (long long)N);
    gemm_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    s->M = M;
    s->N = N;
    s->K = K;
    s->trans_a = (int)ta;
    s->trans_b = (int)tb;
    s->alpha = ptq_attr_float(ctx->node, "alpha", 1.0f);
    s->beta = ptq_attr_float(ctx->node, "beta", 1.0f);
    if (c) {
        /* unidirectional broadcast of C to [M, N] */
        int64_t cm = 1, cn = 1;
        if (c->rank > 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "C has rank %d, expected at most 2", c->rank);
        if (c->rank == 1) cn = c->dims[0];
        if (c->rank == 2) {
            cm = c->dims[0];
            cn = c->dims[1];
        }
        if ((cm != 1 && cm != M) || (cn != 1 && cn != N))
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "C of shape %lldx%lld does not broadcast to %lldx%lld", (long long)cm,
                    (long long)cn, (long long)M, (long long)N);
        s->cs_n = cn == 1 ? 0 : 1;
        s->cs_m = cm == 1 ? 0 : cn;
        s->use_c = s->beta != 0.0f && ptq_tensor_numel(c) > 0;
    }
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    y->rank = 2;
    y->dims[0] = M;
    y->dims[1] = N;
    s->tm = MATMUL_TM;
    s->tn = tile_cols(N);
    ctx->scratch_bytes = 0;
    s->n_tm = kern_ceil_div(M, s->tm);
    s->n_tn = kern_ceil_div(N, s->tn);
    s->ntasks = s->n_tm * s->n_tn;
    s->serial = (double)M * (double)N * (double)(K > 0 ? K : 1) < (double)GEMM_SERIAL_WORK;
    return PTQ_OK;
}

static void gemm_task(const ptq_op_ctx *ctx, const gemm_state *s, int64_t t)
{
    int64_t m0 = (t / s->n_tn) * s->tm, n0 = (t % s->n_tn) * s->tn;
    int64_t mm = s->M - m0 < s->tm ? s->M - m0 : s->tm, nn = s->N - n0 < s->tn ? s->N - n0 : s->tn;
    const float *a = ctx->in[0]->data, *b = ctx->in[1]->data;
    const float *c = s->use_c ? (const float *)ctx->in[2]->data + m0 * s->cs_m + n0 * s->cs_n : NULL;
    float *y = (float *)ctx->out[0]->data + m0 * s->N + n0;
    int64_t lda = s->trans_a ? s->M : s->K, ldb = s->trans_b ? s->K : s->N;
    a += s->trans_a ? m0 : m0 * s->K;
    b += s->trans_b ? n0 * s->K : n0;
    kern_sgemm(s->trans_a, s->trans_b, mm, nn, s->K, a, lda, b, ldb, 0, y, s->N);
    if (s->alpha != 1.0f || c) /* the epilogue: alpha * product + beta * C */
        for (int64_t i = 0; i < mm; i++)
            for (int64_t j = 0; j < nn; j++) {
                float v = s->alpha == 1.0f ? y[i * s->N + j] : s->alpha * y[i * s->N + j];
                y[i * s->N + j] = c ? v + s->beta * c[i * s->cs_m + j * s->cs_n] : v;
            }
    if (kern_act_active(&ctx->act))
        for (int64_t i = 0; i < mm; i++) kern_act_f32(&ctx->act, y + i * s->N, (size_t)nn);
}

static ptq_status gemm_run(ptq_op_ctx *ctx)
{
    const gemm_state *s = ctx->state;
    if (s->ntasks == 0 || s->M == 0 || s->N == 0) return PTQ_OK;
    int nt = team_size(ctx, s->ntasks, s->serial);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t t = 0; t < s->ntasks; t++) gemm_task(ctx, s, t);
    return PTQ_OK;
}

const ptq_op_def op_gemm = {gemm_infer, gemm_run, ptq_op_free_state, PTQ_OP_FUSE_ACT};

/* ------------------------------------------------------------ MatMul */

typedef struct {
    int64_t M, N, K;           /* per batch; M includes the folded batch when nb == 1 */
    int64_t nb;                /* GEMMs (broadcast batch elements) */
    int brank;                 /* output batch rank */
    int64_t bdims[PTQ_MAX_RANK], sa[PTQ_MAX_RANK], sb[PTQ_MAX_RANK]; /* batch dims, strides in matrices */
    int64_t tm, tn, n_tm, n_tn, ntasks;
    int serial;
} matmul_state;

static ptq_status matmul_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 2);
    if (st != PTQ_OK || (st = need_f32(ctx)) != PTQ_OK) return st;
    const ptq_tensor *a = ctx->in[0], *b = ctx->in[1];
    if (a->rank < 1 || b->rank < 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "A has rank %d and B rank %d; both need rank >= 1", a->rank, b->rank);
    int64_t M = a->rank >= 2 ? a->dims[a->rank - 2] : 1, K = a->dims[a->rank - 1];
    int64_t K2 = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0], N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if (K != K2)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "A's last dim is %lld but B's %s is %lld", (long long)K,
                b->rank >= 2 ? "second to last dim" : "length", (long long)K2);
    /* batch dims: everything before the matrix dims */
    ptq_tensor ba, bb, bo;
    memset(&ba, 0, sizeof ba);
    memset(&bb, 0, sizeof bb);
    memset(&bo, 0, sizeof bo);
    ba.rank = a->rank > 2 ? a->rank - 2 : 0;
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    for (int d = 0; d < ba.rank; d++) ba.dims[d] = a->dims[d];
    for (int d = 0; d < bb.rank; d++) bb.dims[d] = b->dims[d];
    if ((st = ptq_broadcast(&ba, &bb, &bo)) != PTQ_OK) {
        ptq_error_prefix("%s '%s': batch dims: ", ctx->node->op_type, ctx->node->name);
        return st;
    }
    matmul_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    ptq_tensor *y = ctx->out[0];
    y->dtype = PTQ_F32;
    y->rank = bo.rank + (a->rank >= 2) + (b->rank >= 2);
    if (y->rank > PTQ_MAX_RANK) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "output rank %d exceeds %d", y->rank, PTQ_MAX_RANK);
    int r = 0;
    for (int d = 0; d < bo.rank; d++) y->dims[r++] = bo.dims[d];
    if (a->rank >= 2) y->dims[r++] = M;
    if (b->rank >= 2) y->dims[r++] = N;
    int64_t batches = 1, bbatch = 1;
    for (int d = 0; d < bo.rank; d++) batches *= bo.dims[d];
    for (int d = 0; d < bb.rank; d++) bbatch *= bb.dims[d];
    s->K = K;
    s->N = N;
    s->brank = bo.rank;
    for (int d = 0; d < bo.rank; d++) s->bdims[d] = bo.dims[d];
    ptq_broadcast_strides(&ba, &bo, s->sa);
    ptq_broadcast_strides(&bb, &bo, s->sb);
    if (bbatch == 1) { /* A's batch folds into M: one GEMM (the output batch has A's order) */
        if (batches != 0 && M > INT64_MAX / batches) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output size overflows");
        s->M = M * batches;
        s->nb = 1;
        s->brank = 0;
    } else {
        s->M = M;
        s->nb = batches;
    }
    s->tn = tile_cols(N);
    /* up to MATMUL_TM rows in one tile, so that each B panel serves every row strip (a
     * 40-row sequence times a 6625-class head: one tile, B read once) */
    s->tm = s->nb == 1 ? (s->M < MATMUL_TM ? (s->M > 0 ? s->M : 1) : MATMUL_TM) : (s->M > 0 ? s->M : 1); /* batched: one row tile per matrix */
    ctx->scratch_bytes = 0;
    s->n_tm = kern_ceil_div(s->M, s->tm);
    s->n_tn = kern_ceil_div(N, s->tn);
    s->ntasks = s->M == 0 || N == 0 ? 0 : s->nb * s->n_tm * s->n_tn;
    s->serial = (double)s->nb * (double)s->M * (double)N * (double)(K > 0 ? K : 1) < (double)GEMM_SERIAL_WORK;
    return PTQ_OK;
}

static void matmul_task(const ptq_op_ctx *ctx, const matmul_state *s, int64_t t)
{
    int64_t tn_i = t % s->n_tn, tm_i = (t / s->n_tn) % s->n_tm, bi = t / (s->n_tn * s->n_tm);
    int64_t oa = 0, ob = 0, rem = bi;
    for (int d = s->brank - 1; d >= 0; d--) {
        int64_t idx = rem % s->bdims[d];
        rem /= s->bdims[d];
        oa += idx * s->sa[d];
        ob += idx * s->sb[d];
    }
    int64_t m0 = tm_i * s->tm, n0 = tn_i * s->tn;
    int64_t mm = s->M - m0 < s->tm ? s->M - m0 : s->tm, nn = s->N - n0 < s->tn ? s->N - n0 : s->tn;
    const float *a = (const float *)ctx->in[0]->data + oa * s->M * s->K + m0 * s->K;
    const float *b = (const float *)ctx->in[1]->data + ob * s->K * s->N + n0;
    float *y = (float *)ctx->out[0]->data + bi * s->M * s->N + m0 * s->N + n0;
    kern_sgemm(0, 0, mm, nn, s->K, a, s->K, b, s->N, 0, y, s->N);
    if (kern_act_active(&ctx->act))
        for (int64_t i = 0; i < mm; i++) kern_act_f32(&ctx->act, y + i * s->N, (size_t)nn);
}

static ptq_status matmul_run(ptq_op_ctx *ctx)
{
    const matmul_state *s = ctx->state;
    if (s->ntasks == 0) return PTQ_OK;
    int nt = team_size(ctx, s->ntasks, s->serial);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t t = 0; t < s->ntasks; t++) matmul_task(ctx, s, t);
    return PTQ_OK;
}

const ptq_op_def op_matmul = {matmul_infer, matmul_run, ptq_op_free_state, PTQ_OP_FUSE_ACT};
