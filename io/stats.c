/* stats.c: calibration statistics files (format and rules in stats.h). */
#include "io/stats.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"

#define MAGIC "PTQSTATS"
#define MAGIC_LEN 8
#define MAX_PREP_LEN (1u << 16)
#define MAX_NAME_LEN 65536u
#define MAX_TENSORS (1u << 15)    /* a calib_stats is 32 KiB: 1 GiB at most for a crafted file */
#define MAX_SHARDS (1u << 20)
#define MAX_FILE_BYTES ((size_t)1 << 32)
#define FNV_PRIME 0x100000001b3ull
#define R_MIN 0x1p-24
#define R_MAX 0x1p128

uint64_t io_fnv1a64(const void *data, size_t len, uint64_t h)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

ptq_status io_hash_file(const char *path, uint64_t *out)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) FAIL(PTQ_ERR_IO, "%s: %s", path, strerror(errno));
    buf = malloc(1 << 20);
    CHECK_ALLOC(buf);
    uint64_t h = IO_FNV1A64_INIT;
    size_t n;
    while ((n = fread(buf, 1, 1 << 20, f)) > 0) h = io_fnv1a64(buf, n, h);
    if (ferror(f)) FAIL(PTQ_ERR_IO, "%s: read error", path);
    *out = h;
done:
    free(buf);
    if (f) fclose(f);
    return st;
}

void io_stats_init(io_stats *s)
{
    memset(s, 0, sizeof *s);
}

void io_stats_free(io_stats *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_tensors; i++) {
        free(s->tensors[i].name);
        calib_stats_destroy(s->tensors[i].stats);
    }
    free(s->tensors);
    free(s->shards);
    free(s->ids);
    free(s->preprocess);
    io_stats_init(s);
}

ptq_status io_stats_set_preprocess(io_stats *s, const char *text)
{
    ptq_status st = PTQ_OK;
    size_t len = text ? strlen(text) : 0;
    if (len > MAX_PREP_LEN) FAIL(PTQ_ERR_ARG, "statistics: preprocessing text of %zu bytes (at most %u)", len, MAX_PREP_LEN);
    char *copy = malloc(len + 1);
    CHECK_ALLOC(copy);
    memcpy(copy, text ? text : "", len + 1);
    free(s->preprocess);
    s->preprocess = copy;
done:
    return st;
}

