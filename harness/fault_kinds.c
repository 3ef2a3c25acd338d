/* fault_kinds.c - fault kinds by their effect on the unit (see
 * fault_kinds.h). At the merge with the injector traits table each body
 * becomes injector_has_trait(kind, ...). */
#include "harness/fault_kinds.h"

#include <string.h>

static int in_list(const char *kind, const char *const *list)
{
    for (int i = 0; kind && list[i]; i++)
        if (strcmp(kind, list[i]) == 0)
            return 1;
    return 0;
}

int hx_kind_takes_unit_down(const char *kind)
{
    static const char *const down[] = {"kill", "preempt", "pause", "partition", "blackhole", NULL};
    return in_list(kind, down);
}

int hx_kind_restarts_unit(const char *kind)
{
    static const char *const restart[] = {"kill", "preempt", NULL};
    return in_list(kind, restart);
}
