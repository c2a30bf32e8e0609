/* test_tensor.c: dtype sizes, shape helpers, float16 conversion (exhaustive), broadcasting. */
#include <math.h>
#include <string.h>

#include "runtime/shape.h"
#include "runtime/tensor.h"
#include "tests/test.h"

/* reference f16 -> f32 by the definition: (-1)^s * 2^(e-15) * (1 + m/1024) */
static double f16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp(m / 1024.0, -14);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp(1.0 + m / 1024.0, e - 15);
    return s ? -v : v;
}

TEST(f16_to_f32_exhaustive)
{
    for (uint32_t h = 0; h < 65536; h++) {
        double want = f16_value((uint16_t)h);
        float got = ptq_f16_to_f32((uint16_t)h);
        if (isnan(want) ? !isnan(got) : (double)got != want) {
            TEST_FAILF("h=0x%04x: got %.9g want %.9g", h, (double)got, want);
            return;
        }
        if (!isnan(want) && !signbit(got) != !signbit(want)) {
            TEST_FAILF("h=0x%04x sign", h);
            return;
        }
    }
}

TEST(f32_to_f16_round_trip_and_rounding)
{
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t x = (uint16_t)h;
        if (((x >> 10) & 31) == 31 && (x & 1023)) continue; /* NaN payloads */
        uint16_t back = ptq_f32_to_f16(ptq_f16_to_f32(x));
        if (back != x) {
            TEST_FAILF("h=0x%04x -> 0x%04x", h, back);
            return;
        }
    }
    /* ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> 1 (even) */
    EXPECT_EQ_INT(ptq_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    EXPECT_EQ_INT(ptq_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    EXPECT_EQ_INT(ptq_f32_to_f16(65520.0f), 0x7c00);   /* rounds to inf */
    EXPECT_EQ_INT(ptq_f32_to_f16(65519.0f), 0x7bff);
    EXPECT_EQ_INT(ptq_f32_to_f16(0x1p-25f), 0x0000);   /* tie to even: 0 */
    EXPECT_EQ_INT(ptq_f32_to_f16(0x1.8p-25f), 0x0001);
    EXPECT(isnan(ptq_f16_to_f32(ptq_f32_to_f16(NAN))));
}

TEST(broadcast_shapes)
{
    ptq_tensor a = {.rank = 4, .dims = {8, 1, 6, 1}}, b = {.rank = 3, .dims = {7, 1, 5}}, o;
    EXPECT_EQ_INT(ptq_broadcast(&a, &b, &o), PTQ_OK);
    EXPECT_EQ_INT(o.rank, 4);
    EXPECT_EQ_INT(o.dims[0], 8);
    EXPECT_EQ_INT(o.dims[1], 7);
    EXPECT_EQ_INT(o.dims[2], 6);
    EXPECT_EQ_INT(o.dims[3], 5);
    int64_t s[4];
    ptq_broadcast_strides(&b, &o, s);
    EXPECT_EQ_INT(s[0], 0);
    EXPECT_EQ_INT(s[1], 5);
    EXPECT_EQ_INT(s[2], 0);
    EXPECT_EQ_INT(s[3], 1);
    ptq_tensor c = {.rank = 1, .dims = {3}}, d = {.rank = 1, .dims = {4}};
    EXPECT_EQ_INT(ptq_broadcast(&c, &d, &o), PTQ_ERR_SHAPE);
    EXPECT(strstr(ptq_last_error(), "3") && strstr(ptq_last_error(), "4"));
}

TEST(tensor_alloc_limits)
{
    ptq_tensor t = {.dtype = PTQ_F32, .rank = 2, .dims = {1LL << 30, 1LL << 30}};
    EXPECT_EQ_INT(ptq_tensor_alloc(&t), PTQ_ERR_SHAPE);
    ptq_tensor s = {.dtype = PTQ_STRING, .rank = 1, .dims = {2}};
    EXPECT_EQ_INT(ptq_tensor_alloc(&s), PTQ_ERR_UNSUPPORTED);
    ptq_tensor z = {.dtype = PTQ_I64, .rank = 2, .dims = {0, 5}};
    EXPECT_EQ_INT(ptq_tensor_alloc(&z), PTQ_OK);
    EXPECT_EQ_INT(ptq_tensor_numel(&z), 0);
    ptq_tensor_free(&z);
    char buf[32];
    ptq_tensor u = {.rank = 0};
    EXPECT_STR(ptq_shape_str(&u, buf, sizeof buf), "scalar");
    ptq_tensor v = {.rank = 3, .dims = {1, 3, 640}};
    EXPECT_STR(ptq_shape_str(&v, buf, sizeof buf), "1x3x640");
    int64_t ax;
    EXPECT_EQ_INT(ptq_norm_axis(-1, 4, &ax), 0);
    EXPECT_EQ_INT(ax, 3);
    EXPECT_EQ_INT(ptq_norm_axis(4, 4, &ax), -1);
    EXPECT_EQ_INT(ptq_norm_axis(-5, 4, &ax), -1);
}

int main(void)
{
    RUN(f16_to_f32_exhaustive);
    RUN(f32_to_f16_round_trip_and_rounding);
    RUN(broadcast_shapes);
    RUN(tensor_alloc_limits);
    return test_summary();
}
