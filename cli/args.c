/* args.c: option helpers shared by the subcommands. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/file.h"
#include "io/preset.h"
#include "preprocess/dataset.h"
#include "quant/adaround.h"
#include <omp.h>
#include "runtime/graph.h"

/* The command's outputs: one set, committed by cli_outputs_commit() or, for a command that
 * succeeded without committing, by cli_outputs_end(). */
static io_outset *cmd_set;

static void note_waiting(const char *msg)
{
    fprintf(stderr, "ptq: %s\n", msg);
}

int cli_outputs_begin(void)
{
    if (io_outset_begin(&cmd_set, note_waiting) != PTQ_OK) return cli_fail(PTQ_ERR_NOMEM);
    return CLI_EXIT_OK;
}

int cli_outputs_commit(const char *primary)
{
    ptq_status st = io_outset_commit(cmd_set, primary);
    return st == PTQ_OK ? CLI_EXIT_OK : cli_fail(st);
}

int cli_outputs_end(int rc)
{
    if (rc == CLI_EXIT_OK) rc = cli_outputs_commit(NULL);
    io_outset_free(cmd_set); /* a failed command's files are discarded */
    cmd_set = NULL;
    return rc;
}

int cli_fail(ptq_status st)
{
    const char *msg = ptq_last_error();
    /* what stands on disk, unless the message says it already */
    int say = cmd_set && io_outset_pending(cmd_set) > 0 && !strstr(msg, "output written") &&
              !strstr(msg, "; written: ");
    fprintf(stderr, "ptq: %s%s\n", msg, say ? "; no output written (the previous files are unchanged)" : "");
    return st == PTQ_ERR_ARG ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ptq %s: %s (see 'ptq %s --help')\n", cmd, msg, cmd);
    return CLI_EXIT_USAGE;
}

int cli_bad_option(const char *cmd, int c, char **argv)
{
    const char *opt = argv[optind - 1];
    if (c == ':') return cli_usage_error(cmd, "option '%s' needs a value", opt);
    return cli_usage_error(cmd, "unknown option '%s'", opt);
}

int cli_adaround_arg(const char *cmd, const char *arg, int argc, char **argv, int *optind_p, int *iters)
{
    long it = quant_adaround_defaults().iters;
    if (!arg && *optind_p < argc && argv[*optind_p][0] >= '0' && argv[*optind_p][0] <= '9') arg = argv[(*optind_p)++];
    if (arg && cli_parse_long(arg, 1, 10000000, &it)) {
        cli_usage_error(cmd, "bad --adaround '%s'", arg);
        return -1;
    }
    *iters = (int)it;
    return 0;
}

int cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_parse_shape(const char *arg, ptq_input_shape *out, char **name_storage)
{
    const char *colon = strrchr(arg, ':');
    const char *dims = colon ? colon + 1 : arg;
    memset(out, 0, sizeof *out);
    *name_storage = NULL;
    if (colon) {
        size_t n = (size_t)(colon - arg);
        if (n == 0) return -1;
        *name_storage = malloc(n + 1);
        if (!*name_storage) return -1;
        memcpy(*name_storage, arg, n);
        (*name_storage)[n] = 0;
        out->name = *name_storage;
    }
    if (!*dims) return -1;
    const char *p = dims;
    while (*p) {
        char *end;
        if (out->rank == PTQ_MAX_RANK || *p < '0' || *p > '9') return -1;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v < 0 || v > (1LL << 40)) return -1;
        out->dims[out->rank++] = v;
        if (*end == 'x' || *end == 'X' || *end == ',') {
            if (!end[1]) return -1;
            p = end + 1;
        } else if (*end == 0) {
            p = end;
        } else {
            return -1;
        }
    }
    return 0;
}

/* SIGINT, SIGTERM, SIGHUP: the output set is discarded, or, if the signal came while it was being
 * renamed, completed first (io/file.h); the message says which. */
