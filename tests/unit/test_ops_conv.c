/* test_ops_conv.c: Conv and ConvTranspose (runtime/ops/conv.c) run directly, one node
 * at a time, against the scalar references (runtime/kernels/conv_ref.c) on random
 * grids of shapes: 1-D/2-D/3-D, groups and depthwise, strides, dilations, asymmetric
 * pads, auto_pad, output_padding/output_shape, odd sizes, tiles; with constant and
 * runtime weights, fused activations, bit-identical results at 1, 2 and 3 threads,
 * the depthwise kernel against its own reference, and error messages.
 * Tolerance: |a-b| <= 1e-4 + 1e-4*|b|. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/kernels/act.h"
#include "runtime/kernels/conv_ref.h"
#include "runtime/kernels/depthwise.h"
#include "runtime/kernels/sgemm.h"
#include "runtime/op.h"
#include "tests/unit/op_test.h"

#define ATOL 1e-4
#define RTOL 1e-4
#define W_CONST 6u /* op_node.const_mask: w and b visible at infer (constants) */

/* ------------------------------------------------------------ helpers */

/* Runs one node (named node7, opset 13) on ins (NULL = omitted) into *y (allocated here,
 * caller frees); x never has data at infer. Consumes o's attributes. */
static ptq_status run_op(const char *op, const ptq_tensor *const *ins, int n_in, ptq_tensor *y, op_node *o)
{
    o->name = "node7";
    o->opset = 13;
    return op_run_ins(o, op, ins, n_in, y);
}

/* A convolution case; spatial arrays hold nsp values. */
typedef struct {
    int nsp;
    int64_t n, cin_g, cout_g, group;
    int64_t in[3], k[3], stride[3], dil[3], pb[3], pe[3];
    int64_t out_pad[3]; /* transposed only */
    int bias;
} conv_case;

static void case_print(const conv_case *c, const char *op)
{
    printf("    %s nsp %d n %lld cin_g %lld cout_g %lld group %lld bias %d:", op, c->nsp, (long long)c->n,
           (long long)c->cin_g, (long long)c->cout_g, (long long)c->group, c->bias);
    for (int d = 0; d < c->nsp; d++)
        printf(" [in %lld k %lld s %lld d %lld p %lld/%lld op %lld]", (long long)c->in[d], (long long)c->k[d],
               (long long)c->stride[d], (long long)c->dil[d], (long long)c->pb[d], (long long)c->pe[d],
               (long long)c->out_pad[d]);
    printf("\n");
}

static void case_geom(const conv_case *c, int transposed, kern_conv_geom *g)
{
    memset(g, 0, sizeof *g);
    g->batch = c->n;
    g->group = c->group;
    g->c_in = c->cin_g * c->group;
    g->c_out = c->cout_g * c->group;
    int lead = 3 - c->nsp;
    for (int d = 0; d < 3; d++) {
        if (d < lead) {
            g->in[d] = g->out[d] = g->k[d] = g->stride[d] = g->dil[d] = 1;
            continue;
        }
        int s = d - lead;
        int64_t ek = (c->k[s] - 1) * c->dil[s] + 1;
        g->in[d] = c->in[s];
        g->k[d] = c->k[s];
        g->stride[d] = c->stride[s];
        g->dil[d] = c->dil[s];
        g->pad[d] = c->pb[s];
        g->out[d] = transposed ? c->stride[s] * (c->in[s] - 1) + c->out_pad[s] + ek - c->pb[s] - c->pe[s]
                               : (c->in[s] + c->pb[s] + c->pe[s] - ek) / c->stride[s] + 1;
    }
}

/* Runs a case through the op (explicit pads) and compares with the reference.
 * Returns the number of mismatches (or 1 on an error). */
