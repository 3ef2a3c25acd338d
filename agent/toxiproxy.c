/* toxiproxy.c - Toxiproxy-compatible endpoints over the agent's proxies.
 *
 * Toxics go through the fault registry with two agent-private injectors
 * (not in injector_table: they exist only for this API): "toxic" adds one
 * Toxiproxy toxic to one proxy and removes it on revert; "disable" turns a
 * proxy off (Toxiproxy "enabled": false) and on again on revert. Neither
 * outlives the agent process (the proxies die with it), so neither needs an
 * undo record for the crash sweep.
 */
#include "agent/toxiproxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/api.h"
#include "common/err.h"
#include "common/json.h"
#include "common/log.h"

/* ---- toxiproxy: the "toxic" and "disable" injectors ---- */

typedef struct tp_ctx {
    json_t *toxic; /* Toxiproxy toxic JSON (owned), NULL for "disable" */
    uint64_t seed; /* toxicity draws */
} tp_ctx;

static int toxic_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    json_t *toxic = NULL;
    const char *proxy_name = NULL;
    int rc =
        cx_json_unpack(params, "params", err, errlen, "{s:s,s:o}", "proxy", &proxy_name, "toxic", &toxic);
    if (rc < 0)
        return rc;
    rc = proxy_toxic_validate(toxic, err, errlen);
    if (rc < 0)
        return rc;
    tp_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    c->toxic = json_deep_copy(toxic);
    c->seed = seed;
    *ctx = c;
    return 0;
}

static int toxic_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    tp_ctx *c = ctx;
    if (t->nproxies != 1)
        return cx_fail(err, errlen, CX_EINVAL, "target: a toxic needs exactly one proxy");
    json_t *out = NULL;
    int rc = proxy_toxic_add(t->proxies[0], c->toxic, c->seed, &out, err, errlen);
    if (rc < 0)
        return rc;
    json_object_set_new(evidence, "proxy", json_string(proxy_name(t->proxies[0])));
    json_object_set_new(evidence, "toxic", out);
    json_object_set_new(evidence, "proxy_stats", proxy_stats_json(t->proxies[0]));
    return 0;
}

static const char *toxic_name_of(json_t *toxic, char *buf, size_t len)
{
    const char *name = json_string_value(json_object_get(toxic, "name"));
    if (name && name[0])
        return name;
    const char *type = json_string_value(json_object_get(toxic, "type"));
    const char *stream = json_string_value(json_object_get(toxic, "stream"));
    snprintf(buf, len, "%s_%s", type ? type : "toxic", stream ? stream : "downstream");
    return buf;
}

static int toxic_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    tp_ctx *c = ctx;
    if (t->nproxies != 1)
        return 0;
    char buf[160];
    int rc = proxy_toxic_remove(t->proxies[0], toxic_name_of(c->toxic, buf, sizeof buf), err, errlen);
    return rc == CX_ENOTFOUND ? 0 : rc;
}

static void tp_free(void *ctx)
{
    tp_ctx *c = ctx;
    if (!c)
        return;
    json_decref(c->toxic);
    free(c);
}

static int disable_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    const char *proxy_name = NULL;
    int rc = cx_json_unpack(params, "params", err, errlen, "{s:s}", "proxy", &proxy_name);
    if (rc < 0)
        return rc;
    tp_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    c->seed = seed;
    *ctx = c;
    return 0;
}

static int disable_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    (void)ctx;
    if (t->nproxies != 1)
        return cx_fail(err, errlen, CX_EINVAL, "target: needs exactly one proxy");
    int rc = proxy_set_enabled(t->proxies[0], false, err, errlen);
    if (rc < 0)
        return rc;
    json_object_set_new(evidence, "proxy", json_string(proxy_name(t->proxies[0])));
    json_object_set_new(evidence, "enabled", json_boolean(proxy_enabled(t->proxies[0])));
    return 0;
}

static int disable_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)ctx;
    if (t->nproxies != 1)
        return 0;
    return proxy_set_enabled(t->proxies[0], true, err, errlen);
}

