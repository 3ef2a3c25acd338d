/* inj_params.h - strict decoding of a fault's params object, with errors
 * that name the offending key ("params.grace_ms: must be an integer in
 * [0, 600000], got -5").
 *
 * Jansson's strict unpack reports unknown keys well but type errors without
 * the key, so the process-level injectors validate through these instead.
 * Every getter leaves *out at the default when the key is absent and not
 * required. Borrowed strings stay valid while params lives: copy them in
 * prepare().
 */
#ifndef INJ_PARAMS_H
#define INJ_PARAMS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
