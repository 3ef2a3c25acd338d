/* metrics.c - Prometheus text for the agent (see metrics.h for the list). */
#include "agent/metrics.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/prom.h"

/* ---- metrics: helpers ---- */

/* Print a {"a|b": n} map as name{la="a",lb="b"} n. */
static void pair_map(cx_buf *b, const char *name, const char *la, const char *lb, json_t *map)
{
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v)
    {
        const char *bar = strchr(key, '|');
        if (!bar)
            continue;
        char a[128];
        snprintf(a, sizeof a, "%.*s", (int)(bar - key), key);
        const char *labels[] = {la, a, lb, bar + 1, NULL};
        cx_prom_int(b, name, labels, (long long)json_integer_value(v));
    }
}

/* ---- metrics: render ---- */

void metrics_render(agent *a, cx_buf *b)
{
    cx_prom_family(b, "chaosloco_agent_faults_active", CX_PROM_GAUGE, "Faults active now, by type.");
    for (const injector *const *p = injector_table; *p; p++) {
        const char *labels[] = {"type", (*p)->type, NULL};
        cx_prom_int(b, "chaosloco_agent_faults_active", labels, reg_active(a->reg, (*p)->type));
    }
    json_t *c = reg_counters(a->reg);
    cx_prom_family(b, "chaosloco_agent_faults_total", CX_PROM_COUNTER,
                   "Fault requests by type and result (applied, failed, rejected).");
    pair_map(b, "chaosloco_agent_faults_total", "type", "result", json_object_get(c, "faults_total"));
    cx_prom_family(b, "chaosloco_agent_fault_reverts_total", CX_PROM_COUNTER,
                   "Faults ended, by type and revert reason.");
    pair_map(b, "chaosloco_agent_fault_reverts_total", "type", "reason",
             json_object_get(c, "reverted_total"));
    json_decref(c);

    int up = 0;
    int64_t restarts = 0, incarnation = 0, log_bytes = 0;
    if (a->sup)
        sup_counters(a->sup, &up, &restarts, &incarnation, &log_bytes);
    cx_prom_one_int(b, "chaosloco_agent_unit_up", CX_PROM_GAUGE, "1 when the unit is alive and not paused.",
                    up);
    cx_prom_one_int(b, "chaosloco_agent_unit_restarts_total", CX_PROM_COUNTER,
                    "Unit respawns after the first start.", (long long)restarts);
    cx_prom_one_int(b, "chaosloco_agent_unit_incarnation", CX_PROM_GAUGE, "Unit starts so far (first = 1).",
                    (long long)incarnation);
    cx_prom_one_int(b, "chaosloco_agent_unit_log_bytes_total", CX_PROM_COUNTER,
                    "Bytes of unit output captured.", (long long)log_bytes);

    cx_prom_family(b, "chaosloco_agent_proxy_bytes_total", CX_PROM_COUNTER,
                   "Bytes delivered through a proxy, by direction (upstream = unit to server).");
    for (int i = 0; i < a->nproxies; i++) {
        proxy_stats s;
        proxy_stats_get(a->proxies[i], &s);
        const char *up_l[] = {"proxy", proxy_name(a->proxies[i]), "direction", "upstream", NULL};
        const char *down_l[] = {"proxy", proxy_name(a->proxies[i]), "direction", "downstream", NULL};
        cx_prom_uint(b, "chaosloco_agent_proxy_bytes_total", up_l, (unsigned long long)s.bytes_up);
        cx_prom_uint(b, "chaosloco_agent_proxy_bytes_total", down_l, (unsigned long long)s.bytes_down);
    }
    cx_prom_family(b, "chaosloco_agent_proxy_connections_total", CX_PROM_COUNTER,
                   "Connections a proxy relayed.");
    for (int i = 0; i < a->nproxies; i++) {
        proxy_stats s;
        proxy_stats_get(a->proxies[i], &s);
        const char *labels[] = {"proxy", proxy_name(a->proxies[i]), NULL};
        cx_prom_uint(b, "chaosloco_agent_proxy_connections_total", labels,
                     (unsigned long long)s.conns_accepted);
    }
    cx_prom_family(b, "chaosloco_agent_proxy_connections_open", CX_PROM_GAUGE,
                   "Connections open through a proxy now.");
    for (int i = 0; i < a->nproxies; i++) {
        proxy_stats s;
        proxy_stats_get(a->proxies[i], &s);
        const char *labels[] = {"proxy", proxy_name(a->proxies[i]), NULL};
        cx_prom_uint(b, "chaosloco_agent_proxy_connections_open", labels, (unsigned long long)s.conns_open);
    }

    cx_prom_one_int(b, "chaosloco_agent_halted", CX_PROM_GAUGE, "1 while halted (new faults refused).",
                    agent_halted(a));
    cx_prom_one_int(b, "chaosloco_agent_lease_held", CX_PROM_GAUGE, "1 while a harness lease is held.",
                    agent_lease_held(a));
    pthread_mutex_lock(&a->lock);
    long long lapses = (long long)a->lease_lapses;
    pthread_mutex_unlock(&a->lock);
    cx_prom_one_int(b, "chaosloco_agent_lease_lapses_total", CX_PROM_COUNTER,
                    "Leases that lapsed (dead-man's switch fired).", lapses);
    cx_prom_family(b, "chaosloco_agent_uptime_seconds", CX_PROM_GAUGE, "Seconds since the agent started.");
    cx_prom_real(b, "chaosloco_agent_uptime_seconds", NULL,
                 (double)(cx_mono_ms() - a->started_mono_ms) / 1000.0, 3);
}
