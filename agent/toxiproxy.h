/* toxiproxy.h - the Toxiproxy 2.x REST API on the agent.
 *
 * Paths, fields, status codes and error bodies are Toxiproxy's (its
 * README "HTTP API" and api.go), so existing Toxiproxy clients drive the
 * agent's proxies unchanged:
 *
 *   GET          /proxies                        200 {name: proxy}
 *   POST         /proxies                        {name, upstream, listen?, enabled?} 201 proxy; 409 exists
 *   POST         /populate                       [proxy...] 201 {"proxies": [...]}
 *   GET          /proxies/{name}                 200 {name, listen, upstream, enabled, toxics}
 *   POST|PATCH   /proxies/{name}                 {enabled?, upstream?, listen?} 200 proxy
 *   DELETE       /proxies/{name}                 204; 404 unknown
 *   GET          /proxies/{name}/toxics          200 [toxic]
 *   POST         /proxies/{name}/toxics          {name?, type, stream?, toxicity?, attributes?} 200 toxic
 *   GET          /proxies/{name}/toxics/{toxic}  200 toxic
 *   POST|PATCH   /proxies/{name}/toxics/{toxic}  {attributes?, toxicity?} 200 toxic
 *   DELETE       /proxies/{name}/toxics/{toxic}  204
 *   POST         /reset                          204: every proxy enabled, every toxic removed
 *   GET          /version                        200 {"version": "2.12.0", "chaosloco": "..."}
 *
 * Errors are {"error": "...", "status": N}. As in Toxiproxy, unknown keys
 * of a body (and unknown attributes of a toxic) are ignored; values are
 * still range-checked (400 naming the field).
 *
 * Everything a call changes is a registered fault (tp_faults.h): toxics,
 * disabled proxies, and every proxy created here. As in Toxiproxy they
 * last until deleted (no expiry: reg_spec.until_deleted), and DELETE (of
 * the fault or of the thing), /reset, halt, the lapse of a lease they were
 * made under and shutdown undo them; while halted, such changes are
 * refused (503). The --proxy proxies are the unit's own links: they cannot
 * be deleted (409), replaced by /populate (409), re-bound to another
 * listen address (409) or pointed at another upstream (409: they carry
 * the learner's credential); toxics and disabling work. A proxy created
 * or re-bound here listens on loopback or a --toxiproxy-listen-allow
 * address, port 0 or 1024..65535 (403). See docs/api.md, "Toxiproxy
 * compatibility", for the table.
 *
 * Auth: the gate (api.c) checks Host, Origin and the token of every
 * mutating call before its body is read, with --toxiproxy-compat too
 * (which also takes the token as a Basic auth password); reads are open.
 */
#ifndef AGENT_TOXIPROXY_H
#define AGENT_TOXIPROXY_H

#include "common/http_server.h"

/* The Toxiproxy release whose API this implements (GET /version). */
#define TP_COMPAT_VERSION "2.12.0"

/* Toxiproxy's X-Toxiproxy-Request-Id header on resp: a new id per call,
 * 20 characters of [0-9a-v] (the shape of Toxiproxy's xid: seconds, a
 * per-process random part, a counter). Every Toxiproxy route's answer
 * carries one, refusals by the gate included. */
void tp_request_id(cx_http_resp *resp);

int tp_proxies_list(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_proxies_create(void *ctx, const cx_http_req *req, cx_http_resp *resp);
int tp_populate(void *ctx, const cx_http_req *req, cx_http_resp *resp);
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
