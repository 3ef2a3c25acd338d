/* toxiproxy.h - the Toxiproxy-compatible subset of the agent's HTTP API.
 *
 * Field names and units are Toxiproxy's (README "HTTP API"), so existing
 * Toxiproxy clients drive the agent's proxies unchanged:
 *
 *   GET    /proxies                       {name: proxy}
 *   POST   /proxies                       409: proxies come from --proxy only
 *   GET    /proxies/{name}                {name, listen, upstream, enabled, toxics}
 *   POST   /proxies/{name}                {enabled?, upstream?, listen? (must match)}
 *   DELETE /proxies/{name}                409: proxies come from --proxy only
 *   GET    /proxies/{name}/toxics         [toxic]
 *   POST   /proxies/{name}/toxics         {name?, type, stream?, toxicity?, attributes?} → toxic
 *   GET    /proxies/{name}/toxics/{toxic}
 *   POST   /proxies/{name}/toxics/{toxic} {attributes?, toxicity?} → toxic
 *   DELETE /proxies/{name}/toxics/{toxic} 204
 *   POST   /reset                         every proxy enabled, every toxic removed, 204
 *   GET    /version                       {"version": "..."}
 *
 * Every toxic created here, and every disabling of a proxy, is a registered
 * fault (origin "toxiproxy", duration --max-duration-ms), so lease lapse,
 * halt and agent shutdown revert it like any other. Mutating calls need the
 * bearer token unless the agent runs with --toxiproxy-compat on a loopback
 * address (Toxiproxy clients send no token).
 */
#ifndef AGENT_TOXIPROXY_H
#define AGENT_TOXIPROXY_H

#include "common/http_server.h"

int tp_proxies_list(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_proxies_create(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_proxy_get(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_proxy_update(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_proxy_delete(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_toxics_list(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_toxic_create(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_toxic_get(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_toxic_update(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_toxic_delete(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_reset(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_version(void *ctx, const cx_http_req *req, cx_http_resp *resp);

#endif
