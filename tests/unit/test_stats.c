/* test_stats.c: statistics files (io/stats.h): encode/decode round trips bit for bit; every
 * flipped bit and every truncation of a small file refused with a message naming it;
 * corrupted files with a repaired checksum refused or valid, never a crash; semantic
 * checks (amax, counts, range, names, version); merging shards equals one pass over all
 * the data bit for bit (calib_stats_merge and through files), amax exactly a power of two
 * included; version 2 (image ids): shards of an image set merged in any partition and order
 * encode to the one pass's bytes, version 1 files still read and merged among themselves;
 * merges of other models, preprocessing, tensor sets and repeated shards refused
 * with the destination left as it was. Hand-computed method results on a histogram whose
 * analysis bins are the collection bins (amax 2048, R 4096: bin width 1). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "io/file.h"
#include "io/stats.h"
#include "tests/unit/op_test.h"

/* ---- data ---- */

static uint64_t rng_state;

static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(void)
{
    return (double)(splitmix64() >> 11) * 0x1p-53;
}

/* Gaussian (Box-Muller) times sigma. */
static float gauss(double sigma)
{
    double u = uniform(), v = uniform();
    return (float)(sigma * sqrt(-2.0 * log(u + 0x1p-60)) * cos(6.283185307179586 * v));
}

/* Statistics identical, field by field, floats by their bits. */
static int same_stats(const calib_stats *a, const calib_stats *b, const char *what)
{
    int ok = memcmp(&a->min, &b->min, 4) == 0 && memcmp(&a->max, &b->max, 4) == 0 && memcmp(&a->amax, &b->amax, 4) == 0 &&
             a->count == b->count && a->nan == b->nan && a->pinf == b->pinf && a->ninf == b->ninf && a->zeros == b->zeros &&
             memcmp(&a->range, &b->range, 8) == 0 && memcmp(a->hist, b->hist, sizeof a->hist) == 0;
    if (!ok) {
        int first = -1;
        for (int i = 0; i < CALIB_BINS && first < 0; i++)
            if (a->hist[i] != b->hist[i]) first = i;
        printf("  %s: min %.9g/%.9g max %.9g/%.9g amax %.9g/%.9g count %llu/%llu zeros %llu/%llu R %g/%g", what,
               (double)a->min, (double)b->min, (double)a->max, (double)b->max, (double)a->amax, (double)b->amax,
               (unsigned long long)a->count, (unsigned long long)b->count, (unsigned long long)a->zeros,
               (unsigned long long)b->zeros, a->range, b->range);
        if (first >= 0)
            printf(" first differing bin %d: %llu/%llu", first, (unsigned long long)a->hist[first],
                   (unsigned long long)b->hist[first]);
        printf("\n");
    }
    return ok;
}

static int same_file_stats(const io_stats *a, const io_stats *b)
{
    if (a->model_hash != b->model_hash || strcmp(a->preprocess ? a->preprocess : "", b->preprocess ? b->preprocess : "") ||
        a->n_images != b->n_images || a->n_shards != b->n_shards || a->n_tensors != b->n_tensors)
        return 0;
    for (int i = 0; i < a->n_shards; i++)
        if (a->shards[i] != b->shards[i]) return 0;
    if (!a->ids != !b->ids || (a->ids && memcmp(a->ids, b->ids, sizeof *a->ids * (size_t)a->n_images))) return 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (strcmp(a->tensors[i].name, b->tensors[i].name) || !same_stats(a->tensors[i].stats, b->tensors[i].stats, a->tensors[i].name))
            return 0;
    return 1;
}

