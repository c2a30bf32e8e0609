/* test_adaround.c: AdaRound for one layer (quant/adaround.h): learned rounding never worse
 * than nearest per channel on all positions and better in total when xq != x (dense,
 * grouped, depthwise), exactly representable weights kept, the same codes at any thread
 * count, argument errors. Losses are recomputed here in double, independently of the
 * module's own evaluation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/adaround.h"
#include "quant/qdq.h"
#include "runtime/status.h"
#include "tests/test.h"

static uint64_t rng_state;

static double rnd(void) /* uniform [0, 1) */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static double gauss(void)
{
    double s = 0.0;
    for (int i = 0; i < 12; i++) s += rnd();
    return s - 6.0;
}

typedef struct {
    int cout, k, groups, p;
    float *w, *scale, *x, *xq;
} layer;

/* Inputs with correlated rows and columns (4 latent factors per block plus noise); xq is x
 * on a coarse grid (step 0.25); weights Gaussian, scale = amax / levels per channel. */
static layer make_layer(uint64_t seed, int cout, int k, int groups, int p, float levels)
{
    layer L = {cout, k, groups, p, NULL, NULL, NULL, NULL};
    rng_state = seed;
    size_t nx = (size_t)groups * k * p;
    L.w = malloc(sizeof(float) * (size_t)cout * k);
    L.scale = malloc(sizeof(float) * (size_t)cout);
    L.x = malloc(sizeof(float) * nx);
    L.xq = malloc(sizeof(float) * nx);
    for (int g = 0; g < groups; g++) {
        double mix[64][4];
        for (int i = 0; i < k && i < 64; i++)
            for (int f = 0; f < 4; f++) mix[i][f] = gauss();
        for (int j = 0; j < p; j++) {
            double z[4];
            for (int f = 0; f < 4; f++) z[f] = gauss();
            for (int i = 0; i < k; i++) {
                double v = 0.3 * gauss();
                for (int f = 0; f < 4; f++) v += 0.5 * mix[i % 64][f] * z[f];
                size_t e = ((size_t)j * groups + g) * k + i; /* position-major, as adaround.h says */
                L.x[e] = (float)v;
                L.xq[e] = 0.25f * (float)(int)(v / 0.25 + (v >= 0 ? 0.5 : -0.5));
            }
        }
    }
    for (int c = 0; c < cout; c++) {
        float amax = 0.0f;
        for (int i = 0; i < k; i++) {
            float v = (float)gauss();
            L.w[(size_t)c * k + i] = v;
            amax = fabsf(v) > amax ? fabsf(v) : amax;
        }
        L.scale[c] = amax / levels;
    }
    return L;
}

static void free_layer(layer *L)
{
    free(L->w);
    free(L->scale);
    free(L->x);
    free(L->xq);
}

/* mean over all positions of (W x - s q xq)^2 for channel c, in double */
static double channel_loss(const layer *L, int c, const int8_t *q)
{
    int g = c / (L->cout / L->groups);
    double sum = 0.0;
    for (int j = 0; j < L->p; j++) {
        double y = 0.0, yq = 0.0;
        for (int i = 0; i < L->k; i++) {
            size_t e = ((size_t)j * L->groups + g) * L->k + i;
            y += (double)L->w[(size_t)c * L->k + i] * (double)L->x[e];
            yq += (double)(L->scale[c] * (float)q[(size_t)c * L->k + i]) * (double)L->xq[e];
        }
        sum += (y - yq) * (y - yq);
    }
    return sum / L->p;
}

