/* failalloc.c: an LD_PRELOAD shim that fails one allocation of ptq's own code (tests/e2e/faults.sh).
 *
 *   LD_PRELOAD=build/fault/failalloc.so PTQ_FAIL_ALLOC=N PTQ_FAIL_ALLOC_REPORT=file ptq quantize ...
 *
 * Counts the calls of malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign, strdup
 * and strndup whose caller is in the main executable (ptq's code; allocations made inside libc,
 * libgomp, libjpeg... are not counted: only their callers' own error paths are under test). The
 * N-th counted call (from 1) returns NULL with errno ENOMEM; every other call is the C library's.
 * PTQ_FAIL_ALLOC=0 or unset fails nothing (counting only). PTQ_FAIL_ALLOC_LIBS=a,b also counts the
 * calls made from shared objects whose path contains one of the comma-separated parts (e.g.
 * libyaml). At exit, PTQ_FAIL_ALLOC_REPORT (a file) receives "<counted> <1 if it failed one>".
 * PTQ_FAIL_ALLOC_BACKTRACE=1 prints the failing call's stack on stderr (for debugging a point).
 * The counter is atomic: with several threads the order of their calls, so which call is N-th,
 * may change between runs; run with one thread for a reproducible point.
 *
 * The fork server (PTQ_FAIL_ALLOC=fork, PTQ_FAIL_ALLOC_DIR=folder): one run tries every failure
 * point. At each counted call (or each PTQ_FAIL_ALLOC_STEP-th, from 1) the process flushes its
 * streams and forks; the CHILD fails that call and runs on to its end in a folder of its own,
 * DIR/<N>: a copy of the current folder's files as they are at that moment (the outputs, old or
 * being committed), its stdout/stderr in DIR/<N>/.stdout and .stderr, every open file made its
 * own (files being written in the current folder copied, files read reopened at the same offset,
 * so the child never moves the parent's offsets nor writes into the parent's files). Outputs must
 * be given as relative paths and inputs as absolute ones. The PARENT goes on as if nothing failed
 * (its run is the reference) once the child has made its copies; PTQ_FAIL_ALLOC_JOBS children
 * (default 2) run beside it. When a child ends the parent appends one line to DIR/points.log and
 * removes DIR/<N> (kept when the child died of a signal or exited with a status other than 0 and
 * 1); the last children are waited for at the parent's exit.
 *   P <tab> N <tab> status (exit code, or -signal) <tab> lines saying "out of memory" <tab>
 *     1 if stderr shows heap damage (glibc's or a sanitizer's) <tab> the last line of stderr <tab>
 *     name:size:fnv1a64 of every file the child left (.stdout included, .stderr not), ','-separated
 *   T <tab> N <tab> the other threads' names: a point where another thread stayed alive (fork
 *     keeps only the calling thread: the child could wait for ever on a decoding worker; the main
 *     thread first waits up to 2 s for running threads to end), or the call of another thread:
 *     to be tried by a run of its own
 * A child still running after PTQ_FAIL_ALLOC_TIMEOUT seconds (default 120) gets SIGALRM. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);

#define MAX_RANGES 64
static struct {
    uintptr_t lo, hi;
} ranges[MAX_RANGES];
static int n_ranges, ready;
static unsigned long fail_at;
static unsigned long counter;
static int injected, trace;
static int fork_mode, in_child;
static unsigned long fork_step = 1;
static unsigned timeout_s = 120;
#define MAX_JOBS 16
static struct {
    pid_t pid;
    unsigned long k;
} running_kids[MAX_JOBS];
static int n_running, max_jobs = 2;
static void reap_oldest(void);
static char pts_dir[1024];
static int log_fd = -1;

static int add_object(struct dl_phdr_info *info, size_t size, void *user)
{
    (void)size;
    const char *libs = user;
    int want = info->dlpi_name == NULL || info->dlpi_name[0] == 0; /* the main program */
    if (!want && libs && *libs) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", libs);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !want; tok = strtok_r(NULL, ",", &save))
            want = strstr(info->dlpi_name, tok) != NULL;
    }
    if (!want) return 0;
    for (int i = 0; i < info->dlpi_phnum && n_ranges < MAX_RANGES; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD || !(p->p_flags & PF_X)) continue;
        ranges[n_ranges].lo = info->dlpi_addr + p->p_vaddr;
        ranges[n_ranges].hi = info->dlpi_addr + p->p_vaddr + p->p_memsz;
        n_ranges++;
    }
    return 0;
}

