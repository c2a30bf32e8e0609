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
#include "engine/preprocessing.h"
#include "engine/collect.h"
#include "engine/compare.h"
#include "engine/quantize.h"
#include "engine/refine.h"
#include "io/cache.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/preset.h"
#include "io/ranges.h"
#include "quant/opset.h"
#include "quant/qdq.h"
#include "runtime/graph_edit.h"

static void usage(FILE *fp)
{
    fprintf(fp, "usage: ptq quantize MODEL (--images DIR --preset P | --input X.npy | --from-stats S | --from-cache C)\n"
                "                    -o, --output OUT.qdq.onnx [options]\n"
                "  --recipe R            fast: percentile:99.99, one pass (the default); balanced: the method among max,\n"
                "                        percentile:99.99, percentile:99.999 and mse that scores best on held-out images,\n"
                "                        then bias correction; best: balanced + equalization, output-aware scales and\n"
                "                        AdaRound; each refinement kept only where it helps (docs/quantizing.md#recipes)\n"
                "  --method M            max, percentile[:P] (default percentile:99.99), entropy (TensorRT's\n"
                "                        calibrator), mse; with --recipe: that method instead of the measured choice\n"
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
                "  --float-dtype fp32|fp16   the written type of the layers left in float: fp32 or fp16 (float16 weights\n"
                "                        and activations, Casts where they meet float32; Q/DQ stay float32); default: the\n"
                "                        model's own (fp16 for a float16 model, whose graph inputs and outputs stay float16)\n"
                "  --memory MB           memory budget (default 512): the default batch (the most, up to 8, it holds)\n"
                "                        and the replay caches (half of it) follow it; outputs do not\n"
                "  --batch N, --limit N, --shuffle --seed S, --strict, --exif on|off, --threads N (--seed S also draws the\n"
                "                        refinements' samples: output-mse, AdaRound; default 0)\n"
                "  --shard I/N           only images k of the sorted list with k mod N = I (I from 0); with --stats, the\n"
                "                        N files merged (ptq stats merge) equal one pass byte for byte (docs/cluster.md)\n"
                "  --trt-version V       cache header version: your TensorRT's (default 8601 = 8.6.1; 10.14.1 is 101401)\n"
                "  --trt-algorithm A     cache header algorithm (default EntropyCalibration2, what trtexec reads)\n");
    fprintf(fp, "  --auto-exclude --eval-images DIR (--target-cosine X | --target-top1-drop X | --metric M --target X\n"
                "                        | --metric M --target-drop X: M at most X below FP32's own value, e.g. map)\n"
                "  [--eval-limit N] [--labels FILE|list:FILE|folders|yolo:DIR|coco:FILE|paddle:FILE:dict=KEYS|\n"
                "                        text:DIR:dict=KEYS|mask:DIR[:ignore=V]|paddledet:FILE]   (the evaluation images and\n"
                "                        their labels, as\n"
                "                        in ptq compare)\n"
                "                        leave the most harmful layers in float until the target is met (see ptq compare)\n"
                "  --float fp16|fp32     how measurements on images (--auto-exclude, --recipe's method choice, the\n"
                "                        refinement check) evaluate the layers in float (default fp16, as ptq compare)\n"
                "  --method output-mse   each activation's amax among the methods' answers and a grid between them,\n"
                "                        by the error of the layers reading it (sequential, from the inputs)\n"
                "  --adaround [ITERS]    learn each layer's weight rounding (AdaRound, default 500 iterations)\n"
                "  --bias-correction, --no-bias-correction   correct each layer's bias for the mean shift INT8 causes\n"
                "                        (empirical, per output channel, layer after layer; off by default)\n"
                "  --refine-images N     images these refinements run on (default 32 of --images)\n"
                "  --no-refine-check     keep every refinement asked for; by default each one is kept only where it\n"
                "                        helps the task metric (--metric, else the one that fits the model) on the\n"
                "                        --eval-images, or else on every fourth calibration image, held out of it\n"
                "  --refine-memory MB    layer inputs the refinements keep in memory between layers (default 1024);\n"
                "                        beyond it they go to a temporary file in TMPDIR\n"
                "  --equalize            before calibration, scale the channels in front of depthwise Convs by powers of\n"
                "                        two so that each spans at least half the tensor's range (the FP32 model's bits\n"
                "                        and the int8 weight codes are unchanged; the cache then fits the model\n"
                "                        'ptq translate OUT.qdq.onnx' writes, so not with --cache)\n"
                "  --config FILE         these options from a YAML file (method: mse, lists as [a, b]); the command line wins\n");
    cli_help_overrides(fp);
    cli_help_help(fp);
}