static int has_shard(const io_stats *s, uint64_t h)
{
    for (int i = 0; i < s->n_shards; i++)
        if (s->shards[i] == h) return 1;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

ptq_status io_stats_set_images(io_stats *s, const uint64_t *ids, uint64_t n)
{
    ptq_status st = PTQ_OK;
    uint64_t *copy = NULL;
    if (s->n_shards > 0) FAIL(PTQ_ERR_ARG, "statistics: image ids on statistics with version-1 image lists");
    if (n > (uint64_t)(MAX_FILE_BYTES / 8)) FAIL(PTQ_ERR_ARG, "statistics: %llu images", (unsigned long long)n);
    copy = malloc(sizeof *copy * (size_t)(n ? n : 1));
    CHECK_ALLOC(copy);
    if (n) memcpy(copy, ids, sizeof *copy * (size_t)n);
    qsort(copy, (size_t)n, sizeof *copy, cmp_u64);
    free(s->ids);
    s->ids = copy;
    s->n_images = n;
    copy = NULL;
done:
    free(copy);
    return st;
}

ptq_status io_stats_add_shard(io_stats *s, uint64_t list_hash)
{
    ptq_status st = PTQ_OK;
    if (s->ids) FAIL(PTQ_ERR_ARG, "statistics: a version-1 image list on statistics with image ids");
    if (has_shard(s, list_hash)) FAIL(PTQ_ERR_ARG, "statistics: image list %016llx added twice", (unsigned long long)list_hash);
    if ((unsigned)s->n_shards >= MAX_SHARDS) FAIL(PTQ_ERR_ARG, "statistics: more than %u shards", MAX_SHARDS);
    uint64_t *p = realloc(s->shards, sizeof *p * ((size_t)s->n_shards + 1));
    CHECK_ALLOC(p);
    s->shards = p;
    s->shards[s->n_shards++] = list_hash;
done:
    return st;
}

int io_stats_find(const io_stats *s, const char *name)
{
    for (int i = 0; i < s->n_tensors; i++)
        if (!strcmp(s->tensors[i].name, name)) return i;
    return -1;
}

/* Appends without the duplicate check (the decoder checks all names at once). */
static ptq_status append(io_stats *s, const char *name, size_t len, const calib_stats *src)
{
    ptq_status st = PTQ_OK;
    char *copy = NULL;
    calib_stats *c = NULL;
    if (len == 0 || len > MAX_NAME_LEN) FAIL(PTQ_ERR_ARG, "statistics: tensor name of %zu bytes (1 to %u)", len, MAX_NAME_LEN);
    if ((unsigned)s->n_tensors >= MAX_TENSORS) FAIL(PTQ_ERR_ARG, "statistics: more than %u tensors", MAX_TENSORS);
    if (s->n_tensors == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        io_stats_tensor *t = realloc(s->tensors, sizeof *t * (size_t)cap);
        CHECK_ALLOC(t);
        s->tensors = t;
        s->cap = cap;
    }
    copy = malloc(len + 1);
    c = calib_stats_create();
    CHECK_ALLOC(copy);
    CHECK_ALLOC(c);
    memcpy(copy, name, len);
    copy[len] = '\0';
    *c = *src;
    s->tensors[s->n_tensors].name = copy;
    s->tensors[s->n_tensors].stats = c;
    s->n_tensors++;
    copy = NULL;
    c = NULL;
done:
    free(copy);
    calib_stats_destroy(c);
    return st;
}

ptq_status io_stats_add(io_stats *s, const char *name, const calib_stats *st_)
{
    if (name && io_stats_find(s, name) >= 0) {
        ptq_error("statistics: tensor '%s' added twice", name);
        return PTQ_ERR_ARG;
    }
    return append(s, name ? name : "", name ? strlen(name) : 0, st_);
}

/* ---- invariants ---- */

static int add_ok(uint64_t a, uint64_t b, uint64_t *sum)
{
    if (a > UINT64_MAX - b) return 0;
    *sum = a + b;
    return 1;
}

ptq_status io_stats_validate(const calib_stats *s, const char *what)
{
    ptq_status st = PTQ_OK;
    uint64_t special, finite, total = 0;
    if (!add_ok(s->nan, s->pinf, &special) || !add_ok(special, s->ninf, &special) || special > s->count)
        FAIL(PTQ_ERR_FORMAT, "%s: %llu NaN + %llu +Inf + %llu -Inf exceed the %llu values counted", what,
             (unsigned long long)s->nan, (unsigned long long)s->pinf, (unsigned long long)s->ninf,
             (unsigned long long)s->count);
    finite = s->count - special;
    for (int b = 0; b < CALIB_BINS; b++)
        if (!add_ok(total, s->hist[b], &total)) FAIL(PTQ_ERR_FORMAT, "%s: histogram total overflows", what);
    if (total != finite)
        FAIL(PTQ_ERR_FORMAT, "%s: histogram holds %llu values, %llu were finite", what, (unsigned long long)total,
             (unsigned long long)finite);
    if (s->zeros > finite || s->zeros > s->hist[0])
        FAIL(PTQ_ERR_FORMAT, "%s: %llu zeros but %llu finite values and %llu in the first bin", what,
             (unsigned long long)s->zeros, (unsigned long long)finite, (unsigned long long)s->hist[0]);
    if (finite == 0) {
        if (!(s->min == INFINITY && s->max == -INFINITY && s->amax == 0.0f && s->range == 0.0))
            FAIL(PTQ_ERR_FORMAT, "%s: no finite value, yet min %g, max %g, amax %g, range %g", what, (double)s->min,
                 (double)s->max, (double)s->amax, s->range);
        return PTQ_OK;
    }
    if (!isfinite(s->min) || !isfinite(s->max) || !(s->min <= s->max))
        FAIL(PTQ_ERR_FORMAT, "%s: min %g and max %g of finite values", what, (double)s->min, (double)s->max);
    float want = fabsf(s->min) > fabsf(s->max) ? fabsf(s->min) : fabsf(s->max);
    if (!(s->amax == want)) /* NaN-safe */
        FAIL(PTQ_ERR_FORMAT, "%s: amax %.9g, but min %.9g and max %.9g", what, (double)s->amax, (double)s->min, (double)s->max);
    int e;
    double R = s->range, amax = (double)s->amax;
    if (!(R >= R_MIN && R <= R_MAX) || frexp(R, &e) != 0.5)
        FAIL(PTQ_ERR_FORMAT, "%s: histogram range %g is not a power of two in [2^-24, 2^128]", what, R);
    if (!(amax <= R) || (R > R_MIN && R > 2.0 * amax))
        FAIL(PTQ_ERR_FORMAT, "%s: histogram range %g does not fit amax %.9g (amax <= R <= max(2^-24, 2 amax))", what, R, amax);
    /* nothing lies above amax's bin (bin b starts at b R / CALIB_BINS, exact) */
    double top = floor(amax * CALIB_BINS / R);
    int last = top >= CALIB_BINS - 1 ? CALIB_BINS - 1 : (int)top;
    for (int b = last + 1; b < CALIB_BINS; b++)
        if (s->hist[b]) FAIL(PTQ_ERR_FORMAT, "%s: histogram bin %d counts values above amax %.9g", what, b, amax);
done:
    return st;
}

/* ---- encoding ---- */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int failed;
} wbuf;

