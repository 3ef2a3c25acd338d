/* net.c - the network fault kinds: toxics (and partitions) on the unit's
 * TCP proxies (injectors/proxy/proxy.h).
 *
 *   type        toxic on each chosen direction      params (besides direction, proxy, toxicity)
 *   latency     latency                             latency ms (required), jitter ms
 *   bandwidth   bandwidth                           rate KB/s (required, >= 1)
 *   blackhole   timeout with timeout 0              (none): bytes are swallowed, links stay open
 *   reset_peer  reset_peer                          timeout ms (default 0)
 *   slicer      slicer                              average_size bytes (required), size_variation
 *                                                   bytes, delay us
 *   limit_data  limit_data                          bytes (required)
 *   corrupt     corrupt                             probability per bit (required, 0..1)
 *   partition   proxy_partition_hold (both ways)    only `proxy`
 *
 * Common params: direction "upstream" (learner -> syncer), "downstream" or
 * "both" (default); proxy = the name of one proxy of the unit (default:
 * every proxy of the unit); toxicity 0..1 (default 1), the per-connection
 * chance that the toxic applies. The injector interface does not pass the
 * fault's top-level toxicity/target, so they are params here.
 *
 * Each toxic is named net_<type>_<n>_<stream> (n unique in the process) so
 * that it cannot collide with toxics created through the Toxiproxy API,
 * and revert removes exactly those names (a toxic already removed through
 * the Toxiproxy API or /reset is fine). Proxies live inside the agent
 * process, so nothing outlives it: no undo record, no sweep.
 */
#include "common/err.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"
#include "injectors/proxy/proxy.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_MAX_PROXIES 16
#define NET_MS_MAX 86400000.0

/* ---- net: kinds ---- */

typedef struct net_attr {
    const char *key; /* Toxiproxy attribute name, also the params key */
    int required;
    double def, min, max;
    int is_int; /* JSON integer required */
} net_attr;

typedef struct net_kind {
    const char *type;       /* fault type */
    const char *toxic_type; /* Toxiproxy toxic type; NULL for partition */
    net_attr attrs[3];
    int nattrs;
} net_kind;

static const net_kind net_kinds[] = {
    {"latency", "latency", {{"latency", 1, 0, 0, NET_MS_MAX, 1}, {"jitter", 0, 0, 0, NET_MS_MAX, 1}}, 2},
    {"bandwidth", "bandwidth", {{"rate", 1, 0, 1, 1e9, 1}}, 1},
    {"blackhole", "timeout", {{0}}, 0},
    {"reset_peer", "reset_peer", {{"timeout", 0, 0, 0, NET_MS_MAX, 1}}, 1},
    {"slicer",
     "slicer",
     {{"average_size", 1, 0, 1, 1 << 20, 1},
      {"size_variation", 0, 0, 0, 1 << 20, 1},
      {"delay", 0, 0, 0, 1e9, 1}},
     3},
    {"limit_data", "limit_data", {{"bytes", 1, 0, 0, 1125899906842624.0, 1}}, 1},
    {"corrupt", "corrupt", {{"probability", 1, 0, 0, 1, 0}}, 1},
    {"partition", NULL, {{0}}, 0},
};

enum { K_LATENCY, K_BANDWIDTH, K_BLACKHOLE, K_RESET_PEER, K_SLICER, K_LIMIT_DATA, K_CORRUPT, K_PARTITION };

typedef struct net_ctx {
    const net_kind *kind;
    char proxy[65];                    /* one proxy by name, "" = all of the unit's */
    bool dir[2];                       /* [0] upstream, [1] downstream */
    json_t *toxic;                     /* toxic template {type, toxicity, attributes} (owned) */
    uint64_t seed;                     /* for the proxy's toxicity draws and corruption */
    unsigned serial;                   /* n in the toxic names */
    char applied[NET_MAX_PROXIES][65]; /* names of proxies changed by apply */
    int napplied;
} net_ctx;

static unsigned net_serial; /* atomic; toxic name uniqueness within the process */

