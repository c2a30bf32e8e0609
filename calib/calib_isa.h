/* calib_isa.h: the per-chunk kernel of calib.c, one per ISA (internal to calib/).
 *
 * One pass over x[0..n) (n <= CALIB_CHUNK) gives the scan of the chunk (min/max as order keys,
 * amax's bits, zeros, non-finite values) and, for every finite non-zero value, its bin
 * floor(|x| * inv) (inv = CALIB_BINS / R, a power of two: the product is exact) stored into
 * idx; the return value is how many were stored. Bins are only meaningful where |x| < R; the
 * caller checks amax against R and calls again after growing R. Every path returns the same
 * scan and the same multiset of bins (their order in idx may differ), so the statistics are
 * identical whichever path runs; tests/unit/test_stats.c checks it. */
#ifndef PTQ_CALIB_ISA_H
#define PTQ_CALIB_ISA_H

#include <stddef.h>
#include <stdint.h>

#define CALIB_CHUNK 2048

typedef struct {
    uint32_t kmin, kmax;  /* order keys of the finite min and max (UINT32_MAX, 0: none) */
    uint32_t amax;        /* bits of max |x| over finite values (0: none) */
    uint32_t zeros, nonfinite;
} calib_scan;

/* The key of a float: bits ^ 0x80000000 when positive, ~bits when negative; finite floats'
 * keys order like their values as unsigned integers. */
static inline uint32_t calib_order_key(uint32_t bits)
{
    return bits ^ ((uint32_t)((int32_t)bits >> 31) | 0x80000000u);
}

size_t calib_scan_bins_generic(const float *x, size_t n, float inv, calib_scan *r, uint32_t *idx);
size_t calib_scan_bins_avx2(const float *x, size_t n, float inv, calib_scan *r, uint32_t *idx);
size_t calib_scan_bins_avx512(const float *x, size_t n, float inv, calib_scan *r, uint32_t *idx);

/* The SIMD paths' tail: x[i..n) by the generic path, its scan merged into *s; returns how
 * many bins it stored at idx. */
static inline size_t calib_scan_tail(const float *x, size_t i, size_t n, float inv, calib_scan *s, uint32_t *idx)
{
    if (i >= n) return 0;
    calib_scan t;
    size_t k = calib_scan_bins_generic(x + i, n - i, inv, &t, idx);
    s->kmin = t.kmin < s->kmin ? t.kmin : s->kmin;
    s->kmax = t.kmax > s->kmax ? t.kmax : s->kmax;
    s->amax = t.amax > s->amax ? t.amax : s->amax;
    s->zeros += t.zeros;
    s->nonfinite += t.nonfinite;
    return k;
}

#endif
