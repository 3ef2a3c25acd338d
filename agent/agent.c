/* agent.c - the agent core: wiring, the unit's environment, the target
 * hooks the registry uses, the lease, halt, and the loop.
 */
#include "agent/agent.h"
#include "agent/api.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <libgen.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/file.h"
#include "common/http_server.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/parse.h"
#include "common/proc.h"
#include "injectors/cgroup.h"
#include "injectors/clock.h"

#define AGENT_STOP_GRACE_MS 5000

/* ---- agent: target hooks for the registry ---- */

static void expect_exit_cb(inj_target *t, int64_t restart_after_ms)
{
    agent *a = t->agent;
    if (a && a->sup)
        sup_expect_exit(a->sup, restart_after_ms);
}

/* "unit" = the --proxy proxies (a dynamic proxy is reached by its name
 * only); a proxy name = that one proxy, borrowed until target_put. An
 * unknown name is CX_ENOTFOUND (the registry turns it into a 400 for a new
 * fault, and into "nothing left to undo" for a revert). */
static int target_get(void *ctx, const char *name, inj_target *t, char *err, size_t errlen)
{
    agent *a = ctx;
    memset(t, 0, sizeof t[0]);
    if (!name || strcmp(name, "unit") == 0) {
        t->proxies = a->proxies;
        t->nproxies = a->nproxies;
    } else {
        agent_px *x = agent_px_get(a, name);
        if (!x) {
            char names[512] = "";
            size_t off = 0;
            agent_px *all[AGENT_MAX_PROXIES + AGENT_MAX_DYN_PROXIES];
            int n = agent_px_list(a, all, (int)(sizeof all / sizeof all[0]));
            for (int j = 0; j < n; j++) {
                if (off < sizeof names)
                    off +=
                        (size_t)snprintf(names + off, sizeof names - off, ", \"%s\"", proxy_name(all[j]->p));
                agent_px_put(a, all[j]);
            }
            return cx_fail(err, errlen, CX_ENOTFOUND, "target: unknown target '%s' (expected \"unit\"%s)",
                           name, names);
        }
        if (x->fixed) {
            t->proxies = &a->proxies[x - a->fixed_px];
        } else {
            proxy **one = malloc(sizeof *one);
            if (!one) {
                agent_px_put(a, x);
                return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            }
            one[0] = x->p;
            t->proxies = one;
        }
        t->nproxies = 1;
    }
    t->unit_id = a->o.id;
    t->state_dir = a->state_dir;
    t->hook_dir = a->hook_dir;
    t->faketime_file = a->faketime_file[0] ? a->faketime_file : NULL;
    t->diskfault_file = a->diskfault_file[0] ? a->diskfault_file : NULL;
    t->pid = 0;
    t->pidfd = -1;
    if (a->sup)
        sup_target(a->sup, &t->pid, &t->pidfd);
    t->expect_exit = expect_exit_cb;
    t->agent = a;
    return 0;
}

static void target_put(void *ctx, inj_target *t)
{
    agent *a = ctx;
    if (t->pidfd >= 0)
        close(t->pidfd);
    t->pidfd = -1;
    int fixed = t->proxies >= a->proxies && t->proxies < a->proxies + AGENT_MAX_PROXIES;
    if (t->proxies && !fixed) {
        pthread_mutex_lock(&a->px_lock);
        agent_px *x = a->dyn;
        while (x && x->p != t->proxies[0])
            x = x->next;
        pthread_mutex_unlock(&a->px_lock);
        if (x)
            agent_px_put(a, x);
        free(t->proxies);
    }
    t->proxies = NULL;
    t->nproxies = 0;
}

/* ---- agent: the unit's environment ---- */

static void find_faketime(agent *a)
{
    if (a->o.faketime_lib) {
        if (strcmp(a->o.faketime_lib, "none") != 0)
            snprintf(a->faketime_lib, sizeof a->faketime_lib, "%s", a->o.faketime_lib);
        return;
    }
    glob_t g;
    if (glob("/usr/lib/*/faketime/libfaketimeMT.so.1", 0, NULL, &g) == 0) {
        if (g.gl_pathc > 0)
            snprintf(a->faketime_lib, sizeof a->faketime_lib, "%s", g.gl_pathv[0]);
        globfree(&g);
    }
}

