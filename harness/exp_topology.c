/* exp_topology.c - an experiment's $.topology: the learner count, the
 * training keys the harness checks itself (the rest is the syncer's config),
 * attach mode's URLs, a foreign trainer's command templates and the network
 * (loopback or namespaces). Part of the
 * experiment loader (experiment.h, exp_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "harness/exp_internal.h"
#include "harness/param.h"
#include "trainer/config.h"
#include "numerics/encoding.h"

/* ---- topology ---- */

/* bit of {listen} in topo_check_template's used mask (topo_placeholders order) */
#define PH_C_LISTEN_BIT 0

static const char *const network_kinds[] = {"loopback", "netns", NULL};

/* topology.network: loopback (the default) or netns regions (harness/netns.h).
 * Cross-field rules: regions 1..M+1; the link keys only with kind netns, and
 * only when some link crosses regions (regions >= 2); jitter <= delay; not
 * with attach (the harness launches nothing there). */
/* topology.attach.agents[i]: its URL as a string, or {"url", "token_file"}
 * (the agent's own token; each agent may have its own, issue 26). */
static void parse_attach_agent(experiment *e, jv_diag *d, json_t *a, int i)
{
    char at[JV_PATHLEN], p[JV_PATHLEN];
    jv_path_idx(at, sizeof(at), "$.topology.attach.agents", (size_t)i);
    snprintf(p, sizeof p, "%s", at);
    json_t *u = a;
    if (json_is_object(a)) {
        static const char *const keys[] = {"url", "token_file", NULL};
        jv_check_keys(d, at, a, keys);
        const char *s = NULL;
        if (jv_get_nonempty_string(d, at, a, "token_file", 0, &s) == 1)
            e->attach_agent_token_files[i] = strdup(s);
        u = json_object_get(a, "url");
        jv_path_key(p, sizeof(p), at, "url");
    }
    if (!json_is_string(u) ||
        (strncmp(json_string_value(u), "http://", 7) != 0 && strncmp(json_string_value(u), "https://", 8) != 0)) {
        char got[64];
        jv_describe(got, sizeof(got), u);
        jv_diag_add(d, p, "expected an http:// or https:// URL, got %s", got);
        return;
    }
    e->attach_agents[i] = strdup(json_string_value(u));
}

static void parse_network(experiment *e, const json_t *tp, const json_t *nw, jv_diag *d)
{
    static const char *const keys[] = {"kind", "regions", "rate_mbit", "delay_ms", "jitter_ms", NULL};
    const char *path = "$.topology.network";
    netns_spec *s = &e->network;
    if (jv_check_keys(d, path, nw, keys) < 0)
        return;
    const char *kind = NULL;
    if (jv_get_string(d, path, nw, "kind", 1, network_kinds, &kind) != 1)
        return;
    if (strcmp(kind, "loopback") == 0) {
        for (int i = 1; keys[i]; i++)
            if (json_object_get(nw, keys[i]))
                jv_diag_add(d, path, "unexpected key %s with kind loopback (it is a key of kind netns)",
                            keys[i]);
        return;
    }
    s->kind = NETNS_REGIONS;
    int maxr = (e->learners ? e->learners : EXP_MAX_LEARNERS) + 1;
    int64_t r = 0;
    s->regions = maxr; /* default: every place its own region */
    if (jv_get_int(d, path, nw, "regions", 0, 1, maxr, "a region count (at most learners + 1)", &r) == 1)
        s->regions = (int)r;
    jv_get_number(d, path, nw, "rate_mbit", 0, 1e-3, NETNS_RATE_MAX_MBIT, "a link rate in Mbit/s",
                  &s->rate_mbit);
    jv_get_number(d, path, nw, "delay_ms", 0, 0, NETNS_DELAY_MAX_MS, "a one-way delay in ms", &s->delay_ms);
    if (jv_get_number(d, path, nw, "jitter_ms", 0, 0, NETNS_DELAY_MAX_MS, "a jitter in ms", &s->jitter_ms) ==
            1 &&
        s->jitter_ms > s->delay_ms)
        jv_diag_add(d, "$.topology.network.jitter_ms", "expected at most delay_ms (%g), got %g", s->delay_ms,
                    s->jitter_ms);
    if (s->regions == 1 && (json_object_get(nw, "rate_mbit") || json_object_get(nw, "delay_ms") ||
                            json_object_get(nw, "jitter_ms")))
        jv_diag_add(d, "$.topology.network.regions",
                    "expected at least 2 with rate_mbit, delay_ms or jitter_ms: links are shaped only across "
                    "regions, and with 1 region there is none");
    if (json_object_get(tp, "attach"))
        jv_diag_add(d, path,
                    "expected kind loopback (or no network) with attach: the harness launches nothing");
}

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
    if (jv_get_array(d, path, tr, key, 1, &arr) != 1)
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

