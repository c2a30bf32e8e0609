/* signal.c: the signal ops of opset 17: DFT, STFT, HannWindow, HammingWindow,
 * BlackmanWindow, MelWeightMatrix.
 *
 * Every angle these ops need is 2 pi k / n for integers k and n, so the twiddles come from
 * sig_cis(), which reduces k mod n exactly and evaluates sine and cosine polynomials in
 * double on [-pi/4, pi/4] (only + - * /: the same bits on every CPU; no libm call); DFT and
 * STFT tabulate the n of them once, in infer. The
 * transforms are direct O(n^2) sums accumulated in double in index order, one output
 * element per thread at a time, so the results do not depend on the thread count. Sizes
 * (window size, dft_length, frame_step, frame_length, the mel parameters) must be known
 * at plan time; the signals and the STFT window are ordinary runtime inputs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "runtime/op.h"
#include "runtime/shape.h"

#define SIG_PI 3.14159265358979323846

/* cos and sin of 2 pi k / n (n >= 1). */
static void sig_cis(int64_t k, int64_t n, double *c, double *s)
{
    int64_t m = k % n;
    if (m < 0) m += n;
    /* 4 m / n = q + f, q the nearest integer, |f| <= 1/2: angle = (q + f) pi / 2 */
    int64_t q = (4 * m + n / 2) / n;
    double f = (double)(4 * m - q * n) / (double)n;
    double x = f * (SIG_PI / 2.0), x2 = x * x;
    /* Taylor to x^17 / x^18: error below 1e-17 for |x| <= pi/4 */
    double sn = x, cs = 1.0, ts = x, tc = 1.0;
    for (int i = 1; i <= 9; i++) {
        ts *= -x2 / (double)((2 * i) * (2 * i + 1));
        tc *= -x2 / (double)((2 * i - 1) * (2 * i));
        sn += ts;
        cs += tc;
    }
    switch (q & 3) {
    case 0: *c = cs, *s = sn; break;
    case 1: *c = -sn, *s = cs; break;
    case 2: *c = -cs, *s = -sn; break;
    default: *c = sn, *s = -cs; break;
    }
}

/* cos and sin of 2 pi j / n for j < n, interleaved, in one allocation after `head` bytes
 * (the op's state); NULL when out of memory or too large. */
static void *sig_state_with_table(size_t head, int64_t n, double **table)
{
    if (n < 1 || (uint64_t)n > (SIZE_MAX - head) / (2 * sizeof(double))) return NULL;
    char *p = calloc(1, head + (size_t)n * 2 * sizeof(double));
    if (!p) return NULL;
    double *t = (double *)(p + head);
    for (int64_t j = 0; j < n; j++) sig_cis(j, n, &t[2 * j], &t[2 * j + 1]);
    *table = t;
    return p;
}

/* A scalar integer input known at plan time (or fails naming it). */
static ptq_status const_int(ptq_op_ctx *ctx, int i, const char *what, int64_t *v)
{
    const ptq_tensor *t = ctx->in[i];
    if (t->dtype != PTQ_I32 && t->dtype != PTQ_I64)
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "%s dtype %s, expected int32 or int64", what, ptq_dtype_name(t->dtype));
    if (ptq_tensor_numel(t) != 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "%s has %zu elements, expected a scalar", what, ptq_tensor_numel(t));
    if (!t->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "%s input is not constant (ptq needs it at plan time)", what);
    *v = ptq_tensor_get_i64(t, 0);
    return PTQ_OK;
}

/* output_datatype: float32 or float64 (the window and mel values are computed in double) */
static ptq_status float_out_type(ptq_op_ctx *ctx, ptq_dtype *dt)
{
    int64_t t = ptq_attr_int(ctx->node, "output_datatype", PTQ_F32);
    if (t != PTQ_F32 && t != PTQ_F64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "output_datatype %lld (ptq writes float32 or float64)", (long long)t);
    *dt = (ptq_dtype)t;
    return PTQ_OK;
}

static void store(ptq_tensor *y, size_t i, double v)
{
    if (y->dtype == PTQ_F64) ((double *)y->data)[i] = v;
    else ((float *)y->data)[i] = (float)v;
}

static double load(const ptq_tensor *x, size_t i)
{
    return x->dtype == PTQ_F64 ? ((const double *)x->data)[i] : (double)((const float *)x->data)[i];
}

