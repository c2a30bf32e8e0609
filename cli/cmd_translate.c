/* cmd_translate.c: `ptq translate`: a QDQ model to TensorRT's implicit quantization, the job
 * of NVIDIA's qdq_translator (quantization spec §6, quant/translate.h): the model without
 * Q/DQ, the INT8 scales as a precision config and a calibration cache, and the layers left
 * in float as trtexec --layerPrecisions arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/translate.h"
#include "io/cache.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/ranges.h"
#include "quant/translate.h"

static void usage(FILE *fp)
{
    fprintf(fp, "usage: ptq translate MODEL.qdq.onnx [-o PREFIX] [options]\n"
                "  -o, --output PREFIX   output prefix (default: MODEL without .onnx); writes PREFIX_noqdq.onnx,\n"
                "                        PREFIX_precision_config.json, PREFIX_precision_config_calib.cache and\n"
                "                        PREFIX_precision_config_layer_arg.txt (trtexec --layerPrecisions=...)\n"
                "  --propagate-concat    Concat outputs take the largest of their inputs' scales\n"
                "  --propagate-pool      AveragePool, GlobalAveragePool and ReduceMean outputs take their input's scale\n"
                "  --propagate-mul       Mul outputs take the largest scale of their non-constant inputs\n"
                "  --dla                 scale 1.0 for Conv outputs without one that feed element-wise nodes\n"
                "  --trt-version V       cache header version (default 8601)\n"
                "  --trt-algorithm A     cache header algorithm (default EntropyCalibration2)\n"
                "Scales always propagate through Pad, Transpose, MaxPool, Flatten, Relu, Squeeze, Reshape, Sigmoid.\n");
    cli_help_help(fp);
}

int cmd_translate(int argc, char **argv)
{
    enum { O_CONCAT = 256, O_POOL, O_MUL, O_DLA, O_TRTV, O_TRTA };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},        {"propagate-concat", no_argument, 0, O_CONCAT},
        {"propagate-pool", no_argument, 0, O_POOL},   {"propagate-mul", no_argument, 0, O_MUL},
        {"dla", no_argument, 0, O_DLA},               {"trt-version", required_argument, 0, O_TRTV},
        {"trt-algorithm", required_argument, 0, O_TRTA}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    quant_translate_options o = quant_translate_defaults();
    quant_translation tr = {0};
    const char *prefix_arg = NULL, *algorithm = io_cache_algorithm(NULL);
    long trt_version = 8601;
    char *prefix = NULL;
    ptq_status st = PTQ_OK;
    int c, rc = CLI_EXIT_OK;
    opterr = 0;
    optind = 1;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
    while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': prefix_arg = optarg; break;
        case O_CONCAT: o.propagate_concat = 1; break;
        case O_POOL: o.propagate_pool = 1; break;
        case O_MUL: o.propagate_mul = 1; break;
        case O_DLA: o.dla = 1; break;
        case O_TRTV:
            if (cli_parse_long(optarg, 1, 100000000, &trt_version)) return cli_usage_error("translate", "bad --trt-version '%s'", optarg);
            break;
        case O_TRTA:
            if (!(algorithm = io_cache_algorithm(optarg)))
                return cli_usage_error("translate", "--trt-algorithm: EntropyCalibration2, EntropyCalibration, "
                                                    "MinMaxCalibration or LegacyCalibration");
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option("translate", c, argv);
        }
    }
    if (optind != argc - 1) return cli_usage_error("translate", "expected one QDQ model");
    const char *model = argv[optind];
    size_t ml = strlen(prefix_arg ? prefix_arg : model);
    prefix = malloc(ml + 1);
    if (!prefix) {
        st = PTQ_ERR_NOMEM;
        ptq_error("out of memory copying the output prefix");
        goto fail;
    }
    strcpy(prefix, prefix_arg ? prefix_arg : model);
    if (!prefix_arg && ml > 5 && !strcmp(prefix + ml - 5, ".onnx")) prefix[ml - 5] = 0;

    if ((st = eng_translate(model, prefix, &o, trt_version, algorithm, &tr)) != PTQ_OK) goto fail;
    if ((rc = cli_outputs_commit(NULL)) != CLI_EXIT_OK) goto done;
    fprintf(stderr,
            "ptq translate: %d activation Q/DQ pairs and %d weight DequantizeLinear removed, %d BatchNormalization folded, "
            "%d INT8 tensors (%d by propagation%s), %d node%s left in float; wrote %s_noqdq.onnx, "
            "%s_precision_config.json, %s_precision_config_calib.cache, %s_precision_config_layer_arg.txt\n",
            tr.n_activation_pairs, tr.n_weights, tr.n_bn_folded, tr.n_scales, tr.n_propagated,
            tr.n_conflicts ? ", conflicting scales: the largest kept" : "", tr.n_fp16, tr.n_fp16 == 1 ? "" : "s", prefix,
            prefix, prefix, prefix);
    goto done;
fail:
    rc = cli_fail(st);
done:
    quant_translation_free(&tr);
    free(prefix);
    return rc;
}
