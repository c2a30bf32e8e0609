/* image.c: JPEG (libjpeg-turbo) and PNG decoding with error handlers that return
 * instead of exiting, EXIF orientation, and a pixel budget checked before any
 * allocation.
 *
 * PNG has two paths giving the same pixels. The fast path parses the chunks itself,
 * checks every CRC, inflates the whole IDAT stream in one call (libdeflate when built
 * with PTQ_HAVE_LIBDEFLATE, else zlib; libpng inflates row by row, which costs about
 * twice as much) and undoes the row filters with kernels that keep the serial
 * dependency short (libpng's are byte by byte). It takes only non-interlaced files up
 * to 64 MiB of inflated data whose chunks are all well-formed and in order, and hands
 * anything else (interlacing, a CRC or zlib error, a bad filter byte, trailing image
 * data, an unknown critical chunk, ...) to libpng, which then decides and words the
 * error. So the fast path accepts a subset of what libpng accepts. */
#include "image.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */

#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
/* The PNG fast path inflates with libdeflate when built with -DPTQ_HAVE_LIBDEFLATE
 * (and -ldeflate), else with zlib (-lz). */
#if defined(PTQ_HAVE_LIBDEFLATE)
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

#include "io/file.h"
#include "io/png_mem.h"

#define MAX_FILE_BYTES ((size_t)1 << 31)

