/* mathf.h: ptq's own elementary functions, the same bits on every x86-64 CPU.
 *
 *   for (size_t i = 0; i < n; i++) y[i] = ptq_sigmoidf(x[i]);   // gcc -O3 vectorises this
 *   double h = ptq_log(p);                                        // double versions: mathf.c
 *
 * glibc's libm picks a variant per CPU (expf has SSE2 and FMA builds, among others) and
 * they need not round alike, so ptq never calls a libm transcendental on a numeric path.
 * These use only IEEE basic operations (+ - * /, sqrt, comparisons) and integer bit
 * manipulation, never FMA (ptq builds with -std=c11, so gcc does not contract a * b + c);
 * each is therefore correctly defined by its source alone.
 *
 * The float functions compute in double and round once at the end: a double core with
 * relative error below about 2^-36 keeps every result within 1 ulp of the exact value
 * (almost all are the correctly rounded float). They are static inline and branch-free
 * (bit-mask selects, not jumps), so loops calling them vectorise at any ISA level (powf
 * excepted: it branches on its special cases).
 *
 *   exp: x = n ln2 + r, |r| <= ln2 / 2 (n from the 1.5 * 2^52 rounding trick), degree-10
 *        Taylor polynomial for e^r, 2^n built in the exponent field.
 *   log: x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f),
 *        log m = f - f^2/2 + s (f^2/2 + R(s^2)), R the atanh series 2 s^2/3 + 2 s^4/5 + ...
 *   erf: |x| < 1: odd Taylor polynomial; 1 <= |x| < 4: erfc(a) = e^(-a^2) g(1/a) / a,
 *        g a degree-13 Chebyshev fit (relative error 1e-11); beyond 4 it rounds to 1.
 *   tanh: -expm1(-2|x|) / (2 + expm1(-2|x|)), the sign copied from x.
 * Special values follow C99 Annex F: NaN in, NaN out; exp overflow +inf, underflow +0;
 * log(+-0) = -inf, log(x < 0) = NaN; tanh and erf reach +-1 exactly; odd functions keep
 * the sign of zero. Error bounds are measured by tests/unit/test_mathf.c. */
#ifndef PTQ_KERN_MATHF_H
#define PTQ_KERN_MATHF_H

#include <math.h> /* INFINITY, HUGE_VAL, NAN and sqrtf only: no libm transcendental */
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ bit casts */

