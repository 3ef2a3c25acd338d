/* tp_internal.h - what the Toxiproxy routes' files (toxiproxy.c: proxies,
 * populate, reset, version; tp_toxics.c: toxics) share: the error they
 * answer with, the one path every /proxies/{name}... call runs through,
 * and the registry calls behind a Toxiproxy change. Private to agent/.
 */
#ifndef AGENT_TP_INTERNAL_H
#define AGENT_TP_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "agent/agent.h"
#include "common/err.h"
#include "common/http_server.h"
#include "injectors/injector.h"

/* An error to answer with: status and message. */
typedef struct tp_err {
    int status;
    char msg[CX_ERRLEN];
} tp_err;

/* e = (status, message); returns -1. */
int tp_fail(tp_err *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Calls on one proxy. Every /proxies/{name}[/toxics[/{toxic}]] call runs through tp_px_call:
 *
 *   find the proxy params[0] ........ 404 "proxy not found"
 *   PX_TOXIC: its toxic params[1] ... 404 "toxic not found" (before the
 *                                     body is read, as in Toxiproxy)
 *   PX_BODY: decode the body ........ 400 (cx_http_body_json's answer)
 *   op ............................... 200 *out (204 with PX_NO_CONTENT),
 *                                     or e's status and message
 *
 * A NULL op answers with what was found: the toxic (PX_TOXIC), else the
 * proxy. With PX_AUDIT the call is audited, whatever its answer, with the
 * fault id the op touched. */

enum {
    PX_BODY = 1 << 0,       /* the call has a JSON body */
    PX_TOXIC = 1 << 1,      /* params[1] names a toxic that must exist */
    PX_NO_CONTENT = 1 << 2, /* success is 204, not 200 with *out */
    PX_AUDIT = 1 << 3,      /* the call changes something: audit it */
};

/* One call on one proxy, as the op sees it. */
typedef struct px_req {
    agent *a;
    const cx_http_req *req;
    agent_px *x;   /* the proxy, borrowed (an op may put it and set NULL) */
    json_t *toxic; /* PX_TOXIC: params[1]'s JSON (tp_px_call owns it) */
    json_t *body;  /* PX_BODY: the decoded body (tp_px_call owns it) */
    char fid[64];  /* the fault the call made or touched (audit) */
} px_req;

/* 0 with *out (a new reference tp_px_call answers with, or drops with
 * PX_NO_CONTENT or on failure), or -1 and e. */
typedef int (*px_op)(px_req *r, json_t **out, tp_err *e);

/* Answer one call on one proxy: find it, its toxic, decode the body, run op
 * (flags: PX_*). Always 0 (the answer is in resp). */
int tp_px_call(void *ctx, const cx_http_req *req, cx_http_resp *resp, px_op op, unsigned flags);

/* Register a Toxiproxy-origin fault of type on target, tagged tag (see
 * toxiproxy.c's tags). 0 and its id in fid; else -1 and e. */
int tp_fault(agent *a, const char *type, const char *target, json_t *params, const char *tag,
             const injector *inj, char *fid, size_t fidlen, tp_err *e);

/* Revert the active fault behind a tag (its id in fid); CX_ENOTFOUND when
 * none. */
int tp_revert_tag(agent *a, const char *tag, char *fid, size_t fidlen);

/* buf = "<proxy>/<what>": the tag of a thing on a proxy. */
void tp_tag_of(char *buf, size_t len, const char *proxy_name_, const char *what);

#endif
