/* experiment.h - an experiment file: load, validate strictly, expose.
 *
 * An experiment is data (DESIGN §5): a topology, hypotheses checked before
 * (steady_state) and after (verify) a method of timed fault actions, an
 * optional seeded Poisson chaos schedule, stop conditions and rollbacks.
 * This module only reads and checks the file; schedule.h turns it into a
 * timeline and the runner (part 2) executes it.
 *
 * Validation collects EVERY problem, each naming its JSON path and what was
 * expected (`$.method[1].targets.ids[0]: expected a learner id in 0..3,
 * got 7`); unknown keys are errors. Fault types are checked against the
 * agent's injector registry (injectors/injector.h injector_table), whose
 * prepare() also checks each action's params exactly as the agent will.
 *
 * The optional "ci" block is a JSON merge patch (RFC 7386) applied to the
 * document when EXP_CI is asked for: the CI variant (fewer steps, shorter
 * faults). exp_load validates the chosen variant.
 *
 * Ownership: an experiment owns everything it points to; pointers it hands
 * out are borrowed for its lifetime.
 */
#ifndef HARNESS_EXPERIMENT_H
#define HARNESS_EXPERIMENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/hypothesis.h"
#include "harness/jsonv.h"
#include "harness/netns.h"
#include "harness/topology.h"

#define EXP_MAX_LEARNERS 256
#define EXP_MAX_DURATION_MS (24LL * 3600 * 1000) /* the agent caps it lower (--max-duration-ms) */
#define EXP_WAIT_S 30.0 /* default wait_s: how long an action waits for its unit to be running */
/* default topology.attach.wait_s: how long an attaching harness waits for the
 * syncer and every agent to answer (a cluster engine starts them in any
 * order, and a busy one may take minutes to start a job step) */
#define EXP_ATTACH_WAIT_S 300.0

enum exp_flags {
    EXP_CI = 1 << 0, /* apply the "ci" merge patch before validating */
};

typedef enum exp_target_kind {
    EXP_TARGET_IDS,     /* ids[] */
    EXP_TARGET_RANDOM,  /* random N distinct learners (seeded) */
    EXP_TARGET_PERCENT, /* ceil(P% of M) distinct learners (seeded), at least 1 */
} exp_target_kind;

typedef struct exp_targets {
    exp_target_kind kind;
    int *ids; /* EXP_TARGET_IDS: nids learner ids, distinct, 0..M-1 */
    int nids;
    int random_n;   /* EXP_TARGET_RANDOM: 1..M */
    double percent; /* EXP_TARGET_PERCENT: (0, 100] */
} exp_targets;

typedef enum exp_when_kind {
    EXP_AT_S,          /* at_s seconds after the method starts */
    EXP_AT_OUTER_STEP, /* when the syncer's merge counter reaches at_outer_step */
    EXP_AFTER,         /* when action `after` has healed (all its faults ended) */
} exp_when_kind;

typedef struct exp_action {
    char *name;  /* unique in method[] */
    char *fault; /* fault type (agent API "type") */
    exp_targets targets;
    exp_when_kind when;
    double at_s;             /* EXP_AT_S: s >= 0 */
    int64_t at_outer_step;   /* EXP_AT_OUTER_STEP: merges >= 0 */
    int after;               /* EXP_AFTER: index into method[] */
    int64_t duration_ms;     /* ms, 1..EXP_MAX_DURATION_MS */
    json_t *params;          /* object passed to the agent as is (owned) */
    double toxicity;         /* 0..1 (1 when absent) */
    int has_toxicity;        /* toxicity was given */
    uint64_t seed;           /* the fault's seed: given, else derived from the experiment seed */
    int has_seed;            /* seed was given (a --seed override then keeps it) */
    int skip_if_not_running; /* if_not_running "skip": a unit not running when due is skipped at once */
    int64_t wait_ms;         /* if_not_running "wait" (default): how long to wait for the unit, ms */
    int until_end;           /* the fault lasts until the run ends: the horizon does not wait for its heal */
} exp_action;

typedef enum exp_dist { EXP_DIST_FIXED, EXP_DIST_EXPONENTIAL, EXP_DIST_UNIFORM } exp_dist;

typedef struct exp_chaos_fault {
    char *type;     /* fault type */
    double weight;  /* relative draw weight, > 0 */
    json_t *params; /* object (owned), {} when absent */
} exp_chaos_fault;

typedef struct exp_chaos {
    int enabled;       /* the block is present */
    double mtbf_s;     /* mean time between failures per unit, s > 0 */
    exp_dist recovery; /* recovery (fault duration) distribution */
    double mean_s;     /* fixed: the value; exponential: the mean */
    double min_s;      /* uniform: lower bound (also a floor for exponential) */
    double max_s;      /* uniform: upper bound (also a cap for exponential) */
    exp_chaos_fault *faults;
    int nfaults;
    int min_live;   /* floor K of units alive (not under a fault), 0..M */
    double start_s; /* draws start, s after the method starts */
    double end_s;   /* and end (no fault starts at or after end_s) */
} exp_chaos;

typedef struct exp_stop {
    int has_eval_loss_above;
    double eval_loss_above; /* abort when an eval loss exceeds this */
    int eval_loss_evals;    /* ... in this many consecutive evals (>= 1) */
    int nan;                /* abort on a non-finite eval loss */
    int has_no_merge_for_s;
    double no_merge_for_s; /* abort when no merge for this long, s */
    int has_agent_unreachable_s;
    double agent_unreachable_s; /* abort when an agent is unreachable this long, s */
} exp_stop;

