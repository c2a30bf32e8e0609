/* test_onnx_node.c: the ONNX backend node tests (Debian libonnx-testdata) through
 * ptq's loader and executor.
 *
 *   build/tests/test_onnx_node [-v] [FILTER]
 *
 * A test whose model uses an op outside ptq's list is skipped ("op X is not among
 * ptq's ops"); a test named in tests/conformance/skips.txt is skipped with the
 * reason written there (a dtype or attribute outside ptq's scope, never a bug);
 * every other test must pass: each output matches with numpy's allclose rule
 * (rtol 1e-3, atol 1e-7, as the ONNX backend tests use; NaN equals NaN; integers
 * and bools exactly). Directory: $PTQ_ONNX_NODE_TESTS or Debian's path. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/onnx.h"
#include "runtime/op.h"
#include "runtime/plan.h"

#define DEFAULT_DIR "/usr/share/libonnx-testdata/data/node"
#define MAX_IO 32

typedef struct {
    char name[160];
    char reason[200];
} skip_entry;

static skip_entry *skips;
static int n_skips;

static void load_skips(void)
{
    const char *root = getenv("PTQ_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/conformance/skips.txt", root ? root : ".");
    FILE *fp = fopen(path, "r");
    if (!fp) return;
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        char *p = line;
        while (*p == ' ') p++;
        if (*p == '#' || *p == '\n' || !*p) continue;
        skip_entry *ns = realloc(skips, sizeof *skips * (size_t)(n_skips + 1));
        if (!ns) break;
        skips = ns;
        skip_entry *e = &skips[n_skips++];
        size_t k = strcspn(p, " \t\n");
        snprintf(e->name, sizeof e->name, "%.*s", (int)k, p);
        p += k;
        while (*p == ' ' || *p == '\t') p++;
        p[strcspn(p, "\n")] = 0;
        snprintf(e->reason, sizeof e->reason, "%s", *p ? p : "listed in skips.txt");
    }
    fclose(fp);
}

static const char *skip_reason(const char *test)
{
    for (int i = 0; i < n_skips; i++)
        if (strcmp(skips[i].name, test) == 0) return skips[i].reason;
    return NULL;
}

/* skip reasons, counted */
typedef struct {
    char reason[200];
    int count;
} reason_count;
static reason_count reasons[256];
static int n_reasons;

static void count_reason(const char *r)
{
    for (int i = 0; i < n_reasons; i++)
        if (strcmp(reasons[i].reason, r) == 0) {
            reasons[i].count++;
            return;
        }
    if (n_reasons < 256) {
        snprintf(reasons[n_reasons].reason, sizeof reasons[0].reason, "%s", r);
        reasons[n_reasons++].count = 1;
    }
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* 1 when `got` matches `want`; else writes what differs into msg. */
static int outputs_match(const ptq_tensor *got, const ptq_tensor *want, char *msg, size_t cap)
{
    char a[96], b[96];
    if (got->dtype != want->dtype) {
        snprintf(msg, cap, "dtype %s, expected %s", ptq_dtype_name(got->dtype), ptq_dtype_name(want->dtype));
        return 0;
    }
    if (!ptq_shape_equal(got, want)) {
        snprintf(msg, cap, "shape %s, expected %s", ptq_shape_str(got, a, sizeof a), ptq_shape_str(want, b, sizeof b));
        return 0;
    }
    size_t n = ptq_tensor_numel(want);
    int is_float = want->dtype == PTQ_F32 || want->dtype == PTQ_F64 || want->dtype == PTQ_F16;
    for (size_t i = 0; i < n; i++) {
        double x = ptq_tensor_get_f64(got, i), y = ptq_tensor_get_f64(want, i);
        int ok;
        if (!is_float) ok = ptq_tensor_get_i64(got, i) == ptq_tensor_get_i64(want, i);
        else if (isnan(x) || isnan(y)) ok = isnan(x) && isnan(y);
        else if (isinf(x) || isinf(y)) ok = x == y;
        else ok = fabs(x - y) <= 1e-7 + 1e-3 * fabs(y);
        if (!ok) {
            snprintf(msg, cap, "element %zu: %.9g, expected %.9g", i, x, y);
            return 0;
        }
    }
    return 1;
}

/* The first node, in g or its subgraphs (If, Loop, Scan bodies), whose op ptq lacks; NULL if none. */
static const ptq_node *first_unsupported(const ptq_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const ptq_node *n = &g->nodes[i];
        int id = ptq_op_find(n->domain, n->op_type);
        if (id < 0 || !ptq_op_get(id)) return n;
        for (int k = 0; k < n->n_attrs; k++)
            for (int j = 0; j < (n->attrs[k].graph ? 1 : n->attrs[k].n_graphs); j++) {
                const ptq_node *b = first_unsupported(n->attrs[k].graph ? n->attrs[k].graph : n->attrs[k].graphs[j]);
                if (b) return b;
            }
    }
    return NULL;
}

