/* test_report.c: the JSON and HTML reports of `ptq compare` (io/report.h): JSON read back with
 * cJSON (values, NaN and Inf as null, NULL strings, names with & < > " ' /); HTML checked by a
 * small well-formedness checker (every tag opened is closed, no raw '<' or '&' in text or
 * attributes), escaped names, chart and element counts, worst-first layer order; 0, 1 and 300
 * layers; bad arguments; no temporary file left behind.
 *
 * Files go to $BUILD/tmp/report (BUILD defaults to build). PTQ_REPORT_SAMPLE_DIR=DIR also writes
 * a realistic sample.html and sample.json there (tests/e2e/report_html.sh opens it in Chromium). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/file.h"
#include "io/report.h"
#include "tests/unit/op_test.h"

static const char *tmp_dir; /* $BUILD/tmp/report, set in main */

static char *slurp(const char *path)
{
    uint8_t *buf = NULL;
    size_t len;
    if (io_read_file(path, &buf, &len, (size_t)1 << 28) != PTQ_OK) return NULL;
    return (char *)buf;
}

static int count_of(const char *s, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += len) n++;
    return n;
}

/* ---------- a small HTML checker ---------- */

static int is_void(const char *name)
{
    static const char *const v[] = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (strcmp(name, v[i]) == 0) return 1;
    return 0;
}

/* A character reference at p ("&amp;", "&#39;", "&#xFFFD;"): its length, or 0. */
static int entity_len(const char *p)
{
    int i = 1;
    if (p[i] == '#') {
        i++;
        int hex = p[i] == 'x' || p[i] == 'X';
        if (hex) i++;
        int d0 = i;
        while (hex ? isxdigit((unsigned char)p[i]) : isdigit((unsigned char)p[i])) i++;
        return i > d0 && p[i] == ';' ? i + 1 : 0;
    }
    while (isalnum((unsigned char)p[i])) i++;
    return i > 1 && p[i] == ';' ? i + 1 : 0;
}

/* 0 if well formed; else 1 with a message in err. Checks: every non-void element closed in
 * order ("/>" closes foreign SVG elements), no stray '<' or unescaped '&' in text or attribute
 * values, attribute values quoted; the contents of <style> and <script> are skipped. */
static int html_check(const char *s, char *err, size_t cap)
{
    char stack[256][32];
    int depth = 0, line = 1;
    const char *p = s;
#define BAD(...)                                                                              \
    do {                                                                                      \
        int k_ = snprintf(err, cap, "line %d: ", line);                                       \
        snprintf(err + k_, cap - (size_t)k_, __VA_ARGS__);                                    \
        return 1;                                                                             \
    } while (0)
    while (*p) {
        if (*p == '\n') line++;
        if (*p == '&') {
            if (!entity_len(p)) BAD("unescaped '&': %.20s", p);
            p++;
            continue;
        }
        if (*p != '<') {
            if (*p == '>') BAD("stray '>'");
            p++;
            continue;
        }
        if (strncmp(p, "<!--", 4) == 0) {
            const char *e = strstr(p, "-->");
            if (!e) BAD("unterminated comment");
            p = e + 3;
            continue;
        }
        if (strncmp(p, "<!", 2) == 0) {
            const char *e = strchr(p, '>');
            if (!e) BAD("unterminated declaration");
            p = e + 1;
            continue;
        }
        int closing = p[1] == '/';
        const char *q = p + 1 + closing;
        char name[32];
        int n = 0;
        if (!isalpha((unsigned char)*q)) BAD("stray '<': %.20s", p);
        while (isalnum((unsigned char)*q) || *q == '-') {
            if (n < 31) name[n++] = (char)tolower((unsigned char)*q);
            q++;
        }
        name[n] = 0;
        if (closing) {
            while (*q == ' ') q++;
            if (*q != '>') BAD("bad closing tag </%s", name);
            if (!depth) BAD("</%s> closes nothing", name);
            if (strcmp(stack[depth - 1], name) != 0) BAD("</%s> closes <%s>", name, stack[depth - 1]);
            depth--;
            p = q + 1;
            continue;
        }
        /* attributes: name="value" (values checked like text) */
        int self = 0;
        for (;;) {
            while (isspace((unsigned char)*q)) {
                if (*q == '\n') line++;
                q++;
            }
            if (*q == '>') break;
            if (q[0] == '/' && q[1] == '>') {
                self = 1;
                q++;
                break;
            }
            if (!*q) BAD("unterminated <%s", name);
            while (*q && !isspace((unsigned char)*q) && *q != '=' && *q != '>' && *q != '/') {
                if (*q == '<' || *q == '"' || *q == '\'') BAD("bad attribute name in <%s", name);
                q++;
            }
            if (*q == '=') {
                q++;
                if (*q != '"') BAD("unquoted attribute value in <%s", name);
                q++;
                while (*q && *q != '"') {
                    if (*q == '<') BAD("'<' in an attribute of <%s", name);
                    if (*q == '&' && !entity_len(q)) BAD("unescaped '&' in an attribute of <%s>", name);
                    q++;
                }
                if (*q != '"') BAD("unterminated attribute value in <%s", name);
                q++;
            }
        }
        p = q + 1;
        if (self || is_void(name)) continue;
        if (strcmp(name, "style") == 0 || strcmp(name, "script") == 0) {
            char end[40];
            snprintf(end, sizeof end, "</%s>", name);
            const char *e = strstr(p, end);
            if (!e) BAD("unterminated <%s>", name);
            p = e + strlen(end);
            continue;
        }
        if (depth == 256) BAD("nesting too deep");
        strcpy(stack[depth++], name);
    }
    if (depth) BAD("<%s> never closed (%d open)", stack[depth - 1], depth);
#undef BAD
    return 0;
}

