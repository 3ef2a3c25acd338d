/* test_events_file.c - the events file tailer: partial lines, malformed and
 * huge lines (named by line number), seq rules, truncation, replacement. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "harness/events_file.h"
#include "tmpdir.h"

static char dir[64];
static char path[128];

/* The tailer under test (on path, no line limit unless reopened) and what
 * its last poll took. */
static evf *t;
static long taken[16]; /* the seqs taken, the first 16 */
static int n;          /* how many events were taken */
static char err[CX_ERRLEN];

static void setup(void)
{
    tmpdir_with_file(dir, sizeof dir, "/tmp/cx_test_evf_XXXXXX", path, sizeof path, "events.jsonl");
    t = evf_new(path, 0);
}

/* A fresh tailer on path with this line limit. */
static void reopen(size_t line_max)
{
    evf_free(t);
    t = evf_new(path, line_max);
}

static void teardown(void)
{
    evf_free(t);
    t = NULL;
    char other[160];
    snprintf(other, sizeof other, "%s.new", path);
    unlink(other);
    unlink(path);
    rmdir(dir);
}

TestSuite(events_file, .init = setup, .fini = teardown);

/* Append text to p (created if missing). */
static void append_to(const char *p, const char *text)
{
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0644);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void append(const char *text)
{
    append_to(path, text);
}

/* One event line of seq. */
static const char *line(long seq)
{
    static char buf[128];
    snprintf(buf, sizeof buf, "{\"seq\":%ld,\"t_real\":\"x\",\"t_mono_ms\":%ld,\"type\":\"merge\"}\n", seq,
             1000 + seq);
    return buf;
}

/* Poll t once: evf_poll's return value; what it took into taken and n, its
 * message into err. */
static int poll_once(void)
{
    json_t *out = json_array();
    int rc = evf_poll(t, out, err, CX_ERRLEN);
    n = (int)json_array_size(out);
    for (int i = 0; i < n && i < 16; i++)
        taken[i] = (long)json_integer_value(json_object_get(json_array_get(out, (size_t)i), "seq"));
    json_decref(out);
    return rc;
}

Test(events_file, no_file_yet_reads_nothing)
{
    cr_assert_eq(poll_once(), 0);
    cr_assert_eq(n, 0);
    append(line(1));
    cr_assert_eq(poll_once(), 1);
    cr_assert_eq(taken[0], 1);
    cr_assert_eq(evf_last_seq(t), 1);
}

Test(events_file, partial_last_line_waits_for_its_newline)
{
    append(line(1));
    append("{\"seq\":2,\"t_mono_ms\":5,");
    cr_assert_eq(poll_once(), 1, "%s", err);
    cr_assert_eq(taken[0], 1);
    cr_assert_eq(poll_once(), 0, "an unterminated line is not an event yet");
    append("\"type\":\"eval\",\"loss\":2.5}\n");
    cr_assert_eq(poll_once(), 1, "%s", err);
    cr_assert_eq(taken[0], 2);
}

Test(events_file, malformed_line_is_an_error_naming_the_line)
{
    append(line(1));
    append(line(2));
    append("{\"seq\":3,\"t_mono_ms\":1,\"type\":\"merge\"\n"); /* no closing brace */
    append(line(4));
    int rc = poll_once();
    cr_assert_eq(rc, CX_EINVAL);
    cr_assert_eq(n, 2, "the lines before the bad one are taken");
    cr_assert(strstr(err, "line 3:"), "%s", err);
    cr_assert(strstr(err, path), "%s", err);
    /* sticky: nothing after a bad line is trusted */
    cr_assert_eq(poll_once(), CX_EINVAL);
    cr_assert_eq(n, 0);
    cr_assert(strstr(err, "line 3:"), "%s", err);
}

Test(events_file, a_bad_line_is_never_quoted)
{
    /* the path names a key file by mistake: its bytes must not reach the log */
    append("SECRETTOKEN1234\n");
    cr_assert_eq(poll_once(), CX_EINVAL);
    cr_assert(strstr(err, "line 1: not a JSON object"), "%s", err);
    cr_assert_null(strstr(err, "SECRET"), "%s", err);
}

Test(events_file, a_fifo_at_the_path_is_refused_without_blocking)
{
    cr_assert_eq(mkfifo(path, 0600), 0);
    /* no writer opens the FIFO: a blocking open() would hang here */
    cr_assert_eq(poll_once(), CX_EINVAL);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
}

