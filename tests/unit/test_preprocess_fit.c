/* test_preprocess_fit.c: gray conversion and the preprocessing fitted to a model's input.
 *  - pp_rgb_to_gray against values computed by the libraries themselves (PIL 9 Image.convert("L"),
 *    OpenCV 4.6 cvtColor(COLOR_RGB2GRAY)), including a colour where the two differ, and gray
 *    pixels kept by both; a gray tensor of one channel normalised with mean[0]/std[0];
 *  - eng_fit_preprocessing on small graphs: uint8 NHWC (layout from the shape, scale/mean/std
 *    dropped), a gray input (GRAY_PIL after an RGB preset, GRAY_CV after a BGR one, the means
 *    averaged), a fixed size other than the preset's (imagenet's crop at 320: shorter 366; a
 *    letterbox to the model's size), --size alone with a crop preset (shorter scaled), Ultralytics
 *    metadata without a preset, and the refusals (int64, 4 channels, rank 3 without a channel dim,
 *    --mean for a uint8 input). Presets come from ./configs (run from the repository root). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/preprocessing.h"
#include "engine/runner.h"
#include "tests/unit/graph_build.h"
#include "tests/unit/op_test.h"

TEST(gray_conventions)
{
    /* RGB, then PIL's L and OpenCV's gray of it, printed by python3-pil / python3-opencv */
    static const int t[][5] = {{255, 0, 0, 76, 76},     {0, 255, 0, 150, 150},   {0, 0, 255, 29, 29},
                               {200, 100, 50, 124, 124}, {13, 250, 77, 159, 159}, {255, 255, 1, 226, 226},
                               {128, 64, 200, 99, 99},  {3, 7, 11, 6, 6},        {138, 167, 72, 147, 148}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint8_t rgb[3] = {(uint8_t)t[i][0], (uint8_t)t[i][1], (uint8_t)t[i][2]}, pil, cv;
        pp_rgb_to_gray(rgb, 1, PP_GRAY_PIL, &pil);
        pp_rgb_to_gray(rgb, 1, PP_GRAY_CV, &cv);
        if (pil != t[i][3] || cv != t[i][4])
            TEST_FAILF("rgb %d,%d,%d: PIL %d (want %d), OpenCV %d (want %d)", t[i][0], t[i][1], t[i][2], pil, t[i][3],
                       cv, t[i][4]);
    }
    for (int v = 0; v < 256; v++) { /* a gray pixel stays itself in both */
        uint8_t rgb[3] = {(uint8_t)v, (uint8_t)v, (uint8_t)v}, a, b;
        pp_rgb_to_gray(rgb, 1, PP_GRAY_PIL, &a);
        pp_rgb_to_gray(rgb, 1, PP_GRAY_CV, &b);
        if (a != v || b != v) TEST_FAILF("gray %d: PIL %d, OpenCV %d", v, a, b);
    }
}

TEST(gray_tensor)
{
    uint8_t px[2 * 3 * 3];
    for (int i = 0; i < 18; i++) px[i] = (uint8_t)(i * 37 % 256);
    io_image img = {.width = 3, .height = 2, .data = px};
    pp_config c = pp_defaults();
    c.width = 3;
    c.height = 2;
    c.gray = PP_GRAY_CV;
    c.scale = 0.5f;
    c.mean[0] = 10.0f;
    c.std[0] = 4.0f;
    EXPECT_EQ_INT(pp_channels(&c), 1);
    EXPECT(pp_tensor_floats(&c) == 6);
    float out[7] = {0, 0, 0, 0, 0, 0, -99.0f};
    EXPECT(pp_image_to_tensor(&img, &c, out, NULL) == PTQ_OK);
    for (int i = 0; i < 6; i++) {
        uint8_t l;
        pp_rgb_to_gray(px + 3 * i, 1, PP_GRAY_CV, &l);
        EXPECT_NEAR(out[i], ((float)l * 0.5f - 10.0f) / 4.0f, 0, 0);
    }
    EXPECT_NEAR(out[6], -99.0f, 0, 0); /* one channel written, not three */
}