static inline uint64_t ptq_mathf_bits_d(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double ptq_mathf_from_bits_d(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline uint32_t ptq_mathf_bits_f(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float ptq_mathf_from_bits_f(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* c ? a : b through a bit mask: no jump for gcc to thread, so loops stay vectorisable
 * under -ftrapping-math (a ternary chain becomes branches with conditional compares). */
static inline double ptq_mathf_sel_d(int c, double a, double b)
{
    uint64_t m = (uint64_t)0 - (uint64_t)(c != 0);
    return ptq_mathf_from_bits_d((ptq_mathf_bits_d(a) & m) | (ptq_mathf_bits_d(b) & ~m));
}

static inline float ptq_mathf_sel_f(int c, float a, float b)
{
    uint32_t m = (uint32_t)0 - (uint32_t)(c != 0);
    return ptq_mathf_from_bits_f((ptq_mathf_bits_f(a) & m) | (ptq_mathf_bits_f(b) & ~m));
}

static inline double ptq_mathf_abs_d(double x)
{
    return ptq_mathf_from_bits_d(ptq_mathf_bits_d(x) & 0x7fffffffffffffffu);
}

/* y with the sign bit of x (y's own sign discarded). */
static inline float ptq_mathf_copysign_f(float y, float x)
{
    return ptq_mathf_from_bits_f((ptq_mathf_bits_f(y) & 0x7fffffffu) | (ptq_mathf_bits_f(x) & 0x80000000u));
}

/* ------------------------------------------------------------ double cores (float accuracy) */

#define PTQ_MATHF_ROUND_MAGIC 0x1.8p52        /* x + this rounds x to an integer in the low bits */
#define PTQ_MATHF_INV_LN2 0x1.71547652b82fep0 /* 1 / ln 2 */
#define PTQ_MATHF_LN2 0x1.62e42fefa39efp-1    /* ln 2 */
#define PTQ_MATHF_NAN_D ((double)NAN)

/* e^x - 1 = (s - 1) + s q for x in [-150, 150]: *s = 2^n, returns q = e^r - 1. */
static inline double ptq_mathf_expm1_parts(double x, double *s)
{
    double t = x * PTQ_MATHF_INV_LN2 + PTQ_MATHF_ROUND_MAGIC;
    double n = t - PTQ_MATHF_ROUND_MAGIC;
    double r = x - n * PTQ_MATHF_LN2;
    /* t's low bits hold n (two's complement); (n + 1023) << 52 is 2^n, |n| <= 217 */
    *s = ptq_mathf_from_bits_d((ptq_mathf_bits_d(t) + 1023u) << 52);
    double p = 1.0 / 3628800.0;
    p = 1.0 / 362880.0 + r * p;
    p = 1.0 / 40320.0 + r * p;
    p = 1.0 / 5040.0 + r * p;
    p = 1.0 / 720.0 + r * p;
    p = 1.0 / 120.0 + r * p;
    p = 1.0 / 24.0 + r * p;
    p = 1.0 / 6.0 + r * p;
    p = 0.5 + r * p;
    return r + r * (r * p);
}

/* e^x for x in [-150, 150], relative error below 2^-40. */
static inline double ptq_mathf_exp_core(double x)
{
    double s;
    double q = ptq_mathf_expm1_parts(x, &s);
    return s + s * q;
}

/* e^x - 1 for x in [-150, 150], relative error below 2^-40. */
static inline double ptq_mathf_expm1_core(double x)
{
    double s;
    double q = ptq_mathf_expm1_parts(x, &s);
    return (s - 1.0) + s * q;
}

/* The range reduction of both logarithms: x = 2^e m with m in [sqrt(1/2), sqrt(2)); *f = m - 1,
 * returns e exactly. bias (a power of two above |e|) keeps k = e + bias non-negative, so the
 * shifts are logical and vectorise without 64-bit arithmetic shifts. */
static inline double ptq_mathf_log_reduce(double x, uint64_t bias, double *f)
{
    uint64_t u = ptq_mathf_bits_d(x);
    uint64_t k = (u - 0x3fe6a09e667f3bcdu + (bias << 52)) >> 52;
    *f = ptq_mathf_from_bits_d(u - (k << 52) + (bias << 52)) - 1.0;
    return ptq_mathf_from_bits_d(0x4330000000000000u | k) - (0x1p52 + (double)bias);
}

/* ptq_log's algorithm for a positive, finite, normal x, written to vectorise (no branch, the
 * exponent converted through the bits): ln(x) + kadj ln 2, where kadj (0, or -54 for a
 * subnormal scaled by 2^54) joins the exponent before the multiplications. ptq_log and the
 * entropy screen's SIMD loop (calib/calib.c) both call it, so they give the same bits. */
#define PTQ_MATHF_LN2_HI 0x1.62e42fee00000p-1 /* ln 2 to 32 bits: n * LN2_HI is exact */
#define PTQ_MATHF_LN2_LO 0x1.a39ef35793c76p-33
static inline double ptq_mathf_log_normal(double x, double kadj)
{
    double f, kd = ptq_mathf_log_reduce(x, 1024, &f) + kadj; /* e + kadj, exactly */
    double s = f / (2.0 + f);
    double z = s * s;
    double r = 2.0 / 23.0;
    r = 2.0 / 21.0 + z * r;
    r = 2.0 / 19.0 + z * r;
    r = 2.0 / 17.0 + z * r;
    r = 2.0 / 15.0 + z * r;
    r = 2.0 / 13.0 + z * r;
    r = 2.0 / 11.0 + z * r;
    r = 2.0 / 9.0 + z * r;
    r = 2.0 / 7.0 + z * r;
    r = 2.0 / 5.0 + z * r;
    r = 2.0 / 3.0 + z * r;
    r = z * r;
    double hfsq = 0.5 * f * f;
    return kd * PTQ_MATHF_LN2_HI + (f - (hfsq - (s * (hfsq + r) + kd * PTQ_MATHF_LN2_LO)));
}

/* log x for a positive, finite, normal double x with |log2 x| < 500; relative error
 * below 2^-38 (absolute below 2^-40 near x = 1). */
static inline double ptq_mathf_log_core(double x)
{
    double f, kd = ptq_mathf_log_reduce(x, 512, &f);
    double s = f / (2.0 + f);
    double z = s * s;
    double r = 2.0 / 13.0;
    r = 2.0 / 11.0 + z * r;
    r = 2.0 / 9.0 + z * r;
    r = 2.0 / 7.0 + z * r;
    r = 2.0 / 5.0 + z * r;
    r = 2.0 / 3.0 + z * r;
    r = z * r;
    double hfsq = 0.5 * f * f;
    return kd * PTQ_MATHF_LN2 + (f - (hfsq - s * (hfsq + r)));
}

/* ------------------------------------------------------------ float functions */

/* e^x. Overflows to +inf above 88.7228, flushes to +0 below -103.97. */
static inline float ptq_expf(float x)
{
    double d = x;
    d = ptq_mathf_sel_d(d > 100.0, 100.0, d);
    d = ptq_mathf_sel_d(d < -110.0, -110.0, d);
    return (float)ptq_mathf_exp_core(d);
}

/* e^x - 1, accurate near 0. */
static inline float ptq_expm1f(float x)
{
    double d = x;
    d = ptq_mathf_sel_d(d > 100.0, 100.0, d);
    d = ptq_mathf_sel_d(d < -110.0, -110.0, d);
    float y = (float)ptq_mathf_expm1_core(d);
    return ptq_mathf_sel_f(x == 0.0f, x, y);
}

/* Natural logarithm. */
static inline float ptq_logf(float x)
{
    double d = x; /* float subnormals are normal doubles */
    double y = ptq_mathf_log_core(ptq_mathf_sel_d(d > 0.0, d, 1.0));
    y = ptq_mathf_sel_d(x > 0.0f, y, PTQ_MATHF_NAN_D);
    y = ptq_mathf_sel_d(x == 0.0f, -HUGE_VAL, y);
    y = ptq_mathf_sel_d(x == INFINITY, HUGE_VAL, y);
    return (float)y;
}

/* log(1 + x), accurate near 0. */
static inline float ptq_log1pf(float x)
{
    double d = x;
    double u = 1.0 + d;
    double uc = ptq_mathf_sel_d(u > 0.0, u, 1.0); /* u < 2^129 */
    /* u rounds 1 + d; (d - (u - 1)) / u restores the lost part to first order */
    double y = ptq_mathf_log_core(uc) + (d - (uc - 1.0)) / uc;
    y = ptq_mathf_sel_d(x > -1.0f, y, PTQ_MATHF_NAN_D);
    y = ptq_mathf_sel_d(x == -1.0f, -HUGE_VAL, y);
    y = ptq_mathf_sel_d(x == INFINITY, HUGE_VAL, y);
    return ptq_mathf_sel_f(x == 0.0f, x, (float)y);
}

/* 1 / (1 + e^-x), without overflow for any x. */
static inline float ptq_sigmoidf(float x)
{
    double d = -(double)x;
    d = ptq_mathf_sel_d(d > 120.0, 120.0, d);
    d = ptq_mathf_sel_d(d < -120.0, -120.0, d);
    return (float)(1.0 / (1.0 + ptq_mathf_exp_core(d)));
}

/* log(1 + e^x) = max(x, 0) + log(1 + e^-|x|). */
static inline float ptq_softplusf(float x)
{
    double d = x;
    double a = ptq_mathf_abs_d(d);
    a = ptq_mathf_sel_d(a > 150.0, 150.0, a);
    double e = ptq_mathf_exp_core(-a); /* (0, 1] */
    double u = 1.0 + e;
    double l = ptq_mathf_log_core(u) + (e - (u - 1.0)) / u;
    return (float)(ptq_mathf_sel_d(d > 0.0, d, 0.0) + l);
}

/* Hyperbolic tangent; exactly +-1 beyond |x| = 9.01. */
static inline float ptq_tanhf(float x)
{
    double a = ptq_mathf_abs_d(x);
    a = ptq_mathf_sel_d(a > 10.0, 10.0, a);
    double e = ptq_mathf_expm1_core(-2.0 * a); /* (-1, 0] */
    float t = (float)(-e / (2.0 + e));
    return ptq_mathf_copysign_f(t, x);
}

/* Error function; exactly +-1 beyond |x| = 3.92. */
static inline float ptq_erff(float x)
{
    double a = ptq_mathf_abs_d(x);
    a = ptq_mathf_sel_d(a > 4.0, 4.0, a);
    double z = a * a; /* exact: a has 24 significant bits */
    /* |x| < 1: erf(a) = 2/sqrt(pi) sum (-1)^n a^(2n+1) / (n! (2n + 1)) */
    double p = 0x1.9e6ad5e55a730p-34;
    p = -0x1.51d7181c5d36dp-30 + z * p;
    p = 0x1.fcc5720624c1cp-27 + z * p;
    p = -0x1.5f742ec43e71ap-23 + z * p;
    p = 0x1.b9e6c9dc651a3p-20 + z * p;
    p = -0x1.f4d25c3e0c2ebp-17 + z * p;
    p = 0x1.f9a326f9b89b7p-14 + z * p;
    p = -0x1.c02db40040b86p-11 + z * p;
    p = 0x1.565bcd0e6a53fp-8 + z * p;
    p = -0x1.b82ce31288b51p-6 + z * p;
    p = 0x1.ce2f21a042be2p-4 + z * p;
    p = -0x1.812746b0379e7p-2 + z * p;
    p = 0x1.20dd750429b6dp+0 + z * p;
    double small = a * p;
    /* 1 <= |x| < 4: erfc(a) = e^(-a^2) g(w) / a, w = 1/a - 0.625 in [-0.375, 0.375] */
    double u = 1.0 / ptq_mathf_sel_d(a < 1.0, 1.0, a);
    double w = u - 0.625;
    double g = 0x1.04f38dce7e3dap-4;
    g = -0x1.7531b0bd1ad6cp-5 + w * g;
    g = -0x1.07351f2215578p-6 + w * g;
    g = 0x1.4f0f005472131p-5 + w * g;
    g = -0x1.836cce52da1c1p-5 + w * g;
    g = 0x1.6a1b1e01e0b7ep-5 + w * g;
    g = -0x1.90e2fe385874cp-6 + w * g;
    g = -0x1.49904a73428dep-7 + w * g;
    g = 0x1.96546b6c4467ep-5 + w * g;
    g = -0x1.3fa5fa51264f4p-4 + w * g;
    g = 0x1.275499e806822p-4 + w * g;
    g = -0x1.535aa03319328p-10 + w * g;
    g = -0x1.5f684c611aa97p-3 + w * g;
    g = 0x1.f545fc65b9021p-2 + w * g;
    double large = 1.0 - ptq_mathf_exp_core(-z) * (g * u);
    float r = (float)ptq_mathf_sel_d(a < 1.0, small, large);
    return ptq_mathf_copysign_f(r, x);
}

/* x^y. Exponents 1, 2, 3, 0.5 and -1 are exactly x, x*x, x*x*x, sqrtf(x) and 1/x (as
 * ONNX Runtime computes them); the rest is e^(y log|x|) in double, with C99's special
 * cases (pow(x, 0) = pow(1, y) = 1, negative x only with an integer y). */
static inline float ptq_powf(float x, float y)
{
    if (y == 1.0f) return x;
    if (y == 2.0f) return x * x;
    if (y == 3.0f) return x * x * x;
    if (y == 0.5f) return x == -INFINITY ? INFINITY : sqrtf(x) + 0.0f; /* pow(-0, .5) = +0 */
    if (y == -1.0f) return 1.0f / x;
    if (y == 0.0f || x == 1.0f) return 1.0f;
    if (x != x || y != y) return x + y;
    float ax = x < 0.0f ? -x : x, ay = y < 0.0f ? -y : y;
    int odd = 0; /* y an odd integer */
    if (ay < 0x1p24f) { /* larger floats are even integers */
        int32_t iy = (int32_t)y;
        if ((float)iy != y) {
            if (x < 0.0f && x != -INFINITY) return NAN;
        } else {
            odd = (int)(iy & 1);
        }
    }
    odd = odd && (ptq_mathf_bits_f(x) >> 31); /* x negative, -0 included */
    float r;
    if (ax == 0.0f || ax == INFINITY)
        r = (ax == 0.0f) == (y > 0.0f) ? 0.0f : INFINITY;
    else if (ay == INFINITY)
        r = ax == 1.0f ? 1.0f : ((ax < 1.0f) == (y > 0.0f) ? 0.0f : INFINITY);
    else {
        double e = (double)y * ptq_mathf_log_core((double)ax);
        e = e > 150.0 ? 150.0 : e;
        e = e < -150.0 ? -150.0 : e;
        r = (float)ptq_mathf_exp_core(e);
    }
    return odd ? -r : r;
}

/* ------------------------------------------------------------ double functions (mathf.c)
 * Full double range; relative error below 4e-16 for exp, log, expm1, log1p, a few ulps
 * for tanh and erf, e^(y log|x|) for pow with a non-integer y (error grows with |y log x|,
 * up to about 1e-13 near overflow). Scalar: for the double-precision op paths and the
 * calibrators' entropy sums. */
double ptq_exp(double x);
double ptq_log(double x);
double ptq_expm1(double x);
double ptq_log1p(double x);
double ptq_tanh(double x);
double ptq_erf(double x);
double ptq_pow(double x, double y);

#endif
