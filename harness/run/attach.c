/* attach.c - attach mode's start (see attach.h): the harness
 * attaches to a syncer and agents that a cluster engine (Slurm, Kubernetes)
 * starts in whatever order it likes, so it waits for them, bounded.
 *
 * What it waits for, in one deadline (topology.attach.wait_s, or
 * `chaosloco run --attach-wait`; default EXP_ATTACH_WAIT_S):
 *   1. the agents' token file and the syncer credential file, when named,
 *      to exist (the syncer of deploy/slurm/chaosloco.sbatch creates its
 *      credentials at its first start);
 *   2. the syncer to answer GET /v1/status with that credential (200);
 *   3. every agent to answer GET /v1/status (200).
 * Every ATTACH_SAY_MS it logs whom it still waits for and why (the last
 * transport error or status). When the deadline passes, the error names
 * each one that never answered (the run then exits 3). A refusal that no
 * amount of waiting cures (401/403: a wrong or missing credential or
 * token) is an error at once. A signal ends the wait (the run is
 * interrupted). What it is not: a readiness check of the training (the
 * steady state judges that), or a health check during the run.
 */
#include "harness/run/attach.h"

#include "harness/run/runner.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

#define ATTACH_POLL_MS 500 /* between two rounds of probes */
#define ATTACH_SAY_MS 5000 /* between two "still waiting for" lines */
#define ATTACH_LIST_MAX 6  /* parties named in one line; the rest are counted */

/* The attach wait's bound in s: the flag, else the file's. */
static double attach_wait_s(const runner *r)
{
    return r->o->attach_wait_s > 0 ? r->o->attach_wait_s : r->setup.e->attach_wait_s;
}

static const char *attach_cred_file(const runner *r)
{
    return r->o->syncer_credential_file ? r->o->syncer_credential_file : r->setup.e->attach_syncer_credential_file;
}

/* Whom the wait still waits for: up to ATTACH_LIST_MAX "what (why)" items,
 * then a count. */
typedef struct waitlist {
    char text[2048]; /* "syncer http://h:7070 (no answer: ...), agent 2 ..." */
    size_t len;      /* bytes used */
    int n;           /* parties still awaited */
} waitlist;

