/* trig.c: see trig.h. */
#include "runtime/kernels/trig.h"

#include <math.h> /* sqrt, NAN, INFINITY only */
#include <stdint.h>
#include <string.h>

/* 2/pi in 24-bit chunks, most significant first: 2/pi = sum T[i] 2^(-24 (i + 1)). */
static const uint32_t two_over_pi[56] = {
    0xa2f983, 0x6e4e44, 0x1529fc, 0x2757d1, 0xf534dd, 0xc0db62, 0x95993c, 0x439041,
    0xfe5163, 0xabdebb, 0xc561b7, 0x246e3a, 0x424dd2, 0xe00649, 0x2eea09, 0xd1921c,
    0xfe1deb, 0x1cb129, 0xa73ee8, 0x8235f5, 0x2ebb44, 0x84e99c, 0x7026b4, 0x5f7e41,
    0x3991d6, 0x398353, 0x39f49c, 0x845f8b, 0xbdf928, 0x3b1ff8, 0x97ffde, 0x05980f,
    0xef2f11, 0x8b5a0a, 0x6d1f6d, 0x367ecf, 0x27cb09, 0xb74f46, 0x3f669e, 0x5fea2d,
    0x7527ba, 0xc7ebe5, 0xf17b3d, 0x0739f7, 0x8a5292, 0xea6bfb, 0x5fb11f, 0x8d5d08,
    0x560330, 0x46fc7b, 0x6babf0, 0xcfbc20, 0x9af436, 0x1da9e3, 0x91615e, 0xe61b08,
};

#define PIO2 1.5707963267948966     /* pi/2 rounded to double */
#define PIO4 0.78539816339744830962 /* pi/4 */
#define PIO2_LO 6.123233995736766e-17 /* pi/2 - PIO2 */

/* Veltkamp: x = hi + lo exactly, hi with 26 significant bits. */
static void split(double x, double *hi, double *lo)
{
    double c = 134217729.0 * x; /* 2^27 + 1 */
    *hi = c - (c - x);
    *lo = x - *hi;
}

/* Bits [pos, pos + len) (len <= 64) of the number held in base-2^24 digits d[0..nd). */
static uint64_t bits_at(const uint64_t *d, int nd, int pos, int len)
{
    uint64_t r = 0;
    for (int k = 0; k < nd; k++) {
        int lo = 24 * k, a = lo > pos ? lo : pos, b = lo + 24 < pos + len ? lo + 24 : pos + len;
        if (a >= b) continue;
        uint64_t chunk = (d[k] >> (a - lo)) & ((UINT64_C(1) << (b - a)) - 1);
        r |= chunk << (a - pos);
    }
    return r;
}

/* a >= pi/4, finite: a = q pi/2 + r with |r| <= pi/4 (q mod 4 returned). Payne-Hanek: with
 * a = M 2^E (M a 53-bit integer), a 2/pi = sum M T[i] 2^(E - 24 (i + 1)); terms of weight
 * 2^2 and up are multiples of 4 and dropped, ten chunks after the first kept one are
 * summed exactly in base 2^24 (the dropped tail is below 2^-160), and the fraction's top
 * 128 bits give r. */
#define PH_K 10
static int reduce_pio2(double a, double *r, double *rl)
{
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int e = (int)((bits >> 52) & 0x7ff);
    uint64_t M = bits & ((UINT64_C(1) << 52) - 1);
    if (e == 0) e = 1; /* subnormal (not reached: a >= pi/4) */
    else M |= UINT64_C(1) << 52;
    int E = e - 1075; /* a = M 2^E */
    int i0 = 0;
    while (E - 24 * (i0 + 1) >= 2) i0++;
    uint64_t m[3] = {M & 0xffffff, (M >> 24) & 0xffffff, M >> 48};
    uint64_t acc[PH_K + 3 + 1] = {0};
    for (int j = 0; j < PH_K; j++) {
        uint64_t t = two_over_pi[i0 + j];
        for (int l = 0; l < 3; l++) acc[PH_K - 1 - j + l] += m[l] * t;
    }
    int nd = PH_K + 4;
    for (int k = 0; k + 1 < nd; k++) { /* carries: every digit back to 24 bits */
        acc[k + 1] += acc[k] >> 24;
        acc[k] &= 0xffffff;
    }
    /* N = sum acc[k] 2^(24 k); a 2/pi = N 2^B (mod 4), B = E - 24 (i0 + PH_K) */
    int pt = 24 * (i0 + PH_K) - E; /* bit of N with weight 2^0 */
    int q = (int)bits_at(acc, nd, pt, 2);
    uint64_t w1 = bits_at(acc, nd, pt - 64, 64), w2 = bits_at(acc, nd, pt - 128, 64);
    double f;
    if (w1 >> 63) { /* fraction >= 1/2: take f - 1 (negative), q + 1 */
        uint64_t n2 = ~w2 + 1, n1 = ~w1 + (w2 == 0 ? 1 : 0);
        f = -((double)n1 * 0x1p-64 + (double)n2 * 0x1p-128);
        q++;
    } else {
        f = (double)w1 * 0x1p-64 + (double)w2 * 0x1p-128;
    }
    /* r + rl = f pi/2 in double-double: f * PIO2 exactly (Veltkamp splits, no FMA) plus
     * f * (pi/2 - PIO2) */
    double fh, fl, ph, pl, p = f * PIO2;
    split(f, &fh, &fl);
    split(PIO2, &ph, &pl);
    double err = ((fh * ph - p) + fh * pl + fl * ph) + fl * pl;
    err += f * PIO2_LO;
    *r = p + err;
    *rl = err - (*r - p);
    return q & 3;
}

