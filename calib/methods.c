/* methods.c: method parsing and naming, the dispatcher, max, and the amax rules of
 * spec section 1. The histogram methods live in percentile.c, entropy.c and mse.c. */
#include "calib/methods.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int method_equal(const calib_method *a, const calib_method *b)
{
    return a->kind == b->kind && (a->kind != CALIB_METHOD_PERCENTILE || a->percentile == b->percentile);
}

static ptq_status push_method(calib_method *out, int cap, int *n, calib_method m, const char *item)
{
    for (int i = 0; i < *n; i++)
        if (method_equal(&out[i], &m)) return PTQ_OK;
    if (*n >= cap) {
        ptq_error("method '%s': more than %d methods", item, cap);
        return PTQ_ERR_ARG;
    }
    out[(*n)++] = m;
    return PTQ_OK;
}

/* One item of the list, already trimmed (len characters at s). */
static ptq_status parse_item(const char *s, size_t len, calib_method *out, int cap, int *n)
{
    char item[64];
    if (len == 0) {
        ptq_error("method list: empty item (expected max, percentile[:P], entropy, mse or all)");
        return PTQ_ERR_ARG;
    }
    if (len >= sizeof item) {
        ptq_error("method '%.*s...': unknown (expected max, percentile[:P], entropy, mse or all)", 32, s);
        return PTQ_ERR_ARG;
    }
    memcpy(item, s, len);
    item[len] = '\0';

    calib_method m = {CALIB_METHOD_MAX, 0.0};
    ptq_status st = PTQ_OK;
    if (!strcmp(item, "max")) {
        st = push_method(out, cap, n, m, item);
    } else if (!strcmp(item, "entropy")) {
        m.kind = CALIB_METHOD_ENTROPY;
        st = push_method(out, cap, n, m, item);
    } else if (!strcmp(item, "mse")) {
        m.kind = CALIB_METHOD_MSE;
        st = push_method(out, cap, n, m, item);
    } else if (!strcmp(item, "percentile")) {
        m.kind = CALIB_METHOD_PERCENTILE;
        m.percentile = CALIB_DEFAULT_PERCENTILE;
        st = push_method(out, cap, n, m, item);
    } else if (!strncmp(item, "percentile:", 11)) {
        const char *num = item + 11;
        char *end = NULL;
        double p = strtod(num, &end);
        if (!*num || isspace((unsigned char)*num) || *end || !isfinite(p) || !(p > 0.0) || p > 100.0) {
            ptq_error("method '%s': percentile must be a number in (0, 100]", item);
            return PTQ_ERR_ARG;
        }
        m.kind = CALIB_METHOD_PERCENTILE;
        m.percentile = p;
        st = push_method(out, cap, n, m, item);
    } else if (!strcmp(item, "all")) {
        static const calib_method all[] = {
            {CALIB_METHOD_MAX, 0.0},        {CALIB_METHOD_PERCENTILE, 99.9},
            {CALIB_METHOD_PERCENTILE, 99.99}, {CALIB_METHOD_PERCENTILE, 99.999},
            {CALIB_METHOD_ENTROPY, 0.0},    {CALIB_METHOD_MSE, 0.0},
        };
        for (size_t i = 0; i < sizeof all / sizeof all[0] && st == PTQ_OK; i++)
            st = push_method(out, cap, n, all[i], item);
    } else {
        ptq_error("method '%s': unknown (expected max, percentile[:P], entropy, mse or all)", item);
        return PTQ_ERR_ARG;
    }
    return st;
}

ptq_status calib_methods_parse(const char *s, calib_method *out, int cap, int *n)
{
    *n = 0;
    if (!s) {
        ptq_error("method list: missing");
        return PTQ_ERR_ARG;
    }
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *e = comma ? comma : p + strlen(p);
        const char *b = p;
        while (b < e && isspace((unsigned char)*b)) b++;
        while (e > b && isspace((unsigned char)e[-1])) e--;
        ptq_status st = parse_item(b, (size_t)(e - b), out, cap, n);
        if (st != PTQ_OK) return st;
        if (!comma) break;
        p = comma + 1;
    }
    return PTQ_OK;
}

/* Shortest %g form of p that reads back as p. */
static void format_percent(double p, char *buf, size_t cap)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, p);
        if (strtod(buf, NULL) == p) return;
    }
}

static const char *method_name_sep(const calib_method *m, char *buf, size_t cap, char sep)
{
    if (!cap) return buf;
    switch (m->kind) {
    case CALIB_METHOD_MAX: snprintf(buf, cap, "max"); break;
    case CALIB_METHOD_ENTROPY: snprintf(buf, cap, "entropy"); break;
    case CALIB_METHOD_MSE: snprintf(buf, cap, "mse"); break;
    case CALIB_METHOD_PERCENTILE: {
        char num[32];
        format_percent(m->percentile, num, sizeof num);
        snprintf(buf, cap, "percentile%c%s", sep, num);
        break;
    }
    default: snprintf(buf, cap, "?"); break;
    }
    return buf;
}

const char *calib_method_name(const calib_method *m, char *buf, size_t cap)
{
    return method_name_sep(m, buf, cap, ':');
}

const char *calib_method_file_name(const calib_method *m, char *buf, size_t cap)
{
    return method_name_sep(m, buf, cap, '-');
}

const char *calib_method_trt_algorithm(const calib_method *m)
{
    return m->kind == CALIB_METHOD_MAX ? "MinMaxCalibration" : "EntropyCalibration2";
}

const char *calib_warning_text(calib_warning w)
{
    switch (w) {
    case CALIB_WARN_NONE: return "ok";
    case CALIB_WARN_NO_FINITE: return "no finite value seen";
    case CALIB_WARN_ALL_ZERO: return "all values are zero";
    case CALIB_WARN_TINY: return "amax below 2^-30";
    case CALIB_WARN_NONFINITE: return "amax is not finite";
    }
    return "?";
}

calib_result calib_result_from_raw(double raw, const calib_hist *h)
{
    calib_result r = {CALIB_FALLBACK_AMAX, 0.0f, raw, CALIB_WARN_NONE};
    float f = (float)raw; /* overflow gives Inf: caught below */
    if (!calib_hist_finite(h)) r.warn = CALIB_WARN_NO_FINITE;
    else if (h->amax == 0.0f) r.warn = CALIB_WARN_ALL_ZERO;
    else if (!isfinite(raw) || !isfinite(f)) r.warn = CALIB_WARN_NONFINITE;
    else if (!((double)f >= CALIB_MIN_AMAX)) r.warn = CALIB_WARN_TINY;
    else r.amax = f;
    r.scale = r.amax / 127.0f;
    return r;
}

/* max: amax itself, i.e. max(|min|, |max|) over finite values (ONNX Runtime's MinMax
 * calibrator with symmetric=True). */
calib_result calib_compute(const calib_method *m, const calib_hist *h, const calib_analysis *a)
{
    double raw = 0.0;
    if (m->kind == CALIB_METHOD_MAX || !calib_hist_finite(h) || !(h->amax > 0.0f))
        return calib_result_from_raw((double)h->amax, h);
    calib_analysis local;
    if (!a) {
        calib_hist_analysis(h, &local);
        a = &local;
    }
    switch (m->kind) {
    case CALIB_METHOD_PERCENTILE: raw = calib_amax_percentile(a, m->percentile); break;
    case CALIB_METHOD_ENTROPY: raw = calib_amax_entropy(a); break;
    case CALIB_METHOD_MSE: raw = calib_amax_mse(a); break;
    default: raw = (double)h->amax; break;
    }
    return calib_result_from_raw(raw, h);
}
