/* report.c: the JSON and HTML reports of `ptq compare` (layout in report.h).
 *
 * JSON: a cJSON tree printed once and written atomically. HTML: streamed with fprintf into an
 * atomic temporary file (write errors surface at commit through ferror); charts are inline SVG
 * drawn here in a fixed viewBox and scaled by CSS, so the page needs nothing but itself. */
#include "report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "io/json.h"

#define DASH "\xe2\x80\x93" /* "–": a missing value */
#define INF "\xe2\x88\x9e"  /* "∞" */
#define MINUS "\xe2\x88\x92" /* "−" */
#define NODES_FILE "excluded-nodes.txt"

/* ---------- checks shared by both writers ---------- */

static ptq_status check_report(const char *path, const io_report *r)
{
    ptq_status st = PTQ_OK;
    if (!path || !r) FAIL(PTQ_ERR_ARG, "report: NULL %s", path ? "report" : "path");
    if (r->n_methods < 0 || (r->n_methods && !r->methods)) FAIL(PTQ_ERR_ARG, "%s: %d methods without an array", path, r->n_methods);
    if (r->n_refinements < 0 || (r->n_refinements && !r->refinements))
        FAIL(PTQ_ERR_ARG, "%s: %d refinement rows without an array", path, r->n_refinements);
    if (r->n_layers < 0 || (r->n_layers && !r->layers)) FAIL(PTQ_ERR_ARG, "%s: %d layers without an array", path, r->n_layers);
    if (r->n_hists < 0 || (r->n_hists && !r->hists)) FAIL(PTQ_ERR_ARG, "%s: %d histograms without an array", path, r->n_hists);
    for (int i = 0; i < r->n_hists; i++) {
        const io_report_hist *h = &r->hists[i];
        if (h->n_bins < 0 || (h->n_bins && !h->bins))
            FAIL(PTQ_ERR_ARG, "%s: histogram %d ('%s'): %d bins without an array", path, i, h->tensor ? h->tensor : "", h->n_bins);
        if (h->n_thresholds < 0 || (h->n_thresholds && (!h->thresholds || !h->threshold_methods)))
            FAIL(PTQ_ERR_ARG, "%s: histogram %d ('%s'): %d thresholds without arrays", path, i, h->tensor ? h->tensor : "",
                 h->n_thresholds);
    }
    const io_report_exclusion *e = r->exclusion;
    if (e && (e->n_excluded < 0 || (e->n_excluded && !e->excluded_nodes)))
        FAIL(PTQ_ERR_ARG, "%s: %d excluded nodes without an array", path, e->n_excluded);
done:
    return st;
}

/* ---------- the ptq --exclude-nodes option for a node list ---------- */

/* One name as an fnmatch pattern matching only itself: glob characters escaped, and a leading
 * '@', '#' or space escaped (they would mean a file, a comment, or be stripped). CR and LF
 * cannot pass through a line-based file: they become '?'. Returns a malloc'd string. */
static char *glob_escape(const char *name)
{
    size_t n = strlen(name);
    char *out = malloc(2 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c == '\n' || c == '\r') {
            *o++ = '?';
            continue;
        }
        if (c == '*' || c == '?' || c == '[' || c == '\\' || (i == 0 && (c == '@' || c == '#' || c == ' '))) *o++ = '\\';
        *o++ = c;
    }
    *o = 0;
    return out;
}

/* Whether the comma list can carry these names (no name holds a ','). */
static int names_fit_comma_list(const io_report_exclusion *e)
{
    for (int i = 0; i < e->n_excluded; i++)
        if (e->excluded_nodes[i] && strchr(e->excluded_nodes[i], ',')) return 0;
    return 1;
}

/* "--exclude-nodes 'a,b'" (single-quoted for sh when needed), "--exclude-nodes @excluded-nodes.txt"
 * when a name holds a ',', NULL (no error) for an empty list; *st = NOMEM on failure. */
static char *ptq_exclude_args(const io_report_exclusion *e, ptq_status *st)
{
    *st = PTQ_OK;
    if (!e || e->n_excluded == 0) return NULL;
    if (!names_fit_comma_list(e)) {
        char *s = malloc(sizeof "--exclude-nodes @" NODES_FILE);
        if (s) strcpy(s, "--exclude-nodes @" NODES_FILE);
        else *st = PTQ_ERR_NOMEM;
        return s;
    }
    size_t cap = 64, len = 0;
    char *list = malloc(cap), *out = NULL;
    if (!list) goto nomem;
    list[0] = 0;
    for (int i = 0; i < e->n_excluded; i++) {
        char *esc = glob_escape(e->excluded_nodes[i] ? e->excluded_nodes[i] : "");
        if (!esc) goto nomem;
        size_t n = strlen(esc);
        if (len + n + 2 > cap) {
            while (len + n + 2 > cap) cap *= 2;
            char *grown = realloc(list, cap);
            if (!grown) {
                free(esc);
                goto nomem;
            }
            list = grown;
        }
        if (i) list[len++] = ',';
        memcpy(list + len, esc, n + 1);
        len += n;
        free(esc);
    }
    int plain = 1;
    for (const char *p = list; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/:=,+-", *p)) plain = 0;
    /* quoted: each ' becomes '\'' */
    out = malloc(sizeof "--exclude-nodes ''" + 4 * len);
    if (!out) goto nomem;
    char *o = out + sprintf(out, "--exclude-nodes %s", plain ? "" : "'");
    for (const char *p = list; *p; p++) {
        if (*p == '\'' && !plain) o += sprintf(o, "'\\''");
        else *o++ = *p;
    }
    if (!plain) *o++ = '\'';
    *o = 0;
    free(list);
    return out;
nomem:
    free(list);
    *st = PTQ_ERR_NOMEM;
    return NULL;
}

/* ---------- JSON ---------- */

/* A number that reads back exactly, in the fewest digits (cJSON's own printer accepts
 * 15 digits that are only close); null when not finite. */
static cJSON *num_item(double v)
{
    char buf[40];
    if (!isfinite(v)) return cJSON_CreateNull();
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    return cJSON_CreateRaw(buf);
}

static int add_num(cJSON *o, const char *key, double v)
{
    cJSON *item = num_item(v);
    if (!item) return 0;
    cJSON_AddItemToObject(o, key, item);
    return 1;
}

static int add_str(cJSON *o, const char *key, const char *s)
{
    return (s ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key)) != NULL;
}

static int add_item(cJSON *array, cJSON *item)
{
    if (!item) return 0;
    cJSON_AddItemToArray(array, item);
    return 1;
}

