/* test_ops_index.c: RoiAlign and Einsum (runtime/ops/roialign.c, einsum.c) at the shapes of
 * real detectors and vision transformers against naive references written here (double
 * sums; RoiAlign's RoI geometry in float32 as ONNX Runtime defines it), bit-identical
 * results at 1 and 3 threads, TopK's tie order, and the error messages of the indexing,
 * geometry and sequence ops (runtime/ops/index.c, gridsample.c, geometry.c, rnn.c, signal.c), and
 * DepthToSpace / SpaceToDepth against their index formula. The
 * ONNX node tests cover the ops' small examples; tests/e2e/ops_index.sh compares them all
 * with ONNX Runtime. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/op.h"
#include "tests/unit/op_test.h"

/* ------------------------------------------------------------ RoiAlign */

typedef struct {
    int64_t n, c, h, w, rois, ph, pw, sampling;
    float scale;
    int half_pixel, max_mode, opset;
} roi_case;

/* Bilinear value of plane p (H x W) at (y, x) with ONNX Runtime's border rules; for max
 * mode the largest of the four weighted corners instead of their sum. */
static double roi_ref_sample(const float *p, int64_t H, int64_t W, double y, double x, int max_mode)
{
    if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) return 0.0;
    if (y < 0) y = 0;
    if (x < 0) x = 0;
    int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1 = y0 + 1, x1 = x0 + 1;
    if (y0 >= H - 1) y0 = y1 = H - 1, y = (double)y0;
    if (x0 >= W - 1) x0 = x1 = W - 1, x = (double)x0;
    double ly = y - (double)y0, lx = x - (double)x0;
    double t[4] = {(1 - ly) * (1 - lx) * (double)p[y0 * W + x0], (1 - ly) * lx * (double)p[y0 * W + x1],
                   ly * (1 - lx) * (double)p[y1 * W + x0], ly * lx * (double)p[y1 * W + x1]};
    if (!max_mode) return t[0] + t[1] + t[2] + t[3];
    double m = t[0];
    for (int i = 1; i < 4; i++) m = t[i] > m ? t[i] : m;
    return m;
}

static void roi_ref(const roi_case *c, const float *X, const float *rois, const int64_t *bi, double *Y)
{
    for (int64_t r = 0; r < c->rois; r++) {
        /* the RoI geometry in float32, as ONNX Runtime computes it */
        float off = c->half_pixel ? 0.5f : 0.0f;
        float x1 = rois[r * 4] * c->scale - off, y1 = rois[r * 4 + 1] * c->scale - off;
        float rw = rois[r * 4 + 2] * c->scale - off - x1, rh = rois[r * 4 + 3] * c->scale - off - y1;
        if (!c->half_pixel) rw = fmaxf(rw, 1.0f), rh = fmaxf(rh, 1.0f);
        int64_t gh = c->sampling ? c->sampling : (int64_t)ceilf(rh / (float)c->ph);
        int64_t gw = c->sampling ? c->sampling : (int64_t)ceilf(rw / (float)c->pw);
        if (gh < 0) gh = 0;
        if (gw < 0) gw = 0;
        double bh = (double)rh / (double)c->ph, bw = (double)rw / (double)c->pw;
        for (int64_t ch = 0; ch < c->c; ch++) {
            const float *p = X + (bi[r] * c->c + ch) * c->h * c->w;
            for (int64_t i = 0; i < c->ph; i++)
                for (int64_t j = 0; j < c->pw; j++) {
                    double acc = 0.0;
                    int first = 1;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double y = (double)y1 + (double)i * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double x = (double)x1 + (double)j * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v = roi_ref_sample(p, c->h, c->w, y, x, c->max_mode);
                            if (c->max_mode) acc = first || v > acc ? v : acc;
                            else acc += v;
                            first = 0;
                        }
                    if (!c->max_mode) acc /= (double)(gh * gw > 1 ? gh * gw : 1);
                    Y[((r * c->c + ch) * c->ph + i) * c->pw + j] = acc;
                }
        }
    }
}

/* RoIs in image pixels: inside, crossing the border, degenerate (zero or negative size). */
static ptq_tensor roi_boxes(int64_t n, float img_w, float img_h)
{
    int64_t d[2] = {n, 4};
    ptq_tensor t = tensor_new(PTQ_F32, 2, d);
    float *b = t.data;
    for (int64_t i = 0; i < n; i++) {
        float x = frand(-30.0f, img_w), y = frand(-30.0f, img_h);
        b[i * 4] = x;
        b[i * 4 + 1] = y;
        b[i * 4 + 2] = x + frand(i % 7 == 0 ? -8.0f : 0.0f, img_w / 2);
        b[i * 4 + 3] = y + frand(i % 5 == 0 ? -8.0f : 0.0f, img_h / 2);
    }
    return t;
}

