/* setup.c - before the run (see setup.h): the experiment and its
 * timeline, the run directory, the syncer's config checked with the
 * trainer's rules, the topology (launch or attach) and the embedded
 * dashboard. */
#include "harness/run/setup.h"

#include "harness/run/runner.h"

#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/log.h"
#include "common/proc.h"
#include "trainer/config.h"
#include "common/err.h"
#include "harness/netns.h"

/* ---- setup ---- */

static void make_slug(const char *path, const char *title, char *out, size_t len)
{
    const char *src = title;
    char base[256];
    if (path) {
        const char *b = strrchr(path, '/');
        snprintf(base, sizeof base, "%s", b ? b + 1 : path);
        char *dot = strrchr(base, '.');
        if (dot && strcmp(dot, ".json") == 0)
            *dot = '\0';
        src = base;
    }
    size_t n = 0;
    int dash = 0;
    for (const char *p = src; *p && n + 1 < len && n < 60; p++) {
        char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
            out[n++] = c;
            dash = 0;
        } else if (c >= 'A' && c <= 'Z') {
            out[n++] = (char)(c - 'A' + 'a');
            dash = 0;
        } else if (!dash && n > 0) {
            out[n++] = '-';
            dash = 1;
        }
    }
    while (n > 0 && out[n - 1] == '-')
        n--;
    out[n] = '\0';
    if (!n)
        snprintf(out, len, "experiment");
}

int setup_make_run_dir(runner *r, char *err, size_t errlen)
{
    if (r->o->out_dir && strlen(r->o->out_dir) >= sizeof r->setup.run_dir - 64)
        return cx_fail(err, errlen, CX_EINVAL, "--out: path longer than %zu bytes",
                       sizeof r->setup.run_dir - 64);
    if (r->o->out_root && strlen(r->o->out_root) >= 256)
        return cx_fail(err, errlen, CX_EINVAL, "output root longer than 255 bytes");
    if (r->o->out_dir) {
        snprintf(r->setup.run_dir, sizeof r->setup.run_dir, "%s", r->o->out_dir);
    } else {
        char stamp[24];
        cx_stamp_time(stamp, sizeof stamp, cx_real_ns());
        const char *root = r->o->out_root ? r->o->out_root : "out";
        snprintf(r->setup.run_dir, sizeof r->setup.run_dir, "%s/%s-%s", root, r->setup.slug, stamp);
        struct stat sb;
        for (int k = 2; stat(r->setup.run_dir, &sb) == 0 && k < 100; k++)
            snprintf(r->setup.run_dir, sizeof r->setup.run_dir, "%s/%s-%s-%d", root, r->setup.slug, stamp, k);
    }
    struct stat sb;
    if (stat(r->setup.run_dir, &sb) == 0) {
        char probe[PATHLEN + 32];
        snprintf(probe, sizeof probe, "%s/journal.json", r->setup.run_dir);
        if (access(probe, F_OK) == 0 ||
            (snprintf(probe, sizeof probe, "%s/pids.json", r->setup.run_dir), access(probe, F_OK) == 0))
            return cx_fail(
                err, errlen, CX_ECONFLICT,
                "--out %s already holds a run (journal.json or pids.json); choose a fresh directory",
                r->setup.run_dir);
    }
    return cx_mkdir_p(r->setup.run_dir, err, errlen);
}

/* The syncer's config: topology.training, M, the mode override; checked
 * with the trainer's own rules so a bad key fails before anything starts. */
json_t *setup_syncer_config(runner *r, char *err, size_t errlen)
{
    json_t *c = json_deep_copy(r->setup.e->training ? r->setup.e->training : json_object());
    if (!c)
        c = json_object();
    json_object_set_new(c, "learners", json_integer(r->setup.m));
    if (r->o->mode)
        json_object_set_new(c, "mode", json_string(r->o->mode));
    /* CI's slow pass: every learner slowed (docs/experiments.md) */
    const char *slow = getenv("CHAOSLOCO_SLOWDOWN");
    if (slow && *slow) {
        char *end = NULL;
        double x = strtod(slow, &end);
        if (*end || !(x >= 1.0 && x <= 1000.0)) {
            cx_fail(err, errlen, CX_EINVAL, "CHAOSLOCO_SLOWDOWN=%s: expected a number in 1..1000", slow);
            json_decref(c);
            return NULL;
        }
        json_object_set_new(c, "slowdown", json_real(x));
    }
    config cfg;
    config_defaults(&cfg);
    int64_t mode = cfg.mode, model = cfg.model; /* what the file does not name */
    json_t *jm = json_object_get(c, "mode");
    if (json_is_string(jm) && config_parse_mode(json_string_value(jm), &mode) < 0) {
        cx_fail(err, errlen, CX_EINVAL, "training mode '%s' is not ddp|ddp-elastic|diloco|decoupled",
                json_string_value(jm));
        json_decref(c);
        return NULL;
    }
    json_t *jk = json_object_get(c, "model");
    if (json_is_string(jk) && config_parse_model(json_string_value(jk), &model) < 0) {
        cx_fail(err, errlen, CX_EINVAL, "model '%s' is not mlp|gpt", json_string_value(jk));
        json_decref(c);
        return NULL;
    }
    config_kind_defaults(&cfg, mode, model);
    char e2[CX_ERRLEN];
    if (config_from_json(&cfg, c, "topology.training", e2, sizeof e2) < 0 ||
        config_validate(&cfg, e2, sizeof e2) < 0) {
        cx_fail(err, errlen, CX_EINVAL, "topology.training: %s", e2);
        json_decref(c);
        return NULL;
    }
    r->setup.steps_target = cfg.steps;
    r->setup.batch = cfg.batch;
    return c;
}