__attribute__((constructor)) static void failalloc_init(void)
{
    const char *n = getenv("PTQ_FAIL_ALLOC");
    fail_at = n ? strtoul(n, NULL, 10) : 0;
    if (n && !strcmp(n, "fork")) {
        const char *d = getenv("PTQ_FAIL_ALLOC_DIR"), *step = getenv("PTQ_FAIL_ALLOC_STEP"), *t = getenv("PTQ_FAIL_ALLOC_TIMEOUT");
        if (!d || !*d) {
            fputs("failalloc: PTQ_FAIL_ALLOC=fork needs PTQ_FAIL_ALLOC_DIR\n", stderr);
            _exit(2);
        }
        snprintf(pts_dir, sizeof pts_dir, "%s", d);
        mkdir(pts_dir, 0777);
        char log[1100];
        snprintf(log, sizeof log, "%s/points.log", pts_dir);
        log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
        if (log_fd < 0) {
            perror(log);
            _exit(2);
        }
        if (step && strtoul(step, NULL, 10) > 0) fork_step = strtoul(step, NULL, 10);
        if (t && strtoul(t, NULL, 10) > 0) timeout_s = (unsigned)strtoul(t, NULL, 10);
        const char *jobs = getenv("PTQ_FAIL_ALLOC_JOBS");
        if (jobs && atoi(jobs) > 0) max_jobs = atoi(jobs) < MAX_JOBS ? atoi(jobs) : MAX_JOBS;
        fork_mode = 1;
    }
    trace = getenv("PTQ_FAIL_ALLOC_BACKTRACE") != NULL;
    if (trace) { /* the first backtrace() loads libgcc: not at the failure */
        void *pcs[2];
        backtrace(pcs, 2);
    }
    dl_iterate_phdr(add_object, (void *)getenv("PTQ_FAIL_ALLOC_LIBS"));
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

__attribute__((destructor)) static void failalloc_report(void)
{
    if (in_child) return;
    while (n_running > 0) reap_oldest();
    const char *path = getenv("PTQ_FAIL_ALLOC_REPORT");
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "%lu %d\n", __atomic_load_n(&counter, __ATOMIC_RELAXED), __atomic_load_n(&injected, __ATOMIC_RELAXED));
    fclose(f);
}


/* ---- the fork server ---- */

static uint64_t fnv_update(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int copy_fd(int from, int to)
{
    char buf[65536];
    ssize_t r;
    off_t at = 0;
    while ((r = pread(from, buf, sizeof buf, at)) > 0) {
        if (write(to, buf, (size_t)r) != r) return -1;
        at += r;
    }
    return r < 0 ? -1 : 0;
}

/* The number of other threads of the process and how many of them run (state R or D: not waiting
 * on the main thread); names (when not NULL) gets the other threads' names. */
static int threads_alive(int *running, char *names, size_t cap)
{
    DIR *d = opendir("/proc/self/task");
    *running = 0;
    if (!d) return 1;
    int n = 0;
    size_t len = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || atol(de->d_name) == (long)getpid()) continue;
        n++;
        char path[300], stat[512] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t r = fd >= 0 ? read(fd, stat, sizeof stat - 1) : 0;
        if (fd >= 0) close(fd);
        stat[r > 0 ? r : 0] = 0;
        char *open_p = strchr(stat, '('), *close_p = strrchr(stat, ')'); /* "tid (comm) S ..." */
        if (close_p && (close_p[2] == 'R' || close_p[2] == 'D')) (*running)++;
        if (names && open_p && close_p > open_p && len + (size_t)(close_p - open_p) + 2 < cap)
            len += (size_t)snprintf(names + len, cap - len, "%s%.*s", len ? "," : "", (int)(close_p - open_p - 1), open_p + 1);
    }
    closedir(d);
    return n;
}

