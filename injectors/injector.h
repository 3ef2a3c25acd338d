/* injector.h - the one interface every fault kind implements.
 *
 * An injector is a const table of functions registered by name in
 * injectors/injector.c (injector_table). The agent owns the lifecycle:
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

typedef struct injector {
    const char *type;    /* fault type name in the API: "pause" */
    const char *summary; /* one line for --help and docs */
    const char *params;  /* one line: the params object's keys, units, ranges */
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

/* NULL-terminated, in docs order. */
extern const injector *const injector_table[];
/* By type name, or NULL. */
const injector *injector_find(const char *type);

#endif
