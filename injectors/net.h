/* net.h - the machinery shared by the network fault kinds (latency,
 * bandwidth, blackhole, reset_peer, slicer, limit_data, corrupt,
 * partition; one file each under injectors/kinds/).
 *
 * A network kind adds one toxic per chosen direction on the unit's proxies
 * (or holds them partitioned). Its file declares its params: its own ones
 * (each is a Toxiproxy attribute of the same name and type) followed by
 * NET_TOXIC_PARAMS (direction, proxy, toxicity) or, for a kind without a
 * toxic, NET_PROXY_PARAM; its prepare() calls net_prepare() and the rest
 * of its vtable is NET_OPS.
 *
 * Common params: direction "upstream" (learner -> syncer), "downstream" or
 * "both" (default); proxy = the name of one proxy of the unit (default:
 * every proxy of the unit); toxicity 0..1 (default 1), the per-connection
 * chance that the toxic applies. The injector interface does not pass the
 * fault's top-level toxicity/target, so they are params here (the registry
 * copies the request's toxicity into params for INJ_TRAIT_TOXICITY kinds).
 */
#ifndef INJ_NET_H
#define INJ_NET_H

#include "injectors/injector.h"

#define NET_MS_MAX 86400000.0

extern const char *const net_directions[]; /* "both", "upstream", "downstream" */

/* clang-format off */
#define NET_PROXY_PARAM \
    {"proxy", INJ_STRING, INJ_NODEF, .max = 64, .help = "one proxy of the unit by name; absent = all of them"}

#define NET_TOXIC_PARAMS \
    {"direction", INJ_ENUM, 0, .max = 16, .def_str = "both", .values = net_directions, \
     .help = "upstream = learner to syncer, downstream = back"}, \
    NET_PROXY_PARAM, \
    {"toxicity", INJ_NUMBER, 0, 0, 1, .def = 1, .help = "chance per connection that the toxic applies"}
/* clang-format on */

/* Decode params against spec (the kind's table) and build the ctx of a
 * fault of fault type `type` that adds the Toxiproxy toxic toxic_type with
 * the kind's own params as attributes, plus fixed_attrs (a JSON object
 * text, or NULL); toxic_type NULL = a partition. CX_EINVAL + err naming the
 * key on bad params. */
int net_prepare(const char *type, const char *toxic_type, const char *fixed_attrs, const inj_param *spec,
                json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen);
int net_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen);
int net_revert(void *ctx, inj_target *t, char *err, size_t errlen);
json_t *net_undo_record(void *ctx);
void net_free(void *ctx);

/* The rest of a network kind's injector after .prepare. */
#define NET_OPS                                                                                              \
    .apply = net_apply, .tick = NULL, .revert = net_revert, .undo_record = net_undo_record, .sweep = NULL,   \
    .free = net_free

#endif
