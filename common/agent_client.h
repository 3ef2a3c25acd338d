/* agent_client.h - a typed client of the agent's control API, shared by the
 * harness and the dashboard.
 *
 * What it is: one function per call the agent serves to its controllers
 * (POST/GET/DELETE /v1/faults, POST /v1/halt, /v1/resume, /v1/lease, GET
 * /v1/status, GET /v1/logs), with the agent's bearer token, the CA and the
 * timeouts set once per agc, and one error convention for all of them:
 *
 *   0               the agent answered 2xx
 *   CX_EUNAVAIL /   no answer (refused, reset, timed out) after the retries;
 *   CX_ETIMEDOUT    err says why
 *   another cx_err  the agent answered with an error status: 400 CX_EINVAL,
 *                   401/403 CX_EAUTH, 404 CX_ENOTFOUND, 409 CX_ECONFLICT,
 *                   413 CX_ETOOBIG, 503 CX_EUNAVAIL, 504 CX_ETIMEDOUT, else
 *                   CX_EIO; err holds "HTTP <status>: <the agent's error>"
 *
 * and, whatever the outcome, the answer itself in an agc_reply when the
 * caller passes one (status 0 when none came): callers that journal the
 * agent's answer or relay it (the dashboard) get it unchanged.
 * agc_fanout runs one call on many agents in parallel (HALT ALL, `chaosloco
 * halt`), so one hung agent delays no other.
 *
 * What it is not: a model of the agent's state, or a retry policy beyond the
 * transport retries of common/http_client.h (an HTTP answer, any status, is
 * never retried). The paths are also exported (AGC_PATH_*) for the harness's
 * Chaos Toolkit export, which names them in its own JSON.
 *
 * Reasons: the agent's error answers on its own /v1 routes carry, beside
 * the human "error" text and "status", a machine "reason" (agc_reason, by
 * its name). This file holds the one table of them (name and HTTP status),
 * which the agent writes from (agent/api.c) and agc_call decodes once into
 * agc_reply.reason, so callers switch on the enum and never read the text.
 *
 * Ownership: an agc owns one curl handle (keep-alive), so it belongs to one
 * thread at a time. Strings and JSON given to it are borrowed.
 */
#ifndef CX_AGENT_CLIENT_H
#define CX_AGENT_CLIENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/http_client.h"

#define AGC_PATH_FAULTS "/v1/faults"
#define AGC_PATH_HALT "/v1/halt"
#define AGC_PATH_RESUME "/v1/resume"
#define AGC_PATH_LEASE "/v1/lease"
#define AGC_PATH_STATUS "/v1/status"
#define AGC_PATH_LOGS "/v1/logs"

typedef struct agc_opts {
    const char *token;          /* bearer (the agents' token), or NULL */
    const char *ca_file;        /* https agents: PEM CA bundle that signed their certificates, or NULL:
                                   the system's */
    long connect_timeout_ms;    /* per attempt; 0: 1000 */
    long timeout_ms;            /* whole call per attempt; 0: 5000 */
    int retries;                /* extra attempts when no answer came; default 0 */
    size_t max_body;            /* bytes: cap on an answer; 0: 4 MiB */
    cx_http_observe_fn observe; /* sees every answer (common/timebase.h's cx_tb_observe), or NULL */
    void *observe_ctx;          /* its ctx (borrowed: outlives the agc) */
} agc_opts;

/* Why the agent refused a call: the "reason" of its error answer. The
 * table in agent_client.c gives each its wire name and HTTP status. */
typedef enum agc_reason {
    AGC_R_NONE,             /* no reason in the answer (a 2xx, no answer, an older agent, an unknown name) */
    AGC_R_BAD_REQUEST,      /* 400: the request was wrong (its text says where) */
    AGC_R_UNAUTHORIZED,     /* 401 */
    AGC_R_NOT_FOUND,        /* 404: no such fault */
    AGC_R_CONFLICT,         /* 409: the fault conflicts with an active one */
    AGC_R_UNIT_NOT_RUNNING, /* 409: the fault needs a running unit and the unit was not running */
    AGC_R_TOO_LARGE,        /* 413 */
    AGC_R_INTERNAL,         /* 500: the agent's own failure (memory, i/o, system) */
    AGC_R_NOT_SUPPORTED,    /* 501: not possible on this host */
    AGC_R_HALTED,           /* 503: the agent is halted and refuses new faults until POST /v1/resume */
    AGC_R_UNAVAILABLE,      /* 503: a resource the call needs is unavailable or busy */
    AGC_R_TIMED_OUT,        /* 504 */
    AGC_R_COUNT
} agc_reason;