static ptq_status roi_run(const roi_case *c, const ptq_tensor *x, const ptq_tensor *rois, const ptq_tensor *bi, int nthreads,
                          ptq_tensor *y)
{
    op_node r = {.name = "roi0", .opset = c->opset, .nthreads = nthreads};
    add_int(&r, "output_height", c->ph);
    add_int(&r, "output_width", c->pw);
    add_int(&r, "sampling_ratio", c->sampling);
    add_float(&r, "spatial_scale", c->scale);
    add_str(&r, "mode", c->max_mode ? "max" : "avg");
    if (c->opset >= 16) add_str(&r, "coordinate_transformation_mode", c->half_pixel ? "half_pixel" : "output_half_pixel");
    const ptq_tensor *ins[3] = {x, rois, bi};
    return op_run_ins(&r, "RoiAlign", ins, 3, y);
}

TEST(roialign_detector_heads_match_the_reference)
{
    /* Faster R-CNN box head (7x7, sampling 2, stride 4 / 16), Mask R-CNN mask head (14x14,
     * adaptive, half_pixel), opset 10 (output_half_pixel implied), max mode */
    const roi_case cases[] = {
        {2, 16, 25, 34, 90, 7, 7, 2, 0.25f, 0, 0, 16},  {2, 16, 25, 34, 90, 7, 7, 2, 0.0625f, 1, 0, 16},
        {1, 8, 25, 34, 40, 14, 14, 0, 0.125f, 1, 0, 16}, {1, 8, 25, 34, 40, 14, 14, 0, 0.125f, 0, 0, 16},
        {2, 8, 25, 34, 40, 5, 4, 0, 0.25f, 0, 0, 10},    {2, 8, 25, 34, 40, 7, 7, 0, 0.25f, 0, 1, 10},
        {2, 8, 25, 34, 40, 6, 3, 3, 0.25f, 1, 1, 16},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const roi_case *c = &cases[k];
        int64_t xd[4] = {c->n, c->c, c->h, c->w}, bd[1] = {c->rois};
        ptq_tensor x = tensor_rand(4, xd, -2.0f, 2.0f);
        ptq_tensor rois = roi_boxes(c->rois, (float)c->w / c->scale, (float)c->h / c->scale);
        ptq_tensor bi = tensor_new(PTQ_I64, 1, bd);
        for (int64_t i = 0; i < c->rois; i++) ((int64_t *)bi.data)[i] = irand(0, c->n - 1);
        ptq_tensor y1[1], y3[1];
        ptq_status st = roi_run(c, &x, &rois, &bi, 1, y1);
        EXPECT_EQ_INT(st, PTQ_OK);
        EXPECT_EQ_INT(roi_run(c, &x, &rois, &bi, 3, y3), PTQ_OK);
        if (st == PTQ_OK) {
            size_t n = ptq_tensor_numel(y1);
            double *ref = malloc(n * sizeof *ref);
            roi_ref(c, x.data, rois.data, bi.data, ref);
            int bad = compare_f64(y1, ref, n, 1e-5, 1e-5, "RoiAlign");
            if (bad)
                printf("    case %zu: opset %d %s %s sampling %lld %lldx%lld scale %g\n", k, c->opset,
                       c->half_pixel ? "half_pixel" : "output_half_pixel", c->max_mode ? "max" : "avg",
                       (long long)c->sampling, (long long)c->ph, (long long)c->pw, (double)c->scale);
            EXPECT_EQ_INT(bad, 0);
            EXPECT(same_bits(y1, y3));
            free(ref);
        }
        ptq_tensor_free(y1);
        ptq_tensor_free(y3);
        ptq_tensor_free(&x);
        ptq_tensor_free(&rois);
        ptq_tensor_free(&bi);
    }
}

