/* test_netns.c - topology.network: strict validation of the experiment
 * keys (harness/exp_topology.c) and the pure parts of harness/netns.h
 * (regions, shaped links, owner names). Building namespaces needs root:
 * tests/integration/test_harness_netns.c does that. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/proc.h"
#include "harness/experiment.h"
#include "harness/netns.h"

static int has_prefix(const jv_diag *d, const char *want)
{
    for (size_t i = 0; i < jv_diag_kept(d); i++)
        if (strncmp(jv_diag_get(d, i), want, strlen(want)) == 0)
            return 1;
    return 0;
}

/* An experiment with M learners and the given topology.network (JSON
 * text) and optional extra topology keys. */
static int load_net(int m, const char *network, const char *extra, experiment **e, jv_diag **d)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"title\": \"t\", \"topology\": {\"learners\": %d, \"network\": %s%s},"
             " \"verify\": [{\"hypothesis\": \"versions_monotonic\"}]}",
             m, network, extra ? extra : "");
    *d = jv_diag_new();
    char err[CX_ERRLEN] = "";
    return exp_load_string(text, 0, e, *d, err, sizeof err);
}

static void expect_bad(int m, const char *network, const char *extra, const char *want)
{
    experiment *e = NULL;
    jv_diag *d = NULL;
    int rc = load_net(m, network, extra, &e, &d);
    if (rc != CX_EINVAL || !has_prefix(d, want))
        for (size_t i = 0; i < jv_diag_kept(d); i++)
            fprintf(stderr, "  diag: %s\n", jv_diag_get(d, i));
    cr_assert_eq(rc, CX_EINVAL, "%s is refused", network);
    cr_assert_null(e);
    cr_assert(has_prefix(d, want), "a message starting with: %s", want);
    jv_diag_free(d);
}

static experiment *expect_good(int m, const char *network)
{
    experiment *e = NULL;
    jv_diag *d = NULL;
    int rc = load_net(m, network, NULL, &e, &d);
    for (size_t i = 0; i < jv_diag_kept(d); i++)
        fprintf(stderr, "  diag: %s\n", jv_diag_get(d, i));
    cr_assert_eq(rc, 0, "%s is valid", network);
    jv_diag_free(d);
    return e;
}

Test(netns, loopback_is_the_default_and_takes_no_link_keys)
{
    experiment *e = NULL;
    jv_diag *d = jv_diag_new();
    char err[CX_ERRLEN];
    cr_assert_eq(
        exp_load_string("{\"title\": \"t\", \"topology\": {\"learners\": 2}, \"verify\": [{\"hypothesis\": "
                        "\"versions_monotonic\"}]}",
                        0, &e, d, err, sizeof err),
        0);
    cr_assert_eq(e->network.kind, NETNS_LOOPBACK, "no topology.network: loopback");
    exp_free(e);
    jv_diag_free(d);
    e = expect_good(2, "{\"kind\": \"loopback\"}");
    cr_assert_eq(e->network.kind, NETNS_LOOPBACK);
    exp_free(e);
    expect_bad(2, "{\"kind\": \"loopback\", \"rate_mbit\": 5}", NULL,
               "$.topology.network: unexpected key rate_mbit with kind loopback");
}

Test(netns, netns_keys_are_read)
{
    experiment *e =
        expect_good(4, "{\"kind\": \"netns\", \"regions\": 5, \"rate_mbit\": 0.894, \"delay_ms\": 20, "
                       "\"jitter_ms\": 5}");
    cr_assert_eq(e->network.kind, NETNS_REGIONS);
    cr_assert_eq(e->network.regions, 5);
    cr_assert_float_eq(e->network.rate_mbit, 0.894, 1e-12);
    cr_assert_float_eq(e->network.delay_ms, 20, 1e-12);
    cr_assert_float_eq(e->network.jitter_ms, 5, 1e-12);
    exp_free(e);
    e = expect_good(3, "{\"kind\": \"netns\"}");
    cr_assert_eq(e->network.regions, 4, "default: every place its own region (M + 1)");
    cr_assert_float_eq(e->network.rate_mbit, 0, 0, "default: no rate limit");
    exp_free(e);
}

