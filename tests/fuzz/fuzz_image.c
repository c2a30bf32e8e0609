/* fuzz_image.c: libFuzzer harness for JPEG and PNG decoding (io/image.c). Each input is
 * decoded with the defaults (EXIF applied) under a 4-megapixel cap; a PNG that decodes is
 * decoded again through libpng's row API only and must give the same pixels, since the
 * fast path promises libpng's output. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FUZZ_PIXELS ((uint64_t)1 << 22)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    io_image a = {0}, b = {0};
    io_image_options opt = io_image_defaults();
    opt.max_pixels = MAX_FUZZ_PIXELS;
    if (io_image_decode(data, size, "fuzz input", &opt, &a) != PTQ_OK) return 0;
    if (a.format == IO_IMAGE_PNG) {
        opt.libpng_only = 1;
        if (io_image_decode(data, size, "fuzz input", &opt, &b) == PTQ_OK &&
            (a.width != b.width || a.height != b.height ||
             memcmp(a.data, b.data, (size_t)a.width * (size_t)a.height * 3) != 0))
            __builtin_trap(); /* the fast PNG path disagrees with libpng */
        io_image_free(&b);
    }
    io_image_free(&a);
    return 0;
}
