/* cmd_quantize.c: `ptq quantize`: the main job. One calibration pass over the images (or
 * a .npy), one method's ranges, then the FP32 model becomes a QDQ model by TensorRT's
 * explicit-quantization rules (quant/rules.c), upgraded to opset 13 when older, with the
 * matching TensorRT cache and JSON of ranges. The ranges can also come from saved
 * statistics (--from-stats, io/stats.h) or from a TensorRT cache (--from-cache). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/calib.h"
#include "cli/cli.h"
#include "cli/collect.h"
#include "cli/compare.h"
#include "engine/refine.h"
#include "io/cache.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/preset.h"
#include "io/ranges.h"
#include "quant/opset.h"
#include "quant/qdq.h"
#include "runtime/graph_edit.h"

typedef struct {
    const io_range *r;
    int n;
    char **missing;           /* names the rules asked for that have no range, each once */
    int n_missing, cap_missing;
} range_table;

static int lookup(const char *name, float *amax, void *user)
{
    range_table *t = user;
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->r[i].name, name) == 0) {
            *amax = t->r[i].amax;
            return 1;
        }
    for (int i = 0; i < t->n_missing; i++)
        if (strcmp(t->missing[i], name) == 0) return 0;
    if (t->n_missing == t->cap_missing) {
        int cap = t->cap_missing ? 2 * t->cap_missing : 16;
        char **m = realloc(t->missing, sizeof *m * (size_t)cap);
        if (!m) return 0; /* out of memory: only the report loses the name */
        t->missing = m;
        t->cap_missing = cap;
    }
    if ((t->missing[t->n_missing] = ptq_strdup(name)) != NULL) t->n_missing++;
    return 0;
}

/* --method output-mse: the candidates of an activation are the methods' answers. */
typedef struct {
    const cli_collector *col;
    io_range *ranges;
    io_cache_entry *entries;
    int n;
} refine_ctx;

static int candidates(const char *name, float *amax, int cap, void *user)
{
    static const char *const methods[] = {"max", "percentile:99.9", "percentile:99.99", "percentile:99.999", "entropy", "mse"};
    const refine_ctx *r = user;
    for (int i = 0; i < r->col->n; i++) {
        if (strcmp(r->col->t[i].name, name)) continue;
        int n = 0;
        for (int m = 0; m < 6 && n < cap; m++) {
            calib_method cm;
            int warn = 0;
            calib_method_parse(methods[m], &cm);
            float a = calib_amax(r->col->t[i].stats, &cm, &warn);
            if (!warn) amax[n++] = a;
        }
        return n;
    }
    return 0;
}

static void chosen(const char *name, float amax, void *user)
{
    refine_ctx *r = user;
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->ranges[i].name, name)) {
            r->ranges[i].amax = amax;
            r->entries[i].scale = amax / 127.0f;
        }
}

/* The float amax whose amax / 127.0f (what quant/ and the cache writer compute) is exactly
 * the cache's scale s, so that a QDQ model made from a cache has its scales bit for bit.
 * For every normal float, s * 127 rounded is such an amax (checked exhaustively over [1, 2):
 * it differs from the calibrated amax in 0.8 % of cases, by one ulp, but divides back to s);
 * the loop only guards the subnormal range, moving an ulp at a time toward s. */
static float amax_for_scale(float s)
{
    float a = (float)((double)s * 127.0);
    for (int k = 0; k < 8 && a / 127.0f != s; k++) a = nextafterf(a, a / 127.0f < s ? INFINITY : 0.0f);
    return a;
}