static void put(wbuf *b, const void *data, size_t n)
{
    if (b->failed) return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap - b->len < n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_u32(wbuf *b, uint32_t v)
{
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 4);
}

static void put_u64(wbuf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 8);
}

static void put_f32(wbuf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}

static void put_f64(wbuf *b, double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    put_u64(b, u);
}

static void put_varint(wbuf *b, uint64_t v)
{
    uint8_t x[10];
    int n = 0;
    do {
        x[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) x[n] |= 0x80;
        n++;
    } while (v);
    put(b, x, (size_t)n);
}

ptq_status io_stats_encode(const io_stats *s, uint8_t **buf, size_t *len)
{
    ptq_status st = PTQ_OK;
    wbuf b = {0};
    const char *prep = s->preprocess ? s->preprocess : "";
    size_t plen = strlen(prep);
    if (plen > MAX_PREP_LEN) FAIL(PTQ_ERR_ARG, "statistics: preprocessing text of %zu bytes", plen);
    int v1 = s->n_shards > 0; /* statistics read from a version-1 file stay version 1 */
    if (v1 && s->ids) FAIL(PTQ_ERR_ARG, "statistics: both image lists (version 1) and image ids");
    if (!v1 && !s->ids && s->n_images) FAIL(PTQ_ERR_ARG, "statistics: %llu images but no image ids", (unsigned long long)s->n_images);
    put(&b, MAGIC, MAGIC_LEN);
    put_u32(&b, v1 ? 1 : IO_STATS_VERSION);
    put_u32(&b, 0);
    put_u64(&b, s->model_hash);
    put_u32(&b, (uint32_t)plen);
    put(&b, prep, plen);
    if (v1) {
        put_u32(&b, (uint32_t)s->n_shards);
        for (int i = 0; i < s->n_shards; i++) put_u64(&b, s->shards[i]);
        put_u64(&b, s->n_images);
    } else {
        put_u64(&b, s->n_images);
        for (uint64_t i = 0; i < s->n_images; i++) put_u64(&b, s->ids[i]);
    }
    put_u32(&b, (uint32_t)s->n_tensors);
    for (int i = 0; i < s->n_tensors; i++) {
        const calib_stats *t = s->tensors[i].stats;
        size_t nlen = strlen(s->tensors[i].name);
        uint32_t nbins = CALIB_BINS;
        while (nbins > 0 && t->hist[nbins - 1] == 0) nbins--;
        put_u32(&b, (uint32_t)nlen);
        put(&b, s->tensors[i].name, nlen);
        put_u64(&b, t->count);
        put_u64(&b, t->nan);
        put_u64(&b, t->pinf);
        put_u64(&b, t->ninf);
        put_u64(&b, t->zeros);
        put_f32(&b, t->min);
        put_f32(&b, t->max);
        put_f32(&b, t->amax);
        put_f64(&b, t->range);
        put_u32(&b, nbins);
        for (uint32_t j = 0; j < nbins; j++) put_varint(&b, t->hist[j]);
    }
    if (!b.failed) put_u64(&b, io_fnv1a64(b.p, b.len, IO_FNV1A64_INIT));
    if (b.failed) FAIL(PTQ_ERR_NOMEM, "statistics: out of memory encoding %d tensors", s->n_tensors);
    *buf = b.p;
    *len = b.len;
    b.p = NULL;
done:
    free(b.p);
    return st;
}

