/* nary.h: private helpers of the element-wise op files (logic.c, math.c, loss.c, qlinear.c):
 * walking an output whose inputs are broadcast to it, and typed loads and stores.
 *
 *   ptq_nary it; ptq_nary_init(&it, ctx->in, 2, y);
 *   size_t off[2]; ptq_nary_offsets(&it, i, off);   // element i of y reads in[0][off[0]], in[1][off[1]]
 *   or by rows of the innermost dim (offsets once per row): ptq_nary_inner, ptq_nary_step
 *
 * Offsets come from runtime/shape.h's broadcast strides; nothing here allocates. */
#ifndef PTQ_OPS_NARY_H
#define PTQ_OPS_NARY_H

#include <stdint.h>

#include "runtime/shape.h"
#include "runtime/tensor.h"

#define PTQ_NARY_MAX 4

typedef struct {
    int n, rank;
    int64_t dims[PTQ_MAX_RANK];
    int64_t str[PTQ_NARY_MAX][PTQ_MAX_RANK];
} ptq_nary;

static inline void ptq_nary_init(ptq_nary *it, const ptq_tensor *const *in, int n, const ptq_tensor *y)
{
    it->n = n;
    it->rank = y->rank;
    for (int d = 0; d < y->rank; d++) it->dims[d] = y->dims[d];
    for (int j = 0; j < n; j++) ptq_broadcast_strides(in[j], y, it->str[j]);
}

/* Offsets (elements) in each input of output element i. */
static inline void ptq_nary_offsets(const ptq_nary *it, size_t i, size_t *off)
{
    for (int j = 0; j < it->n; j++) off[j] = 0;
    for (int d = it->rank - 1; d >= 0; d--) {
        size_t k = i % (size_t)it->dims[d];
        i /= (size_t)it->dims[d];
        for (int j = 0; j < it->n; j++) off[j] += k * (size_t)it->str[j][d];
    }
}

/* Rows of the output's innermost dim: element k of row r is output r * inner + k and reads
 * input j at (its ptq_nary_offsets at r * inner) + k * ptq_nary_step(it, j). */
static inline size_t ptq_nary_inner(const ptq_nary *it)
{
    return it->rank ? (size_t)it->dims[it->rank - 1] : 1;
}

static inline size_t ptq_nary_step(const ptq_nary *it, int j)
{
    return it->rank ? (size_t)it->str[j][it->rank - 1] : 0;
}

static inline int ptq_dtype_is_float(ptq_dtype d)
{
    return d == PTQ_F32 || d == PTQ_F64 || d == PTQ_F16;
}

static inline int ptq_dtype_is_int(ptq_dtype d)
{
    return d == PTQ_I8 || d == PTQ_I16 || d == PTQ_I32 || d == PTQ_I64 || d == PTQ_U8 || d == PTQ_U16 ||
           d == PTQ_U32 || d == PTQ_U64;
}

static inline int ptq_dtype_is_signed_int(ptq_dtype d)
{
    return d == PTQ_I8 || d == PTQ_I16 || d == PTQ_I32 || d == PTQ_I64;
}

/* Stores v into element i of t (float types round once; integers wrap to the type's width). */
static inline void ptq_store_f64(ptq_tensor *t, size_t i, double v)
{
    switch (t->dtype) {
    case PTQ_F32: ((float *)t->data)[i] = (float)v; break;
    case PTQ_F64: ((double *)t->data)[i] = v; break;
    case PTQ_F16: ((uint16_t *)t->data)[i] = ptq_f32_to_f16((float)v); break;
    default: break;
    }
}

static inline void ptq_store_i64(ptq_tensor *t, size_t i, int64_t v)
{
    switch (t->dtype) {
    case PTQ_I64: ((int64_t *)t->data)[i] = v; break;
    case PTQ_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    case PTQ_I32: ((int32_t *)t->data)[i] = (int32_t)(uint32_t)v; break;
    case PTQ_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case PTQ_I16: ((int16_t *)t->data)[i] = (int16_t)(uint16_t)v; break;
    case PTQ_U16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case PTQ_I8: ((int8_t *)t->data)[i] = (int8_t)(uint8_t)v; break;
    case PTQ_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case PTQ_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: ptq_store_f64(t, i, (double)v); break;
    }
}

/* Element i of an unsigned integer tensor (U8..U64, BOOL) as uint64. */
static inline uint64_t ptq_load_u64(const ptq_tensor *t, size_t i)
{
    return t->dtype == PTQ_U64 ? ((const uint64_t *)t->data)[i] : (uint64_t)ptq_tensor_get_i64(t, i);
}

#endif
