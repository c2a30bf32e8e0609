/* test_npy.c: .npy save/load round trips for every dtype and rank, the exact header
 * numpy expects (format 1.0, padded to 64 bytes, ending in '\n'), files written the way
 * numpy writes them, interoperability with numpy itself (when /usr/bin/python3 has it),
 * and malformed headers: every prefix of a file, bad magic, bad dict, big-endian,
 * Fortran order, absurd or negative dims, data size mismatch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/npy.h"
#include "tests/unit/op_test.h"
#include "tests/unit/files.h"

/* A .npy file laid out as numpy writes it (format 1.0) in out; returns its size. */
static size_t build_npy(uint8_t *out, size_t cap, const char *dict, const void *data, size_t data_len)
{
    size_t n = strlen(dict), hlen = n + 1 + 20;
    hlen += (64 - (10 + hlen) % 64) % 64;
    if (10 + hlen + data_len > cap) return 0;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)(hlen & 0xff);
    out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + 10, dict, n);
    memset(out + 10 + n, ' ', hlen - n - 1);
    out[10 + hlen - 1] = '\n';
    if (data_len) memcpy(out + 10 + hlen, data, data_len);
    return 10 + hlen + data_len;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

TEST(round_trip_every_dtype_and_rank)
{
    const ptq_dtype dts[] = {PTQ_F32, PTQ_F64, PTQ_F16, PTQ_I8, PTQ_U8, PTQ_I16, PTQ_U16,
                             PTQ_I32, PTQ_U32, PTQ_I64, PTQ_U64, PTQ_BOOL};
    const int64_t shapes[][5] = {{0}, {1, 5}, {4, 1, 3, 4, 4}, {2, 0, 3}, {3, 2, 3, 1}};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            ptq_tensor t = {0}, back = {0};
            t.dtype = dts[d];
            t.rank = (int)shapes[s][0];
            for (int i = 0; i < t.rank; i++) t.dims[i] = shapes[s][1 + i];
            EXPECT_EQ_INT(ptq_tensor_alloc(&t), PTQ_OK);
            uint8_t *b = t.data;
            for (size_t i = 0; i < ptq_tensor_nbytes(&t); i++) b[i] = (uint8_t)(dts[d] == PTQ_BOOL ? rng() & 1 : rng());
            const char *p = tmp_path("rt.npy");
            EXPECT_EQ_INT(npy_save(p, &t), PTQ_OK);
            ptq_status st = npy_load(p, &back);
            if (st != PTQ_OK) {
                TEST_FAILF("%s rank %d: %s", ptq_dtype_name(t.dtype), t.rank, ptq_last_error());
            } else {
                EXPECT_EQ_INT(back.dtype, t.dtype);
                EXPECT_EQ_INT(back.rank, t.rank);
                EXPECT(ptq_shape_equal(&back, &t));
                EXPECT(ptq_tensor_nbytes(&t) == 0 || memcmp(back.data, t.data, ptq_tensor_nbytes(&t)) == 0);
            }
            /* header: format 1.0, total header a multiple of 64, ending in '\n' */
            size_t len;
            uint8_t *f = read_bytes(p, &len);
            EXPECT(f != NULL);
            if (f) {
                size_t hlen = (size_t)f[8] | (size_t)f[9] << 8;
                EXPECT(memcmp(f, "\x93NUMPY\x01\x00", 8) == 0);
                EXPECT_EQ_INT((10 + hlen) % 64, 0);
                EXPECT_EQ_INT(f[10 + hlen - 1], '\n');
                EXPECT_EQ_INT(len, 10 + hlen + ptq_tensor_nbytes(&t));
            }
            free(f);
            ptq_tensor_free(&t);
            ptq_tensor_free(&back);
        }
    }
}