/* Runs AdaRound on L and checks the per-channel bound; returns total nearest / learned. */
static void check_bound(const layer *L, const char *what, double *tot_n, double *tot_l, quant_adaround_result *res)
{
    size_t n = (size_t)L->cout * L->k;
    int8_t *codes = malloc(n), *near = malloc(n);
    quant_adaround_options o = quant_adaround_defaults();
    o.seed = 11;
    ptq_status st = quant_adaround_layer(L->w, L->cout, L->k, L->groups, L->scale, L->x, L->xq, L->p, &o, codes, res);
    EXPECT_EQ_INT(st, PTQ_OK);
    if (st != PTQ_OK) printf("  %s: %s\n", what, ptq_last_error());
    for (size_t e = 0; e < n; e++) near[e] = quant_round_s8(L->w[e], L->scale[e / (size_t)L->k]);
    *tot_n = *tot_l = 0.0;
    int changed = 0;
    for (int c = 0; c < L->cout; c++) {
        double ln = channel_loss(L, c, near), ll = channel_loss(L, c, codes);
        if (!(ll <= ln * (1.0 + 1e-5) + 1e-12))
            TEST_FAILF("%s (cout %d, k %d, groups %d, p %d): channel %d learned loss %.9g > nearest %.9g", what,
                       L->cout, L->k, L->groups, L->p, c, ll, ln);
        *tot_n += ln;
        *tot_l += ll;
    }
    for (size_t e = 0; e < n; e++) changed += codes[e] != near[e];
    EXPECT_EQ_INT(res->changed, changed);
    EXPECT_NEAR(res->loss_nearest, *tot_n, 0, 1e-4);
    EXPECT_NEAR(res->loss_learned, *tot_l, 0, 1e-4);
    EXPECT(res->loss_learned <= res->loss_nearest);
    free(codes);
    free(near);
}

TEST(dense_beats_nearest)
{
    float levels[2] = {7.0f, 127.0f}; /* coarse codes (a 4-bit-like grid) and the int8 grid */
    for (int t = 0; t < 2; t++) {
        layer L = make_layer(1 + (uint64_t)t, 8, 27, 1, 512, levels[t]);
        double tn, tl;
        quant_adaround_result r;
        check_bound(&L, "dense", &tn, &tl, &r);
        printf("  dense cout 8 k 27 p 512 levels %g: nearest %.6g learned %.6g (%d changed, %d fell back)\n",
               (double)levels[t], tn, tl, r.changed, r.fell_back);
        EXPECT(tl < (t == 0 ? 0.95 : 0.99) * tn);
        EXPECT(r.changed > 0);
        free_layer(&L);
    }
}

TEST(grouped_and_depthwise)
{
    /* depthwise (plain loops) and 2 groups of 8 (kern_sgemm), 40 channels (two tiles) */
    int shapes[3][3] = {{16, 9, 16}, {16, 27, 2}, {40, 18, 1}};
    for (int t = 0; t < 3; t++) {
        layer L = make_layer(100 + (uint64_t)t, shapes[t][0], shapes[t][1], shapes[t][2], 256, 7.0f);
        double tn, tl;
        quant_adaround_result r;
        check_bound(&L, "grouped", &tn, &tl, &r);
        printf("  cout %d k %d groups %d p 256: nearest %.6g learned %.6g (%d changed, %d fell back)\n", L.cout, L.k,
               L.groups, tn, tl, r.changed, r.fell_back);
        EXPECT(tl < tn);
        free_layer(&L);
    }
}

