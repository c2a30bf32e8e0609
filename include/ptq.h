/* ptq.h: ptq's public C API: post-training quantization of ONNX image models for TensorRT.
 *
 * Self-contained (only the C standard headers), stable, easy to bind (plain C types, no
 * varargs, callbacks optional). Build with `pkg-config --cflags --libs ptq`.
 *
 *   ptq_model *m = NULL; ptq_dataset *d = NULL; ptq_quantized *q = NULL;
 *   ptq_dataset_options dopt; ptq_dataset_defaults(&dopt);
 *   dopt.preset = "paddleocr-cls";
 *   ptq_quantize_options qopt; ptq_quantize_defaults(&qopt);
 *   if (ptq_model_load("cls.onnx", &m) || ptq_dataset_open("photos/", &dopt, &d) ||
 *       ptq_quantize(m, d, &qopt, &q) || ptq_quantized_write(q, "cls.qdq.onnx", "cls.cache", NULL))
 *       fprintf(stderr, "%s\n", ptq_error_message());
 *   ptq_quantized_free(q); ptq_dataset_free(d); ptq_model_free(m);
 *
 * Conventions:
 * - Every call that can fail returns a ptq_err; PTQ_SUCCESS is 0. The message of the last
 *   failure is ptq_error_message(), per thread, valid until the next failing call on it.
 * - Handles are opaque; each *_free accepts NULL. Result structs are owned by the library
 *   and freed by their ptq_*_free function. Strings passed in are copied or only read
 *   during the call, unless said otherwise.
 * - Options structs are filled with their defaults by ptq_*_defaults(); set what you need.
 * - The library never writes to stdout and never exits. Progress and messages go to the
 *   callbacks of ptq_log when given, and nowhere otherwise.
 * - Results are the bytes `ptq` (the CLI, a client of this API) writes for the same options. */
#ifndef PTQ_PUBLIC_H
#define PTQ_PUBLIC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PTQ_API __attribute__((visibility("default")))
#else
#define PTQ_API
#endif

#define PTQ_VERSION_MAJOR 0
#define PTQ_VERSION_MINOR 1

typedef enum {
    PTQ_SUCCESS = 0,
    PTQ_E_ARG = 1,         /* bad argument or option */
    PTQ_E_NOMEM = 2,       /* allocation failed */
    PTQ_E_IO = 3,          /* a file could not be opened, read or written */
    PTQ_E_FORMAT = 4,      /* malformed file or model */
    PTQ_E_UNSUPPORTED = 5, /* valid but outside what ptq implements */
    PTQ_E_SHAPE = 6,       /* shapes or dtypes do not fit */
    PTQ_E_INTERNAL = 7     /* a bug in ptq */
} ptq_err;

/* The calling thread's last error message ("" when none). */
PTQ_API const char *ptq_error_message(void);
/* "0.1" */
PTQ_API const char *ptq_version(void);

/* ---- logging (optional everywhere) ---- */
enum { PTQ_LOG_INFO = 0, PTQ_LOG_WARNING = 1 };
typedef struct {
    /* label: what the images are for ("calibration", "evaluating mse (3/5)"); last: 1 on the final call. */
    void (*progress)(const char *label, int done, int total, double seconds, int last, void *user);
    /* One line without "ptq: " or '\n', e.g. "tensor 'x' was all zeros or never finite: amax 1.0". */
    void (*message)(int level, const char *text, void *user);
    void *user;
} ptq_log;

/* ---- models ---- */
typedef struct ptq_model ptq_model;
/* Loads an ONNX file (the path is kept: quantization reads it again). */
PTQ_API ptq_err ptq_model_load(const char *path, ptq_model **out);
PTQ_API void ptq_model_free(ptq_model *m);
PTQ_API int ptq_model_num_inputs(const ptq_model *m);   /* data inputs (not initializers) */
PTQ_API const char *ptq_model_input_name(const ptq_model *m, int i); /* borrowed, valid until ptq_model_free */
PTQ_API int ptq_model_num_outputs(const ptq_model *m);
PTQ_API const char *ptq_model_output_name(const ptq_model *m, int i);

