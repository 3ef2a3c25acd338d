/* fault_kinds.c - fault kinds by their effect on the unit (see
 * fault_kinds.h): the injector table's traits (injectors/injector.h). */
#include "harness/fault_kinds.h"

#include "injectors/injector.h"

int hx_kind_takes_unit_down(const char *kind)
{
    return kind && injector_has_trait(kind, INJ_TRAIT_TAKES_DOWN);
}

int hx_kind_restarts_unit(const char *kind)
{
    return kind && injector_has_trait(kind, INJ_TRAIT_TERMINATES);
}
