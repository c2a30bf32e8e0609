#include "file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/graph.h"

char *io_text_line(char **cur, int trim_blanks, int *line_no, size_t *len)
{
    char *line = *cur;
    if (!line || !*line) return NULL;
    char *next = strchr(line, '\n');
    if (next) *next++ = 0;
    *cur = next;
    (*line_no)++;
    size_t k = strlen(line);
    while (k && (line[k - 1] == '\r' || (trim_blanks && (line[k - 1] == ' ' || line[k - 1] == '\t')))) line[--k] = 0;
    *len = k;
    return line;
}

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

/* The write side: every output goes to an unnamed temporary file (O_TMPFILE in the output's
 * folder: nothing is left behind by any exit, SIGKILL included) or, where the file system lacks
 * O_TMPFILE, to "<output>.ptq.tmp.<pid>" (removed on errors and signals, and by a later commit
 * into that folder once the pid is gone). Committing a set: every folder locked (flock), the
 * signals blocked, each temporary file given its name, then renamed onto its output, the primary
 * output (the model) last; folders synced.
 *
 * A set of two or more files is committed through a journal, so that not even a SIGKILL between
 * two renames leaves a mixed set for good: before the first rename every file is renamed to
 * ".<name>.ptq-new.<pid>" beside its output and ".<primary>.ptq-journal.<pid>" (written to a
 * ".ptq-jtmp." file, fsynced, renamed) lists them with their outputs, absolute, in rename order;
 * after the last rename the journal is removed. A later ptq writing into that folder (its first
 * file opened there, and its commit) finds the journal of a pid that is gone and rolls the set
 * forward (the files not yet renamed are there: they are renamed now) or, when they are not all
 * there, removes what is left and names the outputs that are new; either way in one line through
 * the set's note. */

#define TMP_TAG ".ptq.tmp."
#define NEW_TAG ".ptq-new."
#define JOURNAL_TAG ".ptq-journal."
#define JTMP_TAG ".ptq-jtmp."

/* Named temporary files that exist now, for the signal handler (async-signal-safe unlink). */
#define MAX_NAMED_TMP 1024
static char *volatile named_tmp[MAX_NAMED_TMP];
static volatile sig_atomic_t commit_state; /* 0 idle, 1 renaming, 2 a set was committed */
static volatile sig_atomic_t pending_sig;

static void track(char *tmp, int add)
{
    for (int i = 0; i < MAX_NAMED_TMP; i++) {
        if (add && !named_tmp[i]) {
            named_tmp[i] = tmp;
            return;
        }
        if (!add && named_tmp[i] == tmp) {
            named_tmp[i] = NULL;
            return;
        }
    }
}

int io_outset_signal(int sig)
{
    if (commit_state == 1) { /* another thread is renaming with the signals blocked: it raises this one after */
        pending_sig = sig;
        return 1;
    }
    if (commit_state == 2) return 2;
    for (int i = 0; i < MAX_NAMED_TMP; i++)
        if (named_tmp[i]) unlink(named_tmp[i]);
    return 0;
}

typedef struct {
    char *path, *tmp; /* tmp: the named temporary file, once it has a name (else NULL) */
    int fd;           /* an unnamed O_TMPFILE file still open, or -1 */
} out_entry;

struct io_outset {
    out_entry *e;
    int n, cap;
    int begun;   /* files opened since the set began or was last committed, written or not */
    int command; /* begun by io_outset_begin: its commit is what io_outset_signal reports (not a set of one) */
    void (*note)(const char *msg);
};

static _Thread_local io_outset *current;

static char *tmp_name(const char *path)
{
    size_t n = strlen(path) + sizeof TMP_TAG + 24;
    char *t = malloc(n);
    if (t) snprintf(t, n, "%s" TMP_TAG "%ld", path, (long)getpid());
    return t;
}

/* The folder of path ("." when it has none), malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return ptq_strdup(".");
    if (slash == path) return ptq_strdup("/");
    char *d = malloc((size_t)(slash - path) + 1);
    if (d) {
        memcpy(d, path, (size_t)(slash - path));
        d[slash - path] = 0;
    }
    return d;
}

/* "<folder of path>/.<name of path><tag><pid>", malloc'ed. */
static char *side_name(const char *path, const char *tag, long pid)
{
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    size_t n = strlen(path) + strlen(tag) + 32;
    char *t = malloc(n);
    if (t) snprintf(t, n, "%.*s.%s%s%ld", dl, path, path + dl, tag, pid);
    return t;
}

