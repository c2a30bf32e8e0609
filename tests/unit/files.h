/* files.h: whole-file helpers for the unit tests that write inputs or read outputs back. */
#ifndef PTQ_TESTS_FILES_H
#define PTQ_TESTS_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Writes len bytes of data to path; 1 when all were written and the file closed. */
static inline int write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

/* The whole file (one spare byte allocated past its end) and its size in *len; NULL when it
 * cannot be read. The caller frees it. */
static inline uint8_t *read_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = n >= 0 ? (size_t)n : 0;
    return b;
}

#endif
