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

/* ---- inj_params: decoding from a kind's table ---- */

size_t inj_params_count(const inj_param *spec)
{
    size_t n = 0;
    while (spec && spec[n].name)
        n++;
    return n;
}

static size_t values_count(const char *const *values)
{
    size_t n = 0;
    while (values && values[n])
        n++;
    return n;
}

/* "a, b, c" into buf. */
static void values_list(const char *const *values, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t k = 0; values && values[k] && used < len; k++) {
        int n = snprintf(buf + used, len - used, "%s%s", k ? ", " : "", values[k]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static int decode_enum(json_t *params, const inj_param *p, inj_value *v, char *err, size_t errlen)
{
    size_t maxlen = p->max > 0 ? (size_t)p->max : 64;
    int rc = inj_param_string(params, p->name, (p->flags & INJ_REQUIRED) != 0, p->def_str, maxlen, &v->s, err,
                              errlen);
    if (rc || !v->s)
        return rc;
    for (size_t k = 0; p->values && p->values[k]; k++)
        if (strcmp(p->values[k], v->s) == 0) {
            v->index = (int)k;
            return 0;
        }
    char list[256];
    values_list(p->values, list, sizeof list);
    return cx_fail(err, errlen, CX_EINVAL, "params.%s: '%s' is not one of %s", p->name, v->s, list);
}

static int decode_list(json_t *params, const inj_param *p, inj_value *v, char *err, size_t errlen)
{
    size_t nv = values_count(p->values);
    v->mask = nv >= 32 ? ~0u : (1u << nv) - 1;
    if (!inj_param_has(params, p->name)) {
        if (p->flags & INJ_REQUIRED)
            return cx_fail(err, errlen, CX_EINVAL, "params.%s: required", p->name);
        return 0;
    }
    char list[256];
    values_list(p->values, list, sizeof list);
    json_t *a = json_object_get(params, p->name);
    if (!json_is_array(a) || json_array_size(a) == 0)
        return cx_fail(err, errlen, CX_EINVAL, "params.%s: must be a non-empty array of %s", p->name, list);
    v->mask = 0;
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x)
    {
        unsigned bit = 0;
        for (size_t k = 0; k < nv && k < 32; k++)
            if (json_is_string(x) && strcmp(json_string_value(x), p->values[k]) == 0)
                bit = 1u << k;
        if (!bit)
            return cx_fail(err, errlen, CX_EINVAL, "params.%s[%zu]: must be one of %s", p->name, i, list);
        if (v->mask & bit)
            return cx_fail(err, errlen, CX_EINVAL, "params.%s[%zu]: \"%s\" listed twice", p->name, i,
                           json_string_value(x));
        v->mask |= bit;
    }
    return 0;
}

static int decode_one(json_t *params, const inj_param *p, inj_value *v, char *err, size_t errlen)
{
    int required = (p->flags & INJ_REQUIRED) != 0;
    double max = inj_param_max(p);
    switch (p->type) {
    case INJ_INT:
        return inj_param_int(params, p->name, required, (int64_t)p->def, (int64_t)p->min, (int64_t)max, &v->i,
                             err, errlen);
    case INJ_NUMBER:
        return inj_param_number(params, p->name, required, p->def, p->min, max, &v->d, err, errlen);
    case INJ_STRING:
        return inj_param_string(params, p->name, required, p->def_str, max > 0 ? (size_t)max : 64, &v->s, err,
                                errlen);
    case INJ_ENUM:
        return decode_enum(params, p, v, err, errlen);
    case INJ_LIST:
        return decode_list(params, p, v, err, errlen);
    }
    return cx_fail(err, errlen, CX_EINVAL, "params.%s: unknown param type", p->name);
}

int inj_params_decode(json_t *params, const inj_param *spec, inj_value *out, char *err, size_t errlen)
{
    enum { MAX_KEYS = 32 };
    const char *allowed[MAX_KEYS + 1];
    size_t n = inj_params_count(spec);
    if (n > MAX_KEYS)
        return cx_fail(err, errlen, CX_EINVAL, "params: a kind may declare at most %d keys", MAX_KEYS);
    for (size_t k = 0; k < n; k++)
        allowed[k] = spec[k].name;
    allowed[n] = NULL;
    int rc = inj_params_check(params, allowed, err, errlen);
    for (size_t k = 0; k < n && !rc; k++) {
        const inj_param *p = &spec[k];
        inj_value *v = &out[k];
        memset(v, 0, sizeof *v);
        v->i = (int64_t)p->def;
        v->d = p->def;
        v->s = p->def_str;
        v->index = -1;
        v->given = inj_param_has(params, p->name);
        if (p->type == INJ_ENUM && v->s)
            for (size_t i = 0; p->values && p->values[i]; i++)
                if (strcmp(p->values[i], v->s) == 0)
                    v->index = (int)i;
        if (!(p->flags & INJ_CUSTOM))
            rc = decode_one(params, p, v, err, errlen);
    }
    return rc;
}
