/* compare.h: the engine of `ptq compare` and `ptq quantize --auto-exclude`: QDQ variants
 * of a model simulated by the executor against the FP32 model on held-out images.
 *
 *   cmp_eval ev = {.g = fp32_graph, .model = "m.onnx", .o = eval_images, .cfg = cfg};
 *   ptq_graph *q = NULL;
 *   TRY(cmp_build_qdq(&ev, ranges, n, &qopt, &q, &report));   // one method's QDQ graph
 *   cmp_metrics m;
 *   TRY(cmp_evaluate(&ev, &q, 1, &m));                         // output cosine, SQNR, ...
 *   cmp_layer *layers; int nl;
 *   TRY(cmp_layers(&ev, q, &layers, &nl));                     // per quantized tensor
 *
 * Metrics are over every float output of every evaluation image together (one cosine
 * of the concatenation, not a mean of per-image values): a = FP32, b = QDQ,
 *   cosine = sum ab / sqrt(sum aa * sum bb), SQNR = 10 log10(sum aa / sum (a - b)^2),
 *   max_abs = max |a - b|; for a classifier (output 0 of shape [N, C], C > 1) top-1
 * agreement of argmax (first maximum) and, with labels, top-1 accuracy of the QDQ model.
 * Layer-wise, for each activation tensor t given a Q/DQ pair: "accumulated" compares the
 * QDQ model's dequantized t (everything before it quantized) with FP32 t, "isolated"
 * compares DQ(Q(FP32 t)) (only t quantized) with FP32 t. The FP32 and QDQ plans run in
 * lockstep (ptq_plan_step), so only tensors seen out of order are copied.
 * Graphs made by cmp_build_qdq are owned by the caller (ptq_graph_destroy). */
#ifndef PTQ_ENGINE_COMPARE_H
#define PTQ_ENGINE_COMPARE_H

#include "engine/collect.h"
#include "engine/equalize.h"
#include "io/ranges.h"
#include "preprocess/dataset.h"
#include "quant/qdq.h"
#include "runtime/graph.h"

/* The evaluation images decoded and their FP32 outputs, kept in memory up to a budget so
 * that repeated evaluations (the exclusion search) skip decoding and the FP32 run. Past
 * the budget it keeps nothing and every evaluation streams from the images again. It also
 * holds the arena pool (runtime/plan.h) of the evaluations' plans: a variant's plan reuses
 * the memory of the one before. */
typedef struct cmp_cache cmp_cache;
cmp_cache *cmp_cache_create(size_t budget_bytes);
void cmp_cache_destroy(cmp_cache *c); /* NULL-safe */
/* Frees the cached images and outputs (not the pool): later evaluations stream again. NULL-safe. */
void cmp_cache_drop(cmp_cache *c);
/* The cache's arena pool, for other plans run before the evaluations (compare's calibration
 * pass): their arenas are then the evaluations' first. */
ptq_arena_pool *cmp_cache_pool(cmp_cache *c);

