/* param.c - parameter declarations: decoder, defaults, docs and schema
 * (see param.h). */
#include "harness/param.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PARAM_MAX_KEYS 32 /* keys of one object: extra + table */

/* ---- bounds ---- */

/* The range a param is checked against, for m learners. */
static void bounds(const param_def *p, int learners, double *min, double *max)
{
    *min = p->min;
    *max = p->max;
    if (p->type == PARAM_SECONDS) {
        *min = 1e-3;
        *max = 1e7;
    } else if (p->type == PARAM_LEARNER) {
        *min = 0;
        *max = learners - 1;
    } else if (p->flags & PARAM_MAX_LEARNERS) {
        *max = learners;
    }
}

static const char *what_of(const param_def *p)
{
    if (p->what)
        return p->what;
    return p->type == PARAM_SECONDS ? "seconds" : p->type == PARAM_LEARNER ? "a learner id" : NULL;
}

/* An INT bound as int64_t: INT64_MIN/MAX stay unbounded (a double cannot
 * hold INT64_MAX exactly, so it is compared, not converted). */
static int64_t int_bound(double x)
{
    if (x >= 9223372036854775807.0)
        return INT64_MAX;
    if (x <= -9223372036854775807.0)
        return INT64_MIN;
    return (int64_t)x;
}

/* ---- decode ---- */

static void *at(void *out, size_t offset)
{
    return (char *)out + offset;
}

void param_defaults(const param_def *t, void *out)
{
    for (const param_def *p = t; p && p->name; p++) {
        switch (p->type) {
        case PARAM_NUMBER:
        case PARAM_SECONDS:
            *(double *)at(out, p->offset) = p->def;
            break;
        case PARAM_INT:
        case PARAM_LEARNER:
            *(int64_t *)at(out, p->offset) = (int64_t)p->def;
            break;
        case PARAM_BOOL:
        case PARAM_ENUM:
            *(int *)at(out, p->offset) = (int)p->def;
            break;
        case PARAM_STRING:
            *(const char **)at(out, p->offset) = NULL;
            break;
        case PARAM_OBJECT:
        case PARAM_ARRAY:
            *(json_t **)at(out, p->offset) = NULL;
            break;
        }
        if (p->set_at)
            *(int *)at(out, p->set_at - 1) = 0;
    }
}

/* Decode one key: jv_get_*'s return (1 valid, 0 absent, -1 invalid). */
static int decode_one(const param_def *p, const json_t *obj, const char *path, int learners, jv_diag *d,
                      void *out)
{
    int req = !!(p->flags & PARAM_REQUIRED);
    double min, max;
    bounds(p, learners, &min, &max);
    switch (p->type) {
    case PARAM_NUMBER:
    case PARAM_SECONDS:
        return jv_get_number(d, path, obj, p->name, req, min, max, what_of(p), at(out, p->offset));
    case PARAM_INT:
    case PARAM_LEARNER:
        return jv_get_int(d, path, obj, p->name, req, int_bound(min), int_bound(max), what_of(p),
                          at(out, p->offset));
    case PARAM_BOOL:
        return jv_get_bool(d, path, obj, p->name, req, at(out, p->offset));
    case PARAM_ENUM: {
        const char *s = NULL;
        int rc = jv_get_string(d, path, obj, p->name, req, p->values, &s);
        for (int i = 0; rc == 1 && p->values[i]; i++)
            if (strcmp(p->values[i], s) == 0)
                *(int *)at(out, p->offset) = i;
        return rc;
    }
    case PARAM_STRING: {
        const char **s = at(out, p->offset);
        if (p->flags & PARAM_NONEMPTY) {
            int rc = jv_get_nonempty_string(d, path, obj, p->name, req, s);
            if (rc < 0)
                *s = NULL;
            return rc;
        }
        return jv_get_string(d, path, obj, p->name, req, NULL, s);
    }
    case PARAM_OBJECT:
        return jv_get_object(d, path, obj, p->name, req, at(out, p->offset));
    case PARAM_ARRAY:
        return jv_get_array(d, path, obj, p->name, req, at(out, p->offset));
    }
    return -1;
}

int param_decode(const param_def *t, const char *const *extra, const json_t *obj, const char *path,
                 int learners, jv_diag *d, void *out)
{
    const char *keys[PARAM_MAX_KEYS + 1];
    size_t n = 0;
    for (const char *const *k = extra; k && *k && n < PARAM_MAX_KEYS; k++)
        keys[n++] = *k;
    for (const param_def *p = t; p && p->name && n < PARAM_MAX_KEYS; p++)
        keys[n++] = p->name;
    keys[n] = NULL;
    param_defaults(t, out);
    if (jv_check_keys(d, path, obj, keys) != 0)
        return -1;
    for (const param_def *p = t; p && p->name; p++)
        if (decode_one(p, obj, path, learners, d, out) == 1 && p->set_at)
            *(int *)at(out, p->set_at - 1) = 1;
    return 0;
}

