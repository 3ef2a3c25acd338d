/* blackhole.c - the `blackhole` fault: the Toxiproxy timeout toxic with timeout 0 on the unit's proxies
 * (injectors/net.h does the work). */
#include "injectors/net.h"

static const inj_param blackhole_params[] = {
    NET_TOXIC_PARAMS,
    {0},
};

static int blackhole_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    return net_prepare("blackhole", "timeout", "{\"timeout\": 0}", blackhole_params, params, seed, ctx, err,
                       errlen);
}

const injector inj_blackhole = {
    .type = "blackhole",
    .summary = "Swallow every byte through the proxy while keeping connections open (Toxiproxy timeout "
               "toxic with timeout 0).",
    .params = blackhole_params,
    .traits = INJ_TRAIT_NETWORK | INJ_TRAIT_TOXICITY | INJ_TRAIT_TAKES_DOWN,
    .prepare = blackhole_prepare,
    NET_OPS,
};
