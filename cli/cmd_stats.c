/* cmd_stats.c: `ptq stats`: calibration statistics files (io/stats.h).
 *   ptq stats merge A B ... -o C   shards merged exactly as if one pass had seen all images
 *                                  (byte for byte: the images are recorded as a sorted set)
 *   ptq stats show FILE            header and per-tensor summary
 *   ptq stats show FILE --hist H.npy   also every tensor's analysis histogram (the 2048 bins
 *                                      over [0, amax] that the methods use), float64
 *                                      [tensors, 2048] in the listed order: the calibration
 *                                      tests feed it to their numpy oracle */
#include <stdio.h>
#include <string.h>

#include "calib/calib.h"
#include "cli/cli.h"
#include "io/npy.h"
#include "io/stats.h"

static void usage(FILE *fp)
{
    fprintf(fp, "usage: ptq stats merge A.ptqstats B.ptqstats ... -o, --output OUT.ptqstats\n"
                "       ptq stats show FILE.ptqstats [--hist H.npy]\n"
                "Statistics come from ptq calibrate/quantize --stats. merge refuses files of different models or\n"
                "preprocessing, any image in two files (the same shard twice), and corrupt or truncated files; the\n"
                "result is the file one pass over all their images writes (calibrate/quantize --stats), byte for byte,\n"
                "so --from-stats gives the same ranges; --shard I/N makes such shards (docs/cluster.md).\n"
                "--hist writes the analysis histograms (float64 [tensors, 2048], over [0, amax] of each tensor).\n");
    cli_help_help(fp);
}

static int cmd_merge(int argc, char **argv)
{
    static const struct option longopts[] = {{"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *out = NULL;
    int c;
    opterr = 0;
    optind = 1;
    if (cli_list_options(argc, argv, longopts)) return CLI_EXIT_OK;
    while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option("stats merge", c, argv);
        }
    }
    if (!out) return cli_usage_error("stats merge", "-o OUT.ptqstats is required");
    if (optind >= argc) return cli_usage_error("stats merge", "no statistics file to merge");
    io_stats s;
    io_stats_init(&s);
    ptq_status st = io_stats_merge((const char *const *)argv + optind, argc - optind, &s);
    if (st == PTQ_OK) st = io_stats_write(out, &s);
    int rc = st == PTQ_OK ? cli_outputs_commit(out) : cli_fail(st);
    if (rc == CLI_EXIT_OK)
        fprintf(stderr, "ptq stats merge: %d files, %llu images, %d tensors; wrote %s\n", argc - optind,
                (unsigned long long)s.n_images, s.n_tensors, out);
    io_stats_free(&s);
    return rc;
}

/* The analysis histograms of every tensor, float64 [n_tensors, CALIB_ANALYSIS_BINS]. */
static ptq_status write_hist(const char *path, const io_stats *s)
{
    ptq_tensor t = {0};
    t.dtype = PTQ_F64;
    t.rank = 2;
    t.dims[0] = s->n_tensors;
    t.dims[1] = CALIB_ANALYSIS_BINS;
    ptq_status st = ptq_tensor_alloc(&t);
    if (st != PTQ_OK) return st;
    for (int i = 0; i < s->n_tensors; i++) calib_analysis_hist(s->tensors[i].stats, (double *)t.data + (size_t)i * CALIB_ANALYSIS_BINS);
    st = npy_save(path, &t);
    ptq_tensor_free(&t);
    return st;
}

static int cmd_show(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    const char *hist = NULL;
    if (argc == 4 && !strcmp(argv[2], "--hist")) hist = argv[3];
    else if (argc != 2) return cli_usage_error("stats show", "expected one statistics file (and --hist H.npy)");
    io_stats s;
    io_stats_init(&s);
    ptq_status st = io_stats_read(argv[1], &s);
    if (st != PTQ_OK) return cli_fail(st);
    printf("model hash     %016llx\npreprocessing  %s\nimages         %llu\n", (unsigned long long)s.model_hash,
           s.preprocess, (unsigned long long)s.n_images);
    if (s.n_shards > 0) { /* format 1 */
        printf("image lists   ");
        for (int i = 0; i < s.n_shards; i++) printf(" %016llx", (unsigned long long)s.shards[i]);
        printf("\n");
    } else { /* FNV-1a 64 of the sorted ids: equal for a one pass and its merged shards */
        uint64_t h = IO_FNV1A64_INIT;
        for (uint64_t i = 0; i < s.n_images; i++) {
            uint8_t le[8];
            for (int b = 0; b < 8; b++) le[b] = (uint8_t)(s.ids[i] >> (8 * b));
            h = io_fnv1a64(le, sizeof le, h);
        }
        printf("image set      %016llx\n", (unsigned long long)h);
    }
    printf("tensors        %d\n", s.n_tensors);
    printf("%-40s %14s %10s %10s %12s %15s %15s %15s %12s\n", "name", "values", "nan", "inf", "zeros", "min", "max", "amax", "range");
    for (int i = 0; i < s.n_tensors; i++) {
        const calib_stats *t = s.tensors[i].stats;
        printf("%-40s %14llu %10llu %10llu %12llu %15.9g %15.9g %15.9g %12g\n", s.tensors[i].name,
               (unsigned long long)t->count, (unsigned long long)t->nan, (unsigned long long)(t->pinf + t->ninf),
               (unsigned long long)t->zeros, (double)t->min, (double)t->max, (double)t->amax, t->range);
    }
    if (hist) st = write_hist(hist, &s);
    io_stats_free(&s);
    return st == PTQ_OK ? CLI_EXIT_OK : cli_fail(st);
}

int cmd_stats(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--list-options")) { /* the subcommands', for completion */
        static const struct option all[] = {{"output", required_argument, 0, 'o'}, {"hist", required_argument, 0, 'H'},
                                            {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
        return cli_list_options(argc, argv, all) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "merge")) return cmd_merge(argc - 1, argv + 1);
    if (!strcmp(argv[1], "show")) return cmd_show(argc - 1, argv + 1);
    return cli_usage_error("stats", "unknown subcommand '%s' (merge, show)", argv[1]);
}
