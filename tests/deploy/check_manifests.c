/* check_manifests.c - the ctest case deploy/manifests: the deployment files
 * under deploy/ start what they say they start.
 *
 *   check_manifests CHAOSLOCO_BIN SOURCE_DIR
 *
 * What it checks:
 *  - every deploy/k8s/NAME.json parses and has apiVersion, kind, metadata.name;
 *  - every container whose command starts with `chaosloco` (command + args)
 *    passes `chaosloco SUB --check ARGS` (exit 0, "chaosloco SUB: command line
 *    ok"); an agent's unit command (after `--`) is checked as its own command
 *    line, with {proxy.NAME} replaced by a sample address; every ConfigMap
 *    entry named *.json is an experiment that `chaosloco run --check` accepts;
 *  - every `chaosloco ...` / `srun ... chaosloco ...` line of
 *    deploy/slurm/chaosloco.sbatch passes the same check;
 *  - the sbatch's syncer, agent and learner lines carry every flag the
 *    harness passes when it launches them itself (harness/topology.c), so the
 *    cluster launch has the shape the integration tests run;
 *  - `--check` is not a rubber stamp: each checked line with an extra
 *    unknown flag must exit 64;
 *  - every pod template is one an operator's admission policy accepts
 *    (check_pod): non-root with the fixed UID 10001, seccomp
 *    RuntimeDefault, and in every container (init ones too) no privilege
 *    escalation, a read-only root file system, every capability dropped,
 *    requests and limits for cpu and memory, imagePullPolicy IfNotPresent;
 *    no container mounts a Secret volume except an init container (the
 *    secrets reach the others as an owner-only copy in a memory emptyDir);
 *  - per workload: the learner StatefulSet spreads its pods across nodes,
 *    has a readiness probe on the agent's GET /v1/health and deletes its
 *    claims with it; the harness Job retries (backoffLimit > 0) and fails
 *    at once on a verdict (podFailurePolicy on exit 1).
 *
 * Variables ($(VAR) in Kubernetes, ${VAR}/$VAR in the sbatch) are replaced by
 * the sample values of `samples` below; an unknown variable fails the test,
 * so a new one gets a sample here. What it does not check: that a cluster
 * accepts the manifests (no cluster here; see deploy/README.md).
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/exitcode.h"

#define MAX_ARGS 128
#define ARG_LEN 1024
#define CHECK_TIMEOUT_S 60

static const char *bin, *src;
static int failures, checked, workloads;
static char tmpdir[] = "/tmp/cx-deploy-XXXXXX";

static void fail(const char *where, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "FAIL %s: ", where);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    failures++;
}

/* ---- sample values for the variables of the manifests ---- */

static const char *const samples[][2] = {
    {"LEARNER_ID", "1"},
    {"i", "1"},
    {"RUN_DIR", "/nonexistent/chaosloco-run"},
    {"CREDS", "/nonexistent/chaosloco-run/syncer/credentials"},
    {"SYNCER_HOST", "node0"},
    {"SYNCER_PORT", "7070"},
    {"AGENT_PORT", "7080"},
    {"PORT", "7081"},
    {"NLEARNERS", "4"},
    {"TIME_LIMIT", "3000"},
    {"ATTACH_WAIT", "300"},
};

static const char *sample(const char *name, size_t n)
{
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++)
        if (strlen(samples[k][0]) == n && strncmp(samples[k][0], name, n) == 0)
            return samples[k][1];
    return NULL;
}

/* Replace $(VAR), ${VAR}, $VAR and {proxy.NAME} in s; -1 on an unknown
 * variable (named in *bad). Quotes are dropped. */