/* The metric that drives decisions (the best method, the exclusion search's target);
 * every metric that applies is reported anyway. All are "higher is better".
 *   cosine, sqnr (dB): over every float output;
 *   top1: argmax agreement over output 0 of shape [N, C] (accuracy with labels);
 *   seq-top1[:axis]: argmax over `axis` (default the last) of output 0 (rank >= 3, e.g.
 *     [N, T, C] of a CTC recogniser), the share of positions where QDQ and FP32 agree;
 *   seq-chars[:axis], seq-exact[:axis]: output 0 of rank 3, [N, T, C] or [N, C, T] (C the
 *     argmax axis), read by greedy CTC (argmax per position, repeats collapsed, class 0 the
 *     blank dropped): seq-chars is 1 - the character error rate of QDQ's reading against
 *     FP32's (edit distance summed over the sequences / FP32's characters), seq-exact the
 *     share of sequences read identically. A label that moves by a position reads the same;
 *   mask-iou:T: output 0 as a map ([N, 1, H, W], e.g. a DB probability map) binarised at
 *     > T, |A and B| / |A or B| over all images (1 when both are empty);
 *   box-f1: a detector's boxes against FP32's: 2 * matched / (FP32's boxes + the QDQ model's),
 *     over all images (1 when both have none); boxes scoring >= 0.25, matched one to one in FP32's
 *     score order to the unmatched box of the same class with the highest IoU, at IoU >= 0.5.
 *     Output 0 is either final boxes ([K, 4] or [N, K, 4], x1 y1 x2 y2, with a float output of
 *     scores [K] or [N, K], as torchvision's detectors give; class-agnostic), detections [K, 6] or
 *     [N, K, 6] (x1 y1 x2 y2 score class, as YOLO exports with NMS give) or a YOLOv8-style raw
 *     head [N, 4 + classes, anchors] (cx cy w h, class scores), decoded with per-class NMS at IoU
 *     0.7 (300 boxes at most per image), recognised when anchors = the cells of strides 8, 16, 32
 *     of the input or when box-f1 is asked for;
 *   map50, map: with a detector's labels (--labels yolo:DIR or coco:FILE), COCO's mAP@0.5 and
 *     mAP@0.5:0.95 (engine/compare_truth.h) of the boxes scoring >= 0.001 (a raw head decoded as
 *     for box-f1), mapped back through the preprocessing to the image's own pixels;
 *   text-chars, text-lines: with a recogniser's labels (--labels paddle:FILE:dict=KEYS or
 *     text:DIR:dict=KEYS), 1 - the CER of the greedy CTC reading against the text, and the share
 *     of lines read exactly;
 *   miou: with a segmenter's masks (--labels mask:DIR), the mean IoU of output 0's classes
 *     (engine/compare_seg.h) in the image's own pixels;
 *   hmean: with a text detector's polygons (--labels paddledet:FILE), PaddleOCR's DetMetric hmean
 *     of the DB boxes of output 0 [N, 1, H, W] (engine/compare_det.h) in the image's own pixels. */
typedef enum {
    CMP_METRIC_COSINE = 0,
    CMP_METRIC_SQNR,
    CMP_METRIC_TOP1,
    CMP_METRIC_SEQ_TOP1,
    CMP_METRIC_MASK_IOU,
    CMP_METRIC_SEQ_CHARS,
    CMP_METRIC_SEQ_EXACT,
    CMP_METRIC_BOX_F1,
    CMP_METRIC_MAP50,
    CMP_METRIC_MAP,
    CMP_METRIC_TEXT_CHARS,
    CMP_METRIC_TEXT_LINES,
    CMP_METRIC_MIOU,
    CMP_METRIC_HMEAN
} cmp_metric_kind;
/* The metrics' spellings, for error messages. */
#define CMP_METRIC_SPELLINGS "cosine, sqnr, top1, seq-top1[:AXIS], seq-chars[:AXIS], seq-exact[:AXIS], mask-iou:T, box-f1, map50, map, text-chars, text-lines, miou, hmean"
typedef struct {
    cmp_metric_kind kind;
    int axis;          /* seq-*: the argmax axis of output 0, -1 = the last */
    float threshold;   /* mask-iou: the binarisation threshold (reported at 0.3 when not chosen) */
} cmp_metric;
/* Parses one of CMP_METRIC_SPELLINGS; 0 or -1. */
int cmp_metric_parse(const char *s, cmp_metric *out);
/* "seq-top1:2", "mask-iou:0.3", ... */
void cmp_metric_name(const cmp_metric *m, char *buf, size_t cap);

/* The FP32 model's DB boxes on each evaluation image, with a text detector's polygons
 * (--labels paddledet:FILE; engine/compare_det.h), in the images' own pixels. */
typedef struct {
    char **name;                /* the images' base names, in evaluation order */
    double **xy;                /* per image: the 4 corners (x, y) of each box, 8 values a box */
    int *n;                     /* boxes per image */
    int n_img;
} cmp_text_boxes;
void cmp_text_boxes_free(cmp_text_boxes *b); /* zeroes *b; NULL-safe */