/* A graph whose data input "x" is dtype [dims] (rank 3 or 4, dim 0 kept as given). */
static ptq_graph *input_graph(int dtype, int rank, const int64_t *dims)
{
    ptq_graph *g = gb_graph(rank, dims);
    int x = ptq_graph_find_value(g, "x");
    g->values[x].t.dtype = dtype;
    g->values[x].t.dims[0] = dims[0];
    return g;
}

static void discard(int level, const char *text, void *user)
{
    (void)level;
    (void)text;
    (void)user;
}

/* The preprocessing a command would use: preset (NULL: none) and overrides, fitted to g. */
static ptq_status fit(ptq_graph *g, const char *preset, const char *k, const char *v, pp_config *c)
{
    const char *keys[1] = {k}, *vals[1] = {v};
    *c = pp_defaults();
    ptq_status st = eng_preprocessing(preset, keys, vals, k ? 1 : 0, c);
    pp_log quiet = {.message = discard};
    return st != PTQ_OK ? st : eng_fit_preprocessing(g, "m.onnx", c, &quiet);
}

TEST(fit_uint8_nhwc_and_sizes)
{
    pp_config c;
    ptq_graph *g = input_graph(PTQ_U8, 4, (const int64_t[]){1, 160, 160, 3});
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_OK);
    EXPECT(c.nhwc == 1 && c.width == 160 && c.height == 160 && c.shorter == 183 && c.mode == PP_MODE_SHORTER_CROP);
    EXPECT(c.scale == 1.0f && c.mean[0] == 0.0f && c.mean[2] == 0.0f && c.std[1] == 1.0f && !c.gray);
    EXPECT(eng_check_input_dims(g, "m.onnx", &c) == PTQ_OK);
    EXPECT(fit(g, "imagenet-torchvision", "mean", "0.5", &c) == PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "input 'x' is uint8 [1, 160, 160, 3]") != NULL);
    ptq_graph_destroy(g);

    g = input_graph(PTQ_F32, 4, (const int64_t[]){-1, 3, 320, 320});
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_OK);
    EXPECT(c.nhwc == 0 && c.width == 320 && c.height == 320 && c.shorter == 366); /* round(320 * 256 / 224) */
    EXPECT(c.scale == 1.0f / 255.0f && c.mean[0] == 0.485f);
    EXPECT(fit(g, "yolo-letterbox-640", NULL, NULL, &c) == PTQ_OK);
    EXPECT(c.mode == PP_MODE_LETTERBOX && c.width == 320 && c.height == 320);
    EXPECT(fit(g, "imagenet-torchvision", "size", "320x320", &c) == PTQ_OK); /* --size alone: the crop scaled */
    EXPECT_EQ_INT(c.shorter, 366);
    EXPECT(fit(g, "paddleocr-rec", NULL, NULL, &c) == PTQ_OK); /* height-pad is not scaled: refused */
    EXPECT(c.width == 320 && c.height == 48 && eng_check_input_dims(g, "m.onnx", &c) == PTQ_ERR_SHAPE);
    ptq_graph_destroy(g);

    g = input_graph(PTQ_F32, 4, (const int64_t[]){-1, 3, 256, 192}); /* non-square: the shorter side's ratio */
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_OK);
    EXPECT(c.width == 192 && c.height == 256 && c.shorter == 219); /* round(192 * 256 / 224) */
    ptq_graph_destroy(g);

    g = input_graph(PTQ_F32, 4, (const int64_t[]){-1, -1, 224, 224}); /* C dynamic: W is no channel count */
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_OK && c.nhwc == 0);
    ptq_graph_destroy(g);
    g = input_graph(PTQ_F32, 4, (const int64_t[]){-1, 224, 224, -1});
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_OK && c.nhwc == 1);
    ptq_graph_destroy(g);
    g = input_graph(PTQ_F32, 4, (const int64_t[]){-1, -1, -1, -1}); /* nothing known: the preset's layout */
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_OK && c.nhwc == 0);
    ptq_graph_destroy(g);

    g = input_graph(PTQ_F32, 4, (const int64_t[]){-1, 3, -1, -1}); /* dynamic H/W: the preset's size */
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_OK);
    EXPECT(c.width == 224 && c.height == 224 && c.shorter == 256);
    ptq_graph_destroy(g);
}

