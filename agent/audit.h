/* audit.h - the agent's append-only audit log of mutating calls.
 *
 * One JSON object per line in <state-dir>/audit.jsonl:
 *   {"t_real", "t_mono_ms", "method", "path", "status", "fault_id" (or null),
 *    "auth": "token"|"none"|"bad", "detail" (or null)}
 * ("open", an unauthenticated Toxiproxy call in compat mode, is found only
 * in logs written before issue 28.)
 * Strings are written as received when they are well-formed UTF-8; any
 * other byte (and every control character) appears as the text \xHH, so
 * a request with a hostile path is still audited.
 * Each line is written with one write(2) on an O_APPEND descriptor, so
 * concurrent handlers never interleave and a crash loses at most the line
 * being written. Never rewritten, never truncated by the agent.
 */
#ifndef AGENT_AUDIT_H
#define AGENT_AUDIT_H

#include <stddef.h>

typedef struct audit audit;

/* Open (create) path for appending. NULL + err. */
audit *audit_new(const char *path, char *err, size_t errlen);
void audit_free(audit *a);
/* Append one record. fault_id and detail may be NULL. Thread-safe. */
void audit_log(audit *a, const char *method, const char *path, int status, const char *fault_id,
               const char *auth, const char *detail);

#endif