static void waitlist_add(waitlist *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void waitlist_add(waitlist *w, const char *fmt, ...)
{
    if (w->n++ >= ATTACH_LIST_MAX || w->len >= sizeof w->text)
        return;
    if (w->len > 0)
        w->len += (size_t)snprintf(w->text + w->len, sizeof w->text - w->len, "; ");
    if (w->len >= sizeof w->text)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(w->text + w->len, sizeof w->text - w->len, fmt, ap);
    va_end(ap);
    w->len += k > 0 ? (size_t)k : 0;
    if (w->len > sizeof w->text)
        w->len = sizeof w->text;
}

/* "A; B; and 3 more" into out. */
static void waitlist_say(const waitlist *w, char *out, size_t len)
{
    if (w->n > ATTACH_LIST_MAX)
        snprintf(out, len, "%s; and %d more", w->text, w->n - ATTACH_LIST_MAX);
    else
        snprintf(out, len, "%s", w->text);
}

/* Log the wait's state, at most every ATTACH_SAY_MS (the first at once). */
static void say_waiting(const runner *r, const waitlist *w, int64_t t0, int64_t *said)
{
    int64_t now = cx_mono_ms();
    if (*said && now - *said < ATTACH_SAY_MS)
        return;
    *said = now;
    char what[2200];
    waitlist_say(w, what, sizeof what);
    cx_info("attach: waiting (%.0f s of %.0f s) for %d: %s", (double)(now - t0) / 1000.0, attach_wait_s(r), w->n,
            what);
}

/* 1 when path exists; 0 (with the party added to w) while it does not. */
static int file_there(waitlist *w, const char *what, const char *path)
{
    if (!path || access(path, F_OK) == 0)
        return 1;
    waitlist_add(w, "%s %s (%s)", what, path, strerror(errno));
    return 0;
}

int attach_topology(runner *r, topo **out, char *err, size_t errlen)
{
    const char *cred = attach_cred_file(r);
    int64_t t0 = cx_mono_ms(), said = 0;
    r->att.attach_until_mono = t0 + (int64_t)(attach_wait_s(r) * 1000.0);
    for (;;) {
        waitlist w = {.len = 0};
        int ok = file_there(&w, "the agents' token file", r->setup.e->attach_token_file);
        for (int i = 0; i < r->setup.e->nattach_agents; i++) {
            char what[64];
            snprintf(what, sizeof what, "agent %d's token file", i);
            ok &= file_there(&w, what, r->setup.e->attach_agent_token_files[i]);
        }
        ok &= file_there(&w, "the CA file", r->setup.e->attach_ca_file);
        ok &= file_there(&w, "the syncer credential file", cred);
        if (ok)
            break;
        if (run_interrupted())
            return cx_fail(err, errlen, CX_EUNAVAIL, "attach: interrupted while waiting");
        if (cx_mono_ms() >= r->att.attach_until_mono) {
            char what[2200];
            waitlist_say(&w, what, sizeof what);
            return cx_fail(err, errlen, CX_ETIMEDOUT, "attach: still missing after %.0f s: %s",
                           attach_wait_s(r), what);
        }
        say_waiting(r, &w, t0, &said);
        run_nap(ATTACH_POLL_MS);
    }
    topo_attach_cfg ac = {.syncer_url = r->setup.e->attach_syncer,
                          .agents = r->setup.e->attach_agents,
                          .agent_token_files = r->setup.e->attach_agent_token_files,
                          .n = r->setup.e->nattach_agents,
                          .token_file = r->setup.e->attach_token_file,
                          .syncer_cred_file = cred,
                          .ca_file = r->setup.e->attach_ca_file};
    return topo_attach(&ac, out, err, errlen);
}

/* Probe the syncer once: 1 ready, 0 not yet (w says why), < 0 refused for
 * good (err). */
static int probe_syncer(runner *r, waitlist *w, char *err, size_t errlen)
{
    int st = 0;
    json_t *ans = NULL;
    char e2[CX_ERRLEN] = "", why[CX_ERRLEN + 64];
    cx_http_json(r->setup.sy, "GET", "/v1/status", NULL, &st, &ans, e2, sizeof e2);
    run_answer_error(ans, st, e2, why, sizeof why);
    json_decref(ans);
    if (st == 200)
        return 1;
    if (st == 401 || st == 403) {
        const char *cred = attach_cred_file(r);
        if (cred)
            return cx_fail(err, errlen, CX_EAUTH, "attach: the syncer %s refused the credential in %s (%s)",
                           topo_syncer_url(r->setup.t), cred, why);
        return cx_fail(err, errlen, CX_EAUTH,
                       "attach: the syncer %s needs a credential (%s): give --syncer-credential-file or "
                       "topology.attach.syncer_credential_file (its admin.cred)",
                       topo_syncer_url(r->setup.t), why);
    }
    waitlist_add(w, "syncer %s (%s)", topo_syncer_url(r->setup.t), why);
    return 0;
}

/* Probe agent l once: as probe_syncer. */
static int probe_agent(runner *r, int l, waitlist *w, char *err, size_t errlen)
{
    json_t *st = NULL;
    char e2[CX_ERRLEN] = "";
    int rc = agc_status(r->col.av[l].agent, &st, e2, sizeof e2);
    json_decref(st);
    if (rc == 0)
        return 1;
    if (rc == CX_EAUTH)
        return cx_fail(err, errlen, CX_EAUTH, "attach: agent %d %s refused the harness (%s); check %s", l,
                       topo_agent_url(r->setup.t, l), e2,
                       r->setup.e->attach_agent_token_files && r->setup.e->attach_agent_token_files[l]
                           ? "its topology.attach.agents[].token_file"
                           : "topology.attach.token_file");
    waitlist_add(w, "agent %d %s (%s)", l, topo_agent_url(r->setup.t, l), e2[0] ? e2 : "no answer");
    return 0;
}

int attach_wait(runner *r, char *err, size_t errlen)
{
    int64_t t0 = cx_mono_ms(), said = 0;
    int syncer_ok = 0, waited = 0;
    unsigned char *ok = calloc((size_t)r->setup.m, 1);
    if (!ok)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    int rc = 0;
    for (;;) {
        waitlist w = {.len = 0};
        if (!syncer_ok && (rc = probe_syncer(r, &w, err, errlen)) < 0)
            goto done;
        syncer_ok |= rc == 1;
        for (int l = 0; l < r->setup.m; l++) {
            if (ok[l])
                continue;
            if ((rc = probe_agent(r, l, &w, err, errlen)) < 0)
                goto done;
            ok[l] = rc == 1;
        }
        if (w.n == 0)
            break;
        waited = 1;
        if (run_interrupted()) {
            rc = cx_fail(err, errlen, CX_EUNAVAIL, "attach: interrupted while waiting");
            goto done;
        }
        if (cx_mono_ms() >= r->att.attach_until_mono) {
            char what[2200];
            waitlist_say(&w, what, sizeof what);
            rc = cx_fail(err, errlen, CX_ETIMEDOUT, "attach: no answer within %.0f s from %s",
                         attach_wait_s(r), what);
            goto done;
        }
        say_waiting(r, &w, t0, &said);
        run_nap(ATTACH_POLL_MS);
    }
    rc = 0;
    if (waited)
        cx_info("attach: the syncer and %d agents answer (waited %.1f s)", r->setup.m,
                (double)(cx_mono_ms() - t0) / 1000.0);
done:
    free(ok);
    return rc;
}