TEST(roialign_rejects_bad_inputs)
{
    roi_case c = {1, 2, 4, 4, 1, 2, 2, 0, 1.0f, 1, 0, 16};
    int64_t xd[4] = {1, 2, 4, 4}, bd[1] = {1};
    ptq_tensor x = tensor_rand(4, xd, 0.0f, 1.0f), rois = roi_boxes(1, 4, 4), bi = tensor_new(PTQ_I64, 1, bd);
    ((int64_t *)bi.data)[0] = 1;
    ptq_tensor y[1];
    EXPECT_EQ_INT(roi_run(&c, &x, &rois, &bi, 1, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "RoiAlign 'roi0': batch_indices[0] = 1, batch is 1") != NULL);
    ptq_tensor_free(y);
    op_node r = {.name = "roi0", .opset = 16};
    add_str(&r, "coordinate_transformation_mode", "align_corners");
    const ptq_tensor *ins[3] = {&x, &rois, &bi};
    EXPECT_EQ_INT(op_run_ins(&r, "RoiAlign", ins, 3, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "coordinate_transformation_mode 'align_corners'") != NULL);
    ptq_tensor_free(y);
    r = (op_node){.name = "roi0", .opset = 16};
    add_str(&r, "mode", "sum");
    EXPECT_EQ_INT(op_run_ins(&r, "RoiAlign", ins, 3, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "mode 'sum', expected avg or max") != NULL);
    ptq_tensor_free(y);
    ((int64_t *)bi.data)[0] = 0;
    ((float *)rois.data)[2] = INFINITY;
    EXPECT_EQ_INT(roi_run(&c, &x, &rois, &bi, 1, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "RoI 0 (") != NULL && strstr(ptq_last_error(), "is not finite") != NULL);
    ptq_tensor_free(y);
    ((float *)rois.data)[2] = 3e7f;
    EXPECT_EQ_INT(roi_run(&c, &x, &rois, &bi, 1, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "more than 2^24 samples per bin") != NULL);
    ptq_tensor_free(y);
    const ptq_tensor *short_ins[3] = {&x, &bi, &bi};
    r = (op_node){.name = "roi0", .opset = 16};
    EXPECT(op_run_ins(&r, "RoiAlign", short_ins, 3, y) != PTQ_OK);
    EXPECT(strstr(ptq_last_error(), "rois dtype int64, expected float32") != NULL);
    ptq_tensor_free(y);
    ptq_tensor_free(&x);
    ptq_tensor_free(&rois);
    ptq_tensor_free(&bi);
}

/* ------------------------------------------------------------ Einsum */

static ptq_status einsum_run(const char *eq, const ptq_tensor *a, const ptq_tensor *b, int nthreads, ptq_tensor *y)
{
    op_node r = {.name = "ein0", .opset = 12, .nthreads = nthreads};
    add_str(&r, "equation", eq);
    const ptq_tensor *ins[2] = {a, b};
    return op_run_ins(&r, "Einsum", ins, b ? 2 : 1, y);
}

#define F(t, i) ((double)((const float *)(t)->data)[i])

/* Runs eq at 1 and 3 threads and compares with ref (computed by the caller). */
static void einsum_check(const char *eq, const ptq_tensor *a, const ptq_tensor *b, const double *ref, size_t n)
{
    ptq_tensor y1[1], y3[1];
    EXPECT_EQ_INT(einsum_run(eq, a, b, 1, y1), PTQ_OK);
    EXPECT_EQ_INT(einsum_run(eq, a, b, 3, y3), PTQ_OK);
    if (y1->data && y3->data) {
        EXPECT_EQ_INT((int)ptq_tensor_numel(y1), (int)n);
        if (ptq_tensor_numel(y1) == n && compare_f64(y1, ref, n, 1e-5, 1e-5, eq)) TEST_FAILF("equation %s", eq);
        EXPECT(same_bits(y1, y3));
    }
    ptq_tensor_free(y1);
    ptq_tensor_free(y3);
}

