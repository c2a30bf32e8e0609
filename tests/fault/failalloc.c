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
 * may change between runs; run with one thread for a reproducible point. */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    const char *path = getenv("PTQ_FAIL_ALLOC_REPORT");
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "%lu %d\n", __atomic_load_n(&counter, __ATOMIC_RELAXED), __atomic_load_n(&injected, __ATOMIC_RELAXED));
    fclose(f);
}

/* 1 when this call (made from caller) is the one to fail. */
static int should_fail(const void *caller)
{
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) return 0;
    uintptr_t a = (uintptr_t)caller;
    int ours = 0;
    for (int i = 0; i < n_ranges && !ours; i++) ours = a >= ranges[i].lo && a < ranges[i].hi;
    if (!ours) return 0;
    unsigned long k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    if (fail_at == 0 || k != fail_at) return 0;
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
