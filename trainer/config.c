/* config.c - the training configuration: one table drives defaults, flags,
 * JSON, validation and --help, so a key cannot exist in one and be missing
 * from another.
 *
 * JSON decoding is strict like cx_json_unpack(JSON_STRICT): every key of the
 * object must be in the table (else CX_EINVAL naming the key) and must have
 * the table's type. We walk the table instead of building a 30-key unpack
 * format string because the table also gives bounds and help text.
 */
#include "trainer/config.h"
#include "numerics/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/json.h"
#include "common/parse.h"
#include "numerics/encoding.h"
#include "numerics/merge.h"

/* ---- config: the key table ---- */

typedef enum key_type { KEY_INT, KEY_DOUBLE, KEY_ENUM, KEY_STRING } key_type;

typedef struct key_def {
    const char *name; /* JSON key; flag is "--" + name with '_' -> '-' */
    key_type type;
    size_t offset;             /* into struct config */
    double min, max;           /* inclusive bounds for numbers */
    const char *const *values; /* enum names, NULL-terminated (KEY_ENUM) */
    int learner_override;      /* 1: a learner may set it for itself */
    const char *help;
} key_def;

const char *const config_mode_names[] = {"ddp", "ddp-elastic", "diloco", "decoupled", NULL};
static const char *const onoff_names[] = {"off", "on", NULL};
/* encoding, merge and weights share the library's tables; their values must
 * be the library's enums, so the casts from the config's int64_t are safe */
_Static_assert(CONFIG_ENC_F32 == (int)ENCODING_F32 && CONFIG_ENC_BF16 == (int)ENCODING_BF16 &&
                   CONFIG_ENC_INT8 == (int)ENCODING_INT8 && CONFIG_ENC_INT4 == (int)ENCODING_INT4 &&
                   CONFIG_ENC_INT2 == (int)ENCODING_INT2 && CONFIG_ENC_Q2 == (int)ENCODING_Q2,
               "config_encoding values are encoding_kind values");
_Static_assert(CONFIG_MERGE_RDA == (int)MERGE_RULE_RDA && CONFIG_MERGE_MEAN == (int)MERGE_RULE_MEAN,
               "config_merge values are merge_rule values");
_Static_assert(CONFIG_WEIGHTS_TOKEN == (int)MERGE_WEIGHTS_TOKEN &&
                   CONFIG_WEIGHTS_UNIFORM == (int)MERGE_WEIGHTS_UNIFORM,
               "config_weights values are merge_weighting values");
static const char *const model_names[] = {"mlp", "gpt", NULL};

