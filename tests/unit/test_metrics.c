/* test_metrics.c: the pieces of compare's CTC metrics (engine/compare.h): greedy CTC reading
 * (argmax per position, repeats collapsed, the blank dropped; both layouts [T, C] and [C, T]) on
 * hand-made sequences, and the edit distance against a plain full-table Levenshtein on random
 * strings and on known pairs; metric names parse and print back. COCO mAP (engine/compare_truth.h)
 * on hand-made images whose AP follows from COCOeval's definition by hand: a perfect detection,
 * a false positive ranked first, a match that holds up to IoU 0.70 only, crowd boxes ignored,
 * categories without ground truth left out of the mean, 100 detections per image and category; the
 * mAP of resamples from matches made once equal bit for bit to COCO's evaluation of the resample; a
 * target drop measured from FP32's own value (its mAP, its accuracy, 1 for agreement). A segmenter's
 * mIoU (engine/compare_seg.h) on a hand-made image, stretched and centre-cropped (the cut-off
 * columns not counted, the ignore value not counted); mask PNGs read as their indices (1-bit gray,
 * 4-bit palette), a truncated one refused. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/compare.h"
#include "engine/compare_seg.h"
#include "engine/compare_truth.h"
#include "io/labels.h"
#include "tests/unit/op_test.h"

enum { C = 5 };

/* scores[t][c] with a 1 at the class of each position, 0 elsewhere */
static void one_hot(const int *cls, int T, float *x)
{
    memset(x, 0, sizeof(float) * (size_t)T * C);
    for (int t = 0; t < T; t++) x[t * C + cls[t]] = 1.0f;
}

static int64_t read_tc(const int *cls, int T, int *out)
{
    float x[64 * C];
    one_hot(cls, T, x);
    return cmp_ctc_greedy(x, T, C, C, 1, 0, out);
}

TEST(greedy_ctc_collapses_repeats_and_drops_the_blank)
{
    int out[64];
    /* 0 0 3 3 0 3 1 1 2 0 -> 3 3 1 2 */
    const int a[] = {0, 0, 3, 3, 0, 3, 1, 1, 2, 0};
    int64_t n = read_tc(a, 10, out);
    EXPECT_EQ_INT((int)n, 4);
    EXPECT(out[0] == 3 && out[1] == 3 && out[2] == 1 && out[3] == 2);
    /* the same reading with every label one position later: a moved label reads the same */
    const int b[] = {0, 0, 0, 3, 0, 3, 3, 1, 2, 2};
    int ob[64];
    int64_t nb = read_tc(b, 10, ob);
    EXPECT_EQ_INT((int)nb, 4);
    EXPECT(memcmp(out, ob, sizeof(int) * 4) == 0);
    /* all blank: nothing */
    const int z[] = {0, 0, 0};
    EXPECT_EQ_INT((int)read_tc(z, 3, out), 0);
    /* no blank between repeats: one label */
    const int r[] = {4, 4, 4};
    EXPECT_EQ_INT((int)read_tc(r, 3, out), 1);
    EXPECT_EQ_INT(out[0], 4);
    /* T = 0 */
    EXPECT_EQ_INT((int)cmp_ctc_greedy(NULL, 0, C, C, 1, 0, out), 0);
}

TEST(greedy_ctc_first_of_equal_maxima_and_other_layout)
{
    int out[8];
    /* position 0: classes 2 and 4 tie -> 2; position 1: all equal -> 0 (blank) */
    float x[2 * C] = {0, 0, 0.5f, 0, 0.5f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
    EXPECT_EQ_INT((int)cmp_ctc_greedy(x, 2, C, C, 1, 0, out), 1);
    EXPECT_EQ_INT(out[0], 2);
    /* [C, T] layout: x'[c * T + t] */
    const int cls[] = {1, 0, 2, 2, 0, 1};
    enum { T = 6 };
    float tc[T * C], ct[C * T];
    one_hot(cls, T, tc);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) ct[c * T + t] = tc[t * C + c];
    int a[8], b[8];
    int64_t na = cmp_ctc_greedy(tc, T, C, C, 1, 0, a), nb = cmp_ctc_greedy(ct, T, C, 1, T, 0, b);
    EXPECT_EQ_INT((int)na, 3);
    EXPECT_EQ_INT((int)nb, 3);
    EXPECT(memcmp(a, b, sizeof(int) * 3) == 0 && a[0] == 1 && a[1] == 2 && a[2] == 1);
    /* another blank index: class 1 dropped, class 0 kept */
    EXPECT_EQ_INT((int)cmp_ctc_greedy(tc, T, C, C, 1, 1, a), 3);
    EXPECT(a[0] == 0 && a[1] == 2 && a[2] == 0);
}