/* ------------------------------------------------------------ windows
 * w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1. */

static ptq_status window_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 1, 1);
    if (st != PTQ_OK) return st;
    int64_t size;
    ptq_dtype dt;
    if ((st = const_int(ctx, 0, "size", &size)) != PTQ_OK) return st;
    if (size < 0) OP_FAIL(ctx, PTQ_ERR_SHAPE, "size %lld, expected >= 0", (long long)size);
    if ((st = float_out_type(ctx, &dt)) != PTQ_OK) return st;
    int64_t periodic = ptq_attr_int(ctx->node, "periodic", 1);
    if (periodic != 0 && periodic != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "periodic %lld, expected 0 or 1", (long long)periodic);
    ptq_tensor *y = ctx->out[0];
    y->dtype = dt;
    y->rank = 1;
    y->dims[0] = size;
    ctx->state = (void *)(intptr_t)periodic;
    return PTQ_OK;
}

static ptq_status window_run_coeffs(ptq_op_ctx *ctx, double a0, double a1, double a2)
{
    ptq_tensor *y = ctx->out[0];
    int64_t size = y->dims[0], N = (intptr_t)ctx->state ? size : size - 1;
    for (int64_t n = 0; n < size; n++) {
        double c1 = 1.0, c2 = 1.0, s;
        if (N > 0) {
            sig_cis(n, N, &c1, &s);
            sig_cis(2 * n, N, &c2, &s);
        }
        store(y, (size_t)n, a0 - a1 * c1 + a2 * c2);
    }
    return PTQ_OK;
}

static ptq_status hann_run(ptq_op_ctx *ctx)
{
    return window_run_coeffs(ctx, 0.5, 0.5, 0.0);
}

static ptq_status hamming_run(ptq_op_ctx *ctx)
{
    return window_run_coeffs(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}

static ptq_status blackman_run(ptq_op_ctx *ctx)
{
    return window_run_coeffs(ctx, 0.42, 0.5, 0.08);
}

const ptq_op_def op_hann_window = {window_infer, hann_run, NULL, 0};
const ptq_op_def op_hamming_window = {window_infer, hamming_run, NULL, 0};
const ptq_op_def op_blackman_window = {window_infer, blackman_run, NULL, 0};

/* ------------------------------------------------------------ MelWeightMatrix
 * [dft_length / 2 + 1, num_mel_bins] triangular filters between mel-spaced edges, as the
 * ONNX specification's reference computes them (mel = 2595 log10(1 + hz / 700); the
 * num_mel_bins + 2 edges are hz * (dft_length + 1) // sample_rate; an edge past the last
 * bin, as an upper edge above sample_rate / 2 gives, is taken as the last bin). */

static ptq_status mel_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 5, 5);
    if (st != PTQ_OK) return st;
    int64_t bins, dft, rate;
    ptq_dtype dt;
    if ((st = const_int(ctx, 0, "num_mel_bins", &bins)) != PTQ_OK) return st;
    if ((st = const_int(ctx, 1, "dft_length", &dft)) != PTQ_OK) return st;
    if ((st = const_int(ctx, 2, "sample_rate", &rate)) != PTQ_OK) return st;
    for (int i = 3; i < 5; i++) {
        const ptq_tensor *t = ctx->in[i];
        if ((t->dtype != PTQ_F32 && t->dtype != PTQ_F64) || ptq_tensor_numel(t) != 1)
            OP_FAIL(ctx, PTQ_ERR_FORMAT, "input %d must be a float scalar", i);
        if (!t->data) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input %d (edge frequency) is not constant", i);
    }
    if (bins < 1 || dft < 1 || rate < 1)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "num_mel_bins %lld, dft_length %lld, sample_rate %lld: expected >= 1", (long long)bins,
                (long long)dft, (long long)rate);
    double lo = load(ctx->in[3], 0), hi = load(ctx->in[4], 0);
    if (!(lo >= 0.0 && hi > lo && isfinite(hi)))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "edges %g..%g Hz, expected 0 <= lower < upper (finite)", lo, hi);
    if ((st = float_out_type(ctx, &dt)) != PTQ_OK) return st;
    ptq_tensor *y = ctx->out[0];
    y->dtype = dt;
    y->rank = 2;
    y->dims[0] = dft / 2 + 1;
    y->dims[1] = bins;
    return PTQ_OK;
}

