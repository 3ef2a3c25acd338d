/* agent_fixture.h - for unit tests of the agent's API and its clients: an
 * agent core without a unit (a fault that needs one is refused), serving
 * its API in-process on an ephemeral port of 127.0.0.1, its state in a
 * fresh temp dir (left behind: it is small and helps debugging a failure). */
#ifndef TESTS_UNIT_AGENT_FIXTURE_H
#define TESTS_UNIT_AGENT_FIXTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/err.h"

#define AGENT_FIXTURE_TOKEN "test-token-0123456789"

/* Start the agent `id` with its state in dir (a mkdtemp template of
 * "/tmp/cx-test-<tag>-XXXXXX", written here) and its base URL in base. */
static agent *agent_fixture_new(const char *tag, const char *id, char *dir, size_t dirlen, char *base,
                                size_t baselen)
{
    snprintf(dir, dirlen, "/tmp/cx-test-%s-XXXXXX", tag);
    cr_assert_not_null(mkdtemp(dir));
    agent_opts o;
    memset(&o, 0, sizeof o);
    o.listen = "127.0.0.1:0";
    o.id = id;
    o.state_dir = dir;
    o.token = AGENT_FIXTURE_TOKEN;
    o.max_duration_ms = 60000;
    o.no_cgroup = 1;
    o.argv = NULL;
    char err[CX_ERRLEN] = "";
    agent *a = agent_new(&o, err, sizeof err);
    cr_assert_not_null(a, "%s", err);
    snprintf(base, baselen, "http://%s", a->listen_addr);
    return a;
}

#endif
