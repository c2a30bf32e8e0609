/* labels.c: yolo:DIR and coco:FILE ground truth (see labels.h). */
#include "io/labels.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <png.h>
#include <setjmp.h>

#include "io/file.h"
#include "io/png_mem.h"
#include "runtime/graph.h"

enum { LABEL_FILE_MAX = 1 << 30 };

io_labels_kind io_labels_parse(const char *spec, const char **path)
{
    *path = spec;
    if (!strncmp(spec, "paddledet:", 10)) {
        *path = spec + 10;
        return IO_LABELS_PADDLEDET;
    }
    if (!strncmp(spec, "yolo:", 5)) {
        *path = spec + 5;
        return IO_LABELS_YOLO;
    }
    if (!strncmp(spec, "list:", 5)) { /* a classifier's "image class" lines */
        *path = spec + 5;
        return IO_LABELS_CLASSES;
    }
    if (!strncmp(spec, "paddle:", 7)) {
        *path = spec + 7;
        return IO_LABELS_PADDLE;
    }
    if (!strncmp(spec, "text:", 5)) {
        *path = spec + 5;
        return IO_LABELS_TEXT;
    }
    if (!strncmp(spec, "mask:", 5)) {
        *path = spec + 5;
        return IO_LABELS_MASK;
    }
    if (!strncmp(spec, "coco:", 5)) {
        *path = spec + 5;
        return IO_LABELS_COCO;
    }
    return IO_LABELS_CLASSES;
}

void io_box_labels_free(io_box_labels *l)
{
    if (!l) return;
    for (int i = 0; i < l->n_img; i++) {
        free(l->img[i].name);
        free(l->img[i].box);
    }
    free(l->img);
    for (int i = 0; l->class_names && i < l->n_classes; i++) free(l->class_names[i]);
    free(l->class_names);
    free(l->path);
    memset(l, 0, sizeof *l);
}

static io_image_boxes *image_add(io_box_labels *l, const char *name, size_t len)
{
    io_image_boxes *p = realloc(l->img, sizeof *p * (size_t)(l->n_img + 1));
    if (!p) return NULL;
    l->img = p;
    io_image_boxes *b = &l->img[l->n_img];
    memset(b, 0, sizeof *b);
    if (!(b->name = malloc(len + 1))) return NULL;
    memcpy(b->name, name, len);
    b->name[len] = 0;
    l->n_img++;
    return b;
}

static int box_add(io_image_boxes *b, const io_box_label *x)
{
    io_box_label *p = realloc(b->box, sizeof *p * (size_t)(b->n + 1));
    if (!p) return -1;
    b->box = p;
    b->box[b->n++] = *x;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const io_image_boxes *)a)->name, ((const io_image_boxes *)b)->name);
}

static int finite_in(double v, double lo, double hi)
{
    return isfinite(v) && v >= lo && v <= hi;
}

/* One yolo label file: "class cx cy w h" lines (more numbers after them, as segments give, are
 * not read); blank lines skipped. */
static ptq_status yolo_file(io_box_labels *l, const char *dir, const char *fname)
{
    ptq_status st = PTQ_OK;
    char path[4096];
    uint8_t *buf = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    TRY(io_read_file(path, &buf, &len, LABEL_FILE_MAX));
    const char *dot = strrchr(fname, '.');
    io_image_boxes *b = image_add(l, fname, (size_t)(dot - fname));
    CHECK_ALLOC(b);
    int line_no = 0;
    size_t k;
    for (char *cur = (char *)buf, *line; (line = io_text_line(&cur, 1, &line_no, &k));) {
        if (!k) continue;
        double v[5];
        char *p = line, *end;
        for (int j = 0; j < 5; j++) {
            v[j] = strtod(p, &end);
            if (end == p) FAIL(PTQ_ERR_FORMAT, "%s:%d: expected 'class cx cy w h', got %d number%s", path, line_no, j,
                               j == 1 ? "" : "s");
            p = end;
        }
        if (!(v[0] == floor(v[0]) && finite_in(v[0], 0, 1e6)))
            FAIL(PTQ_ERR_FORMAT, "%s:%d: class %g is not a class index", path, line_no, v[0]);
        for (int j = 1; j < 5; j++)
            if (!finite_in(v[j], 0, 1))
                FAIL(PTQ_ERR_FORMAT, "%s:%d: %g is outside 0..1 (yolo boxes are normalised to the image)", path,
                     line_no, v[j]);
        io_box_label x = {v[1], v[2], v[3], v[4], 0, (int)v[0], 0};
        if (box_add(b, &x)) FAIL(PTQ_ERR_NOMEM, "out of memory reading %s", path);
        if (x.cls + 1 > l->n_classes) l->n_classes = x.cls + 1;
    }
done:
    free(buf);
    return st;
}

