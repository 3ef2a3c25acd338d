/* topology.c - launch a syncer and M agents with learners,
 * or a foreign trainer's coordinator and M agents with its learners (the
 * same lifecycle; "syncer" below is either).
 *
 * A launched process's lifecycle, as seen from here:
 *
 *   (none) --spawn_logged()--> started --wait_ready()--> ready
 *   started|ready --topo_stop()/topo_syncer_kill()--> reaped (pid 0)
 *   reaped (syncer only) --topo_syncer_start()--> started --> ready
 *
 * pid != 0 holds exactly while a child is started and not yet reaped.
 * A foreign coordinator's argv is expanded again at every spawn (its
 * {listen} is 127.0.0.1:0 first — the syncer namespace's address:0 with
 * regions — and its own address after a restart).
 *
 * A foreign trainer's argv templates (placeholders, checking, expansion,
 * its working directory) are in topo_template.c; attaching to processes
 * started by someone else (topo_attach) is in topo_attach.c.
 */
#include "harness/topology.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/proc.h"
#include "harness/topo_internal.h"
#include "trainer/credential.h"


static void remember(topo *t, pid_t pid)
{
    if (pid <= 0)
        return;
    for (int i = 0; i < t->nall; i++)
        if (t->all[i] == pid)
            return;
    if (t->nall < (int)(sizeof t->all / sizeof t->all[0]))
        t->all[t->nall++] = pid;
}

/* ---- topology: small helpers ---- */

static void remember(topo *t, pid_t pid);

static int write_pids(topo *t)
{
    if (!t->launched)
        return 0;
    json_t *o = json_object();
    json_t *ag = json_array();
    json_t *un = json_array();
    json_object_set_new(o, "harness", json_integer(getpid()));
    json_object_set_new(o, "syncer", json_integer(t->syncer.pid));
    for (int i = 0; i < t->m; i++) {
        json_array_append_new(ag, json_integer(t->agents[i].pid));
        json_array_append_new(un, json_integer(t->agents[i].unit_pid));
    }
    json_object_set_new(o, "agents", ag);
    json_object_set_new(o, "learners", un);
    json_t *all = json_array();
    remember(t, t->syncer.pid);
    for (int i = 0; i < t->m; i++) {
        remember(t, t->agents[i].pid);
        remember(t, t->agents[i].unit_pid);
    }
    for (int i = 0; i < t->nall; i++)
        json_array_append_new(all, json_integer(t->all[i]));
    json_object_set_new(o, "all", all); /* every pid this run started or saw, alive or not */
    char *s = json_dumps(o, JSON_SORT_KEYS);
    json_decref(o);
    if (!s)
        return CX_ENOMEM;
    char path[TOPO_PATH + 16];
    snprintf(path, sizeof path, "%s/pids.json", t->run_dir);
    int rc = cx_file_write_atomic(path, s, strlen(s), NULL, 0);
    free(s);
    return rc;
}

/* A fresh random token (48 hex digits) into token, written to path with
 * mode 0600 from its creation on: never readable by others, not even
 * briefly. */
static int make_token(const char *path, char *token, char *err, size_t errlen)
{
    unsigned char raw[24];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cx_fail(err, errlen, CX_ESYS, "open /dev/urandom: %s", strerror(errno));
    ssize_t n = read(fd, raw, sizeof raw);
    int e = errno;
    close(fd);
    if (n != (ssize_t)sizeof raw)
        return cx_fail(err, errlen, CX_ESYS, "read /dev/urandom: %s", strerror(e));
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(token + 2 * i, 3, "%02x", raw[i]);
    char line[80];
    int len = snprintf(line, sizeof line, "%s\n", token);
    return cx_file_write_atomic_mode(path, line, (size_t)len, 0600, err, errlen);
}

/* RUN/token, the operator's (the dashboard's controls), and a token of its
 * own for each agent in RUN/tokens/agent-N (0700): an agent's token opens
 * that agent only. */
