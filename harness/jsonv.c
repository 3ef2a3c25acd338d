/* jsonv.c - strict JSON validation with every error collected (see jsonv.h). */
#include "harness/jsonv.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jv_diag {
    char **msg;     /* n messages, each malloc'd */
    size_t n;       /* messages stored, <= JV_DIAG_KEEP */
    size_t cap;     /* slots allocated */
    size_t dropped; /* messages counted but not stored (over the cap, out of memory) */
};

/* ---- diag ---- */

jv_diag *jv_diag_new(void)
{
    return calloc(1, sizeof(jv_diag));
}

void jv_diag_free(jv_diag *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->msg[i]);
    free(d->msg);
    free(d);
}

size_t jv_diag_count(const jv_diag *d)
{
    return d ? d->n + d->dropped : 0;
}

size_t jv_diag_kept(const jv_diag *d)
{
    return d ? d->n : 0;
}

const char *jv_diag_get(const jv_diag *d, size_t i)
{
    if (!d || i >= d->n)
        return "(message not kept)";
    return d->msg[i];
}

/* 1 when one more message would be stored (so worth formatting). */
static int diag_room(const jv_diag *d)
{
    return d->n < JV_DIAG_KEEP;
}

static void diag_push(jv_diag *d, char *m)
{
    if (!m || !diag_room(d)) {
        free(m);
        d->dropped++;
        return;
    }
    if (d->n == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 8;
        char **nm = realloc(d->msg, ncap * sizeof(*nm));
        if (!nm) {
            free(m);
            d->dropped++;
            return;
        }
        d->msg = nm;
        d->cap = ncap;
    }
    d->msg[d->n++] = m;
}

void jv_diag_add(jv_diag *d, const char *path, const char *fmt, ...)
{
    if (!d)
        return;
    if (!diag_room(d)) {
        d->dropped++;
        return;
    }
    char body[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    size_t len = strlen(path) + strlen(body) + 3;
    char *m = malloc(len);
    if (m)
        snprintf(m, len, "%s: %s", path, body);
    diag_push(d, m);
}

void jv_diag_merge(jv_diag *d, const jv_diag *src, const char *prefix)
{
    if (!d || !src)
        return;
    for (size_t i = 0; i < src->n; i++) {
        size_t len = strlen(prefix) + strlen(src->msg[i]) + 1;
        char *m = diag_room(d) ? malloc(len) : NULL;
        if (m)
            snprintf(m, len, "%s%s", prefix, src->msg[i]);
        diag_push(d, m);
    }
    d->dropped += src->dropped;
}

void jv_diag_print(FILE *f, const jv_diag *d, const char *prefix)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        fprintf(f, "%s%s\n", prefix, d->msg[i]);
    if (d->dropped)
        fprintf(f, "%s... and %zu more error%s\n", prefix, d->dropped, d->dropped == 1 ? "" : "s");
}

/* ---- paths and descriptions ---- */

void jv_path_key(char *out, size_t len, const char *parent, const char *key)
{
    snprintf(out, len, "%s.%s", parent, key);
}

void jv_path_idx(char *out, size_t len, const char *parent, size_t idx)
{
    snprintf(out, len, "%s[%zu]", parent, idx);
}

const char *jv_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

void jv_describe(char *out, size_t len, const json_t *v)
{
    if (!v) {
        snprintf(out, len, "nothing");
        return;
    }
    switch (json_typeof(v)) {
    case JSON_STRING: {
        const char *s = json_string_value(v);
        if (strlen(s) > 40)
            snprintf(out, len, "\"%.40s...\"", s);
        else
            snprintf(out, len, "\"%s\"", s);
        break;
    }
    case JSON_INTEGER:
        snprintf(out, len, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        snprintf(out, len, "%g", json_real_value(v));
        break;
    case JSON_TRUE:
        snprintf(out, len, "true");
        break;
    case JSON_FALSE:
        snprintf(out, len, "false");
        break;
    case JSON_NULL:
        snprintf(out, len, "null");
        break;
    default:
        snprintf(out, len, "%s", jv_type_name(v));
        break;
    }
}

/* ---- objects ---- */

int jv_check_keys(jv_diag *d, const char *path, const json_t *obj, const char *const *keys)
{
    if (!json_is_object(obj)) {
        char got[64];
        jv_describe(got, sizeof(got), obj);
        jv_diag_add(d, path, "expected an object, got %s", got);
        return -1;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        int known = 0;
        for (const char *const *k = keys; *k; k++)
            if (strcmp(*k, key) == 0)
                known = 1;
        if (known)
            continue;
        char list[512] = "";
        size_t used = 0;
        for (const char *const *k = keys; *k && used < sizeof(list); k++) {
            int w = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", *k);
            if (w < 0)
                break;
            used += (size_t)w;
        }
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, key);
        jv_diag_add(d, p, "unknown key (expected one of: %s)", list);
    }
    return 0;
}

/* obj[key] or NULL (a diagnostic when required); p receives the key's path. */
static json_t *field(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                     char p[JV_PATHLEN])
{
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    jv_path_key(p, JV_PATHLEN, path, key);
    if (!v && required)
        jv_diag_add(d, p, "missing required key");
    return v;
}