TEST(exact_weights_unchanged)
{
    /* half the weights are s * integer (s a power of two, so W/s is exact), the ends of the
     * range included; the others random, so the layer still trains around them */
    for (int groups = 1; groups <= 8; groups += 7) {
        layer L = make_layer(7, 8, 27, groups, 256, 7.0f);
        int8_t want[8 * 27], codes[8 * 27];
        for (int c = 0; c < 8; c++) {
            L.scale[c] = 0.0625f;
            for (int i = 0; i < 27; i++) {
                size_t e = (size_t)c * 27 + i;
                int q = (int)(rnd() * 15.0) - 7;
                if (i == 0) q = 127;
                if (i == 1) q = -128;
                if (i % 2 == 0 || i == 1) {
                    L.w[e] = 0.0625f * (float)q;
                    want[e] = (int8_t)q;
                } else {
                    L.w[e] = 0.0625f * (float)(q + 0.1 + 0.8 * rnd());
                }
            }
        }
        quant_adaround_options o = quant_adaround_defaults();
        quant_adaround_result r;
        EXPECT_EQ_INT(quant_adaround_layer(L.w, 8, 27, groups, L.scale, L.x, L.xq, 256, &o, codes, &r), PTQ_OK);
        for (int e = 0; e < 8 * 27; e++)
            if (e % 27 % 2 == 0 || e % 27 == 1)
                if (codes[e] != want[e])
                    TEST_FAILF("groups %d: weight %d code %d, expected %d", groups, e, codes[e], want[e]);
        EXPECT(r.changed > 0); /* the others did train */
        /* all weights exact: nothing changes at all */
        for (int e = 0; e < 8 * 27; e++) L.w[e] = 0.0625f * (float)((e * 37) % 256 - 128);
        EXPECT_EQ_INT(quant_adaround_layer(L.w, 8, 27, groups, L.scale, L.x, L.xq, 256, &o, codes, &r), PTQ_OK);
        for (int e = 0; e < 8 * 27; e++) EXPECT_EQ_INT(codes[e], (e * 37) % 256 - 128);
        EXPECT_EQ_INT(r.changed, 0);
        free_layer(&L);
    }
}

/* Runs L with options o and expects the codes ref and the losses of r0; returns the
 * result's codes_in. */
static int expect_same(const layer *L, const quant_adaround_options *o, const int8_t *ref,
                       const quant_adaround_result *r0)
{
    size_t n = (size_t)L->cout * L->k;
    int8_t *got = malloc(n);
    quant_adaround_result r;
    memset(&r, 0, sizeof r);
    EXPECT_EQ_INT(quant_adaround_layer(L->w, L->cout, L->k, L->groups, L->scale, L->x, L->xq, L->p, o, got, &r), PTQ_OK);
    EXPECT(memcmp(ref, got, n) == 0);
    EXPECT(r.loss_learned == r0->loss_learned && r.loss_nearest == r0->loss_nearest);
    EXPECT_EQ_INT(r.changed, r0->changed);
    EXPECT_EQ_INT(r.fell_back, r0->fell_back);
    free(got);
    return r.codes_in;
}

TEST(same_codes_any_thread_count)
{
    /* large enough for 3 threads (>= 4096 weights each): dense (3 tiles), depthwise */
    int shapes[2][4] = {{72, 200, 1, 300}, {1536, 9, 1536, 64}};
    for (int t = 0; t < 2; t++) {
        layer L = make_layer(33, shapes[t][0], shapes[t][1], shapes[t][2], shapes[t][3], 7.0f);
        int8_t *c1 = malloc((size_t)L.cout * L.k);
        quant_adaround_options o = quant_adaround_defaults();
        o.iters = 150;
        o.seed = 5;
        quant_adaround_result r1;
        o.nthreads = 1;
        EXPECT_EQ_INT(quant_adaround_layer(L.w, L.cout, L.k, L.groups, L.scale, L.x, L.xq, L.p, &o, c1, &r1), PTQ_OK);
        o.nthreads = 3;
        expect_same(&L, &o, c1, &r1);
        free(c1);
        free_layer(&L);
    }
}

