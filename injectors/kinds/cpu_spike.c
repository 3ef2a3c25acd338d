/* cpu_spike.c - the `cpu_spike` fault: a noisy neighbour that burns CPU
 * beside the unit.
 *
 * apply() forks `cores` burner processes (children of the agent, in one
 * process group of their own) that spin for `load` of every 100 ms and
 * sleep the rest, so the unit competes for the host's CPUs the way it does
 * beside another job; revert SIGKILLs the group and reaps every burner.
 * The unit itself is not touched (it need not even run), so the kind has no
 * traits and combines with everything.
 *
 *   prepare ──► apply: burners forked (evidence: pids) ──► revert: SIGKILL + reap
 *
 * Nothing outlives the agent: a burner checks its parent every cycle and
 * exits once it was reparented (the agent died), within ~100 ms; hence no
 * undo record and no sweep. PR_SET_PDEATHSIG is not used: it fires when
 * the forking *thread* ends, and apply runs on an HTTP thread. A burner
 * runs only async-signal-safe calls (clock_gettime, nanosleep, getppid,
 * _exit): it is forked from a multi-threaded process.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/exitcode.h"
#include "common/log.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"
#include "injectors/unit_proc.h"

#define SPIKE_PERIOD_NS 100000000LL /* one spin/sleep cycle: 100 ms */
#define SPIKE_MAX_CORES 256

typedef struct spike_ctx {
    int64_t cores;               /* burners to run, 1..online CPUs */
    double load;                 /* fraction of each period a burner spins, 0.01..1 */
    pid_t pids[SPIKE_MAX_CORES]; /* the burners while applied (0 = none) */
    int npids;                   /* how many were forked */
    pid_t pgid;                  /* their process group (the first burner's pid) */
} spike_ctx;

static double spike_online(void)
{
    return (double)uproc_ncpus();
}

enum { P_CORES, P_LOAD };
static const inj_param cpu_spike_params[] = {
    [P_CORES] = {"cores", INJ_INT, 0, 1, SPIKE_MAX_CORES, .max_fn = spike_online, .max_note = "online CPUs",
                 .def = 1, .unit = "CPUs", .help = "burner processes, each worth one CPU at load 1"},
    [P_LOAD] = {"load", INJ_NUMBER, 0, 0.01, 1, .def = 1,
                .help = "fraction of every 100 ms each burner spins (it sleeps the rest)"},
    {0},
};

static int spike_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    (void)seed;
    inj_value v[2];
    int rc = inj_params_decode(params, cpu_spike_params, v, err, errlen);
    if (rc)
        return rc;
    spike_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "cpu_spike ctx");
    c->cores = v[P_CORES].i;
    c->load = v[P_LOAD].d;
    *ctx = c;
    return 0;
}

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The burner's whole life (in the forked child): spin, sleep, repeat until
 * killed or orphaned. */
static void spike_burn(pid_t parent, double load)
{
    long long spin_ns = (long long)((double)SPIKE_PERIOD_NS * load);
    volatile unsigned long sink = 0;
    for (;;) {
        if (getppid() != parent)
            _exit(CX_EXIT_OK);
        long long start = mono_ns();
        while (mono_ns() - start < spin_ns)
            for (int i = 0; i < 1000; i++)
                sink += (unsigned long)i;
        (void)sink; /* read once: clang's -Wunused-but-set-variable (the fuzz build) */
        long long rest = SPIKE_PERIOD_NS - (mono_ns() - start);
        if (rest > 0) {
            struct timespec ts = {(time_t)(rest / 1000000000LL), (long)(rest % 1000000000LL)};
            nanosleep(&ts, NULL);
        }
    }
}

/* SIGKILL and reap every burner; 0 when none is left. */
static int spike_stop(spike_ctx *c)
{
    for (int i = 0; i < c->npids; i++)
        if (c->pids[i] > 0)
            kill(c->pids[i], SIGKILL);
    for (int i = 0; i < c->npids; i++) {
        if (c->pids[i] <= 0)
            continue;
        pid_t r;
        do
            r = waitpid(c->pids[i], NULL, 0);
        while (r < 0 && errno == EINTR);
        c->pids[i] = 0;
    }
    c->npids = 0;
    c->pgid = 0;
    return 0;
}

static int spike_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    (void)t;
    spike_ctx *c = ctx;
    pid_t parent = getpid();
    for (int64_t i = 0; i < c->cores; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            int e = errno;
            spike_stop(c); /* all or nothing */
            return cx_fail(err, errlen, CX_ESYS, "fork of burner %lld: %s", (long long)i, strerror(e));
        }
        if (pid == 0) {
            setpgid(0, c->pgid);
            spike_burn(parent, c->load);
        }
        setpgid(pid, c->pgid); /* no race with the child's own setpgid */
        if (c->pgid == 0)
            c->pgid = pid;
        c->pids[c->npids++] = pid;
    }
    json_t *pids = json_array();
    for (int i = 0; i < c->npids; i++)
        json_array_append_new(pids, json_integer(c->pids[i]));
    json_object_set_new(evidence, "pids", pids);
    json_object_set_new(evidence, "pgid", json_integer(c->pgid));
    json_object_set_new(evidence, "cores", json_integer(c->cores));
    json_object_set_new(evidence, "load", json_real(c->load));
    json_object_set_new(evidence, "online_cpus", json_integer(uproc_ncpus()));
    cx_info("cpu_spike: %lld burner(s) at load %.2f, process group %d", (long long)c->cores, c->load,
            (int)c->pgid);
    return 0;
}

static int spike_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)t, (void)err, (void)errlen;
    return spike_stop(ctx);
}

static json_t *spike_undo_record(void *ctx)
{
    (void)ctx;
    return NULL; /* burners exit by themselves once the agent is gone */
}

static void spike_free(void *ctx)
{
    spike_ctx *c = ctx;
    if (c)
        spike_stop(c);
    free(c);
}

const injector inj_cpu_spike = {
    .type = "cpu_spike",
    .summary = "A noisy neighbour: burn cores CPUs (each a process spinning load of every 100 ms) beside "
               "the unit, so that it competes for the host's CPUs; revert kills the burners. Burners exit "
               "by themselves within 100 ms of an agent crash.",
    .params = cpu_spike_params,
    .traits = 0,
    .prepare = spike_prepare,
    .apply = spike_apply,
    .tick = NULL,
    .revert = spike_revert,
    .undo_record = spike_undo_record,
    .sweep = NULL,
    .free = spike_free,
};
