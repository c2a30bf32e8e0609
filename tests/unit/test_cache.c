/* test_cache.c: TensorRT calibration caches: the spec's example, round trips, the
 * variants TensorRT writes, bad lines refused with their line numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cache.h"
#include "io/file.h"
#include "tests/test.h"

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    fputs(text, fp);
    fclose(fp);
}

TEST(spec_example_reads)
{
    write_text("build/tmp/spec.cache", "TRT-8601-EntropyCalibration2\nx: 3c010a14\nconv1_out: 3d1c0f82\nsigmoid_0.tmp_0: 3c010204\n");
    io_cache_entry *e;
    int n;
    long v;
    char algo[64];
    EXPECT_EQ_INT(io_cache_read("build/tmp/spec.cache", &e, &n, &v, algo, sizeof algo), PTQ_OK);
    EXPECT_EQ_INT(n, 3);
    EXPECT_EQ_INT(v, 8601);
    EXPECT_STR(algo, "EntropyCalibration2");
    if (n == 3) {
        EXPECT_STR(e[0].name, "x");
        uint32_t bits;
        memcpy(&bits, &e[0].scale, 4);
        EXPECT_EQ_INT(bits, 0x3c010a14);
    }
    io_cache_free(e, n);
}

TEST(write_read_write_is_byte_identical)
{
    io_cache_entry in[] = {{"zeta", 0.5f}, {"(Unnamed Layer* 64) [Shuffle]_output", 0.0f}, {"a/b:c", 1.0f / 127.0f}};
    EXPECT_EQ_INT(io_cache_write("build/tmp/rt1.cache", 101401, "MinMaxCalibration", in, 3), PTQ_OK);
    io_cache_entry *e;
    int n;
    long v;
    char algo[64];
    EXPECT_EQ_INT(io_cache_read("build/tmp/rt1.cache", &e, &n, &v, algo, sizeof algo), PTQ_OK);
    EXPECT_EQ_INT(n, 3);
    EXPECT_EQ_INT(v, 101401);
    EXPECT_EQ_INT(io_cache_write("build/tmp/rt2.cache", v, algo, e, n), PTQ_OK);
    uint8_t *a, *b;
    size_t la, lb;
    io_read_file("build/tmp/rt1.cache", &a, &la, 1 << 20);
    io_read_file("build/tmp/rt2.cache", &b, &lb, 1 << 20);
    EXPECT(la == lb && memcmp(a, b, la) == 0);
    /* sorted byte-wise; zero scale written as 0; names with spaces, ':' and '/' */
    EXPECT(strstr((char *)a, "(Unnamed Layer* 64) [Shuffle]_output: 0\na/b:c: 3c010204\nzeta: 3f000000\n") != NULL);
    free(a);
    free(b);
    io_cache_free(e, n);
}

TEST(variants_tensorrt_writes)
{
    write_text("build/tmp/var.cache", "TRT-7000-LegacyCalibration\r\nin put: 0x3c010a14\r\nleading: 03c010a14\r\nlast: 3f800000");
    io_cache_entry *e;
    int n;
    long v;
    char algo[64];
    EXPECT_EQ_INT(io_cache_read("build/tmp/var.cache", &e, &n, &v, algo, sizeof algo), PTQ_OK);
    EXPECT_EQ_INT(n, 3);
    if (n == 3) {
        EXPECT_STR(e[0].name, "in put");
        EXPECT_NEAR(e[2].scale, 1.0, 0, 0);
        EXPECT_NEAR(e[0].scale, e[1].scale, 0, 0);
    }
    io_cache_free(e, n);
}

TEST(bad_lines_are_refused_with_their_number)
{
    io_cache_entry *e;
    int n;
    long v;
    char algo[64];
    write_text("build/tmp/bad1.cache", "TRT-8601-EntropyCalibration2\nx 3c010a14\n");
    EXPECT_EQ_INT(io_cache_read("build/tmp/bad1.cache", &e, &n, &v, algo, sizeof algo), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), ":2:") != NULL);
    write_text("build/tmp/bad2.cache", "TRT-8601-EntropyCalibration2\nx: 3c010a14\ny: zz\n");
    EXPECT_EQ_INT(io_cache_read("build/tmp/bad2.cache", &e, &n, &v, algo, sizeof algo), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), ":3:") != NULL);
    write_text("build/tmp/bad3.cache", "TRT-8601-EntropyCalibration2\nx: 7fc00000\n"); /* NaN */
    EXPECT_EQ_INT(io_cache_read("build/tmp/bad3.cache", &e, &n, &v, algo, sizeof algo), PTQ_ERR_FORMAT);
    write_text("build/tmp/bad4.cache", "TRT-8601-EntropyCalibration2\nx: bf800000\n"); /* negative */
    EXPECT_EQ_INT(io_cache_read("build/tmp/bad4.cache", &e, &n, &v, algo, sizeof algo), PTQ_ERR_FORMAT);
    write_text("build/tmp/bad5.cache", "not a cache\n");
    EXPECT_EQ_INT(io_cache_read("build/tmp/bad5.cache", &e, &n, &v, algo, sizeof algo), PTQ_ERR_FORMAT);
    EXPECT(strstr(ptq_last_error(), ":1:") != NULL);
}

TEST(header_algorithm_defaults_to_entropy_calibration2)
{
    /* trtexec --calib reads a cache only under its own calibrator's name: EntropyCalibration2 */
    EXPECT_STR(io_cache_algorithm(NULL), "EntropyCalibration2");
    EXPECT_STR(io_cache_algorithm("MinMaxCalibration"), "MinMaxCalibration");
    EXPECT_STR(io_cache_algorithm("LegacyCalibration"), "LegacyCalibration");
    EXPECT_STR(io_cache_algorithm("EntropyCalibration"), "EntropyCalibration");
    EXPECT(io_cache_algorithm("entropy") == NULL);
    EXPECT(io_cache_algorithm("EntropyCalibration3") == NULL);
    EXPECT(io_cache_algorithm("") == NULL);
    io_cache_entry in[] = {{"x", 1.0f / 127.0f}};
    EXPECT_EQ_INT(io_cache_write("build/tmp/algo.cache", 101401, io_cache_algorithm(NULL), in, 1), PTQ_OK);
    uint8_t *a = NULL;
    size_t la = 0;
    EXPECT_EQ_INT(io_read_file("build/tmp/algo.cache", &a, &la, 1 << 20), PTQ_OK);
    EXPECT(a && la >= 31 && memcmp(a, "TRT-101401-EntropyCalibration2\n", 31) == 0);
    free(a);
}

int main(void)
{
    if (system("mkdir -p build/tmp") != 0) return 1;
    RUN(spec_example_reads);
    RUN(write_read_write_is_byte_identical);
    RUN(variants_tensorrt_writes);
    RUN(bad_lines_are_refused_with_their_number);
    RUN(header_algorithm_defaults_to_entropy_calibration2);
    return test_summary();
}
