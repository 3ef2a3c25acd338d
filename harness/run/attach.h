/* attach.h - attach mode's start: the bounded wait for the processes a
 * cluster engine starts in any order (the comment atop attach.c says what
 * it waits for and what it is not).
 *
 * Owner: struct attach_state (runner.h's r->att) is written here only;
 * attach_topology hands the setup its topology (the setup stores it).
 * Threads: the main thread only.
 */
#ifndef HARNESS_RUN_ATTACH_H
#define HARNESS_RUN_ATTACH_H

#include <stddef.h>
#include <stdint.h>

#include "harness/topology.h"

typedef struct runner runner;

typedef struct attach_state {
    int64_t attach_until_mono; /* ms: the wait for the attached processes ends */
} attach_state;

/* Wait (bounded by topology.attach.wait_s or --attach-wait) for the token
 * and credential files, then topo_attach into *out (the setup's topology);
 * starts the deadline. < 0 with err naming what is missing. */
int attach_topology(runner *r, topo **out, char *err, size_t errlen);
/* Wait, until the deadline, for the syncer and every agent to answer
 * GET /v1/status, logging whom it still waits for; < 0 with err naming
 * each that never answered, or at once on a 401/403. */
int attach_wait(runner *r, char *err, size_t errlen);

#endif
