/* compare_truth.h: metrics against the user's own labels (engine/compare_truth.c): a detector's
 * mAP as COCO's evaluation (pycocotools COCOeval, bbox) computes it, and percentile bootstrap
 * intervals of ratios over images (a recogniser's CER and exact lines).
 *
 *   cmp_map_result r;
 *   TRY(cmp_coco_map(gt, n_gt, dt, n_dt, n_images, n_classes, &r));  // r.map50, r.map, r.ap[k]
 *   cmp_map_result_free(&r);
 *
 * COCOeval, area range "all", 100 detections per image and category: per category, each image's
 * detections by score (stable) are matched greedily at each IoU threshold 0.50:0.05:0.95 to the
 * best unmatched ground truth box (crowd boxes match many times and count as ignored; a crowd
 * box's IoU is the intersection over the detection's area); detections of all images sorted by
 * score (stable, images in the given order), precision made monotone from the right, read at 101
 * recall thresholds (0:0.01:1, the first recall >= each); AP = their mean; mAP = the mean over the
 * categories with a ground truth box that is not a crowd box. */
#ifndef PTQ_ENGINE_COMPARE_TRUTH_H
#define PTQ_ENGINE_COMPARE_TRUTH_H

#include "runtime/status.h"

typedef struct {
    double x, y, w, h;  /* pixels: top-left corner and size */
    double score;
    int cls;
} cmp_det;

typedef struct {
    double x, y, w, h;  /* pixels: top-left corner and size */
    double area;        /* COCO's annotation area (decides the area range; "all" keeps 0..1e10) */
    int cls, crowd;
} cmp_gt;

enum { CMP_MAP_IOUS = 10, CMP_MAP_RECALLS = 101, CMP_MAP_MAX_DETS = 100 };

typedef struct {
    double map50, map;  /* mAP@0.5, mAP@0.5:0.95; NAN when no category has a ground truth box */
    int n_classes;
    double *ap50, *ap;  /* per category; NAN for a category without a (non-crowd) ground truth box */
} cmp_map_result;

/* COCO mAP of the detections dt[i][0..n_dt[i]) against gt[i][0..n_gt[i]) over n_images images;
 * classes 0..n_classes-1 (a box of another class is not counted). out's arrays are malloc'd. */
ptq_status cmp_coco_map(const cmp_gt *const *gt, const int *n_gt, const cmp_det *const *dt, const int *n_dt,
                        int n_images, int n_classes, cmp_map_result *out);
void cmp_map_result_free(cmp_map_result *r); /* NULL-safe */

/* mAP of resamples of the images without matching again: COCO's evaluation matches per image and
 * category, so cmp_map_prepare matches every image once (each category's detections sorted as
 * cmp_coco_map sorts them, with their matches at every threshold and the images' counts of ground
 * truth boxes), and cmp_map_resample only accumulates: the images idx[0..n) (an image drawn k times
 * counts k times, each copy where it was drawn, as cmp_coco_map of those images in that order),
 * map50 and map equal to cmp_coco_map's bit for bit (NAN when no category has a ground truth box).
 * cmp_map_resample is thread-safe; it returns 0, or -1 when out of memory. */
typedef struct cmp_map_prep cmp_map_prep;
ptq_status cmp_map_prepare(const cmp_gt *const *gt, const int *n_gt, const cmp_det *const *dt, const int *n_dt,
                           int n_images, int n_classes, cmp_map_prep **out);
int cmp_map_resample(const cmp_map_prep *p, const int *idx, int n, double *map50, double *map);
void cmp_map_prep_free(cmp_map_prep *p); /* NULL-safe */

/* Percentile bootstrap over images (tests/oracle/bootstrap.py): CMP_BOOT resamples of the n images
 * with replacement, drawn as numpy's RandomState(CMP_BOOT_SEED).randint(0, n, (CMP_BOOT, n))
 * (MT19937, masked rejection), the ratio sum(num) / sum(den) of each, and the 2.5th and 97.5th
 * percentiles (linear interpolation). With num_a, the interval of the paired difference
 * num / den - num_a / den under the same draws. */
enum { CMP_BOOT = 1000, CMP_BOOT_SEED = 1 };
ptq_status cmp_bootstrap_ratio(const double *num, const double *num_a, const double *den, int n, double *lo, double *hi);
/* The same percentile bootstrap of k statistics of the images at once: `boot` resamples drawn as
 * above (the first `boot` rows of CMP_BOOT's), stat(idx, n, user, v) writes the k values of each
 * (idx: the n images drawn) and returns 0, or -1 when out of memory; the resamples are evaluated
 * in parallel (OpenMP; stat must be thread-safe), the result is the same at any thread count.
 * lo[j], hi[j]: statistic j's interval, its NAN values left out (NAN when none is left).
 * CMP_BOOT_MAP: the resamples of a detector's mAP (cmp_map_resample of each, from one cmp_map_prepare). */
enum { CMP_BOOT_MAP = CMP_BOOT };
ptq_status cmp_bootstrap_stats(int n, int boot, int k, int (*stat)(const int *idx, int n, void *user, double *v), void *user,
                               double *lo, double *hi);

#endif