io_image_options io_image_defaults(void)
{
    io_image_options o;
    o.apply_exif = 1;
    o.max_pixels = (uint64_t)1 << 28;
    o.libpng_only = 0;
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
    if (cmyk) row = malloc(w * (size_t)cinfo.output_components);
    if (!pixels || (cmyk && !row)) {
        ptq_error("%s: out of memory for %zux%zu image", what, w, h);
        st = PTQ_ERR_NOMEM;
        goto done;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        size_t y = cinfo.output_scanline;
        uint8_t *dst = pixels + y * w * 3;
        if (!cmyk) { /* RGB straight into the image, a few rows per call */
            JSAMPROW rp[16];
            size_t k = h - y < 16 ? h - y : 16;
            for (size_t i = 0; i < k; i++) rp[i] = dst + i * w * 3;
            jpeg_read_scanlines(&cinfo, rp, (JDIMENSION)k);
            continue;
        }
        JSAMPROW rp = row; /* Adobe-inverted CMYK, converted as OpenCV does */
        jpeg_read_scanlines(&cinfo, &rp, 1);
        for (size_t x = 0; x < w; x++) {
            int c = row[4 * x], m = row[4 * x + 1], yy = row[4 * x + 2], k = row[4 * x + 3];
            dst[3 * x] = (uint8_t)(k - ((255 - c) * k >> 8));
            dst[3 * x + 1] = (uint8_t)(k - ((255 - m) * k >> 8));
            dst[3 * x + 2] = (uint8_t)(k - ((255 - yy) * k >> 8));
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

void io_png_read_mem(png_structp png, png_bytep dst, png_size_t n)
{
    io_png_src *s = png_get_io_ptr(png);
    if (n > s->len - s->pos) png_error(png, "file is truncated");
    memcpy(dst, s->buf + s->pos, n);
    s->pos += n;
}

void io_png_on_error(png_structp png, png_const_charp msg)
{
    io_png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

void io_png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

#define PNG_CHUNK_MALLOC_MAX ((png_alloc_size_t)16 << 20)

static ptq_status decode_png_libpng(const uint8_t *buf, size_t len, const char *what, const io_image_options *opt,
                                    io_image *out)
{
    /* every chunk must fit in the file: libpng allocates a chunk's declared length before
     * reading it (found by fuzzing: a 186-byte file whose tEXt chunk claims 1.9 GB) */
    for (size_t pos = 8; pos + 8 <= len;) {
        uint32_t n = (uint32_t)buf[pos] << 24 | (uint32_t)buf[pos + 1] << 16 | (uint32_t)buf[pos + 2] << 8 | buf[pos + 3];
        if ((size_t)n > len - pos - 8) {
            ptq_error("%s: corrupt PNG: chunk '%.4s' claims %u bytes, %zu are left", what, (const char *)buf + pos + 4, n,
                      len - pos - 8);
            return PTQ_ERR_FORMAT;
        }
        if (!memcmp(buf + pos + 4, "IEND", 4)) break;
        pos += 12 + (size_t)n;
    }
    io_png_src src = {buf, len, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, io_png_on_error, io_png_on_warning);
    png_infop info = NULL;
    uint8_t *volatile pixels = NULL;
    png_bytep *volatile rows = NULL;
    volatile ptq_status st = PTQ_OK;
    if (!png) {
        ptq_error("%s: out of memory starting the PNG decoder", what);
        return PTQ_ERR_NOMEM;
    }
    info = png_create_info_struct(png);
    if (!info || setjmp(png_jmpbuf(png))) {
        ptq_error("%s: corrupt PNG: %s", what, src.msg[0] ? src.msg : "cannot read");
        st = PTQ_ERR_FORMAT;
        goto done;
    }
    png_set_read_fn(png, &src, io_png_read_mem);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    /* what one ancillary chunk (text, ICC profile) may allocate, decompressed: libpng would
     * otherwise trust a chunk's 31-bit length and allocate it before reading (found by
     * fuzzing: a 186-byte file asking for 1.9 GB) */
    png_set_chunk_malloc_max(png, PNG_CHUNK_MALLOC_MAX);
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

/* ---- PNG fast path ---- */

/* libpng's default limit on a chunk it allocates (PNG_USER_CHUNK_MALLOC_MAX): longer chunks go to libpng */
#define PNG_FAST_MAX_CHUNK 8000000u
/* The fast path holds the whole inflated stream next to the pixels; above this size
 * libpng's row-by-row decoding keeps the memory at about one image. */
#define PNG_FAST_MAX_RAW ((size_t)64 << 20)

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint32_t png_crc(const uint8_t *p, size_t n)
{
#if defined(PTQ_HAVE_LIBDEFLATE)
    return libdeflate_crc32(0, p, n);
#else
    return (uint32_t)crc32(0L, p, (uInt)n);
#endif
}

/* Inflates the zlib stream in[0..in_len) into exactly out_len bytes; 0 only when the stream
 * is valid (Adler-32 included), ends exactly at in_len and fills out exactly. */
static int png_inflate(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len)
{
#if defined(PTQ_HAVE_LIBDEFLATE)
    struct libdeflate_decompressor *dec = libdeflate_alloc_decompressor();
    size_t got_in = 0, got_out = 0;
    if (!dec) return -1;
    enum libdeflate_result r = libdeflate_zlib_decompress_ex(dec, in, in_len, out, out_len, &got_in, &got_out);
    libdeflate_free_decompressor(dec);
    return r == LIBDEFLATE_SUCCESS && got_in == in_len && got_out == out_len ? 0 : -1;
#else
    z_stream z;
    int rc;
    if (in_len > 0xffffffffu || out_len > 0xffffffffu) return -1;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) return -1;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)in_len;
    z.next_out = out;
    z.avail_out = (uInt)out_len;
    rc = inflate(&z, Z_FINISH);
    inflateEnd(&z);
    return rc == Z_STREAM_END && z.avail_in == 0 && z.avail_out == 0 ? 0 : -1;
#endif
}

/* The Paeth predictor (PNG spec 9.4): the neighbour nearest to a + b - c, ties to a, then
 * b. The reference for paeth_split and the SSE2 version below. */
static inline int paeth_ref(int a, int b, int c)
{
    int p = b - c, q = a - c;
    int pa = abs(p), pb = abs(q), pc = abs(p + q);
    return (pa <= pb) & (pa <= pc) ? a : (pb <= pc ? b : c);
}

/* The same predictor with everything that does not depend on a computed apart, so the
 * serial chain from one pixel to the next is short (and without branches): with
 * d = b - c and t = a - c, a wins unless lo < t < lo + 3|d| (lo = d when d < 0, else
 * -2d); otherwise b wins when 2t >= -d (d >= 0) or 2t <= -d (d < 0), else c.
 * Equal to paeth_ref() for every a, b, c in 0..255 (checked exhaustively). */
static inline int paeth_split(int a, int b, int c)
{
    int d = b - c, s = d >> 31, ad = (d ^ s) - s;
    int lo = (d & s) | (-2 * d & ~s);
    unsigned width = (unsigned)(3 * ad - 1 + (ad == 0));
    int kb = ((ad >> 1) ^ ~s) + 1; /* d >= 0: b when t >= kb; d < 0: b when t < kb */
    int t = a - c;
    int r = ((t - kb) ^ s) >= 0 ? b : c;
    return (unsigned)(t - lo - 1) < width ? r : a;
}

#if defined(__GNUC__)
#define PNG_INLINE static inline __attribute__((always_inline))
#else
#define PNG_INLINE static inline
#endif

/* Undoing the filters: dst[i] = src[i] + predictor, where the predictor reads the
 * unfiltered left neighbour (a), the previous row (prev: b above, c above left). dst is
 * either src itself (in place) or a separate row; every src byte is read before the
 * dst byte of the same index is written, and never again after. The left neighbours
 * stay in registers (a[], c[]): reading them back from dst would put a store-to-load
 * forward on the serial dependency from one pixel to the next. Called with a constant
 * bpp, so the channel loops unroll. */
PNG_INLINE void unfilter_sub(uint8_t *dst, const uint8_t *src, size_t n, size_t bpp)
{
    uint8_t a[8];
#pragma GCC unroll 8
    for (size_t k = 0; k < bpp; k++) dst[k] = a[k] = src[k];
    for (size_t i = bpp; i < n; i += bpp)
#pragma GCC unroll 8
        for (size_t k = 0; k < bpp; k++) dst[i + k] = a[k] = (uint8_t)(src[i + k] + a[k]);
}

PNG_INLINE void unfilter_avg(uint8_t *dst, const uint8_t *src, const uint8_t *prev, size_t n, size_t bpp)
{
    uint8_t a[8];
#pragma GCC unroll 8
    for (size_t k = 0; k < bpp; k++) dst[k] = a[k] = (uint8_t)(src[k] + (prev[k] >> 1));
    for (size_t i = bpp; i < n; i += bpp)
#pragma GCC unroll 8
        for (size_t k = 0; k < bpp; k++) dst[i + k] = a[k] = (uint8_t)(src[i + k] + ((a[k] + prev[i + k]) >> 1));
}

PNG_INLINE void unfilter_paeth(uint8_t *dst, const uint8_t *src, const uint8_t *prev, size_t n, size_t bpp)
{
    uint8_t a[8], c[8];
#pragma GCC unroll 8
    for (size_t k = 0; k < bpp; k++) { /* a = c = 0: the predictor is b */
        dst[k] = a[k] = (uint8_t)(src[k] + prev[k]);
        c[k] = prev[k];
    }
    for (size_t i = bpp; i < n; i += bpp)
#pragma GCC unroll 8
        for (size_t k = 0; k < bpp; k++) {
            int b = prev[i + k];
            dst[i + k] = a[k] = (uint8_t)(src[i + k] + paeth_split(a[k], b, c[k]));
            c[k] = (uint8_t)b;
        }
}

#if defined(__SSE2__)
/* Paeth for 3- and 4-byte pixels with SSE2 (part of x86-64): one pixel per step, its
 * channels in 16-bit lanes, the predictor chosen as in libpng's SSE2 filters. Loads and
 * stores touch only the row's bytes (it may end right after the pixel); a 3-byte pixel
 * is assembled in a register, not through a partly written stack slot, whose reload
 * would stall on store forwarding. */
static inline __m128i px_load(const uint8_t *p, size_t bpp, int room4)
{
    uint32_t v;
    if (bpp == 4 || room4) memcpy(&v, p, 4);
    else v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    return _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)v), _mm_setzero_si128());
}

