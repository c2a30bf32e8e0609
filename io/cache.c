#include "cache.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "runtime/graph.h"

#define MAX_CACHE_BYTES ((size_t)1 << 30)

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const io_cache_entry *)a)->name, ((const io_cache_entry *)b)->name);
}

const char *io_cache_algorithm(const char *name)
{
    static const char *const known[] = {"EntropyCalibration2", "EntropyCalibration", "MinMaxCalibration", "LegacyCalibration"};
    if (!name) return IO_CACHE_DEFAULT_ALGORITHM;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(name, known[i])) return known[i];
    return NULL;
}

ptq_status io_cache_write(const char *path, long version, const char *algorithm, const io_cache_entry *e, int n)
{
    ptq_status st = PTQ_OK;
    io_cache_entry *s = malloc(sizeof *s * (size_t)(n ? n : 1));
    io_atomic_file f;
    int opened = 0;
    CHECK_ALLOC(s);
    if (n) memcpy(s, e, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_entry);
    TRY(io_atomic_open(&f, path));
    opened = 1;
    fprintf(f.fp, "TRT-%ld-%s\n", version, algorithm);
    for (int i = 0; i < n; i++) {
        uint32_t bits;
        if (!isfinite(s[i].scale) || s[i].scale < 0) FAIL(PTQ_ERR_ARG, "%s: tensor '%s': scale %g", path, s[i].name, (double)s[i].scale);
        memcpy(&bits, &s[i].scale, 4);
        fprintf(f.fp, "%s: %x\n", s[i].name, (unsigned)bits);
    }
    opened = 0;
    TRY(io_atomic_commit(&f));
done:
    if (opened) io_atomic_abort(&f);
    free(s);
    return st;
}

ptq_status io_cache_parse(const uint8_t *text, size_t len, const char *what, io_cache_entry **out, int *n,
                          long *version, char *algorithm, size_t cap)
{
    ptq_status st = PTQ_OK;
    char *buf = NULL;
    io_cache_entry *e = NULL;
    int count = 0, lines = 0, line_no = 0;
    *out = NULL;
    *n = 0;
    if (len > MAX_CACHE_BYTES) FAIL(PTQ_ERR_FORMAT, "%s: %zu bytes, more than the %zu allowed", what, len, MAX_CACHE_BYTES);
    for (size_t i = 0; i < len; i++) {
        if (!text[i]) FAIL(PTQ_ERR_FORMAT, "%s:%d: NUL byte, not a text file", what, lines + 1);
        lines += text[i] == '\n';
    }
    CHECK_ALLOC(buf = malloc(len + 1)); /* a NUL-terminated copy, split into lines in place */
    memcpy(buf, text, len);
    buf[len] = 0;
    e = calloc((size_t)lines + 2, sizeof *e);
    CHECK_ALLOC(e);
    char *p = buf;
    while (*p) {
        char *nl = strchr(p, '\n'), *line = p;
        if (nl) *nl = 0;
        p = nl ? nl + 1 : p + strlen(p);
        line_no++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') line[--l] = 0;
        if (line_no == 1) {
            char algo[128];
            if (sscanf(line, "TRT-%ld-%127s", version, algo) != 2)
                FAIL(PTQ_ERR_FORMAT, "%s:1: not a TensorRT calibration cache header (TRT-<version>-<algorithm>)", what);
            snprintf(algorithm, cap, "%s", algo);
            continue;
        }
        if (!l) continue;
        char *sep = NULL;
        for (char *q = strstr(line, ": "); q; q = strstr(q + 1, ": ")) sep = q;
        if (!sep || sep == line) FAIL(PTQ_ERR_FORMAT, "%s:%d: expected 'name: hex'", what, line_no);
        *sep = 0;
        char *hex = sep + 2, *end;
        if (!strncmp(hex, "0x", 2) || !strncmp(hex, "0X", 2)) hex += 2;
        if (!*hex) FAIL(PTQ_ERR_FORMAT, "%s:%d: bad hex '%s'", what, line_no, sep + 2);
        while (hex[0] == '0' && hex[1]) hex++; /* leading zeros */
        if (strlen(hex) > 8) FAIL(PTQ_ERR_FORMAT, "%s:%d: bad hex '%s'", what, line_no, sep + 2);
        unsigned long bits = strtoul(hex, &end, 16);
        if (*end) FAIL(PTQ_ERR_FORMAT, "%s:%d: bad hex '%s'", what, line_no, sep + 2);
        uint32_t b32 = (uint32_t)bits;
        float scale;
        memcpy(&scale, &b32, 4);
        if (!isfinite(scale) || scale < 0 || signbit(scale))
            FAIL(PTQ_ERR_FORMAT, "%s:%d: scale %g of '%s' is not a finite non-negative number", what, line_no, (double)scale, line);
        e[count].name = ptq_strdup(line);
        CHECK_ALLOC(e[count].name);
        e[count].scale = scale;
        count++;
    }
    if (line_no == 0) FAIL(PTQ_ERR_FORMAT, "%s: empty file, not a calibration cache", what);
    *out = e;
    *n = count;
    e = NULL;
done:
    io_cache_free(e, count);
    free(buf);
    return st;
}

ptq_status io_cache_read(const char *path, io_cache_entry **out, int *n, long *version, char *algorithm, size_t cap)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len;
    *out = NULL;
    *n = 0;
    TRY(io_read_file(path, &buf, &len, MAX_CACHE_BYTES));
    TRY(io_cache_parse(buf, len, path, out, n, version, algorithm, cap));
done:
    free(buf);
    return st;
}

void io_cache_free(io_cache_entry *e, int n)
{
    if (!e) return;
    for (int i = 0; i < n; i++) free(e[i].name);
    free(e);
}