int cmd_quantize(int argc, char **argv)
{
    enum { O_IMAGES = 256, O_PRESET, O_INPUT, O_METHOD, O_BATCH, O_CACHE, O_JSON, O_REPORT, O_EXN, O_EXT, O_WEIGHTS,
           O_DEDICATED, O_LIMIT, O_SHUFFLE, O_SEED, O_STRICT, O_THREADS, O_TRTV, O_TRTA, O_STATS, O_FROM_STATS, O_EXIF,
           O_FROM_CACHE, O_AUTO, O_TCOS, O_TDROP, O_TMDROP, O_EVAL, O_EVAL_LIMIT, O_LABELS, O_SET, O_METRIC, O_TARGET, O_BIASC, O_NO_BIASC, O_REFINE_IMAGES, O_ADAROUND, O_SHARD, O_EQUALIZE, O_REFINE_MEMORY, O_NO_REFINE_CHECK, O_RECIPE,
           O_FLOAT, O_FLOAT_DTYPE, O_MEMORY };
    static const struct option longopts[] = {
        {"images", required_argument, 0, O_IMAGES},   {"preset", required_argument, 0, O_PRESET},
        {"input", required_argument, 0, O_INPUT},     {"method", required_argument, 0, O_METHOD},
        {"batch", required_argument, 0, O_BATCH}, {"memory", required_argument, 0, O_MEMORY},     {"cache", required_argument, 0, O_CACHE},
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
        {"target-top1-drop", required_argument, 0, O_TDROP},
        {"target-drop", required_argument, 0, O_TMDROP}, {"eval-images", required_argument, 0, O_EVAL},
        {"eval-limit", required_argument, 0, O_EVAL_LIMIT}, {"labels", required_argument, 0, O_LABELS},
        {"metric", required_argument, 0, O_METRIC},   {"target", required_argument, 0, O_TARGET},
        {"bias-correction", no_argument, 0, O_BIASC}, {"no-bias-correction", no_argument, 0, O_NO_BIASC},
        {"refine-images", required_argument, 0, O_REFINE_IMAGES}, {"refine-memory", required_argument, 0, O_REFINE_MEMORY},
        {"no-refine-check", no_argument, 0, O_NO_REFINE_CHECK}, {"recipe", required_argument, 0, O_RECIPE}, {"adaround", optional_argument, 0, O_ADAROUND},
        {"equalize", no_argument, 0, O_EQUALIZE},
        {"float", required_argument, 0, O_FLOAT},     {"float-dtype", required_argument, 0, O_FLOAT_DTYPE},
        CLI_PP_LONGOPTS(O_SET),
        {"output", required_argument, 0, 'o'},        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    eng_calib_source src = {.o = pp_dataset_defaults(), .cfg = pp_defaults()};
    const char *preset = NULL, *out = NULL, *cache = NULL, *json = NULL, *report = NULL, *method_arg = "percentile:99.99", *trt_algo = NULL;
    const char *stats = NULL, *from_stats = NULL, *from_cache = NULL;
    const char *set_keys[CLI_PP_MAX], *set_vals[CLI_PP_MAX];
    int n_set = 0;
    int method_given = 0, trt_version_given = 0, auto_exclude = 0, equalize = 0, eval_float16 = 1, write_float16 = -1;
    const char *eval_dir = NULL, *labels = NULL;
    long eval_limit = 0, refine_images = 32;
    int refine_check = 1, metric_given = 0, no_biasc = 0;
    const char *recipe = NULL;
    eng_refine_options ro = eng_refine_defaults();
    ro.bias_correction = 0;
    cmp_target tg = {NAN, NAN, 1.0, NAN, {0}, NAN};
    cmp_metric_parse("cosine", &tg.kind);
    cli_names ex_nodes = {0}, ex_types = {0};
    int c, rc = CLI_EXIT_OK;
    long trt_version = 8601;
    quant_options qo = quant_defaults();
    calib_method method;
    ptq_status st = PTQ_OK;
    eng_quantize_job job = eng_quantize_job_defaults();
    eng_quantize_result res = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    src.o.batch = 0; /* the model's (eng_fit_batch) */
    int expanded = cli_config_expand("quantize", longopts, &argc, &argv);
    if (expanded) return expanded;
    opterr = 0;
    optind = 1;
    int idx;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
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
        case O_FLOAT:
        case O_FLOAT_DTYPE:
            if (strcmp(optarg, "fp16") && strcmp(optarg, "fp32"))
                return cli_usage_error("quantize", "--%s takes fp16 or fp32", longopts[idx].name);
            if (c == O_FLOAT) eval_float16 = !strcmp(optarg, "fp16");
            else write_float16 = !strcmp(optarg, "fp16");
            break;
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
                return cli_usage_error("quantize", "bad --metric '%s' (" CMP_METRIC_SPELLINGS ")", optarg);
            metric_given = 1;
            break;
        case O_TMDROP: {
            char *end;
            tg.drop = strtod(optarg, &end);
            if (*end || end == optarg || !(tg.drop >= 0 && tg.drop <= 1e30))
                return cli_usage_error("quantize", "bad --target-drop '%s'", optarg);
            break;
        }
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
        case O_NO_BIASC:
            ro.bias_correction = 0;
            no_biasc = 1;
            break;
        case O_RECIPE: recipe = optarg; break;
        case O_EQUALIZE: equalize = 1; break;
        case O_NO_REFINE_CHECK: refine_check = 0; break;
        case O_REFINE_MEMORY: {
            long mb;
            if (cli_parse_long(optarg, 1, 1L << 30, &mb)) return cli_usage_error("quantize", "bad --refine-memory (megabytes, >= 1)");
            ro.memory_budget = (size_t)mb << 20;
            break;
        }
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
    if (auto_exclude && (!eval_dir || (isnan(tg.cosine) && isnan(tg.top1_drop) && isnan(tg.metric) && isnan(tg.drop)) || !src.o.images))
        return cli_usage_error("quantize", "--auto-exclude needs --images, --eval-images and --target-cosine, --target-top1-drop or --metric M --target X|--target-drop X");
    if (!isnan(tg.drop) && tg.kind.kind == CMP_METRIC_SQNR)
        return cli_usage_error("quantize", "--target-drop: FP32 has no sqnr of its own; use --target X");
    int refining = ro.bias_correction || ro.adaround_iters > 0 || !strcmp(method_arg, "output-mse");
    if (!auto_exclude && (!isnan(tg.cosine) || !isnan(tg.top1_drop) || !isnan(tg.metric) || !isnan(tg.drop)))
        return cli_usage_error("quantize", "--target* go with --auto-exclude");
    if (recipe && strcmp(recipe, "fast")) refining = 1; /* balanced and best measure on them */
    if (!auto_exclude && eval_dir && (!refining || !refine_check))
        return cli_usage_error("quantize", "--eval-images go with --auto-exclude or with a checked refinement (--bias-correction, --adaround, --method output-mse)");
    if (equalize && cache)
        return cli_usage_error("quantize", "--equalize changes the model: its cache fits the model 'ptq translate OUT.qdq.onnx' "
                                           "writes, not MODEL (drop --cache and run ptq translate)");
    if (equalize && (!src.o.images || stats))
        return cli_usage_error("quantize", "--equalize measures the model on --images%s", stats ? " and changes it: not with --stats" : "");
    if (recipe && strcmp(recipe, "fast") && (!src.o.images || from_stats || from_cache))
        return cli_usage_error("quantize", "--recipe %s measures the model on images: give --images (not --from-stats or --from-cache)", recipe);
    int output_mse = !strcmp(method_arg, "output-mse");
    if ((ro.bias_correction || ro.adaround_iters || output_mse) && !src.o.images)
        return cli_usage_error("quantize", "--%s runs the model on images: give --images",
                               output_mse ? "method output-mse" : ro.adaround_iters ? "adaround" : "bias-correction");
    if (!strcmp(method_arg, "output-mse")) {
        method_arg = "mse"; /* the starting point; each activation's amax is then chosen again */
        ro.output_aware = 1;
    }
    if (calib_method_parse(method_arg, &method) != 0)
        return cli_usage_error("quantize", "bad --method '%s' (max, percentile[:P], entropy, mse)", method_arg);
    {
        const char *in[] = {src.o.images, src.input_npy, from_stats, from_cache, eval_dir,
                            cmp_labels_path(labels)};
        const char *outs[] = {out, cache, json, report, stats};
        int bad = cli_check_paths("quantize", in, 6, outs, 5);
        if (bad) return bad;
    }
    const char *model = argv[optind];
    if (!from_stats && !from_cache && !src.input_npy && (st = eng_preprocessing(preset, set_keys, set_vals, n_set, &src.cfg)) != PTQ_OK)
        goto fail;
    job.model = model;
    job.src = from_stats || from_cache ? NULL : &src;
    job.from_stats = from_stats;
    job.from_cache = from_cache;
    job.stats_out = stats;
    job.method = method;
    job.output_mse = ro.output_aware;
    job.equalize = equalize;
    qo.exclude_nodes = ex_nodes.names;
    qo.n_exclude_nodes = ex_nodes.n;
    qo.exclude_op_types = ex_types.names;
    qo.n_exclude_op_types = ex_types.n;
    job.qo = qo;
    job.ro = ro;
    job.refine_images = (int)refine_images;
    job.refine_check = refine_check;
    job.metric_given = metric_given;
    if (recipe && (st = eng_quantize_recipe(&job, recipe, method_given, no_biasc, !cache && !stats)) != PTQ_OK) {
        fprintf(stderr, "ptq quantize: %s\n", ptq_last_error());
        return CLI_EXIT_USAGE;
    }
    equalize = job.equalize;
    job.auto_exclude = auto_exclude;
    job.eval_float16 = eval_float16;
    job.write_float16 = write_float16;
    job.eval_images = eval_dir;
    job.eval_limit = (int)eval_limit;
    job.labels = labels;
    job.target = tg;
    if ((st = eng_quantize_ranges(&job, &res)) != PTQ_OK) goto fail;
    if ((st = eng_quantize_choose_method(&job, &res)) != PTQ_OK) goto fail;
    if (job.n_choose && res.choose_images > 0) {
        fprintf(stderr, "ptq quantize: method chosen on %d held-out images (%s, then cosine):", res.choose_images, res.check_metric);
        for (int i = 0; i < job.n_choose; i++) {
            char name[64];
            calib_method_name(&job.choose[i], name, sizeof name);
            fprintf(stderr, "%s %s %.4f%s", i ? "," : "", name, res.choose_metric[i], i == res.chosen ? " (taken)" : "");
        }
        fprintf(stderr, "\n");
    }
    if (equalize) {
        double before = 1, after = 1;
        for (int i = 0; i < res.eq.n; i++) {
            before = res.eq.pairs[i].spread > before ? res.eq.pairs[i].spread : before;
            after = res.eq.pairs[i].spread_after > after ? res.eq.pairs[i].spread_after : after;
        }
        fprintf(stderr, "ptq quantize: equalized %d depthwise input%s on %d images, %.2f s: channel ranges within %.1fx of each other (%.1fx before)\n",
                res.eq.n, res.eq.n == 1 ? "" : "s", res.eq.images, res.eq.seconds, after, before);
    }

    /* --auto-exclude: the fewest layers in float that meet the target on the evaluation images */
    if (auto_exclude) {
        if ((st = eng_quantize_auto_exclude(&job, &res)) != PTQ_OK) goto fail;
        const cmp_exclusion *excl = &res.excl;
        fprintf(stderr, "ptq quantize: auto-exclude: %d node%s in float, cosine %.6f on %d evaluation images%s", excl->n_nodes,
                excl->n_nodes == 1 ? "" : "s", excl->reached.cosine, excl->reached.images, excl->n_nodes ? ":" : "\n");
        for (int i = 0; i < excl->n_nodes; i++) fprintf(stderr, "%s%s", i ? "," : " ", excl->nodes[i]);
        if (excl->n_nodes) fprintf(stderr, "\n");
    }

    /* the QDQ model */
    if ((st = eng_quantize_build(&job, &res)) != PTQ_OK) goto fail;
    if ((st = eng_quantize_refine(&job, &res)) != PTQ_OK) goto fail;
    if (res.refined) {
        const eng_refine_report *rr = &res.rr;
        fprintf(stderr,
                "ptq quantize: refined on %d images in %d sweep%s over the network, %.1f s: %d activation scales chosen by output "
                "error (%.1f s), %d of %d layers rounded by AdaRound (%ld codes changed, %.1f s), %d biases corrected; "
                "layer inputs kept between layers: at most %.0f MB in memory, %.0f MB in a temporary file\n",
                rr->images, rr->passes, rr->passes == 1 ? "" : "s", rr->seconds_total, rr->scales, rr->seconds_scales, rr->rounded,
                rr->layers, rr->codes_changed, rr->seconds_adaround, rr->corrected, (double)rr->peak_memory / 1048576.0,
                (double)rr->peak_spilled / 1048576.0);
        if (res.check_images > 0) {
            fprintf(stderr, "ptq quantize: refinement check on %d held-out images (%s, then cosine):", res.check_images, res.check_metric);
            for (int i = 0; i < res.n_steps; i++)
                fprintf(stderr, "%s %s %.4f -> %.4f %s", i ? ";" : "", res.steps[i].name, res.steps[i].before, res.steps[i].after,
                        res.steps[i].kept ? "kept" : "dropped (it did not help)");
            fprintf(stderr, "; the model written: %.4f\n", res.check_final);
        } else if (res.check_skipped[0]) {
            fprintf(stderr, "ptq quantize: refinements kept unchecked: %s\n", res.check_skipped);
        }
        /* the cost against one calibration pass, per image seen (the refinement may run on fewer images) */
        if (res.seconds_calibration > 0 && src.images > 0 && rr->images > 0)
            fprintf(stderr, "ptq quantize: refinement cost %.1fx the calibration pass (%.3f s per image against %.3f s)\n",
                    (rr->seconds_total / rr->images) / (res.seconds_calibration / src.images), rr->seconds_total / rr->images,
                    res.seconds_calibration / src.images);
    }
    eng_quantize_outputs outs = {.model = out, .cache = cache, .json = json, .report = report,
                                 .trt_version = trt_version_given ? trt_version : 0, .trt_algorithm = trt_algo};
    if ((st = eng_quantize_write(&job, &res, &outs)) != PTQ_OK) goto fail;
    if ((rc = cli_outputs_commit(out)) != CLI_EXIT_OK) goto done; /* the model renamed last */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int quantized = 0;
    for (int i = 0; i < res.rep.n_nodes; i++) quantized += res.rep.nodes[i].state == QUANT_NODE_QUANTIZED;
    char from[4200];
    if (from_cache) snprintf(from, sizeof from, "ranges of %d tensors from %s", res.n_cached, from_cache);
    else if (from_stats)
        snprintf(from, sizeof from, "statistics of %llu images from %s; method %s", (unsigned long long)res.stats_images,
                 from_stats, res.tag);
    else if (src.input_npy) snprintf(from, sizeof from, "%d images used, %d skipped; method %s", src.images, src.skipped, res.tag);
    else { /* the shape the images were calibrated at (the model's fitted preprocessing) */
        ptq_tensor x = eng_batch_tensor(&src.cfg, NULL, 1);
        snprintf(from, sizeof from, "%d images used, %d skipped; fed as %lldx%lldx%lld%s; method %s", src.images,
                 src.skipped, (long long)x.dims[1], (long long)x.dims[2], (long long)x.dims[3],
                 pp_dynamic(&src.cfg) ? " (H/W following each image)" : "", res.tag);
    }
    char rss[256];
    cli_peak_rss_text(src.o.images && !from_stats && !from_cache ? &src.memory : NULL, rss, sizeof rss);
    fprintf(stderr,
            "ptq quantize: %s; %d activation tensors and %d weights quantized in %d "
            "nodes; %d nodes excluded; opset %lld -> %lld (%d nodes rewritten); %d warnings; %.1f s, %s; wrote %s%s%s\n",
            from, res.rep.n_activations, res.rep.n_weights, quantized, res.rep.n_excluded,
            (long long)res.opset0, (long long)(res.opset0 < 13 ? 13 : res.opset0) /* quant_upgrade_opset: never down */, res.n_upgraded, res.warned, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
            rss, out, stats ? "; statistics saved to " : "", stats ? stats : "");
    goto done;
fail:
    rc = cli_fail(st);
done:
    eng_quantize_result_free(&res);
    cli_names_free(&ex_nodes);
    cli_names_free(&ex_types);
    return rc;
}
