/* test_injector.c - the injector table (injectors/injector.c) is the one
 * list of fault kinds: every kind's declaration is well formed, the traits
 * query answers from it, and what else names the kinds - the JSON Schema's
 * fault_type enum - says the same (and docs/faults.md: the test docs/kinds;
 * the dashboard's form: e2e/dashboard). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "injectors/injector.h"

TestSuite(injector);

/* Every declared param is usable: a range that holds its default, enum
 * defaults among the values, help text; every kind a summary and ops. */
Test(injector, declarations_are_well_formed)
{
    for (const injector *const *k = injector_table; *k; k++) {
        const injector *inj = *k;
        cr_assert(inj->summary && strlen(inj->summary) > 20, "%s: summary", inj->type);
        cr_assert(inj->prepare && inj->apply && inj->revert && inj->free, "%s: ops", inj->type);
        cr_assert(!inj->nonstop_method || (inj->traits & INJ_TRAIT_STOPS_UNIT), "%s: nonstop_method",
                  inj->type);
        cr_assert(!(inj->traits & INJ_TRAIT_TOXICITY) || (inj->traits & INJ_TRAIT_NETWORK), "%s", inj->type);
        for (const inj_param *p = inj->params; p && p->name; p++) {
            cr_assert(p->help && p->help[0], "%s.%s: help", inj->type, p->name);
            if (p->type == INJ_INT || p->type == INJ_NUMBER) {
                cr_assert(p->min <= inj_param_max(p), "%s.%s: range", inj->type, p->name);
                if (!(p->flags & (INJ_REQUIRED | INJ_NODEF)))
                    cr_assert(p->def >= p->min && p->def <= inj_param_max(p), "%s.%s: default %g outside",
                              inj->type, p->name, p->def);
            }
            if (p->type == INJ_ENUM || p->type == INJ_LIST)
                cr_assert(p->values && p->values[0], "%s.%s: values", inj->type, p->name);
            if (p->type == INJ_ENUM && p->def_str) {
                int found = 0;
                for (const char *const *v = p->values; *v; v++)
                    found |= strcmp(*v, p->def_str) == 0;
                cr_assert(found, "%s.%s: default '%s' is no value", inj->type, p->name, p->def_str);
            }
        }
    }
}

/* A kind's declared defaults are what prepare() accepts: {} (plus the
 * required params at their minimum) prepares, and each declared bound is
 * enforced: one past min or max is a 400 naming the key. */
Test(injector, prepare_enforces_the_declared_ranges)
{
    for (const injector *const *k = injector_table; *k; k++) {
        const injector *inj = *k;
        json_t *base = json_object();
        for (const inj_param *p = inj->params; p && p->name; p++)
            if ((p->flags & INJ_REQUIRED) && (p->type == INJ_INT || p->type == INJ_NUMBER))
                json_object_set_new(
                    base, p->name, p->type == INJ_INT ? json_integer((json_int_t)p->min) : json_real(p->min));
        char err[CX_ERRLEN] = "";
        void *ctx = NULL;
        int rc = inj->prepare(base, 1, &ctx, err, sizeof err);
        if (strcmp(inj->type, "straggle") == 0) {
            /* stopped_ms or slowdown is required */
            cr_assert_eq(rc, CX_EINVAL);
            json_object_set_new(base, "slowdown", json_real(2));
            rc = inj->prepare(base, 1, &ctx, err, sizeof err);
        }
        cr_assert_eq(rc, 0, "%s: %s", inj->type, err);
        inj->free(ctx);
        for (const inj_param *p = inj->params; p && p->name; p++) {
            if ((p->type != INJ_INT && p->type != INJ_NUMBER) || (p->flags & INJ_CUSTOM))
                continue;
            double step = p->type == INJ_INT ? 1 : fmax(1e-6, fabs(inj_param_max(p)) * 1e-6);
            double outside[2] = {p->min - step, inj_param_max(p) + step};
            for (int i = 0; i < 2; i++) {
                json_t *bad = json_deep_copy(base);
                json_object_set_new(bad, p->name,
                                    p->type == INJ_INT ? json_integer((json_int_t)outside[i])
                                                       : json_real(outside[i]));
                ctx = NULL;
                err[0] = '\0';
                rc = inj->prepare(bad, 1, &ctx, err, sizeof err);
                cr_assert_eq(rc, CX_EINVAL, "%s.%s = %g accepted", inj->type, p->name, outside[i]);
                cr_assert(strstr(err, p->name), "%s.%s: '%s' does not name it", inj->type, p->name, err);
                json_decref(bad);
            }
        }
        json_decref(base);
    }
}

