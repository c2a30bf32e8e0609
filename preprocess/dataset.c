/* dataset.c: file listing, then a pool of worker threads that decode and preprocess
 * images ahead of the consumer, and the consumer that gathers them into batches.
 *
 * Image i of the (sorted or shuffled) list goes to cell i % n_cells of a ring of
 * prefetch * batch cells; workers claim images in list order, each into its own cell,
 * and at most n_cells images past the one the consumer waits for. pp_dataset_next takes
 * the cells in list order, skipping (or, with strict, stopping at) the images that
 * failed (out of memory stops it whatever strict says: no image is dropped for it), and
 * copies the good ones into the batch it hands out. So a batch holds the same images in
 * the same order, and warnings come in the same order, at any thread count; memory stays
 * at (prefetch + 1) batches whatever the folder size. With a --limit, an image is only
 * claimed while the images before it that did not fail are
 * fewer than the limit, so nothing past the limit is decoded (or warned about).
 *
 * With dims that follow the image (pp_dynamic), every image of a batch has the first one's
 * tensor shape: a batch ends early before an image of another shape, which starts the next
 * batch. The boundaries depend on the list and the shapes only, never on the threads. A
 * cell's buffer grows to the largest tensor it has held (at most pp_tensor_floats). */
#include "dataset.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
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

enum { CELL_FREE = 0, CELL_BUSY, CELL_DONE };

typedef struct {
    float *data;      /* one image's tensor */
    size_t cap;       /* floats data can hold */
    int w, h;         /* the tensor's width and height */
    pp_meta meta;
    ptq_status st;    /* the image's outcome; msg names the file when not PTQ_OK */
    char msg[512];
    int state;        /* CELL_*: claimed by a worker (BUSY), then handed to the consumer (DONE) */
} cell;

#define MAX_WORKERS 256

struct pp_dataset {
    pp_dataset_options o;
    pp_config cfg;
    char **files;
    int n_files;
    size_t floats;        /* per image */
    cell *cells;
    int n_cells;
    float *out;           /* the batch handed out: up to batch * floats */
    size_t out_cap;       /* floats out can hold */
    int out_w, out_h;     /* the shape of the batch handed out */
    pp_meta *out_meta;
    const char **out_paths;
    pthread_t workers[MAX_WORKERS];
    int n_workers;
    int sync;                /* mu and the condition variables are initialised */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* workers: a cell was freed, an image failed, or stop */
    pthread_cond_t done_cv;  /* consumer: a cell is done */
    int stop;                /* close: workers finish their image and leave */
    int claimed;             /* images claimed by workers (list order) */
    int failed_done;         /* claimed images that failed, as workers finish them */
    int taken;               /* images the consumer has taken out of the cells */
    ptq_status error;        /* strict: the first bad image (sticky), with its message */
    char error_msg[1024];
    int consumed;            /* images handed out */
    int skipped;             /* images the consumer passed over */
    uint64_t hash;
    uint64_t *ids;           /* pp_dataset_image_ids: one per image handed out */
    int ids_cap;
    double t0, shown;
};

pp_dataset_options pp_dataset_defaults(void)
{
    pp_dataset_options o;
    memset(&o, 0, sizeof o);
    o.exif = 1;
    o.batch = 1;
    o.prefetch = 1;
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
        size_t dl = strlen(dir);
        snprintf(path, sizeof path, "%.4095s%s%.255s", dir, dl && dir[dl - 1] == '/' ? "" : "/", e->d_name);
        if (stat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) TRY(walk(path, out, depth + 1));
        else if (S_ISREG(sb.st_mode) && (has_image_extension(path) || sniffs_as_image(path))) TRY(push(out, path));
    }
done:
    if (d) closedir(d);
    return st;
}

/* The images a list file names, one per line (relative to the list's folder; blank lines and
 * '#' comments skipped), or the file itself when it is an image. */
static ptq_status read_list(const char *list, strvec *out)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len;
    char base[4096];
    const char *slash = strrchr(list, '/');
    struct stat sb;
    if (stat(list, &sb) == 0 && !S_ISREG(sb.st_mode)) slash = NULL; /* a pipe: relative to the current directory */
    else if (sniffs_as_image(list)) return push(out, list);        /* one image file, not a list of them */
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

/* ---- workers ---- */

/* Whether a worker may claim the next image (called with mu held). */
static int can_claim(const pp_dataset *d)
{
    if (d->claimed >= d->n_files || d->claimed >= d->taken + d->n_cells || d->error != PTQ_OK) return 0;
    /* images claimed so far that did not fail (or are still being decoded) */
    return d->o.limit <= 0 || d->claimed - d->failed_done < d->o.limit;
}

