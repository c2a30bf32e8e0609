/* npy.c: numpy .npy read/write. The header is a Python dict literal; we parse only
 * what numpy writes ('descr', 'fortran_order', 'shape'), with every index checked. */
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"

#define MAX_NPY_BYTES ((size_t)1 << 36)

static const struct {
    const char *descr;
    ptq_dtype dt;
} descrs[] = {
    {"<f4", PTQ_F32}, {"<f8", PTQ_F64}, {"<f2", PTQ_F16}, {"|i1", PTQ_I8},  {"<i1", PTQ_I8},  {"|u1", PTQ_U8},
    {"<u1", PTQ_U8},  {"<i2", PTQ_I16}, {"<u2", PTQ_U16}, {"<i4", PTQ_I32}, {"<u4", PTQ_U32}, {"<i8", PTQ_I64},
    {"<u8", PTQ_U64}, {"|b1", PTQ_BOOL},
};

/* Finds the value after 'key': in the header; NULL if absent. */
static const char *find_key(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

ptq_status npy_load(const char *path, ptq_tensor *out)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0, hlen, hstart;
    char *header = NULL;
    memset(out, 0, sizeof *out);
    TRY(io_read_file(path, &buf, &len, MAX_NPY_BYTES));
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) FAIL(PTQ_ERR_FORMAT, "%s: not a .npy file (bad magic)", path);
    if (buf[6] == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        hstart = 10;
    } else if (buf[6] == 2 || buf[6] == 3) {
        if (len < 12) FAIL(PTQ_ERR_FORMAT, "%s: truncated .npy header", path);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hstart = 12;
    } else {
        FAIL(PTQ_ERR_FORMAT, "%s: .npy format version %d is not supported", path, buf[6]);
    }
    if (hlen > len - hstart) FAIL(PTQ_ERR_FORMAT, "%s: truncated .npy header", path);
    header = malloc(hlen + 1);
    CHECK_ALLOC(header);
    memcpy(header, buf + hstart, hlen);
    header[hlen] = 0;

    const char *d = find_key(header, "descr");
    if (!d || *d != '\'') FAIL(PTQ_ERR_FORMAT, "%s: .npy header has no 'descr'", path);
    out->dtype = PTQ_UNDEFINED;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++) {
        size_t n = strlen(descrs[i].descr);
        if (strncmp(d + 1, descrs[i].descr, n) == 0 && d[1 + n] == '\'') out->dtype = descrs[i].dt;
    }
    if (out->dtype == PTQ_UNDEFINED) {
        char shown[16];
        snprintf(shown, sizeof shown, "%.10s", d);
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: .npy dtype %s is not supported (little-endian numeric types only)", path, shown);
    }
    const char *f = find_key(header, "fortran_order");
    if (!f) FAIL(PTQ_ERR_FORMAT, "%s: .npy header has no 'fortran_order'", path);
    if (strncmp(f, "True", 4) == 0) FAIL(PTQ_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported", path);
    const char *s = find_key(header, "shape");
    if (!s || *s != '(') FAIL(PTQ_ERR_FORMAT, "%s: .npy header has no 'shape'", path);
    s++;
    out->rank = 0;
    for (;;) {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        if (*s < '0' || *s > '9') FAIL(PTQ_ERR_FORMAT, "%s: bad .npy shape", path);
        if (out->rank == PTQ_MAX_RANK) FAIL(PTQ_ERR_UNSUPPORTED, "%s: rank above %d", path, PTQ_MAX_RANK);
        char *end;
        long long v = strtoll(s, &end, 10);
        if (v < 0 || v > (1LL << 40)) FAIL(PTQ_ERR_FORMAT, "%s: bad .npy dim", path);
        out->dims[out->rank++] = v;
        s = end;
        if (*s == 'L') s++;
    }
    size_t want = 1;
    for (int i = 0; i < out->rank; i++) {
        if (out->dims[i] && want > MAX_NPY_BYTES / (size_t)out->dims[i]) FAIL(PTQ_ERR_FORMAT, "%s: array too large", path);
        want *= (size_t)out->dims[i];
    }
    want *= ptq_dtype_size(out->dtype);
    if (len - hstart - hlen != want)
        FAIL(PTQ_ERR_FORMAT, "%s: %zu bytes of data for a %zu-byte array (truncated or corrupt)", path,
             len - hstart - hlen, want);
    TRY(ptq_tensor_alloc(out));
    if (want) memcpy(out->data, buf + hstart + hlen, want);
done:
    if (st != PTQ_OK) ptq_tensor_free(out);
    free(buf);
    free(header);
    return st;
}

ptq_status npy_save(const char *path, const ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    const char *descr = NULL;
    char dict[512];
    uint8_t *buf = NULL;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
        if (descrs[i].dt == t->dtype && (!descr || descrs[i].descr[0] == '<' || t->dtype == PTQ_BOOL))
            if (!descr) descr = descrs[i].descr;
    if (t->dtype == PTQ_I8) descr = "|i1";
    if (t->dtype == PTQ_U8) descr = "|u1";
    if (!descr) FAIL(PTQ_ERR_UNSUPPORTED, "%s: cannot write a %s array", path, ptq_dtype_name(t->dtype));
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    if (t->rank == 1) n += snprintf(dict + n, sizeof dict - (size_t)n, ",");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    size_t data = ptq_tensor_nbytes(t);
    buf = malloc(10 + hlen + data);
    CHECK_ALLOC(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hlen & 0xff);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    if (data) memcpy(buf + 10 + hlen, t->data, data);
    TRY(io_write_atomic(path, buf, 10 + hlen + data));
done:
    free(buf);
    return st;
}