int setup_load(runner *r, char *err, size_t errlen)
{
    jv_diag *d = jv_diag_new();
    unsigned flags = r->o->ci ? EXP_CI : 0;
    int rc = r->o->experiment ? exp_load(r->o->experiment, flags, &r->setup.e, d, err, errlen)
                              : exp_load_string(run_default_experiment(), flags, &r->setup.e, d, err, errlen);
    if (rc < 0) {
        char pre[600];
        snprintf(pre, sizeof pre, "%s: ", r->o->experiment ? r->o->experiment : "(default)");
        jv_diag_print(stderr, d, pre);
        jv_diag_free(d);
        return rc;
    }
    jv_diag_free(d);
    if (r->setup.e->attach_syncer && r->o->mode) {
        return cx_fail(err, errlen, CX_EINVAL, "--mode cannot change the mode of an attached syncer");
    }
    if (!r->setup.e->attach_syncer && r->o->attach_wait_s > 0)
        return cx_fail(err, errlen, CX_EINVAL,
                       "--attach-wait applies to attach mode only (the experiment has no topology.attach)");
    if (r->o->mode) {
        int64_t m;
        if (config_parse_mode(r->o->mode, &m) < 0)
            return cx_fail(err, errlen, CX_EINVAL, "--mode: '%s' is not ddp|ddp-elastic|diloco|decoupled",
                           r->o->mode);
        free(r->setup.e->mode);
        r->setup.e->mode = strdup(r->o->mode);
    }
    r->setup.m = r->setup.e->learners;
    r->setup.seed = r->o->has_seed ? r->o->seed : r->setup.e->seed;
    rc = sched_build(r->setup.e, r->setup.seed, &r->setup.sched, err, errlen);
    if (rc < 0)
        return rc;
    make_slug(r->o->experiment, r->setup.e->title, r->setup.slug, sizeof r->setup.slug);
    if (!r->o->experiment)
        snprintf(r->setup.slug, sizeof r->setup.slug, "default");
    return 0;
}

void setup_dry_run(runner *r)
{
    json_t *s = sched_json(r->setup.sched);
    printf("experiment: %s\nvariant: %s\nlearners: %d  mode: %s  seed: %" PRIu64 "\n", r->setup.e->title,
           r->o->ci ? "ci" : "base", r->setup.m, r->setup.e->mode, r->setup.seed);
    printf("timeline: %d entries (%d chaos draws, %d skipped for the live floor, %d skipped as busy)\n",
           r->setup.sched->n, r->setup.sched->chaos_drawn, r->setup.sched->skipped_floor,
           r->setup.sched->skipped_busy);
    for (int k = 0; k < r->setup.sched->n; k++) {
        sched_entry *se = &r->setup.sched->entries[k];
        char when[64];
        if (se->when == EXP_AT_S)
            snprintf(when, sizeof when, "at %.1f s", se->at_s);
        else if (se->when == EXP_AT_OUTER_STEP)
            snprintf(when, sizeof when, "at %" PRId64 " merges", se->at_outer_step);
        else
            snprintf(when, sizeof when, "after %s", r->setup.e->method[se->after].name);
        char *params = json_dumps(se->params, JSON_COMPACT | JSON_SORT_KEYS);
        printf("  %-22s %-10s learner %-3d %-20s for %" PRId64 " ms  params %s\n", se->name, se->fault,
               se->learner, when, se->duration_ms, params ? params : "{}");
        free(params);
    }
    char *js = json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS);
    printf("%s\n", js ? js : "{}");
    free(js);
    json_decref(s);
}

