/* cmd_inspect.c: `ptq inspect`: what a model holds and what ptq can do with it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/preprocessing.h"
#include "engine/runner.h"
#include "io/onnx.h"
#include "io/preset.h"
#include "runtime/graph.h"
#include "runtime/op.h"
#include "runtime/plan.h"

#define MAX_SHAPES 64

/* "presets that fit: a, b; scaled to its size: c" for the model's data input. A preset that
 * does not load is left out; out of memory fails (never a shorter list). */
static ptq_status print_fitting_presets(const ptq_graph *g)
{
    ptq_status st = PTQ_OK;
    char **names = NULL, scaled[1024] = "";
    int n = io_preset_names(&names), shown = 0, n_scaled = 0;
    size_t k = 0;
    if (n < 0) return PTQ_ERR_NOMEM;
    printf("presets that fit:");
    for (int i = 0; i < n; i++) {
        char path[4096];
        pp_config c = pp_defaults();
        ptq_status ps = st == PTQ_OK && eng_graph_input(g) >= 0 ? io_preset_find(names[i], path, sizeof path) : PTQ_ERR_ARG;
        if (ps == PTQ_OK) ps = io_preset_load(path, &c);
        if (ps == PTQ_ERR_NOMEM) st = ps;
        int fit = ps == PTQ_OK ? eng_preset_fits(g, &c) : 0;
        if (fit == 2) printf("%s %s", shown++ ? "," : "", names[i]);
        if (fit == 1 && k < sizeof scaled)
            k += (size_t)snprintf(scaled + k, sizeof scaled - k, "%s %s", n_scaled++ ? "," : "", names[i]);
        free(names[i]);
    }
    free(names);
    printf("%s\n", shown ? "" : " none at their own size");
    if (n_scaled) printf("presets whose geometry is scaled to its size:%s\n", scaled);
    return st;
}

/* Keeps the last line eng_fit_preprocessing says about the model (printed by inspect). */
static void keep_line(int level, const char *text, void *user)
{
    (void)level;
    snprintf(user, 512, "%s", text);
}

/* The data input's layout and channels, and what a quantize without --preset feeds it. */
static void print_default_preprocessing(const ptq_graph *g, const char *model)
{
    int in = eng_graph_input(g);
    char said[512] = "", text[320];
    pp_log log = {.message = keep_line, .user = said};
    pp_config c = pp_defaults();
    if (in < 0) return;
    const ptq_value *v = &g->values[in];
    if (eng_preprocessing(NULL, NULL, NULL, 0, &c) != PTQ_OK || eng_fit_preprocessing(g, model, &c, &log) != PTQ_OK) {
        printf("data input %s: ptq cannot feed it images: %s\n", v->name, ptq_last_error());
        return;
    }
    printf("data input %s: %s, %s, %d channel%s%s\n", v->name, ptq_dtype_name(v->t.dtype), c.nhwc ? "NHWC" : "NCHW",
           pp_channels(&c), pp_channels(&c) == 1 ? "" : "s",
           v->t.dtype == PTQ_U8 ? " (pixels 0..255: the graph normalises)" : "");
    eng_preprocessing_text(&c, text, sizeof text);
    printf("without --preset: %s%s%s\n", eng_preprocessing_given(ENG_PP_PRESET) ? eng_preprocessing_origin() : "",
           eng_preprocessing_given(ENG_PP_PRESET) ? " (the model's metadata): " : "", text);
}

static void print_value(const ptq_graph *g, int v)
{
    const ptq_value *val = &g->values[v];
    printf("  %-32s %-8s ", val->name, ptq_dtype_name(val->t.dtype));
    if (val->t.rank < 0) {
        printf("shape unknown\n");
        return;
    }
    printf("[");
    for (int d = 0; d < val->t.rank; d++) {
        if (d) printf(", ");
        if (val->t.dims[d] >= 0) printf("%lld", (long long)val->t.dims[d]);
        else printf("%s", val->dim_params[d] ? val->dim_params[d] : "?");
    }
    printf("]\n");
}

typedef struct {
    const char *op;
    int count;
} op_count;

static int cmp_count(const void *a, const void *b)
{
    const op_count *x = a, *y = b;
    if (x->count != y->count) return y->count - x->count;
    return strcmp(x->op, y->op);
}

