/* collect.h: one calibration pass shared by `ptq calibrate` and `ptq quantize`: the
 * images (or a .npy of samples) through the executor, every float activation's statistics
 * gathered by the observer.
 *
 *   eng_collector col = {0};
 *   TRY(eng_collect(g, model, &src, &col));        // col.t[i]: name + calib_stats
 *   TRY(eng_stats_save("run.ptqstats", model, &src, &col));   // --stats
 *   ...; eng_collector_free(&col);
 *
 * or, without images (--from-stats): TRY(eng_stats_load("run.ptqstats", model, &col, &n));
 */
#ifndef PTQ_ENGINE_COLLECT_H
#define PTQ_ENGINE_COLLECT_H

#include "calib/calib.h"
#include "engine/runner.h"
#include "preprocess/dataset.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

typedef struct {
    char *name;
    calib_stats *stats;
    int pos;                  /* private: the value's place in plan order (the order of t) */
    void *sink;               /* private: its tile sink, or NULL */
} eng_tensor_stats;

typedef struct {
    eng_tensor_stats *t;
    int n, cap, cursor, nthreads;
    /* only tensors matching one of these; none: the activations quantize gives a Q/DQ pair
     * with no exclusions (quant_calib_tensors), a view (Reshape, ...) of another observed once */
    const char *const *globs;
    int n_globs;
    ptq_arena_pool *pool;     /* NULL, or the pass's plans take their arenas from it (borrowed) */
    /* private to eng_collect */
    const ptq_graph *g;
    int *want, *pos;          /* per value: quant_calib_tensors' answer; plan order */
    uint8_t *source;          /* per value: observed (some want[] names it) */
    int *by_name;             /* value indices sorted by name */
    calib_part **parts;       /* one per kernel thread */
    int n_parts, bad_thread;
    uint64_t *image_ids;      /* filled by eng_collect: one id per image (io/stats.h), for --stats */
    int n_image_ids;
} eng_collector;

typedef struct {
    const char *input_npy;    /* samples [N, ...] fed in batches of o.batch, or NULL */
    pp_dataset_options o;     /* the image source when input_npy is NULL */
    pp_config cfg;
    int images, skipped, batches; /* filled by eng_collect */
    uint64_t list_hash;       /* filled by eng_collect: pp_dataset_list_hash(), or FNV-1a of the .npy */
    eng_memory_budget memory; /* filled by eng_collect for images: the budget and the batch it chose */
} eng_calib_source;

ptq_status eng_collect(const ptq_graph *g, const char *model, eng_calib_source *src, eng_collector *col);

/* The checks ptq run and ptq inspect make, for the commands that do not run the whole model
 * (calibrate, quantize, compare, convert): every node ptq runs (all but those downstream of an
 * op it does not run) is planned for the input shapes (none: the declared ones), its
 * attributes, ranks, dtypes and shapes validated, without allocating activations. A model
 * with symbolic input dims and no shapes passes here: eng_collect checks it at its first
 * batch's shape, before the batch runs. Errors are prefixed with `model`. */
ptq_status eng_validate_model(const ptq_graph *g, const char *model, const ptq_input_shape *shapes, int n_shapes);
void eng_collector_free(eng_collector *col);

/* The preprocessing text of statistics files: io_preset_describe() + " exif=on|off", or
 * "npy:<FNV-1a of the .npy>" for samples (their preprocessing is unknown). */
void eng_calib_source_describe(const eng_calib_source *src, char *buf, size_t cap);
/* Writes what eng_collect gathered as a statistics file (io/stats.h), atomically. */
ptq_status eng_stats_save(const char *path, const char *model, const eng_calib_source *src, const eng_collector *col);
/* Fills an empty col from a statistics file (only tensors matching col->globs) after
 * checking that it was collected on this model file; *n_images: images it saw. */
ptq_status eng_stats_load(const char *path, const char *model, eng_collector *col, uint64_t *n_images);

#endif
