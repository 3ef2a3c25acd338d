/* fuzz_fault_request.c - libFuzzer target: the agent's decoding of a
 * POST /v1/faults body, as agent/api.c and agent/registry.c do it: the body
 * parsed like cx_http_body_json (JSON object, duplicate keys refused), the
 * strict decode (api_decode_fault), then the chosen injector's prepare() on
 * the params the registry would hand it (toxicity folded in). prepare()
 * changes nothing by contract, so nothing is applied here.
 * Input: the request body. Seeds: seeds/fault_request/. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/api.h"
#include "common/err.h"
#include "fuzz_log.h"
#include "injectors/injector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024) /* the agent's body cap */
        return 0;
    json_error_t je;
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    reg_spec spec;
    char err[CX_ERRLEN];
    const injector *inj = NULL;
    if (api_decode_fault(body, &spec, err, sizeof err) == 0 && (inj = injector_find(spec.type)) &&
        inj->prepare) {
        json_t *params = spec.params ? json_deep_copy(spec.params) : json_object();
        if (spec.has_toxicity && (inj->traits & INJ_TRAIT_TOXICITY) && !json_object_get(params, "toxicity"))
            json_object_set_new(params, "toxicity", json_real(spec.toxicity));
        void *ctx = NULL;
        if (inj->prepare(params, spec.has_seed ? spec.seed : 1, &ctx, err, sizeof err) == 0 && inj->free)
            inj->free(ctx);
        json_decref(params);
    }
    json_decref(body);
    return 0;
}
