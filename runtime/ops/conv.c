/* conv.c: Conv and ConvTranspose, float32, 1 to 3 spatial dims, any group, stride,
 * dilation, padding (explicit or auto_pad), optional bias, fused activation.
 *
 * Conv picks one of four algorithms in infer:
 *   - depthwise (one input channel per group, 1-D/2-D): a direct banded kernel per
 *     output plane (runtime/kernels/depthwise.c), tasks = planes;
 *   - pointwise (1x1 kernel, stride 1, no padding): per group a GEMM straight on the
 *     input, W_g [cout_g x cin_g] * X_g [cin_g x positions];
 *   - shifted (stride 1, 1-D/2-D, at least SHIFT_MIN_CIN input channels per group): no
 *     im2col. A band of output rows is computed on a "wide" grid whose row pitch is the
 *     padded input width PW: the band's input rows are copied once with their zero
 *     padding (cin_g x rows x PW), and each kernel tap (kh, kw) is then a plain GEMM
 *     W_tap [cout_g x cin_g] * X_pad shifted by kh*dh*PW + kw*dw, accumulated over the
 *     taps (weights reordered tap-major: once in infer when constant, else per run);
 *     the wide rows are then compacted into the output (their last (KW-1)*dw columns
 *     are wrap-around garbage);
 *   - im2col: per group and tile of output positions, im2col into the thread's scratch
 *     then the same GEMM with K = cin_g * kernel volume.
 * GEMMs are tiled from the shapes alone (kern_gemm_tiles, bands) and every tile is
 * single-threaded kern_sgemm calls (one FMA chain per output element from zero, in k order;
 * the shifted path continues the chains tap after tap), then the bias is added once and
 * the activation applied to the tile while it is in cache (runtime/kernels/act.h), the
 * order ONNX Runtime's kernels use too; tiles run in parallel with OpenMP. Each output element
 * is computed by one thread in an order fixed by the shapes, so results are bit-identical
 * at any thread count, tile position and ISA path. The shifted path runs all taps of a band
 * in one kern_sgemm_packed_taps call (column panel by panel, C kept in cache across the taps).
 *
 * ConvTranspose: per group, columns = W_g^T [cout_g*kvol x cin_g] * X_g, tiled over
 * output-channel blocks and input positions, scattered into the output (col2im) after
 * the output was set to the bias. When taps of different inputs can land on the same
 * output (dilated kernel wider than the stride) the tiles of a channel block run in
 * order on one thread; else every tile is its own task. When the kernel equals the
 * stride without padding (upsampling by 2x2 stride 2, as in PP-OCR det) every output
 * gets exactly one tap: tiles are then bands of whole input rows, and each output row
 * is written once as bias + tap, then the fused per-channel steps (plan_fuse.c: a bias Add,
 * a BatchNormalization) and the activation while in cache; otherwise those run per plane at
 * the end.
 *
 * Other than the shifted path's reorder, weights are used in place (kern_sgemm packs them
 * per call); constant and runtime weights take the same paths. */
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/act.h"
#include "runtime/kernels/depthwise.h"
#include "runtime/kernels/im2col.h"
#include "runtime/kernels/sgemm.h"
#include "runtime/op.h"
#include "runtime/shape.h"

#define CONV_PANEL_FLOATS (256 * 1024) /* GEMM B panel (k x tile columns) per task: 1 MiB */
#define CONV_COL_FLOATS (64 * 1024)    /* im2col / col2im buffer per thread: 256 KiB (with C's tile, within a 512 KiB L2) */
#define CONV_SERIAL_WORK (1 << 16)     /* multiply-adds below which one thread runs it all */
#define SHIFT_MIN_CIN 8                /* input channels per group for the shifted path */
#define SHIFT_PAD_FLOATS (128 * 1024)  /* padded band per thread: 512 KiB */
#define SHIFT_MAX_FLOATS (2 * 1024 * 1024) /* a one-row band larger than this: im2col instead */

typedef enum { CONV_DEPTHWISE = 0, CONV_POINTWISE, CONV_IM2COL, CONV_SHIFT } conv_algo;

typedef struct {
    kern_conv_geom g;
    conv_algo algo;
    int64_t cin_g, cout_g, kvol, in_vol, out_vol, K;
    int64_t tm, tn, n_tm, n_tn; /* GEMM tiles (rows of cout_g, output positions) */
    int64_t ntasks, band;
    /* shifted path: bands of `band` output rows, n_bands of them; padded rows pr of pitch pw */
    int64_t n_bands, pr, pw;
    float *wpack;               /* tap-major weights [group][kvol][cout_g][cin_g], or NULL (runtime W) */
    kern_sgemm_apack *apk;      /* constant W packed for kern_sgemm: per (group, row tile), or per
                                 * (group, tap) on the shifted path; NULL for runtime W */
    int64_t n_apk;
    int64_t *boff;              /* shifted path: each tap's offset in the padded band, kvol of them */
    size_t shared;              /* scratch floats shared by all threads (reordered runtime W) */
    size_t per_thread;          /* scratch floats per thread (a multiple of 16) */
    int nthreads;               /* threads scratch was sized for */
    int serial;                 /* too little work to split */
} conv_state;