Test(injector, traits_query)
{
    cr_assert(injector_has_trait("pause", INJ_TRAIT_STOPS_UNIT));
    cr_assert(injector_has_trait("kill", INJ_TRAIT_TERMINATES | INJ_TRAIT_TAKES_DOWN));
    cr_assert(!injector_has_trait("straggle", INJ_TRAIT_TAKES_DOWN));
    cr_assert(injector_has_trait("latency", INJ_TRAIT_TOXICITY | INJ_TRAIT_NETWORK));
    cr_assert(!injector_has_trait("partition", INJ_TRAIT_TOXICITY));
    cr_assert(injector_has_trait("partition", INJ_TRAIT_TAKES_DOWN));
    cr_assert_eq(injector_traits_of("no-such-kind"), 0);
    cr_assert(!injector_has_trait("no-such-kind", INJ_TRAIT_NETWORK));
    cr_assert(!injector_has_trait("pause", 0), "an empty mask is no trait");
    /* the kinds the harness counts as taking a learner down: its former list */
    static const char *const down[] = {"kill", "preempt", "pause", "partition", "blackhole", NULL};
    int n = 0;
    for (const injector *const *k = injector_table; *k; k++)
        n += ((*k)->traits & INJ_TRAIT_TAKES_DOWN) != 0;
    for (const char *const *d = down; *d; d++)
        cr_assert(injector_has_trait(*d, INJ_TRAIT_TAKES_DOWN), "%s", *d);
    cr_assert_eq(n, 5, "takes_down kinds: %d", n);
}

/* docs/experiment.schema.json's fault_type enum is the table's kinds plus
 * the harness's own syncer_restart, in table order. */
Test(injector, schema_enum_matches_the_table)
{
    json_error_t je;
    json_t *schema = json_load_file(CHAOSLOCO_SRC "/docs/experiment.schema.json", 0, &je);
    cr_assert_not_null(schema, "experiment.schema.json: %s", je.text);
    json_t *e = json_object_get(json_object_get(json_object_get(schema, "$defs"), "fault_type"), "enum");
    cr_assert(json_is_array(e), "$defs.fault_type.enum");
    size_t n = 0;
    for (const injector *const *k = injector_table; *k; k++, n++) {
        const char *s = json_string_value(json_array_get(e, n));
        cr_assert(s && strcmp(s, (*k)->type) == 0,
                  "experiment.schema.json $defs.fault_type.enum[%zu] is %s, injector_table has %s", n,
                  s ? s : "(end)", (*k)->type);
    }
    cr_assert_str_eq(json_string_value(json_array_get(e, n)), "syncer_restart",
                     "after the table's kinds: syncer_restart");
    cr_assert_eq(json_array_size(e), n + 1, "the schema names kinds the table does not have");
    json_decref(schema);
}

/* injector_describe: what GET /v1/fault-kinds and the dashboard serve. */
Test(injector, describe)
{
    json_t *d = injector_describe(injector_find("disk"));
    cr_assert_str_eq(json_string_value(json_object_get(d, "type")), "disk");
    json_t *ops = json_array_get(json_object_get(d, "params"), 1);
    cr_assert_str_eq(json_string_value(json_object_get(ops, "type")), "array");
    cr_assert_eq(json_array_size(json_object_get(ops, "default")), 3, "ops default: every op");
    json_t *path = json_array_get(json_object_get(d, "params"), 2);
    cr_assert_eq(json_integer_value(json_object_get(path, "max_length")), 1024);
    cr_assert(json_is_true(json_object_get(d, "sweep")));
    json_decref(d);
    char text[256];
    inj_param_text(&injector_find("preempt")->params[0], text, sizeof text);
    cr_assert_str_eq(text, "integer 0..600000 ms, default 5000");
}
