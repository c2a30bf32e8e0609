/* npy.h: numpy .npy files (format 1.0/2.0/3.0, little-endian, C order) <-> ptq_tensor.
 *
 *   ptq_tensor t = {0};
 *   TRY(npy_load("x.npy", &t));     // t owns its data: ptq_tensor_free(&t)
 *   TRY(npy_save("y.npy", &t));     // atomic write
 *
 * dtypes: <f4 <f8 <i1 <u1 <i2 <u2 <i4 <u4 <i8 <u8 |b1 <f2. Fortran order and
 * big-endian files are refused with a message. */
#ifndef PTQ_IO_NPY_H
#define PTQ_IO_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/tensor.h"

ptq_status npy_load(const char *path, ptq_tensor *out);
/* The same from memory; what names the source in messages. */
ptq_status npy_decode(const uint8_t *buf, size_t len, const char *what, ptq_tensor *out);
ptq_status npy_save(const char *path, const ptq_tensor *t);

#endif
