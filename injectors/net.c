/* net.c - what the network fault kinds share: a toxic (or a partition) on
 * the unit's TCP proxies (injectors/proxy/proxy.h). Each kind is its own
 * file under injectors/kinds/ (latency.c, bandwidth.c, ...) that declares
 * its params and calls net_prepare(); see net.h.
 *
 * Each toxic is named net_<type>_<n>_<stream> (n unique in the process) so
 * that it cannot collide with toxics created through the Toxiproxy API,
 * and revert removes exactly those names (a toxic already removed through
 * the Toxiproxy API or /reset is fine). Proxies live inside the agent
 * process, so nothing outlives it: no undo record, no sweep.
 */
#include "injectors/net.h"

#include "common/err.h"
#include "injectors/inj_params.h"
#include "injectors/proxy/proxy.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_MAX_PROXIES 16
#define NET_MAX_PARAMS 8

const char *const net_directions[] = {"both", "upstream", "downstream", NULL};

typedef struct net_ctx {
    char type[32];                     /* fault type, names the toxics */
    bool partition;                    /* a partition, not a toxic */
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
    snprintf(buf, len, "net_%s_%u_%s", c->type, c->serial, stream_names[s]);
}

/* ---- net: prepare ---- */

static int is_common(const char *key)
{
    return strcmp(key, "proxy") == 0 || strcmp(key, "direction") == 0 || strcmp(key, "toxicity") == 0;
}

int net_prepare(const char *type, const char *toxic_type, const char *fixed_attrs, const inj_param *spec,
                json_t *params, uint64_t seed, void **out, char *err, size_t errlen)
{
    inj_value v[NET_MAX_PARAMS];
    size_t n = inj_params_count(spec);
    if (n > NET_MAX_PARAMS)
        return cx_fail(err, errlen, CX_EINVAL, "params: %s declares more than %d keys", type, NET_MAX_PARAMS);
    int rc = inj_params_decode(params, spec, v, err, errlen);
    if (rc)
        return rc;
    net_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "net ctx");
    snprintf(c->type, sizeof c->type, "%s", type);
    c->partition = toxic_type == NULL;
    c->seed = seed;
    c->dir[0] = c->dir[1] = true;
    double toxicity = 1.0;
    json_t *attrs = fixed_attrs ? json_loads(fixed_attrs, 0, NULL) : json_object();
    for (size_t k = 0; k < n; k++) {
        const inj_param *p = &spec[k];
        if (strcmp(p->name, "proxy") == 0) {
            snprintf(c->proxy, sizeof c->proxy, "%s", v[k].s ? v[k].s : "");
        } else if (strcmp(p->name, "direction") == 0) {
            c->dir[0] = strcmp(v[k].s, "downstream") != 0;
            c->dir[1] = strcmp(v[k].s, "upstream") != 0;
        } else if (strcmp(p->name, "toxicity") == 0) {
            toxicity = v[k].d;
        } else if (!is_common(p->name) && attrs) {
            /* every other param is a Toxiproxy attribute of the same name */
            json_object_set_new(attrs, p->name,
                                p->type == INJ_INT ? json_integer((json_int_t)v[k].i) : json_real(v[k].d));
        }
    }
    if (c->partition) {
        json_decref(attrs);
        *out = c;
        return 0;
    }
    c->toxic =
        attrs ? json_pack("{s:s, s:f, s:o}", "type", toxic_type, "toxicity", toxicity, "attributes", attrs)
              : NULL;
    if (!c->toxic) {
        rc = cx_fail(err, errlen, CX_ENOMEM, "net toxic");
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
    if (c->partition) {
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
    if (c->partition) {
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
    if (!c->partition) {
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

int net_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
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
    if (!c->partition) {
        json_object_set_new(evidence, "direction",
                            json_string(c->dir[0] && c->dir[1] ? "both"
                                        : c->dir[0]            ? "upstream"
                                                               : "downstream"));
    } else {
        json_object_set_new(evidence, "partitioned", json_true());
    }
    return 0;
}

int net_revert(void *ctx, inj_target *t, char *err, size_t errlen)
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

json_t *net_undo_record(void *ctx)
{
    (void)ctx;
    return NULL; /* proxies die with the agent: nothing to sweep */
}

void net_free(void *ctx)
{
    net_ctx *c = ctx;
    if (!c)
        return;
    json_decref(c->toxic);
    free(c);
}