/* ---- datasets: a folder of images (recursive) or a list file, preprocessed into batches ---- */
typedef struct {
    const char *preset;              /* NULL: default preprocessing; a name (configs/NAME.yaml) or a .yaml path */
    const char *const *overrides;    /* n_overrides "key=value" strings, e.g. "mean=0,0,0", "size=192x48" (the CLI's --key value) */
    int n_overrides;
    int batch;                       /* images per batch: 0 = the model's (1 for a model without a batch dim,
                                        k for one that fixes it to k), else the most, up to 8, that
                                        memory_mb holds (8 when the dataset is read alone) */
    int limit;                       /* at most this many usable images: 0 = all */
    int shuffle;                     /* 0 */
    uint64_t seed;                   /* shuffle seed: 0 */
    int strict;                      /* a bad image is an error instead of a skip: 0 */
    int exif;                        /* apply EXIF orientation: 1 */
    int threads;                     /* decoding and compute threads: 0 = OpenMP's default */
    int shard_index, shard_count;    /* keep list positions k with k % shard_count == shard_index
                                        (the CLI's --shard I/N; docs/cluster.md): 0, 0 = the whole list */
    ptq_log log;                     /* progress and skipped-image warnings: none */
    int memory_mb;                   /* the memory budget in MB (the CLI's --memory; docs/reference.md#memory):
                                        the default batch and the images kept for replay follow it;
                                        0 = 512; else 64 to 1048576 */
} ptq_dataset_options;
PTQ_API void ptq_dataset_defaults(ptq_dataset_options *o);

typedef struct ptq_dataset ptq_dataset;
/* Lists the images (fails when there is none) and checks the preset and overrides. */
PTQ_API ptq_err ptq_dataset_open(const char *images, const ptq_dataset_options *o, ptq_dataset **out);
/* The next batch: *n images (0 at the end), float32 data of shape[0..4) (N, C, H, W or N, H, W, C
 * by the preset's layout), borrowed until the next call. The first call after the end starts
 * again from the first image. */
PTQ_API ptq_err ptq_dataset_next(ptq_dataset *d, const float **data, int64_t shape[4], int *n);
/* Images used and skipped by the last complete pass (or so far). */
PTQ_API void ptq_dataset_counts(const ptq_dataset *d, int *used, int *skipped);
PTQ_API void ptq_dataset_free(ptq_dataset *d);

/* ---- calibration: statistics of every float activation -> ranges (amax per tensor) ---- */
typedef struct {
    const char *const *tensors;      /* only tensors matching these fnmatch globs ("*": every float
                                        activation); none: those quantize gives a Q/DQ pair */
    int n_tensors;
    const char *stats_out;           /* also save the statistics (.ptqstats, mergeable): NULL */
    ptq_log log;
} ptq_calibrate_options;
PTQ_API void ptq_calibrate_defaults(ptq_calibrate_options *o);

typedef struct ptq_calibration ptq_calibration;
/* One pass of the dataset through the FP32 model. */
PTQ_API ptq_err ptq_calibrate(const ptq_model *m, ptq_dataset *d, const ptq_calibrate_options *o, ptq_calibration **out);
/* Statistics saved by ptq_calibrate / `ptq calibrate --stats` for this model file. */
PTQ_API ptq_err ptq_calibration_load(const ptq_model *m, const char *stats_path, ptq_calibration **out);
PTQ_API int ptq_calibration_images(const ptq_calibration *c);
PTQ_API void ptq_calibration_free(ptq_calibration *c);

typedef struct {
    char method[64];                 /* "entropy", "percentile-99.99", ... */
    int n;
    const char *const *names;        /* n tensor names */
    const float *amax;               /* n ranges: scale = amax / 127 */
    int n_warnings;                  /* tensors that were all zeros or never finite (amax 1.0) */
    int n_clipped;                   /* tensors whose range clips more than 1 % of their values (each
                                      * named in a warning through the calibration's log callbacks) */
} ptq_ranges;
/* One method's ranges: "max", "percentile[:P]", "entropy", "mse". */
PTQ_API ptq_err ptq_calibration_ranges(const ptq_calibration *c, const char *method, ptq_ranges **out);
/* A TensorRT calibration cache: trt_version 0 = 8601, trt_algorithm NULL = EntropyCalibration2. */
PTQ_API ptq_err ptq_ranges_write_cache(const ptq_ranges *r, const char *path, long trt_version, const char *trt_algorithm);
/* The JSON of amax and scale per tensor, as `ptq calibrate --json`. */
PTQ_API ptq_err ptq_ranges_write_json(const ptq_ranges *r, const char *path);
PTQ_API void ptq_ranges_free(ptq_ranges *r);