/* ---- docs ---- */

static size_t append(char *buf, size_t len, size_t u, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t len, size_t u, const char *fmt, ...)
{
    if (u >= len)
        return u;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + u, len - u, fmt, ap);
    va_end(ap);
    return w < 0 ? u : u + (size_t)w;
}

/* An INT bound in words: "" when unbounded. */
static void int_text(double x, char *out, size_t len)
{
    int64_t v = int_bound(x);
    if (v == INT64_MAX || v == INT64_MIN)
        out[0] = '\0';
    else
        snprintf(out, len, "%lld", (long long)v);
}

/* The default in words, or NULL when none is documented. */
static const char *def_words(const param_def *p, char *buf, size_t len)
{
    if (p->flags & PARAM_REQUIRED)
        return NULL;
    if (p->def_text)
        return p->def_text;
    if (p->flags & PARAM_NODEF)
        return NULL;
    switch (p->type) {
    case PARAM_NUMBER:
    case PARAM_SECONDS:
        snprintf(buf, len, "%g", p->def);
        break;
    case PARAM_INT:
    case PARAM_LEARNER:
        snprintf(buf, len, "%lld", (long long)p->def);
        break;
    case PARAM_BOOL:
        snprintf(buf, len, "%s", p->def != 0 ? "true" : "false");
        break;
    case PARAM_ENUM:
        snprintf(buf, len, "\"%s\"", p->values[(int)p->def]);
        break;
    case PARAM_STRING:
    case PARAM_OBJECT:
    case PARAM_ARRAY:
        return NULL; /* no default but def_text's */
    }
    return buf;
}

void param_text(const param_def *p, char *buf, size_t len)
{
    size_t u = 0;
    char lo[32], hi[32];
    buf[0] = '\0';
    switch (p->type) {
    case PARAM_NUMBER:
        if (isinf(p->max))
            u = append(buf, len, u, "number >= %g", p->min);
        else
            u = append(buf, len, u, "number %g..%g", p->min, p->max);
        break;
    case PARAM_SECONDS:
        u = append(buf, len, u, "seconds 0.001..1e+07");
        break;
    case PARAM_INT:
        int_text(p->min, lo, sizeof lo);
        int_text(p->max, hi, sizeof hi);
        if (p->flags & PARAM_MAX_LEARNERS)
            snprintf(hi, sizeof hi, "learners");
        if (hi[0])
            u = append(buf, len, u, "integer %s..%s", lo, hi);
        else
            u = append(buf, len, u, "integer >= %s", lo);
        break;
    case PARAM_LEARNER:
        u = append(buf, len, u, "learner id 0..learners-1");
        break;
    case PARAM_BOOL:
        u = append(buf, len, u, "true or false");
        break;
    case PARAM_ENUM:
        for (const char *const *v = p->values; *v; v++)
            u = append(buf, len, u, "%s\"%s\"", v == p->values ? "" : " | ", *v);
        break;
    case PARAM_STRING:
        u = append(buf, len, u, "%s", p->flags & PARAM_NONEMPTY ? "non-empty string" : "string");
        break;
    case PARAM_OBJECT:
        u = append(buf, len, u, "object");
        break;
    case PARAM_ARRAY:
        u = append(buf, len, u, "array");
        break;
    }
    if (p->unit && p->type != PARAM_SECONDS)
        u = append(buf, len, u, " %s", p->unit);
    char dbuf[64];
    const char *def = def_words(p, dbuf, sizeof dbuf);
    if (p->flags & PARAM_REQUIRED)
        u = append(buf, len, u, ", required");
    else if (def)
        u = append(buf, len, u, ", default %s", def);
    else
        u = append(buf, len, u, ", optional");
}

void param_line(const param_def *t, char *buf, size_t len)
{
    size_t u = 0;
    buf[0] = '\0';
    if (!t || !t->name) {
        append(buf, len, 0, "(none)");
        return;
    }
    for (const param_def *p = t; p->name; p++) {
        char dbuf[64];
        const char *def = def_words(p, dbuf, sizeof dbuf);
        const char *unit = p->type == PARAM_SECONDS ? "s" : p->type == PARAM_LEARNER ? "id" : p->unit;
        u = append(buf, len, u, "%s%s (", p == t ? "" : ", ", p->name);
        if (unit)
            u = append(buf, len, u, "%s, ", unit);
        if (p->flags & PARAM_REQUIRED)
            u = append(buf, len, u, "required)");
        else if (def)
            u = append(buf, len, u, "default %s)", def);
        else
            u = append(buf, len, u, "optional)");
    }
}