static int expand(const char *s, char *out, size_t outlen, char *bad, size_t badlen)
{
    size_t o = 0;
    for (const char *p = s; *p;) {
        const char *name = NULL, *val;
        size_t n = 0, skip = 0;
        if (p[0] == '$' && (p[1] == '(' || p[1] == '{')) {
            const char *end = strchr(p + 2, p[1] == '(' ? ')' : '}');
            if (!end)
                return snprintf(bad, badlen, "%s", p), -1;
            name = p + 2, n = (size_t)(end - p - 2), skip = n + 3;
        } else if (p[0] == '$') {
            n = 1;
            while (p[n] == '_' || (p[n] >= 'A' && p[n] <= 'Z') || (p[n] >= 'a' && p[n] <= 'z') ||
                   (p[n] >= '0' && p[n] <= '9'))
                n++;
            name = p + 1, n--, skip = n + 1;
        } else if (strncmp(p, "{proxy.", 7) == 0 && strchr(p, '}')) {
            val = "127.0.0.1:7071";
            skip = (size_t)(strchr(p, '}') - p) + 1;
            goto put;
        } else if (*p == '"' || *p == '\'') {
            p++;
            continue;
        } else {
            if (o + 1 >= outlen)
                return snprintf(bad, badlen, "(too long)"), -1;
            out[o++] = *p++;
            continue;
        }
        if (!(val = sample(name, n)))
            return snprintf(bad, badlen, "%.*s", (int)n, name), -1;
    put:
        if (strlen(val) + 1 > outlen - o)
            return snprintf(bad, badlen, "(too long)"), -1;
        o += (size_t)snprintf(out + o, outlen - o, "%s", val);
        p += skip;
    }
    out[o] = '\0';
    return 0;
}

/* ---- running `chaosloco SUB --check ARGS` ---- */

/* Exit code of bin with argv (argv[0] ignored), stdout into out; -1 when it
 * did not exit by itself within CHECK_TIMEOUT_S (then it is killed); quiet
 * sends its stderr to a scratch file (the expected usage errors). */