/* A file's worth of statistics: several kinds of tensors, collected in batches. */
static void build_sample(io_stats *s, int big)
{
    io_stats_init(s);
    s->model_hash = 0x1234567890abcdefull;
    io_stats_set_preprocess(s, "mode=stretch size=4x4 exif=on");
    io_stats_add_shard(s, 77);
    s->n_images = 3;
    size_t n = big ? 100000 : 64;
    float *x = malloc(sizeof(float) * n);
    calib_stats *t = calib_stats_create();
    /* gaussian, in 3 batches */
    for (int b = 0; b < 3; b++) {
        for (size_t i = 0; i < n; i++) x[i] = gauss(1.0 + b);
        calib_stats_add(t, x, n, 2);
    }
    io_stats_add(s, "conv1/out:0", t);
    calib_stats_destroy(t);
    /* all zeros, with -0 */
    t = calib_stats_create();
    for (size_t i = 0; i < n; i++) x[i] = i % 2 ? 0.0f : -0.0f;
    calib_stats_add(t, x, n, 1);
    io_stats_add(s, "zeros", t);
    calib_stats_destroy(t);
    /* never finite */
    t = calib_stats_create();
    for (size_t i = 0; i < n; i++) x[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
    calib_stats_add(t, x, n, 1);
    io_stats_add(s, "nan inf", t);
    calib_stats_destroy(t);
    /* nothing seen */
    t = calib_stats_create();
    io_stats_add(s, "empty", t);
    calib_stats_destroy(t);
    /* mixed specials, amax exactly 4 */
    t = calib_stats_create();
    for (size_t i = 0; i < n; i++) x[i] = i == 5 ? NAN : i == 6 ? -INFINITY : (float)((int)(i % 9) - 4);
    calib_stats_add(t, x, n, 1);
    io_stats_add(s, "mixed", t);
    calib_stats_destroy(t);
    free(x);
}

/* The small file of the corruption tests: a few values only, so few bins. */
static void build_small(io_stats *s)
{
    io_stats_init(s);
    s->model_hash = 42;
    io_stats_set_preprocess(s, "npy:00000000000000ff");
    io_stats_add_shard(s, 5);
    io_stats_add_shard(s, 9);
    s->n_images = 2;
    float z[4] = {0.0f, 0.0f, -0.0f, 0.0f}, m[5] = {NAN, 0.0f, INFINITY, 0.0f, -0.0f};
    calib_stats *t = calib_stats_create();
    calib_stats_add(t, z, 4, 1);
    io_stats_add(s, "a", t);
    calib_stats_destroy(t);
    t = calib_stats_create();
    calib_stats_add(t, m, 5, 1);
    io_stats_add(s, "b/c", t);
    calib_stats_destroy(t);
}

/* ---- tests ---- */

TEST(round_trip_bit_for_bit)
{
    io_stats s, r;
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    build_sample(&s, 1);
    EXPECT_EQ_INT(s.n_tensors, 5);
    /* what calib_stats_add produces satisfies the file's invariants (for all zeros: R = 2^-24) */
    for (int i = 0; i < s.n_tensors; i++)
        if (io_stats_validate(s.tensors[i].stats, s.tensors[i].name) != PTQ_OK) TEST_FAILF("%s", ptq_last_error());
    io_stats_init(&r);
    EXPECT_EQ_INT(io_stats_encode(&s, &buf, &len), PTQ_OK);
    EXPECT_EQ_INT(io_stats_decode(buf, len, "mem", &r), PTQ_OK);
    EXPECT(same_file_stats(&s, &r));
    EXPECT_EQ_INT(io_stats_encode(&r, &buf2, &len2), PTQ_OK);
    EXPECT(len == len2 && memcmp(buf, buf2, len) == 0);
    /* through a file */
    io_stats f;
    io_stats_init(&f);
    EXPECT_EQ_INT(io_stats_write(tmp_path("rt.ptqstats"), &s), PTQ_OK);
    EXPECT_EQ_INT(io_stats_read(tmp_path("rt.ptqstats"), &f), PTQ_OK);
    EXPECT(same_file_stats(&s, &f));
    printf("  %d tensors, %zu bytes\n", s.n_tensors, len);
    free(buf);
    free(buf2);
    io_stats_free(&s);
    io_stats_free(&r);
    io_stats_free(&f);
}

/* Decoding fails with a message naming the source, and leaves the destination as it was. */
static int refused(const uint8_t *buf, size_t len, io_stats *keep)
{
    ptq_error("(no message)");
    int n_before = keep->n_tensors;
    ptq_status st = io_stats_decode(buf, len, "corrupt.ptqstats", keep);
    const char *msg = ptq_last_error();
    return st != PTQ_OK && strstr(msg, "corrupt.ptqstats") != NULL && keep->n_tensors == n_before;
}

TEST(every_flipped_bit_and_truncation_refused)
{
    io_stats s, keep;
    uint8_t *buf = NULL;
    size_t len = 0;
    build_small(&s);
    build_small(&keep);
    EXPECT_EQ_INT(io_stats_encode(&s, &buf, &len), PTQ_OK);
    uint8_t *copy = malloc(len);
    int bad = 0, cases = 0;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, buf, len);
            copy[i] ^= (uint8_t)(1u << bit);
            cases++;
            if (!refused(copy, len, &keep)) {
                if (bad++ < 5) printf("  flipping bit %d of byte %zu was accepted: %s\n", bit, i, ptq_last_error());
            }
        }
    for (size_t l = 0; l < len; l++) {
        uint8_t *t = malloc(l ? l : 1); /* exact size, so ASan sees any overread */
        memcpy(t, buf, l);
        cases++;
        if (!refused(t, l, &keep) && bad++ < 5) printf("  truncation to %zu bytes was accepted\n", l);
        free(t);
    }
    EXPECT_EQ_INT(bad, 0);
    EXPECT(keep.n_tensors == 2 && keep.model_hash == 42);
    printf("  %d corrupt files of a %zu-byte file refused\n", cases, len);
    free(copy);
    free(buf);
    io_stats_free(&s);
    io_stats_free(&keep);
}

static void fix_checksum(uint8_t *buf, size_t len)
{
    uint64_t h = io_fnv1a64(buf, len - 8, IO_FNV1A64_INIT);
    for (int i = 0; i < 8; i++) buf[len - 8 + i] = (uint8_t)(h >> (8 * i));
}

/* Corruption behind a valid checksum (a crafted file): refused with a message, or decoded
 * into statistics that pass validation; never a crash or an overread (run under ASan). */