static void find_shim(agent *a)
{
    if (a->o.shim) {
        if (strcmp(a->o.shim, "none") != 0)
            snprintf(a->shim_lib, sizeof a->shim_lib, "%s", a->o.shim);
        return;
    }
    char exe[4096];
    if (cx_self_exe(exe, sizeof exe) != 0)
        return;
    char *dir = dirname(exe);
    char path[4200];
    snprintf(path, sizeof path, "%s/injectors/libchaosloco_diskfault.so", dir);
    if (access(path, R_OK) == 0 && strlen(path) < sizeof a->shim_lib)
        memcpy(a->shim_lib, path, strlen(path) + 1);
}

/* Build the NULL-terminated "K=V" list for the unit (each entry malloc'd). */
static char **unit_env(agent *a)
{
    char **env = calloc(12, sizeof *env);
    int n = 0;
    if (!env)
        return NULL;
    char buf[16384];
    snprintf(buf, sizeof buf, "CHAOSLOCO_HOOK_DIR=%s", a->hook_dir);
    env[n++] = strdup(buf);
    snprintf(buf, sizeof buf, "CHAOSLOCO_AGENT_ID=%s", a->o.id);
    env[n++] = strdup(buf);
    char preload[12288] = "";
    const char *inherited = getenv("LD_PRELOAD");
    if (inherited && inherited[0])
        snprintf(preload, sizeof preload, "%s", inherited);
    if (a->faketime_lib[0]) {
        size_t l = strlen(preload);
        snprintf(preload + l, sizeof preload - l, "%s%s", l ? ":" : "", a->faketime_lib);
        snprintf(buf, sizeof buf, "FAKETIME_TIMESTAMP_FILE=%s", a->faketime_file);
        env[n++] = strdup(buf);
        env[n++] = strdup("FAKETIME_NO_CACHE=1");
        env[n++] = strdup("DONT_FAKE_MONOTONIC=1");
    }
    if (a->shim_lib[0]) {
        size_t l = strlen(preload);
        snprintf(preload + l, sizeof preload - l, "%s%s", l ? ":" : "", a->shim_lib);
        snprintf(buf, sizeof buf, "CHAOSLOCO_DISKFAULT_FILE=%s", a->diskfault_file);
        env[n++] = strdup(buf);
    }
    if (a->faketime_lib[0] || a->shim_lib[0]) {
        snprintf(buf, sizeof buf, "LD_PRELOAD=%s", preload);
        env[n++] = strdup(buf);
        const char *asan = getenv("ASAN_OPTIONS");
        snprintf(buf, sizeof buf, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", asan && asan[0] ? asan : "",
                 asan && asan[0] ? ":" : "");
        env[n++] = strdup(buf);
    }
    env[n] = NULL;
    for (int i = 0; i < n; i++)
        if (!env[i]) {
            for (int j = 0; j < n; j++)
                free(env[j]);
            free(env);
            return NULL;
        }
    return env;
}

static void on_spawn(void *ctx, pid_t pid)
{
    agent *a = ctx;
    if (!a->cgroup)
        return;
    for (int c = 0; c < CG_NCTRL; c++) {
        if (!cg_set_available(a->cgroup, (cg_ctrl)c))
            continue;
        char err[CX_ERRLEN] = "";
        if (cg_set_attach_group(a->cgroup, (cg_ctrl)c, pid, err, sizeof err) < 0)
            cx_warn("unit pid=%d not attached to cgroup %s: %s", (int)pid, cg_set_dir(a->cgroup, (cg_ctrl)c),
                    err);
    }
}

/* libfaketime leaves /dev/shm/faketime_shm_<pid> and sem.faketime_sem_<pid>
 * behind when a faked process is killed: remove those whose owner is dead
 * (live owners' files are left alone). Only when the unit runs under
 * libfaketime. when: "start", "exit", "spawn" (for the log). */
static void clean_faketime_shm(agent *a, const char *when)
{
    if (!a->faketime_lib[0])
        return;
    int n = 0;
    char err[CX_ERRLEN] = "";
    if (inj_clock_clean_shm(NULL, &n, err, sizeof err) < 0)
        cx_warn("libfaketime shm cleanup (%s): %s", when, err);
    else if (n > 0)
        cx_info("libfaketime shm cleanup (%s): %d stale file(s) of dead processes removed", when, n);
}

/* End every process left in the unit's cgroup (the unit's group is gone
 * by now: what is left there left the group, e.g. with setsid). when: for
 * the log. Returns how many were signalled. */
