/* experiment.c - load and strictly validate an experiment file (see
 * experiment.h). Every check reports into a jv_diag and keeps going, so the
 * user sees all problems of a file at once. */
#include "harness/experiment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/rng.h"
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

static void check_fault_type(jv_diag *d, const char *path, const char *type)
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
static void check_fault_params(jv_diag *d, const char *path, const char *type, json_t *params, uint64_t seed)
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

/* ---- the runner's own faults (harness/run.c) ---- */

int exp_harness_fault(const char *type)
{
    return type && strcmp(type, EXP_SYNCER_RESTART) == 0;
}

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

/* ---- merge patch (RFC 7386) ---- */

json_t *exp_merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    if (!out)
        return NULL;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)patch, key, val)
    {
        if (json_is_null(val)) {
            json_object_del(out, key);
            continue;
        }
        json_t *merged = exp_merge_patch(json_object_get(out, key), val);
        if (!merged || json_object_set_new(out, key, merged) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* ---- small helpers ---- */

/* An array at path.key (0 absent, 1 ok, -1 wrong type). */
static int get_array(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                     json_t **out)
{
    json_t *v = json_object_get(obj, key);
    char p[JV_PATHLEN];
    jv_path_key(p, sizeof(p), path, key);
    if (!v) {
        if (required)
            jv_diag_add(d, p, "missing required key");
        return 0;
    }
    if (!json_is_array(v)) {
        char got[64];
        jv_describe(got, sizeof(got), v);
        jv_diag_add(d, p, "expected an array, got %s", got);
        return -1;
    }
    *out = v;
    return 1;
}

static int get_object(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                      json_t **out)
{
    json_t *v = json_object_get(obj, key);
    char p[JV_PATHLEN];
    jv_path_key(p, sizeof(p), path, key);
    if (!v) {
        if (required)
            jv_diag_add(d, p, "missing required key");
        return 0;
    }
    if (!json_is_object(v)) {
        char got[64];
        jv_describe(got, sizeof(got), v);
        jv_diag_add(d, p, "expected an object, got %s", got);
        return -1;
    }
    *out = v;
    return 1;
}

static int nonempty_string(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                           const char **out)
{
    int r = jv_get_string(d, path, obj, key, required, NULL, out);
    if (r == 1 && (*out)[0] == '\0') {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, key);
        jv_diag_add(d, p, "expected a non-empty string, got \"\"");
        return -1;
    }
    return r;
}

/* ---- topology ---- */

static const char *const modes[] = {"ddp", "ddp-elastic", "diloco", "decoupled", NULL};
static const char *const encodings[] = {"f32", "bf16", "int8", "int4", "int2", "q2", NULL};

/* A trainer's argv template at path.key: a non-empty array of non-empty
 * strings whose {placeholders} are known for role (topology.h); *used
 * collects the placeholders it names. NULL-terminated copy, or NULL. */
static char **parse_template(jv_diag *d, const char *path, const json_t *tr, const char *key, topo_role role,
                             int *n, unsigned *used)
{
    json_t *arr = NULL;
    char p[JV_PATHLEN];
    jv_path_key(p, sizeof(p), path, key);
    *n = 0;
    if (get_array(d, path, tr, key, 1, &arr) != 1)
        return NULL;
    size_t len = json_array_size(arr);
    if (len == 0) {
        jv_diag_add(d, p, "expected a command (a non-empty array of strings), got []");
        return NULL;
    }
    char **argv = calloc(len + 1, sizeof *argv);
    for (size_t i = 0; argv && i < len; i++) {
        char pi[JV_PATHLEN], why[256];
        jv_path_idx(pi, sizeof(pi), p, i);
        json_t *v = json_array_get(arr, i);
        if (!json_is_string(v) || !json_string_length(v)) {
            char got[64];
            jv_describe(got, sizeof(got), v);
            jv_diag_add(d, pi, "expected a non-empty string, got %s", got);
        } else if (topo_check_template(role, json_string_value(v), used, why, sizeof why) < 0) {
            jv_diag_add(d, pi, "%s", why);
        }
        argv[i] = strdup(json_is_string(v) ? json_string_value(v) : "");
        *n = (int)i + 1;
    }
    return argv;
}

/* topology.trainer: a foreign trainer's coordinator and learner commands. */
static void parse_trainer(experiment *e, const json_t *doc, const json_t *tr, jv_diag *d)
{
    static const char *const keys[] = {"coordinator", "learner", "cwd", NULL};
    const char *path = "$.topology.trainer";
    jv_check_keys(d, path, tr, keys);
    topo_trainer *t = e->trainer = calloc(1, sizeof *t);
    if (!t) {
        jv_diag_add(d, path, "out of memory");
        return;
    }
    unsigned cu = 0, lu = 0;
    t->coordinator = parse_template(d, path, tr, "coordinator", TOPO_COORDINATOR, &t->ncoordinator, &cu);
    t->learner = parse_template(d, path, tr, "learner", TOPO_LEARNER, &t->nlearner, &lu);
    /* bit i = topo_placeholders(role)[i]: listen 0, state_dir 1; proxy 0, proxy.syncer 1 */
    if (t->coordinator && (~cu & 3u))
        jv_diag_add(d, "$.topology.trainer.coordinator",
                    "expected {listen} (the address it must bind: a syncer_restart keeps it) and {state_dir} "
                    "(where it writes listen.addr), missing %s",
                    (~cu & 3u) == 3u ? "both"
                    : (~cu & 1u)     ? "{listen}"
                                     : "{state_dir}");
    if (t->learner && !(lu & 3u))
        jv_diag_add(d, "$.topology.trainer.learner",
                    "expected {proxy}: the learner must reach the coordinator through its agent's proxy, or "
                    "network faults cannot reach its traffic");
    const char *cwd = NULL;
    if (nonempty_string(d, path, tr, "cwd", 0, &cwd) == 1)
        t->cwd = strdup(cwd);
    /* The default token horizon is learners x steps x batch of chaosloco's
     * own learners: meaningless for another trainer. */
    json_t *hz = json_object_get(doc, "horizon");
    if (!json_object_get(hz, "min_tokens") && !json_object_get(hz, "min_merges"))
        jv_diag_add(
            d, "$.horizon",
            "expected min_tokens or min_merges with topology.trainer (the default, learners x steps x "
            "batch, is chaosloco's own learners' training)");
}

static void parse_topology(experiment *e, const json_t *doc, jv_diag *d)
{
    json_t *tp = NULL;
    e->learners = 0;
    if (get_object(d, "$", doc, "topology", 1, &tp) != 1)
        return;
    static const char *const keys[] = {"learners", "training", "attach", "trainer", NULL};
    jv_check_keys(d, "$.topology", tp, keys);
    int64_t m = 0;
    if (jv_get_int(d, "$.topology", tp, "learners", 1, 1, EXP_MAX_LEARNERS, "a learner count", &m) == 1)
        e->learners = (int)m;

    json_t *tr = NULL;
    int rt = get_object(d, "$.topology", tp, "training", 0, &tr);
    e->training = rt == 1 ? json_deep_copy(tr) : json_object();
    e->mode = strdup("decoupled");
    e->quorum = 1;
    if (rt == 1) {
        /* Known keys are checked here; the rest is the syncer's config and
         * checked strictly by the syncer itself when the run starts. */
        const char *mode = NULL;
        if (jv_get_string(d, "$.topology.training", tr, "mode", 0, modes, &mode) == 1) {
            free(e->mode);
            e->mode = strdup(mode);
        }
        int64_t v = 0;
        int maxq = e->learners ? e->learners : EXP_MAX_LEARNERS;
        if (jv_get_int(d, "$.topology.training", tr, "quorum", 0, 1, maxq, "a quorum (learners)", &v) == 1)
            e->quorum = (int)v;
        jv_get_int(d, "$.topology.training", tr, "fragments", 0, 1, 1 << 20, "a fragment count", &v);
        jv_get_int(d, "$.topology.training", tr, "H", 0, 1, 1 << 30, "inner steps per outer step", &v);
        /* the bounds of trainer/config.c's key, so a file that passes here starts */
        jv_get_int(d, "$.topology.training", tr, "checkpoint_min_ms", 0, 0, 86400000,
                   "ms between syncer checkpoints", &v);
        if (jv_get_int(d, "$.topology.training", tr, "steps", 0, 1, INT64_MAX, "a step count", &v) == 1)
            e->steps = v;
        const char *enc;
        jv_get_string(d, "$.topology.training", tr, "encoding", 0, encodings, &enc);
        /* One source of truth for M: the runner passes topology.learners on. */
        if (json_object_get(tr, "learners"))
            jv_diag_add(d, "$.topology.training.learners",
                        "unexpected key: the learner count is topology.learners");
    }

    json_t *tn = NULL;
    if (get_object(d, "$.topology", tp, "trainer", 0, &tn) == 1) {
        parse_trainer(e, doc, tn, d);
        if (json_object_get(tp, "attach"))
            jv_diag_add(d, "$.topology", "expected at most one of attach and trainer, got both");
    }

    json_t *at = NULL;
    if (get_object(d, "$.topology", tp, "attach", 0, &at) == 1) {
        static const char *const akeys[] = {"syncer", "agents", "token_file", "syncer_credential_file", NULL};
        jv_check_keys(d, "$.topology.attach", at, akeys);
        const char *s = NULL;
        if (nonempty_string(d, "$.topology.attach", at, "syncer", 1, &s) == 1) {
            if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0)
                jv_diag_add(d, "$.topology.attach.syncer", "expected an http:// or https:// URL, got \"%s\"",
                            s);
            e->attach_syncer = strdup(s);
        }
        if (nonempty_string(d, "$.topology.attach", at, "token_file", 0, &s) == 1)
            e->attach_token_file = strdup(s);
        if (nonempty_string(d, "$.topology.attach", at, "syncer_credential_file", 0, &s) == 1)
            e->attach_syncer_credential_file = strdup(s);
        json_t *ag = NULL;
        if (get_array(d, "$.topology.attach", at, "agents", 1, &ag) == 1) {
            size_t n = json_array_size(ag);
            if (e->learners && n != (size_t)e->learners)
                jv_diag_add(d, "$.topology.attach.agents",
                            "expected %d agent URLs (one per learner), got %zu", e->learners, n);
            e->attach_agents = calloc(n + 1, sizeof(char *));
            e->nattach_agents = e->attach_agents ? (int)n : 0;
            for (size_t i = 0; i < n && e->attach_agents; i++) {
                char p[JV_PATHLEN];
                jv_path_idx(p, sizeof(p), "$.topology.attach.agents", i);
                json_t *u = json_array_get(ag, i);
                if (!json_is_string(u) || (strncmp(json_string_value(u), "http://", 7) != 0 &&
                                           strncmp(json_string_value(u), "https://", 8) != 0)) {
                    char got[64];
                    jv_describe(got, sizeof(got), u);
                    jv_diag_add(d, p, "expected an http:// or https:// URL, got %s", got);
                    continue;
                }
                e->attach_agents[i] = strdup(json_string_value(u));
            }
        }
    }
}

