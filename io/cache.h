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
 * at the last ": "); a bad line is refused with its number.
 *
 * The header's algorithm must be the one of the calibrator that reads the cache, or TensorRT
 * calibrates again: `trtexec --calib` builds with an EntropyCalibration2 calibrator, so every
 * cache ptq writes says EntropyCalibration2 whatever method computed its scales, unless the
 * user names another (io_cache_algorithm). The version must be the user's TensorRT. */
#ifndef PTQ_IO_CACHE_H
#define PTQ_IO_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

typedef struct {
    char *name;
    float scale;
} io_cache_entry;

/* The algorithm every ptq cache header carries by default (spec §4). */
#define IO_CACHE_DEFAULT_ALGORITHM "EntropyCalibration2"

/* The header algorithm for a user's choice: NULL gives IO_CACHE_DEFAULT_ALGORITHM; a name of
 * TensorRT's calibrators (EntropyCalibration2, EntropyCalibration, MinMaxCalibration,
 * LegacyCalibration) gives itself; anything else gives NULL. */
const char *io_cache_algorithm(const char *name);

ptq_status io_cache_write(const char *path, long version, const char *algorithm, const io_cache_entry *e, int n);
ptq_status io_cache_read(const char *path, io_cache_entry **out, int *n, long *version, char *algorithm, size_t cap);
/* The same from memory (len bytes of text); what names the source in messages. */
ptq_status io_cache_parse(const uint8_t *text, size_t len, const char *what, io_cache_entry **out, int *n,
                          long *version, char *algorithm, size_t cap);
void io_cache_free(io_cache_entry *e, int n);

#endif
