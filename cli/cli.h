/* cli.h: what the subcommands share: option helpers, error printing, exit codes.
 * Only cli/ calls exit(); library calls return a ptq_status that cli_fail() prints
 * as one line "ptq: <message>" and maps to an exit code. */
#ifndef PTQ_CLI_H
#define PTQ_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "engine/runner.h"
#include "runtime/plan.h"
#include "runtime/status.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_ERROR = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_INTERRUPTED = 130 };

int cmd_inspect(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_preprocess(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_translate(int argc, char **argv);

/* The command's outputs as one set (io/file.h): begun by main() before the command runs; a command
 * commits it (its primary output, the model, renamed last) before printing what it wrote;
 * cli_outputs_end() commits what a successful command left and discards a failed one's. */
int cli_outputs_begin(void);
int cli_outputs_commit(const char *primary); /* CLI_EXIT_OK, or the error printed and its exit code */
int cli_outputs_end(int rc);

/* Prints "ptq: <last error>" (saying that no output was written when outputs were pending) and
 * returns the exit code for st. */
int cli_fail(ptq_status st);
/* Prints "ptq <cmd>: <message>" for a usage problem; returns CLI_EXIT_USAGE. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int cli_usage_error(const char *cmd, const char *fmt, ...);
/* Message for getopt's '?' / ':' results (unknown option, missing argument). */
int cli_bad_option(const char *cmd, int c, char **argv);

/* "x:1x3x640x640" or "1x3x640x640" (name NULL: the single input). The name part
 * is everything before the LAST ':' so names may contain ':'. Returns 0 or -1. */
int cli_parse_shape(const char *arg, ptq_input_shape *out, char **name_storage);
/* --adaround [ITERS]: the iteration count from --adaround=N, from a following number argument
 * (consumed: *optind advances), or 2000. Returns 0, or prints the usage error and returns -1. */
int cli_adaround_arg(const char *cmd, const char *arg, int argc, char **argv, int *optind_p, int *iters);
/* Help lines every image command shares: the preprocessing overrides (CLI_PP_LONGOPTS), and -h. */
void cli_help_overrides(FILE *fp);
void cli_help_help(FILE *fp);
/* `ptq CMD --list-options` (for shell completion and the docs' test): prints opts' long names,
 * "--name" one per line, and returns 1; otherwise returns 0. */
int cli_list_options(int argc, char **argv, const struct option *opts);
/* Non-negative integer in [lo, hi]; returns 0 or -1. */
int cli_parse_long(const char *s, long lo, long hi, long *out);

/* The preprocessing overrides every command that reads images takes on top of --preset
 * (calibrate, quantize, compare, preprocess, run --images, and their --config files), as
 * struct option entries returning `code`; each "--key value" goes to eng_preprocessing() (engine/preprocessing.h). */
#define CLI_PP_LONGOPTS(code)                                                                                        \
    {"size", required_argument, 0, code}, {"mode", required_argument, 0, code},                                     \
        {"resize", required_argument, 0, code}, {"shorter", required_argument, 0, code},                             \
        {"mean", required_argument, 0, code}, {"std", required_argument, 0, code},                                   \
        {"scale", required_argument, 0, code}, {"channel-order", required_argument, 0, code},                        \
        {"layout", required_argument, 0, code}, {"pad-value", required_argument, 0, code},                           \
        {"max-width", required_argument, 0, code}, {"limit-side", required_argument, 0, code},                       \
        {"limit-type", required_argument, 0, code}, {"multiple", required_argument, 0, code},                        \
        {"max-side", required_argument, 0, code}
#define CLI_PP_MAX 32 /* overrides one command line may give */

/* The image-source options every image command shares (--batch --memory --limit --shuffle --seed
 * --shard --strict --exif --threads), by long-option name: 1 handled, 0 not one of them,
 * -1 bad value (message printed: return CLI_EXIT_USAGE). o is a pp_dataset_options. */
int cli_dataset_option(const char *cmd, const char *name, const char *arg, void *o);

/* Names from repeated options (--exclude-nodes, --exclude-op-types): each value a comma list
 * or @FILE (one name per line, # comments, leading blanks ignored). Grows as needed. */
typedef struct {
    const char **names; /* borrowed from owned buffers or pushed by the caller */
    int n, cap;
    char **owned;
    int n_owned, cap_owned;
} cli_names;
/* Adds the names of one option value; 0, or -1 (unreadable @FILE, out of memory). */
int cli_names_add(cli_names *l, const char *arg);
/* Adds one name, borrowed: it must outlive the list. 0 or -1 (out of memory). */
int cli_names_push(cli_names *l, const char *name);
void cli_names_free(cli_names *l);

/* The process's peak resident memory so far, in MB (for closing summaries). */
double cli_peak_rss_mb(void);
/* "peak RSS 390 MB of a 512 MB budget" for closing summaries; when one image already needed more
 * than the budget (m->over), also what it needs. m NULL, or a batch the budget did not choose
 * (the user's or the model's): the peak alone. */
void cli_peak_rss_text(const eng_memory_budget *m, char *buf, size_t cap);

/* Expands `--config FILE` (a YAML mapping of the command's long options, cli/config.c) into
 * options placed before the command line's; argc/argv are replaced when there is one.
 * Returns 0, or an exit code after printing the error (bad file, unknown key). */
int cli_config_expand(const char *cmd, const struct option *opts, int *argc, char ***argv);
/* Before any work: every input path given (NULL: not given) exists, and the folder of every output
 * path exists. Prints one line and returns CLI_EXIT_ERROR, or returns 0. */
int cli_check_paths(const char *cmd, const char *const *inputs, int n_in, const char *const *outputs, int n_out);
/* 1 for the commands that take --config (calibrate, quantize, compare). */
int cli_takes_config(const char *cmd);

/* Removes temporary output files and exits 130 on SIGINT/SIGTERM. */
void cli_install_signal_handlers(void);

#endif
