/* test_mathf.c: ptq's own elementary functions (runtime/kernels/mathf.h, mathf.c).
 *
 * Float functions against glibc's double versions (a reference ~2^29 times finer than a
 * float ulp), in float ulps at the reference: every 2039th float bit pattern of either
 * sign (all magnitudes, denormals included) plus every float in [-100, 100] at a step of
 * 1/2048; bound 1 ulp, measured maxima printed. Double functions against long double
 * references on random arguments over their whole ranges, relative error bounded. Special
 * values bit for bit, odd symmetry, and a loop built by gcc -O3 for SSE2 and AVX2 against
 * scalar calls built at -O0, bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/kernels/mathf.h"
#include "tests/test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static float f_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* |got - ref| in units of the float spacing at ref; NaN/Inf must match exactly (else 1e9). */
static double ulp_err(float got, double ref)
{
    if (isnan(ref) || isnan(got)) return isnan(ref) && isnan(got) ? 0.0 : 1e9;
    if (fabs(ref) > 0x1.fffffep127 * (1.0 + 0x1p-25)) return got == (ref > 0 ? INFINITY : -INFINITY) ? 0.0 : 1e9;
    if (isinf(got)) return 1e9;
    int e;
    frexp(ref, &e);
    double ulp = ldexp(1.0, (e - 24 < -149 ? -149 : e - 24));
    return fabs((double)got - ref) / ulp;
}

typedef float (*fn_f)(float);
typedef double (*fn_ref)(double);

static float w_expf(float x) { return ptq_expf(x); }
static float w_expm1f(float x) { return ptq_expm1f(x); }
static float w_logf(float x) { return ptq_logf(x); }
static float w_log1pf(float x) { return ptq_log1pf(x); }
static float w_sigmoidf(float x) { return ptq_sigmoidf(x); }
static float w_softplusf(float x) { return ptq_softplusf(x); }
static float w_tanhf(float x) { return ptq_tanhf(x); }
static float w_erff(float x) { return ptq_erff(x); }
static float w_sqrtf(float x) { return ptq_powf(x, 0.5f); }
static float w_pow_e(float x) { return ptq_powf(2.718281828f, x); }
static float w_pow_b(float x) { return ptq_powf(x, -2.5f); }

static double r_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double r_softplus(double x) { return (x > 0 ? x : 0) + log1p(exp(-fabs(x))); }
static double r_sqrt(double x) { return x == -HUGE_VAL ? HUGE_VAL : sqrt(x); }
static double r_pow_e(double x) { return pow((double)2.718281828f, x); }
static double r_pow_b(double x) { return pow(x, -2.5); }

typedef struct {
    const char *name;
    fn_f f;
    fn_ref ref;
} fcase;

static const fcase fcases[] = {
    {"expf", w_expf, exp},
    {"expm1f", w_expm1f, expm1},
    {"logf", w_logf, log},
    {"log1pf", w_log1pf, log1p},
    {"sigmoidf", w_sigmoidf, r_sigmoid},
    {"softplusf", w_softplusf, r_softplus},
    {"tanhf", w_tanhf, tanh},
    {"erff", w_erff, erf},
    {"powf(x, 0.5)", w_sqrtf, r_sqrt},
    {"powf(e, x)", w_pow_e, r_pow_e},
    {"powf(x, -2.5)", w_pow_b, r_pow_b},
};

static void check_float_case(const fcase *c)
{
    double worst = 0.0;
    float worst_x = 0.0f;
    long n = 0;
    for (int sign = 0; sign < 2; sign++)
        for (uint64_t u = 0; u <= 0x7f800000u; u += 2039) {
            float x = f_of((uint32_t)u | (sign ? 0x80000000u : 0u));
            double e = ulp_err(c->f(x), c->ref((double)x));
            if (e > worst) worst = e, worst_x = x;
            n++;
        }
    for (int i = -204800; i <= 204800; i++) {
        float x = (float)i / 2048.0f;
        double e = ulp_err(c->f(x), c->ref((double)x));
        if (e > worst) worst = e, worst_x = x;
        n++;
    }
    printf("  %-14s max %.3f ulp at %.9g (%ld arguments)\n", c->name, worst, (double)worst_x, n);
    if (worst > 1.0) TEST_FAILF("%s: %.3f ulp at x = %a, bound 1", c->name, worst, (double)worst_x);
}