static const injector tp_toxic_injector = {
    .type = "toxic",
    .summary = "a Toxiproxy toxic on one proxy (Toxiproxy API)",
    .params = "proxy, toxic (Toxiproxy toxic JSON)",
    .prepare = toxic_prepare,
    .apply = toxic_apply,
    .revert = toxic_revert,
    .free = tp_free,
};

static const injector tp_disable_injector = {
    .type = "proxy_disabled",
    .summary = "a proxy turned off (Toxiproxy enabled=false)",
    .params = "proxy",
    .prepare = disable_prepare,
    .apply = disable_apply,
    .revert = disable_revert,
    .free = tp_free,
};

/* ---- toxiproxy: helpers ---- */

static int tp_open_ok(agent *a)
{
    return a->o.toxiproxy_compat && a->loopback;
}

static proxy *find_proxy(agent *a, const cx_http_req *req, cx_http_resp *resp)
{
    proxy *p = agent_proxy(a, req->params[0]);
    if (!p)
        cx_http_reply_error(resp, 404, "proxy not found");
    return p;
}

static void reply_no_content(cx_http_resp *resp)
{
    cx_http_reply_bytes(resp, 204, "text/plain", "", 0);
}

static int64_t tp_duration(agent *a)
{
    return a->o.max_duration_ms > 0 ? a->o.max_duration_ms : AGENT_DEFAULT_MAX_DURATION_MS;
}

/* Register a toxiproxy-origin fault. 0 and fid on success; else the reply
 * is written. */
static int tp_create_fault(agent *a, cx_http_resp *resp, const char *type, const char *pname, json_t *params,
                           const char *tag, const injector *inj, char *fid, size_t fidlen)
{
    if (agent_halted(a)) {
        cx_http_reply_err(resp, CX_EUNAVAIL, "agent is halted: new toxics are refused until POST /v1/resume");
        return CX_EUNAVAIL;
    }
    reg_spec spec = {
        .type = type,
        .target = pname,
        .params = params,
        .duration_ms = tp_duration(a),
        .lease = agent_lease_held(a),
        .origin = "toxiproxy",
        .tag = tag,
        .inj = inj,
    };
    json_t *rec = NULL;
    char err[CX_ERRLEN] = "";
    int rc = reg_create(a->reg, &spec, &rec, err, sizeof err);
    if (rec)
        snprintf(fid, fidlen, "%s", json_string_value(json_object_get(rec, "id")));
    json_decref(rec);
    if (rc < 0)
        cx_http_reply_err(resp, rc, err);
    return rc;
}

/* Revert the fault behind a tag; CX_ENOTFOUND when none. */
static int tp_revert_tag(agent *a, const char *tag, char *fid, size_t fidlen)
{
    char id[64];
    if (reg_find_tag(a->reg, tag, id, sizeof id) < 0)
        return CX_ENOTFOUND;
    if (fid)
        snprintf(fid, fidlen, "%s", id);
    return reg_revert(a->reg, id, "delete", NULL, NULL, 0);
}

/* ---- toxiproxy: proxies ---- */

int tp_proxies_list(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    (void)req;
    json_t *o = json_object();
    for (int i = 0; i < a->nproxies; i++)
        json_object_set_new(o, proxy_name(a->proxies[i]), proxy_json(a->proxies[i]));
    cx_http_reply_json(resp, 200, o);
    return 0;
}

static int tp_fixed(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    const char *auth = "none";
    if (api_auth(a, req, resp, tp_open_ok(a), &auth) == 0)
        cx_http_reply_error(resp, 409,
                            "proxies are fixed by the agent's --proxy flags; create and "
                            "delete are not supported");
    api_audit(a, req, resp, NULL, auth);
    return 0;
}

int tp_proxies_create(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_fixed(ctx, req, resp);
}

int tp_proxy_delete(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_fixed(ctx, req, resp);
}

int tp_proxy_get(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    proxy *p = find_proxy(a, req, resp);
    if (p)
        cx_http_reply_json(resp, 200, proxy_json(p));
    return 0;
}