static void *worker(void *arg)
{
    pp_dataset *d = arg;
    io_image_options io = io_image_defaults();
    io.apply_exif = d->o.exif;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && d->claimed < d->n_files && !can_claim(d)) pthread_cond_wait(&d->work_cv, &d->mu);
        if (d->stop || d->claimed >= d->n_files) break;
        int i = d->claimed++;
        cell *c = &d->cells[i % d->n_cells];
        c->state = CELL_BUSY;
        pthread_mutex_unlock(&d->mu);

        io_image img;
        c->st = io_image_load(d->files[i], &io, &img);
        if (c->st == PTQ_OK) {
            c->st = pp_tensor_shape(&d->cfg, img.width, img.height, &c->w, &c->h);
            size_t need = (size_t)pp_channels(&d->cfg) * (size_t)c->w * (size_t)c->h;
            if (c->st == PTQ_OK && need > c->cap) {
                float *p = realloc(c->data, sizeof(float) * need);
                if (p) {
                    c->data = p;
                    c->cap = need;
                } else {
                    c->st = PTQ_ERR_NOMEM;
                    ptq_error("out of memory for a %dx%d tensor", c->w, c->h);
                }
            }
            if (c->st == PTQ_OK) c->st = pp_image_to_tensor(&img, &d->cfg, c->data, &c->meta);
            io_image_free(&img);
            if (c->st != PTQ_OK) snprintf(c->msg, sizeof c->msg, "%s: %s", d->files[i], ptq_last_error());
        } else {
            snprintf(c->msg, sizeof c->msg, "%s", ptq_last_error());
        }

        pthread_mutex_lock(&d->mu);
        c->state = CELL_DONE;
        if (c->st != PTQ_OK) {
            d->failed_done++;
            pthread_cond_broadcast(&d->work_cv); /* the limit may let one more image in */
        }
        pthread_cond_broadcast(&d->done_cv);
    }
    pthread_mutex_unlock(&d->mu);
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
    if (o->batch < 0 || o->batch > 4096) FAIL(PTQ_ERR_ARG, "batch %d out of range (1 to 4096)", o->batch);
    if (o->shard_count < 0 || (o->shard_count > 0 && (o->shard_index < 0 || o->shard_index >= o->shard_count)))
        FAIL(PTQ_ERR_ARG, "shard %d/%d: the index must be 0 to count-1", o->shard_index, o->shard_count);
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
    if (o->shard_count > 1) { /* round robin over the final order: position k goes to shard k mod N */
        int kept = 0;
        for (int k = 0; k < files.n; k++) {
            if ((k % o->shard_count == o->shard_index) != (o->shard_invert != 0)) files.v[kept++] = files.v[k];
            else free(files.v[k]);
        }
        if (kept == 0) {
            int listed = files.n;
            files.n = 0;
            FAIL(PTQ_ERR_ARG, "%s: shard %s%d/%d holds no image (%d image files listed)", o->images, o->shard_invert ? "all but " : "",
                 o->shard_index, o->shard_count, listed);
        }
        files.n = kept;
    }
    d = calloc(1, sizeof *d);
    CHECK_ALLOC(d);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work_cv, NULL);
    pthread_cond_init(&d->done_cv, NULL);
    d->sync = 1;
    d->o = *o;
    if (d->o.batch == 0) d->o.batch = PP_DEFAULT_BATCH;
    d->o.prefetch = o->prefetch < 1 ? 1 : (o->prefetch > 16 ? 16 : o->prefetch);
    d->cfg = *c;
    d->files = files.v;
    d->n_files = files.n;
    files.v = NULL;
    d->floats = pp_tensor_floats(c);
    d->out_w = c->width;
    d->out_h = c->height;
    d->n_cells = d->o.prefetch * d->o.batch;
    d->cells = calloc((size_t)d->n_cells, sizeof *d->cells);
    CHECK_ALLOC(d->cells);
    for (int i = 0; i < d->n_cells && !pp_dynamic(c); i++) { /* dynamic: each cell grows as needed */
        d->cells[i].data = malloc(sizeof(float) * d->floats);
        CHECK_ALLOC(d->cells[i].data);
        d->cells[i].cap = d->floats;
    }
    d->out_cap = pp_dynamic(c) ? 0 : d->floats * (size_t)d->o.batch;
    d->out = malloc(sizeof(float) * (d->out_cap ? d->out_cap : 1));
    d->out_meta = malloc(sizeof(pp_meta) * (size_t)d->o.batch);
    d->out_paths = malloc(sizeof(char *) * (size_t)d->o.batch);
    CHECK_ALLOC(d->out);
    CHECK_ALLOC(d->out_meta);
    CHECK_ALLOC(d->out_paths);
    d->hash = 1469598103934665603ull;
    d->t0 = now_s();
    {
        int want = o->threads > 0 ? o->threads : omp_get_max_threads();
        if (want < 1) want = 1;
        if (want > MAX_WORKERS) want = MAX_WORKERS;
        if (want > files.n) want = files.n;
        for (int i = 0; i < want; i++) {
            if (pthread_create(&d->workers[i], NULL, worker, d) != 0) {
                if (d->n_workers == 0) FAIL(PTQ_ERR_NOMEM, "cannot start the decoding threads");
                break; /* fewer workers: slower, same result */
            }
            d->n_workers++;
        }
    }
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

