/* test_inj_cpu_spike.c - the cpu_spike fault: strict params, burners that
 * use CPU while applied, all gone after revert, and none outliving the
 * process that applied it. */
#include "inj_test.h"

extern const injector inj_cpu_spike;

TestSuite(inj_cpu_spike);

/* utime + stime of pid in clock ticks, or -1. */
static long long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    /* after "pid (comm)": state is field 3, utime 14, stime 15 */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

static int gone(pid_t pid)
{
    char s = uproc_state(pid);
    return s == 0 || s == 'Z';
}

Test(inj_cpu_spike, params_are_strict)
{
    char over[64];
    snprintf(over, sizeof over, "{\"cores\":%d}", uproc_ncpus() + 1);
    injt_bad(&inj_cpu_spike, over, "cores");
    injt_bad(&inj_cpu_spike, "{\"cores\":0}", "cores");
    injt_bad(&inj_cpu_spike, "{\"cores\":1.5}", "cores");
    injt_bad(&inj_cpu_spike, "{\"load\":0}", "load");
    injt_bad(&inj_cpu_spike, "{\"load\":1.01}", "load");
    injt_bad(&inj_cpu_spike, "{\"load\":\"1\"}", "load");
    injt_bad(&inj_cpu_spike, "{\"cpus\":1}", "cpus");
    injt_good(&inj_cpu_spike, "{}", NULL);
    cr_assert_eq(inj_cpu_spike.traits, 0, "a neighbour neither stops nor ends the unit");
}

Test(inj_cpu_spike, burners_use_cpu_until_revert)
{
    inj_target t = injt_target("u", 0, -1, "/tmp", NULL); /* no unit needed */
    void *ctx = injt_ok(&inj_cpu_spike, "{\"cores\":1,\"load\":1}", 1);
    json_t *ev = json_object();
    char err[CX_ERRLEN] = "";
    cr_assert_eq(inj_cpu_spike.apply(ctx, &t, ev, err, sizeof err), 0, "apply: %s", err);
    json_t *pids = json_object_get(ev, "pids");
    cr_assert_eq(json_array_size(pids), 1, "one burner");
    pid_t pid = (pid_t)json_integer_value(json_array_get(pids, 0));
    cr_assert_gt(pid, 0);
    cr_assert_eq(json_integer_value(json_object_get(ev, "pgid")), pid, "the first burner leads the group");
    /* progress, not a rate: the burner's CPU time grows (by when depends on
     * the machine, so wait generously) */
    long long t0 = cpu_ticks(pid), t1 = t0;
    for (int i = 0; i < 500 && t1 <= t0 + 2; i++) {
        usleep(10000);
        t1 = cpu_ticks(pid);
    }
    cr_assert_gt(t1, t0 + 2, "the burner used no CPU (%lld -> %lld ticks)", t0, t1);
    cr_assert_eq(inj_cpu_spike.revert(ctx, &t, err, sizeof err), 0, "revert: %s", err);
    cr_assert(gone(pid), "burner %d still there after revert", (int)pid);
    cr_assert_eq(kill(pid, 0), -1, "revert reaped the burner");
    cr_assert_eq(inj_cpu_spike.revert(ctx, &t, err, sizeof err), 0, "second revert");
    cr_assert_null(inj_cpu_spike.undo_record(ctx));
    inj_cpu_spike.free(ctx);
    json_decref(ev);
}

/* The process that applied the fault dies without reverting (an agent
 * crash): its burners notice and exit by themselves. */
Test(inj_cpu_spike, burners_do_not_outlive_their_agent)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t agent = fork();
    cr_assert_geq(agent, 0);
    if (agent == 0) {
        inj_target t = injt_target("u", 0, -1, "/tmp", NULL);
        json_t *p = json_loads("{\"cores\":2,\"load\":0.5}", 0, NULL);
        void *ctx = NULL;
        json_t *ev = json_object();
        char err[CX_ERRLEN];
        if (inj_cpu_spike.prepare(p, 1, &ctx, err, sizeof err) != 0 ||
            inj_cpu_spike.apply(ctx, &t, ev, err, sizeof err) != 0)
            _exit(2);
        pid_t pids[2] = {(pid_t)json_integer_value(json_array_get(json_object_get(ev, "pids"), 0)),
                         (pid_t)json_integer_value(json_array_get(json_object_get(ev, "pids"), 1))};
        if (write(fd[1], pids, sizeof pids) != (ssize_t)sizeof pids)
            _exit(3);
        _exit(0); /* no revert */
    }
    close(fd[1]);
    pid_t pids[2] = {0, 0};
    cr_assert_eq(read(fd[0], pids, sizeof pids), (ssize_t)sizeof pids,
                 "the agent stand-in applied the fault");
    close(fd[0]);
    int status = 0;
    cr_assert_eq(waitpid(agent, &status, 0), agent);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    for (int i = 0; i < 2; i++) {
        int ok = 0;
        for (int ms = 0; ms < 5000 && !ok; ms += 10) {
            ok = gone(pids[i]);
            if (!ok)
                usleep(10000);
        }
        if (!ok)
            kill(pids[i], SIGKILL); /* leave nothing behind, then fail */
        cr_assert(ok, "burner %d outlived the process that started it", (int)pids[i]);
    }
}