/* An array of method rows under key. */
/* Two intervals [lo, hi] under their keys; one whose lo is NaN is left out. */
static int add_pairs(cJSON *o, const char *k1, const double *v1, const char *k2, const double *v2)
{
    const char *keys[2] = {k1, k2};
    const double *v[2] = {v1, v2};
    int ok = 1;
    for (int k = 0; k < 2 && ok; k++) {
        if (isnan(v[k][0])) continue;
        cJSON *a = cJSON_AddArrayToObject(o, keys[k]);
        ok = a && add_item(a, num_item(v[k][0])) && add_item(a, num_item(v[k][1]));
    }
    return ok;
}

/* mAP and per-class AP (nulls for classes without ground truth) with their intervals, CER and line
 * accuracy, mIoU and per-class IoU, or top-1 accuracy, into o. */
static int add_map(cJSON *o, const io_report_truth *m)
{
    if (m->has_top1) /* a classifier with labels: top-1 accuracy and its intervals */
        return add_num(o, "top1_acc", m->top1_acc) && add_pairs(o, "top1_ci", m->top1_ci, "top1_delta_ci", m->top1_delta_ci);
    if (m->has_hmean) { /* a text detector: DetMetric's hmean, precision, recall, their intervals, FP32's boxes */
        int ok = add_num(o, "hmean", m->hmean) && add_num(o, "precision", m->det_precision) &&
                 add_num(o, "recall", m->det_recall) &&
                 add_pairs(o, "hmean_ci", m->hmean_ci, "hmean_delta_ci", m->hmean_delta_ci) &&
                 add_pairs(o, "precision_ci", m->det_precision_ci, "precision_delta_ci", m->det_precision_delta_ci) &&
                 add_pairs(o, "recall_ci", m->det_recall_ci, "recall_delta_ci", m->det_recall_delta_ci);
        cJSON *imgs = ok && m->n_box_img > 0 ? cJSON_AddArrayToObject(o, "boxes") : NULL;
        if (ok && m->n_box_img > 0 && !imgs) return 0;
        for (int i = 0; ok && i < m->n_box_img; i++) {
            cJSON *e = cJSON_CreateObject(), *bl = NULL;
            ok = add_item(imgs, e) && cJSON_AddStringToObject(e, "image", m->box_img[i]) &&
                 (bl = cJSON_AddArrayToObject(e, "boxes"));
            for (int b = 0; ok && b < m->box_n[i]; b++) {
                cJSON *box = cJSON_CreateArray();
                ok = add_item(bl, box);
                for (int c = 0; ok && c < 4; c++) {
                    cJSON *pt = cJSON_CreateArray();
                    ok = add_item(box, pt) && add_item(pt, num_item(m->box_xy[i][8 * b + 2 * c])) &&
                         add_item(pt, num_item(m->box_xy[i][8 * b + 2 * c + 1]));
                }
            }
        }
        return ok;
    }
    if (m->n_iou > 0) { /* a segmenter: mIoU, its intervals, per-class IoU */
        int ok = add_num(o, "miou", m->miou) && add_pairs(o, "miou_ci", m->miou_ci, "miou_delta_ci", m->miou_delta_ci);
        cJSON *a = ok ? cJSON_AddArrayToObject(o, "iou") : NULL;
        if (!a) return 0;
        for (int k = 0; k < m->n_iou && ok; k++) ok &= add_item(a, num_item((double)m->iou[k]));
        return ok;
    }
    if (!isnan(m->cer)) {
        int ok = add_num(o, "cer", m->cer) && add_num(o, "line_acc", m->line_acc);
        const char *keys[4] = {"cer_ci", "line_acc_ci", "cer_delta_ci", "line_acc_delta_ci"};
        const double *v[4] = {m->cer_ci, m->line_acc_ci, m->cer_delta_ci, m->line_acc_delta_ci};
        for (int k = 0; k < 4 && ok; k++) {
            if (isnan(v[k][0])) continue;
            cJSON *a = cJSON_AddArrayToObject(o, keys[k]);
            ok = a && add_item(a, num_item(v[k][0])) && add_item(a, num_item(v[k][1]));
        }
        return ok;
    }
    int ok = add_num(o, "map50", m->map50) && add_num(o, "map", m->map) &&
             add_pairs(o, "map50_ci", m->map50_ci, "map_ci", m->map_ci) &&
             add_pairs(o, "map50_delta_ci", m->map50_delta_ci, "map_delta_ci", m->map_delta_ci);
    cJSON *a50 = ok ? cJSON_AddArrayToObject(o, "ap50") : NULL, *a = a50 ? cJSON_AddArrayToObject(o, "ap") : NULL;
    if (!a) return 0;
    for (int k = 0; k < m->n_ap && ok; k++) {
        ok &= add_item(a50, num_item((double)m->ap50[k]));
        ok &= add_item(a, num_item((double)m->ap[k]));
    }
    return ok;
}

static int add_methods(cJSON *root, const char *key, const io_report_method *ms, const io_report_truth *maps, int n)
{
    int ok = 1;
    cJSON *arr = cJSON_AddArrayToObject(root, key);
    if (!arr) return 0;
    for (int i = 0; i < n && ok; i++) {
        const io_report_method *m = &ms[i];
        cJSON *o = cJSON_CreateObject();
        ok &= add_item(arr, o);
        if (!ok) break;
        ok &= add_str(o, "method", m->method);
        ok &= add_num(o, "cosine", m->cosine);
        ok &= add_num(o, "sqnr_db", m->sqnr_db);
        ok &= add_num(o, "max_abs", m->max_abs);
        ok &= add_num(o, "top1_agree", m->top1_agree);
        ok &= add_num(o, "top1_acc", m->top1_acc);
        ok &= add_num(o, "seq_top1", m->seq_top1);
        ok &= add_num(o, "seq_chars", m->seq_chars);
        ok &= add_num(o, "seq_exact", m->seq_exact);
        ok &= add_num(o, "mask_iou", m->mask_iou);
        ok &= add_num(o, "mask_threshold", isnan(m->mask_iou) ? (double)NAN : m->mask_threshold);
        ok &= add_num(o, "box_f1", m->box_f1);
        if (maps) ok &= add_map(o, &maps[i]);
    }
    return ok;
}