static int check_case(const conv_case *c, int transposed, int nthreads, int w_const, const ptq_activation *act)
{
    kern_conv_geom g;
    case_geom(c, transposed, &g);
    int lead = 3 - c->nsp;
    int64_t xd[5], wd[5], bd[1];
    xd[0] = c->n;
    xd[1] = g.c_in;
    wd[0] = transposed ? g.c_in : g.c_out;
    wd[1] = transposed ? c->cout_g : c->cin_g;
    for (int d = 0; d < c->nsp; d++) {
        xd[2 + d] = c->in[d];
        wd[2 + d] = c->k[d];
    }
    bd[0] = g.c_out;
    ptq_tensor x = tensor_rand(2 + c->nsp, xd, -1, 1), w = tensor_rand(2 + c->nsp, wd, -1, 1);
    ptq_tensor b = tensor_rand(1, bd, -1, 1), y;
    op_node o;
    memset(&o, 0, sizeof o);
    o.nthreads = nthreads;
    o.const_mask = w_const ? W_CONST : 0;
    if (act) o.act = *act;
    int64_t pads[6];
    for (int d = 0; d < c->nsp; d++) {
        pads[d] = c->pb[d];
        pads[c->nsp + d] = c->pe[d];
    }
    add_ints(&o, "strides", c->stride, c->nsp);
    add_ints(&o, "dilations", c->dil, c->nsp);
    add_ints(&o, "pads", pads, 2 * c->nsp);
    add_int(&o, "group", c->group);
    if (irand(0, 1)) add_ints(&o, "kernel_shape", c->k, c->nsp);
    if (transposed) add_ints(&o, "output_padding", c->out_pad, c->nsp);
    const ptq_tensor *ins[3] = {&x, &w, &b};
    ptq_status st = run_op(transposed ? "ConvTranspose" : "Conv", ins, c->bias ? 3 : 2, &y, &o);
    int bad = 0;
    if (st != PTQ_OK) {
        printf("    error: %s\n", ptq_last_error());
        bad = 1;
    } else {
        int shape_ok = y.rank == 2 + c->nsp && y.dims[0] == c->n && y.dims[1] == g.c_out;
        for (int d = 0; d < c->nsp; d++) shape_ok = shape_ok && y.dims[2 + d] == g.out[lead + d];
        if (!shape_ok) {
            char buf[64];
            printf("    output shape %s\n", ptq_shape_str(&y, buf, sizeof buf));
            bad = 1;
        } else {
            size_t n = ptq_tensor_numel(&y);
            float *ref = malloc(sizeof(float) * (n ? n : 1));
            if (!ref) abort();
            if (transposed)
                kern_conv_transpose_ref_f32(&g, x.data, w.data, c->bias ? b.data : NULL, ref);
            else
                kern_conv_ref_f32(&g, x.data, w.data, c->bias ? b.data : NULL, ref);
            if (act) ptq_activation_apply(act, ref, n);
            bad = compare_f32(y.data, ref, n, ATOL, RTOL, transposed ? "ConvTranspose" : "Conv");
            free(ref);
        }
    }
    if (bad) case_print(c, transposed ? "ConvTranspose" : "Conv");
    ptq_tensor_free(&x);
    ptq_tensor_free(&w);
    ptq_tensor_free(&b);
    ptq_tensor_free(&y);
    return bad;
}

/* A random valid case (output >= 1 in every dim). kind: 0 any, 1 depthwise, 2 pointwise,
 * 3 stride 1 with 8 to 12 input channels per group (the shifted path for 1-D/2-D). */
static conv_case random_case(int nsp, int kind, int transposed)
{
    conv_case c;
    memset(&c, 0, sizeof c);
    c.nsp = nsp;
    c.n = irand(1, 2);
    c.group = irand(0, 2) ? 1 : irand(2, 3);
    c.cin_g = irand(1, 5);
    c.cout_g = irand(1, 6);
    if (kind == 1) {
        c.cin_g = 1;
        c.cout_g = irand(0, 3) ? 1 : 2;
        c.group = irand(1, 9);
    }
    if (kind == 3) c.cin_g = irand(8, 12);
    c.bias = (int)irand(0, 1);
    int64_t maxin = nsp == 3 ? 6 : (nsp == 2 ? 13 : 30);
    for (int d = 0; d < nsp; d++) {
        for (;;) {
            c.in[d] = irand(1, maxin);
            c.k[d] = kind == 2 ? 1 : irand(1, 5);
            c.stride[d] = kind == 2 || kind == 3 ? 1 : irand(1, 3);
            c.dil[d] = kind == 2 || irand(0, 2) ? 1 : 2;
            c.pb[d] = kind == 2 ? 0 : irand(0, 2);
            c.pe[d] = kind == 2 ? 0 : irand(0, 2);
            int64_t ek = (c.k[d] - 1) * c.dil[d] + 1;
            if (transposed) {
                int64_t mx = c.stride[d] > c.dil[d] ? c.stride[d] : c.dil[d];
                c.out_pad[d] = irand(0, mx - 1);
                if (c.stride[d] * (c.in[d] - 1) + c.out_pad[d] + ek - c.pb[d] - c.pe[d] >= 1) break;
            } else if (c.in[d] + c.pb[d] + c.pe[d] >= ek) {
                break;
            }
        }
    }
    return c;
}

