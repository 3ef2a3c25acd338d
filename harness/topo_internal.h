/* topo_internal.h - what topology.c (launch, attach, stop) uses of
 * topo_template.c (a foreign trainer's command templates). Private to
 * harness/: the interface is topology.h.
 */
#ifndef HARNESS_TOPO_INTERNAL_H
#define HARNESS_TOPO_INTERNAL_H

#include <stddef.h>

#include "harness/topology.h"

#define TOPO_PATH 1024 /* bytes of a path the topology keeps */

/* Indexes of topo_placeholders(TOPO_COORDINATOR) and (TOPO_LEARNER): the
 * order of topo_expand's values. */
enum {
    PH_C_LISTEN,
    PH_C_STATE_DIR,
    PH_C_CREDS,
    PH_C_ADMIN,
    PH_C_CONFIG,
    PH_C_LEARNERS,
    PH_C_SEED,
    PH_C_RUN,
    PH_C_N
};
enum {
    PH_L_PROXY,
    PH_L_PROXY_SYNCER,
    PH_L_ID,
    PH_L_LEARNERS,
    PH_L_STATE_DIR,
    PH_L_CRED,
    PH_L_STEPS,
    PH_L_SEED,
    PH_L_RUN,
    PH_L_N
};

/* Free a NULL-terminated argv (NULL is a no-op). */
void topo_free_argv(char **v);
/* argv = every template entry expanded (malloc'd, NULL-terminated), or NULL. */
char **topo_expand_argv(topo_role role, char *const *tmpl, const char *const *values);
/* The trainer's working directory: cfg->trainer->cwd against the directory
 * of the experiment file, made absolute into out; it must exist. 0 or a
 * negative cx_err with err filled. */
int topo_trainer_cwd(const topo_launch_cfg *cfg, char *out, size_t len, char *err, size_t errlen);

#endif
