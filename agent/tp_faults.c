/* tp_faults.c - the fault kinds behind the Toxiproxy-compatible API (see
 * tp_faults.h). */
#include "agent/tp_faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/err.h"
#include "common/json.h"
#include "common/log.h"

typedef struct tp_ctx {
    json_t *toxic;      /* toxic: Toxiproxy toxic JSON (owned) */
    uint64_t seed;      /* toxic: toxicity draws */
    char name[80];      /* proxy: its name */
    char listen[160];   /* proxy: listen address asked for */
    char upstream[256]; /* proxy: its upstream */
    int enabled;        /* proxy: start enabled */
    int applied;        /* apply succeeded (revert has something to undo) */
} tp_ctx;

const char *tp_toxic_name(json_t *toxic, char *buf, size_t len)
{
    const char *name = json_string_value(json_object_get(toxic, "name"));
    if (name && name[0])
        return name;
    const char *type = json_string_value(json_object_get(toxic, "type"));
    const char *stream = json_string_value(json_object_get(toxic, "stream"));
    snprintf(buf, len, "%s_%s", type ? type : "toxic", stream && stream[0] ? stream : "downstream");
    return buf;
}

static tp_ctx *ctx_new(uint64_t seed, char *err, size_t errlen)
{
    tp_ctx *c = calloc(1, sizeof *c);
    if (!c)
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    else
        c->seed = seed;
    return c;
}

static void tp_free(void *ctx)
{
    tp_ctx *c = ctx;
    if (!c)
        return;
    json_decref(c->toxic);
    free(c);
}

/* The one proxy a proxy-targeted fault acts on. */
static proxy *one_proxy(inj_target *t, char *err, size_t errlen)
{
    if (t->nproxies != 1) {
        cx_fail(err, errlen, CX_EINVAL, "target: needs exactly one proxy");
        return NULL;
    }
    return t->proxies[0];
}

/* ---- tp_faults: toxic ---- */

static int toxic_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    json_t *toxic = NULL;
    const char *pname = NULL;
    int rc = cx_json_unpack(params, "params", err, errlen, "{s:s,s:o}", "proxy", &pname, "toxic", &toxic);
    if (rc < 0)
        return rc;
    rc = proxy_toxic_validate(toxic, err, errlen);
    if (rc < 0)
        return rc;
    tp_ctx *c = ctx_new(seed, err, errlen);
    if (!c)
        return CX_ENOMEM;
    c->toxic = json_deep_copy(toxic);
    *ctx = c;
    return 0;
}

static int toxic_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    tp_ctx *c = ctx;
    proxy *p = one_proxy(t, err, errlen);
    if (!p)
        return CX_EINVAL;
    json_t *out = NULL;
    int rc = proxy_toxic_add(p, c->toxic, c->seed, &out, err, errlen);
    if (rc < 0)
        return rc;
    c->applied = 1;
    json_object_set_new(evidence, "proxy", json_string(proxy_name(p)));
    json_object_set_new(evidence, "toxic", out);
    json_object_set_new(evidence, "proxy_stats", proxy_stats_json(p));
    return 0;
}

static int toxic_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    tp_ctx *c = ctx;
    if (!c->applied || t->nproxies != 1)
        return 0;
    char buf[160];
    int rc = proxy_toxic_remove(t->proxies[0], tp_toxic_name(c->toxic, buf, sizeof buf), err, errlen);
    c->applied = 0;
    return rc == CX_ENOTFOUND ? 0 : rc; /* gone already (POST /reset) */
}

const injector tp_toxic_injector = {
    .type = "toxic",
    .summary = "a Toxiproxy toxic on one proxy (Toxiproxy API)",
    /* params {proxy, toxic: Toxiproxy toxic JSON}, decoded by toxic_prepare */
    .traits = INJ_TRAIT_NETWORK,
    .prepare = toxic_prepare,
    .apply = toxic_apply,
    .revert = toxic_revert,
    .free = tp_free,
};

/* ---- tp_faults: proxy_disabled ---- */

