/* toxiproxy.c - the Toxiproxy 2.x REST API over the agent's proxies (see
 * toxiproxy.h; the fault kinds are in tp_faults.c, the toxics routes in
 * tp_toxics.c).
 *
 * Tags: every fault made here carries a registry tag so that the Toxiproxy
 * name of a thing finds its fault: "<proxy>/<toxic>", "<proxy>/#disabled",
 * "<proxy>/#proxy" (a dynamic proxy). Proxy and toxic
 * names are [A-Za-z0-9_.-], so "#" never clashes with a toxic name.
 */
#include "agent/toxiproxy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/api.h"
#include "agent/tp_faults.h"
#include "agent/tp_internal.h"
#include "common/err.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/parse.h"

#define TP_MAX_PROXIES (AGENT_MAX_PROXIES + AGENT_MAX_DYN_PROXIES)

int tp_fail(tp_err *e, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = status;
    return -1;
}

static void reply_tp_err(cx_http_resp *resp, const tp_err *e)
{
    cx_http_reply_error(resp, e->status, "%s", e->msg);
}

/* ---- toxiproxy: request ids ---- */

static unsigned char id_proc[5]; /* random per process */
static uint32_t id_counter;      /* atomic; random start */
static pthread_once_t id_once = PTHREAD_ONCE_INIT;

static void id_init(void)
{
    unsigned char r[8] = {0};
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) { /* rare: fall back to time and pid */
        uint64_t x = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
        memcpy(r, &x, sizeof r);
    }
    memcpy(id_proc, r, sizeof id_proc);
    id_counter = (uint32_t)r[5] << 16 | (uint32_t)r[6] << 8 | r[7];
}

void tp_request_id(cx_http_resp *resp)
{
    pthread_once(&id_once, id_init);
    uint32_t n = __atomic_fetch_add(&id_counter, 1, __ATOMIC_RELAXED);
    uint32_t secs = (uint32_t)time(NULL);
    /* 12 bytes (and a zero for the last 5-bit group): seconds, process, counter */
    unsigned char b[13] = {(unsigned char)(secs >> 24),
                           (unsigned char)(secs >> 16),
                           (unsigned char)(secs >> 8),
                           (unsigned char)secs,
                           id_proc[0],
                           id_proc[1],
                           id_proc[2],
                           id_proc[3],
                           id_proc[4],
                           (unsigned char)(n >> 16),
                           (unsigned char)(n >> 8),
                           (unsigned char)n,
                           0};
    static const char digits[] = "0123456789abcdefghijklmnopqrstuv";
    char id[21];
    for (int i = 0; i < 20; i++) { /* 5 bits each, most significant first */
        int bit = i * 5;
        unsigned v = ((unsigned)b[bit / 8] << 8 | b[bit / 8 + 1]) >> (11 - bit % 8);
        id[i] = digits[v & 31];
    }
    id[20] = '\0';
    cx_http_add_header(resp, "X-Toxiproxy-Request-Id", "%s", id);
}

/* ---- toxiproxy: helpers ---- */

static agent_px *find_px(agent *a, const cx_http_req *req, cx_http_resp *resp)
{
    agent_px *x = agent_px_get(a, req->params[0]);
    if (!x)
        cx_http_reply_error(resp, 404, "proxy not found");
    return x;
}

static void reply_no_content(cx_http_resp *resp)
{
    cx_http_reply_bytes(resp, 204, "text/plain", "", 0);
}

/* "HOST:PORT" with HOST resolved to an address ("localhost:0" ->
 * "127.0.0.1:0", "[::1]:0" stays), as the proxy will bind or dial it.
 * An upstream name that does not resolve (yet) is no error, as in the
 * proxy itself (it resolves the name for each connection): out is then the
 * checked text as given. */
static int norm_addr(const char *in, const char *what, char *out, size_t len, tp_err *e)
{
    char err[CX_ERRLEN] = "";
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    if (cx_addr_resolve(in, what, &ss, &sl, err, sizeof err) == 0) {
        cx_addr_format((struct sockaddr *)&ss, out, len);
        return 0;
    }
    if (strcmp(what, "upstream") == 0 && cx_hostport_check(in, what, NULL, 0, NULL, NULL, 0) == 0) {
        snprintf(out, len, "%s", in);
        return 0;
    }
    char m[CX_ERRLEN];
    cx_utf8_sanitize(err, m, sizeof m);
    return tp_fail(e, 400, "%s", m);
}

