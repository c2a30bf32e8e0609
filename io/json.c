/* json.c: see json.h. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "io/file.h"

ptq_status io_json_write_atomic(const char *path, const cJSON *root)
{
    ptq_status st = PTQ_OK;
    char *text = cJSON_Print(root);
    CHECK_ALLOC(text);
    size_t len = strlen(text);
    text[len] = '\n'; /* replace the terminator: write text + newline */
    TRY(io_write_atomic(path, text, len + 1));
done:
    free(text);
    return st;
}