static void usage(FILE *fp)
{
    fprintf(fp, "usage: ptq quantize MODEL (--images DIR --preset P | --input X.npy | --from-stats S | --from-cache C)\n"
                "                    -o OUT.qdq.onnx [options]\n"
                "  --method M            max, percentile[:P], entropy (default), mse\n"
                "  --stats FILE          also save the calibration statistics (ptq stats merge)\n"
                "  --from-stats FILE     ranges of --method from saved statistics of this model, without images\n"
                "  --from-cache FILE     the ranges of a TensorRT cache (amax = scale * 127); tensors it lacks stay float\n"
                "  --cache FILE          the TensorRT calibration cache of the same ranges\n"
                "  --json FILE           ranges and scales as JSON\n"
                "  --report FILE         per node: quantized or not, and why\n"
                "  --exclude-nodes N     node name or glob (repeatable; @FILE reads one per line)\n"
                "  --exclude-op-types T  op type (repeatable, comma-separated allowed)\n"
                "  --weights int8|qdq-fp32   int8 initializers + DequantizeLinear (default), or float + Q + DQ\n"
                "  --dedicated-qdq       one Q/DQ pair per consumer\n"
                "  --batch N, --limit N, --shuffle --seed S, --strict, --exif on|off, --threads N\n"
                "  --shard I/N           only images k of the sorted list with k mod N = I (I from 0); with --stats, the\n"
                "                        N files merged (ptq stats merge) equal one pass byte for byte (docs/cluster.md)\n"
                "  --trt-version V       cache header version: your TensorRT's (default 8601 = 8.6.1; 10.14.1 is 101401)\n"
                "  --trt-algorithm A     cache header algorithm (default EntropyCalibration2, what trtexec reads)\n"
                "  --size WxH --mode M --resize I --shorter N --mean a,b,c --std a,b,c --scale V --channel-order RGB|BGR\n"
                "  --layout NCHW|NHWC --pad-value V   preprocessing overrides of the preset (as in ptq preprocess)\n"
                "  --auto-exclude --eval-images DIR (--target-cosine X | --target-top1-drop X | --metric M --target X)\n"
                "                        leave the most harmful layers in float until the target is met (see ptq compare)\n"
                "  --method output-mse   each activation's amax among the methods' answers and a grid between them,\n"
                "                        by the error of the layers reading it (sequential, from the inputs)\n"
                "  --adaround [ITERS]    learn each layer's weight rounding (AdaRound, default 2000 iterations)\n"
                "  --bias-correction, --no-bias-correction   correct each layer's bias for the mean shift INT8 causes\n"
                "                        (empirical, per output channel, layer after layer; off by default)\n"
                "  --refine-images N     images these refinements run on (default 32 of --images)\n"
                "  --config FILE         these options from a YAML file (method: mse, lists as [a, b]); the command line wins\n");
}

