/* mathf.c: the double-precision functions of mathf.h, over the full double range.
 *
 *   exp: x = n ln2 + r with ln2 split in two (n ln2_hi exact for |n| < 2^21), e^r from
 *        its Taylor polynomial to r^13, 2^n applied as two factors so results down to
 *        the subnormals round once.
 *   log: x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f),
 *        log m = f - f^2/2 + s (f^2/2 + R(s^2)), R the atanh series to s^22.
 *   expm1: Taylor series below |x| = 1, e^x - 1 above; log1p: log(1 + x) corrected by
 *        (x - (u - 1)) / u for the rounding of u = 1 + x.
 *   tanh: from expm1; erf: the positive series 2a/sqrt(pi) e^(-a^2) sum (2a^2)^k / (2k+1)!!
 *        below 1.5, the erfc continued fraction (evaluated from depth 120) from 1.5 to 6.
 *   pow: integer exponents up to 2^10 by repeated squaring (exact when the result is an
 *        exactly representable integer), else e^(y log|x|).
 * Only IEEE basic operations and bit manipulation: see mathf.h. */
#include "runtime/kernels/mathf.h"

#define LN2_HI PTQ_MATHF_LN2_HI
#define LN2_LO PTQ_MATHF_LN2_LO
#define TWO_OVER_SQRT_PI 0x1.20dd750429b6dp+0
#define ONE_OVER_SQRT_PI 0x1.20dd750429b6dp-1

static double pow2i(int64_t n) /* 2^n for -1022 <= n <= 1023 */
{
    return ptq_mathf_from_bits_d((uint64_t)(n + 1023) << 52);
}

double ptq_exp(double x)
{
    if (x != x) return x + x;
    x = x > 710.0 ? 710.0 : x;
    x = x < -746.0 ? -746.0 : x;
    double t = x * PTQ_MATHF_INV_LN2 + PTQ_MATHF_ROUND_MAGIC;
    double n = t - PTQ_MATHF_ROUND_MAGIC;
    double r = (x - n * LN2_HI) - n * LN2_LO;
    double p = 1.0 / 6227020800.0; /* 1/13! */
    p = 1.0 / 479001600.0 + r * p;
    p = 1.0 / 39916800.0 + r * p;
    p = 1.0 / 3628800.0 + r * p;
    p = 1.0 / 362880.0 + r * p;
    p = 1.0 / 40320.0 + r * p;
    p = 1.0 / 5040.0 + r * p;
    p = 1.0 / 720.0 + r * p;
    p = 1.0 / 120.0 + r * p;
    p = 1.0 / 24.0 + r * p;
    p = 1.0 / 6.0 + r * p;
    p = 0.5 + r * p;
    double e = 1.0 + (r + r * r * p);
    int64_t ni = (int64_t)n, n1 = ni / 2;
    return e * pow2i(n1) * pow2i(ni - n1);
}

double ptq_log(double x)
{
    if (x != x) return x + x;
    if (x < 0.0) return PTQ_MATHF_NAN_D;
    if (x == 0.0) return -HUGE_VAL;
    if (x == HUGE_VAL) return x;
    double kadj = 0.0;
    if (x < 0x1p-1022) { /* subnormal */
        x *= 0x1p54;
        kadj = -54.0;
    }
    return ptq_mathf_log_normal(x, kadj);
}

double ptq_expm1(double x)
{
    if (x != x) return x + x;
    if (x == 0.0) return x;
    if (x < -40.0) return -1.0;
    if (x <= -1.0 || x >= 1.0) return ptq_exp(x) - 1.0;
    double p = 1.0 / 2432902008176640000.0; /* 1/20! */
    double c = 2432902008176640000.0;
    for (int k = 19; k >= 2; k--) {
        c /= k + 1; /* c = k!, exact while k! < 2^53 and rounded once above */
        p = 1.0 / c + x * p;
    }
    return x + x * x * p;
}

double ptq_log1p(double x)
{
    if (x != x) return x + x;
    if (x == HUGE_VAL) return x;
    if (x <= -1.0) return x == -1.0 ? -HUGE_VAL : PTQ_MATHF_NAN_D;
    if (x == 0.0) return x;
    double u = 1.0 + x;
    if (u == 1.0) return x;
    return ptq_log(u) + (x - (u - 1.0)) / u;
}

double ptq_tanh(double x)
{
    if (x != x) return x + x;
    if (x == 0.0) return x;
    double a = x < 0.0 ? -x : x;
    double t = 1.0;
    if (a < 22.0) {
        double e = ptq_expm1(-2.0 * a);
        t = -e / (2.0 + e);
    }
    return x < 0.0 ? -t : t;
}

/* e^(-a^2), with a^2 = hi + lo split exactly (Dekker) so the square adds no error. */
static double exp_neg_sq(double a)
{
    double c = a * 134217729.0; /* 2^27 + 1 */
    double ah = c - (c - a), al = a - ah;
    double hi = a * a;
    double lo = ((ah * ah - hi) + 2.0 * ah * al) + al * al;
    return ptq_exp(-hi) * (1.0 - lo);
}

double ptq_erf(double x)
{
    if (x != x) return x + x;
    if (x == 0.0) return x;
    double a = x < 0.0 ? -x : x, r;
    if (a >= 6.0) {
        r = 1.0;
    } else if (a < 1.5) {
        double z = 2.0 * a * a, t = 1.0, s = 1.0;
        for (int k = 1; k < 200 && t > s * 0x1p-60; k++) {
            t = t * z / (2 * k + 1);
            s += t;
        }
        r = TWO_OVER_SQRT_PI * a * (exp_neg_sq(a) * s);
    } else {
        double v = a;
        for (int k = 120; k >= 1; k--) v = a + 0.5 * k / v;
        r = 1.0 - ONE_OVER_SQRT_PI * exp_neg_sq(a) / v;
    }
    return x < 0.0 ? -r : r;
}

double ptq_pow(double x, double y)
{
    if (y == 0.0 || x == 1.0) return 1.0;
    if (x != x || y != y) return x + y;
    double ax = x < 0.0 ? -x : x, ay = y < 0.0 ? -y : y;
    int yint = ay == HUGE_VAL || ay >= 0x1p53 || (double)(int64_t)y == y;
    int odd = yint && ay < 0x1p53 && ((int64_t)y & 1);
    if (x < 0.0 && x != -HUGE_VAL && !yint) return PTQ_MATHF_NAN_D;
    double r;
    if (ax == 0.0 || ax == HUGE_VAL) {
        r = (ax == 0.0) == (y > 0.0) ? 0.0 : HUGE_VAL;
    } else if (ay == HUGE_VAL) {
        r = ax == 1.0 ? 1.0 : ((ax < 1.0) == (y > 0.0) ? 0.0 : HUGE_VAL);
    } else if (yint && ay <= 1024.0) {
        /* binary powering of |x|; a negative exponent divides once at the end */
        uint64_t e = (uint64_t)ay;
        double b = ax;
        r = 1.0;
        while (e) {
            if (e & 1) r *= b;
            e >>= 1;
            if (e) b *= b;
        }
        if (y < 0.0) r = 1.0 / r;
        if (!(r >= 0x1p-1022 && r < HUGE_VAL)) r = ptq_exp(y * ptq_log(ax)); /* over/underflowed midway */
    } else {
        r = ptq_exp(y * ptq_log(ax));
    }
    return odd && (ptq_mathf_bits_d(x) >> 63) ? -r : r; /* -0 included */
}
