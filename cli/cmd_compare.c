/* cmd_compare.c: `ptq compare`: one calibration pass, then every method's QDQ model (the
 * placement `ptq quantize` writes) simulated by the executor against FP32 on held-out
 * images; the best method named; layer-wise errors of one method; with a target, the
 * fewest layers returned to float that reach it (cli/compare.h has the definitions). */
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
#include "engine/runner.h"
#include "engine/refine.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/report.h"
#include "quant/opset.h"
#include "runtime/graph_edit.h"

#define MAX_METHODS 16
#define N_HISTS 4        /* worst tensors whose histograms the report draws */
#define HIST_BINS 256
#define EVAL_CACHE_BYTES ((size_t)512 << 20) /* evaluation images + FP32 outputs kept in memory */

/* Seconds since t0. */
static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: ptq compare MODEL --images CALIB_DIR --eval-images EVAL_DIR --preset P [options]\n"
            "  --methods M,...        methods to compare (default max,percentile:99.99,percentile:99.999,entropy,mse;\n"
            "                         'all' adds percentile:99.9)\n"
            "  --labels FILE|folders  ground truth: 'image,class' lines, or one sub-folder per class\n"
            "  --layers-method M      method of the layer-wise table (default: the best)\n"
            "  --target-cosine X      return the most harmful layers to float until the output cosine >= X\n"
            "  --target-top1-drop X   ... until top-1 (accuracy with labels, else agreement) drops by <= X\n"
            "  --metric M             what picks the best method and what --target means: cosine (default),\n"
            "                         sqnr, top1 (default for classifiers), seq-top1[:AXIS] (argmax agreement per\n"
            "                         position, e.g. CTC recognisers), mask-iou:T (output map binarised at > T)\n"
            "  --target X             return the most harmful layers to float until the --metric reaches X\n"
            "  --exclusions FILE      write the excluded node names, one per line (for --exclude-nodes @FILE)\n"
            "  --json FILE, --html FILE   the full report\n"
            "  --exclude-nodes N, --exclude-op-types T   as in ptq quantize (applied to every method)\n"
            "  --bias-correction, --adaround [ITERS], --refine-images N   also evaluate the best method with each\n"
            "                        of these refinements of ptq quantize, alone and together (their contributions)\n"
            "  --config FILE         these options from a YAML file (method: mse, lists as [a, b]); the command line wins\n"
            "  --batch N, --limit N (calibration images), --eval-limit N, --shuffle --seed S, --strict, --threads N,\n"
            "  preprocessing overrides as in ptq preprocess\n"
            "  --eval-preset P        preprocessing of the evaluation images (default: --preset's; the overrides\n"
            "                         apply to both), e.g. calibrate at paddleocr-rec, evaluate at paddleocr-rec-dynamic\n");
}

/* Ranges of one method for every collected tensor (tensors in parallel). */
static ptq_status method_ranges(const eng_collector *col, const calib_method *m, io_range *r)
{
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < col->n; i++) {
        int warn;
        r[i].name = col->t[i].name;
        r[i].amax = calib_amax(col->t[i].stats, m, &warn);
    }
    return PTQ_OK;
}

/* The best method's QDQ model with each refinement of ptq quantize alone and all together,
 * evaluated like the methods (one row each): what each step contributes. */
