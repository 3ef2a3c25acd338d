/* api.h - the agent's HTTP API v1 (DESIGN.md §4; shapes in docs/api.md).
 *
 * What it is: the route table's v1 handlers, bearer-token checks, strict
 * decoding of fault requests, and the audit of every mutating call. The
 * Toxiproxy-compatible routes live in toxiproxy.c, the Prometheus text in
 * metrics.c; both share the helpers below.
 * What it is not: fault logic (registry.c) or the unit (supervisor.c).
 *
 *   GET    /v1/status            agent + unit + lease + proxies
 *   GET    /v1/faults            every record, active first
 *   POST   /v1/faults            {type, target?, params?, duration_ms, toxicity?, seed?} → 201
 *   DELETE /v1/faults            revert every active fault (revert_reason "delete")
 *   GET    /v1/faults/{id}
 *   DELETE /v1/faults/{id}       revert now (revert_reason "delete")
 *   POST   /v1/halt              revert all, refuse new faults (503) until:
 *   POST   /v1/resume
 *   POST   /v1/lease             {ttl_ms}: renew (ttl_ms 0: release without reverting)
 *   GET    /v1/version
 *   GET    /v1/logs?tail=N       unit log tail, text/plain
 *   GET    /metrics              Prometheus text
 */
#ifndef AGENT_API_H
#define AGENT_API_H

#include "agent/agent.h"
#include "common/http_server.h"

#define API_LOG_TAIL_MAX_LINES 10000
#define API_LOG_TAIL_MAX_BYTES (1024 * 1024)
#define API_LEASE_MAX_TTL_MS (24LL * 3600 * 1000)

/* The server's gate (api.c): Host, Origin, bearer token and content type
 * of every mutating call, checked before its body is read; every refusal
 * logged and audited. Handlers find how the call was authorized in
 * req->auth ("token", or "none" for reads). */
extern const cx_http_gate agent_gate;

/* Check the token of a mutating call. 0 when allowed (*auth gets
 * "token"); otherwise a 401 JSON error is written into resp and CX_EAUTH
 * returned (*auth "none" or "bad"). basic_ok: the token may also come as
 * the password of Basic auth (Toxiproxy routes with --toxiproxy-compat).
 * Called by the gate. */
int api_auth(agent *a, const cx_http_req *req, cx_http_resp *resp, int basic_ok, const char **auth);

/* Decode and check a POST /v1/faults body (a JSON object, strictly: an
 * unknown key is CX_EINVAL naming it). Fills spec, borrowing from body; the
 * registry checks the ranges and the injector the params. Exposed for the
 * fuzz target tests/fuzz/fuzz_fault_request.c. */
int api_decode_fault(json_t *body, reg_spec *spec, char *err, size_t errlen);

/* Append the finished call to the audit log. */
void api_audit(agent *a, const cx_http_req *req, const cx_http_resp *resp, const char *fault_id,
               const char *auth);

#endif
