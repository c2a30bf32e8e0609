/* test_image_png.c: PNG decoding, the fast path (io/image.c: own chunk reader, one-call
 * inflate, row filters) against libpng's row API (io_image_options.libpng_only) and
 * against pixels computed here from the samples written. PNGs are made here: rows
 * filtered by this file's own encoder (every filter type, random per row, runs of Paeth
 * rows for the two-row kernels), deflate "stored" blocks, CRCs and Adler-32 computed
 * here. Every colour type and bit depth, widths 1 to 40 (3- and 4-byte pixels reach
 * the SSE2 kernels), palettes shorter than the indices, tRNS, split IDATs; then every
 * truncation and a flipped bit in every byte of one file, a bad filter byte, and chunk
 * orders libpng refuses: both paths must give the same status and message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/image.h"
#include "runtime/status.h"
#include "tests/test.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

/* ---- a small PNG writer ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf_t;

static void put(buf_t *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put32(buf_t *b, uint32_t v)
{
    uint8_t q[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(b, q, 4);
}

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static void chunk(buf_t *b, const char *type, const uint8_t *d, size_t n)
{
    buf_t t = {0};
    put(&t, type, 4);
    if (n) put(&t, d, n);
    put32(b, (uint32_t)n);
    put(b, t.p, t.n);
    put32(b, crc32_of(t.p, t.n));
    free(t.p);
}

/* zlib stream of stored blocks */
static void zlib_stored(buf_t *z, const uint8_t *d, size_t n)
{
    uint32_t s1 = 1, s2 = 0;
    uint8_t hdr[2] = {0x78, 0x01};
    put(z, hdr, 2);
    size_t i = 0;
    do {
        size_t k = n - i < 65535 ? n - i : 65535;
        uint8_t bh[5] = {(uint8_t)(i + k == n), (uint8_t)k, (uint8_t)(k >> 8), (uint8_t)~k, (uint8_t)(~k >> 8)};
        put(z, bh, 5);
        if (k) put(z, d + i, k);
        i += k;
    } while (i < n);
    for (size_t j = 0; j < n; j++) {
        s1 = (s1 + d[j]) % 65521;
        s2 = (s2 + s1) % 65521;
    }
    put32(z, s2 << 16 | s1);
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

typedef struct {
    int w, h, depth, color, trns, split, palette_entries;
    int filter; /* 0-4: every row; 5: random per row; 6: Paeth with a few others */
    int bad_row; /* 1 + the row whose filter byte is written as 5 (0: none) */
} spec;

static int channels_of(int color)
{
    return color == 0 ? 1 : color == 2 ? 3 : color == 3 ? 1 : color == 4 ? 2 : 4;
}

/* Makes the PNG of `s` with random samples; *expect gets the RGB pixels libpng's
 * transforms give (palette looked up, gray scaled and replicated, high bytes, no alpha). */
static buf_t make_png(const spec *s, uint8_t **expect)
{
    int ch = channels_of(s->color), bits = ch * s->depth;
    size_t rowbytes = ((size_t)s->w * (size_t)bits + 7) / 8, bpp = bits < 8 ? 1 : (size_t)bits / 8;
    uint8_t *rows = malloc(rowbytes * (size_t)s->h + 1), *filtered = malloc((rowbytes + 1) * (size_t)s->h + 1);
    uint8_t pal[256 * 3];
    int entries = s->palette_entries ? s->palette_entries : 1 << s->depth;
    for (int i = 0; i < 256 * 3; i++) pal[i] = (uint8_t)rnd();
    for (size_t i = 0; i < rowbytes * (size_t)s->h; i++) rows[i] = (uint8_t)rnd();
    /* smooth runs now and then, so the predictors also see small differences */
    if (rnd() % 2)
        for (size_t i = 0; i < rowbytes * (size_t)s->h; i++) rows[i] = (uint8_t)(i / 7 + rnd() % 3);
    *expect = malloc((size_t)s->w * (size_t)s->h * 3 + 1);
    for (int y = 0; y < s->h; y++) {
        const uint8_t *r = rows + (size_t)y * rowbytes;
        for (int x = 0; x < s->w; x++) {
            uint8_t *e = *expect + ((size_t)y * (size_t)s->w + (size_t)x) * 3;
            int step = s->depth == 16 ? 2 : 1;
            if (s->color == 0 || s->color == 3) {
                int v;
                if (s->depth >= 8) v = r[(size_t)x * (size_t)step];
                else v = (r[x * s->depth / 8] >> (8 - s->depth - (x * s->depth) % 8)) & ((1 << s->depth) - 1);
                if (s->color == 3) {
                    for (int k = 0; k < 3; k++) e[k] = v < entries ? pal[3 * v + k] : 0;
                } else {
                    if (s->depth < 8) v = v * (255 / ((1 << s->depth) - 1));
                    e[0] = e[1] = e[2] = (uint8_t)v;
                }
            } else if (s->color == 4) {
                e[0] = e[1] = e[2] = r[(size_t)x * 2 * (size_t)step];
            } else {
                for (int k = 0; k < 3; k++) e[k] = r[((size_t)x * (size_t)ch + (size_t)k) * (size_t)step];
            }
        }
    }
    for (int y = 0; y < s->h; y++) {
        const uint8_t *r = rows + (size_t)y * rowbytes, *up = y ? r - rowbytes : NULL;
        uint8_t *f = filtered + (size_t)y * (rowbytes + 1);
        int t = s->filter <= 4 ? s->filter : s->filter == 5 ? (int)(rnd() % 5) : (rnd() % 4 ? 4 : (int)(rnd() % 4));
        f[0] = (uint8_t)(s->bad_row == y + 1 ? 5 : t);
        for (size_t i = 0; i < rowbytes; i++) {
            int a = i >= bpp ? r[i - bpp] : 0, b = up ? up[i] : 0, c = up && i >= bpp ? up[i - bpp] : 0;
            int pred = t == 0 ? 0 : t == 1 ? a : t == 2 ? b : t == 3 ? (a + b) >> 1 : paeth(a, b, c);
            f[1 + i] = (uint8_t)(r[i] - pred);
        }
    }
    buf_t png = {0}, z = {0};
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    put(&png, sig, 8);
    uint8_t ihdr[13] = {0};
    for (int k = 0; k < 4; k++) {
        ihdr[k] = (uint8_t)((uint32_t)s->w >> (24 - 8 * k));
        ihdr[4 + k] = (uint8_t)((uint32_t)s->h >> (24 - 8 * k));
    }
    ihdr[8] = (uint8_t)s->depth;
    ihdr[9] = (uint8_t)s->color;
    chunk(&png, "IHDR", ihdr, 13);
    chunk(&png, "tEXt", (const uint8_t *)"Comment\0test", 12);
    if (s->color == 3) chunk(&png, "PLTE", pal, (size_t)entries * 3);
    if (s->trns) {
        uint8_t t[6] = {0, 1, 0, 2, 0, 3};
        chunk(&png, "tRNS", t, s->color == 0 ? 2 : s->color == 2 ? 6 : s->color == 3 ? 3 : 0);
    }
    zlib_stored(&z, filtered, (rowbytes + 1) * (size_t)s->h);
    if (s->split) {
        for (size_t i = 0; i < z.n; i += (size_t)s->split)
            chunk(&png, "IDAT", z.p + i, z.n - i < (size_t)s->split ? z.n - i : (size_t)s->split);
    } else {
        chunk(&png, "IDAT", z.p, z.n);
    }
    chunk(&png, "IEND", NULL, 0);
    free(z.p);
    free(rows);
    free(filtered);
    return png;
}

/* Decodes with both paths; 1 when status, message and pixels agree. */
static int same_both_ways(const uint8_t *p, size_t n, ptq_status *st_out, io_image *fast_out)
{
    io_image_options o = io_image_defaults();
    io_image a, b;
    char msg[600];
    ptq_status sa = io_image_decode(p, n, "x.png", &o, &a);
    snprintf(msg, sizeof msg, "%s", sa != PTQ_OK ? ptq_last_error() : "");
    o.libpng_only = 1;
    ptq_status sb = io_image_decode(p, n, "x.png", &o, &b);
    int same = sa == sb && (sa != PTQ_OK ? strcmp(msg, ptq_last_error()) == 0
                                         : a.width == b.width && a.height == b.height && a.src_bits == b.src_bits &&
                                               a.src_channels == b.src_channels &&
                                               memcmp(a.data, b.data, (size_t)a.width * (size_t)a.height * 3) == 0);
    if (!same) printf("  fast: status %d '%s'; libpng: status %d '%s'\n", sa, msg, sb, sb != PTQ_OK ? ptq_last_error() : "");
    if (st_out) *st_out = sa;
    if (fast_out && sa == PTQ_OK) *fast_out = a;
    else io_image_free(&a);
    io_image_free(&b);
    return same;
}

static const int depths[5][6] = {{1, 2, 4, 8, 16, 0}, {0}, {8, 16, 0}, {1, 2, 4, 8, 0}, {8, 16, 0}};

TEST(every_layout_and_filter_equals_libpng_and_the_samples)
{
    static const int colors[] = {0, 2, 3, 4, 6};
    int cases = 0;
    for (int ci = 0; ci < 5; ci++) {
        int color = colors[ci];
        const int *ds = color == 6 ? depths[4] : depths[color];
        for (int di = 0; ds[di]; di++)
            for (int filter = 0; filter <= 6; filter++)
                for (int w = 1; w <= 40; w += (w < 10 ? 1 : 7))
                    for (int h = 1; h <= 5; h += 2) {
                        spec s = {w, h, ds[di], color, (int)(rnd() % 3 == 0), (int)(rnd() % 3 == 0 ? 1 + rnd() % 40 : 0), 0, filter, 0};
                        if (color == 3 && rnd() % 4 == 0) s.palette_entries = 1 + (int)(rnd() % (1u << s.depth));
                        uint8_t *expect;
                        buf_t png = make_png(&s, &expect);
                        ptq_status st;
                        io_image img = {0};
                        int same = same_both_ways(png.p, png.n, &st, &img);
                        if (!same || st != PTQ_OK || img.width != w || img.height != h ||
                            memcmp(img.data, expect, (size_t)w * (size_t)h * 3) != 0)
                            TEST_FAILF("colour %d, %d-bit, filter %d, %dx%d, trns %d, split %d, palette %d: %s", color,
                                       s.depth, filter, w, h, s.trns, s.split, s.palette_entries,
                                       !same ? "paths differ" : st != PTQ_OK ? ptq_last_error() : "pixels differ from the samples");
                        if (st == PTQ_OK) io_image_free(&img);
                        free(expect);
                        free(png.p);
                        cases++;
                    }
    }
    EXPECT(cases > 1000);
}

TEST(wide_paeth_rows_hit_the_sse2_kernels)
{
    static const int colors[] = {2, 6, 0, 4};
    for (int i = 0; i < 4; i++)
        for (int w = 60; w <= 70; w++) {
            spec s = {w, 6, 8, colors[i], 0, 0, 0, 6, 0};
            uint8_t *expect;
            buf_t png = make_png(&s, &expect);
            io_image img = {0};
            ptq_status st;
            if (!same_both_ways(png.p, png.n, &st, &img) || st != PTQ_OK || memcmp(img.data, expect, (size_t)w * 6 * 3) != 0)
                TEST_FAILF("colour %d, width %d", colors[i], w);
            if (st == PTQ_OK) io_image_free(&img);
            free(expect);
            free(png.p);
        }
}

TEST(every_truncation_and_bit_flip_fails_or_decodes_as_libpng_does)
{
    spec s = {7, 3, 8, 2, 1, 9, 0, 5, 0};
    uint8_t *expect;
    buf_t png = make_png(&s, &expect);
    int bad = 0;
    for (size_t n = 0; n < png.n; n++)
        if (!same_both_ways(png.p, n, NULL, NULL)) {
            TEST_FAILF("truncated to %zu of %zu bytes", n, png.n);
            if (++bad > 5) break;
        }
    uint8_t *c = malloc(png.n);
    for (size_t i = 8; i < png.n && bad <= 5; i++) {
        memcpy(c, png.p, png.n);
        c[i] ^= (uint8_t)(1u << (rnd() % 8));
        if (!same_both_ways(c, png.n, NULL, NULL)) {
            TEST_FAILF("bit flipped in byte %zu", i);
            bad++;
        }
    }
    free(c);
    free(expect);
    free(png.p);
}

/* Rebuilds `png` (made by make_png: IHDR, tEXt, [PLTE], [tRNS], IDAT..., IEND) with chunk
 * `drop` left out and an extra chunk inserted before index `at`. */
static buf_t rechunk(const buf_t *png, int drop, int at, const char *type, const uint8_t *d, size_t n)
{
    buf_t out = {0};
    put(&out, png->p, 8);
    size_t pos = 8;
    for (int i = 0; pos + 12 <= png->n; i++) {
        uint32_t len = (uint32_t)png->p[pos] << 24 | (uint32_t)png->p[pos + 1] << 16 | (uint32_t)png->p[pos + 2] << 8 | png->p[pos + 3];
        if (i == at && type) chunk(&out, type, d, n);
        if (i != drop) put(&out, png->p + pos, 12 + len);
        pos += 12 + len;
    }
    return out;
}

TEST(chunk_orders_and_bad_filters_go_to_libpng)
{
    spec s = {9, 4, 8, 3, 0, 0, 0, 5, 0};
    uint8_t *expect;
    buf_t png = make_png(&s, &expect); /* IHDR tEXt PLTE IDAT IEND */
    uint8_t junk[3] = {1, 2, 3};
    struct {
        int drop, at;
        const char *type;
        const char *what;
    } cases[] = {
        {4, -1, NULL, "no IEND"},          {2, -1, NULL, "no PLTE"},          {-1, 1, "ABCD", "unknown critical chunk"},
        {-1, 1, "ab1d", "bad chunk name"}, {-1, 4, "PLTE", "PLTE after IDAT"}, {-1, 4, "tEXt", "text between IDAT and IEND"},
        {-1, 4, "IDAT", "extra IDAT data"}, {-1, 3, "IEND", "IEND before IDAT"}, {-1, 1, "IHDR", "IHDR twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        buf_t m = rechunk(&png, cases[i].drop, cases[i].at, cases[i].type, junk, sizeof junk);
        if (!same_both_ways(m.p, m.n, NULL, NULL)) TEST_FAILF("%s", cases[i].what);
        free(m.p);
    }
    /* a filter byte of 5 (the stream and every CRC valid), in the first, a middle and the last row,
     * also where the row would pair with a Paeth row */
    for (int row = 1; row <= 4; row++)
        for (int filter = 0; filter <= 4; filter += 4) {
            spec g = {6, 4, 8, 2, 0, 0, 0, filter, row};
            uint8_t *e2;
            buf_t p2 = make_png(&g, &e2);
            ptq_status st;
            EXPECT(same_both_ways(p2.p, p2.n, &st, NULL));
            if (st == PTQ_OK) TEST_FAILF("filter byte 5 in row %d accepted", row);
            free(e2);
            free(p2.p);
        }
    free(expect);
    free(png.p);
}

int main(void)
{
    RUN(every_layout_and_filter_equals_libpng_and_the_samples);
    RUN(wide_paeth_rows_hit_the_sse2_kernels);
    RUN(every_truncation_and_bit_flip_fails_or_decodes_as_libpng_does);
    RUN(chunk_orders_and_bad_filters_go_to_libpng);
    return test_summary();
}
