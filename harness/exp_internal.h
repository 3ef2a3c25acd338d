/* exp_internal.h - what the parts of the experiment loader share; private to
 * harness/experiment.c and its exp_*.c parts (the public interface is
 * experiment.h).
 *
 *   experiment.c    the document: top-level keys, the "ci" merge patch,
 *                   hypotheses lists, load, free, lookups
 *   exp_topology.c  $.topology (learners, training, attach, trainer)
 *   exp_method.c    fault types, targets, $.method, $.chaos
 *   exp_stops.c     $.stop_conditions, $.rollbacks
 *
 * The value getters they use are jsonv.h's (jv_get_*); the keys declared
 * with param.h tables are decoded by param_decode.
 * Every function reports each problem into d with its JSON path and keeps
 * going (experiment.h); whatever it allocates into e is freed by exp_free().
 */
#ifndef HARNESS_EXP_INTERNAL_H
#define HARNESS_EXP_INTERNAL_H

#include <jansson.h>

#include "harness/experiment.h"
#include "harness/jsonv.h"

/* The learner count, or EXP_MAX_LEARNERS while it is unknown (bounds ids). */
static inline int exp_learners_or_max(const experiment *e)
{
    return e->learners ? e->learners : EXP_MAX_LEARNERS;
}

/* ---- $.topology (exp_topology.c) ---- */

/* $.topology (tp, the object; NULL when absent or not an object, already
 * reported) of the document doc: sets e->learners, training, mode, quorum,
 * steps, attach_* and trainer. */
void exp_parse_topology(experiment *e, const json_t *doc, const json_t *tp, jv_diag *d);

/* ---- fault types, targets, method, chaos (exp_method.c) ---- */

/* path: an error unless type is in injector_table. */
void exp_check_fault_type(jv_diag *d, const char *path, const char *type);
/* path: an error when the kind's prepare() rejects params. */
void exp_check_fault_params(jv_diag *d, const char *path, const char *type, json_t *params, uint64_t seed);
/* Parse path (an object with exactly one of ids/random/percent) into out. */
void exp_parse_targets(const experiment *e, const json_t *t, const char *path, exp_targets *out, jv_diag *d);
/* Every learner, as ids. */
void exp_targets_all(const experiment *e, exp_targets *t);
/* $.method (an array): e->method, e->nmethod, `after` resolved and checked. */
void exp_parse_method(experiment *e, const json_t *method, jv_diag *d);
/* $.chaos (an object): e->chaos. */
void exp_parse_chaos(experiment *e, const json_t *c, jv_diag *d);

/* ---- stop conditions and rollbacks (exp_stops.c) ---- */

void exp_parse_stops(experiment *e, const json_t *arr, jv_diag *d);
void exp_parse_rollbacks(experiment *e, const json_t *arr, jv_diag *d);

#endif
