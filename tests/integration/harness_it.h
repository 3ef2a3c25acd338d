/* harness_it.h - helpers for tests/integration/test_harness_*.c: run
 * `chaosloco run` as a real process, write experiment files, read run
 * directories, and clean up what a killed harness left behind (its
 * pids.json). Header-only (static inline): these belong to the harness's
 * tests only. */
#ifndef IT_HARNESS_IT_H
#define IT_HARNESS_IT_H

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "support.h"

static inline void hx_write(const char *path, const char *text)
{
    cr_assert_eq(cx_file_write_atomic(path, text, strlen(text), NULL, 0), 0, "write %s", path);
}

/* Whole file (malloc'd, NUL-terminated) or NULL. */
static inline char *hx_read(const char *path)
{
    char *d = NULL;
    size_t n = 0;
    if (cx_file_read(path, 64u << 20, &d, &n, NULL, 0) < 0)
        return NULL;
    return d;
}

/* Exit code of a started process (it_wait_exit), -1 on timeout, 128+sig
 * when signalled. */
static inline int hx_exit_code(pid_t pid, long timeout_ms)
{
    int st = it_wait_exit(pid, timeout_ms);
    if (st == -1)
        return -1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return -1;
}

/* journal.json at path validates against docs/journal.schema.json (the
 * Chaos Toolkit journal and experiment schemas), checked with the node
 * validator tests/CMakeLists.txt installs into the build tree. */
static inline void hx_journal_valid(const char *dir, const char *path)
{
    char validator[1200], schemas[1200];
    snprintf(validator, sizeof validator, "%s/tests/schema/validate.js", CHAOSLOCO_BUILD);
    snprintf(schemas, sizeof schemas, "%s/docs", CHAOSLOCO_SRC);
    const char *argv[] = {"node", validator, "--schemas", schemas, path, NULL};
    pid_t pid = it_start_prog(dir, "validate", argv, NULL);
    int rc = hx_exit_code(pid, 30000);
    if (rc != 0)
        it_dump_log(dir, "validate");
    cr_assert_eq(rc, 0, "%s validates against docs/journal.schema.json (validator exit %d)", path, rc);
}

/* Wait for a started process (its output in dir/name.log) to exit; its
 * exit code (hx_exit_code). Dumps the log when that is not want. */
static inline int hx_wait_rc(const char *dir, const char *name, pid_t pid, long timeout_ms, int want)
{
    int rc = hx_exit_code(pid, timeout_ms);
    if (rc != want)
        it_dump_log(dir, name);
    return rc;
}

/* Run chaosloco with args to completion (its output in dir/name.log); its
 * exit code, the log dumped when that is not want. */
static inline int hx_run_rc(const char *dir, const char *name, const char *const *args, long timeout_ms,
                            int want)
{
    return hx_wait_rc(dir, name, it_start(dir, name, args, NULL), timeout_ms, want);
}

/* The same, expecting success. */
static inline int hx_run(const char *dir, const char *name, const char *const *args, long timeout_ms)
{
    return hx_run_rc(dir, name, args, timeout_ms, 0);
}

/* Wait until path contains needle; 1 found, 0 timeout. */
static inline int hx_wait_contains(const char *path, const char *needle, long timeout_ms)
{
    int64_t end = cx_mono_ms() + timeout_ms;
    while (cx_mono_ms() < end) {
        char *d = hx_read(path);
        int found = d && strstr(d, needle);
        free(d);
        if (found)
            return 1;
        cx_sleep_ms(100);
    }
    return 0;
}

static inline int hx_alive(pid_t pid)
{
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) != 0)
        return errno == EPERM;
    return !it_proc_dead(pid); /* a zombie is not alive */
}

/* The run dir's pids.json "all" list (new reference) or NULL. */
static inline json_t *hx_pids(const char *run_dir)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/pids.json", run_dir);
    json_t *o = json_load_file(path, 0, NULL);
    json_t *all = json_incref(json_object_get(o, "all"));
    json_decref(o);
    return all;
}