static int make_tokens(topo *t, char *err, size_t errlen)
{
    snprintf(t->token_file, sizeof t->token_file, "%s/token", t->run_dir);
    int rc = make_token(t->token_file, t->token, err, errlen);
    char dir[TOPO_PATH];
    snprintf(dir, sizeof dir, "%s/tokens", t->run_dir);
    if (rc < 0 || (rc = cx_mkdir_p(dir, err, errlen)) < 0)
        return rc;
    if (chmod(dir, 0700) != 0)
        return cx_fail(err, errlen, CX_ESYS, "chmod 0700 %s: %s", dir, strerror(errno));
    for (int i = 0; i < t->m && rc == 0; i++) {
        topo_proc *a = &t->agents[i];
        snprintf(a->token_file, sizeof a->token_file, "%s/agent-%d", dir, i);
        rc = make_token(a->token_file, a->token, err, errlen);
    }
    return rc;
}

/* pdeath: the signal the child gets if the harness dies (0: none). The
 * syncer gets SIGTERM (it checkpoints and exits); agents get none: they must
 * outlive a dead harness long enough for their lease to lapse and revert
 * its faults, then leave by themselves (--orphan-exit-ms). */
static int spawn_logged(topo_proc *p, const char *const *argv, int pdeath, const char *cwd, const char *ns,
                        char *err, size_t errlen)
{
    int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return cx_fail(err, errlen, CX_ESYS, "open %s: %s", p->log, strerror(errno));
    cx_spawn_opts o = {.new_pgrp = 1,
                       .stdout_fd = fd,
                       .stderr_fd = fd,
                       .extra_env = NULL,
                       .cwd = cwd,
                       .die_with_parent = pdeath,
                       .netns = ns};
    int rc = cx_spawn(argv, &o, &p->pid, err, errlen);
    close(fd);
    return rc;
}

/* Last line of a log, for error messages. */
static void log_tail(const char *path, char *out, size_t len)
{
    char *data = NULL;
    size_t n = 0;
    out[0] = '\0';
    if (cx_file_read(path, 1 << 24, &data, &n, NULL, 0) < 0)
        return;
    while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r'))
        data[--n] = '\0';
    char *nl = strrchr(data, '\n');
    snprintf(out, len, "%s", nl ? nl + 1 : data);
    free(data);
}

/* 1 when path is a non-empty file (a coordinator's first event written). */
static int file_nonempty(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* Wait for listen.addr and a 200 on /v1/status (events_file: for that file
 * to be non-empty instead). Fails early when the child exits. */
static int wait_ready(topo_proc *p, const char *what, const char *bearer, const char *events_file,
                      long timeout_ms, char *err, size_t errlen)
{
    char path[TOPO_PATH + 16];
    snprintf(path, sizeof path, "%s/listen.addr", p->state);
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        int st;
        if (p->pid > 0 && waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = 0;
            char tail[300];
            log_tail(p->log, tail, sizeof tail);
            return cx_fail(err, errlen, CX_EUNAVAIL, "%s exited during start-up (%s%d); log %s: %s", what,
                           WIFSIGNALED(st) ? "signal " : "status ",
                           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), p->log, tail);
        }
        if (!p->url[0]) {
            char *addr = NULL;
            size_t n = 0;
            if (cx_file_read(path, 256, &addr, &n, NULL, 0) == 0) {
                while (n > 0 && (addr[n - 1] == '\n' || addr[n - 1] == ' '))
                    addr[--n] = '\0';
                if (n > 0)
                    snprintf(p->url, sizeof p->url, "http://%s", addr);
                free(addr);
            }
        }
        if (p->url[0] && events_file) {
            if (file_nonempty(events_file))
                return 0;
        } else if (p->url[0]) {
            cx_http_opts ho = {.connect_timeout_ms = 500, .timeout_ms = 2000, .bearer = bearer};
            cx_http_client *c = cx_http_client_new(p->url, &ho);
            cx_http_result r;
            cx_http_result_init(&r);
            int ok = c && cx_http_do(c, "GET", "/v1/status", NULL, NULL, 0, NULL, 0, &r, NULL, 0) == 0 &&
                     r.status == 200;
            cx_http_result_cleanup(&r);
            cx_http_client_free(c);
            if (ok)
                return 0;
        }
        cx_sleep_ms(50);
    }
    if (p->url[0] && events_file)
        return cx_fail(err, errlen, CX_ETIMEDOUT,
                       "%s wrote listen.addr but no event to %s within %ld ms (log %s)", what, events_file,
                       timeout_ms, p->log);
    return cx_fail(err, errlen, CX_ETIMEDOUT, "%s not ready within %ld ms (log %s)", what, timeout_ms,
                   p->log);
}

