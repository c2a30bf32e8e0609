/* status.h: one status enum for all of ptq, and the thread-local error message.
 *
 *   ptq_status st = PTQ_OK;
 *   TRY(onnx_model_load(path, &g));            // on failure: st set, goto done
 *   if (n < 0) FAIL(PTQ_ERR_FORMAT, "%s: negative count %d", path, n);
 * done:
 *   cleanup...; return st;
 *
 * Library code never exits: it sets a message with ptq_error() and returns a
 * status; cli/ prints ptq_last_error() and maps the status to an exit code.
 * The message is per thread and valid until the next ptq_error() on it. */
#ifndef PTQ_STATUS_H
#define PTQ_STATUS_H

#include <string.h> /* strcspn, for CHECK_ALLOC */

typedef enum {
    PTQ_OK = 0,
    PTQ_ERR_ARG,         /* bad argument or option */
    PTQ_ERR_NOMEM,       /* allocation failed */
    PTQ_ERR_IO,          /* file could not be opened, read or written */
    PTQ_ERR_FORMAT,      /* malformed file or model */
    PTQ_ERR_UNSUPPORTED, /* valid but outside what ptq implements */
    PTQ_ERR_SHAPE,       /* shapes or dtypes do not fit */
    PTQ_ERR_INTERNAL     /* a bug in ptq */
} ptq_status;

/* Sets the thread's error message (printf format) and returns nothing.
 * A later call replaces it; ptq_error_prefix() prepends context. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void ptq_error(const char *fmt, ...);
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void ptq_error_prefix(const char *fmt, ...);
const char *ptq_last_error(void);
const char *ptq_status_name(ptq_status st);

#define TRY(expr)                          \
    do {                                   \
        ptq_status try_st_ = (expr);       \
        if (try_st_ != PTQ_OK) {           \
            st = try_st_;                  \
            goto done;                     \
        }                                  \
    } while (0)

#define FAIL(code, ...)                    \
    do {                                   \
        ptq_error(__VA_ARGS__);            \
        st = (code);                       \
        goto done;                         \
    } while (0)

/* Allocation check: FAIL with PTQ_ERR_NOMEM when ptr is NULL, the message naming the object
 * (the expression up to an assignment: "out of memory allocating g->nodes (runtime/graph.c:139)"
 * for CHECK_ALLOC(g->nodes) and CHECK_ALLOC(g->nodes = malloc(...))); callers add what it belongs
 * to with ptq_error_prefix (the model, the node). */
#define CHECK_ALLOC(ptr)                                                                             \
    do {                                                                                             \
        if (!(ptr))                                                                                  \
            FAIL(PTQ_ERR_NOMEM, "out of memory allocating %.*s (%s:%d)", (int)strcspn(#ptr, " ="), #ptr, \
                 __FILE__, __LINE__);                                                                \
    } while (0)

#endif
