/* secrets_main.c - `chaosloco secrets --learners N [--out DIR]`: fresh
 * credentials for a Kubernetes deployment, as the Secret objects
 * deploy/k8s/ mounts.
 *
 * Makes admin, read and learner-0..N-1 credentials (cred_generate,
 * trainer/credential.h) and a random token for each agent, and writes two
 * Secrets, chaosloco-syncer-credentials (<principal>.cred keys) and
 * chaosloco-agent-tokens (agent-<i>.token keys: each learner pod's agent
 * gets its own, the harness all), both "immutable": true, so that a
 * second `kubectl apply` of fresh ones is refused by the API server instead
 * of replacing credentials a running syncer and its learners hold. Without
 * --out the two go to stdout as one v1 List (`chaosloco secrets --learners
 * 4 | kubectl create -f -`); with --out each goes to DIR/<name>.json, made
 * with mode 0600 and O_EXCL (an existing file is an error, never
 * overwritten). Nothing is kept: the output is the only copy.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/file.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "trainer/credential.h"

#define SECRETS_MAX_LEARNERS 4096 /* ~0.7 MB of Secret data, below the API's 1 MiB per object */
#define SECRETS_TOKEN_BYTES 32    /* random bytes of an agent token (64 hex digits) */

/* The Secret names the manifests in deploy/k8s/ mount
 * (tests/integration/test_secrets.c checks that they agree). */
#define SECRETS_CRED_NAME "chaosloco-syncer-credentials"
#define SECRETS_TOKEN_NAME "chaosloco-agent-tokens"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: chaosloco secrets --learners N [--out DIR]\n\n"
            "Make fresh credentials for a Kubernetes deployment (deploy/k8s/) and print them as\n"
            "immutable Secret objects: " SECRETS_CRED_NAME " (admin.cred, read.cred,\n"
            "learner-<i>.cred for i < N) and " SECRETS_TOKEN_NAME " (agent-<i>.token for i < N:\n"
            "each agent's own bearer token).\n\n"
            "  --learners N   number of learner credentials, 1..%d (the syncer's --learners)\n"
            "  --out DIR      write DIR/<secret name>.json (mode 0600, never overwriting a file)\n"
            "                 instead of one List on stdout; DIR is made 0700 when missing\n"
            "  --help         this text\n\n"
            "  chaosloco secrets --learners 4 | kubectl create -f -\n\n"
            "exit: 0 written, 1 a file exists or cannot be written, 64 usage error\n",
            SECRETS_MAX_LEARNERS);
}

/* ---- secrets: values ---- */

/* Standard base64 (RFC 4648, padded) of in[n]: malloc'd, NULL when out of
 * memory. The Secret's data field wants it. */
static char *base64(const unsigned char *in, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* data[key] = base64(value); 0 or CX_ENOMEM. The encoded copy is wiped. */
static int put_b64(json_t *data, const char *key, const char *value)
{
    char *b = base64((const unsigned char *)value, strlen(value));
    if (!b)
        return CX_ENOMEM;
    int rc = json_object_set_new(data, key, json_string(b)) == 0 ? 0 : CX_ENOMEM;
    memset(b, 0, strlen(b));
    free(b);
    return rc;
}

/* 2 * SECRETS_TOKEN_BYTES hex digits from getrandom into out. */
static int random_token(char out[2 * SECRETS_TOKEN_BYTES + 1], char *err, size_t errlen)
{
    unsigned char raw[SECRETS_TOKEN_BYTES];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t r = getrandom(raw + got, sizeof raw - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return cx_fail(err, errlen, CX_ESYS, "getrandom: %s", strerror(errno));
        got += (size_t)r;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    memset(raw, 0, sizeof raw);
    return 0;
}

/* A new immutable Opaque Secret named name holding data (stolen). */
static json_t *secret_object(const char *name, json_t *data)
{
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:s, s:b, s:o}", "apiVersion", "v1", "kind", "Secret",
                     "metadata", "name", name, "labels", "app.kubernetes.io/part-of", "chaosloco", "type",
                     "Opaque", "immutable", 1, "data", data);
}

/* The credentials Secret: admin, read, learner-0..n-1. NULL with err. */
static json_t *credentials_secret(int64_t learners, char *err, size_t errlen)
{
    json_t *data = json_object();
    char cred[CRED_MAX], principal[CRED_PRINCIPAL], key[CRED_PRINCIPAL + 8];
    int rc = data ? 0 : cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    for (int64_t i = -2; rc == 0 && i < learners; i++) {
        if (i == -2)
            snprintf(principal, sizeof principal, "admin");
        else if (i == -1)
            snprintf(principal, sizeof principal, "read");
        else
            snprintf(principal, sizeof principal, "learner-%" PRId64, i);
        snprintf(key, sizeof key, "%s.cred", principal);
        rc = cred_generate(principal, cred, err, errlen);
        /* the file's content: the credential and a newline, as
         * cred_write_file writes it (a credential is at most 80 bytes:
         * room for both in CRED_MAX) */
        size_t n = rc == 0 ? strlen(cred) : 0;
        assert(rc != 0 || n + 1 < sizeof cred);
        if (rc == 0) {
            cred[n] = '\n';
            cred[n + 1] = '\0';
            if (put_b64(data, key, cred) != 0)
                rc = cx_fail(err, errlen, CX_ENOMEM, "out of memory");
        }
        memset(cred, 0, sizeof cred);
    }
    if (rc != 0) {
        json_decref(data);
        return NULL;
    }
    return secret_object(SECRETS_CRED_NAME, data);
}

