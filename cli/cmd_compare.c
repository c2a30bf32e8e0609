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
#include "engine/model.h"
#include "engine/preprocessing.h"
#include "engine/collect.h"
#include "engine/compare.h"
#include "engine/compare_truth.h"
#include "engine/quantize.h"
#include "engine/runner.h"
#include "engine/refine.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/report.h"
#include "quant/opset.h"
#include "runtime/graph_edit.h"

#define MAX_METHODS CALIB_MAX_METHODS

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
            "       ptq compare MODEL --as-is [--base BASE.onnx] --eval-images EVAL_DIR --preset P [--labels L] [options]\n"
            "  --as-is                score the model as given (a QDQ model with its own Q/DQ; the float part in FP32):\n"
            "                         no calibration, one row 'as-is' with its figures against --labels (intervals\n"
            "                         included); the options of calibration and quantization are refused\n"
            "  --base BASE.onnx       with --as-is: the row is measured against BASE (cosine, SQNR, agreement), and\n"
            "                         the truth figures of BASE take FP32's place, with the paired differences\n"
            "  --methods M,...        methods to compare (default max,percentile:99.99,percentile:99.999,entropy,mse;\n"
            "                         'all' adds percentile:99.9)\n"
            "  --labels FILE|list:FILE|folders  a classifier's ground truth: 'image,class' lines, 'image class'\n"
            "                         lines (ImageNet-style lists), or one sub-folder per class (one label for every\n"
            "                         evaluation image, none for another file: checked first)\n"
            "  --labels yolo:DIR|coco:FILE  a detector's boxes: DIR/STEM.txt 'class cx cy w h' (normalised, as\n"
            "                         Ultralytics writes) or COCO instances JSON; adds COCO mAP50 and mAP50-95\n"
            "                         of FP32 and every method (--metric map50|map)\n"
            "  --labels paddle:FILE:dict=KEYS|text:DIR:dict=KEYS  a recogniser's text: PaddleOCR's 'path<TAB>text'\n"
            "                         list, or DIR/STEM.txt per crop, read with the dictionary KEYS; adds the CER and\n"
            "                         the lines read exactly (greedy CTC) of FP32 and every method\n"
            "  --labels mask:DIR[:ignore=V]  a segmenter's masks: DIR/STEM.png, 8-bit gray or palette class indices\n"
            "                         (V, default 255, not counted); adds the mIoU of FP32 and every method\n"
            "  --labels paddledet:FILE  a text detector's polygons: PaddleOCR's 'path<TAB>[{\"transcription\": T,\n"
            "                         \"points\": [[x, y], ...]}, ...]' list (T \"###\": don't care); adds DB's boxes'\n"
            "                         precision, recall and hmean (PaddleOCR's DetMetric) of FP32 and every method\n"
            "  --layers-method M      method of the layer-wise table (default: the best); none: no\n"
            "                         layer-wise pass (the figures only, no exclusion search)\n");
    fprintf(fp,
            "  --target-cosine X      return the most harmful layers to float until the output cosine >= X\n"
            "  --target-top1-drop X   ... until top-1 (accuracy with labels, else agreement) drops by <= X\n"
            "  --metric M             what picks the best method and what --target means: cosine (default),\n"
            "                         sqnr, top1 (default for classifiers), seq-top1[:AXIS] (argmax agreement per\n"
            "                         position, e.g. CTC recognisers), seq-chars[:AXIS] (1 - the CER of the greedy CTC\n"
            "                         reading against FP32's), seq-exact[:AXIS] (lines read identically),\n"
            "                         mask-iou:T (output map binarised at > T), box-f1 (a detector's boxes against\n"
            "                         FP32's: final boxes with scores, or a YOLOv8-style raw head, decoded),\n"
            "                         map50, map (COCO mAP@0.5 and mAP@0.5:0.95 against --labels yolo:|coco:;\n"
            "                         map is the default with them), text-chars, text-lines (1 - the CER and the\n"
            "                         lines read exactly against --labels paddle:|text:; text-chars the default),\n"
            "                         miou (against --labels mask:; the default with them), hmean (against\n"
            "                         --labels paddledet:; the default with them)\n"
            "  --target X             return the most harmful layers to float until the --metric reaches X\n"
            "  --target-drop X        ... until the --metric is at most X below FP32's own value of it (map50, map:\n"
            "                         FP32's mAP against the labels; top1: FP32's accuracy; agreement metrics: 1)\n"
            "  --exclusions FILE      write the excluded node names, one per line (for --exclude-nodes @FILE)\n"
            "  --json FILE, --html FILE   the full report\n"
            "  --exclude-nodes N, --exclude-op-types T   as in ptq quantize (applied to every method)\n"
            "  --bias-correction, --adaround [ITERS], --refine-images N   also evaluate the best method with each\n"
            "                        of these refinements of ptq quantize, alone and together (their contributions)\n"
            "  --equalize            also evaluate the best method on the equalized model (ptq quantize --equalize;\n"
            "                        one more calibration pass)\n"
            "  --float fp16|fp32     precision of the layers left in float (excluded, or not quantizable): fp16\n"
            "                        (default: weights and activations rounded to FP16, as trtexec --int8 --fp16\n"
            "                        runs them) or fp32 (as --int8 alone)\n"
            "  --config FILE         these options from a YAML file (method: mse, lists as [a, b]); the command line wins\n"
            "  --memory MB           memory budget (default 512): the default batch follows it; outputs do not\n"
            "  --batch N, --limit N (calibration images), --eval-limit N, --shuffle --seed S, --strict, --threads N,\n"
            "  (--seed S also draws the refinements' samples, as in quantize)\n"
            "  --eval-preset P        preprocessing of the evaluation images (default: --preset's; the overrides\n"
            "                         apply to both), e.g. calibrate at paddleocr-rec, evaluate at paddleocr-rec-dynamic\n");
    cli_help_overrides(fp);
    cli_help_help(fp);
}