static double hz_to_mel(double hz)
{
    return 2595.0 * ptq_log(1.0 + hz / 700.0) / ptq_log(10.0);
}

static double mel_to_hz(double mel)
{
    return 700.0 * (ptq_exp(mel / 2595.0 * ptq_log(10.0)) - 1.0);
}

static ptq_status mel_run(ptq_op_ctx *ctx)
{
    ptq_tensor *y = ctx->out[0];
    int64_t spec = y->dims[0], bins = y->dims[1];
    int64_t dft = ptq_tensor_get_i64(ctx->in[1], 0), rate = ptq_tensor_get_i64(ctx->in[2], 0);
    double lo = hz_to_mel(load(ctx->in[3], 0)), hi = hz_to_mel(load(ctx->in[4], 0));
    double step = (hi - lo) / (double)(bins + 2);
    int64_t *edge = ctx->scratch;
    for (int64_t i = 0; i < bins + 2; i++) {
        double hz = mel_to_hz((double)i * step + lo);
        edge[i] = (int64_t)floor((double)(dft + 1) * hz / (double)rate);
        if (edge[i] < 0) edge[i] = 0;
        if (edge[i] >= spec) edge[i] = spec - 1;
    }
    size_t n = ptq_tensor_numel(y);
    for (size_t i = 0; i < n; i++) store(y, i, 0.0);
    for (int64_t i = 0; i < bins; i++) {
        int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
        if (c == l) store(y, (size_t)(c * bins + i), 1.0);
        else
            for (int64_t j = l; j <= c; j++) store(y, (size_t)(j * bins + i), (double)(j - l) / (double)(c - l));
        if (h > c)
            for (int64_t j = c; j < h; j++) store(y, (size_t)(j * bins + i), (double)(h - j) / (double)(h - c));
    }
    return PTQ_OK;
}

static ptq_status mel_infer_scratch(ptq_op_ctx *ctx)
{
    ptq_status st = mel_infer(ctx);
    if (st == PTQ_OK) ctx->scratch_bytes = (size_t)(ctx->out[0]->dims[1] + 2) * sizeof(int64_t);
    return st;
}

const ptq_op_def op_mel_weight_matrix = {mel_infer_scratch, mel_run, NULL, 0};

/* ------------------------------------------------------------ DFT
 * input [batch, signal dims..., 1 (real) or 2 (complex)]; along `axis` (a signal dim) the
 * first dft_length samples (zeros past the input's end), transformed; onesided keeps
 * dft_length / 2 + 1 bins. inverse: e^{+i...} and a 1 / dft_length scale. The axis is an
 * attribute at opset 17 and an input (constant) from opset 20. */

typedef struct {
    int axis;
    int64_t len;      /* dft_length */
    int64_t in_len;   /* the input's length along axis */
    int64_t out_len;  /* bins written */
    int inverse;
    size_t outer, inner; /* around axis, excluding the last (re, im) dim */
    const double *tw;    /* cos, sin of 2 pi j / len (in the same allocation) */
} dft_state;

