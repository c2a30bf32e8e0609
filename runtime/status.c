#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

void ptq_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

void ptq_error_prefix(const char *fmt, ...)
{
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t n = strlen(prefix);
    if (n >= sizeof last_error) n = sizeof last_error - 1;
    memcpy(last_error, prefix, n);
    size_t m = strlen(old);
    if (m > sizeof last_error - 1 - n) m = sizeof last_error - 1 - n;
    memcpy(last_error + n, old, m);
    last_error[n + m] = 0;
}

const char *ptq_last_error(void)
{
    return last_error[0] ? last_error : "unknown error";
}

const char *ptq_status_name(ptq_status st)
{
    switch (st) {
    case PTQ_OK: return "ok";
    case PTQ_ERR_ARG: return "bad argument";
    case PTQ_ERR_NOMEM: return "out of memory";
    case PTQ_ERR_IO: return "i/o error";
    case PTQ_ERR_FORMAT: return "malformed input";
    case PTQ_ERR_UNSUPPORTED: return "unsupported";
    case PTQ_ERR_SHAPE: return "shape error";
    case PTQ_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
