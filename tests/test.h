/* test.h: ptq's tiny test harness. One test program = several TEST functions run from main:
 *
 *   TEST(cast_rounds) { EXPECT_EQ_INT(f(3), 4); EXPECT_NEAR(g(), 1.0, 1e-6, 0); }
 *   int main(void) { RUN(cast_rounds); return test_summary(); }
 *
 * Every EXPECT prints file:line and both values on failure. The program ends with
 * "N passed, N failed, N skipped" (counting tests, not checks) and exits non-zero on
 * any failure. SKIP("why") marks the current test skipped (say why, never to hide a failure). */
#ifndef PTQ_TEST_H
#define PTQ_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int test_failed_checks_, test_cur_failed_, test_cur_skipped_;
static int test_passed_, test_failed_, test_skipped_;

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                                 \
    do {                                                                          \
        test_cur_failed_ = 0;                                                     \
        test_cur_skipped_ = 0;                                                    \
        test_##name();                                                            \
        if (test_cur_failed_) {                                                   \
            test_failed_++;                                                       \
            printf("FAIL %s\n", #name);                                           \
        } else if (test_cur_skipped_) {                                           \
            test_skipped_++;                                                      \
        } else {                                                                  \
            test_passed_++;                                                       \
        }                                                                         \
        fflush(stdout);                                                           \
    } while (0)

#define TEST_FAILF(...)                                                           \
    do {                                                                          \
        printf("  %s:%d: ", __FILE__, __LINE__);                                  \
        printf(__VA_ARGS__);                                                      \
        printf("\n");                                                             \
        test_cur_failed_ = 1;                                                     \
        test_failed_checks_++;                                                    \
    } while (0)

#define EXPECT(cond)                                                              \
    do {                                                                          \
        if (!(cond)) TEST_FAILF("expected %s", #cond);                            \
    } while (0)

#define EXPECT_EQ_INT(a, b)                                                       \
    do {                                                                          \
        long long ea_ = (long long)(a), eb_ = (long long)(b);                     \
        if (ea_ != eb_) TEST_FAILF("%s == %lld, expected %s == %lld", #a, ea_, #b, eb_); \
    } while (0)

#define EXPECT_STR(a, b)                                                          \
    do {                                                                          \
        const char *ea_ = (a), *eb_ = (b);                                        \
        if (!ea_ || !eb_ || strcmp(ea_, eb_) != 0)                                \
            TEST_FAILF("%s == \"%s\", expected \"%s\"", #a, ea_ ? ea_ : "(null)", eb_ ? eb_ : "(null)"); \
    } while (0)

/* |a - b| <= atol + rtol*|b|; NaN matches NaN, Inf matches Inf of the same sign. */
static inline int test_close_(double a, double b, double atol, double rtol)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

#define EXPECT_NEAR(a, b, atol, rtol)                                             \
    do {                                                                          \
        double ea_ = (double)(a), eb_ = (double)(b);                              \
        if (!test_close_(ea_, eb_, (atol), (rtol)))                               \
            TEST_FAILF("%s = %.9g, expected %.9g (atol %g, rtol %g)", #a, ea_, eb_, (double)(atol), (double)(rtol)); \
    } while (0)

#define SKIP(why)                                                                 \
    do {                                                                          \
        printf("  skip: %s\n", why);                                              \
        test_cur_skipped_ = 1;                                                    \
        return;                                                                   \
    } while (0)

static inline int test_summary(void)
{
    printf("%d passed, %d failed, %d skipped\n", test_passed_, test_failed_, test_skipped_);
    return test_failed_ ? 1 : 0;
}

#endif
