#include "file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/graph.h"

ptq_status io_read_file(const char *path, uint8_t **data, size_t *len, size_t max_bytes)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    FILE *fp = fopen(path, "rb");
    size_t cap = 0, n = 0, got = 1;
    int pipe = 0;
    *data = NULL;
    *len = 0;
    if (!fp) FAIL(PTQ_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb; /* Linux opens a folder for reading, and its "size" is LONG_MAX */
    if (fstat(fileno(fp), &sb) == 0 && S_ISDIR(sb.st_mode)) FAIL(PTQ_ERR_IO, "%s: is a folder, not a file", path);
    if (fseek(fp, 0, SEEK_END) == 0) { /* a file: its size, then one read */
        long size = ftell(fp);
        if (size < 0) FAIL(PTQ_ERR_IO, "%s: not a regular file", path);
        if ((size_t)size > max_bytes) FAIL(PTQ_ERR_FORMAT, "%s: %ld bytes, more than the %zu allowed", path, size, max_bytes);
        rewind(fp);
        cap = (size_t)size;
    } else if (errno == ESPIPE) { /* a pipe (`--images <(find ...)`, /dev/stdin): read to its end */
        pipe = 1;
    } else {
        FAIL(PTQ_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    }
    buf = malloc(cap + 1);
    CHECK_ALLOC(buf);
    while (got && n <= max_bytes) {
        if (n == cap) { /* a file is read; a pipe's buffer doubles, up to one byte past the limit */
            if (!pipe) break;
            size_t want = cap ? 2 * cap : 65536;
            cap = want < max_bytes + 1 ? want : max_bytes + 1;
            uint8_t *p = realloc(buf, cap + 1);
            CHECK_ALLOC(p);
            buf = p;
        }
        got = fread(buf + n, 1, cap - n, fp);
        n += got;
    }
    if (ferror(fp) || (!pipe && n != cap)) FAIL(PTQ_ERR_IO, "%s: short read", path);
    if (n > max_bytes) FAIL(PTQ_ERR_FORMAT, "%s: more than the %zu bytes allowed", path, max_bytes);
    buf[n] = 0;
    *data = buf;
    *len = n;
    buf = NULL;
done:
    if (fp) fclose(fp);
    free(buf);
    return st;
}

/* Temporary files currently open, so a signal handler can remove them. */
#define MAX_OPEN_TMP 64
static char *open_tmp[MAX_OPEN_TMP];

static void track(char *tmp, int add)
{
    for (int i = 0; i < MAX_OPEN_TMP; i++) {
        if (add && !open_tmp[i]) {
            open_tmp[i] = tmp;
            return;
        }
        if (!add && open_tmp[i] == tmp) {
            open_tmp[i] = NULL;
            return;
        }
    }
}

void io_atomic_abort_all(void)
{
    for (int i = 0; i < MAX_OPEN_TMP; i++)
        if (open_tmp[i]) unlink(open_tmp[i]);
}

ptq_status io_atomic_open(io_atomic_file *f, const char *path)
{
    ptq_status st = PTQ_OK;
    memset(f, 0, sizeof *f);
    size_t n = strlen(path) + 32;
    f->path = ptq_strdup(path);
    f->tmp = malloc(n);
    CHECK_ALLOC(f->path);
    CHECK_ALLOC(f->tmp);
    snprintf(f->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    f->fp = fopen(f->tmp, "wb");
    if (!f->fp) FAIL(PTQ_ERR_IO, "%s: cannot create: %s", f->tmp, strerror(errno));
    track(f->tmp, 1);
done:
    if (st != PTQ_OK) {
        free(f->path);
        free(f->tmp);
        memset(f, 0, sizeof *f);
    }
    return st;
}

ptq_status io_atomic_commit(io_atomic_file *f)
{
    ptq_status st = PTQ_OK;
    int bad = ferror(f->fp);
    if (fflush(f->fp) != 0) bad = 1;
    if (!bad && fsync(fileno(f->fp)) != 0 && errno != EINVAL) bad = 1;
    if (fclose(f->fp) != 0) bad = 1;
    f->fp = NULL;
    if (bad) FAIL(PTQ_ERR_IO, "%s: write failed: %s", f->path, strerror(errno));
    if (rename(f->tmp, f->path) != 0) FAIL(PTQ_ERR_IO, "%s: cannot rename from %s: %s", f->path, f->tmp, strerror(errno));
    track(f->tmp, 0);
    free(f->tmp);
    free(f->path);
    memset(f, 0, sizeof *f);
done:
    if (st != PTQ_OK) io_atomic_abort(f);
    return st;
}

void io_atomic_abort(io_atomic_file *f)
{
    if (!f) return;
    if (f->fp) fclose(f->fp);
    if (f->tmp) {
        unlink(f->tmp);
        track(f->tmp, 0);
    }
    free(f->tmp);
    free(f->path);
    memset(f, 0, sizeof *f);
}

ptq_status io_write_atomic(const char *path, const void *data, size_t len)
{
    ptq_status st = PTQ_OK;
    io_atomic_file f;
    TRY(io_atomic_open(&f, path));
    if (len && fwrite(data, 1, len, f.fp) != len) {
        io_atomic_abort(&f);
        FAIL(PTQ_ERR_IO, "%s: write failed", path);
    }
    TRY(io_atomic_commit(&f));
done:
    return st;
}
