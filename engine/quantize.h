/* quantize.h: what `ptq calibrate` and `ptq quantize` do, as library code: ranges per method
 * from the calibration statistics, and the QDQ model in steps (ranges, auto-exclusion, Q/DQ
 * insertion, refinement, outputs) so that a caller can report between them.
 *
 *   eng_quantize_job job = eng_quantize_job_defaults();
 *   job.model = "m.onnx"; job.src = &src;              // or job.from_stats / job.from_cache
 *   eng_quantize_result res = {0};
 *   TRY(eng_quantize_ranges(&job, &res));             // [equalization,] calibration pass (or stats / cache), ranges
 *   TRY(eng_quantize_auto_exclude(&job, &res));       // only with job.auto_exclude
 *   TRY(eng_quantize_build(&job, &res));              // res.g becomes the QDQ model
 *   TRY(eng_quantize_refine(&job, &res));             // bias correction, AdaRound, output-mse
 *   TRY(eng_quantize_write(&job, &res, &outputs));
 *   eng_quantize_result_free(&res);
 *
 * Warnings ("tensor 'x' was all zeros or never finite: amax 1.0", an exclusion that matches
 * nothing, a tensor without a range) go to job.log as the CLI prints them. Nothing exits. */
#ifndef PTQ_ENGINE_QUANTIZE_H
#define PTQ_ENGINE_QUANTIZE_H

#include "calib/calib.h"
#include "engine/collect.h"
#include "engine/compare.h"
#include "engine/equalize.h"
#include "engine/refine.h"
#include "quant/fp16.h"
#include "io/cache.h"
#include "io/ranges.h"
#include "quant/qdq.h"

/* Ranges of method m for every collected tensor (in parallel over tensors: the same at any
 * thread count): ranges[i] and entries[i] (either may be NULL) name col->t[i]; warn[i] (may be
 * NULL) is set when the tensor was all zeros or never finite (amax 1.0). */
ptq_status eng_method_ranges(const eng_collector *col, const calib_method *m, io_range *ranges, io_cache_entry *entries, int *warn);

/* The same for n_methods (<= CALIB_MAX_METHODS) methods at once, in parallel over tensors, each
 * tensor's methods together (calib_amaxes): ranges[m], entries[m] (either array or entry may be
 * NULL) for methods[m]; warn of methods[0]. */
ptq_status eng_methods_ranges(const eng_collector *col, const calib_method *methods, int n_methods, io_range *const *ranges,
                        io_cache_entry *const *entries, int *warn);

/* A range that clips more than this share of a tensor's finite values is named in a warning. */
#define ENG_CLIP_WARN_SHARE 0.01
#define ENG_CLIP_WARN_LINES 10
/* Warns, for each of col's tensors whose range (ranges[i], method m) clips more than
 * ENG_CLIP_WARN_SHARE of its values (calib_clip_share), with the tensor, the method and the
 * share (the first ENG_CLIP_WARN_LINES by name, then one line with the count); the count. */
int eng_warn_clipping(const eng_collector *col, const io_range *ranges, const calib_method *m, const pp_log *log);

/* out.cache -> out.<tag>.cache (the per-method file names of several methods). */
void eng_per_method_path(const char *path, const char *tag, char *buf, size_t cap);

/* `ptq calibrate`'s outputs: for each method, a cache (trt_version, algorithm: io_cache_algorithm
 * names) and/or a JSON of ranges, one file per method when there are several; warnings of the
 * first method go to log; *warned: their count. */
ptq_status eng_calibrate_write(const eng_collector *col, const calib_method *methods, int n_methods, const char *cache,
                               const char *json, long trt_version, const char *trt_algorithm, const pp_log *log, int *warned);

/* The float amax whose amax / 127.0f is exactly the TensorRT cache scale s. */
float eng_amax_for_scale(float s);

typedef struct {
    const char *model;          /* the FP32 ONNX file */
    /* where the ranges come from: exactly one of */
    eng_calib_source *src;      /* a calibration pass over images or a .npy (src->cfg already set) */
    const char *from_stats;     /* a statistics file of this model */
    const char *from_cache;     /* a TensorRT calibration cache */
    const char *stats_out;      /* with src: also save the statistics here (NULL: no) */
    calib_method method;        /* entropy */
    int output_mse;             /* --method output-mse: mse, then each activation's amax chosen by output error */
    int equalize;               /* activation equalization before the calibration pass (equalize.h; needs src with images) */
    quant_options qo;           /* placement and exclusions (range/range_user are set by the engine) */
    eng_refine_options ro;      /* bias_correction (0 here), adaround_iters, ...; output_aware follows output_mse */
    int refine_images;          /* 32 */
    /* 1 (default): each refinement is kept only where it helps: the task metric (metric_given:
     * target.kind; else top1, box-f1, mask-iou:0.3 or seq-chars, whichever applies, then cosine) on
     * the evaluation images, or without them on every fourth calibration image, held out of the
     * refinement, measured before and after it */
    int refine_check;
    int metric_given;
    /* n_choose > 0: the method is the one of choose[] whose QDQ model scores best (the check's
     * metric, then cosine) on the evaluation images, or without them on every fourth calibration
     * image; each from the same statistics (eng_quantize_choose_method) */
    calib_method choose[8];
    int n_choose;
    int auto_exclude;           /* the fewest nodes in float that meet target on eval (needs src with images) */
    const char *eval_images, *labels;
    int eval_limit;
    cmp_target target;          /* NAN criteria left out */
    int eval_float16;           /* evaluations on images (auto-exclusion, the method choice, the refinement
                                   check): the float part simulated in FP16 (1, the default) or FP32 */
    int write_float16;          /* the written model's float part in float16 (quant_fp16_convert): 1; 0: float32;
                                   -1: the model's own (float16 for a model that computes in float16) */
    pp_log log;
} eng_quantize_job;

