/* registry.h - the agent's fault registry: what is active, what to undo,
 * and the revert guarantee.
 *
 * What it is: every fault the agent injects goes through here. A fault is
 * validated (type, duration, toxicity, the injector's own params check),
 * written to <state-dir>/faults.json BEFORE it is applied (with the
 * injector's undo record), applied, ticked about every 10 ms, and reverted
 * on expiry, DELETE, halt, lease lapse, agent shutdown or unit exit. At the
 * next agent start, reg_sweep_previous() hands every record a crashed agent
 * left behind to its injector's sweep(). Ended faults are kept in memory
 * (the last REG_KEEP_ENDED) with their evidence and revert reason.
 *
 * What it is not: the HTTP layer (agent/api.c) or the process supervisor.
 * It reaches the unit only through the target hooks below.
 *
 * Threading: one mutex; every function may be called from any thread.
 * Injector calls run under it (they are bounded to a few ms), and the hooks
 * are called under it, so a hook must never call back into the registry.
 * Only the faults.json write before an apply is made under it; every other
 * write (after a revert, an expiry, an apply) is made by the calling thread
 * after it released the mutex, before the function returns.
 */
#ifndef AGENT_REGISTRY_H
#define AGENT_REGISTRY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "injectors/injector.h"

#define REG_KEEP_ENDED 1000
#define REG_MAX_ACTIVE 256

typedef struct reg reg;

/* How the registry borrows the unit. target_get fills t for a fault whose
 * target is target_name ("unit" = the unit and all its proxies, or one
 * proxy's name = the unit with just that proxy); CX_ENOTFOUND (or
 * CX_EINVAL) + err when the name is unknown. target_put releases what
 * target_get acquired. A fault whose target is gone when it is reverted
 * (a proxy created through the Toxiproxy API and deleted since, with
 * everything on it) has nothing left to undo: it ends as reverted, with
 * evidence.target_gone. */
typedef struct reg_hooks {
    int (*target_get)(void *ctx, const char *target_name, inj_target *t, char *err, size_t errlen);
    void (*target_put)(void *ctx, inj_target *t);
    /* Injector by type name; NULL means injector_find (tests plug their own). */
    const injector *(*find)(const char *type);
    /* Crash sweep: may the undo record of a previous agent's fault of this
     * type be handed to its injector's sweep()? 0 yes; otherwise err says
     * why and the record is not swept (it ends "failed", logged). NULL =
     * every record is swept (unit tests). The agent confines it to its own
     * state dir, cgroups and unit (faults.json is a file anyone with write
     * access to the state dir can forge). */
    int (*sweep_check)(void *ctx, const char *type, const json_t *undo, char *err, size_t errlen);
    void *ctx;
} reg_hooks;

/* A fault request, already decoded from JSON (the API does the strict
 * decoding; the registry checks ranges). Borrowed. */
typedef struct reg_spec {
    const char *type;    /* injector type name */
    const char *target;  /* NULL or "unit" or a proxy name */
    json_t *params;      /* object or NULL (= {}) */
    int64_t duration_ms; /* > 0, <= max_duration_ms; ignored with until_deleted */
    int until_deleted;   /* no expiry: the fault lasts until it is reverted (DELETE,
                            halt, lease lapse when made under a lease, shutdown); for
                            what the Toxiproxy API makes, as Toxiproxy keeps it */
    int has_toxicity;    /* toxicity given */
    double toxicity;     /* 0..1 */
    int has_seed;        /* seed given */
    uint64_t seed;       /* randomness of the injector */
    int lease;           /* created while a lease was held */
    const char *origin;  /* "api" or "toxiproxy" (informational) */
    const char *tag;     /* lookup key for reg_find_tag ("proxy/toxic"), or NULL */
    const injector *inj; /* NULL: injector_find(type); else this injector
                            (the Toxiproxy layer's own), type only names it */
} reg_spec;

/* NULL + err on failure. Reads nothing yet (see reg_sweep_previous). */
reg *reg_new(const char *state_dir, int64_t max_duration_ms, const reg_hooks *hooks, char *err,
             size_t errlen);
/* Frees without reverting (call reg_revert_all first). NULL is a no-op. */
void reg_free(reg *r);

/* Agent start: sweep every fault a previous agent left in faults.json,
 * keep them as ended records (revert_reason "agent_restart"), and rewrite
 * faults.json empty. *nswept gets the count. A corrupt file is renamed to
 * faults.json.corrupt and reported as CX_ECORRUPT (nothing can be swept). */
int reg_sweep_previous(reg *r, int *nswept, char *err, size_t errlen);

/* Validate, persist, apply. Returns 0 and *record (new reference) with
 * state "active". On a validation failure CX_EINVAL + err and nothing
 * changed (*record NULL). A fault that stops the unit (pause, straggle,
 * cpu duty cycle) while another one is active, or while a preempt is in
 * its grace period: CX_ECONFLICT + err naming that fault, nothing changed
 * (*record NULL). A kill/preempt first reverts the active stopping faults
 * (revert_reason "unit_exit"). When apply fails: the fault's code + err
 * and *record holds the "failed" record (nothing left active). The rule
 * is spelled out in registry.c and docs/faults.md. */
int reg_create(reg *r, const reg_spec *spec, json_t **record, char *err, size_t errlen);

/* New reference to one record / all records (active first, then ended,
 * newest first). CX_ENOTFOUND when unknown. */
int reg_get(reg *r, const char *id, json_t **out);
json_t *reg_list(reg *r);

/* Revert one active fault with the given reason ("delete", ...). *out
 * (optional) gets its final record. CX_ENOTFOUND when unknown, CX_ECONFLICT
 * (and the record) when it has already ended. */
int reg_revert(reg *r, const char *id, const char *reason, json_t **out, char *err, size_t errlen);
/* Revert every active fault (lease_only: only those created under a
 * lease). Returns how many were reverted. */
int reg_revert_all(reg *r, const char *reason, int lease_only);
/* Revert, newest first, every active fault matching all given filters
 * (NULL = any): its target, its origin, and a type other than
 * except_type. Returns how many were reverted. */
int reg_revert_match(reg *r, const char *target, const char *origin, const char *except_type,
                     const char *reason);

/* Tick every active fault's injector, expire what is due. Skips (returns
 * CX_EBUSY at once) when another thread holds the registry, e.g. an HTTP
 * call fsyncing faults.json, so the agent loop never stalls behind it (a
 * skipped tick is made up 10 ms later). */
int reg_tick(reg *r, int64_t now_mono_ms);

/* Without waiting: active faults in total and of one type. CX_EBUSY when
 * the registry is busy (try again next loop). */
int reg_try_active(reg *r, const char *type, int *total, int *of_type);

/* Active faults (of one type; NULL = all). */
int reg_active(reg *r, const char *type);

/* Metrics: {"faults_total": {"type|result": n}, "reverted_total":
 * {"type|reason": n}} (new reference). */
json_t *reg_counters(reg *r);

/* Find the active fault created with this tag; copies its id into id.
 * 0 when found, CX_ENOTFOUND otherwise. */
int reg_find_tag(reg *r, const char *tag, char *id, size_t idlen);

#endif