/* ------------------------------------------------------------ tests */

TEST(conv_random_2d)
{
    for (int it = 0; it < 150; it++) {
        conv_case c = random_case(2, it % 3 == 0 ? 1 : (it % 7 == 0 ? 2 : 0), 0);
        EXPECT_EQ_INT(check_case(&c, 0, 1 + it % 2, it % 2, NULL), 0);
    }
}

TEST(conv_random_shifted)
{
    for (int it = 0; it < 60; it++) {
        conv_case c = random_case(it % 4 ? 2 : 1, 3, 0);
        EXPECT_EQ_INT(check_case(&c, 0, 1 + it % 3, it % 2, NULL), 0);
    }
}

TEST(conv_random_1d_3d)
{
    for (int it = 0; it < 60; it++) {
        conv_case c = random_case(it % 2 ? 1 : 3, it % 5 == 0 ? 1 : (it % 7 == 0 ? 2 : 0), 0);
        EXPECT_EQ_INT(check_case(&c, 0, 2, it % 2, NULL), 0);
    }
}

/* Shapes big enough for several GEMM tiles, row splits and depthwise bands. */
TEST(conv_tiles)
{
    conv_case cases[] = {
        /* nsp n cin_g cout_g group in k stride dil pb pe op bias */
        {2, 1, 600, 5, 1, {40, 41}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}, 1},      /* pointwise, many column tiles */
        {2, 1, 40, 100, 1, {3, 7}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}, 1},       /* pointwise, split rows */
        {2, 2, 30, 7, 1, {37, 29}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}, 1},       /* im2col, several tiles */
        {2, 1, 3, 16, 1, {97, 131}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0}, 0},      /* stem */
        {2, 1, 1, 1, 6, {300, 210}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}, 1},      /* depthwise, bands */
        {2, 1, 1, 1, 5, {203, 190}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, {0}, 1},      /* depthwise 5x5 s2, bands */
        {2, 3, 1, 1, 7, {9, 40}, {5, 5}, {2, 1}, {1, 1}, {2, 2}, {2, 2}, {0}, 1},         /* depthwise, anisotropic stride */
        {2, 1, 1, 1, 4, {12, 40}, {3, 3}, {1, 2}, {1, 1}, {1, 1}, {1, 1}, {0}, 1},
        {2, 1, 1, 1, 4, {19, 23}, {3, 3}, {1, 1}, {2, 3}, {2, 3}, {1, 0}, {0}, 1},        /* depthwise dilated: generic */
        {2, 1, 4, 3, 2, {20, 20}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {0}, 1},        /* 1x1 stride 2: im2col */
        {2, 1, 96, 24, 1, {40, 40}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}, 0},      /* det head conv */
        {1, 1, 480, 60, 1, {40}, {3}, {1}, {1}, {1}, {1}, {0}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int nt = 1; nt <= 2; nt++) EXPECT_EQ_INT(check_case(&cases[i], 0, nt, (int)i % 2, NULL), 0);
}

