/* test_netaddr.c - "HOST:PORT" text and socket addresses, IPv4 and IPv6
 * (common/netaddr.h, and the bracket form of cx_parse_hostport). */
#include "common/netaddr.h"

#include "common/err.h"
#include "common/parse.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

Test(netaddr, brackets_hold_an_ipv6_host)
{
    char err[256], host[64];
    int port = -1;
    cr_assert_eq(cx_parse_hostport("[::1]:8080", "--listen", host, sizeof host, &port, err, sizeof err), 0,
                 "%s", err);
    cr_assert_str_eq(host, "::1");
    cr_assert_eq(port, 8080);
    cr_assert_eq(cx_parse_hostport("[::]:0", "--listen", host, sizeof host, &port, err, sizeof err), 0);
    cr_assert_str_eq(host, "::");
    const char *bad[] = {"[::1:80", "[]:80", "::1]:80", "[::1]x:80", "[a]b]:80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(cx_parse_hostport(bad[i], "--listen", host, sizeof host, &port, err, sizeof err),
                     CX_EINVAL, "%s accepted", bad[i]);
        cr_assert(strstr(err, "--listen"), "%s", err);
    }
}

Test(netaddr, host_names_are_checked_not_resolved)
{
    const char *good[] = {
        "127.0.0.1",      "::1",           "fd00::7", "localhost", "syncer.chaosloco.svc.cluster.local",
        "a-b_c.example.", "nosuch.invalid"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        cr_assert(cx_host_valid(good[i]), "%s refused", good[i]);
    const char *bad[] = {"",
                         "bad host",
                         "a..b",
                         ".a",
                         "x/y",
                         "h\xC3\xA9",
                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert(!cx_host_valid(bad[i]), "'%s' accepted", bad[i]);
    char err[256], host[64];
    int port = 0;
    cr_assert_eq(cx_hostport_check("nosuch.invalid:9", "upstream", host, sizeof host, &port, err, sizeof err),
                 0);
    cr_assert_str_eq(host, "nosuch.invalid");
    cr_assert_eq(port, 9);
    cr_assert_eq(cx_hostport_check("bad host:9", "upstream", NULL, 0, NULL, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "upstream") && strstr(err, "bad host"), "%s", err);
}

Test(netaddr, resolve_and_format_both_families)
{
    char err[256], out[64];
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    cr_assert_eq(cx_addr_resolve("[::1]:81", "listen", &ss, &sl, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ss.ss_family, AF_INET6);
    cx_addr_format((struct sockaddr *)&ss, out, sizeof out);
    cr_assert_str_eq(out, "[::1]:81");
    cr_assert(cx_addr_is_loopback((struct sockaddr *)&ss));
    cr_assert_eq(cx_addr_resolve("localhost:82", "listen", &ss, &sl, err, sizeof err), 0, "%s", err);
    cx_addr_format((struct sockaddr *)&ss, out, sizeof out);
    cr_assert(strcmp(out, "127.0.0.1:82") == 0 || strcmp(out, "[::1]:82") == 0, "%s", out);
    cr_assert_eq(cx_addr_resolve("nosuch.invalid:1", "listen", &ss, &sl, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "listen: cannot resolve 'nosuch.invalid'"), "%s", err);
    cx_hostport_format("::1", 5, out, sizeof out);
    cr_assert_str_eq(out, "[::1]:5");
    cx_hostport_format("10.0.0.1", 5, out, sizeof out);
    cr_assert_str_eq(out, "10.0.0.1:5");
}

Test(netaddr, loopback_is_127_8_and_colon_colon_1_only)
{
    const char *yes[] = {"127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        cr_assert(cx_ip_is_loopback(yes[i]), "%s", yes[i]);
    const char *no[] = {"0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1", "localhost", "128.0.0.1"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        cr_assert(!cx_ip_is_loopback(no[i]), "%s", no[i]);
}

/* Per-client caps key IPv6 clients too: ::1 is the loopback key, a
 * v4-mapped client its IPv4 address, others a hash never in 127/8. */
Test(netaddr, client_key_of_both_families)
{
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    a6.sin6_addr = in6addr_loopback;
    cr_assert_eq(cx_addr_client_key((struct sockaddr *)&a6), 0x7f000001u);
    inet_pton(AF_INET6, "::ffff:10.1.2.3", &a6.sin6_addr);
    cr_assert_eq(cx_addr_client_key((struct sockaddr *)&a6), 0x0a010203u);
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
    cr_assert_eq(cx_addr_client_key((struct sockaddr *)&a4), 0x0a010203u);
    uint32_t k1 = 0, k2 = 0;
    for (int i = 0; i < 4096; i++) { /* many addresses: none passes for loopback */
        char ip[64];
        snprintf(ip, sizeof ip, "fd00::%x:%x", i, i * 7);
        cr_assert_eq(inet_pton(AF_INET6, ip, &a6.sin6_addr), 1);
        uint32_t k = cx_addr_client_key((struct sockaddr *)&a6);
        cr_assert_neq(k >> 24, 127u, "%s keyed as loopback", ip);
        if (i == 0)
            k1 = k;
        if (i == 1)
            k2 = k;
    }
    cr_assert_neq(k1, k2, "two IPv6 clients, two keys");
}
