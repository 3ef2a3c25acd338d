/* test_round.c - syncer-numbered rounds (numerics/round.h): which round a
 * contribution joins, when a round closes (quorum, grace window, every live
 * learner), and the round -> version map. */
#include <criterion/criterion.h>

#include "numerics/round.h"

Test(round, a_contribution_joins_the_open_round_or_opens_the_next)
{
    /* nothing merged, nothing open: round 0 */
    cr_assert_eq(round_join_id(0, -1, -1), 0);
    /* round 5 merged, nothing open: round 6 */
    cr_assert_eq(round_join_id(0, -1, 5), 6);
    /* round 6 open: every contribution joins it, whatever its base */
    cr_assert_eq(round_join_id(1, 6, 5), 6);
    /* ids only grow */
    for (int64_t closed = -1; closed < 12; closed++)
        for (int open = 0; open < 2; open++)
            cr_assert_gt(round_join_id(open, closed + 1, closed), closed);
}

Test(round, closes_at_quorum_plus_grace_or_when_every_live_learner_is_in)
{
    /* K=1, 4 live: one contribution, grace ends at 100 */
    cr_assert_eq(round_close_due(1, 1, 4, 50, 100, 40.0), ROUND_WAIT, "inside the grace window");
    cr_assert_eq(round_close_due(1, 1, 4, 100, 100, 40.0), ROUND_GRACE, "grace over");
    cr_assert_eq(round_close_due(1, 1, 4, 60, 60, 0.0), ROUND_QUORUM, "no grace: at the quorum");
    cr_assert_eq(round_close_due(4, 1, 4, 50, 100, 40.0), ROUND_ALL, "every live learner is in");
    /* K=3: two contributions never close on time alone */
    cr_assert_eq(round_close_due(2, 3, 4, 1000000, -1, 0.0), ROUND_WAIT, "below the quorum");
    cr_assert_eq(round_close_due(3, 3, 4, 99, 100, 10.0), ROUND_WAIT);
    cr_assert_eq(round_close_due(3, 3, 4, 100, 100, 10.0), ROUND_GRACE);
    /* fewer live than K: all of them closes it */
    cr_assert_eq(round_close_due(2, 4, 2, 0, -1, 0.0), ROUND_ALL);
    cr_assert_eq(round_close_due(1, 1, 0, 0, -1, 0.0), ROUND_ALL, "live < 1 counts as 1");
    cr_assert_str_eq(round_close_name(ROUND_GRACE), "grace");
    cr_assert_str_eq(round_close_name(ROUND_ALL), "all");
}

Test(round, map_gives_the_version_each_round_produced)
{
    round_map m = {0};
    cr_assert_eq(round_map_version(&m, 1), -1, "empty");
    for (int r = 1; r <= 10; r++)
        round_map_add(&m, r * 2, 100 + r, r);
    cr_assert_eq(round_map_version(&m, 2), 101);
    cr_assert_eq(round_map_version(&m, 20), 110);
    cr_assert_eq(round_map_version(&m, 3), -1, "a round id that never merged");
    for (int r = 11; r <= ROUND_MAP_N + 20; r++)
        round_map_add(&m, r * 2, 100 + r, 1);
    cr_assert_eq(round_map_version(&m, 2), -1, "forgotten after ROUND_MAP_N rounds");
    cr_assert_eq(round_map_version(&m, (ROUND_MAP_N + 20) * 2), 100 + ROUND_MAP_N + 20);
    cr_assert_eq(round_map_version(&m, 42 * 2), 142);
}