TEST(fit_gray)
{
    pp_config c;
    ptq_graph *g = input_graph(PTQ_F32, 4, (const int64_t[]){1, 1, 224, 224});
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_OK);
    EXPECT(c.gray == PP_GRAY_PIL && pp_channels(&c) == 1);
    EXPECT_NEAR(c.mean[0], (0.485f + 0.456f + 0.406f) / 3.0f, 0, 1e-6);
    EXPECT_NEAR(c.std[0], (0.229f + 0.224f + 0.225f) / 3.0f, 0, 1e-6);
    EXPECT(eng_check_input_dims(g, "m.onnx", &c) == PTQ_OK);
    EXPECT(fit(g, "imagenet-caffe", NULL, NULL, &c) == PTQ_OK);
    EXPECT_EQ_INT(c.gray, PP_GRAY_CV);
    EXPECT(fit(g, "imagenet-torchvision", "channel-order", "GRAY_CV", &c) == PTQ_OK);
    EXPECT_EQ_INT(c.gray, PP_GRAY_CV);
    EXPECT(fit(g, "imagenet-torchvision", "channel-order", "BGR", &c) == PTQ_ERR_ARG);
    ptq_graph_destroy(g);
}

TEST(fit_metadata_and_refusals)
{
    pp_config c;
    ptq_graph *g = input_graph(PTQ_F32, 4, (const int64_t[]){1, 3, 480, 640});
    g->metadata = calloc(3, sizeof *g->metadata);
    const char *kv[3][2] = {{"stride", "32"}, {"task", "detect"}, {"imgsz", "[480, 640]"}};
    for (int i = 0; i < 3; i++) {
        g->metadata[i].key = ptq_strdup(kv[i][0]);
        g->metadata[i].value = ptq_strdup(kv[i][1]);
    }
    g->n_metadata = 3;
    EXPECT(fit(g, NULL, NULL, NULL, &c) == PTQ_OK);
    EXPECT(c.mode == PP_MODE_LETTERBOX && c.width == 640 && c.height == 480 && c.pad_value == 114);
    EXPECT(strcmp(eng_preprocessing_origin(), "preset yolo-letterbox-640") == 0);
    EXPECT(fit(g, NULL, "mode", "stretch", &c) == PTQ_OK); /* the overrides apply on top */
    EXPECT(c.mode == PP_MODE_STRETCH && c.width == 640);
    ptq_graph_destroy(g);

    g = input_graph(PTQ_F32, 4, (const int64_t[]){1, 3, 100, 120}); /* no metadata: the default at its size */
    EXPECT(fit(g, NULL, NULL, NULL, &c) == PTQ_OK);
    EXPECT(c.mode == PP_MODE_STRETCH && c.width == 120 && c.height == 100 && !c.bgr);
    ptq_graph_destroy(g);

    g = input_graph(PTQ_I64, 4, (const int64_t[]){1, 3, 32, 32});
    EXPECT(fit(g, NULL, NULL, NULL, &c) == PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "input 'x' is int64 [1, 3, 32, 32]") != NULL);
    ptq_graph_destroy(g);
    g = input_graph(PTQ_F32, 4, (const int64_t[]){1, 4, 32, 32});
    EXPECT(fit(g, "imagenet-torchvision", NULL, NULL, &c) == PTQ_ERR_UNSUPPORTED);
    EXPECT(strstr(ptq_last_error(), "4 channels") != NULL);
    ptq_graph_destroy(g);
    g = input_graph(PTQ_F32, 3, (const int64_t[]){-1, -1, -1});
    EXPECT(fit(g, NULL, NULL, NULL, &c) == PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "give --layout") != NULL);
    EXPECT(fit(g, NULL, "layout", "NHWC", &c) == PTQ_OK && c.nhwc == 1);
    ptq_graph_destroy(g);
}

int main(void)
{
    RUN(gray_conventions);
    RUN(gray_tensor);
    RUN(fit_uint8_nhwc_and_sizes);
    RUN(fit_gray);
    RUN(fit_metadata_and_refusals);
    return test_summary();
}
