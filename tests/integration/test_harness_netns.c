/* test_harness_netns.c - regions on one machine (topology.network kind
 * netns, harness/netns.h) through `chaosloco run`:
 *
 *   - a run's processes live in their own network namespaces (agents and
 *     syncer listen on 198.18.x.y, their /proc/PID/ns/net is not ours), the
 *     cross-region links carry a tbf qdisc;
 *   - after a SIGKILL of the harness its namespaces and root link stay
 *     (nothing else could remove them), and the next harness start sweeps
 *     them within a bound;
 *   - SIGTERM of that next harness removes its own namespaces (exit 2), and
 *     RUN/network.json then holds the tbf counters (bytes went through);
 *   - a delay on a kernel without netem fails at start, exit 3, saying so,
 *     and leaves nothing behind;
 *   - without root the run fails at start, exit 3, naming why.
 *
 * Needs root (namespaces) and iproute2: skipped with the reason otherwise.
 * Every process a harness started is SIGKILLed at the end from its
 * pids.json (hx_kill_leftovers). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness_it.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(harness_netns, .fini = fini, .timeout = 300);

/* A test's scratch space (hx_scratch, experiment file exp_name), after
 * skipping the test, saying why, where no namespace can be made: not root,
 * or no iproute2. */
static void netns_scratch(hx_scratch *s, const char *exp_name)
{
    if (geteuid() != 0)
        cr_skip_test("needs root (network namespaces)");
    if (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0 &&
        access("/usr/bin/ip", X_OK) != 0 && access("/bin/ip", X_OK) != 0)
        cr_skip_test("needs iproute2 (ip)");
    hx_scratch_init(s, "hnetns", exp_name);
}

/* Two learners in three regions (each place its own), links at 10 Mbit/s,
 * training that would last for ever: the test ends it. */
static void write_experiment(const char *path)
{
    hx_write(path, "{\"title\": \"regions\", \"seed\": 3,"
                   " \"topology\": {\"learners\": 2,"
                   " \"network\": {\"kind\": \"netns\", \"regions\": 3, \"rate_mbit\": 10},"
                   " \"training\": " HX_TRAIN(
                       "decoupled", 1000000) "},"
                                             " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}");
}

static int exists(const char *fmt, const char *prefix, const char *suffix)
{
    char p[256];
    snprintf(p, sizeof p, fmt, prefix, suffix);
    return access(p, F_OK) == 0;
}

/* Every name of prefix: namespaces /run/netns/<prefix>-{hub,s,u0,u1}, the
 * root link /sys/class/net/<prefix>-h, and (with record) the run's record
 * in /run/chaosloco/netns. How many exist. */
static int leftovers_of(const char *prefix, int record)
{
    static const char *const ns[] = {"hub", "s", "u0", "u1", NULL};
    int n = exists("/sys/class/net/%s-%s", prefix, "h");
    if (record)
        n += exists("/run/chaosloco/netns/%s%s", prefix, ".json");
    for (int i = 0; ns[i]; i++)
        n += exists("/run/netns/%s-%s", prefix, ns[i]);
    return n;
}

static int leftovers(const char *prefix)
{
    return leftovers_of(prefix, 0);
}

static int wait_gone(const char *prefix, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        if (leftovers_of(prefix, 1) == 0)
            return 1;
        cx_sleep_ms(100);
    }
    return leftovers_of(prefix, 1) == 0;
}

/* RUN/network.json's prefix, once the harness wrote it (bounded). */
static void wait_prefix(const char *dir, const char *out, char *prefix, size_t len)
{
    char nj[1200];
    snprintf(nj, sizeof nj, "%s/network.json", out);
    int ok = hx_wait_contains(nj, "\"prefix\"", 90000);
    if (!ok)
        it_dump_log(dir, "run");
    cr_assert(ok, "%s written", nj);
    json_t *o = json_load_file(nj, 0, NULL);
    const char *p = json_string_value(json_object_get(o, "prefix"));
    cr_assert_not_null(p, "network.json has the prefix");
    snprintf(prefix, len, "%s", p);
    json_decref(o);
}

/* What a live run looks like from outside: agent 0 and the syncer listen
 * on namespace addresses, agent 0 is in another network namespace, its
 * link to the syncer has tbf on both ends. */
