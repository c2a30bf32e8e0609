/* compare_det.h: a text detector against its polygon labels (--labels paddledet:FILE), internal
 * to engine/ (compare.c runs it): PaddleOCR's DB post-processing of a probability map and its
 * DetMetric (precision, recall, hmean).
 *
 *   cmp_tdet_truth t = {0};                           // the polygons, kept with the cached images
 *   TRY(cmp_tdet_truth_add(&t, img, polys));          // per evaluation image (NULL: none)
 *   cmp_tdet d = {0};
 *   TRY(cmp_tdet_begin(&d, &t, n_sets));
 *   TRY(cmp_tdet_add(&d, set, img, y0, nb, y, y_n, i, tw, th, &meta));   // per image and set
 *   TRY(cmp_tdet_metrics(&d, set, fp32_set, &m));     // m.hmean, m.det_precision, ..., intervals
 *   cmp_tdet_free(&d); cmp_tdet_truth_free(&t);
 *
 * DB (PaddleOCR's DBPostProcess, score_mode 'fast', thresh 0.3, box_thresh 0.6, unclip_ratio 1.5,
 * max_candidates 1000, min size 3; engine/compare_db.c): output 0 is [N, 1, H, W]; pixels > 0.3
 * are text; the borders of the text regions are traced as cv2.findContours does (Suzuki-Abe,
 * RETR_LIST: outer and hole borders, listed last found first, at most 1000); each border's
 * minimum-area box as cv2.minAreaRect and cv2.boxPoints compute it (OpenCV 4.6: the hull
 * counterclockwise, the rotating calipers in float32), skipped when its short side is < 3; its
 * score is the mean of the map over cv2.fillPoly's pixels of the box (corners truncated to
 * integers), skipped when < 0.6; the box is grown by area * 1.5 / perimeter with pyclipper's round
 * offset (Clipper 6.4, arc tolerance 0.25, corners truncated to integers) and the minimum-area box
 * of that taken, skipped when its short side is < 5; its corners mapped back through the
 * preprocessing's geometry (pp_meta; for a stretch x / W * width in float32, as numpy computes it)
 * to the image's own pixels, rounded half to even and clipped to [0, width] x [0, height]. The
 * boxes equal PaddleOCR's (tests/oracle/ocr_pipeline.py's boxes_from_bitmap on OpenCV 4.6 and
 * pyclipper) pixel for pixel.
 *
 * DetMetric (precision, recall, hmean).
 *
 *   cmp_tdet_truth t = {0};                           // the polygons, kept with the cached images
 *   TRY(cmp_tdet_truth_add(&t, img, polys));          // per evaluation image (NULL: none)
 *   cmp_tdet d = {0};
 *   TRY(cmp_tdet_begin(&d, &t, n_sets));
 *   TRY(cmp_tdet_add(&d, set, img, y0, nb, y, y_n, i, tw, th, &meta));   // per image and set
 *   TRY(cmp_tdet_metrics(&d, set, fp32_set, &m));     // m.hmean, m.det_precision, ..., intervals
 *   cmp_tdet_free(&d); cmp_tdet_truth_free(&t);
 *
 * DB (PaddleOCR's DBPostProcess, score_mode 'fast', as tests/oracle/ocr_pipeline.py ports it):
 * output 0 is [N, 1, H, W]; pixels > 0.3 are text; the borders of the text regions are traced as
 * cv2.findContours does (Suzuki-Abe, RETR_LIST: outer borders and hole borders, listed last found
 * first, at most 1000); each border's minimum-area rectangle (the convex hull's narrowest box),
 * skipped when its short side is < 3; its score is the mean of the map over the rectangle's pixels
 * (corners truncated to integers, pixels inside or on it), skipped when < 0.6; it is grown by
 * area * 1.5 / perimeter on every side (the minimum-area box of pyclipper's round offset, as the
 * oracle's documented fallback computes it; pyclipper rounds the offset's corners to integers),
 * skipped when its short side is < 5; corners mapped back through the preprocessing's geometry
 * (pp_meta) to the image's own pixels, rounded half to even and clipped to [0, width] x [0, height].
 *
 * DetMetric (PaddleOCR's DetectionIoUEvaluator): per image, polygons that are not simple (zero
 * area, or two edges crossing) are dropped; a box covering more than half of its own area with a
 * don't-care polygon is not counted; the other boxes and polygons are matched one to one, polygon
 * by polygon and box by box in order, the first unmatched pair with IoU > 0.5. Summed over the
 * images: precision = matched / boxes counted, recall = matched / polygons counted (0 when none),
 * hmean = 2 P R / (P + R) (0 when both are 0). */
