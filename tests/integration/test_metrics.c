/* test_metrics.c - the Prometheus text of the real exporters, checked by a
 * real consumer: `promtool check metrics` (Debian package `prometheus`).
 *
 * A real syncer, and a real agent supervising a real learner that talks to
 * the syncer through the agent's proxy. Once training is under way a pause
 * and a nan fault run to their end (so the per-type fault counters, the
 * revert reasons and the syncer's reject reasons have series), then each
 * GET /metrics is saved under the test's temp dir and fed to promtool on
 * stdin; promtool must exit 0 with no complaint. A deliberately broken text
 * must make promtool fail, so the check cannot pass by not running.
 *
 * The harness and the dashboard export no /metrics (they are consumers of
 * the others'), so there is nothing of theirs to lint. The test is skipped,
 * saying why, only when promtool is not installed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_it.h"
#include "common/clock.h"
#include "common/http_client.h"
#include "support.h"

extern char **environ;

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(metrics, .fini = fini, .timeout = 150);

/* ---- metrics: helpers ---- */

/* Full path of an executable found in PATH into out; 0 when found. */
static int find_in_path(const char *prog, char *out, size_t len)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        if (n > 0 && n < len) {
            snprintf(out, len, "%.*s/%s", (int)n, path, prog);
            if (access(out, X_OK) == 0)
                return 0;
        }
        path += n;
        if (*path == ':')
            path++;
    }
    return -1;
}

/* GET url's text body into a malloc'd string (with a bearer token when
 * bearer is not NULL); *ctype gets the Content-Type (malloc'd, may be NULL). */
static char *get_text(const char *base, const char *path, const char *bearer, int *status, char **ctype)
{
    cx_http_opts o = {.bearer = bearer};
    cx_http_client *c = cx_http_client_new(base, &o);
    cr_assert_not_null(c);
    cx_http_result r;
    cx_http_result_init(&r);
    char err[256] = "";
    char *out = NULL;
    *status = 0;
    if (cx_http_do(c, "GET", path, NULL, NULL, 0, NULL, 0, &r, err, sizeof err) == 0) {
        *status = r.status;
        out = strndup(r.body.data ? r.body.data : "", r.body.len);
        char ct[256];
        if (ctype)
            *ctype = cx_http_result_header(&r, "Content-Type", ct, sizeof ct) == 0 ? strdup(ct) : NULL;
    } else if (ctype) {
        *ctype = NULL;
    }
    cx_http_result_cleanup(&r);
    cx_http_client_free(c);
    return out;
}

/* Run `promtool check metrics` with stdin from in_path, its output into
 * out_path; returns its exit code (-1: did not run or timed out). */
