/* fuzz_npy.c: libFuzzer harness for the .npy reader (io/npy.c): header parsing, dtype,
 * shape and data length checks. A file that decodes has exactly nbytes of data. */
#include <stddef.h>
#include <stdint.h>

#include "io/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ptq_tensor t;
    if (npy_decode(data, size, "fuzz input", &t) != PTQ_OK) return 0;
    size_t n = ptq_tensor_nbytes(&t);
    volatile uint8_t sink = 0;
    if (n) sink = ((const uint8_t *)t.data)[n - 1]; /* the whole buffer is there */
    (void)sink;
    ptq_tensor_free(&t);
    return 0;
}
