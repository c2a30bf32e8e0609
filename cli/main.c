/* main.c: the ptq binary: `ptq <command> [options]`, one file per command in cli/. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "version.h" /* build/gen: PTQ_SOURCE_COMMIT */
#include "runtime/kernels/sgemm.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"inspect", cmd_inspect, "inputs, outputs, ops, parameters and memory of an ONNX model"},
    {"run", cmd_run, "run an FP32 (or QDQ) ONNX model on .npy or random inputs"},
    {"convert", cmd_convert, "load and save an ONNX model (round trip)"},
    {"quantize", cmd_quantize, "FP32 ONNX + images -> QDQ ONNX (TensorRT rules) + calibration cache"},
    {"calibrate", cmd_calibrate, "activation ranges from one pass over images: TensorRT cache, JSON"},
    {"preprocess", cmd_preprocess, "an image folder to the tensors a model sees (.npy, PNG)"},
    {"compare", cmd_compare, "compare calibration methods on held-out images; layer-wise errors; auto-exclusion"},
    {"stats", cmd_stats, "calibration statistics files: merge shards, show"},
    {"translate", cmd_translate, "QDQ model -> model without Q/DQ + INT8 scales, cache and fp16 layers for trtexec"},
};

static void usage(FILE *fp)
{
    fprintf(fp, "usage: ptq <command> [options]   (ptq <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(fp, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    char why[160];
    if (kern_isa_check(why, sizeof why) != 0) {
        fprintf(stderr, "ptq: %s\n", why);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ptq 0.1 (source commit %s, GEMM path %s)\n", PTQ_SOURCE_COMMIT, kern_isa_name(kern_isa_current()));
        return CLI_EXIT_OK;
    }
    /* Decoded images, tensors and batches of a few MB are allocated and freed per image; served
     * from the heap rather than fresh mmaps they skip the page faults of new memory (decode +
     * preprocess 7 % faster). Freed memory above 128 MB still goes back to the system. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            cli_install_signal_handlers();
            if (cli_outputs_begin() != CLI_EXIT_OK) return CLI_EXIT_ERROR;
            return cli_outputs_end(commands[i].fn(argc - 1, argv + 1));
        }
    fprintf(stderr, "ptq: unknown command '%s' (see 'ptq --help')\n", argv[1]);
    return CLI_EXIT_USAGE;
}
