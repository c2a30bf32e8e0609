/* sgemm.c: kern_sgemm's dispatch, its generic path and its reference (sgemm.h).
 *
 * The path is chosen once (pthread_once): PTQ_ISA when it names a path this CPU runs, else
 * the best of avx512, avx2 + fma and generic that cpuid reports. The SIMD paths pack into a
 * per-thread workspace allocated on a thread's first call and kept for its lifetime (ptq's
 * threads are OpenMP's pool, which lives as long as the process); if that allocation fails
 * the call runs the generic path, which gives the same bits. */
#include <cpuid.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/sgemm.h"
#include "runtime/kernels/sgemm_isa.h"

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static kern_isa isa_best, isa_used;
static int cpu_f16c;        /* F16C: CPUID leaf 1, ECX bit 29 (AVX2 does not imply it) */
static const char *isa_env; /* PTQ_ISA as read at selection, or NULL */

static int isa_parse(const char *s, kern_isa *out)
{
    static const kern_isa all[] = {KERN_ISA_GENERIC, KERN_ISA_AVX2, KERN_ISA_AVX512};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, kern_isa_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return -1;
}

static void isa_select(void)
{
    __builtin_cpu_init();
    isa_best = KERN_ISA_GENERIC;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isa_best = KERN_ISA_AVX2;
    if (__builtin_cpu_supports("avx512f")) isa_best = KERN_ISA_AVX512;
    isa_used = isa_best;
    unsigned a = 0, b = 0, c = 0, d = 0; /* clang's __builtin_cpu_supports does not know "f16c" */
    cpu_f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
    kern_isa want;
    isa_env = getenv("PTQ_ISA");
    if (isa_env && *isa_env && isa_parse(isa_env, &want) == 0 && want <= isa_best) isa_used = want;
}

kern_isa kern_isa_current(void)
{
    pthread_once(&isa_once, isa_select);
    return isa_used;
}

int kern_cpu_has_f16c(void)
{
    pthread_once(&isa_once, isa_select);
    return cpu_f16c;
}

const char *kern_isa_name(kern_isa isa)
{
    switch (isa) {
    case KERN_ISA_AVX512: return "avx512";
    case KERN_ISA_AVX2: return "avx2";
    default: return "generic";
    }
}

int kern_isa_check(char *msg, size_t cap)
{
    pthread_once(&isa_once, isa_select);
    kern_isa want;
    if (!isa_env || !*isa_env) return 0;
    if (isa_parse(isa_env, &want) != 0) {
        snprintf(msg, cap, "PTQ_ISA=%s: unknown path (expected avx512, avx2 or generic)", isa_env);
        return -1;
    }
    if (want > isa_best) {
        snprintf(msg, cap, "PTQ_ISA=%s: this CPU has no %s (its best path is %s)", isa_env,
                 want == KERN_ISA_AVX512 ? "AVX-512F" : "AVX2 with FMA", kern_isa_name(isa_best));
        return -1;
    }
    return 0;
}

/* Row by row: C's row i gets, for p in order, one fmaf per element (the chain of sgemm.h). */
static void sgemm_generic(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                          const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        if (!accumulate)
            for (int64_t j = 0; j < n; j++) row[j] = 0.0f;
        for (int64_t p = 0; p < k; p++) {
            float av = trans_a ? a[p * lda + i] : a[i * lda + p];
            if (trans_b)
                for (int64_t j = 0; j < n; j++) row[j] = fmaf(av, b[j * ldb + p], row[j]);
            else
                for (int64_t j = 0; j < n; j++) row[j] = fmaf(av, b[p * ldb + j], row[j]);
        }
    }
}

/* This thread's packing workspace for a path, or NULL when it cannot be had. */
static float *workspace(kern_isa isa)
{
    static _Thread_local float *ws[3];
    if (!ws[isa]) {
        size_t n = isa == KERN_ISA_AVX512 ? sgemm_avx512_ws_floats : sgemm_avx2_ws_floats;
        ws[isa] = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    }
    return ws[isa];
}

