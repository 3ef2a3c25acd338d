/* metrics.c - Prometheus text for the agent (see metrics.h for the list). */
#include "agent/metrics.h"

#include <string.h>

#include "common/clock.h"
#include "common/log.h"

/* ---- metrics: helpers ---- */

static void family(cx_buf *b, const char *name, const char *type, const char *help)
{
    cx_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

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
        cx_buf_printf(b, "%s{%s=\"%.*s\",%s=\"%s\"} %lld\n", name, la, (int)(bar - key), key, lb, bar + 1,
                      (long long)json_integer_value(v));
    }
}

/* ---- metrics: render ---- */

void metrics_render(agent *a, cx_buf *b)
{
    family(b, "chaosloco_agent_faults_active", "gauge", "Faults active now, by type.");
    for (const injector *const *p = injector_table; *p; p++)
        cx_buf_printf(b, "chaosloco_agent_faults_active{type=\"%s\"} %d\n", (*p)->type,
                      reg_active(a->reg, (*p)->type));
    json_t *c = reg_counters(a->reg);
    family(b, "chaosloco_agent_faults_total", "counter",
           "Fault requests by type and result (applied, failed, rejected).");
    pair_map(b, "chaosloco_agent_faults_total", "type", "result", json_object_get(c, "faults_total"));
    family(b, "chaosloco_agent_fault_reverts_total", "counter", "Faults ended, by type and revert reason.");
    pair_map(b, "chaosloco_agent_fault_reverts_total", "type", "reason",
             json_object_get(c, "reverted_total"));
    json_decref(c);

    int up = 0;
    int64_t restarts = 0, incarnation = 0, log_bytes = 0;
    if (a->sup)
        sup_counters(a->sup, &up, &restarts, &incarnation, &log_bytes);
    family(b, "chaosloco_agent_unit_up", "gauge", "1 when the unit is alive and not paused.");
    cx_buf_printf(b, "chaosloco_agent_unit_up %d\n", up);
    family(b, "chaosloco_agent_unit_restarts_total", "counter", "Unit respawns after the first start.");
    cx_buf_printf(b, "chaosloco_agent_unit_restarts_total %lld\n", (long long)restarts);
    family(b, "chaosloco_agent_unit_incarnation", "gauge", "Unit starts so far (first = 1).");
    cx_buf_printf(b, "chaosloco_agent_unit_incarnation %lld\n", (long long)incarnation);
    family(b, "chaosloco_agent_unit_log_bytes_total", "counter", "Bytes of unit output captured.");
    cx_buf_printf(b, "chaosloco_agent_unit_log_bytes_total %lld\n", (long long)log_bytes);

    family(b, "chaosloco_agent_proxy_bytes_total", "counter",
           "Bytes delivered through a proxy, by direction (upstream = unit to server).");
    for (int i = 0; i < a->nproxies; i++) {
        proxy_stats s;
        proxy_stats_get(a->proxies[i], &s);
        cx_buf_printf(b, "chaosloco_agent_proxy_bytes_total{proxy=\"%s\",direction=\"upstream\"} %llu\n",
                      proxy_name(a->proxies[i]), (unsigned long long)s.bytes_up);
        cx_buf_printf(b, "chaosloco_agent_proxy_bytes_total{proxy=\"%s\",direction=\"downstream\"} %llu\n",
                      proxy_name(a->proxies[i]), (unsigned long long)s.bytes_down);
    }
    family(b, "chaosloco_agent_proxy_connections_total", "counter", "Connections a proxy relayed.");
    for (int i = 0; i < a->nproxies; i++) {
        proxy_stats s;
        proxy_stats_get(a->proxies[i], &s);
        cx_buf_printf(b, "chaosloco_agent_proxy_connections_total{proxy=\"%s\"} %llu\n",
                      proxy_name(a->proxies[i]), (unsigned long long)s.conns_accepted);
    }
    family(b, "chaosloco_agent_proxy_connections_open", "gauge", "Connections open through a proxy now.");
    for (int i = 0; i < a->nproxies; i++) {
        proxy_stats s;
        proxy_stats_get(a->proxies[i], &s);
        cx_buf_printf(b, "chaosloco_agent_proxy_connections_open{proxy=\"%s\"} %llu\n",
                      proxy_name(a->proxies[i]), (unsigned long long)s.conns_open);
    }

    family(b, "chaosloco_agent_halted", "gauge", "1 while halted (new faults refused).");
    cx_buf_printf(b, "chaosloco_agent_halted %d\n", agent_halted(a));
    family(b, "chaosloco_agent_lease_held", "gauge", "1 while a harness lease is held.");
    cx_buf_printf(b, "chaosloco_agent_lease_held %d\n", agent_lease_held(a));
    pthread_mutex_lock(&a->lock);
    long long lapses = (long long)a->lease_lapses;
    pthread_mutex_unlock(&a->lock);
    family(b, "chaosloco_agent_lease_lapses_total", "counter",
           "Leases that lapsed (dead-man's switch fired).");
    cx_buf_printf(b, "chaosloco_agent_lease_lapses_total %lld\n", lapses);
    family(b, "chaosloco_agent_uptime_seconds", "gauge", "Seconds since the agent started.");
    cx_buf_printf(b, "chaosloco_agent_uptime_seconds %.3f\n",
                  (double)(cx_mono_ms() - a->started_mono_ms) / 1000.0);
}
