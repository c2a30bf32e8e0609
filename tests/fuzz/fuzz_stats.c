/* fuzz_stats.c: libFuzzer harness for the statistics file reader (io/stats.c). The
 * format has one encoding per content (shortest varints, checksum, no trailing bytes),
 * so a file that decodes must encode back to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    io_stats s;
    uint8_t *buf = NULL;
    size_t len = 0;
    io_stats_init(&s);
    if (io_stats_decode(data, size, "fuzz input", &s) != PTQ_OK) return 0;
    if (io_stats_encode(&s, &buf, &len) != PTQ_OK || len != size || memcmp(buf, data, size) != 0)
        __builtin_trap(); /* decode accepted what encode would not write */
    free(buf);
    io_stats_free(&s);
    return 0;
}
