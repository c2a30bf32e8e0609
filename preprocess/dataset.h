/* dataset.h: an image folder (recursive) or a list file, as batches of model input
 * tensors, decoded and preprocessed by `threads` worker threads up to `prefetch`
 * batches ahead of the consumer, in memory bounded by (prefetch + 1) batches whatever
 * the folder size.
 *
 *   pp_dataset_options o = pp_dataset_defaults();
 *   o.images = "photos/"; o.batch = 8;
 *   pp_dataset *d = NULL;
 *   TRY(pp_dataset_open(&o, &cfg, &d));
 *   const float *x; int n, w, h;
 *   while (pp_dataset_next(d, &x, &n, NULL, NULL) == PTQ_OK && n > 0) {
 *       pp_dataset_batch_shape(d, &w, &h);   // x: n * 3*h*w floats (the preset's size unless dynamic)
 *   }
 *   pp_dataset_close(d);
 *
 * Files are recognised by content (JPEG, PNG), sorted byte-wise by path; --shuffle
 * permutes them with a seeded generator; --shard I/N then keeps the files at positions
 * k with k mod N = I of that list (round robin: shard sizes differ by at most one and each
 * shard samples every part of a folder tree; the N shards partition the list, so their
 * merged statistics are one pass's, docs/cluster.md); --limit keeps the first N usable
 * images (of the shard).
 * A file that does not decode is skipped with a one-line warning naming it (or stops
 * everything with strict); batches contain the same images in the same order at
 * any thread count. */
#ifndef PTQ_DATASET_H
#define PTQ_DATASET_H

#include <stdint.h>

#include "preprocess/preprocess.h"

/* Where progress lines and messages go. All NULL (the default): progress on stderr when it is a
 * terminal (pp_progress), messages on stderr as "ptq: [warning: ]text". engine/ and the public
 * API pass a caller's callbacks through it. */
enum { PP_LOG_INFO = 0, PP_LOG_WARNING = 1 };
typedef struct {
    void (*progress)(const char *label, int done, int total, double seconds, int last, void *user);
    void (*message)(int level, const char *text, void *user); /* one line, without "ptq: " and '\n' */
    void *user;
} pp_log;

typedef struct {
    const char *images;  /* a folder (searched recursively) or a text file with one path per line */
    int limit;           /* keep at most this many usable images (0: all) */
    int shard_index;     /* --shard I/N: keep list positions k with k % shard_count == shard_index */
    int shard_count;     /* 0: no sharding (the whole list) */
    int shard_invert;    /* 1: keep the positions NOT in shard_index (the other shards together) */
    int shuffle;
    uint64_t seed;
    int strict;          /* a bad image is an error instead of a counted skip */
    int exif;            /* apply EXIF orientation (1) */
    int batch;           /* images per batch (>= 1; 0: PP_DEFAULT_BATCH, the engine fits it to the model) */
    int threads;         /* decoding worker threads (0: OpenMP's default thread count) */
    int prefetch;        /* batches prepared ahead (>= 1) */
    int memory_mb;       /* the engine's memory budget (--memory; 0: its default): the default batch and
                          * the replay caches follow it (engine/runner.h); the dataset does not read it */
    int quiet;           /* no warnings or progress on stderr */
    const char *label;   /* what the progress line says the images are for (borrowed; NULL: nothing) */
    pp_log log;          /* progress and warnings (zero: stderr) */
} pp_dataset_options;

typedef struct pp_dataset pp_dataset;

pp_dataset_options pp_dataset_defaults(void);
/* Lists and filters the files; fails when none is an image. Starts the producer. */
ptq_status pp_dataset_open(const pp_dataset_options *o, const pp_config *c, pp_dataset **out);
/* Files found that look like images (before decoding). */
int pp_dataset_files(const pp_dataset *d);
enum { PP_DEFAULT_BATCH = 8 };

/* Next batch: *n images (0 at the end), data borrowed until the next call; meta and
 * paths (may be NULL) are per image. Fails on a bad image with strict. */
ptq_status pp_dataset_next(pp_dataset *d, const float **data, int *n, const pp_meta **meta,
                           const char *const **paths);
/* The tensor width and height of the images of the last batch. A config whose dims follow
 * the image (pp_dynamic) gives batches of one shape each: a batch ends early (fewer than
 * `batch` images) when the next image's shape differs; the order stays the list's. */
void pp_dataset_batch_shape(const pp_dataset *d, int *w, int *h);
/* Images used and skipped so far. */
void pp_dataset_counts(const pp_dataset *d, int *used, int *skipped);
/* 64-bit FNV-1a over the sorted list of image paths used (for statistics files). */
uint64_t pp_dataset_list_hash(const pp_dataset *d);
/* The id of every image used so far, in the order used: FNV-1a 64 of its path as listed
 * (the folder or list-file path joined with the entry). Borrowed until the next call or
 * close; *n: how many (= images used). Statistics files record them (io/stats.h). */
const uint64_t *pp_dataset_image_ids(const pp_dataset *d, int *n);
void pp_dataset_close(pp_dataset *d); /* NULL-safe; stops the producer */
/* The image files of a folder (recursive) or a list file, sorted, as pp_dataset_open lists them
 * (before shard, shuffle and limit; no decoding). *paths and its strings are the caller's to free. */
ptq_status pp_list_images(const char *images, char ***paths, int *n);

/* The progress line on stderr when it is a terminal: "\r[label: ]done/total images, rate,
 * ETA"; a label "phase: unit" counts that unit instead ("refine: layers" -> "refine: 3/54 layers,
 * 1.2 layers/s, ETA 40 s"); seconds since the work began; last ends the line. Callers limit the
 * refresh rate. */
void pp_progress(const char *label, int done, int total, double seconds, int last);
/* A progress line through log (log NULL or without progress: pp_progress). */
void pp_log_progress(const pp_log *log, const char *label, int done, int total, double seconds, int last);
/* A message through log (NULL or without message: "ptq: [warning: ]text\n" on stderr). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void pp_log_message(const pp_log *log, int level, const char *fmt, ...);

#endif