/* SIGKILL every pid (and its group) a run recorded. */
static inline void hx_kill_leftovers(const char *run_dir)
{
    json_t *all = hx_pids(run_dir);
    size_t i;
    json_t *v;
    json_array_foreach(all, i, v)
    {
        pid_t p = (pid_t)json_integer_value(v);
        if (p > 1 && hx_alive(p)) {
            kill(-p, SIGKILL);
            kill(p, SIGKILL);
        }
    }
    json_decref(all);
}

/* ---- one test's run: its files, its outputs, what it leaves ---- */

/* A test's scratch space: a fresh temporary directory, the experiment file
 * the test writes there and the run's --out directory. */
typedef struct hx_scratch {
    char *dir;      /* it_mkdtemp(tag), malloc'd; logs of what the test starts */
    char exp[1024]; /* dir/<exp_name>: the experiment file */
    char out[1100]; /* dir/run: the run's --out */
} hx_scratch;

static inline void hx_scratch_init(hx_scratch *s, const char *tag, const char *exp_name)
{
    s->dir = it_mkdtemp(tag);
    snprintf(s->exp, sizeof s->exp, "%s/%s", s->dir, exp_name);
    snprintf(s->out, sizeof s->out, "%s/run", s->dir);
}

/* Whole file dir/rel (malloc'd, NUL-terminated) or NULL. */
static inline char *hx_read_in(const char *dir, const char *rel)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return hx_read(path);
}

/* JSON file dir/rel (new reference) or NULL. */
static inline json_t *hx_load_in(const char *dir, const char *rel)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return json_load_file(path, 0, NULL);
}

/* RUN/journal.json of the run in out (new reference), asserted present and
 * valid against docs/journal.schema.json (hx_journal_valid; its validator's
 * log in dir). */
static inline json_t *hx_journal(const char *dir, const char *out)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/journal.json", out);
    json_t *j = json_load_file(path, 0, NULL);
    cr_assert_not_null(j, "%s", path);
    hx_journal_valid(dir, path);
    return j;
}

/* A finished run in out left nothing running: every pid of its pids.json
 * is gone (with min_pids > 0, the list has at least that many, what says
 * which); then hx_kill_leftovers, whatever was found. */
static inline void hx_expect_all_gone(const char *out, size_t min_pids, const char *what)
{
    json_t *all = hx_pids(out);
    if (min_pids > 0)
        cr_assert_geq(json_array_size(all), min_pids, "pids.json lists %s", what);
    size_t i;
    json_t *p;
    json_array_foreach(all, i, p) cr_expect(!hx_alive((pid_t)json_integer_value(p)), "pid %lld is gone",
                                            (long long)json_integer_value(p));
    json_decref(all);
    hx_kill_leftovers(out);
}

/* A `chaosloco run` started as pid (its log dir/run.log) that must fail at
 * start: expects exit 3 (a harness error) and a log that says why (contains
 * why); dumps the log when either is off. Returns the log (malloc'd) or
 * NULL. */
static inline char *hx_expect_harness_error(const char *dir, pid_t pid, long timeout_ms, const char *why)
{
    int rc = hx_exit_code(pid, timeout_ms);
    char *log = hx_read_in(dir, "run.log");
    if (rc != 3 || !log || !strstr(log, why))
        it_dump_log(dir, "run");
    cr_expect_eq(rc, 3, "a harness error exits 3 (got %d)", rc);
    cr_expect(log && strstr(log, why), "the error says why (%s): %s", why, log ? log : "(no log)");
    return log;
}

/* An experiment for tests: small model, 2 learners unless told. */
#define HX_TRAIN(mode, steps)                                                                                \
    "{\"model\": \"mlp\", \"data\": \"synthetic\", \"mode\": \"" mode                                        \
    "\", \"quorum\": 1, \"fragments\": 2, \"H\": 8, \"steps\": " #steps                                      \
    ", \"hidden\": 32, \"batch\": 4, \"eval_every_ms\": 200, \"eval_tokens\": 1024}"

#endif