/* ---- topology: launch ---- */

/* How long a launched agent stays after its lease lapsed (the harness is
 * gone) before it stops its learner and exits. After a harness SIGKILL the
 * lease lapses within its ttl (10 s), then this, then the agent stops its
 * learner (SIGTERM, at most its 5 s stop grace; ~1 s in practice): 10 + 5 +
 * 5 = the 20 s docs/experiments.md promises for nothing to be left. With
 * 10 s here a run was gone only after 20.5 s, a learner that used its grace
 * after 25 s (test_harness_signals). */
#define TOPO_ORPHAN_EXIT_MS "5000"

/* The coordinator's placeholder values (topo_placeholders order) into vals;
 * cfgpath and learners are the caller's buffers they point into. */
static void coord_values(const topo *t, const char *listen, char *cfgpath, size_t cfglen, char *learners,
                         size_t llen, const char **vals)
{
    snprintf(cfgpath, cfglen, "%s/syncer-config.json", t->run_dir);
    snprintf(learners, llen, "%d", t->m);
    vals[PH_C_LISTEN] = listen;
    vals[PH_C_STATE_DIR] = t->syncer.state;
    vals[PH_C_CREDS] = t->creds_dir;
    vals[PH_C_ADMIN] = t->syncer_cred_file;
    vals[PH_C_CONFIG] = cfgpath;
    vals[PH_C_LEARNERS] = learners;
    vals[PH_C_SEED] = t->seed;
    vals[PH_C_RUN] = t->run_dir;
}

/* The events file (file form): its template expanded, against the trainer's
 * cwd when relative. 0 or a negative cx_err. */
static int events_file_resolve(topo *t, const char *tmpl, char *err, size_t errlen)
{
    char cfgpath[TOPO_PATH + 32], learners[16];
    const char *vals[PH_C_N];
    coord_values(t, NULL, cfgpath, sizeof cfgpath, learners, sizeof learners, vals);
    char *p = topo_expand(TOPO_COORDINATOR, tmpl, vals);
    if (!p)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    int n = p[0] == '/' ? snprintf(t->events_file, sizeof t->events_file, "%s", p)
                        : snprintf(t->events_file, sizeof t->events_file, "%s/%s", t->cwd, p);
    free(p);
    if (n < 0 || (size_t)n >= sizeof t->events_file)
        return cx_fail(err, errlen, CX_EINVAL, "topology.trainer.telemetry.events_file: path too long");
    return 0;
}

static int syncer_spawn(topo *t, const char *listen, char *err, size_t errlen)
{
    char cfgpath[TOPO_PATH + 32];
    snprintf(cfgpath, sizeof cfgpath, "%s/syncer-config.json", t->run_dir);
    char lpath[TOPO_PATH + 16];
    snprintf(lpath, sizeof lpath, "%s/listen.addr", t->syncer.state);
    unlink(lpath); /* a stale address must not be mistaken for the new one */
    t->syncer.url[0] = '\0';
    if (t->coord_tmpl) {
        char learners[16], cpath[TOPO_PATH + 32];
        const char *vals[PH_C_N];
        coord_values(t, listen, cpath, sizeof cpath, learners, sizeof learners, vals);
        char **argv = topo_expand_argv(TOPO_COORDINATOR, t->coord_tmpl, vals);
        if (!argv)
            return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        int rc = spawn_logged(&t->syncer, (const char *const *)argv, SIGTERM, t->cwd,
                              netns_path(t->net, NETNS_SYNCER), err, errlen);
        topo_free_argv(argv);
        return rc;
    }
    const char *argv[] = {
        t->exe,     "syncer", "--listen",          listen,       "--state-dir", t->syncer.state,
        "--config", cfgpath,  "--credentials-dir", t->creds_dir, NULL};
    return spawn_logged(&t->syncer, argv, SIGTERM, NULL, netns_path(t->net, NETNS_SYNCER), err, errlen);
}

