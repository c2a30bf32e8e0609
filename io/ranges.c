#include "ranges.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "io/json.h"
#include "runtime/graph.h"

static int cmp_range(const void *a, const void *b)
{
    return strcmp(((const io_range *)a)->name, ((const io_range *)b)->name);
}

ptq_status io_ranges_write_json(const char *path, const char *method, const io_range *ranges, int n)
{
    ptq_status st = PTQ_OK;
    io_range *sorted = malloc(sizeof *sorted * (size_t)(n ? n : 1));
    cJSON *root = cJSON_CreateObject(), *tensors = NULL;
    CHECK_ALLOC(sorted);
    CHECK_ALLOC(root);
    if (n) memcpy(sorted, ranges, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_range);
    cJSON_AddStringToObject(root, "format", "ptq-ranges");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "method", method ? method : "");
    tensors = cJSON_AddObjectToObject(root, "tensors");
    CHECK_ALLOC(tensors);
    for (int i = 0; i < n; i++) {
        cJSON *t = cJSON_AddObjectToObject(tensors, sorted[i].name);
        CHECK_ALLOC(t);
        /* %.9g keeps float32 exact; cJSON prints doubles with 17 digits otherwise */
        char buf[64];
        snprintf(buf, sizeof buf, "%.9g", (double)sorted[i].amax);
        cJSON_AddRawToObject(t, "amax", buf);
        snprintf(buf, sizeof buf, "%.9g", (double)(sorted[i].amax / 127.0f));
        cJSON_AddRawToObject(t, "scale", buf);
    }
    TRY(io_json_write_atomic(path, root));
done:
    free(sorted);
    cJSON_Delete(root);
    return st;
}

ptq_status io_precision_config_write(const char *path, const char *const *names, const float *scales, int n,
                                     const char *const *fp16_nodes, int n_fp16)
{
    ptq_status st = PTQ_OK;
    cJSON *root = cJSON_CreateObject(), *sc = NULL, *fp16 = NULL;
    CHECK_ALLOC(root);
    CHECK_ALLOC(sc = cJSON_AddObjectToObject(root, "int8_tensor_scales"));
    for (int i = 0; i < n; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.9g", (double)scales[i]);
        CHECK_ALLOC(cJSON_AddRawToObject(sc, names[i], buf));
    }
    CHECK_ALLOC(fp16 = cJSON_AddArrayToObject(root, "fp16_nodes"));
    for (int i = 0; i < n_fp16; i++) {
        cJSON *item = cJSON_CreateString(fp16_nodes[i]);
        CHECK_ALLOC(item);
        cJSON_AddItemToArray(fp16, item);
    }
    TRY(io_json_write_atomic(path, root));
done:
    cJSON_Delete(root);
    return st;
}

ptq_status io_ranges_read_json(const char *path, io_range **out, int *n)
{
    ptq_status st = PTQ_OK;
    uint8_t *buf = NULL;
    size_t len;
    cJSON *root = NULL;
    io_range *r = NULL;
    int count = 0;
    *out = NULL;
    *n = 0;
    TRY(io_read_file(path, &buf, &len, (size_t)1 << 30));
    root = cJSON_ParseWithLength((const char *)buf, len);
    if (!root) FAIL(PTQ_ERR_FORMAT, "%s: not valid JSON", path);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "ptq-ranges") != 0)
        FAIL(PTQ_ERR_FORMAT, "%s: not a ptq ranges file (no \"format\": \"ptq-ranges\")", path);
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsObject(tensors)) FAIL(PTQ_ERR_FORMAT, "%s: no \"tensors\" object", path);
    int total = cJSON_GetArraySize(tensors);
    r = calloc((size_t)total + 1, sizeof *r);
    CHECK_ALLOC(r);
    const cJSON *t;
    cJSON_ArrayForEach(t, tensors)
    {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(t, "amax");
        if (!cJSON_IsNumber(a) || !isfinite(a->valuedouble) || a->valuedouble <= 0)
            FAIL(PTQ_ERR_FORMAT, "%s: tensor '%s': amax missing, not finite or not positive", path, t->string);
        r[count].name = ptq_strdup(t->string);
        CHECK_ALLOC(r[count].name);
        r[count].amax = (float)a->valuedouble;
        count++;
    }
    *out = r;
    *n = count;
    r = NULL;
done:
    io_ranges_free(r, count);
    cJSON_Delete(root);
    free(buf);
    return st;
}

void io_ranges_free(io_range *r, int n)
{
    if (!r) return;
    for (int i = 0; i < n; i++) free(r[i].name);
    free(r);
}
