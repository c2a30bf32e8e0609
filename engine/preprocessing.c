/* preprocessing.c: see preprocessing.h. */
#include "engine/preprocessing.h"

#include <stdio.h>
#include <string.h>

#include "io/preset.h"
#include "preprocess/dataset.h"

static _Thread_local char pp_origin[512] = "the default preprocessing";
static _Thread_local int pp_given; /* ENG_PP_* bits the last call's overrides set */
static _Thread_local int pp_said;  /* the default's line was said since the last call */
/* The last call's overrides, kept so that a preset the model names (Ultralytics metadata) can be
 * loaded under them later (eng_preprocessing_again). */
enum { PP_KEEP = 32 };
static _Thread_local char pp_keys[PP_KEEP][32], pp_vals[PP_KEEP][256];
static _Thread_local int pp_n;
static _Thread_local char pp_note[320]; /* a choice eng_preprocessing made that is said later */

static int given_bit(const char *key)
{
    if (!strcmp(key, "size") || !strcmp(key, "width") || !strcmp(key, "height")) return ENG_PP_SIZE;
    if (!strcmp(key, "layout")) return ENG_PP_LAYOUT;
    if (!strcmp(key, "mode")) return ENG_PP_MODE;
    if (!strcmp(key, "shorter")) return ENG_PP_SHORTER;
    if (!strcmp(key, "scale") || !strcmp(key, "mean") || !strcmp(key, "std")) return ENG_PP_NORM;
    if (!strcmp(key, "channel-order") || !strcmp(key, "channel_order")) return ENG_PP_ORDER;
    return 0;
}

const char *eng_preprocessing_origin(void)
{
    return pp_origin;
}

ptq_status eng_preprocessing(const char *preset, const char *const *keys, const char *const *vals, int n, pp_config *cfg)
{
    ptq_status st = PTQ_OK;
    size_t k = (size_t)snprintf(pp_origin, sizeof pp_origin, "%s%s", preset ? "preset " : "the default preprocessing",
                                preset ? preset : "");
    pp_given = preset ? ENG_PP_PRESET : 0;
    pp_said = 0;
    pp_n = 0;
    for (int i = 0; i < n; i++) {
        pp_given |= given_bit(keys[i]);
        if (pp_n < PP_KEEP && strlen(keys[i]) < sizeof pp_keys[0] && strlen(vals[i]) < sizeof pp_vals[0]) {
            strcpy(pp_keys[pp_n], keys[i]);
            strcpy(pp_vals[pp_n++], vals[i]);
        }
    }
    for (int i = 0; i < n && k < sizeof pp_origin; i++)
        k += (size_t)snprintf(pp_origin + k, sizeof pp_origin - k, "%s--%s %s", i ? " " : " with ", keys[i], vals[i]);
    if (preset) {
        char path[4096];
        if ((st = io_preset_find(preset, path, sizeof path)) != PTQ_OK || (st = io_preset_load(path, cfg)) != PTQ_OK)
            return st;
    }
    int ow = cfg->width, oh = cfg->height, os = cfg->shorter;
    pp_note[0] = 0;
    for (int i = 0; i < n; i++) {
        char key[64], what[96];
        snprintf(key, sizeof key, "%s", keys[i]);
        for (char *q = key; *q; q++)
            if (*q == '-') *q = '_';
        snprintf(what, sizeof what, "--%s", keys[i]);
        if ((st = io_preset_set(cfg, key, vals[i], what)) != PTQ_OK) return st;
    }
    if (preset && cfg->mode == PP_MODE_SHORTER_CROP && (pp_given & ENG_PP_SIZE) && !(pp_given & (ENG_PP_MODE | ENG_PP_SHORTER)) &&
        (cfg->width != ow || cfg->height != oh)) {
        /* --size alone: the crop keeps its ratio to the shorter side (else a larger crop is padded black) */
        int side = cfg->width < cfg->height ? cfg->width : cfg->height, oside = ow < oh ? ow : oh;
        cfg->shorter = (int)((double)side * os / oside + 0.5);
        snprintf(pp_note, sizeof pp_note, "--size %dx%d with the crop of preset %s: shorter side %d (scaled from %d for "
                 "%dx%d) so the crop is not padded; give --shorter or --mode to choose otherwise",
                 cfg->width, cfg->height, preset, cfg->shorter, os, ow, oh);
    }
    if (cfg->gray) { /* one channel: one mean and std (a preset's three averaged) */
        float m = (cfg->mean[0] + cfg->mean[1] + cfg->mean[2]) / 3.0f, s = (cfg->std[0] + cfg->std[1] + cfg->std[2]) / 3.0f;
        for (int c = 0; c < 3; c++) {
            cfg->mean[c] = m;
            cfg->std[c] = s;
        }
    }
    return pp_validate(cfg);
}