/* topology.trainer.telemetry: absent = HTTP (GET /v1/status, /v1/events);
 * {"events_file": TEMPLATE} = the JSON-lines file form (docs/telemetry.md). */
static void parse_telemetry(topo_trainer *t, const json_t *tr, jv_diag *d)
{
    static const char *const keys[] = {"events_file", NULL};
    const char *path = "$.topology.trainer.telemetry";
    json_t *tm = NULL;
    if (jv_get_object(d, "$.topology.trainer", tr, "telemetry", 0, &tm) != 1)
        return;
    jv_check_keys(d, path, tm, keys);
    const char *f = NULL;
    if (jv_get_nonempty_string(d, path, tm, "events_file", 1, &f) != 1)
        return;
    char why[256];
    unsigned used = 0;
    if (topo_check_template(TOPO_COORDINATOR, f, &used, why, sizeof why) < 0)
        jv_diag_add(d, "$.topology.trainer.telemetry.events_file", "%s", why);
    else if (used & (1u << PH_C_LISTEN_BIT))
        jv_diag_add(d, "$.topology.trainer.telemetry.events_file",
                    "{listen} changes across a coordinator restart; the events file's path must not");
    else
        t->events_file = strdup(f);
}

/* topology.trainer: a foreign trainer's coordinator and learner commands. */
static void parse_trainer(experiment *e, const json_t *doc, const json_t *tr, jv_diag *d)
{
    static const char *const keys[] = {"coordinator", "learner", "cwd", "telemetry", NULL};
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
    if (jv_get_nonempty_string(d, path, tr, "cwd", 0, &cwd) == 1)
        t->cwd = strdup(cwd);
    parse_telemetry(t, tr, d);
    /* The default token horizon is learners x steps x batch of chaosloco's
     * own learners: meaningless for another trainer. */
    json_t *hz = json_object_get(doc, "horizon");
    if (!json_object_get(hz, "min_tokens") && !json_object_get(hz, "min_merges"))
        jv_diag_add(
            d, "$.horizon",
            "expected min_tokens or min_merges with topology.trainer (the default, learners x steps x "
            "batch, is chaosloco's own learners' training)");
}

/* topology.attach's keys as param_decode hands them over (borrowed). */
typedef struct attach_doc {
    const char *syncer, *token_file, *syncer_credential_file, *ca_file;
    json_t *agents;
    double wait_s;
} attach_doc;

static const param_def attach_params[] = {
    {.name = "syncer",
     .type = PARAM_STRING,
     .flags = PARAM_REQUIRED | PARAM_NONEMPTY,
     .schema = "{\"$ref\": \"#/$defs/url\"}",
     .doc = "the syncer's http(s) URL",
     .offset = PARAM_AT(attach_doc, syncer)},
    {.name = "agents",
     .type = PARAM_ARRAY,
     .flags = PARAM_REQUIRED,
     .schema = "{\"type\": \"array\", \"minItems\": 1, \"items\": {\"oneOf\": [{\"$ref\": \"#/$defs/url\"}, "
               "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"url\"], "
               "\"properties\": {\"url\": {\"$ref\": \"#/$defs/url\"}, \"token_file\": {\"type\": \"string\", "
               "\"minLength\": 1}}}]}}",
     .doc = "exactly M entries, learner i = agents[i]: each the agent's http(s) URL, or {url, token_file} naming "
            "that agent's own bearer token (each agent may have its own, and one agent's token then opens no "
            "other; without one the agent gets token_file)",
     .offset = PARAM_AT(attach_doc, agents)},
    {.name = "token_file",
     .type = PARAM_STRING,
     .flags = PARAM_NONEMPTY,
     .doc = "the bearer token of every agent that names none of its own, and of the live dashboard's controls; "
            "required unless every agent names its own",
     .offset = PARAM_AT(attach_doc, token_file)},
    {.name = "syncer_credential_file",
     .type = PARAM_STRING,
     .flags = PARAM_NONEMPTY,
     .doc = "the credential the harness presents to the syncer, normally its `admin.cred`; `chaosloco run "
            "--syncer-credential-file` overrides it; without one only loopback reads work and the run cannot be "
            "ended by POST /v1/end",
     .offset = PARAM_AT(attach_doc, syncer_credential_file)},
    {.name = "ca_file",
     .type = PARAM_STRING,
     .flags = PARAM_NONEMPTY,
     .doc = "the PEM CA that signed the certificates of an https syncer and https agents (default: the system's)",
     .offset = PARAM_AT(attach_doc, ca_file)},
    {.name = "wait_s",
     .type = PARAM_NUMBER,
     .min = 1,
     .max = 86400,
     .def = EXP_ATTACH_WAIT_S,
     .what = "seconds to wait for the processes",
     .unit = "s",
     .doc = "how long the harness waits for those files to exist and for the syncer and every agent to answer "
            "before it takes its leases, so a cluster engine may start them in any order; `chaosloco run "
            "--attach-wait` overrides it",
     .offset = PARAM_AT(attach_doc, wait_s)},
    {0},
};