#define OFF(f) offsetof(config, f)
static const key_def keys[] = {
    {"mode", KEY_ENUM, OFF(mode), 0, 0, config_mode_names, 0,
     "training mode: ddp, ddp-elastic, diloco or decoupled"},
    {"learners", KEY_INT, OFF(learners), 1, CONFIG_LEARNERS_MAX, NULL, 0, "M, learners the run expects"},
    {"fragments", KEY_INT, OFF(fragments), 1, CONFIG_FRAGMENTS_MAX, NULL, 0, "P, parameter fragments"},
    {"H", KEY_INT, OFF(H), 1, 100000, NULL, 0,
     "inner steps between two sends of one fragment (diloco, decoupled)"},
    {"quorum", KEY_INT, OFF(quorum), 1, 64, NULL, 0,
     "K, contributions that close a decoupled round (then the grace window)"},
    {"tau", KEY_INT, OFF(tau), 1, 64, NULL, 0,
     "decoupled: steps of overlap (a merged value is applied tau steps after its send) and contributions in "
     "flight per learner"},
    {"grace_gamma", KEY_DOUBLE, OFF(grace_gamma), 0, 0.999, NULL, 0,
     "gamma < 1, share of the existing slack used as grace window"},
    {"grace_cap_ms", KEY_INT, OFF(grace_cap_ms), 0, 600000, NULL, 0, "upper bound of the grace window, ms"},
    {"max_staleness", KEY_INT, OFF(max_staleness), -1, 1000000, NULL, 0,
     "rounds of its fragment a decoupled contribution's base may lag before it is rejected (-1: 2 x "
     "learners, at least 4)"},
    {"norm_bound", KEY_DOUBLE, OFF(norm_bound), 0, 1e6, NULL, 0,
     "clip a contribution's L2 norm to this multiple of its fragment's running median norm per step x "
     "its steps (H..4H; after a warm-up of accepted ones; 0: off)"},
    {"encoding", KEY_ENUM, OFF(encoding), 0, 0, encoding_names, 1,
     "encoding of outer gradients and downstream deltas: f32, bf16, int8, int4, int2 (ternary) or q2 "
     "(2-bit)"},
    {"upstream_ef", KEY_ENUM, OFF(upstream_ef), 0, 0, onoff_names, 1,
     "upstream error feedback: a learner adds what the encoding lost of a fragment's last contribution to "
     "its next one (on or off; no effect with f32)"},
    {"merge", KEY_ENUM, OFF(merge), 0, 0, merge_rule_names, 0, "decoupled merge rule: rda or mean"},
    {"partial_scale", KEY_ENUM, OFF(partial_scale), 0, 0, onoff_names, 0,
     "decoupled: a round merged from k of the M live learners applies k/M of its outer step (on or off)"},
    {"weights", KEY_ENUM, OFF(weights), 0, 0, merge_weighting_names, 0,
     "decoupled contribution weights: token or uniform"},
    {"outer_lr", KEY_DOUBLE, OFF(outer_lr), 0, 10, NULL, 0, "outer Nesterov learning rate"},
    {"outer_momentum", KEY_DOUBLE, OFF(outer_momentum), 0, 0.999, NULL, 0,
     "outer Nesterov momentum (decoupled: default 0.5)"},
    {"inner_lr", KEY_DOUBLE, OFF(inner_lr), 1e-7, 1, NULL, 0, "AdamW peak learning rate"},
    {"warmup", KEY_INT, OFF(warmup), 0, 10000000, NULL, 0,
     "AdamW linear warmup steps; default 60 (gpt), 20 (mlp)"},
    {"weight_decay", KEY_DOUBLE, OFF(weight_decay), 0, 1, NULL, 0, "AdamW weight decay"},
    {"steps", KEY_INT, OFF(steps), 1, CONFIG_STEPS_MAX, NULL, 1,
     "inner steps per learner (also the cosine decay horizon)"},
    {"batch", KEY_INT, OFF(batch), 1, CONFIG_BATCH_MAX, NULL, 1, "sequences per inner step"},
    /* ---- model (issue 11) ---- */
    {"model", KEY_ENUM, OFF(model), 0, 0, model_names, 0, "model kind: mlp or gpt (byte-level transformer)"},
    {"context", KEY_INT, OFF(context), 1, 128, NULL, 0, "C, context bytes (mlp) or sequence length T (gpt)"},
    {"embed", KEY_INT, OFF(embed), 1, 1024, NULL, 0, "E, embedding dims per byte (mlp) or d_model (gpt)"},
    {"hidden", KEY_INT, OFF(hidden), 1, 16384, NULL, 0, "Hd, hidden units (mlp) or MLP width (gpt)"},
    {"layers", KEY_INT, OFF(layers), 1, 64, NULL, 0, "gpt: transformer blocks"},
    {"heads", KEY_INT, OFF(heads), 1, 1024, NULL, 0, "gpt: attention heads (must divide --embed)"},
    {"threads", KEY_INT, OFF(threads), 1, 64, NULL, 1,
     "threads per learner: the gpt model's loops and matmuls (OpenBLAS for mlp)"},
    {"grad_clip", KEY_DOUBLE, OFF(grad_clip), 0, 1e6, NULL, 0,
     "clip each step's global gradient norm to this (0: off); a ddp syncer scales a gradient above it down "
     "to it. Default 1 (gpt), 20 (mlp)"},
    {"seed", KEY_INT, OFF(seed), 0, 4294967295.0, NULL, 0, "seed of init, synthetic corpus and shards"},
    {"data", KEY_STRING, OFF(data), 0, 0, NULL, 1,
     "training text: fortunes (Debian's fortunes package), pydoc (python3.11-doc's reST sources), "
     "synthetic (Markov corpus) or a FILE"},
    {"eval_every_ms", KEY_INT, OFF(eval_every_ms), 0, 86400000, NULL, 0,
     "min ms between two evals of the global model (0: after every merge)"},
    {"eval_tokens", KEY_INT, OFF(eval_tokens), 16, 10000000, NULL, 0, "tokens in the fixed eval set"},
    {"checkpoint_every", KEY_INT, OFF(checkpoint_every), 0, 100000000, NULL, 0,
     "syncer checkpoint every N merges (0: only at exit)"},
    {"checkpoint_min_ms", KEY_INT, OFF(checkpoint_min_ms), 0, 86400000, NULL, 0,
     "min ms between two periodic syncer checkpoints (0: no minimum; the exit one always runs)"},
    {"learner_checkpoint_every", KEY_INT, OFF(learner_checkpoint_every), 0, 100000000, NULL, 0,
     "learner checkpoint every N inner steps (0: only at exit)"},
    {"elastic_deadline_ms", KEY_INT, OFF(elastic_deadline_ms), 0, 3600000, NULL, 0,
     "ms a barrier waits after its first arrival before closing with whoever came (ddp-elastic: 0 = "
     "twice the median recent compute time; diloco: only when > 0)"},
    {"heartbeat_timeout_ms", KEY_INT, OFF(heartbeat_timeout_ms), 100, 3600000, NULL, 0,
     "ms without a heartbeat before a learner is marked absent"},
    {"slowdown", KEY_DOUBLE, OFF(slowdown), 1, 1000, NULL, 1,
     "compute padding: sleep (X-1) x the step's compute time after each inner step"},
};
#undef OFF
#define NKEYS (sizeof keys / sizeof keys[0])