static int promtool_check(const char *promtool, const char *in_path, const char *out_path)
{
    int in = open(in_path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(in, 0, "open %s: %s", in_path, strerror(errno));
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert_geq(out, 0, "open %s: %s", out_path, strerror(errno));
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
            _exit(127);
        char *const argv[] = {(char *)promtool, (char *)"check", (char *)"metrics", NULL};
        execve(promtool, argv, environ);
        _exit(127);
    }
    close(in);
    close(out);
    int64_t end = cx_mono_ms() + 30000;
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (cx_mono_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        cx_sleep_ms(20);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

/* Save one exporter's /metrics and lint it with promtool. */
static void lint_exporter(const char *promtool, const char *dir, const char *name, const char *base,
                          const char *bearer, const char *prefix)
{
    int st = 0;
    char *ctype = NULL;
    char *text = get_text(base, "/metrics", bearer, &st, &ctype);
    cr_assert_eq(st, 200, "%s GET /metrics -> %d", name, st);
    cr_assert_not_null(text);
    cr_assert(ctype && strstr(ctype, "text/plain"), "%s /metrics Content-Type is text/plain (got %s)", name,
              ctype ? ctype : "none");
    cr_assert(strstr(text, prefix) != NULL, "%s /metrics has %s* series", name, prefix);
    cr_assert(strstr(text, "# TYPE ") != NULL && strstr(text, "# HELP ") != NULL, "%s /metrics has HELP/TYPE",
              name);
    char in[700], out[700];
    snprintf(in, sizeof in, "%s/%s.metrics.txt", dir, name);
    snprintf(out, sizeof out, "%s/%s.promtool.txt", dir, name);
    write_file(in, text);
    int rc = promtool_check(promtool, in, out);
    char *said = slurp(out);
    cr_assert_eq(rc, 0, "promtool check metrics on the %s's /metrics exited %d (saved in %s):\n%s", name, rc,
                 in, said);
    cr_assert_eq(said[0], '\0', "promtool had something to say about the %s's /metrics:\n%s", name, said);
    cr_log_info("%s: /metrics (%zu bytes) passes promtool check metrics", name, strlen(text));
    free(said);
    free(text);
    free(ctype);
}

/* ---- metrics: tests ---- */

Test(metrics, promtool_accepts_syncer_and_agent)
{
    char promtool[600];
    if (find_in_path("promtool", promtool, sizeof promtool) != 0) {
        cr_skip_test("promtool not found in PATH (Debian package `prometheus`): the /metrics texts are not "
                     "linted");
    }
    char *dir = it_mkdtemp("metrics");

    /* promtool really checks: a broken text (a counter without _total, a
     * sample of an undeclared family after another, a bad line) fails. */
    char bad[700], badout[700];
    snprintf(bad, sizeof bad, "%s/bad.metrics.txt", dir);
    snprintf(badout, sizeof badout, "%s/bad.promtool.txt", dir);
    write_file(bad, "# HELP x_requests Requests.\n# TYPE x_requests counter\nx_requests 3\n");
    int rc = promtool_check(promtool, bad, badout);
    cr_assert(rc > 0, "promtool must reject a counter without _total (exit %d)", rc);

    /* syncer + agent + learner behind the agent's proxy */
    char surl[200];
    ag a;
    ag_start_learner_unit(&a, dir, "metrics", surl, sizeof surl, 15000);

    /* training under way: the syncer has merged something */
    int64_t end = cx_mono_ms() + 40000;
    long long merges = 0;
    while (cx_mono_ms() < end && merges < 2) {
        char url[300];
        snprintf(url, sizeof url, "%s/v1/status", surl);
        int st = 0;
        json_t *s = it_http_json("GET", url, NULL, NULL, &st);
        merges = s ? json_integer_value(json_object_get(s, "merges")) : 0;
        json_decref(s);
        cx_sleep_ms(200);
    }
    if (merges < 2) {
        it_dump_log(dir, "syncer");
        it_dump_log(a.dir, a.name);
    }
    cr_assert_geq(merges, 2, "the syncer merged (merges=%lld)", merges);

    /* faults that end: counters by type, revert reasons, reject reasons */
    json_t *f1 = ag_fault(&a, "{\"type\":\"pause\",\"params\":{},\"duration_ms\":400}");
    json_t *f2 = ag_fault(&a, "{\"type\":\"nan\",\"params\":{\"count\":1},\"duration_ms\":3000}");
    char id1[64], id2[64];
    snprintf(id1, sizeof id1, "%s", js(f1, "id"));
    snprintf(id2, sizeof id2, "%s", js(f2, "id"));
    json_decref(f1);
    json_decref(f2);
    end = cx_mono_ms() + 20000;
    char s1[32] = "", s2[32] = "";
    while (cx_mono_ms() < end) {
        ag_fault_state(&a, id1, s1, sizeof s1, NULL, 0);
        ag_fault_state(&a, id2, s2, sizeof s2, NULL, 0);
        if (strcmp(s1, "active") != 0 && strcmp(s2, "active") != 0)
            break;
        cx_sleep_ms(100);
    }
    cr_assert_neq(strcmp(s1, "active"), 0, "the pause fault ended (%s)", s1);
    cr_assert_neq(strcmp(s2, "active"), 0, "the nan fault ended (%s)", s2);

    lint_exporter(promtool, dir, "syncer", surl, NULL, "chaosloco_syncer_");
    lint_exporter(promtool, dir, "agent", a.url, AG_TOKEN, "chaosloco_agent_");
    it_cleanup();
    free(a.dir);
    free(dir);
}