static inline __m128i abs16(__m128i x)
{
    return _mm_max_epi16(x, _mm_sub_epi16(_mm_setzero_si128(), x));
}

static inline __m128i pick16(__m128i mask, __m128i yes, __m128i no)
{
    return _mm_or_si128(_mm_and_si128(mask, yes), _mm_andnot_si128(mask, no));
}

PNG_INLINE void unfilter_paeth_sse2(uint8_t *dst, const uint8_t *src, const uint8_t *prev, size_t n, size_t bpp)
{
    __m128i a = _mm_setzero_si128(), c = a;
    const __m128i low = _mm_set1_epi16(0xff);
    for (size_t i = 0; i < n; i += bpp) {
        int room4 = i + 4 <= n;
        __m128i b = px_load(prev + i, bpp, room4), x = px_load(src + i, bpp, room4);
        __m128i p = _mm_sub_epi16(b, c), q = _mm_sub_epi16(a, c);
        __m128i pa = abs16(p), pb = abs16(q), pc = abs16(_mm_add_epi16(p, q));
        __m128i least = _mm_min_epi16(pc, _mm_min_epi16(pa, pb));
        __m128i pred = pick16(_mm_cmpeq_epi16(least, pa), a, pick16(_mm_cmpeq_epi16(least, pb), b, c));
        a = _mm_and_si128(_mm_add_epi16(x, pred), low);
        uint32_t v = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(a, a));
        if (bpp == 4) {
            memcpy(dst + i, &v, 4);
        } else {
            dst[i] = (uint8_t)v;
            dst[i + 1] = (uint8_t)(v >> 8);
            dst[i + 2] = (uint8_t)(v >> 16);
        }
        c = b;
    }
}
#endif

