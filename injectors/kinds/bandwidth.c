/* bandwidth.c - the `bandwidth` fault: the Toxiproxy bandwidth toxic on the unit's proxies
 * (injectors/net.h does the work). */
#include "injectors/net.h"

static const inj_param bandwidth_params[] = {
    {"rate", INJ_INT, INJ_REQUIRED, 1, 1e9, .unit = "KB/s",
     .help = "throughput per connection and direction"},
    NET_TOXIC_PARAMS,
    {0},
};

static int bandwidth_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    return net_prepare("bandwidth", "bandwidth", NULL, bandwidth_params, params, seed, ctx, err, errlen);
}

const injector inj_bandwidth = {
    .type = "bandwidth",
    .summary = "Limit the proxy's throughput to rate KB/s (1 KB = 1000 bytes) per connection and direction"
               " (Toxiproxy bandwidth toxic).",
    .params = bandwidth_params,
    .traits = INJ_TRAIT_NETWORK | INJ_TRAIT_TOXICITY,
    .prepare = bandwidth_prepare,
    NET_OPS,
};