/* ---- targets ---- */

static int learners_or_max(const experiment *e)
{
    return e->learners ? e->learners : EXP_MAX_LEARNERS;
}

/* Parse path (an object with exactly one of ids/random/percent). */
static void parse_targets(const experiment *e, const json_t *t, const char *path, exp_targets *out,
                          jv_diag *d)
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
    int m = learners_or_max(e);
    char what[64];
    snprintf(what, sizeof(what), "a learner id");
    json_t *ids = NULL;
    if (get_array(d, path, t, "ids", 0, &ids) == 1) {
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

static void targets_all(const experiment *e, exp_targets *t)
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
    if (nonempty_string(d, path, a, "name", 1, &s) == 1)
        x->name = strdup(s);
    const char *desc;
    jv_get_string(d, path, a, "description", 0, NULL, &desc);
    if (nonempty_string(d, path, a, "fault", 1, &s) == 1) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "fault");
        if (!exp_harness_fault(s)) /* the runner's own faults are not the agents' */
            check_fault_type(d, p, s);
        x->fault = strdup(s);
    }
    json_t *t = NULL;
    if (get_object(d, path, a, "targets", 1, &t) == 1) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "targets");
        parse_targets(e, t, p, &x->targets, d);
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
        nonempty_string(d, path, a, "after", 1, &s);
    }
    jv_get_int(d, path, a, "duration_ms", 1, 1, EXP_MAX_DURATION_MS, "a duration in ms", &x->duration_ms);
    parse_if_not_running(path, a, x, d);
    jv_get_bool(d, path, a, "until_end", 0, &x->until_end);
    json_t *params = NULL;
    int rp = get_object(d, path, a, "params", 0, &params);
    x->params = rp == 1 ? json_deep_copy(params) : json_object();
    if (jv_get_number(d, path, a, "toxicity", 0, 0.0, 1.0, "a toxicity", &x->toxicity) == 1)
        x->has_toxicity = 1;
    int64_t seed;
    if (jv_get_int(d, path, a, "seed", 0, 0, INT64_MAX, "a seed", &seed) == 1) {
        x->seed = (uint64_t)seed;
        x->has_seed = 1;
    } else
        x->seed = exp_action_seed(e->seed, idx);
    if (x->fault && rp >= 0 && x->params && exp_harness_fault(x->fault)) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "params");
        check_harness_params(d, p, x->params);
    }
    if (x->fault && rp >= 0 && x->params && exp_fault_known(x->fault)) {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, "params");
        check_fault_params(d, p, x->fault, x->params, x->seed);
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

