/* exp_method.c - an experiment's fault actions: the fault types (from the
 * injector table), targets, $.method (timing, `after` chains) and the
 * Poisson $.chaos block. Part of the experiment loader (experiment.h,
 * exp_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "harness/exp_internal.h"
#include "harness/fault_kinds.h"
#include "injectors/injector.h"

/* ---- fault types ---- */

#define MAX_FAULT_TYPES 64
static const char *table_faults[MAX_FAULT_TYPES + 1];

const char *const *exp_fault_types(void)
{
    /* Rebuilt on each call: cheap, and no lazy-init race between threads
     * writing the same values. */
    int n = 0;
    for (const injector *const *p = injector_table; *p && n < MAX_FAULT_TYPES; p++)
        table_faults[n++] = (*p)->type;
    table_faults[n] = NULL;
    return table_faults;
}

int exp_fault_known(const char *type)
{
    if (!type)
        return 0;
    for (const char *const *t = exp_fault_types(); *t; t++)
        if (strcmp(*t, type) == 0)
            return 1;
    return 0;
}

void exp_check_fault_type(jv_diag *d, const char *path, const char *type)
{
    if (exp_fault_known(type))
        return;
    char list[512] = "";
    size_t used = 0;
    for (const char *const *t = exp_fault_types(); *t && used < sizeof(list); t++) {
        int w = snprintf(list + used, sizeof(list) - used, "%s%s", used ? "|" : "", *t);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    jv_diag_add(d, path, "expected a fault type (injector_table: %s), got \"%s\"", list, type);
}

/* When the agent's injector is linked in, its prepare() validates params
 * exactly as the agent will (it changes nothing by contract). */
void exp_check_fault_params(jv_diag *d, const char *path, const char *type, json_t *params, uint64_t seed)
{
    const injector *inj = injector_find(type);
    if (!inj || !inj->prepare)
        return;
    void *ctx = NULL;
    char err[CX_ERRLEN] = "";
    int rc = inj->prepare(params, seed, &ctx, err, sizeof(err));
    if (rc < 0)
        jv_diag_add(d, path, "rejected by the %s injector: %s", type, err[0] ? err : cx_strerror(rc));
    else if (ctx && inj->free)
        inj->free(ctx);
}

/* ---- the runner's own faults (harness/run/timeline.c) ---- */

/* syncer_restart params: signal "KILL" (default) | "TERM"; down_ms 0..600000
 * (default: the action's duration_ms). */
static void check_harness_params(jv_diag *d, const char *path, const json_t *params)
{
    static const char *const keys[] = {"signal", "down_ms", NULL};
    static const char *const sigs[] = {"KILL", "TERM", NULL};
    if (jv_check_keys(d, path, params, keys) < 0)
        return;
    const char *sig;
    int64_t down;
    jv_get_string(d, path, params, "signal", 0, sigs, &sig);
    jv_get_int(d, path, params, "down_ms", 0, 0, 600000, "a down time in ms", &down);
}

/* ---- targets ---- */

/* Parse path (an object with exactly one of ids/random/percent). */
void exp_parse_targets(const experiment *e, const json_t *t, const char *path, exp_targets *out, jv_diag *d)
{
    static const char *const keys[] = {"ids", "random", "percent", NULL};
    if (jv_check_keys(d, path, t, keys) < 0)
        return;
    int given =
        !!json_object_get(t, "ids") + !!json_object_get(t, "random") + !!json_object_get(t, "percent");
    if (given != 1) {
        jv_diag_add(d, path, "expected exactly one of ids, random, percent, got %d", given);
        return;
    }
    int m = exp_learners_or_max(e);
    char what[64];
    snprintf(what, sizeof(what), "a learner id");
    json_t *ids = NULL;
    if (jv_get_array(d, path, t, "ids", 0, &ids) == 1) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "ids");
        size_t n = json_array_size(ids);
        if (n == 0) {
            jv_diag_add(d, p, "expected at least one learner id, got []");
            return;
        }
        out->kind = EXP_TARGET_IDS;
        out->ids = calloc(n, sizeof(int));
        if (!out->ids)
            return;
        /* ids are 0..m-1 with m <= EXP_MAX_LEARNERS: one flag each keeps the
         * duplicate check linear, one error per repeated element */
        unsigned char seen[EXP_MAX_LEARNERS] = {0};
        for (size_t i = 0; i < n; i++) {
            char pi[JV_PATHLEN];
            jv_path_idx(pi, sizeof(pi), p, i);
            int64_t id;
            if (jv_int_value(d, pi, json_array_get(ids, i), 0, m - 1, what, &id) != 1)
                continue;
            if (seen[id]) {
                jv_diag_add(d, pi, "expected distinct learner ids, got %lld twice", (long long)id);
                continue;
            }
            seen[id] = 1;
            out->ids[out->nids++] = (int)id;
        }
        return;
    }
    int64_t n;
    if (jv_get_int(d, path, t, "random", 0, 1, m, "a number of learners", &n) == 1) {
        out->kind = EXP_TARGET_RANDOM;
        out->random_n = (int)n;
        return;
    }
    double pc;
    if (jv_get_number(d, path, t, "percent", 0, 0.0, 100.0, "a percentage", &pc) == 1) {
        if (pc <= 0.0) {
            char p[JV_PATHLEN];
            jv_path_key(p, sizeof(p), path, "percent");
            jv_diag_add(d, p, "expected a percentage in (0, 100], got %g", pc);
            return;
        }
        out->kind = EXP_TARGET_PERCENT;
        out->percent = pc;
    }
}

