/* tensor.h: dtypes, shapes and the plain tensor descriptor shared by all modules.
 *
 *   ptq_tensor t = {0};
 *   t.dtype = PTQ_F32; t.rank = 2; t.dims[0] = 3; t.dims[1] = 4;
 *   TRY(ptq_tensor_alloc(&t));          // t.data owned by t: ptq_tensor_free(&t)
 *   float *x = t.data; size_t n = ptq_tensor_numel(&t);
 *
 * A ptq_tensor is a value type: it may own its data (owns_data = 1, released by
 * ptq_tensor_free) or borrow it (owns_data = 0, e.g. a view into the executor's
 * arena, valid as the borrower's header says). Dims are int64; rank 0 is a scalar
 * with one element. Dtype codes equal ONNX TensorProto.DataType. */
#ifndef PTQ_TENSOR_H
#define PTQ_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define PTQ_MAX_RANK 8

typedef enum {
    PTQ_UNDEFINED = 0,
    PTQ_F32 = 1,
    PTQ_U8 = 2,
    PTQ_I8 = 3,
    PTQ_U16 = 4,
    PTQ_I16 = 5,
    PTQ_I32 = 6,
    PTQ_I64 = 7,
    PTQ_STRING = 8,
    PTQ_BOOL = 9, /* one byte per element, 0 or 1 */
    PTQ_F16 = 10,
    PTQ_F64 = 11,
    PTQ_U32 = 12,
    PTQ_U64 = 13,
    PTQ_DTYPE_COUNT
} ptq_dtype;

typedef struct {
    ptq_dtype dtype;
    int rank;                     /* 0 .. PTQ_MAX_RANK */
    int64_t dims[PTQ_MAX_RANK];
    void *data;                   /* row-major, NULL when not materialised */
    int owns_data;                /* 1: ptq_tensor_free releases data */
} ptq_tensor;

/* Element size in bytes; 0 for UNDEFINED, STRING and unknown codes. */
size_t ptq_dtype_size(ptq_dtype dt);
/* "float32", "int64", ...; "?" for unknown codes. */
const char *ptq_dtype_name(ptq_dtype dt);

/* Number of elements (1 for rank 0); dims must be >= 0. */
size_t ptq_tensor_numel(const ptq_tensor *t);
size_t ptq_tensor_nbytes(const ptq_tensor *t);
/* Allocates zeroed, 64-byte aligned data for the current dtype and dims; owns_data = 1.
 * Fails with PTQ_ERR_NOMEM, or PTQ_ERR_SHAPE when the size overflows. */
ptq_status ptq_tensor_alloc(ptq_tensor *t);
/* Releases owned data (NULL-safe) and clears data/owns_data. */
void ptq_tensor_free(ptq_tensor *t);
/* Deep copy of src (data included when present) into *dst. */
ptq_status ptq_tensor_copy(ptq_tensor *dst, const ptq_tensor *src);
/* 1 when both have the same rank and dims. */
int ptq_shape_equal(const ptq_tensor *a, const ptq_tensor *b);
/* Writes "1x3x224x224" (or "scalar") into buf. */
const char *ptq_shape_str(const ptq_tensor *t, char *buf, size_t cap);

/* 64-byte aligned allocation and release (NULL-safe). */
void *ptq_aligned_alloc(size_t bytes);
void ptq_aligned_free(void *p);

/* Reads element i of an integer tensor (I8..U64, BOOL) as int64; of float ones, truncated. */
int64_t ptq_tensor_get_i64(const ptq_tensor *t, size_t i);
/* Reads element i of any numeric tensor as double. */
double ptq_tensor_get_f64(const ptq_tensor *t, size_t i);

/* float16 <-> float32 (IEEE binary16, round to nearest even). */
float ptq_f16_to_f32(uint16_t h);
uint16_t ptq_f32_to_f16(float f);

#endif
