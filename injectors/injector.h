/* injector.h - the one interface every fault kind implements.
 *
 * An injector is a const table of functions registered by name in
 * injectors/injector.c (injector_table); each kind lives in its own file
 * under injectors/kinds/ and declares there its params (type, range, unit,
 * default, help) and traits, from which everything else that names the
 * kinds is made or checked (docs/internals/injectors.md). The agent owns
 * the lifecycle:
 *
 *   prepare(params) ──► apply(target) ──► [tick()...] ──► revert(target)
 *        │ 400 on bad params   │ evidence filled          │ idempotent, also
 *        ▼                     ▼                          │ when the unit died
 *     rejected             active ───── expiry / DELETE / halt / lease lapse
 *
 * After an agent crash, the persisted undo record of every fault that was
 * active is handed to sweep() at the next agent start, before anything else
 * runs, so that nothing a dead agent did stays done.
 *
 * An injector never exits, never blocks longer than a few ms in apply/tick/
 * revert (duty cycles are driven by tick), and never keeps pointers into
 * params after prepare returns.
 */
#ifndef INJ_INJECTOR_H
#define INJ_INJECTOR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proxy;
struct inj_target;

/* What the agent lends an injector about the unit it supervises. Borrowed:
 * valid during each call only. */
typedef struct inj_target {
    const char *unit_id;        /* the agent's --id */
    pid_t pid;                  /* unit's main process (its own process group); 0 if not running */
    int pidfd;                  /* pidfd of pid, or -1 */
    const char *state_dir;      /* agent state dir (injector scratch files go here) */
    const char *hook_dir;       /* in-band hook dir read by the learner (CHAOSLOCO_HOOK_DIR) */
    const char *faketime_file;  /* libfaketime timestamp file the unit was started with, or NULL */
    const char *diskfault_file; /* disk-fault shim control file the unit was started with, or NULL */
    struct proxy **proxies;     /* the unit's TCP proxies */
    int nproxies;
    /* Ask the supervisor to treat the next exit of the unit as injected
     * (not a crash) and to restart it after delay_ms (< 0: do not restart). */
    void (*expect_exit)(struct inj_target *t, int64_t restart_after_ms);
    void *agent; /* for expect_exit */
} inj_target;

/* ---- the kind's declaration: params and traits ---- */

/* The JSON type of one param. */
typedef enum inj_ptype {
    INJ_INT,    /* JSON integer in [min, max] */
    INJ_NUMBER, /* JSON number (integer or real) in [min, max] */
    INJ_STRING, /* JSON string of 1..max bytes, no NUL */
    INJ_ENUM,   /* JSON string, one of values */
    INJ_LIST,   /* non-empty JSON array of distinct members of values */
} inj_ptype;

/* inj_param.flags */
#define INJ_REQUIRED 0x1u /* must be given */
#define INJ_NODEF 0x2u    /* optional without a default value: absent means what help says */
/* prepare() decodes it itself (its range depends on another param);
 * inj_params_decode only admits the key */
#define INJ_CUSTOM 0x4u

/* One key of a kind's params object. A kind lists them in a {NULL}-
 * terminated array; that array is what validates the params
 * (inj_params_decode), what --list-faults, GET /v1/fault-kinds, the
 * dashboard's form and docs/faults.md show. */
typedef struct inj_param {
    const char *name;          /* key in params: "grace_ms" */
    inj_ptype type;            /* JSON type */
    unsigned flags;            /* INJ_REQUIRED | INJ_NODEF | INJ_CUSTOM */
    double min, max;           /* INT/NUMBER: range, inclusive; STRING: max = length in bytes */
    double (*max_fn)(void);    /* max that depends on the host (online CPUs), or NULL: max */
    const char *max_note;      /* the upper bound in words when it is not max ("online CPUs",
                                  "period_ms-1"), or NULL */
    double def;                /* INT/NUMBER default (unless INJ_REQUIRED/INJ_NODEF) */
    const char *def_str;       /* STRING/ENUM default; LIST: NULL = every value */
    const char *const *values; /* ENUM/LIST: the allowed strings, NULL-terminated */
    const char *unit;          /* "ms", "s", "bytes", "KB/s", "us", or NULL */
    const char *help;          /* one line, without the type, range, unit and default */
} inj_param;

