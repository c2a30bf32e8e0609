/* cmd_convert.c: `ptq convert MODEL -o OUT`: load and save (the lossless round trip). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/collect.h"
#include "io/onnx.h"

int cmd_convert(int argc, char **argv)
{
    static const struct option longopts[] = {{"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *out = NULL;
    ptq_graph *g = NULL;
    ptq_status st;
    int c, rc = CLI_EXIT_OK;
    opterr = 0;
    optind = 1;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
    while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'h': printf("usage: ptq convert MODEL -o, --output OUT.onnx\n"); cli_help_help(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option("convert", c, argv);
        }
    }
    if (optind != argc - 1) return cli_usage_error("convert", "expected one model");
    if (!out) return cli_usage_error("convert", "-o OUT.onnx is required");
    if ((st = onnx_model_load(argv[optind], &g)) != PTQ_OK || (st = eng_validate_model(g, argv[optind], NULL, 0)) != PTQ_OK ||
        (st = onnx_model_save(g, out)) != PTQ_OK)
        rc = cli_fail(st);
    else rc = cli_outputs_commit(out);
    ptq_graph_destroy(g);
    return rc;
}
