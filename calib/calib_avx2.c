/* calib_avx2.c: calib_scan_bins for AVX2 (compiled with -mavx2; see calib_isa.h). Eight
 * lanes; the bins of zeros and non-finite values are dropped by a per-lane table of shuffles
 * (left-packing the valid lanes), so idx holds the same multiset as the generic path's. */
#include <immintrin.h>
#include <pthread.h>

#include "calib/calib_isa.h"

/* For each 8-bit lane mask, the indices of its set lanes, packed left. */
static uint32_t pack_tab[256][8];
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;

static void pack_init(void)
{
    for (int m = 0; m < 256; m++) {
        int k = 0;
        for (int j = 0; j < 8; j++)
            if (m >> j & 1) pack_tab[m][k++] = (uint32_t)j;
    }
}

size_t calib_scan_bins_avx2(const float *x, size_t n, float inv, calib_scan *r, uint32_t *idx)
{
    pthread_once(&pack_once, pack_init);
    const uint32_t *tab = &pack_tab[0][0];
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i inf = _mm256_set1_epi32(0x7f800000), zero = _mm256_setzero_si256();
    const __m256i one = _mm256_set1_epi32(1), ones = _mm256_set1_epi32(-1);
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i kmin = ones, kmax = zero, amax = zero, zeros = zero, bad = zero;
    size_t i = 0, k = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        __m256i a = _mm256_and_si256(u, absm);
        /* finite: a < 0x7f800000 (signed compare is fine: a >= 0) */
        __m256i fin = _mm256_cmpgt_epi32(inf, a);
        __m256i key = _mm256_xor_si256(u, _mm256_or_si256(_mm256_srai_epi32(u, 31), sign));
        kmin = _mm256_min_epu32(kmin, _mm256_or_si256(key, _mm256_andnot_si256(fin, ones)));
        kmax = _mm256_max_epu32(kmax, _mm256_and_si256(key, fin));
        amax = _mm256_max_epu32(amax, _mm256_and_si256(a, fin));
        __m256i isz = _mm256_cmpeq_epi32(a, zero);
        zeros = _mm256_sub_epi32(zeros, isz);
        bad = _mm256_add_epi32(bad, _mm256_andnot_si256(fin, one));
        __m256i valid = _mm256_andnot_si256(isz, fin);
        int m = _mm256_movemask_ps(_mm256_castsi256_ps(valid));
        __m256i b = _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(a), vinv));
        __m256i perm = _mm256_loadu_si256((const __m256i *)(const void *)(tab + 8 * m));
        _mm256_storeu_si256((__m256i *)(void *)(idx + k), _mm256_permutevar8x32_epi32(b, perm));
        k += (size_t)__builtin_popcount((unsigned)m);
    }
    uint32_t l[8], h[8], am[8], z[8], nb[8];
    _mm256_storeu_si256((__m256i *)(void *)l, kmin);
    _mm256_storeu_si256((__m256i *)(void *)h, kmax);
    _mm256_storeu_si256((__m256i *)(void *)am, amax);
    _mm256_storeu_si256((__m256i *)(void *)z, zeros);
    _mm256_storeu_si256((__m256i *)(void *)nb, bad);
    calib_scan s = {UINT32_MAX, 0, 0, 0, 0};
    for (int j = 0; j < 8; j++) {
        s.kmin = l[j] < s.kmin ? l[j] : s.kmin;
        s.kmax = h[j] > s.kmax ? h[j] : s.kmax;
        s.amax = am[j] > s.amax ? am[j] : s.amax;
        s.zeros += z[j];
        s.nonfinite += nb[j];
    }
    k += calib_scan_tail(x, i, n, inv, &s, idx + k);
    *r = s;
    return k;
}