/* The wire name ("unit_not_running"; "" for AGC_R_NONE). */
const char *agc_reason_name(agc_reason r);
/* The HTTP status the agent answers a reason with (0 for AGC_R_NONE). */
int agc_reason_status(agc_reason r);
/* The reason named name; AGC_R_NONE when NULL or unknown. */
agc_reason agc_reason_parse(const char *name);
/* The reason of a cx_err code (common/err.h) when nothing more precise is
 * known: its status is cx_err_http_status(code) (unknown codes: internal). */
agc_reason agc_reason_of_err(int code);

/* One agent's answer to one call. */
typedef struct agc_reply {
    int status;         /* HTTP status, 0 when no answer came */
    agc_reason reason;  /* the error answer's reason (decoded once), AGC_R_NONE otherwise */
    json_t *json;       /* the body as JSON (new reference), or NULL when not JSON */
    cx_http_result raw; /* the body and headers as they came */
} agc_reply;

void agc_reply_init(agc_reply *r);
/* Free what r holds and make it empty again (init state). */
void agc_reply_cleanup(agc_reply *r);
/* Move the JSON answer out of r (new reference for the caller, NULL when
 * there is none); r keeps its status. */
json_t *agc_reply_take_json(agc_reply *r);

typedef struct agc agc;

/* A client of the agent at base_url ("http://127.0.0.1:PORT", a trailing
 * slash is dropped). opts may be NULL. NULL when out of memory. */
agc *agc_new(const char *base_url, const agc_opts *opts);
/* NULL is a no-op. */
void agc_free(agc *c);
/* The base URL (borrowed). */
const char *agc_url(const agc *c);

/* Every call below takes an optional reply (NULL: not wanted) that must
 * have been agc_reply_init()ed; it is reset first and holds the answer
 * afterwards, error or not. */

/* POST /v1/faults with fault ({type, params, duration_ms, ...}, borrowed).
 * On 0, reply->json is the fault record (its "id"). */
int agc_inject(agc *c, const json_t *fault, agc_reply *reply, char *err, size_t errlen);
/* GET /v1/faults: *list is the array of fault records (new reference; the
 * agent's {"faults": [...]} or a bare array), NULL on failure. */
int agc_faults(agc *c, json_t **list, char *err, size_t errlen);
/* GET /v1/faults/ID: one fault record in reply->json. */
int agc_fault(agc *c, const char *id, agc_reply *reply, char *err, size_t errlen);
/* DELETE /v1/faults/ID: revert one fault. id: letters, digits, '-', '_'
 * and '.' only (CX_EINVAL otherwise, nothing is sent). */
int agc_delete_fault(agc *c, const char *id, agc_reply *reply, char *err, size_t errlen);
/* POST /v1/halt (revert every fault, refuse new ones) and POST /v1/resume. */
int agc_halt(agc *c, agc_reply *reply, char *err, size_t errlen);
int agc_resume(agc *c, agc_reply *reply, char *err, size_t errlen);
/* POST /v1/lease {"ttl_ms": ttl_ms}: take or renew the controller's lease;
 * 0 releases it. */
int agc_lease(agc *c, int64_t ttl_ms, agc_reply *reply, char *err, size_t errlen);
/* GET /v1/status: *status is the object (new reference), NULL on failure. */
int agc_status(agc *c, json_t **status, char *err, size_t errlen);
/* GET /v1/logs?tail=N: the unit's last lines, as text in reply->raw. */
int agc_logs(agc *c, int tail, agc_reply *reply, char *err, size_t errlen);

/* ---- fan-out ---- */

/* A call agc_fanout makes on each agent. */
typedef int (*agc_call_fn)(agc *c, agc_reply *reply, char *err, size_t errlen);

/* What one agent of a fan-out answered. */
typedef struct agc_fan_result {
    int rc;              /* the call's return (see the convention above) */
    agc_reply reply;     /* its answer; agc_fanout_cleanup frees it */
    char err[CX_ERRLEN]; /* why it failed, "" when rc == 0 */
} agc_fan_result;

/* Run call on every one of the n agents at urls[] at once (a thread each;
 * inline when a thread cannot start), each with its own agc made from
 * opts[i] (n entries: each agent has a token of its own), and wait for all. results[n] are filled in the order of urls.
 * Returns how many calls returned 0. */
int agc_fanout(const char *const *urls, int n, const agc_opts *opts, agc_call_fn call,
               agc_fan_result *results);
/* Free the replies of n results. */
void agc_fanout_cleanup(agc_fan_result *results, int n);

#endif
