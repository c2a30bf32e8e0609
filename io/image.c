/* image.c: JPEG (libjpeg-turbo) and PNG (libpng) decoding with error handlers that
 * return instead of exiting, EXIF orientation, and a pixel budget checked before
 * any allocation. */
#include "image.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */

#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"

#define MAX_FILE_BYTES ((size_t)1 << 31)

io_image_options io_image_defaults(void)
{
    io_image_options o;
    o.apply_exif = 1;
    o.max_pixels = (uint64_t)1 << 28;
    return o;
}

io_image_format io_image_sniff(const uint8_t *buf, size_t len)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff) return IO_IMAGE_JPEG;
    if (len >= 8 && memcmp(buf, png_sig, 8) == 0) return IO_IMAGE_PNG;
    return IO_IMAGE_UNKNOWN;
}

void io_image_free(io_image *img)
{
    if (!img) return;
    free(img->data);
    img->data = NULL;
}

/* ---- EXIF: the Orientation tag (0x0112) of IFD0, bounds-checked ---- */

static unsigned rd16(const uint8_t *p, int le)
{
    return le ? (unsigned)(p[0] | p[1] << 8) : (unsigned)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p, int le)
{
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int exif_orientation(const uint8_t *d, size_t n)
{
    if (n < 14 || memcmp(d, "Exif\0\0", 6) != 0) return 1;
    const uint8_t *t = d + 6;
    size_t tn = n - 6;
    int le;
    if (t[0] == 'I' && t[1] == 'I') le = 1;
    else if (t[0] == 'M' && t[1] == 'M') le = 0;
    else return 1;
    if (rd16(t + 2, le) != 42) return 1;
    uint32_t ifd = rd32(t + 4, le);
    if (ifd > tn || tn - ifd < 2) return 1;
    unsigned count = rd16(t + ifd, le);
    for (unsigned i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        if (e + 12 > tn) return 1;
        if (rd16(t + e, le) == 0x0112 && rd16(t + e + 2, le) == 3) {
            unsigned v = rd16(t + e + 8, le);
            return v >= 1 && v <= 8 ? (int)v : 1;
        }
    }
    return 1;
}

/* Applies EXIF orientation o (2..8) to an RGB image, replacing img->data. */
static ptq_status apply_orientation(io_image *img, int o)
{
    ptq_status st = PTQ_OK;
    int w = img->width, h = img->height, swap = o >= 5;
    int dw = swap ? h : w, dh = swap ? w : h;
    uint8_t *dst = malloc((size_t)dw * (size_t)dh * 3);
    CHECK_ALLOC(dst);
    for (int dy = 0; dy < dh; dy++)
        for (int dx = 0; dx < dw; dx++) {
            int sx, sy;
            switch (o) {
            case 2: sx = w - 1 - dx; sy = dy; break;
            case 3: sx = w - 1 - dx; sy = h - 1 - dy; break;
            case 4: sx = dx; sy = h - 1 - dy; break;
            case 5: sx = dy; sy = dx; break;
            case 6: sx = dy; sy = h - 1 - dx; break;
            case 7: sx = w - 1 - dy; sy = h - 1 - dx; break;
            default: sx = w - 1 - dy; sy = dx; break; /* 8 */
            }
            memcpy(dst + ((size_t)dy * (size_t)dw + (size_t)dx) * 3, img->data + ((size_t)sy * (size_t)w + (size_t)sx) * 3, 3);
        }
    free(img->data);
    img->data = dst;
    img->width = dw;
    img->height = dh;
done:
    return st;
}

/* ---- JPEG ---- */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_on_error(j_common_ptr cinfo)
{
    jpeg_err *e = (jpeg_err *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jump, 1);
}

static void jpeg_on_warning(j_common_ptr cinfo, int level)
{
    /* corrupt-data warnings (level -1) are errors for us: a truncated file must not
     * pass as an image with a grey bottom half */
    if (level < 0) jpeg_on_error(cinfo);
}

static ptq_status decode_jpeg(const uint8_t *buf, size_t len, const char *what, const io_image_options *opt,
                              io_image *out)
{
    struct jpeg_decompress_struct cinfo;
    jpeg_err err;
    uint8_t *volatile pixels = NULL;
    uint8_t *volatile row = NULL;
    volatile ptq_status st = PTQ_OK;
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_on_error;
    err.pub.emit_message = jpeg_on_warning;
    if (setjmp(err.jump)) {
        ptq_error("%s: corrupt JPEG: %s", what, err.msg);
        st = PTQ_ERR_FORMAT;
        goto done;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, buf, (unsigned long)len);
    jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&cinfo, TRUE);
    out->src_channels = cinfo.num_components;
    out->src_bits = cinfo.data_precision;
    if ((uint64_t)cinfo.image_width * cinfo.image_height > opt->max_pixels || cinfo.image_width == 0 ||
        cinfo.image_height == 0) {
        ptq_error("%s: JPEG of %ux%u pixels refused (limit %llu pixels)", what, cinfo.image_width, cinfo.image_height,
                  (unsigned long long)opt->max_pixels);
        st = PTQ_ERR_FORMAT;
        goto done;
    }
    out->exif_orientation = 1;
    for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1) {
            int o = exif_orientation(m->data, m->data_length);
            if (o != 1) out->exif_orientation = o;
        }
    int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    cinfo.dct_method = JDCT_ISLOW;
    jpeg_start_decompress(&cinfo);
    size_t w = cinfo.output_width, h = cinfo.output_height;
    pixels = malloc(w * h * 3);
    row = malloc(w * (size_t)cinfo.output_components);
    if (!pixels || !row) {
        ptq_error("%s: out of memory for %zux%zu image", what, w, h);
        st = PTQ_ERR_NOMEM;
        goto done;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        size_t y = cinfo.output_scanline;
        JSAMPROW rp = row;
        jpeg_read_scanlines(&cinfo, &rp, 1);
        uint8_t *dst = pixels + y * w * 3;
        if (cmyk) { /* Adobe-inverted CMYK, converted as OpenCV does */
            for (size_t x = 0; x < w; x++) {
                int c = row[4 * x], m = row[4 * x + 1], yy = row[4 * x + 2], k = row[4 * x + 3];
                dst[3 * x] = (uint8_t)(k - ((255 - c) * k >> 8));
                dst[3 * x + 1] = (uint8_t)(k - ((255 - m) * k >> 8));
                dst[3 * x + 2] = (uint8_t)(k - ((255 - yy) * k >> 8));
            }
        } else {
            memcpy(dst, row, w * 3);
        }
    }
    jpeg_finish_decompress(&cinfo);
    out->width = (int)w;
    out->height = (int)h;
    out->data = pixels;
    pixels = NULL;