static void check_live(const char *dir, const char *out, const char *prefix)
{
    char st[1200], addr[128];
    snprintf(st, sizeof st, "%s/agents/0", out);
    cr_assert_eq(it_wait_addr(st, addr, sizeof addr, 60000), 0, "agent 0 listens");
    cr_expect(strncmp(addr, "198.18.", 7) == 0, "agent 0 listens in its namespace, not on loopback: %s",
              addr);
    snprintf(st, sizeof st, "%s/syncer", out);
    cr_assert_eq(it_wait_addr(st, addr, sizeof addr, 60000), 0, "the syncer listens");
    cr_expect(strncmp(addr, "198.18.", 7) == 0, "the syncer listens in its namespace: %s", addr);

    json_t *pj = NULL;
    char pp[1200];
    snprintf(pp, sizeof pp, "%s/pids.json", out);
    int64_t end = cx_mono_ms() + 30000;
    pid_t agent0 = 0;
    while (!agent0 && cx_mono_ms() < end) {
        pj = json_load_file(pp, 0, NULL);
        agent0 = (pid_t)json_integer_value(json_array_get(json_object_get(pj, "agents"), 0));
        json_decref(pj);
        if (!agent0)
            cx_sleep_ms(100);
    }
    cr_assert(agent0 > 0, "pids.json names agent 0");
    char mine[128] = "", its[128] = "", lp[64];
    cr_assert(readlink("/proc/self/ns/net", mine, sizeof mine - 1) > 0);
    snprintf(lp, sizeof lp, "/proc/%d/ns/net", (int)agent0);
    cr_assert(readlink(lp, its, sizeof its - 1) > 0, "%s", lp);
    cr_expect_str_neq(mine, its, "agent 0 runs in its own network namespace");

    /* tc -n <prefix>-u0 qdisc show dev eth0: the unit's upstream shaping */
    char ns[64], log[1200];
    snprintf(ns, sizeof ns, "%s-u0", prefix);
    const char *tc[] = {"tc", "-n", ns, "qdisc", "show", "dev", "eth0", NULL};
    pid_t p = it_start_prog(dir, "tc", tc, NULL);
    cr_assert_eq(hx_exit_code(p, 10000), 0, "tc qdisc show in %s", ns);
    snprintf(log, sizeof log, "%s/tc.log", dir);
    char *text = hx_read(log);
    cr_expect(text && strstr(text, "tbf") && strstr(text, "10Mbit"), "a 10 Mbit/s tbf on %s eth0: %s", ns,
              text ? text : "(nothing)");
    free(text);
}

Test(harness_netns, sigkill_is_swept_by_the_next_start_and_sigterm_cleans_up)
{
    hx_scratch s;
    netns_scratch(&s, "regions.json");
    const char *dir = s.dir, *path = s.exp, *outa = s.out; /* harness A's run */
    char outb[1100], pa[64], pb[64];
    snprintf(outb, sizeof outb, "%s/run-b", dir);
    write_experiment(path);

    /* harness A: up, then SIGKILLed */
    const char *args_a[] = {"run", path, "--out", outa, NULL};
    pid_t a = it_start(dir, "run", args_a, NULL);
    wait_prefix(dir, outa, pa, sizeof pa);
    check_live(dir, outa, pa);
    it_signal(a, SIGKILL, 0);
    cr_assert_neq(hx_exit_code(a, 10000), -1, "harness A is dead");
    cr_assert_eq(leftovers_of(pa, 1), 6,
                 "a SIGKILLed harness leaves its 4 namespaces, its root link and its record");

    /* harness B sweeps A's (A's agents are still alive in them: the sweep
     * does not wait for them) */
    const char *args_b[] = {"run", path, "--out", outb, NULL};
    int64_t t0 = cx_mono_ms();
    pid_t b = it_start(dir, "run-b", args_b, NULL);
    int gone = wait_gone(pa, 60000);
    if (!gone)
        it_dump_log(dir, "run-b");
    cr_assert(gone, "the next harness start removed %s-* and its record (%d left after %lld ms)", pa,
              leftovers_of(pa, 1), (long long)(cx_mono_ms() - t0));
    char rec[128];
    hx_kill_leftovers(outa);

    /* B is up in its own namespaces; SIGTERM removes them */
    wait_prefix(dir, outb, pb, sizeof pb);
    cr_assert_str_neq(pa, pb);
    char evb[1200];
    snprintf(evb, sizeof evb, "%s/events.jsonl", outb);
    int up = hx_wait_contains(evb, "method_start", 90000);
    if (!up)
        it_dump_log(dir, "run-b");
    cr_assert(up, "B trains (its method started)");
    cr_assert_eq(leftovers(pb), 5, "B's 4 namespaces and root link exist while it runs");
    it_signal(b, SIGTERM, 0);
    int rc = hx_exit_code(b, 120000);
    if (rc != 2)
        it_dump_log(dir, "run-b");
    cr_expect_eq(rc, 2, "SIGTERM: the run is interrupted, exit 2 (got %d)", rc);
    cr_expect_eq(leftovers(pb), 0, "nothing of %s-* is left after SIGTERM", pb);
    /* the kernel shaped what went through: learner 0's tbf counters, both ways */
    char nj[1200];
    snprintf(nj, sizeof nj, "%s/network.json", outb);
    json_t *net = json_load_file(nj, 0, NULL);
    json_t *stats = json_object_get(json_array_get(json_object_get(net, "places"), 1), "stats");
    for (int k = 0; k < 2; k++) {
        json_t *q = json_object_get(stats, k ? "downstream" : "upstream");
        cr_expect_str_eq(json_string_value(json_object_get(q, "kind")), "tbf", "learner 0's %s qdisc",
                         k ? "downstream" : "upstream");
        cr_expect_gt(json_integer_value(json_object_get(q, "bytes")), 0, "bytes went through its %s tbf",
                     k ? "downstream" : "upstream");
    }
    json_decref(net);
    snprintf(rec, sizeof rec, "/run/chaosloco/netns/%s.json", pb);
    cr_expect(access(rec, F_OK) != 0, "nor its record %s", rec);
    hx_kill_leftovers(outb);
    free(s.dir);
}