static ptq_status refinements(const cmp_eval *ev0, const ptq_graph *g, const char *model, const eng_calib_source *src,
                              const io_range *ranges, int n_ranges, const quant_options *qo, const char *tag, int bc, int ada,
                              int images, int classifier, int labelled, int seq, int map)
{
    ptq_status st = PTQ_OK;
    ptq_graph *fp = NULL, *v = NULL;
    int dummy = 0;
    typedef struct {
        const char *name;
        int bc, ada;
    } step;
    step steps[3];
    int ns = 0;
    if (ada) steps[ns++] = (step){"AdaRound", 0, ada};
    if (bc) steps[ns++] = (step){"bias correction", 1, 0};
    if (ada && bc) steps[ns++] = (step){"AdaRound + bias correction", 1, ada};
    (void)g;
    TRY(onnx_model_load(model, &fp));
    TRY(ptq_graph_constants_to_initializers(fp, &dummy));
    TRY(quant_upgrade_opset(fp, 13, &dummy));
    pp_dataset_options o = src->o;
    o.limit = images;
    o.shuffle = 0;
    o.label = "refining";
    for (int k = 0; k < ns; k++) {
        quant_report rep = {0};
        eng_refine_options ro = eng_refine_defaults();
        eng_refine_report rr;
        eng_dataset_source ds;
        eng_source es = eng_source_dataset(&ds, &o, &src->cfg);
        cmp_metrics m;
        cmp_eval ev = *ev0;
        char label[200], row[160];
        ro.bias_correction = steps[k].bc;
        ro.adaround_iters = steps[k].ada;
        ro.nthreads = src->o.threads;
        ro.quiet = ev0->quiet;
        st = cmp_build_qdq(ev0, ranges, n_ranges, qo, &v, &rep);
        quant_report_free(&rep);
        if (st != PTQ_OK) goto done;
        TRY(eng_refine(v, fp, &es, &ro, &rr));
        snprintf(row, sizeof row, "%s + %s", tag, steps[k].name);
        snprintf(label, sizeof label, "evaluating %s", row);
        ev.o.label = label;
        TRY(cmp_evaluate(&ev, &v, 1, &m));
        printf("%-20s %10.6f %10.2f %12.6g", row, m.cosine, m.sqnr_db, m.max_abs);
        if (classifier) printf(" %10.4f", m.top1_agree);
        if (labelled) printf(" %10.4f", m.top1_acc);
        if (seq) printf(" %10.4f", m.seq_top1);
        if (map) printf(" %10.4f", m.mask_iou);
        printf("   (%d images, %.1f s)\n", rr.images, rr.seconds_total);
        ptq_graph_destroy(v);
        v = NULL;
    }
done:
    ptq_graph_destroy(v);
    ptq_graph_destroy(fp);
    return st;
}

