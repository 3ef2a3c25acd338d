/* test_secrets.c - `chaosloco secrets`: the Secret objects it prints are the
 * ones deploy/k8s/ mounts (every secretName and item key a manifest names
 * is there), their data is base64 of credentials trainer/credential.c
 * parses and a syncer's store loads, the token is long enough for the
 * agent, two runs differ, and --out writes 0600 files it never
 * overwrites. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "harness_it.h"
#include "trainer/credential.h"

static void fini(void)
{
    it_cleanup();
}

TestSuite(secrets, .fini = fini, .timeout = 60);

/* Decode standard padded base64; malloc'd NUL-terminated, NULL when s is
 * not base64. */
static char *unbase64(const char *s)
{
    size_t n = strlen(s);
    if (n % 4 != 0)
        return NULL;
    char *out = malloc(n / 4 * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            const char *p = c ? strchr(tab, c) : NULL;
            if (c == '=' && i + 4 == n && k >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            if (!p || pad) {
                free(out);
                return NULL;
            }
            v = (v << 6) | (uint32_t)(p - tab);
        }
        out[o++] = (char)(v >> 16);
        if (pad < 2)
            out[o++] = (char)(v >> 8);
        if (pad < 1)
            out[o++] = (char)v;
    }
    out[o] = '\0';
    return out;
}

/* The Secret named name in the List (borrowed) */
static json_t *find_secret(json_t *list, const char *name)
{
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(list, "items"), i, it)
    {
        if (strcmp(json_string_value(json_object_get(json_object_get(it, "metadata"), "name")), name) == 0)
            return it;
    }
    return NULL;
}

/* Every secret volume of every deploy/k8s manifest: its secretName and
 * item keys must be in the generated List. Returns the number of
 * references checked. */
static int check_manifest_refs(json_t *node, json_t *list, const char *file)
{
    int n = 0;
    if (json_is_object(node)) {
        json_t *sec = json_object_get(node, "secret");
        const char *name = json_string_value(json_object_get(sec, "secretName"));
        if (name) {
            json_t *s = find_secret(list, name);
            cr_assert_not_null(s, "%s mounts Secret %s, which chaosloco secrets does not make", file, name);
            size_t i;
            json_t *item;
            json_array_foreach(json_object_get(sec, "items"), i, item)
            {
                const char *key = json_string_value(json_object_get(item, "key"));
                cr_assert_not_null(json_object_get(json_object_get(s, "data"), key),
                                   "%s mounts key %s of Secret %s, which chaosloco secrets does not make",
                                   file, key, name);
                n++;
            }
            n++;
        }
        const char *k;
        json_t *v;
        json_object_foreach(node, k, v) n += check_manifest_refs(v, list, file);
    } else if (json_is_array(node)) {
        size_t i;
        json_t *v;
        json_array_foreach(node, i, v) n += check_manifest_refs(v, list, file);
    }
    return n;
}

/* Check one Secret object's shape; its data object (borrowed). */
static json_t *check_secret(json_t *s, const char *name)
{
    cr_assert_not_null(s, "no Secret %s", name);
    cr_assert_str_eq(json_string_value(json_object_get(s, "apiVersion")), "v1");
    cr_assert_str_eq(json_string_value(json_object_get(s, "kind")), "Secret");
    cr_assert_str_eq(json_string_value(json_object_get(s, "type")), "Opaque");
    cr_assert(json_is_true(json_object_get(s, "immutable")), "Secret %s must be immutable", name);
    cr_assert_null(json_object_get(s, "stringData"));
    json_t *data = json_object_get(s, "data");
    cr_assert(json_is_object(data) && json_object_size(data) > 0, "Secret %s has no data", name);
    return data;
}

/* Run `chaosloco secrets ARGS` in dir; its output (stdout + stderr) and exit code. */
static char *run_secrets(const char *dir, const char *name, const char *const *args, int *rc)
{
    pid_t pid = it_start(dir, name, args, NULL);
    *rc = hx_exit_code(pid, 30000);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.log", dir, name);
    return hx_read(path);
}

