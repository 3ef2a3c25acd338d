/* config.h - the training configuration shared by the syncer and learners.
 *
 * What it is: one flat struct with every training knob, its defaults, a
 * strict JSON (de)serialisation (unknown keys are errors naming the key) and
 * a flag parser. Precedence is defaults < --config FILE.json < flags. The
 * syncer is the source of truth: it sends config_to_json() at join and the
 * learner decodes it with config_from_json(), then re-applies the few keys a
 * learner may override for itself (config_learner_override()).
 * What it is not: the model or optimizer; those read their sizes from here.
 *
 * Every key has one spelling: the JSON key is the flag name without "--"
 * and with '-' turned into '_' ("--grace-cap-ms" <-> "grace_cap_ms"), except
 * "H" which is both "--H" and "H".
 */
#ifndef TRN_CONFIG_H
#define TRN_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum config_mode {
    CONFIG_MODE_DDP = 0,
    CONFIG_MODE_DDP_ELASTIC = 1,
    CONFIG_MODE_DILOCO = 2,
    CONFIG_MODE_DECOUPLED = 3,
} config_mode;

typedef enum config_encoding {
    CONFIG_ENC_F32 = 0,
    CONFIG_ENC_BF16 = 1,
    CONFIG_ENC_INT8 = 2,
    CONFIG_ENC_INT4 = 3,
    CONFIG_ENC_INT2 = 4, /* ternary {-s, 0, s}, 2.5 bits/value (for comparisons) */
    CONFIG_ENC_Q2 = 5,   /* true 2-bit code {-3s, -s, s, 3s}, 2.25 bits/value */
} config_encoding;

typedef enum config_model { CONFIG_MODEL_MLP = 0, CONFIG_MODEL_GPT = 1 } config_model;
typedef enum config_merge { CONFIG_MERGE_RDA = 0, CONFIG_MERGE_MEAN = 1 } config_merge;
typedef enum config_weights { CONFIG_WEIGHTS_TOKEN = 0, CONFIG_WEIGHTS_UNIFORM = 1 } config_weights;

typedef struct config {
    int64_t mode;          /* config_mode */
    int64_t learners;      /* M: learners the run expects */
    int64_t fragments;     /* P: parameter fragments */
    int64_t H;             /* inner steps between two sends of one fragment */
    int64_t quorum;        /* K: contributions that open the grace window (decoupled) */
    int64_t tau;           /* max contributions in flight per learner (decoupled) */
    double grace_gamma;    /* gamma in [0,1): share of existing slack used as grace */
    int64_t grace_cap_ms;  /* ms, upper bound of the grace window */
    int64_t max_staleness; /* rounds a decoupled contribution's base may lag (-1: 2 x M, >= 4) */
    double norm_bound;     /* x running median norm a contribution may reach (0 = off) */
    int64_t encoding;      /* config_encoding of contributions */
    int64_t upstream_ef;   /* 1: learners feed back what the encoding lost (not f32) */
    int64_t partial_scale; /* 1: a decoupled round of k of M live learners applies k/M */
    int64_t merge;         /* config_merge (decoupled) */
    int64_t weights;       /* config_weights (decoupled) */
    double outer_lr;       /* outer Nesterov learning rate */
    double outer_momentum; /* outer Nesterov momentum mu */
    double inner_lr;       /* AdamW peak learning rate */
    int64_t warmup;        /* AdamW warmup steps */
    double weight_decay;   /* AdamW decoupled weight decay */
    int64_t steps;         /* inner steps per learner (also the cosine horizon) */
    int64_t batch;         /* sequences per inner step */
    /* ---- model (issue 11): kind and sizes ---- */
    int64_t model;                    /* config_model: model kind ("mlp" or "gpt") */
    int64_t context;                  /* C: bytes of context (mlp), sequence length T (gpt) */
    int64_t embed;                    /* E: embedding dims per byte (mlp), d_model (gpt) */
    int64_t hidden;                   /* Hd: hidden units (mlp), MLP width (gpt) */
    int64_t layers;                   /* gpt: transformer blocks L */
    int64_t heads;                    /* gpt: attention heads (divides embed) */
    int64_t threads;                  /* threads per learner (gpt pool; OpenBLAS) */
    double grad_clip;                 /* gpt: global gradient norm clip, 0 = off */
    int64_t seed;                     /* init, synthetic corpus and shard seed */
    char data[512];                   /* "fortunes", "pydoc", "synthetic" (or "") or a text file */
    int64_t eval_every_ms;            /* ms, min gap between two evals; 0 = every merge */
    int64_t eval_tokens;              /* tokens in the fixed eval set */
    int64_t checkpoint_every;         /* syncer checkpoint every N merges (0 = only at exit) */
    int64_t checkpoint_min_ms;        /* min ms between two periodic syncer checkpoints (0 = none) */
    int64_t learner_checkpoint_every; /* learner checkpoint every N inner steps (0 = exit only) */
    int64_t elastic_deadline_ms;      /* ms a barrier waits after its first arrival (0 = none) */
    int64_t heartbeat_timeout_ms;     /* ms without heartbeat before a learner is absent */
    double slowdown;                  /* learner compute padding factor (>= 1) */
} config;