void config_defaults(config *c)
{
    memset(c, 0, sizeof *c);
    c->learners = 2;
    c->fragments = 4;
    c->H = 24;
    c->quorum = 1;
    c->tau = 2;
    c->grace_gamma = 0.5;
    c->grace_cap_ms = 2000;
    c->max_staleness = -1; /* 2 x M, at least 4 (trainer/syncer/rounds.c) */
    c->norm_bound = 10.0;
    c->encoding = CONFIG_ENC_F32;
    c->upstream_ef = 1;
    c->merge = CONFIG_MERGE_RDA;
    c->partial_scale = 1;
    c->weights = CONFIG_WEIGHTS_TOKEN;
    c->outer_lr = 0.7;
    c->inner_lr = 3e-3;
    c->weight_decay = 0.1;
    c->steps = 600;
    c->layers = 4;
    c->heads = 4;
    c->threads = 1;
    c->seed = 1;
    snprintf(c->data, sizeof c->data, "fortunes");
    c->checkpoint_every = 10;
    c->checkpoint_min_ms = 2000;
    c->learner_checkpoint_every = 100;
    c->elastic_deadline_ms = 0;
    c->heartbeat_timeout_ms = 5000;
    c->slowdown = 1.0;
    config_kind_defaults(c, CONFIG_MODE_DECOUPLED, CONFIG_MODEL_GPT);
}

void config_kind_defaults(config *c, int64_t mode, int64_t model_kind)
{
    c->mode = mode;
    c->model = model_kind;
    /* asynchronous partial merges diverge at 0.9 (docs/training.md) */
    c->outer_momentum = mode == CONFIG_MODE_DECOUPLED ? 0.5 : 0.9;
    if (model_kind == CONFIG_MODEL_GPT) {
        /* 0.83 M parameters; T=64 (docs/training.md, "the byte-level GPT") */
        c->context = 64;
        c->embed = 128;
        c->hidden = 512;
        c->batch = 8;
        c->eval_tokens = 512;    /* 512 windows x 64 predictions */
        c->eval_every_ms = 2000; /* an eval costs ~1 s of one core */
        c->grad_clip = 1.0;
        /* at the peak rate 0.003 after 20 steps of warm-up a ddp run of
         * bench/claims' shape (seed 12) went 3.37 -> 8.94 nats in one step
         * (issue 27 item 5; docs/training.md, "warm-up") */
        c->warmup = 60;
    } else {
        c->context = 8;
        c->embed = 16;
        c->hidden = 128;
        c->batch = 16;
        c->eval_tokens = 4096;
        c->eval_every_ms = 0;
        /* its honest step gradients measured 1.8-4.5 (L2, default shape, ddp):
         * 20 never clips one, and bounds what one learner can send */
        c->grad_clip = 20.0;
        c->warmup = 20;
    }
}