/* One call on the given path; apk: A packed for that path, or NULL. */
static void sgemm_on(kern_isa isa, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, const float *apk)
{
    if (m == 1 && !trans_b && !apk && isa != KERN_ISA_GENERIC) { /* one row: nothing to pack */
        if (isa == KERN_ISA_AVX512)
            sgemm_avx512_row(trans_a, n, k, a, lda, b, ldb, accumulate, c);
        else
            sgemm_avx2_row(trans_a, n, k, a, lda, b, ldb, accumulate, c);
        return;
    }
    float *ws = isa != KERN_ISA_GENERIC && k > 0 ? workspace(isa) : NULL;
    if (ws && isa == KERN_ISA_AVX512)
        sgemm_avx512(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, apk, ws);
    else if (ws && isa == KERN_ISA_AVX2)
        sgemm_avx2(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, apk, ws);
    else if (apk && isa != KERN_ISA_GENERIC) /* no workspace: the packed strips read as a matrix */
        for (int64_t i = 0; i < m; i++) {
            int mr = isa == KERN_ISA_AVX512 ? sgemm_avx512_mr : sgemm_avx2_mr;
            const float *strip = apk + (i / mr) * mr * k + i % mr;
            sgemm_generic(1, trans_b, 1, n, k, strip, mr, b, ldb, accumulate, c + i * ldc, ldc);
        }
    else
        sgemm_generic(trans_a, trans_b, m, n, k, apk ? apk : a, apk ? k : lda, b, ldb, accumulate, c, ldc);
}

void kern_sgemm_isa(kern_isa isa, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0) return;
    pthread_once(&isa_once, isa_select);
    if (isa > isa_best) isa = KERN_ISA_GENERIC;
    sgemm_on(isa, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, NULL);
}

/* Rows per packed strip of a path (generic: 1, plain row-major). */
static int64_t pack_rows(kern_isa isa)
{
    return isa == KERN_ISA_AVX512 ? sgemm_avx512_mr : isa == KERN_ISA_AVX2 ? sgemm_avx2_mr : 1;
}

int kern_sgemm_pack_a(int trans_a, int64_t m, int64_t k, const float *a, int64_t lda, kern_sgemm_apack *out)
{
    kern_isa isa = kern_isa_current();
    int64_t mr = pack_rows(isa), rows = (m + mr - 1) / mr * mr;
    memset(out, 0, sizeof *out);
    size_t n = (size_t)(rows > 0 ? rows : 1) * (size_t)(k > 0 ? k : 1);
    out->data = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!out->data) return -1;
    out->isa = isa;
    out->m = m;
    out->k = k;
    if (m <= 0 || k <= 0) return 0;
    if (isa == KERN_ISA_AVX512)
        sgemm_avx512_pack_a(trans_a, m, k, a, lda, out->data);
    else if (isa == KERN_ISA_AVX2)
        sgemm_avx2_pack_a(trans_a, m, k, a, lda, out->data);
    else
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) out->data[i * k + p] = trans_a ? a[p * lda + i] : a[i * lda + p];
    return 0;
}

void kern_sgemm_apack_free(kern_sgemm_apack *p)
{
    if (!p) return;
    free(p->data);
    p->data = NULL;
}

void kern_sgemm_packed(const kern_sgemm_apack *p, int trans_b, int64_t n, const float *b, int64_t ldb, int accumulate,
                       float *c, int64_t ldc)
{
    if (p->m <= 0 || n <= 0) return;
    sgemm_on(p->isa, 0, trans_b, p->m, n, p->k, NULL, 0, b, ldb, accumulate, c, ldc, p->data);
}

