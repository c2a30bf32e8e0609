/* npy.c: numpy .npy read/write.
 *
 * Layout: "\x93NUMPY", major, minor, header length (2 bytes little-endian in format 1,
 * 4 bytes in 2 and 3), then the header, a Python dict literal such as
 * "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 640, 640), }" padded with
 * spaces and ending in '\n', then the C-order data. We parse only what numpy writes
 * (the three keys), on a NUL-terminated copy of the header, checking every index. */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"

#define MAX_NPY_BYTES ((size_t)1 << 36)
#define MAX_NPY_DIM ((long long)1 << 40)

static const struct {
    const char *descr;
    ptq_dtype dt;
} descrs[] = {
    /* the first entry of each dtype is what npy_save writes (numpy's own spelling) */
    {"<f4", PTQ_F32}, {"<f8", PTQ_F64}, {"<f2", PTQ_F16}, {"|i1", PTQ_I8},  {"|u1", PTQ_U8},
    {"<i2", PTQ_I16}, {"<u2", PTQ_U16}, {"<i4", PTQ_I32}, {"<u4", PTQ_U32}, {"<i8", PTQ_I64},
    {"<u8", PTQ_U64}, {"|b1", PTQ_BOOL}, {"<i1", PTQ_I8},  {"<u1", PTQ_U8},  {"<b1", PTQ_BOOL},
};

/* Pointer just after "'key':" and any spaces in the header; NULL if absent. */
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

/* Up to 12 characters of the header at s for a message, non-printables as '?'. */
static const char *excerpt(const char *s, char *buf)
{
    int i = 0;
    for (; i < 12 && s[i]; i++) buf[i] = s[i] >= 32 && s[i] < 127 ? s[i] : '?';
    buf[i] = 0;
    return buf;
}

/* Parses "(d0, d1, ...)" (a trailing comma allowed, "()" is a scalar) into t's shape. */
static ptq_status parse_shape(const char *path, const char *s, ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    char ex[16];
    if (!s || *s != '(') FAIL(PTQ_ERR_FORMAT, "%s: .npy header has no 'shape' tuple", path);
    s++;
    t->rank = 0;
    for (;;) {
        while (*s == ' ') s++;
        if (*s == ')') break;
        if (*s < '0' || *s > '9') FAIL(PTQ_ERR_FORMAT, "%s: bad .npy shape (expected a dim at '%s')", path, excerpt(s, ex));
        if (t->rank == PTQ_MAX_RANK) FAIL(PTQ_ERR_UNSUPPORTED, "%s: .npy array of rank above %d", path, PTQ_MAX_RANK);
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || v > MAX_NPY_DIM) FAIL(PTQ_ERR_FORMAT, "%s: .npy dim %s... is absurd", path, excerpt(s, ex));
        t->dims[t->rank++] = v;
        s = end;
        if (*s == 'L') s++; /* Python 2 long */
        while (*s == ' ') s++;
        if (*s == ',') s++;
        else if (*s != ')') FAIL(PTQ_ERR_FORMAT, "%s: bad .npy shape (expected ',' or ')' at '%s')", path, excerpt(s, ex));
    }
done:
    return st;
}