#ifndef PTQ_ENGINE_COMPARE_DET_H
#define PTQ_ENGINE_COMPARE_DET_H

#include "engine/compare.h"
#include "io/labels.h"
#include "preprocess/preprocess.h"

typedef struct {
    io_image_polys *img; /* per evaluation image: copies of its name and polygons (n = 0: none) */
    int n_img, cap;
    int not_simple;      /* polygons DetMetric drops (zero area, edges crossing) */
    int first_line, first_poly; /* the first of them: its line in the labels, its index there */
} cmp_tdet_truth;

typedef struct {
    const cmp_tdet_truth *t;
    int n_sets, cap;
    double **matched, **det_care; /* [set][image] */
    double *gt_care;              /* [image] */
    int *any;                     /* per set: 1 when a box was found on some image */
    double **fxy;                 /* [image]: the last set's (FP32's) boxes, 8 values a box */
    int *fn;                      /* [image]: their number */
} cmp_tdet;

/* A DB box: 4 corners in the image's pixels. */
typedef struct {
    double x[4], y[4];
} cmp_tdet_box;

/* 1 when output 0 (y) is a one-channel map [nb, 1, H, W]. */
int cmp_tdet_is_map(const ptq_tensor *y, int nb);
/* DB on a H x W map: the boxes in the map's pixels mapped by meta (NULL: left in the map's pixels)
 * from a tw x th tensor; *out malloc'd (NULL when none), *n of them. */
ptq_status cmp_db_boxes(const float *map, int W, int H, int tw, int th, const pp_meta *meta, cmp_tdet_box **out, int *n);
/* DetMetric of one image: boxes against polygons; *gt_care, *det_care, *matched as described above. */
ptq_status cmp_tdet_match(const io_image_polys *gt, const cmp_tdet_box *dt, int n_dt, int *gt_care, int *det_care,
                         int *matched);

/* Copies the polygons p of evaluation image img (NULL: none) into t, counting those that are not simple. */
ptq_status cmp_tdet_truth_add(cmp_tdet_truth *t, int img, const io_image_polys *p);
void cmp_tdet_truth_free(cmp_tdet_truth *t); /* zeroes *t; NULL-safe */

ptq_status cmp_tdet_begin(cmp_tdet *d, const cmp_tdet_truth *t, int n_sets);
/* Image i of a batch (output 0: y, y_n floats, y0 a tensor of its shape; the input tensor tw x th,
 * meta: where the image landed in it) as set s's image img. */
ptq_status cmp_tdet_add(cmp_tdet *d, int set, int img, const ptq_tensor *y0, int nb, const float *y, size_t y_n, int i,
                       int tw, int th, const pp_meta *meta);
/* Precision, recall and hmean of set `set` and of set fp32 into m, with 95 % bootstrap intervals
 * over the images (compare_truth.h's draws) and those of the paired differences. */
ptq_status cmp_tdet_metrics(const cmp_tdet *d, int set, int fp32, cmp_metrics *m);
void cmp_tdet_free(cmp_tdet *d); /* zeroes *d; NULL-safe */
/* The last set's (FP32's) boxes with the images' names into out (emptied first). */
ptq_status cmp_tdet_boxes_of(const cmp_tdet *d, cmp_text_boxes *out);

#endif
