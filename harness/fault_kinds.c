/* fault_kinds.c - fault kinds by their effect (see fault_kinds.h): the
 * injector table's traits (injectors/injector.h) and the harness's own
 * kinds. */
#include "harness/fault_kinds.h"

#include <stddef.h>
#include <string.h>

#include "harness/experiment.h"
#include "injectors/injector.h"

const hx_kind hx_harness_kinds[] = {
    {EXP_SYNCER_RESTART, HX_KIND_HARNESS | HX_KIND_SYNCER_DOWN},
    {NULL, 0},
};

static unsigned harness_flags(const char *kind)
{
    for (const hx_kind *k = hx_harness_kinds; kind && k->name; k++)
        if (strcmp(k->name, kind) == 0)
            return k->flags;
    return 0;
}

int hx_kind_is_harness(const char *kind)
{
    return (harness_flags(kind) & HX_KIND_HARNESS) != 0;
}

int hx_kind_takes_syncer_down(const char *kind)
{
    return (harness_flags(kind) & HX_KIND_SYNCER_DOWN) != 0;
}

int hx_kind_takes_unit_down(const char *kind)
{
    return kind && injector_has_trait(kind, INJ_TRAIT_TAKES_DOWN);
}

int hx_kind_restarts_unit(const char *kind)
{
    return kind && injector_has_trait(kind, INJ_TRAIT_TERMINATES);
}