static const char *const stream_names[2] = {"upstream", "downstream"};

static void toxic_name(const net_ctx *c, int s, char *buf, size_t len)
{
    snprintf(buf, len, "net_%s_%u_%s", c->kind->type, c->serial, stream_names[s]);
}

/* ---- net: prepare ---- */

static int net_prepare(const net_kind *k, json_t *params, uint64_t seed, void **out, char *err, size_t errlen)
{
    const char *allowed[8];
    int na = 0;
    allowed[na++] = "proxy";
    if (k->toxic_type) {
        allowed[na++] = "direction";
        allowed[na++] = "toxicity";
        for (int i = 0; i < k->nattrs; i++)
            allowed[na++] = k->attrs[i].key;
    }
    allowed[na] = NULL;
    int rc = inj_params_check(params, allowed, err, errlen);
    if (rc)
        return rc;

    net_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "net ctx");
    c->kind = k;
    c->seed = seed;
    c->dir[0] = c->dir[1] = true;
    const char *s = NULL;
    rc = inj_param_string(params, "proxy", 0, "", 64, &s, err, errlen);
    if (rc)
        goto fail;
    snprintf(c->proxy, sizeof c->proxy, "%s", s);
    if (!k->toxic_type) {
        *out = c;
        return 0;
    }
    rc = inj_param_string(params, "direction", 0, "both", 16, &s, err, errlen);
    if (rc)
        goto fail;
    if (strcmp(s, "upstream") == 0)
        c->dir[1] = false;
    else if (strcmp(s, "downstream") == 0)
        c->dir[0] = false;
    else if (strcmp(s, "both") != 0) {
        rc = cx_fail(err, errlen, CX_EINVAL,
                     "params.direction: must be upstream, downstream or both (got '%s')", s);
        goto fail;
    }
    double toxicity = 1.0;
    rc = inj_param_number(params, "toxicity", 0, 1.0, 0.0, 1.0, &toxicity, err, errlen);
    if (rc)
        goto fail;
    json_t *attrs = json_object();
    c->toxic = json_pack("{s:s, s:f, s:o}", "type", k->toxic_type, "toxicity", toxicity, "attributes", attrs);
    if (!c->toxic) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "net toxic");
        goto fail;
    }
    if (k == &net_kinds[K_BLACKHOLE])
        json_object_set_new(attrs, "timeout", json_integer(0));
    for (int i = 0; i < k->nattrs; i++) {
        const net_attr *a = &k->attrs[i];
        if (a->is_int) {
            int64_t v = 0;
            rc = inj_param_int(params, a->key, a->required, (int64_t)a->def, (int64_t)a->min, (int64_t)a->max,
                               &v, err, errlen);
            if (!rc)
                json_object_set_new(attrs, a->key, json_integer((json_int_t)v));
        } else {
            double v = 0;
            rc = inj_param_number(params, a->key, a->required, a->def, a->min, a->max, &v, err, errlen);
            if (!rc)
                json_object_set_new(attrs, a->key, json_real(v));
        }
        if (rc)
            goto fail;
    }
    /* cross-field rules (slicer size_variation < average_size) live in the proxy */
    char verr[CX_ERRLEN];
    rc = proxy_toxic_validate(c->toxic, verr, sizeof verr);
    if (rc) {
        rc = cx_fail(err, errlen, CX_EINVAL, "params: %s", verr);
        goto fail;
    }
    c->serial = __atomic_add_fetch(&net_serial, 1, __ATOMIC_RELAXED);
    *out = c;
    return 0;
fail:
    json_decref(c->toxic);
    free(c);
    return rc;
}

/* ---- net: apply / revert ---- */

static bool ctx_applied_to(const net_ctx *c, const char *name)
{
    for (int i = 0; i < c->napplied; i++)
        if (strcmp(c->applied[i], name) == 0)
            return true;
    return false;
}

