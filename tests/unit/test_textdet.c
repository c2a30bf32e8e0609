/* test_textdet.c: a text detector against its polygons (engine/compare_det.h, io/labels.h
 * paddledet:). DB on hand-made maps, the boxes PaddleOCR's own DB gives on the same maps
 * (tests/oracle/ocr_pipeline.py's boxes_from_bitmap on OpenCV 4.6 and pyclipper, computed once):
 * an upright rectangle (in the map's pixels, stretched to twice the size, and letterboxed), a ring whose hole,
 * one-pixel line and faint region give no box, a rotated rectangle; DetMetric on hand-made
 * polygons whose counts follow from its definition: IoU above 0.5 matches (0.5 exactly does not),
 * one box per polygon, a box mostly inside a don't-care polygon not counted, a self-crossing
 * polygon dropped; the label list read as PaddleOCR writes it, bad lines refused naming the line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/compare_det.h"
#include "io/labels.h"
#include "tests/test.h"

static int box_is(const cmp_tdet_box *b, const double *want)
{
    for (int k = 0; k < 4; k++)
        if (b->x[k] != want[2 * k] || b->y[k] != want[2 * k + 1]) return 0;
    return 1;
}

TEST(db_upright_rectangle_in_the_map_and_stretched)
{
    float *m = calloc(40 * 80, sizeof *m);
    for (int r = 10; r < 20; r++)
        for (int c = 20; c < 60; c++) m[r * 80 + c] = 0.9f;
    cmp_tdet_box *b = NULL;
    int n = -1;
    EXPECT_EQ_INT(cmp_db_boxes(m, 80, 40, 80, 40, NULL, &b, &n), PTQ_OK);
    EXPECT_EQ_INT(n, 1);
    static const double want[8] = {15, 5, 64, 5, 64, 24, 15, 24};
    if (n == 1) EXPECT(box_is(&b[0], want));
    free(b);
    pp_meta meta = {0};
    meta.src_w = 160;
    meta.src_h = 80;
    meta.resized_w = 80;
    meta.resized_h = 40;
    EXPECT_EQ_INT(cmp_db_boxes(m, 80, 40, 80, 40, &meta, &b, &n), PTQ_OK);
    EXPECT_EQ_INT(n, 1);
    static const double want2[8] = {30, 10, 128, 10, 128, 48, 30, 48};
    if (n == 1) EXPECT(box_is(&b[0], want2));
    free(b);
    /* a letterbox: the image 80x20 placed 10 rows down in the 80x40 tensor; clipped to the image */
    meta.src_w = 80;
    meta.src_h = 20;
    meta.resized_w = 80;
    meta.resized_h = 20;
    meta.pad_top = 10;
    EXPECT_EQ_INT(cmp_db_boxes(m, 80, 40, 80, 40, &meta, &b, &n), PTQ_OK);
    EXPECT_EQ_INT(n, 1);
    static const double want3[8] = {15, 0, 64, 0, 64, 14, 15, 14};
    if (n == 1) EXPECT(box_is(&b[0], want3));
    free(b);
    free(m);
}

TEST(db_hole_thin_line_and_faint_region_give_no_box)
{
    float *m = calloc(40 * 80, sizeof *m);
    for (int r = 5; r < 35; r++)
        for (int c = 5; c < 75; c++) m[r * 80 + c] = 0.9f;
    for (int r = 20; r < 22; r++)
        for (int c = 40; c < 42; c++) m[r * 80 + c] = 0; /* a hole: its border's box is too narrow */
    for (int c = 10; c < 30; c++) m[2 * 80 + c] = 0.95f; /* one pixel high */
    for (int r = 36; r < 39; r++)
        for (int c = 50; c < 70; c++) m[r * 80 + c] = 0.35f; /* text, but its mean is below 0.6 */
    cmp_tdet_box *b = NULL;
    int n = -1;
    EXPECT_EQ_INT(cmp_db_boxes(m, 80, 40, 80, 40, NULL, &b, &n), PTQ_OK);
    EXPECT_EQ_INT(n, 1);
    static const double want[8] = {0, 0, 80, 0, 80, 40, 0, 40}; /* clipped to the map */
    if (n == 1) EXPECT(box_is(&b[0], want));
    free(b);
    free(m);
}