typedef struct {
    kern_conv_geom g;
    int64_t cin_g, cout_g, kvol, in_vol, out_vol;
    int64_t cb, n_cb, tn, n_tn; /* output channels per block, input positions per tile */
    int overlap;                /* taps of different inputs may meet: tiles of a block in order */
    int exact;                  /* kernel = stride, no padding: every output gets exactly one tap */
    int64_t ntasks;
    size_t per_thread;
    int nthreads, serial;
} convt_state;

static void conv_free_state(void *state)
{
    conv_state *s = state;
    if (s) {
        free(s->wpack);
        free(s->boff);
        for (int64_t i = 0; s->apk && i < s->n_apk; i++) kern_sgemm_apack_free(&s->apk[i]);
        free(s->apk);
    }
    free(s);
}

/* Packs n_apk row-major matrices of rows x k each (matrix i at w + i * stride, pitch k) once. */
static ptq_status pack_weights(ptq_op_ctx *ctx, conv_state *s, const float *w, int64_t n_apk, int64_t rows_of_last,
                               int64_t rows, int64_t every, int64_t k, int64_t stride)
{
    s->apk = calloc((size_t)n_apk, sizeof *s->apk);
    if (!s->apk) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for packed weights");
    s->n_apk = n_apk;
    for (int64_t i = 0; i < n_apk; i++) {
        int64_t r = (i + 1) % every == 0 ? rows_of_last : rows;
        if (kern_sgemm_pack_a(0, r, k, w + i * stride, k, &s->apk[i]) != 0)
            OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for packed weights");
    }
    return PTQ_OK;
}

/* ------------------------------------------------------------ shared checks */

static ptq_status check_io(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 3);
    if (st != PTQ_OK) return st;
    if (ctx->n_out < 1 || !ctx->out[0]) OP_FAIL(ctx, PTQ_ERR_FORMAT, "output 0 is missing");
    for (int i = 0; i < ctx->n_in; i++)
        if (ctx->in[i] && ctx->in[i]->dtype != PTQ_F32)
            OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d has dtype %s; only float32 is supported", i,
                    ptq_dtype_name(ctx->in[i]->dtype));
    const ptq_tensor *x = ctx->in[0], *w = ctx->in[1];
    if (x->rank < 3 || x->rank > 5)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input rank %d (1 to 3 spatial dims supported: rank 3 to 5)", x->rank);
    if (w->rank != x->rank) OP_FAIL(ctx, PTQ_ERR_SHAPE, "weight rank %d, expected %d (the input's)", w->rank, x->rank);
    for (int d = 0; d < x->rank; d++)
        if (x->dims[d] < 0 || w->dims[d] < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "negative dim %d", d);
    return PTQ_OK;
}

static ptq_status check_bias(ptq_op_ctx *ctx, int64_t c_out)
{
    if (ctx->n_in < 3 || !ctx->in[2]) return PTQ_OK;
    const ptq_tensor *b = ctx->in[2];
    if (b->rank != 1 || b->dims[0] != c_out)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "bias has rank %d and %lld values, expected rank 1 with %lld (output channels)",
                b->rank, (long long)(b->rank >= 1 ? b->dims[0] : 1), (long long)c_out);
    return PTQ_OK;
}

/* *acc *= v with an overflow check; returns 0 on overflow. */
static int mul_ok(int64_t *acc, int64_t v)
{
    if (v != 0 && *acc > INT64_MAX / v) return 0;
    *acc *= v;
    return 1;
}

/* Sets out[0]: [N, c_out, spatial out...]; fails when its element count overflows. */
static ptq_status set_output(ptq_op_ctx *ctx, const ptq_spatial *sp, int64_t c_out)
{
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int64_t n = x->dims[0];
    if (!mul_ok(&n, c_out)) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output size overflows");
    y->dtype = PTQ_F32;
    y->rank = x->rank;
    y->dims[0] = x->dims[0];
    y->dims[1] = c_out;
    for (int d = 0; d < sp->nsp; d++) {
        y->dims[2 + d] = sp->out[d];
        if (sp->out[d] < 0 || !mul_ok(&n, sp->out[d])) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output size overflows");
    }
    return PTQ_OK;
}

/* Threads for ntasks tasks of `work` multiply-adds in all, within what scratch was sized for. */
static int team_size(const ptq_op_ctx *ctx, int sized_for, int64_t ntasks, int serial)
{
    int nt = ctx->nthreads < sized_for ? ctx->nthreads : sized_for;
    if (serial || nt < 1) nt = 1;
    if ((int64_t)nt > ntasks) nt = ntasks > 0 ? (int)ntasks : 1;
    return nt;
}

