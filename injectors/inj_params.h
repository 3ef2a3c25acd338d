/* inj_params.h - strict decoding of a fault's params object, with errors
 * that name the offending key ("params.grace_ms: must be an integer in
 * [0, 600000], got -5").
 *
 * Jansson's strict unpack reports unknown keys well but type errors without
 * the key, so the injectors validate through these instead. A kind's
 * prepare() decodes everything its inj_param table states with one
 * inj_params_decode() call and keeps only its own special checks (a bound
 * that depends on another param, a cross-field rule).
 * Every getter leaves *out at the default when the key is absent and not
 * required. Borrowed strings stay valid while params lives: copy them in
 * prepare().
 */
#ifndef INJ_PARAMS_H
#define INJ_PARAMS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "injectors/injector.h"

/* params must be NULL (= {}) or an object whose keys are all in allowed
 * (NULL-terminated). */
int inj_params_check(json_t *params, const char *const *allowed, char *err, size_t errlen);
/* 1 if key is present (and not JSON null). */
int inj_param_has(json_t *params, const char *key);
/* A JSON number (integer or real) in [min, max]. */
int inj_param_number(json_t *params, const char *key, int required, double def, double min, double max,
                     double *out, char *err, size_t errlen);
/* A JSON integer in [min, max]. */
int inj_param_int(json_t *params, const char *key, int required, int64_t def, int64_t min, int64_t max,
                  int64_t *out, char *err, size_t errlen);
/* A JSON string of 1..maxlen bytes (borrowed). */
int inj_param_string(json_t *params, const char *key, int required, const char *def, size_t maxlen,
                     const char **out, char *err, size_t errlen);

/* One decoded param. */
typedef struct inj_value {
    int given;     /* the key was present (and not JSON null) */
    int64_t i;     /* INJ_INT: the value, else the table's def */
    double d;      /* INJ_NUMBER: the value, else the table's def */
    const char *s; /* INJ_STRING/INJ_ENUM: borrowed from params, else the table's def_str */
    int index;     /* INJ_ENUM: index of s in values (-1 when s is NULL) */
    unsigned mask; /* INJ_LIST: bit k = values[k] listed (every bit by default) */
} inj_value;

/* Decode params against spec (a {NULL}-terminated inj_param array):
 * refuse unknown keys (naming the allowed ones), then check every key that
 * is not INJ_CUSTOM in table order: required, JSON type, range (max_fn on
 * this host), enum/list membership. out[k] gets spec[k]'s value or
 * default. 0, or CX_EINVAL + err naming the key ("params.grace_ms: ...");
 * spec NULL = no keys allowed. */
int inj_params_decode(json_t *params, const inj_param *spec, inj_value *out, char *err, size_t errlen);

/* Number of entries of spec (0 for NULL). */
size_t inj_params_count(const inj_param *spec);

#endif