typedef enum exp_rollback_kind {
    EXP_RB_REVERT_FAULTS, /* DELETE every active fault on the targets */
    EXP_RB_HALT,          /* POST /v1/halt */
    EXP_RB_RESUME,        /* POST /v1/resume */
} exp_rollback_kind;

typedef struct exp_rollback {
    char *name;
    exp_rollback_kind kind;
    exp_targets targets; /* default: every learner (ids 0..M-1) */
} exp_rollback;

typedef struct experiment {
    char *title;
    char *description; /* "" when absent */
    char **tags;
    int ntags;
    uint64_t seed;
    int learners;            /* M */
    json_t *training;        /* topology.training, passed to the syncer as its config (owned) */
    char *mode;              /* training.mode (default "decoupled") */
    int quorum;              /* training.quorum (default 1) */
    int64_t steps;           /* training.steps, 0 when absent (syncer default) */
    int64_t min_tokens;      /* horizon.min_tokens: tokens a run trains at least; 0 = M x steps x batch */
    int64_t min_merges;      /* horizon.min_merges: merges (outer steps) a run sees at least; 0 = none */
    char *attach_syncer;     /* topology.attach.syncer URL, NULL = launch locally */
    char **attach_agents;    /* topology.attach.agents URLs (NULL entries where invalid) */
    int nattach_agents;      /* entries in attach_agents (== learners when valid) */
    char *attach_token_file; /* topology.attach.token_file: every agent's token, or NULL */
    char **attach_agent_token_files;     /* per agent: its agents[i].token_file, or NULL (token_file) */
    char *attach_ca_file;                /* topology.attach.ca_file: CA of https syncer and agents, or NULL */
    char *attach_syncer_credential_file; /* topology.attach.syncer_credential_file, or NULL */
    double attach_wait_s;                /* topology.attach.wait_s (default EXP_ATTACH_WAIT_S) */
    topo_trainer *trainer; /* topology.trainer: a foreign trainer's commands, NULL = chaosloco's own */
    netns_spec network;    /* topology.network; kind NETNS_LOOPBACK when absent */
    hyp_spec **steady_state;
    int nsteady;
    exp_action *method;
    int nmethod;
    exp_chaos chaos;
    exp_stop stop;
    exp_rollback *rollbacks;
    int nrollbacks;
    hyp_spec **verify;
    int nverify;
    json_t *doc; /* the validated document (after the ci patch if any) */
} experiment;

/* The experiment file's top-level keys, declared once (param.h): the
 * loader decodes them with param_decode, and the docs' table of them and
 * the schema's top-level "properties" are generated from it
 * (harness/tools/params_docs.c). Its OBJECT members with fields (horizon)
 * carry their own keys; the other OBJECT and ARRAY members are decoded by
 * code of their own (exp_*.c) and their schema is hand-written. */
extern const param_def exp_file_params[];
/* $.topology.attach, an OBJECT with fields (exp_topology.c): its keys,
 * declared once like exp_file_params'; its schema is generated at
 * $defs.topology.properties.attach. */
extern const param_def exp_topology_attach;

/* Validate a decoded document. On success *out is a new experiment and 0
 * is returned; otherwise CX_EINVAL, *out NULL, every problem in d, and err
 * says how many. d may be NULL (only err then). */
int exp_parse(const json_t *doc, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen);
/* Load and validate a file. A syntax error is one diag entry
 * "FILE:LINE:COLUMN: reason"; duplicate keys are syntax errors. */
int exp_load(const char *path, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen);
/* The same from a string (tests, HTTP). */
int exp_load_string(const char *text, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen);
void exp_free(experiment *e);

/* The learners rollback rb acts on (the runner's revert and ctk.c's
 * rollbacks agree by asking this): its ids, every learner when none, else
 * (random N / percent P) the first N. Writes up to EXP_MAX_LEARNERS ids;
 * returns how many. */
int exp_rollback_targets(const experiment *e, const exp_rollback *rb, int *ids);
/* "revert_faults", "halt" or "resume": the file's name of a rollback kind. */
const char *exp_rollback_kind_name(exp_rollback_kind k);

/* Index of the action named name in method[], or -1. */
int exp_action_index(const experiment *e, const char *name);

/* The seed of method[idx]'s fault when the file gives none. */
uint64_t exp_action_seed(uint64_t run_seed, int idx);

/* Fault types known to this build (injector_table's, in its order):
 * NULL-terminated, static. */
const char *const *exp_fault_types(void);
int exp_fault_known(const char *type);
/* The name of the fault the runner performs itself, not an agent (method
 * actions only; harness/fault_kinds.h hx_harness_kinds is its table entry):
 * "syncer_restart" kills the launched syncer (params.signal KILL|TERM,
 * default KILL) and starts it again after params.down_ms (default the
 * action's duration_ms) on the same port and state dir. Targets are
 * required like any action's but ignored (one restart per action). */
#define EXP_SYNCER_RESTART "syncer_restart"

/* RFC 7386 merge patch: a new document = target with patch applied. */
json_t *exp_merge_patch(const json_t *target, const json_t *patch);

#endif
