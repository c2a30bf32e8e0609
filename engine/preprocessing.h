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

#include "preprocess/preprocess.h"
#include "runtime/status.h"

/* The preset (name or file, may be NULL) loaded over *cfg, then each "key value" override
 * ('-' in keys read as '_'), then validated. */
ptq_status eng_preprocessing(const char *preset, const char *const *keys, const char *const *vals, int n, pp_config *cfg);

/* Where the calling thread's last eng_preprocessing() came from, for messages: "preset
 * paddleocr-cls with --mean 0,0,0", "preset paddleocr-det", "the default preprocessing". */
const char *eng_preprocessing_origin(void);

/* 1 when the calling thread's last eng_preprocessing() left that part to the model: no preset
 * and no --size/--width/--height (ENG_PP_SIZE) or no --layout (ENG_PP_LAYOUT). */
enum { ENG_PP_SIZE = 1, ENG_PP_LAYOUT = 2 };
int eng_preprocessing_free(int what);
/* Makes the origin text of the default preprocessing say what it is ("the default
 * preprocessing (stretch to 224x224, RGB, x/255, NCHW; name a --preset)"). */
void eng_preprocessing_describe_default(const pp_config *cfg);

#endif
