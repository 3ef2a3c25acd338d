/* agent_main.c - `chaosloco agent`: parse flags, build the agent, run its
 * loop until SIGTERM/SIGINT, revert everything, stop the unit. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "common/http_server.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/parse.h"
#include "common/secret.h"
#include "common/stop_signals.h"
#include "injectors/injector.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: chaosloco agent --id NAME --state-dir DIR --token-file FILE [options] -- COMMAND ARGS...\n"
        "\n"
        "Supervise one learner unit (COMMAND, started with fork/execve in its own process\n"
        "group, no shell) and inject faults into it over an HTTP API.\n"
        "\n"
        "  --listen HOST:PORT        API address (default 127.0.0.1:0 = ephemeral; IPv6 as [::1]:PORT,\n"
        "                            [::]:PORT = every interface, both families); the bound\n"
        "                            address is written to <state-dir>/listen.addr\n"
        "  --id NAME                 unit id, 1..64 of [A-Za-z0-9._-] (names its cgroups)\n"
        "  --state-dir DIR           faults.json, audit.jsonl, unit.log(.1), hooks/, listen.addr\n"
        "  --token-file FILE         bearer token for every call but GET /v1/health (first line,\n"
        "                            trimmed; a token per agent, see deploy/README.md);\n"
        "                            refused unless only its owner (this uid or root) can read it\n"
        "                            (chmod 600; a symlink, as in a Kubernetes Secret volume, is followed)\n"
        "  --tls-cert FILE --tls-key FILE\n"
        "                            serve the API over HTTPS with this PEM certificate chain and key\n"
        "                            (the key as the token: owner-only); both or neither\n"
        "  --proxy NAME=LISTEN->UPSTREAM\n"
        "                            a TCP proxy for the unit (repeatable, at most %d); '{proxy.NAME}'\n"
        "                            in COMMAND ARGS becomes the proxy's listen address; UPSTREAM's\n"
        "                            name is resolved for each connection (it may not exist yet)\n"
        "  --restart never|on-failure\n"
        "                            restart policy for exits the unit does by itself (default never);\n"
        "                            a kill fault's restart_after_ms restarts whatever the policy\n"
        "  --restart-backoff-ms N    first restart delay, doubled per quick failure, cap 30 s\n"
        "                            (default 1000)\n"
        "  --toxiproxy-compat        the Toxiproxy-compatible endpoints also take the token as the\n"
        "                            password of Basic auth, all that Toxiproxy's Go and Python\n"
        "                            clients can send (http://toxiproxy:TOKEN@HOST:PORT); every\n"
        "                            mutating call needs the token in any case\n"
        "  --toxiproxy-listen-allow IP\n"
        "                            an IPv4 or IPv6 address beyond loopback that proxies made\n"
        "                            through the Toxiproxy API may listen on (repeatable, at most %d;\n"
        "                            0.0.0.0 or :: = every interface); their ports are 0 or\n"
        "                            1024..65535 always\n"
        "  --max-duration-ms N       cap on a fault's duration_ms (default 600000 = 10 min); what\n"
        "                            the Toxiproxy API makes lasts until deleted, as in Toxiproxy\n"
        "  --log-max-bytes N         unit.log size before rotation to unit.log.1 (default 10485760)\n"
        "  --shim PATH|none          disk-fault LD_PRELOAD shim (default: injectors/\n"
        "                            libchaosloco_diskfault.so next to the chaosloco binary)\n"
        "  --faketime-lib PATH|none  libfaketimeMT.so.1 (default: /usr/lib/*/faketime/ when installed)\n"
        "  --no-cgroup               do not put the unit into cgroups (pause falls back to SIGSTOP)\n"
        "  --orphan-exit-ms N        after a lease lapsed (its faults reverted), shut down (stop the\n"
        "                            unit, exit 0) when no new lease came within N ms; before any\n"
        "                            lease, N ms after the process that started the agent died: what\n"
        "                            a harness that launched this agent and died leaves behind goes\n"
        "                            away (default 0 = never)\n"
        "  --check                   validate the command line (not COMMAND ARGS: check those with\n"
        "                            their own --check), print \"chaosloco agent: command line ok\",\n"
        "                            exit 0; starts nothing, writes nothing; the state dir, token\n"
        "                            file and shim need not exist (mounted at run time)\n"
        "  --help                    this text\n"
        "\n"
        "Exit: 0 after a clean shutdown (SIGTERM/SIGINT: every fault reverted, unit stopped),\n"
        "1 on a runtime failure, 64 on a usage error.\n",
        AGENT_MAX_PROXIES, AGENT_MAX_LISTEN_ALLOW);
    /* from injector_table, like GET /v1/fault-kinds */
    fprintf(f, "\nFault kinds (POST /v1/faults; their params: chaosloco validate --list-faults):\n ");
    int col = 1;
    for (const injector *const *k = injector_table; *k; k++) {
        int n = (int)strlen((*k)->type) + 1;
        if (col + n > 80) {
            fprintf(f, "\n ");
            col = 1;
        }
        fprintf(f, " %s", (*k)->type);
        col += n;
    }
    fprintf(f, "\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "chaosloco agent: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see chaosloco agent --help)\n");
    va_end(ap);
    return CX_EXIT_USAGE;
}