/* path made absolute (the current folder prefixed), malloc'ed. */
static char *absolute(const char *path)
{
    if (path[0] == '/') return ptq_strdup(path);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return NULL;
    size_t n = strlen(cwd) + strlen(path) + 2;
    char *a = malloc(n);
    if (a) snprintf(a, n, "%s/%s", cwd, path);
    return a;
}

static int pid_gone(long pid)
{
    return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static void say(void (*note)(const char *msg), const char *msg)
{
    if (note) note(msg);
}

/* Completes or clears the commit that journal (in dir, of a process that is gone) describes. */
static void recover_journal(int dfd, const char *dir, const char *name, long pid, void (*note)(const char *msg))
{
    char text[65536], msg[4096];
    size_t len = 0;
    ssize_t r;
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    while (fd >= 0 && len < sizeof text - 1 && (r = read(fd, text + len, sizeof text - 1 - len)) > 0) len += (size_t)r;
    if (fd >= 0) close(fd);
    text[len] = 0;
    /* "ptq-commit\n", then "<new>\t<output>\n" per file in rename order, then "end\n" */
    enum { MAX_J = 256 };
    char *news[MAX_J], *outs[MAX_J];
    int n = 0, complete = 0, pending[MAX_J];
    char *cur = text, *line;
    int line_no = 0;
    size_t k;
    line = io_text_line(&cur, 0, &line_no, &k);
    if (line && !strcmp(line, "ptq-commit"))
        while ((line = io_text_line(&cur, 0, &line_no, &k))) {
            if (!strcmp(line, "end")) {
                complete = 1;
                break;
            }
            char *tab = strchr(line, '\t'), want[8192];
            if (!tab || n == MAX_J) break;
            *tab = 0;
            /* only ptq's own names: ".<name>.ptq-new.<pid>" beside each output */
            const char *slash = strrchr(tab + 1, '/');
            int dl = slash ? (int)(slash - (tab + 1) + 1) : 0;
            snprintf(want, sizeof want, "%.*s.%s" NEW_TAG "%ld", dl, tab + 1, tab + 1 + dl, pid);
            if (strcmp(want, line)) break;
            news[n] = line;
            outs[n++] = tab + 1;
        }
    if (complete && n > 0) {
        int first_pending = n, consistent = 1;
        for (int i = 0; i < n; i++) {
            pending[i] = access(news[i], F_OK) == 0;
            if (pending[i] && first_pending == n) first_pending = i;
            if (!pending[i] && first_pending < n) consistent = 0; /* renames go in order: a gap is not ours */
        }
        size_t m = 0;
        if (consistent && first_pending < n) { /* roll forward */
            int done = 0;
            m = (size_t)snprintf(msg, sizeof msg, "completed the output set of an interrupted ptq (pid %ld):", pid);
            for (int i = first_pending; i < n; i++)
                if (rename(news[i], outs[i]) == 0 && m < sizeof msg) {
                    m += (size_t)snprintf(msg + m, sizeof msg - m, "%s %s", done++ ? "," : "", outs[i]);
                }
            if (m < sizeof msg) snprintf(msg + m, sizeof msg - m, " renamed into place");
            say(note, msg);
        } else if (first_pending < n) { /* roll back what is left: the outputs that are new are named */
            m = (size_t)snprintf(msg, sizeof msg, "removed the leftovers of an interrupted ptq (pid %ld); new:", pid);
            for (int i = 0, named = 0; i < n; i++) { /* renamed for sure: those before the first still there */
                if (pending[i]) unlink(news[i]);
                else if (i < first_pending && m < sizeof msg)
                    m += (size_t)snprintf(msg + m, sizeof msg - m, "%s %s", named++ ? "," : "", outs[i]);
            }
            if (m < sizeof msg) snprintf(msg + m, sizeof msg - m, "; the others are the previous files");
            say(note, msg);
        }
        int sync = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sync >= 0) {
            fsync(sync);
            close(sync);
        }
    }
    unlinkat(dfd, name, 0);
}

