/* topo_internal.h - the topology's private state (struct topo) and what
 * topology.c (launch, stop), topo_attach.c (attach) and topo_template.c (a
 * foreign trainer's command templates) share. Private to harness/: the
 * interface is topology.h.
 */
#ifndef HARNESS_TOPO_INTERNAL_H
#define HARNESS_TOPO_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

#include "harness/netns.h"
#include "harness/topology.h"
#include "trainer/credential.h"

#define TOPO_PATH 1024 /* bytes of a path the topology keeps */
#define TOPO_URL 256

typedef struct topo_proc {
    pid_t pid;                  /* child pid, 0 once reaped / never started */
    char state[TOPO_PATH];      /* its state dir (listen.addr) */
    char log[TOPO_PATH];        /* its log file */
    char url[TOPO_URL];         /* http://127.0.0.1:PORT once ready */
    pid_t unit_pid;             /* agents: the learner pid last reported, 0 none */
    char token[128];            /* agents: its own bearer token, "" none */
    char token_file[TOPO_PATH]; /* agents: its token's file */
} topo_proc;

struct topo {
    int launched;      /* 1 launch mode */
    int m;             /* learners */
    char run_dir[512]; /* RUN */
    char exe[TOPO_PATH];
    char token[128]; /* the operator's token (the dashboard's controls), "" none */
    char token_file[TOPO_PATH];
    char ca_file[TOPO_PATH];          /* attach: the CA of https syncer and agents, "" = the system's */
    char syncer_addr[64];             /* "127.0.0.1:PORT" (or its namespace's address) of the syncer,
                                         fixed across restarts */
    char creds_dir[TOPO_PATH];        /* launch: RUN/credentials (0700), the syncer's --credentials-dir */
    char syncer_cred[CRED_MAX];       /* the admin credential the harness uses, "" none */
    char syncer_cred_file[TOPO_PATH]; /* its file, "" none */
    topo_proc syncer;
    topo_proc *agents;   /* m entries */
    const char *sname;   /* "syncer", or "coordinator" for a foreign trainer (messages, files) */
    char **coord_tmpl;   /* a foreign trainer's coordinator argv template (owned, NULL-terminated), or NULL */
    char cwd[TOPO_PATH]; /* the foreign trainer's working directory (absolute), "" none */
    char events_file[TOPO_PATH]; /* the coordinator's events file (file form, absolute), "" = HTTP */
    char seed[24];               /* the run seed, decimal ({seed}) */
    pid_t all[512];              /* every pid ever started or reported (pids.json "all") */
    int nall;
    netns *net; /* the namespaces the processes run in (kind netns), NULL: loopback */
};

/* Indexes of topo_placeholders(TOPO_COORDINATOR) and (TOPO_LEARNER): the
 * order of topo_expand's values. */
enum {
    PH_C_LISTEN,
    PH_C_STATE_DIR,
    PH_C_CREDS,
    PH_C_ADMIN,
    PH_C_CONFIG,
    PH_C_LEARNERS,
    PH_C_SEED,
    PH_C_RUN,
    PH_C_N
};
enum {
    PH_L_PROXY,
    PH_L_PROXY_SYNCER,
    PH_L_ID,
    PH_L_LEARNERS,
    PH_L_STATE_DIR,
    PH_L_CRED,
    PH_L_STEPS,
    PH_L_SEED,
    PH_L_RUN,
    PH_L_N
};

/* Free a NULL-terminated argv (NULL is a no-op). */
void topo_free_argv(char **v);
/* argv = every template entry expanded (malloc'd, NULL-terminated), or NULL. */
char **topo_expand_argv(topo_role role, char *const *tmpl, const char *const *values);
/* The trainer's working directory: cfg->trainer->cwd against the directory
 * of the experiment file, made absolute into out; it must exist. 0 or a
 * negative cx_err with err filled. */
int topo_trainer_cwd(const topo_launch_cfg *cfg, char *out, size_t len, char *err, size_t errlen);

#endif
