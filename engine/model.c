/* model.c: see model.h. */
#include "engine/model.h"

#include <string.h>

#include "io/onnx.h"

ptq_status eng_model_load(const char *path, ptq_graph **out, quant_fp16_widened *half)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    quant_fp16_widened w;
    *out = NULL;
    if (half) memset(half, 0, sizeof *half);
    TRY(onnx_model_load(path, &g));
    if ((st = quant_fp16_widen(g, &w)) != PTQ_OK) {
        ptq_error_prefix("%s: float16 model: ", path);
        goto done;
    }
    if (half) *half = w;
    else quant_fp16_widened_free(&w);
    *out = g;
    g = NULL;
done:
    ptq_graph_destroy(g);
    return st;
}
