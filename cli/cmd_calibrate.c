/* cmd_calibrate.c: `ptq calibrate`: one pass over the images (or a .npy of preprocessed
 * samples), statistics of every float activation streamed from the executor's observer,
 * then every requested method's ranges from those statistics: TensorRT caches and JSON.
 * --stats saves the statistics (io/stats.h); --from-stats takes them from such a file
 * (e.g. shards merged by `ptq stats merge`) instead of running the images. */
#include <fnmatch.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "cli/cli.h"
#include "engine/model.h"
#include "engine/preprocessing.h"
#include "engine/collect.h"
#include "engine/quantize.h"
#include "io/cache.h"
#include "io/npy.h"
#include "io/onnx.h"
#include "io/preset.h"
#include "io/ranges.h"
#include "preprocess/dataset.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

#define MAX_METHODS CALIB_MAX_METHODS
#define MAX_GLOBS 64

static void usage(FILE *fp)
{
    fprintf(fp, "usage: ptq calibrate MODEL (--images DIR --preset P | --input X.npy | --from-stats S)\n"
                "                     (--cache OUT.cache | --json R.json | --stats S) [options]\n"
                "  --method M        max, percentile[:P], entropy, mse, a list 'max,entropy' or all\n"
                "                    (default percentile:99.99; entropy is TensorRT's own calibrator, docs/quantizing.md)\n"
                "  --batch N         images per batch (default: the most, up to 8, that --memory holds)\n"
                "  --memory MB       memory budget: the default batch and the replay caches follow it (default 512)\n"
                "  --json FILE       ranges and scales as JSON\n"
                "  --tensors GLOB    only tensors whose names match (repeatable)\n"
                "  --trt-version V   cache header version: your TensorRT's (default 8601 = 8.6.1; 10.14.1 is 101401)\n"
                "  --trt-algorithm A cache header algorithm for every method (default EntropyCalibration2, what trtexec reads)\n"
                "  --stats FILE      also save the statistics (mergeable: ptq stats merge)\n"
                "  --shard I/N       only images k of the sorted list with k mod N = I (I from 0): N runs with --stats,\n"
                "                    then ptq stats merge, give one pass's statistics byte for byte (docs/cluster.md)\n"
                "  --from-stats FILE ranges from saved statistics of this model, without images\n"
                "  --config FILE         these options from a YAML file (method: mse, lists as [a, b]); the command line wins\n"
                "  --limit N, --shuffle --seed S, --strict, --exif on|off, --threads N\n"
                "With several methods, one cache per method: OUT.<method>.cache (and .json).\n");
    cli_help_overrides(fp);
    cli_help_help(fp);
}

