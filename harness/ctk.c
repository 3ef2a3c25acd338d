/* ctk.c - a chaosloco experiment in Chaos Toolkit's vocabulary (see
 * ctk.h). */
#include "harness/ctk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/agent_client.h"
#include "harness/fault_kinds.h"

/* Seconds a Chaos Toolkit runner would wait for one HTTP call. */
#define CTK_HTTP_TIMEOUT_S 30

static const char SSH_TITLE[] = "chaosloco hypotheses: steady_state before the method, verify after it";

/* ---- ctk: providers ---- */

/* A call on learner l's agent, with that agent's own token. */
static json_t *http_provider(const char *method, const char *url, int learner,
                             json_t *arguments /* stolen, may be NULL */)
{
    json_t *p = json_pack("{s:s, s:s, s:s, s:i}", "type", "http", "method", method, "url", url, "timeout",
                          CTK_HTTP_TIMEOUT_S);
    char bearer[64];
    snprintf(bearer, sizeof bearer, "Bearer ${chaosloco_token_%d}", learner);
    json_t *h = json_pack("{s:s}", "Authorization", bearer);
    if (arguments) {
        json_object_set_new(h, "Content-Type", json_string("application/json"));
        json_object_set_new(p, "arguments", arguments);
    }
    json_object_set_new(p, "headers", h);
    return p;
}

static void agent_url(char *buf, size_t len, int learner, const char *path)
{
    snprintf(buf, len, "${chaosloco_agent_%d}%s", learner, path);
}

/* ---- ctk: the method ---- */

/* How many timeline entries carry this name (a method action on several
 * learners is several entries). */
static int entries_named(const schedule *s, const char *name)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += strcmp(s->entries[i].name, name) == 0;
    return n;
}

static json_t *fault_body(const sched_entry *se)
{
    json_t *b = json_pack("{s:s, s:O, s:I, s:I}", "type", se->fault, "params", se->params, "duration_ms",
                          (json_int_t)se->duration_ms, "seed", (json_int_t)se->seed);
    if (b && se->has_toxicity)
        json_object_set_new(b, "toxicity", json_real(se->toxicity));
    return b;
}

static json_t *entry_activity(const experiment *e, const schedule *s, int k, double *last_at_s)
{
    const sched_entry *se = &s->entries[k];
    int restart = hx_kind_is_harness(se->fault);
    char name[160], url[128];
    if (!restart && entries_named(s, se->name) > 1)
        snprintf(name, sizeof name, "%s (learner %d)", se->name, se->learner);
    else
        snprintf(name, sizeof name, "%s", se->name);
    json_t *prov;
    if (restart) {
        const char *sig = json_string_value(json_object_get(se->params, "signal"));
        int term = sig && (strcmp(sig, "TERM") == 0 || strcmp(sig, "SIGTERM") == 0);
        prov = json_pack("{s:s, s:s, s:[s,s]}", "type", "process", "path", "kill", "arguments",
                         term ? "-TERM" : "-KILL", "${chaosloco_syncer_pid}");
    } else {
        agent_url(url, sizeof url, se->learner, AGC_PATH_FAULTS);
        prov = http_provider("POST", url, se->learner, fault_body(se));
    }
    json_t *cl = json_pack("{s:s, s:s, s:i}", "action", se->name, "fault", se->fault, "learner",
                           restart ? -1 : se->learner);
    json_t *a =
        json_pack("{s:s, s:s, s:o, s:o}", "type", "action", "name", name, "provider", prov, "chaosloco", cl);
    if (se->when == EXP_AT_S) {
        json_object_set_new(cl, "at_s", json_real(se->at_s));
        double wait = se->at_s - *last_at_s;
        if (wait > 0)
            json_object_set_new(a, "pauses", json_pack("{s:f}", "before", wait));
        *last_at_s = se->at_s;
    } else if (se->when == EXP_AT_OUTER_STEP) {
        json_object_set_new(cl, "at_outer_step", json_integer(se->at_outer_step));
    } else if (se->after >= 0 && se->after < e->nmethod) {
        json_object_set_new(cl, "after", json_string(e->method[se->after].name));
    }
    if (se->action < 0)
        json_object_set_new(cl, "chaos", json_true());
    return a;
}

static json_t *method_json(const experiment *e, const schedule *s)
{
    json_t *m = json_array();
    if (!s)
        return m;
    double last_at_s = 0;
    for (int k = 0; k < s->n; k++) {
        const sched_entry *se = &s->entries[k];
        /* the harness restarts the syncer once per action, whatever its targets */
        int dup = 0;
        for (int j = 0; j < k && hx_kind_is_harness(se->fault) && se->action >= 0; j++)
            dup |= s->entries[j].action == se->action;
        if (!dup)
            json_array_append_new(m, entry_activity(e, s, k, &last_at_s));
    }
    return m;
}

/* ---- ctk: hypotheses and rollbacks ---- */

json_t *ctk_probe(const char *label, const char *kind, const json_t *entry, const char *phase)
{
    json_t *prov = json_pack("{s:s, s:s, s:s, s:i}", "type", "http", "method", "GET", "url",
                             "${chaosloco_syncer}/v1/events", "timeout", CTK_HTTP_TIMEOUT_S);
    json_t *cl = json_pack("{s:s, s:s, s:O}", "hypothesis", kind, "phase", phase, "arguments",
                           entry ? (json_t *)entry : json_null());
    return json_pack("{s:s, s:s, s:i, s:o, s:o}", "type", "probe", "name", label, "tolerance", 200,
                     "provider", prov, "chaosloco", cl);
}

