/* limit_data.c - the `limit_data` fault: the Toxiproxy limit_data toxic on the unit's proxies
 * (injectors/net.h does the work). */
#include "injectors/net.h"

static const inj_param limit_data_params[] = {
    {"bytes", INJ_INT, INJ_REQUIRED, 0, 1125899906842624.0, .unit = "bytes",
     .help = "bytes let through per connection and direction"},
    NET_TOXIC_PARAMS,
    {0},
};

static int limit_data_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    return net_prepare("limit_data", "limit_data", NULL, limit_data_params, params, seed, ctx, err, errlen);
}

const injector inj_limit_data = {
    .type = "limit_data",
    .summary = "Close each connection once bytes have gone through in a direction (Toxiproxy limit_data "
               "toxic).",
    .params = limit_data_params,
    .traits = INJ_TRAIT_NETWORK | INJ_TRAIT_TOXICITY,
    .prepare = limit_data_prepare,
    NET_OPS,
};