static void proxy_update(agent *a, const cx_http_req *req, cx_http_resp *resp, char *fid, size_t fidlen)
{
    proxy *p = find_proxy(a, req, resp);
    if (!p)
        return;
    json_t *body = NULL;
    if (cx_http_body_json(req, resp, 0, &body) < 0)
        return;
    char err[CX_ERRLEN] = "";
    int enabled = -1;
    json_t *jen = NULL;
    const char *upstream = NULL, *name = NULL, *listen = NULL;
    int rc = cx_json_unpack(body, "body", err, sizeof err, "{s?:o,s?:s,s?:s,s?:s}", "enabled", &jen,
                            "upstream", &upstream, "name", &name, "listen", &listen);
    if (rc == 0 && jen) {
        if (!json_is_boolean(jen))
            rc = cx_fail(err, sizeof err, CX_EINVAL, "enabled: must be a boolean");
        else
            enabled = json_is_true(jen);
    }
    if (rc == 0 && name && strcmp(name, proxy_name(p)) != 0)
        rc = cx_fail(err, sizeof err, CX_EINVAL, "name: a proxy cannot be renamed");
    if (rc == 0 && listen && strcmp(listen, proxy_listen_addr(p)) != 0)
        rc = cx_fail(err, sizeof err, CX_EINVAL, "listen: a proxy's listen address is fixed (%s)",
                     proxy_listen_addr(p));
    if (rc < 0) {
        cx_http_reply_err(resp, rc, err);
        json_decref(body);
        return;
    }
    if (upstream && proxy_set_upstream(p, upstream, err, sizeof err) < 0) {
        cx_http_reply_err(resp, CX_EINVAL, err);
        json_decref(body);
        return;
    }
    char tag[160];
    snprintf(tag, sizeof tag, "%s/#disabled", proxy_name(p));
    if (enabled == 0 && proxy_enabled(p)) {
        json_t *params = json_pack("{s:s}", "proxy", proxy_name(p));
        rc = tp_create_fault(a, resp, "proxy_disabled", proxy_name(p), params, tag, &tp_disable_injector, fid,
                             fidlen);
        json_decref(params);
        if (rc < 0) {
            json_decref(body);
            return;
        }
    } else if (enabled == 1) {
        if (tp_revert_tag(a, tag, fid, fidlen) == CX_ENOTFOUND && !proxy_enabled(p))
            proxy_set_enabled(p, true, NULL, 0);
    }
    json_decref(body);
    cx_http_reply_json(resp, 200, proxy_json(p));
}

int tp_proxy_update(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    const char *auth = "none";
    char fid[64] = "";
    if (api_auth(a, req, resp, tp_open_ok(a), &auth) == 0)
        proxy_update(a, req, resp, fid, sizeof fid);
    api_audit(a, req, resp, fid, auth);
    return 0;
}

/* ---- toxiproxy: toxics ---- */

int tp_toxics_list(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    proxy *p = find_proxy(a, req, resp);
    if (p)
        cx_http_reply_json(resp, 200, proxy_toxics_json(p));
    return 0;
}

int tp_toxic_get(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    proxy *p = find_proxy(a, req, resp);
    if (!p)
        return 0;
    json_t *t = proxy_toxic_json(p, req->params[1]);
    if (!t)
        cx_http_reply_error(resp, 404, "toxic not found");
    else
        cx_http_reply_json(resp, 200, t);
    return 0;
}

static void toxic_create(agent *a, const cx_http_req *req, cx_http_resp *resp, char *fid, size_t fidlen)
{
    proxy *p = find_proxy(a, req, resp);
    if (!p)
        return;
    json_t *body = NULL;
    if (cx_http_body_json(req, resp, 0, &body) < 0)
        return;
    char err[CX_ERRLEN] = "";
    if (proxy_toxic_validate(body, err, sizeof err) < 0) {
        cx_http_reply_err(resp, CX_EINVAL, err);
        json_decref(body);
        return;
    }
    char buf[160], name[160];
    /* Copied: the body is released before the name is used again. */
    snprintf(name, sizeof name, "%s", toxic_name_of(body, buf, sizeof buf));
    json_t *existing = proxy_toxic_json(p, name);
    if (existing) {
        json_decref(existing);
        cx_http_reply_error(resp, 409, "toxic already exists");
        json_decref(body);
        return;
    }
    char tag[256];
    snprintf(tag, sizeof tag, "%s/%s", proxy_name(p), name);
    const char *type = json_string_value(json_object_get(body, "type"));
    json_t *params = json_pack("{s:s,s:O}", "proxy", proxy_name(p), "toxic", body);
    int rc = tp_create_fault(a, resp, type ? type : "toxic", proxy_name(p), params, tag, &tp_toxic_injector,
                             fid, fidlen);
    json_decref(params);
    json_decref(body);
    if (rc < 0)
        return;
    json_t *t = proxy_toxic_json(p, name);
    if (t)
        cx_http_reply_json(resp, 200, t);
    else
        cx_http_reply_error(resp, 500, "toxic vanished right after it was added");
}