ptq_status io_report_write_json(const char *path, const io_report *r)
{
    ptq_status st = PTQ_OK;
    cJSON *root = NULL;
    char *args = NULL;
    int ok = 1;
    TRY(check_report(path, r));
    root = cJSON_CreateObject();
    CHECK_ALLOC(root);
    ok &= add_str(root, "format", "ptq-compare");
    ok &= add_num(root, "version", 1);
    ok &= add_str(root, "model", r->model);
    ok &= add_str(root, "preset", r->preset);
    ok &= add_str(root, "calib_images", r->calib_images);
    ok &= add_num(root, "n_calib", r->n_calib);
    ok &= add_str(root, "eval_images", r->eval_images);
    ok &= add_num(root, "n_eval", r->n_eval);
    ok &= add_str(root, "criterion", r->criterion);
    ok &= add_str(root, "best_method", r->best_method);
    ok &= add_str(root, "float_part", r->float_part);
    ok &= cJSON_AddBoolToObject(root, "as_is", r->as_is) != NULL;
    ok &= add_str(root, "base", r->base);
    ok &= add_methods(root, "methods", r->methods, r->method_maps, r->n_methods);
    ok &= add_methods(root, "refinements", r->refinements, r->refinement_maps, r->n_refinements);
    ok &= add_str(root, "labels", r->labels);
    if (r->fp32_map) { /* the FP32 model against the labels */
        cJSON *f = cJSON_AddObjectToObject(root, "fp32");
        ok &= f && add_map(f, r->fp32_map);
    }
    ok &= add_str(root, "layers_method", r->layers_method);
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    CHECK_ALLOC(layers);
    for (int i = 0; i < r->n_layers && ok; i++) {
        const io_report_layer *l = &r->layers[i];
        cJSON *o = cJSON_CreateObject();
        ok &= add_item(layers, o);
        if (!ok) break;
        ok &= add_num(o, "index", i);
        ok &= add_str(o, "tensor", l->tensor);
        ok &= add_str(o, "node", l->node);
        ok &= add_str(o, "op_type", l->op_type);
        ok &= add_num(o, "acc_sqnr_db", l->acc_sqnr_db);
        ok &= add_num(o, "acc_cosine", l->acc_cosine);
        ok &= add_num(o, "iso_sqnr_db", l->iso_sqnr_db);
        ok &= add_num(o, "iso_cosine", l->iso_cosine);
    }
    cJSON *hists = cJSON_AddArrayToObject(root, "histograms");
    CHECK_ALLOC(hists);
    for (int i = 0; i < r->n_hists && ok; i++) {
        const io_report_hist *h = &r->hists[i];
        cJSON *o = cJSON_CreateObject();
        ok &= add_item(hists, o);
        if (!ok) break;
        ok &= add_str(o, "tensor", h->tensor);
        ok &= add_num(o, "amax", h->amax);
        cJSON *bins = cJSON_AddArrayToObject(o, "bins");
        CHECK_ALLOC(bins);
        for (int b = 0; b < h->n_bins && ok; b++)
            ok &= add_item(bins, num_item(h->bins[b]));
        cJSON *th = cJSON_AddArrayToObject(o, "thresholds");
        CHECK_ALLOC(th);
        for (int t = 0; t < h->n_thresholds && ok; t++) {
            cJSON *to = cJSON_CreateObject();
            ok &= add_item(th, to);
            if (!ok) break;
            ok &= add_str(to, "method", h->threshold_methods[t]);
            ok &= add_num(to, "amax", h->thresholds[t]);
        }
    }
    if (!ok) FAIL(PTQ_ERR_NOMEM, "%s: out of memory building the JSON", path);
    const io_report_exclusion *e = r->exclusion;
    if (!e) {
        CHECK_ALLOC(cJSON_AddNullToObject(root, "exclusion"));
    } else {
        cJSON *o = cJSON_AddObjectToObject(root, "exclusion");
        CHECK_ALLOC(o);
        ok &= add_str(o, "target", e->target);
        ok &= add_num(o, "reached", e->reached);
        cJSON *nodes = cJSON_AddArrayToObject(o, "nodes");
        CHECK_ALLOC(nodes);
        for (int i = 0; i < e->n_excluded && ok; i++)
            ok &= add_item(nodes, e->excluded_nodes[i] ? cJSON_CreateString(e->excluded_nodes[i]) : cJSON_CreateNull());
        ok &= add_str(o, "trtexec_arg", e->trtexec_arg);
        args = ptq_exclude_args(e, &st);
        if (st != PTQ_OK) FAIL(st, "out of memory at %s:%d", __FILE__, __LINE__);
        ok &= add_str(o, "ptq_args", args);
        if (!ok) FAIL(PTQ_ERR_NOMEM, "%s: out of memory building the JSON", path);
    }
    TRY(io_json_write_atomic(path, root));
done:
    cJSON_Delete(root);
    free(args);
    return st;
}

/* ---------- HTML helpers ---------- */

/* Text or attribute value, escaped; NULL as "–". Control characters other than tab and
 * newline are parse errors in HTML: written as U+FFFD. */
static void put_esc(FILE *fp, const char *s)
{
    if (!s) {
        fputs(DASH, fp);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", fp); break;
        case '<': fputs("&lt;", fp); break;
        case '>': fputs("&gt;", fp); break;
        case '"': fputs("&quot;", fp); break;
        case '\'': fputs("&#39;", fp); break;
        default:
            if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7f) fputs("&#xFFFD;", fp);
            else fputc(*p, fp);
        }
    }
}

/* A number in printf format fmt; NaN as "–", ±Inf as "∞" / "−∞". */
static void put_num(FILE *fp, const char *fmt, double v)
{
    if (isnan(v)) fputs(DASH, fp);
    else if (isinf(v)) fputs(v > 0 ? INF : MINUS INF, fp);
    else fprintf(fp, fmt, v);
}

/* A fraction in [0, 1] as a percentage. */
static void put_pct(FILE *fp, double v)
{
    if (isfinite(v)) fprintf(fp, "%.2f%%", 100.0 * v);
    else put_num(fp, "%g", v);
}

/* Axis ticks: step of 1, 2 or 5 x 10^k giving about `target` intervals over [*lo, *hi];
 * *lo and *hi widen to multiples of the step. Returns the step. */
static double nice_step(double *lo, double *hi, int target)
{
    if (!(*hi > *lo)) {
        *lo -= 1;
        *hi += 1;
    }
    double rough = (*hi - *lo) / target, mag = pow(10, floor(log10(rough))), norm = rough / mag;
    double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
    *lo = floor(*lo / step + 1e-9) * step;
    *hi = ceil(*hi / step - 1e-9) * step;
    return step;
}

