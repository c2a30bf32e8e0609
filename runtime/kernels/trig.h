/* trig.h: ptq's own circular functions in double, the same bits on every x86-64 CPU
 * (libm's sin, tan, atan and asin have FMA variants picked per CPU; see mathf.h).
 *
 *   double s = ptq_sin(x);   // (float)ptq_sin(x) for float outputs
 *
 * Measured against glibc over 200000 random doubles per range (tests/unit/test_ops_math.c
 * checks 20000): sin, cos within 2 double ulps, tan 3, atan 4, asin 6, acos 5; rounded to
 * float, the same as libm's result in every sample.
 *
 * sin, cos, tan: x = k pi/2 + r, |r| <= pi/4, with the exact (Payne-Hanek) reduction over
 * 1344 bits of 2/pi for every finite x (r as a double-double), then Taylor polynomials to
 * r^17 / r^18 (truncation below 1e-19 relative). atan: atan x = pi/2 - atan(1/x) above 1, three argument halvings
 * atan x = 2 atan(x / (1 + sqrt(1 + x^2))) to |x| < 0.1, then Taylor to x^17. asin and acos
 * through atan: asin x = atan(x / sqrt((1 - x)(1 + x))), acos x = 2 atan(sqrt((1 - x) / (1 + x))).
 * Only IEEE basic operations and sqrt, never FMA; NaN in, NaN out; sin(+-inf) is NaN; odd
 * functions keep the sign of zero; asin and acos of |x| > 1 are NaN. */
#ifndef PTQ_KERN_TRIG_H
#define PTQ_KERN_TRIG_H

double ptq_sin(double x);
double ptq_cos(double x);
double ptq_tan(double x);
double ptq_atan(double x);
double ptq_asin(double x);
double ptq_acos(double x);

#endif