/* ---- chaos ---- */

static const char *const dists[] = {"fixed", "exponential", "uniform", NULL};

static void parse_chaos(experiment *e, const json_t *c, jv_diag *d)
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
    if (get_object(d, path, c, "recovery", 1, &r) == 1) {
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
    if (get_array(d, path, c, "faults", 1, &f) == 1) {
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
            if (nonempty_string(d, p, fi, "type", 1, &type) == 1) {
                char pt[JV_PATHLEN];
                jv_path_key(pt, sizeof(pt), p, "type");
                check_fault_type(d, pt, type);
                cf->type = strdup(type);
            }
            if (jv_get_number(d, p, fi, "weight", 0, 0.0, INFINITY, "a weight", &cf->weight) == 1 &&
                cf->weight <= 0.0)
                jv_diag_add(d, p, "expected a weight > 0, got %g", cf->weight);
            json_t *params = NULL;
            int rp = get_object(d, p, fi, "params", 0, &params);
            cf->params = rp == 1 ? json_deep_copy(params) : json_object();
            if (cf->type && rp >= 0 && exp_fault_known(cf->type)) {
                char pp[JV_PATHLEN];
                jv_path_key(pp, sizeof(pp), p, "params");
                check_fault_params(d, pp, cf->type, cf->params, e->seed);
            }
        }
    }
    int64_t k;
    if (jv_get_int(d, path, c, "min_live", 0, 0, learners_or_max(e), "a number of live learners", &k) == 1)
        x->min_live = (int)k;
    x->start_s = 0.0;
    x->end_s = INFINITY;
    jv_get_number(d, path, c, "start_s", 0, 0.0, INFINITY, "seconds", &x->start_s);
    if (jv_get_number(d, path, c, "end_s", 1, 0.0, INFINITY, "seconds", &x->end_s) == 1 &&
        x->end_s <= x->start_s)
        jv_diag_add(d, "$.chaos.end_s", "expected end_s > start_s (%g), got %g", x->start_s, x->end_s);
}

