/* fuzz_yaml.c: libFuzzer harness for ptq's YAML files: the flat-mapping reader (io/yaml.c)
 * as command configs use it (every pair accepted), then the same bytes as a preset
 * (io/preset.c: each key applied to pp_defaults(), then pp_validate). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/preset.h"
#include "io/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A config reader's view: keys are non-empty strings, values strings. */
static ptq_status any_pair(const char *key, const char *value, const char *what, void *user)
{
    size_t *total = user;
    if (!key[0] || !what[0]) __builtin_trap();
    *total += strlen(key) + strlen(value);
    return PTQ_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t total = 0;
    (void)io_yaml_map_parse(data, size, "fuzz input", "a config", any_pair, &total);
    pp_config c = pp_defaults();
    (void)io_preset_parse(data, size, "fuzz input", &c);
    return 0;
}
