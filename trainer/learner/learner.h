/* learner.h - one learner unit of a chaosloco training run.
 *
 * What it is: the inner AdamW loop over this learner's data shard, and the
 * exchange with the syncer that the run's mode asks for:
 *   ddp / ddp-elastic  POST every step's gradient to the barrier, apply the
 *                      mean the syncer answers (same AdamW step everywhere);
 *   diloco             every H steps send Δ = Θ_base − θ for every fragment,
 *                      then wait for every merged fragment;
 *   decoupled          a communication thread sends fragment p on the
 *                      stagger schedule (≤ τ in flight) and long-polls the
 *                      merged versions; the inner loop never waits for it.
 * Plus a heartbeat thread (1/s), local checkpoints, rejoin with a new
 * incarnation, the NaN hook, and the give-up rule.
 * What it is not: the source of truth. The config comes from the syncer at
 * join (a learner overrides only batch, steps, slowdown, data, encoding),
 * and every (re)join pulls every fragment before contributing.
 */
#ifndef TRN_LEARNER_LEARNER_H
#define TRN_LEARNER_LEARNER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define LEARNER_MAX_OVERRIDES 8

typedef struct learner_opts {
    const char *syncer_url; /* "http://127.0.0.1:7070" */
    int64_t id;             /* learner id */
    const char *state_dir;  /* local checkpoints */
    const char *credential; /* "learner-<id>.<hex>" sent as Authorization: Bearer on every call, or NULL */
    const char *ca_file;    /* https: PEM CA bundle that signed the syncer's certificate, or NULL (system) */
    const char *syncer_via; /* --syncer-via HOST:PORT: connect there (the agent's proxy), or NULL */
    double give_up_s;       /* s without any answer from the syncer before exit 1 */
    const char *override_name[LEARNER_MAX_OVERRIDES];  /* flags the learner sets for itself */
    const char *override_value[LEARNER_MAX_OVERRIDES]; /* their values */
    int n_overrides;                                   /* entries used */
} learner_opts;

/* Run until --steps inner steps are done (0), *stop is set by a signal (0,
 * after a checkpoint), or a fatal error (negative cx_err, err filled: the
 * syncer gone longer than give_up_s, a config the learner cannot build). */
int learner_run(const learner_opts *o, volatile sig_atomic_t *stop, char *err, size_t errlen);

#endif