TEST(db_empty_and_full_maps)
{
    float *m = calloc(30 * 50, sizeof *m);
    cmp_tdet_box *b = NULL;
    int n = -1;
    EXPECT_EQ_INT(cmp_db_boxes(m, 50, 30, 50, 30, NULL, &b, &n), PTQ_OK);
    EXPECT(n == 0 && b == NULL);
    for (int i = 0; i < 30 * 50; i++) m[i] = 1.0f;
    EXPECT_EQ_INT(cmp_db_boxes(m, 50, 30, 50, 30, NULL, &b, &n), PTQ_OK);
    EXPECT_EQ_INT(n, 1);
    static const double want[8] = {0, 0, 50, 0, 50, 30, 0, 30};
    if (n == 1) EXPECT(box_is(&b[0], want));
    free(b);
    free(m);
}

TEST(db_rotated_rectangle)
{
    /* cv2.fillPoly of cv2.boxPoints(((50, 30), (60, 12), 20)) at 0.8: rows 14..45, first and last column */
    static const int span[32][2] = {{23, 24}, {23, 27}, {22, 30}, {22, 32}, {22, 35}, {21, 38}, {21, 41}, {20, 44},
                                    {20, 47}, {20, 50}, {19, 52}, {19, 55}, {21, 58}, {24, 61}, {27, 64}, {29, 67},
                                    {32, 70}, {35, 72}, {38, 75}, {41, 78}, {44, 80}, {47, 80}, {49, 79}, {52, 79},
                                    {55, 79}, {58, 78}, {61, 78}, {64, 77}, {67, 77}, {69, 77}, {72, 76}, {75, 76}};
    float *m = calloc(60 * 100, sizeof *m);
    for (int r = 0; r < 32; r++)
        for (int c = span[r][0]; c <= span[r][1]; c++) m[(r + 14) * 100 + c] = 0.8f;
    cmp_tdet_box *b = NULL;
    int n = -1;
    EXPECT_EQ_INT(cmp_db_boxes(m, 100, 60, 100, 60, NULL, &b, &n), PTQ_OK);
    EXPECT_EQ_INT(n, 1);
    static const double want[8] = {18, 3, 89, 28, 80, 55, 9, 30};
    if (n == 1) EXPECT(box_is(&b[0], want));
    free(b);
    free(m);
}

static cmp_tdet_box rect(double x0, double y0, double x1, double y1)
{
    cmp_tdet_box b = {{x0, x1, x1, x0}, {y0, y0, y1, y1}};
    return b;
}

TEST(detmetric_by_hand)
{
    /* polygons: A (0,0)-(10,10), B (20,0)-(30,10), C (40,0)-(50,10) don't care, E self-crossing */
    double xy[] = {0, 0, 10, 0, 10, 10, 0, 10, 20, 0, 30, 0, 30, 10, 20, 10,
                   40, 0, 50, 0, 50, 10, 40, 10, 60, 0, 70, 10, 70, 0, 60, 10};
    int npt[] = {4, 4, 4, 4}, care[] = {1, 1, 0, 1};
    io_image_polys gt = {.name = "x.png", .n = 4, .npt = npt, .xy = xy, .care = care};
    /* A matched at IoU 90/110; B's box covers 40 of 100 (no match); one inside C (not counted);
     * a second copy of A (a false positive: A is taken) */
    cmp_tdet_box d[4] = {rect(1, 0, 11, 10), rect(20, 0, 30, 4), rect(40, 0, 46, 10), rect(0, 0, 10, 10)};
    int gc = -1, dc = -1, m = -1;
    EXPECT_EQ_INT(cmp_tdet_match(&gt, d, 4, &gc, &dc, &m), PTQ_OK);
    EXPECT_EQ_INT(gc, 2);
    EXPECT_EQ_INT(dc, 3);
    EXPECT_EQ_INT(m, 1);
    /* IoU exactly 0.5 is not a match; 0.5 + a little is */
    double xy2[] = {0, 0, 10, 0, 10, 20, 0, 20};
    int npt2[] = {4}, care2[] = {1};
    io_image_polys g2 = {.name = "y.png", .n = 1, .npt = npt2, .xy = xy2, .care = care2};
    cmp_tdet_box half = rect(0, 0, 10, 10), more = rect(0, 0, 10, 10.5);
    EXPECT_EQ_INT(cmp_tdet_match(&g2, &half, 1, &gc, &dc, &m), PTQ_OK);
    EXPECT_EQ_INT(m, 0);
    EXPECT_EQ_INT(cmp_tdet_match(&g2, &more, 1, &gc, &dc, &m), PTQ_OK);
    EXPECT_EQ_INT(m, 1);
    /* no polygon, no box */
    EXPECT_EQ_INT(cmp_tdet_match(NULL, NULL, 0, &gc, &dc, &m), PTQ_OK);
    EXPECT(gc == 0 && dc == 0 && m == 0);
}