/* ---- decoding ---- */

typedef struct {
    const uint8_t *p;
    size_t len, pos;
} rbuf;

static int get(rbuf *b, size_t n, const uint8_t **out)
{
    if (n > b->len - b->pos) return 0;
    *out = b->p + b->pos;
    b->pos += n;
    return 1;
}

static uint64_t load_le(const uint8_t *x, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | x[i];
    return v;
}

static int get_u32(rbuf *b, uint32_t *v)
{
    const uint8_t *x;
    if (!get(b, 4, &x)) return 0;
    *v = (uint32_t)load_le(x, 4);
    return 1;
}

static int get_u64(rbuf *b, uint64_t *v)
{
    const uint8_t *x;
    if (!get(b, 8, &x)) return 0;
    *v = load_le(x, 8);
    return 1;
}

static int get_f32(rbuf *b, float *f)
{
    uint32_t u;
    if (!get_u32(b, &u)) return 0;
    memcpy(f, &u, 4);
    return 1;
}

static int get_f64(rbuf *b, double *f)
{
    uint64_t u;
    if (!get_u64(b, &u)) return 0;
    memcpy(f, &u, 8);
    return 1;
}

/* LEB128, at most 10 bytes, no bits beyond 64, shortest form: 1 ok, 0 truncated, -1 bad. */
static int get_varint(rbuf *b, uint64_t *v)
{
    uint64_t r = 0;
    for (int i = 0; i < 10; i++) {
        const uint8_t *x;
        if (!get(b, 1, &x)) return 0;
        uint64_t part = *x & 0x7f;
        if (i == 9 && part > 1) return -1;
        r |= part << (7 * i);
        if (!(*x & 0x80)) {
            if (i > 0 && part == 0) return -1; /* a longer form than needed */
            *v = r;
            return 1;
        }
    }
    return -1;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const io_stats_tensor *const *)a)->name, (*(const io_stats_tensor *const *)b)->name);
}

/* Tensor pointers sorted by name (caller frees), for duplicate checks and lookups. */
static io_stats_tensor **sorted_by_name(const io_stats *s)
{
    io_stats_tensor **v = malloc(sizeof *v * ((size_t)s->n_tensors + 1));
    if (!v) return NULL;
    for (int i = 0; i < s->n_tensors; i++) v[i] = &s->tensors[i];
    qsort(v, (size_t)s->n_tensors, sizeof *v, cmp_name);
    return v;
}

