/* model.h: the one way engine/ loads a model to calibrate, quantize or compare it.
 *
 *   ptq_graph *g = NULL;
 *   quant_fp16_widened half;                    // or NULL when the caller needs no record
 *   TRY(eng_model_load("m.onnx", &g, &half));   // g: the model, or its float32 twin
 *   ...
 *   quant_fp16_widened_free(&half); ptq_graph_destroy(g);
 *
 * A model that stores weights in float16 or computes in float16 is loaded as its float32 twin
 * (quant_fp16_widen: exact widening, the float16 weights' Casts removed), so that calibration
 * runs ptq's float32 kernels on the model's own tensors and Q/DQ placement sees its own
 * layers; quantize writes the interface back in float16 from the record (eng_quantize_write).
 * `ptq run` runs a float16 model as it is instead (quant_fp16_upcast: outputs rounded). */
#ifndef PTQ_ENGINE_MODEL_H
#define PTQ_ENGINE_MODEL_H

#include "quant/fp16.h"

/* Loads path into *out (the caller owns it); *half (may be NULL) says what was widened. */
ptq_status eng_model_load(const char *path, ptq_graph **out, quant_fp16_widened *half);

#endif