TEST(header_text_is_numpys)
{
    ptq_tensor t = {0};
    t.dtype = PTQ_F32;
    t.rank = 4;
    t.dims[0] = 1, t.dims[1] = 3, t.dims[2] = 640, t.dims[3] = 640;
    t.data = calloc(3 * 640 * 640, sizeof(float));
    const char *p = tmp_path("hdr.npy");
    EXPECT_EQ_INT(npy_save(p, &t), PTQ_OK);
    size_t len;
    uint8_t *f = read_bytes(p, &len);
    const char *want = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 640, 640), }";
    EXPECT(f && memcmp(f + 10, want, strlen(want)) == 0);
    EXPECT(f && f[8] == 118 && f[9] == 0); /* 128 - 10: what numpy writes for this shape */
    free(f);
    free(t.data);
    /* (5,) and () */
    ptq_tensor v = {0};
    v.dtype = PTQ_I64;
    v.rank = 1;
    v.dims[0] = 5;
    int64_t vals[5] = {1, -2, 3, -4, 5};
    v.data = vals;
    EXPECT_EQ_INT(npy_save(p, &v), PTQ_OK);
    f = read_bytes(p, &len);
    want = "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }";
    EXPECT(f && memcmp(f + 10, want, strlen(want)) == 0);
    free(f);
    v.rank = 0;
    EXPECT_EQ_INT(npy_save(p, &v), PTQ_OK);
    f = read_bytes(p, &len);
    want = "{'descr': '<i8', 'fortran_order': False, 'shape': (), }";
    EXPECT(f && memcmp(f + 10, want, strlen(want)) == 0);
    EXPECT_EQ_INT(len, 128 + 8);
    free(f);
}

TEST(reads_numpy_layouts)
{
    uint8_t buf[1024];
    float vals[6] = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 8.0f};
    const char *p = tmp_path("np.npy");
    /* numpy's spelling, spacing variants, Python 2 longs, format 2.0 */
    const char *dicts[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'shape': (2,3), 'fortran_order': False, 'descr': '<f4'}",
        "{'descr':'<f4','fortran_order':False,'shape':(2L, 3L)}",
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        size_t n = build_npy(buf, sizeof buf, dicts[i], vals, sizeof vals);
        EXPECT(write_bytes(p, buf, n));
        ptq_tensor t;
        ptq_status st = npy_load(p, &t);
        if (st != PTQ_OK) {
            TEST_FAILF("%s: %s", dicts[i], ptq_last_error());
            continue;
        }
        EXPECT_EQ_INT(t.dtype, PTQ_F32);
        EXPECT_EQ_INT(t.rank, 2);
        EXPECT_EQ_INT(t.dims[0], 2);
        EXPECT_EQ_INT(t.dims[1], 3);
        EXPECT(memcmp(t.data, vals, sizeof vals) == 0);
        ptq_tensor_free(&t);
    }
    /* format 2.0: 4-byte header length */
    size_t n = build_npy(buf + 2, sizeof buf - 2, dicts[0], vals, sizeof vals);
    size_t hlen = (size_t)buf[10] | (size_t)buf[11] << 8;
    memcpy(buf, "\x93NUMPY\x02\x00", 8);
    buf[8] = (uint8_t)(hlen & 0xff), buf[9] = (uint8_t)(hlen >> 8), buf[10] = 0, buf[11] = 0;
    EXPECT(write_bytes(p, buf, n + 2));
    ptq_tensor t;
    EXPECT_EQ_INT(npy_load(p, &t), PTQ_OK);
    EXPECT(t.data && memcmp(t.data, vals, sizeof vals) == 0);
    ptq_tensor_free(&t);
}