TEST(crafted_files_refused_or_valid)
{
    io_stats s, r;
    uint8_t *buf = NULL;
    size_t len = 0;
    build_small(&s);
    io_stats_init(&r);
    EXPECT_EQ_INT(io_stats_encode(&s, &buf, &len), PTQ_OK);
    static const int ops[] = {0x00, 0xff, 0x01, 0x80, 0x7f};
    int n_refused = 0, n_ok = 0, bad = 0;
    for (size_t i = 0; i + 8 < len; i++)
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            uint8_t *t = malloc(len);
            memcpy(t, buf, len);
            t[i] = k < 2 ? (uint8_t)ops[k] : (uint8_t)(t[i] ^ ops[k]);
            if (t[i] == buf[i]) {
                free(t);
                continue;
            }
            fix_checksum(t, len);
            ptq_error("(no message)");
            ptq_status st = io_stats_decode(t, len, "crafted", &r);
            if (st == PTQ_OK) {
                n_ok++;
                for (int j = 0; j < r.n_tensors; j++)
                    if (io_stats_validate(r.tensors[j].stats, "again") != PTQ_OK) bad++;
            } else {
                n_refused++;
                if (!strstr(ptq_last_error(), "crafted") && bad++ < 5)
                    printf("  byte %zu = 0x%02x: message without the file name: %s\n", i, t[i], ptq_last_error());
            }
            free(t);
        }
    EXPECT_EQ_INT(bad, 0);
    EXPECT(n_refused > 0);
    printf("  %d crafted files refused, %d decoded into valid statistics (hash bytes, names, preprocessing)\n", n_refused, n_ok);
    free(buf);
    io_stats_free(&s);
    io_stats_free(&r);
}

/* Encodes s after a change the encoder does not check; decoding must fail with `needle`. */
static void expect_refusal(io_stats *s, const char *needle, int line)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    io_stats r;
    io_stats_init(&r);
    if (io_stats_encode(s, &buf, &len) != PTQ_OK) {
        printf("  line %d: encode failed: %s\n", line, ptq_last_error());
        test_cur_failed_ = 1;
        return;
    }
    ptq_status st = io_stats_decode(buf, len, "semantic", &r);
    if (st == PTQ_OK || !strstr(ptq_last_error(), needle)) {
        printf("  line %d: expected a refusal mentioning '%s', got %s: %s\n", line, needle, ptq_status_name(st),
               st == PTQ_OK ? "" : ptq_last_error());
        test_cur_failed_ = 1;
    }
    free(buf);
    io_stats_free(&r);
}