void kern_sgemm_packed_taps(const kern_sgemm_apack *taps, int ntaps, const int64_t *boff, int64_t n, const float *b,
                            int64_t ldb, float *c, int64_t ldc)
{
    if (ntaps < 1 || taps[0].m <= 0 || n <= 0) return;
    kern_isa isa = taps[0].isa;
    int64_t m = taps[0].m, k = taps[0].k, nr = isa == KERN_ISA_AVX512 ? 32 : 16;
    size_t wsf = isa == KERN_ISA_AVX512 ? sgemm_avx512_ws_floats : sgemm_avx2_ws_floats;
    float *ws = isa != KERN_ISA_GENERIC && k > 0 && ntaps <= KERN_TAPS_MAX && (size_t)(k * nr) <= wsf ? workspace(isa)
                                                                                                      : NULL;
    if (!ws) { /* one call per tap: the same chains */
        for (int t = 0; t < ntaps; t++) kern_sgemm_packed(&taps[t], 0, n, b + boff[t], ldb, t > 0, c, ldc);
        return;
    }
    const float *a[KERN_TAPS_MAX];
    for (int t = 0; t < ntaps; t++) a[t] = taps[t].data;
    if (isa == KERN_ISA_AVX512)
        sgemm_avx512_taps(m, n, k, ntaps, a, b, ldb, boff, c, ldc, ws);
    else
        sgemm_avx2_taps(m, n, k, ntaps, a, b, ldb, boff, c, ldc, ws);
}

void kern_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc)
{
    kern_sgemm_isa(kern_isa_current(), trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

int64_t kern_ceil_div(int64_t a, int64_t b)
{
    return b > 0 ? (a + b - 1) / b : 0;
}

int64_t kern_split_rows(int64_t total, int64_t max_per, int64_t count)
{
    if (total < 1) return 1;
    if (max_per < 1) max_per = 1;
    if (count < 1) count = 1;
    int64_t parts = kern_ceil_div(total, max_per);
    if (count * parts < KERN_MIN_TASKS) parts = kern_ceil_div(KERN_MIN_TASKS, count);
    else if (count == 1 && parts % KERN_MIN_TASKS) parts += KERN_MIN_TASKS - parts % KERN_MIN_TASKS;
    if (parts > total) parts = total;
    return kern_ceil_div(total, parts);
}

void kern_gemm_tiles(int64_t m, int64_t n, int64_t k, int64_t count, int split_m, int64_t panel_floats, int64_t *tm,
                     int64_t *tn)
{
    const int64_t min_tasks = KERN_MIN_TASKS;
    if (count < 1) count = 1;
    if (n < 1) n = 1;
    if (m < 1) m = 1;
    /* column tiles: at most the panel's width, at least 64 columns, as many as needed for
     * min_tasks tasks, then evened out (a multiple of 16) */
    int64_t cap = panel_floats / (k > 0 ? k : 1);
    if (cap < 64) cap = 64;
    int64_t nt = kern_ceil_div(n, cap), most = n / 64 > 1 ? n / 64 : 1;
    if (count * nt < min_tasks) nt = kern_ceil_div(min_tasks, count);
    else if (count == 1 && nt % min_tasks) nt += min_tasks - nt % min_tasks; /* share out evenly */
    if (nt > most) nt = most;
    if (nt < 1) nt = 1;
    int64_t cols = kern_ceil_div(kern_ceil_div(n, nt), 16) * 16;
    if (cols > n) cols = n;
    int64_t rows = m, tasks = count * kern_ceil_div(n, cols);
    /* rows only when the columns cannot give enough tasks */
    if (split_m && tasks < min_tasks && m > 16) {
        int64_t parts = kern_ceil_div(min_tasks, tasks);
        rows = kern_ceil_div(kern_ceil_div(m, parts), 16) * 16;
        if (rows > m) rows = m;
    }
    *tm = rows;
    *tn = cols;
}

void kern_sgemm_ref(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = accumulate ? (double)c[i * ldc + j] : 0.0;
            for (int64_t p = 0; p < k; p++) {
                float av = trans_a ? a[p * lda + i] : a[i * lda + p];
                float bv = trans_b ? b[j * ldb + p] : b[p * ldb + j];
                s += (double)av * (double)bv;
            }
            c[i * ldc + j] = (float)s;
        }
}
