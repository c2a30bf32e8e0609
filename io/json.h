/* json.h: io/'s own helpers around cJSON (io/ is the only module that includes cJSON).
 *
 *   TRY(io_json_write_atomic("r.json", root));   // pretty-printed, newline-terminated, renamed into place */
#ifndef PTQ_IO_JSON_H
#define PTQ_IO_JSON_H

#include <cjson/cJSON.h>

#include "runtime/status.h"

/* Writes root as indented JSON plus a final newline, to a temporary file renamed to path. */
ptq_status io_json_write_atomic(const char *path, const cJSON *root);

#endif
