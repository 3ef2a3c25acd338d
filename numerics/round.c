/* round.c - the syncer-numbered rounds of one fragment (round.h). */
#include "numerics/round.h"

#include <stddef.h>

#include "common/parse.h"

int64_t round_join_id(int open, int64_t open_id, int64_t closed_id)
{
    return open ? open_id : closed_id + 1;
}

const char *round_close_name(round_close c)
{
    static const char *const names[] = {"wait", "quorum", "grace", "all", NULL};
    return cx_enum_name(names, c);
}

round_close round_close_due(int n, int quorum, int live, int64_t now_ms, int64_t grace_end_ms,
                            double grace_ms)
{
    if (live < 1)
        live = 1;
    if (n >= live)
        return ROUND_ALL;
    if (n >= quorum && grace_end_ms >= 0 && now_ms >= grace_end_ms)
        return grace_ms > 0 ? ROUND_GRACE : ROUND_QUORUM;
    return ROUND_WAIT;
}

void round_map_add(round_map *m, int64_t round, int64_t version, int k)
{
    int i = (int)(m->n % ROUND_MAP_N);
    m->round[i] = round;
    m->version[i] = version;
    m->participants[i] = k;
    m->n++;
}

int64_t round_map_version(const round_map *m, int64_t round)
{
    int64_t kept = m->n < ROUND_MAP_N ? m->n : ROUND_MAP_N;
    for (int64_t j = 1; j <= kept; j++) {
        int i = (int)((m->n - j) % ROUND_MAP_N);
        if (m->round[i] == round)
            return m->version[i];
    }
    return -1;
}
