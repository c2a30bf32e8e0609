/* dataset.c: file listing, then a producer thread that decodes and preprocesses
 * batches into a ring of (prefetch + 1) slots; the consumer takes them in order.
 * Within a batch, images decode in parallel (OpenMP) into fixed places, so the
 * result does not depend on the thread count. */
#include "dataset.h"

#include <dirent.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/file.h"
#include "io/image.h"
#include "runtime/graph.h"

typedef struct {
    float *data;
    pp_meta *meta;
    const char **paths;
    int n;
    int ready; /* filled by the producer, not yet released by the consumer */
} slot;

struct pp_dataset {
    pp_dataset_options o;
    pp_config cfg;
    char **files;
    int n_files;
    size_t floats;  /* per image */
    slot *slots;
    int n_slots;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, finished;   /* consumer asks to stop; producer has published its last batch */
    ptq_status error;     /* producer's failure (strict), with its message */
    char error_msg[1024];
    int produced, taken, holding; /* batches published, batches handed out, a batch is out */
    int consumed;                 /* images handed out */
    int used, skipped;    /* written by the producer under mu */
    uint64_t hash;
    double t0;
};

pp_dataset_options pp_dataset_defaults(void)
{
    pp_dataset_options o;
    memset(&o, 0, sizeof o);
    o.exif = 1;
    o.batch = 1;
    o.prefetch = 2;
    return o;
}

static int has_image_extension(const char *p)
{
    static const char *const ext[] = {".jpg", ".jpeg", ".jpe", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp"};
    size_t n = strlen(p);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t m = strlen(ext[i]);
        if (n > m && strcasecmp(p + n - m, ext[i]) == 0) return 1;
    }
    return 0;
}

static int sniffs_as_image(const char *p)
{
    uint8_t b[8];
    FILE *fp = fopen(p, "rb");
    if (!fp) return 0;
    size_t n = fread(b, 1, sizeof b, fp);
    fclose(fp);
    return io_image_sniff(b, n) != IO_IMAGE_UNKNOWN;
}

typedef struct {
    char **v;
    int n, cap;
} strvec;

static ptq_status push(strvec *s, const char *p)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 256;
        char **nv = realloc(s->v, sizeof(char *) * (size_t)cap);
        if (!nv) {
            ptq_error("out of memory listing images");
            return PTQ_ERR_NOMEM;
        }
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n] = ptq_strdup(p);
    if (!s->v[s->n]) {
        ptq_error("out of memory listing images");
        return PTQ_ERR_NOMEM;
    }
    s->n++;
    return PTQ_OK;
}

static ptq_status walk(const char *dir, strvec *out, int depth)
{
    ptq_status st = PTQ_OK;
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) FAIL(PTQ_ERR_IO, "%s: %s", dir, strerror(errno));
    if (depth > 64) FAIL(PTQ_ERR_ARG, "%s: folders nested too deep", dir);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[8200];
        struct stat sb;
        snprintf(path, sizeof path, "%.4095s/%.255s", dir, e->d_name);
        if (stat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) TRY(walk(path, out, depth + 1));
        else if (S_ISREG(sb.st_mode) && (has_image_extension(path) || sniffs_as_image(path))) TRY(push(out, path));
    }
done:
    if (d) closedir(d);
    return st;
}