TEST(semantic_checks)
{
    io_stats s;
    build_sample(&s, 0);
    calib_stats *g = s.tensors[0].stats, saved = *g;
    g->amax = nextafterf(g->amax, INFINITY);
    expect_refusal(&s, "amax", __LINE__);
    *g = saved;
    g->hist[1]++;
    expect_refusal(&s, "histogram holds", __LINE__);
    *g = saved;
    g->range = 3 * saved.range / 2;
    expect_refusal(&s, "power of two", __LINE__);
    *g = saved;
    g->range = 4 * saved.range;
    expect_refusal(&s, "does not fit amax", __LINE__);
    *g = saved;
    g->range = saved.range / 2;
    expect_refusal(&s, "does not fit amax", __LINE__);
    *g = saved;
    g->nan = g->count;
    g->pinf = 1;
    expect_refusal(&s, "exceed", __LINE__);
    *g = saved;
    g->zeros = g->count;
    expect_refusal(&s, "zeros", __LINE__);
    *g = saved;
    g->min = g->max + 1;
    expect_refusal(&s, "min", __LINE__);
    *g = saved;
    {   /* a count in a bin above amax's, taken from below */
        int b = 0;
        while (!g->hist[b]) b++;
        g->hist[b]--;
        g->hist[CALIB_BINS - 1]++;
        if ((double)g->amax * CALIB_BINS / g->range < CALIB_BINS - 1) expect_refusal(&s, "above amax", __LINE__);
    }
    *g = saved;
    calib_stats *e = s.tensors[3].stats; /* the empty one */
    e->range = 1.0;
    expect_refusal(&s, "no finite value", __LINE__);
    e->range = 0.0;
    EXPECT_EQ_INT(io_stats_validate(e, "empty"), PTQ_OK);
    /* duplicate names (same length: "zeros" -> "mixed") */
    memcpy(s.tensors[1].name, "mixed", 5);
    expect_refusal(&s, "appears twice", __LINE__);
    memcpy(s.tensors[1].name, "zeros", 5);
    /* shards twice */
    s.shards[0] = 9;
    io_stats_add_shard(&s, 10);
    s.shards[1] = 9;
    expect_refusal(&s, "counted twice", __LINE__);
    s.shards[1] = 10;
    /* version, trailing bytes, NUL in a name, non-minimal varint */
    uint8_t *buf = NULL;
    size_t len = 0;
    io_stats r;
    io_stats_init(&r);
    EXPECT_EQ_INT(io_stats_encode(&s, &buf, &len), PTQ_OK);
    EXPECT_EQ_INT(io_stats_decode(buf, len, "ok", &r), PTQ_OK);
    buf[8] = 3;
    fix_checksum(buf, len);
    EXPECT_EQ_INT(io_stats_decode(buf, len, "v3", &r), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "version 3") != NULL);
    buf[8] = 1;
    uint8_t *longer = malloc(len + 3);
    memcpy(longer, buf, len - 8);
    memset(longer + len - 8, 0, 3);
    fix_checksum(longer, len + 3);
    EXPECT_EQ_INT(io_stats_decode(longer, len + 3, "trailing", &r), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "unexpected bytes") != NULL);
    free(longer);
    uint8_t *nm = memmem(buf, len, "nan inf", 7);
    EXPECT(nm != NULL);
    if (nm) {
        nm[3] = 0;
        fix_checksum(buf, len);
        EXPECT_EQ_INT(io_stats_decode(buf, len, "nul", &r), PTQ_ERR_FORMAT);
        EXPECT(strstr(ptq_last_error(), "NUL") != NULL);
        nm[3] = ' ';
    }
    free(buf);
    /* the all-zeros tensor's single bin is a 1-byte varint (count 64): make it 0xc0 0x00 */
    io_stats z;
    io_stats_init(&z);
    z.model_hash = 1;
    io_stats_add_shard(&z, 1);
    io_stats_add(&z, "zeros", s.tensors[1].stats);
    EXPECT_EQ_INT(io_stats_encode(&z, &buf, &len), PTQ_OK);
    uint8_t *nl = malloc(len + 1);
    memcpy(nl, buf, len - 9);                 /* everything before the varint */
    EXPECT_EQ_INT(buf[len - 9], 64);
    nl[len - 9] = 0xc0;
    nl[len - 8] = 0x00;
    fix_checksum(nl, len + 1);
    EXPECT_EQ_INT(io_stats_decode(nl, len + 1, "overlong", &r), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "bad count encoding") != NULL);
    nl[len - 8] = 0x01;                       /* 0x40 + 128: a different, well-formed count */
    fix_checksum(nl, len + 1);
    EXPECT_EQ_INT(io_stats_decode(nl, len + 1, "count 192", &r), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "histogram holds 192") != NULL);
    free(nl);
    free(buf);
    io_stats_free(&z);
    io_stats_free(&r);
    io_stats_free(&s);
}

/* calib_stats of x[0..n) fed in batches of `batch` values. */
static calib_stats *collect(const float *x, size_t n, size_t batch, int nthreads)
{
    calib_stats *s = calib_stats_create();
    for (size_t i = 0; i < n; i += batch) calib_stats_add(s, x + i, n - i < batch ? n - i : batch, nthreads);
    return s;
}

/* One case: data split at `cut` (a multiple of batch), shards merged vs one pass. */
static int merge_case(const char *what, const float *x, size_t n, size_t cut, size_t batch)
{
    int ok = 1;
    for (int nt = 1; nt <= 2; nt++) {
        calib_stats *one = collect(x, n, batch, nt), *a = collect(x, cut, batch, nt), *b = collect(x + cut, n - cut, batch, nt);
        calib_stats *ab = calib_stats_create(), *ba = calib_stats_create();
        calib_stats_merge(ab, a);
        calib_stats_merge(ab, b);
        calib_stats_merge(ba, b);
        calib_stats_merge(ba, a);
        char label[160];
        snprintf(label, sizeof label, "%s (n %zu, cut %zu, batch %zu, %d threads), a+b", what, n, cut, batch, nt);
        ok &= same_stats(ab, one, label);
        snprintf(label, sizeof label, "%s (n %zu, cut %zu, batch %zu, %d threads), b+a", what, n, cut, batch, nt);
        ok &= same_stats(ba, one, label);
        calib_stats_destroy(one);
        calib_stats_destroy(a);
        calib_stats_destroy(b);
        calib_stats_destroy(ab);
        calib_stats_destroy(ba);
    }
    return ok;
}

TEST(merge_equals_one_pass)
{
    const size_t n = 1 << 18, batch = 1 << 16;
    float *x = malloc(sizeof(float) * n);
    rng_state = 7;
    /* gaussian with a few outliers and specials */
    for (size_t i = 0; i < n; i++) x[i] = gauss(1.0);
    x[100] = 40.0f;
    x[n - 5] = -75.5f;
    x[7] = NAN;
    x[n / 2 + 3] = INFINITY;
    x[9] = 0.0f;
    EXPECT(merge_case("gaussian", x, n, batch, batch));
    EXPECT(merge_case("gaussian", x, n, 3 * batch, batch));
    /* shard b has a larger range than shard a (a's R doubles in the merge) */
    for (size_t i = 0; i < n; i++) x[i] = i < n / 2 ? gauss(0.01) : gauss(30.0);
    EXPECT(merge_case("small then large", x, n, n / 2, batch));
    free(x);
}