typedef struct {
    const ptq_graph *g;         /* the FP32 model (borrowed) */
    const char *model;          /* its path: QDQ variants are loaded from it */
    pp_dataset_options o;       /* the evaluation images */
    pp_config cfg;
    const char *labels;         /* NULL, a file "image,label", "list:FILE" ("image class" lines), "folders"
                                   (one folder per class), a detector's "yolo:DIR" / "coco:FILE", a recogniser's
                                   paddle:/text:, a segmenter's "mask:DIR" or a text detector's
                                   "paddledet:FILE" (io/labels.h) */
    int nthreads;
    int quiet;
    cmp_cache *cache;           /* NULL: none (borrowed) */
    cmp_metric metric;          /* zero: cosine */
    const eng_equalization *eq; /* NULL, or applied to every model loaded again from `model` */
    int float16;                /* 1: cmp_build_qdq rounds the float part to FP16 (quant/fp16.h), as
                                   TensorRT runs it with --fp16; 0: float32 */
    cmp_text_boxes *fp32_boxes; /* NULL, or where an evaluation with a text detector's polygons leaves FP32's
                                   DB boxes when it holds none yet (borrowed) */
    int map_intervals;          /* 1: the bootstrap intervals of mAP (CMP_BOOT_MAP resamples, accumulated
                                   from one COCO matching per model); 0: NAN (the exclusion search's many
                                   evaluations) */
} cmp_eval;

enum { CMP_AP_CLASSES = 100 };

typedef struct {
    double cosine, sqnr_db, max_abs;
    double top1_agree, top1_acc; /* NAN when not a classifier / no labels */
    double seq_top1;             /* NAN unless output 0 has rank >= 3 and is not a map */
    double seq_chars, seq_exact; /* NAN unless output 0 is a sequence of rank 3 */
    double mask_iou;             /* NAN unless output 0 is a map [N, 1, H, W] */
    float mask_threshold;        /* the threshold mask_iou used */
    double box_f1;               /* NAN unless output 0 is a detector's boxes (box-f1) */
    /* With a detector's labels (--labels yolo:DIR or coco:FILE): COCO mAP (engine/compare_truth.h)
     * of this model and of the FP32 model, per class for the first CMP_AP_CLASSES classes; NAN without. */
    double map50, map, fp32_map50, fp32_map;
    /* their 95 % bootstrap intervals over the images (CMP_BOOT_MAP resamples, COCO's evaluation of
     * each, accumulated from matches made once), and those of the paired differences to FP32 */
    double map50_ci[2], map_ci[2], fp32_map50_ci[2], fp32_map_ci[2], map50_delta_ci[2], map_delta_ci[2];
    /* A classifier with labels: FP32's top-1 accuracy, the 95 % bootstrap intervals over the images
     * of top1_acc and of FP32's, and that of the paired difference; NAN without. */
    double fp32_top1_acc, top1_ci[2], fp32_top1_ci[2], top1_delta_ci[2];
    /* With a recogniser's labels (--labels paddle:FILE:dict=KEYS or text:DIR:dict=KEYS): the greedy
     * CTC reading against the text, CER (edit distance summed over the lines / the labels'
     * characters) and the share of lines read exactly, of this model and of FP32; NAN without. */
    double cer, line_acc, fp32_cer, fp32_line_acc;
    /* their 95 % percentile bootstrap intervals over the lines (compare_truth.h), and those of the
     * paired differences to FP32 (this model's minus FP32's) */
    double cer_ci[2], line_acc_ci[2], fp32_cer_ci[2], fp32_line_acc_ci[2], cer_delta_ci[2], line_acc_delta_ci[2];
    /* With a segmenter's masks (--labels mask:DIR): mIoU (engine/compare_seg.h) of this model and of
     * FP32, their 95 % bootstrap intervals over the images and that of the paired difference, and
     * the IoU of each class (NAN: in neither the masks nor the predictions); NAN without. */
    double miou, fp32_miou, miou_ci[2], fp32_miou_ci[2], miou_delta_ci[2];
    int n_iou;
    float iou[CMP_AP_CLASSES], fp32_iou[CMP_AP_CLASSES];
    /* With a text detector's polygons (--labels paddledet:FILE): DetMetric's precision, recall and
     * hmean (engine/compare_det.h) of this model and of FP32, their 95 % bootstrap intervals over
     * the images and those of the paired differences; NAN without. */
    double det_precision, det_recall, hmean, fp32_det_precision, fp32_det_recall, fp32_hmean;
    double det_precision_ci[2], det_recall_ci[2], hmean_ci[2], fp32_det_precision_ci[2], fp32_det_recall_ci[2],
        fp32_hmean_ci[2], det_precision_delta_ci[2], det_recall_delta_ci[2], hmean_delta_ci[2];
    /* "" or what collapsed in output 0 of this model where FP32's did not, on every image: "is empty
     * (nothing above 0.3)", "predicts class 3", "is all class 0", "has no box scoring >= 0.25" */
    char collapsed[96];
    int n_ap;                    /* classes in ap50/ap (0 without labels) */
    float ap50[CMP_AP_CLASSES], ap[CMP_AP_CLASSES], fp32_ap50[CMP_AP_CLASSES], fp32_ap[CMP_AP_CLASSES];
    int images;
} cmp_metrics;
/* The value of metric k in m (top1: accuracy with labels, else agreement); NAN when it
 * does not apply to the model's output. */
