/* decoupled.h - the learner's decoupled mode: a comm thread sends and
 * receives fragments while the inner loop never waits on the network.
 *
 * What it is: the decoupled loop (it starts and stops the comm thread), and
 * the one question others ask about its state. What it is not: the
 * contribution (contrib.h), the pulls (link.h) nor the rebase arithmetic
 * (rebase.h).
 *
 * Owns struct learner_decoupled (L->dec: the outbox and inbox, the
 * per-fragment in-flight state, the overlap wait's counts, the comm
 * thread's flags), made by learner_decoupled_loop and freed by
 * learner_decoupled_free; its shared fields are under L->mu, with its own
 * condition variable. The state machine is drawn in decoupled.c, its
 * invariants checked by assert_decoupled_state (debug builds).
 */
#ifndef TRN_LEARNER_DECOUPLED_H
#define TRN_LEARNER_DECOUPLED_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "trainer/config.h"
#include "trainer/learner/core.h"

/* Queue capacity: a full pull hands the main thread one message per
 * fragment, so the inbox must hold P of them. */
#define LEARNER_DECOUPLED_MAX_QUEUE CONFIG_FRAGMENTS_MAX

/* Decoupled mode's state. The fields marked "shared" are under L->mu
 * (the core's lock: the comm thread also reads and writes core fields such
 * as need_rejoin under it); cv signals their changes. The rest is the
 * main thread's. Written by decoupled.c only; nothing else reads it but
 * through learner_decoupled_sent_accepted (the definition is here for the
 * invariants' unit test). */
typedef struct learner_decoupled {
    /* ---- shared (under L->mu) ---- */
    pthread_cond_t cv;                            /* outbox / inbox changes */
    frag_msg outbox[LEARNER_DECOUPLED_MAX_QUEUE]; /* main -> comm: contributions to POST, oldest first */
    int n_out;                                    /* queued contributions */
    frag_msg inbox[LEARNER_DECOUPLED_MAX_QUEUE];  /* comm -> main: received fragments not yet applied */
    int n_in;                                     /* entries in inbox */
    int reset_all; /* comm -> main: a rejoin happened; inbox holds every fragment */
    int pull_all;  /* main -> comm: re-pull every fragment (non-finite params) */
    int *inflight; /* [P] 1 from enqueue until the merged fragment is applied */
    int *accepted; /* [P] comm -> main: the contribution in flight was accepted (202) */
    int *no_wait;  /* [P] comm -> main: no merged value to wait for at s + tau (refused, or the
                                  202 named no version) */
    int sending;   /* comm is posting a contribution */
    int comm_done; /* comm -> main: the comm thread left its loop (nothing more will be sent) */
    /* ---- main thread only ---- */
    int *pending;               /* [P] due, waiting for a free slot (tau) */
    int64_t *apply_at;          /* [P] step at which the merged value of p's contribution in flight is
                                   applied (its send step + tau; -1 none): an earlier arrival waits in the inbox */
    int *wait_done;             /* [P] 1 once the overlap wait for p's contribution in flight happened */
    int overlap_off;            /* 1 after an overlap wait timed out, until a merged value is on time again */
    int finishing;              /* 1: training is over, the remaining progress is being sent */
    int64_t n_overlap_waits;    /* waits at s + tau */
    int64_t n_overlap_timeouts; /* ... that ended without the value */
    double overlap_wait_ms;     /* ... ms spent waiting */
} learner_decoupled;

/* A new state for P fragments (nothing queued, nothing in flight), or NULL
 * when out of memory. learner_decoupled_loop makes L->dec with it. */
learner_decoupled *learner_decoupled_new(int P);
/* 0 when D (for P fragments) keeps the invariants of decoupled.c's
 * diagram, else -1 with why naming the first one broken: the queues'
 * counts within their capacity, every queued or received message for a
 * fragment 0..P-1 with a buffer, every queued contribution in flight and
 * queued once, at most one on the wire; per fragment, accepted only in
 * flight, pending only when not in flight, apply_at -1 or a step; the
 * overlap counts consistent. The caller holds L->mu (or is alone). */
int learner_decoupled_check(const learner_decoupled *D, int P, char *why, size_t len);
#ifndef NDEBUG
/* assert(learner_decoupled_check(L->dec, L->P) == 0), the reason logged
 * first; the caller holds L->mu. Debug builds only. */
void assert_decoupled_state(const learner *L);
#else
#define assert_decoupled_state(L) ((void)0)
#endif

/* Train in decoupled mode (makes L->dec, starts and stops the comm
 * thread): 0, or a negative cx_err with err. Main thread. */
int learner_decoupled_loop(learner *L, char *err, size_t errlen);
/* 1 when fragment p's contribution in flight was accepted (202); 0 when
 * none is, or outside decoupled mode (L->dec NULL). Any thread; takes
 * L->mu. */
int learner_decoupled_sent_accepted(learner *L, int p);
/* Free decoupled mode's state (after the comm thread stopped); NULL is a
 * no-op. */
void learner_decoupled_free(struct learner_decoupled *d);

#endif