/* Levenshtein with the whole (na+1) x (nb+1) table */
static int64_t full_table(const int *a, int na, const int *b, int nb)
{
    int64_t *d = malloc(sizeof *d * (size_t)(na + 1) * (size_t)(nb + 1));
    for (int i = 0; i <= na; i++) d[i * (nb + 1)] = i;
    for (int j = 0; j <= nb; j++) d[j] = j;
    for (int i = 1; i <= na; i++)
        for (int j = 1; j <= nb; j++) {
            int64_t v = d[(i - 1) * (nb + 1) + j - 1] + (a[i - 1] != b[j - 1]);
            if (d[(i - 1) * (nb + 1) + j] + 1 < v) v = d[(i - 1) * (nb + 1) + j] + 1;
            if (d[i * (nb + 1) + j - 1] + 1 < v) v = d[i * (nb + 1) + j - 1] + 1;
            d[i * (nb + 1) + j] = v;
        }
    int64_t r = d[na * (nb + 1) + nb];
    free(d);
    return r;
}

TEST(edit_distance_known_pairs)
{
    int64_t row[16];
    const int kitten[] = {'k', 'i', 't', 't', 'e', 'n'}, sitting[] = {'s', 'i', 't', 't', 'i', 'n', 'g'};
    EXPECT_EQ_INT((int)cmp_edit_distance(kitten, 6, sitting, 7, row), 3);
    EXPECT_EQ_INT((int)cmp_edit_distance(sitting, 7, kitten, 6, row), 3);
    EXPECT_EQ_INT((int)cmp_edit_distance(kitten, 6, kitten, 6, row), 0);
    EXPECT_EQ_INT((int)cmp_edit_distance(kitten, 6, NULL, 0, row), 6);
    EXPECT_EQ_INT((int)cmp_edit_distance(NULL, 0, sitting, 7, row), 7);
    EXPECT_EQ_INT((int)cmp_edit_distance(NULL, 0, NULL, 0, row), 0);
}

TEST(edit_distance_equals_the_full_table_on_random_strings)
{
    int a[40], b[40];
    int64_t row[41];
    int bad = 0;
    for (int k = 0; k < 2000; k++) {
        int na = irand(0, 40), nb = irand(0, 40), alphabet = irand(1, 6);
        for (int i = 0; i < na; i++) a[i] = irand(0, alphabet - 1);
        for (int i = 0; i < nb; i++) b[i] = irand(0, alphabet - 1);
        bad += cmp_edit_distance(a, na, b, nb, row) != full_table(a, na, b, nb);
    }
    EXPECT_EQ_INT(bad, 0);
}

TEST(metric_names_parse_and_print_back)
{
    const char *good[] = {"cosine", "sqnr", "top1", "seq-top1", "seq-top1:1", "seq-chars", "seq-chars:2", "seq-exact",
                          "seq-exact:1", "mask-iou:0.3"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        cmp_metric m;
        char buf[64];
        EXPECT_EQ_INT(cmp_metric_parse(good[i], &m), 0);
        cmp_metric_name(&m, buf, sizeof buf);
        EXPECT_STR(buf, good[i]);
    }
    cmp_metric m;
    EXPECT_EQ_INT(cmp_metric_parse("seq-chars", &m), 0);
    EXPECT(m.kind == CMP_METRIC_SEQ_CHARS && m.axis == -1);
    EXPECT_EQ_INT(cmp_metric_parse("seq-exact:2", &m), 0);
    EXPECT(m.kind == CMP_METRIC_SEQ_EXACT && m.axis == 2);
    const char *bad[] = {"seq-chars:", "seq-chars:0", "seq-chars:x", "seq-charsx", "seq-exact:1x", "seq", "seq-top1:9"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) EXPECT_EQ_INT(cmp_metric_parse(bad[i], &m), -1);
}