/* ---- stop conditions and rollbacks ---- */

static void parse_stops(experiment *e, const json_t *arr, jv_diag *d)
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
            e->stop.has_eval_loss_above = jv_get_number(d, p, s, key, 1, 0.0, INFINITY, "a loss in nats",
                                                        &e->stop.eval_loss_above) == 1;
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

static void parse_rollbacks(experiment *e, const json_t *arr, jv_diag *d)
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
        if (nonempty_string(d, p, r, "name", 0, &name) == 1)
            x->name = strdup(name);
        else
            x->name = strdup(kind ? kind : "rollback");
        json_t *t = NULL;
        if (get_object(d, p, r, "targets", 0, &t) == 1) {
            char pt[JV_PATHLEN];
            jv_path_key(pt, sizeof(pt), p, "targets");
            parse_targets(e, t, pt, &x->targets, d);
        } else {
            targets_all(e, &x->targets);
        }
    }
}

/* ---- hypotheses ---- */

static void parse_hyps(experiment *e, const json_t *doc, const char *key, hyp_spec ***out, int *nout,
                       jv_diag *d)
{
    json_t *arr = NULL;
    if (get_array(d, "$", doc, key, 0, &arr) != 1)
        return;
    size_t n = json_array_size(arr);
    *out = calloc(n ? n : 1, sizeof(hyp_spec *));
    if (!*out)
        return;
    char base[JV_PATHLEN];
    jv_path_key(base, sizeof(base), "$", key);
    for (size_t i = 0; i < n; i++) {
        char p[JV_PATHLEN];
        jv_path_idx(p, sizeof(p), base, i);
        hyp_spec *s = hyp_spec_parse(json_array_get(arr, i), p, learners_or_max(e), d);
        if (s)
            (*out)[(*nout)++] = s;
    }
}

