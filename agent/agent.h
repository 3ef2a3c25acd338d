/* agent.h - the agent core: one supervised unit, its proxies, the fault
 * registry, the lease (dead-man's switch), halt, and the loop that drives
 * them.
 *
 * What it is: the object agent_main.c builds from flags and the HTTP layer
 * (api.c, toxiproxy.c, metrics.c) works on. Its struct is visible to those
 * agent/ files only (this header is internal to agent/); everything else
 * goes through the functions below.
 * What it is not: the fault kinds (injectors/) or the TCP proxy
 * (injectors/proxy/).
 *
 * Proxies: the --proxy ones (`proxies[]`, fixed for the agent's life: the
 * unit was started with their addresses) and the dynamic ones created
 * through the Toxiproxy API (each a registered fault of type "proxy",
 * removed when it is reverted). Both are reached through agent_px_get /
 * agent_px_put, which keep a dynamic proxy alive while it is borrowed.
 *
 * Locks: `lock` guards halted and the lease; `px_lock` the dynamic proxy
 * list (a leaf: nothing is taken under it); the registry and the
 * supervisor have their own. Order: agent lock, then registry, then
 * px_lock / supervisor; never the other way round.
 */
#ifndef AGENT_AGENT_H
#define AGENT_AGENT_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/audit.h"
#include "agent/registry.h"
#include "agent/supervisor.h"
#include "common/http_server.h"
#include "injectors/proxy/proxy.h"

#define AGENT_MAX_PROXIES 16     /* --proxy */
#define AGENT_MAX_DYN_PROXIES 64 /* created through the Toxiproxy API */
#define AGENT_MAX_LISTEN_ALLOW 8 /* --toxiproxy-listen-allow */
#define AGENT_BODY_MAX (64 * 1024)
#define AGENT_DEFAULT_MAX_DURATION_MS (10 * 60 * 1000)

typedef struct agent_proxy_spec {
    char name[65];      /* Toxiproxy proxy name */
    char listen[128];   /* HOST:PORT */
    char upstream[128]; /* HOST:PORT */
} agent_proxy_spec;

typedef struct agent_opts {
    const char *listen;    /* API HOST:PORT */
    const char *id;        /* --id */
    const char *state_dir; /* --state-dir */
    const char *token;     /* bearer token (read from --token-file) */
    const char *tls_cert;  /* --tls-cert: PEM file, or NULL (plain HTTP) */
    const char *tls_key;   /* --tls-key: PEM file, with tls_cert */
    agent_proxy_spec proxies[AGENT_MAX_PROXIES];
    int nproxies;
    sup_restart restart;        /* --restart */
    int64_t restart_backoff_ms; /* --restart-backoff-ms */
    int toxiproxy_compat;       /* --toxiproxy-compat: the token also as a Basic auth password */
    char listen_allow[AGENT_MAX_LISTEN_ALLOW][46]; /* --toxiproxy-listen-allow: inet_ntop form, v4 or v6 */
    int nlisten_allow;                             /* entries of listen_allow */
    int64_t max_duration_ms;                       /* --max-duration-ms */
    int64_t log_max_bytes;                         /* --log-max-bytes */
    const char *shim;                              /* --shim PATH or NULL (look next to the binary) */
    const char *faketime_lib;                      /* --faketime-lib PATH or NULL (search /usr/lib) */
    int no_cgroup;                                 /* --no-cgroup */
    int64_t orphan_exit_ms;  /* --orphan-exit-ms: shut down this long after a lapse, 0 = never */
    const char *const *argv; /* unit command, or NULL: no unit (tests) */
} agent_opts;

/* One proxy as the agent holds it. */
typedef struct agent_px {
    proxy *p;
    int fixed;             /* from --proxy: never removed, refs unused */
    int refs;              /* dynamic: borrowers, plus 1 while listed */
    int listed;            /* dynamic: in the Toxiproxy name space */
    struct agent_px *next; /* dynamic list, oldest first (listed or still borrowed) */
} agent_px;