/* agent-<i>.token for i < learners: one agent's token opens that agent only. */
static json_t *token_secret(int64_t learners, char *err, size_t errlen)
{
    json_t *data = json_object();
    int rc = data ? 0 : CX_ENOMEM;
    for (int64_t i = 0; i < learners && rc == 0; i++) {
        char token[2 * SECRETS_TOKEN_BYTES + 2], key[48];
        if ((rc = random_token(token, err, errlen)) != 0)
            break;
        snprintf(key, sizeof key, "agent-%" PRId64 ".token", i);
        rc = put_b64(data, key, token);
        memset(token, 0, sizeof token);
        if (rc != 0)
            cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    if (rc != 0) {
        json_decref(data);
        return NULL;
    }
    return secret_object(SECRETS_TOKEN_NAME, data);
}

/* ---- secrets: output ---- */

/* Write o as JSON to dir/<name>.json: mode 0600 from the first byte,
 * O_EXCL (an existing file is CX_ECONFLICT and stays as it was). */
static int write_new_file(const char *dir, const char *name, const json_t *o, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    size_t n = strlen(text);
    char *line = malloc(n + 2); /* the JSON and a newline (no realloc: it would free a copy unwiped) */
    if (line) {
        memcpy(line, text, n);
        line[n] = '\n';
        line[n + 1] = '\0';
    }
    memset(text, 0, n);
    free(text);
    if (!line)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    text = line;
    int rc = cx_file_write_new("secret file", path, text, n + 1, 0600, err, errlen);
    if (rc == CX_ECONFLICT && err)
        snprintf(err, errlen, "%s exists (never overwritten: delete it, or use another --out)", path);
    memset(text, 0, n + 1);
    free(text);
    return rc;
}

static int write_out_dir(const char *dir, json_t *creds, json_t *token, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return cx_fail(err, errlen, CX_EIO, "--out %s: mkdir: %s", dir, strerror(errno));
    /* both names first: a half-written pair would leave one Secret of a
     * run beside the other of another */
    char path[4096];
    const char *names[] = {SECRETS_CRED_NAME, SECRETS_TOKEN_NAME};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s.json", dir, names[i]);
        if (access(path, F_OK) == 0)
            return cx_fail(err, errlen, CX_ECONFLICT,
                           "%s exists (never overwritten: delete it, or use another --out)", path);
    }
    int rc = write_new_file(dir, SECRETS_CRED_NAME, creds, err, errlen);
    if (rc == 0)
        rc = write_new_file(dir, SECRETS_TOKEN_NAME, token, err, errlen);
    return rc;
}

int secrets_main(int argc, char **argv)
{
    int64_t learners = 0;
    const char *out = NULL;
    const cx_flag flags[] = {
        {.name = "--learners", .kind = CX_FLAG_I64, .dst = &learners, .min = 1, .max = SECRETS_MAX_LEARNERS},
        {.name = "--out", .kind = CX_FLAG_STRING, .dst = &out},
        {0}};
    int npos = 0;
    int rc0 = cx_flags_parse("chaosloco secrets", argc, argv, flags, NULL, NULL, 0, &npos, usage);
    if (rc0 != CX_FLAGS_OK)
        return rc0;
    if (learners < 1) {
        fprintf(stderr, "chaosloco secrets: --learners is required (the syncer's --learners)\n");
        return CX_EXIT_USAGE;
    }
    char err[CX_ERRLEN];
    json_t *creds = credentials_secret(learners, err, sizeof err);
    json_t *token = creds ? token_secret(learners, err, sizeof err) : NULL;
    int rc = creds && token ? 0 : CX_ENOMEM;
    if (rc == 0 && out) {
        rc = write_out_dir(out, creds, token, err, sizeof err);
    } else if (rc == 0) {
        json_t *list =
            json_pack("{s:s, s:s, s:[O, O]}", "apiVersion", "v1", "kind", "List", "items", creds, token);
        char *text = list ? json_dumps(list, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        if (!text || puts(text) == EOF || fflush(stdout) != 0)
            rc = cx_fail(err, sizeof err, CX_EIO, "stdout: %s", text ? strerror(errno) : "out of memory");
        if (text) {
            memset(text, 0, strlen(text));
            free(text);
        }
        json_decref(list);
    }
    /* jansson's own copies of the encoded values are freed unwiped: the
     * process ends right here */
    json_decref(creds);
    json_decref(token);
    if (rc != 0) {
        fprintf(stderr, "chaosloco secrets: %s\n", err);
        return CX_EXIT_FAILURE;
    }
    return CX_EXIT_OK;
}
