/* half.h: float32 <-> float16 (IEEE binary16) without branches, for the Cast kernel's float16
 * paths, whose loops the compiler vectorizes. The same bits as ptq_f32_to_f16 and ptq_f16_to_f32
 * (runtime/tensor.c) for every input, NaNs included (tests/unit/test_fp16.c checks it):
 *   to half: round to nearest even; subnormal results through one float addition (exact under
 *   the default rounding mode, which ptq never changes); |x| >= 65520 gives infinity; a NaN gives
 *   the quiet NaN 0x7e00 with x's sign;
 *   to float: exact; a NaN keeps its payload. */
#ifndef PTQ_RUNTIME_OPS_HALF_H
#define PTQ_RUNTIME_OPS_HALF_H

#include <immintrin.h>
#include <stdint.h>

#include "runtime/kernels/mathf.h"

static inline uint16_t half_from_f32(float x)
{
    uint32_t f = ptq_mathf_bits_f(x), sign = f & 0x80000000u;
    f ^= sign;
    /* |x| >= 65536 (and inf, NaN): infinity or the quiet NaN */
    uint32_t big = 0x7c00u | (0x200u & -(uint32_t)(f > 0x7f800000u));
    /* |x| < 2^-14: the subnormal halves, by adding 0.5 (denorm magic: the float whose ulp is the
     * smallest half), which rounds to nearest even at that position */
    uint32_t sub = ptq_mathf_bits_f(ptq_mathf_from_bits_f(f) + ptq_mathf_from_bits_f(126u << 23)) - (126u << 23);
    /* normal: rebias, round to nearest even on bit 13 (a carry into the exponent is right, up to infinity) */
    uint32_t nrm = (f - (112u << 23) + 0xfffu + ((f >> 13) & 1u)) >> 13;
    uint32_t m_big = -(uint32_t)(f >= (143u << 23)), m_sub = -(uint32_t)(f < (113u << 23)) & ~m_big; /* masks, no branch */
    uint32_t o = (big & m_big) | (sub & m_sub) | (nrm & ~(m_big | m_sub));
    return (uint16_t)(o | (sign >> 16));
}

static inline float half_to_f32(uint16_t h)
{
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13, exp = o & (0x7c00u << 13);
    uint32_t nrm = o + (112u << 23);
    uint32_t inf = o + (224u << 23);                              /* exponent 31: 255 */
    uint32_t sub = ptq_mathf_bits_f(ptq_mathf_from_bits_f(o + (113u << 23)) - ptq_mathf_from_bits_f(113u << 23)); /* exact */
    uint32_t m_inf = -(uint32_t)(exp == (0x7c00u << 13)), m_sub = -(uint32_t)(exp == 0);
    o = (inf & m_inf) | (sub & m_sub) | (nrm & ~(m_inf | m_sub));
    return ptq_mathf_from_bits_f(o | (((uint32_t)h & 0x8000u) << 16));
}

/* Eight floats rounded to float16 and back with F16C, the bits of half_to_f32(half_from_f32(v))
 * for each: vcvtps2ph rounds to nearest even as half_from_f32 does and vcvtph2ps is exact; a NaN
 * becomes half_to_f32(0x7e00 with its sign), the quiet NaN 0x7fc00000 with the sign. For callers
 * built with target("avx2,f16c"). */
__attribute__((target("avx2,f16c"))) static inline __m256 half_round8(__m256 v)
{
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
    __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return _mm256_blendv_ps(r, _mm256_or_ps(_mm256_and_ps(v, sign), qnan), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

#endif
