/* png_mem.h: libpng reading from memory, shared by the image decoder (io/image.c) and the mask
 * reader (io/labels.c); internal to io/.
 *
 *   io_png_src src = {buf, len, 0, {0}};
 *   png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, io_png_on_error, io_png_on_warning);
 *   ... png_set_read_fn(png, &src, io_png_read_mem); an error longjmps with its text in src.msg
 */
#ifndef PTQ_IO_PNG_MEM_H
#define PTQ_IO_PNG_MEM_H

#include <png.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    char msg[256]; /* libpng's error, for the caller's message */
} io_png_src;

void io_png_read_mem(png_structp png, png_bytep dst, png_size_t n); /* "file is truncated" past the end */
void io_png_on_error(png_structp png, png_const_charp msg);         /* keeps msg, then longjmps */
void io_png_on_warning(png_structp png, png_const_charp msg);       /* ignored */

#endif
