/* test_secret.c - common/secret.h: a kubelet's Secret volume layout is
 * accepted through its symlinks; a target of another uid, a group-readable
 * target, a directory and a FIFO are refused with a message naming the
 * path and what was wrong. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/secret.h"
#include "tmpdir.h"

static char dir[256];

static void setup(void)
{
    char unused[300];
    tmpdir_with_file(dir, sizeof dir, "/tmp/cx_secret_XXXXXX", unused, sizeof unused, "x");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(secret, .init = setup, .fini = teardown);

/* dir/rel with content text and mode (umask cleared by the chmod) */
static void write_file(const char *rel, const char *text, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "%s: %s", p, strerror(errno));
    fputs(text, f);
    fclose(f);
    cr_assert_eq(chmod(p, mode), 0, "chmod %s: %s", p, strerror(errno));
}

static void link_at(const char *target, const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    cr_assert_eq(symlink(target, p), 0, "symlink %s -> %s: %s", p, target, strerror(errno));
}

static void make_dir(const char *rel, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    cr_assert_eq(mkdir(p, mode), 0, "mkdir %s: %s", p, strerror(errno));
}

/* cx_secret_read of dir/rel: its return code, the content or the message */
static int read_rel(const char *rel, char *out, size_t outlen, char *err, size_t errlen)
{
    char p[512], *data = NULL;
    size_t len = 0;
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    err[0] = '\0';
    int rc = cx_secret_read(p, "credential file", 4096, &data, &len, err, errlen);
    if (rc == 0) {
        cr_assert_eq(strlen(data), len);
        snprintf(out, outlen, "%s", data);
        free(data);
    } else {
        cr_assert_null(data, "a refused read returns no data");
    }
    return rc;
}

/* kubelet's atomic writer: the data in a timestamped directory, ..data a
 * symlink to it, each key a symlink through ..data */
static void kubelet_layout(const char *key, const char *text, mode_t mode)
{
    make_dir("..2026_12_06_00_00_00.123", 0755);
    char rel[256];
    snprintf(rel, sizeof rel, "..2026_12_06_00_00_00.123/%s", key);
    write_file(rel, text, mode);
    link_at("..2026_12_06_00_00_00.123", "..data");
    snprintf(rel, sizeof rel, "..data/%s", key);
    link_at(rel, key);
}

Test(secret, kubelet_secret_volume_layout_is_read_through_its_symlinks)
{
    char out[128], err[CX_ERRLEN];
    kubelet_layout("learner-0.cred", "the secret\n", 0400);
    int rc = read_rel("learner-0.cred", out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, 0, "refused: %s", err);
    cr_assert_str_eq(out, "the secret\n");
    /* 0600 as well (defaultMode 0600) */
    char p[512];
    snprintf(p, sizeof p, "%s/..2026_12_06_00_00_00.123/learner-0.cred", dir);
    cr_assert_eq(chmod(p, 0600), 0);
    cr_assert_eq(read_rel("learner-0.cred", out, sizeof out, err, sizeof err), 0, "refused: %s", err);
}

Test(secret, a_plain_owner_only_file_is_read)
{
    char out[128], err[CX_ERRLEN];
    write_file("token", "abcdefgh", 0600);
    cr_assert_eq(read_rel("token", out, sizeof out, err, sizeof err), 0, "refused: %s", err);
    cr_assert_str_eq(out, "abcdefgh");
}

Test(secret, a_symlink_to_a_file_of_another_uid_is_refused)
{
    char out[128], err[CX_ERRLEN], p[512];
    cr_assert_eq(geteuid(), 0, "chown to another uid needs root (the tests run as root)");
    write_file("theirs", "the secret\n", 0600);
    snprintf(p, sizeof p, "%s/theirs", dir);
    cr_assert_eq(chown(p, 65534, 65534), 0, "chown %s: %s", p, strerror(errno));
    link_at("theirs", "learner-0.cred");
    int rc = read_rel("learner-0.cred", out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, CX_EINVAL, "a file of uid 65534 was accepted");
    cr_assert(strstr(err, "learner-0.cred") && strstr(err, "-> ") && strstr(err, "/theirs") &&
                  strstr(err, "owned by uid 65534"),
              "the message names the path, its target and the owner: %s", err);
    /* the same file, no symlink: refused alike */
    rc = read_rel("theirs", out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, CX_EINVAL);
    cr_assert(strstr(err, "owned by uid 65534") && !strstr(err, "-> "), "%s", err);
}

