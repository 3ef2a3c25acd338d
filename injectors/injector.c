/* injector.c - the registry of fault kinds. Add a kind: write
 * injectors/<kind>.c exporting `const injector inj_<kind>`, declare it
 * below, and list it in injector_table. */
#include "injectors/injector.h"

#include <string.h>

/* ---- registered fault kinds ---- */

extern const injector inj_kill, inj_preempt, inj_pause, inj_straggle, inj_cpu, inj_memory;
extern const injector inj_clock, inj_disk, inj_nan;
extern const injector inj_latency, inj_bandwidth, inj_blackhole, inj_reset_peer, inj_slicer, inj_limit_data;
extern const injector inj_corrupt, inj_partition;

const injector *const injector_table[] = {
    &inj_kill,    &inj_preempt,   &inj_pause,     &inj_straggle,   &inj_cpu,    &inj_memory,
    &inj_latency, &inj_bandwidth, &inj_blackhole, &inj_reset_peer, &inj_slicer, &inj_limit_data,
    &inj_corrupt, &inj_partition, &inj_clock,     &inj_disk,       &inj_nan,    NULL,
};

const injector *injector_find(const char *type)
{
    if (!type)
        return NULL;
    for (const injector *const *p = injector_table; *p; p++)
        if (strcmp((*p)->type, type) == 0)
            return *p;
    return NULL;
}