/* A row's name, cosine, SQNR and max-abs; "n/a" where no output could be compared element by
 * element (a detector's outputs of data-dependent size that differ from FP32's). */
static void print_sums(const char *name, const cmp_metrics *m)
{
    if (isnan(m->cosine)) printf("%-20s %10s %10s %12s", name, "n/a", "n/a", "n/a");
    else printf("%-20s %10.6f %10.2f %12.6g", name, m->cosine, m->sqnr_db, m->max_abs);
}

int cmd_compare(int argc, char **argv)
{
    enum { O_IMAGES = 256, O_EVAL, O_PRESET, O_METHODS, O_LABELS, O_LAYERS, O_TCOS, O_TDROP, O_TMDROP, O_EXCL_OUT, O_JSON, O_HTML,
           O_EXN, O_EXT, O_EVAL_LIMIT, O_BATCH, O_LIMIT, O_SHUFFLE, O_SEED, O_STRICT, O_THREADS, O_SET, O_METRIC,
           O_TARGET, O_EVAL_PRESET, O_BIASC, O_ADAROUND, O_REFINE_IMAGES, O_EQUALIZE, O_FLOAT, O_MEMORY, O_AS_IS, O_BASE };
    static const struct option longopts[] = {
        {"images", required_argument, 0, O_IMAGES},    {"eval-images", required_argument, 0, O_EVAL},
        {"preset", required_argument, 0, O_PRESET},    {"methods", required_argument, 0, O_METHODS},
        {"eval-preset", required_argument, 0, O_EVAL_PRESET},
        {"bias-correction", no_argument, 0, O_BIASC},  {"adaround", optional_argument, 0, O_ADAROUND},
        {"refine-images", required_argument, 0, O_REFINE_IMAGES}, {"equalize", no_argument, 0, O_EQUALIZE},
        {"float", required_argument, 0, O_FLOAT},
        {"as-is", no_argument, 0, O_AS_IS},            {"base", required_argument, 0, O_BASE},
        {"labels", required_argument, 0, O_LABELS},    {"layers-method", required_argument, 0, O_LAYERS},
        {"metric", required_argument, 0, O_METRIC},    {"target", required_argument, 0, O_TARGET},
        {"target-cosine", required_argument, 0, O_TCOS}, {"target-top1-drop", required_argument, 0, O_TDROP},
        {"target-drop", required_argument, 0, O_TMDROP},
        {"exclusions", required_argument, 0, O_EXCL_OUT}, {"json", required_argument, 0, O_JSON},
        {"html", required_argument, 0, O_HTML},        {"exclude-nodes", required_argument, 0, O_EXN},
        {"exclude-op-types", required_argument, 0, O_EXT}, {"eval-limit", required_argument, 0, O_EVAL_LIMIT},
        {"batch", required_argument, 0, O_BATCH}, {"memory", required_argument, 0, O_MEMORY},      {"limit", required_argument, 0, O_LIMIT},
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
    int refine_bc = 0, refine_ada = 0, refine_eq = 0, float16 = 1, as_is = 0;
    const char *base = NULL, *calib_opt = NULL; /* calib_opt: an option of calibration given (refused with --as-is) */
    ptq_graph *gb = NULL;
    cmp_target tg = {NAN, NAN, 1.0, NAN, {0}, NAN};
    cmp_metric metric;
    int metric_given = 0;
    cmp_metric_parse("cosine", &metric);
    calib_method methods[MAX_METHODS];
    char tags[MAX_METHODS][64];
    ptq_status st = PTQ_OK;
    ptq_graph *g = NULL;
    eng_compare_job job = eng_compare_job_defaults();
    eng_compare_result res = {0};
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    src.o.batch = 0; /* the model's (eng_fit_batch) */
    int expanded = cli_config_expand("compare", longopts, &argc, &argv);
    if (expanded) return expanded;
    opterr = 0;
    optind = 1;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
    while ((idx = -1, c = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        int shared = c != '?' && c != ':' && idx >= 0 ? cli_dataset_option("compare", longopts[idx].name, optarg, &src.o) : 0;
        if (shared < 0) return CLI_EXIT_USAGE;
        if (shared) {
            if (!strcmp(longopts[idx].name, "limit") || !strcmp(longopts[idx].name, "shuffle") ||
                !strcmp(longopts[idx].name, "seed") || !strcmp(longopts[idx].name, "shard"))
                calib_opt = longopts[idx].name;
            continue;
        }
        switch (c) {
        case O_IMAGES: case O_METHODS: case O_LAYERS: case O_TCOS: case O_TDROP: case O_TMDROP: case O_TARGET:
        case O_EXCL_OUT: case O_EXN: case O_EXT: case O_BIASC: case O_ADAROUND: case O_REFINE_IMAGES: case O_EQUALIZE:
        case O_FLOAT: calib_opt = longopts[idx].name; break;
        default: break;
        }
        switch (c) {
        case O_AS_IS: as_is = 1; break;
        case O_BASE: base = optarg; break;
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
                return cli_usage_error("compare", "bad --metric '%s' (" CMP_METRIC_SPELLINGS ")", optarg);
            metric_given = 1;
            break;
        case O_TMDROP: {
            char *end;
            tg.drop = strtod(optarg, &end);
            if (*end || end == optarg || !(tg.drop >= 0 && tg.drop <= 1e30))
                return cli_usage_error("compare", "bad --target-drop '%s'", optarg);
            break;
        }
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
        case O_FLOAT:
            if (strcmp(optarg, "fp16") && strcmp(optarg, "fp32")) return cli_usage_error("compare", "--float takes fp16 or fp32");
            float16 = !strcmp(optarg, "fp16");
            break;
        case O_BIASC: refine_bc = 1; break;
        case O_EQUALIZE: refine_eq = 1; break;
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
    if (!isnan(tg.drop) && metric.kind == CMP_METRIC_SQNR)
        return cli_usage_error("compare", "--target-drop: FP32 has no sqnr of its own; use --target X");
    if (optind != argc - 1) return cli_usage_error("compare", "expected one model");
    if (base && !as_is) return cli_usage_error("compare", "--base is for --as-is (a normal run measures against the model itself)");
    if (as_is && calib_opt)
        return cli_usage_error("compare", "--as-is scores the model as given, without calibration: --%s does not apply", calib_opt);
    if (as_is && !eval_dir) return cli_usage_error("compare", "--as-is: --eval-images EVAL_DIR is required");
    if (!as_is && (!src.o.images || !eval_dir)) return cli_usage_error("compare", "--images CALIB_DIR and --eval-images EVAL_DIR are required");
    {
        const char *in[] = {src.o.images, eval_dir, cmp_labels_path(labels), base};
        const char *outs[] = {json, html, excl_out};
        int bad = cli_check_paths("compare", in, 4, outs, 3);
        if (bad) return bad;
    }
    if (calib_methods_parse(!strcmp(methods_arg, "all") ? "max,percentile:99.9,percentile:99.99,percentile:99.999,entropy,mse"
                                                        : methods_arg,
                            methods, MAX_METHODS, &n_methods))
        return cli_usage_error("compare", "bad --methods '%s'", methods_arg);
    for (int m = 0; m < n_methods; m++) calib_method_name(&methods[m], tags[m], sizeof tags[m]);
    int layers_m = -1, no_layers = layers_arg && !strcmp(layers_arg, "none");
    if (layers_arg && !no_layers) {
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
    if ((st = eng_model_load(model, &g, NULL)) != PTQ_OK || (st = eng_validate_model(g, model, NULL, 0)) != PTQ_OK) goto fail;
    if ((st = eng_fit_preprocessing(g, model, &src.cfg, NULL)) != PTQ_OK) goto fail;
    if (eval_preset) { /* checked before the calibration pass; then messages name --preset's again */
        pp_config again = pp_defaults();
        if ((st = eng_preprocessing(eval_preset, set_keys, set_vals, n_set, &eval_cfg)) != PTQ_OK ||
            (st = eng_fit_preprocessing(g, model, &eval_cfg, NULL)) != PTQ_OK ||
            (st = eng_check_input_dims(g, model, &eval_cfg)) != PTQ_OK ||
            (st = eng_preprocessing(preset, set_keys, set_vals, n_set, &again)) != PTQ_OK)
            goto fail;
    }

    /* the labels must match the evaluation images: checked before the calibration pass */
    if (labels && (st = cmp_labels_check(labels, eval_dir, eval_limit > 0)) != PTQ_OK) goto fail;

    /* one calibration pass */
    job.model = model;
    job.g = g;
    job.src = &src;
    job.eval_cfg = eval_preset ? eval_cfg : src.cfg;
    job.eval_images = eval_dir;
    job.labels = labels;
    job.preset = preset;
    job.eval_limit = (int)eval_limit;
    memcpy(job.methods, methods, sizeof methods);
    job.n_methods = n_methods;
    job.metric = metric;
    job.metric_given = metric_given;
    job.layers_method = layers_m;
    job.qo = quant_defaults();
    job.qo.exclude_nodes = ex_nodes.names;
    job.qo.n_exclude_nodes = ex_nodes.n;
    job.qo.exclude_op_types = ex_types.names;
    job.qo.n_exclude_op_types = ex_types.n;
    job.refine_bc = refine_bc;
    job.refine_ada = refine_ada;
    job.refine_eq = refine_eq;
    job.refine_images = (int)refine_images;
    job.target = tg;
    if (no_layers && (!isnan(tg.cosine) || !isnan(tg.top1_drop) || !isnan(tg.metric) || !isnan(tg.drop)))
        return cli_usage_error("compare", "--layers-method none: a target's search needs the layer-wise errors");
    job.float16 = float16;
    job.as_is = as_is;
    if (as_is) { /* no calibration, no QDQ model: the model as given (against --base) */
        no_layers = 1;
        if (base && ((st = eng_model_load(base, &gb, NULL)) != PTQ_OK || (st = eng_validate_model(gb, base, NULL, 0)) != PTQ_OK))
            goto fail;
        if ((st = eng_compare_as_is(&job, gb, base, &res)) != PTQ_OK) goto fail;
        n_methods = res.n_methods;
        snprintf(tags[0], sizeof tags[0], "%s", res.tags[0]);
        fprintf(stderr, "ptq compare: scoring %s as given%s%s on %s\n", model, base ? " against " : "", base ? base : "",
                eval_dir);
        if ((st = eng_compare_evaluate(&job, &res)) != PTQ_OK) goto fail;
        goto scored;
    }
    if ((st = eng_compare_calibrate(&job, &res)) != PTQ_OK) goto fail;
    fprintf(stderr, "ptq compare: calibration pass %.1f s\n", since(&t0));
    if (eval_preset) { /* read again so that messages from here on name the evaluation's preprocessing */
        pp_config again = pp_defaults();
        if ((st = eng_preprocessing(eval_preset, set_keys, set_vals, n_set, &again)) != PTQ_OK) goto fail;
    }

    /* every method's QDQ model, evaluated in one pass */
    if ((st = eng_compare_build(&job, &res)) != PTQ_OK) goto fail;
    fprintf(stderr, "ptq compare: %.1f s; evaluating %d method%s on %s\n", since(&t0), n_methods,
            n_methods == 1 ? "" : "s", eval_dir);
    if ((st = eng_compare_evaluate(&job, &res)) != PTQ_OK) goto fail;
scored:;
    const cmp_metrics *metrics = res.metrics;
    /* the figures the rows are measured against: FP32's; with --as-is, --base's, or the model's own */
    const char *ref = !as_is ? "FP32" : base ? "base" : "as-is";
    int deltas = !as_is || base; /* the rows' differences to ref */
    int classifier = res.classifier, labelled = res.labelled, seq = res.seq, map = res.map, best = res.best;
    int boxes = res.boxes;
    int seq_ctc = !isnan(metrics[0].seq_chars), truth = !isnan(metrics[0].fp32_map), ocr = !isnan(metrics[0].fp32_cer);
    int seg = !isnan(metrics[0].fp32_miou), tdet = !isnan(metrics[0].fp32_hmean);
    if (as_is)
        printf("model %s as given (no calibration), %d evaluation images, against %s\n", model, metrics[0].images,
               base ? base : "itself");
    else
        printf("model %s, %d calibration images, %d evaluation images, float part in %s\n", model, src.images,
               metrics[0].images, float16 ? "FP16" : "FP32");
    printf("%-20s %10s %10s %12s", "method", "cosine", "SQNR dB", "max-abs");
    if (classifier) printf(" %10s", "top-1 agr");
    if (labelled) printf(" %10s", "top-1 acc");
    if (seq) printf(" %10s", "seq-top1");
    if (seq_ctc) printf(" %10s %10s", "seq-chars", "seq-exact");
    if (map) printf(" %10s", "mask-iou");
    if (boxes) printf(" %10s", "box-f1");
    if (truth) printf(" %10s %10s", "mAP50", "mAP50-95");
    if (ocr) printf(" %10s %10s", "CER", "lines");
    if (seg) printf(" %10s", "mIoU");
    if (tdet) printf(" %10s %10s %10s", "precision", "recall", "hmean");
    printf("\n");
    for (int m = 0; m < n_methods; m++) {
        print_sums(tags[m], &metrics[m]);
        if (classifier) printf(" %10.4f", metrics[m].top1_agree);
        if (labelled) printf(" %10.4f", metrics[m].top1_acc);
        if (seq) printf(" %10.4f", metrics[m].seq_top1);
        if (seq_ctc) printf(" %10.4f %10.4f", metrics[m].seq_chars, metrics[m].seq_exact);
        if (map) printf(" %10.4f", metrics[m].mask_iou);
        if (boxes) printf(" %10.4f", metrics[m].box_f1);
        if (truth) printf(" %10.4f %10.4f", metrics[m].map50, metrics[m].map);
        if (ocr) printf(" %10.4f %10.4f", metrics[m].cer, metrics[m].line_acc);
        if (seg) printf(" %10.4f", metrics[m].miou);
        if (tdet) printf(" %10.4f %10.4f %10.4f", metrics[m].det_precision, metrics[m].det_recall, metrics[m].hmean);
        printf("%s\n", m == best && !as_is ? "   <- best" : "");
    }
    if (map) printf("(mask-iou: output 0 binarised at > %g)\n", (double)metrics[0].mask_threshold);
    if (truth) {
        const cmp_metrics *f = &metrics[0];
        printf("%s against %s: mAP50 %.4f [%.4f, %.4f], mAP50-95 %.4f [%.4f, %.4f] (COCO evaluation, boxes scoring >= "
               "0.001; 95 %% bootstrap intervals, %d resamples of the %d images)\n", ref, labels, f->fp32_map50,
               f->fp32_map50_ci[0], f->fp32_map50_ci[1], f->fp32_map, f->fp32_map_ci[0], f->fp32_map_ci[1], CMP_BOOT_MAP,
               f->images);
        for (int m = 0; m < n_methods && deltas; m++)
            printf("  %s mAP50-95 %.4f [%.4f, %.4f], minus %s's %+.4f [%+.4f, %+.4f]; mAP50 minus %s's %+.4f [%+.4f, "
                   "%+.4f]\n", tags[m], metrics[m].map, metrics[m].map_ci[0], metrics[m].map_ci[1], ref,
                   metrics[m].map - metrics[m].fp32_map, metrics[m].map_delta_ci[0], metrics[m].map_delta_ci[1], ref,
                   metrics[m].map50 - metrics[m].fp32_map50, metrics[m].map50_delta_ci[0], metrics[m].map50_delta_ci[1]);
    }
    if (labelled && !isnan(metrics[0].fp32_top1_acc)) {
        const cmp_metrics *f = &metrics[0];
        printf("%s top-1 accuracy %.4f [%.4f, %.4f] (95 %% bootstrap intervals over the %d images)\n", ref, f->fp32_top1_acc,
               f->fp32_top1_ci[0], f->fp32_top1_ci[1], f->images);
        for (int m = 0; m < n_methods && deltas; m++)
            printf("  %s top-1 %.4f [%.4f, %.4f], minus %s's %+.4f [%+.4f, %+.4f]\n", tags[m], metrics[m].top1_acc,
                   metrics[m].top1_ci[0], metrics[m].top1_ci[1], ref, metrics[m].top1_acc - metrics[m].fp32_top1_acc,
                   metrics[m].top1_delta_ci[0], metrics[m].top1_delta_ci[1]);
    }
    if (ocr) {
        const cmp_metrics *f = &metrics[0];
        printf("%s against %s (greedy CTC; 95 %% bootstrap intervals over the %d lines):\n"
               "  %s CER %.4f [%.4f, %.4f], lines read exactly %.4f [%.4f, %.4f]\n",
               ref, labels, f->images, ref, f->fp32_cer, f->fp32_cer_ci[0], f->fp32_cer_ci[1], f->fp32_line_acc,
               f->fp32_line_acc_ci[0], f->fp32_line_acc_ci[1]);
        for (int m = 0; m < n_methods && deltas; m++)
            printf("  %s CER %.4f, minus %s's %+.4f [%+.4f, %+.4f]; lines %.4f, minus %s's %+.4f [%+.4f, %+.4f]\n",
                   tags[m], metrics[m].cer, ref, metrics[m].cer - metrics[m].fp32_cer, metrics[m].cer_delta_ci[0],
                   metrics[m].cer_delta_ci[1], metrics[m].line_acc, ref, metrics[m].line_acc - metrics[m].fp32_line_acc,
                   metrics[m].line_acc_delta_ci[0], metrics[m].line_acc_delta_ci[1]);
    }
    if (seg) {
        const cmp_metrics *f = &metrics[0];
        printf("%s against %s (95 %% bootstrap intervals over the %d images):\n  %s mIoU %.4f [%.4f, %.4f]\n", ref, labels,
               f->images, ref, f->fp32_miou, f->fp32_miou_ci[0], f->fp32_miou_ci[1]);
        for (int m = 0; m < n_methods && deltas; m++)
            printf("  %s mIoU %.4f [%.4f, %.4f], minus %s's %+.4f [%+.4f, %+.4f]\n", tags[m], metrics[m].miou,
                   metrics[m].miou_ci[0], metrics[m].miou_ci[1], ref, metrics[m].miou - metrics[m].fp32_miou,
                   metrics[m].miou_delta_ci[0], metrics[m].miou_delta_ci[1]);
    }
    if (tdet) {
        const cmp_metrics *f = &metrics[0];
        printf("FP32 against %s (DB boxes, DetMetric; 95 %% bootstrap intervals over the %d images):\n"
               "  FP32 hmean %.4f [%.4f, %.4f], precision %.4f [%.4f, %.4f], recall %.4f [%.4f, %.4f]\n",
               labels, f->images, f->fp32_hmean, f->fp32_hmean_ci[0], f->fp32_hmean_ci[1], f->fp32_det_precision,
               f->fp32_det_precision_ci[0], f->fp32_det_precision_ci[1], f->fp32_det_recall, f->fp32_det_recall_ci[0],
               f->fp32_det_recall_ci[1]);
        for (int m = 0; m < n_methods; m++)
            printf("  %s hmean %.4f [%.4f, %.4f], minus FP32's %+.4f [%+.4f, %+.4f]; precision minus FP32's %+.4f; "
                   "recall minus FP32's %+.4f\n", tags[m], metrics[m].hmean, metrics[m].hmean_ci[0], metrics[m].hmean_ci[1],
                   metrics[m].hmean - metrics[m].fp32_hmean, metrics[m].hmean_delta_ci[0], metrics[m].hmean_delta_ci[1],
                   metrics[m].det_precision - metrics[m].fp32_det_precision,
                   metrics[m].det_recall - metrics[m].fp32_det_recall);
    }
    if (!as_is) printf("best: %s (by %s)\n", tags[best], res.criterion);
    st = eng_compare_refinements(&job, &res);
    for (int k = 0; k < res.n_rows; k++) { /* the rows computed, also when a later one failed */
        const cmp_metrics *m = &res.rows[k].m;
        print_sums(res.rows[k].name, m);
        if (classifier) printf(" %10.4f", m->top1_agree);
        if (labelled) printf(" %10.4f", m->top1_acc);
        if (seq) printf(" %10.4f", m->seq_top1);
        if (seq_ctc) printf(" %10.4f %10.4f", m->seq_chars, m->seq_exact);
        if (map) printf(" %10.4f", m->mask_iou);
        if (boxes) printf(" %10.4f", m->box_f1);
        if (truth) printf(" %10.4f %10.4f", m->map50, m->map);
        if (ocr) printf(" %10.4f %10.4f", m->cer, m->line_acc);
        if (seg) printf(" %10.4f", m->miou);
        if (tdet) printf(" %10.4f %10.4f %10.4f", m->det_precision, m->det_recall, m->hmean);
        printf("   (%d images, %.1f s)\n", res.rows[k].images, res.rows[k].seconds);
    }
    if (st != PTQ_OK) goto fail;

    /* layer-wise errors of one method */
    layers_m = res.layers_m;
    if (!no_layers) {
        fprintf(stderr, "ptq compare: %.1f s; layer-wise errors of %s\n", since(&t0), tags[layers_m]);
        if ((st = eng_compare_layers(&job, &res)) != PTQ_OK) goto fail;
        printf("\nlayer-wise (%s), worst isolated SQNR first:\n%-40s %-28s %12s %12s %10s\n", tags[layers_m], "tensor",
               "consumer", "iso SQNR dB", "acc SQNR dB", "acc cos");
        for (int i = 0; i < res.n_layers && i < 15; i++)
            printf("%-40s %-28s %12.2f %12.2f %10.6f\n", res.order[i]->tensor, res.order[i]->node,
                   res.order[i]->iso_sqnr_db, res.order[i]->acc_sqnr_db, res.order[i]->acc_cosine);
    }

    /* sensitivity: the fewest layers in float that reach the target */
    if ((st = eng_compare_exclusion(&job, &res)) != PTQ_OK) goto fail;
    if (res.want_target) {
        const cmp_exclusion *excl = &res.excl;
        if (res.target_met)
            printf("\ntarget already met with every layer quantized (cosine %.6f, %s %.6f)\n", excl->reached.cosine,
                   res.metric_name, cmp_metric_value(&res.metric, &excl->reached));
        if (excl->n_nodes) {
            printf("\n%d node%s in float reach cosine %.6f, %s %.6f (%d evaluations):\n  ptq quantize ... --exclude-nodes ",
                   excl->n_nodes, excl->n_nodes == 1 ? "" : "s", excl->reached.cosine, res.metric_name,
                   cmp_metric_value(&res.metric, &excl->reached), excl->evaluations);
            for (int e = 0; e < excl->n_nodes; e++) printf("%s%s", e ? "," : "", excl->nodes[e]);
            printf("\n  trtexec ... --precisionConstraints=obey %s\n", res.trt_arg);
        }
    }

    /* reports */
    if ((st = eng_compare_write(&job, &res, excl_out, json, html)) != PTQ_OK) goto fail;
    if ((rc = cli_outputs_commit(NULL)) != CLI_EXIT_OK) goto done;
    fprintf(stderr, "ptq compare: %d calibration images, %d evaluation images, %d methods, %d layers; %.1f s, peak RSS %.0f MB\n",
            src.images, metrics[0].images, n_methods, res.n_layers, since(&t0), cli_peak_rss_mb());
    goto done;
fail:
    rc = cli_fail(st);
done:
    eng_compare_result_free(&res);
    ptq_graph_destroy(g);
    ptq_graph_destroy(gb);
    cli_names_free(&ex_nodes);
    cli_names_free(&ex_types);
    return rc;
}
