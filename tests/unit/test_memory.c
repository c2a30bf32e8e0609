/* test_memory.c: what the bench and the memory budget count, on small graphs built here:
 * - ptq_plan_flops: 2 x the multiply-adds of a Conv (dense and depthwise), a MatMul and a Gemm
 *   with transA, at batch 1 and 3 (the figure make bench divides by the time);
 * - eng_fit_batch_memory (engine/runner.h): a budget under one image's need gives batch 1 and
 *   says so (over), a large one ENG_DEFAULT_BATCH; in between, the largest batch whose
 *   fixed + batch x per_image fits; per_image counts the activations the plan's block grows by
 *   per image plus the (prefetch + 1) dataset copies; a batch the user or the model gives is
 *   kept. */
#include <stdlib.h>
#include <string.h>

#include "engine/runner.h"
#include "preprocess/preprocess.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "tests/test.h"
#include "tests/unit/graph_build.h"

/* x [N,3,H,W] -> Conv c (8 out, 3x3, pads 1) -> y -> depthwise Conv d (3x3, group 8, pads 1) -> z */
static ptq_graph *convs(int64_t batch_dim)
{
    ptq_graph *g = gb_graph(4, (const int64_t[]){1, 3, 16, 16});
    g->values[ptq_graph_find_value(g, "x")].t.dims[0] = batch_dim;
    g->values[ptq_graph_find_value(g, "x")].t.dims[2] = -1;
    g->values[ptq_graph_find_value(g, "x")].t.dims[3] = -1;
    gb_weight(g, "w", 4, (const int64_t[]){8, 3, 3, 3}, 1);
    gb_weight(g, "wd", 4, (const int64_t[]){8, 1, 3, 3}, 2);
    int n = gb_node(g, "c", "Conv", (const char *const[]){"x", "w"}, 2, "y");
    gb_ints_attr(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    n = gb_node(g, "d", "Conv", (const char *const[]){"y", "wd"}, 2, "z");
    gb_ints_attr(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    gb_int_attr(g, n, "group", 8);
    gb_output(g, "z");
    return g;
}

static double flops_at(const ptq_graph *g, const char *in, int rank, const int64_t *dims)
{
    ptq_input_shape s = {.name = in, .rank = rank};
    memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
    ptq_plan_options o = ptq_plan_defaults();
    o.bound_memory = 1;
    ptq_plan *p = NULL;
    if (ptq_plan_create(g, &s, 1, &o, &p) != PTQ_OK) return -1;
    double f = ptq_plan_flops(p);
    ptq_plan_destroy(p);
    return f;
}

TEST(flops_of_known_layers)
{
    ptq_graph *g = convs(-1);
    /* dense: 16x16 outputs x 8 channels x (3 x 3x3) MACs; depthwise: 16x16 x 8 x 3x3 */
    double one = 2.0 * 256 * 8 * 27 + 2.0 * 256 * 8 * 9;
    EXPECT_NEAR(flops_at(g, "x", 4, (const int64_t[]){1, 3, 16, 16}), one, 0, 0);
    EXPECT_NEAR(flops_at(g, "x", 4, (const int64_t[]){3, 3, 16, 16}), 3 * one, 0, 0);
    ptq_graph_destroy(g);
    /* a [N, 5] x [5, 7] MatMul, then Gemm with transA: [7, N]' x [7, 4] */
    g = gb_graph(2, (const int64_t[]){1, 5});
    gb_weight(g, "b", 2, (const int64_t[]){5, 7}, 3);
    gb_weight(g, "c", 2, (const int64_t[]){7, 4}, 4);
    gb_node(g, "mm", "MatMul", (const char *const[]){"x", "b"}, 2, "y");
    gb_node(g, "t", "Transpose", (const char *const[]){"y"}, 1, "yt");
    int n = gb_node(g, "gemm", "Gemm", (const char *const[]){"yt", "c"}, 2, "z");
    gb_int_attr(g, n, "transA", 1);
    gb_output(g, "z");
    EXPECT_NEAR(flops_at(g, "x", 2, (const int64_t[]){2, 5}), 2.0 * 2 * 7 * 5 + 2.0 * 2 * 4 * 7, 0, 0);
    ptq_graph_destroy(g);
}

TEST(batch_follows_the_budget)
{
    ptq_graph *g = convs(-1);
    pp_config cfg = pp_defaults();
    cfg.width = cfg.height = 512; /* y and z: 8 x 512 x 512 floats = 8 MiB each per image */
    ptq_plan_options popt = ptq_plan_defaults();
    popt.nthreads = 1;
    pp_dataset_options o = pp_dataset_defaults();
    eng_memory_budget m;
    o.batch = 0;
    o.memory_mb = 128;
    EXPECT_EQ_INT(eng_fit_batch_memory(g, NULL, &cfg, &popt, 0, &o, &m), PTQ_OK);
    size_t image = (size_t)3 * 512 * 512 * sizeof(float);
    /* activations: at least y and z of one image; plus (prefetch 1 + 1) copies of the input */
    EXPECT(m.per_image >= 2 * (size_t)(8 << 20) + 2 * image);
    EXPECT(m.per_image <= 3 * (size_t)(8 << 20) + 2 * image);
    EXPECT(m.fixed >= (size_t)ENG_PROCESS_MB << 20);
    EXPECT_EQ_INT((int)m.budget, 128 << 20);
    int want = 1;
    while (want < ENG_DEFAULT_BATCH && m.fixed + (size_t)(want + 1) * m.per_image <= m.budget) want++;
    EXPECT(want > 1 && want < ENG_DEFAULT_BATCH); /* in between: the figure is the budget's */
    EXPECT_EQ_INT(o.batch, want);
    EXPECT_EQ_INT(m.batch, want);
    EXPECT_EQ_INT(m.over, 0);
    o.batch = 0;
    o.memory_mb = 4096;
    EXPECT_EQ_INT(eng_fit_batch_memory(g, NULL, &cfg, &popt, 0, &o, &m), PTQ_OK);
    EXPECT_EQ_INT(o.batch, ENG_DEFAULT_BATCH);
    o.batch = 0;
    o.memory_mb = 32; /* under fixed + one image */
    EXPECT_EQ_INT(eng_fit_batch_memory(g, NULL, &cfg, &popt, 0, &o, &m), PTQ_OK);
    EXPECT_EQ_INT(o.batch, 1);
    EXPECT_EQ_INT(m.over, 1);
    o.batch = 5; /* the user's */
    EXPECT_EQ_INT(eng_fit_batch_memory(g, NULL, &cfg, &popt, 0, &o, &m), PTQ_OK);
    EXPECT_EQ_INT(o.batch, 5);
    EXPECT_EQ_INT(m.batch, 0);
    ptq_graph_destroy(g);
    g = convs(2); /* the model's */
    o.batch = 0;
    EXPECT_EQ_INT(eng_fit_batch_memory(g, NULL, &cfg, &popt, 0, &o, &m), PTQ_OK);
    EXPECT_EQ_INT(o.batch, 2);
    EXPECT_EQ_INT(m.batch, 0);
    ptq_graph_destroy(g);
}

int main(void)
{
    RUN(flops_of_known_layers);
    RUN(batch_follows_the_budget);
    return test_summary();
}