/* ---- the document ---- */

static void parse_doc(experiment *e, const json_t *doc, jv_diag *d)
{
    static const char *const keys[] = {
        "$schema",   "title",        "description", "tags",    "seed",
        "topology",  "steady_state", "method",      "chaos",   "stop_conditions",
        "rollbacks", "verify",       "ci",          "horizon", NULL};
    if (jv_check_keys(d, "$", doc, keys) < 0)
        return;
    const char *s;
    jv_get_string(d, "$", doc, "$schema", 0, NULL, &s);
    if (nonempty_string(d, "$", doc, "title", 1, &s) == 1)
        e->title = strdup(s);
    e->description = strdup("");
    if (jv_get_string(d, "$", doc, "description", 0, NULL, &s) == 1) {
        free(e->description);
        e->description = strdup(s);
    }
    json_t *tags = NULL;
    if (get_array(d, "$", doc, "tags", 0, &tags) == 1) {
        e->tags = calloc(json_array_size(tags) + 1, sizeof(char *));
        for (size_t i = 0; i < json_array_size(tags) && e->tags; i++) {
            json_t *t = json_array_get(tags, i);
            if (!json_is_string(t) || !json_string_length(t)) {
                char p[JV_PATHLEN], got[64];
                jv_path_idx(p, sizeof(p), "$.tags", i);
                jv_describe(got, sizeof(got), t);
                jv_diag_add(d, p, "expected a non-empty string, got %s", got);
                continue;
            }
            e->tags[e->ntags++] = strdup(json_string_value(t));
        }
    }
    int64_t seed = 1;
    jv_get_int(d, "$", doc, "seed", 0, 0, INT64_MAX, "a seed", &seed);
    e->seed = (uint64_t)seed;
    json_t *ci = NULL;
    get_object(d, "$", doc, "ci", 0, &ci);

    parse_topology(e, doc, d);
    parse_hyps(e, doc, "steady_state", &e->steady_state, &e->nsteady, d);

    json_t *method = NULL;
    if (get_array(d, "$", doc, "method", 0, &method) == 1) {
        size_t n = json_array_size(method);
        e->method = calloc(n ? n : 1, sizeof(exp_action));
        if (e->method) {
            e->nmethod = (int)n;
            for (size_t i = 0; i < n; i++) {
                char p[JV_PATHLEN];
                jv_path_idx(p, sizeof(p), "$.method", i);
                parse_action(e, (int)i, json_array_get(method, i), p, d);
            }
            resolve_after(e, method, d);
        }
    }
    json_t *chaos = NULL;
    if (get_object(d, "$", doc, "chaos", 0, &chaos) == 1)
        parse_chaos(e, chaos, d);
    json_t *stops = NULL;
    if (get_array(d, "$", doc, "stop_conditions", 0, &stops) == 1)
        parse_stops(e, stops, d);
    json_t *rb = NULL;
    if (get_array(d, "$", doc, "rollbacks", 0, &rb) == 1)
        parse_rollbacks(e, rb, d);
    parse_hyps(e, doc, "verify", &e->verify, &e->nverify, d);
    json_t *hz = NULL;
    if (get_object(d, "$", doc, "horizon", 0, &hz) == 1) {
        static const char *const hkeys[] = {"min_tokens", "min_merges", NULL};
        if (jv_check_keys(d, "$.horizon", hz, hkeys) == 0) {
            jv_get_int(d, "$.horizon", hz, "min_tokens", 0, 1, INT64_MAX, "a token count", &e->min_tokens);
            jv_get_int(d, "$.horizon", hz, "min_merges", 0, 1, 100000000, "a number of merges",
                       &e->min_merges);
        }
    }
    if (!e->nmethod && !e->chaos.enabled && !e->nverify && !e->nsteady && json_is_object(doc))
        jv_diag_add(d, "$", "expected at least one of method, chaos, steady_state, verify, got none");
}