TEST(conv_transpose_random)
{
    for (int it = 0; it < 120; it++) {
        int nsp = it % 6 == 0 ? 1 : (it % 6 == 1 ? 3 : 2);
        conv_case c = random_case(nsp, 0, 1);
        EXPECT_EQ_INT(check_case(&c, 1, 1 + it % 3, it % 2, NULL), 0);
    }
    conv_case det[] = {
        {2, 1, 24, 24, 1, {40, 40}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {0, 0}, 1}, /* det's upsampling */
        {2, 1, 24, 1, 1, {80, 80}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {0, 0}, 1},
        {2, 2, 300, 3, 1, {9, 11}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},  /* overlapping taps */
        {2, 1, 3, 700, 1, {5, 5}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0, 0}, 0},   /* channel blocks */
        {1, 2, 5, 3, 2, {17}, {3}, {3}, {1}, {0}, {0}, {0}, 1},                          /* exact cover, 1-D, groups */
        {2, 1, 7, 4, 1, {5, 9}, {1, 3}, {1, 3}, {1, 1}, {0, 0}, {0, 0}, {0, 0}, 1},      /* exact cover, 1x3 */
        {2, 3, 9, 2, 1, {61, 7}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {0, 0}, 0},     /* exact cover, many rows */
        {2, 1, 4, 2, 1, {6, 6}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1},      /* + output_padding: not exact */
    };
    for (size_t i = 0; i < sizeof det / sizeof det[0]; i++)
        for (int nt = 1; nt <= 2; nt++) EXPECT_EQ_INT(check_case(&det[i], 1, nt, nt - 1, NULL), 0);
}

TEST(conv_fused_activation)
{
    const ptq_activation acts[4] = {
        {.kind = PTQ_ACT_RELU},
        {.kind = PTQ_ACT_CLIP, .alpha = -0.25f, .beta = 0.5f},
        {.kind = PTQ_ACT_HARD_SWISH, .has_post = 1, .post_mul = 2.0f, .post_add = -1.0f},
        {.kind = PTQ_ACT_NONE, .has_post = 1, .post_mul = 0.5f, .post_add = 0.25f},
    };
    conv_case up = {2, 1, 6, 5, 1, {9, 11}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {0, 0}, 1}; /* exact cover */
    for (int k = 0; k < 4; k++) EXPECT_EQ_INT(check_case(&up, 1, 2, k % 2, &acts[k]), 0);
    for (int it = 0; it < 40; it++) {
        int kind = it % 3 == 0 ? 1 : (it % 3 == 1 ? 2 : 0);
        conv_case c = random_case(2, kind, 0);
        EXPECT_EQ_INT(check_case(&c, 0, 2, 1, &acts[it % 4]), 0);
        conv_case t = random_case(2, 0, 1);
        EXPECT_EQ_INT(check_case(&t, 1, 2, 1, &acts[it % 4]), 0);
    }
}

/* The vectorised epilogue equals ptq_activation_apply bit for bit, NaN and infinities included. */
TEST(act_matches_shared)
{
    const ptq_activation acts[9] = {
        {.kind = PTQ_ACT_RELU},
        {.kind = PTQ_ACT_CLIP, .alpha = -1.0f, .beta = 6.0f},
        {.kind = PTQ_ACT_LEAKY_RELU, .alpha = 0.01f},
        {.kind = PTQ_ACT_SIGMOID},
        {.kind = PTQ_ACT_HARD_SIGMOID, .alpha = 0.2f, .beta = 0.5f},
        {.kind = PTQ_ACT_HARD_SWISH},
        {.kind = PTQ_ACT_HARD_SWISH_DIV6},
        {.kind = PTQ_ACT_HARD_SWISH, .has_post = 1, .post_mul = 1.5f, .post_add = -0.125f},
        {.kind = PTQ_ACT_NONE, .has_post = 1, .post_mul = 3.0f, .post_add = 1.0f},
    };
    enum { N = 1003 };
    static float a[N], b[N];
    for (int k = 0; k < 9; k++) {
        for (int i = 0; i < N; i++) a[i] = frand(-1, 1) * 10.0f;
        a[0] = NAN;
        a[1] = INFINITY;
        a[2] = -INFINITY;
        a[3] = -0.0f;
        a[4] = 3.0f;
        a[5] = -3.0f;
        memcpy(b, a, sizeof a);
        kern_act_f32(&acts[k], a, N);
        ptq_activation_apply(&acts[k], b, N);
        int same = 1;
        for (int i = 0; i < N; i++) {
            uint32_t u, v;
            memcpy(&u, &a[i], 4);
            memcpy(&v, &b[i], 4);
            if (u != v && !(isnan(a[i]) && isnan(b[i]))) {
                if (same) printf("    act kind %d: element %d = %.9g, shared %.9g\n", acts[k].kind, i, (double)a[i], (double)b[i]);
                same = 0;
            }
        }
        EXPECT(same);
    }
    /* hard-swish forms over float bit patterns spread across every exponent */
    enum { M = 1 << 16 };
    static float c[M], d[M];
    for (int k = 5; k <= 6; k++)
        for (uint32_t start = 0; start < 64; start++) {
            for (uint32_t i = 0; i < M; i++) {
                uint32_t bits = (start * 65521u + i * 65537u) * 2654435761u;
                memcpy(&c[i], &bits, 4);
            }
            memcpy(d, c, sizeof c);
            kern_act_f32(&acts[k], c, M);
            ptq_activation_apply(&acts[k], d, M);
            int bad = 0;
            for (uint32_t i = 0; i < M; i++) {
                uint32_t u, v;
                memcpy(&u, &c[i], 4);
                memcpy(&v, &d[i], 4);
                if (u != v && !(isnan(c[i]) && isnan(d[i]))) bad++;
            }
            if (bad) printf("    act kind %d: %d of %d bit patterns differ\n", acts[k].kind, bad, M);
            EXPECT_EQ_INT(bad, 0);
        }
}