/* mAP over one image: gt and dt given, n_classes classes. */
static cmp_map_result map_of(const cmp_gt *gt, int ng, const cmp_det *dt, int nd, int n_classes)
{
    cmp_map_result r = {0};
    const cmp_gt *g[1] = {gt};
    const cmp_det *d[1] = {dt};
    if (cmp_coco_map(g, &ng, d, &nd, 1, n_classes, &r) != PTQ_OK) TEST_FAILF("cmp_coco_map failed");
    return r;
}

TEST(coco_map_perfect_and_false_positive_first)
{
    cmp_gt gt[1] = {{10, 10, 20, 20, 400, 0, 0}};
    cmp_det hit = {10, 10, 20, 20, 0.9, 0};
    cmp_map_result r = map_of(gt, 1, &hit, 1, 1);
    EXPECT_NEAR(r.map50, 1.0, 1e-12, 0);
    EXPECT_NEAR(r.map, 1.0, 1e-12, 0);
    cmp_map_result_free(&r);
    /* a miss scoring higher: precision 1/2 at recall 1, made monotone: AP 0.5 at every threshold */
    cmp_det two[2] = {{100, 100, 5, 5, 0.95, 0}, {10, 10, 20, 20, 0.9, 0}};
    r = map_of(gt, 1, two, 2, 1);
    EXPECT_NEAR(r.map50, 0.5, 1e-12, 0);
    EXPECT_NEAR(r.map, 0.5, 1e-12, 0);
    EXPECT_NEAR(r.ap[0], 0.5, 1e-12, 0);
    cmp_map_result_free(&r);
    /* the hit first, then the miss: precision 1 up to recall 1 */
    cmp_det rev[2] = {{10, 10, 20, 20, 0.95, 0}, {100, 100, 5, 5, 0.9, 0}};
    r = map_of(gt, 1, rev, 2, 1);
    EXPECT_NEAR(r.map50, 1.0, 1e-12, 0);
    cmp_map_result_free(&r);
}

TEST(coco_map_iou_thresholds)
{
    /* IoU 0.72 (ground truth 10x10, detection shifted to 8.4 columns of overlap: 84 / 116): matched at
     * 0.50 .. 0.70 (5 of 10 thresholds), so AP50 1 and AP 0.5 */
    cmp_gt gt[1] = {{0, 0, 10, 10, 100, 0, 0}};
    cmp_det d = {1.6, 0, 10, 10, 0.5, 0};
    cmp_map_result r = map_of(gt, 1, &d, 1, 1);
    EXPECT_NEAR(r.map50, 1.0, 1e-12, 0);
    EXPECT_NEAR(r.map, 0.5, 1e-12, 0);
    cmp_map_result_free(&r);
    /* the wrong class: nothing matched */
    d.cls = 1;
    r = map_of(gt, 1, &d, 1, 2);
    EXPECT_NEAR(r.map50, 0.0, 1e-12, 0);
    EXPECT(isnan(r.ap50[1])); /* class 1 has no ground truth: left out of the mean */
    cmp_map_result_free(&r);
}

TEST(coco_map_crowd_and_categories_without_truth)
{
    /* a detection inside a crowd box only: matched to it, ignored (neither a hit nor a miss) */
    cmp_gt gt[2] = {{0, 0, 10, 10, 100, 0, 0}, {50, 50, 40, 40, 1600, 0, 1}};
    cmp_det d[2] = {{55, 55, 10, 10, 0.99, 0}, {0, 0, 10, 10, 0.5, 0}};
    cmp_map_result r = map_of(gt, 2, d, 2, 1);
    EXPECT_NEAR(r.map50, 1.0, 1e-12, 0);
    cmp_map_result_free(&r);
    /* only crowd ground truth: the category is left out, no category left: NaN */
    r = map_of(gt + 1, 1, d, 1, 1);
    EXPECT(isnan(r.map50) && isnan(r.map) && isnan(r.ap50[0]));
    cmp_map_result_free(&r);
    /* no detections at all: AP 0 */
    r = map_of(gt, 1, NULL, 0, 1);
    EXPECT_NEAR(r.map, 0.0, 1e-12, 0);
    cmp_map_result_free(&r);
}

