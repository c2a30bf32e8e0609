/* calib_avx512.c: calib_scan_bins for AVX-512F (compiled with -mavx512f; see calib_isa.h).
 * Sixteen lanes; the bins of finite non-zero values are left-packed into idx with a
 * compress store. */
#include <immintrin.h>

#include "calib/calib_isa.h"

size_t calib_scan_bins_avx512(const float *x, size_t n, float inv, calib_scan *r, uint32_t *idx)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), sign = _mm512_set1_epi32((int)0x80000000u);
    const __m512i inf = _mm512_set1_epi32(0x7f800000), zero = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
    const __m512 vinv = _mm512_set1_ps(inv);
    __m512i kmin = _mm512_set1_epi32(-1), kmax = zero, amax = zero, zeros = zero, bad = zero;
    size_t i = 0, k = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512((const void *)(x + i));
        __m512i a = _mm512_and_si512(u, absm);
        __mmask16 fin = _mm512_cmplt_epu32_mask(a, inf);
        __mmask16 isz = _mm512_cmpeq_epi32_mask(a, zero);
        __m512i key = _mm512_xor_si512(u, _mm512_or_si512(_mm512_srai_epi32(u, 31), sign));
        kmin = _mm512_mask_min_epu32(kmin, fin, kmin, key);
        kmax = _mm512_mask_max_epu32(kmax, fin, kmax, key);
        amax = _mm512_mask_max_epu32(amax, fin, amax, a);
        zeros = _mm512_mask_add_epi32(zeros, isz, zeros, one);
        bad = _mm512_mask_add_epi32(bad, (__mmask16)~fin, bad, one);
        __mmask16 valid = fin & (__mmask16)~isz;
        __m512i b = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), vinv));
        _mm512_mask_compressstoreu_epi32(idx + k, valid, b);
        k += (size_t)__builtin_popcount((unsigned)valid);
    }
    calib_scan s = {_mm512_reduce_min_epu32(kmin), _mm512_reduce_max_epu32(kmax), _mm512_reduce_max_epu32(amax),
                    (uint32_t)_mm512_reduce_add_epi32(zeros), (uint32_t)_mm512_reduce_add_epi32(bad)};
    k += calib_scan_tail(x, i, n, inv, &s, idx + k);
    *r = s;
    return k;
}
