/* fuzz_cache.c: libFuzzer harness for the TensorRT calibration cache reader (io/cache.c).
 * Every entry of a cache that parses has a name and a finite non-negative scale. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "io/cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    io_cache_entry *e = NULL;
    int n = 0;
    long version = 0;
    char algorithm[64];
    if (io_cache_parse(data, size, "fuzz input", &e, &n, &version, algorithm, sizeof algorithm) != PTQ_OK) return 0;
    for (int i = 0; i < n; i++)
        if (!e[i].name || !e[i].name[0] || !isfinite(e[i].scale) || e[i].scale < 0) __builtin_trap();
    io_cache_free(e, n);
    return 0;
}