typedef struct agent {
    agent_opts o;                      /* borrowed strings live as long as the agent */
    char *state_dir;                   /* owned copy */
    char *token;                       /* owned copy */
    char *tls_cert;                    /* PEM text, or NULL (plain HTTP) */
    char *tls_key;                     /* PEM text (a secret: wiped on free) */
    char hook_dir[4096];               /* <state>/hooks */
    char faketime_file[4096];          /* <state>/faketime, or "" when libfaketime is absent */
    char diskfault_file[4096];         /* <state>/diskfault, or "" when the shim is absent */
    char faketime_lib[4096];           /* path or "" */
    char shim_lib[4096];               /* path or "" */
    proxy *proxies[AGENT_MAX_PROXIES]; /* --proxy, in flag order */
    agent_px fixed_px[AGENT_MAX_PROXIES];
    int nproxies;
    pthread_mutex_t px_lock; /* dyn */
    agent_px *dyn;           /* dynamic proxies */
    reg *reg;
    sup *sup; /* NULL when there is no unit */
    audit *audit;
    void *cgroup;          /* injectors/cgroup.h handle when available */
    char cgroup_note[256]; /* why the unit is (not) in its cgroups */
    cx_http_server *http;  /* the API server */
    char listen_addr
        [160]; /* where this host reaches the API (listen.addr): the bound address, 127.0.0.1 for 0.0.0.0 */
    int loopback; /* listening on a loopback address */

    pthread_mutex_t lock;
    int halted;                    /* POST /v1/halt until /v1/resume */
    int64_t lease_ttl_ms;          /* 0 = no lease held */
    int64_t lease_expires_mono_ms; /* when it lapses */
    int64_t lease_lapses;          /* count, for /metrics */
    int64_t lapsed_mono_ms;        /* when the last lease lapsed; 0 while one is held or none was */
    int leased;                    /* a lease was ever taken */
    int64_t started_mono_ms;       /* agent start */
    pid_t start_ppid;              /* the process that started the agent (main loop only) */
    int64_t parent_gone_mono_ms;   /* when it was seen gone before any lease; 0 not seen (main loop only) */
} agent;

/* Build everything (state dir, hook files, proxies, registry + crash sweep,
 * supervisor, API server) but do not start the unit. NULL + err. */
agent *agent_new(const agent_opts *o, char *err, size_t errlen);
/* Start the unit (if any) and loop until *stop is set (or, with
 * orphan_exit_ms, until that long after a lease lapsed with no new lease):
 * reap, restart, tick faults, expire the lease. Then revert every fault
 * (revert_reason "halt") and stop the unit. Returns an exit status: CX_EXIT_OK, or
 * CX_EXIT_FAILURE when the unit could not be
 * started. */
int agent_run(agent *a, volatile sig_atomic_t *stop);
void agent_free(agent *a);

/* Lease: renew for ttl_ms (> 0). */
void agent_lease_renew(agent *a, int64_t ttl_ms);
/* Release without reverting (ttl_ms 0 in the API). */
void agent_lease_release(agent *a);
/* 1 when a lease is held now. */
int agent_lease_held(agent *a);
/* {ttl_ms, expires_in_ms} or null. */
json_t *agent_lease_json(agent *a);

int agent_halted(agent *a);
/* Halt: refuse new faults and revert every active one. Returns count. */
int agent_halt(agent *a);
void agent_resume(agent *a);

/* GET /v1/status body. */
json_t *agent_status_json(agent *a);
/* Proxy by name or NULL: a --proxy one, or a dynamic one borrowed until
 * agent_px_put (which frees it when it was removed meanwhile). */
agent_px *agent_px_get(agent *a, const char *name);
void agent_px_put(agent *a, agent_px *x);
/* Every proxy (--proxy ones first, then the dynamic ones oldest first),
 * each borrowed: at most max into out; returns how many. */
int agent_px_list(agent *a, agent_px **out, int max);
/* A new dynamic proxy (the "proxy" fault's apply): CX_ECONFLICT when the
 * name is taken, CX_ETOOBIG past AGENT_MAX_DYN_PROXIES. On success the
 * agent owns p. */
int agent_px_add(agent *a, proxy *p, char *err, size_t errlen);
/* Take a dynamic proxy out of the name space (its fault's revert); it is
 * freed once the last borrower puts it. CX_ENOTFOUND when not listed. */
int agent_px_remove(agent *a, const char *name);
/* The registry's sweep_check hook (scope.c): a previous agent's undo
 * record may only name files inside the state dir, this agent's cgroups
 * and its own unit's processes. ctx is the agent. */
int agent_sweep_check(void *ctx, const char *type, const json_t *undo, char *err, size_t errlen);
/* End what a crashed agent's unit left running (<state>/unit.json names
 * its process group): SIGTERM, grace_ms, SIGKILL, to marked members only
 * (scope.c). *nended = processes ended; the file is removed after. 0, or
 * an error when the record is unreadable or a process survives. */
int agent_sweep_unit(agent *a, int64_t grace_ms, int *nended, char *err, size_t errlen);

/* A --proxy proxy by name, or NULL (no borrowing needed). */
proxy *agent_proxy(agent *a, const char *name);

/* Route table for cx_http_server (api.c + toxiproxy.c). */
extern const cx_http_route agent_routes[];
extern const size_t agent_nroutes;
/* "METHOD PATTERN" of the routes admitted through a connection flood (halt,
 * lease), NULL-terminated. */
extern const char *const agent_reserved_routes[];

#endif
