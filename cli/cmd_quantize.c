/* cmd_quantize.c: `ptq quantize`: the main job. One calibration pass over the images (or
 * a .npy), one method's ranges, then the FP32 model becomes a QDQ model by TensorRT's
 * explicit-quantization rules (quant/rules.c), upgraded to opset 13 when older, with the
 * matching TensorRT cache and JSON of ranges. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/calib.h"
#include "cli/cli.h"
#include "cli/collect.h"
#include "io/cache.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/preset.h"
#include "io/ranges.h"
#include "quant/opset.h"
#include "quant/qdq.h"
#include "runtime/graph_edit.h"

#define MAX_LIST 256

typedef struct {
    const io_range *r;
    int n;
} range_table;

static int lookup(const char *name, float *amax, void *user)
{
    const range_table *t = user;
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->r[i].name, name) == 0) {
            *amax = t->r[i].amax;
            return 1;
        }
    return 0;
}

static void usage(FILE *fp)
{
    fprintf(fp, "usage: ptq quantize MODEL (--images DIR --preset P | --input X.npy) -o OUT.qdq.onnx [options]\n"
                "  --method M            max, percentile[:P], entropy (default), mse\n"
                "  --cache FILE          the TensorRT calibration cache of the same ranges\n"
                "  --json FILE           ranges and scales as JSON\n"
                "  --report FILE         per node: quantized or not, and why\n"
                "  --exclude-nodes N     node name or glob (repeatable; @FILE reads one per line)\n"
                "  --exclude-op-types T  op type (repeatable, comma-separated allowed)\n"
                "  --weights int8|qdq-fp32   int8 initializers + DequantizeLinear (default), or float + Q + DQ\n"
                "  --dedicated-qdq       one Q/DQ pair per consumer\n"
                "  --batch N, --limit N, --shuffle --seed S, --strict, --threads N, --trt-version V\n");
}

/* Appends the names of an @file (one per line, # comments) or a comma list. */
static int add_names(const char *arg, const char **list, int *n, char **owned, int *n_owned)
{
    if (arg[0] == '@') {
        uint8_t *buf;
        size_t len;
        if (io_read_file(arg + 1, &buf, &len, 1 << 24) != PTQ_OK) return -1;
        owned[(*n_owned)++] = (char *)buf;
        for (char *line = strtok((char *)buf, "\r\n"); line; line = strtok(NULL, "\r\n")) {
            while (*line == ' ') line++;
            if (!*line || *line == '#') continue;
            if (*n == MAX_LIST) return -1;
            list[(*n)++] = line;
        }
        return 0;
    }
    char *copy = ptq_strdup(arg);
    if (!copy) return -1;
    owned[(*n_owned)++] = copy;
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == MAX_LIST) return -1;
        list[(*n)++] = tok;
    }
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    enum { O_IMAGES = 256, O_PRESET, O_INPUT, O_METHOD, O_BATCH, O_CACHE, O_JSON, O_REPORT, O_EXN, O_EXT, O_WEIGHTS,
           O_DEDICATED, O_LIMIT, O_SHUFFLE, O_SEED, O_STRICT, O_THREADS, O_TRTV };
    static const struct option longopts[] = {
        {"images", required_argument, 0, O_IMAGES},   {"preset", required_argument, 0, O_PRESET},
        {"input", required_argument, 0, O_INPUT},     {"method", required_argument, 0, O_METHOD},
        {"batch", required_argument, 0, O_BATCH},     {"cache", required_argument, 0, O_CACHE},
        {"json", required_argument, 0, O_JSON},       {"report", required_argument, 0, O_REPORT},
        {"exclude-nodes", required_argument, 0, O_EXN}, {"exclude-op-types", required_argument, 0, O_EXT},
        {"weights", required_argument, 0, O_WEIGHTS}, {"dedicated-qdq", no_argument, 0, O_DEDICATED},
        {"limit", required_argument, 0, O_LIMIT},     {"shuffle", no_argument, 0, O_SHUFFLE},
        {"seed", required_argument, 0, O_SEED},       {"strict", no_argument, 0, O_STRICT},
        {"threads", required_argument, 0, O_THREADS}, {"trt-version", required_argument, 0, O_TRTV},
        {"output", required_argument, 0, 'o'},        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    cli_source src = {.o = pp_dataset_defaults(), .cfg = pp_defaults()};
    const char *preset = NULL, *out = NULL, *cache = NULL, *json = NULL, *report = NULL, *method_arg = "entropy";
    const char *ex_nodes[MAX_LIST], *ex_types[MAX_LIST];
    char *owned[2 * MAX_LIST];
    int n_ex_nodes = 0, n_ex_types = 0, n_owned = 0, c, rc = CLI_EXIT_OK;
    long trt_version = 8601;
    quant_options qo = quant_defaults();
    calib_method method;
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    cli_collector col = {0};
    io_range *ranges = NULL;
    io_cache_entry *entries = NULL;
    quant_report rep = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    src.o.batch = 8;
    opterr = 0;
    optind = 1;
    int idx;
    while ((idx = -1, c = getopt_long(argc, argv, ":ho:", longopts, &idx)) != -1) {
        int shared = c != '?' && c != ':' && idx >= 0 ? cli_dataset_option("quantize", longopts[idx].name, optarg, &src.o) : 0;
        if (shared < 0) return CLI_EXIT_USAGE;
        if (shared) continue;
        switch (c) {
        case O_IMAGES: src.o.images = optarg; break;
        case O_PRESET: preset = optarg; break;
        case O_INPUT: src.input_npy = optarg; break;
        case O_METHOD: method_arg = optarg; break;
        case O_CACHE: cache = optarg; break;
        case O_JSON: json = optarg; break;
        case O_REPORT: report = optarg; break;
        case O_EXN:
            if (add_names(optarg, ex_nodes, &n_ex_nodes, owned, &n_owned))
                return cli_usage_error("quantize", "cannot read --exclude-nodes '%s'", optarg);
            break;
        case O_EXT:
            if (add_names(optarg, ex_types, &n_ex_types, owned, &n_owned))
                return cli_usage_error("quantize", "cannot read --exclude-op-types '%s'", optarg);
            break;
        case O_WEIGHTS:
            if (strcmp(optarg, "int8") && strcmp(optarg, "qdq-fp32"))
                return cli_usage_error("quantize", "--weights takes int8 or qdq-fp32");
            qo.weights_fp32 = !strcmp(optarg, "qdq-fp32");
            break;
        case O_DEDICATED: qo.dedicated_qdq = 1; break;
        case O_TRTV:
            if (cli_parse_long(optarg, 1, 100000000, &trt_version)) return cli_usage_error("quantize", "bad --trt-version");
            break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option("quantize", c, argv);
        }
    }
    if (optind != argc - 1) return cli_usage_error("quantize", "expected one model");
    if (!out) return cli_usage_error("quantize", "-o OUT.qdq.onnx is required");
    if (!!src.o.images == !!src.input_npy) return cli_usage_error("quantize", "give either --images DIR or --input X.npy");
    if (calib_method_parse(method_arg, &method) != 0)
        return cli_usage_error("quantize", "bad --method '%s' (max, percentile[:P], entropy, mse)", method_arg);
    const char *model = argv[optind];
    col.nthreads = src.o.threads > 0 ? src.o.threads : omp_get_max_threads();
    if (!src.input_npy && (st = cli_preprocessing(preset, NULL, NULL, 0, &src.cfg)) != PTQ_OK) goto fail;
    if ((st = onnx_model_load(model, &g)) != PTQ_OK) goto fail;
    if ((st = cli_collect(g, model, &src, &col)) != PTQ_OK) goto fail;

    /* ranges of the chosen method, in parallel over tensors */
    ranges = calloc((size_t)col.n + 1, sizeof *ranges);
    entries = calloc((size_t)col.n + 1, sizeof *entries);
    int *warn = calloc((size_t)col.n + 1, sizeof(int));
    if (!ranges || !entries || !warn) {
        free(warn);
        ptq_error("out of memory");
        st = PTQ_ERR_NOMEM;
        goto fail;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < col.n; i++) {
        float a = calib_amax(col.t[i].stats, &method, &warn[i]);
        ranges[i].name = col.t[i].name;
        ranges[i].amax = a;
        entries[i].name = col.t[i].name;
        entries[i].scale = a / 127.0f;
    }
    int warned = 0;
    for (int i = 0; i < col.n; i++)
        if (warn[i]) {
            warned++;
            fprintf(stderr, "ptq: warning: tensor '%s' was all zeros or never finite: amax 1.0\n", col.t[i].name);
        }
    free(warn);

    /* the QDQ model */
    int n_const = 0, n_upgraded = 0;
    int64_t opset0 = ptq_graph_opset(g, "");
    if ((st = ptq_graph_constants_to_initializers(g, &n_const)) != PTQ_OK) goto fail;
    if ((st = quant_upgrade_opset(g, 13, &n_upgraded)) != PTQ_OK) {
        ptq_error_prefix("%s: ", model);
        goto fail;
    }
    range_table table = {ranges, col.n};
    qo.range = lookup;
    qo.range_user = &table;
    qo.exclude_nodes = ex_nodes;
    qo.n_exclude_nodes = n_ex_nodes;
    qo.exclude_op_types = ex_types;
    qo.n_exclude_op_types = n_ex_types;
    if ((st = quant_insert_qdq(g, &qo, &rep)) != PTQ_OK) {
        ptq_error_prefix("%s: ", model);
        goto fail;
    }
    for (int i = 0; i < rep.n_unmatched; i++)
        fprintf(stderr, "ptq: warning: exclusion '%s' matches no node\n", rep.unmatched[i]);
    if ((st = onnx_model_save(g, out)) != PTQ_OK) goto fail;
    char tag[64];
    calib_method_name(&method, tag, sizeof tag);
    if (cache && (st = io_cache_write(cache, trt_version, method.kind == CALIB_MAX ? "MinMaxCalibration" : "EntropyCalibration2",
                                      entries, col.n)) != PTQ_OK)
        goto fail;
    if (json && (st = io_ranges_write_json(json, tag, ranges, col.n)) != PTQ_OK) goto fail;
    if (report) {
        io_atomic_file f;
        if ((st = io_atomic_open(&f, report)) != PTQ_OK) goto fail;
        static const char *const states[] = {"quantized", "float", "excluded", "not quantized"};
        for (int i = 0; i < rep.n_nodes; i++)
            fprintf(f.fp, "%s\t%s\t%s\t%s\n", rep.nodes[i].node_name, rep.nodes[i].op_type, states[rep.nodes[i].state],
                    rep.nodes[i].reason);
        if ((st = io_atomic_commit(&f)) != PTQ_OK) goto fail;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int quantized = 0;
    for (int i = 0; i < rep.n_nodes; i++) quantized += rep.nodes[i].state == QUANT_NODE_QUANTIZED;
    fprintf(stderr,
            "ptq quantize: %d images used, %d skipped; method %s; %d activation tensors and %d weights quantized in %d "
            "nodes; %d nodes excluded; opset %lld -> 13 (%d nodes rewritten); %d warnings; %.1f s; wrote %s\n",
            src.images, src.skipped, tag, rep.n_activations, rep.n_weights, quantized, rep.n_excluded,
            (long long)opset0, n_upgraded, warned, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
            out);
    goto done;
fail:
    rc = cli_fail(st);
done:
    quant_report_free(&rep);
    free(ranges);
    free(entries);
    cli_collector_free(&col);
    ptq_graph_destroy(g);
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    return rc;
}