TEST(einsum_transformer_equations_match_loops)
{
    { /* MaxViT / Swin relative position: bhwc,hkc->bhwk */
        int64_t B = 2, H = 7, W = 7, C = 32, K = 13, ad[4] = {B, H, W, C}, bd[3] = {H, K, C};
        ptq_tensor a = tensor_rand(4, ad, -1, 1), b = tensor_rand(3, bd, -1, 1);
        double *ref = calloc((size_t)(B * H * W * K), sizeof *ref);
        for (int64_t bb = 0; bb < B; bb++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    for (int64_t k = 0; k < K; k++)
                        for (int64_t c = 0; c < C; c++)
                            ref[((bb * H + h) * W + w) * K + k] += F(&a, ((bb * H + h) * W + w) * C + c) * F(&b, (h * K + k) * C + c);
        einsum_check("bhwc,hkc->bhwk", &a, &b, ref, (size_t)(B * H * W * K));
        free(ref);
        ptq_tensor_free(&a);
        ptq_tensor_free(&b);
    }
    { /* attention: bhqd,bhkd->bhqk and bij,bjk->bik */
        int64_t B = 2, Hh = 3, Q = 49, D = 32, ad[4] = {B, Hh, Q, D};
        ptq_tensor q = tensor_rand(4, ad, -1, 1), k = tensor_rand(4, ad, -1, 1);
        double *ref = calloc((size_t)(B * Hh * Q * Q), sizeof *ref);
        for (int64_t bh = 0; bh < B * Hh; bh++)
            for (int64_t i = 0; i < Q; i++)
                for (int64_t j = 0; j < Q; j++)
                    for (int64_t d = 0; d < D; d++) ref[(bh * Q + i) * Q + j] += F(&q, (bh * Q + i) * D + d) * F(&k, (bh * Q + j) * D + d);
        einsum_check("bhqd,bhkd->bhqk", &q, &k, ref, (size_t)(B * Hh * Q * Q));
        free(ref);
        int64_t m1[3] = {B * Hh, Q, D}, m2[3] = {B * Hh, D, Q};
        ptq_tensor x = tensor_rand(3, m1, -1, 1), w = tensor_rand(3, m2, -1, 1);
        ref = calloc((size_t)(B * Hh * Q * Q), sizeof *ref);
        for (int64_t bb = 0; bb < B * Hh; bb++)
            for (int64_t i = 0; i < Q; i++)
                for (int64_t j = 0; j < Q; j++)
                    for (int64_t d = 0; d < D; d++) ref[(bb * Q + i) * Q + j] += F(&x, (bb * Q + i) * D + d) * F(&w, (bb * D + d) * Q + j);
        einsum_check("bij,bjk->bik", &x, &w, ref, (size_t)(B * Hh * Q * Q));
        free(ref);
        ptq_tensor_free(&q);
        ptq_tensor_free(&k);
        ptq_tensor_free(&x);
        ptq_tensor_free(&w);
    }
    { /* "...ij,...jk->...ik" with a broadcast batch dim; "ii->i"; "ij->" ; implicit "ji" (transpose) */
        int64_t ad[4] = {3, 2, 5, 6}, bd[3] = {1, 6, 4};
        ptq_tensor a = tensor_rand(4, ad, -1, 1), b = tensor_rand(3, bd, -1, 1);
        double *ref = calloc(3 * 2 * 5 * 4, sizeof *ref);
        for (int64_t z = 0; z < 6; z++)
            for (int64_t i = 0; i < 5; i++)
                for (int64_t kk = 0; kk < 4; kk++)
                    for (int64_t j = 0; j < 6; j++) ref[(z * 5 + i) * 4 + kk] += F(&a, (z * 5 + i) * 6 + j) * F(&b, j * 4 + kk);
        einsum_check("...ij,...jk->...ik", &a, &b, ref, 3 * 2 * 5 * 4);
        free(ref);
        int64_t sd[2] = {6, 6};
        ptq_tensor s = tensor_rand(2, sd, -1, 1);
        double diag[6], total = 0.0, tr[36];
        for (int64_t i = 0; i < 6; i++) diag[i] = F(&s, i * 7);
        for (int64_t i = 0; i < 36; i++) total += F(&s, i);
        for (int64_t i = 0; i < 6; i++)
            for (int64_t j = 0; j < 6; j++) tr[i * 6 + j] = F(&s, j * 6 + i);
        einsum_check("ii->i", &s, NULL, diag, 6);
        einsum_check("ij->", &s, NULL, &total, 1);
        einsum_check("ji", &s, NULL, tr, 36);
        ptq_tensor_free(&a);
        ptq_tensor_free(&b);
        ptq_tensor_free(&s);
    }
}

TEST(einsum_rejects_bad_equations)
{
    int64_t d[2] = {3, 4};
    ptq_tensor a = tensor_rand(2, d, -1, 1), b = tensor_rand(2, d, -1, 1);
    ptq_tensor y[1];
    EXPECT_EQ_INT(einsum_run("ij,jk->ik", &a, &b, 1, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "Einsum 'ein0': label 'j' is 3 in input 1, 4 before") != NULL);
    ptq_tensor_free(y);
    EXPECT_EQ_INT(einsum_run("ij->ik", &a, NULL, 1, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "output label not in any input") != NULL);
    ptq_tensor_free(y);
    EXPECT_EQ_INT(einsum_run("ij,jk->ik", &a, NULL, 1, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "more terms than the 1 inputs") != NULL);
    ptq_tensor_free(y);
    EXPECT_EQ_INT(einsum_run("ijk", &a, NULL, 1, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "input 0 has rank 2, term 0 of 'ijk' names 3 dims") != NULL);
    ptq_tensor_free(y);
    EXPECT_EQ_INT(einsum_run("i1", &a, NULL, 1, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "term 0 is not valid") != NULL);
    ptq_tensor_free(y);
    ptq_tensor_free(&a);
    ptq_tensor_free(&b);
}

/* ------------------------------------------------------------ TopK and the index ops */

TEST(topk_breaks_ties_by_lower_index)
{
    const float v[8] = {3, 1, 3, 2, 3, 1, NAN, 2};
    int64_t d[1] = {8}, kv = 4;
    ptq_tensor x = tensor_new(PTQ_F32, 1, d), k = tensor_i64(1, &kv);
    memcpy(x.data, v, sizeof v);
    for (int largest = 0; largest < 2; largest++) {
        op_node r = {.name = "topk0", .opset = 11, .n_out = 2, .want = {0, 1}, .const_mask = 2};
        add_int(&r, "largest", largest);
        const ptq_tensor *ins[2] = {&x, &k};
        ptq_tensor y[2];
        EXPECT_EQ_INT(op_run_ins(&r, "TopK", ins, 2, y), PTQ_OK);
        /* largest: NaN first, then the 3s at 0, 2, 4; smallest: the 1s at 1, 5, the 2s at 3, 7 */
        const int64_t want_l[4] = {6, 0, 2, 4}, want_s[4] = {1, 5, 3, 7};
        if (y[1].data)
            for (int i = 0; i < 4; i++) EXPECT_EQ_INT((int)((int64_t *)y[1].data)[i], (int)(largest ? want_l : want_s)[i]);
        ptq_tensor_free(&y[0]);
        ptq_tensor_free(&y[1]);
    }
    ptq_tensor_free(&x);
    ptq_tensor_free(&k);
}

TEST(index_ops_give_clear_errors)
{
    int64_t d2[2] = {4, 5}, kv = 9, idx_d[2] = {2, 1};
    ptq_tensor x = tensor_rand(2, d2, -1, 1), k = tensor_i64(1, &kv);
    ptq_tensor y[2];
    const ptq_tensor *ins[3] = {&x, &k, NULL};
    /* TopK: K not constant, K too large */
    op_node r = {.name = "t", .opset = 11};
    EXPECT_EQ_INT(op_run_ins(&r, "TopK", ins, 2, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "TopK 't': K input is not constant") != NULL);
    r = (op_node){.name = "t", .opset = 11, .const_mask = 2};
    EXPECT_EQ_INT(op_run_ins(&r, "TopK", ins, 2, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "K 9 out of range for axis 1 of length 5") != NULL);
    /* GatherND: an index past its dim (found at run time) */
    ptq_tensor ix = tensor_new(PTQ_I64, 2, idx_d);
    ((int64_t *)ix.data)[0] = 1;
    ((int64_t *)ix.data)[1] = -5;
    ins[1] = &ix;
    r = (op_node){.name = "g"};
    EXPECT_EQ_INT(op_run_ins(&r, "GatherND", ins, 2, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "GatherND 'g': index -5 out of range for data dim 0 of length 4") != NULL);
    ptq_tensor_free(y);
    /* ScatterND: max needs opset 18; updates of the wrong shape */
    int64_t ud[2] = {2, 5};
    ptq_tensor u = tensor_rand(2, ud, -1, 1);
    ((int64_t *)ix.data)[1] = 3;
    ins[2] = &u;
    r = (op_node){.name = "s", .opset = 16};
    add_str(&r, "reduction", "max");
    EXPECT_EQ_INT(op_run_ins(&r, "ScatterND", ins, 3, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "ScatterND 's': reduction 'max' is not valid at opset 16") != NULL);
    r = (op_node){.name = "s", .opset = 18};
    add_str(&r, "reduction", "max");
    EXPECT_EQ_INT(op_run_ins(&r, "ScatterND", ins, 3, y), PTQ_OK);
    ptq_tensor_free(y);
    ins[2] = &x;
    r = (op_node){.name = "s", .opset = 18};
    EXPECT_EQ_INT(op_run_ins(&r, "ScatterND", ins, 3, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "updates shape 4x5 does not fit indices 2x1 into data 4x5") != NULL);
    /* GatherElements: rank mismatch */
    ins[1] = &k;
    r = (op_node){.name = "ge"};
    EXPECT_EQ_INT(op_run_ins(&r, "GatherElements", ins, 2, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "GatherElements 'ge': indices rank 1, data rank 2: expected equal") != NULL);
    ptq_tensor_free(&x);
    ptq_tensor_free(&k);
    ptq_tensor_free(&ix);
    ptq_tensor_free(&u);
}

TEST(geometry_sequence_signal_ops_give_clear_errors)
{
    ptq_tensor y[3];
    /* GridSample: a 5-D input, a bad mode */
    int64_t x5[5] = {1, 1, 2, 2, 2}, g5[5] = {1, 2, 2, 2, 3}, x4[4] = {1, 1, 4, 4}, g4[4] = {1, 2, 2, 2};
    ptq_tensor a = tensor_rand(5, x5, 0, 1), b = tensor_rand(5, g5, 0, 1), c = tensor_rand(4, x4, 0, 1), d = tensor_rand(4, g4, 0, 1);
    const ptq_tensor *ins[5] = {&a, &b};
    op_node r = {.name = "gs", .opset = 16};
    EXPECT_EQ_INT(op_run_ins(&r, "GridSample", ins, 2, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "GridSample 'gs': input rank 5") != NULL);
    ins[0] = &c;
    ins[1] = &d;
    r = (op_node){.name = "gs", .opset = 16};
    add_str(&r, "mode", "linear");
    EXPECT_EQ_INT(op_run_ins(&r, "GridSample", ins, 2, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "mode 'linear' is not valid at opset 16") != NULL);
    /* GridSample: a NaN grid point gives NaN, huge ones read like the border (all modes) */
    float *gp = d.data;
    gp[0] = NAN;
    gp[1] = 0.5f;
    gp[2] = 1e30f;
    gp[3] = -1e30f;
    gp[4] = -INFINITY;
    gp[5] = INFINITY;
    const char *modes[3] = {"bilinear", "nearest", "bicubic"}, *pads[3] = {"zeros", "border", "reflection"};
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 3; p++) {
            r = (op_node){.name = "gs", .opset = 16};
            add_str(&r, "mode", modes[m]);
            add_str(&r, "padding_mode", pads[p]);
            EXPECT_EQ_INT(op_run_ins(&r, "GridSample", ins, 2, y), PTQ_OK);
            if (y->data) {
                const float *v = y->data;
                EXPECT(isnan(v[0]));
                for (int i = 1; i < 4; i++) EXPECT(isfinite(v[i]));
            }
            ptq_tensor_free(y);
        }
    /* LSTM: W of the wrong shape */
    int64_t xd[3] = {5, 2, 8}, wd[3] = {1, 12, 8}, rd[3] = {1, 16, 4};
    ptq_tensor X = tensor_rand(3, xd, -1, 1), W = tensor_rand(3, wd, -1, 1), R = tensor_rand(3, rd, -1, 1);
    ins[0] = &X;
    ins[1] = &W;
    ins[2] = &R;
    r = (op_node){.name = "lstm", .opset = 14, .n_out = 2, .want = {0, 1}};
    add_int(&r, "hidden_size", 4);
    EXPECT_EQ_INT(op_run_ins(&r, "LSTM", ins, 3, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "LSTM 'lstm': W is float32 1x12x8, expected float32 [1, 16, 8]") != NULL);
    r = (op_node){.name = "gru", .opset = 14};
    add_int(&r, "hidden_size", 4);
    add_str(&r, "direction", "sideways");
    EXPECT_EQ_INT(op_run_ins(&r, "GRU", ins, 3, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "direction 'sideways'") != NULL);
    /* HannWindow: size not constant */
    int64_t sz = 8;
    ptq_tensor s = tensor_i64(1, &sz);
    ins[0] = &s;
    r = (op_node){.name = "w", .opset = 17};
    EXPECT_EQ_INT(op_run_ins(&r, "HannWindow", ins, 1, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "HannWindow 'w': size input is not constant") != NULL);
    ptq_tensor *all[] = {&a, &b, &c, &d, &X, &W, &R, &s};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ptq_tensor_free(all[i]);
}