/* ---- values ---- */

static void range_text_int(char *out, size_t len, int64_t min, int64_t max)
{
    if (min == INT64_MIN && max == INT64_MAX)
        out[0] = '\0';
    else if (max == INT64_MAX)
        snprintf(out, len, " >= %lld", (long long)min);
    else if (min == INT64_MIN)
        snprintf(out, len, " <= %lld", (long long)max);
    else
        snprintf(out, len, " in %lld..%lld", (long long)min, (long long)max);
}

int jv_int_value(jv_diag *d, const char *path, const json_t *v, int64_t min, int64_t max, const char *what,
                 int64_t *out)
{
    char range[64], got[64];
    range_text_int(range, sizeof(range), min, max);
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        jv_describe(got, sizeof(got), v);
        jv_diag_add(d, path, "expected %s%s, got %s", what ? what : "an integer", range, got);
        return -1;
    }
    *out = json_integer_value(v);
    return 1;
}

int jv_number_value(jv_diag *d, const char *path, const json_t *v, double min, double max, const char *what,
                    double *out)
{
    char range[96], got[64];
    if (isinf(min) && isinf(max))
        range[0] = '\0';
    else if (isinf(max))
        snprintf(range, sizeof(range), " >= %g", min);
    else if (isinf(min))
        snprintf(range, sizeof(range), " <= %g", max);
    else
        snprintf(range, sizeof(range), " in [%g, %g]", min, max);
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!json_is_number(v) || !isfinite(x) || x < min || x > max) {
        jv_describe(got, sizeof(got), v);
        jv_diag_add(d, path, "expected %s%s, got %s", what ? what : "a number", range, got);
        return -1;
    }
    *out = x;
    return 1;
}

int jv_get_int(jv_diag *d, const char *path, const json_t *obj, const char *key, int required, int64_t min,
               int64_t max, const char *what, int64_t *out)
{
    char p[JV_PATHLEN];
    json_t *v = field(d, path, obj, key, required, p);
    return v ? jv_int_value(d, p, v, min, max, what, out) : 0;
}

int jv_get_number(jv_diag *d, const char *path, const json_t *obj, const char *key, int required, double min,
                  double max, const char *what, double *out)
{
    char p[JV_PATHLEN];
    json_t *v = field(d, path, obj, key, required, p);
    return v ? jv_number_value(d, p, v, min, max, what, out) : 0;
}

int jv_get_bool(jv_diag *d, const char *path, const json_t *obj, const char *key, int required, int *out)
{
    char p[JV_PATHLEN], got[64];
    json_t *v = field(d, path, obj, key, required, p);
    if (!v)
        return 0;
    if (!json_is_boolean(v)) {
        jv_describe(got, sizeof(got), v);
        jv_diag_add(d, p, "expected true or false, got %s", got);
        return -1;
    }
    *out = json_is_true(v);
    return 1;
}

int jv_get_string(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                  const char *const *choices, const char **out)
{
    char p[JV_PATHLEN], got[64];
    json_t *v = field(d, path, obj, key, required, p);
    if (!v)
        return 0;
    jv_describe(got, sizeof(got), v);
    if (!json_is_string(v)) {
        jv_diag_add(d, p, "expected a string, got %s", got);
        return -1;
    }
    if (choices) {
        for (const char *const *c = choices; *c; c++)
            if (strcmp(*c, json_string_value(v)) == 0) {
                *out = json_string_value(v);
                return 1;
            }
        char list[256] = "";
        size_t used = 0;
        for (const char *const *c = choices; *c && used < sizeof(list); c++) {
            int w = snprintf(list + used, sizeof(list) - used, "%s%s", used ? "|" : "", *c);
            if (w < 0)
                break;
            used += (size_t)w;
        }
        jv_diag_add(d, p, "expected one of %s, got %s", list, got);
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

/* A value of JSON type want (named what: "an array") at path.key (0
 * absent, 1 ok, -1 wrong type). */
static int get_typed(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                     json_type want, const char *what, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    char p[JV_PATHLEN];
    jv_path_key(p, sizeof(p), path, key);
    if (!v) {
        if (required)
            jv_diag_add(d, p, "missing required key");
        return 0;
    }
    if (json_typeof(v) != want) {
        char got[64];
        jv_describe(got, sizeof(got), v);
        jv_diag_add(d, p, "expected %s, got %s", what, got);
        return -1;
    }
    *out = v;
    return 1;
}

int jv_get_array(jv_diag *d, const char *path, const json_t *obj, const char *key, int required, json_t **out)
{
    return get_typed(d, path, obj, key, required, JSON_ARRAY, "an array", out);
}

int jv_get_object(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                  json_t **out)
{
    return get_typed(d, path, obj, key, required, JSON_OBJECT, "an object", out);
}

int jv_get_nonempty_string(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                           const char **out)
{
    int r = jv_get_string(d, path, obj, key, required, NULL, out);
    if (r == 1 && (*out)[0] == '\0') {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, key);
        jv_diag_add(d, p, "expected a non-empty string, got \"\"");
        return -1;
    }
    return r;
}