TEST(label_list_read_and_refused)
{
    const char *ok = "imgs/a.png\t[{\"transcription\": \"HELLO\", \"points\": [[1, 2], [30, 2], [30, 12], [1, 12]]},"
                     " {\"transcription\": \"###\", \"points\": [[0, 20], [9, 20], [9, 29], [4, 33], [0, 29]]}]\r\n"
                     "\n"
                     "b.jpg\t[{\"transcription\": \"*\", \"points\": [[0.5, 0], [3, 0], [3, 3], [0, 3]]}]\n"
                     "c.png\t[]\n";
    io_poly_labels l = {0};
    EXPECT_EQ_INT(io_poly_labels_parse(ok, strlen(ok), "det.txt", &l), PTQ_OK);
    EXPECT_EQ_INT(l.n_img, 3);
    io_image_polys *a = io_poly_labels_find(&l, "/data/eval/a.png"), *b = io_poly_labels_find(&l, "b.jpg");
    EXPECT(a && a->n == 2 && a->npt[0] == 4 && a->npt[1] == 5 && a->care[0] == 1 && a->care[1] == 0);
    EXPECT(a && a->xy[2] == 30 && a->xy[8 + 2 * 3 + 1] == 33 && a->line == 1);
    EXPECT(b && b->n == 1 && b->care[0] == 0 && b->xy[0] == 0.5 && b->line == 3);
    EXPECT(io_poly_labels_find(&l, "c.png") && io_poly_labels_find(&l, "d.png") == NULL);
    io_poly_labels_free(&l);
    static const char *bad[] = {
        "a.png [{\"points\": [[0, 0], [1, 0], [1, 1], [0, 1]]}]\n",                 /* no tab */
        "a.png\t[{\"points\": [[0, 0], [1, 0], [1, 1]]}]\n",                         /* 3 points */
        "a.png\t[]\nx/a.png\t[]\n",                                                  /* twice */
        "a.png\t{\"points\": []}\n",                                                 /* not a list */
        "a.png\t[{\"points\": [[0, 0], [1, 0], [1, 1], [0, 1e999]]}]\n",             /* not finite */
        "a.png\t[{\"transcription\": 5, \"points\": [[0, 0], [1, 0], [1, 1], [0, 1]]}]\n",
        "a.png\t[{\"points\": [[0, 0], [1, 0], [1, 1], [0, 1]]\n",                  /* cut */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        io_poly_labels q = {0};
        ptq_status st = io_poly_labels_parse(bad[i], strlen(bad[i]), "det.txt", &q);
        if (st == PTQ_OK) TEST_FAILF("bad label list %zu accepted", i);
        io_poly_labels_free(&q);
    }
    static const char nul[] = "a.png\t[]\nb.png\t[\0]\n";
    io_poly_labels q = {0};
    EXPECT(io_poly_labels_parse(nul, sizeof nul - 1, "det.txt", &q) != PTQ_OK);
    io_poly_labels_free(&q);
}

int main(void)
{
    RUN(db_upright_rectangle_in_the_map_and_stretched);
    RUN(db_hole_thin_line_and_faint_region_give_no_box);
    RUN(db_empty_and_full_maps);
    RUN(db_rotated_rectangle);
    RUN(detmetric_by_hand);
    RUN(label_list_read_and_refused);
    return test_summary();
}
