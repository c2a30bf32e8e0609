/* report.h: the report of `ptq compare` as pretty JSON and as one self-contained HTML file
 * (inline CSS and inline SVG charts drawn here; no script, no external asset, no network).
 *
 *   io_report_method m[] = {{"max", 0.991, 21.3, 0.41, NAN, NAN, NAN, NAN, 0}, {"entropy", 0.996, 24.8, 0.52, NAN, NAN, NAN, NAN, 0}};
 *   io_report r = {.model = "det.onnx", .preset = "paddleocr-det", .n_methods = 2, .methods = m,
 *                  .best_method = "entropy", .criterion = "cosine", ...};
 *   TRY(io_report_write_json("cmp.json", &r));
 *   TRY(io_report_write_html("cmp.html", &r));
 *
 * Everything in an io_report is plain data borrowed from the caller, read during the call only;
 * the writers keep nothing. Any string may be NULL (written as null in JSON, "–" in HTML) and any
 * double may be NaN for "not applicable" (null in JSON, "–" in HTML); ±Inf (an exact SQNR) is
 * also null in JSON (JSON has no Inf) and "∞" in HTML. A count of 0 with a NULL array is valid.
 * Both files are written to a temporary file and renamed (io/file.h): never left half-written.
 *
 * JSON layout ("format": "ptq-compare", "version": 1; keys in this order):
 *   model, preset, calib_images, n_calib, eval_images, n_eval, criterion, best_method, float_part,
 *   as_is (true: methods[0], "as-is", is the model as given; fp32 the figures of base, or the model's own
 *   when base is null), base,
 *   methods: [{method, cosine, sqnr_db, max_abs, top1_agree, top1_acc, seq_top1, seq_chars, seq_exact, mask_iou,
 *              mask_threshold, box_f1}],
 *   refinements: [the same keys; method names the best method and its refinement, "mse + AdaRound"],
 *   layers_method, layers: [{index, tensor, node, op_type, acc_sqnr_db, acc_cosine, iso_sqnr_db, iso_cosine}]
 *     (execution order; index counts from 0),
 *   histograms: [{tensor, amax, bins: [...], thresholds: [{method, amax}]}],
 *   exclusion: {target, reached, nodes: [...], trtexec_arg, ptq_args} or null, where ptq_args is
 *     the `ptq quantize` option that excludes the same nodes: "--exclude-nodes 'a,b'" (shell-quoted,
 *     glob characters escaped), or "--exclude-nodes @excluded-nodes.txt" when a name holds a ','
 *     (the HTML then shows that file's lines); null when no node is excluded.
 *
 * HTML: summary; methods table (best row class "best"; the refinement rows after the methods,
 * class "refined"; top-1 columns only when some method has them); layer-wise SQNR chart (<svg class="chart layer-sqnr">, absent without layers: one
 * <polyline class="acc|iso"> per run of non-NaN values, one <circle> with a <title> naming the
 * tensor per point, ±Inf pinned to the axis ends); layers table, worst isolated SQNR first (NaN
 * last, excluded nodes marked); one <svg class="chart hist"> per histogram (log-count bars, at most
 * 240, adjacent bins summed; one labelled <line class="threshold"> per non-NaN threshold, in the
 * method's colour of the methods table, pinned at the right edge with "→" when beyond amax);
 * the exclusion section. Every string is HTML-escaped. */
#ifndef PTQ_IO_REPORT_H
#define PTQ_IO_REPORT_H

#include "runtime/status.h"

/* One calibration method evaluated end to end on the held-out images (model outputs vs FP32). */
typedef struct {
    const char *method;   /* "max", "entropy", "percentile-99.99", "mse", ... */
    double cosine;        /* cosine similarity of the outputs, quantized vs FP32, in [-1, 1] */
    double sqnr_db;       /* 10 log10(sum fp32^2 / sum (fp32 - quantized)^2), dB */
    double max_abs;       /* largest |fp32 - quantized| over all outputs */
    double top1_agree;    /* fraction in [0, 1] of images whose top-1 class equals FP32's; NaN if n/a */
    double top1_acc;      /* top-1 accuracy in [0, 1] against labels; NaN if there are no labels */
    double seq_top1;      /* share of sequence positions whose argmax equals FP32's; NaN if n/a */
    double seq_chars;     /* 1 - CER of the greedy CTC reading against FP32's; NaN if n/a */
    double seq_exact;     /* share of sequences read identically by greedy CTC; NaN if n/a */
    double mask_iou;      /* IoU of the binarised output map against FP32's; NaN if n/a */
    double mask_threshold;
    double box_f1;        /* a detector's boxes against FP32's (compare.h: box-f1); NaN if n/a */
} io_report_method;

