/* runner_fixture.h - a runner built by hand from an experiment's text for
 * the unit tests of its components (tests/unit/test_{timeline,collect,
 * output}.c): the experiment loaded and checked, its learner count and its
 * schedule, as setup.c leaves them before the components start; no
 * process, no agent, no syncer. Each test then starts the components it
 * drives (timeline_init, collect_init, ...). Header-only (static inline)
 * so that only the tests that include it compile it. */
#ifndef CX_TESTS_RUNNER_FIXTURE_H
#define CX_TESTS_RUNNER_FIXTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "harness/run/runner.h"

/* *r zeroed, then the experiment of text (which must load: its
 * diagnostics are printed otherwise), its learners and its schedule. */
static inline void rfx_load(runner *r, const char *text)
{
    memset(r, 0, sizeof *r);
    jv_diag *d = jv_diag_new();
    char err[CX_ERRLEN];
    int rc = exp_load_string(text, 0, &r->setup.e, d, err, sizeof err);
    for (size_t i = 0; rc && i < jv_diag_count(d); i++)
        fprintf(stderr, "diag: %s\n", jv_diag_get(d, i));
    jv_diag_free(d);
    cr_assert_eq(rc, 0, "%s", err);
    r->setup.m = r->setup.e->learners;
}

/* The schedule of r's experiment (after rfx_load and any setup field the
 * test sets, such as the seed). */
static inline void rfx_schedule(runner *r)
{
    char err[CX_ERRLEN];
    cr_assert_eq(sched_build(r->setup.e, r->setup.e->seed, &r->setup.sched, err, sizeof err), 0, "%s", err);
}

/* Free what rfx_load and rfx_schedule made; *r zeroed. */
static inline void rfx_free(runner *r)
{
    sched_free(r->setup.sched);
    exp_free(r->setup.e);
    memset(r, 0, sizeof *r);
}

#endif
