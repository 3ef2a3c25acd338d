/* partition.c - the `partition` fault: a partition of the unit's proxies on the unit's proxies
 * (injectors/net.h does the work). */
#include "injectors/net.h"

static const inj_param partition_params[] = {
    NET_PROXY_PARAM,
    {0},
};

static int partition_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    return net_prepare("partition", NULL, NULL, partition_params, params, seed, ctx, err, errlen);
}

const injector inj_partition = {
    .type = "partition",
    .summary = "Partition the unit: its proxy refuses new connections and drops open ones both ways until "
               "reverted.",
    .params = partition_params,
    .traits = INJ_TRAIT_NETWORK | INJ_TRAIT_TAKES_DOWN,
    .prepare = partition_prepare,
    NET_OPS,
};