TEST(coco_map_keeps_100_detections_per_image_and_category)
{
    enum { N = 150 };
    cmp_gt gt[1] = {{0, 0, 10, 10, 100, 0, 0}};
    cmp_det d[N];
    for (int i = 0; i < N; i++) d[i] = (cmp_det){200.0 + i, 200, 5, 5, 1.0 - i * 0.001, 0};
    d[N - 1] = (cmp_det){0, 0, 10, 10, 0.01, 0}; /* the hit, ranked 150th: cut */
    cmp_map_result r = map_of(gt, 1, d, N, 1);
    EXPECT_NEAR(r.map50, 0.0, 1e-12, 0);
    cmp_map_result_free(&r);
    d[N - 1].score = 0.9915; /* now ranked 10th: precision 1/10 at recall 1 */
    r = map_of(gt, 1, d, N, 1);
    EXPECT_NEAR(r.map50, 0.1, 1e-12, 0);
    cmp_map_result_free(&r);
}

/* cmp_map_resample against cmp_coco_map of the drawn images in draw order: bit for bit, on random
 * images with crowd boxes, an image of 110 detections of one class, and scores from a few values
 * (ties within an image, across images and between the copies of an image drawn twice). */
static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

TEST(coco_map_resample_equals_the_evaluation_of_the_draw)
{
    enum { NI = 14, NC = 4, MAXG = 6, MAXD = 110, DRAWS = 60 };
    static cmp_gt gt[NI][MAXG];
    static cmp_det dt[NI][MAXD];
    int ng[NI], nd[NI];
    const cmp_gt *gp[NI];
    const cmp_det *dp[NI];
    uint32_t s = 35;
    for (int i = 0; i < NI; i++) {
        ng[i] = (int)(lcg(&s) % (MAXG + 1));
        nd[i] = i == 3 ? MAXD : (int)(lcg(&s) % 16);
        for (int j = 0; j < ng[i]; j++) {
            double x = lcg(&s) % 200, y = lcg(&s) % 200, w = 10 + lcg(&s) % 60, h = 10 + lcg(&s) % 60;
            gt[i][j] = (cmp_gt){x, y, w, h, w * h, (int)(lcg(&s) % NC), lcg(&s) % 9 == 0};
        }
        for (int j = 0; j < nd[i]; j++) {
            double x = lcg(&s) % 200, y = lcg(&s) % 200, w = 10 + lcg(&s) % 60, h = 10 + lcg(&s) % 60;
            int cls = i == 3 ? 1 : (int)(lcg(&s) % NC);
            if (ng[i] && lcg(&s) % 3) { /* near a ground truth box */
                const cmp_gt *g = &gt[i][lcg(&s) % (uint32_t)ng[i]];
                x = g->x + (double)(lcg(&s) % 9) - 4;
                y = g->y + (double)(lcg(&s) % 9) - 4;
                w = g->w + (double)(lcg(&s) % 7) - 3;
                h = g->h;
                if (lcg(&s) % 4) cls = g->cls;
            }
            dt[i][j] = (cmp_det){x, y, w, h, 0.1 * (double)(1 + lcg(&s) % 6), cls};
        }
        gp[i] = gt[i];
        dp[i] = dt[i];
    }
    cmp_map_prep *p = NULL;
    EXPECT_EQ_INT(cmp_map_prepare(gp, ng, dp, nd, NI, NC, &p), PTQ_OK);
    int differ = 0, ties = 0;
    for (int b = 0; b < DRAWS && p; b++) {
        int idx[NI], gn[NI], dn[NI];
        const cmp_gt *g2[NI];
        const cmp_det *d2[NI];
        int n = b == 0 ? NI : 1 + (int)(lcg(&s) % NI);
        for (int i = 0; i < n; i++) {
            idx[i] = b == 0 ? i : (int)(lcg(&s) % NI);
            g2[i] = gp[idx[i]];
            d2[i] = dp[idx[i]];
            gn[i] = ng[idx[i]];
            dn[i] = nd[idx[i]];
            for (int j = 0; j < i; j++) ties += idx[j] == idx[i];
        }
        cmp_map_result r = {0};
        double m50, m;
        EXPECT_EQ_INT(cmp_coco_map(g2, gn, d2, dn, n, NC, &r), PTQ_OK);
        EXPECT_EQ_INT(cmp_map_resample(p, idx, n, &m50, &m), 0);
        if (memcmp(&m50, &r.map50, sizeof m50) || memcmp(&m, &r.map, sizeof m)) {
            if (!differ) fprintf(stderr, "draw %d: resample %.17g %.17g, evaluation %.17g %.17g\n", b, m50, m, r.map50, r.map);
            differ++;
        }
        cmp_map_result_free(&r);
    }
    EXPECT_EQ_INT(differ, 0);
    EXPECT(ties > 0); /* images drawn more than once */
    cmp_map_prep_free(p);
}