/* Removes the leftovers of processes that are gone in dir: journals are completed first, then
 * "<name>.ptq.tmp.<pid>", ".<name>.ptq-new.<pid>" and ".ptq-jtmp." files are removed. */
static void remove_stale(const char *dir, void (*note)(const char *msg))
{
    static const char *tags[] = {TMP_TAG, NEW_TAG, JTMP_TAG};
    for (int pass = 0; pass < 2; pass++) {
        DIR *d = opendir(dir);
        if (!d) return;
        struct dirent *de;
        while ((de = readdir(d))) {
            for (int t = 0; t < (pass ? 3 : 1); t++) {
                const char *tag = pass ? tags[t] : JOURNAL_TAG, *at = strstr(de->d_name, tag);
                if (!at) continue;
                char *end;
                long pid = strtol(at + strlen(tag), &end, 10);
                if (*end || end == at + strlen(tag) || !pid_gone(pid)) continue;
                if (pass) unlinkat(dirfd(d), de->d_name, 0);
                else recover_journal(dirfd(d), dir, de->d_name, pid, note);
                break;
            }
        }
        closedir(d);
    }
}

/* remove_stale for dir under its lock; skipped while another process holds it (the commit, which
 * waits for the lock, does it then). */
static void remove_stale_locked(const char *dir, void (*note)(const char *msg))
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) remove_stale(dir, note);
    close(fd);
}

static void entry_drop(out_entry *e)
{
    if (e->fd >= 0) close(e->fd);
    if (e->tmp) {
        unlink(e->tmp);
        track(e->tmp, 0);
    }
    free(e->tmp);
    free(e->path);
    memset(e, 0, sizeof *e);
    e->fd = -1;
}

/* Gives an unnamed file its temporary name "<path>.ptq.tmp.<pid>" (linkat of /proc/self/fd). */
static ptq_status name_entry(out_entry *e)
{
    ptq_status st = PTQ_OK;
    char proc[64];
    e->tmp = tmp_name(e->path);
    CHECK_ALLOC(e->tmp);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", e->fd);
    unlink(e->tmp);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, e->tmp, AT_SYMLINK_FOLLOW) != 0 && linkat(e->fd, "", AT_FDCWD, e->tmp, AT_EMPTY_PATH) != 0) {
        int err = errno;
        free(e->tmp);
        e->tmp = NULL;
        FAIL(PTQ_ERR_IO, "%s: cannot name its temporary file: %s; no output written (the previous files are unchanged)", e->path,
             strerror(err));
    }
    track(e->tmp, 1);
    close(e->fd);
    e->fd = -1;
done:
    return st;
}

/* A set holds at most this many files unnamed (open descriptors); later ones get their names at once. */
#define MAX_UNNAMED 128

ptq_status io_atomic_open(io_atomic_file *f, const char *path)
{
    ptq_status st = PTQ_OK;
    char *dir = NULL;
    int fd = -1;
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (current) current->begun++;
    f->path = ptq_strdup(path);
    dir = dir_of(path);
    CHECK_ALLOC(f->path);
    CHECK_ALLOC(dir);
    remove_stale_locked(dir, current ? current->note : NULL); /* a killed run's set completed first */
    const char *mode = getenv("PTQ_TMPFILE"); /* "named": a test hook, the path of file systems without O_TMPFILE */
    if (mode && !strcmp(mode, "named")) fd = -1, errno = EOPNOTSUPP;
    else fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) { /* no O_TMPFILE here: a named file */
        f->tmp = tmp_name(path);
        CHECK_ALLOC(f->tmp);
        fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0) FAIL(PTQ_ERR_IO, "%s: cannot create %s: %s", path, f->tmp, strerror(errno));
        track(f->tmp, 1);
    } else if (fd < 0) {
        FAIL(PTQ_ERR_IO, "%s: cannot create a file in %s: %s", path, dir, strerror(errno));
    }
    f->fp = fdopen(fd, "wb");
    if (!f->fp) FAIL(PTQ_ERR_IO, "%s: %s", path, strerror(errno));
    if (!f->tmp) f->fd = dup(fd); /* the unnamed file outlives f->fp until it is linked */
    if (!f->tmp && f->fd < 0) FAIL(PTQ_ERR_IO, "%s: %s", path, strerror(errno));
    fd = -1;
