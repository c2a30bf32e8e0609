/* translate.h: what `ptq translate` does: a QDQ model to TensorRT's implicit quantization
 * (quant/translate.h), written as PREFIX_noqdq.onnx, PREFIX_precision_config.json,
 * PREFIX_precision_config_calib.cache and PREFIX_precision_config_layer_arg.txt.
 *
 *   quant_translation tr = {0};
 *   TRY(eng_translate("m.qdq.onnx", "m.qdq", &o, 8601, NULL, &tr));   // tr: counts, scales, fp16 nodes
 *   quant_translation_free(&tr); */
#ifndef PTQ_ENGINE_TRANSLATE_H
#define PTQ_ENGINE_TRANSLATE_H

#include "quant/translate.h"

/* trt_algorithm: io_cache_algorithm() name, NULL for EntropyCalibration2. */
ptq_status eng_translate(const char *model, const char *prefix, const quant_translate_options *o, long trt_version,
                         const char *trt_algorithm, quant_translation *tr);

#endif