TEST(depth_space_round_trip_and_modes)
{
    int64_t d[4] = {2, 12, 3, 5}, b = 2;
    ptq_tensor x = tensor_rand(4, d, -1, 1);
    const ptq_tensor *ins[1] = {&x};
    for (int crd = 0; crd < 2; crd++) {
        ptq_tensor y[1], z[1], y3[1];
        op_node r = {.name = "d2s", .opset = 13};
        add_int(&r, "blocksize", b);
        add_str(&r, "mode", crd ? "CRD" : "DCR");
        EXPECT_EQ_INT(op_run_ins(&r, "DepthToSpace", ins, 1, y), PTQ_OK);
        r = (op_node){.name = "d2s", .opset = 13, .nthreads = 3};
        add_int(&r, "blocksize", b);
        add_str(&r, "mode", crd ? "CRD" : "DCR");
        EXPECT_EQ_INT(op_run_ins(&r, "DepthToSpace", ins, 1, y3), PTQ_OK);
        EXPECT(same_bits(y, y3));
        /* y[n, c, h*b + bh, w*b + bw] = x[n, ic, h, w] */
        int bad = 0;
        for (int64_t n = 0; n < 2; n++)
            for (int64_t c = 0; c < 3; c++)
                for (int64_t h = 0; h < 6; h++)
                    for (int64_t w = 0; w < 10; w++) {
                        int64_t bh = h % b, bw = w % b, ic = crd ? c * 4 + bh * 2 + bw : (bh * 2 + bw) * 3 + c;
                        float got = ((float *)y->data)[((n * 3 + c) * 6 + h) * 10 + w];
                        float want = ((float *)x.data)[((n * 12 + ic) * 3 + h / b) * 5 + w / b];
                        bad += got != want;
                    }
        EXPECT_EQ_INT(bad, 0);
        if (!crd) { /* SpaceToDepth undoes DCR */
            const ptq_tensor *yin[1] = {y};
            r = (op_node){.name = "s2d", .opset = 13};
            add_int(&r, "blocksize", b);
            EXPECT_EQ_INT(op_run_ins(&r, "SpaceToDepth", yin, 1, z), PTQ_OK);
            EXPECT(same_bits(z, &x));
            ptq_tensor_free(z);
        }
        ptq_tensor_free(y);
        ptq_tensor_free(y3);
    }
    ptq_tensor y[1];
    op_node r = {.name = "d2s", .opset = 13};
    add_int(&r, "blocksize", 2);
    add_str(&r, "mode", "RCD");
    EXPECT_EQ_INT(op_run_ins(&r, "DepthToSpace", ins, 1, y), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "DepthToSpace 'd2s': mode 'RCD' is not valid at opset 13") != NULL);
    r = (op_node){.name = "d2s", .opset = 13};
    add_int(&r, "blocksize", 3);
    EXPECT_EQ_INT(op_run_ins(&r, "DepthToSpace", ins, 1, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "12 channels, not a multiple of blocksize^2 = 9") != NULL);
    r = (op_node){.name = "s2d", .opset = 13};
    add_int(&r, "blocksize", 2);
    EXPECT_EQ_INT(op_run_ins(&r, "SpaceToDepth", ins, 1, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "spatial dims 3x5, not multiples of blocksize 2") != NULL);
    ptq_tensor_free(&x);
}

