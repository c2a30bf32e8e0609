/* ranges.h: calibrated ranges as JSON, for people and scripts:
 *
 *   {"format": "ptq-ranges", "version": 1, "method": "entropy",
 *    "tensors": {"x": {"amax": 2.64, "scale": 0.0208}, ...}}
 *
 * Tensors are written sorted byte-wise by name; floats with 9 significant digits
 * (float32 round-trips exactly). Written to a temporary file and renamed. */
#ifndef PTQ_IO_RANGES_H
#define PTQ_IO_RANGES_H

#include "runtime/status.h"

typedef struct {
    char *name;
    float amax;
} io_range;

ptq_status io_ranges_write_json(const char *path, const char *method, const io_range *ranges, int n);
/* The precision config of a translated QDQ model (quantization spec §6), the file
 * NVIDIA's qdq_translator writes: {"int8_tensor_scales": {name: scale, ...},
 * "fp16_nodes": [name, ...]}, scales sorted by name, 9 significant digits. */
ptq_status io_precision_config_write(const char *path, const char *const *names, const float *scales, int n,
                                     const char *const *fp16_nodes, int n_fp16);
/* Reads a file written by io_ranges_write_json; *out is malloc'd (free with io_ranges_free). */
ptq_status io_ranges_read_json(const char *path, io_range **out, int *n);
void io_ranges_free(io_range *r, int n);

#endif