void exp_targets_all(const experiment *e, exp_targets *t)
{
    t->kind = EXP_TARGET_IDS;
    t->nids = 0;
    t->ids = calloc(e->learners ? (size_t)e->learners : 1, sizeof(int));
    if (!t->ids)
        return;
    for (int i = 0; i < e->learners; i++)
        t->ids[t->nids++] = i;
}

/* ---- method ---- */

/* What an action does when its unit is not running when it comes due:
 * "wait" (default) up to wait_s (default EXP_WAIT_S), then skip; "skip" at once. */
static void parse_if_not_running(const char *path, const json_t *a, exp_action *x, jv_diag *d)
{
    static const char *const choices[] = {"wait", "skip", NULL};
    const char *m = "wait";
    jv_get_string(d, path, a, "if_not_running", 0, choices, &m);
    x->skip_if_not_running = m && strcmp(m, "skip") == 0;
    double w = EXP_WAIT_S;
    if (jv_get_number(d, path, a, "wait_s", 0, 0.0, EXP_MAX_DURATION_MS / 1000.0, "seconds", &w) == 1 &&
        x->skip_if_not_running)
        jv_diag_add(d, path, "wait_s is only meaningful with if_not_running \"wait\"");
    x->wait_ms = (int64_t)(w * 1000.0);
}

