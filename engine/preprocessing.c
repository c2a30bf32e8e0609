/* preprocessing.c: see preprocessing.h. */
#include "engine/preprocessing.h"

#include <stdio.h>
#include <string.h>

#include "io/preset.h"

static _Thread_local char pp_origin[512] = "the default preprocessing";
static _Thread_local int pp_free_size = 1, pp_free_layout = 1;

const char *eng_preprocessing_origin(void)
{
    return pp_origin;
}

ptq_status eng_preprocessing(const char *preset, const char *const *keys, const char *const *vals, int n, pp_config *cfg)
{
    ptq_status st = PTQ_OK;
    size_t k = (size_t)snprintf(pp_origin, sizeof pp_origin, "%s%s", preset ? "preset " : "the default preprocessing",
                                preset ? preset : "");
    pp_free_size = pp_free_layout = !preset;
    for (int i = 0; i < n; i++) {
        if (!strcmp(keys[i], "size") || !strcmp(keys[i], "width") || !strcmp(keys[i], "height")) pp_free_size = 0;
        if (!strcmp(keys[i], "layout")) pp_free_layout = 0;
    }
    for (int i = 0; i < n && k < sizeof pp_origin; i++)
        k += (size_t)snprintf(pp_origin + k, sizeof pp_origin - k, "%s--%s %s", i ? " " : " with ", keys[i], vals[i]);
    if (preset) {
        char path[4096];
        if ((st = io_preset_find(preset, path, sizeof path)) != PTQ_OK || (st = io_preset_load(path, cfg)) != PTQ_OK)
            return st;
    }
    for (int i = 0; i < n; i++) {
        char key[64], what[96];
        snprintf(key, sizeof key, "%s", keys[i]);
        for (char *q = key; *q; q++)
            if (*q == '-') *q = '_';
        snprintf(what, sizeof what, "--%s", keys[i]);
        if ((st = io_preset_set(cfg, key, vals[i], what)) != PTQ_OK) return st;
    }
    return pp_validate(cfg);
}

int eng_preprocessing_free(int what)
{
    return what == ENG_PP_SIZE ? pp_free_size : what == ENG_PP_LAYOUT ? pp_free_layout : 0;
}

void eng_preprocessing_describe_default(const pp_config *cfg)
{
    if (strncmp(pp_origin, "the default preprocessing", 25) != 0 || strstr(pp_origin, "(stretch")) return;
    char rest[256], head[128];
    snprintf(rest, sizeof rest, "%.255s", pp_origin + 25); /* " with --mean ...", cut to fit */
    snprintf(head, sizeof head, "the default preprocessing (stretch to %dx%d, %s, x/255, %s; name a --preset)",
             cfg->width, cfg->height, cfg->bgr ? "BGR" : "RGB", cfg->nhwc ? "NHWC" : "NCHW");
    snprintf(pp_origin, sizeof pp_origin, "%.127s%.255s", head, rest);
}