static io_stats_tensor *lookup_sorted(io_stats_tensor **v, int n, const char *name)
{
    io_stats_tensor key = {.name = (char *)name}, *kp = &key;
    io_stats_tensor **hit = bsearch(&kp, v, (size_t)n, sizeof *v, cmp_name);
    return hit ? *hit : NULL;
}

#define TRUNCATED(part) FAIL(PTQ_ERR_FORMAT, "%s: truncated in %s (byte %zu of %zu)", what, part, b->pos, b->len + 8)

/* Version 2: u64 n_images, then the ids, ascending. */
static ptq_status decode_ids(rbuf *b, const char *what, io_stats *out)
{
    ptq_status st = PTQ_OK;
    if (!get_u64(b, &out->n_images)) TRUNCATED("the image ids");
    if (out->n_images > (b->len - b->pos) / 8) TRUNCATED("the image ids");
    out->ids = malloc(sizeof *out->ids * (size_t)(out->n_images ? out->n_images : 1));
    CHECK_ALLOC(out->ids);
    for (uint64_t i = 0; i < out->n_images; i++) {
        get_u64(b, &out->ids[i]);
        if (i > 0 && out->ids[i] < out->ids[i - 1])
            FAIL(PTQ_ERR_FORMAT, "%s: image ids out of order at %llu", what, (unsigned long long)i);
    }
done:
    return st;
}

/* Version 1: u32 n_shards, the distinct image-list hashes, u64 n_images. */
static ptq_status decode_lists(rbuf *b, const char *what, io_stats *out)
{
    ptq_status st = PTQ_OK;
    uint64_t *hashes = NULL;
    uint32_t nshards;
    if (!get_u32(b, &nshards)) TRUNCATED("the shard list");
    if (nshards < 1 || nshards > MAX_SHARDS) FAIL(PTQ_ERR_FORMAT, "%s: %u image-list hashes (1 to %u)", what, nshards, MAX_SHARDS);
    if ((size_t)nshards * 8 > b->len - b->pos) TRUNCATED("the shard list");
    out->shards = malloc(sizeof *out->shards * nshards);
    hashes = malloc(sizeof *hashes * nshards);
    CHECK_ALLOC(out->shards);
    CHECK_ALLOC(hashes);
    for (uint32_t i = 0; i < nshards; i++) get_u64(b, &out->shards[i]);
    out->n_shards = (int)nshards;
    memcpy(hashes, out->shards, sizeof *hashes * nshards);
    qsort(hashes, nshards, sizeof *hashes, cmp_u64);
    for (uint32_t i = 1; i < nshards; i++)
        if (hashes[i] == hashes[i - 1])
            FAIL(PTQ_ERR_FORMAT, "%s: image list %016llx counted twice", what, (unsigned long long)hashes[i]);
    if (!get_u64(b, &out->n_images)) TRUNCATED("the header");
done:
    free(hashes);
    return st;
}
#undef TRUNCATED

#define TRUNCATED(part) FAIL(PTQ_ERR_FORMAT, "%s: truncated in %s (byte %zu of %zu)", what, part, b.pos, len)

