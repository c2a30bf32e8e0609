/* test_preprocess_shape.c: the tensor sizes of the presets whose size follows the image,
 * against values computed with PaddleOCR's own Python (DetResizeForTest.resize_image_type0
 * with limit 960 'max' and 736 'min'; predict_rec.py's max_wh_ratio with a batch of one),
 * including the ties of Python's round (112 / 32 = 3.5 -> 4, 208 / 32 = 6.5 -> 6); the
 * max_side refusal, validation, io_preset_describe's added keys, and a tensor filled at that
 * size (the padding of a wide rec line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/preset.h"
#include "preprocess/preprocess.h"
#include "tests/unit/op_test.h"

static pp_config det_cfg(int limit, int min)
{
    pp_config c = pp_defaults();
    c.mode = PP_MODE_LIMIT_SIDE;
    c.limit_side = limit;
    c.limit_min = min;
    return c;
}

static pp_config rec_cfg(void)
{
    pp_config c = pp_defaults();
    c.mode = PP_MODE_HEIGHT_PAD;
    c.width = 320;
    c.height = 48;
    c.max_width = 3200;
    return c;
}

TEST(det_limit_side)
{
    /* src w, h; then w, h at 960 max; then at 736 min (0: refused past max_side 4096) */
    static const int t[][6] = {
        {80, 48, 64, 64, 1216, 736},      {48, 80, 64, 64, 736, 1216},       {16, 16, 32, 32, 736, 736},
        {2000, 700, 960, 320, 2112, 736}, {700, 2000, 320, 960, 736, 2112},  {1000, 1000, 960, 960, 992, 992},
        {961, 17, 960, 32, 0, 0},         {1280, 720, 960, 544, 1312, 736},  {1920, 1080, 960, 544, 1920, 1088},
        {3000, 4000, 704, 960, 3008, 4000}, {112, 208, 128, 192, 736, 1376}, {144, 176, 128, 192, 736, 896},
    };
    pp_config mx = det_cfg(960, 0), mn = det_cfg(736, 1);
    EXPECT(pp_validate(&mx) == PTQ_OK && pp_validate(&mn) == PTQ_OK);
    EXPECT_EQ_INT(pp_dynamic(&mx), PP_DYN_WIDTH | PP_DYN_HEIGHT);
    EXPECT(pp_tensor_floats(&mx) == (size_t)3 * 960 * 960);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int w = 0, h = 0;
        EXPECT(pp_tensor_shape(&mx, t[i][0], t[i][1], &w, &h) == PTQ_OK);
        if (w != t[i][2] || h != t[i][3]) TEST_FAILF("max 960: %dx%d gave %dx%d, want %dx%d", t[i][0], t[i][1], w, h, t[i][2], t[i][3]);
        ptq_status st = pp_tensor_shape(&mn, t[i][0], t[i][1], &w, &h);
        if (t[i][4] == 0) {
            EXPECT(st == PTQ_ERR_ARG);
            EXPECT(strstr(ptq_last_error(), "larger than max_side 4096") != NULL);
        } else if (st != PTQ_OK || w != t[i][4] || h != t[i][5]) {
            TEST_FAILF("min 736: %dx%d gave %dx%d (status %d), want %dx%d", t[i][0], t[i][1], w, h, (int)st, t[i][4], t[i][5]);
        }
    }
}