double cmp_metric_value(const cmp_metric *k, const cmp_metrics *m);

typedef struct {
    char *tensor;               /* the quantized activation */
    char *node;                 /* its first quantized consumer */
    const char *op_type;        /* that consumer's op type (borrowed from the graph) */
    double acc_sqnr_db, acc_cosine, iso_sqnr_db, iso_cosine;
    float amax;
} cmp_layer;

/* Loads ev->model again, applies ev->eq, upgrades it to opset 13 and inserts Q/DQ with these
 * ranges and the options' exclusions (range/range_user of qopt are replaced); with ev->float16,
 * the float part is then rounded to FP16 (quant_fp16_simulate). */
ptq_status cmp_build_qdq(const cmp_eval *ev, const io_range *ranges, int n, const quant_options *qopt, ptq_graph **out,
                         quant_report *report);
/* Greedy CTC reading of one sequence: x[t * t_stride + c * c_stride], t < T, c < C; the argmax
 * class at every position (the first of equal maxima), repeats collapsed, `blank` dropped.
 * Writes the labels to out (room for T) and returns their number. */
int64_t cmp_ctc_greedy(const float *x, int64_t T, int64_t C, int64_t t_stride, int64_t c_stride, int blank, int *out);
/* Levenshtein distance of a[0..na) and b[0..nb); row has room for nb + 1 ints. */
int64_t cmp_edit_distance(const int *a, int64_t na, const int *b, int64_t nb, int64_t *row);

/* One pass over the evaluation images: FP32 once, each of the n QDQ graphs after it. A NULL qdq[k]
 * is ev->g itself (compare --as-is without a base): its figures are FP32's, from the one run. */
ptq_status cmp_evaluate(const cmp_eval *ev, ptq_graph *const *qdq, int n, cmp_metrics *out);
/* cmp_evaluate of one QDQ graph made elsewhere (not by cmp_build_qdq): with ev->float16, of a copy
 * whose float part is rounded to FP16; qdq is unchanged. */
ptq_status cmp_evaluate_graph(const cmp_eval *ev, const ptq_graph *qdq, cmp_metrics *out);
/* Layer-wise errors of one QDQ graph, in FP32 execution order; free with cmp_layers_free. */
ptq_status cmp_layers(const cmp_eval *ev, const ptq_graph *qdq, cmp_layer **out, int *n);
void cmp_layers_free(cmp_layer *l, int n);
/* order[0..n): the layers, worst isolated SQNR first (ties in execution order). */
void cmp_layers_by_harm(const cmp_layer *layers, int n, const cmp_layer **order);

/* A quality target: output cosine >= cosine, and/or a top-1 drop (accuracy with labels,
 * else agreement with FP32, whose own value is fp32_top1: 1 for agreement) <= top1_drop,
 * and/or the chosen metric (cmp_eval.metric) >= metric, and/or that metric at most `drop` below
 * FP32's own value of it (map50, map: FP32's mAP against the labels, measured in the same pass;
 * top1: fp32_top1; the metrics of agreement with FP32: 1; not sqnr). NAN leaves a criterion out. */