int cmd_calibrate(int argc, char **argv)
{
    enum { O_IMAGES = 256, O_PRESET, O_INPUT, O_METHOD, O_BATCH, O_CACHE, O_JSON, O_TENSORS, O_TRTV, O_TRTA, O_LIMIT,
           O_SHUFFLE, O_SEED, O_STRICT, O_THREADS, O_SET, O_STATS, O_FROM_STATS, O_EXIF, O_SHARD, O_MEMORY };
    static const struct option longopts[] = {
        {"images", required_argument, 0, O_IMAGES}, {"preset", required_argument, 0, O_PRESET},
        {"input", required_argument, 0, O_INPUT},   {"method", required_argument, 0, O_METHOD},
        {"batch", required_argument, 0, O_BATCH}, {"memory", required_argument, 0, O_MEMORY},   {"cache", required_argument, 0, O_CACHE},
        {"json", required_argument, 0, O_JSON},     {"tensors", required_argument, 0, O_TENSORS},
        {"trt-version", required_argument, 0, O_TRTV}, {"trt-algorithm", required_argument, 0, O_TRTA},
        {"limit", required_argument, 0, O_LIMIT},   {"shuffle", no_argument, 0, O_SHUFFLE},
        {"seed", required_argument, 0, O_SEED},     {"strict", no_argument, 0, O_STRICT},
        {"exif", required_argument, 0, O_EXIF},     {"shard", required_argument, 0, O_SHARD},
        {"threads", required_argument, 0, O_THREADS}, {"stats", required_argument, 0, O_STATS},
        {"from-stats", required_argument, 0, O_FROM_STATS}, CLI_PP_LONGOPTS(O_SET),
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    pp_dataset_options o = pp_dataset_defaults();
    pp_config cfg = pp_defaults();
    const char *preset = NULL, *input = NULL, *cache = NULL, *json = NULL, *method_arg = "percentile:99.99", *trt_algo = NULL;
    const char *stats = NULL, *from_stats = NULL;
    const char *globs[MAX_GLOBS], *set_keys[CLI_PP_MAX], *set_vals[CLI_PP_MAX];
    int n_globs = 0, n_set = 0, c, idx = 0, rc = CLI_EXIT_OK, n_methods = 0;
    long trt_version = 8601;
    calib_method methods[MAX_METHODS];
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    eng_collector col = {0};
    o.batch = 0; /* the model's (eng_fit_batch) */
    int expanded = cli_config_expand("calibrate", longopts, &argc, &argv);
    if (expanded) return expanded;
    opterr = 0;
    optind = 1;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
    while ((idx = -1, c = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        int shared = c != '?' && c != ':' && idx >= 0 ? cli_dataset_option("calibrate", longopts[idx].name, optarg, &o) : 0;
        if (shared < 0) return CLI_EXIT_USAGE;
        if (shared) continue;
        switch (c) {
        case O_IMAGES: o.images = optarg; break;
        case O_PRESET: preset = optarg; break;
        case O_INPUT: input = optarg; break;
        case O_METHOD: method_arg = optarg; break;
        case O_CACHE: cache = optarg; break;
        case O_JSON: json = optarg; break;
        case O_TENSORS:
            if (n_globs == MAX_GLOBS) return cli_usage_error("calibrate", "too many --tensors");
            globs[n_globs++] = optarg;
            break;
        case O_TRTV:
            if (cli_parse_long(optarg, 1, 100000000, &trt_version)) return cli_usage_error("calibrate", "bad --trt-version '%s'", optarg);
            break;
        case O_TRTA:
            if (!(trt_algo = io_cache_algorithm(optarg)))
                return cli_usage_error("calibrate", "--trt-algorithm: EntropyCalibration2, EntropyCalibration, "
                                                    "MinMaxCalibration or LegacyCalibration");
            break;
        case O_STATS: stats = optarg; break;
        case O_FROM_STATS: from_stats = optarg; break;
        case O_SET:
            if (n_set == CLI_PP_MAX) return cli_usage_error("calibrate", "too many overrides");
            set_keys[n_set] = longopts[idx].name;
            set_vals[n_set++] = optarg;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option("calibrate", c, argv);
        }
    }
    if (optind != argc - 1) return cli_usage_error("calibrate", "expected one model");
    if (o.shard_count && !o.images) return cli_usage_error("calibrate", "--shard slices the --images list");
    if (!cache && !json && !stats) /* --stats alone: a shard of a cluster run (docs/cluster.md) */
        return cli_usage_error("calibrate", "--cache OUT.cache, --json FILE or --stats FILE is required");
    if (from_stats) {
        if (o.images || input) return cli_usage_error("calibrate", "--from-stats replaces --images and --input");
        if (stats) return cli_usage_error("calibrate", "--stats saves a calibration pass; --from-stats runs none");
        if (preset || n_set) return cli_usage_error("calibrate", "preprocessing options do not apply to --from-stats");
    } else if (!!o.images == !!input)
        return cli_usage_error("calibrate", "give either --images DIR or --input X.npy (or --from-stats FILE)");
    if (calib_methods_parse(method_arg, methods, MAX_METHODS, &n_methods) != 0)
        return cli_usage_error("calibrate", "bad --method '%s' (max, percentile[:P], entropy, mse, a list, or all)", method_arg);
    {
        const char *in[] = {o.images, input, from_stats}, *outs[] = {cache, json, stats};
        int bad = cli_check_paths("calibrate", in, 3, outs, 3);
        if (bad) return bad;
    }
    const char *model = argv[optind];
    col.globs = globs;
    col.n_globs = n_globs;
    col.nthreads = o.threads > 0 ? o.threads : omp_get_max_threads();

    eng_calib_source source = {.input_npy = input, .o = o, .cfg = cfg};
    uint64_t stats_images = 0;
    if (from_stats) {
        if ((st = eng_stats_load(from_stats, model, &col, &stats_images)) != PTQ_OK) goto fail;
    } else {
        if ((st = eng_model_load(model, &g, NULL)) != PTQ_OK) goto fail;
        if (!input && (st = eng_preprocessing(preset, set_keys, set_vals, n_set, &source.cfg)) != PTQ_OK) goto fail;
        if ((st = eng_collect(g, model, &source, &col)) != PTQ_OK) goto fail;
        if (stats && (st = eng_stats_save(stats, model, &source, &col)) != PTQ_OK) goto fail;
    }
    int images = source.images, skipped = source.skipped, batch_done = source.batches;
    if (col.n == 0) {
        if (from_stats) ptq_error("%s: no tensor%s in the statistics", from_stats, n_globs ? " matching --tensors" : "");
        else ptq_error("%s: no float tensor was observed", model);
        st = PTQ_ERR_FORMAT;
        goto fail;
    }
    /* ranges per method, their caches and JSON */
    int warned = 0;
    if ((st = eng_calibrate_write(&col, methods, n_methods, cache, json, trt_version, trt_algo, NULL, &warned)) != PTQ_OK)
        goto fail;
    if ((rc = cli_outputs_commit(cache)) != CLI_EXIT_OK) goto out;
    if (from_stats)
        fprintf(stderr, "ptq calibrate: statistics of %llu images from %s, %d tensors calibrated, %d method%s, %d warning%s\n",
                (unsigned long long)stats_images, from_stats, col.n, n_methods, n_methods > 1 ? "s" : "", warned,
                warned == 1 ? "" : "s");
    else {
        char rss[256];
        cli_peak_rss_text(input ? NULL : &source.memory, rss, sizeof rss);
        fprintf(stderr, "ptq calibrate: %d images used, %d skipped, %d batches of %d, %d tensors calibrated, %d method%s, %d warning%s, "
                        "%s%s%s\n",
                images, skipped, batch_done, source.o.batch, col.n, n_methods, n_methods > 1 ? "s" : "", warned,
                warned == 1 ? "" : "s", rss, stats ? "; statistics saved to " : "", stats ? stats : "");
    }
    goto out;
fail:
    rc = cli_fail(st);
out:
    eng_collector_free(&col);
    ptq_graph_destroy(g);
    return rc;
}
