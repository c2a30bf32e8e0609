/* compare_metrics.h: the output metrics of `ptq compare` (engine/compare_metrics.c), shared by
 * the evaluation (compare.c) and the layer-wise errors and exclusion search (compare_exclude.c);
 * internal to engine/. The metrics themselves are described in compare.h.
 *
 *   cmp_acc a = {0};
 *   cmp_sums_add_images(&a.s, fp32, qdq, n, images);   // per batch, per output
 *   cmp_metrics_of(&a, kind, labelled, images, threshold, &m);
 */
#ifndef PTQ_ENGINE_COMPARE_METRICS_H
#define PTQ_ENGINE_COMPARE_METRICS_H

#include "engine/compare.h"
#include "engine/compare_truth.h"
#include "preprocess/preprocess.h"
#include "runtime/plan.h"

/* Sums that make cosine and SQNR of b against a: sum ab, aa, bb, (a - b)^2, and max |a - b|. */
typedef struct {
    double ab, aa, bb, dd, max_abs;
    double n; /* elements compared: none (every output of data-dependent size differed) makes the sums' metrics NaN */
} cmp_sums;

typedef struct {
    cmp_sums s;
    long agree, rows, correct, labelled;
    long seq_agree, seq_positions;   /* seq-top1 */
    long ctc_seqs, ctc_same;         /* seq-exact */
    long ctc_chars, ctc_edits;       /* seq-chars */
    long mask_and, mask_or;          /* mask-iou */
    long box_match, box_fp, box_q;   /* box-f1: matched boxes, FP32's and the QDQ model's */
    long ocr_edits, ocr_chars, ocr_lines, ocr_exact; /* against a recogniser's labels */
    long mask_fp_on, mask_q_on;      /* mask-iou: pixels above the threshold in FP32's and the QDQ model's maps */
    int cls_seen, cls_fp0, cls_q0, cls_fp_many, cls_q_many; /* a classifier: its first classes, whether others followed */
} cmp_acc;

/* What output 0 is, from its shape: which of top1, seq-top1, mask-iou and box-f1 apply. */
enum { CMP_OUT_OTHER = 0, CMP_OUT_CLASSIFIER, CMP_OUT_SEQUENCE, CMP_OUT_MAP, CMP_OUT_BOXES, CMP_OUT_YOLO, CMP_OUT_DETECTIONS };

/* The lanes of cmp_sums_add_lanes. */
#define CMP_LANES 8

void cmp_sums_add(cmp_sums *m, const float *a, const float *b, size_t n);
/* cmp_sums_add of each image's n / images elements in turn (when they divide n): the sums of a
 * batch-first tensor are then the same at any batch size. */
void cmp_sums_add_images(cmp_sums *m, const float *a, const float *b, size_t n, int images);
/* The float output holding the scores of final boxes y ([K, 4] or [N, K, 4]): the first one other
 * than output 0 whose shape is y's without its last dim; -1 when there is none. */
int cmp_box_scores_output(const ptq_plan *p, const ptq_tensor *y);
int cmp_output_kind(const ptq_plan *p, const ptq_tensor *x, int64_t batch, const cmp_metric *m);
/* The threshold mask-iou uses: the chosen metric's, else DB's usual 0.3. */
float cmp_mask_threshold(const cmp_metric *m);
double cmp_cosine_of(const cmp_sums *m);
double cmp_sqnr_of(const cmp_sums *m);
int cmp_argmax(const float *x, int64_t n);
void cmp_metrics_of(const cmp_acc *m, int kind, int labelled, int images, float threshold, cmp_metrics *out);
/* seq-top1 of one output of rank > 3: argmax over `axis` at every other index, FP32 a against QDQ b. */
void cmp_seq_add(cmp_acc *m, const ptq_tensor *y, int axis, const float *a, const float *b);
/* seq-top1, seq-chars and seq-exact of one rank-3 output (C on `axis`, T on the other non-batch
 * axis), from one argmax per position: the positions' agreement, then every sequence read by
 * greedy CTC (blank 0) in FP32 a and QDQ b. */
ptq_status cmp_seq3_add(cmp_acc *m, const ptq_tensor *y, int axis, const float *a, const float *b);
/* mask-iou of one map: pixels > t in FP32 a and in QDQ b. */
void cmp_mask_add(cmp_acc *m, const float *a, const float *b, size_t n, float t);
/* box-f1 of one batch: FP32's output 0 fp (fp_n floats) and scores (fs, CMP_OUT_BOXES) against the QDQ
 * model's plan outputs. */
ptq_status cmp_box_add(cmp_acc *m, int kind, const ptq_plan *p, int nb, const float *fp, size_t fp_n, const float *fs);

/* The score from which a detection counts for mAP (Ultralytics' validation: conf 0.001). */
#define CMP_TRUTH_CONF 0.001f
/* The detections of image i (of nb) for mAP, in the image's own pixels: output 0 of kind
 * CMP_OUT_YOLO (decoded as box-f1 does, from CMP_TRUTH_CONF) or CMP_OUT_DETECTIONS (rows scoring
 * >= CMP_TRUTH_CONF), y its y_n floats (y0: a tensor of its shape), mapped back through the
 * preprocessing (cfg, tensor tw x th, meta: the image's). *out malloc'd (none when y_n does not fit). */
ptq_status cmp_image_dets(int kind, const ptq_tensor *y0, int nb, const float *y, size_t y_n, int i, const pp_config *cfg,
                          int tw, int th, const pp_meta *meta, cmp_det **out, int *n_out);

#endif
