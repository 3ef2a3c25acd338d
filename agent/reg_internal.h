/* reg_internal.h - the fault registry's records and lists, shared by
 * registry.c (the lifecycle: create, revert, expiry, queries) and
 * reg_persist.c (faults.json and the crash sweep). Private to agent/: the
 * interface is registry.h.
 *
 * Locking: every field of struct reg but path and the w* fields is guarded
 * by lock; wlock orders the writers of faults.json (order: lock, then
 * wlock). The functions below say which lock they expect.
 */
#ifndef AGENT_REG_INTERNAL_H
#define AGENT_REG_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/registry.h"

typedef enum fault_state { F_ACTIVE, F_REVERTED, F_FAILED, F_EXPIRED } fault_state;

typedef struct fault {
    char id[32];         /* "f-<n>" */
    char *type;          /* API type name */
    const injector *inj; /* its injector */
    char *target;        /* "unit" or a proxy name */
    json_t *params;      /* as requested */
    int64_t duration_ms; /* ms; 0 = until deleted (reg_spec.until_deleted) */
    int has_toxicity;
    double toxicity; /* 0..1 */
    uint64_t seed;
    int lease;    /* created under a lease */
    char *origin; /* "api" | "toxiproxy" | "sweep" */
    char *tag;    /* reg_find_tag key or NULL */
    fault_state state;
    char created_real[40];     /* ISO-8601 */
    int64_t started_mono_ms;   /* apply time, CLOCK_MONOTONIC ms */
    int64_t ended_mono_ms;     /* 0 while active */
    int64_t expires_mono_ms;   /* started + duration; INT64_MAX until deleted */
    json_t *evidence;          /* object */
    const char *revert_reason; /* static string or NULL */
    char *error;               /* apply/revert error or NULL */
    void *ctx;                 /* injector ctx while active */
    json_t *undo;              /* for the crash sweep (persisted), or NULL */
    struct fault *next;
} fault;

struct reg {
    pthread_mutex_t lock;
    char *path;              /* <state-dir>/faults.json */
    uint64_t gen;            /* snapshot generation, bumped under lock */
    pthread_mutex_t wlock;   /* one writer of faults.json at a time (order: lock, then wlock) */
    uint64_t written_gen;    /* newest generation written (wlock) */
    int64_t max_duration_ms; /* cap on duration_ms */
    reg_hooks hooks;
    uint64_t next_id; /* persisted so ids never repeat */
    fault *active;    /* newest first */
    int nactive;
    fault *ended;           /* newest first */
    int nended;             /* <= REG_KEEP_ENDED */
    json_t *faults_total;   /* {"type|result": n} */
    json_t *reverted_total; /* {"type|reason": n} */
};

/* ---- records (reg_records.c) ---- */

/* Free f and what it owns (its injector ctx too). NULL is a no-op. */
void reg_fault_free(fault *f);
/* "active", "reverted", "failed" or "expired". */
const char *reg_state_name(fault_state s);
/* f as its API record (GET /v1/faults/{id}); now: CLOCK_MONOTONIC ms, for
 * expires_in_ms. Lock held. */
json_t *reg_fault_json(const fault *f, int64_t now);
/* map["a|b"] += 1. Lock held. */
void reg_count(json_t *map, const char *a, const char *b);
/* The active (ended) fault with this id, or NULL. Lock held. */
fault *reg_find_active(reg *r, const char *id);
fault *reg_find_ended(reg *r, const char *id);

/* ---- lifecycle (registry.c) ---- */

/* Move f (already unlinked) to the head of the ended list, trimming it to
 * REG_KEEP_ENDED. Lock held. */
void reg_push_ended(reg *r, fault *f);

/* ---- persistence (reg_persist.c) ---- */

/* A snapshot taken under the lock, written after it was released. */
typedef struct pending {
    char *text;   /* faults.json text (owned), or NULL on out of memory */
    uint64_t gen; /* its generation */
} pending;

/* Rewrite faults.json now, lock held: the write before an apply. 0 or a
 * negative cx_err with err filled. */
int reg_persist(reg *r, const fault *extra, char *err, size_t errlen);
/* Lock held: take the snapshot of the active list as it is now. */
pending reg_pending_take(reg *r);
/* Lock released: write it (and free it); a failure is logged with what. */
void reg_pending_write(reg *r, pending p, const char *what);

#endif