TEST(target_drop_against_fp32s_own_value)
{
    cmp_target t = {NAN, NAN, 1.0, NAN, {0}, 0.005};
    cmp_metrics m;
    memset(&m, 0, sizeof m);
    EXPECT_EQ_INT(cmp_metric_parse("map", &t.kind), 0);
    m.fp32_map = 0.40;
    m.map = 0.396; /* 0.4 points below FP32: within 0.005 */
    EXPECT(cmp_meets(&t, &m));
    m.map = 0.394;
    EXPECT(!cmp_meets(&t, &m));
    m.map = NAN; /* no labels: never met */
    EXPECT(!cmp_meets(&t, &m));
    EXPECT_EQ_INT(cmp_metric_parse("seq-exact", &t.kind), 0); /* agreement: FP32's own value is 1 */
    m.seq_exact = 0.996;
    EXPECT(cmp_meets(&t, &m));
    m.seq_exact = 0.99;
    EXPECT(!cmp_meets(&t, &m));
    EXPECT_EQ_INT(cmp_metric_parse("top1", &t.kind), 0); /* accuracy: against fp32_top1 */
    t.fp32_top1 = 0.75;
    m.top1_acc = 0.746;
    EXPECT(cmp_meets(&t, &m));
    m.top1_acc = 0.74;
    EXPECT(!cmp_meets(&t, &m));
}

TEST(bootstrap_intervals_equal_numpys_draws)
{
    /* tests/oracle/bootstrap.py's ratio and paired_delta on these numbers (numpy RandomState(1)) */
    const double num[7] = {3, 0, 5, 1, 2, 7, 0}, den[7] = {20, 15, 30, 9, 11, 40, 5}, na[7] = {1, 0, 2, 1, 0, 3, 0};
    double lo, hi;
    EXPECT_EQ_INT(cmp_bootstrap_ratio(num, NULL, den, 7, &lo, &hi), PTQ_OK);
    EXPECT_NEAR(lo, 0.07575757575757576, 1e-12, 0);
    EXPECT_NEAR(hi, 0.16771285659319518, 1e-12, 0);
    EXPECT_EQ_INT(cmp_bootstrap_ratio(num, na, den, 7, &lo, &hi), PTQ_OK);
    EXPECT_NEAR(lo, 0.04052702702702704, 1e-12, 0);
    EXPECT_NEAR(hi, 0.11025809273840768, 1e-12, 0);
}

/* The mIoU of compare_seg.c on one 4x2 image whose tensor is 2x2: by hand, as the header defines it. */
static double seg_miou_of(int pad_left, int resized_w, float *iou)
{
    static const float y[12] = {/* class 0 */ 1, 0, 0, 0, /* class 1 */ 0, 1, 0, 0, /* class 2 */ 0, 0, 1, 1};
    static const uint8_t mask[8] = {0, 0, 1, 255, 2, 1, 2, 2};
    uint8_t *m = malloc(8);
    memcpy(m, mask, 8);
    int w = 4, h = 2;
    cmp_seg_truth t = {&m, &w, &h, 1, 1, 3, 255};
    pp_meta meta = {.src_w = 4, .src_h = 2, .resized_w = resized_w, .resized_h = 2, .pad_left = pad_left};
    ptq_tensor y0 = {.dtype = PTQ_F32, .rank = 4, .dims = {1, 3, 2, 2}};
    cmp_seg s = {0};
    cmp_metrics r = {0};
    EXPECT_EQ_INT(cmp_seg_begin(&s, &t, 2), PTQ_OK);
    EXPECT_EQ_INT(cmp_seg_add(&s, 0, 0, &y0, 1, y, 12, 0, 2, 2, &meta), PTQ_OK);
    EXPECT_EQ_INT(cmp_seg_add(&s, 1, 0, &y0, 1, y, 12, 0, 2, 2, &meta), PTQ_OK);
    EXPECT_EQ_INT(cmp_seg_metrics(&s, 0, 1, &r), PTQ_OK);
    EXPECT_EQ_INT(r.n_iou, 3);
    memcpy(iou, r.iou, sizeof(float) * 3);
    EXPECT_NEAR(r.miou, r.fp32_miou, 0, 0);
    EXPECT_NEAR(r.miou_delta_ci[0], 0, 0, 0);
    cmp_seg_free(&s);
    free(m);
    return r.miou;
}