static void human_bytes(double b, char *buf, size_t cap)
{
    if (b >= 1 << 30) snprintf(buf, cap, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(buf, cap, "%.2f MiB", b / (1 << 20));
    else snprintf(buf, cap, "%.1f KiB", b / 1024);
}

int cmd_inspect(int argc, char **argv)
{
    static const struct option longopts[] = {{"input-shape", required_argument, 0, 's'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    ptq_input_shape shapes[MAX_SHAPES];
    char *names[MAX_SHAPES] = {0};
    int n_shapes = 0, c, rc = CLI_EXIT_OK;
    ptq_graph *g = NULL;
    ptq_plan *plan = NULL;
    op_count *hist = NULL;
    ptq_status st;
    opterr = 0;
    optind = 1;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (n_shapes == MAX_SHAPES || cli_parse_shape(optarg, &shapes[n_shapes], &names[n_shapes]) != 0 ||
                !shapes[n_shapes].name) {
                rc = cli_usage_error("inspect", "bad --input-shape '%s' (expected NAME:D1xD2x...)", optarg);
                goto out;
            }
            n_shapes++;
            break;
        case 'h':
            printf("usage: ptq inspect MODEL [--input-shape NAME:D1xD2x...]...\n");
            cli_help_help(stdout);
            goto out;
        default: rc = cli_bad_option("inspect", c, argv); goto out;
        }
    }
    if (optind != argc - 1) {
        rc = cli_usage_error("inspect", "expected one model");
        goto out;
    }
    const char *model = argv[optind];
    if ((st = onnx_model_load(model, &g)) != PTQ_OK) {
        rc = cli_fail(st);
        goto out;
    }
    printf("model: %s\n", model);
    printf("  ir_version %lld, producer '%s %s', opsets:", (long long)g->ir_version,
           g->producer_name ? g->producer_name : "", g->producer_version ? g->producer_version : "");
    for (int i = 0; i < g->n_opsets; i++)
        printf(" %s:%lld", g->opsets[i].domain && g->opsets[i].domain[0] ? g->opsets[i].domain : "ai.onnx",
               (long long)g->opsets[i].version);
    printf("\ninputs:\n");
    for (int i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].kind == PTQ_VALUE_INPUT) print_value(g, g->inputs[i]);
    print_default_preprocessing(g, model);
    if ((st = print_fitting_presets(g)) != PTQ_OK) {
        rc = cli_fail(st);
        goto out;
    }
    printf("outputs:\n");
    for (int i = 0; i < g->n_outputs; i++) print_value(g, g->outputs[i]);

    double params = 0, param_bytes = 0;
    int n_const = 0;
    for (int i = 0; i < g->n_initializers; i++) {
        const ptq_tensor *t = &g->values[g->initializers[i]].t;
        params += (double)ptq_tensor_numel(t);
        param_bytes += (double)ptq_tensor_nbytes(t);
    }
    for (int n = 0; n < g->n_nodes; n++) { /* weights stored as Constant nodes (paddle2onnx does) */
        const ptq_tensor *t = strcmp(g->nodes[n].op_type, "Constant") == 0 ? ptq_attr_tensor(&g->nodes[n], "value") : NULL;
        if (!t) continue;
        params += (double)ptq_tensor_numel(t);
        param_bytes += (double)ptq_tensor_nbytes(t);
        n_const++;
    }
    char hb[32];
    human_bytes(param_bytes, hb, sizeof hb);
    printf("parameters: %.0f in %d initializers and %d Constant nodes (%s)\n", params, g->n_initializers, n_const, hb);

    hist = calloc((size_t)g->n_nodes + 1, sizeof *hist);
    if (!hist) {
        ptq_error("%s: out of memory counting the %d nodes by operator", model, g->n_nodes);
        rc = cli_fail(PTQ_ERR_NOMEM);
        goto out;
    }
    int n_ops = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        int k = 0;
        while (k < n_ops && strcmp(hist[k].op, g->nodes[n].op_type) != 0) k++;
        if (k == n_ops) hist[n_ops++].op = g->nodes[n].op_type;
        hist[k].count++;
    }
    qsort(hist, (size_t)n_ops, sizeof *hist, cmp_count);
    printf("nodes: %d\n", g->n_nodes);
    for (int k = 0; k < n_ops; k++) printf("  %-24s %d\n", hist[k].op, hist[k].count);

    if ((st = ptq_graph_check_ops(g)) != PTQ_OK) {
        printf("unsupported: %s\n", ptq_last_error());
        fprintf(stderr, "ptq: %s: %s\n", model, ptq_last_error());
        rc = CLI_EXIT_ERROR;
        goto out;
    }
    printf("unsupported: none\n");
    ptq_plan_options opt = ptq_plan_defaults();
    if ((st = ptq_plan_create(g, shapes, n_shapes, &opt, &plan)) != PTQ_OK) {
        if (st == PTQ_ERR_ARG && n_shapes == 0) {
            printf("memory: symbolic input dims; pass --input-shape to plan (%s)\n", ptq_last_error());
        } else {
            ptq_error_prefix("%s: ", model);
            rc = cli_fail(st);
        }
        goto out;
    }
    human_bytes((double)ptq_plan_arena_bytes(plan), hb, sizeof hb);
    printf("plan: peak activation memory %s", hb);
    human_bytes((double)ptq_plan_scratch_bytes(plan), hb, sizeof hb);
    printf(" + scratch %s, %.3f GFLOP per run\n", hb, ptq_plan_flops(plan) / 1e9);
out:
    free(hist);
    ptq_plan_destroy(plan);
    ptq_graph_destroy(g);
    for (int i = 0; i < MAX_SHAPES; i++) free(names[i]);
    return rc;
}
