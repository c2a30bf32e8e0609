#include "preset.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "io/yaml.h"

static int parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (*end == ' ') end++;
    if (errno || end == s || *end || !isfinite(v)) return -1;
    *out = (float)v;
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on") || !strcmp(s, "1")) *out = 1;
    else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off") || !strcmp(s, "0")) *out = 0;
    else return -1;
    return 0;
}

/* "a,b,c" (or one value for all three) */
static int parse_triple(const char *s, float *v)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *tok = strtok(buf, ", []"); tok; tok = strtok(NULL, ", []")) {
        if (n == 3 || parse_float(tok, &v[n]) != 0) return -1;
        n++;
    }
    if (n == 1) v[1] = v[2] = v[0];
    else if (n != 3) return -1;
    return 0;
}

ptq_status io_preset_set(pp_config *c, const char *key, const char *value, const char *what)
{
    int ok = 0;
    if (!strcmp(key, "mode")) ok = pp_mode_parse(value, &c->mode) == 0;
    else if (!strcmp(key, "resize") || !strcmp(key, "interpolation")) ok = pp_interp_parse(value, &c->interp) == 0;
    else if (!strcmp(key, "width")) ok = parse_int(value, 1, 16384, &c->width) == 0;
    else if (!strcmp(key, "height")) ok = parse_int(value, 1, 16384, &c->height) == 0;
    else if (!strcmp(key, "size")) {
        int w, h;
        ok = sscanf(value, "%dx%d", &w, &h) == 2 && w > 0 && h > 0 && w <= 16384 && h <= 16384;
        if (ok) {
            c->width = w;
            c->height = h;
        }
    } else if (!strcmp(key, "shorter")) ok = parse_int(value, 1, 16384, &c->shorter) == 0;
    else if (!strcmp(key, "pad_value")) ok = parse_int(value, 0, 255, &c->pad_value) == 0;
    else if (!strcmp(key, "pad_float")) ok = parse_float(value, &c->pad_float) == 0;
    else if (!strcmp(key, "stride")) ok = parse_int(value, 0, 1024, &c->stride) == 0;
    else if (!strcmp(key, "scaleup")) ok = parse_bool(value, &c->scaleup) == 0;
    else if (!strcmp(key, "channel_order")) {
        /* GRAY: PIL's luma after an RGB order, OpenCV's after a BGR one (the preset's family) */
        int gray = !strcmp(value, "GRAY_PIL") ? PP_GRAY_PIL : !strcmp(value, "GRAY_CV") ? PP_GRAY_CV
                   : !strcmp(value, "GRAY")   ? (c->bgr ? PP_GRAY_CV : PP_GRAY_PIL) : 0;
        ok = gray || !strcmp(value, "RGB") || !strcmp(value, "BGR");
        if (ok && !gray) c->bgr = !strcmp(value, "BGR");
        if (ok) c->gray = gray;
    } else if (!strcmp(key, "layout")) {
        ok = !strcmp(value, "NCHW") || !strcmp(value, "NHWC");
        c->nhwc = !strcmp(value, "NHWC");
    } else if (!strcmp(key, "max_width")) ok = parse_int(value, 0, 16384, &c->max_width) == 0;
    else if (!strcmp(key, "limit_side")) ok = parse_int(value, 1, 16384, &c->limit_side) == 0;
    else if (!strcmp(key, "multiple")) ok = parse_int(value, 1, 1024, &c->multiple) == 0;
    else if (!strcmp(key, "max_side")) ok = parse_int(value, 1, 16384, &c->max_side) == 0;
    else if (!strcmp(key, "limit_type")) {
        ok = !strcmp(value, "max") || !strcmp(value, "min");
        c->limit_min = !strcmp(value, "min");
    } else if (!strcmp(key, "scale")) ok = parse_float(value, &c->scale) == 0;
    else if (!strcmp(key, "mean")) ok = parse_triple(value, c->mean) == 0;
    else if (!strcmp(key, "std")) ok = parse_triple(value, c->std) == 0;
    else {
        ptq_error("%s: unknown key '%s'", what, key);
        return PTQ_ERR_ARG;
    }
    if (!ok) {
        ptq_error("%s: bad value '%s' for '%s'", what, value, key);
        return PTQ_ERR_ARG;
    }
    return PTQ_OK;
}

static ptq_status preset_pair(const char *key, const char *value, const char *what, void *user)
{
    return io_preset_set(user, key, value, what);
}

ptq_status io_preset_load(const char *path, pp_config *c)
{
    ptq_status st = io_yaml_map_load(path, "a preset", preset_pair, c);
    return st != PTQ_OK ? st : pp_validate(c);
}

