/* compare_seg.h: a segmenter's mIoU against the user's masks (--labels mask:DIR), internal to
 * engine/ (compare.c runs it; the metric is described in compare.h).
 *
 *   cmp_seg_truth t = {0};                          // the masks, kept with the cached images
 *   t.n_classes = 21; t.ignore = 255;
 *   TRY(cmp_seg_truth_add(&t, img, &masks, path, &meta));
 *   cmp_seg s = {0};
 *   TRY(cmp_seg_begin(&s, &t, n_sets));
 *   TRY(cmp_seg_add(&s, set, img, y0, nb, y, y_n, i, tw, th, &meta));   // per image and set
 *   TRY(cmp_seg_metrics(&s, set, fp32_set, &m));    // m.miou, m.iou[c], intervals
 *   cmp_seg_free(&s); cmp_seg_truth_free(&t);
 *
 * Output 0 is [N, C, H, W] (C > 1: the class of a pixel is the first maximum over C) or [N, 1, H, W]
 * (class 1 where > 0.5, else 0). Each pixel (x, y) of the image's own size reads the output at
 * column floor(u * W / tw), u = pad_left + (x + 0.5) * resized_w / src_w (the preprocessing's
 * geometry, pp_meta; rows alike): the nearest output pixel; pixels landing outside the tensor (a
 * centre crop's margins) and pixels of the ignore value are not counted. Per image and class the
 * intersection and the union (|label c| + |predicted c| - intersection) are kept; IoU of a class is
 * the summed intersections over the summed unions of the images, mIoU the mean over the classes
 * whose summed union is not 0 (mmseg's and torchmetrics' global mIoU). */
#ifndef PTQ_ENGINE_COMPARE_SEG_H
#define PTQ_ENGINE_COMPARE_SEG_H

#include "engine/compare.h"
#include "io/labels.h"
#include "preprocess/preprocess.h"

typedef struct {
    uint8_t **mask;     /* per evaluation image, w[i] x h[i] class indices */
    int *w, *h;
    int n_img, cap;
    int n_classes, ignore;
} cmp_seg_truth;

typedef struct {
    const cmp_seg_truth *t;
    int n_sets, cap;
    double **inter, **uni;  /* [set][image * n_classes + class] */
    int *one;               /* per set: the one class predicted so far (-2: none yet, -1: several) */
} cmp_seg;

/* The classes output 0 (y) gives: C, or 2 for [N, 1, H, W]; 0 when it is not [N, C, H, W] of nb images. */
int cmp_seg_classes(const ptq_tensor *y, int nb);
/* Reads the mask of evaluation image img (path; m: its size) into t: refused when its size differs
 * from the image's or a pixel holds a class >= t->n_classes other than the ignore value. */
ptq_status cmp_seg_truth_add(cmp_seg_truth *t, int img, const io_mask_labels *l, const char *path, const pp_meta *m);
void cmp_seg_truth_free(cmp_seg_truth *t); /* zeroes *t; NULL-safe */

ptq_status cmp_seg_begin(cmp_seg *s, const cmp_seg_truth *t, int n_sets);
/* Image i of a batch (output 0: y, y_n floats, y0 a tensor of its shape; the input tensor tw x th,
 * meta: where the image landed in it) as set s's image img. */
ptq_status cmp_seg_add(cmp_seg *s, int set, int img, const ptq_tensor *y0, int nb, const float *y, size_t y_n, int i,
                       int tw, int th, const pp_meta *meta);
/* mIoU and per-class IoU of set `set` and of set fp32 into m, with 95 % bootstrap intervals over the
 * images (compare_truth.h's draws; mIoU recomputed from each resample's sums) and that of the paired
 * difference. */
ptq_status cmp_seg_metrics(const cmp_seg *s, int set, int fp32, cmp_metrics *m);
void cmp_seg_free(cmp_seg *s); /* zeroes *s; NULL-safe */

#endif
