/* stats.h: calibration statistics files (.ptqstats): everything one calibration pass
 * collected (the calib_stats of calib/calib.h per tensor), so that passes over shards of
 * the images can be merged exactly and every method recomputed without the images.
 *
 *   io_stats s;
 *   io_stats_init(&s);
 *   TRY(io_hash_file("model.onnx", &s.model_hash));
 *   TRY(io_stats_set_preprocess(&s, "mode=stretch size=192x48 ... exif=on"));
 *   TRY(io_stats_set_images(&s, ids, 500));           // pp_dataset_image_ids(); sets n_images
 *   TRY(io_stats_add(&s, "conv1_out", stats));         // copies the calib_stats
 *   TRY(io_stats_write("run.ptqstats", &s));           // temporary file + rename
 *   io_stats_free(&s);
 *
 *   const char *shards[] = {"a.ptqstats", "b.ptqstats"};
 *   TRY(io_stats_merge(shards, 2, &s));                // as if one pass had seen both
 *
 * Format, version 2 (integers little-endian, floats as their IEEE-754 bits):
 *   "PTQSTATS"  u32 version = 2  u32 flags = 0
 *   u64 model_hash                     FNV-1a 64 of the model file
 *   u32 len, bytes                     preprocessing settings (text, no NUL, <= 64 KiB)
 *   u64 n_images, u64 id[n_images]     the images seen, ascending (equal ids allowed: a list
 *                                      file may name an image twice): FNV-1a 64 of each path
 *                                      (pp_dataset_image_ids), or of a .npy sample's index
 *                                      seeded with the file's hash
 *   u32 n_tensors (<= 32768), then per tensor (in the executor's observer order):
 *     u32 len, bytes                   name (1 .. 65536 bytes, no NUL)
 *     u64 count, nan, pinf, ninf, zeros   f32 min, max, amax   f64 range
 *     u32 n_bins                       bins kept (<= 4096; the ones after are zero, bin n_bins-1 is not)
 *     n_bins LEB128 varints            the histogram counts (shortest encoding only)
 *   u64 FNV-1a 64 of every byte before it
 * Version 1 (ptq before --shard) has `u32 n_shards, u64 hash[n_shards]` (the image-list hash
 * of each pass merged in, >= 1, distinct) then `u64 n_images` in place of the ids. It is
 * still read, merged with other version-1 files (refusing a list hash seen twice) and
 * written back as version 1; merging it with a version-2 file is refused. Version 2 records
 * the set of images, not the lists, so merging disjoint shards of a list in any grouping
 * (ptq --shard I/N, any N) gives, byte for byte, the file one pass over the list writes.
 * Files are untrusted: the reader bounds-checks every length, verifies the checksum, refuses
 * duplicate names and trailing bytes, and checks each tensor's invariants (io_stats_validate)
 * so that a file that decodes is one the collector could have written. Every message names
 * the file (the `what` argument) and, where there is one, the tensor.
 *
 * Lifetime: an io_stats owns its strings and calib_stats (io_stats_free); io_stats_add
 * copies. Merging refuses different models, different preprocessing, different tensor sets
 * and any image seen twice (version 1: an image-list hash), leaving the destination untouched. */
#ifndef PTQ_IO_STATS_H
#define PTQ_IO_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "calib/calib.h"
#include "runtime/status.h"

#define IO_STATS_VERSION 2
#define IO_FNV1A64_INIT 0xcbf29ce484222325ull

typedef struct {
    char *name;
    calib_stats *stats;
} io_stats_tensor;

typedef struct {
    uint64_t model_hash;      /* io_hash_file() of the model */
    char *preprocess;         /* preprocessing settings; NULL reads as "" */
    uint64_t *shards;         /* version 1 only: image-list hash of every pass merged in, in merge order */
    int n_shards;             /* > 0: a version-1 file (no ids) */
    uint64_t n_images;
    uint64_t *ids;            /* version 2: the id of every image, ascending, n_images of them */
    io_stats_tensor *tensors; /* in insertion order */
    int n_tensors, cap;
} io_stats;

/* 64-bit FNV-1a of len bytes, continuing from h (start with IO_FNV1A64_INIT). */
uint64_t io_fnv1a64(const void *data, size_t len, uint64_t h);
/* FNV-1a 64 of a file's bytes, streamed. */
ptq_status io_hash_file(const char *path, uint64_t *out);

void io_stats_init(io_stats *s);
void io_stats_free(io_stats *s); /* NULL-safe; leaves s initialised */
ptq_status io_stats_set_preprocess(io_stats *s, const char *text);
/* Records the images of one pass (n ids, any order: copied and sorted) and sets n_images;
 * the file is then version 2. Fails (ARG) on statistics that have version-1 list hashes. */
ptq_status io_stats_set_images(io_stats *s, const uint64_t *ids, uint64_t n);
/* Version 1: records one pass's image-list hash; fails (ARG) if it is already there. */
ptq_status io_stats_add_shard(io_stats *s, uint64_t list_hash);
/* Appends a copy of st under name; fails (ARG) on an empty, too long or duplicate name. */
ptq_status io_stats_add(io_stats *s, const char *name, const calib_stats *st);
/* Index of name, or -1. */
int io_stats_find(const io_stats *s, const char *name);

/* The invariants of one tensor's statistics: counts add up (histogram total = finite
 * values, zeros <= finite, no overflow), min <= max and amax = max(|min|, |max|) when any
 * value was finite (and the empty state otherwise), R = 0 or a power of two in
 * [2^-24, 2^128] with amax <= R <= max(2^-24, 2 amax), no count in a bin above amax's.
 * what names the tensor in the message. */
ptq_status io_stats_validate(const calib_stats *st, const char *what);

/* Serialises into a malloc'd buffer (caller frees). */
ptq_status io_stats_encode(const io_stats *s, uint8_t **buf, size_t *len);
/* Parses and validates buf; on success replaces *s (initialised), else leaves it. */
ptq_status io_stats_decode(const uint8_t *buf, size_t len, const char *what, io_stats *s);
ptq_status io_stats_write(const char *path, const io_stats *s);
ptq_status io_stats_read(const char *path, io_stats *s);

/* dst += src as if one pass had seen both: same model, preprocessing and tensor names
 * required, no shard in both. On a refusal dst is unchanged. */
ptq_status io_stats_merge_into(io_stats *dst, const io_stats *src, const char *dst_what, const char *src_what);
/* Reads and merges n >= 1 files; replaces *out (initialised) on success. */
ptq_status io_stats_merge(const char *const *paths, int n, io_stats *out);

#endif