static const char *const PALETTE[] = {"#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
#define N_PALETTE (int)(sizeof PALETTE / sizeof PALETTE[0])

/* A method's colour: its position in the methods table, so every chart agrees. */
static const char *method_color(const io_report *r, const char *name, int fallback)
{
    for (int i = 0; name && i < r->n_methods; i++)
        if (r->methods[i].method && strcmp(r->methods[i].method, name) == 0) return PALETTE[i % N_PALETTE];
    return PALETTE[(r->n_methods + fallback) % N_PALETTE];
}

static const char CSS[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2em auto;max-width:1100px;"
    "padding:0 1em;color:#222;line-height:1.4}\n"
    "h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\n"
    "code,pre,.name{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,monospace;font-size:.9em}\n"
    ".name{overflow-wrap:anywhere}\n"
    "pre{background:#f5f5f5;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}\n"
    "table{border-collapse:collapse;margin:.5em 0}th,td{padding:.25em .6em;border-bottom:1px solid #e2e2e2;"
    "text-align:left;vertical-align:top}\n"
    "th{background:#f0f0f0}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}td.num{white-space:nowrap}\n"
    "table.layers{width:100%}table.layers td.name{min-width:13em}\n"
    "tr.best td{background:#e3f4e1;font-weight:600}tr.excluded td{background:#fdf1dc}\n"
    ".note{color:#666;font-size:.9em}\n"
    ".layers-wrap{max-height:32em;overflow-y:auto;border:1px solid #e2e2e2}\n"
    "svg.chart{width:100%;height:auto;display:block;margin:.5em 0;background:#fff}\n"
    "svg.chart text{font-size:12px;fill:#333}svg.chart .axis line,svg.chart .axis path{stroke:#444}\n"
    "svg.chart .grid line{stroke:#e6e6e6}svg.chart polyline{fill:none;stroke-width:1.6}\n"
    "svg.chart .acc{stroke:#1f77b4}svg.chart .iso{stroke:#ff7f0e}\n"
    "svg.chart circle.acc{fill:#1f77b4;stroke:none}svg.chart circle.iso{fill:#ff7f0e;stroke:none}\n"
    "svg.chart rect.bar{fill:#6b8fb5}svg.chart line.threshold{stroke-width:1.6;stroke-dasharray:5 3}\n"
    "figure{margin:1.5em 0}figcaption{font-size:.9em;color:#444}\n";

/* ---------- the layer-wise SQNR chart ---------- */

enum { LW = 960, LH = 380, LL = 62, LR = 20, LT = 34, LB = 52 };

/* y of a value on the SQNR axis; ±Inf pinned to the edges. */
static double sqnr_y(double v, double lo, double hi)
{
    if (v > hi) v = hi;
    if (v < lo) v = lo;
    return LT + (hi - v) / (hi - lo) * (LH - LT - LB);
}

static double layer_x(int i, int n)
{
    double w = LW - LL - LR;
    return n <= 1 ? LL + w / 2 : LL + w * i / (n - 1);
}

static void put_series(FILE *fp, const io_report *r, int iso, double lo, double hi)
{
    const char *cls = iso ? "iso" : "acc";
    int n = r->n_layers, open = 0;
    fprintf(fp, "<g class=\"series %s\">\n", cls);
    /* one polyline per run of non-NaN values */
    for (int i = 0; i < n; i++) {
        double v = iso ? r->layers[i].iso_sqnr_db : r->layers[i].acc_sqnr_db;
        if (isnan(v)) {
            if (open) fputs("\"/>\n", fp);
            open = 0;
            continue;
        }
        if (!open) fprintf(fp, "<polyline class=\"%s\" points=\"", cls);
        fprintf(fp, "%s%.1f,%.1f", open ? " " : "", layer_x(i, n), sqnr_y(v, lo, hi));
        open = 1;
    }
    if (open) fputs("\"/>\n", fp);
    for (int i = 0; i < n; i++) {
        const io_report_layer *l = &r->layers[i];
        double v = iso ? l->iso_sqnr_db : l->acc_sqnr_db, c = iso ? l->iso_cosine : l->acc_cosine;
        if (isnan(v)) continue;
        fprintf(fp, "<circle class=\"pt %s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%s\"><title>#%d ", cls, layer_x(i, n),
                sqnr_y(v, lo, hi), n > 150 ? "1.8" : "2.6", i);
        put_esc(fp, l->tensor);
        fputs(" (", fp);
        put_esc(fp, l->op_type);
        fputs(" ", fp);
        put_esc(fp, l->node);
        fprintf(fp, "): %s SQNR ", iso ? "isolated" : "accumulated");
        put_num(fp, "%.2f", v);
        fputs(" dB, cosine ", fp);
        put_num(fp, "%.6f", c);
        fputs("</title></circle>\n", fp);
    }
    fputs("</g>\n", fp);
}

static void put_layer_chart(FILE *fp, const io_report *r)
{
    int n = r->n_layers, finite = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        double v[2] = {r->layers[i].acc_sqnr_db, r->layers[i].iso_sqnr_db};
        for (int k = 0; k < 2; k++)
            if (isfinite(v[k])) { /* the axis spans at most ±1e6 dB; values beyond are pinned */
                lo = fmin(lo, fmax(v[k], -1e6));
                hi = fmax(hi, fmin(v[k], 1e6));
                finite++;
            }
    }
    if (!finite) lo = 0, hi = 1;
    double step = nice_step(&lo, &hi, 6);
    fprintf(fp, "<svg class=\"chart layer-sqnr\" viewBox=\"0 0 %d %d\" role=\"img\">\n", LW, LH);
    fputs("<title>SQNR per layer in execution order</title>\n", fp);
    /* grid and y axis */
    fputs("<g class=\"grid\">\n", fp);
    int nt = (int)lround((hi - lo) / step);
    for (int k = 0; k <= nt; k++)
        fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>\n", LL, LW - LR, sqnr_y(lo + k * step, lo, hi),
                sqnr_y(lo + k * step, lo, hi));
    fputs("</g>\n<g class=\"axis y\">\n", fp);
    fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n", LL, LL, LT, LH - LB);
    for (int k = 0; k <= nt; k++) {
        double t = lo + k * step, y = sqnr_y(t, lo, hi);
        fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>", LL - 5, LL, y, y);
        fprintf(fp, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", LL - 8, y + 4, fabs(t) < step * 1e-6 ? 0.0 : t);
    }
    fprintf(fp, "<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">SQNR (dB)</text>\n", (LT + LH - LB) / 2);
    fputs("</g>\n<g class=\"axis x\">\n", fp);
    fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n", LL, LW - LR, LH - LB, LH - LB);
    if (n > 0) {
        double xlo = 0, xhi = n - 1, xs = nice_step(&xlo, &xhi, 10);
        if (xs < 1) xs = 1;
        for (int k = 0; k * xs <= n - 1 + 1e-9; k++) {
            int t = (int)lround(k * xs);
            double x = layer_x(t, n);
            fprintf(fp, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>", x, x, LH - LB, LH - LB + 5);
            fprintf(fp, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", x, LH - LB + 18, t);
        }
    }
    fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">layer (execution order)</text>\n", (LL + LW - LR) / 2, LH - 10);
    fputs("</g>\n", fp);
    if (!finite)
        fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no finite SQNR value</text>\n", (LL + LW - LR) / 2,
                (LT + LH - LB) / 2);
    put_series(fp, r, 0, lo, hi);
    put_series(fp, r, 1, lo, hi);
    /* legend */
    fprintf(fp,
            "<g class=\"legend\">"
            "<line class=\"acc\" x1=\"%d\" x2=\"%d\" y1=\"14\" y2=\"14\" stroke-width=\"2\"/>"
            "<text x=\"%d\" y=\"18\">accumulated (every layer quantized)</text>"
            "<line class=\"iso\" x1=\"%d\" x2=\"%d\" y1=\"14\" y2=\"14\" stroke-width=\"2\"/>"
            "<text x=\"%d\" y=\"18\">isolated (this layer only)</text></g>\n",
            LL, LL + 24, LL + 30, LL + 280, LL + 304, LL + 310);
    fputs("</svg>\n", fp);
}

/* ---------- histograms ---------- */

enum { HW = 960, HH = 300, HL = 62, HR = 24, HB = 48, HMAXBARS = 240, HROW = 15 };

typedef struct {
    double x, v;
    int idx, row, right;
} th_label;

static int cmp_th(const void *a, const void *b)
{
    const th_label *p = a, *q = b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    return p->idx - q->idx;
}

static void put_decade(FILE *fp, int k)
{
    if (k >= 0 && k <= 3) fprintf(fp, "%.0f", pow(10, k));
    else fprintf(fp, "1e%d", k);
}

static ptq_status put_hist(FILE *fp, const io_report *r, const io_report_hist *h)
{
    ptq_status st = PTQ_OK;
    int nb = h->n_bins, group = nb > HMAXBARS ? (nb + HMAXBARS - 1) / HMAXBARS : 1, nbar = nb ? (nb + group - 1) / group : 0;
    double *bar = calloc((size_t)nbar + 1, sizeof *bar);
    th_label *lab = calloc((size_t)h->n_thresholds + 1, sizeof *lab);
    CHECK_ALLOC(bar);
    CHECK_ALLOC(lab);
    double minpos = INFINITY, maxv = 0;
    for (int i = 0; i < nb; i++) {
        double c = h->bins[i];
        if (isfinite(c) && c > 0) bar[i / group] += c;
    }
    for (int i = 0; i < nbar; i++)
        if (bar[i] > 0) {
            minpos = fmin(minpos, bar[i]);
            maxv = fmax(maxv, bar[i]);
        }
    int valid = isfinite(h->amax) && h->amax > 0 && maxv > 0;
    /* threshold labels: sorted by x, each in the first row where it does not overlap */
    int rows = 0, nl = 0;
    double row_end[64];
    for (int t = 0; valid && t < h->n_thresholds; t++) {
        double v = h->thresholds[t];
        if (isnan(v)) continue;
        double x = HL + fmin(fmax(v / h->amax, 0), 1) * (HW - HL - HR);
        lab[nl++] = (th_label){x, v, t, 0, 0};
    }
    qsort(lab, (size_t)nl, sizeof *lab, cmp_th);
    for (int i = 0; i < nl; i++) {
        const char *name = h->threshold_methods[lab[i].idx];
        double w = 7.0 * ((name ? strlen(name) : 1) + 10); /* "name 1.234" at ~7 px per character */
        lab[i].right = lab[i].x + w > HW;
        double a = lab[i].right ? lab[i].x - w : lab[i].x, b = lab[i].right ? lab[i].x : lab[i].x + w;
        int row = 0;
        while (row < rows && row_end[row] > a) row++;
        if (row == 64) row = 63;
        if (row == rows && rows < 64) rows++;
        row_end[row] = b + 4;
        lab[i].row = row;
    }
    int top = 14 + HROW * (rows ? rows : 1);
    int ht = valid ? HH + HROW * (rows > 1 ? rows - 1 : 0) : top + 40;
    double pw = HW - HL - HR, ph = ht - top - HB;
    fprintf(fp, "<svg class=\"chart hist\" viewBox=\"0 0 %d %d\" role=\"img\">\n<title>", HW, ht);
    fputs("histogram of |x| of ", fp);
    put_esc(fp, h->tensor);
    fputs("</title>\n", fp);
    if (!valid) {
        fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n</svg>\n", HW / 2, top + 20,
                nb == 0 || maxv <= 0 ? "empty histogram" : "no valid range (amax)");
        goto done;
    }
    /* log axis from half the smallest count (so it still shows) up to a whole decade; ticks at decades */
    double floor_l = log10(minpos) - 0.3;
    int dlo = (int)ceil(floor_l), dhi = (int)ceil(log10(maxv));
    if (dhi <= floor_l) dhi = (int)floor(floor_l) + 1;
    double span = dhi - floor_l;
    int dstep = (int)ceil(span / 8);
    fputs("<g class=\"grid\">\n", fp);
    for (int k = dlo; k <= dhi; k += dstep) {
        double y = top + ph * (dhi - k) / span;
        fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>\n", HL, HW - HR, y, y);
    }
    fputs("</g>\n<g class=\"bars\">\n", fp);
    for (int i = 0; i < nbar; i++) {
        if (bar[i] <= 0) continue;
        int b0 = i * group, b1 = b0 + group < nb ? b0 + group : nb;
        double x0 = HL + pw * b0 / nb, x1 = HL + pw * b1 / nb;
        double y = top + ph * (dhi - log10(bar[i])) / span;
        fprintf(fp, "<rect class=\"bar\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\"><title>|x| in [%.4g, %.4g): %.6g</title></rect>\n",
                x0, y, fmax(x1 - x0 - (pw / nbar > 3 ? 0.5 : 0), 0.3), top + ph - y, h->amax * b0 / nb, h->amax * b1 / nb, bar[i]);
    }
    fputs("</g>\n<g class=\"axis y\">\n", fp);
    fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%.1f\"/>\n", HL, HL, top, top + ph);
    for (int k = dlo; k <= dhi; k += dstep) {
        double y = top + ph * (dhi - k) / span;
        fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", HL - 5, HL, y, y,
                HL - 8, y + 4);
        put_decade(fp, k);
        fputs("</text>\n", fp);
    }
    fprintf(fp, "<text transform=\"translate(16 %.0f) rotate(-90)\" text-anchor=\"middle\">count (log)</text>\n", top + ph / 2);
    fputs("</g>\n<g class=\"axis x\">\n", fp);
    fprintf(fp, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>\n", HL, HW - HR, top + ph, top + ph);
    double xlo = 0, xhi = h->amax, xs = nice_step(&xlo, &xhi, 8);
    for (int k = 0; k * xs <= h->amax * (1 + 1e-9); k++) {
        double t = k * xs, x = HL + pw * t / h->amax;
        fprintf(fp, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                x, x, top + ph, top + ph + 5, x, top + ph + 18, t);
    }
    fprintf(fp, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">|x| (histogram range 0 to %.4g)</text>\n", (HL + HW - HR) / 2, ht - 8, h->amax);
    fputs("</g>\n<g class=\"thresholds\">\n", fp);
    for (int i = 0; i < nl; i++) {
        const char *name = h->threshold_methods[lab[i].idx], *color = method_color(r, name, lab[i].idx);
        double x = lab[i].x, ly = 12 + HROW * lab[i].row;
        fprintf(fp, "<g class=\"threshold\"><line class=\"threshold\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>", x, x,
                ly + 3, top + ph, color);
        fprintf(fp, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" style=\"fill:%s\">", lab[i].right ? x - 3 : x + 3, ly,
                lab[i].right ? "end" : "start", color);
        put_esc(fp, name);
        fputs(" ", fp);
        put_num(fp, "%.4g", lab[i].v);
        if (lab[i].v > h->amax) fputs(" \xe2\x86\x92", fp); /* "→": beyond the histogram */
        fputs("</text><title>", fp);
        put_esc(fp, name);
        fputs(": amax ", fp);
        put_num(fp, "%.6g", lab[i].v);
        fputs("</title></g>\n", fp);
    }
    fputs("</g>\n</svg>\n", fp);
done:
    free(bar);
    free(lab);
    return st;
}