/* Runs op on the case's tensors at nthreads; returns the output (caller frees). */
static ptq_tensor run_threads(const char *op, const ptq_tensor *x, const ptq_tensor *w, const ptq_tensor *b,
                              const int64_t *pads, const int64_t *strides, int64_t group, int nthreads)
{
    op_node o;
    memset(&o, 0, sizeof o);
    o.nthreads = nthreads;
    o.const_mask = W_CONST;
    o.act.kind = PTQ_ACT_HARD_SWISH;
    add_ints(&o, "pads", pads, 4);
    add_ints(&o, "strides", strides, 2);
    add_int(&o, "group", group);
    const ptq_tensor *ins[3] = {x, w, b};
    ptq_tensor y;
    if (run_op(op, ins, 3, &y, &o) != PTQ_OK) printf("    error: %s\n", ptq_last_error());
    return y;
}

TEST(conv_threads_bit_identical)
{
    struct {
        const char *op;
        int64_t x[4], w[4], pads[4], strides[2], group;
    } cases[] = {
        {"Conv", {1, 48, 40, 40}, {96, 48, 1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
        {"Conv", {2, 96, 20, 20}, {24, 96, 3, 3}, {1, 1, 1, 1}, {1, 1}, 1},
        {"Conv", {1, 48, 40, 40}, {48, 1, 3, 3}, {1, 1, 1, 1}, {2, 2}, 48},
        {"Conv", {3, 32, 6, 96}, {32, 1, 5, 5}, {2, 2, 2, 2}, {2, 1}, 32},
        {"Conv", {1, 480, 3, 80}, {480, 480, 1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
        {"Conv", {1, 96, 45, 37}, {24, 96, 3, 3}, {1, 1, 1, 1}, {1, 1}, 1},
        {"Conv", {2, 3, 45, 37}, {8, 3, 3, 3}, {1, 1, 1, 1}, {2, 2}, 1},
        {"ConvTranspose", {1, 24, 40, 40}, {24, 24, 2, 2}, {0, 0, 0, 0}, {2, 2}, 1},
        {"ConvTranspose", {1, 16, 20, 20}, {16, 8, 3, 3}, {1, 1, 1, 1}, {2, 2}, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t cout = strcmp(cases[i].op, "Conv") == 0 ? cases[i].w[0] : cases[i].w[1] * cases[i].group;
        ptq_tensor x = tensor_rand(4, cases[i].x, -1, 1), w = tensor_rand(4, cases[i].w, -1, 1);
        ptq_tensor b = tensor_rand(1, &cout, -1, 1);
        ptq_tensor y1 = run_threads(cases[i].op, &x, &w, &b, cases[i].pads, cases[i].strides, cases[i].group, 1);
        for (int nt = 2; nt <= 3; nt++) {
            ptq_tensor yn = run_threads(cases[i].op, &x, &w, &b, cases[i].pads, cases[i].strides, cases[i].group, nt);
            int same = same_bits(&y1, &yn);
            if (!same) printf("    case %zu (%s): %d threads differ from 1\n", i, cases[i].op, nt);
            EXPECT(same);
            ptq_tensor_free(&yn);
        }
        ptq_tensor_free(&y1);
        ptq_tensor_free(&x);
        ptq_tensor_free(&w);
        ptq_tensor_free(&b);
    }
}

/* auto_pad and output_shape: shapes and pads as the ONNX spec computes them. */
TEST(conv_auto_pad)
{
    static const char *modes[3] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
    for (int it = 0; it < 30; it++) {
        const char *mode = modes[it % 3];
        int64_t H = irand(3, 12), W = irand(3, 12), k = irand(1, 4), s = irand(1, 3);
        int64_t xd[4] = {1, 2, H, W}, wd[4] = {3, 2, k, k}, in[2] = {H, W};
        ptq_tensor x = tensor_rand(4, xd, -1, 1), w = tensor_rand(4, wd, -1, 1), y;
        op_node o;
        memset(&o, 0, sizeof o);
        int64_t st2[2] = {s, s}, ks[2] = {k, k};
        add_str(&o, "auto_pad", mode);
        add_ints(&o, "strides", st2, 2);
        add_ints(&o, "kernel_shape", ks, 2);
        const ptq_tensor *ins[2] = {&x, &w};
        ptq_status st = run_op("Conv", ins, 2, &y, &o);
        conv_case c;
        memset(&c, 0, sizeof c);
        c.nsp = 2;
        c.n = 1;
        c.cin_g = 2;
        c.cout_g = 3;
        c.group = 1;
        for (int d = 0; d < 2; d++) {
            c.in[d] = in[d];
            c.k[d] = k;
            c.stride[d] = s;
            c.dil[d] = 1;
            if (it % 3 != 2) {
                int64_t out = (in[d] + s - 1) / s, total = (out - 1) * s + k - in[d];
                if (total < 0) total = 0;
                c.pb[d] = it % 3 == 0 ? total / 2 : total - total / 2;
                c.pe[d] = total - c.pb[d];
            }
        }
        if (it % 3 == 2 && (H < k || W < k)) {
            EXPECT(st != PTQ_OK);
        } else if (st != PTQ_OK) {
            printf("    %s: %s\n", mode, ptq_last_error());
            EXPECT(st == PTQ_OK);
        } else {
            kern_conv_geom g;
            case_geom(&c, 0, &g);
            EXPECT_EQ_INT(y.dims[2], g.out[1]);
            EXPECT_EQ_INT(y.dims[3], g.out[2]);
            if (y.dims[2] == g.out[1] && y.dims[3] == g.out[2]) {
                size_t n = ptq_tensor_numel(&y);
                float *ref = malloc(sizeof(float) * n);
                if (!ref) abort();
                kern_conv_ref_f32(&g, x.data, w.data, NULL, ref);
                int bad = compare_f32(y.data, ref, n, ATOL, RTOL, mode);
                if (bad) case_print(&c, mode);
                EXPECT_EQ_INT(bad, 0);
                free(ref);
            }
        }
        ptq_tensor_free(&x);
        ptq_tensor_free(&w);
        ptq_tensor_free(&y);
    }
    /* ConvTranspose with output_shape: 3x3 input, 3x3 kernel, stride 2 -> 10x8 */
    {
        int64_t xd[4] = {1, 1, 3, 3}, wd[4] = {1, 2, 3, 3}, os[2] = {10, 8}, st2[2] = {3, 2};
        ptq_tensor x = tensor_rand(4, xd, -1, 1), w = tensor_rand(4, wd, -1, 1), y;
        op_node o;
        memset(&o, 0, sizeof o);
        add_ints(&o, "strides", st2, 2);
        add_ints(&o, "output_shape", os, 2);
        const ptq_tensor *ins[2] = {&x, &w};
        ptq_status st = run_op("ConvTranspose", ins, 2, &y, &o);
        EXPECT(st == PTQ_OK);
        if (st == PTQ_OK) {
            EXPECT_EQ_INT(y.dims[2], 10);
            EXPECT_EQ_INT(y.dims[3], 8);
        }
        ptq_tensor_free(&x);
        ptq_tensor_free(&w);
        ptq_tensor_free(&y);
    }
}

/* The depthwise kernel alone against its reference, every specialisation. */
TEST(depthwise_kernel)
{
    for (int it = 0; it < 200; it++) {
        kern_conv_geom g;
        memset(&g, 0, sizeof g);
        g.batch = g.c_in = g.c_out = g.group = 1;
        g.in[0] = g.out[0] = g.k[0] = g.stride[0] = g.dil[0] = 1;
        int64_t k = it % 4 < 2 ? (it % 2 ? 3 : 5) : irand(1, 4);
        for (int d = 1; d < 3; d++) {
            g.k[d] = k;
            g.stride[d] = irand(1, 2);
            g.dil[d] = it % 4 == 3 ? irand(1, 2) : 1;
            g.pad[d] = irand(0, k - 1);
            int64_t ek = (k - 1) * g.dil[d] + 1;
            g.in[d] = irand(ek > g.pad[d] ? ek - g.pad[d] : 1, 50);
            int64_t pe = irand(0, k - 1);
            g.out[d] = (g.in[d] + g.pad[d] + pe - ek) / g.stride[d] + 1;
        }
        if (it % 10 == 0) g.in[1] = g.in[1] + 700; /* several bands */
        if (it % 10 == 0) g.out[1] = (g.in[1] + g.pad[1] - ((k - 1) * g.dil[1] + 1)) / g.stride[1] + 1;
        int64_t band;
        size_t per = kern_depthwise_scratch(&g, &band);
        size_t nin = (size_t)(g.in[1] * g.in[2]), nout = (size_t)(g.out[1] * g.out[2]);
        float *x = malloc(sizeof(float) * nin), *w = malloc(sizeof(float) * 25), *y = malloc(sizeof(float) * nout);
        float *ref = malloc(sizeof(float) * nout), *scr = malloc(sizeof(float) * per);
        if (!x || !w || !y || !ref || !scr) abort();
        for (size_t i = 0; i < nin; i++) x[i] = frand(-1, 1);
        for (int i = 0; i < 25; i++) w[i] = frand(-1, 1);
        ptq_activation none;
        memset(&none, 0, sizeof none);
        kern_depthwise_plane_f32(&g, band, x, w, 0.5f, &none, y, scr);
        kern_depthwise_plane_ref(&g, x, w, 0.5f, ref);
        int bad = compare_f32(y, ref, nout, ATOL, RTOL, "depthwise");
        /* and bit for bit the sum every path computes: taps in row-major order from +0.0f, a
         * multiply then an add each (padding included), the bias last */
        for (int64_t oy = 0; oy < g.out[1]; oy++)
            for (int64_t ox = 0; ox < g.out[2]; ox++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < k; i++)
                    for (int64_t j = 0; j < k; j++) {
                        int64_t iy = oy * g.stride[1] - g.pad[1] + i * g.dil[1], ix = ox * g.stride[2] - g.pad[2] + j * g.dil[2];
                        float xv = iy < 0 || iy >= g.in[1] || ix < 0 || ix >= g.in[2] ? 0.0f : x[iy * g.in[2] + ix];
                        acc += w[i * k + j] * xv;
                    }
                ref[oy * g.out[2] + ox] = acc + 0.5f;
            }
        if (memcmp(y, ref, sizeof(float) * nout) != 0) {
            printf("    depthwise: not the bytes of the row-major sum (ISA path %s)\n", kern_isa_name(kern_isa_current()));
            bad++;
        }
        if (bad)
            printf("    in %lldx%lld k %lld s %lld/%lld d %lld/%lld p %lld/%lld out %lldx%lld band %lld\n",
                   (long long)g.in[1], (long long)g.in[2], (long long)k, (long long)g.stride[1], (long long)g.stride[2],
                   (long long)g.dil[1], (long long)g.dil[2], (long long)g.pad[1], (long long)g.pad[2],
                   (long long)g.out[1], (long long)g.out[2], (long long)band);
        EXPECT_EQ_INT(bad, 0);
        free(x);
        free(w);
        free(y);
        free(ref);
        free(scr);
    }
}

/* Zero-sized batch and inputs with one channel and no bias. */
TEST(conv_edge_shapes)
{
    int64_t xd[4] = {0, 2, 5, 5}, wd[4] = {3, 2, 3, 3};
    ptq_tensor x = tensor_rand(4, xd, -1, 1), w = tensor_rand(4, wd, -1, 1), y;
    op_node o;
    memset(&o, 0, sizeof o);
    const ptq_tensor *ins[2] = {&x, &w};
    ptq_status st = run_op("Conv", ins, 2, &y, &o);
    EXPECT(st == PTQ_OK);
    if (st == PTQ_OK) {
        EXPECT_EQ_INT(y.dims[0], 0);
        EXPECT_EQ_INT(y.dims[2], 3);
    }
    ptq_tensor_free(&x);
    ptq_tensor_free(&w);
    ptq_tensor_free(&y);
    /* a single-channel image with 8 filters (group 1): GEMM path with K = 9 */
    conv_case c = {2, 2, 1, 8, 1, {17, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}, 1};
    EXPECT_EQ_INT(check_case(&c, 0, 2, 1, NULL), 0);
}

static void expect_error(const char *op, const int64_t *xd, int xr, const int64_t *wd, int wr, const int64_t *bd,
                         ptq_dtype xdt, int64_t group, ptq_status want, const char *needle)
{
    ptq_tensor x = tensor_rand(xr, xd, -1, 1), w = tensor_rand(wr, wd, -1, 1), b, y;
    memset(&b, 0, sizeof b);
    if (bd) b = tensor_rand(1, bd, -1, 1);
    x.dtype = xdt;
    op_node o;
    memset(&o, 0, sizeof o);
    add_int(&o, "group", group);
    const ptq_tensor *ins[3] = {&x, &w, &b};
    ptq_status st = run_op(op, ins, bd ? 3 : 2, &y, &o);
    EXPECT_EQ_INT(st, want);
    const char *m = ptq_last_error();
    if (!strstr(m, needle) || !strstr(m, "node7")) printf("    message: %s (wanted '%s')\n", m, needle);
    EXPECT(strstr(m, needle) != NULL);
    EXPECT(strstr(m, "node7") != NULL);
    ptq_tensor_free(&x);
    ptq_tensor_free(&w);
    ptq_tensor_free(&b);
    ptq_tensor_free(&y);
}

TEST(conv_errors)
{
    int64_t x4[4] = {1, 4, 5, 5}, w4[4] = {6, 4, 3, 3}, w3[3] = {6, 4, 3}, wg[4] = {6, 3, 3, 3}, b5[1] = {5};
    expect_error("Conv", x4, 4, w4, 4, NULL, PTQ_I32, 1, PTQ_ERR_UNSUPPORTED, "int32");
    expect_error("Conv", x4, 4, w3, 3, NULL, PTQ_F32, 1, PTQ_ERR_SHAPE, "weight rank 3");
    expect_error("Conv", x4, 4, wg, 4, NULL, PTQ_F32, 1, PTQ_ERR_SHAPE, "4 channels");
    expect_error("Conv", x4, 4, w4, 4, b5, PTQ_F32, 1, PTQ_ERR_SHAPE, "bias");
    expect_error("Conv", x4, 4, w4, 4, NULL, PTQ_F32, 0, PTQ_ERR_FORMAT, "group 0");
    expect_error("Conv", x4, 4, w4, 4, NULL, PTQ_F32, 4, PTQ_ERR_SHAPE, "group 4");
    int64_t wt[4] = {3, 2, 3, 3};
    expect_error("ConvTranspose", x4, 4, wt, 4, NULL, PTQ_F32, 1, PTQ_ERR_SHAPE, "weight dim 0 is 3");
    int64_t wt4[4] = {4, 2, 3, 3};
    expect_error("ConvTranspose", x4, 4, wt4, 4, NULL, PTQ_F32, 3, PTQ_ERR_SHAPE, "do not split");
    int64_t x6[6] = {1, 1, 2, 2, 2, 2}, w6[6] = {1, 1, 1, 1, 1, 1};
    expect_error("Conv", x6, 6, w6, 6, NULL, PTQ_F32, 1, PTQ_ERR_UNSUPPORTED, "rank 6");
}

int main(void)
{
    op_test_seed(20240611u);
    RUN(depthwise_kernel);
    RUN(conv_random_2d);
    RUN(conv_random_shifted);
    RUN(conv_random_1d_3d);
    RUN(conv_tiles);
    RUN(conv_transpose_random);
    RUN(conv_fused_activation);
    RUN(conv_threads_bit_identical);
    RUN(act_matches_shared);
    RUN(conv_auto_pad);
    RUN(conv_edge_shapes);
    RUN(conv_errors);
    return test_summary();
}
