/* bench/gemm.c: kern_sgemm's speed on a model's largest convolution GEMMs, single-threaded,
 * against the core's measured FMA peak for the same ISA path (make bench).
 *
 *   build/bench/gemm MODEL NAME:D1xD2x... [TOP]
 *   build/bench/gemm --peak [THREADS]
 *
 * --peak prints the FMA peak of each ISA path this CPU runs (avx512, avx2, generic), on one core
 * and on THREADS (default: all) at once, as BLIS and the roofline literature measure it: a
 * register-only loop of twelve independent FMA chains per thread (enough to cover the FMA
 * latency on two pipes), timed in the thread's CPU seconds (the core's rate while it runs the
 * loop, whatever else the machine runs), best of 5; all cores: the sum of the threads' rates,
 * run at once. The generic path's peak is the same loop as an SSE2 multiply then add (baseline
 * x86-64 has no FMA instruction; 2 flops per lane as an FMA counts): the ceiling of code for
 * that path (its GEMM, whose fmaf is a library call there, stays far below it). One line per
 * path: "peak PATH ONE_CORE ALL_CORES THREADS" in GFLOP/s; make bench (bench/run.sh) divides
 * each model's rate by it.
 *
 * The model is planned at the given input shape without fusion; every Conv with group 1
 * gives a GEMM of m = output channels, n = output positions per image, k = input channels
 * times the kernel volume (the im2col form; pointwise convs read their input in place).
 * The TOP largest (default 6) are timed on random data as the Conv op calls kern_sgemm:
 * the weights packed once (kern_sgemm_pack_a), then one call per column tile of the width
 * kern_gemm_tiles gives (the im2col buffer or, pointwise, the input's panel), one k x tile
 * block of B that stays in cache; median of 5 after a warm-up. The peak is a register-only loop of independent FMAs, so it is what
 * the core sustains at the clock it runs now. */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/onnx.h"
#include "runtime/kernels/sgemm.h"
#include "runtime/plan.h"

typedef struct {
    int64_t m, n, k;
    const char *name;
    int pointwise;
} shape;

#define PEAK_ITERS 20000000L
#define SSE_MULADD(a, x, y) _mm_add_ps(_mm_mul_ps(a, x), y)

/* The calling thread's CPU seconds: what the core does while it runs this thread, so that the
 * peak of a machine shared with other work is still the core's. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Twelve independent FMA chains held in registers (enough to cover the FMA latency on
 * two pipes); the sums are printed only if impossible, so the loop is kept. */
#define PEAK_BODY(V, SET1, FMA, ADD)                                                                                 \
    V a0 = SET1(0.f), a1 = SET1(1.f), a2 = SET1(2.f), a3 = SET1(3.f), a4 = SET1(4.f), a5 = SET1(5.f);               \
    V a6 = SET1(6.f), a7 = SET1(7.f), a8 = SET1(8.f), a9 = SET1(9.f), a10 = SET1(10.f), a11 = SET1(11.f);           \
    V x = SET1(0.999f), y = SET1(1e-7f);                                                                             \
    double t = cpu_now();                                                                                            \
    for (long it = 0; it < PEAK_ITERS; it++) {                                                                       \
        a0 = FMA(a0, x, y); a1 = FMA(a1, x, y); a2 = FMA(a2, x, y); a3 = FMA(a3, x, y);                             \
        a4 = FMA(a4, x, y); a5 = FMA(a5, x, y); a6 = FMA(a6, x, y); a7 = FMA(a7, x, y);                             \
        a8 = FMA(a8, x, y); a9 = FMA(a9, x, y); a10 = FMA(a10, x, y); a11 = FMA(a11, x, y);                         \
    }                                                                                                                \
    t = cpu_now() - t;                                                                                               \
    V s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                                         \
    s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));                                                                     \
    float out[16];                                                                                                   \
    memcpy(out, &s, sizeof s);                                                                                       \
    if (out[0] == 12345.0f) puts("");                                                                                \
    return 12.0 * (double)(sizeof(V) / sizeof(float)) * 2 * (double)PEAK_ITERS / t / 1e9;

__attribute__((target("avx512f,fma"))) static double peak_avx512(void)
{
    PEAK_BODY(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps)
}

__attribute__((target("avx2,fma"))) static double peak_avx2(void)
{
    PEAK_BODY(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps)
}

/* The generic path's ceiling: what baseline x86-64 code (SSE2, no FMA instruction) reaches, the
 * same twelve chains as a packed multiply then add (2 flops per lane, as an FMA counts). ptq's
 * generic GEMM calls fmaf (a library call there) for its exact rounding, so it stays far below. */
static double peak_generic(void)
{
    PEAK_BODY(__m128, _mm_set1_ps, SSE_MULADD, _mm_add_ps)
}

static double peak_of(kern_isa isa)
{
    return isa == KERN_ISA_AVX512 ? peak_avx512() : isa == KERN_ISA_AVX2 ? peak_avx2() : peak_generic();
}

