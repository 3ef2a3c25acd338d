/* param.h - one declaration per parameter of a JSON object: name, type,
 * bounds, default, unit and doc, and where it lands in a params struct.
 *
 * A table of param_def (terminated by an entry with name NULL) is the only
 * place a parameter is written down. From it:
 *   - param_decode checks an object against it (jsonv.h's messages, every
 *     error collected, unknown keys rejected) and fills the struct;
 *   - param_defaults fills the struct with the defaults alone;
 *   - param_text / param_line describe a parameter for docs and listings;
 *   - param_schema writes its JSON Schema (docs/experiment.schema.json is
 *     generated from the tables: harness/tools/params_docs.c).
 * Rules that tie several parameters together ("exactly one of min or
 * min_rel") stay code of their owner; the table only describes one key.
 *
 * Used by the hypotheses (harness/hypotheses/) and by the experiment file:
 * exp_file_params (harness/experiment.c: the document's keys, with the
 * horizon object's own table) and exp_topology_attach (exp_topology.c:
 * topology.attach's keys). What stays hand-written there: a member whose
 * contents are not a table (PARAM_OBJECT or PARAM_ARRAY without fields:
 * tags, the rest of topology, steady_state/verify, method, chaos,
 * stop_conditions, rollbacks, ci, attach.agents) is only type-checked and
 * handed back; its owner decodes it with code of its own (exp_*.c, with
 * jsonv.h's getters) and its schema is hand-written: the member's schema
 * text here, the $defs it names in docs/experiment.schema.json.
 * Not (yet) used by the agent's injector params (injectors/injector.h
 * inj_param), the proxy's toxic attributes or the command-line flags
 * (common/flags.h).
 */
#ifndef HARNESS_PARAM_H
#define HARNESS_PARAM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "harness/jsonv.h"

typedef enum param_type {
    PARAM_NUMBER,  /* double; [min, max] */
    PARAM_INT,     /* int64_t; [min, max] (INT64_MIN/INT64_MAX: unbounded) */
    PARAM_BOOL,    /* int 0/1 */
    PARAM_ENUM,    /* int: the index of the value in values */
    PARAM_SECONDS, /* double; a duration in s, [1e-3, 1e7]; schema $defs/seconds */
    PARAM_LEARNER, /* int64_t; a learner id, 0..learners-1; schema $defs/learner_id */
    PARAM_STRING,  /* const char *, borrowed from the object decoded (NULL when absent) */
    PARAM_OBJECT,  /* json_t *, borrowed (NULL when absent): an object; its keys are fields, or see schema */
    PARAM_ARRAY,   /* json_t *, borrowed (NULL when absent): an array; its items: schema */
} param_type;

/* param_def.flags */
#define PARAM_REQUIRED 0x01     /* absent is an error ("missing required key") */
#define PARAM_MAX_LEARNERS 0x02 /* INT: max is the number of learners, not max */
#define PARAM_CAP 0x04          /* max is a sanity cap: checked, not published in the schema */
#define PARAM_ABOVE_ZERO 0x08   /* min stands in for "> 0": the schema says exclusiveMinimum 0 */
#define PARAM_NODEF 0x10        /* def is applied but is no documented default (def_text may say one) */
#define PARAM_NONEMPTY 0x20     /* STRING: "" is an error; the schema says minLength 1 */
#define PARAM_INT64 0x40        /* INT with max INT64_MAX: the schema states that maximum (a seed) */

/* Where a param's "given" flag lands: PARAM_SET_AT(struct, field) names an
 * int field written 1 when the key is present and valid; 0 = no such field. */
#define PARAM_SET_AT(type, field) (offsetof(type, field) + 1)
#define PARAM_AT(type, field) offsetof(type, field)

typedef struct param_def {
    const char *name;          /* the key: "max_s" */
    param_type type;           /* JSON type and C type at offset */
    unsigned flags;            /* PARAM_* */
    double min, max;           /* NUMBER/INT range, inclusive (SECONDS, LEARNER: implied) */
    double def;                /* default written before decoding (ENUM: the index; BOOL: 0/1) */
    const char *def_text;      /* the default in words when it is a sentinel ("every learner"), or NULL */
    const char *what;          /* the value in error messages: "a goodput ratio" (NULL: by type) */
    const char *const *values; /* ENUM: the allowed strings, NULL-terminated */
    const char *unit;          /* "s", "rel", "nats", "bytes/token", ... or NULL */
    const char *doc;           /* one line: what it means, without type, range and default */
    size_t offset;             /* PARAM_AT: where the value lands in the params struct */
    size_t set_at;             /* PARAM_SET_AT, or 0 */
    /* OBJECT: the object's own keys. param_decode only type-checks the
     * member (the owner decodes it with param_decode over fields); the
     * schema and the docs are generated from them. NULL: see schema. */
    const struct param_def *fields;
    /* The member's JSON Schema, hand-written, one JSON object on one line
     * ("{\"$ref\": \"#/$defs/topology\"}"), in place of the one its type
     * gives (doc and default are added to it): for an OBJECT without
     * fields or an ARRAY (else only "an object"/"an array"), or a STRING
     * of a given form ($defs/url). NULL: by type. */
    const char *schema;
} param_def;

/* Write every param's default into out (the struct the offsets are of). */
void param_defaults(const param_def *t, void *out);

/* Decode obj into out against t: defaults first, then every declared key
 * present (in table order), each problem reported into d under path with
 * jsonv.h's messages. Keys in extra (NULL-terminated, may be NULL; the
 * caller's own, such as "hypothesis" and "name") come first in the list of
 * known keys; any other key is an "unknown key" error. learners: M, for
 * PARAM_LEARNER and PARAM_MAX_LEARNERS. Returns -1 when obj is not an
 * object (reported), else 0; the object is valid iff d did not grow. */
int param_decode(const param_def *t, const char *const *extra, const json_t *obj, const char *path,
                 int learners, jv_diag *d, void *out);

/* "number 0..1e+06 rel, default 0.02": type, range, unit, required or
 * default, into buf (truncated, never overflowed). */
void param_text(const param_def *p, char *buf, size_t len);
/* One line over a table: "max_s (s, required), learner (default every
 * learner)"; "(none)" for an empty table. */
void param_line(const param_def *t, char *buf, size_t len);
/* The JSON Schema of one param, in one line: {"type": "number", ...}; an
 * OBJECT with fields as {"type": "object", "additionalProperties": false,
 * "required": [...], "properties": {...}}. */
void param_schema(const param_def *p, cx_buf *b);

#endif