/* Undo on one proxy what apply did there; missing toxics are fine. */
static int net_undo_one(net_ctx *c, struct proxy *p, char *err, size_t errlen)
{
    if (!c->kind->toxic_type) {
        proxy_partition_release(p);
        return 0;
    }
    int rc = 0;
    for (int s = 0; s < 2; s++) {
        if (!c->dir[s])
            continue;
        char name[80];
        toxic_name(c, s, name, sizeof name);
        int r = proxy_toxic_remove(p, name, err, errlen);
        if (r != 0 && r != CX_ENOTFOUND)
            rc = r;
    }
    return rc;
}

static int net_apply_one(net_ctx *c, struct proxy *p, char *err, size_t errlen)
{
    if (!c->kind->toxic_type) {
        proxy_partition_hold(p);
        return 0;
    }
    for (int s = 0; s < 2; s++) {
        if (!c->dir[s])
            continue;
        char name[80];
        toxic_name(c, s, name, sizeof name);
        json_t *t = json_deep_copy(c->toxic);
        json_object_set_new(t, "name", json_string(name));
        json_object_set_new(t, "stream", json_string(stream_names[s]));
        int rc = proxy_toxic_add(p, t, c->seed ^ (uint64_t)s, NULL, err, errlen);
        json_decref(t);
        if (rc) {
            if (s == 1 && c->dir[0]) { /* take back the upstream half */
                char n0[80];
                toxic_name(c, 0, n0, sizeof n0);
                proxy_toxic_remove(p, n0, NULL, 0);
            }
            return rc;
        }
    }
    return 0;
}

static json_t *net_evidence_one(const net_ctx *c, struct proxy *p)
{
    json_t *e = json_object();
    json_object_set_new(e, "listen", json_string(proxy_listen_addr(p)));
    json_t *stats = proxy_stats_json(p);
    json_t *ts = json_object_get(stats, "toxics");
    json_t *mine = json_object();
    if (c->kind->toxic_type) {
        json_t *toxics = json_array();
        for (int s = 0; s < 2; s++) {
            if (!c->dir[s])
                continue;
            char name[80];
            toxic_name(c, s, name, sizeof name);
            json_t *tj = proxy_toxic_json(p, name);
            if (tj)
                json_array_append_new(toxics, tj);
            json_t *cnt = json_object_get(ts, name);
            if (cnt)
                json_object_set(mine, name, cnt);
        }
        json_object_set_new(e, "toxics", toxics);
    }
    json_object_del(stats, "toxics");
    json_object_set_new(stats, "toxics", mine);
    json_object_set_new(e, "counters", stats);
    return e;
}

static int net_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    net_ctx *c = ctx;
    if (t->nproxies <= 0 || !t->proxies)
        return cx_fail(err, errlen, CX_ENOTSUP, "the unit has no TCP proxy (start the agent with --proxy)");
    int rc = 0;
    bool matched = false;
    c->napplied = 0;
    for (int i = 0; i < t->nproxies && i < NET_MAX_PROXIES; i++) {
        struct proxy *p = t->proxies[i];
        if (c->proxy[0] && strcmp(proxy_name(p), c->proxy) != 0)
            continue;
        matched = true;
        rc = net_apply_one(c, p, err, errlen);
        if (rc)
            break;
        snprintf(c->applied[c->napplied++], sizeof c->applied[0], "%s", proxy_name(p));
    }
    if (!matched)
        rc = cx_fail(err, errlen, CX_ENOTFOUND, "params.proxy: the unit has no proxy named '%s'", c->proxy);
    if (rc) { /* all or nothing */
        for (int i = 0; i < t->nproxies; i++)
            if (ctx_applied_to(c, proxy_name(t->proxies[i])))
                net_undo_one(c, t->proxies[i], NULL, 0);
        c->napplied = 0;
        return rc;
    }
    json_t *per = json_object();
    for (int i = 0; i < t->nproxies; i++)
        if (ctx_applied_to(c, proxy_name(t->proxies[i])))
            json_object_set_new(per, proxy_name(t->proxies[i]), net_evidence_one(c, t->proxies[i]));
    json_object_set_new(evidence, "proxies", per);
    if (c->kind->toxic_type) {
        json_object_set_new(evidence, "direction",
                            json_string(c->dir[0] && c->dir[1] ? "both"
                                        : c->dir[0]            ? "upstream"
                                                               : "downstream"));
    } else {
        json_object_set_new(evidence, "partitioned", json_true());
    }
    return 0;
}