TEST(crop_col2im_affine_grid_give_clear_errors)
{
    ptq_tensor y[1];
    int64_t xd[3] = {1, 9, 20}, two[2] = {4, 6}, three[2] = {3, 3};
    ptq_tensor x = tensor_rand(3, xd, -1, 1), img = tensor_i64(2, two), blk = tensor_i64(2, three);
    const ptq_tensor *ins[3] = {&x, &img, &blk};
    /* Col2Im: 20 columns where the geometry gives (4-3+1)*(6-3+1) = 8; shapes not constant */
    op_node r = {.name = "c2i", .opset = 18, .const_mask = 6};
    EXPECT_EQ_INT(op_run_ins(&r, "Col2Im", ins, 3, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "Col2Im 'c2i': input has 20 blocks, the geometry gives 8") != NULL);
    r = (op_node){.name = "c2i", .opset = 18, .const_mask = 4};
    EXPECT_EQ_INT(op_run_ins(&r, "Col2Im", ins, 3, y), PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "image_shape input is not constant") != NULL);
    /* CenterCropPad: shape entries for the axes */
    r = (op_node){.name = "ccp", .opset = 18, .const_mask = 2};
    EXPECT_EQ_INT(op_run_ins(&r, "CenterCropPad", ins, 2, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "CenterCropPad 'ccp': shape has 2 entries for 3 axes") != NULL);
    /* AffineGrid: theta of the wrong shape */
    int64_t sz[4] = {1, 3, 5, 5};
    ptq_tensor size = tensor_i64(4, sz);
    ins[1] = &size;
    r = (op_node){.name = "ag", .opset = 20, .const_mask = 2};
    EXPECT_EQ_INT(op_run_ins(&r, "AffineGrid", ins, 2, y), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "AffineGrid 'ag': theta must be [1, 2, 3]") != NULL);
    ptq_tensor_free(&x);
    ptq_tensor_free(&img);
    ptq_tensor_free(&blk);
    ptq_tensor_free(&size);
}