static size_t round16(size_t n)
{
    return (n + 15) / 16 * 16;
}

/* Scratch of shared + nthreads * per floats, with an overflow check. */
static ptq_status set_scratch(ptq_op_ctx *ctx, size_t shared, size_t per, int nthreads)
{
    if (per > (SIZE_MAX / sizeof(float) - shared) / (size_t)nthreads)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "scratch size overflows");
    ctx->scratch_bytes = (shared + per * (size_t)nthreads) * sizeof(float);
    return PTQ_OK;
}

/* The epilogue of a rows x n block of pitch ld: + the row's bias (after the product's
 * chain, as ONNX Runtime adds it; bias may be NULL), then the activation, while in cache. */
/* The fused per-channel steps (op.h: ptq_chan_op) on one row of channel ch. */
static void chan_ops_row(const ptq_op_ctx *ctx, float *restrict row, int64_t n, int64_t ch)
{
    for (int k = 0; k < ctx->n_chan; k++) {
        const ptq_chan_op *o = &ctx->chan[k];
        float v = o->v[o->per_channel ? ch : 0];
        switch (o->kind) {
        case PTQ_CHAN_MUL: for (int64_t i = 0; i < n; i++) row[i] = row[i] * v; break;
        case PTQ_CHAN_ADD: for (int64_t i = 0; i < n; i++) row[i] = row[i] + v; break;
        case PTQ_CHAN_SUB: for (int64_t i = 0; i < n; i++) row[i] = row[i] - v; break;
        default: for (int64_t i = 0; i < n; i++) row[i] = row[i] / v; break;
        }
    }
}

/* Bias, fused channel steps and activation on rows of channels ch0, ch0 + 1, ... */
static void bias_act_rows(const ptq_op_ctx *ctx, float *y, int64_t rows, int64_t n, int64_t ld, const float *bias,
                          int64_t ch0)
{
    int act = kern_act_active(&ctx->act);
    for (int64_t r = 0; r < rows; r++) {
        float *row = y + r * ld;
        if (bias) {
            float b = bias[r];
            for (int64_t i = 0; i < n; i++) row[i] += b;
        }
        if (ctx->n_chan) chan_ops_row(ctx, row, n, ch0 + r);
        if (act) kern_act_f32(&ctx->act, row, (size_t)n);
    }
}

/* W [cout][cin_g][kvol] -> dst [group][kvol][cout_g][cin_g] (each tap a row-major matrix). */
static void reorder_weights(const conv_state *s, const float *w, float *dst, int64_t r0, int64_t r1)
{
    for (int64_t oc = r0; oc < r1; oc++) {
        int64_t grp = oc / s->cout_g, m = oc % s->cout_g;
        for (int64_t ci = 0; ci < s->cin_g; ci++)
            for (int64_t t = 0; t < s->kvol; t++)
                dst[((grp * s->kvol + t) * s->cout_g + m) * s->cin_g + ci] = w[(oc * s->cin_g + ci) * s->kvol + t];
    }
}

/* ------------------------------------------------------------ Conv */