static int run_bin(char *const *argv, int quiet, char *out, size_t outlen)
{
    char path[64], epath[64];
    snprintf(path, sizeof path, "%s/stdout", tmpdir);
    snprintf(epath, sizeof epath, "%s/stderr", tmpdir);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        FILE *f = freopen(path, "w", stdout);
        if (!f || chdir(tmpdir) != 0 || (quiet && !freopen(epath, "w", stderr)))
            _exit(CX_EXIT_EXEC_FAILED);
        char *av[MAX_ARGS + 3];
        int k = 0;
        av[k++] = (char *)bin;
        for (int j = 1; argv[j]; j++)
            av[k++] = argv[j];
        av[k] = NULL;
        execv(bin, av);
        _exit(CX_EXIT_EXEC_FAILED);
    }
    int st = 0;
    time_t t0 = time(NULL);
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -1;
        if (time(NULL) - t0 > CHECK_TIMEOUT_S) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(out, 1, outlen - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Check one chaosloco command line: words[0] is "chaosloco", words[1] the
 * subcommand. An agent's unit command (after "--") is checked on its own. */
static void check_command(const char *where, char **words, int n)
{
    char exp[MAX_ARGS][ARG_LEN], bad[ARG_LEN], out[4096];
    char *argv[MAX_ARGS + 4];
    if (n < 2 || n > MAX_ARGS) {
        fail(where, "a chaosloco command line of %s words%s", n < 2 ? "too few" : "too many", "");
        return;
    }
    int unit = -1;
    if (strcmp(words[1], "agent") == 0)
        for (int k = 2; k < n; k++)
            if (strcmp(words[k], "--") == 0) {
                unit = k;
                break;
            }
    if (unit > 0) {
        if (unit + 1 >= n || strcmp(words[unit + 1], "chaosloco") != 0)
            fail(where, "the agent's unit command is not a chaosloco command%s%s", "", "");
        else
            check_command(where, words + unit + 1, n - unit - 1);
    }
    int k = 0;
    argv[k++] = words[0];
    argv[k++] = words[1];
    argv[k++] = "--check";
    for (int j = 2; j < n; j++) {
        /* the agent's unit command is checked above; a placeholder keeps
         * the agent's "needs a unit command" rule in force */
        if (unit > 0 && j > unit) {
            argv[k++] = "true";
            break;
        }
        if (expand(words[j], exp[j], sizeof exp[j], bad, sizeof bad) < 0) {
            fail(where, "unknown variable '%s' (add a sample value to %s)", bad,
                 "tests/deploy/check_manifests.c");
            return;
        }
        argv[k++] = exp[j];
    }
    argv[k] = NULL;
    char want[128];
    snprintf(want, sizeof want, "chaosloco %s: command line ok\n", words[1]);
    int rc = run_bin(argv, 0, out, sizeof out);
    checked++;
    if (rc != 0 || strcmp(out, want) != 0) {
        char rcs[16];
        snprintf(rcs, sizeof rcs, "%d", rc);
        fail(where, "`chaosloco %s --check ...` exited %s (its stderr is above)", words[1], rcs);
        return;
    }
    /* the negative control: an unknown flag right after --check must be a
     * usage error */
    char *neg[MAX_ARGS + 6];
    memcpy(neg, argv, 3 * sizeof neg[0]);
    neg[3] = "--no-such-flag-for-the-test";
    neg[4] = "1";
    memcpy(neg + 5, argv + 3, (size_t)(k - 2) * sizeof neg[0]);
    rc = run_bin(neg, 1, out, sizeof out);
    if (rc != 64)
        fail(where, "`chaosloco %s --check` accepted an unknown flag (exit %s)", words[1],
             rc == 0 ? "0" : "not 64");
}

/* ---- Kubernetes manifests ---- */

static void check_containers(const char *where, json_t *containers)
{
    size_t k;
    json_t *c;
    json_array_foreach(containers, k, c)
    {
        char *words[MAX_ARGS];
        int n = 0;
        json_t *part, *w;
        size_t j;
        const char *keys[] = {"command", "args"};
        for (int p = 0; p < 2; p++) {
            part = json_object_get(c, keys[p]);
            json_array_foreach(part, j, w)
            {
                if (n < MAX_ARGS && json_is_string(w))
                    words[n++] = (char *)json_string_value(w);
            }
        }
        if (n > 0 && strcmp(words[0], "chaosloco") == 0) {
            char at[600];
            snprintf(at, sizeof at, "%s container %s", where, json_string_value(json_object_get(c, "name")));
            check_command(at, words, n);
        }
    }
}

/* every "containers"/"initContainers" array anywhere in the object */
static void walk(const char *where, json_t *v)
{
    if (json_is_object(v)) {
        const char *key;
        json_t *x;
        json_object_foreach(v, key, x)
        {
            if ((strcmp(key, "containers") == 0 || strcmp(key, "initContainers") == 0) && json_is_array(x))
                check_containers(where, x);
            else
                walk(where, x);
        }
    } else if (json_is_array(v)) {
        size_t k;
        json_t *x;
        json_array_foreach(v, k, x) walk(where, x);
    }
}

static void check_experiments(const char *where, json_t *cm)
{
    const char *key;
    json_t *x;
    json_object_foreach(json_object_get(cm, "data"), key, x)
    {
        size_t kl = strlen(key);
        if (kl < 5 || strcmp(key + kl - 5, ".json") != 0 || !json_is_string(x))
            continue;
        char path[128];
        snprintf(path, sizeof path, "%s/experiment.json", tmpdir);
        FILE *f = fopen(path, "w");
        if (!f || fputs(json_string_value(x), f) < 0) {
            fail(where, "cannot write %s%s", path, "");
            if (f)
                fclose(f);
            continue;
        }
        fclose(f);
        char *words[] = {"chaosloco", "run", path};
        char at[600];
        snprintf(at, sizeof at, "%s data.%s", where, key);
        check_command(at, words, 3);
        unlink(path);
    }
}

/* ---- what an operator's admission policy asks of a pod ---- */

#define POD_UID 10001 /* the fixed non-root UID every pod runs as */

/* 1 when the JSON at path (dot-separated keys) under o is true */
static int is_true(json_t *o, const char *k1, const char *k2)
{
    json_t *v = json_object_get(o, k1);
    if (k2)
        v = json_object_get(v, k2);
    return json_is_true(v);
}

/* container c's setting k of its securityContext, else the pod's */
static json_t *effective(json_t *pod, json_t *c, const char *k)
{
    json_t *v = json_object_get(json_object_get(c, "securityContext"), k);
    return v ? v : json_object_get(json_object_get(pod, "securityContext"), k);
}

/* names of the pod's Secret volumes, the number in *n */
static int secret_volumes(json_t *pod, const char **names, int max)
{
    int n = 0;
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(pod, "volumes"), k, v)
    {
        if (json_object_get(v, "secret") && n < max)
            names[n++] = json_string_value(json_object_get(v, "name"));
    }
    return n;
}