/* ---- config: lookup ---- */

/* Match a flag ("--grace-cap-ms", "grace-cap-ms") or key ("grace_cap_ms"). */
static const key_def *find_key(const char *name)
{
    if (strncmp(name, "--", 2) == 0)
        name += 2;
    for (size_t i = 0; i < NKEYS; i++) {
        const char *k = keys[i].name;
        size_t j = 0;
        for (; k[j] && name[j]; j++) {
            char a = k[j], b = name[j];
            if (b == '-')
                b = '_';
            if (a != b)
                break;
        }
        if (k[j] == 0 && name[j] == 0)
            return &keys[i];
    }
    return NULL;
}

static void flag_name(const key_def *k, char *out, size_t len)
{
    size_t i = 0;
    if (len < 3)
        return;
    out[0] = '-';
    out[1] = '-';
    for (; k->name[i] && i + 3 < len; i++)
        out[i + 2] = k->name[i] == '_' ? '-' : k->name[i];
    out[i + 2] = 0;
}

static int64_t *int_field(config *c, const key_def *k)
{
    return (int64_t *)((char *)c + k->offset);
}
static double *dbl_field(config *c, const key_def *k)
{
    return (double *)((char *)c + k->offset);
}
static char *str_field(config *c, const key_def *k)
{
    return (char *)c + k->offset;
}
static const int64_t *cint_field(const config *c, const key_def *k)
{
    return (const int64_t *)((const char *)c + k->offset);
}
static const double *cdbl_field(const config *c, const key_def *k)
{
    return (const double *)((const char *)c + k->offset);
}

/* ---- config: flags ---- */

int config_set_flag(config *c, const char *name, const char *value, char *err, size_t errlen)
{
    const key_def *k = find_key(name);
    char flag[64];
    if (!k)
        return cx_fail(err, errlen, CX_ENOTFOUND, "unknown option '%s'", name);
    flag_name(k, flag, sizeof flag);
    if (!value)
        return cx_fail(err, errlen, CX_EINVAL, "%s: missing value", flag);
    switch (k->type) {
    case KEY_INT:
        return cx_parse_i64(value, flag, (int64_t)k->min, (int64_t)k->max, int_field(c, k), err, errlen);
    case KEY_DOUBLE:
        return cx_parse_double(value, flag, k->min, k->max, dbl_field(c, k), err, errlen);
    case KEY_ENUM:
        if (cx_enum_value(k->values, value, int_field(c, k)) != 0) {
            char list[128];
            cx_enum_list(k->values, "|", list, sizeof list);
            return cx_fail(err, errlen, CX_EINVAL, "%s: '%s' is not one of %s", flag, value, list);
        }
        return 0;
    case KEY_STRING:
        if (strlen(value) >= sizeof c->data)
            return cx_fail(err, errlen, CX_EINVAL, "%s: value longer than %zu bytes", flag,
                           sizeof c->data - 1);
        snprintf(str_field(c, k), sizeof c->data, "%s", value);
        return 0;
    }
    return cx_fail(err, errlen, CX_EINVAL, "%s: bad key type", flag);
}

/* ---- config: JSON ---- */

