/* source.h: the model inputs an engine algorithm reads, as batches, any number of times.
 *
 *   eng_dataset_source ds;
 *   eng_source src = eng_source_dataset(&ds, &dataset_options, &cfg);  // images of a folder or list
 *   TRY(src.open(src.user));
 *   for (ptq_tensor x; (TRY(src.next(src.user, &x)), x.dims[0] > 0);) { ... }
 *   src.close(src.user);
 *
 * A source is read as several passes (open, next until an empty batch, close); every pass
 * yields the same batches in the same order. A C program or the Python package can give
 * its own arrays through the same three callbacks. */
#ifndef PTQ_ENGINE_SOURCE_H
#define PTQ_ENGINE_SOURCE_H

#include "preprocess/dataset.h"
#include "runtime/tensor.h"

typedef struct {
    ptq_status (*open)(void *user);
    /* The next batch (float32, [N, ...], data borrowed until the next call); N = 0 (or rank 0) at the end. */
    ptq_status (*next)(void *user, ptq_tensor *x);
    void (*close)(void *user);
    void *user;
} eng_source;

/* Images through preprocess/dataset.h. The first complete pass keeps its preprocessed batches
 * in memory while they fit in half the memory budget (engine/runner.h: eng_cache_budget_bytes), and later passes replay them without decoding;
 * past the budget every pass decodes again. Either way the batches are the same bytes. */
typedef struct {
    ptq_tensor t;             /* owned data */
} eng_cached_batch;

typedef struct {
    pp_dataset_options o;
    pp_config cfg;
    pp_dataset *d;
    size_t budget, bytes;     /* eng_cache_budget_bytes (half of --memory); bytes kept so far */
    eng_cached_batch *cache;
    int n_cache, cap_cache, pos;
    int replay;               /* the cache holds a whole pass: passes read it */
    int over;                 /* the pass outgrew the budget: no cache */
} eng_dataset_source;

/* ds keeps copies of o and cfg (the strings they point to are borrowed); free it with
 * eng_source_dataset_free. */
eng_source eng_source_dataset(eng_dataset_source *ds, const pp_dataset_options *o, const pp_config *cfg);
void eng_source_dataset_free(eng_dataset_source *ds);

/* A batch of n preprocessed images of cfg as the model's input tensor (NCHW or NHWC float32, data borrowed). */
ptq_tensor eng_batch_tensor(const pp_config *cfg, const float *data, int n);

#endif