static int end_cgroup_leftovers(agent *a, const char *when)
{
    int n = 0;
    char err[CX_ERRLEN] = "";
    if (!a->cgroup)
        return 0;
    int rc = cg_set_kill(a->cgroup, &n, err, sizeof err);
    if (rc < 0 && rc != CX_ENOTSUP)
        cx_warn("%s: unit cgroup: %s", when, err);
    if (n > 0)
        cx_warn("%s: %d process(es) left the unit's process group but not its cgroup: SIGKILL", when, n);
    return n;
}

/* Supervisor hook (its lock held): after each reaped exit, before each spawn. */
static void on_cleanup(void *ctx, pid_t dead_pid)
{
    clean_faketime_shm(ctx, dead_pid > 0 ? "exit" : "spawn");
    end_cgroup_leftovers(ctx, dead_pid > 0 ? "unit exit" : "unit spawn");
}

/* ---- agent: construction ---- */

/* Copy argv with every "{proxy.NAME}" replaced by that proxy's listen
 * address. NULL + err on an unknown proxy name. Entries malloc'd. */
static char **subst_argv(agent *a, const char *const *argv, char *err, size_t errlen)
{
    size_t n = 0;
    while (argv[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    if (!out) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        cx_buf b;
        cx_buf_init(&b, 65536);
        const char *s = argv[i];
        int bad = 0;
        while (*s && !bad) {
            const char *open = strstr(s, "{proxy.");
            if (!open) {
                cx_buf_append(&b, s, strlen(s));
                break;
            }
            cx_buf_append(&b, s, (size_t)(open - s));
            const char *close = strchr(open, '}');
            if (!close) {
                cx_buf_append(&b, open, strlen(open));
                break;
            }
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(close - open - 7), open + 7);
            proxy *p = agent_proxy(a, name);
            if (!p) {
                cx_fail(err, errlen, CX_EINVAL, "unit argument '%s': no --proxy named '%s'", argv[i], name);
                bad = 1;
                break;
            }
            const char *addr = proxy_listen_addr(p);
            cx_buf_append(&b, addr, strlen(addr));
            s = close + 1;
        }
        out[i] = bad ? NULL : cx_buf_take(&b, NULL);
        cx_buf_cleanup(&b);
        if (!out[i] && !bad)
            out[i] = strdup("");
        if (!out[i]) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            if (!bad)
                cx_fail(err, errlen, CX_ENOMEM, "out of memory");
            return NULL;
        }
    }
    return out;
}

static int write_text(const char *path, const char *text, char *err, size_t errlen)
{
    return cx_file_write_atomic(path, text, strlen(text), err, errlen);
}

/* The unit's cgroups (none without a unit or with --no-cgroup), and the
 * note /v1/status shows about them. */
static void open_cgroups(agent *a)
{
    if (a->o.no_cgroup || !a->o.argv) {
        snprintf(a->cgroup_note, sizeof a->cgroup_note, "disabled");
        return;
    }
    cg_set *cg = NULL;
    char cerr[CX_ERRLEN] = "";
    if (cg_set_open(NULL, a->o.id, &cg, cerr, sizeof cerr) != 0) {
        snprintf(a->cgroup_note, sizeof a->cgroup_note, "unavailable: %s", cerr);
        return;
    }
    a->cgroup = cg;
    size_t off = 0;
    static const char *names[CG_NCTRL] = {"freezer", "cpu", "memory"};
    for (int c = 0; c < CG_NCTRL && off < sizeof a->cgroup_note; c++)
        off += (size_t)snprintf(a->cgroup_note + off, sizeof a->cgroup_note - off, "%s%s=%s", c ? " " : "",
                                names[c], cg_set_available(cg, (cg_ctrl)c) ? "v" : "no");
}

