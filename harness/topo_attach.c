/* topo_attach.c - attach mode: a topology of a syncer (or a foreign
 * coordinator) and M agents that someone else started (Slurm, Kubernetes,
 * by hand), reached at their URLs with the tokens and the credential read
 * from their files. Nothing is launched, so topo_stop stops nothing; the
 * rest of the topology's interface (topology.h) works the same. */
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "common/secret.h"
#include "harness/topo_internal.h"
#include "harness/topology.h"
#include "trainer/credential.h"

/* The first line of a token file (a secret file: common/secret.h) into
 * token[128]. */
static int read_token(const char *path, const char *what, char *token, char *err, size_t errlen)
{
    int n = cx_secret_read_line(path, what, token, 128, err, errlen);
    if (n == 0)
        n = cx_fail(err, errlen, CX_EINVAL, "%s %s: the token's first line must have 1..127 characters", what,
                    path);
    return n < 0 ? n : 0;
}

int topo_attach(const topo_attach_cfg *cfg, topo **out, char *err, size_t errlen)
{
    const char *syncer_url = cfg->syncer_url, *token_file = cfg->token_file;
    const char *syncer_cred_file = cfg->syncer_cred_file;
    char *const *agents = cfg->agents;
    int n = cfg->n;
    *out = NULL;
    if (!syncer_url || n < 1 || !agents)
        return cx_fail(err, errlen, CX_EINVAL, "attach: a syncer URL and at least one agent URL are needed");
    topo *t = calloc(1, sizeof *t);
    if (!t)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    t->agents = calloc((size_t)n, sizeof *t->agents);
    if (!t->agents) {
        free(t);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    t->m = n;
    t->sname = "syncer";
    snprintf(t->syncer.url, sizeof t->syncer.url, "%s", syncer_url);
    for (int i = 0; i < n; i++) {
        if (!agents[i]) {
            topo_free(t);
            return cx_fail(err, errlen, CX_EINVAL, "attach: agent %d has no URL", i);
        }
        snprintf(t->agents[i].url, sizeof t->agents[i].url, "%s", agents[i]);
    }
    if (cfg->ca_file)
        snprintf(t->ca_file, sizeof t->ca_file, "%s", cfg->ca_file);
    if (token_file) {
        int rc = read_token(token_file, "the agents' token file", t->token, err, errlen);
        if (rc < 0) {
            topo_free(t);
            return rc;
        }
        snprintf(t->token_file, sizeof t->token_file, "%s", token_file);
    }
    for (int i = 0; i < n; i++) {
        topo_proc *a = &t->agents[i];
        const char *own = cfg->agent_token_files ? cfg->agent_token_files[i] : NULL;
        if (!own) {
            snprintf(a->token, sizeof a->token, "%s", t->token);
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "agent %d's token file", i);
        int rc = read_token(own, what, a->token, err, errlen);
        if (rc < 0) {
            topo_free(t);
            return rc;
        }
        snprintf(a->token_file, sizeof a->token_file, "%s", own);
    }
    if (syncer_cred_file) {
        char why[CX_ERRLEN];
        int rc = cred_read_file(syncer_cred_file, t->syncer_cred, why, sizeof why);
        if (rc < 0) {
            topo_free(t);
            return cx_fail(err, errlen, rc, "attach: syncer credential: %s", why);
        }
        snprintf(t->syncer_cred_file, sizeof t->syncer_cred_file, "%s", syncer_cred_file);
    }
    *out = t;
    return 0;
}
