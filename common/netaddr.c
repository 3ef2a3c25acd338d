/* netaddr.c - socket addresses to and from "HOST:PORT" text (netaddr.h). */
#include "common/netaddr.h"

#include "common/err.h"
#include "common/parse.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int cx_host_valid(const char *host)
{
    struct in6_addr a6;
    struct in_addr a4;
    if (!host || !*host)
        return 0;
    if (inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1)
        return 1;
    size_t n = strlen(host);
    if (host[n - 1] == '.')
        n--;
    if (n == 0 || n > 253)
        return 0;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = host[i];
        if (c == '.') {
            if (label == 0)
                return 0;
            label = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_'))
            return 0;
        if (++label > 63)
            return 0;
    }
    return label > 0;
}

int cx_hostport_check(const char *s, const char *what, char *host, size_t hostlen, int *port, char *err,
                      size_t errlen)
{
    char h[256];
    int pt = 0;
    int rc = cx_parse_hostport(s, what, h, sizeof h, &pt, err, errlen);
    if (rc != 0)
        return rc;
    if (!cx_host_valid(h))
        return cx_fail(err, errlen, CX_EINVAL,
                       "%s: '%s' is not an IPv4 or IPv6 address or a host name (letters, digits, '-', '.')",
                       what, h);
    if (host)
        snprintf(host, hostlen, "%s", h);
    if (port)
        *port = pt;
    return CX_OK;
}

int cx_addr_resolve(const char *s, const char *what, struct sockaddr_storage *ss, socklen_t *len, char *err,
                    size_t errlen)
{
    char host[256], ps[16];
    int port = 0;
    int rc = cx_hostport_check(s, what, host, sizeof host, &port, err, errlen);
    if (rc != 0)
        return rc;
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0 || !ai || ai->ai_addrlen > sizeof *ss) {
        if (ai)
            freeaddrinfo(ai);
        return cx_fail(err, errlen, CX_EINVAL, "%s: cannot resolve '%s': %s", what, host,
                       g ? gai_strerror(g) : "no address");
    }
    memset(ss, 0, sizeof *ss);
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return CX_OK;
}

void cx_addr_format(const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        snprintf(buf, len, "%s:%d", ip, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        snprintf(buf, len, "[%s]:%d", ip, ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "?");
    }
}

void cx_hostport_format(const char *host, int port, char *buf, size_t len)
{
    if (strchr(host, ':'))
        snprintf(buf, len, "[%s]:%d", host, port);
    else
        snprintf(buf, len, "%s:%d", host, port);
}

static int v4_is_loopback(const struct in_addr *a)
{
    return (ntohl(a->s_addr) >> 24) == 127;
}

static int v6_is_loopback(const struct in6_addr *a)
{
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

int cx_addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return v4_is_loopback(&((const struct sockaddr_in *)(const void *)sa)->sin_addr);
    if (sa->sa_family == AF_INET6)
        return v6_is_loopback(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
    return 0;
}

int cx_ip_is_loopback(const char *ip)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, ip, &a4) == 1)
        return v4_is_loopback(&a4);
    if (inet_pton(AF_INET6, ip, &a6) == 1)
        return v6_is_loopback(&a6);
    return 0;
}

uint32_t cx_addr_client_key(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr);
    if (sa->sa_family != AF_INET6)
        return 0;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a))
        return 0x7f000001u;
    if (IN6_IS_ADDR_V4MAPPED(a))
        return (uint32_t)a->s6_addr[12] << 24 | (uint32_t)a->s6_addr[13] << 16 |
               (uint32_t)a->s6_addr[14] << 8 | a->s6_addr[15];
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ a->s6_addr[i]) * 16777619u;
    if ((h >> 24) == 127)
        h ^= 0x01000000u;
    return h;
}