/* The HTTP API, and <state>/listen.addr once it listens. */
static int start_api(agent *a, char *err, size_t errlen)
{
    const agent_opts *o = &a->o;
    /* Known before the first request: the gate's Host and open-Toxiproxy
     * rules depend on it. */
    char host[128];
    int port = 0;
    if (cx_parse_hostport(o->listen, "--listen", host, sizeof host, &port, NULL, 0) < 0)
        snprintf(host, sizeof host, "127.0.0.1");
    /* the wildcards are no loopback: they take the network's clients too */
    int wildcard = strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
    if (strcmp(host, "::") == 0)
        snprintf(host, sizeof host, "::1"); /* where a local client reaches it */
    else if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "localhost") == 0 || host[0] == '\0')
        snprintf(host, sizeof host, "127.0.0.1");
    a->loopback = !wildcard && cx_ip_is_loopback(host);
    if (strcmp(o->listen, "localhost") == 0 || strncmp(o->listen, "localhost:", 10) == 0)
        a->loopback = 1;
    char why[CX_ERRLEN];
    if (cx_http_tls_read(o->tls_cert, o->tls_key, &a->tls_cert, &a->tls_key, why, sizeof why) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "TLS: %s", why);
    cx_http_server_opts hopts = {.reserved = agent_reserved_routes,
                                 .gate = &agent_gate,
                                 .tls_cert_pem = a->tls_cert,
                                 .tls_key_pem = a->tls_key};
    a->http = cx_http_server_new_opts(o->listen, agent_routes, agent_nroutes, a, AGENT_BODY_MAX, &hopts, err,
                                      errlen);
    if (!a->http)
        return CX_EUNAVAIL;
    /* handlers may already run: listen_addr is read under the lock */
    pthread_mutex_lock(&a->lock);
    cx_hostport_format(host, cx_http_server_port(a->http), a->listen_addr, sizeof a->listen_addr);
    pthread_mutex_unlock(&a->lock);
    char path[4200];
    snprintf(path, sizeof path, "%s/listen.addr", a->state_dir);
    return write_text(path, a->listen_addr, err, errlen);
}

/* Undo whatever a crashed agent left, before the unit starts: its faults
 * (the registry's sweep), what is left of its unit's group, and what of it
 * left that group but not the unit's cgroup. Failures are logged. */
static void crash_sweep(agent *a)
{
    int nswept = 0;
    char serr[CX_ERRLEN] = "";
    int src = reg_sweep_previous(a->reg, &nswept, serr, sizeof serr);
    if (src < 0)
        cx_error("crash sweep: %s", serr);
    else if (nswept > 0)
        cx_info("crash sweep: %d fault(s) of a previous agent undone", nswept);
    /* ... and end what is left of its unit (a unit that forked keeps a
     * group that the dead agent's watchdog may not have killed). */
    int nended = 0;
    if (agent_sweep_unit(a, AGENT_STOP_GRACE_MS, &nended, serr, sizeof serr) < 0)
        cx_error("crash sweep: unit: %s", serr);
    else if (nended > 0)
        cx_warn("crash sweep: %d process(es) of the previous agent's unit ended", nended);
    /* ... and whatever of it left that group but not the unit's cgroup */
    end_cgroup_leftovers(a, "crash sweep");
}

/* The supervisor of the unit o->argv (its {placeholders} substituted),
 * with the agent's env, unit.log, unit.json, cgroups to join and kill.
 * NULL with err filled on failure. */