/* amax exactly a power of two: the first batch sets R; values equal to amax must land in
 * the bin the one pass gives them, whatever the order R grew in. */
TEST(merge_equals_one_pass_amax_power_of_two)
{
    const size_t n = 4096, batch = 1024;
    float *x = malloc(sizeof(float) * n);
    rng_state = 11;
    /* every batch in [-1, 1] with +-1.0 exactly present (normalised pixels) */
    for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * uniform() - 1.0);
    for (size_t b = 0; b < n; b += batch) {
        x[b + 1] = 1.0f;
        x[b + 2] = -1.0f;
    }
    EXPECT(merge_case("amax 1 in every batch", x, n, 2 * batch, batch));
    /* shard a: amax exactly 1; shard b: amax 1.5 */
    for (size_t i = 2 * batch; i < n; i++) x[i] *= 1.5f;
    EXPECT(merge_case("amax 1 then 1.5", x, n, 2 * batch, batch));
    /* shard a: amax 0.25 then shard b: exactly 0.5 */
    for (size_t i = 0; i < n; i++) x[i] = (float)(uniform() * 0.25);
    x[3] = 0.25f;
    for (size_t i = 2 * batch; i < n; i++) x[i] = (float)(uniform() * 0.5);
    x[2 * batch + 9] = 0.5f;
    EXPECT(merge_case("amax 0.25 then 0.5", x, n, 2 * batch, batch));
    /* a single value, exactly 2^-24 and below it */
    for (size_t i = 0; i < n; i++) x[i] = i % 2 ? 0x1p-24f : 0x1p-26f;
    EXPECT(merge_case("amax 2^-24", x, n, 2 * batch, batch));
    free(x);
}

/* Shard files merged with io_stats_merge equal one io_stats of all the data. */
TEST(file_merge_equals_one_pass)
{
    const size_t n = 3 * 50000;
    float *x = malloc(sizeof(float) * n);
    rng_state = 3;
    for (size_t i = 0; i < n; i++) x[i] = gauss(i < n / 3 ? 0.5 : 2.0);
    x[n / 3 + 1] = 8.0f; /* a power of two for amax */
    io_stats sh[3], all, merged;
    io_stats_init(&all);
    io_stats_init(&merged);
    all.model_hash = 5;
    io_stats_set_preprocess(&all, "p");
    all.n_images = 3;
    io_stats_add_shard(&all, 1000);
    const char *paths[3];
    char names[3][32];
    for (int k = 0; k < 3; k++) {
        io_stats_init(&sh[k]);
        sh[k].model_hash = 5;
        io_stats_set_preprocess(&sh[k], "p");
        sh[k].n_images = 1;
        io_stats_add_shard(&sh[k], 100 + (uint64_t)k);
        calib_stats *t = collect(x + (size_t)k * n / 3, n / 3, 10000, 1), *u = collect(x + (size_t)k * n / 3, n / 3, 50000, 2);
        io_stats_add(&sh[k], "t", t);
        io_stats_add(&sh[k], "u", u);
        calib_stats_destroy(t);
        calib_stats_destroy(u);
        snprintf(names[k], sizeof names[k], "shard%d.ptqstats", k);
        paths[k] = strdup(tmp_path(names[k]));
        EXPECT_EQ_INT(io_stats_write(paths[k], &sh[k]), PTQ_OK);
    }
    calib_stats *t = collect(x, n, 10000, 1), *u = collect(x, n, 50000, 2);
    io_stats_add(&all, "t", t);
    io_stats_add(&all, "u", u);
    EXPECT_EQ_INT(io_stats_merge(paths, 3, &merged), PTQ_OK);
    EXPECT_EQ_INT(merged.n_images, 3);
    EXPECT_EQ_INT(merged.n_shards, 3);
    EXPECT(merged.n_tensors == 2 && same_stats(merged.tensors[0].stats, t, "t") && same_stats(merged.tensors[1].stats, u, "u"));
    calib_stats_destroy(t);
    calib_stats_destroy(u);
    for (int k = 0; k < 3; k++) {
        io_stats_free(&sh[k]);
        free((void *)paths[k]);
    }
    io_stats_free(&all);
    io_stats_free(&merged);
    free(x);
}

/* dst encoded before and after a refused merge is the same. */
static void expect_merge_refused(io_stats *dst, const io_stats *src, const char *needle, int line)
{
    uint8_t *b0 = NULL, *b1 = NULL;
    size_t l0 = 0, l1 = 0;
    io_stats_encode(dst, &b0, &l0);
    ptq_status st = io_stats_merge_into(dst, src, "A.ptqstats", "B.ptqstats");
    io_stats_encode(dst, &b1, &l1);
    const char *msg = ptq_last_error();
    if (st == PTQ_OK || !strstr(msg, needle) || !strstr(msg, "A.ptqstats") || !strstr(msg, "B.ptqstats") ||
        strchr(msg, '\n') || l0 != l1 || memcmp(b0, b1, l0) != 0) {
        printf("  line %d: expected a one-line refusal naming both files and '%s', dst unchanged; got %s: %s\n", line,
               needle, ptq_status_name(st), st == PTQ_OK ? "" : msg);
        test_cur_failed_ = 1;
    }
    free(b0);
    free(b1);
}