typedef struct {
    double cosine, top1_drop, fp32_top1, metric;
    cmp_metric kind; /* the metric of `metric` and `drop` */
    double drop;
} cmp_target;
/* FP32's own value of t->kind for the drop criterion (m: any evaluation of the same images);
 * NAN for sqnr. */
double cmp_target_fp32(const cmp_target *t, const cmp_metrics *m);
int cmp_meets(const cmp_target *t, const cmp_metrics *m);
/* Sets t->fp32_top1: the FP32 model's top-1 accuracy with labels (one evaluation pass),
 * else 1 (FP32 agrees with itself). */
ptq_status cmp_target_baseline(const cmp_eval *ev, cmp_target *t);
/* --labels FILE against the evaluation images before any work: one-line errors naming the file
 * and line (a label without an image name, an empty or non-integer label, an image labelled
 * twice, a label naming no evaluation image unless limited) or the image without a label.
 * "folders": every image must sit in a class folder. */
ptq_status cmp_labels_check(const char *labels, const char *eval_images, int limited);
/* The file or folder --labels names (the part after list:, yolo: or coco:), NULL for NULL, "folders"
 * or a recogniser's paddle:/text: labels (their files are checked when read). */
const char *cmp_labels_path(const char *labels);

typedef struct {
    char **nodes;               /* nodes to keep in float, owned */
    int n_nodes;
    cmp_metrics reached;        /* the metrics with them excluded */
    int evaluations;            /* evaluation passes the search took */
} cmp_exclusion;

/* Sensitivity search (accuracy-algorithms.md): for each quantized tensor of gq (layers:
 * cmp_layers of gq, made from these ranges and options), evaluation passes measure the
 * chosen metric (ev->metric) with only that tensor in float (all_but) and, where its gain ties
 * another's, with only it quantized (only); tensors are ranked by all_but - all (the gain from
 * leaving it in float), ties by only, then returned to float (their consumer nodes excluded) in that order: the
 * smallest prefix meeting the target is found by doubling then bisection, then each chosen
 * tensor is tried quantized again, least harmful first, and stays quantized when the target
 * still holds. Every evaluation sends a point of the curve metric(tensors in float) to ev->o.log. Fails
 * (PTQ_ERR_ARG) when even all of them in float miss the target. */
ptq_status cmp_auto_exclude(const cmp_eval *ev, const io_range *ranges, int n_ranges, const quant_options *qopt,
                            const ptq_graph *gq, const cmp_layer *layers, int n_layers, const cmp_target *t,
                            cmp_exclusion *out);
void cmp_exclusion_free(cmp_exclusion *x);
/* "--layerPrecisions=a:fp16,b:fp16" for trtexec (malloc'd; NULL when out of memory). */
char *cmp_layer_precisions(const cmp_exclusion *x);

/* ---- `ptq compare` as steps (engine/compare_run.c) ----
 *
 *   eng_compare_job job = eng_compare_job_defaults();   // model, g, src, eval_images, methods...
 *   eng_compare_result res = {0};
 *   TRY(eng_compare_calibrate(&job, &res));   // one calibration pass
 *   TRY(eng_compare_build(&job, &res));       // every method's QDQ model
 *                                             // (or eng_compare_as_is instead of both: the model as given)
 *   TRY(eng_compare_evaluate(&job, &res));    // their metrics, the best method
 *   TRY(eng_compare_refinements(&job, &res)); // the best with bias correction / AdaRound / equalization (rows)
 *   TRY(eng_compare_layers(&job, &res));      // layer-wise errors of one method
 *   TRY(eng_compare_exclusion(&job, &res));   // with a target: the nodes to keep in float
 *   TRY(eng_compare_write(&job, &res, excl_file, json, html));
 *   eng_compare_result_free(&res);
 */

enum { ENG_COMPARE_MAX_METHODS = CALIB_MAX_METHODS, ENG_COMPARE_MAX_ROWS = 4 };

