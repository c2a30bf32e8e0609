/* translate.c: see translate.h. */
#include "engine/translate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cache.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/ranges.h"

ptq_status eng_translate(const char *model, const char *prefix, const quant_translate_options *o, long trt_version,
                         const char *trt_algorithm, quant_translation *tr)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    char *path = malloc(strlen(prefix) + 64), *arg = NULL;
    const char **names = NULL;
    float *scales = NULL;
    io_cache_entry *entries = NULL;
    io_outset *own = NULL; /* a library caller's files as one set (ptq's CLI has its command's set current) */
    CHECK_ALLOC(path);
    TRY(onnx_model_load(model, &g));
    if ((st = quant_translate(g, o, tr)) != PTQ_OK) {
        ptq_error_prefix("%s: ", model);
        goto done;
    }
    names = malloc(sizeof *names * (size_t)(tr->n_scales + 1));
    scales = malloc(sizeof *scales * (size_t)(tr->n_scales + 1));
    entries = malloc(sizeof *entries * (size_t)(tr->n_scales + 1));
    size_t arg_len = 2;
    for (int i = 0; i < tr->n_fp16; i++) arg_len += strlen(tr->fp16_nodes[i]) + 6;
    arg = malloc(arg_len);
    if (!names || !scales || !entries || !arg) FAIL(PTQ_ERR_NOMEM, "out of memory allocating the scale tables");
    for (int i = 0; i < tr->n_scales; i++) {
        names[i] = tr->scales[i].name;
        scales[i] = tr->scales[i].scale;
        entries[i] = (io_cache_entry){tr->scales[i].name, tr->scales[i].scale};
    }
    size_t k = 0;
    for (int i = 0; i < tr->n_fp16; i++) k += (size_t)sprintf(arg + k, "%s%s:fp16", i ? "," : "", tr->fp16_nodes[i]);
    arg[k++] = '\n';

    /* one set of files, the model last */
    if (!io_outset_current()) TRY(io_outset_begin(&own, NULL));
    sprintf(path, "%s_precision_config.json", prefix);
    TRY(io_precision_config_write(path, names, scales, tr->n_scales, (const char *const *)tr->fp16_nodes, tr->n_fp16));
    sprintf(path, "%s_precision_config_calib.cache", prefix);
    TRY(io_cache_write(path, trt_version, io_cache_algorithm(trt_algorithm), entries, tr->n_scales));
    sprintf(path, "%s_precision_config_layer_arg.txt", prefix);
    TRY(io_write_atomic(path, arg, k));
    sprintf(path, "%s_noqdq.onnx", prefix);
    TRY(onnx_model_save(g, path));
    if (own) TRY(io_outset_commit(own, NULL));
done:
    io_outset_free(own);
    ptq_graph_destroy(g);
    free(path);
    free(arg);
    free(names);
    free(scales);
    free(entries);
    return st;
}