/* 1 when (va, ia) ranks before (vb, ib): NaN above every number, ties to the lower index */
static int topk_ref_before(float va, int64_t ia, float vb, int64_t ib, int largest)
{
    int na = isnan(va), nb = isnan(vb);
    if (na != nb) return largest ? na : nb;
    if (!na && va != vb) return largest ? va > vb : va < vb;
    return ia < ib;
}

TEST(topk_matches_a_full_sort_on_rows_with_ties)
{
    int64_t d[3] = {5, 50, 3};
    ptq_tensor x = tensor_new(PTQ_F32, 3, d);
    float *xv = x.data;
    for (int i = 0; i < 750; i++) xv[i] = irand(0, 19) == 0 ? NAN : (float)irand(0, 9);
    const int64_t ks[3] = {1, 7, 50};
    for (int kk = 0; kk < 3; kk++)
        for (int largest = 0; largest < 2; largest++) {
            ptq_tensor kt = tensor_i64(1, &ks[kk]), y[2];
            op_node r = {.name = "topk", .opset = 11, .n_out = 2, .want = {0, 1}, .const_mask = 2, .nthreads = 3};
            add_int(&r, "axis", 1);
            add_int(&r, "largest", largest);
            const ptq_tensor *ins[2] = {&x, &kt};
            EXPECT_EQ_INT(op_run_ins(&r, "TopK", ins, 2, y), PTQ_OK);
            int bad = 0;
            for (int64_t o = 0; o < 5 && y[1].data; o++)
                for (int64_t in = 0; in < 3; in++) {
                    int64_t order[50];
                    for (int64_t j = 0; j < 50; j++) order[j] = j; /* insertion sort by the ONNX order */
                    for (int64_t j = 1; j < 50; j++)
                        for (int64_t m = j; m > 0; m--) {
                            int64_t a = order[m], b = order[m - 1];
                            if (!topk_ref_before(xv[(o * 50 + a) * 3 + in], a, xv[(o * 50 + b) * 3 + in], b, largest)) break;
                            order[m] = b;
                            order[m - 1] = a;
                        }
                    for (int64_t j = 0; j < ks[kk]; j++) {
                        int64_t got = ((int64_t *)y[1].data)[(o * ks[kk] + j) * 3 + in];
                        float gv = ((float *)y[0].data)[(o * ks[kk] + j) * 3 + in], wv = xv[(o * 50 + order[j]) * 3 + in];
                        bad += got != order[j] || !(gv == wv || (isnan(gv) && isnan(wv)));
                    }
                }
            if (bad) TEST_FAILF("k %lld largest %d: %d positions differ", (long long)ks[kk], largest, bad);
            ptq_tensor_free(&y[0]);
            ptq_tensor_free(&y[1]);
            ptq_tensor_free(&kt);
        }
    ptq_tensor_free(&x);
}

int main(void)
{
    op_test_seed(20261127u);
    RUN(roialign_detector_heads_match_the_reference);
    RUN(roialign_rejects_bad_inputs);
    RUN(einsum_transformer_equations_match_loops);
    RUN(einsum_rejects_bad_equations);
    RUN(topk_breaks_ties_by_lower_index);
    RUN(topk_matches_a_full_sort_on_rows_with_ties);
    RUN(index_ops_give_clear_errors);
    RUN(geometry_sequence_signal_ops_give_clear_errors);
    RUN(depth_space_round_trip_and_modes);
    RUN(crop_col2im_affine_grid_give_clear_errors);
    return test_summary();
}