static void parse_action(experiment *e, int idx, const json_t *a, const char *path, jv_diag *d)
{
    static const char *const keys[] = {"name",          "fault",     "targets",     "at_s",
                                       "at_outer_step", "after",     "duration_ms", "params",
                                       "toxicity",      "seed",      "description", "if_not_running",
                                       "wait_s",        "until_end", NULL};
    exp_action *x = &e->method[idx];
    x->after = -1;
    x->toxicity = 1.0;
    if (jv_check_keys(d, path, a, keys) < 0)
        return;
    const char *s;
    if (jv_get_nonempty_string(d, path, a, "name", 1, &s) == 1)
        x->name = strdup(s);
    const char *desc;
    jv_get_string(d, path, a, "description", 0, NULL, &desc);
    if (jv_get_nonempty_string(d, path, a, "fault", 1, &s) == 1) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "fault");
        if (!hx_kind_is_harness(s)) /* the runner's own faults are not the agents' */
            exp_check_fault_type(d, p, s);
        x->fault = strdup(s);
    }
    json_t *t = NULL;
    if (jv_get_object(d, path, a, "targets", 1, &t) == 1) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "targets");
        exp_parse_targets(e, t, p, &x->targets, d);
    }
    int when =
        !!json_object_get(a, "at_s") + !!json_object_get(a, "at_outer_step") + !!json_object_get(a, "after");
    if (when != 1) {
        jv_diag_add(d, path, "expected exactly one of at_s, at_outer_step, after, got %d", when);
    } else if (json_object_get(a, "at_s")) {
        x->when = EXP_AT_S;
        jv_get_number(d, path, a, "at_s", 1, 0.0, INFINITY, "seconds", &x->at_s);
    } else if (json_object_get(a, "at_outer_step")) {
        x->when = EXP_AT_OUTER_STEP;
        jv_get_int(d, path, a, "at_outer_step", 1, 0, INT64_MAX, "an outer step (merge count)",
                   &x->at_outer_step);
    } else {
        x->when = EXP_AFTER; /* resolved once every name is known */
        jv_get_nonempty_string(d, path, a, "after", 1, &s);
    }
    jv_get_int(d, path, a, "duration_ms", 1, 1, EXP_MAX_DURATION_MS, "a duration in ms", &x->duration_ms);
    parse_if_not_running(path, a, x, d);
    jv_get_bool(d, path, a, "until_end", 0, &x->until_end);
    json_t *params = NULL;
    int rp = jv_get_object(d, path, a, "params", 0, &params);
    x->params = rp == 1 ? json_deep_copy(params) : json_object();
    if (jv_get_number(d, path, a, "toxicity", 0, 0.0, 1.0, "a toxicity", &x->toxicity) == 1)
        x->has_toxicity = 1;
    int64_t seed;
    if (jv_get_int(d, path, a, "seed", 0, 0, INT64_MAX, "a seed", &seed) == 1) {
        x->seed = (uint64_t)seed;
        x->has_seed = 1;
    } else
        x->seed = exp_action_seed(e->seed, idx);
    if (x->fault && rp >= 0 && x->params && hx_kind_is_harness(x->fault)) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "params");
        check_harness_params(d, p, x->params);
    }
    if (x->fault && rp >= 0 && x->params && exp_fault_known(x->fault)) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "params");
        exp_check_fault_params(d, p, x->fault, x->params, x->seed);
    }
}

/* Names must be unique and every `after` must name another action, with no
 * cycle. Linear in the number of actions: a name -> first index map (a JSON
 * object is Jansson's hash table), and one walk per chain for cycles. */
