/* api.h - the syncer's api component: the route and access tables, the
 * access gate, the HTTP helpers every handler uses, the status and events
 * routes (api.c) and GET /metrics (metrics.c).
 *
 * Owns: s->http (the server) and s->access (struct syncer_access: the
 * credentials, the seal key, the TLS PEMs). It writes no model or
 * component state: the handlers of the other components decode, call
 * their component, encode.
 * Lock: the helpers that read the syncer say "mu held"; the others touch
 * no shared state.
 */
#ifndef TRN_SYNCER_API_H
#define TRN_SYNCER_API_H

#include <stddef.h>
#include <stdint.h>

#include "common/http_server.h"
#include "trainer/credential.h"
#include "trainer/seal.h"
#include "trainer/syncer.h"

/* Who may call (see "syncer: access" in api.c); api.c is its only writer. */
typedef struct syncer_access {
    cred_store *creds; /* credentials accepted; NULL when insecure */
    seal_key seal;     /* from the admin credential: seals served fragments (unset when insecure) */
    char *tls_cert;    /* PEM read from --tls-cert, or NULL */
    char *tls_key;     /* PEM read from --tls-key, or NULL */
    int insecure;      /* 1: --insecure-no-auth, no credential checks */
} syncer_access;

/* Load the credential store of o and derive the seal key from its admin
 * credential (creating the store in o->state_dir on a first start), or
 * note --insecure-no-auth. Start-up only; 0, or -1 with err. */
int syncer_api_access_init(syncer *s, const syncer_opts *o, char *err, size_t errlen);
/* Free s->access, wiping the seal key and the TLS key. */
void syncer_api_access_cleanup(syncer *s);

/* A route handler (common/http_server.h): ctx is the syncer; it takes s->mu
 * itself and answers in resp. Each is listed in the route table
 * (api.c) with its access rule. */
#define SYNCER_HANDLER(name) int name(void *ctx, const cx_http_req *req, cx_http_resp *resp)

/* GET /metrics: the Prometheus text exposition of the counters, gauges and
 * per-learner families. */
SYNCER_HANDLER(syncer_api_metrics);

/* A header of the request ctx (a cx_http_req), for protocol.h's parsers. */
const char *syncer_api_req_header(const void *ctx, const char *name);
/* Parse a path segment as 0..max. 0, or CX_EINVAL. */
int syncer_api_path_int(const char *s, int64_t max, int64_t *out);
/* [{id, offset, length, version}] of every fragment (mu held; new ref). */
json_t *syncer_api_fragments_json(syncer *s);
/* 0 when lo <= v <= hi, else -1 and a 400 naming the call and the field. */
int syncer_api_check_field(cx_http_resp *resp, const char *call, const char *field, int64_t v, int64_t lo,
                           int64_t hi);
/* The same for a real: finite and lo <= v <= hi. */
int syncer_api_check_real(cx_http_resp *resp, const char *call, const char *field, double v, double lo,
                          double hi);
/* In a handler of a learner route: the id the body names must be the
 * credential's. 1 when it may go on; 0 when it was refused (403). */
int syncer_api_learner_is_caller(syncer *s, const cx_http_req *req, cx_http_resp *resp, int64_t id,
                                 const char *call);
/* The learner id whose credential a request carries (with
 * --insecure-no-auth: the id its X-Chaosloco-Learner header names), or -1. */
int64_t syncer_api_caller_learner(const syncer *s, const cx_http_req *req);
/* Serve the routes on o->listen (HTTPS with o->tls_cert and o->tls_key)
 * behind the access gate: 0 with s->http set, or a negative cx_err with
 * err (the caller frees s). Start-up only. */
int syncer_api_listen(syncer *s, const syncer_opts *o, char *err, size_t errlen);

#endif
