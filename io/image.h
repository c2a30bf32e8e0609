/* image.h: JPEG and PNG decoding to 8-bit RGB, recognised by content, never by extension.
 *
 *   io_image img = {0};
 *   io_image_options o = io_image_defaults();      // EXIF orientation applied
 *   TRY(io_image_load("a.jpg", &o, &img));          // img.data: h*w*3 bytes, RGB, row-major
 *   ...; io_image_free(&img);
 *
 * JPEG: baseline and progressive; grayscale, RGB/YCbCr, CMYK and YCCK (Adobe
 * inverted CMYK converted as OpenCV does: R = C*K/255 on the inverted values).
 * PNG: palette, gray, gray+alpha, RGB, RGBA, 1/2/4/8/16-bit, interlaced; tRNS and
 * alpha are dropped (no compositing), 16-bit samples keep their high byte, as
 * OpenCV's imread(IMREAD_COLOR) does. Gray images are replicated to three channels.
 * Files are untrusted: a header promising more than max_pixels is refused before
 * any allocation; truncated or corrupt data is an error naming the file, never a crash. */
#ifndef PTQ_IO_IMAGE_H
#define PTQ_IO_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

typedef enum { IO_IMAGE_UNKNOWN = 0, IO_IMAGE_JPEG, IO_IMAGE_PNG } io_image_format;

typedef struct {
    int apply_exif;       /* rotate/flip by the EXIF Orientation tag (default 1) */
    uint64_t max_pixels;  /* refuse larger images (default 1 << 28) */
    int libpng_only;      /* decode PNG with libpng's row API only, never the fast path (0; tests
                           * compare the two) */
} io_image_options;

typedef struct {
    int width, height;    /* after EXIF orientation */
    uint8_t *data;        /* height * width * 3, RGB; owned: io_image_free */
    io_image_format format;
    int src_channels;     /* channels in the file (1 gray, 2 gray+alpha, 3, 4 RGBA or CMYK) */
    int src_bits;         /* bits per sample in the file */
    int exif_orientation; /* 1..8, 1 when absent */
} io_image;

io_image_options io_image_defaults(void);
/* Sniffs the first bytes: JPEG (FF D8 FF) or PNG signature. */
io_image_format io_image_sniff(const uint8_t *buf, size_t len);
ptq_status io_image_load(const char *path, const io_image_options *opt, io_image *out);
ptq_status io_image_decode(const uint8_t *buf, size_t len, const char *what, const io_image_options *opt,
                           io_image *out);
void io_image_free(io_image *img);
/* Writes an 8-bit RGB image (w*h*3 bytes) as PNG, atomically. */
ptq_status io_image_save_png(const char *path, const uint8_t *rgb, int w, int h);

#endif