done:
    jpeg_destroy_decompress(&cinfo);
    free(pixels);
    free(row);
    return st;
}

/* ---- PNG ---- */

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    char msg[256];
} png_src;

static void png_read_mem(png_structp png, png_bytep dst, png_size_t n)
{
    png_src *s = png_get_io_ptr(png);
    if (n > s->len - s->pos) png_error(png, "file is truncated");
    memcpy(dst, s->buf + s->pos, n);
    s->pos += n;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static ptq_status decode_png(const uint8_t *buf, size_t len, const char *what, const io_image_options *opt,
                             io_image *out)
{
    png_src src = {buf, len, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = NULL;
    uint8_t *volatile pixels = NULL;
    png_bytep *volatile rows = NULL;
    volatile ptq_status st = PTQ_OK;
    if (!png) {
        ptq_error("%s: out of memory", what);
        return PTQ_ERR_NOMEM;
    }
    info = png_create_info_struct(png);
    if (!info || setjmp(png_jmpbuf(png))) {
        ptq_error("%s: corrupt PNG: %s", what, src.msg[0] ? src.msg : "cannot read");
        st = PTQ_ERR_FORMAT;
        goto done;
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    out->src_channels = png_get_channels(png, info);
    out->src_bits = depth;
    out->exif_orientation = 1;
    if ((uint64_t)w * h > opt->max_pixels || w == 0 || h == 0) {
        ptq_error("%s: PNG of %ux%u pixels refused (limit %llu pixels)", what, (unsigned)w, (unsigned)h,
                  (unsigned long long)opt->max_pixels);
        st = PTQ_ERR_FORMAT;
        goto done;
    }
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);
    if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8) {
        ptq_error("%s: PNG layout not reducible to 8-bit RGB", what);
        st = PTQ_ERR_UNSUPPORTED;
        goto done;
    }
    pixels = malloc((size_t)w * h * 3);
    rows = malloc(sizeof *rows * h);
    if (!pixels || !rows) {
        ptq_error("%s: out of memory for %ux%u image", what, (unsigned)w, (unsigned)h);
        st = PTQ_ERR_NOMEM;
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pixels + (size_t)y * w * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    out->width = (int)w;
    out->height = (int)h;
    out->data = pixels;
    pixels = NULL;
done:
    png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    free(pixels);
    free(rows);
    return st;
}

ptq_status io_image_decode(const uint8_t *buf, size_t len, const char *what, const io_image_options *opt,
                           io_image *out)
{
    ptq_status st = PTQ_OK;
    io_image_options def = io_image_defaults();
    if (!opt) opt = &def;
    memset(out, 0, sizeof *out);
    out->format = io_image_sniff(buf, len);
    switch (out->format) {
    case IO_IMAGE_JPEG: TRY(decode_jpeg(buf, len, what, opt, out)); break;
    case IO_IMAGE_PNG: TRY(decode_png(buf, len, what, opt, out)); break;
    default:
        FAIL(PTQ_ERR_FORMAT, "%s: not a JPEG or PNG image (%s)", what, len == 0 ? "empty file" : "unknown signature");
    }
    if (opt->apply_exif && out->exif_orientation > 1) TRY(apply_orientation(out, out->exif_orientation));
done:
    if (st != PTQ_OK) io_image_free(out);
    return st;
}

ptq_status io_image_load(const char *path, const io_image_options *opt, io_image *out)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    TRY(io_read_file(path, &buf, &len, MAX_FILE_BYTES));
    TRY(io_image_decode(buf, len, path, opt, out));
done:
    free(buf);
    return st;
}

/* ---- PNG writing (for --dump-png) ---- */

static void png_write_file(png_structp png, png_bytep data, png_size_t n)
{
    FILE *fp = png_get_io_ptr(png);
    if (fwrite(data, 1, n, fp) != n) png_error(png, "write failed");
}

static void png_flush_file(png_structp png)
{
    fflush((FILE *)png_get_io_ptr(png));
}

ptq_status io_image_save_png(const char *path, const uint8_t *rgb, int w, int h)
{
    volatile ptq_status st = PTQ_OK;
    io_atomic_file f;
    png_src err = {NULL, 0, 0, {0}};
    png_structp png = NULL;
    png_infop info = NULL;
    int opened = 0;
    if ((st = io_atomic_open(&f, path)) != PTQ_OK) return st;
    opened = 1;
    png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, png_on_error, png_on_warning);
    if (png) info = png_create_info_struct(png);
    if (!png || !info) {
        ptq_error("%s: out of memory", path);
        st = PTQ_ERR_NOMEM;
        goto done;
    }
    if (setjmp(png_jmpbuf(png))) {
        ptq_error("%s: cannot write PNG: %s", path, err.msg);
        st = PTQ_ERR_IO;
        goto done;
    }
    png_set_write_fn(png, f.fp, png_write_file, png_flush_file);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) png_write_row(png, (png_bytep)(rgb + (size_t)y * (size_t)w * 3));
    png_write_end(png, NULL);
done:
    png_destroy_write_struct(&png, &info);
    if (opened) {
        if (st == PTQ_OK) st = io_atomic_commit(&f);
        else io_atomic_abort(&f);
    }
    return st;
}