#define EXPECT_WELL_FORMED(html)                                  \
    do {                                                          \
        char err_[256] = "";                                      \
        if (html_check((html), err_, sizeof err_))                \
            TEST_FAILF("HTML not well formed: %s", err_);         \
    } while (0)

/* ---------- synthetic reports ---------- */

#define WEIRD "a&b<c>\"d'/e"
#define WEIRD_ESC "a&amp;b&lt;c&gt;&quot;d&#39;/e"

static io_report_method g_methods[] = {
    {"max", 0.981234567, 18.25, 0.731, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN},
    {"entropy", 0.996512, 24.75, 0.512, NAN, 0.75, NAN, NAN, NAN, NAN, 0, NAN},
    {WEIRD, 0.5, INFINITY, -INFINITY, 0.125, NAN, NAN, NAN, NAN, NAN, 0, NAN},
};

static double sqnr_of(int i, int iso)
{
    return (iso ? 38.0 : 42.0) - (iso ? 0.02 : 0.08) * i + 6.0 * sin(0.37 * i + iso);
}

/* n layers; layer 2 (if any) has NaN accumulated SQNR, layer 3 +Inf isolated SQNR. */
static io_report_layer *make_layers(int n, char names[][3][48])
{
    io_report_layer *l = calloc((size_t)n + 1, sizeof *l);
    for (int i = 0; i < n; i++) {
        snprintf(names[i][0], 48, "backbone/stage%d/conv%d.out", i / 10, i);
        snprintf(names[i][1], 48, "backbone/stage%d/conv%d", i / 10, i);
        snprintf(names[i][2], 48, i % 3 ? "Conv" : "Relu");
        l[i] = (io_report_layer){names[i][0], names[i][1], names[i][2], sqnr_of(i, 0), 0.999 - 1e-5 * i, sqnr_of(i, 1), 0.9995 - 1e-6 * i};
    }
    if (n > 2) l[2].acc_sqnr_db = NAN;
    if (n > 3) l[3].iso_sqnr_db = INFINITY;
    if (n > 1) l[1].tensor = WEIRD;
    return l;
}