static void check_container(const char *where, json_t *pod, json_t *c, int init, const char **secrets, int ns)
{
    char at[700];
    snprintf(at, sizeof at, "%s %s %s", where, init ? "initContainer" : "container",
             json_string_value(json_object_get(c, "name")));
    json_t *sc = json_object_get(c, "securityContext");
    if (!json_is_true(effective(pod, c, "runAsNonRoot")))
        fail(at, "runAsNonRoot must be true (pod or container)%s%s", "", "");
    json_t *uid = effective(pod, c, "runAsUser");
    if (!json_is_integer(uid) || json_integer_value(uid) != POD_UID)
        fail(at, "runAsUser must be %s (pod or container)%s", "10001", "");
    json_t *seccomp = effective(pod, c, "seccompProfile");
    const char *st = json_string_value(json_object_get(seccomp, "type"));
    if (!st || strcmp(st, "RuntimeDefault") != 0)
        fail(at, "seccompProfile.type must be RuntimeDefault (pod or container)%s%s", "", "");
    if (!json_is_false(json_object_get(sc, "allowPrivilegeEscalation")))
        fail(at, "securityContext.allowPrivilegeEscalation must be false%s%s", "", "");
    if (!is_true(sc, "readOnlyRootFilesystem", NULL))
        fail(at, "securityContext.readOnlyRootFilesystem must be true%s%s", "", "");
    int drop_all = 0;
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(json_object_get(sc, "capabilities"), "drop"), k, v)
    {
        drop_all |= json_is_string(v) && strcmp(json_string_value(v), "ALL") == 0;
    }
    if (!drop_all || json_object_get(json_object_get(sc, "capabilities"), "add"))
        fail(at, "securityContext.capabilities must drop ALL and add none%s%s", "", "");
    json_t *res = json_object_get(c, "resources");
    const char *kinds[] = {"requests", "limits"}, *what[] = {"cpu", "memory"};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (!json_is_string(json_object_get(json_object_get(res, kinds[i]), what[j])))
                fail(at, "resources.%s.%s is missing", kinds[i], what[j]);
    const char *pull = json_string_value(json_object_get(c, "imagePullPolicy"));
    if (!pull || strcmp(pull, "IfNotPresent") != 0)
        fail(at, "imagePullPolicy must be IfNotPresent%s%s", "", "");
    if (init)
        return;
    json_array_foreach(json_object_get(c, "volumeMounts"), k, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        for (int i = 0; i < ns && name; i++)
            if (secrets[i] && strcmp(name, secrets[i]) == 0)
                fail(at,
                     "mounts Secret volume %s: only an init container may (it copies an owner-only file%s)",
                     name, " into a memory emptyDir");
    }
}

/* the pod template of a workload: every container under the policy */
static void check_pod(const char *where, json_t *pod)
{
    const char *secrets[16];
    int ns = secret_volumes(pod, secrets, 16);
    const char *lists[] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(pod, lists[l]), k, c)
            check_container(where, pod, c, l == 0, secrets, ns);
    }
    if (json_array_size(json_object_get(pod, "containers")) < 1)
        fail(where, "a pod template without containers%s%s", "", "");
}