static ptq_status read_list(const char *list, strvec *out)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len;
    char base[4096];
    const char *slash = strrchr(list, '/');
    snprintf(base, sizeof base, "%.*s", slash ? (int)(slash - list) : 1, slash ? list : ".");
    TRY(io_read_file(list, &buf, &len, (size_t)1 << 30));
    for (char *line = strtok((char *)buf, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        while (*line == ' ' || *line == '\t') line++;
        if (!*line || *line == '#') continue;
        char path[8200];
        if (line[0] == '/') snprintf(path, sizeof path, "%.4095s", line);
        else snprintf(path, sizeof path, "%.4095s/%.4095s", base, line);
        TRY(push(out, path));
    }
done:
    free(buf);
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- producer ---- */

static void *producer(void *arg)
{
    pp_dataset *d = arg;
    int batch = d->o.batch, next = 0, nthreads = d->o.threads > 0 ? d->o.threads : omp_get_max_threads();
    float *tmp = malloc(sizeof(float) * d->floats * (size_t)batch);
    pp_meta *tmeta = malloc(sizeof(pp_meta) * (size_t)batch);
    ptq_status *tst = malloc(sizeof(ptq_status) * (size_t)batch);
    char (*tmsg)[512] = malloc(sizeof(*tmsg) * (size_t)batch);
    io_image_options io = io_image_defaults();
    io.apply_exif = d->o.exif;
    if (!tmp || !tmeta || !tst || !tmsg) {
        pthread_mutex_lock(&d->mu);
        d->error = PTQ_ERR_NOMEM;
        snprintf(d->error_msg, sizeof d->error_msg, "out of memory for a batch of %d images", batch);
        d->finished = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        goto out;
    }
    for (int b = 0;; b++) {
        slot *s = &d->slots[b % d->n_slots];
        pthread_mutex_lock(&d->mu);
        while (s->ready && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
        int stop = d->stop;
        pthread_mutex_unlock(&d->mu);
        if (stop) break;
        int n = 0, failed = 0;
        while (n < batch && next < d->n_files && !failed) {
            int room = batch - n, used_so_far;
            pthread_mutex_lock(&d->mu);
            used_so_far = d->used;
            pthread_mutex_unlock(&d->mu);
            if (d->o.limit > 0 && used_so_far + n >= d->o.limit) break;
            if (d->o.limit > 0 && room > d->o.limit - used_so_far - n) room = d->o.limit - used_so_far - n;
            int k = d->n_files - next < room ? d->n_files - next : room;
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 1)
            for (int i = 0; i < k; i++) {
                io_image img;
                tst[i] = io_image_load(d->files[next + i], &io, &img);
                if (tst[i] == PTQ_OK) {
                    tst[i] = pp_image_to_tensor(&img, &d->cfg, tmp + (size_t)i * d->floats, &tmeta[i]);
                    io_image_free(&img);
                }
                if (tst[i] != PTQ_OK) snprintf(tmsg[i], sizeof tmsg[i], "%s", ptq_last_error());
            }
            for (int i = 0; i < k; i++) {
                if (tst[i] != PTQ_OK) {
                    pthread_mutex_lock(&d->mu);
                    if (d->o.strict) {
                        d->error = tst[i];
                        snprintf(d->error_msg, sizeof d->error_msg, "%s", tmsg[i]);
                        failed = 1;
                    } else {
                        d->skipped++;
                        if (!d->o.quiet) fprintf(stderr, "%sptq: warning: skipped %s\n", isatty(STDERR_FILENO) ? "\n" : "", tmsg[i]);
                    }
                    pthread_mutex_unlock(&d->mu);
                    if (failed) break;
                    continue;
                }
                memcpy(s->data + (size_t)n * d->floats, tmp + (size_t)i * d->floats, sizeof(float) * d->floats);
                s->meta[n] = tmeta[i];
                s->paths[n] = d->files[next + i];
                n++;
            }
            next += k;
        }
        pthread_mutex_lock(&d->mu);
        s->n = failed ? 0 : n;
        s->ready = 1;
        d->used += s->n;
        d->produced++;
        if (n == 0 || failed) d->finished = 1;
        pthread_cond_broadcast(&d->cv);
        int done_all = d->finished;
        pthread_mutex_unlock(&d->mu);
        if (done_all) break;
    }
out:
    free(tmp);
    free(tmeta);
    free(tst);
    free(tmsg);
    return NULL;
}

ptq_status pp_dataset_open(const pp_dataset_options *o, const pp_config *c, pp_dataset **out)
{
    ptq_status st = PTQ_OK;
    pp_dataset *d = NULL;
    strvec files = {0};
    struct stat sb;
    *out = NULL;
    TRY(pp_validate(c));
    if (!o->images) FAIL(PTQ_ERR_ARG, "no image folder or list given");
    if (o->batch < 1 || o->batch > 4096) FAIL(PTQ_ERR_ARG, "batch %d out of range (1 to 4096)", o->batch);
    if (stat(o->images, &sb) != 0) FAIL(PTQ_ERR_IO, "%s: %s", o->images, strerror(errno));
    if (S_ISDIR(sb.st_mode)) TRY(walk(o->images, &files, 0));
    else TRY(read_list(o->images, &files));
    if (files.n == 0) FAIL(PTQ_ERR_ARG, "%s: no JPEG or PNG image found", o->images);
    qsort(files.v, (size_t)files.n, sizeof(char *), cmp_str);
    if (o->shuffle) {
        uint64_t s = o->seed;
        for (int i = files.n - 1; i > 0; i--) {
            int j = (int)(splitmix64(&s) % (uint64_t)(i + 1));
            char *t = files.v[i];
            files.v[i] = files.v[j];
            files.v[j] = t;
        }
    }
    d = calloc(1, sizeof *d);
    CHECK_ALLOC(d);
    d->o = *o;
    d->o.prefetch = o->prefetch < 1 ? 1 : (o->prefetch > 16 ? 16 : o->prefetch);
    d->cfg = *c;
    d->files = files.v;
    d->n_files = files.n;
    files.v = NULL;
    d->floats = pp_tensor_floats(c);
    d->n_slots = d->o.prefetch + 1;
    d->slots = calloc((size_t)d->n_slots, sizeof *d->slots);
    CHECK_ALLOC(d->slots);
    for (int i = 0; i < d->n_slots; i++) {
        d->slots[i].data = malloc(sizeof(float) * d->floats * (size_t)o->batch);
        d->slots[i].meta = malloc(sizeof(pp_meta) * (size_t)o->batch);
        d->slots[i].paths = malloc(sizeof(char *) * (size_t)o->batch);
        CHECK_ALLOC(d->slots[i].data);
        CHECK_ALLOC(d->slots[i].meta);
        CHECK_ALLOC(d->slots[i].paths);
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->hash = 1469598103934665603ull;
    d->t0 = now_s();
    if (pthread_create(&d->thread, NULL, producer, d) != 0) FAIL(PTQ_ERR_NOMEM, "cannot start the decoding thread");
    d->started = 1;
    *out = d;
    d = NULL;
done:
    for (int i = 0; i < files.n && files.v; i++) free(files.v[i]);
    free(files.v);
    pp_dataset_close(d);
    return st;
}

int pp_dataset_files(const pp_dataset *d)
{
    return d->n_files;
}

static void progress(pp_dataset *d)
{
    if (d->o.quiet || !isatty(STDERR_FILENO)) return;
    double t = now_s() - d->t0;
    int total = d->o.limit > 0 && d->o.limit < d->n_files ? d->o.limit : d->n_files;
    double rate = t > 0 ? d->consumed / t : 0;
    double eta = rate > 0 ? (total - d->consumed) / rate : 0;
    fprintf(stderr, "\r%d/%d images, %.1f images/s, ETA %.0f s   ", d->consumed, total, rate, eta > 0 ? eta : 0);
}

ptq_status pp_dataset_next(pp_dataset *d, const float **data, int *n, const pp_meta **meta, const char *const **paths)
{
    ptq_status st = PTQ_OK;
    *n = 0;
    pthread_mutex_lock(&d->mu);
    if (d->holding) { /* give the previous batch's slot back to the producer */
        d->slots[(d->taken - 1) % d->n_slots].ready = 0;
        d->holding = 0;
        pthread_cond_broadcast(&d->cv);
    }
    slot *s = &d->slots[d->taken % d->n_slots];
    while (!s->ready && d->error == PTQ_OK && !(d->finished && d->produced <= d->taken))
        pthread_cond_wait(&d->cv, &d->mu);
    if (d->error != PTQ_OK) {
        st = d->error;
        ptq_error("%s", d->error_msg);
    } else if (s->ready && s->n > 0) {
        *data = s->data;
        *n = s->n;
        if (meta) *meta = s->meta;
        if (paths) *paths = s->paths;
        d->taken++;
        d->holding = 1;
        d->consumed += s->n;
        for (int i = 0; i < s->n; i++) {
            for (const char *c = s->paths[i]; *c; c++) d->hash = (d->hash ^ (uint8_t)*c) * 1099511628211ull;
            d->hash = (d->hash ^ (uint8_t)'\n') * 1099511628211ull;
        }
    } else if (s->ready) {
        s->ready = 0; /* the empty end-of-data batch */
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    if (st == PTQ_OK) progress(d);
    if (st == PTQ_OK && *n == 0 && !d->o.quiet && isatty(STDERR_FILENO)) fprintf(stderr, "\n");
    return st;
}

void pp_dataset_counts(const pp_dataset *d, int *used, int *skipped)
{
    pthread_mutex_lock((pthread_mutex_t *)&d->mu);
    if (used) *used = d->consumed;
    if (skipped) *skipped = d->skipped;
    pthread_mutex_unlock((pthread_mutex_t *)&d->mu);
}

uint64_t pp_dataset_list_hash(const pp_dataset *d)
{
    return d->hash;
}

void pp_dataset_close(pp_dataset *d)
{
    if (!d) return;
    if (d->started) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
    }
    for (int i = 0; d->slots && i < d->n_slots; i++) {
        free(d->slots[i].data);
        free(d->slots[i].meta);
        free(d->slots[i].paths);
    }
    free(d->slots);
    for (int i = 0; i < d->n_files; i++) free(d->files[i]);
    free(d->files);
    free(d);
}