static ptq_status load_yolo(const char *dir, io_box_labels *l)
{
    ptq_status st = PTQ_OK;
    DIR *d = opendir(dir);
    if (!d) FAIL(PTQ_ERR_IO, "%s: --labels yolo:DIR needs a folder of label files (one STEM.txt per image)", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t k = strlen(e->d_name);
        if (e->d_name[0] == '.' || k < 5 || strcmp(e->d_name + k - 4, ".txt")) continue;
        if ((st = yolo_file(l, dir, e->d_name)) != PTQ_OK) break;
    }
    closedir(d);
    if (st != PTQ_OK) goto done;
    if (!l->n_img) FAIL(PTQ_ERR_FORMAT, "%s: no .txt label file for --labels yolo:", dir);
done:
    return st;
}

static int int_of(const cJSON *o, const char *key, double *v)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x)) return -1;
    *v = x->valuedouble;
    return 0;
}

typedef struct {
    double id;
    const char *name;
} coco_cat;

static int by_cat_id(const void *a, const void *b)
{
    double x = ((const coco_cat *)a)->id, y = ((const coco_cat *)b)->id;
    return (x > y) - (x < y);
}

static ptq_status load_coco(const char *file, io_box_labels *l)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len;
    cJSON *root = NULL;
    coco_cat *cats = NULL;
    double *img_ids = NULL;
    TRY(io_read_file(file, &buf, &len, LABEL_FILE_MAX));
    root = cJSON_ParseWithLength((const char *)buf, len);
    if (!root) FAIL(PTQ_ERR_FORMAT, "%s: not JSON (near byte %ld)", file, (long)(cJSON_GetErrorPtr() - (const char *)buf));
    const cJSON *images = cJSON_GetObjectItemCaseSensitive(root, "images");
    const cJSON *anns = cJSON_GetObjectItemCaseSensitive(root, "annotations");
    const cJSON *jcats = cJSON_GetObjectItemCaseSensitive(root, "categories");
    if (!cJSON_IsArray(images) || !cJSON_IsArray(anns) || !cJSON_IsArray(jcats))
        FAIL(PTQ_ERR_FORMAT, "%s: a COCO file has the arrays images, annotations and categories", file);
    int nc = cJSON_GetArraySize(jcats), ni = cJSON_GetArraySize(images);
    if (nc < 1) FAIL(PTQ_ERR_FORMAT, "%s: no category", file);
    cats = calloc((size_t)nc, sizeof *cats);
    img_ids = calloc((size_t)ni + 1, sizeof *img_ids);
    CHECK_ALLOC(cats);
    CHECK_ALLOC(img_ids);
    for (int i = 0; i < nc; i++) {
        const cJSON *c = cJSON_GetArrayItem(jcats, i), *nm = cJSON_GetObjectItemCaseSensitive(c, "name");
        if (int_of(c, "id", &cats[i].id)) FAIL(PTQ_ERR_FORMAT, "%s: categories[%d] has no numeric id", file, i);
        cats[i].name = cJSON_IsString(nm) ? nm->valuestring : "";
    }
    qsort(cats, (size_t)nc, sizeof *cats, by_cat_id);
    for (int i = 1; i < nc; i++)
        if (cats[i].id == cats[i - 1].id) FAIL(PTQ_ERR_FORMAT, "%s: category id %g is listed twice", file, cats[i].id);
    l->n_classes = nc;
    l->class_names = calloc((size_t)nc, sizeof *l->class_names);
    CHECK_ALLOC(l->class_names);
    for (int i = 0; i < nc; i++) CHECK_ALLOC(l->class_names[i] = ptq_strdup(cats[i].name));
    for (int i = 0; i < ni; i++) {
        const cJSON *im = cJSON_GetArrayItem(images, i), *fn = cJSON_GetObjectItemCaseSensitive(im, "file_name");
        if (!cJSON_IsString(fn) || !fn->valuestring[0] || int_of(im, "id", &img_ids[i]))
            FAIL(PTQ_ERR_FORMAT, "%s: images[%d] needs a file_name and a numeric id", file, i);
        const char *base = strrchr(fn->valuestring, '/');
        base = base ? base + 1 : fn->valuestring;
        for (int j = 0; j < i; j++)
            if (!strcmp(l->img[j].name, base))
                FAIL(PTQ_ERR_FORMAT, "%s: images[%d] and images[%d] are both %s", file, j, i, base);
        CHECK_ALLOC(image_add(l, base, strlen(base)));
    }
    int na = cJSON_GetArraySize(anns);
    for (int i = 0; i < na; i++) {
        const cJSON *a = cJSON_GetArrayItem(anns, i), *bb = cJSON_GetObjectItemCaseSensitive(a, "bbox");
        double iid, cid, crowd = 0, v[4];
        if (int_of(a, "image_id", &iid) || int_of(a, "category_id", &cid))
            FAIL(PTQ_ERR_FORMAT, "%s: annotations[%d] needs a numeric image_id and category_id", file, i);
        if (!cJSON_IsArray(bb) || cJSON_GetArraySize(bb) != 4)
            FAIL(PTQ_ERR_FORMAT, "%s: annotations[%d]: bbox is not [x, y, w, h]", file, i);
        for (int j = 0; j < 4; j++) {
            const cJSON *x = cJSON_GetArrayItem(bb, j);
            if (!cJSON_IsNumber(x) || !finite_in(x->valuedouble, j < 2 ? -1e9 : 0, 1e9))
                FAIL(PTQ_ERR_FORMAT, "%s: annotations[%d]: bbox[%d] is not a finite number%s", file, i, j,
                     j < 2 ? "" : " >= 0");
            v[j] = x->valuedouble;
        }
        int_of(a, "iscrowd", &crowd);
        double area;
        if (int_of(a, "area", &area)) area = v[2] * v[3];
        int img = -1, cls = -1;
        for (int j = 0; j < ni && img < 0; j++)
            if (img_ids[j] == iid) img = j;
        for (int j = 0; j < nc && cls < 0; j++)
            if (cats[j].id == cid) cls = j;
        if (img < 0) FAIL(PTQ_ERR_FORMAT, "%s: annotations[%d]: image_id %g is not in images", file, i, iid);
        if (cls < 0) FAIL(PTQ_ERR_FORMAT, "%s: annotations[%d]: category_id %g is not in categories", file, i, cid);
        io_box_label x = {v[0], v[1], v[2], v[3], area, cls, crowd != 0};
        if (box_add(&l->img[img], &x)) FAIL(PTQ_ERR_NOMEM, "out of memory reading %s", file);
    }