/* Two consecutive Paeth rows at once, as a wavefront: pixel k of the first row (r0)
 * depends on pixel k-1 of the same row and on the row above, so it can be computed
 * together with pixel k-1 of the second row (r1), whose neighbours above are pixels
 * k-1 and k-2 of r0, computed in the two steps before. Two independent pixels per
 * step halve the serial chain per pixel. The rows' bytes are read and written as in
 * png_unfilter (dst0/dst1 may be src0/src1). */
PNG_INLINE void unfilter_paeth2(uint8_t *dst0, const uint8_t *src0, uint8_t *dst1, const uint8_t *src1,
                                const uint8_t *prev, size_t n, size_t bpp)
{
    uint8_t a0[8], a1[8], up1[8], c0[8]; /* r0 at i - bpp, r1 at i - 2 bpp, r0 at i - 2 bpp, prev at i - bpp */
    /* pixel 0 of r0: a = c = 0, the predictor is b */
#pragma GCC unroll 8
    for (size_t k = 0; k < bpp; k++) {
        dst0[k] = a0[k] = (uint8_t)(src0[k] + prev[k]);
        c0[k] = prev[k];
        a1[k] = 0;
        up1[k] = 0; /* r0 left of pixel 0 */
    }
    for (size_t i = bpp; i < n; i += bpp)
#pragma GCC unroll 8
        for (size_t k = 0; k < bpp; k++) {
            int b0 = prev[i + k];
            uint8_t v0 = (uint8_t)(src0[i + k] + paeth_split(a0[k], b0, c0[k]));
            /* r1 at i - bpp: above it is r0 at i - bpp (a0), above left r0 at i - 2 bpp (up1) */
            uint8_t v1 = (uint8_t)(src1[i - bpp + k] + paeth_split(a1[k], a0[k], up1[k]));
            dst0[i + k] = v0;
            dst1[i - bpp + k] = v1;
            up1[k] = a0[k];
            a0[k] = v0;
            a1[k] = v1;
            c0[k] = (uint8_t)b0;
        }
    /* the last pixel of r1 */
#pragma GCC unroll 8
    for (size_t k = 0; k < bpp; k++) dst1[n - bpp + k] = (uint8_t)(src1[n - bpp + k] + paeth_split(a1[k], a0[k], up1[k]));
}

#if defined(__SSE2__)
/* The same with SSE2 for 3- and 4-byte pixels: the low half of a register holds the
 * pixel of r0, the high half the pixel of r1. */
