/* tp_toxics.c - the Toxiproxy toxics routes: list, get, create, update,
 * delete under /proxies/{name}/toxics (toxiproxy.h has the table). Each is
 * one op run through tp_px_call; a created toxic is a registered fault
 * tagged "<proxy>/<toxic>" (tp_internal.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/registry.h"
#include "agent/toxiproxy.h"
#include "agent/tp_faults.h"
#include "agent/tp_internal.h"
#include "common/log.h"
#include "common/parse.h"
#include "injectors/proxy/proxy.h"

static int toxics_list(px_req *r, json_t **out, tp_err *e)
{
    (void)e;
    *out = proxy_toxics_json(r->x->p);
    return 0;
}

int tp_toxics_list(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_px_call(ctx, req, resp, toxics_list, 0);
}

int tp_toxic_get(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_px_call(ctx, req, resp, NULL, PX_TOXIC);
}

/* Toxiproxy ignores keys it does not know; say which ones were. */
static json_t *lenient(json_t *body, const char *type, const char *what)
{
    json_t *ignored = json_array();
    json_t *out = proxy_toxic_lenient(body, type, ignored);
    if (json_array_size(ignored) > 0) {
        char *list = json_dumps(ignored, JSON_COMPACT);
        char safe[512];
        cx_utf8_sanitize(list ? list : "", safe, sizeof safe);
        cx_info("toxiproxy: %s: ignored unknown keys %s (as Toxiproxy does)", what, safe);
        free(list);
    }
    json_decref(ignored);
    return out;
}

static int toxic_create(px_req *r, json_t **out, tp_err *e)
{
    agent_px *x = r->x;
    char err[CX_ERRLEN] = "";
    json_t *toxic = lenient(r->body, NULL, "toxic create");
    if (!toxic)
        return tp_fail(e, 500, "out of memory");
    int rc = proxy_toxic_validate(toxic, err, sizeof err);
    char buf[160], name[160];
    snprintf(name, sizeof name, "%s", tp_toxic_name(toxic, buf, sizeof buf));
    json_t *existing = rc == 0 ? proxy_toxic_json(x->p, name) : NULL;
    if (rc < 0) {
        rc = tp_fail(e, 400, "%s", err);
    } else if (existing) {
        rc = tp_fail(e, 409, "toxic already exists");
    } else {
        char tag[256];
        tp_tag_of(tag, sizeof tag, proxy_name(x->p), name);
        const char *type = json_string_value(json_object_get(toxic, "type"));
        json_t *params = json_pack("{s:s,s:O}", "proxy", proxy_name(x->p), "toxic", toxic);
        rc = tp_fault(r->a, type ? type : "toxic", proxy_name(x->p), params, tag, &tp_toxic_injector, r->fid,
                      sizeof r->fid, e);
        json_decref(params);
        *out = rc == 0 ? proxy_toxic_json(x->p, name) : NULL;
        if (rc == 0 && !*out)
            rc = tp_fail(e, 500, "toxic vanished right after it was added");
    }
    json_decref(existing);
    json_decref(toxic);
    return rc;
}

int tp_toxic_create(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_px_call(ctx, req, resp, toxic_create, PX_BODY | PX_AUDIT);
}

/* The toxic changes in place: the fault that added it stays its fault. */
static int toxic_update(px_req *r, json_t **out, tp_err *e)
{
    const char *name = r->req->params[1];
    const char *type = json_string_value(json_object_get(r->toxic, "type"));
    json_t *upd = lenient(r->body, type ? type : "noop", "toxic update");
    char err[CX_ERRLEN] = "";
    int rc = upd ? proxy_toxic_update(r->x->p, name, upd, out, err, sizeof err) : CX_ENOMEM;
    json_decref(upd);
    if (rc == CX_ENOTFOUND)
        return tp_fail(e, 404, "toxic not found");
    if (rc != 0)
        return tp_fail(e, cx_err_http_status(rc), "%s", err[0] ? err : cx_strerror(rc));
    char tag[256];
    tp_tag_of(tag, sizeof tag, proxy_name(r->x->p), name);
    reg_find_tag(r->a->reg, tag, r->fid, sizeof r->fid);
    return 0;
}

int tp_toxic_update(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_px_call(ctx, req, resp, toxic_update, PX_TOXIC | PX_BODY | PX_AUDIT);
}

/* The fault behind the toxic reverted; a toxic no Toxiproxy call made
 * (the v1 API's) is removed directly. */
static int toxic_delete(px_req *r, json_t **out, tp_err *e)
{
    (void)out;
    const char *name = r->req->params[1];
    char tag[256];
    tp_tag_of(tag, sizeof tag, proxy_name(r->x->p), name);
    if (tp_revert_tag(r->a, tag, r->fid, sizeof r->fid) == 0 ||
        proxy_toxic_remove(r->x->p, name, NULL, 0) == 0)
        return 0;
    return tp_fail(e, 404, "toxic not found");
}

int tp_toxic_delete(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_px_call(ctx, req, resp, toxic_delete, PX_NO_CONTENT | PX_AUDIT);
}