done:
    cJSON_Delete(root);
    free(buf);
    free(cats);
    free(img_ids);
    return st;
}

ptq_status io_box_labels_load(const char *spec, io_box_labels *out)
{
    ptq_status st = PTQ_OK;
    const char *path;
    memset(out, 0, sizeof *out);
    out->kind = io_labels_parse(spec, &path);
    if (out->kind != IO_LABELS_YOLO && out->kind != IO_LABELS_COCO)
        FAIL(PTQ_ERR_ARG, "--labels %s: not yolo:DIR or coco:FILE", spec);
    if (!*path) FAIL(PTQ_ERR_ARG, "--labels %s: no folder or file after the colon", spec);
    CHECK_ALLOC(out->path = ptq_strdup(path));
    TRY(out->kind == IO_LABELS_YOLO ? load_yolo(path, out) : load_coco(path, out));
    qsort(out->img, (size_t)out->n_img, sizeof *out->img, by_name);
    for (int i = 1; i < out->n_img; i++)
        if (!strcmp(out->img[i].name, out->img[i - 1].name))
            FAIL(PTQ_ERR_FORMAT, "%s: two label files for the image %s", path, out->img[i].name);
done:
    if (st != PTQ_OK) io_box_labels_free(out);
    return st;
}

const io_image_boxes *io_box_labels_find(io_box_labels *l, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t k = strlen(base);
    if (l->kind == IO_LABELS_YOLO) { /* the stem */
        const char *dot = strrchr(base, '.');
        if (dot) k = (size_t)(dot - base);
    }
    int lo = 0, hi = l->n_img - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strncmp(l->img[mid].name, base, k);
        if (!c && l->img[mid].name[k]) c = 1;
        if (!c) {
            l->img[mid].used = 1;
            return &l->img[mid];
        }
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* ---- a recogniser's text lines ---- */

void io_text_labels_free(io_text_labels *l)
{
    if (!l) return;
    for (int i = 0; i < l->n; i++) {
        free(l->name[i]);
        free(l->seq[i]);
    }
    free(l->name);
    free(l->seq);
    free(l->len);
    free(l->line);
    free(l->used);
    free(l->path);
    free(l->class_code);
    memset(l, 0, sizeof *l);
}

/* One UTF-8 character at s (n bytes left): its code point, *adv its length; -1 when malformed. */
static long utf8_next(const unsigned char *s, size_t n, int *adv)
{
    int k = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (!k || (size_t)k > n) return -1;
    long c = k == 1 ? s[0] : s[0] & (0x7f >> k);
    for (int i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return -1;
        c = (c << 6) | (s[i] & 0x3f);
    }
    *adv = k;
    return c;
}

/* PaddleOCR's dictionary: line i (a single character) is class i; a space after the last line.
 * *codes (malloc'd): the code point of every class, -1 for class 0 (CTC's blank). */
static ptq_status load_dict(const char *path, int **codes, int *n_classes)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len;
    int *c = NULL;
    TRY(io_read_file(path, &buf, &len, LABEL_FILE_MAX));
    int n = 1, line_no = 0;
    c = malloc(sizeof *c * (len + 3));
    CHECK_ALLOC(c);
    c[0] = -1;
    size_t k;
    for (char *cur = (char *)buf, *line; (line = io_text_line(&cur, 0, &line_no, &k));) {
        int adv = 0;
        long cp = k ? utf8_next((const unsigned char *)line, k, &adv) : -1;
        if (cp < 0 || (size_t)adv != k)
            FAIL(PTQ_ERR_FORMAT, "%s:%d: a dictionary line holds one character (UTF-8)", path, line_no);
        c[n++] = (int)cp;
    }
    if (n == 1) FAIL(PTQ_ERR_FORMAT, "%s: an empty dictionary", path);
    c[n++] = ' ';
    *codes = c;
    c = NULL;
    *n_classes = n;
done:
    free(buf);
    free(c);
    return st;
}