TEST(json_round_trip_with_nan_and_odd_names)
{
    char names[8][3][48];
    io_report_layer *layers = make_layers(5, names);
    double bins[6] = {1000, 250, 0, 12, NAN, 1};
    const char *tm[] = {"max", "entropy"};
    double tv[] = {6.0, 2.5};
    io_report_hist hist = {WEIRD, 6.0, 6, bins, 2, tm, tv};
    const char *ex_nodes[] = {"backbone/stage0/conv1", WEIRD};
    io_report_exclusion ex = {"cosine >= 0.98", 0.9812, 2, ex_nodes, "--layerPrecisions=a:fp32"};
    io_report r = {.model = "models/det " WEIRD ".onnx", .preset = "paddleocr-det", .calib_images = NULL,
                   .eval_images = "photos/eval", .n_calib = 32, .n_eval = 16, .criterion = "cosine",
                   .best_method = "entropy", .n_methods = 3, .methods = g_methods, .layers_method = "entropy",
                   .n_layers = 5, .layers = layers, .n_hists = 1, .hists = &hist, .exclusion = &ex};
    io_report_method refined = {"entropy + AdaRound", 0.9975, 26.5, 0.125, NAN, NAN, 0.9875, 0.99, 0.5, NAN, 0, NAN};
    r.n_refinements = 1;
    r.refinements = &refined;
    const char *path = tmp_path("rt.json");
    EXPECT_EQ_INT(io_report_write_json(path, &r), PTQ_OK);
    char *text = slurp(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    EXPECT(root != NULL);
    if (!root) goto out;
    EXPECT(text[strlen(text) - 1] == '\n');
    EXPECT_STR(cJSON_GetObjectItemCaseSensitive(root, "format")->valuestring, "ptq-compare");
    EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(root, "version")->valuedouble, 1, 0, 0);
    EXPECT_STR(cJSON_GetObjectItemCaseSensitive(root, "model")->valuestring, "models/det " WEIRD ".onnx");
    EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "calib_images")));
    EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(root, "n_calib")->valuedouble, 32, 0, 0);
    EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(root, "n_eval")->valuedouble, 16, 0, 0);
    EXPECT_STR(cJSON_GetObjectItemCaseSensitive(root, "best_method")->valuestring, "entropy");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "methods");
    EXPECT_EQ_INT(cJSON_GetArraySize(m), 3);
    const cJSON *m0 = cJSON_GetArrayItem(m, 0), *m1 = cJSON_GetArrayItem(m, 1), *m2 = cJSON_GetArrayItem(m, 2);
    if (m0 && m1 && m2) {
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(m0, "cosine")->valuedouble, 0.981234567, 0, 0); /* exact */
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(m0, "sqnr_db")->valuedouble, 18.25, 0, 0);
        EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m0, "top1_agree")));
        EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m0, "top1_acc")));
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(m1, "top1_acc")->valuedouble, 0.75, 0, 0);
        EXPECT_STR(cJSON_GetObjectItemCaseSensitive(m2, "method")->valuestring, WEIRD);
        EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m2, "sqnr_db")));  /* +Inf */
        EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m2, "max_abs")));  /* -Inf */
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(m2, "top1_agree")->valuedouble, 0.125, 0, 0);
    }
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "refinements");
    EXPECT_EQ_INT(cJSON_GetArraySize(rf), 1);
    const cJSON *rf0 = cJSON_GetArrayItem(rf, 0);
    if (rf0) {
        EXPECT_STR(cJSON_GetObjectItemCaseSensitive(rf0, "method")->valuestring, "entropy + AdaRound");
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(rf0, "cosine")->valuedouble, 0.9975, 0, 0);
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(rf0, "seq_top1")->valuedouble, 0.9875, 0, 0);
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(rf0, "seq_chars")->valuedouble, 0.99, 0, 0);
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(rf0, "seq_exact")->valuedouble, 0.5, 0, 0);
        EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rf0, "top1_agree")));
    }
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(root, "layers");
    EXPECT_EQ_INT(cJSON_GetArraySize(l), 5);
    for (int i = 0; i < cJSON_GetArraySize(l); i++) {
        const cJSON *li = cJSON_GetArrayItem(l, i);
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(li, "index")->valuedouble, i, 0, 0);
        EXPECT_STR(cJSON_GetObjectItemCaseSensitive(li, "tensor")->valuestring, layers[i].tensor);
        EXPECT_STR(cJSON_GetObjectItemCaseSensitive(li, "op_type")->valuestring, layers[i].op_type);
        const cJSON *acc = cJSON_GetObjectItemCaseSensitive(li, "acc_sqnr_db"), *iso = cJSON_GetObjectItemCaseSensitive(li, "iso_sqnr_db");
        if (i == 2) EXPECT(cJSON_IsNull(acc));
        else EXPECT_NEAR(acc->valuedouble, layers[i].acc_sqnr_db, 0, 0);
        if (i == 3) EXPECT(cJSON_IsNull(iso));
        else EXPECT_NEAR(iso->valuedouble, layers[i].iso_sqnr_db, 0, 0);
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(li, "iso_cosine")->valuedouble, layers[i].iso_cosine, 0, 0);
    }
    const cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "histograms"), 0);
    EXPECT(h != NULL);
    if (h) {
        EXPECT_STR(cJSON_GetObjectItemCaseSensitive(h, "tensor")->valuestring, WEIRD);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(h, "bins");
        EXPECT_EQ_INT(cJSON_GetArraySize(b), 6);
        EXPECT_NEAR(cJSON_GetArrayItem(b, 3)->valuedouble, 12, 0, 0);
        EXPECT(cJSON_IsNull(cJSON_GetArrayItem(b, 4)));
        const cJSON *t = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(h, "thresholds"), 1);
        EXPECT_STR(cJSON_GetObjectItemCaseSensitive(t, "method")->valuestring, "entropy");
        EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(t, "amax")->valuedouble, 2.5, 0, 0);
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "exclusion");
    EXPECT_STR(cJSON_GetObjectItemCaseSensitive(e, "target")->valuestring, "cosine >= 0.98");
    EXPECT_NEAR(cJSON_GetObjectItemCaseSensitive(e, "reached")->valuedouble, 0.9812, 0, 0);
    EXPECT_STR(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "nodes"), 1)->valuestring, WEIRD);
    EXPECT_STR(cJSON_GetObjectItemCaseSensitive(e, "trtexec_arg")->valuestring, "--layerPrecisions=a:fp32");
    /* the quote in the name is closed, escaped and reopened for sh */
    EXPECT_STR(cJSON_GetObjectItemCaseSensitive(e, "ptq_args")->valuestring,
               "--exclude-nodes 'backbone/stage0/conv1,a&b<c>\"d'\\''/e'");
out:
    cJSON_Delete(root);
    free(text);
    free(layers);
}

TEST(json_empty_report_and_no_exclusion)
{
    io_report r = {0};
    const char *path = tmp_path("empty.json");
    EXPECT_EQ_INT(io_report_write_json(path, &r), PTQ_OK);
    char *text = slurp(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    EXPECT(root != NULL);
    if (root) {
        EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "model")));
        EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "exclusion")));
        EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "methods")), 0);
        EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "layers")), 0);
        EXPECT(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "histograms")));
    }
    cJSON_Delete(root);
    free(text);
}

