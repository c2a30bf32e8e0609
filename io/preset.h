/* preset.h: preprocessing presets, one readable YAML file each (configs/NAME.yaml),
 * parsed with libyaml. Every key is optional and overrides pp_defaults():
 *
 *   mode: letterbox            # stretch | letterbox | shorter-crop | height-pad
 *   width: 640
 *   height: 640
 *   resize: linear             # linear | pil-bilinear | nearest | area
 *   shorter: 256               # shorter-crop
 *   pad_value: 114             # letterbox
 *   pad_float: 0.0             # height-pad
 *   scaleup: true              # letterbox
 *   channel_order: RGB         # RGB | BGR
 *   scale: 0.00392156862745098
 *   mean: [0.485, 0.456, 0.406]
 *   std: [0.229, 0.224, 0.225]
 *   layout: NCHW               # NCHW | NHWC
 *
 *   pp_config c = pp_defaults();
 *   TRY(io_preset_load("configs/yolo-letterbox-640.yaml", &c));
 * Unknown keys and bad values are errors naming the file, line and key. */
#ifndef PTQ_IO_PRESET_H
#define PTQ_IO_PRESET_H

#include <stddef.h>
#include <stdint.h>

#include "preprocess/preprocess.h"

ptq_status io_preset_load(const char *path, pp_config *c);
/* The same from memory (len bytes of YAML); what names the source in messages. */
ptq_status io_preset_parse(const uint8_t *buf, size_t len, const char *what, pp_config *c);
/* Applies one key: value (as a string; lists "a,b,c"); what names the source for messages.
 * Used by the file parser and by command-line overrides. */
ptq_status io_preset_set(pp_config *c, const char *key, const char *value, const char *what);
/* Finds a preset by name: NAME.yaml in $PTQ_CONFIGS, beside the binary (../configs), ./configs;
 * a value with '/' or ending in .yaml is a path. Writes the path into buf. */
ptq_status io_preset_find(const char *name, char *buf, size_t cap);
/* The names of the presets found where io_preset_find looks (a name found twice counts once,
 * the first folder's), sorted; *out and each name are malloc'd. Returns their count, or -1
 * (message set, *out NULL) when out of memory. */
int io_preset_names(char ***out);
/* One line describing c, for stats files and summaries. */
void io_preset_describe(const pp_config *c, char *buf, size_t cap);

#endif