/* ---------- the page ---------- */

typedef struct {
    double key;
    int idx;
} sort_key;

/* ascending, NaN last, ties in execution order */
static int cmp_key(const void *a, const void *b)
{
    const sort_key *p = a, *q = b;
    int pn = isnan(p->key), qn = isnan(q->key);
    if (pn != qn) return pn - qn;
    if (!pn && p->key != q->key) return p->key < q->key ? -1 : 1;
    return p->idx - q->idx;
}

static int is_excluded(const io_report *r, const char *node)
{
    const io_report_exclusion *e = r->exclusion;
    for (int i = 0; e && node && i < e->n_excluded; i++)
        if (e->excluded_nodes[i] && strcmp(e->excluded_nodes[i], node) == 0) return 1;
    return 0;
}

static void put_kv(FILE *fp, const char *key, const char *value)
{
    fprintf(fp, "<tr><th>%s</th><td class=\"name\">", key);
    put_esc(fp, value);
    fputs("</td></tr>\n", fp);
}

/* A numeric cell: v with fmt, or as a percentage when fmt is NULL. */
static void num_cell(FILE *fp, const char *fmt, double v)
{
    fputs("<td class=\"num\">", fp);
    if (fmt) put_num(fp, fmt, v);
    else put_pct(fp, v);
    fputs("</td>", fp);
}