TEST(html_empty_report_is_well_formed)
{
    io_report r = {0};
    const char *path = tmp_path("empty.html");
    EXPECT_EQ_INT(io_report_write_html(path, &r), PTQ_OK);
    char *html = slurp(path);
    EXPECT(html != NULL);
    if (!html) return;
    EXPECT_WELL_FORMED(html);
    EXPECT(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    EXPECT_EQ_INT(count_of(html, "<svg"), 0);
    EXPECT(strstr(html, "No layer-wise numbers in this report.") != NULL);
    EXPECT(strstr(html, "No histogram in this report.") != NULL);
    EXPECT(strstr(html, "No exclusion search was run.") != NULL);
    EXPECT(strstr(html, "No method was evaluated.") != NULL);
    free(html);
}

/* The layer table's rows, in page order: execution indices. */
static int table_order(const char *html, int *idx, int cap)
{
    const char *p = strstr(html, "<table class=\"layers\">");
    int n = 0;
    if (!p) return 0;
    const char *end = strstr(p, "</table>");
    for (p = strstr(p, "<tbody>"); p && (p = strstr(p, "<tr")) && p < end; p += 3) {
        const char *c = strstr(p, "<td class=\"num\">");
        if (!c || n == cap) break;
        idx[n++] = atoi(c + 16);
    }
    return n;
}

static void check_layers_html(int n)
{
    char (*names)[3][48] = calloc((size_t)n + 1, sizeof *names);
    io_report_layer *layers = make_layers(n, names);
    const char *ex_nodes[] = {n > 0 ? layers[0].node : "x"};
    io_report_exclusion ex = {"cosine >= 0.98", 0.985, 1, ex_nodes, "--layerPrecisions=x:fp32"};
    io_report r = {.model = "m.onnx", .preset = "imagenet", .calib_images = "cal", .eval_images = "ev", .n_calib = 8,
                   .n_eval = 4, .criterion = "sqnr", .best_method = "entropy", .n_methods = 3, .methods = g_methods,
                   .layers_method = "entropy", .n_layers = n, .layers = layers, .exclusion = &ex};
    io_report_method refined = {"entropy + bias correction", 0.99, 20.5, 0.25, 0.5, NAN, NAN, NAN, NAN, NAN, 0, NAN};
    r.n_refinements = 1;
    r.refinements = &refined;
    char name[64];
    snprintf(name, sizeof name, "layers%d.html", n);
    const char *path = tmp_path(name);
    EXPECT_EQ_INT(io_report_write_html(path, &r), PTQ_OK);
    char *html = slurp(path);
    EXPECT(html != NULL);
    if (!html) goto out;
    EXPECT_WELL_FORMED(html);
    EXPECT_EQ_INT(count_of(html, "<svg class=\"chart layer-sqnr\""), n > 0);
    /* one point per finite or infinite value: NaN accumulated at layer 2 has none */
    int nan_acc = n > 2;
    EXPECT_EQ_INT(count_of(html, "<circle class=\"pt acc\""), n - nan_acc);
    EXPECT_EQ_INT(count_of(html, "<circle class=\"pt iso\""), n);
    /* the NaN splits the accumulated curve: two polylines when it falls inside */
    EXPECT_EQ_INT(count_of(html, "<polyline class=\"acc\""), n == 0 ? 0 : n > 3 ? 2 : 1);
    EXPECT_EQ_INT(count_of(html, "<polyline class=\"iso\""), n == 0 ? 0 : 1);
    if (n > 1) {
        EXPECT(strstr(html, WEIRD_ESC) != NULL);
        EXPECT(strstr(html, WEIRD) == NULL);
        EXPECT(strstr(html, "<title>#1 " WEIRD_ESC " (Conv backbone/stage0/conv1): accumulated SQNR") != NULL);
    }
    if (n > 3) EXPECT(strstr(html, "<td class=\"num\">\xe2\x88\x9e</td>") != NULL); /* isolated +Inf as ∞ */
    if (n > 2) EXPECT(strstr(html, "<td class=\"num\">\xe2\x80\x93</td>") != NULL); /* NaN as – */
    /* the table: every layer once, ascending isolated SQNR, Inf last but before nothing (no NaN) */
    int *order = calloc((size_t)n + 1, sizeof *order);
    int rows = table_order(html, order, n);
    EXPECT_EQ_INT(rows, n);
    int sorted = 1;
    for (int k = 1; k < rows; k++)
        if (!(layers[order[k - 1]].iso_sqnr_db <= layers[order[k]].iso_sqnr_db)) sorted = 0;
    EXPECT(sorted);
    if (n > 0) {
        int worst = 0;
        for (int i = 1; i < n; i++)
            if (layers[i].iso_sqnr_db < layers[worst].iso_sqnr_db) worst = i;
        EXPECT_EQ_INT(order[0], worst);
        EXPECT_EQ_INT(count_of(html, "<tr class=\"excluded\">"), 1);
    }
    free(order);
    /* the methods table: best row highlighted; +Inf / -Inf; top-1 columns shown, NaN as – */
    EXPECT_EQ_INT(count_of(html, "<tr class=\"best\"><td class=\"name\">entropy"), 1);
    EXPECT_EQ_INT(count_of(html, "<tr class=\"refined\"><td class=\"name\">entropy + bias correction</td>"), 1);
    EXPECT(strstr(html, "<td class=\"num\">\xe2\x88\x92\xe2\x88\x9e</td>") != NULL);
    EXPECT(strstr(html, "top-1 agreement") != NULL && strstr(html, "12.50%") != NULL && strstr(html, "75.00%") != NULL);
out:
    free(html);
    free(layers);
    free(names);
}

TEST(html_zero_layers) { check_layers_html(0); }
TEST(html_one_layer) { check_layers_html(1); }
TEST(html_three_hundred_layers) { check_layers_html(300); }

TEST(html_layers_without_finite_values)
{
    io_report_layer l[4] = {{"a", "na", "Conv", NAN, NAN, NAN, NAN},
                            {"b", "nb", "Conv", INFINITY, 1, -INFINITY, 1},
                            {"c", "nc", "Conv", 1e300, 1, -1e300, 1},
                            {"d", "nd", "Conv", 0, 0, 0, 0}};
    for (int n = 1; n <= 4; n++) {
        io_report r = {.n_layers = n, .layers = l};
        const char *path = tmp_path("odd_layers.html");
        EXPECT_EQ_INT(io_report_write_html(path, &r), PTQ_OK);
        char *html = slurp(path);
        if (!html) continue;
        EXPECT_WELL_FORMED(html);
        EXPECT_EQ_INT(count_of(html, "<svg class=\"chart layer-sqnr\""), 1);
        EXPECT_EQ_INT(count_of(html, "<circle"), 2 * (n - 1));
        EXPECT_EQ_INT(strstr(html, ">no finite SQNR value<") != NULL, n <= 2);
        EXPECT(strstr(html, "nan") == NULL && strstr(html, "inf") == NULL);
        free(html);
    }
}

TEST(html_top1_columns_hidden_when_all_nan)
{
    io_report_method m[] = {{"max", 0.9, 20, 1, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN}, {"mse", 0.95, 22, 0.5, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN}};
    io_report r = {.n_methods = 2, .methods = m, .best_method = "mse"};
    const char *path = tmp_path("notop1.html");
    EXPECT_EQ_INT(io_report_write_html(path, &r), PTQ_OK);
    char *html = slurp(path);
    if (!html) return;
    EXPECT_WELL_FORMED(html);
    EXPECT(strstr(html, "top-1") == NULL);
    EXPECT_EQ_INT(count_of(html, "<tr class=\"best\"><td class=\"name\">mse"), 1);
    free(html);
}

TEST(html_histograms_bars_and_thresholds)
{
    enum { NB = 2048 };
    double *bins = malloc(sizeof *bins * NB), small[4] = {0, 0, 0, 0}, tiny[3] = {0.5, 0.25, 0.125};
    for (int i = 0; i < NB; i++) bins[i] = i < 1500 ? floor(1e6 * exp(-i / 60.0)) : (i % 97 == 0 ? 1 : 0);
    const char *tm[] = {"max", "entropy", "percentile-99.99", "mse", WEIRD};
    double tv[] = {10.0, 2.1, 2.2, NAN, 12.0}; /* NaN: no line; 12 > amax: pinned to the edge */
    io_report_hist h[3] = {{"big/act", 10.0, NB, bins, 5, tm, tv},
                           {"all zero", 1.0, 4, small, 1, tm, tv},
                           {"densities", 3.0, 3, tiny, 2, tm, tv}};
    io_report r = {.n_methods = 3, .methods = g_methods, .n_hists = 3, .hists = h};
    const char *path = tmp_path("hist.html");
    EXPECT_EQ_INT(io_report_write_html(path, &r), PTQ_OK);
    char *html = slurp(path);
    if (!html) goto out;
    EXPECT_WELL_FORMED(html);
    EXPECT_EQ_INT(count_of(html, "<svg class=\"chart hist\""), 3);
    int bars = count_of(html, "<rect class=\"bar\"");
    /* 2048 bins grouped by 9 into 228 bars, the empty ones not drawn (about 92 + 6); plus 3 */
    EXPECT(bars > 90 && bars <= 228 + 3);
    EXPECT_EQ_INT(count_of(html, "<line class=\"threshold\""), 4 + 0 + 2);
    EXPECT(strstr(html, ">empty histogram<") != NULL);
    EXPECT(strstr(html, ">" WEIRD_ESC " 12 \xe2\x86\x92<") != NULL); /* beyond the range: marked */
    EXPECT(strstr(html, ">entropy 2.1<") != NULL);
    EXPECT(strstr(html, "1e-") != NULL); /* densities below 1 get negative decades */
out:
    free(html);
    free(bins);
}

TEST(exclusion_arguments)
{
    const char *plain[] = {"conv_1", "head/conv.2"}, *glob[] = {"a*b", "@first", "x y"}, *comma[] = {"a,b", "#c"};
    io_report_exclusion e1 = {"sqnr >= 30 dB", 31.5, 2, plain, "--layerPrecisions=conv_1:fp32,head/conv.2:fp32"};
    io_report_exclusion e2 = {"t", 1, 3, glob, NULL};
    io_report_exclusion e3 = {"t", 1, 2, comma, NULL};
    io_report_exclusion e4 = {"t", NAN, 0, NULL, NULL};
    const io_report_exclusion *all[] = {&e1, &e2, &e3, &e4};
    for (int k = 0; k < 4; k++) {
        io_report r = {.exclusion = all[k]};
        char jp[64], hp[64];
        snprintf(jp, sizeof jp, "ex%d.json", k);
        snprintf(hp, sizeof hp, "ex%d.html", k);
        EXPECT_EQ_INT(io_report_write_json(tmp_path(jp), &r), PTQ_OK);
        EXPECT_EQ_INT(io_report_write_html(tmp_path(hp), &r), PTQ_OK);
        char *text = slurp(tmp_path(jp)), *html = slurp(tmp_path(hp));
        cJSON *root = text ? cJSON_Parse(text) : NULL;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "exclusion"), "ptq_args");
        if (html) EXPECT_WELL_FORMED(html);
        switch (k) {
        case 0:
            EXPECT_STR(args->valuestring, "--exclude-nodes conv_1,head/conv.2");
            EXPECT(html && strstr(html, "<pre class=\"ptq-args\">ptq quantize MODEL ... --exclude-nodes conv_1,head/conv.2</pre>"));
            EXPECT(html && strstr(html, "--layerPrecisions=conv_1:fp32,head/conv.2:fp32 --precisionConstraints=obey"));
            EXPECT_EQ_INT(html ? count_of(html, "<li><code>") : 0, 2);
            break;
        case 1: /* glob characters and a leading '@' escaped; the space needs quotes */
            EXPECT_STR(args->valuestring, "--exclude-nodes 'a\\*b,\\@first,x y'");
            EXPECT(html && !strstr(html, "class=\"trtexec\""));
            break;
        case 2: /* a ',' cannot go in the list: a file of patterns, '#' escaped */
            EXPECT_STR(args->valuestring, "--exclude-nodes @excluded-nodes.txt");
            EXPECT(html && strstr(html, "<pre class=\"nodes-file\">a,b\n\\#c\n</pre>"));
            break;
        case 3:
            EXPECT(cJSON_IsNull(args));
            EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "exclusion"), "reached")));
            EXPECT(html && strstr(html, "No node needs to stay in float."));
            break;
        }
        cJSON_Delete(root);
        free(text);
        free(html);
    }
}

