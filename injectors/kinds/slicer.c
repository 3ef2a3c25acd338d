/* slicer.c - the `slicer` fault: the Toxiproxy slicer toxic on the unit's proxies
 * (injectors/net.h does the work). */
#include "injectors/net.h"

static const inj_param slicer_params[] = {
    {"average_size", INJ_INT, INJ_REQUIRED, 1, 1 << 20, .unit = "bytes", .help = "mean size of a piece"},
    {"size_variation", INJ_INT, 0, 0, 1 << 20, .def = 0, .unit = "bytes", .max_note = "average_size-1",
     .help = "pieces vary by up to this much"},
    {"delay", INJ_INT, 0, 0, 1e9, .def = 0, .unit = "us", .help = "between two pieces"},
    NET_TOXIC_PARAMS,
    {0},
};

static int slicer_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    return net_prepare("slicer", "slicer", NULL, slicer_params, params, seed, ctx, err, errlen);
}

const injector inj_slicer = {
    .type = "slicer",
    .summary = "Cut the byte stream into small pieces sent delay us apart (Toxiproxy slicer toxic).",
    .params = slicer_params,
    .traits = INJ_TRAIT_NETWORK | INJ_TRAIT_TOXICITY,
    .prepare = slicer_prepare,
    NET_OPS,
};