static ptq_status dft_infer(ptq_op_ctx *ctx)
{
    int v20 = ctx->opset >= 20;
    ptq_status st = ptq_op_check_inputs(ctx, 1, v20 ? 3 : 2);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0];
    if (x->dtype != PTQ_F32 && x->dtype != PTQ_F64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "input dtype %s, expected float32 or float64", ptq_dtype_name(x->dtype));
    if (x->rank < 3) OP_FAIL(ctx, PTQ_ERR_SHAPE, "input rank %d, expected >= 3 ([batch, signal..., 1 or 2])", x->rank);
    int64_t comp = x->dims[x->rank - 1];
    if (comp != 1 && comp != 2) OP_FAIL(ctx, PTQ_ERR_SHAPE, "last dim %lld, expected 1 (real) or 2 (complex)", (long long)comp);
    /* opset 17: attribute axis (default 1); opset 20: input 2 (default -2, the last signal dim) */
    int64_t a = v20 ? -2 : ptq_attr_int(ctx->node, "axis", 1), axis;
    if (v20 && ptq_node_attr(ctx->node, "axis")) OP_FAIL(ctx, PTQ_ERR_FORMAT, "axis is an input from opset 20, not an attribute");
    if (v20 && ctx->n_in > 2 && ctx->in[2] && (st = const_int(ctx, 2, "axis", &a)) != PTQ_OK) return st;
    if (ptq_norm_axis(a, x->rank, &axis) || axis == 0 || axis == x->rank - 1)
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "axis %lld, expected a signal dim (1 to %d)", (long long)a, x->rank - 2);
    int64_t inverse = ptq_attr_int(ctx->node, "inverse", 0), onesided = ptq_attr_int(ctx->node, "onesided", 0);
    if ((inverse != 0 && inverse != 1) || (onesided != 0 && onesided != 1))
        OP_FAIL(ctx, PTQ_ERR_FORMAT, "inverse %lld, onesided %lld: expected 0 or 1", (long long)inverse, (long long)onesided);
    if (inverse && onesided) OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "onesided inverse DFT is not supported");
    int64_t len = x->dims[axis];
    if (ctx->n_in > 1 && ctx->in[1] && (st = const_int(ctx, 1, "dft_length", &len)) != PTQ_OK) return st;
    if (len < 1) OP_FAIL(ctx, PTQ_ERR_SHAPE, "dft_length %lld, expected >= 1", (long long)len);
    double *tw;
    size_t head = (sizeof(dft_state) + 15) / 16 * 16;
    dft_state *s = sig_state_with_table(head, len, &tw);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for %lld twiddles", (long long)len);
    ctx->state = s;
    s->tw = tw;
    s->axis = (int)axis;
    s->len = len;
    s->in_len = x->dims[axis];
    s->out_len = onesided ? len / 2 + 1 : len;
    s->inverse = (int)inverse;
    s->outer = 1;
    s->inner = 1;
    for (int d = 0; d < axis; d++) s->outer *= (size_t)x->dims[d];
    for (int d = (int)axis + 1; d < x->rank - 1; d++) s->inner *= (size_t)x->dims[d];
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    ptq_shape_copy(y, x);
    y->dims[axis] = s->out_len;
    y->dims[x->rank - 1] = 2;
    return PTQ_OK;
}

static ptq_status dft_run(ptq_op_ctx *ctx)
{
    const dft_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0];
    ptq_tensor *y = ctx->out[0];
    int64_t comp = x->dims[x->rank - 1], n_used = s->in_len < s->len ? s->in_len : s->len;
    size_t inner = s->inner, total = s->outer * (size_t)s->out_len * inner;
    double sign = s->inverse ? 1.0 : -1.0, scale = s->inverse ? 1.0 / (double)s->len : 1.0;
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t e = 0; e < total; e++) {
        size_t in = e % inner, k = e / inner % (size_t)s->out_len, o = e / inner / (size_t)s->out_len;
        double re = 0.0, im = 0.0;
        for (int64_t n = 0; n < n_used; n++) {
            size_t xi = ((o * (size_t)s->in_len + (size_t)n) * inner + in) * (size_t)comp;
            double xr = load(x, xi), xim = comp == 2 ? load(x, xi + 1) : 0.0, c, sn;
            size_t j = (size_t)(((int64_t)k * n) % s->len);
            c = s->tw[2 * j];
            sn = sign * s->tw[2 * j + 1];
            re += xr * c - xim * sn;
            im += xr * sn + xim * c;
        }
        size_t yi = ((o * (size_t)s->out_len + k) * inner + in) * 2;
        store(y, yi, re * scale);
        store(y, yi + 1, im * scale);
    }
    return PTQ_OK;
}

const ptq_op_def op_dft = {dft_infer, dft_run, ptq_op_free_state, 0};

/* ------------------------------------------------------------ STFT
 * signal [batch, length, 1 or 2] -> [batch, frames, bins, 2]: frame f is
 * signal[f * frame_step + n] * window[n], n < frame_length, transformed (onesided: the
 * first frame_length / 2 + 1 bins). frames = (length - frame_length) / frame_step + 1. */

typedef struct {
    int64_t step, flen, frames, bins;
    const double *tw; /* cos, sin of 2 pi j / flen */
} stft_state;

