/* fuzz_mask.c: libFuzzer harness for a segmenter's mask PNGs (io/labels.c, io_mask_decode).
 * Each input is decoded under a 4-megapixel cap; a mask that decodes has width * height bytes,
 * every one of them read (a short or uninitialised buffer shows under ASan/MSan). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *m = NULL;
    int w = 0, h = 0;
    if (io_mask_decode(data, size, "fuzz input", (uint64_t)1 << 22, &m, &w, &h) != PTQ_OK) return 0;
    if (!m || w < 1 || h < 1) __builtin_trap(); /* success promises a mask */
    unsigned sum = 0;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) sum += m[i];
    free(m);
    return (int)(sum & 0);
}