/* |r| <= pi/4: Taylor polynomials (coefficients 1/n!). */
static double sin_kernel(double r)
{
    double z = r * r;
    double p = -1.0 / 1307674368000.0 + z * (1.0 / 355687428096000.0);          /* -1/15!, 1/17! */
    p = 1.0 / 6227020800.0 + z * p;                                             /* 1/13! */
    p = -1.0 / 39916800.0 + z * p;                                              /* -1/11! */
    p = 1.0 / 362880.0 + z * p;                                                 /* 1/9! */
    p = -1.0 / 5040.0 + z * p;                                                  /* -1/7! */
    p = 1.0 / 120.0 + z * p;                                                    /* 1/5! */
    p = -1.0 / 6.0 + z * p;                                                     /* -1/3! */
    return r + r * z * p;
}

static double cos_kernel(double r)
{
    double z = r * r;
    double p = 1.0 / 20922789888000.0 + z * (-1.0 / 6402373705728000.0);       /* 1/16!, -1/18! */
    p = -1.0 / 87178291200.0 + z * p;                                           /* -1/14! */
    p = 1.0 / 479001600.0 + z * p;                                              /* 1/12! */
    p = -1.0 / 3628800.0 + z * p;                                               /* -1/10! */
    p = 1.0 / 40320.0 + z * p;                                                  /* 1/8! */
    p = -1.0 / 720.0 + z * p;                                                   /* -1/6! */
    p = 1.0 / 24.0 + z * p;                                                     /* 1/4! */
    double hz = 0.5 * z, w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + z * z * p); /* 1 - z/2 with its rounding error recovered */
}

/* Quadrant and reduced argument r + rl of x (any finite double). */
static int reduce(double x, double *r, double *rl)
{
    double a = fabs(x);
    *rl = 0.0;
    if (a <= PIO4) {
        *r = x;
        return 0;
    }
    int q = reduce_pio2(a, r, rl);
    if (x < 0) {
        *r = -*r;
        *rl = -*rl;
        q = (4 - q) & 3;
    }
    return q;
}

/* sin and cos of r + rl (|rl| tiny): first-order corrections */
static double sin_rr(double r, double rl)
{
    return sin_kernel(r) + rl * (1.0 - 0.5 * r * r);
}

static double cos_rr(double r, double rl)
{
    return cos_kernel(r) - rl * r;
}

double ptq_sin(double x)
{
    if (x - x != x - x) return NAN; /* NaN or +-inf */
    if (x == 0) return x;
    double r, rl;
    switch (reduce(x, &r, &rl)) {
    case 0: return sin_rr(r, rl);
    case 1: return cos_rr(r, rl);
    case 2: return -sin_rr(r, rl);
    default: return -cos_rr(r, rl);
    }
}

double ptq_cos(double x)
{
    if (x - x != x - x) return NAN; /* NaN or +-inf */
    double r, rl;
    switch (reduce(x, &r, &rl)) {
    case 0: return cos_rr(r, rl);
    case 1: return -sin_rr(r, rl);
    case 2: return -cos_rr(r, rl);
    default: return sin_rr(r, rl);
    }
}

double ptq_tan(double x)
{
    if (x - x != x - x) return NAN; /* NaN or +-inf */
    if (x == 0) return x;
    double r, rl;
    int q = reduce(x, &r, &rl);
    return q & 1 ? -cos_rr(r, rl) / sin_rr(r, rl) : sin_rr(r, rl) / cos_rr(r, rl);
}

/* |t| < 0.1: Taylor to t^17. */
static double atan_kernel(double t)
{
    double z = t * t;
    double p = -1.0 / 15.0 + z * (1.0 / 17.0);
    p = 1.0 / 13.0 + z * p;
    p = -1.0 / 11.0 + z * p;
    p = 1.0 / 9.0 + z * p;
    p = -1.0 / 7.0 + z * p;
    p = 1.0 / 5.0 + z * p;
    p = -1.0 / 3.0 + z * p;
    return t + t * z * p;
}

double ptq_atan(double x)
{
    if (x != x) return x;
    double a = fabs(x), r;
    if (a < 0x1p-27) return x; /* x^3/3 is below half an ulp of x */
    int inv = a > 1.0;
    if (inv) a = 1.0 / a; /* inf -> 0 */
    for (int k = 0; k < 3; k++) a = a / (1.0 + sqrt(1.0 + a * a)); /* |a| <= 1 -> < 0.0985 */
    r = 8.0 * atan_kernel(a);
    if (inv) r = PIO2 - r;
    return x < 0 ? -r : (x == 0 ? x : r);
}

double ptq_asin(double x)
{
    if (x != x) return x;
    if (x > 1.0 || x < -1.0) return NAN;
    if (x == 0) return x;
    return ptq_atan(x / sqrt((1.0 - x) * (1.0 + x))); /* |x| = 1: +-inf -> +-pi/2 */
}

double ptq_acos(double x)
{
    if (x != x) return x;
    if (x > 1.0 || x < -1.0) return NAN;
    return 2.0 * ptq_atan(sqrt((1.0 - x) / (1.0 + x))); /* x = -1: inf -> pi */
}