/* Where a proxy made or re-bound through this API may listen (norm is
 * norm_addr's "IP:PORT" or "[IPv6]:PORT"): on a loopback address
 * (127.0.0.0/8, ::1) or one given with --toxiproxy-listen-allow, on port
 * 0 (any free one) or 1024..65535. The wildcards 0.0.0.0 and :: are no
 * loopback: they are allowed only when listed. The token is no licence for
 * more: whoever holds it would otherwise make the agent (often root) take
 * a privileged port such as 80, or open a relay to the network. The
 * --proxy proxies are the operator's own and not checked. 0, or -1 and e
 * (403). */
static int listen_allowed(const agent *a, const char *norm, tp_err *e)
{
    const char *colon = strrchr(norm, ':');
    int port = colon ? atoi(colon + 1) : -1;
    if (!colon || (port != 0 && port < 1024))
        return tp_fail(e, 403,
                       "listen: %s: port %d is below 1024; a proxy made through the Toxiproxy API listens on "
                       "port 0 (any free one) or 1024..65535",
                       norm, port);
    char ip[64];
    if (norm[0] == '[' && colon > norm + 1 && colon[-1] == ']')
        snprintf(ip, sizeof ip, "%.*s", (int)(colon - norm - 2), norm + 1);
    else
        snprintf(ip, sizeof ip, "%.*s", (int)(colon - norm), norm);
    if (cx_ip_is_loopback(ip))
        return 0;
    char allowed[AGENT_MAX_LISTEN_ALLOW * (sizeof a->o.listen_allow[0] + 1) + 8] = "";
    size_t off = 0;
    for (int i = 0; i < a->o.nlisten_allow; i++) {
        if (strcmp(ip, a->o.listen_allow[i]) == 0)
            return 0;
        off +=
            (size_t)snprintf(allowed + off, sizeof allowed - off, "%s%s", i ? "," : "", a->o.listen_allow[i]);
    }
    return tp_fail(
        e, 403,
        "listen: %s: not an address this agent allows: loopback (127.x.y.z, ::1, localhost) or one given "
        "with --toxiproxy-listen-allow (%s)",
        norm, off ? allowed : "none given");
}

/* Toxiproxy's proxy name rule here: a path segment and a registry target. */
static int name_check(const char *name, tp_err *e)
{
    size_t n = strlen(name);
    int ok = n > 0 && n <= 64 && strcmp(name, "unit") != 0;
    for (size_t i = 0; ok && i < n; i++) {
        char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
             c == '-' || c == '.';
    }
    if (ok)
        return 0;
    char v[128];
    cx_utf8_sanitize(name, v, sizeof v);
    return tp_fail(e, 400, "name: '%s' must be 1..64 characters of [A-Za-z0-9_.-] and not \"unit\"", v);
}

/* Register a Toxiproxy-origin fault. 0 and its id in fid; else e. */
int tp_fault(agent *a, const char *type, const char *target, json_t *params, const char *tag,
             const injector *inj, char *fid, size_t fidlen, tp_err *e)
{
    if (agent_halted(a))
        return tp_fail(e, 503, "agent is halted: Toxiproxy changes are refused until POST /v1/resume");
    reg_spec spec = {
        .type = type,
        .target = target,
        .params = params,
        .until_deleted = 1, /* Toxiproxy keeps what it made until it is deleted */
        .lease = agent_lease_held(a),
        .origin = "toxiproxy",
        .tag = tag,
        .inj = inj,
    };
    json_t *rec = NULL;
    char err[CX_ERRLEN] = "";
    int rc = reg_create(a->reg, &spec, &rec, err, sizeof err);
    if (rec && fid)
        snprintf(fid, fidlen, "%s", json_string_value(json_object_get(rec, "id")));
    json_decref(rec);
    if (rc < 0)
        return tp_fail(e, cx_err_http_status(rc), "%s", err[0] ? err : cx_strerror(rc));
    return 0;
}

/* Revert the active fault behind a tag; CX_ENOTFOUND when none. */
int tp_revert_tag(agent *a, const char *tag, char *fid, size_t fidlen)
{
    char id[64];
    if (reg_find_tag(a->reg, tag, id, sizeof id) < 0)
        return CX_ENOTFOUND;
    if (fid)
        snprintf(fid, fidlen, "%s", id);
    return reg_revert(a->reg, id, "delete", NULL, NULL, 0);
}