Test(events_file, an_object_without_the_event_fields_is_an_error)
{
    append("{\"seq\":1,\"type\":\"merge\"}\n"); /* no t_mono_ms */
    cr_assert_eq(poll_once(), CX_EINVAL);
    cr_assert(strstr(err, "line 1:") && strstr(err, "t_mono_ms"), "%s", err);
}

Test(events_file, empty_line_is_an_error)
{
    append(line(1));
    append("\n");
    cr_assert_eq(poll_once(), CX_EINVAL);
    cr_assert(strstr(err, "line 2: empty line"), "%s", err);
}

Test(events_file, huge_line_is_bounded_and_named)
{
    reopen(64);
    append(line(1));
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    append(big); /* still unterminated: already too long */
    cr_assert_eq(poll_once(), CX_ETOOBIG);
    cr_assert_eq(n, 1);
    cr_assert(strstr(err, "line 2: longer than 64 bytes"), "%s", err);
}

Test(events_file, a_line_of_exactly_line_max_is_accepted)
{
    const char *l = line(1);
    reopen(strlen(l) - 1); /* the line without its '\n' */
    append(l);
    cr_assert_eq(poll_once(), 1, "%s", err);
}

Test(events_file, seq_must_go_up_by_one)
{
    append(line(1));
    append(line(3));
    cr_assert_eq(poll_once(), CX_EINVAL);
    cr_assert(strstr(err, "line 2: seq 3 after 1"), "%s", err);

    unlink(path);
    reopen(0);
    append(line(5));
    append(line(5)); /* a repeat in the same file */
    cr_assert_eq(poll_once(), CX_EINVAL);
    cr_assert(strstr(err, "line 2: seq 5 after 5"), "%s", err);
}

Test(events_file, truncated_file_is_read_again_skipping_what_was_taken)
{
    for (long i = 1; i <= 3; i++)
        append(line(i));
    cr_assert_eq(poll_once(), 3, "%s", err);
    cr_assert_eq(truncate(path, 0), 0);
    for (long i = 1; i <= 4; i++)
        append(line(i));
    cr_assert_eq(poll_once(), 1, "%s", err);
    cr_assert_eq(taken[0], 4);
    /* after a rewind the next new event must still follow the last taken */
    cr_assert_eq(truncate(path, 0), 0);
    append(line(2));
    append(line(9));
    cr_assert_eq(poll_once(), CX_EINVAL);
    cr_assert(strstr(err, "line 2: seq 9 after 4"), "%s", err);
}

Test(events_file, torn_tail_cut_back_and_appended_again)
{
    /* a coordinator killed mid-write: the restart cuts the torn tail back
     * to the last complete line and appends after it */
    append(line(1));
    off_t keep = (off_t)strlen(line(1));
    append("{\"seq\":2,\"t_mo");
    cr_assert_eq(poll_once(), 1, "%s", err);
    cr_assert_eq(truncate(path, keep), 0);
    append(line(2));
    append(line(3));
    cr_assert_eq(poll_once(), 2, "%s", err);
    cr_assert_eq(taken[0], 2);
    cr_assert_eq(taken[1], 3);
}

Test(events_file, replaced_file_old_one_read_to_its_end_first)
{
    for (long i = 1; i <= 3; i++)
        append(line(i));
    cr_assert_eq(poll_once(), 3, "%s", err);
    append(line(4)); /* not read before the replacement */
    char other[160];
    snprintf(other, sizeof other, "%s.new", path);
    for (long i = 1; i <= 5; i++)
        append_to(other, line(i));
    cr_assert_eq(rename(other, path), 0);
    cr_assert_eq(poll_once(), 2, "%s", err);
    cr_assert_eq(taken[0], 4);
    cr_assert_eq(taken[1], 5);
    append(line(6));
    cr_assert_eq(poll_once(), 1, "%s", err);
    cr_assert_eq(taken[0], 6);
    cr_assert_eq(evf_last_seq(t), 6);
}

Test(events_file, many_lines_in_one_poll)
{
    for (long i = 1; i <= 5000; i++)
        append(line(i));
    cr_assert_eq(poll_once(), 5000, "%s", err);
    cr_assert_eq(evf_last_seq(t), 5000);
}