TEST(rec_max_width)
{
    static const int t[][3] = {{100, 48, 320}, {320, 48, 320},     {321, 48, 321},     {500, 31, 774},     {4000, 40, 3200},
                               {20, 60, 320},  {1000, 7, 3200},    {6667, 1000, 320},  {6668, 1000, 320}};
    pp_config c = rec_cfg(), fixed = rec_cfg();
    fixed.max_width = 0;
    EXPECT_EQ_INT(pp_dynamic(&c), PP_DYN_WIDTH);
    EXPECT_EQ_INT(pp_dynamic(&fixed), 0);
    EXPECT(pp_tensor_floats(&c) == (size_t)3 * 48 * 3200);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int w = 0, h = 0;
        EXPECT(pp_tensor_shape(&c, t[i][0], t[i][1], &w, &h) == PTQ_OK);
        if (w != t[i][2] || h != 48) TEST_FAILF("%dx%d gave %dx%d, want %dx48", t[i][0], t[i][1], w, h, t[i][2]);
        EXPECT(pp_tensor_shape(&fixed, t[i][0], t[i][1], &w, &h) == PTQ_OK);
        EXPECT(w == 320 && h == 48);
    }
}

TEST(rec_tensor_padding)
{
    /* a 100x10 line: width int(48 * 10) = 480, resized to ceil(48 * 10) = 480: no padding;
     * a 50x10 line: width 320, resized to 240, columns 240..319 = pad_float */
    pp_config c = rec_cfg();
    c.pad_float = -7.0f;
    uint8_t *px = malloc(100 * 10 * 3);
    float *x = malloc(sizeof(float) * pp_tensor_floats(&c));
    EXPECT(px && x);
    if (!px || !x) goto out;
    memset(px, 200, 100 * 10 * 3);
    io_image img = {.width = 100, .height = 10, .data = px};
    pp_meta m;
    EXPECT(pp_image_to_tensor(&img, &c, x, &m) == PTQ_OK);
    EXPECT_EQ_INT(m.resized_w, 480);
    EXPECT(x[479] != -7.0f);
    img.width = 50;
    EXPECT(pp_image_to_tensor(&img, &c, x, &m) == PTQ_OK);
    EXPECT_EQ_INT(m.resized_w, 240);
    EXPECT(x[239] != -7.0f && x[240] == -7.0f && x[319] == -7.0f && x[2 * 48 * 320 + 47 * 320 + 319] == -7.0f);
out:
    free(px);
    free(x);
}

TEST(validation_and_describe)
{
    pp_config c = rec_cfg();
    char buf[1024];
    io_preset_describe(&c, buf, sizeof buf);
    EXPECT(strstr(buf, "mode=height-pad size=320x48") && strstr(buf, " max_width=3200"));
    c.max_width = 0;
    io_preset_describe(&c, buf, sizeof buf);
    EXPECT(!strstr(buf, "max_width")); /* fixed presets describe as before */
    c.max_width = 100;
    EXPECT(pp_validate(&c) == PTQ_ERR_ARG);
    c = rec_cfg();
    c.mode = PP_MODE_STRETCH;
    EXPECT(pp_validate(&c) == PTQ_ERR_ARG); /* max_width only for height-pad */
    c = det_cfg(960, 0);
    EXPECT(io_preset_set(&c, "limit_type", "min", "test") == PTQ_OK && c.limit_min == 1);
    EXPECT(io_preset_set(&c, "limit_type", "mid", "test") == PTQ_ERR_ARG);
    EXPECT(io_preset_set(&c, "multiple", "0", "test") == PTQ_ERR_ARG);
    EXPECT(io_preset_set(&c, "max_side", "16", "test") == PTQ_OK);
    EXPECT(pp_validate(&c) == PTQ_ERR_ARG); /* max_side below the multiple */
    c = det_cfg(960, 0);
    io_preset_describe(&c, buf, sizeof buf);
    EXPECT(strstr(buf, "mode=limit-side") && strstr(buf, " limit_side=960 limit_type=max multiple=32 max_side=4096"));
    pp_mode m;
    EXPECT(pp_mode_parse("limit-side", &m) == 0 && m == PP_MODE_LIMIT_SIDE);
    EXPECT_STR(pp_mode_name(PP_MODE_LIMIT_SIDE), "limit-side");
}

int main(void)
{
    RUN(det_limit_side);
    RUN(rec_max_width);
    RUN(rec_tensor_padding);
    RUN(validation_and_describe);
    return test_summary();
}