static int valid_name(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
            return 0;
    return 1;
}

/* NAME=LISTEN->UPSTREAM */
static int parse_proxy(const char *s, agent_proxy_spec *out, char *err, size_t errlen)
{
    const char *eq = strchr(s, '=');
    const char *arrow = eq ? strstr(eq, "->") : NULL;
    if (!eq || !arrow)
        return cx_fail(err, errlen, CX_EINVAL, "--proxy '%s': expected NAME=LISTEN->UPSTREAM", s);
    snprintf(out->name, sizeof out->name, "%.*s", (int)(eq - s), s);
    if ((size_t)(eq - s) >= sizeof out->name || !valid_name(out->name, 64))
        return cx_fail(err, errlen, CX_EINVAL, "--proxy '%s': bad NAME (1..64 of [A-Za-z0-9._-])", s);
    snprintf(out->listen, sizeof out->listen, "%.*s", (int)(arrow - eq - 1), eq + 1);
    snprintf(out->upstream, sizeof out->upstream, "%s", arrow + 2);
    char host[128];
    int port;
    if (cx_parse_hostport(out->listen, "--proxy LISTEN", host, sizeof host, &port, err, errlen) < 0)
        return CX_EINVAL;
    /* checked, not resolved: the proxy resolves it for each connection, so
     * the syncer's name need not exist yet (a Service made after the pod) */
    if (cx_hostport_check(out->upstream, "--proxy UPSTREAM", host, sizeof host, &port, err, errlen) < 0)
        return CX_EINVAL;
    if (port == 0)
        return cx_fail(err, errlen, CX_EINVAL, "--proxy '%s': UPSTREAM needs a port", s);
    return 0;
}

/* --id NAME (cx_flags CX_FLAG_FUNC; dst: const char **): it names the
 * unit's cgroups, so only 1..64 of [A-Za-z0-9._-]. */
static int parse_id(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    if (!valid_name(v, 64))
        return cx_fail(err, errlen, CX_EINVAL, "%s '%s': must be 1..64 of [A-Za-z0-9._-]", name, v);
    *(const char **)dst = v;
    return 0;
}

/* --proxy NAME=LISTEN->UPSTREAM, repeatable (cx_flags CX_FLAG_FUNC; dst:
 * agent_opts *): one more proxy, its NAME not taken yet. */
static int add_proxy(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    agent_opts *o = dst;
    if (o->nproxies >= AGENT_MAX_PROXIES)
        return cx_fail(err, errlen, CX_EINVAL, "%s: at most %d proxies", name, AGENT_MAX_PROXIES);
    if (parse_proxy(v, &o->proxies[o->nproxies], err, errlen) < 0)
        return CX_EINVAL;
    for (int j = 0; j < o->nproxies; j++)
        if (strcmp(o->proxies[j].name, o->proxies[o->nproxies].name) == 0)
            return cx_fail(err, errlen, CX_EINVAL, "%s: name '%s' given twice", name, o->proxies[j].name);
    o->nproxies++;
    return 0;
}

