#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"

static char dir[] = "/tmp/cx-file-XXXXXX";

static void setup(void)
{
    cr_assert_not_null(mkdtemp(dir));
}

TestSuite(file, .init = setup);

Test(file, blob_round_trip_and_corruption)
{
    char path[256], err[256];
    snprintf(path, sizeof path, "%s/a/b/blob", dir);
    char parent[256];
    snprintf(parent, sizeof parent, "%s/a/b", dir);
    cr_assert_eq(cx_mkdir_p(parent, err, sizeof err), 0, "%s", err);
    const char payload[] = "the global model";
    cr_assert_eq(cx_file_write_blob(path, payload, sizeof payload, err, sizeof err), 0, "%s", err);
    void *out;
    size_t n;
    cr_assert_eq(cx_file_read_blob(path, 1 << 20, &out, &n, err, sizeof err), 0, "%s", err);
    cr_assert_eq(n, sizeof payload);
    cr_assert_eq(memcmp(out, payload, n), 0);
    free(out);

    /* flip one payload byte: checksum mismatch */
    FILE *f = fopen(path, "r+b");
    fseek(f, 20, SEEK_SET);
    fputc('X', f);
    fclose(f);
    cr_assert_eq(cx_file_read_blob(path, 1 << 20, &out, &n, err, sizeof err), CX_ECORRUPT);
    cr_assert(strstr(err, "checksum"), "%s", err);

    /* truncate: bad length */
    cr_assert_eq(truncate(path, 10), 0);
    cr_assert_eq(cx_file_read_blob(path, 1 << 20, &out, &n, err, sizeof err), CX_ECORRUPT);

    char missing[256];
    snprintf(missing, sizeof missing, "%s/none", dir);
    cr_assert_eq(cx_file_read_blob(missing, 1 << 20, &out, &n, err, sizeof err), CX_ENOTFOUND);
}

Test(file, atomic_write_replaces_and_caps_reads)
{
    char path[256], err[256];
    snprintf(path, sizeof path, "%s/f", dir);
    cr_assert_eq(cx_file_write_atomic(path, "one", 3, err, sizeof err), 0);
    cr_assert_eq(cx_file_write_atomic(path, "two!", 4, err, sizeof err), 0);
    char *d;
    size_t n;
    cr_assert_eq(cx_file_read(path, 100, &d, &n, err, sizeof err), 0);
    cr_assert_str_eq(d, "two!");
    free(d);
    cr_assert_eq(cx_file_read(path, 3, &d, &n, err, sizeof err), CX_ETOOBIG);
}

Test(file, atomic_write_mode_holds_from_creation)
{
    char path[256], tmp[300], err[256];
    snprintf(path, sizeof path, "%s/secret", dir);
    /* a stale temp file of a crashed writer, readable by everyone */
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fputs("old", f);
    fclose(f);
    chmod(tmp, 0666);
    mode_t old = umask(0);
    int rc = cx_file_write_atomic_mode(path, "tok\n", 4, 0600, err, sizeof err);
    umask(old);
    cr_assert_eq(rc, 0, "%s", err);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", (unsigned)(st.st_mode & 0777));
    char *data;
    size_t n;
    cr_assert_eq(cx_file_read(path, 64, &data, &n, err, sizeof err), 0);
    cr_assert_str_eq(data, "tok\n");
    free(data);
    /* the plain writer keeps 0644 (minus the umask) */
    cr_assert_eq(cx_file_write_atomic(path, "x", 1, err, sizeof err), 0);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0600, 0600);
}

Test(file, write_new_never_replaces_or_follows)
{
    char path[256], link[300], err[256];
    snprintf(path, sizeof path, "%s/cred", dir);
    mode_t old = umask(0);
    int rc = cx_file_write_new("credential file", path, "c1\n", 3, 0600, err, sizeof err);
    umask(old);
    cr_assert_eq(rc, 0, "%s", err);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", (unsigned)(st.st_mode & 0777));
    /* an existing file is a conflict and keeps its content */
    rc = cx_file_write_new("credential file", path, "c2\n", 3, 0600, err, sizeof err);
    cr_assert_eq(rc, CX_ECONFLICT);
    cr_assert(strstr(err, "credential file") && strstr(err, path), "%s", err);
    char *data;
    size_t n;
    cr_assert_eq(cx_file_read(path, 64, &data, &n, err, sizeof err), 0);
    cr_assert_str_eq(data, "c1\n");
    free(data);
    /* a planted symlink is never written through */
    snprintf(link, sizeof link, "%s/planted", dir);
    cr_assert_eq(symlink(path, link), 0);
    cr_assert_neq(cx_file_write_new("credential file", link, "c3\n", 3, 0600, err, sizeof err), 0);
    cr_assert_eq(cx_file_read(path, 64, &data, &n, err, sizeof err), 0);
    cr_assert_str_eq(data, "c1\n");
    free(data);
}
