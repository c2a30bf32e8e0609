/* op_test.h: helpers shared by the unit tests (tests/test.h stays the generic harness).
 *
 * Random data: one xorshift32 generator for the whole program. Seed it first thing in main
 * with the seed the test has always used, so the generated cases stay the same:
 *
 *   int main(void) { op_test_seed(777u); RUN(gemm_random); return test_summary(); }
 *
 *   rnd()               next 32-bit value
 *   irand(lo, hi)       integer in [lo, hi]
 *   frand(lo, hi)       float in [lo, hi), 24 random bits
 *   tensor_new(dt, rank, dims)          zero-filled tensor (aborts when allocation fails)
 *   tensor_rand(rank, dims, lo, hi)     float32 tensor of frand(lo, hi), in element order
 *   tensor_i64(n, v)                    1-D int64 tensor holding v[0..n)
 *
 * One op node run directly (runtime/op.h: infer, then run), as a model would run it:
 *
 *   op_node r = {.op = "Softmax", .opset = 13, .n_in = 1, .in = {&x}, .nthreads = 3};
 *   add_int(&r, "axis", -1);
 *   ptq_tensor y[1];
 *   EXPECT_EQ_INT(op_run(&r, y), PTQ_OK);   ...   ptq_tensor_free(&y[0]);
 *
 *   op_run_ins(&r, op, ins, n_in, outs) does the same with r.op = op and r.in = ins[0..n_in).
 *   Inputs are named in0.., outputs out0.., the node r.name ("n1" when NULL). An input's data
 *   is hidden at infer unless its bit is set in const_mask (then it is a constant). Outputs
 *   are allocated by op_run (the caller frees them) and filled with garbage before the run
 *   (float32: NaN bits 0xff, others 0xa5) so every element must be written; scratch is
 *   NaN-filled too. add_int/add_float/add_ints/add_str append attributes, which op_run
 *   consumes (r.n_attrs is 0 afterwards, whatever the outcome).
 *
 * Comparisons (print the first three mismatches, return how many elements differ):
 *   compare_f32(y, ref, n, atol, rtol, what)   float y against float ref
 *   compare_f64(&t, ref, n, atol, rtol, what)  float32 tensor t against double ref (and its size)
 *   same_bits(&a, &b)                          same dtype, shape and bytes (both allocated)
 * Tolerance as EXPECT_NEAR: |y - ref| <= atol + rtol*|ref|; NaN matches NaN.
 *
 * Temporary files: make_tmp_dir(sub) creates $BUILD/tmp[/sub] (BUILD defaults to build) and
 * returns it; tmp_path(name) then names a file there (four results are valid at a time). */
#ifndef PTQ_OP_TEST_H
#define PTQ_OP_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/graph.h"
#include "runtime/op.h"
#include "tests/test.h"

/* ------------------------------------------------------------ random data */

static uint32_t op_test_rng_ = 2463534242u;

/* Restarts the generator; 0 (a fixed point of xorshift) is replaced by the default seed. */
static inline void op_test_seed(uint32_t seed)
{
    op_test_rng_ = seed ? seed : 2463534242u;
}

static inline uint32_t rnd(void)
{
    op_test_rng_ ^= op_test_rng_ << 13;
    op_test_rng_ ^= op_test_rng_ >> 17;
    op_test_rng_ ^= op_test_rng_ << 5;
    return op_test_rng_;
}

static inline int64_t irand(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rnd() % (uint32_t)(hi - lo + 1));
}

static inline float frand(float lo, float hi) /* [lo, hi) */
{
    return lo + (hi - lo) * (float)(rnd() >> 8) / 16777216.0f;
}

static inline ptq_tensor tensor_new(ptq_dtype dt, int rank, const int64_t *dims)
{
    ptq_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int d = 0; d < rank; d++) t.dims[d] = dims[d];
    if (ptq_tensor_alloc(&t) != PTQ_OK) abort();
    return t;
}

static inline ptq_tensor tensor_rand(int rank, const int64_t *dims, float lo, float hi)
{
    ptq_tensor t = tensor_new(PTQ_F32, rank, dims);
    size_t n = ptq_tensor_numel(&t);
    for (size_t i = 0; i < n; i++) ((float *)t.data)[i] = frand(lo, hi);
    return t;
}

static inline ptq_tensor tensor_i64(int n, const int64_t *v)
{
    int64_t dims[1] = {n};
    ptq_tensor t = tensor_new(PTQ_I64, 1, dims);
    for (int i = 0; i < n; i++) ((int64_t *)t.data)[i] = v[i];
    return t;
}