static ptq_status conv_infer(ptq_op_ctx *ctx)
{
    ptq_status st = check_io(ctx);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *w = ctx->in[1];
    int nsp = x->rank - 2;
    int64_t group = ptq_attr_int(ctx->node, "group", 1);
    int64_t c_in = x->dims[1], c_out = w->dims[0];
    if (group < 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "group %lld, expected >= 1", (long long)group);
    if (w->dims[1] > INT64_MAX / group || w->dims[1] * group != c_in)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "input has %lld channels but weight dim 1 is %lld with group %lld (expected %lld)",
                (long long)c_in, (long long)w->dims[1], (long long)group, (long long)(c_in / group));
    if (c_out % group != 0)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "%lld output channels do not split into %lld groups", (long long)c_out,
                (long long)group);
    if ((st = check_bias(ctx, c_out)) != PTQ_OK) return st;
    ptq_spatial sp;
    if ((st = ptq_spatial_resolve(ctx, nsp, &x->dims[2], &w->dims[2], &sp)) != PTQ_OK) return st;
    if ((st = set_output(ctx, &sp, c_out)) != PTQ_OK) return st;

    conv_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    kern_conv_geom_set(&s->g, &sp, x->dims[0], c_in, c_out, group);
    s->cin_g = c_in / group;
    s->cout_g = c_out / group;
    s->kvol = kern_geom_kvol(&s->g);
    s->in_vol = kern_geom_in_vol(&s->g);
    s->out_vol = kern_geom_out_vol(&s->g);
    s->K = s->cin_g * s->kvol;
    s->nthreads = ctx->nthreads > 0 ? ctx->nthreads : 1;
    ctx->scratch_bytes = 0;
    if (s->out_vol == 0 || x->dims[0] == 0 || c_out == 0) {
        s->ntasks = 0;
        return PTQ_OK;
    }
    const kern_conv_geom *g = &s->g;
    int pointwise = 1;
    for (int d = 0; d < 3; d++)
        if (g->k[d] != 1 || g->stride[d] != 1 || g->pad[d] != 0) pointwise = 0;
    if (s->cin_g == 1 && (group > 1 || s->cout_g == 1) && kern_depthwise_fits(g)) {
        s->algo = CONV_DEPTHWISE;
        s->ntasks = g->batch * c_out;
        s->per_thread = round16(kern_depthwise_scratch(g, &s->band));
        s->serial = s->ntasks * s->out_vol * s->kvol < CONV_SERIAL_WORK;
    } else if (!pointwise && g->stride[1] == 1 && g->stride[2] == 1 && kern_depthwise_fits(g) &&
               s->cin_g >= SHIFT_MIN_CIN &&
               (double)s->cin_g * (double)((g->k[1] - 1) * g->dil[1] + 1) * (double)(g->out[2] + (g->k[2] - 1) * g->dil[2]) <=
                   (double)SHIFT_MAX_FLOATS) {
        s->algo = CONV_SHIFT;
        int64_t count = g->batch * group, ekh = (g->k[1] - 1) * g->dil[1] + 1;
        s->pw = g->out[2] + (g->k[2] - 1) * g->dil[2];
        int64_t rows = kern_split_rows(g->out[1], SHIFT_PAD_FLOATS / (s->cin_g * s->pw) - (ekh - 1), count);
        s->band = rows;
        s->n_bands = kern_ceil_div(g->out[1], rows);
        s->pr = rows + ekh - 1;
        s->ntasks = count * s->n_bands;
        int64_t nw = rows * s->pw;
        if (s->pr > INT64_MAX / s->pw) OP_FAIL(ctx, PTQ_ERR_SHAPE, "padded band size overflows");
        s->per_thread = round16((size_t)(s->cin_g * s->pr * s->pw)) + round16((size_t)(s->cout_g * nw));
        size_t wn = (size_t)c_out * (size_t)s->K;
        if (w->data) { /* constant weights: reorder once */
            s->wpack = malloc(sizeof(float) * (wn ? wn : 1));
            if (!s->wpack) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for %zu reordered weights", wn);
            reorder_weights(s, w->data, s->wpack, 0, c_out);
            ptq_status ps = pack_weights(ctx, s, s->wpack, group * s->kvol, s->cout_g, s->cout_g, 1, s->cin_g,
                                         s->cout_g * s->cin_g);
            if (ps != PTQ_OK) return ps;
            s->boff = malloc(sizeof(int64_t) * (size_t)s->kvol);
            if (!s->boff) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for %lld tap offsets", (long long)s->kvol);
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++)
                    s->boff[kh * g->k[2] + kw] = kh * g->dil[1] * s->pw + kw * g->dil[2];
        } else {
            s->shared = round16(wn);
        }
        double work = (double)count * (double)s->cout_g * (double)s->out_vol * (double)s->K;
        s->serial = work < (double)CONV_SERIAL_WORK;
    } else {
        s->algo = pointwise ? CONV_POINTWISE : CONV_IM2COL;
        int64_t count = g->batch * group;
        if (s->algo == CONV_POINTWISE) {
            kern_gemm_tiles(s->cout_g, s->out_vol, s->K, count, 1, CONV_PANEL_FLOATS, &s->tm, &s->tn);
            s->per_thread = 0;
        } else {
            kern_gemm_tiles(s->cout_g, s->out_vol, s->K, count, 0, CONV_COL_FLOATS, &s->tm, &s->tn);
            s->per_thread = round16((size_t)s->K * (size_t)s->tn);
        }
        s->n_tm = kern_ceil_div(s->cout_g, s->tm);
        s->n_tn = kern_ceil_div(s->out_vol, s->tn);
        s->ntasks = count * s->n_tm * s->n_tn;
        if (w->data) { /* constant weights: packed once per (group, row tile) */
            int64_t last = s->cout_g - (s->n_tm - 1) * s->tm;
            if ((st = pack_weights(ctx, s, w->data, group * s->n_tm, last, s->tm, s->n_tm, s->K, s->tm * s->K)) != PTQ_OK)
                return st;
        }
        double work = (double)count * (double)s->cout_g * (double)s->out_vol * (double)(s->K > 0 ? s->K : 1);
        s->serial = work < (double)CONV_SERIAL_WORK;
    }
    return set_scratch(ctx, s->shared, s->per_thread, s->nthreads);
}

