/* pb_encode.h: a tiny protobuf encoder for the unit tests that write ONNX bytes by hand
 * (test_onnx_io.c, test_plan_dynamic.c). Header-only, static inline.
 *
 *   pb m = {0}; pb_int(&m, 1, 8); pb_str(&m, 2, "name"); ... free(m.d); */
#ifndef PTQ_TESTS_PB_ENCODE_H
#define PTQ_TESTS_PB_ENCODE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *d;
    size_t n, cap;
} pb;

static inline void pb_raw(pb *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2 + 64;
        uint8_t *d = realloc(b->d, cap);
        if (!d) abort(); /* test helper: out of memory ends the test program */
        b->d = d;
        b->cap = cap;
    }
    if (n) memcpy(b->d + b->n, p, n);
    b->n += n;
}

static inline void pb_varint(pb *b, uint64_t v)
{
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_raw(b, t, k);
}

static inline void pb_int(pb *b, int field, int64_t v)
{
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, (uint64_t)v);
}

static inline void pb_bytes(pb *b, int field, const void *p, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_raw(b, p, n);
}

static inline void pb_str(pb *b, int field, const char *s)
{
    pb_bytes(b, field, s, strlen(s));
}

static inline void pb_float(pb *b, int field, float f)
{
    uint8_t t[4];
    pb_varint(b, (uint64_t)field << 3 | 5);
    memcpy(t, &f, 4); /* x86-64: little-endian like the wire */
    pb_raw(b, t, 4);
}

/* Appends m as a nested message and frees it. */
static inline void pb_msg(pb *b, int field, pb *m)
{
    pb_bytes(b, field, m->d, m->n);
    free(m->d);
    memset(m, 0, sizeof *m);
}

#endif