static inline __m128i paeth_sse2(__m128i a, __m128i b, __m128i c)
{
    __m128i p = _mm_sub_epi16(b, c), q = _mm_sub_epi16(a, c);
    __m128i pa = abs16(p), pb = abs16(q), pc = abs16(_mm_add_epi16(p, q));
    __m128i least = _mm_min_epi16(pc, _mm_min_epi16(pa, pb));
    return pick16(_mm_cmpeq_epi16(least, pa), a, pick16(_mm_cmpeq_epi16(least, pb), b, c));
}

static inline void px_store(uint8_t *p, uint32_t v, size_t bpp)
{
    if (bpp == 4) {
        memcpy(p, &v, 4);
    } else {
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
        p[2] = (uint8_t)(v >> 16);
    }
}

PNG_INLINE void unfilter_paeth2_sse2(uint8_t *dst0, const uint8_t *src0, uint8_t *dst1, const uint8_t *src1,
                                     const uint8_t *prev, size_t n, size_t bpp)
{
    const __m128i low = _mm_set1_epi16(0xff), zero = _mm_setzero_si128();
    /* pixel 0 of r0 */
    __m128i b0 = px_load(prev, bpp, bpp + 4 <= n);
    __m128i acc = _mm_and_si128(_mm_add_epi16(px_load(src0, bpp, bpp + 4 <= n), b0), low); /* [r0 px 0 | 0] */
    __m128i c = b0, last = zero;                                                         /* last: r0 one pixel back */
    px_store(dst0, (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(acc, acc)), bpp);
    for (size_t i = bpp; i < n; i += bpp) {
        int room4 = i + 4 <= n;
        __m128i bp = px_load(prev + i, bpp, room4);
        __m128i x = _mm_unpacklo_epi64(px_load(src0 + i, bpp, room4), px_load(src1 + i - bpp, bpp, 1));
        __m128i b = _mm_unpacklo_epi64(bp, acc);        /* above: prev at i | r0 at i - bpp */
        __m128i cc = _mm_unpacklo_epi64(c, last);       /* above left: prev at i - bpp | r0 at i - 2 bpp */
        __m128i r = _mm_and_si128(_mm_add_epi16(x, paeth_sse2(acc, b, cc)), low);
        __m128i packed = _mm_packus_epi16(r, r);
        px_store(dst0 + i, (uint32_t)_mm_cvtsi128_si32(packed), bpp);
        px_store(dst1 + i - bpp, (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(packed, 4)), bpp);
        last = acc;
        acc = r;
        c = bp;
    }
    /* the last pixel of r1: a, b, c from the high half of acc, r0's last pixel, the one before */
    __m128i a1 = _mm_unpackhi_epi64(acc, zero);
    __m128i x1 = px_load(src1 + n - bpp, bpp, 0);
    __m128i r1 = _mm_and_si128(_mm_add_epi16(x1, paeth_sse2(a1, acc, last)), low);
    px_store(dst1 + n - bpp, (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(r1, r1)), bpp);
}
#endif

/* Two consecutive Paeth rows (see unfilter_paeth2). */
static void png_unfilter_paeth2(uint8_t *dst0, const uint8_t *src0, uint8_t *dst1, const uint8_t *src1,
                                const uint8_t *prev, size_t n, size_t bpp)
{
    switch (bpp) {
#if defined(__SSE2__)
    case 3: unfilter_paeth2_sse2(dst0, src0, dst1, src1, prev, n, 3); break;
    case 4: unfilter_paeth2_sse2(dst0, src0, dst1, src1, prev, n, 4); break;
#else
    case 3: unfilter_paeth2(dst0, src0, dst1, src1, prev, n, 3); break;
    case 4: unfilter_paeth2(dst0, src0, dst1, src1, prev, n, 4); break;
#endif
    case 1: unfilter_paeth2(dst0, src0, dst1, src1, prev, n, 1); break;
    case 2: unfilter_paeth2(dst0, src0, dst1, src1, prev, n, 2); break;
    case 6: unfilter_paeth2(dst0, src0, dst1, src1, prev, n, 6); break;
    default: unfilter_paeth2(dst0, src0, dst1, src1, prev, n, 8); break;
    }
}