/* --toxiproxy-listen-allow IP, repeatable (cx_flags CX_FLAG_FUNC; dst:
 * agent_opts *): an IPv4 or IPv6 address, kept in inet_ntop's form (the
 * form toxiproxy.c compares resolved listen addresses in); no names, so
 * that --check needs no DNS and what is allowed cannot change under a
 * name. */
static int add_listen_allow(const char *name, const char *v, void *dst, char *err, size_t errlen)
{
    agent_opts *o = dst;
    struct in_addr in;
    struct in6_addr in6;
    if (o->nlisten_allow >= AGENT_MAX_LISTEN_ALLOW)
        return cx_fail(err, errlen, CX_EINVAL, "%s: at most %d addresses", name, AGENT_MAX_LISTEN_ALLOW);
    char *dst_ip = o->listen_allow[o->nlisten_allow];
    if (inet_pton(AF_INET, v, &in) == 1)
        inet_ntop(AF_INET, &in, dst_ip, sizeof o->listen_allow[0]);
    else if (inet_pton(AF_INET6, v, &in6) == 1)
        inet_ntop(AF_INET6, &in6, dst_ip, sizeof o->listen_allow[0]);
    else
        return cx_fail(err, errlen, CX_EINVAL,
                       "%s '%s': must be an IPv4 or IPv6 address, no brackets (e.g. 0.0.0.0, 10.0.0.7, :: or "
                       "fd00::7)",
                       name, v);
    o->nlisten_allow++;
    return 0;
}

/* --restart's values, by sup_restart */
static const char *const restart_names[] = {"never", "on-failure", NULL};

/* Read the bearer token from token_file: a secret file (common/secret.h:
 * symlinks followed, a regular file of this uid or root that group and
 * others may not read or write), up to 4096 bytes, its first line without
 * trailing space, at least 8 characters. The token (malloc'd), or NULL
 * with why. */
static char *read_token_file(const char *token_file, char *why, size_t whylen)
{
    char line[4096];
    int n = cx_secret_read_line(token_file, "--token-file", line, sizeof line, why, whylen);
    char *token = n >= 8 ? strdup(line) : NULL;
    memset(line, 0, sizeof line);
    if (n >= 0 && n < 8)
        cx_fail(why, whylen, CX_EINVAL, "--token-file %s: the token must be at least 8 characters",
                token_file);
    else if (n >= 8 && !token)
        cx_fail(why, whylen, CX_ENOMEM, "out of memory");
    return token;
}