/* text's code points into *seq (malloc'd), *len of them: 0, -1 for malformed UTF-8, -2 out of memory. */
static int text_codes(const char *text, int **seq, int *len)
{
    size_t k = strlen(text);
    int *s = malloc(sizeof *s * (k + 1)), n = 0;
    if (!s) return -2;
    for (size_t i = 0; i < k;) {
        int adv;
        long c = utf8_next((const unsigned char *)text + i, k - i, &adv);
        if (c < 0) {
            free(s);
            return -1;
        }
        s[n++] = (int)c;
        i += (size_t)adv;
    }
    *seq = s;
    *len = n;
    return 0;
}

static ptq_status text_add(io_text_labels *l, const char *name, size_t name_len, const char *text, const char *file,
                           int line_no)
{
    ptq_status st = PTQ_OK;
    size_t n = (size_t)l->n + 1;
    char **nm = realloc(l->name, sizeof *nm * n);
    if (nm) l->name = nm;
    int **sq = realloc(l->seq, sizeof *sq * n);
    if (sq) l->seq = sq;
    int *ln = realloc(l->len, sizeof *ln * n);
    if (ln) l->len = ln;
    int *li = realloc(l->line, sizeof *li * n);
    if (li) l->line = li;
    int *us = realloc(l->used, sizeof *us * n);
    if (us) l->used = us;
    CHECK_ALLOC(nm && sq && ln && li && us ? nm : NULL);
    char *copy = malloc(name_len + 1);
    CHECK_ALLOC(copy);
    memcpy(copy, name, name_len);
    copy[name_len] = 0;
    l->name[l->n] = copy;
    l->seq[l->n] = NULL;
    l->len[l->n] = 0;
    l->line[l->n] = line_no;
    l->used[l->n] = 0;
    l->n++;
    int r = text_codes(text, &l->seq[l->n - 1], &l->len[l->n - 1]);
    if (r == -2) FAIL(PTQ_ERR_NOMEM, "%s:%d: out of memory for the characters of the label", file, line_no);
    if (r == -1) FAIL(PTQ_ERR_FORMAT, "%s:%d: the text is not UTF-8", file, line_no);
done:
    return st;
}