/* Best of 5 of one thread alone, and of the sum of `threads` threads' rates running at once. */
static void peak_table(int threads)
{
    static const kern_isa paths[] = {KERN_ISA_AVX512, KERN_ISA_AVX2, KERN_ISA_GENERIC};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        kern_isa isa = paths[i];
        if (isa == KERN_ISA_AVX512 && !(__builtin_cpu_supports("avx512f"))) continue;
        if (isa == KERN_ISA_AVX2 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) continue;
        double one = 0, all = 0;
        for (int r = 0; r < 5; r++) {
            double v = peak_of(isa), sum = 0;
            if (v > one) one = v;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
            sum += peak_of(isa);
            if (sum > all) all = sum;
        }
        printf("peak %s %.2f %.2f %d\n", kern_isa_name(isa), one, all, threads);
    }
}

static int by_flops(const void *pa, const void *pb)
{
    const shape *a = pa, *b = pb;
    double fa = (double)a->m * (double)a->n * (double)a->k, fb = (double)b->m * (double)b->n * (double)b->k;
    return fa < fb ? 1 : fa > fb ? -1 : 0;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : a > b;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--peak")) {
        peak_table(argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : omp_get_num_procs());
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL NAME:D1xD2x... [TOP] | --peak [THREADS]\n", argv[0]);
        return 2;
    }
    int top = argc > 3 ? atoi(argv[3]) : 6;
    ptq_input_shape in = {0};
    char *colon = strchr(argv[2], ':');
    if (!colon) return 2;
    *colon = 0;
    in.name = argv[2];
    for (char *s = colon + 1; *s && in.rank < PTQ_MAX_RANK; s++) {
        in.dims[in.rank++] = strtoll(s, &s, 10);
        if (*s != 'x') break;
    }
    ptq_graph *g = NULL;
    ptq_plan *p = NULL;
    ptq_plan_options opt = ptq_plan_defaults();
    opt.fuse = 0;
    opt.nthreads = 1;
    if (onnx_model_load(argv[1], &g) != PTQ_OK || ptq_plan_create(g, &in, 1, &opt, &p) != PTQ_OK) {
        fprintf(stderr, "gemm: %s\n", ptq_last_error());
        return 1;
    }
    shape *sh = calloc((size_t)g->n_nodes + 1, sizeof *sh);
    int ns = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ptq_node *nd = &g->nodes[i];
        if (strcmp(nd->op_type, "Conv") != 0 || ptq_attr_int(nd, "group", 1) != 1) continue;
        const ptq_tensor *w = ptq_plan_value(p, nd->inputs[1]), *y = ptq_plan_value(p, nd->outputs[0]);
        if (!w || !y || w->rank < 3) continue;
        int64_t kvol = 1, pos = 1;
        for (int d = 2; d < w->rank; d++) kvol *= w->dims[d];
        for (int d = 2; d < y->rank; d++) pos *= y->dims[d];
        sh[ns++] = (shape){w->dims[0], pos, w->dims[1] * kvol, nd->name, kvol == 1};
    }
    qsort(sh, (size_t)ns, sizeof *sh, by_flops);
    kern_isa isa = kern_isa_current();
    double peak = 0; /* the best of 5: the clock moves with the other core's load */
    for (int r = 0; r < 5; r++) {
        double v = isa == KERN_ISA_AVX512 ? peak_avx512() : isa == KERN_ISA_AVX2 ? peak_avx2() : 0;
        if (v > peak) peak = v;
    }
    printf("GEMM path %s, one thread; FMA peak of this core %.1f GFLOP/s\n\n", kern_isa_name(isa), peak);
    printf("| conv | m x n x k | tile columns | GFLOP/s | of peak |\n|---|---|---:|---:|---:|\n");
    for (int s = 0; s < ns && s < top; s++) {
        int64_t m = sh[s].m, n = sh[s].n, k = sh[s].k;
        int64_t tm, tn; /* conv.c's tiles: panels of 256 Ki floats pointwise, 128 Ki im2col */
        kern_gemm_tiles(m, n, k, 1, 0, sh[s].pointwise ? 256 * 1024 : 128 * 1024, &tm, &tn);
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * tn));
        float *c = malloc(sizeof(float) * (size_t)(m * n));
        if (!a || !b || !c) return 1;
        for (int64_t i = 0; i < m * k; i++) a[i] = (float)(i % 7) * 0.1f - 0.3f;
        for (int64_t i = 0; i < k * tn; i++) b[i] = (float)(i % 11) * 0.05f - 0.25f;
        double t[6];
        kern_sgemm_apack pk;
        if (kern_sgemm_pack_a(0, m, k, a, k, &pk) != 0) return 1;
        for (int r = 0; r < 6; r++) {
            t[r] = omp_get_wtime();
            for (int64_t j0 = 0; j0 < n; j0 += tn) kern_sgemm_packed(&pk, 0, n - j0 < tn ? n - j0 : tn, b, tn, 0, c + j0, n);
            t[r] = omp_get_wtime() - t[r];
        }
        kern_sgemm_apack_free(&pk);
        qsort(t + 1, 5, sizeof t[0], cmp_double);
        double gf = 2.0 * (double)m * (double)n * (double)k / t[3] / 1e9;
        printf("| %s | %lld x %lld x %lld | %lld | %.1f | %.0f%% |\n", sh[s].name, (long long)m, (long long)n, (long long)k,
               (long long)tn, gf,
               peak > 0 ? 100.0 * gf / peak : 0.0);
        free(a);
        free(b);
        free(c);
    }
    free(sh);
    ptq_plan_destroy(p);
    ptq_graph_destroy(g);
    return 0;
}
