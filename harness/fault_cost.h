/* fault_cost.h - what each fault of a run cost, for summary.json and
 * report.html ("what each fault cost").
 *
 * What it is: figures per fault record of a run's history (history.h),
 * measured from the syncer's events and the agents' fault records only,
 * with the same meanings wherever they are shown:
 *
 *   tokens_never_merged  tokens of the fault's learner that never reached a
 *                        merge: its contributions sent from the fault's start
 *                        until it rejoined that no merge took (dropped, or
 *                        pending when its incarnation died or the run
 *                        ended), each counted tokens/P as a merge moves 1/P
 *                        of them; for a fault that restarted the unit at
 *                        least what the dead incarnation trained past the
 *                        checkpoint its successor resumed from (heartbeat
 *                        token counters)
 *   time_to_rejoin_s     from the fault's end to the first merge that took
 *                        a contribution of its learner again; null: never
 *   merges_missed        merges from the fault's start until that rejoin
 *                        that the learner would have been part of at its
 *                        share outside that stretch, less those it was part
 *                        of (>= 0)
 *   goodput_during/after merged tokens per second during the fault, and in
 *                        as long a stretch after it (cut at the next fault's
 *                        start or the run's end), each as a ratio to the
 *                        same run's fault-free stretch (every moment no fault
 *                        was active and no learner was still rejoining);
 *                        null for a stretch under 2 s (too few merges to
 *                        make a rate of)
 *
 * What it is not: a verdict (hypotheses judge) or I/O.
 */
#ifndef HARNESS_FAULT_COST_H
#define HARNESS_FAULT_COST_H

#include <jansson.h>

#include "harness/history.h"

/* {"reference": {merged_tokens_per_s|null, span_s}, "faults": [{id, type,
 * learner, start_s, end_s, tokens_never_merged, time_to_rejoin_s|null,
 * merges_missed, merges_in_window, merged_tokens_per_s_during|null,
 * goodput_during|null, goodput_after|null, start_mono_ms, end_mono_ms}]};
 * times in s since the run's start (hx_start), and the window's ends in
 * CLOCK_MONOTONIC ms. New reference, NULL when out of memory. */
json_t *fault_cost_json(const hyp_history *h);

#endif