ptq_status npy_decode(const uint8_t *buf, size_t len, const char *what, ptq_tensor *out)
{
    ptq_status st = PTQ_OK;
    size_t hlen, hstart;
    char *header = NULL, ex[16];
    memset(out, 0, sizeof *out);
    if (len > MAX_NPY_BYTES) FAIL(PTQ_ERR_FORMAT, "%s: %zu bytes, more than the %zu allowed", what, len, MAX_NPY_BYTES);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) FAIL(PTQ_ERR_FORMAT, "%s: not a .npy file (bad magic)", what);
    if (buf[6] == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        hstart = 10;
    } else if (buf[6] == 2 || buf[6] == 3) {
        if (len < 12) FAIL(PTQ_ERR_FORMAT, "%s: truncated .npy header (%zu bytes)", what, len);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hstart = 12;
    } else {
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: .npy format version %d is not supported", what, buf[6]);
    }
    if (hlen > len - hstart)
        FAIL(PTQ_ERR_FORMAT, "%s: truncated .npy header (%zu bytes announced, %zu present)", what, hlen, len - hstart);
    CHECK_ALLOC(header = malloc(hlen + 1));
    memcpy(header, buf + hstart, hlen);
    header[hlen] = 0;

    const char *d = find_key(header, "descr");
    if (!d || *d != '\'') FAIL(PTQ_ERR_FORMAT, "%s: .npy header has no 'descr' string", what);
    out->dtype = PTQ_UNDEFINED;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0] && out->dtype == PTQ_UNDEFINED; i++) {
        size_t n = strlen(descrs[i].descr);
        if (strncmp(d + 1, descrs[i].descr, n) == 0 && d[1 + n] == '\'') out->dtype = descrs[i].dt;
    }
    if (out->dtype == PTQ_UNDEFINED)
        FAIL(PTQ_ERR_UNSUPPORTED, "%s: .npy dtype %s is not supported (little-endian numeric types only)", what,
             excerpt(d, ex));
    const char *f = find_key(header, "fortran_order");
    if (!f) FAIL(PTQ_ERR_FORMAT, "%s: .npy header has no 'fortran_order'", what);
    if (strncmp(f, "True", 4) == 0) FAIL(PTQ_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported", what);
    if (strncmp(f, "False", 5) != 0) FAIL(PTQ_ERR_FORMAT, "%s: .npy 'fortran_order' is %s", what, excerpt(f, ex));
    TRY(parse_shape(what, find_key(header, "shape"), out));
    size_t want = 1;
    for (int i = 0; i < out->rank; i++) {
        if (out->dims[i] && want > MAX_NPY_BYTES / (size_t)out->dims[i])
            FAIL(PTQ_ERR_FORMAT, "%s: .npy array larger than %zu bytes", what, MAX_NPY_BYTES);
        want *= (size_t)out->dims[i];
    }
    want *= ptq_dtype_size(out->dtype);
    size_t have = len - hstart - hlen;
    if (have != want) {
        char shape[160];
        ptq_shape_str(out, shape, sizeof shape);
        FAIL(PTQ_ERR_FORMAT, "%s: %zu bytes of data for a %s %s array (%zu expected)", what, have, shape,
             ptq_dtype_name(out->dtype), want);
    }
    TRY(ptq_tensor_alloc(out));
    if (want) memcpy(out->data, buf + hstart + hlen, want);
done:
    if (st != PTQ_OK) ptq_tensor_free(out);
    free(header);
    return st;
}

ptq_status npy_load(const char *path, ptq_tensor *out)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    TRY(io_read_file(path, &buf, &len, MAX_NPY_BYTES));
    TRY(npy_decode(buf, len, path, out));
done:
    free(buf);
    return st;
}

ptq_status npy_save(const char *path, const ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    const char *descr = NULL;
    char dict[512];
    uint8_t *buf = NULL;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0] && !descr; i++)
        if (descrs[i].dt == t->dtype) descr = descrs[i].descr;
    if (!descr) FAIL(PTQ_ERR_UNSUPPORTED, "%s: cannot write a %s array", path, ptq_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > PTQ_MAX_RANK) FAIL(PTQ_ERR_ARG, "%s: rank %d is not a tensor's", path, t->rank);
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) FAIL(PTQ_ERR_ARG, "%s: dim %d is %lld", path, i, (long long)t->dims[i]);
    size_t data = ptq_tensor_nbytes(t);
    if (data && !t->data) FAIL(PTQ_ERR_ARG, "%s: the tensor has no data (%zu bytes expected)", path, data);
    /* at most 8 dims of 20 digits: always fits */
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", t->rank == 1 ? "," : "");
    /* magic(6) + version(2) + length(2) + dict + spaces + '\n' = a multiple of 64; like
     * numpy (1.24), room for the first dim to grow to 21 digits, so files are identical */
    size_t hlen = (size_t)n + 1;
    if (t->rank > 0) {
        char digits[32];
        size_t nd = (size_t)snprintf(digits, sizeof digits, "%lld", (long long)t->dims[0]);
        hlen += nd < 21 ? 21 - nd : 0;
    }
    hlen += (64 - (10 + hlen) % 64) % 64;
    CHECK_ALLOC(buf = malloc(10 + hlen + data));
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hlen & 0xff);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', hlen - (size_t)n - 1);
    buf[10 + hlen - 1] = '\n';
    if (data) memcpy(buf + 10 + hlen, t->data, data);
    TRY(io_write_atomic(path, buf, 10 + hlen + data));
done:
    free(buf);
    return st;
}
