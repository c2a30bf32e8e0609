/* runner.h: one graph run on batches whose shape may change (the last batch of a folder,
 * or images whose preprocessed size follows the image): a small cache of plans keyed by
 * the input shape, the least recently used one destroyed past ENG_RUNNER_PLANS.
 *
 *   eng_runner r = {.g = g, .popt = ptq_plan_defaults()};
 *   ptq_tensor x = eng_batch_tensor(&cfg, data, n);   // the preprocessed batch
 *   TRY(eng_runner_run(&r, &x));
 *   const ptq_tensor *y = ptq_plan_output(r.plan, 0, NULL);
 *   eng_runner_free(&r);
 *
 * The graph is borrowed and must outlive the runner; it must have one data input. Outputs
 * are valid until the runner (or another one sharing its eng_memory) runs again. */
#ifndef PTQ_ENGINE_RUNNER_H
#define PTQ_ENGINE_RUNNER_H

#include "engine/source.h"
#include "preprocess/dataset.h"
#include "preprocess/preprocess.h"
#include "runtime/plan.h"

enum { ENG_RUNNER_PLANS = 4 };

/* The activation memory of runner plans (plan.h, bound_memory): one block, grown to the
 * largest plan's need, that the plan about to run is bound to, so that a runner holding
 * plans of several shapes keeps one arena, not one per plan. Several runners may share one
 * when each one's outputs are read before another runs (compare's evaluation: the FP32
 * reference and every QDQ variant). */
typedef struct {
    void *mem;
    size_t cap;
    ptq_arena_pool *pool;  /* where the block comes from and goes back to (NULL: the heap) */
} eng_memory;

/* Binds p (made with bound_memory) to the block before a run, first growing the block to p's
 * need (binding only points p's values into the block: cheap next to a run). */
ptq_status eng_memory_bind(eng_memory *m, ptq_plan *p);
/* Gives the block back (to its pool); the struct can be used again. */
void eng_memory_free(eng_memory *m);

typedef struct {
    ptq_plan *plan;       /* owned */
    int64_t dims[PTQ_MAX_RANK + 1]; /* the input rank, then its shape (unused dims 0) */
    unsigned long used;   /* last use (runner tick); 0: empty */
} eng_runner_slot;

typedef struct {
    const ptq_graph *g;
    const char *model;  /* file name for messages, or NULL */
    ptq_plan_options popt;
    ptq_plan *plan;     /* the plan of the last ready/run (one of slots); NULL until the first batch */
    eng_runner_slot slots[ENG_RUNNER_PLANS];
    unsigned long tick;
    eng_memory *shared; /* NULL: the runner's own block (from popt.pool) */
    eng_memory own;
} eng_runner;

/* The graph's first input that is not an initializer, or -1. */
int eng_graph_input(const ptq_graph *g);
enum { ENG_DEFAULT_BATCH = PP_DEFAULT_BATCH }; /* images per batch when neither the user nor the model says */

/* 1 when the model's data input has no batch dim ([C, H, W], as torchvision's detectors export):
 * it is fed one image at a time. */
int eng_batchless(const ptq_graph *g);
/* x ([N, ...], a batch of preprocessed images) as the model's input takes it: without its
 * batch dim for a batchless model (N must then be 1), else x itself. Data borrowed. */
ptq_tensor eng_model_tensor(const ptq_graph *g, const ptq_tensor *x);
/* Sets o->batch to what the model takes: 1 for a batchless model, k when its input fixes dim 0
 * to k, else the user's (o->batch > 0) or ENG_DEFAULT_BATCH (o->batch == 0, "the model's").
 * Fails, naming the input, when a batch the user gave contradicts the model. */
ptq_status eng_fit_batch(const ptq_graph *g, const char *model, pp_dataset_options *o);
/* The memory budget (--memory MB, pp_dataset_options.memory_mb; 0: ENG_DEFAULT_MEMORY_MB) that the
 * default batch and the replay caches follow. A batch changes no byte of any output, so the
 * budget may pick it freely. */