TEST(merge_refusals)
{
    io_stats a, b;
    build_sample(&a, 0);
    build_sample(&b, 0);
    expect_merge_refused(&a, &b, "same shard twice", __LINE__); /* both shard 77 */
    b.shards[0] = 78;
    b.model_hash ^= 1;
    expect_merge_refused(&a, &b, "different models", __LINE__);
    b.model_hash ^= 1;
    io_stats_set_preprocess(&b, "mode=stretch size=4x5 exif=on");
    expect_merge_refused(&a, &b, "size=4x4 vs size=4x5", __LINE__);
    io_stats_set_preprocess(&b, "mode=stretch size=4x4 exif=on");
    free(b.tensors[2].name);
    b.tensors[2].name = strdup("other");
    expect_merge_refused(&a, &b, "tensor 'other' is only in B.ptqstats", __LINE__);
    calib_stats_destroy(b.tensors[--b.n_tensors].stats);
    free(b.tensors[b.n_tensors].name);
    expect_merge_refused(&a, &b, "5 tensors vs 4", __LINE__);
    io_stats_free(&b);
    build_sample(&b, 0);
    b.shards[0] = 78;
    EXPECT_EQ_INT(io_stats_merge_into(&a, &b, "A", "B"), PTQ_OK);
    EXPECT_EQ_INT(a.n_shards, 2);
    EXPECT_EQ_INT(a.n_images, 6);
    EXPECT_EQ_INT(a.tensors[0].stats->count, 2 * b.tensors[0].stats->count);
    /* a merged file refuses any of its shards again */
    b.shards[0] = 77;
    expect_merge_refused(&a, &b, "image list 000000000000004d", __LINE__);
    io_stats_free(&a);
    io_stats_free(&b);
}

/* Version 2: the statistics of images ids[0..n) (one tensor; image k's values depend on its id only). */
static void build_images(io_stats *s, const uint64_t *ids, int n)
{
    io_stats_init(s);
    s->model_hash = 7;
    io_stats_set_preprocess(s, "mode=stretch size=4x4 exif=on");
    EXPECT_EQ_INT(io_stats_set_images(s, ids, (uint64_t)n), PTQ_OK);
    calib_stats *t = calib_stats_create();
    for (int k = 0; k < n; k++) {
        float x[64];
        rng_state = ids[k];
        for (int i = 0; i < 64; i++) x[i] = gauss(1.0 + (double)(ids[k] % 5));
        calib_stats_add(t, x, 64, 1);
    }
    io_stats_add(s, "t", t);
    calib_stats_destroy(t);
}

TEST(version2_shards_merge_to_the_one_pass_bytes)
{
    enum { N = 23 };
    uint64_t ids[N], part[N];
    rng_state = 11;
    for (int k = 0; k < N; k++) ids[k] = splitmix64();
    io_stats all, acc, sh, r, old;
    uint8_t *b_all = NULL, *b = NULL;
    size_t l_all = 0, l = 0;
    build_images(&all, ids, N);
    EXPECT_EQ_INT(io_stats_encode(&all, &b_all, &l_all), PTQ_OK);
    io_stats_init(&r);
    EXPECT_EQ_INT(io_stats_decode(b_all, l_all, "v2", &r), PTQ_OK);
    EXPECT(same_file_stats(&all, &r) && r.n_shards == 0 && b_all[8] == 2);
    for (int shards = 1; shards <= 5; shards++) { /* round robin k mod shards, merged last to first */
        io_stats_init(&acc);
        for (int i = shards - 1; i >= 0; i--) {
            int n = 0;
            for (int k = i; k < N; k += shards) part[n++] = ids[k];
            build_images(i == shards - 1 ? &acc : &sh, part, n);
            if (i < shards - 1) {
                EXPECT_EQ_INT(io_stats_merge_into(&acc, &sh, "acc", "shard"), PTQ_OK);
                io_stats_free(&sh);
            }
        }
        EXPECT_EQ_INT(io_stats_encode(&acc, &b, &l), PTQ_OK);
        if (l != l_all || memcmp(b, b_all, l)) {
            printf("  %d shards: merged file differs from the one pass (%zu vs %zu bytes)\n", shards, l, l_all);
            test_cur_failed_ = 1;
        }
        free(b);
        b = NULL;
        io_stats_free(&acc);
    }
    /* contiguous blocks, and a shard again: refused, naming an id */
    build_images(&acc, ids, 10);
    build_images(&sh, ids + 9, N - 9);
    expect_merge_refused(&acc, &sh, "the same shard twice", __LINE__);
    io_stats_free(&sh);
    build_images(&sh, ids + 10, N - 10);
    EXPECT_EQ_INT(io_stats_merge_into(&acc, &sh, "A", "B"), PTQ_OK);
    EXPECT(same_file_stats(&acc, &all));
    io_stats_free(&sh);
    /* a list file may name an image twice: both copies count, the file reads back */
    part[0] = part[1] = ids[3];
    build_images(&sh, part, 2);
    EXPECT_EQ_INT(io_stats_encode(&sh, &b, &l), PTQ_OK);
    EXPECT_EQ_INT(io_stats_decode(b, l, "twice", &r), PTQ_OK);
    EXPECT(r.n_images == 2 && r.ids[0] == r.ids[1]);
    free(b);
    io_stats_free(&sh);
    /* version 1 (list hashes) and version 2 do not merge */
    build_sample(&old, 0);
    old.model_hash = 7;
    expect_merge_refused(&acc, &old, "format 1", __LINE__);
    expect_merge_refused(&old, &acc, "format 1", __LINE__);
    EXPECT_EQ_INT(io_stats_set_images(&old, ids, 1), PTQ_ERR_ARG);
    /* ids out of order refused */
    memcpy(b_all + 8 + 4 + 4 + 8 + 4 + 29 + 8 + 8, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    fix_checksum(b_all, l_all);
    EXPECT_EQ_INT(io_stats_decode(b_all, l_all, "order", &r), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), "out of order") != NULL);
    free(b_all);
    io_stats_free(&old);
    io_stats_free(&acc);
    io_stats_free(&all);
    io_stats_free(&r);
}