static sup *unit_sup_new(agent *a, const agent_opts *o, char *err, size_t errlen)
{
    char **argv = subst_argv(a, o->argv, err, errlen);
    if (!argv)
        return NULL;
    char **env = unit_env(a);
    if (!env) {
        for (char **p = argv; *p; p++)
            free(*p);
        free(argv);
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return NULL;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/unit.log", a->state_dir);
    char unit_file[4200];
    snprintf(unit_file, sizeof unit_file, "%s/unit.json", a->state_dir);
    sup_opts so = {
        .argv = (const char *const *)argv,
        .extra_env = (const char *const *)env,
        .log_path = path,
        .log_max_bytes = o->log_max_bytes,
        .restart = o->restart,
        .restart_backoff_ms = o->restart_backoff_ms,
        .on_spawn = on_spawn,
        .on_spawn_ctx = a,
        .on_cleanup = on_cleanup,
        .on_cleanup_ctx = a,
        .unit_file = unit_file,
        .group_grace_ms = AGENT_STOP_GRACE_MS,
    };
    cg_kill_spec ks;
    if (a->cgroup && cg_set_kill_spec(a->cgroup, &ks) == 0)
        so.cgroup_kill = &ks;
    char join_paths[CG_NCTRL][CG_KILL_PATH];
    const char *join[CG_NCTRL + 1];
    int nj = 0;
    for (int c = 0; a->cgroup && c < CG_NCTRL; c++)
        if (cg_set_available(a->cgroup, (cg_ctrl)c)) {
            snprintf(join_paths[nj], sizeof join_paths[nj], "%s/cgroup.procs",
                     cg_set_dir(a->cgroup, (cg_ctrl)c));
            join[nj] = join_paths[nj];
            nj++;
        }
    join[nj] = NULL;
    if (nj > 0)
        so.join_cgroups = join;
    sup *s = sup_new(&so, err, errlen);
    for (char **p = env; *p; p++)
        free(*p);
    free(env);
    for (char **p = argv; *p; p++)
        free(*p);
    free(argv);
    return s;
}

agent *agent_new(const agent_opts *o, char *err, size_t errlen)
{
    agent *a = calloc(1, sizeof *a);
    if (!a) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        return NULL;
    }
    a->o = *o;
    pthread_mutex_init(&a->lock, NULL);
    a->start_ppid = getppid();
    pthread_mutex_init(&a->px_lock, NULL);
    a->started_mono_ms = cx_mono_ms();
    a->state_dir = strdup(o->state_dir);
    a->token = strdup(o->token ? o->token : "");
    if (!a->state_dir || !a->token) {
        cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        goto fail;
    }
    if (cx_mkdir_p(a->state_dir, err, errlen) < 0)
        goto fail;
    /* Absolute, so the unit (which may chdir) and hook files agree. */
    char *abs = realpath(a->state_dir, NULL);
    if (abs) {
        free(a->state_dir);
        a->state_dir = abs;
    }
    snprintf(a->hook_dir, sizeof a->hook_dir, "%s/hooks", a->state_dir);
    if (cx_mkdir_p(a->hook_dir, err, errlen) < 0)
        goto fail;

    find_faketime(a);
    find_shim(a);
    clean_faketime_shm(a, "start");
    /* Both control files get their neutral content before anything else:
     * whatever a previous agent left skewed or failing is undone here too. */
    if (a->faketime_lib[0]) {
        snprintf(a->faketime_file, sizeof a->faketime_file, "%s/faketime", a->state_dir);
        if (write_text(a->faketime_file, "+0\n", err, errlen) < 0)
            goto fail;
    }
    if (a->shim_lib[0]) {
        snprintf(a->diskfault_file, sizeof a->diskfault_file, "%s/diskfault", a->state_dir);
        if (write_text(a->diskfault_file, "off\n", err, errlen) < 0)
            goto fail;
    }

    char path[4200];
    snprintf(path, sizeof path, "%s/audit.jsonl", a->state_dir);
    a->audit = audit_new(path, err, errlen);
    if (!a->audit)
        goto fail;

    for (int i = 0; i < o->nproxies; i++) {
        a->proxies[i] =
            proxy_new(o->proxies[i].name, o->proxies[i].listen, o->proxies[i].upstream, err, errlen);
        if (!a->proxies[i])
            goto fail;
        a->fixed_px[i] = (agent_px){.p = a->proxies[i], .fixed = 1};
        a->nproxies++;
    }

    open_cgroups(a);

    reg_hooks hooks = {
        .target_get = target_get, .target_put = target_put, .sweep_check = agent_sweep_check, .ctx = a};
    int64_t maxd = o->max_duration_ms > 0 ? o->max_duration_ms : AGENT_DEFAULT_MAX_DURATION_MS;
    a->reg = reg_new(a->state_dir, maxd, &hooks, err, errlen);
    if (!a->reg)
        goto fail;
    crash_sweep(a);

    if (o->argv && !(a->sup = unit_sup_new(a, o, err, errlen)))
        goto fail;

    if (start_api(a, err, errlen) < 0)
        goto fail;
    return a;
fail:
    agent_free(a);
    return NULL;
}

void agent_free(agent *a)
{
    if (!a)
        return;
    cx_http_server_free(a->http);
    sup_free(a->sup, AGENT_STOP_GRACE_MS);
    reg_free(a->reg);
    for (int i = 0; i < a->nproxies; i++)
        proxy_free(a->proxies[i]);
    /* Dynamic proxies left (their faults were reverted at shutdown unless
     * a call came in after it): nothing borrows them any more. */
    for (agent_px *x = a->dyn, *nx; x; x = nx) {
        nx = x->next;
        proxy_free(x->p);
        free(x);
    }
    if (a->cgroup) {
        char err[CX_ERRLEN] = "";
        end_cgroup_leftovers(a, "agent stop"); /* before the removal moves them out */
        if (cg_set_remove(a->cgroup, err, sizeof err) < 0)
            cx_warn("cgroup cleanup: %s", err);
        cg_set_free(a->cgroup);
    }
    audit_free(a->audit);
    pthread_mutex_destroy(&a->px_lock);
    pthread_mutex_destroy(&a->lock);
    free(a->state_dir);
    free(a->token);
    free(a->tls_cert);
    if (a->tls_key)
        memset(a->tls_key, 0, strlen(a->tls_key));
    free(a->tls_key);
    free(a);
}