/* A model against the user's labels (compare --labels yolo:|coco:|paddle:|text:|mask:|paddledet:); NaN: n/a. */
typedef struct {
    double map50, map;    /* a detector: COCO mAP@0.5 and mAP@0.5:0.95 */
    int n_ap;
    const float *ap50, *ap; /* per class (n_ap each; NaN: the class has no ground truth box) */
    double cer, line_acc; /* a recogniser: character error rate, share of lines read exactly */
    double cer_ci[2], line_acc_ci[2];             /* their 95 % bootstrap intervals */
    double cer_delta_ci[2], line_acc_delta_ci[2]; /* of the difference to FP32 (NaN for FP32 itself) */
    double miou, miou_ci[2], miou_delta_ci[2];    /* a segmenter: mIoU, its interval, the difference's */
    double map50_ci[2], map_ci[2], map50_delta_ci[2], map_delta_ci[2]; /* a detector's intervals (NaN: none) */
    int has_top1;         /* 1: a classifier with labels (the fields above unused) */
    double top1_acc, top1_ci[2], top1_delta_ci[2];
    int has_hmean;        /* 1: a text detector against polygons (DetMetric; the fields above unused) */
    int n_box_img;        /* FP32's row of a text detector: its DB boxes per image (0: none written) */
    const char *const *box_img;   /* the images' names */
    const double *const *box_xy;  /* 8 values (4 corners x, y) a box */
    const int *box_n;             /* boxes per image */
    double hmean, det_precision, det_recall;
    double hmean_ci[2], det_precision_ci[2], det_recall_ci[2];                   /* their intervals */
    double hmean_delta_ci[2], det_precision_delta_ci[2], det_recall_delta_ci[2]; /* the differences' (NaN: FP32) */
    int n_iou;            /* > 0: a segmenter (the fields above unused) */
    const float *iou;     /* per class (n_iou; NaN: the class is in neither the masks nor the predictions) */
} io_report_truth;

/* One quantized tensor, for the method named by io_report.layers_method. */
typedef struct {
    const char *tensor;   /* output tensor name */
    const char *node;     /* producing node's name */
    const char *op_type;  /* producing node's op type ("Conv") */
    double acc_sqnr_db;   /* accumulated: every layer so far quantized, this tensor vs FP32, dB */
    double acc_cosine;    /* accumulated, cosine */
    double iso_sqnr_db;   /* isolated: only this layer quantized (FP32 inputs), dB */
    double iso_cosine;    /* isolated, cosine */
} io_report_layer;

/* The histogram of |x| of one tensor, with the amax each method chose for it. */
typedef struct {
    const char *tensor;
    double amax;                          /* the histogram covers [0, amax] (largest |x| seen), > 0 */
    int n_bins;                           /* equal-width bins over [0, amax] */
    const double *bins;                   /* n_bins counts (any non-negative scale; NaN drawn as 0) */
    int n_thresholds;
    const char *const *threshold_methods; /* n_thresholds method names */
    const double *thresholds;             /* n_thresholds amax values, same order */
} io_report_hist;

/* Nodes to leave in float so a target is reached (the result of the exclusion search). */
typedef struct {
    const char *target;                /* e.g. "cosine >= 0.98" */
    double reached;                    /* the metric reached with these nodes excluded */
    int n_excluded;
    const char *const *excluded_nodes; /* n_excluded node names, in the order they were excluded */
    const char *trtexec_arg;           /* "--layerPrecisions=a:fp32,b:fp32" alone (shown verbatim; the page
                                        * adds the --precisionConstraints=obey it needs); NULL: none */
} io_report_exclusion;

/* The whole report. Arrays hold n_* elements each. */
typedef struct {
    const char *model;            /* model path or name */
    const char *preset;           /* preprocessing preset */
    const char *calib_images;     /* calibration image folder (or list) */
    const char *eval_images;      /* held-out evaluation image folder */
    int n_calib, n_eval;          /* image counts actually used */
    const char *criterion;        /* what best_method was chosen on, e.g. "cosine" */
    const char *best_method;      /* one of methods[].method (highlighted), or NULL */
    const char *float_part;       /* how the layers left in float were evaluated: "fp16" or "fp32" */
    int as_is;                    /* compare --as-is: methods[0] is the model as given, not calibrated */
    const char *base;             /* with as_is: the model the row is measured against (fp32's figures), NULL: itself */
    int n_methods;
    const io_report_method *methods;
    int n_refinements;            /* the best method refined (compare --bias-correction, --adaround, --equalize) */
    const io_report_method *refinements; /* method: "mse + AdaRound", ... */
    const char *layers_method;    /* the method the layer-wise numbers are for */
    int n_layers;
    const io_report_layer *layers; /* execution order */
    int n_hists;
    const io_report_hist *hists;
    const io_report_exclusion *exclusion; /* NULL if no exclusion search was run */
    const char *labels;           /* the --labels spec, or NULL */
    /* With a detector's or a recogniser's labels: FP32's figures, and each method's and refinement's
     * (n_methods and n_refinements of them); all NULL without. */
    const io_report_truth *fp32_map, *method_maps, *refinement_maps;
} io_report;

/* Writes the JSON layout above (cJSON's pretty print: tab indents; every double reads back exactly). */
ptq_status io_report_write_json(const char *path, const io_report *r);
/* Writes the self-contained HTML page. */
ptq_status io_report_write_html(const char *path, const io_report *r);

#endif