/* A cell "v [lo, hi]" (signed: "+v [+lo, +hi]"); empty for NaN v. */
static void put_interval(FILE *fp, double v, const double *ci, int sign)
{
    fputs("<td class=\"num\">", fp);
    if (!isnan(v)) fprintf(fp, sign ? "%+.4f" : "%.4f", v);
    if (!isnan(v) && ci && !isnan(ci[0])) fprintf(fp, sign ? " [%+.4f, %+.4f]" : " [%.4f, %.4f]", ci[0], ci[1]);
    fputs("</td>", fp);
}

/* One row of the methods table (refined rows: class "refined"). */
static void put_method_row(FILE *fp, const io_report *r, const io_report_method *m, const io_report_truth *mp, int refined,
                           int agree, int acc, int seq, int ctc, int iou, int box)
{
    int best = !refined && r->best_method && m->method && strcmp(r->best_method, m->method) == 0;
    fprintf(fp, "<tr%s><td class=\"name\">", best ? " class=\"best\"" : refined ? " class=\"refined\"" : "");
    put_esc(fp, m->method);
    if (best) fputs(" \xe2\x98\x85", fp); /* "★" */
    fputs("</td>", fp);
    num_cell(fp, "%.6f", m->cosine);
    num_cell(fp, "%.2f", m->sqnr_db);
    num_cell(fp, "%.4g", m->max_abs);
    if (agree) num_cell(fp, NULL, m->top1_agree);
    if (acc) num_cell(fp, NULL, m->top1_acc);
    if (seq) num_cell(fp, NULL, m->seq_top1);
    if (ctc) {
        num_cell(fp, NULL, m->seq_chars);
        num_cell(fp, NULL, m->seq_exact);
    }
    if (iou) num_cell(fp, "%.4f", m->mask_iou);
    if (box) num_cell(fp, "%.4f", m->box_f1);
    if (r->fp32_map && r->fp32_map->has_hmean) {
        num_cell(fp, "%.4f", !mp ? (double)NAN : mp->det_precision);
        num_cell(fp, "%.4f", !mp ? (double)NAN : mp->det_recall);
        double v = !mp ? (double)NAN : mp->hmean;
        put_interval(fp, v, mp ? mp->hmean_ci : NULL, 0);
        put_interval(fp, v - r->fp32_map->hmean, mp ? mp->hmean_delta_ci : NULL, 1);
    } else if (r->fp32_map && (r->fp32_map->n_iou > 0 || r->fp32_map->has_top1)) {
        int seg = r->fp32_map->n_iou > 0;
        double v = !mp ? (double)NAN : seg ? mp->miou : mp->top1_acc, f = seg ? r->fp32_map->miou : r->fp32_map->top1_acc;
        put_interval(fp, v, mp ? (seg ? mp->miou_ci : mp->top1_ci) : NULL, 0);
        put_interval(fp, v - f, mp ? (seg ? mp->miou_delta_ci : mp->top1_delta_ci) : NULL, 1);
    } else if (r->fp32_map && !isnan(r->fp32_map->cer)) {
        num_cell(fp, "%.4f", !mp ? (double)NAN : mp->cer);
        num_cell(fp, "%.4f", !mp ? (double)NAN : mp->line_acc);
    } else if (r->fp32_map) { /* mAP with its interval and the difference's */
        put_interval(fp, mp ? mp->map50 : (double)NAN, mp ? mp->map50_ci : NULL, 0);
        put_interval(fp, mp ? mp->map : (double)NAN, mp ? mp->map_ci : NULL, 0);
        put_interval(fp, mp ? mp->map - r->fp32_map->map : (double)NAN, mp ? mp->map_delta_ci : NULL, 1);
    }
    fputs("</tr>\n", fp);
}

