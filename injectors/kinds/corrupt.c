/* corrupt.c - the `corrupt` fault: the Toxiproxy corrupt toxic on the unit's proxies
 * (injectors/net.h does the work). */
#include "injectors/net.h"

static const inj_param corrupt_params[] = {
    {"probability", INJ_NUMBER, INJ_REQUIRED, 0, 1, .help = "chance per bit"},
    NET_TOXIC_PARAMS,
    {0},
};

static int corrupt_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    return net_prepare("corrupt", "corrupt", NULL, corrupt_params, params, seed, ctx, err, errlen);
}

const injector inj_corrupt = {
    .type = "corrupt",
    .summary = "Flip seeded random bits of the byte stream, each bit with the given probability (chaosloco"
               " toxic).",
    .params = corrupt_params,
    .traits = INJ_TRAIT_NETWORK | INJ_TRAIT_TOXICITY,
    .prepare = corrupt_prepare,
    NET_OPS,
};