Test(harness_netns, not_root_fails_at_start_naming_why)
{
    if (geteuid() != 0)
        cr_skip_test("runs the harness as nobody through setpriv: needs root to do that");
    if (access("/usr/bin/setpriv", X_OK) != 0)
        cr_skip_test("needs setpriv (util-linux)");
    hx_scratch s;
    hx_scratch_init(&s, "hnetns", "regions.json");
    chmod(s.dir, 0777); /* nobody writes the run dir and its log here */
    write_experiment(s.exp);
    chmod(s.exp, 0644);
    const char *argv[] = {"/usr/bin/setpriv",
                          "--reuid=65534",
                          "--regid=65534",
                          "--clear-groups",
                          CHAOSLOCO_BIN,
                          "run",
                          s.exp,
                          "--out",
                          s.out,
                          NULL};
    pid_t p = it_start_prog(s.dir, "run", argv, NULL);
    free(hx_expect_harness_error(s.dir, p, 60000, "network namespaces unavailable: not root"));
    hx_kill_leftovers(s.out);
    free(s.dir);
}

/* 1 when this kernel has netem: try it on the loopback of a scratch
 * namespace (nothing of the host is touched). */
static int kernel_has_netem(const char *dir)
{
    char ns[64];
    snprintf(ns, sizeof ns, "chaosloco-it-netem-%d", (int)getpid());
    const char *add[] = {"ip", "netns", "add", ns, NULL};
    const char *q[] = {"tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", NULL};
    const char *del[] = {"ip", "netns", "del", ns, NULL};
    cr_assert_eq(hx_exit_code(it_start_prog(dir, "probe-add", add, NULL), 10000), 0, "ip netns add %s", ns);
    int has = hx_exit_code(it_start_prog(dir, "probe-netem", q, NULL), 10000) == 0;
    cr_assert_eq(hx_exit_code(it_start_prog(dir, "probe-del", del, NULL), 10000), 0, "ip netns del %s", ns);
    return has;
}

Test(harness_netns, a_delay_without_netem_is_refused_and_nothing_is_left)
{
    hx_scratch s;
    netns_scratch(&s, "delay.json");
    if (kernel_has_netem(s.dir))
        cr_skip_test("this kernel has netem: a delay is applied, not refused");
    hx_write(s.exp,
             "{\"title\": \"delay\", \"seed\": 3,"
             " \"topology\": {\"learners\": 2,"
             " \"network\": {\"kind\": \"netns\", \"regions\": 3, \"rate_mbit\": 10, \"delay_ms\": 20},"
             " \"training\": " HX_TRAIN("decoupled",
                                        1000000) "},"
                                                 " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}");
    const char *args[] = {"run", s.exp, "--out", s.out, NULL};
    pid_t p = it_start(s.dir, "run", args, NULL);
    free(hx_expect_harness_error(s.dir, p, 60000, "this kernel has no sch_netem"));
    char prefix[32];
    snprintf(prefix, sizeof prefix, "cl%d", (int)p);
    cr_expect_eq(leftovers_of(prefix, 1), 0, "the half-built %s-* is gone", prefix);
    hx_kill_leftovers(s.out);
    free(s.dir);
}
