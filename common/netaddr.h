/* netaddr.h - socket addresses to and from "HOST:PORT" text, IPv4 and
 * IPv6 alike: "127.0.0.1:80", "[::1]:80", "name:80". The parsing of the
 * text itself is cx_parse_hostport (parse.h); this module adds what needs
 * the socket API: name checks, resolution, the printed form of a bound
 * address and the loopback test. Not here: sockets themselves (each
 * server binds its own).
 */
#ifndef CX_NETADDR_H
#define CX_NETADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* 1 when host is an IPv4 or IPv6 literal or a well-formed DNS name
 * (labels of [A-Za-z0-9_-], 1..63 each, 253 in all, an optional final
 * dot), else 0. No lookup: a well-formed name need not exist (yet). */
int cx_host_valid(const char *host);

/* Parse "HOST:PORT" (cx_parse_hostport) and check the host
 * (cx_host_valid), without resolving; host and port out (either may be
 * NULL). CX_EINVAL with a message naming what. */
int cx_hostport_check(const char *s, const char *what, char *host, size_t hostlen, int *port, char *err,
                      size_t errlen);

/* Resolve "HOST:PORT" (any family, first address getaddrinfo gives) for a
 * socket to bind or dial: *ss and *len out. Blocking (a name may need
 * DNS). CX_EINVAL, naming what, when it is malformed or does not
 * resolve. */
int cx_addr_resolve(const char *s, const char *what, struct sockaddr_storage *ss, socklen_t *len, char *err,
                    size_t errlen);

/* "1.2.3.4:PORT" or "[v6]:PORT" for an AF_INET/AF_INET6 address ("?"
 * otherwise). */
void cx_addr_format(const struct sockaddr *sa, char *buf, size_t len);
/* "host:port", with brackets when host is an IPv6 literal. */
void cx_hostport_format(const char *host, int port, char *buf, size_t len);

/* 1 for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104; else 0. */
int cx_addr_is_loopback(const struct sockaddr *sa);
/* The same for an address literal ("127.0.0.5", "::1"); names (even
 * "localhost") are 0: callers decide what a name means. */
int cx_ip_is_loopback(const char *ip);

/* A client's key for per-client caps, in an IPv4 address's space (host
 * order): its IPv4 address; an IPv6 loopback client is 127.0.0.1 and a
 * v4-mapped one its IPv4 address; any other IPv6 address is hashed
 * (FNV-1a) to a key outside 127.0.0.0/8, so that it may share a key (and
 * its caps) with another but never pass for loopback. 0 for other
 * families. */
uint32_t cx_addr_client_key(const struct sockaddr *sa);

#endif