typedef struct {
    const char *model;          /* the FP32 model's path (QDQ variants are loaded from it) */
    const ptq_graph *g;         /* that model, loaded (borrowed) */
    eng_calib_source *src;      /* calibration images (src->cfg set); src->images etc. filled */
    pp_config eval_cfg;         /* the evaluation images' preprocessing (usually src->cfg) */
    const char *eval_images, *labels, *preset; /* preset: only named in the report */
    int eval_limit;             /* 0: all */
    calib_method methods[ENG_COMPARE_MAX_METHODS];
    int n_methods;
    cmp_metric metric;          /* what picks the best method and what target.metric means */
    int metric_given;           /* 0: top1 for classifiers, else cosine */
    int layers_method;          /* index in methods of the layer-wise table, -1: the best */
    quant_options qo;           /* exclusions applied to every method */
    int refine_bc, refine_ada, refine_images; /* rows of the best method refined (0, 0, 32) */
    int refine_eq;              /* a row of the best method on the equalized model (equalize.h; its own calibration pass) */
    cmp_target target;          /* all NAN: no exclusion search */
    int float16;                /* the float part of every QDQ model simulated in FP16 (1, the default) or FP32 */
    int as_is;                  /* the result is eng_compare_as_is's (the report says so) */
    pp_log log;
} eng_compare_job;

typedef struct {
    char name[160];             /* "entropy + AdaRound" */
    cmp_metrics m;
    int images;                 /* refinement images */
    double seconds;
} eng_compare_row;

typedef struct {
    eng_collector col;
    cmp_cache *cache;
    cmp_eval ev;                /* the evaluation (images, cache, metric) */
    int n_methods;
    char tags[ENG_COMPARE_MAX_METHODS][64];
    io_range *ranges[ENG_COMPARE_MAX_METHODS];
    ptq_graph *variants[ENG_COMPARE_MAX_METHODS];
    cmp_metrics metrics[ENG_COMPARE_MAX_METHODS];
    int best, classifier, labelled, seq, map, boxes;
    cmp_metric metric;          /* the job's, or top1 for a classifier when not given */
    char metric_name[64], criterion[96];
    eng_compare_row rows[ENG_COMPARE_MAX_ROWS];
    int n_rows;
    int layers_m;
    cmp_layer *layers;          /* execution order */
    int n_layers;
    const cmp_layer **order;    /* worst isolated SQNR first */
    int want_target, target_met; /* target_met: with every layer quantized */
    cmp_target target;
    cmp_exclusion excl;
    char *trt_arg;              /* "--layerPrecisions=..." */
    cmp_text_boxes text_boxes;  /* with a text detector's polygons: FP32's DB boxes (for the JSON report) */
} eng_compare_result;

eng_compare_job eng_compare_job_defaults(void);
ptq_status eng_compare_calibrate(const eng_compare_job *job, eng_compare_result *res);
ptq_status eng_compare_build(const eng_compare_job *job, eng_compare_result *res);
/* Instead of eng_compare_calibrate and eng_compare_build (compare --as-is): no calibration and no
 * QDQ model; one row, "as-is", the model job->model as given (a QDQ model runs its own Q/DQ), its
 * float part in FP32, measured against base (base_path, loaded by the caller) when not NULL, else
 * against itself (job->g): the row's figures and FP32's are then the model's own. */
ptq_status eng_compare_as_is(const eng_compare_job *job, const ptq_graph *base, const char *base_path,
                             eng_compare_result *res);
ptq_status eng_compare_evaluate(const eng_compare_job *job, eng_compare_result *res);
ptq_status eng_compare_refinements(const eng_compare_job *job, eng_compare_result *res);
ptq_status eng_compare_layers(const eng_compare_job *job, eng_compare_result *res);
ptq_status eng_compare_exclusion(const eng_compare_job *job, eng_compare_result *res);
/* The exclusion file (one node per line), the JSON and the HTML report; NULL paths are skipped. */
ptq_status eng_compare_write(const eng_compare_job *job, const eng_compare_result *res, const char *exclusions,
                             const char *json, const char *html);
void eng_compare_result_free(eng_compare_result *res);

#endif