const param_def exp_topology_attach = {.name = "attach", .type = PARAM_OBJECT, .fields = attach_params};

void exp_parse_topology(experiment *e, const json_t *doc, const json_t *tp, jv_diag *d)
{
    e->learners = 0;
    if (!tp)
        return;
    static const char *const keys[] = {"learners", "training", "attach", "trainer", "network", NULL};
    jv_check_keys(d, "$.topology", tp, keys);
    int64_t m = 0;
    if (jv_get_int(d, "$.topology", tp, "learners", 1, 1, EXP_MAX_LEARNERS, "a learner count", &m) == 1)
        e->learners = (int)m;

    json_t *tr = NULL;
    int rt = jv_get_object(d, "$.topology", tp, "training", 0, &tr);
    e->training = rt == 1 ? json_deep_copy(tr) : json_object();
    e->mode = strdup("decoupled");
    e->quorum = 1;
    if (rt == 1) {
        /* Known keys are checked here; the rest is the syncer's config and
         * checked strictly by the syncer itself when the run starts. */
        const char *mode = NULL;
        if (jv_get_string(d, "$.topology.training", tr, "mode", 0, config_mode_names, &mode) == 1) {
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
        jv_get_string(d, "$.topology.training", tr, "encoding", 0, encoding_names, &enc);
        /* One source of truth for M: the runner passes topology.learners on. */
        if (json_object_get(tr, "learners"))
            jv_diag_add(d, "$.topology.training.learners",
                        "unexpected key: the learner count is topology.learners");
    }

    json_t *tn = NULL;
    if (jv_get_object(d, "$.topology", tp, "trainer", 0, &tn) == 1) {
        parse_trainer(e, doc, tn, d);
        if (json_object_get(tp, "attach"))
            jv_diag_add(d, "$.topology", "expected at most one of attach and trainer, got both");
    }

    json_t *nw = NULL;
    if (jv_get_object(d, "$.topology", tp, "network", 0, &nw) == 1)
        parse_network(e, tp, nw, d);

    json_t *at = NULL;
    if (jv_get_object(d, "$.topology", tp, "attach", 0, &at) == 1) {
        attach_doc a;
        param_decode(attach_params, NULL, at, "$.topology.attach", 0, d, &a);
        if (a.syncer) {
            if (strncmp(a.syncer, "http://", 7) != 0 && strncmp(a.syncer, "https://", 8) != 0)
                jv_diag_add(d, "$.topology.attach.syncer", "expected an http:// or https:// URL, got \"%s\"",
                            a.syncer);
            e->attach_syncer = strdup(a.syncer);
        }
        if (a.token_file)
            e->attach_token_file = strdup(a.token_file);
        if (a.syncer_credential_file)
            e->attach_syncer_credential_file = strdup(a.syncer_credential_file);
        if (a.ca_file)
            e->attach_ca_file = strdup(a.ca_file);
        e->attach_wait_s = a.wait_s;
        json_t *ag = a.agents;
        if (ag) {
            size_t n = json_array_size(ag);
            if (e->learners && n != (size_t)e->learners)
                jv_diag_add(d, "$.topology.attach.agents",
                            "expected %d agent URLs (one per learner), got %zu", e->learners, n);
            e->attach_agents = calloc(n + 1, sizeof(char *));
            e->attach_agent_token_files = calloc(n + 1, sizeof(char *));
            e->nattach_agents = e->attach_agents && e->attach_agent_token_files ? (int)n : 0;
            int without_token = 0;
            for (int i = 0; i < e->nattach_agents; i++) {
                parse_attach_agent(e, d, json_array_get(ag, (size_t)i), i);
                without_token += e->attach_agent_token_files[i] == NULL;
            }
            if (without_token && !e->attach_token_file)
                jv_diag_add(d, "$.topology.attach",
                            "expected token_file (every agent's token) or a token_file in each of agents "
                            "(%d without)", without_token);
        }
    }
}
