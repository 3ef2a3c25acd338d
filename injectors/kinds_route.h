/* kinds_route.h - the fault-kinds document and its handler, one for the
 * two servers that answer it: the agent (GET /v1/fault-kinds, api.c) and
 * the dashboard (GET /api/fault-kinds, whose inject form is built from it).
 *
 * The document is {"kinds": injector_table_json()}: every fault kind with
 * its params and traits, from injector_table (injectors/injector.h). It
 * is header-only so that the dashboard, which links cx_injectors but not
 * the agent, serves the very same thing. The handler ignores its ctx and
 * request; it never fails short of memory (then a 500, as
 * cx_http_reply_json does).
 */
#ifndef INJECTORS_KINDS_ROUTE_H
#define INJECTORS_KINDS_ROUTE_H

#include <jansson.h>

#include "common/http_server.h"
#include "injectors/injector.h"

/* A cx_http_route handler: 200 with the fault-kinds document. */
static inline int api_fault_kinds(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    (void)req;
    cx_http_reply_json(resp, 200, json_pack("{s:o}", "kinds", injector_table_json()));
    return 0;
}

#endif
