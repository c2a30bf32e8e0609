/* cache.h: TensorRT calibration caches (quantization spec §4).
 *
 *   TRT-8601-EntropyCalibration2
 *   x: 3c010a14                       <- name: hex of the float32 bits of scale = amax / 127
 *
 *   io_cache_entry e[] = {{"x", 0.0078f}, ...};
 *   TRY(io_cache_write("m.cache", 8601, "EntropyCalibration2", e, n));   // sorted, atomic
 *   TRY(io_cache_read("m.cache", &entries, &n, &version, algo, sizeof algo));
 * The reader takes what TensorRT writes: any version and algorithm, hex with or without
 * leading zeros or 0x, CRLF, no final newline; names may hold spaces, ':' and '/' (split
 * at the last ": "); a bad line is refused with its number. */
#ifndef PTQ_IO_CACHE_H
#define PTQ_IO_CACHE_H

#include <stddef.h>

#include "runtime/status.h"

typedef struct {
    char *name;
    float scale;
} io_cache_entry;

ptq_status io_cache_write(const char *path, long version, const char *algorithm, const io_cache_entry *e, int n);
ptq_status io_cache_read(const char *path, io_cache_entry **out, int *n, long *version, char *algorithm, size_t cap);
void io_cache_free(io_cache_entry *e, int n);

#endif