/* One GEMM tile of a pointwise or im2col conv: positions [p0, p0+np) of output rows [m0, m0+mm). */
static void conv_gemm_task(const ptq_op_ctx *ctx, const conv_state *s, int64_t t, float *buf)
{
    const kern_conv_geom *g = &s->g;
    int64_t tn_i = t % s->n_tn, tm_i = (t / s->n_tn) % s->n_tm, gi = t / (s->n_tn * s->n_tm);
    int64_t grp = gi % g->group, n = gi / g->group;
    int64_t p0 = tn_i * s->tn, np = s->out_vol - p0 < s->tn ? s->out_vol - p0 : s->tn;
    int64_t m0 = tm_i * s->tm, mm = s->cout_g - m0 < s->tm ? s->cout_g - m0 : s->tm;
    const float *x = (const float *)ctx->in[0]->data + (n * g->c_in + grp * s->cin_g) * s->in_vol;
    const float *w = (const float *)ctx->in[1]->data + (grp * s->cout_g + m0) * s->K;
    const float *bias = ctx->n_in > 2 && ctx->in[2] ? (const float *)ctx->in[2]->data + grp * s->cout_g + m0 : NULL;
    float *y = (float *)ctx->out[0]->data + (n * g->c_out + grp * s->cout_g + m0) * s->out_vol + p0;
    const kern_sgemm_apack *apk = s->apk ? &s->apk[grp * s->n_tm + tm_i] : NULL;
    const float *b = x + p0;
    int64_t ldb = s->in_vol;
    if (s->algo == CONV_IM2COL) {
        kern_im2col_f32(g, s->cin_g, x, p0, np, buf);
        b = buf;
        ldb = np;
    }
    if (apk)
        kern_sgemm_packed(apk, 0, np, b, ldb, 0, y, s->out_vol);
    else
        kern_sgemm(0, 0, mm, np, s->K, w, s->K, b, ldb, 0, y, s->out_vol);
    bias_act_rows(ctx, y, mm, np, s->out_vol, bias, grp * s->cout_g + m0);
    if (ctx->sink) ctx->sink->tile(ctx->sink, omp_get_thread_num(), y, mm, np, s->out_vol);
}

/* One band of output rows of a shifted conv; t = (n * group + grp) * n_bands + band. */
static void conv_shift_task(const ptq_op_ctx *ctx, const conv_state *s, const float *wpack, int64_t t, float *buf)
{
    const kern_conv_geom *g = &s->g;
    const int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2], pw = s->pw;
    int64_t bi = t % s->n_bands, gi = t / s->n_bands, grp = gi % g->group, n = gi / g->group;
    int64_t oh0 = bi * s->band, rows = OH - oh0 < s->band ? OH - oh0 : s->band;
    int64_t pr = rows + (s->pr - s->band), nw = (rows - 1) * pw + OW, ldc = s->band * pw;
    const float *x = (const float *)ctx->in[0]->data + (n * g->c_in + grp * s->cin_g) * s->in_vol;
    const float *bias = ctx->n_in > 2 && ctx->in[2] ? (const float *)ctx->in[2]->data + grp * s->cout_g : NULL;
    float *pad = buf, *c = buf + round16((size_t)(s->cin_g * s->pr * pw));
    /* the band's input rows with their zero padding: columns [c0, c0 + cn) come from x */
    int64_t c0 = g->pad[2] < pw ? g->pad[2] : pw, cn = W < pw - c0 ? W : pw - c0;
    for (int64_t ci = 0; ci < s->cin_g; ci++)
        for (int64_t r = 0; r < pr; r++) {
            int64_t ih = oh0 - g->pad[1] + r;
            float *d = pad + (ci * s->pr + r) * pw;
            if (ih < 0 || ih >= H || cn <= 0) {
                memset(d, 0, sizeof(float) * (size_t)pw);
                continue;
            }
            memset(d, 0, sizeof(float) * (size_t)c0);
            memcpy(d + c0, x + ci * s->in_vol + ih * W, sizeof(float) * (size_t)cn);
            memset(d + c0 + cn, 0, sizeof(float) * (size_t)(pw - c0 - cn));
        }
    if (s->apk && s->kvol <= KERN_TAPS_MAX) { /* every tap per column panel (C stays in cache): the same chains */
        kern_sgemm_packed_taps(&s->apk[grp * s->kvol], (int)s->kvol, s->boff, nw, pad, s->pr * pw, c, ldc);
    } else {
        int acc = 0; /* the first tap starts the chains; the others continue them */
        for (int64_t kh = 0; kh < g->k[1]; kh++)
            for (int64_t kw = 0; kw < g->k[2]; kw++) {
                int64_t tap = kh * g->k[2] + kw;
                const float *a = wpack + (grp * s->kvol + tap) * s->cout_g * s->cin_g;
                const float *b = pad + kh * g->dil[1] * pw + kw * g->dil[2];
                if (s->apk)
                    kern_sgemm_packed(&s->apk[grp * s->kvol + tap], 0, nw, b, s->pr * pw, acc, c, ldc);
                else
                    kern_sgemm(0, 0, s->cout_g, nw, s->cin_g, a, s->cin_g, b, s->pr * pw, acc, c, ldc);
                acc = 1;
            }
    }
    /* compact the wide rows into the output, then the bias and the activation on the band */
    float *y = (float *)ctx->out[0]->data + (n * g->c_out + grp * s->cout_g) * s->out_vol + oh0 * OW;
    for (int64_t m = 0; m < s->cout_g; m++) {
        float *ym = y + m * s->out_vol;
        for (int64_t r = 0; r < rows; r++) memcpy(ym + r * OW, c + m * ldc + r * pw, sizeof(float) * (size_t)OW);
    }
    bias_act_rows(ctx, y, s->cout_g, rows * OW, s->out_vol, bias, grp * s->cout_g);
    if (ctx->sink) ctx->sink->tile(ctx->sink, omp_get_thread_num(), y, s->cout_g, rows * OW, s->out_vol);
}