/* amax = 2048 and R = 4096: analysis bin k is collection bin k, [k, k + 1), and the amax
 * value itself lands in the last analysis bin. n values at v, plus the amax once. */
static calib_stats *unit_width_stats(const float *v, const int *n, int groups)
{
    calib_stats *s = calib_stats_create();
    float top = 2048.0f;
    for (int g = 0; g < groups; g++)
        for (int k = 0; k < n[g]; k++) calib_stats_add(s, &v[g], 1, 1);
    calib_stats_add(s, &top, 1, 1);
    return s;
}

/* calib_amax's answer, NaN (failing every comparison) when it failed. */
static float amax1(const calib_stats *s, const calib_method *m, int *warn)
{
    float a = NAN;
    return calib_amax(s, m, &a, warn) == PTQ_OK ? a : NAN;
}

TEST(methods_hand_computed)
{
    calib_method m;
    int warn;
    /* percentile: 9999 of 10000 values in bin 100: the CDF reaches 99% there; the result is the
     * bin's lower edge 100 (pytorch-quantization, ONNX Runtime), not its upper edge 101 */
    float v1[] = {100.5f};
    int n1[] = {9999};
    calib_stats *s = unit_width_stats(v1, n1, 1);
    calib_method_parse("percentile:99", &m);
    EXPECT(amax1(s, &m, &warn) == 100.0f && !warn);
    calib_method_parse("max", &m);
    EXPECT(amax1(s, &m, &warn) == 2048.0f);
    /* mse: the candidates are bin centres, so the result is k + 1/2 */
    calib_method_parse("mse", &m);
    float a = amax1(s, &m, &warn);
    EXPECT(a - floorf(a) == 0.5f && a >= 128.5f);
    /* entropy: the result is an edge i, i >= 128 */
    calib_method_parse("entropy", &m);
    a = amax1(s, &m, &warn);
    EXPECT(a == floorf(a) && a >= 128.0f && a <= 2048.0f);
    calib_stats_destroy(s);
    /* entropy's +inf rule: with values in bins 0..299 and the amax alone at the top, every
     * candidate whose last bin is empty while the top is not has KL = +inf; the candidates
     * 128..300 are finite and 2048 (no tail) is finite: the last minimum among those */
    float v2[300];
    int n2[300];
    for (int k = 0; k < 300; k++) {
        v2[k] = (float)k + 0.5f;
        n2[k] = 50 + (k * 37) % 11;
    }
    s = unit_width_stats(v2, n2, 300);
    calib_method_parse("entropy", &m);
    a = amax1(s, &m, &warn);
    EXPECT((a >= 128.0f && a <= 300.0f) || a == 2048.0f);
    calib_stats_destroy(s);
}

/* The scan-and-bin kernel's paths (generic, AVX2, AVX-512) give the same statistics bit for
 * bit, and so does any split of the values into parts, pieces and rows (what per-tile
 * observation inside a kernel does): specials, signed zeros, denormals, FLT_MAX, lengths that
 * are not multiples of the vector width, and ranges that grow piece after piece. */