static int set_from_json(config *c, const key_def *k, json_t *v, const char *where, char *err, size_t errlen)
{
    switch (k->type) {
    case KEY_INT: {
        if (!json_is_integer(v))
            return cx_fail(err, errlen, CX_EINVAL, "%s: key '%s' must be an integer", where, k->name);
        json_int_t x = json_integer_value(v);
        if ((double)x < k->min || (double)x > k->max)
            return cx_fail(err, errlen, CX_EINVAL, "%s: key '%s' = %lld is outside [%.0f, %.0f]", where,
                           k->name, (long long)x, k->min, k->max);
        *int_field(c, k) = (int64_t)x;
        return 0;
    }
    case KEY_DOUBLE: {
        if (!json_is_number(v))
            return cx_fail(err, errlen, CX_EINVAL, "%s: key '%s' must be a number", where, k->name);
        double x = json_number_value(v);
        if (!isfinite(x) || x < k->min || x > k->max)
            return cx_fail(err, errlen, CX_EINVAL, "%s: key '%s' = %g is outside [%g, %g]", where, k->name, x,
                           k->min, k->max);
        *dbl_field(c, k) = x;
        return 0;
    }
    case KEY_ENUM: {
        char list[128];
        cx_enum_list(k->values, "|", list, sizeof list);
        if (!json_is_string(v) || cx_enum_value(k->values, json_string_value(v), int_field(c, k)) != 0)
            return cx_fail(err, errlen, CX_EINVAL, "%s: key '%s' must be one of %s", where, k->name, list);
        return 0;
    }
    case KEY_STRING:
        if (!json_is_string(v))
            return cx_fail(err, errlen, CX_EINVAL, "%s: key '%s' must be a string", where, k->name);
        if (strlen(json_string_value(v)) >= sizeof c->data)
            return cx_fail(err, errlen, CX_EINVAL, "%s: key '%s' is too long", where, k->name);
        snprintf(str_field(c, k), sizeof c->data, "%s", json_string_value(v));
        return 0;
    }
    return CX_EINVAL;
}

int config_from_json(config *c, json_t *obj, const char *where, char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    config tmp = *c;
    if (!json_is_object(obj))
        return cx_fail(err, errlen, CX_EINVAL, "%s: the config must be a JSON object", where);
    json_object_foreach(obj, key, v)
    {
        const key_def *k = NULL;
        for (size_t i = 0; i < NKEYS; i++)
            if (strcmp(keys[i].name, key) == 0)
                k = &keys[i];
        if (!k)
            return cx_fail(err, errlen, CX_EINVAL, "%s: unknown key '%s'", where, key);
        int rc = set_from_json(&tmp, k, v, where, err, errlen);
        if (rc)
            return rc;
    }
    *c = tmp; /* all or nothing */
    return 0;
}

int config_load_file(config *c, const char *path, char *err, size_t errlen)
{
    char why[CX_ERRLEN];
    json_t *j = cx_json_load_file(path, why, sizeof why);
    if (!j)
        return cx_fail(err, errlen, CX_EINVAL, "--config: %s", why);
    int rc = config_from_json(c, j, path, err, errlen);
    json_decref(j);
    return rc;
}

json_t *config_to_json(const config *c)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < NKEYS; i++) {
        const key_def *k = &keys[i];
        json_t *v = NULL;
        switch (k->type) {
        case KEY_INT:
            v = json_integer(*cint_field(c, k));
            break;
        case KEY_DOUBLE:
            v = json_real(*cdbl_field(c, k));
            break;
        case KEY_ENUM:
            v = json_string(k->values[*cint_field(c, k)]);
            break;
        case KEY_STRING:
            v = json_string((const char *)c + k->offset);
            break;
        }
        json_object_set_new(o, k->name, v);
    }
    return o;
}

/* ---- config: checks and names ---- */

int config_validate(const config *c, char *err, size_t errlen)
{
    if (c->quorum > c->learners)
        return cx_fail(err, errlen, CX_EINVAL, "--quorum %lld is larger than --learners %lld",
                       (long long)c->quorum, (long long)c->learners);
    if (c->mode == CONFIG_MODE_DECOUPLED && c->H % c->fragments != 0)
        return cx_fail(err, errlen, CX_EINVAL,
                       "--H %lld must be a multiple of --fragments %lld (one fragment every H/P steps)",
                       (long long)c->H, (long long)c->fragments);
    if (c->eval_tokens <= c->context)
        return cx_fail(err, errlen, CX_EINVAL, "--eval-tokens must exceed --context");
    if (c->model == CONFIG_MODEL_GPT && c->embed % c->heads != 0)
        return cx_fail(err, errlen, CX_EINVAL, "--embed %lld must be a multiple of --heads %lld (gpt)",
                       (long long)c->embed, (long long)c->heads);
    return 0;
}