static void on_signal(int sig)
{
    int state = io_outset_signal(sig);
    if (state == 1) return; /* kept: raised again once the outputs are in place */
    static const char none[] = "ptq: interrupted; no output written (the previous files are unchanged)\n";
    static const char all[] = "ptq: interrupted after every output was written\n";
    ssize_t w = state == 2 ? write(STDERR_FILENO, all, sizeof all - 1) : write(STDERR_FILENO, none, sizeof none - 1);
    (void)w;
    _exit(sig == SIGINT ? CLI_EXIT_INTERRUPTED : 128 + sig);
}

void cli_install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int cli_dataset_option(const char *cmd, const char *name, const char *arg, void *op)
{
    pp_dataset_options *o = op;
    long v;
    if (!strcmp(name, "shuffle")) o->shuffle = 1;
    else if (!strcmp(name, "strict")) o->strict = 1;
    else if (!strcmp(name, "batch")) {
        if (cli_parse_long(arg, 1, 4096, &v)) return cli_usage_error(cmd, "bad --batch '%s'", arg), -1;
        o->batch = (int)v;
    } else if (!strcmp(name, "memory")) {
        if (cli_parse_long(arg, 64, 1048576, &v)) return cli_usage_error(cmd, "bad --memory '%s': MB, from 64 to 1048576", arg), -1;
        o->memory_mb = (int)v;
    } else if (!strcmp(name, "limit")) {
        if (cli_parse_long(arg, 1, 100000000, &v)) return cli_usage_error(cmd, "bad --limit '%s'", arg), -1;
        o->limit = (int)v;
    } else if (!strcmp(name, "shard")) {
        /* I/N, I in 0..N-1 (Kubernetes' JOB_COMPLETION_INDEX; Slurm array ids 0..N-1) */
        const char *slash = strchr(arg, '/');
        char index[32];
        long n;
        if (!slash || slash == arg || (size_t)(slash - arg) >= sizeof index || arg[0] < '0' || arg[0] > '9' ||
            slash[1] < '0' || slash[1] > '9' || cli_parse_long(slash + 1, 1, 1000000, &n) ||
            (snprintf(index, sizeof index, "%.*s", (int)(slash - arg), arg), cli_parse_long(index, 0, n - 1, &v)))
            return cli_usage_error(cmd, "bad --shard '%s': give I/N, N from 1 to 1000000 shards and I from 0 to N-1", arg), -1;
        o->shard_index = (int)v;
        o->shard_count = (int)n;
    } else if (!strcmp(name, "seed")) {
        if (cli_parse_long(arg, 0, 0x7fffffffL, &v)) return cli_usage_error(cmd, "bad --seed '%s'", arg), -1;
        o->seed = (uint64_t)v;
    } else if (!strcmp(name, "exif")) {
        if (strcmp(arg, "on") && strcmp(arg, "off")) return cli_usage_error(cmd, "--exif takes on or off"), -1;
        o->exif = !strcmp(arg, "on");
    } else if (!strcmp(name, "threads")) {
        if (cli_parse_long(arg, 1, 1024, &v)) return cli_usage_error(cmd, "bad --threads '%s'", arg), -1;
        o->threads = (int)v;
        omp_set_num_threads((int)v);
    } else {
        return 0;
    }
    return 1;
}

static int names_grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *q = realloc(*p, elem * (size_t)cap2);
    if (!q) return -1;
    *p = q;
    *cap = cap2;
    return 0;
}

int cli_names_push(cli_names *l, const char *name)
{
    if (names_grow((void **)&l->names, &l->cap, l->n + 1, sizeof *l->names)) return -1;
    l->names[l->n++] = name;
    return 0;
}

/* Keeps buf (freed by cli_names_free), or frees it when that fails. */
static int names_own(cli_names *l, char *buf)
{
    if (!buf || names_grow((void **)&l->owned, &l->cap_owned, l->n_owned + 1, sizeof *l->owned)) {
        free(buf);
        return -1;
    }
    l->owned[l->n_owned++] = buf;
    return 0;
}

