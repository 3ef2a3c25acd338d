/* reset_peer.c - the `reset_peer` fault: the Toxiproxy reset_peer toxic on the unit's proxies
 * (injectors/net.h does the work). */
#include "injectors/net.h"

static const inj_param reset_peer_params[] = {
    {"timeout", INJ_INT, 0, 0, NET_MS_MAX, .def = 0, .unit = "ms",
     .help = "from the first data to the reset"},
    NET_TOXIC_PARAMS,
    {0},
};

static int reset_peer_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    return net_prepare("reset_peer", "reset_peer", NULL, reset_peer_params, params, seed, ctx, err, errlen);
}

const injector inj_reset_peer = {
    .type = "reset_peer",
    .summary = "Reset (TCP RST) each connection timeout ms after its first data (Toxiproxy reset_peer "
               "toxic).",
    .params = reset_peer_params,
    .traits = INJ_TRAIT_NETWORK | INJ_TRAIT_TOXICITY,
    .prepare = reset_peer_prepare,
    NET_OPS,
};