TEST(seg_miou_by_hand_stretch_and_crop)
{
    float iou[3];
    /* stretch: image columns 0,1 read output column 0, columns 2,3 column 1; predicted row 0: 0 0 1 (1: ignored),
     * row 1: 2 2 2 2. class 0: 2 / 2; class 1: 1 / (2 + 1 - 1); class 2: 3 / (3 + 4 - 3) */
    EXPECT_NEAR(seg_miou_of(0, 2, iou), (1.0 + 0.5 + 0.75) / 3, 1e-12, 0);
    EXPECT_NEAR(iou[0], 1.0, 1e-7, 0);
    EXPECT_NEAR(iou[1], 0.5, 1e-7, 0);
    EXPECT_NEAR(iou[2], 0.75, 1e-7, 0);
    /* a centre crop of a 4-wide resize into the 2-wide tensor: columns 0 and 3 are cut off; column 1 reads
     * output column 0, column 2 column 1. Counted: row 0 (0 | 1), row 1 (1 | 2) against predictions
     * (0 | 1), (2 | 2): class 0 1/1, class 1 1/(2 + 1 - 1), class 2 1/(1 + 2 - 1) */
    EXPECT_NEAR(seg_miou_of(-1, 4, iou), (1.0 + 0.5 + 0.5) / 3, 1e-12, 0);
}

TEST(mask_png_indices_not_colours)
{
    /* tests/fuzz/regress/mask: a 1-bit gray 5x3 of (i % 2) and a 4-bit palette 7x5 of (i % 9), as PIL wrote them */
    io_mask_labels l = {.dir = "tests/fuzz/regress/mask", .ignore = 255};
    uint8_t *m = NULL;
    int w = 0, h = 0;
    EXPECT_EQ_INT(io_mask_read(&l, "x/gray-1bit.jpg", &m, &w, &h), PTQ_OK);
    EXPECT_EQ_INT(w * 10 + h, 53);
    for (int i = 0; m && i < 15; i++) EXPECT_EQ_INT(m[i], i % 2);
    free(m);
    EXPECT_EQ_INT(io_mask_read(&l, "palette-4bit.png", &m, &w, &h), PTQ_OK);
    EXPECT_EQ_INT(w * 10 + h, 75);
    for (int i = 0; m && i < 35; i++) EXPECT_EQ_INT(m[i], i % 9);
    free(m);
    EXPECT(io_mask_read(&l, "truncated.png", &m, &w, &h) != PTQ_OK && m == NULL);
    EXPECT(io_mask_read(&l, "absent.png", &m, &w, &h) == PTQ_ERR_IO);
}

int main(void)
{
    op_test_seed(2026u);
    RUN(greedy_ctc_collapses_repeats_and_drops_the_blank);
    RUN(greedy_ctc_first_of_equal_maxima_and_other_layout);
    RUN(edit_distance_known_pairs);
    RUN(edit_distance_equals_the_full_table_on_random_strings);
    RUN(metric_names_parse_and_print_back);
    RUN(coco_map_perfect_and_false_positive_first);
    RUN(coco_map_iou_thresholds);
    RUN(coco_map_crowd_and_categories_without_truth);
    RUN(coco_map_keeps_100_detections_per_image_and_category);
    RUN(coco_map_resample_equals_the_evaluation_of_the_draw);
    RUN(target_drop_against_fp32s_own_value);
    RUN(bootstrap_intervals_equal_numpys_draws);
    RUN(seg_miou_by_hand_stretch_and_crop);
    RUN(mask_png_indices_not_colours);
    return test_summary();
}