int setup_start_topology(runner *r, char *err, size_t errlen)
{
    char exe[PATHLEN];
    int rc = cx_self_exe(exe, sizeof exe);
    if (rc < 0)
        return cx_fail(err, errlen, rc, "cannot find the chaosloco binary (/proc/self/exe)");
    r->setup.launch_mono = cx_mono_ms();
    if (r->setup.e->attach_syncer) {
        rc = attach_topology(r, &r->setup.t, err, errlen);
    } else {
        json_t *sc = setup_syncer_config(r, err, errlen);
        if (!sc)
            return CX_EINVAL;
        char prefix[48];
        snprintf(prefix, sizeof prefix, "cl%d", (int)getpid());
        /* what a SIGKILLed harness left: namespaces and links of dead owners */
        char e2[CX_ERRLEN];
        int swept = netns_sweep(e2, sizeof e2);
        if (swept < 0)
            cx_warn("netns sweep: %s", e2);
        topo_launch_cfg lc = {.run_dir = r->setup.run_dir,
                              .exe = exe,
                              .learners = r->setup.m,
                              .syncer_cfg = sc,
                              .unit_prefix = prefix,
                              .ready_timeout_ms = 60000,
                              .learner_steps = horizon_learner_budget(r->setup.steps_target),
                              .trainer = r->setup.e->trainer,
                              .experiment_path = r->o->experiment,
                              .seed = r->setup.seed,
                              .network = &r->setup.e->network};
        rc = topo_launch(&lc, &r->setup.t, err, errlen);
        json_decref(sc);
    }
    if (rc < 0)
        return rc;
    /* the syncer gets the harness's own (admin) credential, never the agents' token */
    /* every answer feeds its process's clock (clock.h) */
    if (rclock_new(r) < 0)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    cx_http_opts so = {.connect_timeout_ms = 500,
                       .timeout_ms = 5000,
                       .bearer = topo_syncer_credential(r->setup.t),
                       .ca_file = topo_ca_file(r->setup.t),
                       .observe = cx_tb_observe,
                       .observe_ctx = r->clk.sy_clock};
    r->setup.sy = cx_http_client_new(topo_syncer_url(r->setup.t), &so);
    if (!r->setup.sy)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    /* the file form of the telemetry contract: the coordinator's events file, tailed */
    if (topo_events_file(r->setup.t) && !(r->setup.evf = evf_new(topo_events_file(r->setup.t), 0)))
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    if (collect_views_new(r) < 0)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    /* a cluster engine starts them in any order: wait for every one */
    return r->setup.e->attach_syncer ? attach_wait(r, err, errlen) : 0;
}

void setup_start_dashboard(runner *r)
{
    const char *listen = r->o->dashboard ? r->o->dashboard : (!r->o->experiment ? "127.0.0.1:0" : NULL);
    if (!listen)
        return;
    const char *urls[EXP_MAX_LEARNERS], *tokens[EXP_MAX_LEARNERS];
    int ids[EXP_MAX_LEARNERS];
    int n = r->setup.m < DASH_MAX_AGENTS ? r->setup.m : DASH_MAX_AGENTS;
    for (int l = 0; l < n; l++) {
        urls[l] = topo_agent_url(r->setup.t, l);
        tokens[l] = topo_agent_token(r->setup.t, l);
        ids[l] = l;
    }
    char dstate[PATHLEN + 16];
    snprintf(dstate, sizeof dstate, "%s/dashboard", r->setup.run_dir);
    cx_mkdir_p(dstate, NULL, 0);
    dash_config dc = {.listen = listen,
                      .syncer_url =
                          r->setup.evf ? NULL : topo_syncer_url(r->setup.t), /* file form: no HTTP */
                      .agent_urls = urls,
                      .agent_learners = ids,
                      .nagents = n,
                      .token = topo_token(r->setup.t),
                      .agent_tokens = tokens,
                      .ca_file = topo_ca_file(r->setup.t),
                      .syncer_credential = topo_syncer_credential(r->setup.t),
                      .poll_ms = 500,
                      .state_dir = dstate,
                      .title = r->setup.e->title};
    char err[CX_ERRLEN];
    r->setup.dash = dash_server_new(&dc, err, sizeof err);
    if (!r->setup.dash) {
        cx_warn("dashboard not started: %s", err);
        return;
    }
    printf("dashboard: %s\n", dash_server_url(r->setup.dash));
    fflush(stdout);
    cx_info("dashboard url=%s", dash_server_url(r->setup.dash));
    output_dash_pending(r);
}

/* ---- setup: the end ---- */

void setup_stop_dashboard(runner *r)
{
    dash_server_free(r->setup.dash);
    r->setup.dash = NULL;
}

void setup_drop_topology(runner *r)
{
    topo_free(r->setup.t);
    r->setup.t = NULL;
}

void setup_cleanup(runner *r)
{
    setup_stop_dashboard(r);
    setup_drop_topology(r);
    cx_http_client_free(r->setup.sy);
    r->setup.sy = NULL;
    evf_free(r->setup.evf);
    r->setup.evf = NULL;
    sched_free(r->setup.sched);
    r->setup.sched = NULL;
    exp_free(r->setup.e);
    r->setup.e = NULL;
}