/* One output plane of a depthwise conv; t = n * c_out + oc. */
static void conv_dw_task(const ptq_op_ctx *ctx, const conv_state *s, int64_t t, float *buf)
{
    const kern_conv_geom *g = &s->g;
    int64_t oc = t % g->c_out, n = t / g->c_out, grp = oc / s->cout_g;
    const float *x = (const float *)ctx->in[0]->data + (n * g->c_in + grp) * s->in_vol;
    const float *w = (const float *)ctx->in[1]->data + oc * s->kvol;
    float b = ctx->n_in > 2 && ctx->in[2] ? ((const float *)ctx->in[2]->data)[oc] : 0.0f;
    float *y = (float *)ctx->out[0]->data + t * s->out_vol;
    if (ctx->n_chan) { /* the steps come between the bias and the activation */
        ptq_activation none = {0};
        kern_depthwise_plane_f32(g, s->band, x, w, b, &none, y, buf);
        chan_ops_row(ctx, y, s->out_vol, oc);
        if (kern_act_active(&ctx->act)) kern_act_f32(&ctx->act, y, (size_t)s->out_vol);
    } else {
        kern_depthwise_plane_f32(g, s->band, x, w, b, &ctx->act, y, buf);
    }
    if (ctx->sink) ctx->sink->tile(ctx->sink, omp_get_thread_num(), y, 1, s->out_vol, s->out_vol);
}