/* ---- quantization: the QDQ model by TensorRT's explicit-quantization rules ---- */
typedef struct {
    const char *method;              /* NULL: percentile:99.99 (or the recipe's choice); max, percentile[:P], entropy, mse, output-mse */
    const char *from_stats;          /* ranges from saved statistics instead of a dataset: NULL */
    const char *from_cache;          /* ranges from a TensorRT cache instead of a dataset: NULL */
    const char *stats_out;           /* also save the calibration statistics: NULL */
    const char *const *exclude_nodes;    /* node names or fnmatch globs kept in float */
    int n_exclude_nodes;
    const char *const *exclude_op_types; /* op types kept in float */
    int n_exclude_op_types;
    int weights_fp32;                /* float weights with Q/DQ instead of int8 initializers: 0 */
    int dedicated_qdq;               /* one Q/DQ pair per consumer: 0 */
    int bias_correction;             /* empirical per-channel bias correction: 0 */
    int adaround_iters;              /* AdaRound iterations per layer (500 is the CLI's): 0 = off */
    int refine_images;               /* images the refinements run on: 32 */
    const char *eval_images;         /* auto-exclusion: held-out images (same preprocessing); NULL = off */
    const char *labels;              /* auto-exclusion: "image,class" file or "folders": NULL */
    int eval_limit;                  /* 0 = all */
    const char *metric;              /* "cosine" (default), sqnr, top1, seq-top1, seq-chars or seq-exact[:AXIS], mask-iou:T, box-f1 */
    double target;                   /* auto-exclusion: metric >= target (NaN: unused, the default) */
    double target_cosine;            /* NaN */
    double target_top1_drop;         /* NaN */
    ptq_log log;
    int equalize;                    /* activation equalization in front of depthwise Convs (needs a dataset): 0 */
    const char *recipe;              /* NULL or "fast"; "balanced", "best" (need a dataset): ptq quantize --recipe */
    int no_refine_check;             /* keep every refinement without measuring it on held-out images: 0 */
    int float_fp32;                  /* measurements (recipes, refinement check, auto-exclusion) with the float
                                      * part in FP32; 0: in FP16, as trtexec --fp16 runs it */
    int write_float16;               /* the float part in float16 (quantize --float-dtype fp16): 1; 0: float32;
                                      * -1 (default): the model's own, float16 for a float16 model */
} ptq_quantize_options;
PTQ_API void ptq_quantize_defaults(ptq_quantize_options *o);

typedef struct {
    int activations, weights;        /* tensors given Q/DQ */
    int quantized_nodes, excluded_nodes;
    int warnings;
    int images, skipped;             /* calibration images */
    int auto_excluded;               /* nodes the auto-exclusion kept in float */
    double reached_cosine;           /* their evaluation cosine (NaN without auto-exclusion) */
} ptq_quantize_info;

typedef struct ptq_quantized ptq_quantized;
/* Calibration (d, or options' from_stats / from_cache with d NULL), exclusions, Q/DQ insertion,
 * refinements: everything `ptq quantize` does. */
PTQ_API ptq_err ptq_quantize(const ptq_model *m, ptq_dataset *d, const ptq_quantize_options *o, ptq_quantized **out);
PTQ_API void ptq_quantized_info(const ptq_quantized *q, ptq_quantize_info *info);
/* Writes what is not NULL: the QDQ model, the TensorRT cache (8601, EntropyCalibration2, or a
 * from_cache's version) and the ranges JSON. */
PTQ_API ptq_err ptq_quantized_write(const ptq_quantized *q, const char *model_path, const char *cache_path, const char *json_path);
PTQ_API ptq_err ptq_quantized_write_cache(const ptq_quantized *q, const char *path, long trt_version, const char *trt_algorithm);
/* The auto-excluded node names (n from ptq_quantized_info), borrowed. */
PTQ_API const char *ptq_quantized_excluded(const ptq_quantized *q, int i);
PTQ_API void ptq_quantized_free(ptq_quantized *q);