/* Capacities every module sizes its arrays by (syncer slots, learner queues,
 * checkpoint records): the config refuses anything larger. */
#define CONFIG_LEARNERS_MAX 64       /* bound of --learners (M) */
#define CONFIG_FRAGMENTS_MAX 256     /* bound of --fragments (P) */
#define CONFIG_STEPS_MAX 100000000LL /* bound of --steps (any learner's own too) */
#define CONFIG_BATCH_MAX 65536LL     /* bound of --batch (any learner's own too) */

/* Defaults (see docs/training.md for the reasoning behind each). */
void config_defaults(config *c);
/* Mode- and model-dependent defaults, applied after config_defaults and
 * before the file and flags (which may override every one of them):
 * decoupled runs default to outer momentum 0.5, the others 0.9; gpt to
 * T=64, d=128, MLP 512, batch 8, 512 eval windows every 2 s; mlp to C=8,
 * E=16, Hd=128, batch 16, 4096 eval tokens after every merge. Sets mode and
 * model. config_defaults ends with (decoupled, gpt). */
void config_kind_defaults(config *c, int64_t mode, int64_t model_kind);

/* Set one key from a flag value ("--outer-lr", "0.7"). name may be given
 * with or without the leading "--". Returns CX_ENOTFOUND when name is not a
 * config key (so mains can handle their own flags), CX_EINVAL naming the
 * flag and value when the value is bad. */
int config_set_flag(config *c, const char *name, const char *value, char *err, size_t errlen);

/* Strictly decode a JSON object onto c (keys not present keep their value).
 * Unknown keys and wrong types are CX_EINVAL naming the key; where names the
 * source in messages ("config.json"). */
int config_from_json(config *c, json_t *obj, const char *where, char *err, size_t errlen);
int config_load_file(config *c, const char *path, char *err, size_t errlen);
/* A new JSON object with every key (caller owns the reference). */
json_t *config_to_json(const config *c);

/* Cross-field checks (quorum <= learners, H % fragments, ...). */
int config_validate(const config *c, char *err, size_t errlen);

/* The key's name (static, e.g. "steps") when a learner may override it
 * for itself (batch, steps, slowdown, data, encoding, ...), else NULL. name
 * is a flag or JSON key. */
const char *config_learner_override(const char *name);

/* Names of enum values ("ddp-elastic", "int4", ...). */
const char *config_mode_name(int64_t mode);
/* The modes' names, indexed by config_mode, NULL after the last (common/parse.h). */
extern const char *const config_mode_names[];
const char *config_encoding_name(int64_t enc);
const char *config_model_name(int64_t m); /* "mlp", "gpt" */
struct model_config;
/* The model's sizes from c (model_config_default, then context, embed,
 * hidden, layers, heads), with activations sized for at most max_examples
 * per chunk: gpt caps a chunk at 8 sequences (its activations grow with T),
 * mlp at 256 examples. */
void config_model_config(const config *c, int64_t max_examples, struct model_config *mc);
int config_parse_mode(const char *s, int64_t *out);
int config_parse_model(const char *s, int64_t *out);
int config_parse_encoding(const char *s, int64_t *out);

/* One line "key=value ..." with every key, for the start-up log. */
void config_format(const config *c, char *out, size_t outlen);
/* "--flag VALUE  help (default X)" lines for --help. */
void config_print_help(FILE *f, int learner_overrides_only);

#endif