TEST(depthwise_int8_patches)
{
    /* xq lies on the grid of step 0.25: with x_step 0.25 the depthwise patches are kept as
     * int8 codes, with the same codes and losses as the float copy (x_step 0), at 1 and 3
     * threads; a step that is not xq's grid, or one element off it, keeps the floats */
    layer L = make_layer(41, 1536, 9, 1536, 64, 7.0f);
    int8_t *ref = malloc((size_t)L.cout * L.k);
    quant_adaround_options o = quant_adaround_defaults();
    o.iters = 120;
    o.seed = 3;
    quant_adaround_result r0;
    EXPECT_EQ_INT(quant_adaround_layer(L.w, L.cout, L.k, L.groups, L.scale, L.x, L.xq, L.p, &o, ref, &r0), PTQ_OK);
    EXPECT_EQ_INT(r0.codes_in, 0);
    float steps[3] = {0.25f, 0.25f, 0.3f};
    int threads[3] = {1, 3, 2}, want[3] = {1, 1, 0};
    for (int t = 0; t < 3; t++) {
        o.x_step = steps[t];
        o.nthreads = threads[t];
        EXPECT_EQ_INT(expect_same(&L, &o, ref, &r0), want[t]);
    }
    L.xq[777] += 0.01f; /* off the grid: the floats again (the codes may differ: xq did) */
    o.x_step = 0.25f;
    int8_t *got = malloc((size_t)L.cout * L.k);
    quant_adaround_result r;
    EXPECT_EQ_INT(quant_adaround_layer(L.w, L.cout, L.k, L.groups, L.scale, L.x, L.xq, L.p, &o, got, &r), PTQ_OK);
    EXPECT_EQ_INT(r.codes_in, 0);
    free(got);
    free(ref);
    free_layer(&L);
}

TEST(bad_arguments)
{
    layer L = make_layer(9, 4, 9, 1, 16, 7.0f);
    int8_t codes[36];
    quant_adaround_options o = quant_adaround_defaults();
    o.iters = 10;
    memset(codes, 0x55, sizeof codes);
    float s0 = L.scale[2];
    float bad[3] = {0.0f, -1.0f, NAN};
    for (int i = 0; i < 3; i++) {
        L.scale[2] = bad[i];
        EXPECT_EQ_INT(quant_adaround_layer(L.w, 4, 9, 1, L.scale, L.x, L.xq, 16, &o, codes, NULL), PTQ_ERR_ARG);
        EXPECT(strstr(ptq_last_error(), "scale[2]") != NULL);
    }
    L.scale[2] = s0;
    EXPECT_EQ_INT(quant_adaround_layer(L.w, 4, 9, 1, L.scale, L.x, L.xq, 0, &o, codes, NULL), PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "p 0") != NULL);
    EXPECT_EQ_INT(quant_adaround_layer(L.w, 4, 9, 3, L.scale, L.x, L.xq, 16, &o, codes, NULL), PTQ_ERR_ARG);
    EXPECT_EQ_INT(quant_adaround_layer(NULL, 4, 9, 1, L.scale, L.x, L.xq, 16, &o, codes, NULL), PTQ_ERR_ARG);
    o.batch = 0;
    EXPECT_EQ_INT(quant_adaround_layer(L.w, 4, 9, 1, L.scale, L.x, L.xq, 16, &o, codes, NULL), PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "batch 0") != NULL);
    o = quant_adaround_defaults();
    o.beta_lo = 0.5f;
    EXPECT_EQ_INT(quant_adaround_layer(L.w, 4, 9, 1, L.scale, L.x, L.xq, 16, &o, codes, NULL), PTQ_ERR_ARG);
    o = quant_adaround_defaults();
    L.xq[5] = INFINITY;
    EXPECT_EQ_INT(quant_adaround_layer(L.w, 4, 9, 1, L.scale, L.x, L.xq, 16, &o, codes, NULL), PTQ_ERR_ARG);
    for (int i = 0; i < 36; i++) EXPECT_EQ_INT(codes[i], 0x55);
    /* iters 0 hardens the starting point; p 1 and batch > p are fine */
    L.xq[5] = 0.0f;
    o.iters = 0;
    EXPECT_EQ_INT(quant_adaround_layer(L.w, 4, 9, 1, L.scale, L.x, L.xq, 1, &o, codes, NULL), PTQ_OK);
    free_layer(&L);
}

int main(void)
{
    RUN(dense_beats_nearest);
    RUN(grouped_and_depthwise);
    RUN(depthwise_int8_patches);
    RUN(exact_weights_unchanged);
    RUN(same_codes_any_thread_count);
    RUN(bad_arguments);
    return test_summary();
}
