/* labels.h: a detector's ground truth in the formats training tools write, read for
 * `ptq compare --labels` (the metric itself is engine/compare_truth.h's).
 *
 *   io_box_labels l;
 *   TRY(io_box_labels_load("yolo:val/labels", &l));    // or "coco:instances_val.json"
 *   const io_image_boxes *b = io_box_labels_find(&l, "photos/0001.jpg");  // NULL: no objects
 *   io_box_labels_free(&l);
 *
 * yolo:DIR   one text file per image, DIR/STEM.txt (STEM the image's name without its extension),
 *            a line "class cx cy w h" per object, the box normalised to the image (as Ultralytics
 *            writes); an image without a file has no objects.
 * coco:FILE  COCO's instances JSON: images[] (file_name, id), annotations[] (image_id,
 *            category_id, bbox [x, y, w, h] in pixels, iscrowd, area), categories[] (id, name).
 *            The model's class k is the k-th category in id order (as Ultralytics' and
 *            torchvision's COCO models number them, 0-based, contiguous).
 * Every file is untrusted: errors name the file, the line (yolo) or the entry (coco) and the
 * reason. Images are matched by base name (coco: the base name of file_name). */
#ifndef PTQ_IO_LABELS_H
#define PTQ_IO_LABELS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

typedef enum { IO_LABELS_NONE = 0, IO_LABELS_CLASSES, IO_LABELS_YOLO, IO_LABELS_COCO, IO_LABELS_PADDLE, IO_LABELS_TEXT, IO_LABELS_MASK,
               IO_LABELS_PADDLEDET } io_labels_kind;

/* What --labels SPEC names: paddledet: a text detector's polygons, mask: a segmenter's masks, paddle:/text: a recogniser's lines, yolo:/coco: a detector's boxes (*path after the colon), anything
 * else a classifier's labels ("folders", "list:FILE" of "image class" lines: *path after the colon,
 * or an "image,label" file: *path = spec). */
io_labels_kind io_labels_parse(const char *spec, const char **path);

typedef struct {
    double x, y, w, h;  /* yolo: normalised centre and size; coco: pixels, top-left corner and size */
    double area;        /* coco: the annotation's area (pixels); yolo: 0 (w * h in pixels when mapped) */
    int cls;            /* the model's class index */
    int crowd;          /* coco iscrowd */
} io_box_label;

typedef struct {
    char *name;         /* base name of the image (yolo: the label file's stem) */
    io_box_label *box;
    int n;
    int used;           /* set by io_box_labels_find */
} io_image_boxes;

typedef struct {
    io_labels_kind kind;
    char *path;         /* the folder or file (for messages) */
    io_image_boxes *img;
    int n_img;
    int n_classes;      /* coco: the categories; yolo: 1 + the largest class seen */
    char **class_names; /* coco: the categories' names by class index; yolo: NULL */
} io_box_labels;

/* Reads a yolo:DIR or coco:FILE spec; yolo reads DIR's *.txt files. */
ptq_status io_box_labels_load(const char *spec, io_box_labels *out);
/* The boxes of the image at path (matched by base name; yolo: by stem), or NULL when it has none. */
const io_image_boxes *io_box_labels_find(io_box_labels *l, const char *path);
void io_box_labels_free(io_box_labels *l); /* zeroes *l; NULL-safe */

/* A recogniser's text lines, read with the model's dictionary:
 *   paddle:FILE:dict=KEYS   PaddleOCR's label list, "path<TAB>text" lines (split at the first tab)
 *   text:DIR:dict=KEYS      DIR/STEM.txt per crop, its first line the text
 * KEYS: PaddleOCR's character dictionary, one character per line: class 0 is CTC's blank, class
 * i the dictionary's line i, the class after the last a space (use_space_char). Texts and
 * readings are compared as Unicode code points. */
typedef struct {
    io_labels_kind kind;
    char *path;         /* the file or folder (for messages) */
    char **name;        /* base names (text: the stem), sorted */
    int **seq;          /* each line's code points */
    int *len, *line, *used;
    int n;
    int *class_code;    /* the code point of each class, -1 for the blank */
    int n_classes;      /* blank + the dictionary + space */
} io_text_labels;

ptq_status io_text_labels_load(const char *spec, io_text_labels *out);
/* The index of the label of the image at path (matched by base name; text: by stem), or -1; marks it used. */
int io_text_labels_find(io_text_labels *l, const char *path);
void io_text_labels_free(io_text_labels *l); /* zeroes *l; NULL-safe */

/* A segmenter's masks, mask:DIR[:ignore=V]: DIR/STEM.png per image (STEM the image's name without
 * its extension), 8-bit grayscale holding the class index of each pixel, or a palette PNG (as VOC
 * writes) whose palette index is the class; pixels of value V (255 unless given) are not counted.
 * 1/2/4-bit gray and palette files are read as their indices (not scaled). */
typedef struct {
    char *dir;
    int ignore;         /* 0..255 */
} io_mask_labels;

ptq_status io_mask_labels_open(const char *spec, io_mask_labels *out);
/* The mask of the image at path (DIR/STEM.png): *out malloc'd, w x h class indices, row-major.
 * Errors name the mask file: missing, not PNG, 16-bit, RGB or with alpha. */
ptq_status io_mask_read(const io_mask_labels *l, const char *image_path, uint8_t **out, int *w, int *h);
/* The same from the bytes of a PNG file (what: its name in messages); masks above max_pixels refused. */
ptq_status io_mask_decode(const uint8_t *buf, size_t len, const char *what, uint64_t max_pixels, uint8_t **out, int *w,
                          int *h);
/* DIR/STEM.png of the image at path into buf (for messages and existence checks). */
void io_mask_path(const io_mask_labels *l, const char *image_path, char *buf, size_t cap);
void io_mask_labels_free(io_mask_labels *l); /* zeroes *l; NULL-safe */

/* A text detector's polygons, paddledet:FILE: PaddleOCR's detection label list, a line per image
 *   IMAGE<TAB>[{"transcription": "TEXT", "points": [[x, y], [x, y], ...]}, ...]
 * (image matched by base name; points in the image's own pixels, 4 or more per polygon; a
 * transcription "###" or "*" marks a don't-care region, as PaddleOCR's DetLabelEncode reads it).
 * Errors name FILE:LINE and the reason. */
typedef struct {
    char *name;         /* base name of the image */
    int n;              /* polygons */
    int *npt;           /* points of each */
    double *xy;         /* x, y of every point, polygon after polygon */
    int *care;          /* 0: don't care */
    int line, used;     /* the line in FILE; set by io_poly_labels_find */
} io_image_polys;

typedef struct {
    char *path;
    io_image_polys *img; /* sorted by name */
    int n_img;
} io_poly_labels;

ptq_status io_poly_labels_load(const char *spec, io_poly_labels *out);
/* The same from the file's bytes (path: its name in messages); out zeroed by the caller, freed by
 * io_poly_labels_free on failure too. */
ptq_status io_poly_labels_parse(const char *buf, size_t len, const char *path, io_poly_labels *out);
/* The polygons of the image at path (by base name), NULL when it has no line; marks it used. */
io_image_polys *io_poly_labels_find(io_poly_labels *l, const char *path);
void io_poly_labels_free(io_poly_labels *l); /* zeroes *l; NULL-safe */

#endif
