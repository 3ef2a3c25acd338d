#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "trainer/credential.h"

static char dir[] = "/tmp/cx-cred-XXXXXX";

static void setup(void)
{
    cr_assert_not_null(mkdtemp(dir));
}

TestSuite(credential, .init = setup);

Test(credential, generate_parse_and_compare)
{
    char a[CRED_MAX], b[CRED_MAX], err[256];
    cr_assert_eq(cred_generate("learner-3", a, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cred_generate("learner-3", b, err, sizeof err), 0, "%s", err);
    cr_assert_eq(strlen(a), strlen("learner-3.") + CRED_HEX);
    cr_assert_str_neq(a, b, "two credentials are random, not equal");
    cred_kind k;
    int64_t id;
    cr_assert_eq(cred_parse(a, &k, &id, err, sizeof err), 0, "%s", err);
    cr_assert_eq(k, CRED_LEARNER);
    cr_assert_eq(id, 3);
    cr_assert_eq(cred_generate("admin", a, err, sizeof err), 0);
    cr_assert_eq(cred_parse(a, &k, &id, err, sizeof err), 0);
    cr_assert_eq(k, CRED_ADMIN);
    cr_assert_eq(id, -1);
    cr_assert_neq(cred_generate("root", a, err, sizeof err), 0);
    cr_assert_neq(cred_generate("learner-01", a, err, sizeof err), 0, "no leading zeros: one name per id");
    cr_assert_neq(cred_parse("admin", &k, &id, err, sizeof err), 0);
    cr_assert_neq(cred_parse("admin.abc", &k, &id, err, sizeof err), 0);
    cr_assert(strstr(err, "hex digits"), "%s", err);
    cr_assert(cred_equal("admin.x", "admin.x"));
    cr_assert(!cred_equal("admin.x", "admin.y"));
    cr_assert(!cred_equal("admin.", "admin.x"));
    cr_assert(!cred_equal("admin.xx", "admin.x"));
}

Test(credential, files_are_0600_exclusive_and_wide_modes_are_refused)
{
    char path[256], cred[CRED_MAX], back[CRED_MAX], err[256];
    snprintf(path, sizeof path, "%s/admin.cred", dir);
    cr_assert_eq(cred_generate("admin", cred, err, sizeof err), 0);
    cr_assert_eq(cred_write_file(path, cred, err, sizeof err), 0, "%s", err);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    cr_assert_eq(cred_write_file(path, cred, err, sizeof err), CX_ECONFLICT, "never overwritten");
    cr_assert_eq(cred_read_file(path, back, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(back, cred);
    chmod(path, 0644);
    cr_assert_eq(cred_read_file(path, back, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "0644") && strstr(err, "group or others"), "%s", err);
    chmod(path, 0620);
    cr_assert_eq(cred_read_file(path, back, err, sizeof err), CX_EINVAL, "group-writable is refused too");
    chmod(path, 0600);
    /* garbage in a 0600 file */
    snprintf(path, sizeof path, "%s/junk.cred", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "admin.zz\n", 9), 9);
    close(fd);
    cr_assert_eq(cred_read_file(path, back, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "junk.cred"), "%s", err);
}

Test(credential, dir_create_load_and_check)
{
    char d[256], err[256], path[300], cred[CRED_MAX];
    snprintf(d, sizeof d, "%s/creds", dir);
    cr_assert_eq(cred_dir_create(d, 3, err, sizeof err), 0, "%s", err);
    struct stat st;
    cr_assert_eq(stat(d, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700);
    snprintf(path, sizeof path, "%s/learner-1.cred", d);
    cr_assert_eq(cred_read_file(path, cred, err, sizeof err), 0, "%s", err);
    /* a second create keeps what exists */
    char again[CRED_MAX];
    cr_assert_eq(cred_dir_create(d, 3, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cred_read_file(path, again, err, sizeof err), 0);
    cr_assert_str_eq(cred, again);

    cred_store *s = cred_store_load(d, err, sizeof err);
    cr_assert_not_null(s, "%s", err);
    cr_assert_eq(cred_store_learners(s), 3);
    cred_kind k;
    int64_t id;
    cr_assert_eq(cred_store_check(s, cred, &k, &id, err, sizeof err), 0, "%s", err);
    cr_assert_eq(k, CRED_LEARNER);
    cr_assert_eq(id, 1);
    /* learner-1's secret under learner-0's name, a fresh secret, garbage */
    char forged[CRED_MAX];
    snprintf(forged, sizeof forged, "learner-0.%s", strchr(cred, '.') + 1);
    cr_assert_eq(cred_store_check(s, forged, &k, &id, err, sizeof err), CX_EAUTH);
    cr_assert_eq(cred_generate("admin", forged, err, sizeof err), 0);
    cr_assert_eq(cred_store_check(s, forged, &k, &id, err, sizeof err), CX_EAUTH);
    cr_assert(!strstr(err, strchr(forged, '.') + 1), "the secret is never echoed: %s", err);
    cr_assert_eq(cred_store_check(s, "nonsense", &k, &id, err, sizeof err), CX_EAUTH);
    cred_store_free(s);

    /* a wide file fails the whole load */
    chmod(path, 0640);
    cr_assert_null(cred_store_load(d, err, sizeof err));
    cr_assert(strstr(err, "learner-1.cred"), "%s", err);
    chmod(path, 0600);
    chmod(d, 0755);
    cr_assert_null(cred_store_load(d, err, sizeof err));
    cr_assert(strstr(err, "0755"), "%s", err);
    chmod(d, 0700);
}

/* A Kubernetes Secret volume: each key NAME -> ..data/NAME, ..data ->
 * ..<timestamp>/ holding the files. A learner reads its file through the
 * symlinks, and a syncer loads the whole volume (the ..* entries are not
 * credential names). */
Test(credential, a_kubelet_secret_volume_is_read_and_loaded)
{
    char vol[256], ts[300], path[400], link[400], cred[CRED_MAX], back[CRED_MAX], err[256];
    snprintf(vol, sizeof vol, "%s/secret", dir);
    cr_assert_eq(mkdir(vol, 0700), 0);
    snprintf(ts, sizeof ts, "%s/..2026_12_06_00_00_00.123", vol);
    cr_assert_eq(mkdir(ts, 0755), 0);
    const char *principals[] = {"admin", "learner-0", "learner-1"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.cred", ts, principals[i]);
        cr_assert_eq(cred_generate(principals[i], cred, err, sizeof err), 0, "%s", err);
        cr_assert_eq(cred_write_file(path, cred, err, sizeof err), 0, "%s", err);
        cr_assert_eq(chmod(path, 0400), 0);
        char target[64];
        snprintf(target, sizeof target, "..data/%s.cred", principals[i]);
        snprintf(link, sizeof link, "%s/%s.cred", vol, principals[i]);
        cr_assert_eq(symlink(target, link), 0);
    }
    snprintf(link, sizeof link, "%s/..data", vol);
    cr_assert_eq(symlink("..2026_12_06_00_00_00.123", link), 0);
    snprintf(link, sizeof link, "%s/learner-1.cred", vol);
    cr_assert_eq(cred_read_file(link, back, err, sizeof err), 0, "%s", err);
    cr_assert_eq(strncmp(back, "learner-1.", 10), 0, "%s", back);
    cred_store *s = cred_store_load(vol, err, sizeof err);
    cr_assert_not_null(s, "%s", err);
    cr_assert_eq(cred_store_learners(s), 2);
    cr_assert_eq(cred_store_check(s, back, NULL, NULL, err, sizeof err), 0, "%s", err);
    cred_store_free(s);
    /* fsGroup's 0440 behind the link: refused, naming link and target */
    snprintf(path, sizeof path, "%s/learner-1.cred", ts);
    cr_assert_eq(chmod(path, 0440), 0);
    cr_assert_eq(cred_read_file(link, back, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "learner-1.cred (-> ") && strstr(err, "mode 0440"), "%s", err);
}