static void resolve_after(experiment *e, const json_t *method, jv_diag *d)
{
    json_t *first = json_object(); /* name -> index of its first action */
    for (int i = 0; i < e->nmethod; i++) {
        char p[JV_PATHLEN], pa[JV_PATHLEN];
        jv_path_idx(p, sizeof(p), "$.method", (size_t)i);
        const char *name = e->method[i].name;
        json_t *seen = name && first ? json_object_get(first, name) : NULL;
        if (seen) {
            jv_path_key(pa, sizeof(pa), p, "name");
            jv_diag_add(d, pa, "expected a unique action name, \"%s\" is also $.method[%lld]", name,
                        (long long)json_integer_value(seen));
        } else if (name && first) {
            json_object_set_new(first, name, json_integer(i));
        }
    }
    for (int i = 0; i < e->nmethod; i++) {
        json_t *after = json_object_get(json_array_get(method, (size_t)i), "after");
        if (e->method[i].when != EXP_AFTER || !json_is_string(after) || !json_string_length(after))
            continue;
        char pa[JV_PATHLEN];
        snprintf(pa, sizeof(pa), "$.method[%d].after", i);
        int k;
        if (first) {
            json_t *hit = json_object_get(first, json_string_value(after));
            k = hit ? (int)json_integer_value(hit) : -1;
        } else { /* out of memory for the map: the linear lookup */
            k = exp_action_index(e, json_string_value(after));
        }
        if (k < 0)
            jv_diag_add(d, pa, "expected the name of another action in $.method, got \"%s\" (no such action)",
                        json_string_value(after));
        else if (k == i)
            jv_diag_add(d, pa, "expected another action's name, got this action's own name \"%s\"",
                        json_string_value(after));
        else
            e->method[i].after = k;
    }
    json_decref(first);
    /* Each action waits for at most one other, so the `after` links form
     * chains. Colour each action once: 0 unseen, 1 on the chain being
     * walked, 2 settled and starts, 3 settled and never starts. Reaching a 1
     * closes a cycle, reaching a 3 joins one; every action of such a walk
     * waits forever and is reported, each once. */
    unsigned char *mark = calloc((size_t)e->nmethod + 1, 1);
    int *chain = calloc((size_t)e->nmethod + 1, sizeof(int));
    if (!mark || !chain) {
        free(mark);
        free(chain);
        jv_diag_add(d, "$.method", "out of memory while checking `after` for cycles");
        return;
    }
    for (int i = 0; i < e->nmethod; i++) {
        int n = 0, k = i;
        while (k >= 0 && mark[k] == 0) {
            mark[k] = 1;
            chain[n++] = k;
            k = e->method[k].when == EXP_AFTER ? e->method[k].after : -1;
        }
        int cyclic = k >= 0 && (mark[k] == 1 || mark[k] == 3);
        for (int j = 0; j < n; j++) {
            mark[chain[j]] = cyclic ? 3 : 2;
            if (cyclic) {
                char pa[JV_PATHLEN];
                snprintf(pa, sizeof(pa), "$.method[%d].after", chain[j]);
                jv_diag_add(
                    d, pa,
                    "expected an action that eventually starts at a time or step, got a cycle of `after`");
            }
        }
    }
    free(mark);
    free(chain);
}

void exp_parse_method(experiment *e, const json_t *method, jv_diag *d)
{
    size_t n = json_array_size(method);
    e->method = calloc(n ? n : 1, sizeof(exp_action));
    if (!e->method)
        return;
    e->nmethod = (int)n;
    for (size_t i = 0; i < n; i++) {
        char p[JV_PATHLEN];
        jv_path_idx(p, sizeof(p), "$.method", i);
        parse_action(e, (int)i, json_array_get(method, i), p, d);
    }
    resolve_after(e, method, d);
}

/* ---- chaos ---- */

static const char *const dists[] = {"fixed", "exponential", "uniform", NULL};

