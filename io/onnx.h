/* onnx.h: ONNX files <-> ptq_graph (the only place that sees protobuf-c's ONNX types).
 *
 *   ptq_graph *g = NULL;
 *   TRY(onnx_model_load("model.onnx", &g));   // caller owns g: ptq_graph_destroy(g)
 *   TRY(onnx_model_save(g, "out.onnx"));       // temp file + rename
 *
 * Load reads initializers from raw_data and from the typed fields (float_data,
 * int32_data, int64_data, double_data, uint64_data, string_data...), and external
 * data files beside the model (location/offset/length, bounds-checked). Save writes
 * all tensor data inline as raw_data and keeps every node, attribute, initializer,
 * name, doc string, metadata entry, value_info and opset import. Untrusted input:
 * every failure is one line naming the file and the reason. */
#ifndef PTQ_IO_ONNX_H
#define PTQ_IO_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/graph.h"
#include "runtime/tensor.h"

ptq_status onnx_model_load(const char *path, ptq_graph **out);
/* base_dir: folder for external data (NULL: external data is an error); what: name used in messages. */
ptq_status onnx_model_load_buffer(const uint8_t *buf, size_t len, const char *base_dir, const char *what,
                                  ptq_graph **out);
ptq_status onnx_model_save(const ptq_graph *g, const char *path);
/* Serialises to a malloc'd buffer (caller frees). */
ptq_status onnx_model_serialize(const ptq_graph *g, uint8_t **buf, size_t *len);

/* Reads a serialized TensorProto file (ONNX test data input_0.pb). *name may be NULL. */
ptq_status onnx_tensor_load(const char *path, ptq_tensor *out, char **name);

#endif
