/* ctk.h - a chaosloco experiment in Chaos Toolkit's vocabulary.
 *
 * What it is: the translation journal.json embeds as its "experiment", so
 * that Chaos Toolkit's tools (chaoslib's validation, report generators)
 * read our journals. It follows what chaoslib's ensure_experiment_is_valid
 * requires (docs/ctk-experiment.schema.json states it):
 *
 *   title, description (non-empty: the title when the file has none),
 *   tags, configuration, steady-state-hypothesis {title, probes},
 *   method [activity], rollbacks [activity]
 *
 * every activity {type: "action"|"probe", name, provider {type, ...}} with
 * a provider Chaos Toolkit knows:
 *
 *   a fault      http POST ${chaosloco_agent_<i>}/v1/faults with the exact
 *                body the harness sends (type, params, duration_ms, seed,
 *                toxicity); one activity per scheduled fault (each method
 *                action on each of its learners, each chaos draw), in
 *                timeline order, at_s gaps as "pauses": {"before": s}
 *   syncer_restart  process `kill -KILL|-TERM ${chaosloco_syncer_pid}`
 *                (the restart after down_ms is the harness's)
 *   a hypothesis a probe: http GET ${chaosloco_syncer}/v1/events (the
 *                history it is judged on) with tolerance 200; the verdict
 *                itself is chaosloco's (the journal's tolerance_met and
 *                output), Chaos Toolkit cannot compute it
 *   a rollback   http POST /v1/halt, POST /v1/resume, or DELETE /v1/faults
 *                (revert_faults) on each of its learners' agents
 *
 * Each activity also carries chaosloco's own description under the key
 * "chaosloco" (action, fault, learner, timing; hypothesis, phase, entry).
 * No token ever appears: a call on learner i's agent says "Bearer
 * ${chaosloco_token_<i>}", a configuration entry read from
 * $CHAOSLOCO_TOKEN_<i> (default ""): each agent has its own token.
 *
 * What it is not: a way to run chaosloco experiments with Chaos Toolkit
 * (stop conditions, the Poisson schedule's live floor and outer-step
 * timing have no equivalent there); the original file stays in the
 * journal under "chaosloco".
 */
#ifndef HARNESS_CTK_H
#define HARNESS_CTK_H

#include <jansson.h>

#include "harness/experiment.h"
#include "harness/schedule.h"

/* The experiment (new reference). s: the run's timeline, or NULL (then the
 * method is empty: nothing was scheduled). Configuration values are ""
 * until ctk_set_endpoints. */
json_t *ctk_experiment(const experiment *e, const schedule *s);

/* Fill the configuration of a ctk_experiment with the run's addresses:
 * syncer URL, learner i's agent URL (agent_urls[i], n of them; NULL
 * entries stay ""). The syncer's pid (for syncer_restart) and the token
 * are read from $CHAOSLOCO_SYNCER_PID and $CHAOSLOCO_TOKEN_<i> by whoever
 * runs the translation. */
void ctk_set_endpoints(json_t *ctk, const char *syncer_url, const char *const *agent_urls, int n);

/* The activity behind a harness call, for a journal run record (new
 * reference): the first activity of method (rollback 0) or rollbacks
 * (rollback 1) whose chaosloco.action and chaosloco.learner match and
 * which is not in used (an array of the activities already taken, which
 * this appends to; may be NULL). A call the experiment does not declare
 * (the harness's halt-on-abort) gets an activity made for it. */
json_t *ctk_activity_for(json_t *ctk, int rollback, const char *name, const char *fault, int learner,
                         json_t *used);

/* The probe of a hypothesis (new reference), as in the experiment.
 * phase: "steady_state" or "verify". */
json_t *ctk_probe(const char *label, const char *kind, const json_t *entry, const char *phase);

#endif