/* ---- agent: lease and halt ---- */

void agent_lease_renew(agent *a, int64_t ttl_ms)
{
    pthread_mutex_lock(&a->lock);
    a->lease_ttl_ms = ttl_ms;
    a->lease_expires_mono_ms = cx_mono_ms() + ttl_ms;
    a->lapsed_mono_ms = 0;
    a->leased = 1;
    pthread_mutex_unlock(&a->lock);
}

void agent_lease_release(agent *a)
{
    pthread_mutex_lock(&a->lock);
    a->lease_ttl_ms = 0;
    a->lease_expires_mono_ms = 0;
    pthread_mutex_unlock(&a->lock);
}

int agent_lease_held(agent *a)
{
    pthread_mutex_lock(&a->lock);
    int held = a->lease_ttl_ms > 0 && cx_mono_ms() < a->lease_expires_mono_ms;
    pthread_mutex_unlock(&a->lock);
    return held;
}

json_t *agent_lease_json(agent *a)
{
    pthread_mutex_lock(&a->lock);
    json_t *o = json_null();
    if (a->lease_ttl_ms > 0) {
        int64_t left = a->lease_expires_mono_ms - cx_mono_ms();
        o = json_pack("{s:I,s:I}", "ttl_ms", (json_int_t)a->lease_ttl_ms, "expires_in_ms",
                      (json_int_t)(left > 0 ? left : 0));
    }
    pthread_mutex_unlock(&a->lock);
    return o;
}

/* The dead-man's switch: a lease that lapsed reverts what was done under it. */
static void lease_check(agent *a, int64_t now)
{
    pthread_mutex_lock(&a->lock);
    int lapsed = a->lease_ttl_ms > 0 && now >= a->lease_expires_mono_ms;
    if (lapsed) {
        a->lease_ttl_ms = 0;
        a->lease_lapses++;
        a->lapsed_mono_ms = now;
    }
    pthread_mutex_unlock(&a->lock);
    if (lapsed) {
        int n = reg_revert_all(a->reg, "lease", 1);
        cx_warn("lease lapsed: %d fault(s) created under it reverted", n);
    }
}

/* With --orphan-exit-ms: the lease lapsed (faults already reverted) and
 * nobody took a new one in time; or no lease was ever taken and the
 * process that started the agent (a harness that died during its start-up)
 * has been gone that long. */
static int orphaned(agent *a, int64_t now)
{
    if (a->o.orphan_exit_ms <= 0)
        return 0;
    pthread_mutex_lock(&a->lock);
    int gone = a->lapsed_mono_ms > 0 && now - a->lapsed_mono_ms >= a->o.orphan_exit_ms;
    int leased = a->leased;
    pthread_mutex_unlock(&a->lock);
    if (!leased && getppid() != a->start_ppid && a->parent_gone_mono_ms == 0)
        a->parent_gone_mono_ms = now;
    return gone || (!leased && a->parent_gone_mono_ms > 0 && now - a->parent_gone_mono_ms >= a->o.orphan_exit_ms);
}

int agent_halted(agent *a)
{
    pthread_mutex_lock(&a->lock);
    int h = a->halted;
    pthread_mutex_unlock(&a->lock);
    return h;
}

int agent_halt(agent *a)
{
    pthread_mutex_lock(&a->lock);
    a->halted = 1;
    pthread_mutex_unlock(&a->lock);
    int n = reg_revert_all(a->reg, "halt", 0);
    cx_warn("halted: %d fault(s) reverted, new faults refused until resume", n);
    return n;
}

void agent_resume(agent *a)
{
    pthread_mutex_lock(&a->lock);
    a->halted = 0;
    pthread_mutex_unlock(&a->lock);
    cx_info("resumed: faults accepted again");
}

/* ---- agent: status ---- */