done:
    free(dir);
    if (st != PTQ_OK) {
        if (f->fp) fclose(f->fp);
        else if (fd >= 0) close(fd);
        f->fp = NULL;
        io_atomic_abort(f);
    }
    return st;
}

void io_atomic_abort(io_atomic_file *f)
{
    if (!f) return;
    if (f->fp) fclose(f->fp);
    out_entry e = {f->path, f->tmp, f->fd};
    if (f->path || f->tmp || f->fd >= 0) entry_drop(&e);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

ptq_status io_atomic_commit(io_atomic_file *f)
{
    ptq_status st = PTQ_OK;
    io_outset *one = NULL;
    int err = 0;
    if (ferror(f->fp)) err = errno ? errno : EIO;
    if (!err && fflush(f->fp) != 0) err = errno;
    if (!err && fsync(fileno(f->fp)) != 0 && errno != EINVAL) err = errno;
    if (fclose(f->fp) != 0 && !err) err = errno;
    f->fp = NULL;
    if (err) FAIL(PTQ_ERR_IO, "%s: write failed: %s", f->path, strerror(err));
    io_outset *set = current;
    if (!set) { /* outside a set: a set of one, committed now */
        one = calloc(1, sizeof *one);
        CHECK_ALLOC(one);
        set = one;
    }
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 8;
        out_entry *e = realloc(set->e, (size_t)cap * sizeof *e);
        CHECK_ALLOC(e);
        set->e = e;
        set->cap = cap;
    }
    set->e[set->n++] = (out_entry){f->path, f->tmp, f->fd};
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (set->n > MAX_UNNAMED && set->e[set->n - 1].fd >= 0) TRY(name_entry(&set->e[set->n - 1]));
    if (one) TRY(io_outset_commit(one, NULL));
done:
    if (st != PTQ_OK) io_atomic_abort(f);
    io_outset_free(one);
    return st;
}

ptq_status io_write_atomic(const char *path, const void *data, size_t len)
{
    ptq_status st = PTQ_OK;
    io_atomic_file f;
    TRY(io_atomic_open(&f, path));
    if (len && fwrite(data, 1, len, f.fp) != len) {
        int err = errno ? errno : EIO;
        io_atomic_abort(&f);
        FAIL(PTQ_ERR_IO, "%s: write failed: %s", path, strerror(err));
    }
    TRY(io_atomic_commit(&f));
done:
    return st;
}

ptq_status io_outset_begin(io_outset **set, void (*note)(const char *msg))
{
    *set = calloc(1, sizeof **set);
    if (!*set) {
        ptq_error("out of memory allocating the set of output files");
        return PTQ_ERR_NOMEM;
    }
    (*set)->note = note;
    (*set)->command = 1;
    current = *set;
    commit_state = 0;
    return PTQ_OK;
}

io_outset *io_outset_current(void)
{
    return current;
}

int io_outset_pending(const io_outset *set)
{
    return set ? set->begun : 0;
}

void io_outset_free(io_outset *set)
{
    if (!set) return;
    for (int i = 0; i < set->n; i++) entry_drop(&set->e[i]);
    if (current == set) current = NULL;
    free(set->e);
    free(set);
}

typedef struct {
    int fd;
    dev_t dev;
    ino_t ino;
    char *name;
} locked_dir;