int eng_preprocessing_free(int what)
{
    if (what == ENG_PP_SIZE || what == ENG_PP_LAYOUT) return !(pp_given & (what | ENG_PP_PRESET));
    return !(pp_given & what);
}

int eng_preprocessing_given(int what)
{
    return (pp_given & what) != 0;
}

ptq_status eng_preprocessing_again(const char *preset, pp_config *cfg)
{
    const char *keys[PP_KEEP], *vals[PP_KEEP];
    int n = pp_n, said = pp_said;
    for (int i = 0; i < n; i++) {
        keys[i] = pp_keys[i];
        vals[i] = pp_vals[i];
    }
    *cfg = pp_defaults();
    ptq_status st = eng_preprocessing(preset, keys, vals, n, cfg);
    pp_said = said;
    return st;
}

void eng_preprocessing_say(const pp_log *log)
{
    if (pp_note[0]) pp_log_message(log, PP_LOG_WARNING, "%s", pp_note);
    pp_note[0] = 0;
}

int eng_preprocessing_say_once(void)
{
    int first = !pp_said;
    pp_said = 1;
    return first;
}

void eng_preprocessing_text(const pp_config *c, char *buf, size_t cap)
{
    char size[64], norm[160], order[16];
    if (c->mode == PP_MODE_SHORTER_CROP)
        snprintf(size, sizeof size, "shorter side %d, centre crop %dx%d", c->shorter, c->width, c->height);
    else snprintf(size, sizeof size, "%s to %dx%d", pp_mode_name(c->mode), c->width, c->height);
    int nc = pp_channels(c);
    snprintf(order, sizeof order, "%s", c->gray == PP_GRAY_PIL ? "GRAY_PIL" : c->gray == PP_GRAY_CV ? "GRAY_CV" : c->bgr ? "BGR" : "RGB");
    int id_mean = 1, id_std = 1;
    for (int k = 0; k < nc; k++) {
        id_mean &= c->mean[k] == 0.0f;
        id_std &= c->std[k] == 1.0f;
    }
    size_t k = (size_t)snprintf(norm, sizeof norm, "%s", c->scale == 1.0f ? "x" : c->scale == 1.0f / 255.0f ? "x/255" : "");
    if (!norm[0]) k = (size_t)snprintf(norm, sizeof norm, "x*%g", (double)c->scale);
    if (id_mean && id_std) snprintf(norm + k, sizeof norm - k, ", no mean/std");
    else if (nc == 1) snprintf(norm + k, sizeof norm - k, ", mean %g, std %g", (double)c->mean[0], (double)c->std[0]);
    else
        snprintf(norm + k, sizeof norm - k, ", mean %g,%g,%g, std %g,%g,%g", (double)c->mean[0], (double)c->mean[1],
                 (double)c->mean[2], (double)c->std[0], (double)c->std[1], (double)c->std[2]);
    snprintf(buf, cap, "%s (%s), %s, %s, %s", size, pp_interp_name(c->interp), order, norm, c->nhwc ? "NHWC" : "NCHW");
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
