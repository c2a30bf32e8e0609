/* labels_poly.c: a text detector's polygons, paddledet:FILE (see labels.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io/file.h"
#include "io/labels.h"
#include "runtime/graph.h"

enum { POLY_FILE_MAX = 1 << 30, POLY_MAX_POINTS = 1 << 16 };

void io_poly_labels_free(io_poly_labels *l)
{
    if (!l) return;
    for (int i = 0; l->img && i < l->n_img; i++) {
        free(l->img[i].name);
        free(l->img[i].npt);
        free(l->img[i].xy);
        free(l->img[i].care);
    }
    free(l->img);
    free(l->path);
    memset(l, 0, sizeof *l);
}

static int by_poly_name(const void *a, const void *b)
{
    return strcmp(((const io_image_polys *)a)->name, ((const io_image_polys *)b)->name);
}

/* One line's JSON list of {"transcription", "points"} into b. */
static ptq_status poly_line(io_image_polys *b, const char *json, size_t len, const char *path, int line_no)
{
    ptq_status st = PTQ_OK;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *e = cJSON_GetErrorPtr();
        FAIL(PTQ_ERR_FORMAT, "%s:%d: the text after the tab is not JSON (near byte %ld of it)", path, line_no,
             e && e >= json && e <= json + len ? (long)(e - json) + 1 : 1L);
    }
    if (!cJSON_IsArray(root))
        FAIL(PTQ_ERR_FORMAT, "%s:%d: expected a JSON list of {\"transcription\", \"points\"} after the tab", path, line_no);
    int n = cJSON_GetArraySize(root);
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        const cJSON *o = cJSON_GetArrayItem(root, k), *pts = cJSON_GetObjectItemCaseSensitive(o, "points");
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(o, "transcription");
        if (!cJSON_IsObject(o) || !cJSON_IsArray(pts))
            FAIL(PTQ_ERR_FORMAT, "%s:%d: polygon %d has no \"points\" list", path, line_no, k);
        if (tr && !cJSON_IsString(tr))
            FAIL(PTQ_ERR_FORMAT, "%s:%d: polygon %d: \"transcription\" is not a string", path, line_no, k);
        int np = cJSON_GetArraySize(pts);
        if (np < 4 || np > POLY_MAX_POINTS)
            FAIL(PTQ_ERR_FORMAT, "%s:%d: polygon %d has %d points (4 to %d)", path, line_no, k, np, POLY_MAX_POINTS);
        total += (size_t)np;
    }
    b->n = n;
    b->npt = malloc(sizeof *b->npt * (size_t)(n + 1));
    b->care = malloc(sizeof *b->care * (size_t)(n + 1));
    b->xy = malloc(sizeof *b->xy * 2 * (total + 1));
    CHECK_ALLOC(b->npt && b->care && b->xy ? b->npt : NULL);
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        const cJSON *o = cJSON_GetArrayItem(root, k), *pts = cJSON_GetObjectItemCaseSensitive(o, "points");
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(o, "transcription");
        /* PaddleOCR's DetLabelEncode: "*" and "###" are don't-care regions */
        b->care[k] = !(tr && (!strcmp(tr->valuestring, "###") || !strcmp(tr->valuestring, "*")));
        b->npt[k] = cJSON_GetArraySize(pts);
        for (int j = 0; j < b->npt[k]; j++, at++) {
            const cJSON *p = cJSON_GetArrayItem(pts, j);
            const cJSON *x = cJSON_GetArrayItem(p, 0), *y = cJSON_GetArrayItem(p, 1);
            if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsNumber(x) || !cJSON_IsNumber(y) ||
                !isfinite(x->valuedouble) || !isfinite(y->valuedouble) || fabs(x->valuedouble) > 1e9 ||
                fabs(y->valuedouble) > 1e9)
                FAIL(PTQ_ERR_FORMAT, "%s:%d: polygon %d, point %d is not [x, y] of finite numbers", path, line_no, k, j);
            b->xy[2 * at] = x->valuedouble;
            b->xy[2 * at + 1] = y->valuedouble;
        }
    }
done:
    cJSON_Delete(root);
    return st;
}

ptq_status io_poly_labels_parse(const char *buf, size_t len, const char *path, io_poly_labels *out)
{
    ptq_status st = PTQ_OK;
    char *text = malloc(len + 1);
    CHECK_ALLOC(text);
    memcpy(text, buf, len);
    text[len] = 0;
    const char *nul = memchr(buf, 0, len);
    if (nul) {
        int at = 1;
        for (const char *c = buf; c < nul; c++) at += *c == '\n';
        FAIL(PTQ_ERR_FORMAT, "%s:%d: a NUL byte (a label list is text)", path, at);
    }
    int line_no = 0;
    size_t k;
    for (char *cur = text, *line; (line = io_text_line(&cur, 0, &line_no, &k));) {
        if (!k) continue;
        char *tab = strchr(line, '\t');
        if (!tab || tab == line) FAIL(PTQ_ERR_FORMAT, "%s:%d: expected 'image<TAB>[{\"transcription\": ..., \"points\": "
                                      "[[x, y], ...]}, ...]'", path, line_no);
        *tab = 0;
        const char *base = strrchr(line, '/');
        base = base ? base + 1 : line;
        if (!*base) FAIL(PTQ_ERR_FORMAT, "%s:%d: no image name before the tab", path, line_no);
        io_image_polys *p = realloc(out->img, sizeof *p * (size_t)(out->n_img + 1));
        CHECK_ALLOC(p);
        out->img = p;
        io_image_polys *b = &out->img[out->n_img++];
        memset(b, 0, sizeof *b);
        b->line = line_no;
        CHECK_ALLOC(b->name = ptq_strdup(base));
        TRY(poly_line(b, tab + 1, k - (size_t)(tab + 1 - line), path, line_no));
    }
    if (!out->n_img) FAIL(PTQ_ERR_FORMAT, "%s: no label line", path);
    qsort(out->img, (size_t)out->n_img, sizeof *out->img, by_poly_name);
    for (int i = 1; i < out->n_img; i++)
        if (!strcmp(out->img[i].name, out->img[i - 1].name)) {
            int a = out->img[i - 1].line < out->img[i].line ? out->img[i - 1].line : out->img[i].line;
            int b = out->img[i - 1].line < out->img[i].line ? out->img[i].line : out->img[i - 1].line;
            FAIL(PTQ_ERR_FORMAT, "%s:%d: %s is labelled twice (line %d too)", path, b, out->img[i].name, a);
        }
done:
    free(text);
    return st;
}

ptq_status io_poly_labels_load(const char *spec, io_poly_labels *out)
{
    ptq_status st = PTQ_OK;
    const char *path;
    uint8_t *buf = NULL;
    size_t len;
    memset(out, 0, sizeof *out);
    if (io_labels_parse(spec, &path) != IO_LABELS_PADDLEDET || !*path)
        FAIL(PTQ_ERR_ARG, "--labels %s: a text detector's labels are paddledet:FILE", spec);
    CHECK_ALLOC(out->path = ptq_strdup(path));
    TRY(io_read_file(path, &buf, &len, POLY_FILE_MAX));
    TRY(io_poly_labels_parse((const char *)buf, len, path, out));
done:
    free(buf);
    if (st != PTQ_OK) io_poly_labels_free(out);
    return st;
}

io_image_polys *io_poly_labels_find(io_poly_labels *l, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int lo = 0, hi = l->n_img - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(l->img[mid].name, base);
        if (!c) {
            l->img[mid].used = 1;
            return &l->img[mid];
        }
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}