/* A foreign trainer runs in its own cwd: resolve it, make the run dir
 * absolute (every path it gets is) and copy the coordinator's template. 0 or
 * a negative cx_err; t is freed by the caller either way. */
static int trainer_prepare(topo *t, const topo_launch_cfg *cfg, char *err, size_t errlen)
{
    int rc;
    char real[PATH_MAX];
    errno = 0;
    if ((rc = topo_trainer_cwd(cfg, t->cwd, sizeof t->cwd, err, errlen)) < 0)
        return rc;
    if (!realpath(cfg->run_dir, real) || strlen(real) >= sizeof t->run_dir)
        return cx_fail(err, errlen, CX_EINVAL, "topology: run dir %s: %s", cfg->run_dir,
                       errno ? strerror(errno) : "path too long");
    snprintf(t->run_dir, sizeof t->run_dir, "%s", real);
    size_t n = (size_t)cfg->trainer->ncoordinator;
    if (!(t->coord_tmpl = calloc(n + 1, sizeof *t->coord_tmpl)))
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!(t->coord_tmpl[i] = strdup(cfg->trainer->coordinator[i])))
            return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    return 0;
}

/* Agent i with its learner (chaosloco's, or the foreign trainer's learner
 * template expanded) behind its proxy to the syncer. 0 or a negative
 * cx_err. */