typedef struct {
    ptq_graph *g;               /* the FP32 model; the QDQ model after eng_quantize_build (owned) */
    eng_collector col;
    io_range *ranges;           /* names borrowed from col or cached */
    io_cache_entry *entries;
    int n_ranges;
    io_cache_entry *cached;     /* --from-cache's entries */
    int n_cached;
    long cache_version;         /* --from-cache's header version */
    uint64_t stats_images;      /* --from-stats: images the statistics saw */
    eng_equalization eq;        /* job.equalize: the pairs and their scales (applied to g) */
    double seconds_calibration; /* the calibration pass over the images (0 without one) */
    int warned;                 /* warnings so far */
    char **missing;             /* tensors the rules asked for without a range */
    int n_missing, cap_missing;
    cmp_exclusion excl;         /* auto-exclusion's nodes and the metrics they reach */
    const char **exclude_nodes; /* job's exclusions + excl.nodes */
    int n_exclude_nodes;
    quant_report rep;
    int refined;
    eng_refine_report rr;
    /* the refinement check (job.refine_check): the metric before any refinement, then after each */
    struct eng_refine_step {
        const char *name;       /* "output-aware scales", "AdaRound", "bias correction" */
        double before, after;   /* the metric; cosine breaks ties */
        double cos_before, cos_after;
        int kept;
    } steps[3];
    int n_steps;
    int check_images;           /* images the check measured on (0: no check) */
    double check_final;         /* the metric of the model as written */
    char check_metric[64];
    char check_skipped[160];    /* why no check ran, when refinements did ("" otherwise) */
    /* the method choice (job.n_choose): each candidate's metric and cosine, the one taken */
    double choose_metric[8], choose_cosine[8];
    int chosen, choose_images;
    /* what the method choice measured, for the refinement check on the same images: the evaluation
     * cache (the images decoded, their FP32 outputs) and the chosen QDQ model as evaluated
     * (serialized, its float part in FP16 when evaluated so) with its metrics (owned; NULL: none) */
    cmp_cache *eval_cache;
    uint8_t *eval_model;
    size_t eval_model_len;
    cmp_metrics eval_metrics;
    int64_t opset0;
    int n_upgraded;
    char tag[64];               /* the method as written in the JSON: "entropy", "output-mse", "cache", ... */
    quant_fp16_widened half;    /* a float16 model: what its float32 twin widened (engine/model.h) */
} eng_quantize_result;

eng_quantize_job eng_quantize_job_defaults(void);
ptq_status eng_quantize_ranges(const eng_quantize_job *job, eng_quantize_result *res);
/* What a recipe asks of a job with images (docs/quantizing.md#recipes): "fast" (the default
 * method, no refinement), "balanced" (the method measured among max, percentile:99.99,
 * percentile:99.999 and mse unless method_given, then bias correction unless no_bias),
 * "best" (balanced + output-aware scales, AdaRound, and equalization when may_equalize).
 * PTQ_ERR_ARG for another name. */
ptq_status eng_quantize_recipe(eng_quantize_job *job, const char *recipe, int method_given, int no_bias, int may_equalize);
ptq_status eng_quantize_auto_exclude(const eng_quantize_job *job, eng_quantize_result *res);
/* job.n_choose > 0: measures each candidate method and keeps the best one's ranges (after
 * eng_quantize_ranges, before auto-exclusion); res->tag names it. */
ptq_status eng_quantize_choose_method(const eng_quantize_job *job, eng_quantize_result *res);
ptq_status eng_quantize_build(const eng_quantize_job *job, eng_quantize_result *res);
ptq_status eng_quantize_refine(const eng_quantize_job *job, eng_quantize_result *res);

typedef struct {
    const char *model;          /* the QDQ ONNX file (NULL: not written) */
    const char *cache, *json, *report; /* NULL: not written; report: one line per node, tab-separated */
    long trt_version;           /* 0: 8601, or the input cache's with --from-cache */
    const char *trt_algorithm;  /* NULL: EntropyCalibration2 */
} eng_quantize_outputs;
/* With job->write_float16 the model's float part is made float16 first (res->g is converted in
 * place; converting again changes nothing). */
ptq_status eng_quantize_write(const eng_quantize_job *job, const eng_quantize_result *res, const eng_quantize_outputs *out);
void eng_quantize_result_free(eng_quantize_result *res);

#endif
