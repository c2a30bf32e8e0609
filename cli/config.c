/* config.c: `--config FILE` for the commands with many options (calibrate, quantize,
 * compare). The file is a flat YAML mapping whose keys are the command's long options:
 *
 *   method: percentile:99.99
 *   exclude-nodes: [p2o.Conv.0, "p2o.Conv.4*"]     # a list = one comma-separated value
 *   exclude-op-types: GlobalAveragePool
 *   dedicated-qdq: true                            # a flag: true or false
 *
 * Its options are placed before the command line's, so a value given on the command line
 * wins and lists (exclusions) add up. The expanded argv lives until the process exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/yaml.h"
#include "runtime/graph.h"

typedef struct {
    const char *cmd;
    const struct option *opts;
    char **argv;
    int argc, cap;
} expansion;

/* Everything an expansion allocated: freed at exit, since argv's strings live until then. */
static struct {
    char **ptr;
    int n, cap;
} kept;

static void free_kept(void)
{
    for (int i = 0; i < kept.n; i++) free(kept.ptr[i]);
    free(kept.ptr);
    kept.ptr = NULL;
    kept.n = kept.cap = 0;
}

static int keep(void *p)
{
    if (!p) return -1;
    if (kept.n == kept.cap) {
        int cap = kept.cap ? 2 * kept.cap : 16;
        char **q = realloc(kept.ptr, sizeof *q * (size_t)cap);
        if (!q) {
            free(p);
            return -1;
        }
        if (!kept.ptr) atexit(free_kept);
        kept.ptr = q;
        kept.cap = cap;
    }
    kept.ptr[kept.n++] = p;
    return 0;
}

static ptq_status push(expansion *e, char *arg)
{
    if (e->argc + 2 > e->cap) {
        int cap = e->cap ? 2 * e->cap : 32;
        char **q = malloc(sizeof *q * (size_t)cap);
        if (!q || keep(q)) {
            ptq_error("out of memory reading the config");
            return PTQ_ERR_NOMEM;
        }
        if (e->argc) memcpy(q, e->argv, sizeof *q * (size_t)e->argc);
        e->argv = q;
        e->cap = cap;
    }
    e->argv[e->argc++] = arg;
    e->argv[e->argc] = NULL;
    return PTQ_OK;
}

static const struct option *find_option(const struct option *opts, const char *name)
{
    for (; opts->name; opts++)
        if (strcmp(opts->name, name) == 0) return opts;
    return NULL;
}

static ptq_status on_pair(const char *key, const char *value, const char *what, void *user)
{
    expansion *e = user;
    const struct option *o = find_option(e->opts, key);
    if (!o || !strcmp(key, "help")) {
        ptq_error("%s: '%s' is not an option of ptq %s", what, key, e->cmd);
        return PTQ_ERR_ARG;
    }
    if (o->has_arg == no_argument) {
        if (!strcmp(value, "false") || !strcmp(value, "no") || !strcmp(value, "off")) return PTQ_OK;
        if (strcmp(value, "true") && strcmp(value, "yes") && strcmp(value, "on")) {
            ptq_error("%s: '%s' is a flag: true or false, not '%s'", what, key, value);
            return PTQ_ERR_ARG;
        }
        value = NULL;
    }
    size_t n = strlen(key) + (value ? strlen(value) + 1 : 0) + 3;
    char *arg = malloc(n);
    if (!arg || keep(arg)) {
        ptq_error("out of memory reading the config");
        return PTQ_ERR_NOMEM;
    }
    snprintf(arg, n, value ? "--%s=%s" : "--%s", key, value ? value : "");
    return push(e, arg);
}

int cli_config_expand(const char *cmd, const struct option *opts, int *argc, char ***argv)
{
    int n = *argc, found = 0;
    char **in = *argv;
    for (int i = 1; i < n && strcmp(in[i], "--") != 0; i++)
        if (!strcmp(in[i], "--config") || !strncmp(in[i], "--config=", 9)) found = 1;
    if (!found) return 0;
    expansion e = {.cmd = cmd, .opts = opts};
    if (push(&e, in[0]) != PTQ_OK) return cli_fail(PTQ_ERR_NOMEM);
    int rest = 1;
    for (int i = 1; i < n && strcmp(in[i], "--") != 0; i++) {
        const char *path = NULL;
        if (!strcmp(in[i], "--config")) {
            if (i + 1 >= n) return cli_usage_error(cmd, "option '--config' needs a value");
            path = in[++i];
        } else if (!strncmp(in[i], "--config=", 9)) {
            path = in[i] + 9;
        }
        if (!path) continue;
        char kind[64];
        snprintf(kind, sizeof kind, "a %s config", cmd);
        ptq_status st = io_yaml_map_load(path, kind, on_pair, &e);
        if (st != PTQ_OK) return cli_fail(st);
    }
    for (; rest < n; rest++) { /* the command line, without its --config options */
        if (!strcmp(in[rest], "--")) break;
        if (!strcmp(in[rest], "--config")) {
            rest++;
            continue;
        }
        if (!strncmp(in[rest], "--config=", 9)) continue;
        if (push(&e, in[rest]) != PTQ_OK) return cli_fail(PTQ_ERR_NOMEM);
    }
    for (; rest < n; rest++)
        if (push(&e, in[rest]) != PTQ_OK) return cli_fail(PTQ_ERR_NOMEM);
    *argc = e.argc;
    *argv = e.argv;
    return 0;
}

int cli_takes_config(const char *cmd)
{
    return !strcmp(cmd, "calibrate") || !strcmp(cmd, "quantize") || !strcmp(cmd, "compare");
}