static void expect_refused(const char *what, const uint8_t *buf, size_t len, ptq_status want)
{
    const char *p = tmp_path("bad.npy");
    ptq_tensor t;
    if (!write_bytes(p, buf, len)) {
        TEST_FAILF("cannot write %s", p);
        return;
    }
    ptq_status st = npy_load(p, &t);
    if (st == PTQ_OK) {
        TEST_FAILF("%s: accepted", what);
        ptq_tensor_free(&t);
        return;
    }
    if (want != PTQ_OK && st != want)
        TEST_FAILF("%s: status %s, expected %s (%s)", what, ptq_status_name(st), ptq_status_name(want),
                   ptq_last_error());
    if (!strstr(ptq_last_error(), p)) TEST_FAILF("%s: message does not name the file: %s", what, ptq_last_error());
    if (strchr(ptq_last_error(), '\n')) TEST_FAILF("%s: message is not one line", what);
    EXPECT(t.data == NULL);
}

TEST(malformed_headers)
{
    uint8_t buf[1024];
    float vals[6] = {0};
    const struct {
        const char *dict;
        ptq_status st;
    } cases[] = {
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", PTQ_ERR_UNSUPPORTED},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", PTQ_ERR_UNSUPPORTED},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }", PTQ_ERR_UNSUPPORTED},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'shape': (2, 3), }", PTQ_ERR_FORMAT},
        {"{'fortran_order': False, 'shape': (2, 3), }", PTQ_ERR_FORMAT},
        {"{'descr': <f4, 'fortran_order': False, 'shape': (2, 3), }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 1), }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", PTQ_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 6), }", PTQ_ERR_UNSUPPORTED},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", PTQ_ERR_FORMAT}, /* 24 bytes for 32 */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", PTQ_ERR_FORMAT},   /* 24 bytes for 20 */
        {"", PTQ_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = build_npy(buf, sizeof buf, cases[i].dict, vals, sizeof vals);
        expect_refused(cases[i].dict, buf, n, cases[i].st);
    }
    /* bad magic, unknown version, header length beyond the file, empty file */
    size_t n = build_npy(buf, sizeof buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", vals,
                         sizeof vals);
    buf[1] = 'X';
    expect_refused("bad magic", buf, n, PTQ_ERR_FORMAT);
    buf[1] = 'N';
    buf[6] = 9;
    expect_refused("version 9", buf, n, PTQ_ERR_UNSUPPORTED);
    buf[6] = 1;
    buf[8] = 0xff, buf[9] = 0xff;
    expect_refused("header length 65535", buf, n, PTQ_ERR_FORMAT);
    expect_refused("empty file", buf, 0, PTQ_ERR_FORMAT);
    buf[6] = 2, buf[8] = 0xff, buf[9] = 0xff, buf[10] = 0xff, buf[11] = 0xff;
    expect_refused("format 2 header length 2^32-1", buf, n, PTQ_ERR_FORMAT);
}

TEST(every_prefix_and_random_corruption)
{
    uint8_t buf[1024], bad[1024];
    int16_t vals[12];
    for (int i = 0; i < 12; i++) vals[i] = (int16_t)(i * 1000 - 5000);
    size_t n = build_npy(buf, sizeof buf, "{'descr': '<i2', 'fortran_order': False, 'shape': (3, 4), }", vals,
                         sizeof vals);
    for (size_t len = 0; len < n; len++) expect_refused("prefix", buf, len, PTQ_OK);
    /* random byte changes in the header: any status, never a crash, an error names the file */
    const char *p = tmp_path("fuzz.npy");
    for (int k = 0; k < 300; k++) {
        memcpy(bad, buf, n);
        for (int j = 0; j < 1 + k % 4; j++) bad[rng() % 74] = (uint8_t)rng();
        if (!write_bytes(p, bad, n)) continue;
        ptq_tensor t;
        ptq_status st = npy_load(p, &t);
        if (st == PTQ_OK) ptq_tensor_free(&t);
        else if (!strstr(ptq_last_error(), p)) TEST_FAILF("case %d: message does not name the file: %s", k, ptq_last_error());
    }
}

