/* file.h: whole-file reads, and writes as one set of outputs: every output goes to a temporary
 * file, and they are renamed into place together, only when all were written, so an error or a
 * signal leaves the previous files or the whole new set, never a mix, and never a half-written file.
 *
 *   uint8_t *buf; size_t len;
 *   TRY(io_read_file(path, &buf, &len, 1 << 30));   // free(buf)
 *   TRY(io_write_atomic(path, data, len));          // a set of one, unless a set is current
 *
 * For streamed writers: io_atomic_open() gives a FILE* on a temporary file in the output's folder
 * (unnamed, O_TMPFILE: nothing is left by any exit; where the file system lacks it,
 * "<path>.ptq.tmp.<pid>", which a later commit into that folder removes once the pid is gone);
 * io_atomic_commit() flushes and fsyncs it, then renames it into place, or, while a set is
 * current in this thread, hands it to the set; io_atomic_abort() discards it.
 *
 * An output set (what `ptq CMD` writes):
 *   io_outset *set;
 *   TRY(io_outset_begin(&set, note));      // current for this thread: writes join it
 *   ... every writer of io/ ...
 *   TRY(io_outset_commit(set, model));     // all renamed, model last; then io_outset_free(set)
 * io_outset_free() of a set not committed discards its files (the previous outputs stay).
 * Committing locks each output folder (flock; `note` says when it waits for another process),
 * blocks SIGINT/SIGTERM/SIGHUP/SIGQUIT in the calling thread and names every file before the
 * first rename; a signal that arrives meanwhile is raised again once the set is in place. */
#ifndef PTQ_IO_FILE_H
#define PTQ_IO_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/status.h"

/* Reads the whole file; fails (IO) naming the path, or (FORMAT) if larger than max_bytes. */
ptq_status io_read_file(const char *path, uint8_t **data, size_t *len, size_t max_bytes);
ptq_status io_write_atomic(const char *path, const void *data, size_t len);
/* The next line of the NUL-terminated text at *cur (io_read_file's buffer), cut in place: without
 * its '\n' and a final '\r' (with trim_blanks, also trailing spaces and tabs); *len its length,
 * *line_no counted up. NULL at the end of the text.
 *   char *cur = (char *)buf, *line; size_t k; int n = 0;
 *   while ((line = io_text_line(&cur, 0, &n, &k))) { ... }  */
char *io_text_line(char **cur, int trim_blanks, int *line_no, size_t *len);

typedef struct {
    FILE *fp;
    char *path, *tmp; /* tmp: the named temporary file, or NULL while it is unnamed (fd) */
    int fd;
} io_atomic_file;

ptq_status io_atomic_open(io_atomic_file *f, const char *path);
ptq_status io_atomic_commit(io_atomic_file *f);
void io_atomic_abort(io_atomic_file *f); /* NULL-safe, idempotent */

typedef struct io_outset io_outset;
ptq_status io_outset_begin(io_outset **set, void (*note)(const char *msg));
/* Renames every file of the set onto its output, `primary` (may be NULL) last. On failure the
 * message says what stands: "no output written (the previous files are unchanged)", or, if a
 * rename failed after others (a disk error), which outputs were written. */
ptq_status io_outset_commit(io_outset *set, const char *primary);
int io_outset_pending(const io_outset *set); /* files begun (written or failed) and not committed */
io_outset *io_outset_current(void);          /* this thread's current set, or NULL */
void io_outset_free(io_outset *set);         /* NULL-safe; discards what was not committed */
/* For signal handlers (async-signal-safe): 1 while a commit is renaming (the signal is kept and
 * raised again when the set is in place: return from the handler), 2 once a set was committed,
 * else 0 after removing every named temporary file (no output of the set was written). */
int io_outset_signal(int sig);

#endif