Test(secret, a_group_readable_target_is_refused)
{
    char out[128], err[CX_ERRLEN];
    /* what fsGroup makes of a Secret file: 0440 */
    kubelet_layout("token", "abcdefgh\n", 0440);
    int rc = read_rel("token", out, sizeof out, err, sizeof err);
    cr_assert_eq(rc, CX_EINVAL, "a 0440 file was accepted");
    cr_assert(strstr(err, "/token (-> ") && strstr(err, "..2026_12_06_00_00_00.123/token") &&
                  strstr(err, "mode 0440") && strstr(err, "group or others"),
              "%s", err);
    write_file("other", "abcdefgh\n", 0604);
    cr_assert_eq(read_rel("other", out, sizeof out, err, sizeof err), CX_EINVAL, "a 0604 file was accepted");
    cr_assert(strstr(err, "mode 0604"), "%s", err);
}

Test(secret, a_directory_is_refused)
{
    char out[128], err[CX_ERRLEN];
    make_dir("creds", 0700);
    link_at("creds", "admin.cred");
    cr_assert_eq(read_rel("admin.cred", out, sizeof out, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "admin.cred") && strstr(err, "a directory"), "%s", err);
}

Test(secret, a_fifo_is_refused_without_waiting_for_a_writer)
{
    char out[128], err[CX_ERRLEN], p[512];
    snprintf(p, sizeof p, "%s/fifo", dir);
    cr_assert_eq(mkfifo(p, 0600), 0, "mkfifo: %s", strerror(errno));
    link_at("fifo", "token");
    cr_assert_eq(read_rel("token", out, sizeof out, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "/token (-> ") && strstr(err, "a FIFO"), "%s", err);
}

Test(secret, missing_dangling_and_oversized_files_are_refused)
{
    char out[128], err[CX_ERRLEN];
    cr_assert_eq(read_rel("nothing", out, sizeof out, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "/nothing") && strstr(err, "No such file"), "%s", err);
    link_at("..data/gone", "dangling");
    cr_assert_eq(read_rel("dangling", out, sizeof out, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "/dangling"), "%s", err);
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    write_file("big", big, 0600);
    cr_assert_eq(read_rel("big", out, sizeof out, err, sizeof err), CX_EINVAL,
                 "a 4999-byte file under a 4096 cap");
    cr_assert(strstr(err, "larger than 4096 bytes"), "%s", err);
}

/* A token file's first line, trailing whitespace removed; an empty line is
 * the caller's to judge, a line too long for the buffer is refused. */
Test(secret, read_line_takes_the_first_line_of_a_token_file)
{
    char p[512], out[16], err[CX_ERRLEN];
    snprintf(p, sizeof p, "%s/token", dir);
    write_file("token", "tok-123 \t\r\nsecond line\n", 0600);
    cr_assert_eq(cx_secret_read_line(p, "--token-file", out, sizeof out, err, sizeof err), 7, "%s", err);
    cr_assert_str_eq(out, "tok-123");
    snprintf(p, sizeof p, "%s/empty", dir);
    write_file("empty", "\nnext\n", 0600);
    cr_assert_eq(cx_secret_read_line(p, "--token-file", out, sizeof out, err, sizeof err), 0);
    cr_assert_str_eq(out, "");
    snprintf(p, sizeof p, "%s/long", dir);
    write_file("long", "0123456789abcdefXYZ\n", 0600);
    cr_assert_eq(cx_secret_read_line(p, "--token-file", out, sizeof out, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "longer than 15"), "%s", err);
    snprintf(p, sizeof p, "%s/wide", dir);
    write_file("wide", "tok\n", 0640);
    cr_assert_eq(cx_secret_read_line(p, "--token-file", out, sizeof out, err, sizeof err), CX_EINVAL,
                 "the secret-file rule still applies");
}
