/* syncer.h - the synchronizer of a chaosloco training run.
 *
 * What it is: the owner of the global model (parameters, outer Nesterov
 * momentum, per-fragment versions; in ddp modes also the AdamW state), the
 * HTTP API of DESIGN.md §3.1 that learners join, pull from and contribute
 * to, the merge logic of every mode (ddp barrier, ddp-elastic deadline,
 * diloco barrier, decoupled per-fragment rounds with quorum and grace), the
 * eval loss of the global model, the event log and checkpoints.
 * What it is not: a learner. It never trains; the global state is initialised
 * from the seed (or a checkpoint) before any learner joins, and an untrained
 * learner never seeds it; only a learner that holds a copy newer than the
 * syncer's state (a lost or stale state dir) can hand it back (rebuild).
 *
 * Threads: MHD handler threads (one per connection) and one ticker thread
 * (deadlines, absent learners, eval, checkpoints) share the state under one
 * mutex with condition variables; eval and checkpoint writes run outside the
 * lock on snapshots. See docs/internals/syncer.md.
 */
#ifndef TRN_SYNCER_H
#define TRN_SYNCER_H

#include <signal.h>
#include <stddef.h>

#include "trainer/config.h"

typedef struct syncer syncer;

/* What a syncer that started without a valid checkpoint does when a
 * learner reports it holds trained fragments (--on-lost-state). */
typedef enum syncer_lost_state {
    SYNCER_LOST_REBUILD = 0, /* rebuild the global state from the learners (default) */
    SYNCER_LOST_REFUSE = 1,  /* serve nothing (503) until restarted with the state dir restored */
} syncer_lost_state;

typedef struct syncer_opts {
    config cfg;            /* effective training config */
    const char *listen;    /* "127.0.0.1:7070" */
    const char *state_dir; /* checkpoints, events.jsonl, listen.addr */
    /* Credentials (trainer/credential.h) the syncer accepts: this dir's
     * files; NULL: <state_dir>/credentials, created at the first start with
     * one learner-<i>.cred per expected learner, admin.cred and read.cred,
     * and kept across restarts. */
    const char *credentials_dir;
    int insecure_no_auth; /* 1: no credential checks (loopback listen only; syncer_main checks) */
    const char *tls_cert; /* PEM certificate chain file: serve HTTPS; NULL: HTTP */
    const char *tls_key;  /* its PEM private key file (mode 0600 like a credential) */
    int on_lost_state;    /* syncer_lost_state */
} syncer_opts;

/* Build the model from the seed (or restore the newest valid checkpoint in
 * state_dir), open the event log, start serving and write listen.addr.
 * Learners that hold fragments newer than what it restored (all of them
 * after a lost or corrupt state dir) are asked to upload them at join and
 * the global state is rebuilt from the newest copies (docs/internals/
 * syncer.md "Rebuild from the learners"). NULL with err on failure. */
syncer *syncer_new(const syncer_opts *o, char *err, size_t errlen);
/* Block until *stop becomes non-zero (set by a signal handler). */
void syncer_run(syncer *s, volatile sig_atomic_t *stop);
/* Stop serving, write a final checkpoint, free. NULL is a no-op. */
void syncer_free(syncer *s);

/* The route table and its access rules (for the test that every route has
 * one): the number of routes, and for route i its method and pattern and
 * the name of its access rule ("learner", "admin", "read"), or NULL when it
 * has none (such a route is refused with 403: the table fails closed). */
size_t syncer_route_count(void);
const char *syncer_route_access(size_t i, const char **method, const char **pattern);

#endif