static int disable_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    const char *pname = NULL;
    int rc = cx_json_unpack(params, "params", err, errlen, "{s:s}", "proxy", &pname);
    if (rc < 0)
        return rc;
    tp_ctx *c = ctx_new(seed, err, errlen);
    if (!c)
        return CX_ENOMEM;
    *ctx = c;
    return 0;
}

static int disable_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    tp_ctx *c = ctx;
    proxy *p = one_proxy(t, err, errlen);
    if (!p)
        return CX_EINVAL;
    int rc = proxy_set_enabled(p, false, err, errlen);
    if (rc < 0)
        return rc;
    c->applied = 1;
    json_object_set_new(evidence, "proxy", json_string(proxy_name(p)));
    json_object_set_new(evidence, "enabled", json_boolean(proxy_enabled(p)));
    return 0;
}

static int disable_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    tp_ctx *c = ctx;
    if (!c->applied || t->nproxies != 1)
        return 0;
    c->applied = 0;
    return proxy_set_enabled(t->proxies[0], true, err, errlen);
}

const injector tp_disable_injector = {
    .type = "proxy_disabled",
    .summary = "a proxy turned off (Toxiproxy enabled=false)",
    /* params {proxy} */
    .traits = INJ_TRAIT_NETWORK,
    .prepare = disable_prepare,
    .apply = disable_apply,
    .revert = disable_revert,
    .free = tp_free,
};

/* ---- tp_faults: proxy (a dynamic proxy) ---- */

static int dyn_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    const char *name = NULL, *listen = NULL, *upstream = NULL;
    int enabled = 1;
    int rc = cx_json_unpack(params, "params", err, errlen, "{s:s,s:s,s:s,s:b}", "name", &name, "listen",
                            &listen, "upstream", &upstream, "enabled", &enabled);
    if (rc < 0)
        return rc;
    tp_ctx *c = ctx_new(seed, err, errlen);
    if (!c)
        return CX_ENOMEM;
    if ((size_t)snprintf(c->name, sizeof c->name, "%s", name) >= sizeof c->name ||
        (size_t)snprintf(c->listen, sizeof c->listen, "%s", listen) >= sizeof c->listen ||
        (size_t)snprintf(c->upstream, sizeof c->upstream, "%s", upstream) >= sizeof c->upstream) {
        free(c);
        return cx_fail(err, errlen, CX_EINVAL, "name, listen or upstream too long");
    }
    c->enabled = enabled;
    *ctx = c;
    return 0;
}

static int dyn_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    tp_ctx *c = ctx;
    agent *a = t->agent;
    if (!a)
        return cx_fail(err, errlen, CX_EINVAL, "proxy: no agent");
    /* Names and addresses were checked by the handler: what is left is the
     * bind (address in use, not local), a 500 as in Toxiproxy. */
    proxy *p = proxy_new(c->name, c->listen, c->upstream, err, errlen);
    if (!p)
        return CX_ESYS;
    if (!c->enabled)
        proxy_set_enabled(p, false, NULL, 0);
    char bound[64];
    proxy_listen(p, bound, sizeof bound);
    int rc = agent_px_add(a, p, err, errlen);
    if (rc < 0) {
        proxy_free(p);
        return rc;
    }
    c->applied = 1;
    json_object_set_new(evidence, "proxy", json_string(c->name));
    json_object_set_new(evidence, "listen", json_string(bound));
    json_object_set_new(evidence, "upstream", json_string(c->upstream));
    return 0;
}

static int dyn_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    tp_ctx *c = ctx;
    (void)err;
    (void)errlen;
    if (!c->applied || !t->agent)
        return 0;
    c->applied = 0;
    if (agent_px_remove(t->agent, c->name) == 0)
        cx_info("proxy %s: deleted", c->name);
    return 0;
}

const injector tp_proxy_injector = {
    .type = "proxy",
    .summary = "a proxy created through the Toxiproxy API (POST /proxies, /populate)",
    /* params {name, listen: HOST:PORT, upstream: HOST:PORT, enabled} */
    .traits = INJ_TRAIT_NETWORK,
    .prepare = dyn_prepare,
    .apply = dyn_apply,
    .revert = dyn_revert,
    .free = tp_free,
};
