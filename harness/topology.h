/* topology.h - the processes an experiment runs against: launched here on
 * loopback, or attached to by URL.
 *
 * Launch mode starts, with fork/execve (common/proc.h, never a shell), each
 * in its own process group and with its output in RUN/logs/:
 *
 *   chaosloco syncer --listen 127.0.0.1:0 --state-dir RUN/syncer
 *                    --config RUN/syncer-config.json
 *                    --credentials-dir RUN/credentials   (0700, made here)
 *   chaosloco agent  --listen 127.0.0.1:0 --id <unit-prefix>-N
 *                    --state-dir RUN/agents/N --token-file RUN/tokens/agent-N
 *                    --proxy syncer=127.0.0.1:0->SYNCER --restart on-failure
 *                    -- chaosloco learner --syncer http://{proxy.syncer}
 *                       --id N --state-dir RUN/learners/N          (N = 0..M-1)
 *                       --credential-file RUN/credentials/learner-N.cred
 *                       [--steps BUDGET]     (learner_steps > 0: horizon.h)
 *
 * and waits until each wrote listen.addr and answers GET /v1/status. Every
 * pid it starts (and every learner pid the agents report, topo_note_unit)
 * is recorded in RUN/pids.json (atomically rewritten; "all" keeps every pid
 * ever recorded, also after the stop), so a test or an
 * operator can find whatever a killed harness left behind. Agents are not
 * tied to the harness's life on purpose: if the harness dies, its lease
 * lapses and each agent reverts its faults (the dead-man's switch).
 *
 * The harness calls the syncer with RUN/credentials/admin.cred (end of run,
 * status reads); the agents' token is never sent to the syncer.
 *
 * With a foreign trainer (topo_trainer: an experiment's topology.trainer)
 * the coordinator command replaces the syncer and the learner command
 * replaces `chaosloco learner` under each agent, after their {placeholders}
 * are expanded (topo_expand; the list is topo_placeholders). Everything else
 * is the same: the coordinator gets its own process group, its log in
 * RUN/logs/coordinator.log and is ready when RUN/coordinator/listen.addr
 * exists and GET /v1/status answers; each learner runs under its agent with
 * the proxy on its path. Both commands run in the trainer's cwd (the agent
 * is started there and its unit inherits it), and every path handed to them
 * is absolute. docs/telemetry.md says what the coordinator must serve.
 *
 * A foreign trainer with the file form of the telemetry contract
 * (topo_trainer.events_file) is ready when listen.addr exists (the agents'
 * proxies forward its learners' traffic there) and its events file is not
 * empty; the harness then reads the file (harness/events_file.h) instead
 * of GET /v1/status and /v1/events, and ends the run by writing
 * <its state dir>/end (topo_request_end) instead of POST /v1/end.
 *
 * With a network of kind netns (topo_launch_cfg.network; harness/netns.h)
 * the same processes start inside network namespaces: the syncer (or
 * coordinator) in the syncer's, listening on its namespace's address
 * instead of 127.0.0.1; each agent in its unit's namespace, listening on
 * that namespace's address (the harness reaches it through its link into
 * the hub), its proxy on 127.0.0.1 inside the namespace and upstream to the
 * syncer's address; each learner inherits its agent's namespace. topo_stop
 * removes the namespaces once every process is gone (RUN/network.json says
 * what they were).
 *
 * Every agent has a token of its own (RUN/tokens/agent-N, 0600, in a 0700
 * directory; attach mode: topology.attach.agents[i].token_file or the
 * shared token_file): one agent's token opens no other agent. RUN/token is
 * the operator's, for the dashboard's controls; the dashboard forwards each
 * control with the agent's own token.
 *
 * Attach mode only records the URLs, the agents' tokens, the CA and the
 * syncer credential; it starts and stops nothing.
 *
 * Ownership: a topo owns its strings and children; topo_free stops every
 * process it started (SIGTERM, grace, SIGKILL) — agents first, so they
 * stop their learners, then the syncer.
 */
#ifndef HARNESS_TOPOLOGY_H
#define HARNESS_TOPOLOGY_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "harness/netns.h"

typedef struct topo topo;

/* A foreign trainer's commands (topology.trainer; docs/experiments.md). */
typedef struct topo_trainer {
    char **coordinator; /* argv template of the coordinator, ncoordinator entries, NULL-terminated */
    int ncoordinator;
    char **learner; /* argv template of one learner unit, nlearner entries, NULL-terminated */
    int nlearner;
    char *cwd;         /* as written: relative to the experiment file's directory; NULL = that directory */
    char *events_file; /* telemetry.events_file: a coordinator template of the JSON-lines event file
                          it writes (docs/telemetry.md, the file form); NULL = HTTP telemetry */
} topo_trainer;

/* Which command a placeholder is expanded in. */
typedef enum topo_role { TOPO_COORDINATOR, TOPO_LEARNER } topo_role;

/* The placeholders of role: a NULL-terminated static list of names
 * ("listen", "state_dir", ...; docs/experiments.md has their meanings). */