TEST(float_ulp_sweeps)
{
    for (size_t i = 0; i < sizeof fcases / sizeof fcases[0]; i++) check_float_case(&fcases[i]);
}

TEST(powf_random)
{
    double worst = 0.0;
    float wx = 0, wy = 0;
    for (int i = 0; i < 200000; i++) {
        float x = f_of((uint32_t)(rng_next() & 0x7fffffffu) % 0x7f800000u);
        float y = (float)((double)(int64_t)(rng_next() % 4000001u - 2000000) / 10000.0);
        double e = ulp_err(ptq_powf(x, y), pow((double)x, (double)y));
        if (e > worst) worst = e, wx = x, wy = y;
    }
    printf("  powf random   max %.3f ulp at (%.9g, %.9g)\n", worst, (double)wx, (double)wy);
    if (worst > 1.0) TEST_FAILF("powf: %.3f ulp at (%a, %a)", worst, (double)wx, (double)wy);
}

#define EXPECT_BITS(a, b)                                                                \
    do {                                                                                 \
        float ga_ = (a), gb_ = (b);                                                      \
        if (!(isnan(ga_) && isnan(gb_)) && bits_of(ga_) != bits_of(gb_))                 \
            TEST_FAILF("%s = %a, expected %a", #a, (double)ga_, (double)gb_);            \
    } while (0)

TEST(float_special_values)
{
    float inf = INFINITY, nan = NAN;
    EXPECT_BITS(ptq_expf(nan), nan);
    EXPECT_BITS(ptq_expf(inf), inf);
    EXPECT_BITS(ptq_expf(-inf), 0.0f);
    EXPECT_BITS(ptq_expf(0x1.62e42ep+6f), 0x1.ffff08p+127f); /* the last finite result */
    EXPECT_BITS(ptq_expf(0x1.62e430p+6f), inf);
    EXPECT_BITS(ptq_expf(-0x1.9fe368p+6f), 0x1p-149f); /* the last nonzero result */
    EXPECT_BITS(ptq_expf(-0x1.9fe36ap+6f), 0.0f);
    EXPECT_BITS(ptq_expf(0.0f), 1.0f);
    EXPECT_BITS(ptq_expf(-0.0f), 1.0f);
    EXPECT_BITS(ptq_expm1f(-0.0f), -0.0f);
    EXPECT_BITS(ptq_expm1f(-inf), -1.0f);
    EXPECT_BITS(ptq_expm1f(inf), inf);
    EXPECT_BITS(ptq_logf(0.0f), -inf);
    EXPECT_BITS(ptq_logf(-0.0f), -inf);
    EXPECT_BITS(ptq_logf(-1.0f), nan);
    EXPECT_BITS(ptq_logf(-inf), nan);
    EXPECT_BITS(ptq_logf(inf), inf);
    EXPECT_BITS(ptq_logf(1.0f), 0.0f);
    EXPECT_BITS(ptq_logf(0x1p-149f), (float)(-149 * 0.6931471805599453));
    EXPECT(isnan(ptq_logf(nan)));
    EXPECT_BITS(ptq_log1pf(-1.0f), -inf);
    EXPECT_BITS(ptq_log1pf(-2.0f), nan);
    EXPECT_BITS(ptq_log1pf(-0.0f), -0.0f);
    EXPECT_BITS(ptq_log1pf(0x1p-149f), 0x1p-149f);
    EXPECT_BITS(ptq_sigmoidf(inf), 1.0f);
    EXPECT_BITS(ptq_sigmoidf(-inf), 0.0f);
    EXPECT_BITS(ptq_sigmoidf(0.0f), 0.5f);
    EXPECT(isnan(ptq_sigmoidf(nan)));
    EXPECT_BITS(ptq_softplusf(inf), inf);
    EXPECT_BITS(ptq_softplusf(-inf), 0.0f);
    EXPECT_BITS(ptq_softplusf(-100.0f), (float)exp(-100.0));
    EXPECT(isnan(ptq_softplusf(nan)));
    EXPECT_BITS(ptq_tanhf(-0.0f), -0.0f);
    EXPECT_BITS(ptq_tanhf(9.1f), 1.0f);
    EXPECT_BITS(ptq_tanhf(-inf), -1.0f);
    EXPECT(isnan(ptq_tanhf(nan)));
    EXPECT_BITS(ptq_erff(-0.0f), -0.0f);
    EXPECT_BITS(ptq_erff(3.93f), 1.0f);
    EXPECT_BITS(ptq_erff(-inf), -1.0f);
    EXPECT_BITS(ptq_erff(0x1p-149f), 0x1p-149f);
    EXPECT(isnan(ptq_erff(nan)));
    /* powf: the exact exponents and C99's special cases */
    float xs[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.5f, -2.5f, 0x1p-149f, 3e38f, inf, -inf, nan};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        float x = xs[i];
        EXPECT_BITS(ptq_powf(x, 1.0f), x);
        EXPECT_BITS(ptq_powf(x, 2.0f), x * x);
        EXPECT_BITS(ptq_powf(x, 3.0f), x * x * x);
        EXPECT_BITS(ptq_powf(x, -1.0f), 1.0f / x);
        EXPECT_BITS(ptq_powf(x, 0.0f), 1.0f);
        EXPECT_BITS(ptq_powf(x, -0.0f), 1.0f);
        float ys[] = {0.5f, 4.0f, 5.0f, -4.0f, -5.0f, 0.25f, -0.25f, 1e30f, -1e30f, inf, -inf, nan};
        for (size_t j = 0; j < sizeof ys / sizeof ys[0]; j++) {
            float y = ys[j];
            float want = (float)pow((double)x, (double)y);
            if (y == 0.5f) want = x == 0.0f ? 0.0f : sqrtf(x);
            if (y == 0.5f && x == -inf) want = inf;
            if (bits_of(ptq_powf(x, y)) != bits_of(want) && !(isnan(want) && isnan(ptq_powf(x, y))))
                TEST_FAILF("powf(%a, %a) = %a, expected %a", (double)x, (double)y, (double)ptq_powf(x, y), (double)want);
        }
    }
    EXPECT_BITS(ptq_powf(1.0f, nan), 1.0f);
    EXPECT_BITS(ptq_powf(-8.0f, 1.0f / 3.0f), nan);
    EXPECT_BITS(ptq_powf(-2.0f, 0x1p24f + 2.0f), inf);
    EXPECT_BITS(ptq_powf(-1.0f, inf), 1.0f);
    EXPECT_BITS(ptq_powf(10.0f, 38.0f), 1e38f);
    EXPECT_BITS(ptq_powf(10.0f, 39.0f), inf);
}