ptq_status io_stats_decode(const uint8_t *buf, size_t len, const char *what, io_stats *s)
{
    ptq_status st = PTQ_OK;
    io_stats out;
    io_stats_init(&out);
    calib_stats *t = NULL;
    io_stats_tensor **sorted = NULL;
    char ctx[200];
    const size_t min_len = MAGIC_LEN + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 4 + 8;
    if (len < MAGIC_LEN || memcmp(buf, MAGIC, MAGIC_LEN) != 0)
        FAIL(PTQ_ERR_FORMAT, "%s: not a ptq statistics file (no " MAGIC " magic)", what);
    if (len < min_len) FAIL(PTQ_ERR_FORMAT, "%s: truncated: %zu bytes, a statistics file has at least %zu", what, len, min_len);
    uint64_t stored = load_le(buf + len - 8, 8), computed = io_fnv1a64(buf, len - 8, IO_FNV1A64_INIT);
    if (stored != computed)
        FAIL(PTQ_ERR_FORMAT, "%s: checksum mismatch (stored %016llx, computed %016llx): the file is corrupt or truncated",
             what, (unsigned long long)stored, (unsigned long long)computed);

    rbuf b = {buf, len - 8, MAGIC_LEN};
    uint32_t version, flags, plen, ntens;
    const uint8_t *bytes;
    if (!get_u32(&b, &version) || !get_u32(&b, &flags)) TRUNCATED("the header");
    if (version != 1 && version != IO_STATS_VERSION)
        FAIL(PTQ_ERR_FORMAT, "%s: statistics format version %u; this ptq reads versions 1 to %d", what, version, IO_STATS_VERSION);
    if (flags != 0) FAIL(PTQ_ERR_FORMAT, "%s: unknown header flags 0x%x", what, flags);
    if (!get_u64(&b, &out.model_hash) || !get_u32(&b, &plen)) TRUNCATED("the header");
    if (plen > MAX_PREP_LEN) FAIL(PTQ_ERR_FORMAT, "%s: preprocessing text of %u bytes (at most %u)", what, plen, MAX_PREP_LEN);
    if (!get(&b, plen, &bytes)) TRUNCATED("the preprocessing text");
    if (memchr(bytes, 0, plen)) FAIL(PTQ_ERR_FORMAT, "%s: NUL byte in the preprocessing text", what);
    out.preprocess = malloc((size_t)plen + 1);
    CHECK_ALLOC(out.preprocess);
    memcpy(out.preprocess, bytes, plen);
    out.preprocess[plen] = '\0';

    if (version >= 2) TRY(decode_ids(&b, what, &out));
    else TRY(decode_lists(&b, what, &out));
    if (!get_u32(&b, &ntens)) TRUNCATED("the header");
    if (ntens > MAX_TENSORS) FAIL(PTQ_ERR_FORMAT, "%s: %u tensors (at most %u)", what, ntens, MAX_TENSORS);
    t = calib_stats_create();
    CHECK_ALLOC(t);
    for (uint32_t i = 0; i < ntens; i++) {
        uint32_t nlen, nbins;
        if (!get_u32(&b, &nlen)) TRUNCATED("a tensor name");
        if (nlen == 0 || nlen > MAX_NAME_LEN)
            FAIL(PTQ_ERR_FORMAT, "%s: tensor %u: name of %u bytes (1 to %u)", what, i, nlen, MAX_NAME_LEN);
        if (!get(&b, nlen, &bytes)) TRUNCATED("a tensor name");
        if (memchr(bytes, 0, nlen)) FAIL(PTQ_ERR_FORMAT, "%s: tensor %u: NUL byte in its name", what, i);
        snprintf(ctx, sizeof ctx, "%s: tensor '%.*s'", what, nlen > 120 ? 120 : (int)nlen, (const char *)bytes);
        memset(t, 0, sizeof *t);
        if (!get_u64(&b, &t->count) || !get_u64(&b, &t->nan) || !get_u64(&b, &t->pinf) || !get_u64(&b, &t->ninf) ||
            !get_u64(&b, &t->zeros) || !get_f32(&b, &t->min) || !get_f32(&b, &t->max) || !get_f32(&b, &t->amax) ||
            !get_f64(&b, &t->range) || !get_u32(&b, &nbins))
            FAIL(PTQ_ERR_FORMAT, "%s: truncated statistics", ctx);
        if (nbins > CALIB_BINS) FAIL(PTQ_ERR_FORMAT, "%s: %u histogram bins (at most %d)", ctx, nbins, CALIB_BINS);
        for (uint32_t j = 0; j < nbins; j++) {
            int r = get_varint(&b, &t->hist[j]);
            if (r == 0) FAIL(PTQ_ERR_FORMAT, "%s: truncated histogram", ctx);
            if (r < 0) FAIL(PTQ_ERR_FORMAT, "%s: histogram bin %u: bad count encoding", ctx, j);
        }
        if (nbins > 0 && t->hist[nbins - 1] == 0)
            FAIL(PTQ_ERR_FORMAT, "%s: histogram ends with an empty bin (%u stored)", ctx, nbins);
        TRY(io_stats_validate(t, ctx));
        TRY(append(&out, (const char *)bytes, nlen, t));
    }
    if (b.pos != b.len) FAIL(PTQ_ERR_FORMAT, "%s: %zu unexpected bytes after the last tensor", what, b.len - b.pos);
    sorted = sorted_by_name(&out);
    CHECK_ALLOC(sorted);
    for (int i = 1; i < out.n_tensors; i++)
        if (!strcmp(sorted[i]->name, sorted[i - 1]->name))
            FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s' appears twice", what, sorted[i]->name);
    io_stats_free(s);
    *s = out;
    io_stats_init(&out);
done:
    free(sorted);
    calib_stats_destroy(t);
    io_stats_free(&out);
    return st;
}

