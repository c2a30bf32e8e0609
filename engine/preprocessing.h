/* preprocessing.h: a command's preprocessing from a preset name (or file) and "key value"
 * overrides, as every image command and the public API take it.
 *
 *   pp_config cfg = pp_defaults();
 *   const char *keys[] = {"mean"}, *vals[] = {"0,0,0"};
 *   TRY(eng_preprocessing("paddleocr-cls", keys, vals, 1, &cfg));
 *
 * The origin text of the last call (per thread) names it in messages about shapes. */
#ifndef PTQ_ENGINE_PREPROCESSING_H
#define PTQ_ENGINE_PREPROCESSING_H

#include "preprocess/dataset.h"
#include "preprocess/preprocess.h"
#include "runtime/status.h"

/* The preset (name or file, may be NULL) loaded over *cfg, then each "key value" override
 * ('-' in keys read as '_'), then validated. */
ptq_status eng_preprocessing(const char *preset, const char *const *keys, const char *const *vals, int n, pp_config *cfg);

/* Where the calling thread's last eng_preprocessing() came from, for messages: "preset
 * paddleocr-cls with --mean 0,0,0", "preset paddleocr-det", "the default preprocessing". */
const char *eng_preprocessing_origin(void);

/* 1 when the calling thread's last eng_preprocessing() left that part to the model: no preset
 * and no --size/--width/--height (ENG_PP_SIZE) or no --layout (ENG_PP_LAYOUT); no --mode
 * (ENG_PP_MODE), --shorter (ENG_PP_SHORTER), --scale/--mean/--std (ENG_PP_NORM),
 * --channel-order (ENG_PP_ORDER); no --preset (ENG_PP_PRESET). */
enum { ENG_PP_SIZE = 1, ENG_PP_LAYOUT = 2, ENG_PP_MODE = 4, ENG_PP_SHORTER = 8, ENG_PP_NORM = 16, ENG_PP_ORDER = 32,
       ENG_PP_PRESET = 64 };
int eng_preprocessing_free(int what);
/* 1 when the last call named that part itself (an override, or ENG_PP_PRESET: a preset). */
int eng_preprocessing_given(int what);
/* *cfg = preset (one the model names) under the last call's overrides, as eng_preprocessing. */
ptq_status eng_preprocessing_again(const char *preset, pp_config *cfg);
/* Says (once) what the last eng_preprocessing() chose itself: --size alone with a crop preset
 * scales the shorter side with it (round(size * 256/224) for imagenet). */
void eng_preprocessing_say(const pp_log *log);
/* 1 the first time it is called after an eng_preprocessing() of this thread: a line about the
 * preprocessing is said once per command, not once per pass over the images. */
int eng_preprocessing_say_once(void);
/* "shorter side 256, centre crop 224x224 (pil-bilinear), RGB, x/255, mean ..., std ..., NCHW". */
void eng_preprocessing_text(const pp_config *c, char *buf, size_t cap);
/* Makes the origin text of the default preprocessing say what it is ("the default
 * preprocessing (stretch to 224x224, RGB, x/255, NCHW; name a --preset)"). */
void eng_preprocessing_describe_default(const pp_config *cfg);

#endif