static int cmp_dir(const void *a, const void *b)
{
    const locked_dir *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Renames every named file of the set to ".<name>.ptq-new.<pid>" and writes the journal beside the
 * last output of order (the primary); *journal its path. Called with the folders locked. */
static ptq_status write_journal(io_outset *set, const int *order, char **journal)
{
    ptq_status st = PTQ_OK;
    long pid = (long)getpid();
    char *jtmp = NULL, *text = NULL;
    size_t len = 0, cap = 64;
    int fd = -1, n = set->n;
    text = malloc(cap);
    CHECK_ALLOC(text);
    len = (size_t)snprintf(text, cap, "ptq-commit\n");
    for (int k = 0; k < n; k++) {
        out_entry *e = &set->e[order[k]];
        char *nn = side_name(e->path, NEW_TAG, pid);
        if (!nn) FAIL(PTQ_ERR_NOMEM, "%s: out of memory naming its temporary file; no output written (the previous files are unchanged)", e->path);
        if (rename(e->tmp, nn) != 0) {
            int err = errno;
            free(nn);
            FAIL(PTQ_ERR_IO, "%s: cannot rename %s: %s; no output written (the previous files are unchanged)", e->path, e->tmp,
                 strerror(err));
        }
        track(e->tmp, 0);
        free(e->tmp);
        e->tmp = nn;
        track(e->tmp, 1);
        char *a = absolute(e->tmp), *b = absolute(e->path);
        size_t need = len + (a ? strlen(a) : 0) + (b ? strlen(b) : 0) + 8;
        if (a && b && need > cap) {
            char *t = realloc(text, need * 2);
            if (t) text = t, cap = need * 2;
        }
        if (!a || !b || need > cap) {
            free(a);
            free(b);
            FAIL(PTQ_ERR_NOMEM, "%s: out of memory writing the commit journal; no output written (the previous files are unchanged)",
                 e->path);
        }
        len += (size_t)snprintf(text + len, cap - len, "%s\t%s\n", a, b);
        free(a);
        free(b);
    }
    if (len + 5 > cap) {
        char *t = realloc(text, len + 5);
        if (!t) FAIL(PTQ_ERR_NOMEM, "out of memory writing the commit journal; no output written (the previous files are unchanged)");
        text = t;
    }
    memcpy(text + len, "end\n", 5);
    len += 4;
    const char *last = set->e[order[n - 1]].path;
    *journal = side_name(last, JOURNAL_TAG, pid);
    jtmp = side_name(last, JTMP_TAG, pid);
    if (!*journal || !jtmp)
        FAIL(PTQ_ERR_NOMEM, "%s: out of memory naming the commit journal; no output written (the previous files are unchanged)", last);
    fd = open(jtmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) != 0 || rename(jtmp, *journal) != 0) {
        int err = errno;
        unlink(jtmp);
        FAIL(PTQ_ERR_IO, "%s: cannot write the commit journal %s: %s; no output written (the previous files are unchanged)", last,
             *journal, strerror(err));
    }
done:
    if (fd >= 0) close(fd);
    if (st != PTQ_OK) {
        free(*journal);
        *journal = NULL;
    }
    free(jtmp);
    free(text);
    return st;
}