void tp_tag_of(char *buf, size_t len, const char *proxy_name_, const char *what)
{
    snprintf(buf, len, "%s/%s", proxy_name_, what);
}

/* A string member: NULL when absent or null; CX_EINVAL when another type. */
static int opt_string(json_t *body, const char *key, const char **out, tp_err *e)
{
    json_t *v = json_object_get(body, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return tp_fail(e, 400, "bad request body: %s: must be a string", key);
    *out = json_string_value(v);
    return 0;
}

static int opt_bool(json_t *body, const char *key, int *out, tp_err *e)
{
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return tp_fail(e, 400, "bad request body: %s: must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

/* ---- toxiproxy: dynamic proxies ---- */

/* Create a proxy through the registry ("proxy" fault). 0 and *out
 * borrowed; else e. */
static int dyn_create(agent *a, const char *name, const char *listen, const char *upstream, int enabled,
                      agent_px **out, char *fid, size_t fidlen, tp_err *e)
{
    *out = NULL;
    if (name_check(name, e) < 0)
        return -1;
    agent_px *x = agent_px_get(a, name);
    if (x) {
        agent_px_put(a, x);
        return tp_fail(e, 409, "proxy already exists");
    }
    char lis[96], up[256];
    if (norm_addr(listen && listen[0] ? listen : "127.0.0.1:0", "listen", lis, sizeof lis, e) < 0 ||
        norm_addr(upstream, "upstream", up, sizeof up, e) < 0)
        return -1;
    if (listen_allowed(a, lis, e) < 0)
        return -1;
    char tag[128];
    tp_tag_of(tag, sizeof tag, name, "#proxy");
    json_t *params =
        json_pack("{s:s,s:s,s:s,s:b}", "name", name, "listen", lis, "upstream", upstream, "enabled", enabled);
    int rc = tp_fault(a, "proxy", "unit", params, tag, &tp_proxy_injector, fid, fidlen, e);
    json_decref(params);
    if (rc < 0)
        return rc;
    *out = agent_px_get(a, name);
    if (!*out)
        return tp_fail(e, 500, "proxy %s vanished right after it was created", name);
    if (!enabled) /* Toxiproxy echoes the listen given until the proxy listens */
        proxy_set_listen_echo((*out)->p, listen && listen[0] ? listen : "127.0.0.1:0");
    return 0;
}

/* Delete a dynamic proxy: every fault on it first (toxics, disabling, ...),
 * then the proxy's own fault. */
static void dyn_delete(agent *a, const char *name, char *fid, size_t fidlen)
{
    int n = reg_revert_match(a->reg, name, NULL, NULL, "delete");
    char tag[128];
    tp_tag_of(tag, sizeof tag, name, "#proxy");
    if (tp_revert_tag(a, tag, fid, fidlen) == CX_ENOTFOUND)
        agent_px_remove(a, name);
    cx_info("toxiproxy: proxy %s deleted (%d fault(s) on it reverted first)", name, n);
}

/* ---- toxiproxy: proxies ---- */

static json_t *all_proxies_json(agent *a)
{
    agent_px *all[TP_MAX_PROXIES];
    int n = agent_px_list(a, all, TP_MAX_PROXIES);
    json_t *o = json_object();
    for (int i = 0; i < n; i++) {
        json_object_set_new(o, proxy_name(all[i]->p), proxy_json(all[i]->p));
        agent_px_put(a, all[i]);
    }
    return o;
}

int tp_proxies_list(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    tp_request_id(resp);
    (void)req;
    cx_http_reply_json(resp, 200, all_proxies_json(ctx));
    return 0;
}

int tp_proxies_create(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    tp_request_id(resp);
    agent *a = ctx;
    char fid[64] = "";
    json_t *body = NULL;
    if (cx_http_body_json(req, resp, 0, &body) == 0) {
        tp_err e = {0};
        const char *name = NULL, *listen = NULL, *upstream = NULL;
        int enabled = 1;
        agent_px *x = NULL;
        int rc = opt_string(body, "name", &name, &e);
        if (rc == 0)
            rc = opt_string(body, "listen", &listen, &e);
        if (rc == 0)
            rc = opt_string(body, "upstream", &upstream, &e);
        if (rc == 0)
            rc = opt_bool(body, "enabled", &enabled, &e);
        if (rc == 0 && (!name || !name[0]))
            rc = tp_fail(&e, 400, "missing required field: name");
        if (rc == 0 && (!upstream || !upstream[0]))
            rc = tp_fail(&e, 400, "missing required field: upstream");
        if (rc == 0)
            rc = dyn_create(a, name, listen, upstream, enabled, &x, fid, sizeof fid, &e);
        if (rc == 0)
            cx_http_reply_json(resp, 201, proxy_json(x->p));
        else
            reply_tp_err(resp, &e);
        agent_px_put(a, x);
        json_decref(body);
    }
    api_audit(a, req, resp, fid, req->auth);
    return 0;
}

/* The answer of /populate: Toxiproxy's shape, an error beside the proxies
 * done so far. */
static void reply_populate(cx_http_resp *resp, const tp_err *e, json_t *done)
{
    if (e)
        cx_http_reply_problem(resp, e->status, NULL, json_pack("{s:o}", "proxies", done ? done : json_null()),
                              "%s", e->msg);
    else
        cx_http_reply_json(resp, 201, json_pack("{s:o}", "proxies", done ? done : json_array()));
}

/* Does a populate entry differ from the proxy of that name (Toxiproxy:
 * listen, resolved, or upstream)? */
static int populate_differs(agent_px *x, const char *listen, const char *upstream)
{
    char cur[96], up[256], want[96];
    tp_err ignore;
    proxy_listen(x->p, cur, sizeof cur);
    proxy_upstream(x->p, up, sizeof up);
    if (!listen || !listen[0] || norm_addr(listen, "listen", want, sizeof want, &ignore) < 0)
        return 1;
    return strcmp(want, cur) != 0 || strcmp(upstream, up) != 0;
}

static int populate_one(agent *a, json_t *item, size_t idx, json_t *done, tp_err *e)
{
    const char *name = NULL, *listen = NULL, *upstream = NULL;
    int enabled = 1;
    if (opt_string(item, "name", &name, e) < 0 || opt_string(item, "listen", &listen, e) < 0 ||
        opt_string(item, "upstream", &upstream, e) < 0 || opt_bool(item, "enabled", &enabled, e) < 0)
        return -1;
    agent_px *x = agent_px_get(a, name);
    if (x && !populate_differs(x, listen, upstream)) {
        json_array_append_new(done, proxy_json(x->p)); /* consistent: left untouched */
        agent_px_put(a, x);
        return 0;
    }
    if (x && x->fixed) {
        agent_px_put(a, x);
        return tp_fail(e, 409,
                       "proxy %s (at proxy %zu) comes from the agent's --proxy flags and cannot be replaced "
                       "(its listen and upstream must match)",
                       name, idx + 1);
    }
    if (x) {
        agent_px_put(a, x);
        dyn_delete(a, name, NULL, 0);
    }
    if (dyn_create(a, name, listen, upstream, enabled, &x, NULL, 0, e) < 0)
        return -1;
    json_array_append_new(done, proxy_json(x->p));
    agent_px_put(a, x);
    return 0;
}

int tp_populate(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    tp_request_id(resp);
    agent *a = ctx;
    tp_err e = {0};
    json_error_t je;
    json_t *arr = req->body_len ? json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je) : NULL;
    int rc = 0;
    if (!arr)
        rc = req->body_len ? tp_fail(&e, 400, "bad request body: invalid JSON at line %d column %d: %s",
                                     je.line, je.column, je.text)
                           : tp_fail(&e, 400, "bad request body: expected a JSON array of proxies");
    else if (!json_is_array(arr))
        rc = tp_fail(&e, 400, "bad request body: expected a JSON array of proxies");
    /* Check every entry before creating anything, as Toxiproxy does. */
    size_t i;
    json_t *item;
    json_array_foreach(arr, i, item)
    {
        if (rc < 0)
            break;
        const char *name = NULL, *upstream = NULL;
        if (!json_is_object(item))
            rc = tp_fail(&e, 400, "bad request body: proxy %zu is not an object", i + 1);
        else if (opt_string(item, "name", &name, &e) < 0 || opt_string(item, "upstream", &upstream, &e) < 0)
            rc = -1;
        else if (!name || !name[0])
            rc = tp_fail(&e, 400, "missing required field: name at proxy %zu", i + 1);
        else if (!upstream || !upstream[0])
            rc = tp_fail(&e, 400, "missing required field: upstream at proxy %zu", i + 1);
    }
    if (rc < 0) {
        reply_populate(resp, &e, NULL);
    } else {
        json_t *done = json_array();
        json_array_foreach(arr, i, item)
        {
            rc = populate_one(a, item, i, done, &e);
            if (rc < 0)
                break;
        }
        reply_populate(resp, rc < 0 ? &e : NULL, done);
    }
    json_decref(arr);
    api_audit(a, req, resp, NULL, req->auth);
    return 0;
}

/* ---- toxiproxy: calls on one proxy (px_call: tp_internal.h) ---- */

int tp_px_call(void *ctx, const cx_http_req *req, cx_http_resp *resp, px_op op, unsigned flags)
{
    tp_request_id(resp);
    px_req r = {.a = ctx, .req = req};
    r.x = find_px(r.a, req, resp);
    if (r.x && (flags & PX_TOXIC)) {
        r.toxic = proxy_toxic_json(r.x->p, req->params[1]);
        if (!r.toxic)
            cx_http_reply_error(resp, 404, "toxic not found");
    }
    int go = r.x && (r.toxic || !(flags & PX_TOXIC)) &&
             (!(flags & PX_BODY) || cx_http_body_json(req, resp, 0, &r.body) == 0);
    if (go) {
        tp_err e = {0};
        json_t *out = NULL;
        if (!op)
            out = r.toxic ? json_incref(r.toxic) : proxy_json(r.x->p);
        int rc = op ? op(&r, &out, &e) : 0;
        if (rc < 0) {
            reply_tp_err(resp, &e);
        } else if (flags & PX_NO_CONTENT) {
            reply_no_content(resp);
        } else {
            cx_http_reply_json(resp, 200, out); /* takes out */
            out = NULL;
        }
        json_decref(out);
    }
    json_decref(r.body);
    json_decref(r.toxic);
    agent_px_put(r.a, r.x);
    if (flags & PX_AUDIT)
        api_audit(r.a, req, resp, r.fid, req->auth);
    return 0;
}

int tp_proxy_get(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_px_call(ctx, req, resp, NULL, 0);
}

/* A --proxy proxy carries the unit's traffic to the upstream the operator
 * gave, the learner's credential with it (Authorization: Bearer
 * learner-N...): whoever could point it elsewhere would receive that
 * credential. So its upstream can be asked for only as it is (up is
 * norm_addr's form of the upstream asked for): 0, or -1 and e (409). */
static int fixed_upstream_check(agent_px *x, const char *upstream, const char *up, tp_err *e)
{
    char cur[256], curn[96];
    tp_err ignored = {0};
    proxy_upstream(x->p, cur, sizeof cur);
    if (strcmp(cur, upstream) == 0 ||
        (norm_addr(cur, "upstream", curn, sizeof curn, &ignored) == 0 && strcmp(curn, up) == 0))
        return 0;
    char v[128];
    cx_utf8_sanitize(upstream, v, sizeof v);
    return tp_fail(
        e, 409,
        "upstream: proxy %s comes from the agent's --proxy flags and carries the unit's traffic, its "
        "credential included, to %s; it cannot be pointed at %s (add a toxic, or disable the proxy, "
        "instead)",
        proxy_name(x->p), cur, v);
}

static int set_enabled(agent *a, agent_px *x, int enabled, char *fid, size_t fidlen, tp_err *e)
{
    const char *name = proxy_name(x->p);
    char tag[128];
    tp_tag_of(tag, sizeof tag, name, "#disabled");
    if (!enabled && proxy_enabled(x->p)) {
        json_t *params = json_pack("{s:s}", "proxy", name);
        int rc = tp_fault(a, "proxy_disabled", name, params, tag, &tp_disable_injector, fid, fidlen, e);
        json_decref(params);
        return rc;
    }
    if (enabled && tp_revert_tag(a, tag, fid, fidlen) == CX_ENOTFOUND && !proxy_enabled(x->p))
        proxy_set_enabled(x->p, true, NULL, 0); /* created disabled, or disabled by a reset race */
    return 0;
}

/* POST|PATCH /proxies/{name}: listen, then upstream, then enabled, each
 * checked before anything changes; answers with the proxy. */
static int proxy_update(px_req *r, json_t **out, tp_err *e)
{
    agent *a = r->a;
    agent_px *x = r->x;
    const char *listen = NULL, *upstream = NULL;
    int enabled = -1;
    if (opt_string(r->body, "listen", &listen, e) < 0 || opt_string(r->body, "upstream", &upstream, e) < 0 ||
        opt_bool(r->body, "enabled", &enabled, e) < 0)
        return -1;
    char lis[96] = "", cur[96], up[256];
    proxy_listen(x->p, cur, sizeof cur);
    if (listen && listen[0] && norm_addr(listen, "listen", lis, sizeof lis, e) < 0)
        return -1;
    int relisten = lis[0] && strcmp(lis, cur) != 0;
    if (upstream && !upstream[0])
        upstream = NULL;
    if (upstream && norm_addr(upstream, "upstream", up, sizeof up, e) < 0)
        return -1;
    if (relisten && x->fixed)
        return tp_fail(e, 409,
                       "listen: proxy %s comes from the agent's --proxy flags and the unit was started with "
                       "its address %s; it cannot be re-bound",
                       proxy_name(x->p), cur);
    if (upstream && x->fixed && fixed_upstream_check(x, upstream, up, e) < 0)
        return -1;
    if (upstream && x->fixed) /* the same one: nothing changes */
        upstream = NULL;
    if (relisten && listen_allowed(a, lis, e) < 0)
        return -1;
    if ((relisten || upstream) && agent_halted(a))
        return tp_fail(e, 503, "agent is halted: Toxiproxy changes are refused until POST /v1/resume");
    char err[CX_ERRLEN] = "";
    if (relisten && proxy_set_listen(x->p, lis, err, sizeof err) < 0)
        return tp_fail(e, 500, "%s", err);
    if (upstream && proxy_set_upstream(x->p, upstream, err, sizeof err) < 0)
        return tp_fail(e, 400, "%s", err);
    if (enabled >= 0 && set_enabled(a, x, enabled, r->fid, sizeof r->fid, e) < 0)
        return -1;
    if (relisten && !proxy_enabled(x->p)) /* as Toxiproxy: as given until it listens */
        proxy_set_listen_echo(x->p, listen);
    *out = proxy_json(x->p);
    return 0;
}

int tp_proxy_update(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_px_call(ctx, req, resp, proxy_update, PX_BODY | PX_AUDIT);
}

/* DELETE /proxies/{name}: a dynamic proxy only. */
static int proxy_delete(px_req *r, json_t **out, tp_err *e)
{
    (void)out;
    if (r->x->fixed)
        return tp_fail(e, 409,
                       "proxy %s comes from the agent's --proxy flags (the unit's own link) and cannot be "
                       "deleted; disable it with {\"enabled\": false} (a revertible fault) instead",
                       proxy_name(r->x->p));
    char name[80];
    snprintf(name, sizeof name, "%s", proxy_name(r->x->p));
    agent_px_put(r->a, r->x); /* put before the delete, which removes it */
    r->x = NULL;
    dyn_delete(r->a, name, r->fid, sizeof r->fid);
    return 0;
}

int tp_proxy_delete(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    return tp_px_call(ctx, req, resp, proxy_delete, PX_NO_CONTENT | PX_AUDIT);
}

/* ---- toxiproxy: reset and version ---- */

/* Toxiproxy: every proxy enabled, every toxic removed. Here that is every
 * Toxiproxy-made fault on a proxy reverted (toxics, disabling), then
 * each proxy reset (toxics the
 * v1 API put there go too, as in Toxiproxy). Proxies created through the
 * API stay. */
int tp_reset(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    tp_request_id(resp);
    agent *a = ctx;
    int n = reg_revert_match(a->reg, NULL, "toxiproxy", "proxy", "delete");
    agent_px *all[TP_MAX_PROXIES];
    int np = agent_px_list(a, all, TP_MAX_PROXIES);
    for (int i = 0; i < np; i++) {
        proxy_reset(all[i]->p);
        agent_px_put(a, all[i]);
    }
    cx_info("toxiproxy: reset: %d fault(s) reverted, %d proxies reset", n, np);
    reply_no_content(resp);
    api_audit(a, req, resp, NULL, req->auth);
    return 0;
}

int tp_version(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    tp_request_id(resp);
    (void)ctx;
    (void)req;
    cx_http_reply_json(resp, 200,
                       json_pack("{s:s,s:s}", "version", TP_COMPAT_VERSION, "chaosloco", CHAOSLOCO_VERSION));
    return 0;
}