int cmd_compare(int argc, char **argv)
{
    enum { O_IMAGES = 256, O_EVAL, O_PRESET, O_METHODS, O_LABELS, O_LAYERS, O_TCOS, O_TDROP, O_EXCL_OUT, O_JSON, O_HTML,
           O_EXN, O_EXT, O_EVAL_LIMIT, O_BATCH, O_LIMIT, O_SHUFFLE, O_SEED, O_STRICT, O_THREADS, O_SET, O_METRIC,
           O_TARGET, O_EVAL_PRESET, O_BIASC, O_ADAROUND, O_REFINE_IMAGES };
    static const struct option longopts[] = {
        {"images", required_argument, 0, O_IMAGES},    {"eval-images", required_argument, 0, O_EVAL},
        {"preset", required_argument, 0, O_PRESET},    {"methods", required_argument, 0, O_METHODS},
        {"eval-preset", required_argument, 0, O_EVAL_PRESET},
        {"bias-correction", no_argument, 0, O_BIASC},  {"adaround", optional_argument, 0, O_ADAROUND},
        {"refine-images", required_argument, 0, O_REFINE_IMAGES},
        {"labels", required_argument, 0, O_LABELS},    {"layers-method", required_argument, 0, O_LAYERS},
        {"metric", required_argument, 0, O_METRIC},    {"target", required_argument, 0, O_TARGET},
        {"target-cosine", required_argument, 0, O_TCOS}, {"target-top1-drop", required_argument, 0, O_TDROP},
        {"exclusions", required_argument, 0, O_EXCL_OUT}, {"json", required_argument, 0, O_JSON},
        {"html", required_argument, 0, O_HTML},        {"exclude-nodes", required_argument, 0, O_EXN},
        {"exclude-op-types", required_argument, 0, O_EXT}, {"eval-limit", required_argument, 0, O_EVAL_LIMIT},
        {"batch", required_argument, 0, O_BATCH},      {"limit", required_argument, 0, O_LIMIT},
        {"shuffle", no_argument, 0, O_SHUFFLE},        {"seed", required_argument, 0, O_SEED},
        {"strict", no_argument, 0, O_STRICT},          {"threads", required_argument, 0, O_THREADS},
        CLI_PP_LONGOPTS(O_SET),
        {"help", no_argument, 0, 'h'},                 {0, 0, 0, 0}};
    eng_calib_source src = {.o = pp_dataset_defaults(), .cfg = pp_defaults()};
    const char *preset = NULL, *eval_preset = NULL, *eval_dir = NULL, *methods_arg = "max,percentile:99.99,percentile:99.999,entropy,mse";
    const char *labels = NULL, *layers_arg = NULL, *excl_out = NULL, *json = NULL, *html = NULL;
    const char *set_keys[CLI_PP_MAX], *set_vals[CLI_PP_MAX];
    cli_names ex_nodes = {0}, ex_types = {0};
    int n_set = 0, n_methods = 0, c, idx, rc = CLI_EXIT_OK;
    long eval_limit = 0, refine_images = 32;
    int refine_bc = 0, refine_ada = 0;
    cmp_target tg = {NAN, NAN, 1.0, NAN, {0}};
    cmp_metric metric;
    int metric_given = 0;
    cmp_metric_parse("cosine", &metric);
    cmp_exclusion excl = {0};
    cmp_cache *cache = NULL;
    calib_method methods[MAX_METHODS];
    char tags[MAX_METHODS][64];
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL, *variants[MAX_METHODS] = {0};
    io_range *ranges[MAX_METHODS] = {0};
    cmp_metrics metrics[MAX_METHODS];
    eng_collector col = {0};
    cmp_layer *layers = NULL;
    int n_layers = 0;
    const cmp_layer **order = NULL;
    char *trt_arg = NULL;
    io_report_method rm[MAX_METHODS];
    io_report_layer *rl = NULL;
    io_report_hist rh[N_HISTS];
    double *hist_bins = NULL;
    const char *thr_names[MAX_METHODS];
    double thr[N_HISTS][MAX_METHODS];
    int n_hists = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    src.o.batch = 8;
    int expanded = cli_config_expand("compare", longopts, &argc, &argv);
    if (expanded) return expanded;
    opterr = 0;
    optind = 1;
    while ((idx = -1, c = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        int shared = c != '?' && c != ':' && idx >= 0 ? cli_dataset_option("compare", longopts[idx].name, optarg, &src.o) : 0;
        if (shared < 0) return CLI_EXIT_USAGE;
        if (shared) continue;
        switch (c) {
        case O_IMAGES: src.o.images = optarg; break;
        case O_EVAL: eval_dir = optarg; break;
        case O_PRESET: preset = optarg; break;
        case O_EVAL_PRESET: eval_preset = optarg; break;
        case O_METHODS: methods_arg = optarg; break;
        case O_LABELS: labels = optarg; break;
        case O_LAYERS: layers_arg = optarg; break;
        case O_EXCL_OUT: excl_out = optarg; break;
        case O_JSON: json = optarg; break;
        case O_HTML: html = optarg; break;
        case O_TCOS:
        case O_TDROP: {
            char *end;
            double v = strtod(optarg, &end);
            if (*end || !(v >= 0 && v <= 1)) return cli_usage_error("compare", "bad --%s '%s'", longopts[idx].name, optarg);
            if (c == O_TCOS) tg.cosine = v;
            else tg.top1_drop = v;
            break;
        }
        case O_EVAL_LIMIT:
            if (cli_parse_long(optarg, 1, 100000000, &eval_limit)) return cli_usage_error("compare", "bad --eval-limit '%s'", optarg);
            break;
        case O_METRIC:
            if (cmp_metric_parse(optarg, &metric))
                return cli_usage_error("compare", "bad --metric '%s' (cosine, sqnr, top1, seq-top1[:AXIS], mask-iou:T)", optarg);
            metric_given = 1;
            break;
        case O_TARGET: {
            char *end;
            tg.metric = strtod(optarg, &end);
            if (*end || end == optarg || !(tg.metric == tg.metric)) return cli_usage_error("compare", "bad --target '%s'", optarg);
            break;
        }
        case O_EXN:
            if (cli_names_add(&ex_nodes, optarg)) {
                cli_names_free(&ex_nodes);
                cli_names_free(&ex_types);
                return cli_usage_error("compare", "cannot read --exclude-nodes %s", optarg);
            }
            break;
        case O_EXT:
            if (cli_names_add(&ex_types, optarg)) {
                cli_names_free(&ex_nodes);
                cli_names_free(&ex_types);
                return cli_usage_error("compare", "bad --exclude-op-types %s", optarg);
            }
            break;
        case O_SET:
            if (n_set == CLI_PP_MAX) return cli_usage_error("compare", "too many overrides");
            set_keys[n_set] = longopts[idx].name;
            set_vals[n_set++] = optarg;
            break;
        case O_BIASC: refine_bc = 1; break;
        case O_ADAROUND:
            if (cli_adaround_arg("compare", optarg, argc, argv, &optind, &refine_ada)) return CLI_EXIT_USAGE;
            break;
        case O_REFINE_IMAGES:
            if (cli_parse_long(optarg, 1, 100000000, &refine_images)) return cli_usage_error("compare", "bad --refine-images");
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option("compare", c, argv);
        }
    }
    if (optind != argc - 1) return cli_usage_error("compare", "expected one model");
    if (!src.o.images || !eval_dir) return cli_usage_error("compare", "--images CALIB_DIR and --eval-images EVAL_DIR are required");
    if (calib_methods_parse(!strcmp(methods_arg, "all") ? "max,percentile:99.9,percentile:99.99,percentile:99.999,entropy,mse"
                                                        : methods_arg,
                            methods, MAX_METHODS, &n_methods))
        return cli_usage_error("compare", "bad --methods '%s'", methods_arg);
    for (int m = 0; m < n_methods; m++) calib_method_name(&methods[m], tags[m], sizeof tags[m]);
    int layers_m = -1;
    if (layers_arg) {
        calib_method lm;
        char tag[64];
        if (calib_method_parse(layers_arg, &lm)) return cli_usage_error("compare", "bad --layers-method '%s'", layers_arg);
        calib_method_name(&lm, tag, sizeof tag);
        for (int m = 0; m < n_methods; m++)
            if (!strcmp(tags[m], tag)) layers_m = m;
        if (layers_m < 0) return cli_usage_error("compare", "--layers-method %s is not among --methods", layers_arg);
    }
    const char *model = argv[optind];
    pp_config eval_cfg = pp_defaults();
    if ((st = eng_preprocessing(preset, set_keys, set_vals, n_set, &src.cfg)) != PTQ_OK) goto fail;
    if ((st = onnx_model_load(model, &g)) != PTQ_OK) goto fail;
    if (eval_preset) { /* checked before the calibration pass; then messages name --preset's again */
        pp_config again = pp_defaults();
        if ((st = eng_preprocessing(eval_preset, set_keys, set_vals, n_set, &eval_cfg)) != PTQ_OK ||
            (st = eng_check_input_dims(g, model, &eval_cfg)) != PTQ_OK ||
            (st = eng_preprocessing(preset, set_keys, set_vals, n_set, &again)) != PTQ_OK)
            goto fail;
    }

    /* one calibration pass */
    if ((st = eng_collect(g, model, &src, &col)) != PTQ_OK) goto fail;
    fprintf(stderr, "ptq compare: calibration pass %.1f s\n", since(&t0));
    if (!(cache = cmp_cache_create(EVAL_CACHE_BYTES))) {
        st = PTQ_ERR_NOMEM;
        ptq_error("out of memory");
        goto fail;
    }
    cmp_eval ev = {.g = g, .model = model, .o = src.o, .cfg = src.cfg, .labels = labels, .nthreads = src.o.threads,
                   .cache = cache, .metric = metric};
    if (eval_preset) { /* read again so that messages from here on name the evaluation's preprocessing */
        pp_config again = pp_defaults();
        if ((st = eng_preprocessing(eval_preset, set_keys, set_vals, n_set, &again)) != PTQ_OK) goto fail;
        ev.cfg = eval_cfg;
    }
    tg.kind = metric;
    ev.o.images = eval_dir;
    ev.o.limit = (int)eval_limit;
    ev.o.shuffle = 0;
    quant_options qo = quant_defaults();
    qo.exclude_nodes = ex_nodes.names;
    qo.n_exclude_nodes = ex_nodes.n;
    qo.exclude_op_types = ex_types.names;
    qo.n_exclude_op_types = ex_types.n;

    /* every method's QDQ model, evaluated in one pass */
    for (int m = 0; m < n_methods; m++) {
        quant_report rep = {0};
        ranges[m] = calloc((size_t)col.n + 1, sizeof *ranges[m]);
        if (!ranges[m]) {
            st = PTQ_ERR_NOMEM;
            ptq_error("out of memory");
            goto fail;
        }
        method_ranges(&col, &methods[m], ranges[m]);
        st = cmp_build_qdq(&ev, ranges[m], col.n, &qo, &variants[m], &rep);
        if (m == 0)
            for (int i = 0; i < rep.n_unmatched; i++)
                fprintf(stderr, "ptq: warning: exclusion '%s' matches no node\n", rep.unmatched[i]);
        quant_report_free(&rep);
        if (st != PTQ_OK) goto fail;
    }
    fprintf(stderr, "ptq compare: %.1f s; evaluating %d method%s on %s\n", since(&t0), n_methods,
            n_methods == 1 ? "" : "s", eval_dir);
    /* one method at a time (one QDQ plan in memory); the first pass keeps the decoded
     * images and FP32 outputs in the cache for the others */
    char label[1200];
    for (int m = 0; m < n_methods; m++) {
        snprintf(label, sizeof label, "evaluating %s (%d/%d)", tags[m], m + 1, n_methods);
        ev.o.label = label;
        if ((st = cmp_evaluate(&ev, &variants[m], 1, &metrics[m])) != PTQ_OK) goto fail;
    }
    int classifier = !isnan(metrics[0].top1_agree), labelled = classifier && !isnan(metrics[0].top1_acc);
    int seq = !isnan(metrics[0].seq_top1), map = !isnan(metrics[0].mask_iou);
    if (!metric_given && classifier) cmp_metric_parse("top1", &metric);
    char metric_name[64], criterion[96];
    cmp_metric_name(&metric, metric_name, sizeof metric_name);
    if (isnan(cmp_metric_value(&metric, &metrics[0]))) {
        st = PTQ_ERR_ARG;
        ptq_error("%s: --metric %s does not apply to its output 0 (%s)", model, metric_name,
                  classifier ? "a classifier: top1" : seq ? "a sequence: seq-top1" : map ? "a map: mask-iou:T" : "cosine or sqnr only");
        goto fail;
    }
    snprintf(criterion, sizeof criterion, "%s%s", !metric_given && classifier ? (labelled ? "top-1 accuracy" : "top-1 agreement") : metric_name,
             metric.kind == CMP_METRIC_COSINE ? "" : ", then cosine");
    int best = 0;
    for (int m = 1; m < n_methods; m++) {
        double a = cmp_metric_value(&metric, &metrics[m]), b = cmp_metric_value(&metric, &metrics[best]);
        if (a > b || (a == b && metrics[m].cosine > metrics[best].cosine)) best = m;
    }
    printf("model %s, %d calibration images, %d evaluation images\n", model, src.images, metrics[0].images);
    printf("%-20s %10s %10s %12s", "method", "cosine", "SQNR dB", "max-abs");
    if (classifier) printf(" %10s", "top-1 agr");
    if (labelled) printf(" %10s", "top-1 acc");
    if (seq) printf(" %10s", "seq-top1");
    if (map) printf(" %10s", "mask-iou");
    printf("\n");
    for (int m = 0; m < n_methods; m++) {
        printf("%-20s %10.6f %10.2f %12.6g", tags[m], metrics[m].cosine, metrics[m].sqnr_db, metrics[m].max_abs);
        if (classifier) printf(" %10.4f", metrics[m].top1_agree);
        if (labelled) printf(" %10.4f", metrics[m].top1_acc);
        if (seq) printf(" %10.4f", metrics[m].seq_top1);
        if (map) printf(" %10.4f", metrics[m].mask_iou);
        printf("%s\n", m == best ? "   <- best" : "");
    }
    if (map) printf("(mask-iou: output 0 binarised at > %g)\n", (double)metrics[0].mask_threshold);
    printf("best: %s (by %s)\n", tags[best], criterion);
    if ((refine_bc || refine_ada) && (st = refinements(&ev, g, model, &src, ranges[best], col.n, &qo, tags[best], refine_bc,
                                                       refine_ada, (int)refine_images, classifier, labelled, seq, map)) != PTQ_OK)
        goto fail;

    /* layer-wise errors of one method */
    if (layers_m < 0) layers_m = best;
    fprintf(stderr, "ptq compare: %.1f s; layer-wise errors of %s\n", since(&t0), tags[layers_m]);
    snprintf(label, sizeof label, "layer-wise errors of %s", tags[layers_m]);
    ev.o.label = label;
    if ((st = cmp_layers(&ev, variants[layers_m], &layers, &n_layers)) != PTQ_OK) goto fail;
    order = malloc(sizeof *order * ((size_t)n_layers + 1));
    if (!order) {
        st = PTQ_ERR_NOMEM;
        ptq_error("out of memory");
        goto fail;
    }
    cmp_layers_by_harm(layers, n_layers, order);
    printf("\nlayer-wise (%s), worst isolated SQNR first:\n%-40s %-28s %12s %12s %10s\n", tags[layers_m], "tensor",
           "consumer", "iso SQNR dB", "acc SQNR dB", "acc cos");
    for (int i = 0; i < n_layers && i < 15; i++)
        printf("%-40s %-28s %12.2f %12.2f %10.6f\n", order[i]->tensor, order[i]->node, order[i]->iso_sqnr_db,
               order[i]->acc_sqnr_db, order[i]->acc_cosine);

    /* sensitivity: the fewest layers in float that reach the target */
    int want_target = !isnan(tg.cosine) || !isnan(tg.top1_drop) || !isnan(tg.metric);
    ev.o.label = "FP32 baseline";
    if (want_target && (st = cmp_target_baseline(&ev, &tg)) != PTQ_OK) goto fail;
    if (want_target) {
        if (cmp_meets(&tg, &metrics[layers_m])) {
            excl.reached = metrics[layers_m];
            printf("\ntarget already met with every layer quantized (cosine %.6f, %s %.6f)\n", excl.reached.cosine, metric_name,
                   cmp_metric_value(&metric, &excl.reached));
        } else if ((st = cmp_auto_exclude(&ev, ranges[layers_m], col.n, &qo, variants[layers_m], layers, n_layers, &tg,
                                          &excl)) != PTQ_OK) {
            goto fail;
        }
        if (!(trt_arg = cmp_layer_precisions(&excl))) {
            st = PTQ_ERR_NOMEM;
            ptq_error("out of memory");
            goto fail;
        }
        if (excl.n_nodes) {
            printf("\n%d node%s in float reach cosine %.6f, %s %.6f (%d evaluations):\n  ptq quantize ... --exclude-nodes ",
                   excl.n_nodes, excl.n_nodes == 1 ? "" : "s", excl.reached.cosine, metric_name,
                   cmp_metric_value(&metric, &excl.reached), excl.evaluations);
            for (int e = 0; e < excl.n_nodes; e++) printf("%s%s", e ? "," : "", excl.nodes[e]);
            printf("\n  trtexec ... --precisionConstraints=obey %s\n", trt_arg);
        }
        if (excl_out) {
            io_atomic_file f;
            if ((st = io_atomic_open(&f, excl_out)) != PTQ_OK) goto fail;
            for (int e = 0; e < excl.n_nodes; e++) fprintf(f.fp, "%s\n", excl.nodes[e]);
            if ((st = io_atomic_commit(&f)) != PTQ_OK) goto fail;
        }
    }

    /* reports */
    if (json || html) {
        for (int m = 0; m < n_methods; m++)
            rm[m] = (io_report_method){tags[m], metrics[m].cosine, metrics[m].sqnr_db, metrics[m].max_abs,
                                       metrics[m].top1_agree, metrics[m].top1_acc, metrics[m].seq_top1,
                                       metrics[m].mask_iou, metrics[m].mask_threshold};
        rl = calloc((size_t)n_layers + 1, sizeof *rl);
        hist_bins = calloc((size_t)N_HISTS * HIST_BINS, sizeof *hist_bins);
        if (!rl || !hist_bins) {
            st = PTQ_ERR_NOMEM;
            ptq_error("out of memory");
            goto fail;
        }
        for (int i = 0; i < n_layers; i++)
            rl[i] = (io_report_layer){layers[i].tensor, layers[i].node, layers[i].op_type, layers[i].acc_sqnr_db,
                                      layers[i].acc_cosine, layers[i].iso_sqnr_db, layers[i].iso_cosine};
        for (int m = 0; m < n_methods; m++) thr_names[m] = tags[m];
        /* the worst tensors' histograms of |x| over [0, amax], with every method's amax */
        for (int i = 0; i < n_layers && n_hists < N_HISTS; i++) {
            int t = -1;
            for (int j = 0; j < col.n && t < 0; j++)
                if (!strcmp(col.t[j].name, order[i]->tensor)) t = j;
            if (t < 0 || !(col.t[t].stats->amax > 0)) continue;
            double H[CALIB_ANALYSIS_BINS];
            calib_analysis_hist(col.t[t].stats, H);
            double *b = hist_bins + (size_t)n_hists * HIST_BINS;
            for (int k = 0; k < CALIB_ANALYSIS_BINS; k++) b[k * HIST_BINS / CALIB_ANALYSIS_BINS] += H[k];
            for (int m = 0; m < n_methods; m++) thr[n_hists][m] = ranges[m][t].amax;
            rh[n_hists] = (io_report_hist){col.t[t].name, col.t[t].stats->amax, HIST_BINS, b, n_methods, thr_names, thr[n_hists]};
            n_hists++;
        }
        io_report_exclusion ex = {0};
        char target_text[96];
        if (want_target) {
            double top1 = !isnan(excl.reached.top1_acc) ? excl.reached.top1_acc : excl.reached.top1_agree;
            double reached = tg.fp32_top1 - top1;
            if (!isnan(tg.metric)) {
                snprintf(target_text, sizeof target_text, "%s >= %g", metric_name, tg.metric);
                reached = cmp_metric_value(&metric, &excl.reached);
            } else if (!isnan(tg.cosine)) {
                snprintf(target_text, sizeof target_text, "cosine >= %g", tg.cosine);
                reached = excl.reached.cosine;
            } else {
                snprintf(target_text, sizeof target_text, "top-1 drop <= %g", tg.top1_drop);
            }
            ex = (io_report_exclusion){target_text, reached,
                                       excl.n_nodes, (const char *const *)excl.nodes, trt_arg};
        }
        io_report r = {.model = model, .preset = preset, .calib_images = src.o.images, .eval_images = eval_dir,
                       .n_calib = src.images, .n_eval = metrics[0].images, .criterion = criterion,
                       .best_method = tags[best], .n_methods = n_methods, .methods = rm,
                       .layers_method = tags[layers_m], .n_layers = n_layers, .layers = rl, .n_hists = n_hists,
                       .hists = rh, .exclusion = want_target ? &ex : NULL};
        if (json && (st = io_report_write_json(json, &r)) != PTQ_OK) goto fail;
        if (html && (st = io_report_write_html(html, &r)) != PTQ_OK) goto fail;
    }
    fprintf(stderr, "ptq compare: %d calibration images, %d evaluation images, %d methods, %d layers; %.1f s, peak RSS %.0f MB\n",
            src.images, metrics[0].images, n_methods, n_layers, since(&t0), cli_peak_rss_mb());
    goto done;
fail:
    rc = cli_fail(st);
done:
    for (int m = 0; m < n_methods; m++) {
        ptq_graph_destroy(variants[m]);
        free(ranges[m]);
    }
    cmp_layers_free(layers, n_layers);
    free(order);
    cmp_exclusion_free(&excl);
    cmp_cache_destroy(cache);
    free(trt_arg);
    free(rl);
    free(hist_bins);
    eng_collector_free(&col);
    ptq_graph_destroy(g);
    cli_names_free(&ex_nodes);
    cli_names_free(&ex_types);
    return rc;
}