int cmd_quantize(int argc, char **argv)
{
    enum { O_IMAGES = 256, O_PRESET, O_INPUT, O_METHOD, O_BATCH, O_CACHE, O_JSON, O_REPORT, O_EXN, O_EXT, O_WEIGHTS,
           O_DEDICATED, O_LIMIT, O_SHUFFLE, O_SEED, O_STRICT, O_THREADS, O_TRTV, O_TRTA, O_STATS, O_FROM_STATS, O_EXIF,
           O_FROM_CACHE, O_AUTO, O_TCOS, O_TDROP, O_EVAL, O_EVAL_LIMIT, O_LABELS, O_SET, O_METRIC, O_TARGET, O_BIASC, O_NO_BIASC, O_REFINE_IMAGES, O_ADAROUND, O_SHARD };
    static const struct option longopts[] = {
        {"images", required_argument, 0, O_IMAGES},   {"preset", required_argument, 0, O_PRESET},
        {"input", required_argument, 0, O_INPUT},     {"method", required_argument, 0, O_METHOD},
        {"batch", required_argument, 0, O_BATCH},     {"cache", required_argument, 0, O_CACHE},
        {"json", required_argument, 0, O_JSON},       {"report", required_argument, 0, O_REPORT},
        {"exclude-nodes", required_argument, 0, O_EXN}, {"exclude-op-types", required_argument, 0, O_EXT},
        {"weights", required_argument, 0, O_WEIGHTS}, {"dedicated-qdq", no_argument, 0, O_DEDICATED},
        {"limit", required_argument, 0, O_LIMIT},     {"shuffle", no_argument, 0, O_SHUFFLE},
        {"seed", required_argument, 0, O_SEED},       {"strict", no_argument, 0, O_STRICT},
        {"exif", required_argument, 0, O_EXIF},       {"shard", required_argument, 0, O_SHARD},
        {"threads", required_argument, 0, O_THREADS}, {"trt-version", required_argument, 0, O_TRTV},
        {"trt-algorithm", required_argument, 0, O_TRTA},
        {"stats", required_argument, 0, O_STATS},     {"from-stats", required_argument, 0, O_FROM_STATS},
        {"from-cache", required_argument, 0, O_FROM_CACHE},
        {"auto-exclude", no_argument, 0, O_AUTO},     {"target-cosine", required_argument, 0, O_TCOS},
        {"target-top1-drop", required_argument, 0, O_TDROP}, {"eval-images", required_argument, 0, O_EVAL},
        {"eval-limit", required_argument, 0, O_EVAL_LIMIT}, {"labels", required_argument, 0, O_LABELS},
        {"metric", required_argument, 0, O_METRIC},   {"target", required_argument, 0, O_TARGET},
        {"bias-correction", no_argument, 0, O_BIASC}, {"no-bias-correction", no_argument, 0, O_NO_BIASC},
        {"refine-images", required_argument, 0, O_REFINE_IMAGES}, {"adaround", optional_argument, 0, O_ADAROUND},
        CLI_PP_LONGOPTS(O_SET),
        {"output", required_argument, 0, 'o'},        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    cli_source src = {.o = pp_dataset_defaults(), .cfg = pp_defaults()};
    const char *preset = NULL, *out = NULL, *cache = NULL, *json = NULL, *report = NULL, *method_arg = "entropy", *trt_algo = NULL;
    const char *stats = NULL, *from_stats = NULL, *from_cache = NULL;
    const char *set_keys[CLI_PP_MAX], *set_vals[CLI_PP_MAX];
    int n_set = 0;
    int method_given = 0, trt_version_given = 0, auto_exclude = 0;
    const char *eval_dir = NULL, *labels = NULL;
    long eval_limit = 0, refine_images = 32;
    eng_refine_options ro = eng_refine_defaults();
    ro.bias_correction = 0;
    cmp_target tg = {NAN, NAN, 1.0, NAN, {0}};
    cmp_metric_parse("cosine", &tg.kind);
    cmp_exclusion excl = {0};
    cli_names ex_nodes = {0}, ex_types = {0};
    int c, rc = CLI_EXIT_OK;
    long trt_version = 8601;
    quant_options qo = quant_defaults();
    calib_method method;
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    cli_collector col = {0};
    io_range *ranges = NULL;
    io_cache_entry *entries = NULL, *cached = NULL;
    int n_cached = 0;
    range_table table = {0};
    quant_report rep = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    src.o.batch = 8;
    int expanded = cli_config_expand("quantize", longopts, &argc, &argv);
    if (expanded) return expanded;
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
        case O_METHOD:
            method_arg = optarg;
            method_given = 1;
            break;
        case O_STATS: stats = optarg; break;
        case O_FROM_STATS: from_stats = optarg; break;
        case O_FROM_CACHE: from_cache = optarg; break;
        case O_CACHE: cache = optarg; break;
        case O_JSON: json = optarg; break;
        case O_REPORT: report = optarg; break;
        case O_EXN:
            if (cli_names_add(&ex_nodes, optarg)) {
                cli_names_free(&ex_nodes);
                cli_names_free(&ex_types);
                return cli_usage_error("quantize", "cannot read --exclude-nodes '%s'", optarg);
            }
            break;
        case O_EXT:
            if (cli_names_add(&ex_types, optarg)) {
                cli_names_free(&ex_nodes);
                cli_names_free(&ex_types);
                return cli_usage_error("quantize", "cannot read --exclude-op-types '%s'", optarg);
            }
            break;
        case O_WEIGHTS:
            if (strcmp(optarg, "int8") && strcmp(optarg, "qdq-fp32"))
                return cli_usage_error("quantize", "--weights takes int8 or qdq-fp32");
            qo.weights_fp32 = !strcmp(optarg, "qdq-fp32");
            break;
        case O_DEDICATED: qo.dedicated_qdq = 1; break;
        case O_TRTV:
            if (cli_parse_long(optarg, 1, 100000000, &trt_version)) return cli_usage_error("quantize", "bad --trt-version");
            trt_version_given = 1;
            break;
        case O_TRTA:
            if (!(trt_algo = io_cache_algorithm(optarg)))
                return cli_usage_error("quantize", "--trt-algorithm: EntropyCalibration2, EntropyCalibration, "
                                                   "MinMaxCalibration or LegacyCalibration");
            break;
        case O_AUTO: auto_exclude = 1; break;
        case O_TCOS:
        case O_TDROP: {
            char *end;
            double v = strtod(optarg, &end);
            if (*end || !(v >= 0 && v <= 1)) return cli_usage_error("quantize", "bad --%s '%s'", longopts[idx].name, optarg);
            if (c == O_TCOS) tg.cosine = v;
            else tg.top1_drop = v;
            break;
        }
        case O_EVAL: eval_dir = optarg; break;
        case O_LABELS: labels = optarg; break;
        case O_METRIC:
            if (cmp_metric_parse(optarg, &tg.kind))
                return cli_usage_error("quantize", "bad --metric '%s' (cosine, sqnr, top1, seq-top1[:AXIS], mask-iou:T)", optarg);
            break;
        case O_TARGET: {
            char *end;
            tg.metric = strtod(optarg, &end);
            if (*end || end == optarg || !(tg.metric == tg.metric)) return cli_usage_error("quantize", "bad --target '%s'", optarg);
            break;
        }
        case O_EVAL_LIMIT:
            if (cli_parse_long(optarg, 1, 100000000, &eval_limit)) return cli_usage_error("quantize", "bad --eval-limit");
            break;
        case O_BIASC: ro.bias_correction = 1; break;
        case O_ADAROUND:
            if (cli_adaround_arg("quantize", optarg, argc, argv, &optind, &ro.adaround_iters)) return CLI_EXIT_USAGE;
            break;
        case O_NO_BIASC: ro.bias_correction = 0; break;
        case O_REFINE_IMAGES:
            if (cli_parse_long(optarg, 1, 100000000, &refine_images)) return cli_usage_error("quantize", "bad --refine-images");
            break;
        case O_SET:
            if (n_set == CLI_PP_MAX) return cli_usage_error("quantize", "too many overrides");
            set_keys[n_set] = longopts[idx].name;
            set_vals[n_set++] = optarg;
            break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option("quantize", c, argv);
        }
    }
    if (optind != argc - 1) return cli_usage_error("quantize", "expected one model");
    if (!out) return cli_usage_error("quantize", "-o OUT.qdq.onnx is required");
    if (src.o.shard_count && !src.o.images) return cli_usage_error("quantize", "--shard slices the --images list");
    if (!!src.o.images + !!src.input_npy + !!from_stats + !!from_cache != 1)
        return cli_usage_error("quantize", "give one of --images DIR, --input X.npy, --from-stats FILE, --from-cache FILE");
    if ((from_stats || from_cache) && stats)
        return cli_usage_error("quantize", "--stats saves a calibration pass; --from-%s runs none", from_stats ? "stats" : "cache");
    if ((from_stats || from_cache) && (preset || n_set))
        return cli_usage_error("quantize", "preprocessing options do not apply to --from-%s", from_stats ? "stats" : "cache");
    if (from_cache && method_given)
        return cli_usage_error("quantize", "--method does not apply to --from-cache: the ranges are the cache's");
    if (auto_exclude && (!eval_dir || (isnan(tg.cosine) && isnan(tg.top1_drop) && isnan(tg.metric)) || !src.o.images))
        return cli_usage_error("quantize", "--auto-exclude needs --images, --eval-images and --target-cosine, --target-top1-drop or --metric M --target X");
    if (!auto_exclude && (eval_dir || !isnan(tg.cosine) || !isnan(tg.top1_drop) || !isnan(tg.metric)))
        return cli_usage_error("quantize", "--eval-images and --target* go with --auto-exclude");
    int output_mse = !strcmp(method_arg, "output-mse");
    if ((ro.bias_correction || ro.adaround_iters || output_mse) && !src.o.images)
        return cli_usage_error("quantize", "--%s runs the model on images: give --images",
                               output_mse ? "method output-mse" : ro.adaround_iters ? "adaround" : "bias-correction");
    if (output_mse) {
        method_arg = "mse"; /* the starting point; each activation's amax is then chosen again */
        ro.output_aware = 1;
    }
    if (calib_method_parse(method_arg, &method) != 0)
        return cli_usage_error("quantize", "bad --method '%s' (max, percentile[:P], entropy, mse)", method_arg);
    const char *model = argv[optind];
    col.nthreads = src.o.threads > 0 ? src.o.threads : omp_get_max_threads();
    uint64_t stats_images = 0;
    char algo[128] = ""; /* --from-cache's header: its version is kept, its algorithm is not (trtexec's is EntropyCalibration2) */
    long cache_version = 0;
    if (!from_stats && !from_cache && !src.input_npy && (st = cli_preprocessing(preset, set_keys, set_vals, n_set, &src.cfg)) != PTQ_OK)
        goto fail;
    if ((st = onnx_model_load(model, &g)) != PTQ_OK) goto fail;
    if (from_stats) {
        if ((st = cli_stats_load(from_stats, model, &col, &stats_images)) != PTQ_OK) goto fail;
    } else if (from_cache) {
        if ((st = io_cache_read(from_cache, &cached, &n_cached, &cache_version, algo, sizeof algo)) != PTQ_OK) goto fail;
    } else {
        if ((st = cli_collect(g, model, &src, &col)) != PTQ_OK) goto fail;
        if (stats && (st = cli_stats_save(stats, model, &src, &col)) != PTQ_OK) goto fail;
    }
    int n_ranges = from_cache ? n_cached : col.n;
    ranges = calloc((size_t)n_ranges + 1, sizeof *ranges);
    entries = calloc((size_t)n_ranges + 1, sizeof *entries);
    int *warn = calloc((size_t)n_ranges + 1, sizeof(int));
    if (!ranges || !entries || !warn) {
        free(warn);
        ptq_error("out of memory");
        st = PTQ_ERR_NOMEM;
        goto fail;
    }
    if (from_cache) {
        for (int i = 0; i < n_cached; i++) {
            float a = amax_for_scale(cached[i].scale);
            warn[i] = !(a >= 0x1p-30f); /* a zero scale: quant/ uses amax 1.0 */
            ranges[i].name = entries[i].name = cached[i].name;
            ranges[i].amax = warn[i] ? 1.0f : a;
            entries[i].scale = ranges[i].amax / 127.0f;
        }
    } else {
        /* ranges of the chosen method, in parallel over tensors */
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < col.n; i++) {
            float a = calib_amax(col.t[i].stats, &method, &warn[i]);
            ranges[i].name = col.t[i].name;
            ranges[i].amax = a;
            entries[i].name = col.t[i].name;
            entries[i].scale = a / 127.0f;
        }
    }
    int warned = 0;
    for (int i = 0; i < n_ranges; i++)
        if (warn[i]) {
            warned++;
            if (from_cache)
                fprintf(stderr, "ptq: warning: tensor '%s' has scale %g in %s: amax 1.0\n", ranges[i].name,
                        (double)cached[i].scale, from_cache);
            else
                fprintf(stderr, "ptq: warning: tensor '%s' was all zeros or never finite: amax 1.0\n", ranges[i].name);
        }
    free(warn);

    /* --auto-exclude: the fewest layers in float that meet the target on the evaluation images */
    if (auto_exclude) {
        cmp_cache *cc = cmp_cache_create((size_t)512 << 20);
        cmp_eval ev = {.g = g, .model = model, .o = src.o, .cfg = src.cfg, .labels = labels, .nthreads = src.o.threads,
                       .cache = cc, .metric = tg.kind};
        ev.o.images = eval_dir;
        ev.o.limit = (int)eval_limit;
        ev.o.shuffle = 0;
        quant_options base = qo;
        base.exclude_nodes = ex_nodes.names;
        base.n_exclude_nodes = ex_nodes.n;
        base.exclude_op_types = ex_types.names;
        base.n_exclude_op_types = ex_types.n;
        ptq_graph *gq = NULL;
        quant_report r0 = {0};
        cmp_layer *layers = NULL;
        int n_layers = 0;
        cmp_metrics m;
        st = cc ? PTQ_OK : PTQ_ERR_NOMEM;
        ev.o.label = "auto-exclude: FP32 baseline";
        if (st == PTQ_OK) st = cmp_target_baseline(&ev, &tg);
        ev.o.label = "auto-exclude: evaluating";
        if (st == PTQ_OK) st = cmp_build_qdq(&ev, ranges, n_ranges, &base, &gq, &r0);
        if (st == PTQ_OK) st = cmp_evaluate(&ev, &gq, 1, &m);
        if (st == PTQ_OK && cmp_meets(&tg, &m)) {
            excl.reached = m;
        } else if (st == PTQ_OK) {
            ev.o.label = "auto-exclude: layer-wise errors";
            st = cmp_layers(&ev, gq, &layers, &n_layers);
            if (st == PTQ_OK) st = cmp_auto_exclude(&ev, ranges, n_ranges, &base, gq, layers, n_layers, &tg, &excl);
        }
        cmp_layers_free(layers, n_layers);
        quant_report_free(&r0);
        ptq_graph_destroy(gq);
        cmp_cache_destroy(cc);
        if (st != PTQ_OK) goto fail;
        for (int i = 0; i < excl.n_nodes; i++)
            if (cli_names_push(&ex_nodes, excl.nodes[i])) {
                st = PTQ_ERR_NOMEM;
                ptq_error("out of memory");
                goto fail;
            }
        fprintf(stderr, "ptq quantize: auto-exclude: %d node%s in float, cosine %.6f on %d evaluation images%s", excl.n_nodes,
                excl.n_nodes == 1 ? "" : "s", excl.reached.cosine, excl.reached.images, excl.n_nodes ? ":" : "\n");
        for (int i = 0; i < excl.n_nodes; i++) fprintf(stderr, "%s%s", i ? "," : " ", excl.nodes[i]);
        if (excl.n_nodes) fprintf(stderr, "\n");
    }

    /* the QDQ model */
    int n_const = 0, n_upgraded = 0;
    int64_t opset0 = ptq_graph_opset(g, "");
    if ((st = ptq_graph_constants_to_initializers(g, &n_const)) != PTQ_OK) goto fail;
    if ((st = quant_upgrade_opset(g, 13, &n_upgraded)) != PTQ_OK) {
        ptq_error_prefix("%s: ", model);
        goto fail;
    }
    table.r = ranges;
    table.n = n_ranges;
    qo.range = lookup;
    qo.range_user = &table;
    qo.exclude_nodes = ex_nodes.names;
    qo.n_exclude_nodes = ex_nodes.n;
    qo.exclude_op_types = ex_types.names;
    qo.n_exclude_op_types = ex_types.n;
    if ((st = quant_insert_qdq(g, &qo, &rep)) != PTQ_OK) {
        ptq_error_prefix("%s: ", model);
        goto fail;
    }
    for (int i = 0; i < rep.n_unmatched; i++)
        fprintf(stderr, "ptq: warning: exclusion '%s' matches no node\n", rep.unmatched[i]);
    for (int i = 0; i < table.n_missing; i++)
        fprintf(stderr, "ptq: warning: tensor '%s' has no range in %s: the nodes reading it stay float\n", table.missing[i],
                from_cache ? from_cache : from_stats ? from_stats : "the calibration");
    warned += table.n_missing;
    if (ro.bias_correction || ro.adaround_iters || ro.output_aware) {
        /* the FP32 model as the QDQ graph was made from it: constants as initializers, opset 13 */
        ptq_graph *fp = NULL;
        int fp_upgraded = 0, fp_const = 0;
        eng_refine_report rr;
        pp_dataset_options ro_o = src.o;
        ro_o.limit = (int)refine_images;
        ro_o.label = "refine";
        ro.nthreads = src.o.threads;
        refine_ctx rc_user = {.col = &col, .ranges = ranges, .entries = entries, .n = n_ranges};
        ro.candidates = candidates;
        ro.on_amax = chosen;
        ro.user = &rc_user;
        if ((st = onnx_model_load(model, &fp)) == PTQ_OK && (st = ptq_graph_constants_to_initializers(fp, &fp_const)) == PTQ_OK)
            st = quant_upgrade_opset(fp, 13, &fp_upgraded);
        eng_dataset_source ds;
        eng_source es = eng_source_dataset(&ds, &ro_o, &src.cfg);
        if (st == PTQ_OK) st = eng_refine(g, fp, &es, &ro, &rr);
        ptq_graph_destroy(fp);
        if (st != PTQ_OK) {
            ptq_error_prefix("%s: ", model);
            goto fail;
        }
        fprintf(stderr,
                "ptq quantize: refined on %d images in %d passes, %.1f s: %d activation scales chosen by output error (%.1f s), "
                "%d of %d layers rounded by AdaRound (%ld codes changed, %.1f s), %d biases corrected\n",
                rr.images, rr.passes, rr.seconds_total, rr.scales, rr.seconds_scales, rr.rounded, rr.layers, rr.codes_changed,
                rr.seconds_adaround, rr.corrected);
    }
    if ((st = onnx_model_save(g, out)) != PTQ_OK) goto fail;
    char tag[64];
    if (from_cache) snprintf(tag, sizeof tag, "cache");
    else if (ro.output_aware) snprintf(tag, sizeof tag, "output-mse");
    else calib_method_name(&method, tag, sizeof tag);
    if (from_cache && !trt_version_given) trt_version = cache_version;
    if (cache && (st = io_cache_write(cache, trt_version, io_cache_algorithm(trt_algo), entries, n_ranges)) != PTQ_OK) goto fail;
    if (json && (st = io_ranges_write_json(json, tag, ranges, n_ranges)) != PTQ_OK) goto fail;
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
    char from[4200];
    if (from_cache) snprintf(from, sizeof from, "ranges of %d tensors from %s", n_cached, from_cache);
    else if (from_stats)
        snprintf(from, sizeof from, "statistics of %llu images from %s; method %s", (unsigned long long)stats_images,
                 from_stats, tag);
    else snprintf(from, sizeof from, "%d images used, %d skipped; method %s", src.images, src.skipped, tag);
    fprintf(stderr,
            "ptq quantize: %s; %d activation tensors and %d weights quantized in %d "
            "nodes; %d nodes excluded; opset %lld -> 13 (%d nodes rewritten); %d warnings; %.1f s, peak RSS %.0f MB; wrote %s%s%s\n",
            from, rep.n_activations, rep.n_weights, quantized, rep.n_excluded,
            (long long)opset0, n_upgraded, warned, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
            cli_peak_rss_mb(), out, stats ? "; statistics saved to " : "", stats ? stats : "");
    goto done;
fail:
    rc = cli_fail(st);
done:
    quant_report_free(&rep);
    cmp_exclusion_free(&excl);
    free(ranges);
    free(entries);
    io_cache_free(cached, n_cached);
    for (int i = 0; i < table.n_missing; i++) free(table.missing[i]);
    free(table.missing);
    cli_collector_free(&col);
    ptq_graph_destroy(g);
    cli_names_free(&ex_nodes);
    cli_names_free(&ex_types);
    return rc;
}