static void put_methods(FILE *fp, const io_report *r)
{
    int agree = 0, acc = 0, seq = 0, ctc = 0, iou = 0, box = 0;
    for (int i = 0; i < r->n_methods; i++) {
        agree |= !isnan(r->methods[i].top1_agree);
        acc |= !isnan(r->methods[i].top1_acc);
        seq |= !isnan(r->methods[i].seq_top1);
        ctc |= !isnan(r->methods[i].seq_chars);
        iou |= !isnan(r->methods[i].mask_iou);
        box |= !isnan(r->methods[i].box_f1);
    }
    fputs("<section id=\"methods\">\n<h2>Methods</h2>\n", fp);
    if (!r->n_methods) {
        fputs("<p class=\"note\">No method was evaluated.</p>\n</section>\n", fp);
        return;
    }
    fputs("<p class=\"note\">Model outputs of each calibration method against FP32 on the evaluation images.</p>\n", fp);
    fputs("<table class=\"methods\">\n<thead><tr><th>method</th><th class=\"num\">cosine</th><th class=\"num\">SQNR (dB)</th>"
          "<th class=\"num\">max |error|</th>",
          fp);
    if (agree) fputs("<th class=\"num\">top-1 agreement</th>", fp);
    if (acc) fputs("<th class=\"num\">top-1 accuracy</th>", fp);
    if (seq) fputs("<th class=\"num\">sequence top-1</th>", fp);
    if (ctc) fputs("<th class=\"num\">CTC characters</th><th class=\"num\">CTC lines identical</th>", fp);
    if (iou) fprintf(fp, "<th class=\"num\">mask IoU at %g</th>", r->methods[0].mask_threshold);
    if (box) fputs("<th class=\"num\">box F1</th>", fp);
    if (r->fp32_map && r->fp32_map->has_hmean)
        fputs("<th class=\"num\">precision</th><th class=\"num\">recall</th><th class=\"num\">hmean [95 %]</th>"
              "<th class=\"num\">minus FP32's [95 %]</th>", fp);
    else if (r->fp32_map && r->fp32_map->n_iou > 0)
        fputs("<th class=\"num\">mIoU [95 %]</th><th class=\"num\">minus FP32's [95 %]</th>", fp);
    else if (r->fp32_map && r->fp32_map->has_top1)
        fputs("<th class=\"num\">top-1 accuracy [95 %]</th><th class=\"num\">minus FP32's [95 %]</th>", fp);
    else if (r->fp32_map)
        fputs(isnan(r->fp32_map->cer) ? "<th class=\"num\">mAP50 [95 %]</th><th class=\"num\">mAP50-95 [95 %]</th>"
                                        "<th class=\"num\">mAP50-95 minus FP32's [95 %]</th>"
                                      : "<th class=\"num\">CER</th><th class=\"num\">lines exact</th>",
              fp);
    fputs("</tr></thead>\n<tbody>\n", fp);
    if (r->fp32_map) { /* FP32 against the labels: only its mAP */
        fputs("<tr class=\"refined\"><td class=\"name\">FP32</td>", fp);
        for (int i = 0; i < 3 + agree + acc + seq + 2 * ctc + iou + box; i++) fputs("<td class=\"num\"></td>", fp);
        int ocr = !isnan(r->fp32_map->cer);
        if (r->fp32_map->has_hmean) {
            num_cell(fp, "%.4f", r->fp32_map->det_precision);
            num_cell(fp, "%.4f", r->fp32_map->det_recall);
            put_interval(fp, r->fp32_map->hmean, r->fp32_map->hmean_ci, 0);
            fputs("<td class=\"num\"></td>", fp);
        } else if (r->fp32_map->n_iou > 0 || r->fp32_map->has_top1) {
            int seg = r->fp32_map->n_iou > 0;
            put_interval(fp, seg ? r->fp32_map->miou : r->fp32_map->top1_acc,
                         seg ? r->fp32_map->miou_ci : r->fp32_map->top1_ci, 0);
            fputs("<td class=\"num\"></td>", fp);
        } else if (ocr) {
            num_cell(fp, "%.4f", r->fp32_map->cer);
            num_cell(fp, "%.4f", r->fp32_map->line_acc);
        } else {
            put_interval(fp, r->fp32_map->map50, r->fp32_map->map50_ci, 0);
            put_interval(fp, r->fp32_map->map, r->fp32_map->map_ci, 0);
            fputs("<td class=\"num\"></td>", fp);
        }
        fputs("</tr>\n", fp);
    }
    for (int i = 0; i < r->n_methods; i++)
        put_method_row(fp, r, &r->methods[i], r->method_maps ? &r->method_maps[i] : NULL, 0, agree, acc, seq, ctc, iou, box);
    for (int i = 0; i < r->n_refinements; i++)
        put_method_row(fp, r, &r->refinements[i], r->refinement_maps ? &r->refinement_maps[i] : NULL, 1, agree, acc, seq, ctc,
                       iou, box);
    fputs("</tbody>\n</table>\n", fp);
    if (r->fp32_map && r->fp32_map->n_iou > 0 && r->method_maps) { /* a segmenter: IoU per class */
        fputs("<p class=\"note\">IoU per class against the masks (intersections and unions summed over the images; "
              "empty: the class is in neither the masks nor the predictions).</p>\n<table class=\"methods\">\n"
              "<thead><tr><th>class</th><th class=\"num\">FP32</th>", fp);
        for (int i = 0; i < r->n_methods; i++) {
            fputs("<th class=\"num\">", fp);
            put_esc(fp, r->methods[i].method);
            fputs("</th>", fp);
        }
        fputs("</tr></thead>\n<tbody>\n", fp);
        for (int c = 0; c < r->fp32_map->n_iou; c++) {
            fprintf(fp, "<tr><td class=\"name\">%d</td>", c);
            num_cell(fp, "%.4f", (double)r->fp32_map->iou[c]);
            for (int i = 0; i < r->n_methods; i++)
                num_cell(fp, "%.4f", c < r->method_maps[i].n_iou ? (double)r->method_maps[i].iou[c] : (double)NAN);
            fputs("</tr>\n", fp);
        }
        fputs("</tbody>\n</table>\n", fp);
    }
    fputs("</section>\n", fp);
}

static ptq_status put_layers(FILE *fp, const io_report *r)
{
    ptq_status st = PTQ_OK;
    sort_key *keys = NULL;
    fputs("<section id=\"layers\">\n<h2>Layer-wise SQNR", fp);
    if (r->layers_method) {
        fputs(" (", fp);
        put_esc(fp, r->layers_method);
        fputs(")", fp);
    }
    fputs("</h2>\n", fp);
    if (r->n_layers)
        fputs("<p class=\"note\">Each quantized tensor against FP32: <em>accumulated</em> with every layer up to it "
          "quantized, <em>isolated</em> with only its own layer quantized. A drop in the isolated curve points at the "
          "layer that loses precision; hover a point for its tensor.</p>\n",
          fp);
    if (!r->n_layers) {
        fputs("<p class=\"note\">No layer-wise numbers in this report.</p>\n</section>\n", fp);
        return st;
    }
    put_layer_chart(fp, r);
    keys = malloc(sizeof *keys * (size_t)r->n_layers);
    CHECK_ALLOC(keys);
    for (int i = 0; i < r->n_layers; i++) keys[i] = (sort_key){r->layers[i].iso_sqnr_db, i};
    qsort(keys, (size_t)r->n_layers, sizeof *keys, cmp_key);
    fputs("<h3>Layers, worst isolated SQNR first</h3>\n<div class=\"layers-wrap\">\n<table class=\"layers\">\n"
          "<thead><tr><th class=\"num\">#</th><th>tensor</th><th>node</th><th>op</th><th class=\"num\">isolated SQNR (dB)</th>"
          "<th class=\"num\">isolated cosine</th><th class=\"num\">accumulated SQNR (dB)</th><th class=\"num\">accumulated cosine</th>"
          "</tr></thead>\n<tbody>\n",
          fp);
    for (int k = 0; k < r->n_layers; k++) {
        const io_report_layer *l = &r->layers[keys[k].idx];
        int ex = is_excluded(r, l->node);
        fprintf(fp, "<tr%s><td class=\"num\">%d</td><td class=\"name\">", ex ? " class=\"excluded\"" : "", keys[k].idx);
        put_esc(fp, l->tensor);
        fputs("</td><td class=\"name\">", fp);
        put_esc(fp, l->node);
        if (ex) fputs(" (excluded)", fp);
        fputs("</td><td>", fp);
        put_esc(fp, l->op_type);
        fputs("</td><td class=\"num\">", fp);
        put_num(fp, "%.2f", l->iso_sqnr_db);
        fputs("</td><td class=\"num\">", fp);
        put_num(fp, "%.6f", l->iso_cosine);
        fputs("</td><td class=\"num\">", fp);
        put_num(fp, "%.2f", l->acc_sqnr_db);
        fputs("</td><td class=\"num\">", fp);
        put_num(fp, "%.6f", l->acc_cosine);
        fputs("</td></tr>\n", fp);
    }
    fputs("</tbody>\n</table>\n</div>\n</section>\n", fp);
done:
    free(keys);
    return st;
}

