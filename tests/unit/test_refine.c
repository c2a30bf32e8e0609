/* test_refine.c: bias correction (engine/refine.h) on small graphs built here: a planted
 * per-channel mean shift is removed, layer after layer (the second layer sees the first
 * one corrected), for Conv (with and without bias, padding, stride, groups) and MatMul + Add;
 * the same bytes at any thread count and batch size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/refine.h"
#include "quant/qdq.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "tests/test.h"
#include "tests/unit/graph_build.h"

enum { N_IMAGES = 6 };

/* x [N,4,8,8] -> Conv c1 (6 out, 3x3, pads 1, bias) -> y1 -> Relu -> r1
 *   -> Conv c2 (6 out, 3x3, stride 2, pads 0,1,1,0, group 2, no bias) -> y2 -> Relu -> y3 (output) */
static ptq_graph *conv_graph(void)
{
    int64_t xd[4] = {1, 4, 8, 8}, w1[4] = {6, 4, 3, 3}, b1[1] = {6}, w2[4] = {6, 3, 3, 3};
    ptq_graph *g = gb_graph(4, xd);
    gb_weight(g, "w1", 4, w1, 11);
    gb_weight(g, "b1", 1, b1, 12);
    gb_weight(g, "w2", 4, w2, 13);
    const char *c1[3] = {"x", "w1", "b1"}, *r1[1] = {"y1"}, *c2[2] = {"r1", "w2"}, *r2[1] = {"y2"};
    int n = gb_node(g, "c1", "Conv", c1, 3, "y1");
    gb_ints_attr(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    gb_node(g, "relu1", "Relu", r1, 1, "r1");
    n = gb_node(g, "c2", "Conv", c2, 2, "y2");
    gb_ints_attr(g, n, "strides", (const int64_t[]){2, 2}, 2);
    gb_ints_attr(g, n, "pads", (const int64_t[]){0, 1, 1, 0}, 4);
    gb_int_attr(g, n, "group", 2);
    gb_node(g, "relu2", "Relu", r2, 1, "y3");
    gb_output(g, "y3");
    gb_output(g, "y1");
    gb_output(g, "y2");
    return g;
}

/* x [N,5,16] -> MatMul (w [16,8]) -> m -> Add bias [8] -> y1 (output) */
static ptq_graph *matmul_graph(void)
{
    int64_t xd[3] = {1, 5, 16}, wd[2] = {16, 8}, bd[1] = {8};
    ptq_graph *g = gb_graph(3, xd);
    gb_weight(g, "w", 2, wd, 21);
    gb_weight(g, "b", 1, bd, 22);
    const char *mm[2] = {"x", "w"}, *ad[2] = {"m", "b"};
    gb_node(g, "mm", "MatMul", mm, 2, "m");
    gb_node(g, "add", "Add", ad, 2, "y1");
    gb_output(g, "y1");
    return g;
}

static int ranges(const char *name, float *amax, void *user)
{
    (void)name;
    (void)user;
    *amax = 0.8f; /* clips part of every tensor: a mean shift of its own */
    return 1;
}

/* Per-channel means of output `name` over the images (channel axis 1 for rank 4, else the last). */
static void channel_means(const ptq_graph *g, const gb_source *m, const char *name, double *mean, int *nc)
{
    ptq_plan *p = NULL;
    ptq_plan_options po = ptq_plan_defaults();
    ptq_input_shape s = {.name = "x", .rank = m->rank};
    memcpy(s.dims, m->dims, sizeof s.dims);
    s.dims[0] = N_IMAGES;
    EXPECT(ptq_plan_create(g, &s, 1, &po, &p) == PTQ_OK);
    ptq_tensor x = {.dtype = PTQ_F32, .rank = m->rank, .data = m->data};
    memcpy(x.dims, s.dims, sizeof x.dims);
    EXPECT(ptq_plan_run(p, &x, 1) == PTQ_OK);
    for (int o = 0; o < ptq_plan_n_outputs(p); o++) {
        const char *on;
        const ptq_tensor *y = ptq_plan_output(p, o, &on);
        if (strcmp(on, name)) continue;
        int axis = y->rank == 4 ? 1 : y->rank - 1;
        int64_t C = y->dims[axis], inner = 1;
        for (int d = axis + 1; d < y->rank; d++) inner *= y->dims[d];
        size_t n = ptq_tensor_numel(y);
        *nc = (int)C;
        for (int64_t c = 0; c < C; c++) mean[c] = 0;
        for (size_t i = 0; i < n; i++) mean[(int64_t)(i / (size_t)inner) % C] += (double)((const float *)y->data)[i];
        for (int64_t c = 0; c < C; c++) mean[c] /= (double)n / (double)C;
    }
    ptq_plan_destroy(p);
}

static double worst_shift(const ptq_graph *f, const ptq_graph *q, const gb_source *m, const char *name)
{
    double a[16], b[16], worst = 0;
    int na = 0, nb = 0;
    channel_means(f, m, name, a, &na);
    channel_means(q, m, name, b, &nb);
    EXPECT(na == nb && na > 0);
    for (int c = 0; c < na; c++) worst = fmax(worst, fabs(a[c] - b[c]));
    return worst;
}

static ptq_graph *quantized(ptq_graph *(*make)(void))
{
    ptq_graph *q = make();
    quant_options o = quant_defaults();
    o.range = ranges;
    quant_report r;
    EXPECT(quant_insert_qdq(q, &o, &r) == PTQ_OK);
    quant_report_free(&r);
    return q;
}

/* Plants a shift: every int8 code of output channel 1 of weight `w` moves by +20. */
static void plant(ptq_graph *q, const char *w, int64_t cout, int transposed)
{
    char name[64];
    snprintf(name, sizeof name, "%s_quantized", w);
    int v = ptq_graph_find_value(q, name);
    EXPECT(v >= 0);
    ptq_tensor *t = &q->values[v].t;
    int8_t *c = t->data;
    size_t n = ptq_tensor_numel(t);
    for (size_t i = 0; i < n; i++) {
        int64_t ch = transposed ? (int64_t)(i % (size_t)cout) : (int64_t)(i / (n / (size_t)cout));
        if (ch == 1) c[i] = (int8_t)(c[i] > 107 ? 127 : c[i] + 20);
    }
}

TEST(conv)
{
    ptq_graph *f = conv_graph(), *q = quantized(conv_graph);
    gb_source m = gb_images(4, (const int64_t[]){N_IMAGES, 4, 8, 8}, N_IMAGES);
    eng_source src = gb_source_of(&m);
    plant(q, "w1", 6, 0);
    double before1 = worst_shift(f, q, &m, "y1"), before2 = worst_shift(f, q, &m, "y2");
    EXPECT(before1 > 0.05);
    eng_refine_options o = eng_refine_defaults();
    eng_refine_report rep;
    EXPECT(eng_refine(q, f, &src, &o, &rep) == PTQ_OK);
    EXPECT(rep.layers == 2 && rep.corrected == 2 && rep.images == N_IMAGES && rep.passes == 1);
    EXPECT(rep.segments >= 2 && rep.peak_memory > 0 && rep.peak_spilled == 0);
    double after1 = worst_shift(f, q, &m, "y1"), after2 = worst_shift(f, q, &m, "y2");
    EXPECT(after1 < 1e-5 && after2 < 1e-5);
    EXPECT(after2 < before2);
    /* c2 had no bias: it got one */
    int c2 = -1;
    for (int i = 0; i < q->n_nodes; i++)
        if (!strcmp(q->nodes[i].name, "c2")) c2 = i;
    EXPECT(c2 >= 0 && q->nodes[c2].n_inputs == 3 && q->nodes[c2].inputs[2] >= 0);

    /* the same bytes at 1 and 3 threads, batch 4 and 1 */
    ptq_graph *q2 = quantized(conv_graph);
    plant(q2, "w1", 6, 0);
    o.nthreads = 3;
    m.batch = 1;
    EXPECT(eng_refine(q2, f, &src, &o, &rep) == PTQ_OK);
    const ptq_tensor *b1 = &q->values[ptq_graph_find_value(q, "b1")].t, *b1b = &q2->values[ptq_graph_find_value(q2, "b1")].t;
    EXPECT(memcmp(b1->data, b1b->data, ptq_tensor_nbytes(b1)) == 0);
    const ptq_tensor *b2 = &q->values[q->nodes[c2].inputs[2]].t, *b2b = &q2->values[q2->nodes[c2].inputs[2]].t;
    EXPECT(memcmp(b2->data, b2b->data, ptq_tensor_nbytes(b2)) == 0);
    ptq_graph_destroy(q2);

    /* a memory budget of one byte: every kept layer input goes to the temporary file, the same bytes */
    ptq_graph *q4 = quantized(conv_graph);
    plant(q4, "w1", 6, 0);
    o.memory_budget = 1;
    EXPECT(eng_refine(q4, f, &src, &o, &rep) == PTQ_OK);
    EXPECT(rep.peak_spilled > 0 && rep.peak_memory == 0);
    const ptq_tensor *b1c = &q4->values[ptq_graph_find_value(q4, "b1")].t;
    EXPECT(memcmp(b1->data, b1c->data, ptq_tensor_nbytes(b1)) == 0);
    ptq_graph_destroy(q4);
    o.memory_budget = 0;

    /* off: nothing changes */
    ptq_graph *q3 = quantized(conv_graph);
    o.bias_correction = 0;
    EXPECT(eng_refine(q3, f, &src, &o, &rep) == PTQ_OK);
    EXPECT(rep.corrected == 0 && rep.passes == 0);
    ptq_graph_destroy(q3);
    ptq_graph_destroy(f);
    ptq_graph_destroy(q);
    free(m.data);
}

TEST(matmul)
{
    ptq_graph *f = matmul_graph(), *q = quantized(matmul_graph);
    gb_source m = gb_images(3, (const int64_t[]){N_IMAGES, 5, 16}, N_IMAGES);
    eng_source src = gb_source_of(&m);
    plant(q, "w", 8, 1);
    EXPECT(worst_shift(f, q, &m, "y1") > 0.05);
    eng_refine_options o = eng_refine_defaults();
    eng_refine_report rep;
    EXPECT(eng_refine(q, f, &src, &o, &rep) == PTQ_OK);
    EXPECT(rep.layers == 1 && rep.corrected == 1);
    EXPECT(worst_shift(f, q, &m, "y1") < 1e-5);
    ptq_graph_destroy(f);
    ptq_graph_destroy(q);
    free(m.data);
}

int main(void)
{
    RUN(conv);
    RUN(matmul);
    return test_summary();
}