/* The child's own copy of the current folder and of every open regular file (see the header). */
static void child_setup(const char *dir)
{
    char cwd[4096], path[8192], target[4096];
    if (!getcwd(cwd, sizeof cwd)) _exit(98);
    size_t cwd_len = strlen(cwd);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) _exit(98);
    DIR *d = opendir(".");
    if (!d) _exit(98);
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
        int in = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, sb.st_mode & 07777);
        if (in < 0 || out < 0 || copy_fd(in, out) != 0) _exit(98);
        close(in);
        close(out);
    }
    closedir(d);
    /* open files: collect first (reopening changes /proc/self/fd while it is read) */
    int fds[1024], n_fds = 0;
    d = opendir("/proc/self/fd");
    if (!d) _exit(98);
    while ((de = readdir(d)) && n_fds < 1024) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] == '.' || fd <= 2 || fd == dirfd(d) || fd == log_fd) continue;
        fds[n_fds++] = fd;
    }
    closedir(d);
    struct copied {
        dev_t dev;
        ino_t ino;
        int fd;
    } written[1024];
    int n_written = 0;
    for (int i = 0; i < n_fds; i++) {
        int fd = fds[i];
        struct stat sb;
        if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        int flags = fcntl(fd, F_GETFL), fdflags = fcntl(fd, F_GETFD);
        off_t off = lseek(fd, 0, SEEK_CUR);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(path, target, sizeof target - 1);
        target[len > 0 ? len : 0] = 0;
        int mine = -1;
        if ((flags & O_ACCMODE) == O_RDONLY) {
            mine = open(path, flags & ~(O_CREAT | O_TRUNC | O_EXCL));
        } else if (!strncmp(target, cwd, cwd_len) && target[cwd_len] == '/' && !strchr(target + cwd_len + 1, '/')) {
            int shared = -1;
            for (int j = 0; j < n_written; j++)
                if (written[j].dev == sb.st_dev && written[j].ino == sb.st_ino) shared = written[j].fd;
            if (shared >= 0) {
                mine = dup(shared);
            } else {
                char *del = strstr(target, " (deleted)");
                if (del) { /* an unnamed (O_TMPFILE) file of the folder: an unnamed copy in the child's */
                    mine = open(dir, O_TMPFILE | O_RDWR, 0666);
                    int in = open(path, O_RDONLY);
                    if (mine < 0 || in < 0 || copy_fd(in, mine) != 0) _exit(98);
                    close(in);
                } else { /* a named file of the folder: its copy made above */
                    snprintf(path, sizeof path, "%s/%s", dir, target + cwd_len + 1);
                    mine = open(path, (flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_APPEND)) | O_RDWR);
                }
                if (mine >= 0 && n_written < 1024) written[n_written++] = (struct copied){sb.st_dev, sb.st_ino, mine};
            }
        } else {
            continue; /* written elsewhere (not an output of this run): left shared */
        }
        if (mine < 0) _exit(98);
        if (off >= 0) lseek(mine, off, SEEK_SET);
        if (dup2(mine, fd) < 0) _exit(98);
        fcntl(fd, F_SETFD, fdflags);
        int kept = 0;
        for (int j = 0; j < n_written; j++) kept |= written[j].fd == mine;
        if (!kept) close(mine);
    }
    /* the copies' own descriptors stay open (harmless); the process's own view is the old fds */
    snprintf(path, sizeof path, "%s/.stdout", dir);
    int o = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    snprintf(path, sizeof path, "%s/.stderr", dir);
    int e = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(98);
    close(o);
    close(e);
    if (chdir(dir) != 0) _exit(98);
    alarm(timeout_s);
}

static void append(char *line, size_t cap, size_t *len, const char *s, size_t n)
{
    for (size_t i = 0; i < n && *len + 1 < cap; i++) line[(*len)++] = s[i] == '\t' || s[i] == '\n' ? ' ' : s[i];
    line[*len] = 0;
}

/* The parent's record of child N (status: exit code or -signal), then its folder removed. */
static void record(unsigned long k, const char *dir, int status)
{
    static char line[65536];
    char path[2048], buf[65536], last[1024] = "", cur[1024];
    size_t len = 0, cur_n = 0;
    int n_oom = 0, heap = 0;
    snprintf(path, sizeof path, "%s/.stderr", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t r;
    while (fd >= 0 && (r = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] != '\n' && cur_n + 1 < sizeof cur) {
                cur[cur_n++] = buf[i];
                continue;
            }
            if (buf[i] != '\n') continue;
            cur[cur_n] = 0;
            if (strstr(cur, "out of memory")) n_oom++;
            if (strstr(cur, "free()") || strstr(cur, "corrupted") || strstr(cur, "double free") || strstr(cur, "malloc()") ||
                strstr(cur, "AddressSanitizer") || strstr(cur, "runtime error"))
                heap = 1;
            if (cur_n) memcpy(last, cur, cur_n + 1);
            cur_n = 0;
        }
    }
    if (cur_n) { /* an unterminated last line */
        cur[cur_n] = 0;
        if (strstr(cur, "out of memory")) n_oom++;
        memcpy(last, cur, cur_n + 1);
    }
    if (fd >= 0) close(fd);
    len = (size_t)snprintf(line, sizeof line, "P\t%lu\t%d\t%d\t%d\t", k, status, n_oom, heap);
    append(line, sizeof line, &len, last, strlen(last));
    if (len + 1 < sizeof line) line[len++] = '\t';
    DIR *d = opendir(dir);
    struct dirent *de;
    int first = 1;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, ".stderr")) continue;
        uint64_t h = 1469598103934665603ull;
        long long size = 0;
        int in = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);
        while (in >= 0 && (r = read(in, buf, sizeof buf)) > 0) {
            h = fnv_update(h, (const unsigned char *)buf, (size_t)r);
            size += r;
        }
        if (in >= 0) close(in);
        char item[512];
        int m = snprintf(item, sizeof item, "%s%s:%lld:%016llx", first ? "" : ",", de->d_name, size, (unsigned long long)h);
        append(line, sizeof line, &len, item, (size_t)m);
        first = 0;
    }
    if (d) closedir(d);
    line[len < sizeof line - 1 ? len++ : len - 1] = '\n';
    if (write(log_fd, line, len) != (ssize_t)len) {}
    if (status != 0 && status != 1) return; /* kept for a look */
    d = opendir(dir);
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) unlinkat(dirfd(d), de->d_name, 0);
    if (d) closedir(d);
    rmdir(dir);
}