static int tmp_files_left(void)
{
    int n = 0;
    DIR *d = opendir(tmp_dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

TEST(bad_arguments_and_unwritable_paths)
{
    io_report r = {.n_layers = 3};
    EXPECT_EQ_INT(io_report_write_json(tmp_path("bad.json"), &r), PTQ_ERR_ARG);
    EXPECT_EQ_INT(io_report_write_html(tmp_path("bad.html"), &r), PTQ_ERR_ARG);
    double b[1] = {1};
    io_report_hist h = {"t", 1, 1, b, 2, NULL, NULL};
    io_report r2 = {.n_hists = 1, .hists = &h};
    EXPECT_EQ_INT(io_report_write_html(tmp_path("bad2.html"), &r2), PTQ_ERR_ARG);
    EXPECT(strstr(ptq_last_error(), "thresholds") != NULL);
    io_report_exclusion e = {"t", 1, 2, NULL, NULL};
    io_report r3 = {.exclusion = &e};
    EXPECT_EQ_INT(io_report_write_json(tmp_path("bad3.json"), &r3), PTQ_ERR_ARG);
    EXPECT_EQ_INT(io_report_write_html(NULL, &r3), PTQ_ERR_ARG);
    EXPECT_EQ_INT(io_report_write_json(tmp_path("x.json"), NULL), PTQ_ERR_ARG);
    io_report ok = {0};
    EXPECT_EQ_INT(io_report_write_html(tmp_path("no/such/dir/r.html"), &ok), PTQ_ERR_IO);
    EXPECT_EQ_INT(io_report_write_json(tmp_path("no/such/dir/r.json"), &ok), PTQ_ERR_IO);
    struct stat sb;
    EXPECT(stat(tmp_path("bad.html"), &sb) != 0); /* refused before anything is created */
    EXPECT_EQ_INT(tmp_files_left(), 0);
}

/* A report shaped like PP-OCRv4 det's: 4 methods, 120 layers, 3 histograms, an exclusion. */
static ptq_status write_sample(const char *dir)
{
    enum { NL = 120, NB = 2048 };
    static char names[NL][3][48];
    io_report_layer *layers = make_layers(NL, names);
    static double bins[3][NB];
    static const char *tm[] = {"max", "percentile-99.99", "entropy", "mse"};
    static double tv[3][4] = {{8.0, 4.1, 2.9, 3.4}, {23.5, 6.2, 3.3, 4.0}, {1.0, 0.99, 0.97, 0.98}};
    io_report_hist h[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < NB; i++) {
            double x = (i + 0.5) / NB * tv[k][0];
            bins[k][i] = k == 2 ? floor(2e4 * (1 + cos(i / 200.0))) : floor(5e6 * exp(-x * x / (k ? 2.0 : 1.5)));
        }
        static char hn[3][48];
        snprintf(hn[k], sizeof hn[k], "backbone/stage%d/conv%d.out", k, 10 * k + 3);
        h[k] = (io_report_hist){hn[k], tv[k][0], NB, bins[k], 4, tm, tv[k]};
    }
    io_report_method m[] = {{"max", 0.9712, 17.9, 2.41, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN},
                            {"percentile-99.99", 0.9921, 22.4, 1.95, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN},
                            {"entropy", 0.9953, 24.1, 1.72, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN},
                            {"mse", 0.9948, 23.8, 1.80, NAN, NAN, NAN, NAN, NAN, NAN, 0, NAN}};
    const char *ex_nodes[] = {layers[17].node, layers[5].node, "head/" WEIRD};
    io_report_exclusion ex = {"cosine >= 0.998", 0.99812, 3, ex_nodes,
                              "--layerPrecisions=backbone/stage1/conv17:fp32,backbone/stage0/conv5:fp32"};
    io_report r = {.model = "ch_PP-OCRv4_det_infer.onnx", .preset = "paddleocr-det", .calib_images = "build/photos",
                   .eval_images = "build/photos-eval", .n_calib = 24, .n_eval = 12, .criterion = "cosine",
                   .best_method = "entropy", .n_methods = 4, .methods = m, .layers_method = "entropy", .n_layers = NL,
                   .layers = layers, .n_hists = 3, .hists = h, .exclusion = &ex};
    char path[700];
    ptq_status st;
    snprintf(path, sizeof path, "%s/sample.json", dir);
    st = io_report_write_json(path, &r);
    snprintf(path, sizeof path, "%s/sample.html", dir);
    if (st == PTQ_OK) st = io_report_write_html(path, &r);
    free(layers);
    return st;
}

TEST(sample_report)
{
    const char *dir = getenv("PTQ_REPORT_SAMPLE_DIR");
    EXPECT_EQ_INT(write_sample(dir && dir[0] ? dir : tmp_dir), PTQ_OK);
    char p[700];
    snprintf(p, sizeof p, "%s/sample.html", dir && dir[0] ? dir : tmp_dir);
    char *html = slurp(p);
    EXPECT(html != NULL);
    if (!html) return;
    EXPECT_WELL_FORMED(html);
    EXPECT_EQ_INT(count_of(html, "<svg class=\"chart hist\""), 3);
    EXPECT(strstr(html, "http") == NULL && strstr(html, "src=") == NULL && strstr(html, "<script") == NULL);
    free(html);
}

TEST(truth_figures_in_json_and_html)
{
    io_report_method m[] = {{"max", 0.9, 20, 1, NAN, NAN, NAN, NAN, NAN, NAN, 0, 0.5}};
    float ap50[3] = {0.5f, NAN, 0.25f}, ap[3] = {0.25f, NAN, 0.125f};
    io_report_truth fp32 = {.map50 = 0.75, .map = 0.5, .n_ap = 3, .ap50 = ap50, .ap = ap, .cer = NAN, .line_acc = NAN,
                            .map50_ci = {0.5, 0.875}, .map_ci = {0.25, 0.625}, .map50_delta_ci = {NAN, NAN},
                            .map_delta_ci = {NAN, NAN}};
    io_report_truth mm[1] = {{.map50 = 0.375, .map = 0.1875, .n_ap = 3, .ap50 = ap50, .ap = ap, .cer = NAN, .line_acc = NAN,
                              .map50_ci = {0.25, 0.5}, .map_ci = {0.125, 0.25}, .map50_delta_ci = {-0.5, -0.25},
                              .map_delta_ci = {-0.375, -0.125}}};
    io_report r = {.n_methods = 1, .methods = m, .best_method = "max", .labels = "yolo:labels",
                   .fp32_map = &fp32, .method_maps = mm};
    const char *path = tmp_path("truth.json");
    EXPECT_EQ_INT(io_report_write_json(path, &r), PTQ_OK);
    char *js = slurp(path);
    if (!js) return;
    EXPECT(strstr(js, "\"labels\":\t\"yolo:labels\"") != NULL);
    EXPECT(strstr(js, "\"map50\":\t0.75") != NULL && strstr(js, "\"map50\":\t0.375") != NULL);
    EXPECT(strstr(js, "\"map\":\t0.1875") != NULL);
    EXPECT_EQ_INT(count_of(js, "\"ap50\":"), 2);
    EXPECT_EQ_INT(count_of(js, "\"ap50\":\t[0.5, null, 0.25]"), 2); /* a class without ground truth: null */
    EXPECT(strstr(js, "\"map_ci\":\t[0.25, 0.625]") != NULL && strstr(js, "\"map_delta_ci\":\t[-0.375, -0.125]") != NULL);
    EXPECT_EQ_INT(count_of(js, "\"map_delta_ci\""), 1); /* not for FP32 */
    free(js);
    const char *hp = tmp_path("truth.html");
    EXPECT_EQ_INT(io_report_write_html(hp, &r), PTQ_OK);
    char *html = slurp(hp);
    if (!html) return;
    EXPECT_WELL_FORMED(html);
    EXPECT(strstr(html, ">mAP50-95 [95 %]</th>") != NULL);
    EXPECT(strstr(html, ">0.1875 [0.1250, 0.2500]</td>") != NULL && strstr(html, ">-0.3125 [-0.3750, -0.1250]</td>") != NULL);
    EXPECT(strstr(html, "<td class=\"name\">FP32</td>") != NULL);
    free(html);
    /* a segmenter: mIoU, its intervals and IoU per class */
    float iou[3] = {0.5f, NAN, 0.75f};
    io_report_truth f3 = {.cer = NAN, .miou = 0.625, .miou_ci = {0.5, 0.75}, .miou_delta_ci = {NAN, NAN}, .n_iou = 3, .iou = iou};
    io_report_truth m3[1] = {{.cer = NAN, .miou = 0.5, .miou_ci = {0.375, 0.625}, .miou_delta_ci = {-0.25, 0}, .n_iou = 3,
                              .iou = iou}};
    r.fp32_map = &f3;
    r.method_maps = m3;
    EXPECT_EQ_INT(io_report_write_json(path, &r), PTQ_OK);
    js = slurp(path);
    if (!js) return;
    EXPECT(strstr(js, "\"miou\":\t0.625") != NULL && strstr(js, "\"miou_delta_ci\":\t[-0.25, 0]") != NULL);
    EXPECT_EQ_INT(count_of(js, "\"iou\":\t[0.5, null, 0.75]"), 2);
    EXPECT(strstr(js, "\"map50\"") == NULL);
    free(js);
    EXPECT_EQ_INT(io_report_write_html(hp, &r), PTQ_OK);
    html = slurp(hp);
    if (!html) return;
    EXPECT_WELL_FORMED(html);
    EXPECT(strstr(html, ">mIoU [95 %]</th>") != NULL && strstr(html, ">-0.1250 [-0.2500, +0.0000]</td>") != NULL);
    EXPECT(strstr(html, "IoU per class") != NULL);
    free(html);
    /* a classifier with labels: top-1 accuracy and its intervals */
    io_report_truth f4 = {.cer = NAN, .has_top1 = 1, .top1_acc = 0.75, .top1_ci = {0.5, 1}, .top1_delta_ci = {NAN, NAN}};
    io_report_truth m4[1] = {{.cer = NAN, .has_top1 = 1, .top1_acc = 0.5, .top1_ci = {0.25, 0.75}, .top1_delta_ci = {-0.5, 0}}};
    r.fp32_map = &f4;
    r.method_maps = m4;
    EXPECT_EQ_INT(io_report_write_json(path, &r), PTQ_OK);
    js = slurp(path);
    if (!js) return;
    EXPECT(strstr(js, "\"top1_ci\":\t[0.5, 1]") != NULL && strstr(js, "\"top1_delta_ci\":\t[-0.5, 0]") != NULL);
    EXPECT(strstr(js, "\"map50\"") == NULL && strstr(js, "\"miou\"") == NULL);
    free(js);
    EXPECT_EQ_INT(io_report_write_html(hp, &r), PTQ_OK);
    html = slurp(hp);
    if (!html) return;
    EXPECT_WELL_FORMED(html);
    EXPECT(strstr(html, ">top-1 accuracy [95 %]</th>") != NULL && strstr(html, ">0.5000 [0.2500, 0.7500]</td>") != NULL);
    free(html);
    r.fp32_map = &fp32;
    r.method_maps = mm;
    /* a recogniser: CER and exact lines instead */
    io_report_truth f2 = {.map50 = NAN, .map = NAN, .cer = 0.125, .line_acc = 0.5, .cer_ci = {0.0625, 0.25},
                          .line_acc_ci = {0.25, 0.75}, .cer_delta_ci = {NAN, NAN}, .line_acc_delta_ci = {NAN, NAN}};
    io_report_truth m2[1] = {{.map50 = NAN, .map = NAN, .cer = 0.25, .line_acc = 0.375, .cer_ci = {0.125, 0.5},
                              .line_acc_ci = {0.25, 0.5}, .cer_delta_ci = {0, 0.25}, .line_acc_delta_ci = {-0.25, 0}}};
    r.fp32_map = &f2;
    r.method_maps = m2;
    EXPECT_EQ_INT(io_report_write_json(path, &r), PTQ_OK);
    js = slurp(path);
    if (!js) return;
    EXPECT(strstr(js, "\"cer\":\t0.125") != NULL && strstr(js, "\"line_acc\":\t0.375") != NULL);
    EXPECT(strstr(js, "\"ap50\"") == NULL);
    EXPECT(strstr(js, "\"cer_ci\":\t[0.0625, 0.25]") != NULL && strstr(js, "\"cer_delta_ci\":\t[0, 0.25]") != NULL);
    EXPECT_EQ_INT(count_of(js, "\"cer_delta_ci\""), 1); /* not for FP32 */
    free(js);
}

int main(void)
{
    tmp_dir = make_tmp_dir("report");
    RUN(json_round_trip_with_nan_and_odd_names);
    RUN(json_empty_report_and_no_exclusion);
    RUN(html_empty_report_is_well_formed);
    RUN(html_zero_layers);
    RUN(html_one_layer);
    RUN(html_three_hundred_layers);
    RUN(html_layers_without_finite_values);
    RUN(html_top1_columns_hidden_when_all_nan);
    RUN(html_histograms_bars_and_thresholds);
    RUN(exclusion_arguments);
    RUN(bad_arguments_and_unwritable_paths);
    RUN(sample_report);
    RUN(truth_figures_in_json_and_html);
    return test_summary();
}
