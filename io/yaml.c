/* yaml.c: flat YAML mappings through libyaml's event parser. */
#include "yaml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_LIST_CHARS ((size_t)1 << 20)

/* Reads the mapping from a parser whose input is set; path names the source in messages. */
static ptq_status map_read(yaml_parser_t *parser, const char *path, const char *kind, io_yaml_pair_fn fn, void *user)
{
    ptq_status st = PTQ_OK;
    yaml_event_t ev;
    int depth = 0, in_seq = 0, have_event = 0;
    char key[128] = "", what[1100], *list = NULL;
    size_t list_len = 0, list_cap = 0;
    for (;;) {
        if (!yaml_parser_parse(parser, &ev)) {
            if (parser->error == YAML_MEMORY_ERROR) FAIL(PTQ_ERR_NOMEM, "%s: out of memory parsing the YAML", path);
            FAIL(PTQ_ERR_FORMAT, "%s:%zu: %s", path, parser->problem_mark.line + 1, parser->problem ? parser->problem : "bad YAML");
        }
        have_event = 1;
        snprintf(what, sizeof what, "%s:%zu", path, ev.start_mark.line + 1);
        if (ev.type == YAML_STREAM_END_EVENT) break;
        switch (ev.type) {
        case YAML_MAPPING_START_EVENT:
            if (++depth > 1 || in_seq) FAIL(PTQ_ERR_FORMAT, "%s: nested mappings are not part of %s", what, kind);
            break;
        case YAML_MAPPING_END_EVENT: depth--; break;
        case YAML_SEQUENCE_START_EVENT:
            if (depth != 1 || !key[0] || in_seq) FAIL(PTQ_ERR_FORMAT, "%s: unexpected list in %s", what, kind);
            in_seq = 1;
            list_len = 0;
            break;
        case YAML_SEQUENCE_END_EVENT:
            in_seq = 0;
            TRY(fn(key, list ? list : "", what, user));
            if (list) list[0] = 0;
            list_len = 0;
            key[0] = 0;
            break;
        case YAML_SCALAR_EVENT: {
            const char *v = (const char *)ev.data.scalar.value;
            size_t n = ev.data.scalar.length;
            if (depth != 1) FAIL(PTQ_ERR_FORMAT, "%s: %s is a mapping of keys to values", what, kind);
            if (in_seq) {
                size_t need = list_len + n + 2;
                if (need > MAX_LIST_CHARS) FAIL(PTQ_ERR_FORMAT, "%s: list of '%s' longer than %zu characters", what, key, MAX_LIST_CHARS);
                if (need > list_cap) {
                    size_t cap = need * 2;
                    char *p = realloc(list, cap);
                    CHECK_ALLOC(p);
                    list = p;
                    list_cap = cap;
                }
                if (list_len) list[list_len++] = ',';
                memcpy(list + list_len, v, n);
                list_len += n;
                list[list_len] = 0;
            } else if (!key[0]) {
                if (n == 0 || n >= sizeof key) FAIL(PTQ_ERR_FORMAT, "%s: empty or too long key", what);
                memcpy(key, v, n + 1);
            } else {
                TRY(fn(key, v, what, user));
                key[0] = 0;
            }
            break;
        }
        default: break;
        }
        yaml_event_delete(&ev);
        have_event = 0;
    }
    if (depth == 0 && key[0]) FAIL(PTQ_ERR_FORMAT, "%s: key '%s' has no value", path, key);
done:
    if (have_event) yaml_event_delete(&ev);
    free(list);
    return st;
}

ptq_status io_yaml_map_load(const char *path, const char *kind, io_yaml_pair_fn fn, void *user)
{
    ptq_status st = PTQ_OK;
    FILE *fp = fopen(path, "rb");
    yaml_parser_t parser;
    int parser_ok = 0;
    if (!fp) FAIL(PTQ_ERR_IO, "%s: %s", path, strerror(errno));
    if (!yaml_parser_initialize(&parser)) FAIL(PTQ_ERR_NOMEM, "%s: out of memory starting the YAML parser", path);
    parser_ok = 1;
    yaml_parser_set_input_file(&parser, fp);
    TRY(map_read(&parser, path, kind, fn, user));
done:
    if (parser_ok) yaml_parser_delete(&parser);
    if (fp) fclose(fp);
    return st;
}

ptq_status io_yaml_map_parse(const uint8_t *buf, size_t len, const char *what, const char *kind, io_yaml_pair_fn fn,
                             void *user)
{
    ptq_status st = PTQ_OK;
    yaml_parser_t parser;
    int parser_ok = 0;
    if (!yaml_parser_initialize(&parser)) FAIL(PTQ_ERR_NOMEM, "%s: out of memory starting the YAML parser", what);
    parser_ok = 1;
    yaml_parser_set_input_string(&parser, buf, len);
    TRY(map_read(&parser, what, kind, fn, user));
done:
    if (parser_ok) yaml_parser_delete(&parser);
    return st;
}