static ptq_status conv_run(ptq_op_ctx *ctx)
{
    const conv_state *s = ctx->state;
    if (s->ntasks == 0) return PTQ_OK;
    int nt = team_size(ctx, s->nthreads, s->ntasks, s->serial);
    float *scratch = ctx->scratch;
    const float *wpack = s->wpack ? s->wpack : scratch; /* runtime W: reordered below into the shared part */
#pragma omp parallel num_threads(nt)
    {
        float *buf = s->per_thread ? scratch + s->shared + s->per_thread * (size_t)omp_get_thread_num() : NULL;
        if (s->algo == CONV_DEPTHWISE) {
            /* uniform planes: contiguous static ranges (no shared counter, no false sharing) */
#pragma omp for schedule(static)
            for (int64_t t = 0; t < s->ntasks; t++) conv_dw_task(ctx, s, t, buf);
        } else if (s->algo == CONV_SHIFT) {
            if (!s->wpack) {
#pragma omp for schedule(static)
                for (int64_t oc = 0; oc < s->g.c_out; oc++) reorder_weights(s, ctx->in[1]->data, scratch, oc, oc + 1);
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < s->ntasks; t++) conv_shift_task(ctx, s, wpack, t, buf);
        } else {
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < s->ntasks; t++) conv_gemm_task(ctx, s, t, buf);
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_conv = {conv_infer, conv_run, conv_free_state, PTQ_OP_FUSE_ACT | PTQ_OP_TILES};

/* ------------------------------------------------------------ ConvTranspose */

static ptq_status convt_infer(ptq_op_ctx *ctx)
{
    ptq_status st = check_io(ctx);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *w = ctx->in[1];
    int nsp = x->rank - 2;
    int64_t group = ptq_attr_int(ctx->node, "group", 1);
    int64_t c_in = x->dims[1];
    if (group < 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "group %lld, expected >= 1", (long long)group);
    if (w->dims[0] != c_in)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "input has %lld channels but weight dim 0 is %lld", (long long)c_in,
                (long long)w->dims[0]);
    if (c_in % group != 0)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "%lld input channels do not split into %lld groups", (long long)c_in,
                (long long)group);
    if (w->dims[1] > INT64_MAX / group) OP_FAIL(ctx, PTQ_ERR_SHAPE, "output channel count overflows");
    int64_t c_out = w->dims[1] * group;
    if ((st = check_bias(ctx, c_out)) != PTQ_OK) return st;
    ptq_spatial sp;
    if ((st = ptq_spatial_resolve_transposed(ctx, nsp, &x->dims[2], &w->dims[2], &sp)) != PTQ_OK) return st;
    if ((st = set_output(ctx, &sp, c_out)) != PTQ_OK) return st;

    convt_state *s = calloc(1, sizeof *s);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory allocating its state (%zu bytes)", sizeof *s);
    ctx->state = s;
    kern_conv_geom_set(&s->g, &sp, x->dims[0], c_in, c_out, group);
    const kern_conv_geom *g = &s->g;
    s->cin_g = c_in / group;
    s->cout_g = c_out / group;
    s->kvol = kern_geom_kvol(g);
    s->in_vol = kern_geom_in_vol(g);
    s->out_vol = kern_geom_out_vol(g);
    s->nthreads = ctx->nthreads > 0 ? ctx->nthreads : 1;
    ctx->scratch_bytes = 0;
    if (s->out_vol == 0 || g->batch == 0 || c_out == 0) {
        s->ntasks = 0;
        return PTQ_OK;
    }
    s->overlap = 0;
    for (int d = 0; d < 3; d++)
        if ((g->k[d] - 1) * g->dil[d] + 1 > g->stride[d]) s->overlap = 1;
    if (s->in_vol == 0) s->overlap = 1; /* one task per block still writes the bias */
    /* channel blocks: at most ~1024 column rows each, and enough blocks to share out
     * when the tiles of a block cannot run in parallel */
    int64_t count = g->batch * group;
    s->cb = s->cout_g;
    if (s->cb * s->kvol > 1024) s->cb = 1024 / s->kvol > 1 ? 1024 / s->kvol : 1;
    if (s->overlap && count * kern_ceil_div(s->cout_g, s->cb) < KERN_MIN_TASKS) {
        int64_t want = kern_ceil_div(KERN_MIN_TASKS, count), per = kern_ceil_div(s->cout_g, want);
        if (per < s->cb) s->cb = per > 0 ? per : 1;
    }
    s->n_cb = kern_ceil_div(s->cout_g, s->cb);
    int64_t rows = s->cb * s->kvol;
    s->tn = CONV_COL_FLOATS / rows / 16 * 16;
    if (s->tn < 16) s->tn = 16;
    if (s->in_vol > 0 && s->tn > s->in_vol) s->tn = s->in_vol;
    if (s->tn < 1) s->tn = 1;
    s->n_tn = s->in_vol > 0 ? kern_ceil_div(s->in_vol, s->tn) : 0;
    s->ntasks = count * s->n_cb * (s->overlap ? 1 : s->n_tn);
    s->exact = !s->overlap && kern_depthwise_fits(g);
    for (int d = 1; d < 3; d++)
        if (g->k[d] != g->stride[d] || (g->k[d] > 1 && g->dil[d] != 1) || g->pad[d] != 0 ||
            g->out[d] != g->in[d] * g->stride[d])
            s->exact = 0;
    if (s->exact) { /* tiles of whole input rows */
        int64_t per_row = rows * g->in[2];
        int64_t trows = kern_split_rows(g->in[1], CONV_COL_FLOATS / (per_row > 0 ? per_row : 1), count * s->n_cb);
        s->tn = trows * g->in[2];
        s->n_tn = kern_ceil_div(g->in[1], trows);
        s->ntasks = count * s->n_cb * s->n_tn;
    }
    s->per_thread = round16((size_t)rows * (size_t)s->tn);
    double work = (double)count * (double)s->cout_g * (double)s->kvol * (double)s->in_vol * (double)s->cin_g;
    s->serial = work < (double)CONV_SERIAL_WORK;
    return set_scratch(ctx, 0, s->per_thread, s->nthreads);
}

/* Input-position tile tn_i of channel block (n, grp, cb_i): GEMM into buf, then col2im. */
static void convt_tile(const ptq_op_ctx *ctx, const convt_state *s, int64_t n, int64_t grp, int64_t cb_i, int64_t tn_i,
                       float *buf)
{
    const kern_conv_geom *g = &s->g;
    int64_t c0 = cb_i * s->cb, nc = s->cout_g - c0 < s->cb ? s->cout_g - c0 : s->cb;
    int64_t p0 = tn_i * s->tn, np = s->in_vol - p0 < s->tn ? s->in_vol - p0 : s->tn;
    const float *x = (const float *)ctx->in[0]->data + (n * g->c_in + grp * s->cin_g) * s->in_vol;
    const float *w = (const float *)ctx->in[1]->data + grp * s->cin_g * s->cout_g * s->kvol + c0 * s->kvol;
    float *y = (float *)ctx->out[0]->data + (n * g->c_out + grp * s->cout_g + c0) * s->out_vol;
    kern_sgemm(1, 0, nc * s->kvol, np, s->cin_g, w, s->cout_g * s->kvol, x + p0, s->in_vol, 0, buf, np);
    for (int64_t c = 0; c < nc; c++) kern_col2im_add_f32(g, buf + c * s->kvol * np, np, p0, np, y + c * s->out_vol);
}

/* Exact cover: input rows [r0, r0 + tn / in[2]) of channel block (n, grp, cb_i) -> output rows,
 * each written once as bias + tap, then activated. */
