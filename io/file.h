/* file.h: whole-file reads and atomic writes (temporary file + rename), so no
 * output is ever left half-written.
 *
 *   uint8_t *buf; size_t len;
 *   TRY(io_read_file(path, &buf, &len, 1 << 30));   // free(buf)
 *   TRY(io_write_atomic(path, data, len));
 *
 * For streamed writers: io_atomic_open() gives a FILE* on "<path>.tmp.<pid>",
 * io_atomic_commit() flushes, fsyncs and renames it, io_atomic_abort() removes it. */
#ifndef PTQ_IO_FILE_H
#define PTQ_IO_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/status.h"

/* Reads the whole file; fails (IO) naming the path, or (FORMAT) if larger than max_bytes. */
ptq_status io_read_file(const char *path, uint8_t **data, size_t *len, size_t max_bytes);
ptq_status io_write_atomic(const char *path, const void *data, size_t len);

typedef struct {
    FILE *fp;
    char *path, *tmp;
} io_atomic_file;

ptq_status io_atomic_open(io_atomic_file *f, const char *path);
ptq_status io_atomic_commit(io_atomic_file *f);
void io_atomic_abort(io_atomic_file *f); /* NULL-safe, idempotent */
/* Removes every temporary file still open (for signal handlers: async-signal-safe unlink). */
void io_atomic_abort_all(void);

#endif