static int net_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    net_ctx *c = ctx;
    int rc = 0;
    for (int i = 0; t && t->proxies && i < t->nproxies; i++) {
        if (!ctx_applied_to(c, proxy_name(t->proxies[i])))
            continue;
        int r = net_undo_one(c, t->proxies[i], err, errlen);
        if (r)
            rc = r;
    }
    if (rc == 0)
        c->napplied = 0; /* idempotent: a second revert does nothing */
    return rc;
}

static json_t *net_undo_record(void *ctx)
{
    (void)ctx;
    return NULL; /* proxies die with the agent: nothing to sweep */
}

static void net_free(void *ctx)
{
    net_ctx *c = ctx;
    if (!c)
        return;
    json_decref(c->toxic);
    free(c);
}

/* ---- net: the registered kinds ---- */

#define NET_KIND(ident, idx, summary_, params_)                                                              \
    static int ident##_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)          \
    {                                                                                                        \
        return net_prepare(&net_kinds[idx], params, seed, ctx, err, errlen);                                 \
    }                                                                                                        \
    const injector inj_##ident = {                                                                           \
        .type = #ident,                                                                                      \
        .summary = summary_,                                                                                 \
        .params = params_,                                                                                   \
        .prepare = ident##_prepare,                                                                          \
        .apply = net_apply,                                                                                  \
        .tick = NULL,                                                                                        \
        .revert = net_revert,                                                                                \
        .undo_record = net_undo_record,                                                                      \
        .sweep = NULL,                                                                                       \
        .free = net_free,                                                                                    \
    };

#define NET_COMMON                                                                                           \
    "direction: upstream|downstream|both (default both); proxy: name (default all); "                        \
    "toxicity: 0..1 per connection (default 1)"

NET_KIND(latency, K_LATENCY,
         "Delay every chunk through the unit's proxy by latency +- jitter ms, measured from "
         "its arrival (Toxiproxy latency toxic).",
         "latency: ms 0..86400000 (required); jitter: ms (default 0); " NET_COMMON)
NET_KIND(bandwidth, K_BANDWIDTH,
         "Limit the proxy's throughput to rate KB/s (1 KB = 1000 bytes) per connection and "
         "direction (Toxiproxy bandwidth toxic).",
         "rate: KB/s >= 1 (required); " NET_COMMON)
NET_KIND(blackhole, K_BLACKHOLE,
         "Swallow every byte through the proxy while keeping connections open "
         "(Toxiproxy timeout toxic with timeout 0).",
         NET_COMMON)
NET_KIND(reset_peer, K_RESET_PEER,
         "Reset (TCP RST) each connection timeout ms after its first data "
         "(Toxiproxy reset_peer toxic).",
         "timeout: ms (default 0); " NET_COMMON)
NET_KIND(slicer, K_SLICER,
         "Cut the byte stream into small pieces sent delay us apart "
         "(Toxiproxy slicer toxic).",
         "average_size: bytes >= 1 (required); size_variation: bytes < average_size (default 0); delay: us "
         "(default 0); " NET_COMMON)
NET_KIND(limit_data, K_LIMIT_DATA,
         "Close each connection once bytes have gone through in a direction "
         "(Toxiproxy limit_data toxic).",
         "bytes: >= 0 (required); " NET_COMMON)
NET_KIND(corrupt, K_CORRUPT,
         "Flip seeded random bits of the byte stream, each bit with the given "
         "probability (chaosloco toxic).",
         "probability: per bit 0..1 (required); " NET_COMMON)
NET_KIND(partition, K_PARTITION,
         "Partition the unit: its proxy refuses new connections and drops open ones "
         "both ways until reverted.",
         "proxy: name (default all)")