int exp_parse(const json_t *doc, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen)
{
    *out = NULL;
    jv_diag *own = d ? NULL : jv_diag_new();
    jv_diag *dd = d ? d : own;
    if (!dd)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    size_t before = jv_diag_count(dd);
    json_t *use = NULL;
    const char *prefix = "";
    jv_diag *tmp = jv_diag_new();
    if (!tmp) {
        jv_diag_free(own);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    json_t *ci = json_is_object(doc) ? json_object_get(doc, "ci") : NULL;
    if ((flags & EXP_CI) && json_is_object(ci)) {
        json_t *base = json_deep_copy(doc);
        if (base)
            json_object_del(base, "ci");
        use = base ? exp_merge_patch(base, ci) : NULL;
        json_decref(base);
        prefix = "[ci] ";
    } else {
        use = json_incref((json_t *)doc);
    }
    experiment *e = calloc(1, sizeof(*e));
    if (!use || !e) {
        json_decref(use);
        free(e);
        jv_diag_free(tmp);
        jv_diag_free(own);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    parse_doc(e, use, tmp);
    jv_diag_merge(dd, tmp, prefix);
    jv_diag_free(tmp);
    e->doc = use;
    size_t nerr = jv_diag_count(dd) - before;
    if (nerr) {
        int rc = cx_fail(err, errlen, CX_EINVAL, "%zu error%s, first: %s", nerr, nerr == 1 ? "" : "s",
                         jv_diag_get(dd, before));
        exp_free(e);
        jv_diag_free(own);
        return rc;
    }
    jv_diag_free(own);
    *out = e;
    return 0;
}

static int load_common(json_t *doc, const json_error_t *je, const char *name, unsigned flags,
                       experiment **out, jv_diag *d, char *err, size_t errlen)
{
    *out = NULL;
    if (!doc) {
        char where[JV_PATHLEN];
        if (je->line > 0) /* -1 when the file could not be read at all */
            snprintf(where, sizeof(where), "%s:%d:%d", name, je->line, je->column);
        else
            snprintf(where, sizeof(where), "%s", name);
        jv_diag_add(d, where, "%s", je->text);
        return cx_fail(err, errlen, CX_EINVAL, "%s: %s", where, je->text);
    }
    int rc = exp_parse(doc, flags, out, d, err, errlen);
    json_decref(doc);
    return rc;
}

int exp_load(const char *path, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    return load_common(doc, &je, path, flags, out, d, err, errlen);
}

int exp_load_string(const char *text, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    return load_common(doc, &je, "<string>", flags, out, d, err, errlen);
}

/* ---- lifetime and lookups ---- */

static void free_strv(char **v, int n)
{
    if (!v)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void exp_free(experiment *e)
{
    if (!e)
        return;
    free(e->title);
    free(e->description);
    free_strv(e->tags, e->ntags);
    json_decref(e->training);
    free(e->mode);
    free(e->attach_syncer);
    free_strv(e->attach_agents, e->nattach_agents);
    free(e->attach_token_file);
    free(e->attach_syncer_credential_file);
    if (e->trainer) {
        free_strv(e->trainer->coordinator, e->trainer->ncoordinator);
        free_strv(e->trainer->learner, e->trainer->nlearner);
        free(e->trainer->cwd);
        free(e->trainer);
    }
    for (int i = 0; i < e->nsteady; i++)
        hyp_spec_free(e->steady_state[i]);
    free(e->steady_state);
    for (int i = 0; i < e->nmethod; i++) {
        free(e->method[i].name);
        free(e->method[i].fault);
        free(e->method[i].targets.ids);
        json_decref(e->method[i].params);
    }
    free(e->method);
    for (int i = 0; i < e->chaos.nfaults; i++) {
        free(e->chaos.faults[i].type);
        json_decref(e->chaos.faults[i].params);
    }
    free(e->chaos.faults);
    for (int i = 0; i < e->nrollbacks; i++) {
        free(e->rollbacks[i].name);
        free(e->rollbacks[i].targets.ids);
    }
    free(e->rollbacks);
    for (int i = 0; i < e->nverify; i++)
        hyp_spec_free(e->verify[i]);
    free(e->verify);
    json_decref(e->doc);
    free(e);
}

uint64_t exp_action_seed(uint64_t run_seed, int idx)
{
    return cx_seed_derive(run_seed, 1000 + (uint64_t)idx) & INT64_MAX; /* JSON integers are int64 */
}

int exp_action_index(const experiment *e, const char *name)
{
    for (int i = 0; name && i < e->nmethod; i++)
        if (e->method[i].name && strcmp(e->method[i].name, name) == 0)
            return i;
    return -1;
}
