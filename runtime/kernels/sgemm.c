/* sgemm.c: the OpenBLAS wrapper of sgemm.h and its scalar reference.
 *
 * Debian's OpenBLAS is the OpenMP build: a call threads itself over
 * omp_get_max_threads() threads unless it runs inside an active parallel region.
 * kern_blas_serial() sets that ICV to 1 for the current implicit task only, so a
 * single-thread team (nthreads = 1) does not spawn OpenBLAS threads either. */
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <string.h>

#include "runtime/kernels/sgemm.h"

int kern_sgemm_fits(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc)
{
    return m >= 0 && n >= 0 && k >= 0 && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda >= 0 && lda <= INT_MAX &&
           ldb >= 0 && ldb <= INT_MAX && ldc >= 0 && ldc <= INT_MAX;
}

void kern_blas_serial(void)
{
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
}

/* C = beta * C over m rows of n (k = 0). */
static void scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        if (beta == 0.0f)
            memset(row, 0, sizeof(float) * (size_t)n);
        else
            for (int64_t j = 0; j < n; j++) row[j] *= beta;
    }
}

static void blas_call(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    /* OpenBLAS rejects leading dims below the row length even when a dim is 1 */
    int64_t la = trans_a ? m : k, lb = trans_b ? k : n;
    if (lda < la) lda = la;
    if (ldb < lb) ldb = lb;
    if (ldc < n) ldc = n;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

void kern_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
    blas_call(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void kern_sgemm_threaded(int nthreads, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
    if (nthreads < 1 || omp_in_parallel()) nthreads = 1;
    /* OpenBLAS threads over omp_get_max_threads(): set it for this call, then restore it
     * (an ICV of the calling task only) */
    int old = omp_get_max_threads();
    if (old != nthreads) omp_set_num_threads(nthreads);
    blas_call(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (old != nthreads) omp_set_num_threads(old);
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

void kern_sgemm_ref(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t p = 0; p < k; p++) {
                float av = trans_a ? a[p * lda + i] : a[i * lda + p];
                float bv = trans_b ? b[j * ldb + p] : b[p * ldb + j];
                s += (double)av * (double)bv;
            }
            float r = (float)((double)alpha * s);
            c[i * ldc + j] = beta == 0.0f ? r : r + beta * c[i * ldc + j];
        }
}