#define UNFILTER_BY_BPP(F, ...)                     \
    switch (bpp) {                                  \
    case 1: F(__VA_ARGS__, 1); break;               \
    case 2: F(__VA_ARGS__, 2); break;               \
    case 3: F(__VA_ARGS__, 3); break;               \
    case 4: F(__VA_ARGS__, 4); break;               \
    case 6: F(__VA_ARGS__, 6); break;               \
    default: F(__VA_ARGS__, 8); break;              \
    }

/* Undoes the filter of one row of n bytes (a whole number of pixels) from src into dst
 * (the same row, or another); prev is the previous row, already unfiltered (zeros for
 * the first row); bpp bytes per complete pixel: 1 (below 8 bits per pixel), 2, 3, 4, 6
 * or 8. -1 for a filter type other than 0 to 4. */
static int png_unfilter(int type, uint8_t *dst, const uint8_t *src, const uint8_t *prev, size_t n, size_t bpp)
{
    switch (type) {
    case 0:
        if (dst != src) memcpy(dst, src, n);
        return 0;
    case 1: UNFILTER_BY_BPP(unfilter_sub, dst, src, n); return 0;
    case 2:
        for (size_t i = 0; i < n; i++) dst[i] = (uint8_t)(src[i] + prev[i]);
        return 0;
    case 3: UNFILTER_BY_BPP(unfilter_avg, dst, src, prev, n); return 0;
    case 4:
#if defined(__SSE2__)
        if (bpp == 3 || bpp == 4) { /* constant sizes, so the pixel loads and stores inline */
            if (bpp == 3) unfilter_paeth_sse2(dst, src, prev, n, 3);
            else unfilter_paeth_sse2(dst, src, prev, n, 4);
            return 0;
        }
#endif
        UNFILTER_BY_BPP(unfilter_paeth, dst, src, prev, n);
        return 0;
    default: return -1;
    }
}

/* One unfiltered row of the stored layout to 8-bit RGB, as libpng's transforms in
 * decode_png_libpng give it: palette looked up (alpha dropped), gray 1/2/4-bit scaled to
 * 0-255 and replicated, 16-bit samples cut to their high byte, alpha dropped. */
static void png_row_to_rgb(const uint8_t *r, uint8_t *dst, uint32_t w, int color, int depth, const uint8_t *palette)
{
    uint32_t x;
    switch (color) {
    case PNG_COLOR_TYPE_GRAY:
        if (depth == 8) {
            for (x = 0; x < w; x++) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = r[x];
        } else if (depth == 16) {
            for (x = 0; x < w; x++) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = r[2 * x];
        } else {
            int per = 8 / depth, mask = (1 << depth) - 1, mul = 255 / mask;
            for (x = 0; x < w; x++) {
                int shift = 8 - depth * (int)(x % (uint32_t)per + 1);
                uint8_t v = (uint8_t)(((r[x / (uint32_t)per] >> shift) & mask) * mul);
                dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = v;
            }
        }
        break;
    case PNG_COLOR_TYPE_RGB: /* 16-bit only: 8-bit rows are used in place */
        for (x = 0; x < w; x++) {
            dst[3 * x] = r[6 * x];
            dst[3 * x + 1] = r[6 * x + 2];
            dst[3 * x + 2] = r[6 * x + 4];
        }
        break;
    case PNG_COLOR_TYPE_PALETTE: {
        int per = 8 / depth, mask = (1 << depth) - 1;
        for (x = 0; x < w; x++) {
            int idx = depth == 8 ? r[x] : (r[x / (uint32_t)per] >> (8 - depth * (int)(x % (uint32_t)per + 1))) & mask;
            memcpy(dst + 3 * x, palette + 3 * idx, 3);
        }
        break;
    }
    case PNG_COLOR_TYPE_GRAY_ALPHA: {
        size_t step = depth == 16 ? 4 : 2;
        for (x = 0; x < w; x++) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = r[step * x];
        break;
    }
    default: { /* RGBA */
        size_t step = depth == 16 ? 8 : 4, s2 = depth == 16 ? 2 : 1;
        for (x = 0; x < w; x++) {
            dst[3 * x] = r[step * x];
            dst[3 * x + 1] = r[step * x + s2];
            dst[3 * x + 2] = r[step * x + 2 * s2];
        }
        break;
    }
    }
}