/* ------------------------------------------------------------ one node */

enum { OP_TEST_MAX_IN = 5, OP_TEST_MAX_OUT = 3, OP_TEST_MAX_ATTRS = 12 };

typedef struct {
    const char *op;                      /* op type (default domain) */
    const char *name;                    /* node name, in error messages; NULL: "n1" */
    int64_t opset;                       /* 0: 18 */
    int n_in;
    const ptq_tensor *in[OP_TEST_MAX_IN]; /* NULL: input omitted */
    unsigned const_mask;                 /* bit i: in[i]'s data visible at infer (a constant) */
    int n_out;                           /* 0: 1 */
    int want[OP_TEST_MAX_OUT];           /* want[k], k >= 1: output k present (output 0 always is) */
    int nthreads;                        /* 0: 1 */
    ptq_activation act;                  /* fused activation (zero: none) */
    ptq_attr attrs[OP_TEST_MAX_ATTRS];   /* add_int() etc.; consumed by op_run() */
    int n_attrs;
} op_node;

static inline ptq_attr *op_test_attr_(op_node *r, const char *name, ptq_attr_type type)
{
    if (r->n_attrs >= OP_TEST_MAX_ATTRS) abort();
    ptq_attr *a = &r->attrs[r->n_attrs++];
    memset(a, 0, sizeof *a);
    a->name = ptq_strdup(name);
    a->type = type;
    return a;
}

static inline void add_int(op_node *r, const char *name, int64_t v)
{
    op_test_attr_(r, name, PTQ_ATTR_INT)->i = v;
}

static inline void add_float(op_node *r, const char *name, float v)
{
    op_test_attr_(r, name, PTQ_ATTR_FLOAT)->f = v;
}

static inline void add_ints(op_node *r, const char *name, const int64_t *v, int n)
{
    ptq_attr *a = op_test_attr_(r, name, PTQ_ATTR_INTS);
    a->ints = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!a->ints) abort();
    for (int i = 0; i < n; i++) a->ints[i] = v[i];
    a->n = (size_t)n;
}

static inline void add_str(op_node *r, const char *name, const char *v)
{
    ptq_attr *a = op_test_attr_(r, name, PTQ_ATTR_STRING);
    a->s = ptq_strdup(v);
    a->s_len = strlen(v);
}

/* Runs the node; outs[0..n_out) allocated here, absent ones left zeroed (see the top). */
static inline ptq_status op_run(op_node *r, ptq_tensor *outs)
{
    ptq_status st = PTQ_OK;
    ptq_graph *g = ptq_graph_create();
    const ptq_op_def *def = ptq_op_get(ptq_op_find("", r->op));
    ptq_op_ctx ctx;
    ptq_tensor hidden[OP_TEST_MAX_IN];
    const ptq_tensor *inp[OP_TEST_MAX_IN] = {0};
    ptq_tensor *outp[OP_TEST_MAX_OUT] = {0};
    void *scratch = NULL;
    int in_v[OP_TEST_MAX_IN], out_v[OP_TEST_MAX_OUT] = {-1, -1, -1}, nid;
    int n_out = r->n_out ? r->n_out : 1;
    memset(&ctx, 0, sizeof ctx);
    if (r->n_in < 0 || r->n_in > OP_TEST_MAX_IN || n_out < 0 || n_out > OP_TEST_MAX_OUT) abort();
    for (int o = 0; o < n_out; o++) memset(&outs[o], 0, sizeof outs[o]);
    if (!g || !def) FAIL(PTQ_ERR_INTERNAL, "no graph or no kernel for %s", r->op);
    for (int i = 0; i < r->n_in; i++) {
        char name[8] = {'i', 'n', (char)('0' + i), 0};
        in_v[i] = -1;
        if (!r->in[i]) continue;
        TRY(ptq_graph_add_value(g, name, &in_v[i]));
        hidden[i] = *r->in[i];
        if (!(r->const_mask & (1u << i))) hidden[i].data = NULL;
        inp[i] = &hidden[i];
    }
    for (int o = 0; o < n_out; o++) {
        char name[8] = {'o', 'u', 't', (char)('0' + o), 0};
        if (o > 0 && !r->want[o]) continue;
        TRY(ptq_graph_add_value(g, name, &out_v[o]));
        outp[o] = &outs[o];
    }
    TRY(ptq_graph_add_node(g, r->name ? r->name : "n1", r->op, "", in_v, r->n_in, out_v, n_out, &nid));
    for (int k = 0; k < r->n_attrs; k++) TRY(ptq_node_add_attr(&g->nodes[nid], &r->attrs[k]));
    r->n_attrs = 0;
    ctx.node = &g->nodes[nid];
    ctx.opset = r->opset ? r->opset : 18;
    ctx.n_in = r->n_in;
    ctx.in = inp;
    ctx.n_out = n_out;
    ctx.out = outp;
    ctx.act = r->act;
    ctx.nthreads = r->nthreads ? r->nthreads : 1;
    TRY(def->infer(&ctx));
    for (int o = 0; o < n_out; o++) {
        if (!outp[o]) continue;
        TRY(ptq_tensor_alloc(outp[o]));
        memset(outp[o]->data, outp[o]->dtype == PTQ_F32 ? 0xff : 0xa5, ptq_tensor_nbytes(outp[o]));
    }
    if (ctx.scratch_bytes) {
        scratch = ptq_aligned_alloc(ctx.scratch_bytes);
        CHECK_ALLOC(scratch);
        memset(scratch, 0xff, ctx.scratch_bytes);
    }
    ctx.scratch = scratch;
    for (int i = 0; i < r->n_in; i++) inp[i] = r->in[i];
    TRY(def->run(&ctx));
done:
    for (int k = 0; k < r->n_attrs; k++) ptq_attr_clear(&r->attrs[k]);
    r->n_attrs = 0;
    if (def && def->free_state && ctx.state) def->free_state(ctx.state);
    ptq_aligned_free(scratch);
    ptq_graph_destroy(g);
    return st;
}