int cli_names_add(cli_names *l, const char *arg)
{
    if (arg[0] == '@') {
        uint8_t *buf;
        size_t len;
        if (io_read_file(arg + 1, &buf, &len, 1 << 24) != PTQ_OK) return -1;
        if (names_own(l, (char *)buf)) return -1;
        for (char *line = strtok((char *)buf, "\r\n"); line; line = strtok(NULL, "\r\n")) {
            while (*line == ' ' || *line == '\t') line++;
            if (*line && *line != '#' && cli_names_push(l, line)) return -1;
        }
        return 0;
    }
    char *copy = ptq_strdup(arg);
    if (names_own(l, copy)) return -1;
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
        if (cli_names_push(l, tok)) return -1;
    return 0;
}

void cli_names_free(cli_names *l)
{
    for (int i = 0; i < l->n_owned; i++) free(l->owned[i]);
    free(l->owned);
    free(l->names);
    memset(l, 0, sizeof *l);
}

double cli_peak_rss_mb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

void cli_peak_rss_text(const eng_memory_budget *m, char *buf, size_t cap)
{
    int k = snprintf(buf, cap, "peak RSS %.0f MB", cli_peak_rss_mb());
    if (!m || !m->batch || k < 0 || (size_t)k >= cap) return; /* the user's or the model's batch: no budget applied */
    k += snprintf(buf + k, cap - (size_t)k, " of a %.0f MB budget", (double)m->budget / 1048576.0);
    if (m->over && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, " (one image needs up to %.0f MB: raise --memory or take a smaller input size)",
                 (double)(m->fixed + m->per_image) / 1048576.0);
}

int cli_list_options(int argc, char **argv, const struct option *opts)
{
    if (argc != 2 || strcmp(argv[1], "--list-options") != 0) return 0;
    for (const struct option *o = opts; o->name; o++) printf("--%s\n", o->name);
    if (cli_takes_config(argv[0])) printf("--config\n"); /* expanded before getopt (cli_config_expand) */
    return 1;
}

void cli_help_overrides(FILE *fp)
{
    fprintf(fp, "  preprocessing overrides of the preset (ptq preprocess --help; docs/preprocessing.md):\n"
                "    --mode M --size WxH --resize I --shorter N --pad-value V\n"
                "    --channel-order RGB|BGR|GRAY|GRAY_PIL|GRAY_CV (GRAY: PIL's luma after RGB, OpenCV's after BGR)\n"
                "    --scale V --mean a,b,c --std a,b,c (one value: all channels) --layout NCHW|NHWC\n"
                "  without --preset: an Ultralytics export's metadata (imgsz) names yolo-letterbox-640; otherwise\n"
                "  the default (stretch to the model's size, RGB, x/255), said in one line\n"
                "    --max-width N --limit-side N --limit-type max|min --multiple N --max-side N\n");
}

void cli_help_help(FILE *fp)
{
    fprintf(fp, "  -h, --help            this text\n");
}

int cli_check_paths(const char *cmd, const char *const *inputs, int n_in, const char *const *outputs, int n_out)
{
    struct stat sb;
    for (int i = 0; i < n_in; i++)
        if (inputs[i] && stat(inputs[i], &sb) != 0) {
            fprintf(stderr, "ptq %s: %s: %s\n", cmd, inputs[i], strerror(errno));
            return CLI_EXIT_ERROR;
        }
    for (int i = 0; i < n_out; i++) {
        if (!outputs[i]) continue;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", outputs[i]);
        char *slash = strrchr(dir, '/');
        if (!slash) continue; /* the current folder */
        if (slash == dir) slash[1] = 0;
        else *slash = 0;
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "ptq %s: cannot write %s: the folder %s does not exist\n", cmd, outputs[i], dir);
            return CLI_EXIT_ERROR;
        }
    }
    return 0;
}