ptq_status io_stats_write(const char *path, const io_stats *s)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    TRY(io_stats_encode(s, &buf, &len));
    TRY(io_write_atomic(path, buf, len));
done:
    free(buf);
    return st;
}

ptq_status io_stats_read(const char *path, io_stats *s)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    TRY(io_read_file(path, &buf, &len, MAX_FILE_BYTES));
    TRY(io_stats_decode(buf, len, path, s));
done:
    free(buf);
    return st;
}

/* ---- merging ---- */

/* The first space-separated setting where two preprocessing texts differ, as "x vs y". */
static void first_difference(const char *a, const char *b, char *buf, size_t cap)
{
    for (;;) {
        size_t la = strcspn(a, " "), lb = strcspn(b, " ");
        if (la != lb || memcmp(a, b, la) != 0 || (!a[la]) != (!b[lb])) {
            snprintf(buf, cap, "%.*s vs %.*s", la > 200 ? 200 : (int)la, a, lb > 200 ? 200 : (int)lb, b);
            if (!la || !lb) snprintf(buf, cap, "\"%.200s\" vs \"%.200s\"", a, b);
            return;
        }
        if (!a[la]) break;
        a += la + 1;
        b += lb + 1;
    }
    snprintf(buf, cap, "?");
}

ptq_status io_stats_merge_into(io_stats *dst, const io_stats *src, const char *dst_what, const char *src_what)
{
    ptq_status st = PTQ_OK;
    io_stats_tensor **sorted = NULL;
    uint64_t *shards = NULL, *ids = NULL;
    const char *pa = dst->preprocess ? dst->preprocess : "", *pb = src->preprocess ? src->preprocess : "";
    if (dst->model_hash != src->model_hash)
        FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: statistics of different models (model hash %016llx vs %016llx)",
             dst_what, src_what, (unsigned long long)dst->model_hash, (unsigned long long)src->model_hash);
    if (strcmp(pa, pb) != 0) {
        char diff[512];
        first_difference(pa, pb, diff, sizeof diff);
        FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: different preprocessing (%s)", dst_what, src_what, diff);
    }
    if ((dst->n_shards > 0) != (src->n_shards > 0))
        FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: %s is in statistics format 1 (an older ptq: image lists, not image ids); "
             "merge it with format-1 files only, or collect it again", dst_what, src_what,
             dst->n_shards > 0 ? dst_what : src_what);
    if (dst->n_shards == 0) { /* version 2: the image sets must be disjoint */
        uint64_t common = 0, first = 0;
        for (uint64_t i = 0, j = 0; i < dst->n_images && j < src->n_images;) {
            if (dst->ids[i] < src->ids[j]) i++;
            else if (dst->ids[i] > src->ids[j]) j++;
            else {
                if (!common++) first = dst->ids[i];
                i++;
                j++;
            }
        }
        if (common)
            FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: both contain image %016llx and %llu more (the same shard twice, "
                 "or overlapping image lists)", dst_what, src_what, (unsigned long long)first, (unsigned long long)(common - 1));
    }
    for (int i = 0; i < src->n_shards; i++)
        if (has_shard(dst, src->shards[i]))
            FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: both contain the image list %016llx (the same shard twice)",
                 dst_what, src_what, (unsigned long long)src->shards[i]);
    if (dst->n_tensors != src->n_tensors)
        FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: %d tensors vs %d (different --tensors filters?)", dst_what, src_what,
             dst->n_tensors, src->n_tensors);
    if ((size_t)dst->n_shards + (size_t)src->n_shards > MAX_SHARDS)
        FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: more than %u shards", dst_what, src_what, MAX_SHARDS);
    if (dst->n_images > UINT64_MAX - src->n_images)
        FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: the image count overflows", dst_what, src_what);
    sorted = sorted_by_name(dst);
    CHECK_ALLOC(sorted);
    /* check everything before changing dst, so that a refused merge leaves it intact */
    for (int i = 0; i < src->n_tensors; i++) {
        const io_stats_tensor *d = lookup_sorted(sorted, dst->n_tensors, src->tensors[i].name);
        if (!d) FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: tensor '%s' is only in %s", dst_what, src_what, src->tensors[i].name, src_what);
        if (d->stats->count > UINT64_MAX - src->tensors[i].stats->count)
            FAIL(PTQ_ERR_ARG, "cannot merge %s and %s: tensor '%s': the value count overflows", dst_what, src_what,
                 src->tensors[i].name);
    }
    if (dst->n_shards > 0) {
        shards = realloc(dst->shards, sizeof *shards * ((size_t)dst->n_shards + (size_t)src->n_shards));
        CHECK_ALLOC(shards);
        dst->shards = shards;
        for (int i = 0; i < src->n_shards; i++) dst->shards[dst->n_shards++] = src->shards[i];
    } else { /* the sorted union */
        uint64_t n = dst->n_images + src->n_images, i = 0, j = 0, k = 0;
        ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
        CHECK_ALLOC(ids);
        while (i < dst->n_images || j < src->n_images)
            ids[k++] = j == src->n_images || (i < dst->n_images && dst->ids[i] <= src->ids[j]) ? dst->ids[i++] : src->ids[j++];
        free(dst->ids);
        dst->ids = ids;
        ids = NULL;
    }
    for (int i = 0; i < src->n_tensors; i++)
        calib_stats_merge(lookup_sorted(sorted, dst->n_tensors, src->tensors[i].name)->stats, src->tensors[i].stats);
    dst->n_images += src->n_images;
done:
    free(sorted);
    free(ids);
    return st;
}

ptq_status io_stats_merge(const char *const *paths, int n, io_stats *out)
{
    ptq_status st = PTQ_OK;
    io_stats acc, next;
    io_stats_init(&acc);
    io_stats_init(&next);
    char first[600];
    if (n < 1) FAIL(PTQ_ERR_ARG, "statistics merge: no file given");
    TRY(io_stats_read(paths[0], &acc));
    for (int i = 1; i < n; i++) {
        TRY(io_stats_read(paths[i], &next));
        if (i == 1) snprintf(first, sizeof first, "%s", paths[0]);
        else snprintf(first, sizeof first, "%s (merged with %d more)", paths[0], i - 1);
        TRY(io_stats_merge_into(&acc, &next, first, paths[i]));
        io_stats_free(&next);
    }
    io_stats_free(out);
    *out = acc;
    io_stats_init(&acc);
done:
    io_stats_free(&acc);
    io_stats_free(&next);
    return st;
}