int agent_main(int argc, char **argv)
{
    cx_log_init("agent", CX_LOG_INFO);
    static agent_opts o;
    memset(&o, 0, sizeof o);
    o.listen = "127.0.0.1:0";
    o.restart_backoff_ms = 1000;
    o.max_duration_ms = AGENT_DEFAULT_MAX_DURATION_MS;
    o.log_max_bytes = 10 * 1024 * 1024;
    const char *token_file = NULL;
    char err[CX_ERRLEN] = "";
    int check = 0;
    int64_t restart = SUP_RESTART_NEVER;
    const cx_flag flags[] = {
        {.name = "--listen", .kind = CX_FLAG_HOSTPORT, .dst = &o.listen},
        {.name = "--id", .kind = CX_FLAG_FUNC, .dst = &o.id, .parse = parse_id},
        {.name = "--state-dir", .kind = CX_FLAG_STRING, .dst = &o.state_dir},
        {.name = "--token-file", .kind = CX_FLAG_STRING, .dst = &token_file},
        {.name = "--tls-cert", .kind = CX_FLAG_STRING, .dst = &o.tls_cert},
        {.name = "--tls-key", .kind = CX_FLAG_STRING, .dst = &o.tls_key},
        {.name = "--proxy", .kind = CX_FLAG_FUNC, .dst = &o, .parse = add_proxy},
        {.name = "--restart", .kind = CX_FLAG_ENUM, .dst = &restart, .names = restart_names},
        {.name = "--restart-backoff-ms", .kind = CX_FLAG_I64, .dst = &o.restart_backoff_ms, .max = 3600000},
        {.name = "--max-duration-ms",
         .kind = CX_FLAG_I64,
         .dst = &o.max_duration_ms,
         .min = 1,
         .max = 7.0 * 24 * 3600 * 1000},
        {.name = "--log-max-bytes",
         .kind = CX_FLAG_I64,
         .dst = &o.log_max_bytes,
         .min = 4096,
         .max = (double)((int64_t)1 << 40)},
        {.name = "--shim", .kind = CX_FLAG_STRING, .dst = &o.shim},
        {.name = "--faketime-lib", .kind = CX_FLAG_STRING, .dst = &o.faketime_lib},
        {.name = "--orphan-exit-ms",
         .kind = CX_FLAG_I64,
         .dst = &o.orphan_exit_ms,
         .max = 24.0 * 3600 * 1000},
        {.name = "--toxiproxy-compat", .kind = CX_FLAG_BOOL, .dst = &o.toxiproxy_compat},
        {.name = "--toxiproxy-listen-allow", .kind = CX_FLAG_FUNC, .dst = &o, .parse = add_listen_allow},
        {.name = "--no-cgroup", .kind = CX_FLAG_BOOL, .dst = &o.no_cgroup},
        {.name = "--check", .kind = CX_FLAG_BOOL, .dst = &check},
        {0}};
    /* the agent's flags end at the first "--"; the unit's command follows */
    int sep = 1;
    while (sep < argc && strcmp(argv[sep], "--") != 0)
        sep++;
    int npos = 0, prc = cx_flags_parse("chaosloco agent", sep, argv, flags, NULL, NULL, 0, &npos, usage);
    if (prc != CX_FLAGS_OK)
        return prc;
    o.restart = (sup_restart)restart;
    if (!o.id)
        return usage_error("--id is required");
    if (!o.state_dir)
        return usage_error("--state-dir is required");
    if (!token_file)
        return usage_error("--token-file is required");
    if (!o.tls_cert != !o.tls_key)
        return usage_error("--tls-cert and --tls-key go together");
    if (sep + 1 >= argc)
        return usage_error("no unit command: give it after --, e.g. -- chaosloco learner ...");
    o.argv = (const char *const *)(argv + sep + 1);
    if (check) {
        printf("chaosloco agent: command line ok\n");
        return CX_EXIT_OK;
    }

    char *token = read_token_file(token_file, err, sizeof err);
    if (!token)
        return usage_error("%s", err);
    o.token = token;

    volatile sig_atomic_t *stop = cx_stop_on_signals();
    agent *a = agent_new(&o, err, sizeof err);
    if (!a) {
        cx_error("cannot start the agent: %s", err);
        free(token);
        return CX_EXIT_FAILURE;
    }
    char proxies[1024] = "";
    size_t off = 0;
    for (int j = 0; j < a->nproxies && off < sizeof proxies; j++)
        off += (size_t)snprintf(proxies + off, sizeof proxies - off, "%s%s=%s->%s", j ? "," : "",
                                o.proxies[j].name, proxy_listen_addr(a->proxies[j]), o.proxies[j].upstream);
    cx_info("config listen=%s id=%s state_dir=%s proxies=[%s] restart=%s restart_backoff_ms=%lld "
            "toxiproxy_compat=%d max_duration_ms=%lld log_max_bytes=%lld faketime=%s shim=%s cgroup=%s "
            "cmd=%s",
            cx_http_server_bound(a->http), o.id, o.state_dir, proxies, restart_names[restart],
            (long long)o.restart_backoff_ms, o.toxiproxy_compat, (long long)o.max_duration_ms,
            (long long)o.log_max_bytes, a->faketime_lib[0] ? a->faketime_lib : "none",
            a->shim_lib[0] ? a->shim_lib : "none", a->cgroup_note, o.argv[0]);
    /* the socket's own address (0.0.0.0:PORT for the wildcard), and where
     * this host reaches it (listen.addr) when that differs */
    const char *bound = cx_http_server_bound(a->http);
    if (strcmp(bound, a->listen_addr) != 0)
        cx_info("listening on %s (listen.addr %s)", bound, a->listen_addr);
    else
        cx_info("listening on %s", bound);
    int rc = agent_run(a, stop);
    agent_free(a);
    free(token);
    cx_info("agent stopped");
    return rc;
}