static void convt_exact_tile(const ptq_op_ctx *ctx, const convt_state *s, int64_t n, int64_t grp, int64_t cb_i,
                             int64_t tr_i, float *buf)
{
    const kern_conv_geom *g = &s->g;
    const int64_t IW = g->in[2], s1 = g->stride[1], s2 = g->stride[2], OW = g->out[2];
    int64_t trows = s->tn / IW, r0 = tr_i * trows, nr = g->in[1] - r0 < trows ? g->in[1] - r0 : trows;
    int64_t c0 = cb_i * s->cb, nc = s->cout_g - c0 < s->cb ? s->cout_g - c0 : s->cb, np = nr * IW;
    const float *x = (const float *)ctx->in[0]->data + (n * g->c_in + grp * s->cin_g) * s->in_vol + r0 * IW;
    const float *w = (const float *)ctx->in[1]->data + grp * s->cin_g * s->cout_g * s->kvol + c0 * s->kvol;
    const float *bias = ctx->n_in > 2 && ctx->in[2] ? (const float *)ctx->in[2]->data + grp * s->cout_g + c0 : NULL;
    float *y = (float *)ctx->out[0]->data + (n * g->c_out + grp * s->cout_g + c0) * s->out_vol;
    kern_sgemm(1, 0, nc * s->kvol, np, s->cin_g, w, s->cout_g * s->kvol, x, s->in_vol, 0, buf, np);
    int act = kern_act_active(&ctx->act);
    for (int64_t c = 0; c < nc; c++) {
        float bv = bias ? bias[c] : 0.0f;
        for (int64_t r = 0; r < nr; r++)
            for (int64_t a = 0; a < s1; a++) {
                float *o = y + c * s->out_vol + ((r0 + r) * s1 + a) * OW;
                const float *src = buf + (c * s->kvol + a * s2) * np + r * IW;
                if (s2 == 2) {
                    const float *e = src, *f = src + np;
                    for (int64_t i = 0; i < IW; i++) {
                        o[2 * i] = bv + e[i];
                        o[2 * i + 1] = bv + f[i];
                    }
                } else {
                    for (int64_t b = 0; b < s2; b++)
                        for (int64_t i = 0; i < IW; i++) o[i * s2 + b] = bv + src[b * np + i];
                }
                if (ctx->n_chan) chan_ops_row(ctx, o, OW, grp * s->cout_g + c0 + c);
                if (act) kern_act_f32(&ctx->act, o, (size_t)OW);
            }
    }
}

static ptq_status convt_run(ptq_op_ctx *ctx)
{
    const convt_state *s = ctx->state;
    if (s->ntasks == 0) return PTQ_OK;
    const kern_conv_geom *g = &s->g;
    int nt = team_size(ctx, s->nthreads, s->ntasks, s->serial);
    float *scratch = ctx->scratch, *yd = ctx->out[0]->data;
    const float *bias = ctx->n_in > 2 && ctx->in[2] ? (const float *)ctx->in[2]->data : NULL;
    int64_t planes = g->batch * g->c_out;
    int has_act = kern_act_active(&ctx->act);
    if (s->exact) {
#pragma omp parallel num_threads(nt)
        {
                float *buf = scratch + s->per_thread * (size_t)omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
            for (int64_t t = 0; t < s->ntasks; t++) {
                int64_t tr_i = t % s->n_tn, cb_i = (t / s->n_tn) % s->n_cb, gi = t / (s->n_tn * s->n_cb);
                convt_exact_tile(ctx, s, gi / g->group, gi % g->group, cb_i, tr_i, buf);
            }
        }
        return PTQ_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        float *buf = scratch + s->per_thread * (size_t)omp_get_thread_num();
#pragma omp for schedule(static)
        for (int64_t pl = 0; pl < planes; pl++) {
            float b = bias ? bias[pl % g->c_out] : 0.0f, *y = yd + pl * s->out_vol;
            for (int64_t i = 0; i < s->out_vol; i++) y[i] = b;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < s->ntasks; t++) {
            int64_t tn_i = 0, rest = t;
            if (!s->overlap) {
                tn_i = rest % s->n_tn;
                rest /= s->n_tn;
            }
            int64_t cb_i = rest % s->n_cb, gi = rest / s->n_cb;
            int64_t grp = gi % g->group, n = gi / g->group;
            if (s->overlap)
                for (int64_t k = 0; k < s->n_tn; k++) convt_tile(ctx, s, n, grp, cb_i, k, buf);
            else
                convt_tile(ctx, s, n, grp, cb_i, tn_i, buf);
        }
        if (has_act || ctx->n_chan) {
#pragma omp for schedule(static)
            for (int64_t pl = 0; pl < planes; pl++) {
                if (ctx->n_chan) chan_ops_row(ctx, yd + pl * s->out_vol, s->out_vol, pl % g->c_out);
                if (has_act) kern_act_f32(&ctx->act, yd + pl * s->out_vol, (size_t)s->out_vol);
            }
        }
    }
    return PTQ_OK;
}

const ptq_op_def op_conv_transpose = {convt_infer, convt_run, ptq_op_free_state, PTQ_OP_FUSE_ACT};