static ptq_status put_exclusion(FILE *fp, const io_report *r)
{
    ptq_status st = PTQ_OK;
    const io_report_exclusion *e = r->exclusion;
    char *args = NULL;
    fputs("<section id=\"exclusion\">\n<h2>Layers to keep in float</h2>\n", fp);
    if (!e) {
        fputs("<p class=\"note\">No exclusion search was run.</p>\n</section>\n", fp);
        return st;
    }
    fputs("<table class=\"kv\">\n", fp);
    put_kv(fp, "target", e->target);
    fputs("<tr><th>reached</th><td class=\"num\">", fp);
    put_num(fp, "%.6g", e->reached);
    fprintf(fp, "</td></tr>\n<tr><th>nodes excluded</th><td class=\"num\">%d</td></tr>\n</table>\n", e->n_excluded);
    if (!e->n_excluded) {
        fputs("<p>No node needs to stay in float.</p>\n</section>\n", fp);
        return st;
    }
    fputs("<ol class=\"excluded-nodes\">\n", fp);
    for (int i = 0; i < e->n_excluded; i++) {
        fputs("<li><code>", fp);
        put_esc(fp, e->excluded_nodes[i]);
        fputs("</code></li>\n", fp);
    }
    fputs("</ol>\n", fp);
    if (e->trtexec_arg) {
        fputs("<h3>TensorRT</h3>\n<p class=\"note\">For <code>trtexec --int8</code> with the calibration cache; "
              "<code>--layerPrecisions</code> needs <code>--precisionConstraints=obey</code> (or <code>prefer</code>).</p>\n"
              "<pre class=\"trtexec\">",
              fp);
        put_esc(fp, e->trtexec_arg);
        fputs(" --precisionConstraints=obey</pre>\n", fp);
    }
    fputs("<h3>ptq</h3>\n<p class=\"note\">For a Q/DQ model that leaves these nodes in float:</p>\n"
          "<pre class=\"ptq-args\">ptq quantize MODEL ... ", fp);
    args = ptq_exclude_args(e, &st);
    if (st != PTQ_OK) FAIL(st, "out of memory at %s:%d", __FILE__, __LINE__);
    put_esc(fp, args);
    fputs("</pre>\n", fp);
    if (!names_fit_comma_list(e)) {
        fputs("<p>A node name holds a ',', so the names go through a file, <code>" NODES_FILE "</code>, one pattern a line:</p>\n"
              "<pre class=\"nodes-file\">",
              fp);
        for (int i = 0; i < e->n_excluded; i++) {
            char *esc = glob_escape(e->excluded_nodes[i] ? e->excluded_nodes[i] : "");
            CHECK_ALLOC(esc);
            put_esc(fp, esc);
            fputs("\n", fp);
            free(esc);
        }
        fputs("</pre>\n", fp);
    }
    fputs("</section>\n", fp);
done:
    free(args);
    return st;
}

ptq_status io_report_write_html(const char *path, const io_report *r)
{
    ptq_status st = PTQ_OK;
    io_atomic_file f = {0};
    TRY(check_report(path, r));
    TRY(io_atomic_open(&f, path));
    FILE *fp = f.fp;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>ptq compare: ",
          fp);
    put_esc(fp, r->model);
    fprintf(fp, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>ptq compare: <span class=\"name\">", CSS);
    put_esc(fp, r->model);
    fputs("</span></h1>\n<section id=\"summary\">\n<table class=\"kv\">\n", fp);
    put_kv(fp, "model", r->model);
    put_kv(fp, "preset", r->preset);
    fprintf(fp, "<tr><th>calibration images</th><td class=\"name\">%d from ", r->n_calib);
    put_esc(fp, r->calib_images);
    fprintf(fp, "</td></tr>\n<tr><th>evaluation images</th><td class=\"name\">%d from ", r->n_eval);
    put_esc(fp, r->eval_images);
    fputs("</td></tr>\n<tr class=\"best\"><th>best method</th><td class=\"name\">", fp);
    put_esc(fp, r->best_method);
    fputs(" (by ", fp);
    put_esc(fp, r->criterion);
    fputs(")</td></tr>\n", fp);
    put_kv(fp, "float part", r->float_part);
    if (r->as_is) put_kv(fp, "scored as given against", r->base ? r->base : "itself (no base)");
    fputs("</table>\n</section>\n", fp);
    put_methods(fp, r);
    TRY(put_layers(fp, r));
    fputs("<section id=\"histograms\">\n<h2>Activation histograms and thresholds</h2>\n", fp);
    if (!r->n_hists) fputs("<p class=\"note\">No histogram in this report.</p>\n", fp);
    else
        fputs("<p class=\"note\">Counts of |x| on a log scale, with the amax each method chose: values beyond a line "
              "saturate, and the bins below it share 127 levels.</p>\n",
              fp);
    for (int i = 0; i < r->n_hists; i++) {
        fputs("<figure>\n", fp);
        TRY(put_hist(fp, r, &r->hists[i]));
        fputs("<figcaption><span class=\"name\">", fp);
        put_esc(fp, r->hists[i].tensor);
        fprintf(fp, "</span>: %d bins over [0, ", r->hists[i].n_bins);
        put_num(fp, "%.6g", r->hists[i].amax);
        fputs("]</figcaption>\n</figure>\n", fp);
    }
    fputs("</section>\n", fp);
    TRY(put_exclusion(fp, r));
    fputs("<footer class=\"note\">Written by ptq compare. This page is self-contained: no script, no external file.</footer>\n"
          "</body>\n</html>\n",
          fp);
    TRY(io_atomic_commit(&f));
done:
    if (st != PTQ_OK) io_atomic_abort(&f);
    return st;
}