enum { ENG_DEFAULT_MEMORY_MB = 512, ENG_PROCESS_MB = 24 /* ptq's code, libraries and thread stacks */ };
typedef struct {
    size_t budget;     /* bytes */
    size_t fixed;      /* bytes whatever the batch: ENG_PROCESS_MB, the weights twice (the graph's copy and the plan's
                        * packed or folded one), the caller's (statistics), 1.25 MiB of GEMM packing
                        * buffers per thread, and the plan's scratch */
    size_t per_image;  /* bytes per image of a batch: its activations in the plan's block (a batch-2
                        * plan's block less a batch-1 plan's), its (prefetch + 1) dataset copies */
    int batch;         /* the batch chosen; 0 when the user or the model gave it */
    int over;          /* 1: even one image (of the largest size the preprocessing gives) needs more than the budget */
} eng_memory_budget;
size_t eng_memory_budget_bytes(const pp_dataset_options *o); /* o NULL: the default */
/* The replay caches' budget (the dataset source's first pass, the evaluation caches):
 * half the memory budget. */
size_t eng_cache_budget_bytes(const pp_dataset_options *o);
/* eng_fit_batch, but where neither the user nor the model gives the batch: the largest batch up
 * to ENG_DEFAULT_BATCH whose memory (mb: fixed + batch x per_image, measured by planning g with
 * popt at batch 1 and 2 on cfg's largest tensor, no arena allocated) fits the budget, at least 1.
 * extra: bytes the caller keeps whatever the batch (statistics). mb may be NULL. */
ptq_status eng_fit_batch_memory(const ptq_graph *g, const char *model, const pp_config *cfg,
                                const ptq_plan_options *popt, size_t extra, pp_dataset_options *o,
                                eng_memory_budget *mb);
/* A batch of n preprocessed images of w x h (a dataset batch: pp_dataset_batch_shape) as the
 * model's input tensor (NCHW or NHWC float32; data borrowed). eng_batch_tensor (source.h): cfg's size. */
ptq_tensor eng_shaped_tensor(const pp_config *cfg, int w, int h, const float *data, int n);
/* Fits the preprocessing to the model's data input, saying each choice in one line through log
 * (once per eng_preprocessing()): the layout from the input's shape (the dim of 1 or 3
 * channels; --layout wins); one channel: the image's luma (GRAY) with the mean/std averaged; a
 * fixed size other than the preset's: the preset's geometry scaled to it (a crop keeps its ratio
 * to the shorter side), also for --size without --mode or --shorter; a uint8 input: pixels
 * without scale/mean/std. Without a preset: an Ultralytics export's metadata (imgsz) gives
 * yolo-letterbox-640 at its size; else the default, said every time. Refuses, naming the input,
 * a dtype other than float32/float16/uint8, channels other than 1 or 3, a rank-3 input whose
 * channel dim cannot be told, and --scale/--mean/--std for a uint8 input. */
ptq_status eng_fit_preprocessing(const ptq_graph *g, const char *model, pp_config *cfg, const pp_log *log);
/* 2 when preprocessing c gives tensors of the size the model's data input fixes (or a size the
 * input leaves dynamic), 1 when its geometry is scaled to the model's size (eng_fit_preprocessing),
 * 0 when it cannot apply (dims that follow the image need dynamic dims; 1 or 3 channels; the
 * layout follows the model). */
int eng_preset_fits(const ptq_graph *g, const pp_config *c);
/* Refuses (before anything runs) preprocessing whose tensor contradicts a fixed dim of the
 * model's data input: "model: preset paddleocr-det gives x 1x3x640x640 but the model declares
 * x as [?, 3, 48, 192] (dim 2 is 48)"; a dim that follows the image (pp_dynamic) needs a
 * dynamic dim in the model. */
ptq_status eng_check_input_dims(const ptq_graph *g, const char *model, const pp_config *cfg);
/* ptq_plan_create for a batch of preprocessed images; when it fails, the message also
 * names the input shape, the preprocessing it came from and the model's declared dims. */
ptq_status eng_plan_images(const ptq_graph *g, const char *model, const ptq_input_shape *s,
                           const ptq_plan_options *popt, ptq_plan **out);
/* Makes r->plan the plan for x's shape (from the cache, or made now), without running it.
 * x is a batch [N, ...]; a batchless model's plan takes eng_model_tensor(r->g, x). */
ptq_status eng_runner_ready(eng_runner *r, const ptq_tensor *x);
ptq_status eng_runner_run(eng_runner *r, const ptq_tensor *x);
void eng_runner_free(eng_runner *r);
/* `ptq run --images`: the model on every batch of the dataset (plans per input shape), nothing
 * kept; fuse 0 runs the unfused plan. *images, *skipped: the dataset's counts. */
ptq_status eng_run_images(const char *model, const pp_dataset_options *o, const pp_config *cfg, int fuse, int *images,
                          int *skipped);

#endif
