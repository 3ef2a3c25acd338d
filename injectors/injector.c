/* injector.c - the registry of fault kinds, and what is derived from it.
 *
 * Add a kind: write injectors/kinds/<kind>.c exporting `const injector
 * inj_<kind>` with its params table and traits, and add its line to
 * INJECTOR_KINDS below. Nothing else names the kinds: the agent's stop
 * rule and toxicity, the harness's validator, --list-faults, GET
 * /v1/fault-kinds (the dashboard's form) and docs/faults.md come from this
 * table, and tests/unit/test_injector.c fails when the JSON Schema's enum
 * or docs/faults.md drift from it.
 */
#include "injectors/injector.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- injector: registered fault kinds ---- */

/* One line per kind, in docs order: X(name) for `const injector inj_name`
 * in injectors/kinds/name.c. */
/* clang-format off */
#define INJECTOR_KINDS(X) \
    X(kill)          \
    X(preempt)       \
    X(pause)         \
    X(straggle)      \
    X(cpu)           \
    X(memory)        \
    X(latency)       \
    X(bandwidth)     \
    X(blackhole)     \
    X(reset_peer)    \
    X(slicer)        \
    X(limit_data)    \
    X(corrupt)       \
    X(partition)     \
    X(clock)         \
    X(disk)          \
    X(nan)           \
    X(cpu_spike)     \
    /* the list ends here: each line above ends with a backslash */
/* clang-format on */

#define INJ_DECLARE(name) extern const injector inj_##name;
INJECTOR_KINDS(INJ_DECLARE)

#define INJ_ENTRY(name) &inj_##name,
const injector *const injector_table[] = {INJECTOR_KINDS(INJ_ENTRY) NULL};

const injector *injector_find(const char *type)
{
    if (!type)
        return NULL;
    for (const injector *const *p = injector_table; *p; p++)
        if (strcmp((*p)->type, type) == 0)
            return *p;
    return NULL;
}

/* ---- injector: traits ---- */

unsigned injector_traits_of(const char *type)
{
    const injector *inj = injector_find(type);
    return inj ? inj->traits : 0;
}

int injector_has_trait(const char *type, unsigned mask)
{
    return mask != 0 && (injector_traits_of(type) & mask) == mask;
}

static const struct {
    unsigned bit;
    const char *name;
} trait_names[] = {
    {INJ_TRAIT_STOPS_UNIT, "stops_unit"}, {INJ_TRAIT_TERMINATES, "terminates"},
    {INJ_TRAIT_TAKES_DOWN, "takes_down"}, {INJ_TRAIT_TOXICITY, "toxicity"},
    {INJ_TRAIT_NETWORK, "network"},
};

const char *injector_trait_name(unsigned bit)
{
    for (size_t i = 0; i < sizeof trait_names / sizeof trait_names[0]; i++)
        if (trait_names[i].bit == bit)
            return trait_names[i].name;
    return NULL;
}

/* ---- injector: description ---- */

double inj_param_max(const inj_param *p)
{
    return p->max_fn ? p->max_fn() : p->max;
}

static json_t *num_json(inj_ptype t, double v)
{
    return t == INJ_INT && fabs(v) < 9.0e15 ? json_integer((json_int_t)v) : json_real(v);
}

static json_t *param_json(const inj_param *p)
{
    static const char *const jtype[] = {
        [INJ_INT] = "integer", [INJ_NUMBER] = "number", [INJ_STRING] = "string",
        [INJ_ENUM] = "string", [INJ_LIST] = "array",
    };
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(p->name));
    json_object_set_new(o, "type", json_string(jtype[p->type]));
    if (p->values) {
        json_t *a = json_array();
        for (const char *const *v = p->values; *v; v++)
            json_array_append_new(a, json_string(*v));
        json_object_set_new(o, "enum", a);
    }
    json_object_set_new(o, "required", json_boolean(p->flags & INJ_REQUIRED));
    if (p->type == INJ_INT || p->type == INJ_NUMBER) {
        json_object_set_new(o, "min", num_json(p->type, p->min));
        json_object_set_new(o, "max", num_json(p->type, inj_param_max(p)));
    } else if (p->type == INJ_STRING) {
        json_object_set_new(o, "max_length", json_integer((json_int_t)inj_param_max(p)));
    }
    if (p->max_note)
        json_object_set_new(o, "max_note", json_string(p->max_note));
    json_t *def = NULL;
    if (!(p->flags & (INJ_REQUIRED | INJ_NODEF))) {
        if (p->type == INJ_INT || p->type == INJ_NUMBER)
            def = num_json(p->type, p->def);
        else if (p->type == INJ_LIST && !p->def_str)
            def = json_deep_copy(json_object_get(o, "enum"));
        else if (p->def_str)
            def = json_string(p->def_str);
    }
    json_object_set_new(o, "default", def ? def : json_null());
    json_object_set_new(o, "unit", p->unit ? json_string(p->unit) : json_null());
    json_object_set_new(o, "help", json_string(p->help ? p->help : ""));
    return o;
}

