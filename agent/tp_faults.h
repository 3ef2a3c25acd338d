/* tp_faults.h - the fault kinds behind the Toxiproxy-compatible API.
 *
 * What it is: three agent-private injectors (not in injector_table: the v1
 * API cannot ask for them; agent/toxiproxy.c registers them through
 * reg_spec.inj), so that everything a Toxiproxy client changes is a
 * registered fault, undone by DELETE, halt, lease lapse and shutdown
 * like any other (with no expiry: they last until deleted, as in
 * Toxiproxy):
 *
 *   type            target      params                         revert
 *   toxic           proxy name  {proxy, toxic: Toxiproxy JSON}  remove the toxic
 *   proxy_disabled  proxy name  {proxy}                         enable the proxy
 *   proxy           "unit"      {name, listen, upstream,        delete the proxy (and, with it,
 *                                enabled}                        whatever is on it)
 *
 * None of them outlives the agent process (proxies and their toxics die
 * with it), so none has an undo record for the crash sweep.
 * What it is not: the HTTP handlers (toxiproxy.c) or the proxy itself
 * (injectors/proxy/).
 */
#ifndef AGENT_TP_FAULTS_H
#define AGENT_TP_FAULTS_H

#include <jansson.h>
#include <stddef.h>

#include "injectors/injector.h"

extern const injector tp_toxic_injector;
extern const injector tp_disable_injector;
extern const injector tp_proxy_injector;

/* The name a toxic gets: its "name", else Toxiproxy's "<type>_<stream>"
 * (stream defaulting to downstream). Points into toxic or buf. */
const char *tp_toxic_name(json_t *toxic, char *buf, size_t len);

#endif
