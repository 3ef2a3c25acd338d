/* round.h - the slot-aligned rounds of one fragment (decoupled and diloco):
 * which round a contribution joins, when a round closes, and which version
 * each merged round produced.
 *
 * The stagger schedule (fragment.h) makes fragment p due at fixed inner
 * steps; the r-th of them is round r of p (fragment_round). A learner's
 * contribution names its r (X-Chaosloco-Round); every learner's contribution
 * for (p, r) joins the same round on the syncer. One round of p is open at
 * a time; round ids of p only grow, and each merged round produces exactly
 * one version of p (versions[p] + 1 at its merge), so "rounds of p since a
 * base version" and "versions since it" are the same count.
 *
 * Pure bookkeeping over numbers: no locks, no payloads, no clock reads (the
 * caller passes now). The syncer holds the contributions, computes the
 * grace window and does the merge (syncer.c, "per-fragment rounds").
 */
#ifndef CX_ROUND_H
#define CX_ROUND_H

#include <stdint.h>

/* Which round a contribution naming round `want` (-1: none named) joins.
 * open: 1 when a round of the fragment is open, with id open_id; closed_id:
 * the last merged round (-1 none). Rules:
 *   - a round is open: the contribution joins it; naming a later round
 *     moves the open round's id up to it (the slot has come for someone;
 *     the earlier ones are late into it); naming an earlier one is late;
 *   - none is open: a new round opens, with id want when want > closed_id,
 *     else closed_id + 1 (a late contribution, or one naming no round, is
 *     folded into the next round with its own base).
 * Returns the id of the round it is in now; *late = 1 when it named a
 * round that had closed or that the open round has passed. */
int64_t round_join_id(int open, int64_t open_id, int64_t closed_id, int64_t want, int *late);

/* What round_close_due decided. */
typedef enum round_close {
    ROUND_WAIT = 0, /* keep collecting */
    ROUND_QUORUM,   /* n reached the quorum and the grace window is 0 */
    ROUND_GRACE,    /* the grace window after the quorum is over */
    ROUND_ALL,      /* every live learner has contributed */
} round_close;
const char *round_close_name(round_close c); /* "wait", "quorum", "grace", "all" */

/* Whether a decoupled round holding n contributions closes at now:
 * n >= live (every live learner is in; live < 1 counts as 1) closes at
 * once; else n >= quorum and now >= grace_end_ms (the end of the grace
 * window that started when the quorum was reached; grace_ms is its length,
 * which only picks the name). grace_end_ms < 0: the quorum was not reached
 * yet. */
round_close round_close_due(int n, int quorum, int live, int64_t now_ms, int64_t grace_end_ms,
                            double grace_ms);

/* ---- round -> version ---- */

#define ROUND_MAP_N 64 /* merged rounds remembered per fragment */

/* The last ROUND_MAP_N merged rounds of one fragment: round id, the version
 * its merge produced, its participants. An embedded value (zeroed = empty). */
typedef struct round_map {
    int64_t round[ROUND_MAP_N];    /* round ids, ring */
    int64_t version[ROUND_MAP_N];  /* version each produced */
    int participants[ROUND_MAP_N]; /* contributions merged */
    int64_t n;                     /* rounds added (ring index = n % ROUND_MAP_N) */
} round_map;

/* Record that round `round` merged into `version` with k participants. */
void round_map_add(round_map *m, int64_t round, int64_t version, int k);
/* The version the merged round `round` produced, or -1 when it is not among
 * the remembered ones (not merged yet, or too old). */
int64_t round_map_version(const round_map *m, int64_t round);

#endif