/* ---- compare: every method's QDQ model against FP32 on held-out images ---- */
typedef struct {
    const char *methods;             /* "max,percentile:99.99,percentile:99.999,entropy,mse"; "all" */
    const char *metric;              /* NULL: top1 for classifiers, else cosine */
    const char *labels;              /* NULL, "image,class" file or "folders" */
    const char *const *exclude_nodes;
    int n_exclude_nodes;
    const char *const *exclude_op_types;
    int n_exclude_op_types;
    int layers;                      /* also the layer-wise errors of the best method (JSON report): 1 */
    ptq_log log;
    int float_fp32;                  /* the float part evaluated in FP32; 0: rounded to FP16, as trtexec --fp16 runs it */
} ptq_compare_options;
PTQ_API void ptq_compare_defaults(ptq_compare_options *o);

typedef struct {
    char method[64];
    double cosine, sqnr_db, max_abs;
    double top1_agree, top1_acc;     /* NaN when not a classifier / no labels */
    double seq_top1, mask_iou;       /* NaN when output 0 is not a sequence / a map */
    double seq_chars, seq_exact;     /* greedy CTC reading (rank-3 sequences): 1 - CER against FP32's
                                        reading, share of sequences read identically; else NaN */
    double box_f1;                   /* a detector's boxes against FP32's (box-f1); else NaN */
} ptq_method_metrics;

typedef struct {
    int n_methods;
    const ptq_method_metrics *methods;
    int best;                        /* index in methods */
    const char *criterion;           /* what chose it: "cosine", "top-1 agreement", ... */
    int calib_images, eval_images;
    void *internal;                  /* the library's */
} ptq_compare_result;
/* calib: the calibration images; eval: held-out images (their own preprocessing). */
PTQ_API ptq_err ptq_compare(const ptq_model *m, ptq_dataset *calib, ptq_dataset *eval, const ptq_compare_options *o,
                            ptq_compare_result **out);
/* The report `ptq compare --json` / `--html` writes. */
PTQ_API ptq_err ptq_compare_write_json(const ptq_compare_result *r, const char *path);
PTQ_API ptq_err ptq_compare_write_html(const ptq_compare_result *r, const char *path);
PTQ_API void ptq_compare_free(ptq_compare_result *r);

/* ---- translate: QDQ -> Q/DQ-free model + precision config + cache, for implicit quantization ---- */
typedef struct {
    int propagate_concat, propagate_pool, propagate_mul, dla; /* 0 */
    long trt_version;                /* 8601 */
    const char *trt_algorithm;       /* NULL: EntropyCalibration2 */
} ptq_translate_options;
PTQ_API void ptq_translate_defaults(ptq_translate_options *o);
/* Writes PREFIX_noqdq.onnx, PREFIX_precision_config.json, PREFIX_precision_config_calib.cache,
 * PREFIX_precision_config_layer_arg.txt (prefix NULL: the model path without .onnx). */
PTQ_API ptq_err ptq_translate(const char *qdq_model, const char *prefix, const ptq_translate_options *o);

/* ---- run: a model on float inputs ---- */
typedef struct ptq_session ptq_session;
/* threads: 0 = OpenMP's default. The model must outlive the session. */
PTQ_API ptq_err ptq_session_create(const ptq_model *m, int threads, ptq_session **out);
/* Runs on n inputs given by name (NULL names: the model's data inputs in order), float32 data of
 * shapes[i][0..ranks[i]). A plan is made for each new set of shapes. */
PTQ_API ptq_err ptq_session_run(ptq_session *s, int n, const char *const *names, const float *const *data,
                                const int64_t *const *shapes, const int *ranks);
/* Output i of the last run: float32 data and shape borrowed until the next run or free. */
PTQ_API ptq_err ptq_session_output(const ptq_session *s, int i, const char **name, const float **data, const int64_t **shape,
                                   int *rank);
PTQ_API void ptq_session_free(ptq_session *s);

#ifdef __cplusplus
}
#endif

#endif