int tp_toxic_create(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    const char *auth = "none";
    char fid[64] = "";
    if (api_auth(a, req, resp, tp_open_ok(a), &auth) == 0)
        toxic_create(a, req, resp, fid, sizeof fid);
    api_audit(a, req, resp, fid, auth);
    return 0;
}

int tp_toxic_update(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    const char *auth = "none";
    char fid[64] = "";
    if (api_auth(a, req, resp, tp_open_ok(a), &auth) == 0) {
        proxy *p = find_proxy(a, req, resp);
        json_t *body = NULL;
        if (p && cx_http_body_json(req, resp, 0, &body) == 0) {
            char err[CX_ERRLEN] = "";
            json_t *out = NULL;
            int rc = proxy_toxic_update(p, req->params[1], body, &out, err, sizeof err);
            if (rc == 0) {
                char tag[256];
                snprintf(tag, sizeof tag, "%s/%s", proxy_name(p), req->params[1]);
                reg_find_tag(a->reg, tag, fid, sizeof fid);
                cx_http_reply_json(resp, 200, out);
            } else if (rc == CX_ENOTFOUND) {
                cx_http_reply_error(resp, 404, "toxic not found");
            } else {
                cx_http_reply_err(resp, rc, err);
            }
            json_decref(body);
        }
    }
    api_audit(a, req, resp, fid, auth);
    return 0;
}

int tp_toxic_delete(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    const char *auth = "none";
    char fid[64] = "";
    if (api_auth(a, req, resp, tp_open_ok(a), &auth) == 0) {
        proxy *p = find_proxy(a, req, resp);
        if (p) {
            char tag[256];
            snprintf(tag, sizeof tag, "%s/%s", proxy_name(p), req->params[1]);
            if (tp_revert_tag(a, tag, fid, sizeof fid) == 0 ||
                proxy_toxic_remove(p, req->params[1], NULL, 0) == 0)
                reply_no_content(resp);
            else
                cx_http_reply_error(resp, 404, "toxic not found");
        }
    }
    api_audit(a, req, resp, fid, auth);
    return 0;
}

/* ---- toxiproxy: reset and version ---- */

int tp_reset(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    agent *a = ctx;
    const char *auth = "none";
    if (api_auth(a, req, resp, tp_open_ok(a), &auth) == 0) {
        for (int i = 0; i < a->nproxies; i++) {
            proxy *p = a->proxies[i];
            json_t *toxics = proxy_toxics_json(p);
            size_t k;
            json_t *t;
            json_array_foreach(toxics, k, t)
            {
                const char *name = json_string_value(json_object_get(t, "name"));
                char tag[256];
                snprintf(tag, sizeof tag, "%s/%s", proxy_name(p), name ? name : "");
                tp_revert_tag(a, tag, NULL, 0);
            }
            json_decref(toxics);
            char tag[160];
            snprintf(tag, sizeof tag, "%s/#disabled", proxy_name(p));
            tp_revert_tag(a, tag, NULL, 0);
            proxy_reset(p);
        }
        reply_no_content(resp);
    }
    api_audit(a, req, resp, NULL, auth);
    return 0;
}

int tp_version(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    (void)req;
    cx_http_reply_json(resp, 200, json_pack("{s:s}", "version", "chaosloco-" CHAOSLOCO_VERSION));
    return 0;
}
