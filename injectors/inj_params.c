/* inj_params.c - key-naming validation of fault params. */
#include "injectors/inj_params.h"

#include <math.h>
#include <string.h>

#include "common/err.h"

int inj_params_check(json_t *params, const char *const *allowed, char *err, size_t errlen)
{
    if (!params || json_is_null(params))
        return 0;
    if (!json_is_object(params))
        return cx_fail(err, errlen, CX_EINVAL, "params: must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(params, key, v)
    {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0)
                ok = 1;
        if (!ok) {
            char list[256] = "";
            size_t used = 0;
            for (const char *const *a = allowed; *a && used < sizeof list; a++) {
                int n = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", *a);
                if (n < 0)
                    break;
                used += (size_t)n;
            }
            return cx_fail(err, errlen, CX_EINVAL, "params.%s: unknown key (allowed: %s)", key,
                           used ? list : "none");
        }
    }
    return 0;
}

int inj_param_has(json_t *params, const char *key)
{
    json_t *v = params && json_is_object(params) ? json_object_get(params, key) : NULL;
    return v && !json_is_null(v);
}

static json_t *inj_param_get(json_t *params, const char *key, int required, char *err, size_t errlen, int *rc)
{
    *rc = 0;
    if (inj_param_has(params, key))
        return json_object_get(params, key);
    if (required)
        *rc = cx_fail(err, errlen, CX_EINVAL, "params.%s: required", key);
    return NULL;
}

int inj_param_number(json_t *params, const char *key, int required, double def, double min, double max,
                     double *out, char *err, size_t errlen)
{
    int rc;
    *out = def;
    json_t *v = inj_param_get(params, key, required, err, errlen, &rc);
    if (!v)
        return rc;
    if (!json_is_number(v))
        return cx_fail(err, errlen, CX_EINVAL, "params.%s: must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < min || d > max)
        return cx_fail(err, errlen, CX_EINVAL, "params.%s: must be in [%g, %g], got %g", key, min, max, d);
    *out = d;
    return 0;
}

int inj_param_int(json_t *params, const char *key, int required, int64_t def, int64_t min, int64_t max,
                  int64_t *out, char *err, size_t errlen)
{
    int rc;
    *out = def;
    json_t *v = inj_param_get(params, key, required, err, errlen, &rc);
    if (!v)
        return rc;
    if (!json_is_integer(v))
        return cx_fail(err, errlen, CX_EINVAL, "params.%s: must be an integer", key);
    json_int_t i = json_integer_value(v);
    if (i < min || i > max)
        return cx_fail(err, errlen, CX_EINVAL, "params.%s: must be an integer in [%lld, %lld], got %lld", key,
                       (long long)min, (long long)max, (long long)i);
    *out = (int64_t)i;
    return 0;
}

int inj_param_string(json_t *params, const char *key, int required, const char *def, size_t maxlen,
                     const char **out, char *err, size_t errlen)
{
    int rc;
    *out = def;
    json_t *v = inj_param_get(params, key, required, err, errlen, &rc);
    if (!v)
        return rc;
    if (!json_is_string(v))
        return cx_fail(err, errlen, CX_EINVAL, "params.%s: must be a string", key);
    size_t n = json_string_length(v);
    if (n == 0 || n > maxlen || strlen(json_string_value(v)) != n)
        return cx_fail(err, errlen, CX_EINVAL, "params.%s: must be 1..%zu bytes without NUL", key, maxlen);
    *out = json_string_value(v);
    return 0;
}
