/* collect.h: one calibration pass shared by `ptq calibrate` and `ptq quantize`: the
 * images (or a .npy of samples) through the executor, every float activation's statistics
 * gathered by the observer.
 *
 *   cli_collector col = {0};
 *   TRY(cli_collect(g, model, &src, &col));        // col.t[i]: name + calib_stats
 *   ...; cli_collector_free(&col);
 */
#ifndef PTQ_CLI_COLLECT_H
#define PTQ_CLI_COLLECT_H

#include "calib/calib.h"
#include "preprocess/dataset.h"
#include "runtime/graph.h"

typedef struct {
    char *name;
    calib_stats *stats;
} cli_tensor_stats;

typedef struct {
    cli_tensor_stats *t;
    int n, cap, cursor, nthreads;
    const char *const *globs; /* only tensors matching one of these (none: all) */
    int n_globs;
} cli_collector;

typedef struct {
    const char *input_npy;    /* samples [N, ...] fed in batches of o.batch, or NULL */
    pp_dataset_options o;     /* the image source when input_npy is NULL */
    pp_config cfg;
    int images, skipped, batches; /* filled by cli_collect */
} cli_source;

ptq_status cli_collect(const ptq_graph *g, const char *model, cli_source *src, cli_collector *col);
void cli_collector_free(cli_collector *col);

#endif