typedef struct {
    char *name;
    int *seq, len, line;
} text_row;

static int by_row_name(const void *a, const void *b)
{
    return strcmp(((const text_row *)a)->name, ((const text_row *)b)->name);
}

static ptq_status load_text_dir(io_text_labels *out)
{
    ptq_status st = PTQ_OK;
    DIR *dir = opendir(out->path);
    if (!dir) FAIL(PTQ_ERR_IO, "%s: --labels text:DIR needs a folder of STEM.txt files", out->path);
    struct dirent *e;
    while (st == PTQ_OK && (e = readdir(dir))) {
        size_t k = strlen(e->d_name);
        if (e->d_name[0] == '.' || k < 5 || strcmp(e->d_name + k - 4, ".txt")) continue;
        char fp[4096];
        snprintf(fp, sizeof fp, "%s/%s", out->path, e->d_name);
        uint8_t *tb = NULL;
        size_t tl;
        if ((st = io_read_file(fp, &tb, &tl, LABEL_FILE_MAX)) != PTQ_OK) break;
        char *nl = strchr((char *)tb, '\n');
        if (nl) *nl = 0;
        size_t n = strlen((char *)tb);
        if (n && tb[n - 1] == '\r') tb[n - 1] = 0;
        st = text_add(out, e->d_name, k - 4, (char *)tb, fp, 1);
        free(tb);
    }
    closedir(dir);
done:
    return st;
}

ptq_status io_text_labels_load(const char *spec, io_text_labels *out)
{
    ptq_status st = PTQ_OK;
    const char *path;
    uint8_t *buf = NULL;
    size_t len;
    text_row *rows = NULL;
    memset(out, 0, sizeof *out);
    out->kind = io_labels_parse(spec, &path);
    const char *d = strstr(path, ":dict=");
    if ((out->kind != IO_LABELS_PADDLE && out->kind != IO_LABELS_TEXT) || !d || !d[6] || d == path)
        FAIL(PTQ_ERR_ARG, "--labels %s: a recogniser's labels are paddle:FILE:dict=KEYS or text:DIR:dict=KEYS", spec);
    CHECK_ALLOC(out->path = malloc((size_t)(d - path) + 1));
    memcpy(out->path, path, (size_t)(d - path));
    out->path[d - path] = 0;
    TRY(load_dict(d + 6, &out->class_code, &out->n_classes));
    if (out->kind == IO_LABELS_TEXT) {
        TRY(load_text_dir(out));
    } else {
        TRY(io_read_file(out->path, &buf, &len, LABEL_FILE_MAX));
        int line_no = 0;
        size_t k;
        for (char *cur = (char *)buf, *line; (line = io_text_line(&cur, 0, &line_no, &k));) {
            if (!k) continue;
            char *tab = strchr(line, '\t');
            if (!tab || tab == line) FAIL(PTQ_ERR_FORMAT, "%s:%d: expected 'image<TAB>text'", out->path, line_no);
            *tab = 0;
            const char *base = strrchr(line, '/');
            base = base ? base + 1 : line;
            TRY(text_add(out, base, strlen(base), tab + 1, out->path, line_no));
        }
    }
    if (!out->n) FAIL(PTQ_ERR_FORMAT, "%s: no label", out->path);
    CHECK_ALLOC(rows = malloc(sizeof *rows * (size_t)out->n)); /* sorted by name, duplicates refused */
    for (int i = 0; i < out->n; i++) rows[i] = (text_row){out->name[i], out->seq[i], out->len[i], out->line[i]};
    qsort(rows, (size_t)out->n, sizeof *rows, by_row_name);
    for (int i = 0; i < out->n; i++) {
        out->name[i] = rows[i].name;
        out->seq[i] = rows[i].seq;
        out->len[i] = rows[i].len;
        out->line[i] = rows[i].line;
    }
    for (int i = 1; i < out->n; i++)
        if (!strcmp(out->name[i], out->name[i - 1])) {
            int a = out->line[i - 1] < out->line[i] ? out->line[i - 1] : out->line[i];
            int b = out->line[i - 1] < out->line[i] ? out->line[i] : out->line[i - 1];
            FAIL(PTQ_ERR_FORMAT, "%s:%d: %s is labelled twice (line %d too)", out->path, b, out->name[i], a);
        }
done:
    free(buf);
    free(rows);
    if (st != PTQ_OK) io_text_labels_free(out);
    return st;
}