/* op_run with r->op = op and the inputs ins[0..n_in) (NULL: omitted). */
static inline ptq_status op_run_ins(op_node *r, const char *op, const ptq_tensor *const *ins, int n_in,
                                    ptq_tensor *outs)
{
    if (n_in < 0 || n_in > OP_TEST_MAX_IN) abort();
    r->op = op;
    r->n_in = n_in;
    for (int i = 0; i < n_in; i++) r->in[i] = ins[i];
    return op_run(r, outs);
}

/* ------------------------------------------------------------ comparisons */

static inline int op_test_compare_(const float *y, const float *ref32, const double *ref64, size_t n, double atol,
                                   double rtol, const char *what)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double v = (double)y[i], r = ref32 ? (double)ref32[i] : ref64[i];
        if (!test_close_(v, r, atol, rtol)) {
            if (bad < 3) printf("    %s: element %zu = %.9g, expected %.9g\n", what, i, v, r);
            bad++;
        }
    }
    return bad;
}

static inline int compare_f32(const float *y, const float *ref, size_t n, double atol, double rtol, const char *what)
{
    return op_test_compare_(y, ref, NULL, n, atol, rtol, what);
}

static inline int compare_f64(const ptq_tensor *y, const double *ref, size_t n, double atol, double rtol,
                              const char *what)
{
    if (ptq_tensor_numel(y) != n) {
        printf("    %s: %zu elements, expected %zu\n", what, ptq_tensor_numel(y), n);
        return 1;
    }
    return op_test_compare_(y->data, NULL, ref, n, atol, rtol, what);
}

static inline int same_bits(const ptq_tensor *a, const ptq_tensor *b)
{
    return a->data && b->data && a->dtype == b->dtype && ptq_shape_equal(a, b) &&
           memcmp(a->data, b->data, ptq_tensor_nbytes(a)) == 0;
}

/* ------------------------------------------------------------ temporary files */

static char test_tmp_dir[512];

static inline const char *make_tmp_dir(const char *sub)
{
    const char *b = getenv("BUILD");
    const char *build = b && b[0] ? b : "build";
    char base[400];
    snprintf(base, sizeof base, "%s/tmp", build);
    mkdir(build, 0755);
    mkdir(base, 0755);
    if (sub) {
        snprintf(test_tmp_dir, sizeof test_tmp_dir, "%s/%s", base, sub);
        mkdir(test_tmp_dir, 0755);
    } else {
        snprintf(test_tmp_dir, sizeof test_tmp_dir, "%s", base);
    }
    return test_tmp_dir;
}

static inline const char *tmp_path(const char *name)
{
    static char p[4][700];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", test_tmp_dir, name);
    return p[k];
}

#endif
