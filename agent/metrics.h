/* metrics.h - the agent's Prometheus text exposition (GET /metrics).
 *
 * Every family has HELP and TYPE lines and a unit-suffixed name:
 *   chaosloco_agent_faults_active{type}                gauge
 *   chaosloco_agent_faults_total{type,result}          counter (applied|failed|rejected)
 *   chaosloco_agent_fault_reverts_total{type,reason}   counter
 *   chaosloco_agent_unit_up                            gauge (1 alive and not paused)
 *   chaosloco_agent_unit_restarts_total                counter
 *   chaosloco_agent_unit_incarnation                   gauge
 *   chaosloco_agent_unit_log_bytes_total               counter
 *   chaosloco_agent_proxy_bytes_total{proxy,direction} counter (upstream|downstream)
 *   chaosloco_agent_proxy_connections_total{proxy}     counter
 *   chaosloco_agent_proxy_connections_open{proxy}      gauge
 *   chaosloco_agent_halted                             gauge
 *   chaosloco_agent_lease_held                         gauge
 *   chaosloco_agent_lease_lapses_total                 counter
 *   chaosloco_agent_uptime_seconds                     gauge
 */
#ifndef AGENT_METRICS_H
#define AGENT_METRICS_H

#include "agent/agent.h"
#include "common/buf.h"

/* Append the whole exposition to b. */
void metrics_render(agent *a, cx_buf *b);

#endif
