/* latency.c - the `latency` fault: the Toxiproxy latency toxic on the unit's proxies
 * (injectors/net.h does the work). */
#include "injectors/net.h"

static const inj_param latency_params[] = {
    {"latency", INJ_INT, INJ_REQUIRED, 0, NET_MS_MAX, .unit = "ms", .help = "delay of every chunk"},
    {"jitter", INJ_INT, 0, 0, NET_MS_MAX, .def = 0, .unit = "ms", .help = "uniform +- around latency"},
    NET_TOXIC_PARAMS,
    {0},
};

static int latency_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    return net_prepare("latency", "latency", NULL, latency_params, params, seed, ctx, err, errlen);
}

const injector inj_latency = {
    .type = "latency",
    .summary = "Delay every chunk through the unit's proxy by latency +- jitter ms, measured from its "
               "arrival (Toxiproxy latency toxic).",
    .params = latency_params,
    .traits = INJ_TRAIT_NETWORK | INJ_TRAIT_TOXICITY,
    .prepare = latency_prepare,
    NET_OPS,
};