TEST(odd_symmetry)
{
    for (uint32_t u = 0; u <= 0x7f800000u; u += 4093) {
        float x = f_of(u);
        EXPECT_BITS(ptq_tanhf(-x), -ptq_tanhf(x));
        EXPECT_BITS(ptq_erff(-x), -ptq_erff(x));
        if (test_cur_failed_) {
            printf("    at x = %a\n", (double)x);
            return;
        }
    }
}

/* ------------------------------------------------------------ double functions */

typedef double (*fn_d)(double);
typedef long double (*fn_ld)(long double);

static double check_double(const char *name, fn_d f, fn_ld ref, double lo, double hi, int logscale, double bound)
{
    double worst = 0.0, wx = 0.0;
    for (int i = 0; i < 300000; i++) {
        double t = (double)(rng_next() >> 11) * 0x1p-53;
        double x = logscale ? exp(log(lo) + t * (log(hi) - log(lo))) : lo + t * (hi - lo);
        if (logscale && (rng_next() & 1) && logscale < 0) x = -x;
        long double r = ref(x);
        double got = f(x);
        if (r == 0.0L) continue;
        double e = (double)fabsl(((long double)got - r) / r);
        if (e > worst || isnan(got)) worst = isnan(got) ? 1.0 : e, wx = x;
    }
    printf("  %-8s [%g, %g]%s: max relative error %.3g at %.17g\n", name, lo, hi, logscale ? " log-spaced" : "",
           worst, wx);
    if (!(worst < bound)) TEST_FAILF("%s: relative error %.3g at %a, bound %g", name, worst, wx, bound);
    return worst;
}