/* Waits for the oldest child still running and records it. */
static void reap_oldest(void)
{
    int status = 0, code, saved = errno;
    char dir[1100];
    pid_t pid = running_kids[0].pid;
    unsigned long k = running_kids[0].k;
    memmove(running_kids, running_kids + 1, (size_t)--n_running * sizeof running_kids[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -999;
    snprintf(dir, sizeof dir, "%s/%lu", pts_dir, k);
    record(k, dir, code);
    errno = saved;
}

/* Fork mode, call k: 1 in the child (the call fails), 0 in the parent once the child has made its
 * copies (it runs on beside the parent: PTQ_FAIL_ALLOC_JOBS children at most, default 2; each is
 * recorded when it ends, the last ones at exit). Only the main thread forks, once the other
 * threads are gone: while one runs (a decoding worker) it waits for it (up to 2 s); a point where
 * another thread stays (waiting on the main thread, or the call is another thread's) is deferred
 * (a T line). */
static int fork_point(unsigned long k)
{
    if ((k - 1) % fork_step) return 0;
    int running = 0, others = 0;
    char names[256] = "";
    int main_thread = (long)syscall(SYS_gettid) == (long)getpid();
    for (int waited = 0; main_thread && (others = threads_alive(&running, NULL, 0)) > 0 && running > 0 && waited < 2000; waited++)
        usleep(1000);
    if (!main_thread || others > 0) {
        threads_alive(&running, names, sizeof names);
        char line[400];
        int m = snprintf(line, sizeof line, "T\t%lu\t%s\n", k, names);
        if (write(log_fd, line, (size_t)m) != m) {}
        return 0;
    }
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/%lu", pts_dir, k);
    int saved = errno, sync_fd[2];
    while (n_running >= max_jobs) reap_oldest();
    fflush(NULL);
    if (pipe2(sync_fd, O_CLOEXEC) != 0) sync_fd[0] = sync_fd[1] = -1;
    pid_t pid = fork();
    if (pid == 0) {
        in_child = 1;
        n_running = 0;
        if (sync_fd[0] >= 0) close(sync_fd[0]);
        child_setup(dir);
        if (sync_fd[1] >= 0) { /* the parent may go on: the copies are made */
            if (write(sync_fd[1], "x", 1) != 1) {}
            close(sync_fd[1]);
        }
        return 1;
    }
    if (sync_fd[1] >= 0) close(sync_fd[1]);
    if (pid < 0) {
        record(k, dir, -1000); /* fork failed */
    } else {
        char c;
        while (sync_fd[0] >= 0 && read(sync_fd[0], &c, 1) < 0 && errno == EINTR) {} /* 0 bytes: it ended first */
        running_kids[n_running].pid = pid;
        running_kids[n_running++].k = k;
    }
    if (sync_fd[0] >= 0) close(sync_fd[0]);
    errno = saved;
    return 0;
}

/* 1 when this call (made from caller) is the one to fail. */
static int should_fail(const void *caller)
{
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) return 0;
    uintptr_t a = (uintptr_t)caller;
    int ours = 0;
    for (int i = 0; i < n_ranges && !ours; i++) ours = a >= ranges[i].lo && a < ranges[i].hi;
    if (!ours) return 0;
    if (in_child) return 0;
    unsigned long k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    if (fork_mode) {
        if (!fork_point(k)) return 0;
    } else if (fail_at == 0 || k != fail_at) {
        return 0;
    }
    __atomic_store_n(&injected, 1, __ATOMIC_RELAXED);
    if (trace) {
        void *pcs[32];
        backtrace_symbols_fd(pcs, backtrace(pcs, 32), 2);
    }
    errno = ENOMEM;
    return 1;
}

#define CALLER __builtin_extract_return_addr(__builtin_return_address(0))

void *malloc(size_t n)
{
    return should_fail(CALLER) ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    return should_fail(CALLER) ? NULL : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    return should_fail(CALLER) ? NULL : __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (should_fail(CALLER)) return ENOMEM;
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    return should_fail(CALLER) ? NULL : __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
    return should_fail(CALLER) ? NULL : __libc_memalign(align, n);
}

char *strdup(const char *s)
{
    if (should_fail(CALLER)) return NULL;
    size_t n = strlen(s) + 1;
    char *d = __libc_malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

char *strndup(const char *s, size_t cap)
{
    if (should_fail(CALLER)) return NULL;
    size_t n = strnlen(s, cap);
    char *d = __libc_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}