/* ---- schema ---- */

/* s as a JSON string (the docs are ASCII and quote-free by construction;
 * escaped anyway). */
static void json_str(cx_buf *b, const char *s)
{
    cx_buf_append(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            cx_buf_append(b, "\\", 1);
        cx_buf_append(b, s, 1);
    }
    cx_buf_append(b, "\"", 1);
}

/* {"type": "object", ...} of an OBJECT with fields, without its closing
 * brace (the caller adds the description). */
static void object_schema(const param_def *p, cx_buf *b)
{
    cx_buf_printf(b, "{\"type\": \"object\", \"additionalProperties\": false");
    int nreq = 0;
    for (const param_def *f = p->fields; f->name; f++)
        if (f->flags & PARAM_REQUIRED) {
            cx_buf_printf(b, "%s", nreq++ ? ", " : ", \"required\": [");
            json_str(b, f->name);
        }
    if (nreq)
        cx_buf_printf(b, "]");
    cx_buf_printf(b, ", \"properties\": {");
    for (const param_def *f = p->fields; f->name; f++) {
        if (f != p->fields)
            cx_buf_printf(b, ", ");
        json_str(b, f->name);
        cx_buf_printf(b, ": ");
        param_schema(f, b);
    }
    cx_buf_printf(b, "}");
}

/* The schema a param's type and range give, without its closing brace. */
static void schema_by_type(const param_def *p, cx_buf *b)
{
    int cap = !!(p->flags & PARAM_CAP);
    switch (p->type) {
    case PARAM_SECONDS:
        cx_buf_printf(b, "{\"$ref\": \"#/$defs/seconds\"");
        break;
    case PARAM_LEARNER:
        cx_buf_printf(b, "{\"$ref\": \"#/$defs/learner_id\"");
        break;
    case PARAM_NUMBER:
        cx_buf_printf(b, "{\"type\": \"number\"");
        if (p->flags & PARAM_ABOVE_ZERO)
            cx_buf_printf(b, ", \"exclusiveMinimum\": 0");
        else if (isfinite(p->min))
            cx_buf_printf(b, ", \"minimum\": %.15g", p->min);
        if (!cap && isfinite(p->max))
            cx_buf_printf(b, ", \"maximum\": %.15g", p->max);
        break;
    case PARAM_INT: {
        char lo[32], hi[32];
        int_text(p->min, lo, sizeof lo);
        int_text(p->max, hi, sizeof hi);
        cx_buf_printf(b, "{\"type\": \"integer\"");
        if (lo[0])
            cx_buf_printf(b, ", \"minimum\": %s", lo);
        if (hi[0] && !cap && !(p->flags & PARAM_MAX_LEARNERS))
            cx_buf_printf(b, ", \"maximum\": %s", hi);
        else if (p->flags & PARAM_INT64)
            cx_buf_printf(b, ", \"maximum\": %lld", (long long)INT64_MAX);
        break;
    }
    case PARAM_BOOL:
        cx_buf_printf(b, "{\"type\": \"boolean\"");
        break;
    case PARAM_ENUM:
        cx_buf_printf(b, "{\"enum\": [");
        for (const char *const *v = p->values; *v; v++) {
            if (v != p->values)
                cx_buf_printf(b, ", ");
            json_str(b, *v);
        }
        cx_buf_printf(b, "]");
        break;
    case PARAM_STRING:
        cx_buf_printf(b, "{\"type\": \"string\"%s", p->flags & PARAM_NONEMPTY ? ", \"minLength\": 1" : "");
        break;
    case PARAM_OBJECT:
        if (p->fields)
            object_schema(p, b);
        else
            cx_buf_printf(b, "{\"type\": \"object\"");
        break;
    case PARAM_ARRAY:
        cx_buf_printf(b, "{\"type\": \"array\"");
        break;
    }
}

void param_schema(const param_def *p, cx_buf *b)
{
    if (p->schema) { /* a one-line JSON object: all but its closing brace */
        size_t n = strlen(p->schema);
        while (n && p->schema[n - 1] != '}')
            n--;
        cx_buf_append(b, p->schema, n ? n - 1 : 0);
    } else {
        schema_by_type(p, b);
    }
    if (!(p->flags & (PARAM_REQUIRED | PARAM_NODEF)) && !p->def_text) {
        char dbuf[64];
        const char *def = def_words(p, dbuf, sizeof dbuf);
        if (def)
            cx_buf_printf(b, ", \"default\": %s", def);
    }
    if (p->doc) {
        cx_buf_printf(b, ", \"description\": ");
        json_str(b, p->doc);
    }
    cx_buf_printf(b, "}");
}