TEST(save_refuses_bad_tensors)
{
    ptq_tensor t = {0};
    const char *p = tmp_path("nodata.npy");
    t.dtype = PTQ_F32;
    t.rank = 1;
    t.dims[0] = 4;
    EXPECT_EQ_INT(npy_save(p, &t), PTQ_ERR_ARG); /* no data */
    t.dtype = PTQ_STRING;
    EXPECT_EQ_INT(npy_save(p, &t), PTQ_ERR_UNSUPPORTED);
    t.dtype = PTQ_F32;
    t.dims[0] = -1;
    EXPECT_EQ_INT(npy_save(p, &t), PTQ_ERR_ARG);
    float four[4] = {0};
    t.dims[0] = 4;
    t.data = four;
    EXPECT_EQ_INT(npy_save("/nonexistent-dir/x.npy", &t), PTQ_ERR_IO);
}

/* numpy reads what we write and we read what numpy writes (skipped without numpy) */
TEST(numpy_interop)
{
    if (access("/usr/bin/python3", X_OK) != 0 || system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
        SKIP("/usr/bin/python3 with numpy not available");
    ptq_tensor t = {0};
    t.dtype = PTQ_F16;
    t.rank = 3;
    t.dims[0] = 2, t.dims[1] = 3, t.dims[2] = 4;
    EXPECT_EQ_INT(ptq_tensor_alloc(&t), PTQ_OK);
    for (int i = 0; i < 24; i++) ((uint16_t *)t.data)[i] = ptq_f32_to_f16((float)i * 0.5f - 3.0f);
    const char *ours = tmp_path("ours.npy"), *theirs = tmp_path("theirs.npy");
    EXPECT_EQ_INT(npy_save(ours, &t), PTQ_OK);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np, sys; a = np.load('%s'); "
             "assert a.dtype == np.float16 and a.shape == (2, 3, 4), (a.dtype, a.shape); "
             "assert (a.ravel() == np.arange(24) * 0.5 - 3).all(); "
             "np.save('%s', np.array([[1, 2**40], [-3, 7]], dtype=np.int64)); "
             "np.save('%s.b', np.array([True, False, True])); "
             "np.save('%s.same', np.arange(24, dtype=np.float16).reshape(2, 3, 4) * 0.5 - 3); "
             "assert open('%s', 'rb').read() == open('%s.same.npy', 'rb').read(), 'not numpy bytes'\"",
             ours, theirs, theirs, theirs, ours, theirs);
    EXPECT_EQ_INT(system(cmd), 0);
    ptq_tensor u;
    EXPECT_EQ_INT(npy_load(theirs, &u), PTQ_OK);
    if (u.data) {
        EXPECT_EQ_INT(u.dtype, PTQ_I64);
        EXPECT_EQ_INT(u.rank, 2);
        EXPECT_EQ_INT(((int64_t *)u.data)[1], 1LL << 40);
        EXPECT_EQ_INT(((int64_t *)u.data)[2], -3);
    }
    ptq_tensor_free(&u);
    char bpath[800];
    snprintf(bpath, sizeof bpath, "%s.b.npy", theirs);
    EXPECT_EQ_INT(npy_load(bpath, &u), PTQ_OK);
    if (u.data) {
        EXPECT_EQ_INT(u.dtype, PTQ_BOOL);
        EXPECT_EQ_INT(u.dims[0], 3);
        EXPECT_EQ_INT(((uint8_t *)u.data)[0] + ((uint8_t *)u.data)[1] * 2 + ((uint8_t *)u.data)[2] * 4, 5);
    }
    ptq_tensor_free(&u);
    ptq_tensor_free(&t);
}

int main(void)
{
    make_tmp_dir("npy");
    RUN(round_trip_every_dtype_and_rank);
    RUN(header_text_is_numpys);
    RUN(reads_numpy_layouts);
    RUN(malformed_headers);
    RUN(every_prefix_and_random_corruption);
    RUN(save_refuses_bad_tensors);
    RUN(numpy_interop);
    return test_summary();
}