Test(secrets, stdout_list_matches_the_manifests_and_holds_credentials_a_syncer_loads)
{
    char *dir = it_mkdtemp("secrets");
    int rc;
    const char *args[] = {"secrets", "--learners", "4", NULL};
    char *text = run_secrets(dir, "one", args, &rc);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, text ? text : "");
    json_error_t je;
    json_t *list = json_loads(text, 0, &je);
    cr_assert_not_null(list, "not JSON (%s): %s", je.text, text);
    cr_assert_str_eq(json_string_value(json_object_get(list, "kind")), "List");
    cr_assert_eq(json_array_size(json_object_get(list, "items")), 2);

    /* every Secret reference of the manifests resolves */
    char mdir[1024];
    snprintf(mdir, sizeof mdir, "%s/deploy/k8s", CHAOSLOCO_SRC);
    DIR *d = opendir(mdir);
    cr_assert_not_null(d, "%s", mdir);
    struct dirent *de;
    int refs = 0;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", mdir, de->d_name);
        json_t *m = json_load_file(p, 0, &je);
        cr_assert_not_null(m, "%s: %s", p, je.text);
        cr_assert_str_neq(json_string_value(json_object_get(m, "kind")), "Secret",
                          "%s: Secrets are made by chaosloco secrets, not committed", p);
        refs += check_manifest_refs(m, list, de->d_name);
        json_decref(m);
    }
    closedir(d);
    cr_assert_geq(refs, 6, "the manifests reference the Secrets and their keys (%d references seen)", refs);

    /* the credentials: base64 of "<cred>\n", the one each key names; a
     * syncer's store loads them as files */
    json_t *data =
        check_secret(find_secret(list, "chaosloco-syncer-credentials"), "chaosloco-syncer-credentials");
    cr_assert_eq(json_object_size(data), 6, "admin, read, learner-0..3");
    char cdir[1024];
    snprintf(cdir, sizeof cdir, "%s/credentials", dir);
    cr_assert_eq(mkdir(cdir, 0700), 0);
    const char *key;
    json_t *v;
    json_object_foreach(data, key, v)
    {
        char *plain = unbase64(json_string_value(v));
        cr_assert_not_null(plain, "%s: not base64: %s", key, json_string_value(v));
        size_t n = strlen(plain);
        cr_assert(n > 1 && plain[n - 1] == '\n', "%s: a credential file ends in one newline", key);
        plain[n - 1] = '\0';
        char err[CX_ERRLEN];
        cr_assert_eq(cred_parse(plain, NULL, NULL, err, sizeof err), 0, "%s: %s", key, err);
        cr_assert_eq(strncmp(plain, key, strlen(key) - 5), 0, "%s holds %.*s...", key, (int)(strlen(key) - 5),
                     plain);
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", cdir, key);
        cr_assert_eq(cred_write_file(p, plain, err, sizeof err), 0, "%s", err);
        free(plain);
    }
    char err[CX_ERRLEN];
    cred_store *st = cred_store_load(cdir, err, sizeof err);
    cr_assert_not_null(st, "the syncer's store refuses them: %s", err);
    cr_assert_eq(cred_store_learners(st), 4);
    char cred[CRED_MAX];
    char p[2048];
    snprintf(p, sizeof p, "%s/learner-3.cred", cdir);
    cr_assert_eq(cred_read_file(p, cred, err, sizeof err), 0, "%s", err);
    cred_kind kind;
    int64_t id;
    cr_assert_eq(cred_store_check(st, cred, &kind, &id, err, sizeof err), 0, "%s", err);
    cr_assert_eq(kind, CRED_LEARNER);
    cr_assert_eq(id, 3);
    cred_store_free(st);

    /* a token per agent: 64 hex digits each, no two alike */
    json_t *tdata = check_secret(find_secret(list, "chaosloco-agent-tokens"), "chaosloco-agent-tokens");
    cr_assert_eq(json_object_size(tdata), 4, "agent-0.token .. agent-3.token");
    char *token = unbase64(json_string_value(json_object_get(tdata, "agent-0.token")));
    cr_assert_not_null(token);
    cr_assert_eq(strlen(token), 64, "token %s", token);
    cr_assert_eq(strspn(token, "0123456789abcdef"), 64, "token %s", token);
    for (int i = 1; i < 4; i++) {
        char tkey[32];
        snprintf(tkey, sizeof tkey, "agent-%d.token", i);
        char *ti = unbase64(json_string_value(json_object_get(tdata, tkey)));
        cr_assert_not_null(ti, "%s", tkey);
        cr_assert_eq(strlen(ti), 64, "%s: %s", tkey, ti);
        cr_assert_str_neq(ti, token, "agent %d has agent 0's token", i);
        free(ti);
    }

    /* a second run makes other secrets */
    char *text2 = run_secrets(dir, "two", args, &rc);
    cr_assert_eq(rc, 0);
    json_t *list2 = json_loads(text2, 0, &je);
    cr_assert_not_null(list2);
    char *token2 = unbase64(json_string_value(
        json_object_get(json_object_get(find_secret(list2, "chaosloco-agent-tokens"), "data"), "agent-0.token")));
    cr_assert_str_neq(token, token2, "two runs made the same token");
    const char *a0 = json_string_value(json_object_get(data, "admin.cred"));
    const char *a1 = json_string_value(json_object_get(
        json_object_get(find_secret(list2, "chaosloco-syncer-credentials"), "data"), "admin.cred"));
    cr_assert_str_neq(a0, a1, "two runs made the same admin credential");
    free(token);
    free(token2);
    json_decref(list2);
    json_decref(list);
    free(text);
    free(text2);
    it_rm_tree(dir);
    free(dir);
}