ptq_status io_preset_parse(const uint8_t *buf, size_t len, const char *what, pp_config *c)
{
    ptq_status st = io_yaml_map_parse(buf, len, what, "a preset", preset_pair, c);
    return st != PTQ_OK ? st : pp_validate(c);
}

/* The folders presets are looked up in, in order; returns their count. */
static int preset_dirs(char dirs[5][4200])
{
    char exe[4096];
    int nd = 0;
    const char *env = getenv("PTQ_CONFIGS");
    if (env) snprintf(dirs[nd++], sizeof dirs[0], "%s", env);
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(dirs[nd++], sizeof dirs[0], "%s/../configs", exe);
        snprintf(dirs[nd++], sizeof dirs[0], "%s/../share/ptq/configs", exe); /* make install */
    }
    static const char anchor = 0; /* an address inside this library */
    Dl_info so; /* the installed library: PREFIX/lib/libptq.so -> PREFIX/share/ptq/configs */
    if (dladdr(&anchor, &so) && so.dli_fname && strchr(so.dli_fname, '/')) {
        snprintf(exe, sizeof exe, "%s", so.dli_fname);
        *strrchr(exe, '/') = 0;
        snprintf(dirs[nd++], sizeof dirs[0], "%s/../share/ptq/configs", exe);
    }
    snprintf(dirs[nd++], sizeof dirs[0], "configs");
    return nd;
}

ptq_status io_preset_find(const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 5 && !strcmp(name + n - 5, ".yaml"))) {
        snprintf(buf, cap, "%s", name);
        return PTQ_OK;
    }
    char dirs[5][4200];
    int nd = preset_dirs(dirs);
    for (int i = 0; i < nd; i++) {
        snprintf(buf, cap, "%s/%s.yaml", dirs[i], name);
        if (access(buf, R_OK) == 0) return PTQ_OK;
    }
    ptq_error("preset '%s' not found (looked for %s.yaml in $PTQ_CONFIGS, beside the binary and in ./configs)", name, name);
    return PTQ_ERR_ARG;
}

void io_preset_describe(const pp_config *c, char *buf, size_t cap)
{
    /* the keys of dims that follow the image come last, and only when used, so that the text
     * of a fixed-size preset (kept in statistics files) is what it always was */
    char dyn[160] = "";
    if (c->mode == PP_MODE_HEIGHT_PAD && c->max_width > 0) snprintf(dyn, sizeof dyn, " max_width=%d", c->max_width);
    if (c->gray) snprintf(dyn, sizeof dyn, " gray=%s", c->gray == PP_GRAY_CV ? "cv" : "pil");
    if (c->mode == PP_MODE_LIMIT_SIDE)
        snprintf(dyn + strlen(dyn), sizeof dyn - strlen(dyn), " limit_side=%d limit_type=%s multiple=%d max_side=%d", c->limit_side,
                 c->limit_min ? "min" : "max", c->multiple, c->max_side);
    int k = snprintf(buf, cap,
             "mode=%s size=%dx%d resize=%s shorter=%d pad=%d pad_float=%g scaleup=%d order=%s scale=%.9g "
             "mean=%.9g,%.9g,%.9g std=%.9g,%.9g,%.9g layout=%s",
             pp_mode_name(c->mode), c->width, c->height, pp_interp_name(c->interp), c->shorter, c->pad_value,
             (double)c->pad_float, c->scaleup, c->bgr ? "BGR" : "RGB", (double)c->scale, (double)c->mean[0],
             (double)c->mean[1], (double)c->mean[2], (double)c->std[0], (double)c->std[1], (double)c->std[2],
             c->nhwc ? "NHWC" : "NCHW");
    if (k >= 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, "%s", dyn);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int io_preset_names(char ***out)
{
    char dirs[5][4200];
    int nd = preset_dirs(dirs), n = 0, cap = 0;
    char **names = NULL;
    for (int i = 0; i < nd; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d) continue;
        for (struct dirent *e; (e = readdir(d));) {
            size_t len = strlen(e->d_name);
            if (len <= 5 || strcmp(e->d_name + len - 5, ".yaml") != 0) continue;
            int dup = 0;
            for (int k = 0; k < n && !dup; k++) dup = strncmp(names[k], e->d_name, len - 5) == 0 && !names[k][len - 5];
            if (dup) continue;
            char **nn = n < cap ? names : realloc(names, sizeof *nn * (size_t)(cap = cap ? 2 * cap : 16));
            if (!nn || !(nn[n] = strndup(e->d_name, len - 5))) { /* never a shorter list */
                if (nn) names = nn;
                for (int k = 0; k < n; k++) free(names[k]);
                free(names);
                closedir(d);
                *out = NULL;
                ptq_error("out of memory listing the presets");
                return -1;
            }
            names = nn;
            n++;
        }
        closedir(d);
    }
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_name);
    *out = names;
    return n;
}
