/* topo_template.c - a foreign trainer's command templates: the {name}
 * placeholders of each role, checking a template (topo_check_template),
 * expanding it (topo_expand, topo_expand_argv) and resolving its working
 * directory. Part of the topology (topology.h, topo_internal.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/buf.h"
#include "common/err.h"
#include "harness/topo_internal.h"

/* ---- topology: a foreign trainer's placeholders ---- */

/* One list per role; topo_expand's values follow the same order (the
 * PH_C_* and PH_L_* indexes of topo_internal.h). */
static const char *const coordinator_ph[] = {
    "listen",  "state_dir", "credentials_dir", "admin_credential_file", "config", "learners", "seed",
    "run_dir", NULL};
static const char *const learner_ph[] = {"proxy",           "proxy.syncer", "id",   "learners", "state_dir",
                                         "credential_file", "steps",        "seed", "run_dir",  NULL};

const char *const *topo_placeholders(topo_role role)
{
    return role == TOPO_COORDINATOR ? coordinator_ph : learner_ph;
}

/* Length of a placeholder's name at s (just after a '{'): 1+ of [a-z0-9_.]
 * followed by '}'; 0 when s does not start one (the '{' is literal). */
static size_t ph_name_len(const char *s)
{
    size_t n = 0;
    while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '.')
        n++;
    return n > 0 && s[n] == '}' ? n : 0;
}

static int ph_index(topo_role role, const char *name, size_t n)
{
    const char *const *list = topo_placeholders(role);
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == n && strncmp(list[i], name, n) == 0)
            return i;
    return -1;
}

int topo_check_template(topo_role role, const char *arg, unsigned *used, char *err, size_t errlen)
{
    for (const char *s = strchr(arg, '{'); s; s = strchr(s + 1, '{')) {
        size_t n = ph_name_len(s + 1);
        if (!n)
            continue;
        int i = ph_index(role, s + 1, n);
        if (i < 0) {
            char known[256] = "";
            const char *const *list = topo_placeholders(role);
            for (int k = 0; list[k]; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s{%s}", k ? ", " : "",
                         list[k]);
            return cx_fail(err, errlen, CX_EINVAL, "unknown placeholder {%.*s} (known: %s)", (int)n, s + 1,
                           known);
        }
        if (used)
            *used |= 1u << i;
    }
    return 0;
}

char *topo_expand(topo_role role, const char *arg, const char *const *values)
{
    cx_buf b;
    cx_buf_init(&b, 1 << 16);
    const char *s = arg;
    int bad = 0;
    for (const char *open = strchr(s, '{'); open; open = strchr(open + 1, '{')) {
        size_t n = ph_name_len(open + 1);
        int i = n ? ph_index(role, open + 1, n) : -1;
        if (i < 0 || !values[i])
            continue;
        bad |= cx_buf_append(&b, s, (size_t)(open - s)) < 0;
        bad |= cx_buf_append(&b, values[i], strlen(values[i])) < 0;
        s = open + n + 2;
        open = s - 1;
    }
    bad |= cx_buf_append(&b, s, strlen(s) + 1) < 0; /* with the NUL */
    char *out = bad ? NULL : cx_buf_take(&b, NULL);
    cx_buf_cleanup(&b);
    return out;
}

void topo_free_argv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* argv = every template entry expanded (malloc'd, NULL-terminated), or NULL. */
char **topo_expand_argv(topo_role role, char *const *tmpl, const char *const *values)
{
    size_t n = 0;
    while (tmpl[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = topo_expand(role, tmpl[i], values))) {
            topo_free_argv(out);
            return NULL;
        }
    return out;
}

/* The trainer's working directory: cwd (as written) against the directory of
 * the experiment file, made absolute; it must exist. */
int topo_trainer_cwd(const topo_launch_cfg *cfg, char *out, size_t len, char *err, size_t errlen)
{
    char base[TOPO_PATH] = ".", want[2 * TOPO_PATH + 2];
    if (cfg->experiment_path) {
        snprintf(base, sizeof base, "%s", cfg->experiment_path);
        char *slash = strrchr(base, '/');
        if (slash)
            *(slash == base ? slash + 1 : slash) = '\0';
        else
            snprintf(base, sizeof base, ".");
    }
    const char *cwd = cfg->trainer->cwd;
    if (cwd && cwd[0] == '/')
        snprintf(want, sizeof want, "%s", cwd);
    else
        snprintf(want, sizeof want, "%s/%s", base, cwd ? cwd : ".");
    char real[PATH_MAX];
    if (!realpath(want, real))
        return cx_fail(err, errlen, CX_EINVAL, "topology.trainer.cwd: %s: %s", want, strerror(errno));
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        return cx_fail(err, errlen, CX_EINVAL, "topology.trainer.cwd: %s is not a directory", real);
    if (strlen(real) >= len)
        return cx_fail(err, errlen, CX_EINVAL, "topology.trainer.cwd: path too long");
    snprintf(out, len, "%s", real);
    return 0;
}