void exp_parse_chaos(experiment *e, const json_t *c, jv_diag *d)
{
    static const char *const keys[] = {"mtbf_s", "recovery", "faults", "min_live", "start_s", "end_s", NULL};
    const char *path = "$.chaos";
    exp_chaos *x = &e->chaos;
    x->enabled = 1;
    x->min_live = e->quorum;
    if (jv_check_keys(d, path, c, keys) < 0)
        return;
    jv_get_number(d, path, c, "mtbf_s", 1, 1e-3, INFINITY, "a mean time between failures in s", &x->mtbf_s);
    json_t *r = NULL;
    if (jv_get_object(d, path, c, "recovery", 1, &r) == 1) {
        static const char *const rkeys[] = {"dist", "mean_s", "min_s", "max_s", NULL};
        const char *rp = "$.chaos.recovery";
        jv_check_keys(d, rp, r, rkeys);
        const char *dist = NULL;
        if (jv_get_string(d, rp, r, "dist", 1, dists, &dist) == 1) {
            x->recovery = strcmp(dist, "fixed") == 0         ? EXP_DIST_FIXED
                          : strcmp(dist, "exponential") == 0 ? EXP_DIST_EXPONENTIAL
                                                             : EXP_DIST_UNIFORM;
            int need_mean = x->recovery != EXP_DIST_UNIFORM;
            int need_range = x->recovery == EXP_DIST_UNIFORM;
            x->min_s = 0.0;
            x->max_s = INFINITY;
            jv_get_number(d, rp, r, "mean_s", need_mean, 1e-3, INFINITY, "a recovery time in s", &x->mean_s);
            jv_get_number(d, rp, r, "min_s", need_range, 0.0, INFINITY, "a recovery time in s", &x->min_s);
            if (json_object_get(r, "max_s"))
                jv_get_number(d, rp, r, "max_s", need_range, 1e-3, INFINITY, "a recovery time in s",
                              &x->max_s);
            else if (need_range)
                jv_diag_add(d, "$.chaos.recovery.max_s", "missing required key");
            if (x->recovery == EXP_DIST_FIXED && (json_object_get(r, "min_s") || json_object_get(r, "max_s")))
                jv_diag_add(d, rp, "expected only mean_s for dist fixed, got min_s/max_s");
            if (x->recovery == EXP_DIST_UNIFORM && json_object_get(r, "mean_s"))
                jv_diag_add(d, "$.chaos.recovery.mean_s",
                            "expected min_s and max_s for dist uniform, not mean_s");
            if (x->min_s > x->max_s)
                jv_diag_add(d, "$.chaos.recovery.max_s", "expected max_s >= min_s (%g), got %g", x->min_s,
                            x->max_s);
        }
    }
    json_t *f = NULL;
    if (jv_get_array(d, path, c, "faults", 1, &f) == 1) {
        size_t n = json_array_size(f);
        if (n == 0)
            jv_diag_add(d, "$.chaos.faults", "expected at least one fault, got []");
        x->faults = calloc(n ? n : 1, sizeof(exp_chaos_fault));
        for (size_t i = 0; i < n && x->faults; i++) {
            char p[JV_PATHLEN];
            jv_path_idx(p, sizeof(p), "$.chaos.faults", i);
            json_t *fi = json_array_get(f, i);
            static const char *const fkeys[] = {"type", "weight", "params", NULL};
            exp_chaos_fault *cf = &x->faults[x->nfaults++];
            cf->weight = 1.0;
            if (jv_check_keys(d, p, fi, fkeys) < 0)
                continue;
            const char *type;
            if (jv_get_nonempty_string(d, p, fi, "type", 1, &type) == 1) {
                char pt[JV_PATHLEN];
                jv_path_key(pt, sizeof(pt), p, "type");
                exp_check_fault_type(d, pt, type);
                cf->type = strdup(type);
            }
            if (jv_get_number(d, p, fi, "weight", 0, 0.0, INFINITY, "a weight", &cf->weight) == 1 &&
                cf->weight <= 0.0)
                jv_diag_add(d, p, "expected a weight > 0, got %g", cf->weight);
            json_t *params = NULL;
            int rp = jv_get_object(d, p, fi, "params", 0, &params);
            cf->params = rp == 1 ? json_deep_copy(params) : json_object();
            if (cf->type && rp >= 0 && exp_fault_known(cf->type)) {
                char pp[JV_PATHLEN];
                jv_path_key(pp, sizeof(pp), p, "params");
                exp_check_fault_params(d, pp, cf->type, cf->params, e->seed);
            }
        }
    }
    int64_t k;
    if (jv_get_int(d, path, c, "min_live", 0, 0, exp_learners_or_max(e), "a number of live learners", &k) ==
        1)
        x->min_live = (int)k;
    x->start_s = 0.0;
    x->end_s = INFINITY;
    jv_get_number(d, path, c, "start_s", 0, 0.0, INFINITY, "seconds", &x->start_s);
    if (jv_get_number(d, path, c, "end_s", 1, 0.0, INFINITY, "seconds", &x->end_s) == 1 &&
        x->end_s <= x->start_s)
        jv_diag_add(d, "$.chaos.end_s", "expected end_s > start_s (%g), got %g", x->start_s, x->end_s);
}