const char *const *topo_placeholders(topo_role role);
/* Check one template argument: 0, or CX_EINVAL with the first unknown
 * "{name}" in err. *used gets a bit per placeholder of topo_placeholders
 * that occurs (bit i = name i), so a caller can require some. */
int topo_check_template(topo_role role, const char *arg, unsigned *used, char *err, size_t errlen);
/* Expand every {name} of arg with values[i] for topo_placeholders(role)[i]
 * (values has one entry per name; NULL = leave it as written). Returns a
 * malloc'd string or NULL (out of memory). Unknown names stay as written
 * (topo_check_template refuses them first). */
char *topo_expand(topo_role role, const char *arg, const char *const *values);

typedef struct topo_launch_cfg {
    const char *run_dir;         /* RUN: logs/, syncer/, agents/, learners/, token, pids.json */
    const char *exe;             /* the chaosloco binary (/proc/self/exe) */
    int learners;                /* M, 1..EXP_MAX_LEARNERS */
    const json_t *syncer_cfg;    /* the syncer's --config object (borrowed, written to RUN) */
    const char *unit_prefix;     /* agent --id prefix, unique on the host (cgroup names) */
    long ready_timeout_ms;       /* ms to wait for every listen.addr + /v1/status */
    long long learner_steps;     /* > 0: each learner's --steps budget (the run ends by POST /v1/end) */
    const topo_trainer *trainer; /* NULL: chaosloco syncer + learners; else a foreign trainer (borrowed) */
    const char *experiment_path; /* the file the trainer came from (its cwd is relative to its
                                    directory); NULL = the current directory */
    unsigned long long seed;     /* the run seed, the trainer's {seed} */
    const netns_spec *network;   /* NULL or kind loopback: 127.0.0.1; kind netns: regions (borrowed) */
} topo_launch_cfg;

int topo_launch(const topo_launch_cfg *cfg, topo **out, char *err, size_t errlen);
/* What attach mode is given (topology.attach). */
typedef struct topo_attach_cfg {
    const char *syncer_url;                /* http:// or https:// */
    char *const *agents;                   /* n URLs (learner i = agents[i]) */
    char *const *agent_token_files;        /* n: agent i's own token file, or NULL (token_file); or NULL */
    int n;
    const char *token_file;                /* every agent's token (and the dashboard's controls), or NULL */
    const char *syncer_cred_file;          /* the credential the harness presents to the syncer (admin,
                                              for POST /v1/end; trainer/credential.h), or NULL: then only
                                              loopback reads work and the end cannot be requested */
    const char *ca_file;                   /* PEM CA of an https syncer and agents, or NULL: the system's */
} topo_attach_cfg;

/* Records the URLs and reads the token files and the syncer credential
 * (secret files: common/secret.h); starts nothing. */
int topo_attach(const topo_attach_cfg *cfg, topo **out, char *err, size_t errlen);
/* Stops everything it started, then frees. NULL is a no-op. */
void topo_free(topo *t);

/* Stop every started process: agents (grace_ms each, in parallel), then
 * the syncer, then any recorded learner pid still alive (SIGKILL to its
 * group); then remove the network namespaces, if any. Idempotent. Returns
 * how many needed SIGKILL. */
int topo_stop(topo *t, long grace_ms);

int topo_launched(const topo *t);                  /* 1 launch mode, 0 attach mode */
const char *topo_syncer_url(const topo *t);        /* "http://127.0.0.1:PORT" */
const char *topo_agent_url(const topo *t, int i);  /* learner i's agent */
const char *topo_token(const topo *t);             /* the operator's token (dashboard controls) or NULL */
const char *topo_agent_token(const topo *t, int i); /* learner i's agent's own token, or NULL */
const char *topo_ca_file(const topo *t);           /* attach: the CA file for https, or NULL */
const char *topo_syncer_credential(const topo *t); /* the harness's syncer credential or NULL */

/* The coordinator's events file (absolute path) when the trainer uses the
 * file form of the telemetry contract, else NULL. */
const char *topo_events_file(const topo *t);
/* File form: ask the coordinator to end the run by writing
 * <its state dir>/end ({"reason": reason} and a newline, atomically; a
 * second call rewrites it). CX_ENOTSUP without the file form. */
int topo_request_end(topo *t, const char *reason, char *err, size_t errlen);

/* Remember learner i's current unit pid (from its agent's status) in
 * pids.json, so leftovers can be found. 0 = none. */
void topo_note_unit(topo *t, int i, pid_t pid);

/* ---- the harness's own syncer fault (launch mode only) ---- */

/* Send sig to the syncer's process group and reap it. CX_ENOTSUP in attach
 * mode, CX_ECONFLICT when it is not running. */
int topo_syncer_kill(topo *t, int sig, char *err, size_t errlen);
/* Start the syncer again on the same port with the same state dir (so the
 * agents' proxies still reach it and it restores its checkpoint); waits
 * for it to answer. */
int topo_syncer_start(topo *t, long ready_timeout_ms, char *err, size_t errlen);

#endif