json_t *injector_describe(const injector *inj)
{
    json_t *traits = json_array();
    for (size_t i = 0; i < sizeof trait_names / sizeof trait_names[0]; i++)
        if (inj->traits & trait_names[i].bit)
            json_array_append_new(traits, json_string(trait_names[i].name));
    json_t *params = json_array();
    for (const inj_param *p = inj->params; p && p->name; p++)
        json_array_append_new(params, param_json(p));
    return json_pack("{s:s, s:s, s:o, s:o, s:b, s:o}", "type", inj->type, "summary",
                     inj->summary ? inj->summary : "", "traits", traits, "nonstop_method",
                     inj->nonstop_method ? json_string(inj->nonstop_method) : json_null(), "sweep",
                     inj->sweep != NULL, "params", params);
}

json_t *injector_table_json(void)
{
    json_t *a = json_array();
    for (const injector *const *p = injector_table; *p; p++)
        json_array_append_new(a, injector_describe(*p));
    return a;
}

/* ---- injector: in words ---- */

static size_t append(char *buf, size_t len, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t append(char *buf, size_t len, size_t used, const char *fmt, ...)
{
    if (used >= len)
        return used;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
    return n < 0 ? used : used + (size_t)n;
}

/* %.15g, but integers of any size without an exponent. */
static void num_text(inj_ptype t, double v, char *buf, size_t len)
{
    if (t == INJ_INT || (v == floor(v) && fabs(v) < 1e15))
        snprintf(buf, len, "%.0f", v);
    else
        snprintf(buf, len, "%.15g", v);
}

void inj_param_text(const inj_param *p, char *buf, size_t len)
{
    size_t u = 0;
    char lo[32], hi[32];
    buf[0] = '\0';
    switch (p->type) {
    case INJ_INT:
    case INJ_NUMBER:
        num_text(p->type, p->min, lo, sizeof lo);
        num_text(p->type, p->max, hi, sizeof hi);
        u = append(buf, len, u, "%s %s..%s", p->type == INJ_INT ? "integer" : "number", lo,
                   p->max_note ? p->max_note : hi);
        break;
    case INJ_STRING:
        u = append(buf, len, u, "string of 1..%.0f bytes", p->max);
        break;
    case INJ_ENUM:
    case INJ_LIST:
        if (p->type == INJ_LIST)
            u = append(buf, len, u, "non-empty array of ");
        for (const char *const *v = p->values; v && *v; v++)
            u = append(buf, len, u, "%s\"%s\"", v == p->values ? "" : p->type == INJ_LIST ? ", " : " | ", *v);
        break;
    }
    if (p->unit)
        u = append(buf, len, u, " %s", p->unit);
    if (p->flags & INJ_REQUIRED) {
        u = append(buf, len, u, ", required");
    } else if (!(p->flags & INJ_NODEF)) {
        if (p->type == INJ_INT || p->type == INJ_NUMBER) {
            num_text(p->type, p->def, lo, sizeof lo);
            u = append(buf, len, u, ", default %s", lo);
        } else if (p->type == INJ_LIST && !p->def_str) {
            u = append(buf, len, u, ", default all");
        } else if (p->def_str) {
            u = append(buf, len, u, ", default \"%s\"", p->def_str);
        }
    }
    (void)u;
}
