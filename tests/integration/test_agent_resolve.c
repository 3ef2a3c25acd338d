/* test_agent_resolve.c - the agent's proxy and the syncer's name. An agent
 * whose --proxy upstream does not resolve yet starts, serves its API and
 * refuses the proxy's clients cleanly (EOF); run in a mount namespace of
 * its own with an /etc/hosts the test rewrites (unshare --mount and a bind
 * mount; skipped where that is not allowed), the name appears (the proxy
 * relays) and then moves to another address, IPv6 this time (the proxy
 * follows). Every wait is bounded; ag_cleanup_all kills what is left. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_it.h"

#define NAME "syncer-it.chaosloco.test"

static void fini(void)
{
    ag_cleanup_all();
}

TestSuite(agent_resolve, .fini = fini, .timeout = 90);

/* A client of the proxy on port that sends a byte gets EOF (a refused
 * link) within 5 s: 1; anything else (data, reset, silence): 0. */
static int refused(int port)
{
    int fd = ag_connect(port);
    if (fd < 0)
        return 0;
    char c;
    int ok = ag_send_all(fd, "x", 1) == 0 && ag_recv_n(fd, &c, 1, 5000) == 0;
    if (ok) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ok = poll(&p, 1, 0) == 1 && recv(fd, &c, 1, 0) == 0;
    }
    close(fd);
    return ok;
}

/* Echo through port until it works, at most ~10 s: 1 when it did. */
static int relays_within_10s(int port)
{
    for (int i = 0; i < 50; i++) {
        if (ag_echo_rtt(port, 100, 2000) >= 0)
            return 1;
        cx_sleep_ms(200);
    }
    return 0;
}

static void write_hosts(const char *path, const char *text)
{
    FILE *f = fopen(path, "w"); /* same inode: the bind mount sees it */
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

Test(agent_resolve, starts_and_refuses_while_the_upstream_does_not_resolve)
{
    ag_echo echo;
    ag_echo_start(&echo);
    char proxy[160];
    snprintf(proxy, sizeof proxy, "up=127.0.0.1:0->syncer.nosuch.invalid:%d", echo.port);
    const char *extra[] = {"--proxy", proxy, NULL};
    ag a;
    ag_start(&a, "resolve", extra, NULL, NULL);
    ag_wait_running(&a, 5000);
    int port = ag_proxy_port(&a, "up");
    for (int i = 0; i < 3; i++)
        cr_assert(refused(port), "client %d of a proxy whose upstream does not resolve: not a clean EOF", i);
    json_t *s = ag_status(&a); /* the API still answers, the proxy is listed as given */
    json_t *p = json_array_get(json_object_get(s, "proxies"), 0);
    char want[96];
    snprintf(want, sizeof want, "syncer.nosuch.invalid:%d", echo.port);
    cr_assert_str_eq(js(p, "upstream"), want);
    json_decref(s);
    ag_stop(&a);
    ag_echo_stop(&echo);
}

Test(agent_resolve, follows_the_name_as_it_appears_and_moves)
{
    char *dir = it_mkdtemp("resolve-hosts");
    char hosts[512];
    snprintf(hosts, sizeof hosts, "%s/hosts", dir);
    write_hosts(hosts, "127.0.0.1 localhost\n::1 localhost\n");
    static const char script[] = "mount --bind \"$0\" /etc/hosts && exec \"$@\"";
    const char *probe[] = {"unshare", "--mount", "sh", "-c", "mount --bind \"$0\" /etc/hosts", hosts, NULL};
    if (it_wait_exit(it_start_prog(dir, "probe-mount", probe, NULL), 10000) != 0)
        cr_skip_test("unshare --mount with a bind-mounted /etc/hosts is not allowed here");

    ag_echo echo;
    ag_echo_start(&echo);
    char proxy[160];
    snprintf(proxy, sizeof proxy, "up=127.0.0.1:0->" NAME ":%d", echo.port);
    const char *extra[] = {"--proxy", proxy, NULL};
    const char *prefix[] = {"unshare", "--mount", "sh", "-c", script, hosts, NULL};
    ag a;
    ag_prefix = prefix;
    ag_start(&a, "resolve-ns", extra, NULL, NULL);
    ag_prefix = NULL;
    ag_wait_running(&a, 5000);
    int port = ag_proxy_port(&a, "up");
    cr_assert(refused(port), "before the name exists: not a clean EOF");

    /* the name appears */
    write_hosts(hosts, "127.0.0.1 localhost\n127.0.0.1 " NAME "\n");
    cr_assert(relays_within_10s(port), "the proxy did not relay once " NAME " resolved");

    /* the name moves to ::1, the same port behind it; the old address stops
     * answering, so an echo now comes from the new one */
    ag_echo echo6 = {0};
    echo6.lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(echo6.lfd, 0);
    int one = 1;
    setsockopt(echo6.lfd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    struct sockaddr_in6 sa6 = {
        .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)echo.port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    cr_assert_eq(bind(echo6.lfd, (struct sockaddr *)&sa6, sizeof sa6), 0, "bind [::1]:%d: %s", echo.port,
                 strerror(errno));
    cr_assert_eq(listen(echo6.lfd, 64), 0);
    echo6.port = echo.port;
    cr_assert_eq(pthread_create(&echo6.thread, NULL, ag_echo_main, &echo6), 0);
    ag_echo_stop(&echo);
    cr_assert_lt(ag_echo_rtt(echo.port, 10, 500), 0, "test bug: the old address still answers");
    write_hosts(hosts, "127.0.0.1 localhost\n::1 " NAME "\n");
    cr_assert(relays_within_10s(port), "the proxy did not follow " NAME " to ::1");

    ag_stop(&a);
    ag_echo_stop(&echo6);
    free(dir);
}