Test(secrets, out_dir_files_are_0600_and_never_overwritten)
{
    char *dir = it_mkdtemp("secrets");
    char out[1024], p[2048];
    snprintf(out, sizeof out, "%s/k8s", dir);
    const char *args[] = {"secrets", "--learners", "2", "--out", out, NULL};
    int rc;
    char *log = run_secrets(dir, "one", args, &rc);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, log ? log : "");
    free(log);
    struct stat st;
    cr_assert_eq(stat(out, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "--out dir mode %o", (unsigned)(st.st_mode & 0777));
    const char *names[] = {"chaosloco-syncer-credentials", "chaosloco-agent-tokens"};
    char *before[2];
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s.json", out, names[i]);
        cr_assert_eq(stat(p, &st), 0, "%s missing", p);
        cr_assert_eq(st.st_mode & 0777, 0600, "%s mode %o", p, (unsigned)(st.st_mode & 0777));
        before[i] = hx_read(p);
        json_error_t je;
        json_t *o = json_loads(before[i], 0, &je);
        cr_assert_not_null(o, "%s: %s", p, je.text);
        check_secret(o, names[i]);
        json_decref(o);
    }
    /* again into the same dir: refused, files as they were */
    log = run_secrets(dir, "two", args, &rc);
    cr_assert_eq(rc, 1, "a second run over existing files exits 1, not %d: %s", rc, log ? log : "");
    cr_assert(log && strstr(log, "never overwritten"), "%s", log ? log : "");
    free(log);
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s.json", out, names[i]);
        char *after = hx_read(p);
        cr_assert_str_eq(after, before[i], "%s was changed", p);
        free(after);
        free(before[i]);
    }
    /* bad flags: 64 */
    const char *bad[] = {"secrets", "--learners", "0", NULL};
    log = run_secrets(dir, "bad", bad, &rc);
    cr_assert_eq(rc, 64, "--learners 0: exit %d", rc);
    free(log);
    const char *none[] = {"secrets", NULL};
    log = run_secrets(dir, "none", none, &rc);
    cr_assert_eq(rc, 64, "no --learners: exit %d", rc);
    cr_assert(log && strstr(log, "--learners"), "%s", log ? log : "");
    free(log);
    it_rm_tree(dir);
    free(dir);
}