static long double r_expl(long double x) { return expl(x); }
static long double r_logl(long double x) { return logl(x); }
static long double r_expm1l(long double x) { return expm1l(x); }
static long double r_log1pl(long double x) { return log1pl(x); }
static long double r_tanhl(long double x) { return tanhl(x); }
static long double r_erfl(long double x) { return erfl(x); }

TEST(double_accuracy)
{
    check_double("exp", ptq_exp, r_expl, -708.0, 709.7, 0, 4e-16);
    check_double("exp", ptq_exp, r_expl, -1.0, 1.0, 0, 4e-16);
    check_double("log", ptq_log, r_logl, 0x1p-1074, 0x1p1023, 1, 4e-16);
    check_double("log", ptq_log, r_logl, 0.5, 2.0, 0, 4e-16);
    check_double("expm1", ptq_expm1, r_expm1l, -3.0, 3.0, 0, 4e-16);
    check_double("expm1", ptq_expm1, r_expm1l, 1e-300, 700.0, -1, 4e-16);
    check_double("log1p", ptq_log1p, r_log1pl, -0.999, 3.0, 0, 4e-16);
    check_double("log1p", ptq_log1p, r_log1pl, 1e-300, 1e300, 1, 4e-16);
    check_double("tanh", ptq_tanh, r_tanhl, -3.0, 3.0, 0, 8e-16);
    check_double("tanh", ptq_tanh, r_tanhl, 1e-300, 30.0, -1, 8e-16);
    check_double("erf", ptq_erf, r_erfl, -6.5, 6.5, 0, 2e-15);
    check_double("erf", ptq_erf, r_erfl, 1e-300, 6.0, -1, 2e-15);
}

TEST(double_special_values)
{
    for (int i = 0; i < 100000; i++) { /* subnormal results: within one ulp, 2^-1074 */
        double x = -708.4 - (double)(rng_next() >> 11) * 0x1p-53 * 36.7;
        double e = (double)fabsl((long double)ptq_exp(x) - expl(x));
        if (e > 0x1p-1074) {
            TEST_FAILF("exp(%a) = %a, error %a", x, ptq_exp(x), e);
            break;
        }
    }
    EXPECT(isnan(ptq_exp((double)NAN)) && isnan(ptq_log((double)NAN)) && isnan(ptq_erf((double)NAN)) && isnan(ptq_tanh((double)NAN)));
    EXPECT(ptq_exp(HUGE_VAL) == HUGE_VAL && ptq_exp(-HUGE_VAL) == 0.0 && ptq_exp(710.0) == HUGE_VAL);
    EXPECT(ptq_exp(-745.2) == 0.0 && ptq_exp(-745.0) == 0x1p-1074 && ptq_exp(0.0) == 1.0);
    EXPECT(ptq_log(0.0) == -HUGE_VAL && isnan(ptq_log(-1e-300)) && ptq_log(HUGE_VAL) == HUGE_VAL);
    EXPECT(ptq_log(1.0) == 0.0 && ptq_log(0x1p-1074) == (double)(-1074.0L * logl(2.0L)));
    EXPECT(ptq_expm1(-HUGE_VAL) == -1.0 && ptq_log1p(-1.0) == -HUGE_VAL && isnan(ptq_log1p(-2.0)));
    EXPECT(signbit(ptq_expm1(-0.0)) && signbit(ptq_log1p(-0.0)) && signbit(ptq_tanh(-0.0)) && signbit(ptq_erf(-0.0)));
    EXPECT(ptq_tanh(-HUGE_VAL) == -1.0 && ptq_erf(HUGE_VAL) == 1.0 && ptq_erf(-7.0) == -1.0);
    /* pow: integer powers exact, C99 special cases */
    EXPECT(ptq_pow(3.0, 33.0) == 5559060566555523.0 && ptq_pow(-2.0, 61.0) == -0x1p61);
    EXPECT(ptq_pow(2.0, -1074.0) == 0x1p-1074 && ptq_pow(10.0, -310.0) > 0.0 && ptq_pow(10.0, 309.0) == HUGE_VAL);
    EXPECT(ptq_pow((double)NAN, 0.0) == 1.0 && ptq_pow(1.0, (double)NAN) == 1.0 && isnan(ptq_pow(-8.0, 1.0 / 3.0)));
    EXPECT(ptq_pow(-0.0, -3.0) == -HUGE_VAL && ptq_pow(0.0, -0.5) == HUGE_VAL && ptq_pow(-HUGE_VAL, 3.0) == -HUGE_VAL);
    double worst = 0.0;
    for (int i = 0; i < 100000; i++) {
        double x = exp((double)(rng_next() >> 11) * 0x1p-53 * 40.0 - 20.0);
        double y = ((double)(rng_next() >> 11) * 0x1p-53 - 0.5) * 40.0;
        long double r = powl(x, y);
        double e = (double)fabsl(((long double)ptq_pow(x, y) - r) / r);
        worst = e > worst ? e : worst;
    }
    printf("  pow      |y log x| <= 400: max relative error %.3g\n", worst);
    EXPECT(worst < 1e-13);
}

