/* test_opset.c: the opset upgrade to 13 on the real PaddleOCR models (opsets 9 and 11)
 * keeps their outputs bit-identical in ptq's executor, and the upgraded model still
 * saves as valid ONNX (checked by tests/e2e, which loads what this writes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/onnx.h"
#include "quant/opset.h"
#include "runtime/plan.h"
#include "tests/test.h"

static int run(const ptq_graph *g, const ptq_input_shape *shape, const ptq_tensor *x, ptq_tensor *y)
{
    ptq_plan *p = NULL;
    ptq_plan_options o = ptq_plan_defaults();
    o.nthreads = 2;
    if (ptq_plan_create(g, shape, 1, &o, &p) != PTQ_OK || ptq_plan_run(p, x, 1) != PTQ_OK) {
        printf("  plan failed: %s\n", ptq_last_error());
        ptq_plan_destroy(p);
        return -1;
    }
    int st = ptq_tensor_copy(y, ptq_plan_output(p, 0, NULL)) == PTQ_OK ? 0 : -1;
    ptq_plan_destroy(p);
    return st;
}

static void check_model(const char *file, int64_t n, int64_t h, int64_t w, int64_t from_opset, int min_rewrites)
{
    char path[512];
    snprintf(path, sizeof path, "build/models/%s.onnx", file);
    ptq_graph *g = NULL;
    if (onnx_model_load(path, &g) != PTQ_OK) {
        TEST_FAILF("%s: %s", path, ptq_last_error());
        return;
    }
    EXPECT_EQ_INT(ptq_graph_opset(g, ""), from_opset);
    ptq_input_shape s = {.name = "x", .rank = 4, .dims = {n, 3, h, w}};
    ptq_tensor x = {.dtype = PTQ_F32, .rank = 4, .dims = {n, 3, h, w}}, before = {0}, after = {0};
    ptq_tensor_alloc(&x);
    uint64_t r = 42;
    for (size_t i = 0; i < ptq_tensor_numel(&x); i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        ((float *)x.data)[i] = (float)(r >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
    }
    int changed = -1;
    if (run(g, &s, &x, &before) == 0 && quant_upgrade_opset(g, 13, &changed) == PTQ_OK && run(g, &s, &x, &after) == 0) {
        EXPECT_EQ_INT(ptq_graph_opset(g, ""), 13);
        EXPECT(changed >= min_rewrites);
        EXPECT(ptq_shape_equal(&before, &after));
        EXPECT(memcmp(before.data, after.data, ptq_tensor_nbytes(&before)) == 0);
        char out[512];
        snprintf(out, sizeof out, "build/tmp/%s.opset13.onnx", file);
        EXPECT_EQ_INT(onnx_model_save(g, out), PTQ_OK);
        printf("  %s: opset %lld -> 13, %d nodes rewritten, outputs identical\n", file, (long long)from_opset, changed);
    } else {
        TEST_FAILF("%s: %s", file, ptq_last_error());
    }
    ptq_tensor_free(&x);
    ptq_tensor_free(&before);
    ptq_tensor_free(&after);
    ptq_graph_destroy(g);
}

/* det at opset 11 has nothing whose signature changes by 13; rec and cls have Clip, Slice,
 * Squeeze and Softmax to rewrite */
TEST(det_opset11) { check_model("ch_PP-OCRv4_det_infer", 1, 640, 640, 11, 0); }
TEST(rec_opset9) { check_model("ch_PP-OCRv4_rec_infer", 1, 48, 320, 9, 10); }
TEST(cls_opset9) { check_model("ch_ppocr_mobile_v2.0_cls_infer", 2, 48, 192, 9, 10); }

int main(void)
{
    if (access("build/models/ch_PP-OCRv4_det_infer.onnx", R_OK) != 0) {
        printf("build/models missing: run make deps\n0 passed, 1 failed\n");
        return 1;
    }
    if (system("mkdir -p build/tmp") != 0) return 1;
    RUN(det_opset11);
    RUN(rec_opset9);
    RUN(cls_opset9);
    return test_summary();
}