static void check_learners(const char *where, json_t *spec)
{
    json_t *pod = json_object_get(json_object_get(spec, "template"), "spec");
    json_t *pol = json_object_get(spec, "persistentVolumeClaimRetentionPolicy");
    const char *wd = json_string_value(json_object_get(pol, "whenDeleted"));
    if (!wd || strcmp(wd, "Delete") != 0)
        fail(where, "persistentVolumeClaimRetentionPolicy.whenDeleted must be Delete%s%s", "", "");
    /* spread across nodes, selecting this StatefulSet's own pods */
    const char *app = json_string_value(json_object_get(
        json_object_get(json_object_get(json_object_get(spec, "template"), "metadata"), "labels"),
        "app.kubernetes.io/name"));
    int spread = 0;
    size_t k;
    json_t *t;
    json_array_foreach(json_object_get(pod, "topologySpreadConstraints"), k, t)
    {
        const char *key = json_string_value(json_object_get(t, "topologyKey"));
        const char *sel = json_string_value(json_object_get(
            json_object_get(json_object_get(t, "labelSelector"), "matchLabels"), "app.kubernetes.io/name"));
        spread |= key && strcmp(key, "kubernetes.io/hostname") == 0 && sel && app && strcmp(sel, app) == 0 &&
                  json_integer_value(json_object_get(t, "maxSkew")) == 1;
    }
    if (!spread)
        fail(where,
             "learners must spread across nodes: a topologySpreadConstraint on %s, maxSkew 1, "
             "selecting the pods' app.kubernetes.io/name %s",
             "kubernetes.io/hostname", app ? app : "?");
    /* ready when the agent answers its status */
    json_t *c;
    json_array_foreach(json_object_get(pod, "containers"), k, c)
    {
        json_t *get = json_object_get(json_object_get(c, "readinessProbe"), "httpGet");
        const char *path = json_string_value(json_object_get(get, "path"));
        json_t *port = json_object_get(get, "port");
        int port_ok = json_integer_value(port) == 7080;
        size_t j;
        json_t *p;
        json_array_foreach(json_object_get(c, "ports"), j, p)
        {
            port_ok |= json_is_string(port) &&
                       strcmp(json_string_value(port), json_string_value(json_object_get(p, "name"))) == 0 &&
                       json_integer_value(json_object_get(p, "containerPort")) == 7080;
        }
        if (!path || strcmp(path, "/v1/health") != 0 || !port_ok)
            fail(where, "container %s needs a readinessProbe httpGet of the agent's %s on 7080",
                 json_string_value(json_object_get(c, "name")), "/v1/health");
    }
}

static void check_job(const char *where, json_t *spec)
{
    if (json_integer_value(json_object_get(spec, "backoffLimit")) < 1)
        fail(where, "backoffLimit must be > 0 (a lost pod is retried)%s%s", "", "");
    /* a verdict (exit 1) is a result, not something to retry */
    int fails_on_1 = 0;
    size_t k, j;
    json_t *r, *v;
    json_array_foreach(json_object_get(json_object_get(spec, "podFailurePolicy"), "rules"), k, r)
    {
        const char *action = json_string_value(json_object_get(r, "action"));
        json_t *codes = json_object_get(r, "onExitCodes");
        const char *op = json_string_value(json_object_get(codes, "operator"));
        if (!action || strcmp(action, "FailJob") != 0 || !op || strcmp(op, "In") != 0)
            continue;
        json_array_foreach(json_object_get(codes, "values"), j, v) fails_on_1 |= json_integer_value(v) == 1;
    }
    if (!fails_on_1)
        fail(where, "podFailurePolicy must FailJob on exit 1 (a deviated verdict is not retried)%s%s", "",
             "");
}

/* the workload checks by kind; the number of pod templates checked */
static int check_workload(const char *where, const char *kind, json_t *m)
{
    json_t *spec = json_object_get(m, "spec");
    json_t *pod = json_object_get(json_object_get(spec, "template"), "spec");
    if (strcmp(kind, "Deployment") != 0 && strcmp(kind, "StatefulSet") != 0 && strcmp(kind, "Job") != 0)
        return 0;
    check_pod(where, pod);
    if (strcmp(kind, "StatefulSet") == 0)
        check_learners(where, spec);
    if (strcmp(kind, "Job") == 0)
        check_job(where, spec);
    return 1;
}

static int check_k8s(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/deploy/k8s", src);
    DIR *d = opendir(dir);
    if (!d) {
        fail(dir, "cannot open: %s%s", strerror(errno), "");
        return 0;
    }
    int files = 0;
    struct dirent *e;
    workloads = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        json_error_t je;
        json_t *m = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        files++;
        if (!m) {
            char line[64];
            snprintf(line, sizeof line, "line %d", je.line);
            fail(path, "not JSON (%s: %s)", line, je.text);
            continue;
        }
        const char *api = json_string_value(json_object_get(m, "apiVersion"));
        const char *kind = json_string_value(json_object_get(m, "kind"));
        const char *name = json_string_value(json_object_get(json_object_get(m, "metadata"), "name"));
        if (!api || !api[0] || !kind || !kind[0] || !name || !name[0])
            fail(path, "needs string apiVersion, kind and metadata.name%s%s", "", "");
        walk(path, m);
        if (kind)
            workloads += check_workload(path, kind, m);
        if (kind && strcmp(kind, "ConfigMap") == 0)
            check_experiments(path, m);
        json_decref(m);
    }
    closedir(d);
    return files;
}