int io_text_labels_find(io_text_labels *l, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t k = strlen(base);
    if (l->kind == IO_LABELS_TEXT) {
        const char *dot = strrchr(base, '.');
        if (dot) k = (size_t)(dot - base);
    }
    int lo = 0, hi = l->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strncmp(l->name[mid], base, k);
        if (!c && l->name[mid][k]) c = 1;
        if (!c) {
            l->used[mid] = 1;
            return mid;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* ---- a segmenter's masks ---- */

ptq_status io_mask_labels_open(const char *spec, io_mask_labels *out)
{
    ptq_status st = PTQ_OK;
    const char *dir;
    memset(out, 0, sizeof *out);
    if (io_labels_parse(spec, &dir) != IO_LABELS_MASK)
        FAIL(PTQ_ERR_ARG, "--labels %s: a segmenter's masks are mask:DIR or mask:DIR:ignore=V", spec);
    out->ignore = 255;
    const char *ig = strstr(dir, ":ignore=");
    size_t n = ig ? (size_t)(ig - dir) : strlen(dir);
    if (ig) {
        char *end;
        long v = strtol(ig + 8, &end, 10);
        if (end == ig + 8 || *end || v < 0 || v > 255)
            FAIL(PTQ_ERR_ARG, "--labels %s: ignore=%s is not a pixel value 0..255", spec, ig + 8);
        out->ignore = (int)v;
    }
    if (!n) FAIL(PTQ_ERR_ARG, "--labels %s: no folder after mask:", spec);
    CHECK_ALLOC(out->dir = malloc(n + 1));
    memcpy(out->dir, dir, n);
    out->dir[n] = 0;
    DIR *d = opendir(out->dir);
    if (!d) FAIL(PTQ_ERR_IO, "%s: --labels mask:DIR needs a folder of masks (one STEM.png per image)", out->dir);
    closedir(d);
done:
    if (st != PTQ_OK) io_mask_labels_free(out);
    return st;
}

void io_mask_labels_free(io_mask_labels *l)
{
    if (!l) return;
    free(l->dir);
    memset(l, 0, sizeof *l);
}

void io_mask_path(const io_mask_labels *l, const char *image_path, char *buf, size_t cap)
{
    const char *base = strrchr(image_path, '/');
    base = base ? base + 1 : image_path;
    const char *dot = strrchr(base, '.');
    int k = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    snprintf(buf, cap, "%s/%.*s.png", l->dir, k, base);
}


enum { MASK_MAX_PIXELS = 1 << 28 };

ptq_status io_mask_read(const io_mask_labels *l, const char *image_path, uint8_t **out, int *w, int *h)
{
    ptq_status st = PTQ_OK;
    char path[4096];
    uint8_t *buf = NULL;
    size_t len = 0;
    *out = NULL;
    io_mask_path(l, image_path, path, sizeof path);
    FILE *probe = fopen(path, "rb");
    if (!probe) FAIL(PTQ_ERR_IO, "%s: no mask for %s (--labels mask:%s needs one STEM.png per image)", path, image_path, l->dir);
    fclose(probe);
    TRY(io_read_file(path, &buf, &len, LABEL_FILE_MAX));
    TRY(io_mask_decode(buf, len, path, MASK_MAX_PIXELS, out, w, h));
done:
    free(buf);
    return st;
}

ptq_status io_mask_decode(const uint8_t *buf, size_t len, const char *path, uint64_t max_pixels, uint8_t **out, int *w,
                          int *h)
{
    ptq_status st = PTQ_OK;
    *out = NULL;
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    if (len < 8 || memcmp(buf, sig, 8)) FAIL(PTQ_ERR_FORMAT, "%s: a mask is a PNG file", path);
    /* every chunk must fit in the file (libpng allocates a chunk's declared length before reading it) */
    for (size_t pos = 8; pos + 8 <= len;) {
        uint32_t n = (uint32_t)buf[pos] << 24 | (uint32_t)buf[pos + 1] << 16 | (uint32_t)buf[pos + 2] << 8 | buf[pos + 3];
        if ((size_t)n > len - pos - 8)
            FAIL(PTQ_ERR_FORMAT, "%s: corrupt PNG: chunk '%.4s' claims %u bytes, %zu are left", path, (const char *)buf + pos + 4,
                 n, len - pos - 8);
        if (!memcmp(buf + pos + 4, "IEND", 4)) break;
        pos += 12 + (size_t)n;
    }
    io_png_src src = {buf, len, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, io_png_on_error, io_png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    uint8_t *volatile pix = NULL;
    png_bytep *volatile rows = NULL;
    volatile ptq_status vst = PTQ_OK;
    if (!png || !info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        FAIL(PTQ_ERR_NOMEM, "%s: out of memory for the PNG reader", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        ptq_error("%s: corrupt PNG: %s", path, src.msg[0] ? src.msg : "cannot read");
        vst = PTQ_ERR_FORMAT;
        goto png_done;
    }
    png_set_read_fn(png, &src, io_png_read_mem);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_set_chunk_malloc_max(png, (png_alloc_size_t)16 << 20);
    png_read_info(png, info);
    png_uint_32 pw = png_get_image_width(png, info), ph = png_get_image_height(png, info);
    int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if ((uint64_t)pw * ph > max_pixels || !pw || !ph) {
        ptq_error("%s: mask of %ux%u pixels refused (limit %llu pixels)", path, (unsigned)pw, (unsigned)ph,
                  (unsigned long long)max_pixels);
        vst = PTQ_ERR_FORMAT;
        goto png_done;
    }
    if (color != PNG_COLOR_TYPE_GRAY && color != PNG_COLOR_TYPE_PALETTE) {
        ptq_error("%s: a mask is 8-bit grayscale or a palette PNG of class indices, not %s", path,
                  color == PNG_COLOR_TYPE_RGB ? "RGB" : color == PNG_COLOR_TYPE_RGB_ALPHA ? "RGBA" : "gray with alpha");
        vst = PTQ_ERR_FORMAT;
        goto png_done;
    }
    if (depth == 16) {
        ptq_error("%s: a mask is 8-bit grayscale or a palette PNG of class indices, not 16-bit", path);
        vst = PTQ_ERR_FORMAT;
        goto png_done;
    }
    if (depth < 8) png_set_packing(png); /* one byte per pixel, the value itself (not scaled) */
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != pw) {
        ptq_error("%s: PNG layout not reducible to one byte per pixel", path);
        vst = PTQ_ERR_UNSUPPORTED;
        goto png_done;
    }
    pix = malloc((size_t)pw * ph);
    rows = malloc(sizeof *rows * ph);
    if (!pix || !rows) {
        ptq_error("%s: out of memory for a %ux%u mask", path, (unsigned)pw, (unsigned)ph);
        vst = PTQ_ERR_NOMEM;
        goto png_done;
    }
    for (png_uint_32 y = 0; y < ph; y++) rows[y] = pix + (size_t)y * pw;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    *out = pix;
    *w = (int)pw;
    *h = (int)ph;
    pix = NULL;
png_done:
    png_destroy_read_struct(&png, &info, NULL);
    free(pix);
    free(rows);
    st = vst;
done:
    return st;
}
