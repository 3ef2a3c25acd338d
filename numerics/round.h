/* round.h - the rounds of one fragment (decoupled and diloco): which round
 * a contribution joins, when a round closes, and which version each merged
 * round produced.
 *
 * The syncer numbers the rounds: round r of fragment p is the r-th round of
 * p it opens. A contribution names none; it joins the round of its fragment
 * that is open when it arrives, or opens the next one (closed + 1), and the
 * 202 answer says which. One round of p is open at a time; round ids of p
 * only grow, and each merged round produces exactly one version of p
 * (versions[p] + 1 at its merge), so "rounds of p since a base version" and
 * "versions since it" are the same count. Learners stay slot-aligned by
 * their schedule (each joins at the others' schedule position), so the
 * contributions of one slot arrive together and meet in one round.
 *
 * Pure bookkeeping over numbers: no locks, no payloads, no clock reads (the
 * caller passes now). The syncer holds the contributions, computes the
 * grace window and does the merge (trainer/syncer/rounds.c).
 */
#ifndef CX_ROUND_H
#define CX_ROUND_H

#include <stdint.h>

/* The round a contribution joins: the open one (open: 1, with id open_id),
 * or else the next after the last merged one (closed_id, -1 none). */
int64_t round_join_id(int open, int64_t open_id, int64_t closed_id);

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