TEST(isa_paths_and_pieces_bit_for_bit)
{
    const size_t n = 100003;
    float *x = malloc(sizeof(float) * n);
    rng_state = 23;
    for (size_t i = 0; i < n; i++) {
        double u = uniform();
        x[i] = (float)((double)gauss(1.0) * pow(10.0, 6.0 * uniform() - 3.0) * (i > n / 2 ? 50.0 : 1.0));
        if (u < 0.05) x[i] = 0.0f;
        else if (u < 0.07) x[i] = -0.0f;
        else if (u < 0.071) x[i] = 1e-42f; /* denormal */
    }
    x[3] = NAN;
    x[17] = INFINITY;
    x[4000] = -INFINITY;
    x[n - 2] = FLT_MAX;
    x[n - 1] = -0x1p-149f;
    static const size_t pieces[] = {1, 7, 15, 16, 17, 2047, 2048, 2049, 5000, 100003};
    calib_stats *ref = NULL;
    for (int isa = 0; isa < 3; isa++)
        for (size_t pi = 0; pi < sizeof pieces / sizeof *pieces; pi++) {
            calib_stats *s = calib_stats_create();
            calib_part *part[3] = {calib_part_create(), calib_part_create(), calib_part_create()};
            /* pieces dealt round-robin to three parts, batch by batch of 30000 values */
            for (size_t b0 = 0; b0 < n; b0 += 30000) {
                size_t b1 = b0 + 30000 < n ? b0 + 30000 : n;
                for (int t = 0; t < 3; t++) calib_part_start(part[t], s);
                int t = 0;
                for (size_t i = b0; i < b1; i += pieces[pi], t = (t + 1) % 3)
                    calib_part_add_isa(part[t], x + i, b1 - i < pieces[pi] ? b1 - i : pieces[pi], isa);
                for (int k = 0; k < 3; k++) calib_stats_take(s, part[k]);
            }
            char label[96];
            snprintf(label, sizeof label, "isa %d, pieces of %zu", isa, pieces[pi]);
            if (!ref) {
                ref = calib_stats_create();
                for (size_t b0 = 0; b0 < n; b0 += 30000) calib_stats_add(ref, x + b0, n - b0 < 30000 ? n - b0 : 30000, 1);
            }
            EXPECT(same_stats(s, ref, label));
            for (int k = 0; k < 3; k++) calib_part_destroy(part[k]);
            calib_stats_destroy(s);
        }
    /* rows of a strided tile, and the signed-zero order of min and max (-0 < +0) */
    calib_stats *s = calib_stats_create();
    calib_part *p = calib_part_create();
    calib_part_add_rows(p, x, 3, 1000, 30000);
    calib_stats_take(s, p);
    calib_stats *r = calib_stats_create();
    for (int k = 0; k < 3; k++) calib_stats_add(r, x + k * 30000, 1000, 1);
    EXPECT(same_stats(s, r, "rows"));
    float z[4] = {0.0f, -0.0f, 0.0f, -0.0f};
    calib_stats *zs = calib_stats_create();
    calib_part_add(p, z, 1);
    calib_stats_take(zs, p);
    calib_part_add(p, z + 1, 1);
    calib_stats_take(zs, p);
    EXPECT(signbit(zs->min) && !signbit(zs->max));
    calib_part_destroy(p);
    calib_stats_destroy(zs);
    calib_stats_destroy(r);
    calib_stats_destroy(s);
    calib_stats_destroy(ref);
    free(x);
}

/* calib_clip_share: the share of finite values beyond amax by more than one int8 step, against
 * the exact count (values 0.001 apart: at most one per collection bin, so within 1/1000). */
TEST(clip_share_counts_what_a_range_clips)
{
    float x[2000];
    for (int i = 0; i < 1000; i++) x[i] = (float)(i + 1) / 1000.0f * (i % 2 ? 1.0f : -1.0f);
    for (int i = 1000; i < 2000; i++) x[i] = i % 2 ? NAN : INFINITY; /* not finite: not in the share */
    calib_stats *s = calib_stats_create();
    calib_stats_add(s, x, 2000, 1);
    const float amax[] = {1.0f, 2.0f, 0.5f, 0.1f, 0.99f, 0.0f};
    for (int k = 0; k < 6; k++) {
        double bound = (double)amax[k] * (1.0 + 1.0 / 127.0);
        int n = 0;
        for (int i = 0; i < 1000; i++) n += fabs((double)x[i]) > bound;
        EXPECT_NEAR(calib_clip_share(s, amax[k]), n / 1000.0, 1.0 / 1000.0, 0);
    }
    EXPECT_NEAR(calib_clip_share(s, 1.0f), 0.0, 0, 0); /* a value at amax is not clipped */
    calib_stats *empty = calib_stats_create();
    EXPECT_NEAR(calib_clip_share(empty, 0.5f), 0.0, 0, 0);
    calib_stats_destroy(empty);
    calib_stats_destroy(s);
}

int main(void)
{
    make_tmp_dir(NULL);
    RUN(round_trip_bit_for_bit);
    RUN(every_flipped_bit_and_truncation_refused);
    RUN(crafted_files_refused_or_valid);
    RUN(semantic_checks);
    RUN(version2_shards_merge_to_the_one_pass_bytes);
    RUN(merge_equals_one_pass);
    RUN(merge_equals_one_pass_amax_power_of_two);
    RUN(file_merge_equals_one_pass);
    RUN(merge_refusals);
    RUN(methods_hand_computed);
    RUN(isa_paths_and_pieces_bit_for_bit);
    RUN(clip_share_counts_what_a_range_clips);
    return test_summary();
}
