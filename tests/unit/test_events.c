/* test_events.c - event log: gapless seq, persistence, torn tails, reads. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "tmpdir.h"
#include "trainer/events.h"

static char dir[64];
static char path[128];

static void setup(void)
{
    tmpdir_with_file(dir, sizeof dir, "/tmp/cx_test_events_XXXXXX", path, sizeof path, "events.jsonl");
}
static void teardown(void)
{
    unlink(path);
    rmdir(dir);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

TestSuite(events, .init = setup, .fini = teardown);

/* The event log on path (a ring of 16), which must open. */
static events *open_log(void)
{
    char err[CX_ERRLEN];
    events *ev = events_new(path, 16, err, sizeof err);
    cr_assert_not_null(ev, "%s", err);
    return ev;
}

/* events_since(ev, after, limit) into out (emptied first) must succeed with
 * nlines lines, the first of them seq after + 1. */
static void expect_since(events *ev, int64_t after, int limit, int nlines, cx_buf *out)
{
    cx_buf_reset(out);
    cr_assert_eq(events_since(ev, after, limit, out), 0);
    cr_assert_eq(count_lines(out->data), nlines, "since %lld, limit %d", (long long)after, limit);
    if (nlines > 0) {
        char want[32];
        snprintf(want, sizeof want, "{\"seq\":%lld,", (long long)after + 1);
        cr_assert(strncmp(out->data, want, strlen(want)) == 0, "since %lld: %.40s", (long long)after,
                  out->data);
    }
}

Test(events, seq_is_gapless_and_persisted)
{
    events *ev = open_log();
    for (int i = 1; i <= 5; i++)
        cr_assert_eq(events_emit(ev, "merge", json_pack("{s:i}", "fragment", i)), i);
    events_free(ev);
    ev = open_log();
    cr_assert_eq(events_last_seq(ev), 5);
    cr_assert_eq(events_emit(ev, "start", NULL), 6);
    cx_buf out;
    cx_buf_init(&out, 1 << 20);
    expect_since(ev, 3, 100, 3, &out);
    cr_assert(strstr(out.data, "\"type\":\"start\""));
    cr_assert(strstr(out.data, "\"t_real\":\""));
    cr_assert(strstr(out.data, "\"t_mono_ms\":"));
    cx_buf_cleanup(&out);
    events_free(ev);
}

Test(events, torn_tail_is_dropped)
{
    events *ev = open_log();
    events_emit(ev, "a", NULL);
    events_emit(ev, "b", NULL);
    events_free(ev);
    int fd = open(path, O_WRONLY | O_APPEND);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "{\"seq\":3,\"t_re", 14), 14);
    close(fd);
    ev = open_log();
    cr_assert_eq(events_last_seq(ev), 2);
    cr_assert_eq(events_emit(ev, "c", NULL), 3);
    events_free(ev);
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        json_t *j = json_loads(line, 0, NULL);
        cr_assert(j, "every line is JSON: %s", line);
        cr_assert_eq(json_integer_value(json_object_get(j, "seq")), n);
        json_decref(j);
    }
    fclose(f);
    cr_assert_eq(n, 3);
}

Test(events, reads_older_than_the_ring_come_from_the_file)
{
    events *ev = open_log();
    for (int i = 0; i < 50; i++)
        events_emit(ev, "heartbeat", json_pack("{s:i}", "i", i));
    cx_buf out;
    cx_buf_init(&out, 1 << 20);
    expect_since(ev, 0, 1000, 50, &out);
    /* in order, gapless */
    const char *p = out.data;
    for (int i = 1; i <= 50; i++) {
        char want[32];
        snprintf(want, sizeof want, "{\"seq\":%d,", i);
        cr_assert(strncmp(p, want, strlen(want)) == 0, "line %d: %.40s", i, p);
        p = strchr(p, '\n') + 1;
    }
    expect_since(ev, 10, 5, 5, &out); /* the limit is honoured */
    cx_buf_cleanup(&out);
    events_free(ev);
}

Test(events, seq_floor_from_a_checkpoint)
{
    events *ev = open_log();
    events_emit(ev, "a", NULL);
    events_set_seq_floor(ev, 40);
    cr_assert_eq(events_emit(ev, "b", NULL), 41);
    events_set_seq_floor(ev, 10); /* never backwards */
    cr_assert_eq(events_emit(ev, "c", NULL), 42);
    events_free(ev);
}

static int count_events(void *ctx, json_t *e)
{
    int64_t *seen = ctx;
    json_int_t s = json_integer_value(json_object_get(e, "seq"));
    cr_assert_eq(s, seen[0] + 1, "in order, from the asked seq: %lld after %lld", (long long)s,
                 (long long)seen[0]);
    seen[0] = s;
    seen[1]++;
    return 0;
}

/* A long history: reopening reads the tail only, and reads of old events
 * (the API, the start-up scan) find their start by bisection, with the
 * same lines a full scan gives. */
Test(events, reopen_and_old_reads_do_not_scan_the_history)
{
    events *ev = open_log();
    int n = 20000; /* ~2.4 MB, about ten times the recovery tail */
    for (int i = 0; i < n; i++)
        events_emit(ev, "heartbeat",
                    json_pack("{s:i, s:s}", "i", i, "pad", "0123456789abcdef0123456789abcdef"));
    events_free(ev);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    ev = open_log();
    cr_assert_eq(events_last_seq(ev), n, "the last seq is found from the tail");
    int64_t read = events_read_bytes(ev);
    cr_assert_lt(read, size / 4, "reopen read %lld of %ld bytes", (long long)read, size);
    cr_assert_eq(events_emit(ev, "start", NULL), n + 1);
    /* every since, from the first line to past the last */
    int64_t probes[] = {0, 1, 2, 777, 12345, n - 1, n, n + 1};
    for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
        int64_t seen[2] = {probes[k], 0};
        int64_t before = events_read_bytes(ev);
        cr_assert_eq(events_foreach_file(ev, probes[k], NULL, count_events, seen), 0);
        cr_assert_eq(seen[1], n + 1 - probes[k], "since %lld: %lld events", (long long)probes[k],
                     (long long)seen[1]);
        if (probes[k] > n / 2)
            cr_assert_lt(events_read_bytes(ev) - before, size / 2, "since %lld read the whole file",
                         (long long)probes[k]);
        int64_t only[2] = {n, 0}; /* the one "start" event */
        cr_assert_eq(events_foreach_file(ev, probes[k], "start", count_events, only), 0);
        cr_assert_eq(only[1], probes[k] <= n ? 1 : 0, "type filter");
        cx_buf out;
        cx_buf_init(&out, 8 << 20);
        expect_since(ev, probes[k], 100000, (int)(n + 1 - probes[k]), &out);
        cx_buf_cleanup(&out);
    }
    events_free(ev);
}