/* ---- the Slurm script ---- */

typedef struct cmdline {
    char *words[MAX_ARGS];
    int n;
} cmdline;

/* the logical lines (backslash continuations joined) that run chaosloco */
static int sbatch_commands(const char *path, char *buf, size_t buflen, cmdline *cmds, int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, buflen - 1, f);
    buf[n] = '\0';
    fclose(f);
    for (char *p = buf; (p = strstr(p, "\\\n"));)
        p[0] = p[1] = ' ';
    int nc = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *words[MAX_ARGS];
        int nw = 0;
        for (char *save, *w = strtok_r(line, " \t", &save); w && nw < MAX_ARGS;
             w = strtok_r(NULL, " \t", &save))
            words[nw++] = w;
        int start = -1;
        if (nw > 0 && strcmp(words[0], "chaosloco") == 0)
            start = 0;
        else if (nw > 0 && strcmp(words[0], "srun") == 0)
            for (int k = 1; k < nw && start < 0; k++)
                if (strcmp(words[k], "chaosloco") == 0)
                    start = k;
        if (start < 0 || nc >= max)
            continue;
        cmdline *c = &cmds[nc++];
        c->n = 0;
        for (int k = start; k < nw; k++) {
            if (strcmp(words[k], "&") == 0 || strcmp(words[k], "||") == 0 || strcmp(words[k], "&&") == 0 ||
                words[k][0] == '#')
                break;
            c->words[c->n++] = words[k];
        }
    }
    return nc;
}

/* The "--flag" literals of the argv topology.c builds for `what` (syncer,
 * agent, learner): from the literal "WHAT", to "--" (agent) or NULL}. */
static int topology_flags(const char *text, const char *what, char flags[][64], int max)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\",", what);
    const char *p = strstr(text, key), *end = p ? strstr(p, "NULL}") : NULL;
    /* the syncer's argv is the "syncer" literal whose list holds "--listen"
     * (not a JSON key or a log line that names the syncer) */
    while (strcmp(what, "syncer") == 0 && p && end) {
        const char *l = strstr(p, "\"--listen\"");
        if (l && l < end)
            break;
        p = strstr(p + 1, key);
        end = p ? strstr(p, "NULL}") : NULL;
    }
    if (!p || !end)
        return -1;
    int n = 0;
    for (const char *q = strchr(p + strlen(key), '"'); q && q < end; q = strchr(q + 1, '"')) {
        const char *close = strchr(q + 1, '"');
        if (!close)
            break;
        size_t l = (size_t)(close - q - 1);
        if (l == 2 && strncmp(q + 1, "--", 2) == 0) {
            if (strcmp(what, "agent") == 0)
                break;
        } else if (l > 2 && strncmp(q + 1, "--", 2) == 0 && l < 64 && n < max) {
            snprintf(flags[n++], 64, "%.*s", (int)l, q + 1);
        }
        q = close;
    }
    return n;
}

static int has_word(const cmdline *c, int from, int to, const char *w)
{
    for (int k = from; k < to && k < c->n; k++)
        if (strcmp(c->words[k], w) == 0)
            return 1;
    return 0;
}