json_t *agent_status_json(agent *a)
{
    char listen[sizeof a->listen_addr];
    pthread_mutex_lock(&a->lock);
    snprintf(listen, sizeof listen, "%s", a->listen_addr);
    pthread_mutex_unlock(&a->lock);
    /* The loop syncs paused every ~10 ms; sync here too so that a status
     * read right after POST /v1/faults already says "paused". */
    if (a->sup)
        sup_set_paused(a->sup, reg_active(a->reg, "pause") > 0);
    json_t *unit = a->sup ? sup_status_json(a->sup)
                          : json_pack("{s:s,s:n,s:i,s:i,s:n}", "state", "exited", "pid", "incarnation", 0,
                                      "restarts", 0, "last_exit");
    json_t *proxies = json_array();
    agent_px *all[AGENT_MAX_PROXIES + AGENT_MAX_DYN_PROXIES];
    int npx = agent_px_list(a, all, (int)(sizeof all / sizeof all[0]));
    for (int i = 0; i < npx; i++) {
        json_t *p = proxy_json(all[i]->p);
        if (p) {
            json_object_set_new(p, "partitioned", json_boolean(proxy_partitioned(all[i]->p)));
            json_object_set_new(p, "dynamic", json_boolean(!all[i]->fixed));
            json_object_set_new(p, "stats", proxy_stats_json(all[i]->p));
            json_array_append_new(proxies, p);
        }
        agent_px_put(a, all[i]);
    }
    json_t *o =
        json_pack("{s:s,s:o,s:b,s:o,s:i,s:o,s:s,s:I,s:s,s:{s:s,s:s?,s:s?,s:s?,s:s?,s:s}}", "id", a->o.id,
                  "unit", unit, "halted", agent_halted(a), "lease", agent_lease_json(a), "faults_active",
                  reg_active(a->reg, NULL), "proxies", proxies, "version", CHAOSLOCO_VERSION, "uptime_ms",
                  (json_int_t)(cx_mono_ms() - a->started_mono_ms), "listen", listen, "hooks", "hook_dir",
                  a->hook_dir, "faketime_file", a->faketime_file[0] ? a->faketime_file : NULL, "faketime_lib",
                  a->faketime_lib[0] ? a->faketime_lib : NULL, "diskfault_file",
                  a->diskfault_file[0] ? a->diskfault_file : NULL, "shim",
                  a->shim_lib[0] ? a->shim_lib : NULL, "cgroup", a->cgroup_note);
    return o;
}

/* ---- agent: the loop ---- */

int agent_run(agent *a, volatile sig_atomic_t *stop)
{
    int rc = CX_EXIT_OK;
    if (a->sup) {
        char err[CX_ERRLEN] = "";
        if (sup_start(a->sup, err, sizeof err) < 0) {
            cx_error("cannot start the unit: %s", err);
            rc = CX_EXIT_FAILURE;
            goto shutdown;
        }
    }
    while (!*stop) {
        int pfd = a->sup ? sup_pidfd(a->sup) : -1;
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        if (pfd >= 0)
            poll(&p, 1, 10);
        else
            cx_sleep_ms(10);
        int64_t now = cx_mono_ms();
        if (a->sup)
            sup_poll(a->sup, now);
        reg_tick(a->reg, now);
        lease_check(a, now);
        if (orphaned(a, now)) {
            cx_warn("no lease for %lld ms after the last one lapsed (or, before any lease, after the "
                    "process that started this agent died): the harness is gone, shutting down",
                    (long long)a->o.orphan_exit_ms);
            break;
        }
        int total = 0, paused = 0;
        if (a->sup && reg_try_active(a->reg, "pause", &total, &paused) == 0) {
            sup_set_paused(a->sup, paused > 0);
            /* The unit ended for good by itself: nothing left to inject into. */
            if (sup_get_state(a->sup) == SUP_EXITED && total > 0) {
                int n = reg_revert_all(a->reg, "unit_exit", 0);
                cx_info("unit exited for good: %d fault(s) reverted", n);
            }
        }
    }
shutdown : {
    int n = reg_revert_all(a->reg, "halt", 0);
    if (n > 0)
        cx_info("shutdown: %d fault(s) reverted", n);
}
    if (a->sup) {
        sup_stop(a->sup, AGENT_STOP_GRACE_MS); /* its cleanup hook runs after the reap */
        cx_info("unit stopped");
    }
    clean_faketime_shm(a, "shutdown");
    return rc;
}
