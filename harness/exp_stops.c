/* exp_stops.c - an experiment's $.stop_conditions (each condition at
 * most once) and $.rollbacks (what the runner does after a stop). Part of the
 * experiment loader (experiment.h, exp_internal.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp_internal.h"

/* ---- stop conditions and rollbacks ---- */

/* {"eval_loss_above": X} (one eval above X nats aborts) or
 * {"eval_loss_above": {"nats": X, "evals": N}} (N consecutive evals above X:
 * a transient spike that the next eval no longer shows does not abort). */
static void exp_parse_eval_loss_above(experiment *e, const json_t *s, const char *p, jv_diag *d)
{
    static const char *const keys[] = {"nats", "evals", NULL};
    const json_t *v = json_object_get(s, "eval_loss_above");
    char pk[JV_PATHLEN];
    e->stop.eval_loss_evals = 1;
    jv_path_key(pk, sizeof(pk), p, "eval_loss_above");
    if (!json_is_object(v) && !json_is_number(v)) {
        char got[64];
        jv_describe(got, sizeof(got), v);
        jv_diag_add(d, pk, "expected a loss in nats or {\"nats\": X, \"evals\": N}, got %s", got);
        return;
    }
    if (json_is_number(v)) {
        e->stop.has_eval_loss_above =
            jv_number_value(d, pk, v, 0.0, INFINITY, "a loss in nats", &e->stop.eval_loss_above) == 1;
        return;
    }
    if (jv_check_keys(d, pk, v, keys) < 0)
        return;
    int64_t n = 1;
    int ok =
        jv_get_number(d, pk, v, "nats", 1, 0.0, INFINITY, "a loss in nats", &e->stop.eval_loss_above) == 1;
    if (jv_get_int(d, pk, v, "evals", 0, 1, 1000, "consecutive evals", &n) < 0)
        ok = 0;
    e->stop.eval_loss_evals = (int)n;
    e->stop.has_eval_loss_above = ok;
}

void exp_parse_stops(experiment *e, const json_t *arr, jv_diag *d)
{
    static const char *const keys[] = {"eval_loss_above", "nan", "no_merge_for_s", "agent_unreachable_s",
                                       NULL};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char p[JV_PATHLEN];
        jv_path_idx(p, sizeof(p), "$.stop_conditions", i);
        json_t *s = json_array_get(arr, i);
        if (jv_check_keys(d, p, s, keys) < 0)
            continue;
        if (json_object_size(s) != 1) {
            jv_diag_add(d, p, "expected exactly one condition per entry, got %zu keys", json_object_size(s));
            continue;
        }
        const char *key = json_object_iter_key(json_object_iter(s));
        int dup = (strcmp(key, "eval_loss_above") == 0 && e->stop.has_eval_loss_above) ||
                  (strcmp(key, "nan") == 0 && e->stop.nan) ||
                  (strcmp(key, "no_merge_for_s") == 0 && e->stop.has_no_merge_for_s) ||
                  (strcmp(key, "agent_unreachable_s") == 0 && e->stop.has_agent_unreachable_s);
        if (dup) {
            jv_diag_add(d, p, "expected each condition once, got %s again", key);
            continue;
        }
        if (strcmp(key, "eval_loss_above") == 0) {
            exp_parse_eval_loss_above(e, s, p, d);
        } else if (strcmp(key, "nan") == 0) {
            int b = 0;
            if (jv_get_bool(d, p, s, key, 1, &b) == 1 && !b) {
                char pk[JV_PATHLEN];
                jv_path_key(pk, sizeof(pk), p, key);
                jv_diag_add(d, pk, "expected true (omit the entry to disable), got false");
            }
            e->stop.nan = b;
        } else if (strcmp(key, "no_merge_for_s") == 0) {
            e->stop.has_no_merge_for_s =
                jv_get_number(d, p, s, key, 1, 1e-3, INFINITY, "seconds", &e->stop.no_merge_for_s) == 1;
        } else {
            e->stop.has_agent_unreachable_s =
                jv_get_number(d, p, s, key, 1, 1e-3, INFINITY, "seconds", &e->stop.agent_unreachable_s) == 1;
        }
    }
}

static const char *const rollback_kinds[] = {"revert_faults", "halt", "resume", NULL};

void exp_parse_rollbacks(experiment *e, const json_t *arr, jv_diag *d)
{
    size_t n = json_array_size(arr);
    e->rollbacks = calloc(n ? n : 1, sizeof(exp_rollback));
    if (!e->rollbacks)
        return;
    for (size_t i = 0; i < n; i++) {
        char p[JV_PATHLEN];
        jv_path_idx(p, sizeof(p), "$.rollbacks", i);
        json_t *r = json_array_get(arr, i);
        exp_rollback *x = &e->rollbacks[e->nrollbacks++];
        static const char *const keys[] = {"name", "action", "targets", NULL};
        if (jv_check_keys(d, p, r, keys) < 0)
            continue;
        const char *kind = NULL, *name = NULL;
        if (jv_get_string(d, p, r, "action", 1, rollback_kinds, &kind) == 1)
            x->kind = strcmp(kind, "revert_faults") == 0 ? EXP_RB_REVERT_FAULTS
                      : strcmp(kind, "halt") == 0        ? EXP_RB_HALT
                                                         : EXP_RB_RESUME;
        if (jv_get_nonempty_string(d, p, r, "name", 0, &name) == 1)
            x->name = strdup(name);
        else
            x->name = strdup(kind ? kind : "rollback");
        json_t *t = NULL;
        if (jv_get_object(d, p, r, "targets", 0, &t) == 1) {
            char pt[JV_PATHLEN];
            jv_path_key(pt, sizeof(pt), p, "targets");
            exp_parse_targets(e, t, pt, &x->targets, d);
        } else {
            exp_targets_all(e, &x->targets);
        }
    }
}

int exp_rollback_targets(const experiment *e, const exp_rollback *rb, int *ids)
{
    int n = 0;
    if (rb->targets.kind == EXP_TARGET_IDS && rb->targets.nids > 0) {
        for (int k = 0; k < rb->targets.nids; k++)
            ids[n++] = rb->targets.ids[k];
    } else if (rb->targets.kind == EXP_TARGET_IDS) {
        for (int k = 0; k < e->learners; k++)
            ids[n++] = k;
    } else {
        /* random/percent: the first N, not a draw (the runner and ctk.c agree) */
        int want = rb->targets.kind == EXP_TARGET_RANDOM
                       ? rb->targets.random_n
                       : (int)ceil(rb->targets.percent * e->learners / 100.0);
        for (int k = 0; k < e->learners && n < want; k++)
            ids[n++] = k;
    }
    return n;
}

const char *exp_rollback_kind_name(exp_rollback_kind k)
{
    return rollback_kinds[k];
}