const char *config_learner_override(const char *name)
{
    const key_def *k = find_key(name);
    return k && k->learner_override ? k->name : NULL;
}

const char *config_mode_name(int64_t m)
{
    return cx_enum_name(config_mode_names, m);
}
const char *config_encoding_name(int64_t e)
{
    return cx_enum_name(encoding_names, e);
}
const char *config_model_name(int64_t m)
{
    return cx_enum_name(model_names, m);
}
void config_model_config(const config *c, int64_t max_examples, model_config *mc)
{
    int64_t cap = c->model == CONFIG_MODEL_GPT ? 8 : 256;
    model_config_default(mc);
    mc->context = (int)c->context;
    mc->embed = (int)c->embed;
    mc->hidden = (int)c->hidden;
    mc->layers = (int)c->layers;
    mc->heads = (int)c->heads;
    mc->threads = (int)c->threads;
    mc->max_batch = (int)(max_examples < cap ? max_examples : cap);
}
int config_parse_mode(const char *s, int64_t *out)
{
    return cx_enum_value(config_mode_names, s, out);
}
int config_parse_model(const char *s, int64_t *out)
{
    return cx_enum_value(model_names, s, out);
}
int config_parse_encoding(const char *s, int64_t *out)
{
    return cx_enum_value(encoding_names, s, out);
}

void config_format(const config *c, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; i < NKEYS && used < outlen; i++) {
        const key_def *k = &keys[i];
        int n = 0;
        switch (k->type) {
        case KEY_INT:
            n = snprintf(out + used, outlen - used, "%s%s=%lld", i ? " " : "", k->name,
                         (long long)*cint_field(c, k));
            break;
        case KEY_DOUBLE:
            n = snprintf(out + used, outlen - used, "%s%s=%g", i ? " " : "", k->name, *cdbl_field(c, k));
            break;
        case KEY_ENUM:
            n = snprintf(out + used, outlen - used, "%s%s=%s", i ? " " : "", k->name,
                         k->values[*cint_field(c, k)]);
            break;
        case KEY_STRING:
            n = snprintf(out + used, outlen - used, "%s%s=%s", i ? " " : "", k->name,
                         c->data[0] ? c->data : "(synthetic)");
            break;
        }
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

void config_print_help(FILE *f, int learner_overrides_only)
{
    config d;
    config_defaults(&d);
    for (size_t i = 0; i < NKEYS; i++) {
        const key_def *k = &keys[i];
        char flag[64], def[64], arg[192];
        if (learner_overrides_only && !k->learner_override)
            continue;
        flag_name(k, flag, sizeof flag);
        switch (k->type) {
        case KEY_INT:
            snprintf(def, sizeof def, "%lld", (long long)*cint_field(&d, k));
            snprintf(arg, sizeof arg, "%s N", flag);
            break;
        case KEY_DOUBLE:
            snprintf(def, sizeof def, "%g", *cdbl_field(&d, k));
            snprintf(arg, sizeof arg, "%s X", flag);
            break;
        case KEY_ENUM: {
            char list[96];
            cx_enum_list(k->values, "|", list, sizeof list);
            snprintf(def, sizeof def, "%s", k->values[*cint_field(&d, k)]);
            snprintf(arg, sizeof arg, "%s %s", flag, list);
            break;
        }
        case KEY_STRING:
            snprintf(def, sizeof def, "%s", d.data[0] ? d.data : "synthetic");
            snprintf(arg, sizeof arg, "%s FILE", flag);
            break;
        }
        fprintf(f, "  %-34s %s (default %s)\n", arg, k->help, def);
    }
}