/* injector.traits: what the agent and the harness must know about a kind
 * without naming it. */
/* stops/freezes the unit's processes while active: the registry's stop
 * rule (at most one; kill/preempt end it first) */
#define INJ_TRAIT_STOPS_UNIT 0x01u
#define INJ_TRAIT_TERMINATES 0x02u /* ends the unit by a signal that must land on a running unit */
#define INJ_TRAIT_TAKES_DOWN 0x04u /* takes the learner out of training while active */
#define INJ_TRAIT_TOXICITY 0x08u   /* takes the request's top-level toxicity as params.toxicity */
#define INJ_TRAIT_NETWORK 0x10u    /* acts on the unit's proxies (params.proxy / target name one) */

typedef struct injector {
    const char *type;           /* fault type name in the API: "pause" */
    const char *summary;        /* one paragraph for --list-faults, the API and docs */
    const inj_param *params;    /* the params object's keys, {NULL}-terminated; NULL = none */
    unsigned traits;            /* INJ_TRAIT_* */
    const char *nonstop_method; /* INJ_TRAIT_STOPS_UNIT kinds with a params.method (and
                                   evidence.method) under which they stop nothing ("cgroup" for
                                   cpu); NULL: always stops */
    /* Validate params strictly (unknown keys, ranges) and build a private
     * ctx. seed is the fault's seed for any randomness. CX_EINVAL + err on
     * bad input; nothing is changed. */
    int (*prepare)(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen);
    /* Make the fault take effect on t. Fills evidence (an object owned by
     * the caller) with what shows it took effect (e.g. {"proc_state":"T"}).
     * On failure the fault is not active and nothing is left changed. */
    int (*apply)(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen);
    /* Called about every 10 ms while active, for duty cycles; may be NULL. */
    void (*tick)(void *ctx, inj_target *t, int64_t now_mono_ms);
    /* Undo. Idempotent; succeeds when the unit is gone. May refresh evidence. */
    int (*revert)(void *ctx, inj_target *t, char *err, size_t errlen);
    /* What to persist so that sweep() can undo this fault after a crash
     * (new reference; NULL if nothing outlives the agent process). */
    json_t *(*undo_record)(void *ctx);
    /* Undo from a persisted record at agent start; may be NULL. */
    int (*sweep)(json_t *record, inj_target *t, char *err, size_t errlen);
    void (*free)(void *ctx);
} injector;

/* NULL-terminated, in docs order: the one list of fault kinds. */
extern const injector *const injector_table[];
/* By type name, or NULL. */
const injector *injector_find(const char *type);

/* The traits of the kind named type; 0 for a name not in the table. */
unsigned injector_traits_of(const char *type);
/* 1 if the kind named type has every trait in mask. */
int injector_has_trait(const char *type, unsigned mask);

/* A param's upper bound on this host (max_fn() or max). */
double inj_param_max(const inj_param *p);

/* The kind as JSON (new reference): {type, summary, traits: [names],
 * nonstop_method, sweep: bool, params: [{name, type: "integer"|"number"|
 * "string"|"array", enum?: [..], required, min?, max?, max_note?,
 * default?, unit?, help}]}. Ranges are this host's (max_fn). */
json_t *injector_describe(const injector *inj);
/* Every kind of injector_table, in order (new reference): what GET
 * /v1/fault-kinds serves. */
json_t *injector_table_json(void);
/* One param in words, the same on every host (max_note, not max_fn):
 * "integer 0..600000 ms, default 5000", "number 0.01..online CPUs,
 * required", "\"auto\" | \"freezer\" | \"signal\", default \"auto\"".
 * What --list-faults and docs/faults.md print. */
void inj_param_text(const inj_param *p, char *buf, size_t len);
/* Name of one INJ_TRAIT_* bit ("stops_unit"), or NULL. */
const char *injector_trait_name(unsigned bit);

#endif