static int agent_spawn(topo *t, const topo_launch_cfg *cfg, int i, const char *proxy, char *err,
                       size_t errlen)
{
    int rc;
    topo_proc *a = &t->agents[i];
    char id[64], num[16], lstate[TOPO_PATH + 32];
    snprintf(id, sizeof id, "%s-%d", cfg->unit_prefix, i);
    snprintf(num, sizeof num, "%d", i);
    snprintf(a->state, sizeof a->state, "%s/agents/%d", t->run_dir, i);
    snprintf(a->log, sizeof a->log, "%s/logs/agent-%d.log", t->run_dir, i);
    snprintf(lstate, sizeof lstate, "%s/learners/%d", t->run_dir, i);
    char budget[32], lcred[TOPO_PATH + 32], listen[40];
    snprintf(listen, sizeof listen, "%s:0", t->net ? netns_addr(t->net, i) : "127.0.0.1");
    snprintf(budget, sizeof budget, "%lld", cfg->learner_steps);
    snprintf(lcred, sizeof lcred, "%s/learner-%d.cred", t->creds_dir, i);
    if ((rc = cx_mkdir_p(a->state, err, errlen)) < 0 || (rc = cx_mkdir_p(lstate, err, errlen)) < 0)
        return rc;
    /* clang-format off */
    const char *head[] = {
        t->exe,        "agent",      "--listen",         listen,              "--id",    id,
        "--state-dir", a->state,     "--token-file",     a->token_file,       "--proxy", proxy,
        "--restart",   "on-failure", "--orphan-exit-ms", TOPO_ORPHAN_EXIT_MS, "--"};
    /* clang-format on */
    /* one initializer list: tests/deploy/check_manifests.c reads its flags
     * and checks that every shipped learner line carries them */
    const char *own[16] = {t->exe,
                           "learner",
                           "--syncer",
                           "http://{proxy.syncer}",
                           "--id",
                           num,
                           "--state-dir",
                           lstate,
                           "--credential-file",
                           lcred,
                           cfg->learner_steps > 0 ? "--steps" : NULL,
                           budget,
                           NULL};
    size_t no = 0;
    while (own[no])
        no++;
    /* the training data by the learner's own flag: a learner reads a file
     * only when its command line names it, never because the syncer said
     * so (trainer/learner/link.c); a corpus name needs no flag */
    const char *data = json_string_value(json_object_get(cfg->syncer_cfg, "data"));
    if (data && data[0]) {
        own[no++] = "--data";
        own[no++] = data;
        own[no] = NULL;
    }
    char **foreign = NULL;
    if (cfg->trainer) {
        char learners[16];
        snprintf(learners, sizeof learners, "%d", t->m);
        /* {proxy} is the agent's own {proxy.syncer}: the agent puts its proxy's address there */
        const char *vals[PH_L_N] = {[PH_L_PROXY] = "{proxy.syncer}",
                                    [PH_L_PROXY_SYNCER] = "{proxy.syncer}",
                                    [PH_L_ID] = num,
                                    [PH_L_LEARNERS] = learners,
                                    [PH_L_STATE_DIR] = lstate,
                                    [PH_L_CRED] = lcred,
                                    [PH_L_STEPS] = budget,
                                    [PH_L_SEED] = t->seed,
                                    [PH_L_RUN] = t->run_dir};
        if (!(foreign = topo_expand_argv(TOPO_LEARNER, cfg->trainer->learner, vals)))
            return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    size_t nhead = sizeof head / sizeof head[0], ntail = 0;
    const char *const *tail = foreign ? (const char *const *)foreign : own;
    while (tail[ntail])
        ntail++;
    const char **argv = calloc(nhead + ntail + 1, sizeof *argv);
    if (argv) {
        memcpy(argv, head, sizeof head);
        memcpy(argv + nhead, tail, ntail * sizeof *argv);
        rc = spawn_logged(a, argv, 0, foreign ? t->cwd : NULL, netns_path(t->net, i), err, errlen);
    } else {
        rc = cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    free(argv);
    topo_free_argv(foreign);
    if (rc < 0)
        return rc;
    return 0;
}

int topo_launch(const topo_launch_cfg *cfg, topo **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg || !cfg->run_dir || !cfg->exe || cfg->learners < 1 || !cfg->syncer_cfg || !cfg->unit_prefix)
        return cx_fail(err, errlen, CX_EINVAL, "topology: incomplete launch config");
    topo *t = calloc(1, sizeof *t);
    if (!t)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    t->agents = calloc((size_t)cfg->learners, sizeof *t->agents);
    if (!t->agents) {
        free(t);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    t->launched = 1;
    t->m = cfg->learners;
    if (strlen(cfg->run_dir) >= sizeof t->run_dir) {
        free(t->agents);
        free(t);
        return cx_fail(err, errlen, CX_EINVAL, "topology: run dir path too long");
    }
    snprintf(t->run_dir, sizeof t->run_dir, "%s", cfg->run_dir);
    snprintf(t->exe, sizeof t->exe, "%s", cfg->exe);
    snprintf(t->seed, sizeof t->seed, "%llu", cfg->seed);
    t->sname = cfg->trainer ? "coordinator" : "syncer";
    long ready = cfg->ready_timeout_ms > 0 ? cfg->ready_timeout_ms : 30000;
    int rc;
    char path[TOPO_PATH + 64];

    if (cfg->trainer && (rc = trainer_prepare(t, cfg, err, errlen)) < 0)
        goto fail;

    snprintf(path, sizeof path, "%s/logs", t->run_dir);
    if ((rc = cx_mkdir_p(path, err, errlen)) < 0)
        goto fail;
    if ((rc = make_tokens(t, err, errlen)) < 0)
        goto fail;
    /* the syncer's credentials: one per learner, the admin one is ours */
    snprintf(t->creds_dir, sizeof t->creds_dir, "%s/credentials", t->run_dir);
    snprintf(t->syncer_cred_file, sizeof t->syncer_cred_file, "%s/admin.cred", t->creds_dir);
    if ((rc = cred_dir_create(t->creds_dir, t->m, err, errlen)) < 0 ||
        (rc = cred_read_file(t->syncer_cred_file, t->syncer_cred, err, errlen)) < 0)
        goto fail;
    snprintf(path, sizeof path, "%s/syncer-config.json", t->run_dir);
    if (json_dump_file(cfg->syncer_cfg, path, JSON_INDENT(2) | JSON_SORT_KEYS) != 0) {
        rc = cx_fail(err, errlen, CX_EIO, "cannot write %s", path);
        goto fail;
    }

    /* syncer (or a foreign trainer's coordinator) */
    snprintf(t->syncer.state, sizeof t->syncer.state, "%s/%s", t->run_dir, t->sname);
    snprintf(t->syncer.log, sizeof t->syncer.log, "%s/logs/%s.log", t->run_dir, t->sname);
    if ((rc = cx_mkdir_p(t->syncer.state, err, errlen)) < 0)
        goto fail;
    if (cfg->trainer && cfg->trainer->events_file &&
        (rc = events_file_resolve(t, cfg->trainer->events_file, err, errlen)) < 0)
        goto fail;
    /* regions: every process below starts inside its namespace */
    if (cfg->network && cfg->network->kind == NETNS_REGIONS) {
        char e2[CX_ERRLEN];
        if ((rc = netns_create(cfg->network, t->m, cfg->unit_prefix, t->run_dir, &t->net, e2, sizeof e2)) <
            0) {
            cx_fail(err, errlen, rc, "topology.network: %s", e2);
            goto fail;
        }
    }
    char slisten[40];
    snprintf(slisten, sizeof slisten, "%s:0", t->net ? netns_addr(t->net, NETNS_SYNCER) : "127.0.0.1");
    if ((rc = syncer_spawn(t, slisten, err, errlen)) < 0)
        goto fail;
    write_pids(t);
    if ((rc = wait_ready(&t->syncer, t->sname, t->syncer_cred, topo_events_file(t), ready, err, errlen)) < 0)
        goto fail;
    snprintf(t->syncer_addr, sizeof t->syncer_addr, "%s", t->syncer.url + strlen("http://"));
    cx_info("%s ready url=%s", t->sname, t->syncer.url);

    /* agents, each with its learner behind its proxy */
    char proxy[128];
    snprintf(proxy, sizeof proxy, "syncer=127.0.0.1:0->%s", t->syncer_addr);
    for (int i = 0; i < t->m; i++)
        if ((rc = agent_spawn(t, cfg, i, proxy, err, errlen)) < 0)
            goto fail;
    write_pids(t);
    for (int i = 0; i < t->m; i++) {
        char what[32];
        snprintf(what, sizeof what, "agent %d", i);
        if ((rc = wait_ready(&t->agents[i], what, t->agents[i].token, NULL, ready, err, errlen)) < 0)
            goto fail;
    }
    cx_info("topology launched learners=%d %s=%s agents=%s..", t->m, t->sname, t->syncer.url,
            t->agents[0].url);
    *out = t;
    return 0;
fail:
    topo_free(t);
    return rc;
}

/* ---- topology: stop ---- */

static int pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int topo_stop(topo *t, long grace_ms)
{
    if (!t || !t->launched)
        return 0;
    int killed = 0;
    /* Agents first (in parallel): each reverts its faults and stops its
     * learner on SIGTERM. */
    for (int i = 0; i < t->m; i++)
        if (t->agents[i].pid > 0)
            kill(t->agents[i].pid, SIGTERM);
    int64_t end = cx_mono_ms() + grace_ms;
    for (;;) {
        int left = 0;
        for (int i = 0; i < t->m; i++) {
            topo_proc *a = &t->agents[i];
            int st;
            if (a->pid > 0 && waitpid(a->pid, &st, WNOHANG) == a->pid)
                a->pid = 0;
            if (a->pid > 0)
                left++;
        }
        if (!left || cx_mono_ms() >= end)
            break;
        cx_sleep_ms(50);
    }
    for (int i = 0; i < t->m; i++) {
        topo_proc *a = &t->agents[i];
        if (a->pid > 0) {
            cx_warn("agent %d did not stop within %ld ms; SIGKILL pid=%d", i, grace_ms, (int)a->pid);
            kill(-a->pid, SIGKILL);
            kill(a->pid, SIGKILL);
            waitpid(a->pid, NULL, 0);
            a->pid = 0;
            killed++;
        }
    }
    if (t->syncer.pid > 0) {
        if (cx_stop(t->syncer.pid, 1, grace_ms) == 0)
            t->syncer.pid = 0;
    }
    /* A learner whose agent died abruptly would be orphaned: its group goes. */
    for (int i = 0; i < t->m; i++) {
        topo_proc *a = &t->agents[i];
        if (pid_alive(a->unit_pid)) {
            cx_warn("learner %d (pid %d) outlived its agent; SIGKILL its group", i, (int)a->unit_pid);
            kill(-a->unit_pid, SIGKILL);
            kill(a->unit_pid, SIGKILL);
            killed++;
        }
        a->unit_pid = 0;
    }
    write_pids(t);
    /* every process is gone: nothing holds the namespaces any more */
    netns_destroy(t->net);
    t->net = NULL;
    return killed;
}

void topo_free(topo *t)
{
    if (!t)
        return;
    topo_stop(t, 10000);
    topo_free_argv(t->coord_tmpl);
    free(t->agents);
    free(t);
}

/* ---- topology: accessors ---- */

int topo_launched(const topo *t)
{
    return t->launched;
}

const char *topo_syncer_url(const topo *t)
{
    return t->syncer.url;
}

const char *topo_agent_url(const topo *t, int i)
{
    return i >= 0 && i < t->m ? t->agents[i].url : NULL;
}

const char *topo_token(const topo *t)
{
    return t->token[0] ? t->token : NULL;
}

const char *topo_agent_token(const topo *t, int i)
{
    return i >= 0 && i < t->m && t->agents[i].token[0] ? t->agents[i].token : NULL;
}

const char *topo_ca_file(const topo *t)
{
    return t->ca_file[0] ? t->ca_file : NULL;
}

const char *topo_syncer_credential(const topo *t)
{
    return t->syncer_cred[0] ? t->syncer_cred : NULL;
}

const char *topo_events_file(const topo *t)
{
    return t->events_file[0] ? t->events_file : NULL;
}

int topo_request_end(topo *t, const char *reason, char *err, size_t errlen)
{
    if (!t->launched || !t->events_file[0])
        return cx_fail(err, errlen, CX_ENOTSUP, "the run is ended by POST /v1/end (no events file)");
    json_t *o = json_pack("{s:s}", "reason", reason ? reason : "");
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    char path[TOPO_PATH + 8], *line = NULL;
    snprintf(path, sizeof path, "%s/end", t->syncer.state);
    int rc = asprintf(&line, "%s\n", s) < 0 ? cx_fail(err, errlen, CX_ENOMEM, "out of memory")
                                            : cx_file_write_atomic(path, line, strlen(line), err, errlen);
    free(line);
    free(s);
    return rc;
}

void topo_note_unit(topo *t, int i, pid_t pid)
{
    if (i < 0 || i >= t->m || t->agents[i].unit_pid == pid || pid <= 0)
        return;
    t->agents[i].unit_pid = pid;
    write_pids(t);
}

/* ---- topology: the syncer fault ---- */

int topo_syncer_kill(topo *t, int sig, char *err, size_t errlen)
{
    if (!t->launched)
        return cx_fail(err, errlen, CX_ENOTSUP, "attach mode: the harness did not start the syncer");
    if (t->syncer.pid <= 0)
        return cx_fail(err, errlen, CX_ECONFLICT, "the syncer is not running");
    pid_t pid = t->syncer.pid;
    kill(-pid, sig);
    kill(pid, sig);
    int st;
    if (cx_wait_timeout(pid, sig == SIGKILL ? 10000 : 30000, &st) < 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    t->syncer.pid = 0;
    write_pids(t);
    return 0;
}

int topo_syncer_start(topo *t, long ready_timeout_ms, char *err, size_t errlen)
{
    if (!t->launched)
        return cx_fail(err, errlen, CX_ENOTSUP, "attach mode: the harness did not start the syncer");
    if (t->syncer.pid > 0)
        return cx_fail(err, errlen, CX_ECONFLICT, "the syncer is already running");
    int rc = CX_EUNAVAIL;
    /* The port was just released; a few tries cover a slow TIME_WAIT/bind. */
    for (int attempt = 0; attempt < 5; attempt++) {
        if ((rc = syncer_spawn(t, t->syncer_addr, err, errlen)) < 0)
            return rc;
        write_pids(t);
        char what[32];
        snprintf(what, sizeof what, "restarted %s", t->sname);
        rc = wait_ready(&t->syncer, what, t->syncer_cred, topo_events_file(t), ready_timeout_ms, err, errlen);
        if (rc == 0)
            return 0;
        if (t->syncer.pid > 0) {
            cx_stop(t->syncer.pid, 1, 2000);
            t->syncer.pid = 0;
        }
        cx_warn("syncer restart attempt %d failed: %s", attempt + 1, err ? err : "");
        cx_sleep_ms(500);
    }
    return rc;
}