ptq_status io_outset_commit(io_outset *set, const char *primary)
{
    ptq_status st = PTQ_OK;
    locked_dir *dirs = NULL;
    int n_dirs = 0, n = set->n, *order = NULL, renamed = 0, blocked = 0;
    sigset_t block, old;
    int state_before = commit_state;
    const char *pause = getenv("PTQ_COMMIT_PAUSE_MS"), *kill_env = getenv("PTQ_TEST_KILL_AFTER_RENAME");
    long pause_ms = pause ? strtol(pause, NULL, 10) : 0;
    int kill_after = kill_env && !strcmp(kill_env, "1");
    char *journal = NULL;
    if (!n) return PTQ_OK;
    dirs = calloc((size_t)n, sizeof *dirs);
    order = malloc((size_t)n * sizeof *order);
    CHECK_ALLOC(dirs);
    CHECK_ALLOC(order);
    /* the order of the renames: as written, the primary output last */
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!primary || strcmp(set->e[i].path, primary)) order[k++] = i;
    for (int i = 0; i < n; i++)
        if (primary && !strcmp(set->e[i].path, primary)) order[k++] = i;
    /* checks that need no lock: a folder in the way fails before anything is renamed */
    for (int i = 0; i < n; i++) {
        struct stat sb;
        if (lstat(set->e[i].path, &sb) == 0 && S_ISDIR(sb.st_mode))
            FAIL(PTQ_ERR_IO, "%s: is a folder; no output written (the previous files are unchanged)", set->e[i].path);
    }
    /* each folder locked once, in (device, inode) order so two sets never wait on each other */
    for (int i = 0; i < n; i++) {
        char *name = dir_of(set->e[i].path);
        CHECK_ALLOC(name);
        int fd = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 && errno == EACCES) { /* a folder one may write but not read: renamed into unlocked */
            free(name);
            continue;
        }
        if (fd < 0 || fstat(fd, &sb) != 0) {
            int err = errno;
            if (fd >= 0) close(fd);
            free(name);
            FAIL(PTQ_ERR_IO, "%s: cannot open its folder: %s; no output written (the previous files are unchanged)",
                 set->e[i].path, strerror(err));
        }
        int dup_dir = 0;
        for (int j = 0; j < n_dirs; j++) dup_dir |= dirs[j].dev == sb.st_dev && dirs[j].ino == sb.st_ino;
        if (dup_dir) {
            close(fd);
            free(name);
            continue;
        }
        dirs[n_dirs++] = (locked_dir){fd, sb.st_dev, sb.st_ino, name};
    }
    qsort(dirs, (size_t)n_dirs, sizeof *dirs, cmp_dir);
    for (int j = 0; j < n_dirs; j++) {
        if (flock(dirs[j].fd, LOCK_EX | LOCK_NB) == 0) continue;
        if (errno == EWOULDBLOCK && set->note) {
            char msg[4200];
            snprintf(msg, sizeof msg, "waiting for another ptq writing into %s", dirs[j].name);
            set->note(msg);
        }
        while (flock(dirs[j].fd, LOCK_EX) != 0)
            if (errno != EINTR) break; /* a file system without locks: the set is still renamed as one */
    }
    /* no signal between the first and the last rename: SIGINT/TERM/HUP wait until the set is in place */
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    blocked = 1;
    commit_state = 1;
    for (int j = 0; j < n_dirs; j++) remove_stale(dirs[j].name, set->note);
    /* every file named first: a failure here leaves the previous set */
    for (int i = 0; i < n; i++) {
        out_entry *e = &set->e[i];
        if (e->fd >= 0) TRY(name_entry(e));
    }
    if (n > 1) TRY(write_journal(set, order, &journal));
    for (k = 0; k < n; k++) {
        out_entry *e = &set->e[order[k]];
        if (rename(e->tmp, e->path) != 0) {
            int err = errno;
            char done_list[2048] = "";
            size_t len = 0;
            for (int j = 0; j < renamed && len < sizeof done_list - 1; j++)
                len += (size_t)snprintf(done_list + len, sizeof done_list - len, "%s%s", j ? ", " : "", set->e[order[j]].path);
            if (renamed)
                FAIL(PTQ_ERR_IO, "%s: cannot rename %s onto it: %s; written: %s; not written: the rest (their previous files kept)",
                     e->path, e->tmp, strerror(err), done_list);
            FAIL(PTQ_ERR_IO, "%s: cannot rename %s onto it: %s; no output written (the previous files are unchanged)", e->path,
                 e->tmp, strerror(err));
        }
        track(e->tmp, 0);
        free(e->tmp);
        e->tmp = NULL;
        renamed++;
        if (kill_after && renamed == 1 && n > 1) raise(SIGKILL); /* a test hook (tests/e2e/outputs.sh): a mixed set on disk */
        if (pause_ms > 0 && renamed < n) { /* a test hook (tests/e2e/outputs.sh): signals sent between renames */
            struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        }
    }
    if (journal) unlink(journal); /* the set is in place */
    for (int j = 0; j < n_dirs; j++) fsync(dirs[j].fd); /* the renames durable */
done:
    if (journal) {
        unlink(journal); /* a failed rename: its message says what stands */
        free(journal);
    }
    if (blocked) {
        if (st != PTQ_OK) {
            for (int i = 0; i < n; i++) entry_drop(&set->e[i]);
            set->n = 0;
        }
        commit_state = st == PTQ_OK && set->command ? 2 : set->command ? 0 : state_before;
        pthread_sigmask(SIG_SETMASK, &old, NULL); /* a signal that came meanwhile is delivered now */
        int sig = pending_sig; /* or, if another thread's handler kept it, raised again */
        pending_sig = 0;
        if (sig) raise(sig);
    }
    for (int j = 0; j < n_dirs; j++) {
        close(dirs[j].fd); /* and its lock */
        free(dirs[j].name);
    }
    if (st == PTQ_OK) {
        for (int i = 0; i < n; i++) entry_drop(&set->e[i]);
        set->n = 0;
        set->begun = 0;
    }
    free(dirs);
    free(order);
    return st;
}