static void check_shape(const char *where, const cmdline *cmds, int nc)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/harness/topology.c", src);
    FILE *f = fopen(path, "r");
    static char text[1 << 20];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    if (n == 0) {
        fail(path, "cannot read%s%s", "", "");
        return;
    }
    const char *roles[] = {"syncer", "agent", "learner"};
    for (int r = 0; r < 3; r++) {
        char flags[32][64];
        int nf = topology_flags(text, roles[r], flags, 32);
        if (nf <= 0) {
            fail(path, "no argv for '%s' found%s", roles[r], "");
            continue;
        }
        int seen = 0;
        for (int c = 0; c < nc; c++) {
            const cmdline *cl = &cmds[c];
            int from = -1, to = cl->n;
            if (r < 2 && cl->n > 1 && strcmp(cl->words[1], roles[r]) == 0)
                from = 2;
            for (int k = 0; r == 1 && from >= 0 && k < cl->n; k++)
                if (strcmp(cl->words[k], "--") == 0)
                    to = k;
            for (int k = 0; r == 2 && k + 2 < cl->n; k++)
                if (strcmp(cl->words[k], "--") == 0 && strcmp(cl->words[k + 2], "learner") == 0)
                    from = k + 3;
            if (from < 0)
                continue;
            seen++;
            for (int k = 0; k < nf; k++) {
                /* the sbatch syncer makes its own credentials (<state-dir>/credentials,
                 * docs/security.md); topology.c makes them for it and passes the dir */
                if (r == 0 && strcmp(flags[k], "--credentials-dir") == 0)
                    continue;
                if (!has_word(cl, from, to, flags[k]))
                    fail(where, "the %s line lacks %s, which harness/topology.c passes", roles[r], flags[k]);
            }
        }
        if (seen == 0)
            fail(where, "no %s command line%s", roles[r], "");
    }
}

static int check_sbatch(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/deploy/slurm/chaosloco.sbatch", src);
    static char buf[1 << 16];
    static cmdline cmds[32];
    int nc = sbatch_commands(path, buf, sizeof buf, cmds, 32);
    if (nc < 0) {
        fail(path, "cannot read: %s%s", strerror(errno), "");
        return 0;
    }
    int runs = 0;
    for (int c = 0; c < nc; c++) {
        /* an unquoted < or > is a redirection to bash, not part of the
         * word (--proxy NAME=LISTEN->UPSTREAM needs quotes) */
        for (int k = 0; k < cmds[c].n; k++) {
            char q = 0;
            for (const char *p = cmds[c].words[k]; *p; p++) {
                if ((*p == '"' || *p == '\'') && (!q || q == *p))
                    q = q ? 0 : *p;
                else if (!q && (*p == '<' || *p == '>'))
                    fail(path, "'%s': an unquoted %s is a shell redirection", cmds[c].words[k],
                         *p == '<' ? "<" : ">");
            }
        }
        check_command(path, cmds[c].words, cmds[c].n);
        runs += cmds[c].n > 1 && strcmp(cmds[c].words[1], "run") == 0;
    }
    if (runs != 1)
        fail(path, "expected one `chaosloco run` line%s%s", "", "");
    check_shape(path, cmds, nc);
    return nc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: check_manifests CHAOSLOCO_BIN SOURCE_DIR\n");
        return CX_EXIT_USAGE;
    }
    /* absolute: each check runs in the scratch directory */
    static char bin_abs[4096], src_abs[4096];
    if (!realpath(argv[1], bin_abs) || !realpath(argv[2], src_abs)) {
        fprintf(stderr, "check_manifests: %s or %s: %s\n", argv[1], argv[2], strerror(errno));
        return CX_EXIT_USAGE;
    }
    bin = bin_abs;
    src = src_abs;
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return CX_EXIT_FAILURE;
    }
    int files = check_k8s();
    int before = checked;
    int lines = check_sbatch();
    /* --check has no side effects: the checks ran in tmpdir, which holds
     * only what run_bin made */
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "stdout") &&
            strcmp(e->d_name, "stderr"))
            fail(tmpdir, "a --check left '%s' in its working directory%s", e->d_name, "");
    if (d)
        closedir(d);
    char stdout_path[64];
    snprintf(stdout_path, sizeof stdout_path, "%s/stdout", tmpdir);
    unlink(stdout_path);
    snprintf(stdout_path, sizeof stdout_path, "%s/stderr", tmpdir);
    unlink(stdout_path);
    rmdir(tmpdir);
    if (files < 1 || before < 4 || lines < 3 || workloads < 3) {
        fprintf(stderr,
                "FAIL: too little checked (%d manifests, %d pod templates, %d k8s command lines, %d sbatch "
                "lines)\n",
                files, workloads, before, lines);
        failures++;
    }
    fprintf(stderr, "%d manifests, %d command lines checked, %d failure(s)\n", files, checked, failures);
    return failures ? CX_EXIT_FAILURE : CX_EXIT_OK;
}
