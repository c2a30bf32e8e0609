/* yaml.h: flat YAML mappings (libyaml), the form of ptq's text files: presets
 * (configs/NAME.yaml) and command configs (`ptq quantize --config q.yaml`).
 *
 *   method: percentile:99.99          # key: scalar
 *   exclude-nodes: [p2o.Conv.0, "p2o.Conv.4*"]   # key: list (flow or block style)
 *
 *   TRY(io_yaml_map_load("q.yaml", "a quantize config", on_pair, &state));
 *
 * fn is called once per key, in file order, with the value as a string; a list's items
 * arrive joined by commas. what ("FILE:LINE") names the place for messages. Nested
 * mappings, lists of lists and a top level that is not a mapping are errors naming the
 * file and line. A non-zero status from fn stops the read and is returned. */
#ifndef PTQ_IO_YAML_H
#define PTQ_IO_YAML_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

typedef ptq_status (*io_yaml_pair_fn)(const char *key, const char *value, const char *what, void *user);

/* kind names the file's role in messages ("a preset"). */
ptq_status io_yaml_map_load(const char *path, const char *kind, io_yaml_pair_fn fn, void *user);
/* The same from memory (len bytes); what names the source in messages, as a path would. */
ptq_status io_yaml_map_parse(const uint8_t *buf, size_t len, const char *what, const char *kind, io_yaml_pair_fn fn,
                             void *user);

#endif
