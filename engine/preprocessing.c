/* preprocessing.c: see preprocessing.h. */
#include "engine/preprocessing.h"

#include <stdio.h>

#include "io/preset.h"

static _Thread_local char pp_origin[512] = "the default preprocessing";

const char *eng_preprocessing_origin(void)
{
    return pp_origin;
}

ptq_status eng_preprocessing(const char *preset, const char *const *keys, const char *const *vals, int n, pp_config *cfg)
{
    ptq_status st = PTQ_OK;
    size_t k = (size_t)snprintf(pp_origin, sizeof pp_origin, "%s%s", preset ? "preset " : "the default preprocessing",
                                preset ? preset : "");
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