static void add_probes(json_t *probes, hyp_spec *const *specs, int n, const char *phase)
{
    for (int i = 0; i < n; i++)
        json_array_append_new(probes, ctk_probe(hyp_spec_label(specs[i]), hyp_spec_kind(specs[i])->name,
                                                hyp_spec_json(specs[i]), phase));
}

/* One rollback call on learner l's agent. */
static json_t *rollback_activity(const char *name, const char *kind, int learner, int several)
{
    char label[160], url[128];
    if (several)
        snprintf(label, sizeof label, "%s (learner %d)", name, learner);
    else
        snprintf(label, sizeof label, "%s", name);
    json_t *prov;
    if (strcmp(kind, "revert_faults") == 0) {
        agent_url(url, sizeof url, learner, AGC_PATH_FAULTS);
        prov = http_provider("DELETE", url, learner, NULL);
    } else {
        agent_url(url, sizeof url, learner, strcmp(kind, "halt") == 0 ? AGC_PATH_HALT : AGC_PATH_RESUME);
        prov = http_provider("POST", url, learner, json_object());
    }
    return json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:i}}", "type", "action", "name", label, "provider", prov,
                     "chaosloco", "action", name, "fault", kind, "learner", learner);
}

static json_t *rollbacks_json(const experiment *e)
{
    json_t *arr = json_array();
    int ids[EXP_MAX_LEARNERS];
    for (int i = 0; i < e->nrollbacks; i++) {
        const exp_rollback *rb = &e->rollbacks[i];
        int n = exp_rollback_targets(e, rb, ids);
        for (int k = 0; k < n; k++)
            json_array_append_new(arr, rollback_activity(rb->name, exp_rollback_kind_name(rb->kind), ids[k], n > 1));
    }
    return arr;
}

/* ---- ctk: the experiment ---- */

static json_t *configuration_json(int learners)
{
    json_t *c = json_pack("{s:s, s:{s:s, s:s, s:s}}", "chaosloco_syncer", "", "chaosloco_syncer_pid", "type",
                          "env", "key", "CHAOSLOCO_SYNCER_PID", "default", "");
    for (int i = 0; c && i < learners; i++) {
        char key[48], env[48];
        snprintf(key, sizeof key, "chaosloco_agent_%d", i);
        json_object_set_new(c, key, json_string(""));
        /* each agent its own token (RUN/tokens/agent-N), never written here */
        snprintf(key, sizeof key, "chaosloco_token_%d", i);
        snprintf(env, sizeof env, "CHAOSLOCO_TOKEN_%d", i);
        json_object_set_new(c, key, json_pack("{s:s, s:s, s:s}", "type", "env", "key", env, "default", ""));
    }
    return c;
}

json_t *ctk_experiment(const experiment *e, const schedule *s)
{
    const char *title = e->title && e->title[0] ? e->title : "chaosloco experiment";
    json_t *tags = json_array();
    for (int i = 0; i < e->ntags; i++)
        if (e->tags[i] && e->tags[i][0])
            json_array_append_new(tags, json_string(e->tags[i]));
    json_t *x = json_pack("{s:s, s:s, s:s, s:o, s:o}", "version", "1.0.0", "title", title, "description",
                          e->description && e->description[0] ? e->description : title, "tags", tags,
                          "configuration", configuration_json(e->learners));
    if (!x)
        return NULL;
    if (e->nsteady + e->nverify > 0) {
        json_t *probes = json_array();
        add_probes(probes, e->steady_state, e->nsteady, "steady_state");
        add_probes(probes, e->verify, e->nverify, "verify");
        json_object_set_new(x, "steady-state-hypothesis",
                            json_pack("{s:s, s:o}", "title", SSH_TITLE, "probes", probes));
    }
    json_object_set_new(x, "method", method_json(e, s));
    json_object_set_new(x, "rollbacks", rollbacks_json(e));
    return x;
}

void ctk_set_endpoints(json_t *ctk, const char *syncer_url, const char *const *agent_urls, int n)
{
    json_t *c = json_object_get(ctk, "configuration");
    if (!c)
        return;
    if (syncer_url)
        json_object_set_new(c, "chaosloco_syncer", json_string(syncer_url));
    for (int i = 0; i < n; i++) {
        char key[48];
        snprintf(key, sizeof key, "chaosloco_agent_%d", i);
        if (agent_urls && agent_urls[i])
            json_object_set_new(c, key, json_string(agent_urls[i]));
    }
}

/* ---- ctk: run records ---- */

static int in_used(json_t *used, json_t *a)
{
    size_t i;
    json_t *u;
    json_array_foreach(used, i, u) if (u == a) return 1;
    return 0;
}

json_t *ctk_activity_for(json_t *ctk, int rollback, const char *name, const char *fault, int learner,
                         json_t *used)
{
    json_t *list = json_object_get(ctk, rollback ? "rollbacks" : "method");
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a)
    {
        json_t *cl = json_object_get(a, "chaosloco");
        const char *an = json_string_value(json_object_get(cl, "action"));
        if (an && name && strcmp(an, name) == 0 &&
            json_integer_value(json_object_get(cl, "learner")) == learner && !in_used(used, a)) {
            if (used)
                json_array_append(used, a);
            return json_deep_copy(a);
        }
    }
    /* not declared (halt-on-abort): made for the call */
    if (rollback)
        return rollback_activity(name ? name : "rollback", fault && fault[0] ? fault : "halt", learner, 0);
    char url[128];
    agent_url(url, sizeof url, learner, AGC_PATH_FAULTS);
    return json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:i}}", "type", "action", "name", name ? name : "action",
                     "provider",
                     http_provider("POST", url, learner, json_pack("{s:s}", "type", fault ? fault : "")),
                     "chaosloco", "action", name ? name : "", "fault", fault ? fault : "", "learner",
                     learner);
}