/* ------------------------------------------------------------ vectorised = scalar */

#define VEC_N 4099

#define VEC_LOOPS(suffix, ATTR)                                                          \
    ATTR static void vec_loops_##suffix(const float *x, float *y)                        \
    {                                                                                    \
        for (int i = 0; i < VEC_N; i++) y[0 * VEC_N + i] = ptq_expf(x[i]);               \
        for (int i = 0; i < VEC_N; i++) y[1 * VEC_N + i] = ptq_logf(x[i]);               \
        for (int i = 0; i < VEC_N; i++) y[2 * VEC_N + i] = ptq_sigmoidf(x[i]);           \
        for (int i = 0; i < VEC_N; i++) y[3 * VEC_N + i] = ptq_tanhf(x[i]);              \
        for (int i = 0; i < VEC_N; i++) y[4 * VEC_N + i] = ptq_erff(x[i]);               \
        for (int i = 0; i < VEC_N; i++) y[5 * VEC_N + i] = ptq_softplusf(x[i]);          \
        for (int i = 0; i < VEC_N; i++) y[6 * VEC_N + i] = ptq_expm1f(x[i]);             \
        for (int i = 0; i < VEC_N; i++) y[7 * VEC_N + i] = ptq_log1pf(x[i]);             \
    }

VEC_LOOPS(sse2, __attribute__((noinline, optimize("O3"))))
VEC_LOOPS(avx2, __attribute__((noinline, optimize("O3"), target("avx2"))))
VEC_LOOPS(scalar, __attribute__((noinline, optimize("O0"))))

TEST(vector_equals_scalar)
{
    static float x[VEC_N], ys[8 * VEC_N], yv[8 * VEC_N];
    for (int i = 0; i < VEC_N; i++) {
        uint64_t r = rng_next();
        x[i] = (r & 3) == 0 ? f_of((uint32_t)(r >> 32)) : (float)((double)(int64_t)(r >> 40) * 0x1p-17 - 64.0);
    }
    x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 0.0f, x[4] = -0.0f, x[5] = 0x1p-149f;
    vec_loops_scalar(x, ys);
    for (int isa = 0; isa < 2; isa++) {
        if (isa == 1 && !__builtin_cpu_supports("avx2")) {
            printf("  no AVX2 on this CPU: AVX2 loop not run\n");
            continue;
        }
        memset(yv, 0, sizeof yv);
        if (isa == 0) vec_loops_sse2(x, yv);
        else vec_loops_avx2(x, yv);
        for (int i = 0; i < 8 * VEC_N; i++)
            if (bits_of(ys[i]) != bits_of(yv[i]) && !(isnan(ys[i]) && isnan(yv[i]))) {
                TEST_FAILF("%s loop %d, x = %a: vector %a, scalar %a", isa ? "AVX2" : "SSE2", i / VEC_N,
                           (double)x[i % VEC_N], (double)yv[i], (double)ys[i]);
                return;
            }
    }
}

int main(void)
{
    RUN(float_ulp_sweeps);
    RUN(powf_random);
    RUN(float_special_values);
    RUN(odd_symmetry);
    RUN(double_accuracy);
    RUN(double_special_values);
    RUN(vector_equals_scalar);
    return test_summary();
}
