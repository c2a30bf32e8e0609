/* runner.h: one graph run on batches whose size may change (the last batch of a folder):
 * the plan is made for the first batch and made again when the batch size changes.
 *
 *   cli_runner r = {.g = g, .popt = ptq_plan_defaults()};
 *   ptq_tensor x = cli_batch_tensor(&cfg, data, n);   // the preprocessed batch
 *   TRY(cli_runner_run(&r, &x));
 *   const ptq_tensor *y = ptq_plan_output(r.plan, 0, NULL);
 *   cli_runner_free(&r);
 *
 * The graph is borrowed and must outlive the runner; it must have one data input. */
#ifndef PTQ_CLI_RUNNER_H
#define PTQ_CLI_RUNNER_H

#include "preprocess/preprocess.h"
#include "runtime/plan.h"

typedef struct {
    const ptq_graph *g;
    const char *model;  /* file name for messages, or NULL */
    ptq_plan_options popt;
    ptq_plan *plan;     /* owned; NULL until the first batch */
    int64_t batch;
} cli_runner;

/* The graph's first input that is not an initializer, or -1. */
int cli_graph_input(const ptq_graph *g);
/* A batch of n preprocessed images as the model's input tensor (NCHW or NHWC float32;
 * data borrowed). */
ptq_tensor cli_batch_tensor(const pp_config *cfg, const float *data, int n);
/* Refuses (before anything runs) preprocessing whose tensor contradicts a fixed dim of the
 * model's data input: "model: preset paddleocr-det gives x 1x3x640x640 but the model declares
 * x as [?, 3, 48, 192] (dim 2 is 48)". */
ptq_status cli_check_input_dims(const ptq_graph *g, const char *model, const pp_config *cfg);
/* ptq_plan_create for a batch of preprocessed images; when it fails, the message also
 * names the input shape, the preprocessing it came from and the model's declared dims. */
ptq_status cli_plan_images(const ptq_graph *g, const char *model, const ptq_input_shape *s,
                           const ptq_plan_options *popt, ptq_plan **out);
/* Makes the plan for x's shape if needed (without running it). */
ptq_status cli_runner_ready(cli_runner *r, const ptq_tensor *x);
ptq_status cli_runner_run(cli_runner *r, const ptq_tensor *x);
void cli_runner_free(cli_runner *r);

#endif
