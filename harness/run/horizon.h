/* horizon.h - the runner's horizon: when the run has trained long enough
 * to end it. It owns the verify list's windows (harness/horizon.h reads
 * each hypothesis's window; this applies them to the run), the token
 * minimum, the step each learner reported last, and the end request
 * (POST /v1/end, or the file form's end file) with its outcome. It is not
 * horizon.h of harness/ (the arithmetic of windows, without a runner) and
 * it judges nothing: output.h asks it whether a window was seen to close.
 *
 * Owner: struct rhorizon_state (runner.h's r->hz) is written here only;
 * the collection and the outputs read end_sent (the run was ended by the
 * horizon, not by the learners' own budget).
 * Threads: the main thread only.
 */
#ifndef HARNESS_RUN_HORIZON_H
#define HARNESS_RUN_HORIZON_H

#include <stddef.h>
#include <stdint.h>

#include "harness/experiment.h"
#include "harness/horizon.h"

typedef struct runner runner;

typedef struct rhorizon_state {
    hz_window *hw;                   /* [nverify] windows of the verify hypotheses */
    int *hw_spec;                    /* [nverify] the verify index of hw[i] */
    int nhw;                         /* windows */
    int64_t steps[EXP_MAX_LEARNERS]; /* the step each learner reported last (syncer status) */
    int64_t min_tokens;              /* tokens the run trains at least */
    int end_sent;    /* 1 once POST /v1/end was sent / the end file written (the horizon was reached) */
    int end_refused; /* 1: the syncer refused POST /v1/end (401/403); not asked again */
} rhorizon_state;

/* The windows of the verify list and the token minimum (the file's, else
 * M x steps x batch for chaosloco's trainer, else none); at the method's
 * start. CX_ENOMEM. */
int rhorizon_init(runner *r);
void rhorizon_cleanup(runner *r);
/* What harness/horizon.h decides on, from what the runner saw; heal holds
 * r->setup.m entries. Notes each learner's last reported step. */
void rhorizon_fill(runner *r, int64_t *heal, hz_progress *p);
/* The horizon reached: end the run (POST /v1/end, or the file form's end
 * file) once; a refusal (401/403) is told once and not asked again, any
 * other failure is retried at the next call. A no-op once sent or refused,
 * or while the harness holds the syncer down (HTTP form). */
void rhorizon_maybe_end(runner *r);
/* 1 when verify entry spec has a window the run did not see close (msg
 * says why); 0 once the horizon ended the run. */
int rhorizon_unobserved(runner *r, int spec, char *msg, size_t len);
/* The horizon's estimate of the end, as of now (the progress line). */
void rhorizon_estimate(runner *r, hz_estimate *est);

#endif