Test(netns, bad_values_are_refused_with_their_path)
{
    expect_bad(2, "{\"kind\": \"vxlan\"}", NULL, "$.topology.network.kind: expected one of");
    expect_bad(2, "{\"regions\": 2}", NULL, "$.topology.network.kind: missing required key");
    expect_bad(2, "\"netns\"", NULL, "$.topology.network: expected an object");
    expect_bad(2, "{\"kind\": \"netns\", \"rate_mbit\": -1}", NULL,
               "$.topology.network.rate_mbit: expected a link rate in Mbit/s in [0.001, 100000], got -1");
    expect_bad(2, "{\"kind\": \"netns\", \"rate_mbit\": 0}", NULL, "$.topology.network.rate_mbit: expected");
    expect_bad(2, "{\"kind\": \"netns\", \"rate_mbit\": \"fast\"}", NULL,
               "$.topology.network.rate_mbit: expected");
    expect_bad(2, "{\"kind\": \"netns\", \"regions\": 4}", NULL,
               "$.topology.network.regions: expected a region count (at most learners + 1) in 1..3, got 4");
    expect_bad(2, "{\"kind\": \"netns\", \"regions\": 0}", NULL, "$.topology.network.regions: expected");
    expect_bad(2, "{\"kind\": \"netns\", \"regions\": 1.5}", NULL, "$.topology.network.regions: expected");
    expect_bad(2, "{\"kind\": \"netns\", \"delay_ms\": -3}", NULL, "$.topology.network.delay_ms: expected");
    expect_bad(2, "{\"kind\": \"netns\", \"delay_ms\": 10, \"jitter_ms\": 20}", NULL,
               "$.topology.network.jitter_ms: expected at most delay_ms (10), got 20");
    expect_bad(2, "{\"kind\": \"netns\", \"regions\": 1, \"rate_mbit\": 10}", NULL,
               "$.topology.network.regions: expected at least 2 with rate_mbit");
    expect_bad(2, "{\"kind\": \"netns\", \"bandwidth\": 10}", NULL,
               "$.topology.network.bandwidth: unknown key");
    expect_bad(2, "{\"kind\": \"netns\"}",
               ", \"attach\": {\"syncer\": \"http://127.0.0.1:1\", \"agents\": [\"http://127.0.0.1:2\", "
               "\"http://127.0.0.1:3\"]}",
               "$.topology.network: expected kind loopback (or no network) with attach");
}

Test(netns, regions_deal_places_round_robin_from_the_syncer)
{
    netns_spec s = {.kind = NETNS_REGIONS, .regions = 5, .rate_mbit = 1};
    cr_assert_eq(netns_region(&s, NETNS_SYNCER), 0);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(netns_region(&s, i), i + 1, "M+1 regions: learner %d alone", i);
        cr_assert(netns_shaped(&s, i), "learner %d crosses regions", i);
    }
    cr_assert_not(netns_shaped(&s, NETNS_SYNCER), "the syncer's own link is not shaped (its peers' are)");
    s.regions = 2; /* syncer 0; learners 1 0 1 0 */
    cr_assert_eq(netns_region(&s, 0), 1);
    cr_assert_eq(netns_region(&s, 1), 0);
    cr_assert(netns_shaped(&s, 0));
    cr_assert_not(netns_shaped(&s, 1), "learner 1 shares the syncer's region: unshaped");
    s.regions = 1;
    cr_assert_not(netns_shaped(&s, 0), "one region: nothing crosses");
    s.regions = 5;
    s.rate_mbit = 0;
    cr_assert_not(netns_shaped(&s, 0), "nothing to apply: unshaped");
    s.delay_ms = 5;
    cr_assert(netns_shaped(&s, 0), "a delay alone shapes");
    s.kind = NETNS_LOOPBACK;
    cr_assert_not(netns_shaped(&s, 0));
}

Test(netns, owner_names)
{
    cr_assert_eq(netns_owner_of("cl1234-hub"), 1234);
    cr_assert_eq(netns_owner_of("cl7-h"), 7);
    cr_assert_eq(netns_owner_of("cl1234"), -1, "no dash: not a run's name");
    cr_assert_eq(netns_owner_of("clx-h"), -1);
    cr_assert_eq(netns_owner_of("cl-h"), -1);
    cr_assert_eq(netns_owner_of("eth0"), -1);
    cr_assert_eq(netns_owner_of("cl0-h"), -1, "pid 0 is nobody's");
    cr_assert_eq(netns_owner_of("cl12345678901-h"), -1, "more digits than a pid has");
}

Test(netns, create_refuses_bad_arguments_before_touching_the_host)
{
    netns_spec s = {.kind = NETNS_REGIONS, .regions = 4};
    netns *n = NULL;
    char err[CX_ERRLEN];
    cr_assert_eq(netns_create(&s, 2, "cl1", "/tmp", &n, err, sizeof err), CX_EINVAL, "a prefix not ours");
    cr_assert_null(n);
    char mine[24];
    snprintf(mine, sizeof mine, "cl%d", (int)getpid());
    cr_assert_eq(netns_create(&s, 2, mine, "/tmp", &n, err, sizeof err), CX_EINVAL, "regions 4 > M + 1 = 3");
    cr_assert(strstr(err, "regions 4 not in 1..3"), "%s", err);
    s.kind = NETNS_LOOPBACK;
    s.regions = 3;
    cr_assert_eq(netns_create(&s, 2, mine, "/tmp", &n, err, sizeof err), CX_EINVAL,
                 "kind loopback builds nothing");
}

Test(netns, spawn_into_a_missing_namespace_is_a_clear_error)
{
    const char *argv[] = {"/bin/true", NULL};
    cx_spawn_opts o = {.stdout_fd = -1, .stderr_fd = -1, .netns = "/run/netns/chaosloco-test-no-such-ns"};
    pid_t pid = 0;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(cx_spawn(argv, &o, &pid, err, sizeof err), CX_ESYS);
    cr_assert_eq(pid, 0, "no child is handed back");
    cr_assert(strstr(err, "cannot run '/bin/true' in network namespace /run/netns/chaosloco-test-no-such-ns"),
              "%s", err);
    cr_assert(strstr(err, "No such file"), "the reason: %s", err);
}
