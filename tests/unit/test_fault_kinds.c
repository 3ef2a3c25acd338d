/* test_fault_kinds.c - fault kinds by their effect (harness/fault_kinds.h):
 * the agents' kinds from the injector table's traits, the harness's own
 * kinds from hx_harness_kinds and their flags. */
#include <criterion/criterion.h>
#include <string.h>

#include "harness/experiment.h"
#include "harness/fault_kinds.h"
#include "injectors/injector.h"

TestSuite(fault_kinds);

Test(fault_kinds, syncer_restart_is_the_harness_own)
{
    cr_assert(hx_kind_is_harness(EXP_SYNCER_RESTART));
    cr_assert(hx_kind_takes_syncer_down(EXP_SYNCER_RESTART));
    /* it does not take a learner's unit down: the live floor ignores it */
    cr_assert_not(hx_kind_takes_unit_down(EXP_SYNCER_RESTART));
    cr_assert_not(hx_kind_restarts_unit(EXP_SYNCER_RESTART));
    cr_assert_not(hx_kind_is_harness(NULL));
    cr_assert_not(hx_kind_takes_syncer_down(NULL));
    cr_assert_not(hx_kind_is_harness("syncer"), "a prefix is not a kind");
}

Test(fault_kinds, the_harness_kinds_are_not_the_agents)
{
    int n = 0;
    for (const hx_kind *k = hx_harness_kinds; k->name; k++, n++) {
        cr_assert(k->flags & HX_KIND_HARNESS, "%s: an entry of the harness's table is its own", k->name);
        for (const injector *const *p = injector_table; *p; p++)
            cr_assert_str_neq((*p)->type, k->name, "%s is also an agent's kind", k->name);
    }
    cr_assert_eq(n, 1);
    /* and no agent's kind is the harness's */
    for (const injector *const *p = injector_table; *p; p++) {
        cr_assert_not(hx_kind_is_harness((*p)->type), "%s", (*p)->type);
        cr_assert_not(hx_kind_takes_syncer_down((*p)->type), "%s", (*p)->type);
    }
    cr_assert(hx_kind_takes_unit_down("kill") && hx_kind_restarts_unit("kill"));
}