static int is_chunk_letter(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* 1 with *out filled, 0 when libpng must decide (see the top of the file). */
static int decode_png_fast(const uint8_t *buf, size_t len, const io_image_options *opt, io_image *out)
{
    uint8_t palette[256 * 3];
    const uint8_t *idat_first = NULL;
    uint8_t *idat = NULL, *raw = NULL, *pixels = NULL, *zero_row = NULL;
    size_t idat_len = 0, n_idat = 0, pos;
    int have_plte = 0, have_iend = 0, idat_done = 0, ok = 0;
    if (len < 8 + 25 || be32(buf + 8) != 13 || memcmp(buf + 12, "IHDR", 4) != 0) return 0;
    if (png_crc(buf + 12, 17) != be32(buf + 29)) return 0;
    uint32_t w = be32(buf + 16), h = be32(buf + 20);
    int depth = buf[24], color = buf[25];
    if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu || (uint64_t)w * h > opt->max_pixels) return 0;
    if (buf[26] != 0 || buf[27] != 0 || buf[28] != 0) return 0; /* compression, filter method, interlace */
    int channels;
    switch (color) {
    case PNG_COLOR_TYPE_GRAY: channels = 1; if (depth != 1 && depth != 2 && depth != 4 && depth != 8 && depth != 16) return 0; break;
    case PNG_COLOR_TYPE_PALETTE: channels = 1; if (depth != 1 && depth != 2 && depth != 4 && depth != 8) return 0; break;
    case PNG_COLOR_TYPE_RGB: channels = 3; if (depth != 8 && depth != 16) return 0; break;
    case PNG_COLOR_TYPE_GRAY_ALPHA: channels = 2; if (depth != 8 && depth != 16) return 0; break;
    case PNG_COLOR_TYPE_RGB_ALPHA: channels = 4; if (depth != 8 && depth != 16) return 0; break;
    default: return 0;
    }
    size_t bits = (size_t)channels * (size_t)depth, rowbytes = ((size_t)w * bits + 7) / 8, bpp = bits < 8 ? 1 : bits / 8;
    size_t stride = rowbytes + 1, raw_len = stride * h;
    if (raw_len > PNG_FAST_MAX_RAW) return 0;
    pos = 8 + 25;
    while (!have_iend) {
        if (len - pos < 12) return 0;
        uint32_t n = be32(buf + pos);
        const uint8_t *type = buf + pos + 4;
        if (n > PNG_FAST_MAX_CHUNK || n > len - pos - 12) return 0;
        if (!is_chunk_letter(type[0]) || !is_chunk_letter(type[1]) || !is_chunk_letter(type[2]) || !is_chunk_letter(type[3]))
            return 0;
        if (png_crc(type, (size_t)n + 4) != be32(buf + pos + 8 + n)) return 0;
        if (memcmp(type, "IDAT", 4) == 0) {
            if (idat_done || (color == PNG_COLOR_TYPE_PALETTE && !have_plte)) return 0;
            if (!n_idat) idat_first = buf + pos;
            n_idat++;
            idat_len += n;
        } else {
            if (n_idat) idat_done = 1;
            if (memcmp(type, "IEND", 4) == 0) {
                if (!n_idat || n != 0) return 0;
                have_iend = 1;
            } else if (memcmp(type, "PLTE", 4) == 0) {
                if (color != PNG_COLOR_TYPE_PALETTE || have_plte || n_idat || n == 0 || n % 3 != 0 || n > 256 * 3) return 0;
                uint32_t entries = n / 3, max_entries = 1u << depth;
                if (entries > max_entries) entries = max_entries; /* libpng drops the extra entries */
                memset(palette, 0, sizeof palette);                /* indices past the palette are black, as in libpng */
                memcpy(palette, type + 4, (size_t)entries * 3);
                have_plte = 1;
            } else if (!(type[0] & 0x20)) {
                return 0; /* IHDR again or an unknown critical chunk */
            }
        }
        pos += 12 + (size_t)n;
    }
    /* the IDAT payloads, joined when there are several */
    const uint8_t *in = idat_first + 8;
    if (n_idat > 1) {
        idat = malloc(idat_len ? idat_len : 1);
        if (!idat) goto done;
        size_t p = (size_t)(idat_first - buf), k = 0;
        for (size_t i = 0; i < n_idat; i++) {
            uint32_t n = be32(buf + p);
            memcpy(idat + k, buf + p + 8, n);
            k += n;
            p += 12 + (size_t)n;
        }
        in = idat;
    }
    /* a window declared smaller than 32K must cover the whole image, as libpng's
     * row-by-row inflate (which holds only that window) would need */
    if (idat_len < 2 || (in[0] & 0x0f) != 8 || (in[0] >> 4) > 7) goto done;
    if ((in[0] >> 4) < 7 && ((size_t)1 << ((in[0] >> 4) + 8)) < raw_len) goto done;
    raw = malloc(raw_len);
    zero_row = calloc(rowbytes, 1);
    if (!raw || !zero_row) goto done;
    if (png_inflate(in, idat_len, raw, raw_len) != 0) goto done;
    pixels = malloc((size_t)w * h * 3);
    if (!pixels) goto done;
    /* 8-bit RGB rows unfilter straight into the pixels; other layouts in place, then convert */
    int direct = color == PNG_COLOR_TYPE_RGB && depth == 8;
    for (uint32_t y = 0; y < h;) {
        uint8_t *row = raw + (size_t)y * stride, *dst = direct ? pixels + (size_t)y * rowbytes : row + 1;
        const uint8_t *prev = y == 0 ? zero_row : direct ? dst - rowbytes : row + 1 - stride;
        if (row[0] == 4 && y + 1 < h && row[stride] == 4 && rowbytes >= 2 * bpp) { /* two Paeth rows */
            uint8_t *dst1 = direct ? dst + rowbytes : row + stride + 1;
            png_unfilter_paeth2(dst, row + 1, dst1, row + stride + 1, prev, rowbytes, bpp);
            if (!direct) {
                png_row_to_rgb(dst, pixels + (size_t)y * w * 3, w, color, depth, palette);
                png_row_to_rgb(dst1, pixels + (size_t)(y + 1) * w * 3, w, color, depth, palette);
            }
            y += 2;
            continue;
        }
        if (png_unfilter(row[0], dst, row + 1, prev, rowbytes, bpp) != 0) goto done;
        if (!direct) png_row_to_rgb(dst, pixels + (size_t)y * w * 3, w, color, depth, palette);
        y++;
    }
    out->width = (int)w;
    out->height = (int)h;
    out->data = pixels;
    out->src_channels = channels;
    out->src_bits = depth;
    out->exif_orientation = 1;
    pixels = NULL;
    ok = 1;
done:
    free(idat);
    free(raw);
    free(zero_row);
    free(pixels);
    return ok;
}

static ptq_status decode_png(const uint8_t *buf, size_t len, const char *what, const io_image_options *opt,
                             io_image *out)
{
    if (!opt->libpng_only && decode_png_fast(buf, len, opt, out)) return PTQ_OK;
    return decode_png_libpng(buf, len, what, opt, out);
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
    if (fwrite(data, 1, n, fp) != n) png_error(png, strerror(errno ? errno : EIO)); /* "No space left on device" */
}

static void png_flush_file(png_structp png)
{
    fflush((FILE *)png_get_io_ptr(png));
}

ptq_status io_image_save_png(const char *path, const uint8_t *rgb, int w, int h)
{
    volatile ptq_status st = PTQ_OK;
    io_atomic_file f;
    io_png_src err = {NULL, 0, 0, {0}};
    png_structp png = NULL;
    png_infop info = NULL;
    int opened = 0;
    if ((st = io_atomic_open(&f, path)) != PTQ_OK) return st;
    opened = 1;
    png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, io_png_on_error, io_png_on_warning);
    if (png) info = png_create_info_struct(png);
    if (!png || !info) {
        ptq_error("%s: out of memory starting the PNG encoder", path);
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