/* Runs one test directory; returns 0 pass, 1 fail, 2 skip (reason in why). */
static int run_test(const char *dir, const char *name, char *why, size_t cap)
{
    char path[2048];
    ptq_graph *g = NULL;
    ptq_plan *plan = NULL;
    ptq_tensor inputs[MAX_IO], want;
    int n_in = 0, result = 0;
    memset(inputs, 0, sizeof inputs);
    memset(&want, 0, sizeof want);
    const char *listed = skip_reason(name);
    if (listed) {
        snprintf(why, cap, "%s", listed);
        return 2;
    }
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    if (onnx_model_load(path, &g) != PTQ_OK) {
        snprintf(why, cap, "load: %s", ptq_last_error());
        return 1;
    }
    const ptq_node *bad = first_unsupported(g);
    if (bad) {
        snprintf(why, cap, "op %s%s%s is not among ptq's ops", bad->domain, bad->domain[0] ? "." : "", bad->op_type);
        result = 2;
        goto out;
    }
    int runtime_inputs[MAX_IO], n_rt = 0;
    for (int i = 0; i < g->n_inputs && n_rt < MAX_IO; i++)
        if (g->values[g->inputs[i]].kind == PTQ_VALUE_INPUT) runtime_inputs[n_rt++] = g->inputs[i];
    for (int set = 0;; set++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_%d", dir, name, set);
        if (!file_exists(path)) {
            if (set == 0) {
                snprintf(why, cap, "no test data");
                result = 2;
            }
            break;
        }
        ptq_input_shape shapes[MAX_IO];
        for (int i = 0; i < n_in; i++) ptq_tensor_free(&inputs[i]);
        n_in = 0;
        for (int i = 0; i < n_rt; i++) {
            snprintf(path, sizeof path, "%s/%s/test_data_set_%d/input_%d.pb", dir, name, set, i);
            if (!file_exists(path)) break;
            ptq_status st = onnx_tensor_load(path, &inputs[i], NULL);
            if (st == PTQ_ERR_UNSUPPORTED) {
                snprintf(why, cap, "input data: %s", strchr(ptq_last_error(), ':') ? strchr(ptq_last_error(), ':') + 2 : ptq_last_error());
                result = 2;
                goto out;
            }
            if (st != PTQ_OK) {
                snprintf(why, cap, "input %d: %s", i, ptq_last_error());
                result = 1;
                goto out;
            }
            n_in++;
            shapes[i].name = g->values[runtime_inputs[i]].name;
            shapes[i].rank = inputs[i].rank;
            memcpy(shapes[i].dims, inputs[i].dims, sizeof shapes[i].dims);
        }
        ptq_plan_options opt = ptq_plan_defaults();
        ptq_plan_destroy(plan);
        plan = NULL;
        for (int i = 0; i < n_in; i++) shapes[i].data = NULL;
        ptq_status st = ptq_plan_create(g, shapes, n_in, &opt, &plan);
        int bound = 0;
        if (st == PTQ_ERR_UNSUPPORTED && strstr(ptq_last_error(), "not constant")) {
            /* node tests feed shapes, axes and scales as graph inputs; ptq needs them
             * at plan time, so they are bound as constants (the kernels run the same) */
            for (int i = 0; i < n_in; i++) shapes[i].data = inputs[i].data;
            bound = 1;
            st = ptq_plan_create(g, shapes, n_in, &opt, &plan);
        }
        if (st == PTQ_OK) st = ptq_plan_run(plan, inputs, bound ? 0 : n_in);
        if (st != PTQ_OK) {
            snprintf(why, cap, "%s", ptq_last_error());
            result = 1;
            goto out;
        }
        for (int o = 0; o < ptq_plan_n_outputs(plan); o++) {
            snprintf(path, sizeof path, "%s/%s/test_data_set_%d/output_%d.pb", dir, name, set, o);
            ptq_tensor_free(&want);
            st = onnx_tensor_load(path, &want, NULL);
            if (st == PTQ_ERR_UNSUPPORTED) {
                snprintf(why, cap, "output data: %s", strchr(ptq_last_error(), ':') ? strchr(ptq_last_error(), ':') + 2 : ptq_last_error());
                result = 2;
                goto out;
            }
            if (st != PTQ_OK) {
                snprintf(why, cap, "output %d: %s", o, ptq_last_error());
                result = 1;
                goto out;
            }
            char msg[300];
            if (!outputs_match(ptq_plan_output(plan, o, NULL), &want, msg, sizeof msg)) {
                snprintf(why, cap, "data set %d output %d: %s", set, o, msg);
                result = 1;
                goto out;
            }
        }
    }
out:
    for (int i = 0; i < n_in; i++) ptq_tensor_free(&inputs[i]);
    ptq_tensor_free(&want);
    ptq_plan_destroy(plan);
    ptq_graph_destroy(g);
    return result;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("PTQ_ONNX_NODE_TESTS");
    const char *filter = NULL;
    int verbose = 0, passed = 0, failed = 0, skipped = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) verbose = 1;
        else filter = argv[i];
    }
    if (!dir) dir = DEFAULT_DIR;
    load_skips();
    DIR *d = opendir(dir);
    if (!d) {
        printf("cannot open %s (install libonnx-testdata: make deps)\n0 passed, 1 failed\n", dir);
        return 1;
    }
    char **names = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "test_", 5) != 0) continue;
        if (filter && !strstr(e->d_name, filter)) continue;
        char **nn = realloc(names, sizeof *names * (size_t)(n + 1));
        if (!nn) break;
        names = nn;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; i++) {
        char why[600] = "";
        int r = run_test(dir, names[i], why, sizeof why);
        if (r == 0) {
            passed++;
            if (verbose) printf("ok   %s\n", names[i]);
        } else if (r == 1) {
            failed++;
            printf("FAIL %s: %s\n", names[i], why);
        } else {
            skipped++;
            if (verbose) printf("skip %s: %s\n", names[i], why);
            if (strncmp(why, "op ", 3) == 0) count_reason("op not among ptq's ops");
            else count_reason(why);
        }
        free(names[i]);
    }
    free(names);
    printf("skipped, by reason:\n");
    for (int i = 0; i < n_reasons; i++) printf("  %4d  %s\n", reasons[i].count, reasons[i].reason);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    free(skips);
    return failed ? 1 : 0;
}
