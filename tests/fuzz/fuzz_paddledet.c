/* fuzz_paddledet.c: libFuzzer harness for a text detector's label list (io/labels_poly.c,
 * io_poly_labels_parse: "path<TAB>[{"transcription", "points"}, ...]" lines). A list that parses
 * holds at least one image, names sorted and distinct, every polygon 4 points or more of finite
 * coordinates, every point read (a short buffer shows under ASan/MSan), each image found again by
 * its name. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    io_poly_labels l = {0};
    if (io_poly_labels_parse((const char *)data, size, "fuzz input", &l) != PTQ_OK) {
        io_poly_labels_free(&l);
        return 0;
    }
    if (l.n_img < 1) __builtin_trap();
    double sum = 0;
    for (int i = 0; i < l.n_img; i++) {
        io_image_polys *p = &l.img[i];
        if (!p->name[0] || (i && strcmp(l.img[i - 1].name, p->name) >= 0)) __builtin_trap();
        if (io_poly_labels_find(&l, p->name) != p) __builtin_trap();
        size_t at = 0;
        for (int k = 0; k < p->n; k++) {
            if (p->npt[k] < 4 || (p->care[k] != 0 && p->care[k] != 1)) __builtin_trap();
            for (int j = 0; j < 2 * p->npt[k]; j++, at++) {
                if (!isfinite(p->xy[at])) __builtin_trap();
                sum += p->xy[at];
            }
        }
    }
    io_poly_labels_free(&l);
    return (int)(sum * 0);
}