static ptq_status stft_infer(ptq_op_ctx *ctx)
{
    ptq_status st = ptq_op_check_inputs(ctx, 2, 4);
    if (st != PTQ_OK) return st;
    const ptq_tensor *x = ctx->in[0], *win = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (x->dtype != PTQ_F32 && x->dtype != PTQ_F64)
        OP_FAIL(ctx, PTQ_ERR_UNSUPPORTED, "signal dtype %s, expected float32 or float64", ptq_dtype_name(x->dtype));
    if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "signal must be [batch, length, 1 or 2] (rank %d)", x->rank);
    int64_t step, flen = -1;
    if ((st = const_int(ctx, 1, "frame_step", &step)) != PTQ_OK) return st;
    if (ctx->n_in > 3 && ctx->in[3] && (st = const_int(ctx, 3, "frame_length", &flen)) != PTQ_OK) return st;
    if (win) {
        if (win->dtype != x->dtype || win->rank != 1)
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "window must be a 1-D %s tensor", ptq_dtype_name(x->dtype));
        if (flen >= 0 && flen != win->dims[0])
            OP_FAIL(ctx, PTQ_ERR_SHAPE, "frame_length %lld, window length %lld: expected equal", (long long)flen,
                    (long long)win->dims[0]);
        flen = win->dims[0];
    }
    if (flen < 0) OP_FAIL(ctx, PTQ_ERR_FORMAT, "neither window nor frame_length is given");
    if (step < 1 || flen < 1 || flen > x->dims[1])
        OP_FAIL(ctx, PTQ_ERR_SHAPE, "frame_step %lld, frame_length %lld, signal length %lld: expected 1 <= frame_length <= length",
                (long long)step, (long long)flen, (long long)x->dims[1]);
    int64_t onesided = ptq_attr_int(ctx->node, "onesided", 1);
    if (onesided != 0 && onesided != 1) OP_FAIL(ctx, PTQ_ERR_FORMAT, "onesided %lld, expected 0 or 1", (long long)onesided);
    if (onesided && x->dims[2] == 2) OP_FAIL(ctx, PTQ_ERR_FORMAT, "onesided with a complex signal");
    double *tw;
    size_t head = (sizeof(stft_state) + 15) / 16 * 16;
    stft_state *s = sig_state_with_table(head, flen, &tw);
    if (!s) OP_FAIL(ctx, PTQ_ERR_NOMEM, "out of memory for %lld twiddles", (long long)flen);
    ctx->state = s;
    s->tw = tw;
    s->step = step;
    s->flen = flen;
    s->frames = (x->dims[1] - flen) / step + 1;
    s->bins = onesided ? flen / 2 + 1 : flen;
    ptq_tensor *y = ctx->out[0];
    y->dtype = x->dtype;
    y->rank = 4;
    y->dims[0] = x->dims[0];
    y->dims[1] = s->frames;
    y->dims[2] = s->bins;
    y->dims[3] = 2;
    return PTQ_OK;
}

static ptq_status stft_run(ptq_op_ctx *ctx)
{
    const stft_state *s = ctx->state;
    const ptq_tensor *x = ctx->in[0], *win = ctx->n_in > 2 ? ctx->in[2] : NULL;
    ptq_tensor *y = ctx->out[0];
    int64_t comp = x->dims[2], L = x->dims[1];
    size_t total = (size_t)(x->dims[0] * s->frames * s->bins);
#pragma omp parallel for num_threads(ctx->nthreads) schedule(static)
    for (size_t e = 0; e < total; e++) {
        int64_t k = (int64_t)(e % (size_t)s->bins), f = (int64_t)(e / (size_t)s->bins % (size_t)s->frames);
        int64_t b = (int64_t)(e / (size_t)s->bins / (size_t)s->frames);
        double re = 0.0, im = 0.0;
        for (int64_t n = 0; n < s->flen; n++) {
            size_t xi = (size_t)((b * L + f * s->step + n) * comp);
            double w = win ? load(win, (size_t)n) : 1.0, c, sn;
            double xr = load(x, xi) * w, xim = comp == 2 ? load(x, xi + 1) * w : 0.0;
            size_t j = (size_t)((k * n) % s->flen);
            c = s->tw[2 * j];
            sn = -s->tw[2 * j + 1];
            re += xr * c - xim * sn;
            im += xr * sn + xim * c;
        }
        store(y, e * 2, re);
        store(y, e * 2 + 1, im);
    }
    return PTQ_OK;
}

const ptq_op_def op_stft = {stft_infer, stft_run, ptq_op_free_state, 0};