void pp_progress(const char *label, int done, int total, double seconds, int last)
{
    if (!isatty(STDERR_FILENO)) return;
    double rate = seconds > 0 ? done / seconds : 0;
    double eta = rate > 0 ? (total - done) / rate : 0;
    /* "phase: unit" labels count that unit ("refine: layers" -> "refine: 3/54 layers"); others images */
    const char *unit = "images", *colon = label ? strrchr(label, ':') : NULL;
    int head = label ? (int)strlen(label) : 0;
    if (colon && colon[1] == ' ' && colon[2]) {
        unit = colon + 2;
        head = (int)(colon - label);
    }
    fprintf(stderr, "\r%.*s%s%d/%d %s, %.1f %s/s, ETA %.0f s   %s", head, label ? label : "", label ? ": " : "", done,
            total, unit, rate, unit, eta > 0 ? eta : 0, last ? "\n" : "");
}

void pp_log_progress(const pp_log *log, const char *label, int done, int total, double seconds, int last)
{
    if (log && log->progress) log->progress(label, done, total, seconds, last, log->user);
    else pp_progress(label, done, total, seconds, last);
}

void pp_log_message(const pp_log *log, int level, const char *fmt, ...)
{
    char text[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (log && log->message) log->message(level, text, log->user);
    else fprintf(stderr, "ptq: %s%s\n", level == PP_LOG_WARNING ? "warning: " : "", text);
}

static void progress(pp_dataset *d, int last)
{
    if (d->o.quiet || (!d->o.log.progress && !isatty(STDERR_FILENO))) return;
    double now = now_s();
    if (!last && now - d->shown < 0.1) return; /* at most ten refreshes a second */
    d->shown = now;
    int total = d->o.limit > 0 && d->o.limit < d->n_files ? d->o.limit : d->n_files;
    pp_log_progress(&d->o.log, d->o.label, d->consumed, total, now - d->t0, last);
}

ptq_status pp_dataset_next(pp_dataset *d, const float **data, int *n, const pp_meta **meta, const char *const **paths)
{
    ptq_status st = PTQ_OK;
    int k = 0;
    size_t per = 0; /* floats per image of this batch */
    *n = 0;
    pthread_mutex_lock(&d->mu);
    while (k < d->o.batch && d->error == PTQ_OK && d->taken < d->n_files &&
           !(d->o.limit > 0 && d->consumed + k >= d->o.limit)) {
        int i = d->taken;
        cell *c = &d->cells[i % d->n_cells];
        while (c->state != CELL_DONE) pthread_cond_wait(&d->done_cv, &d->mu);
        int good = c->st == PTQ_OK;
        if (good && k > 0 && (c->w != d->out_w || c->h != d->out_h)) break; /* the next batch's first image */
        /* the cell is ours until it is marked free: copy it out without the lock */
        pthread_mutex_unlock(&d->mu);
        if (good && k == 0) {
            d->out_w = c->w;
            d->out_h = c->h;
            per = (size_t)pp_channels(&d->cfg) * (size_t)c->w * (size_t)c->h;
            if (per * (size_t)d->o.batch > d->out_cap) {
                float *p = realloc(d->out, sizeof(float) * per * (size_t)d->o.batch);
                if (!p) {
                    pthread_mutex_lock(&d->mu);
                    ptq_error("out of memory for a batch of %d %dx%d tensors", d->o.batch, c->w, c->h);
                    st = PTQ_ERR_NOMEM;
                    break;
                }
                d->out = p;
                d->out_cap = per * (size_t)d->o.batch;
            }
        }
        if (good) {
            memcpy(d->out + (size_t)k * per, c->data, sizeof(float) * per);
            d->out_meta[k] = c->meta;
            d->out_paths[k] = d->files[i];
        } else if (!d->o.strict && !d->o.quiet && c->st != PTQ_ERR_NOMEM) {
            if (!d->o.log.message && isatty(STDERR_FILENO)) fprintf(stderr, "\n"); /* ends the progress line */
            pp_log_message(&d->o.log, PP_LOG_WARNING, "skipped %s", c->msg);
        }
        pthread_mutex_lock(&d->mu);
        if (good) {
            k++;
        } else if (d->o.strict || c->st == PTQ_ERR_NOMEM) { /* out of memory is no bad image: never skipped */
            d->error = c->st;
            snprintf(d->error_msg, sizeof d->error_msg, "%s", c->msg);
        } else {
            d->skipped++;
        }
        c->state = CELL_FREE;
        d->taken++;
        pthread_cond_broadcast(&d->work_cv);
    }
    if (st != PTQ_OK) {
        k = 0;
    } else if (d->error != PTQ_OK) {
        st = d->error;
        ptq_error("%s", d->error_msg);
        k = 0;
    }
    d->consumed += k;
    pthread_mutex_unlock(&d->mu);
    if (st != PTQ_OK) return st;
    if (k > 0 && d->consumed > d->ids_cap) {
        int cap = d->ids_cap ? d->ids_cap : 256;
        while (cap < d->consumed) cap *= 2;
        uint64_t *p = realloc(d->ids, sizeof *p * (size_t)cap);
        if (!p) {
            ptq_error("out of memory recording %d image ids", d->consumed);
            return PTQ_ERR_NOMEM;
        }
        d->ids = p;
        d->ids_cap = cap;
    }
    for (int i = 0; i < k; i++) {
        uint64_t id = 1469598103934665603ull;
        for (const char *c = d->out_paths[i]; *c; c++) {
            d->hash = (d->hash ^ (uint8_t)*c) * 1099511628211ull;
            id = (id ^ (uint8_t)*c) * 1099511628211ull;
        }
        d->hash = (d->hash ^ (uint8_t)'\n') * 1099511628211ull;
        d->ids[d->consumed - k + i] = id;
    }
    *n = k;
    if (k > 0) {
        *data = d->out;
        if (meta) *meta = d->out_meta;
        if (paths) *paths = d->out_paths;
    }
    progress(d, k == 0);
    return st;
}

void pp_dataset_batch_shape(const pp_dataset *d, int *w, int *h)
{
    *w = d->out_w;
    *h = d->out_h;
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

const uint64_t *pp_dataset_image_ids(const pp_dataset *d, int *n)
{
    pthread_mutex_lock((pthread_mutex_t *)&d->mu);
    *n = d->consumed;
    pthread_mutex_unlock((pthread_mutex_t *)&d->mu);
    return d->ids;
}

void pp_dataset_close(pp_dataset *d)
{
    if (!d) return;
    if (d->n_workers > 0) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->work_cv);
        pthread_mutex_unlock(&d->mu);
        for (int i = 0; i < d->n_workers; i++) pthread_join(d->workers[i], NULL);
    }
    if (d->sync) {
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->work_cv);
        pthread_cond_destroy(&d->done_cv);
    }
    for (int i = 0; d->cells && i < d->n_cells; i++) free(d->cells[i].data);
    free(d->cells);
    free(d->out);
    free(d->out_meta);
    free(d->out_paths);
    free(d->ids);
    for (int i = 0; i < d->n_files; i++) free(d->files[i]);
    free(d->files);
    free(d);
}

/* ---- the listing alone (ptq compare --labels checks its labels against it before calibrating) ---- */
ptq_status pp_list_images(const char *images, char ***paths, int *n)
{
    ptq_status st = PTQ_OK;
    strvec files = {0};
    struct stat sb;
    *paths = NULL;
    *n = 0;
    if (stat(images, &sb) != 0) FAIL(PTQ_ERR_IO, "%s: %s", images, strerror(errno));
    if (S_ISDIR(sb.st_mode)) TRY(walk(images, &files, 0));
    else TRY(read_list(images, &files));
    qsort(files.v, (size_t)files.n, sizeof(char *), cmp_str);
    *paths = files.v;
    *n = files.n;
    return PTQ_OK;
done:
    for (int i = 0; i < files.n; i++) free(files.v[i]);
    free(files.v);
    return st;
}
