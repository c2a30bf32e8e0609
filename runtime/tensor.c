#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

size_t ptq_dtype_size(ptq_dtype dt)
{
    switch (dt) {
    case PTQ_F32: case PTQ_I32: case PTQ_U32: return 4;
    case PTQ_U8: case PTQ_I8: case PTQ_BOOL: return 1;
    case PTQ_U16: case PTQ_I16: case PTQ_F16: return 2;
    case PTQ_I64: case PTQ_F64: case PTQ_U64: return 8;
    default: return 0;
    }
}

const char *ptq_dtype_name(ptq_dtype dt)
{
    switch (dt) {
    case PTQ_F32: return "float32";
    case PTQ_U8: return "uint8";
    case PTQ_I8: return "int8";
    case PTQ_U16: return "uint16";
    case PTQ_I16: return "int16";
    case PTQ_I32: return "int32";
    case PTQ_I64: return "int64";
    case PTQ_STRING: return "string";
    case PTQ_BOOL: return "bool";
    case PTQ_F16: return "float16";
    case PTQ_F64: return "float64";
    case PTQ_U32: return "uint32";
    case PTQ_U64: return "uint64";
    default: return "?";
    }
}

size_t ptq_tensor_numel(const ptq_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->dims[i];
    return n;
}

size_t ptq_tensor_nbytes(const ptq_tensor *t)
{
    return ptq_tensor_numel(t) * ptq_dtype_size(t->dtype);
}

/* From 4 MiB on (activation arenas, batches, large constants), 2 MiB-aligned and marked for
 * transparent huge pages, so that the kernel maps the block 2 MiB at a time: 4 KiB page faults
 * took a third of det's inference time on a virtual machine (`ptq run`, 16 photos at 640x640:
 * 1.58 -> 0.98 s). Advice only: without THP the pages are ordinary ones. */
void *ptq_aligned_alloc(size_t bytes)
{
    enum { HUGE = 2 << 20 };
    void *p = NULL;
    if (bytes >= 2 * HUGE) {
        size_t n = (bytes + HUGE - 1) / HUGE * HUGE;
        if (posix_memalign(&p, HUGE, n) != 0) return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, n, MADV_HUGEPAGE);
#endif
        return p;
    }
    if (posix_memalign(&p, 64, bytes ? (bytes + 63) / 64 * 64 : 64) != 0) return NULL;
    return p;
}

void ptq_aligned_free(void *p)
{
    free(p);
}

ptq_status ptq_tensor_alloc(ptq_tensor *t)
{
    ptq_status st = PTQ_OK;
    size_t n = 1, es = ptq_dtype_size(t->dtype);
    if (es == 0) FAIL(PTQ_ERR_UNSUPPORTED, "cannot allocate a %s tensor", ptq_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > PTQ_MAX_RANK) FAIL(PTQ_ERR_SHAPE, "rank %d out of range", t->rank);
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0) FAIL(PTQ_ERR_SHAPE, "negative dim %lld", (long long)t->dims[i]);
        if (t->dims[i] && n > ((size_t)1 << 46) / (size_t)t->dims[i])
            FAIL(PTQ_ERR_SHAPE, "tensor too large");
        n *= (size_t)t->dims[i];
    }
    t->data = ptq_aligned_alloc(n * es);
    CHECK_ALLOC(t->data);
    memset(t->data, 0, n * es);
    t->owns_data = 1;
done:
    return st;
}

void ptq_tensor_free(ptq_tensor *t)
{
    if (!t) return;
    if (t->owns_data) ptq_aligned_free(t->data);
    t->data = NULL;
    t->owns_data = 0;
}

ptq_status ptq_tensor_copy(ptq_tensor *dst, const ptq_tensor *src)
{
    ptq_status st = PTQ_OK;
    *dst = *src;
    dst->data = NULL;
    dst->owns_data = 0;
    if (src->data) {
        TRY(ptq_tensor_alloc(dst));
        memcpy(dst->data, src->data, ptq_tensor_nbytes(src));
    }
done:
    return st;
}

int ptq_shape_equal(const ptq_tensor *a, const ptq_tensor *b)
{
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

const char *ptq_shape_str(const ptq_tensor *t, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap == 0) return buf;
    buf[0] = 0;
    if (t->rank == 0) {
        snprintf(buf, cap, "scalar");
        return buf;
    }
    for (int i = 0; i < t->rank && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, i ? "x%lld" : "%lld", (long long)t->dims[i]);
        if (w < 0) break;
        len += (size_t)w;
    }
    return buf;
}

int64_t ptq_tensor_get_i64(const ptq_tensor *t, size_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case PTQ_I64: return ((const int64_t *)d)[i];
    case PTQ_I32: return ((const int32_t *)d)[i];
    case PTQ_I16: return ((const int16_t *)d)[i];
    case PTQ_I8: return ((const int8_t *)d)[i];
    case PTQ_U8: case PTQ_BOOL: return ((const uint8_t *)d)[i];
    case PTQ_U16: return ((const uint16_t *)d)[i];
    case PTQ_U32: return ((const uint32_t *)d)[i];
    case PTQ_U64: return (int64_t)((const uint64_t *)d)[i];
    case PTQ_F32: return (int64_t)((const float *)d)[i];
    case PTQ_F64: return (int64_t)((const double *)d)[i];
    case PTQ_F16: return (int64_t)ptq_f16_to_f32(((const uint16_t *)d)[i]);
    default: return 0;
    }
}

double ptq_tensor_get_f64(const ptq_tensor *t, size_t i)
{
    switch (t->dtype) {
    case PTQ_F32: return ((const float *)t->data)[i];
    case PTQ_F64: return ((const double *)t->data)[i];
    case PTQ_F16: return ptq_f16_to_f32(((const uint16_t *)t->data)[i]);
    case PTQ_U64: return (double)((const uint64_t *)t->data)[i];
    default: return (double)ptq_tensor_get_i64(t, i);
    }
}

float ptq_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ff;
            bits = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ptq_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow to inf */
    if (absx < 0x38800000u) { /* subnormal or zero in half */
        if (absx < 0x33000000u) return (uint16_t)sign;
        uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14 + (113 - e) */
        uint32_t v = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (v & 1))) v++;
        return (uint16_t)(sign | v);
    }
    uint32_t v = ((absx >> 13) - (112u << 10)), rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) v++;
    return (uint16_t)(sign | v);
}
