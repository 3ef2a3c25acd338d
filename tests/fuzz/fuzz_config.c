/* fuzz_config.c - libFuzzer target: the learner's parser of the config a
 * syncer sends in its join answer (config_from_json onto the defaults, as
 * trainer/learner/link.c calls it; the same decoder reads --config FILE).
 * Input: JSON text. Oracles: a decode that fails leaves an error message;
 * one that succeeds round-trips - config_to_json of the result decodes onto
 * fresh defaults to a config whose JSON is equal - and config_validate and
 * config_format run on it without a sanitizer report. Seeds: written by
 * gen_seeds (the defaults of every mode and model, and their keys one by
 * one at the edges of their ranges). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/err.h"
#include "trainer/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *obj = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!obj)
        return 0;
    config c;
    config_defaults(&c);
    char err[CX_ERRLEN] = "";
    if (config_from_json(&c, obj, "syncer config", err, sizeof err) != 0) {
        if (!err[0])
            abort(); /* a refusal always says why */
        json_decref(obj);
        return 0;
    }
    json_decref(obj);
    json_t *out = config_to_json(&c);
    if (!out)
        abort();
    config back;
    config_defaults(&back);
    if (config_from_json(&back, out, "round trip", err, sizeof err) != 0)
        abort(); /* what config_to_json writes must decode */
    json_t *again = config_to_json(&back);
    if (!again || !json_equal(out, again))
        abort();
    json_decref(again);
    json_decref(out);
    (void)config_validate(&c, err, sizeof err);
    char line[4096];
    config_format(&c, line, sizeof line);
    return 0;
}
