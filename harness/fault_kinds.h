/* fault_kinds.h - what the harness needs to know about a fault kind's
 * effect on its unit, asked by name.
 *
 * The one place in harness/ that names fault kinds by their effect: the
 * runner's live floor (run/timeline.c), the down intervals of the history
 * (history.c) and the hypotheses that look for a fault that took a learner
 * out (reintegration, fault_effective, rejoin_time) all ask here. Each is
 * one query of the injector table's traits (injectors/injector.h), so a new
 * kind declares its effect in its own file and harness/ follows.
 */
#ifndef HARNESS_FAULT_KINDS_H
#define HARNESS_FAULT_KINDS_H

/* 1 when a fault of this kind takes its learner out of training while it
 * is active (INJ_TRAIT_TAKES_DOWN: kill, preempt, pause, partition,
 * blackhole), else 0 (also for NULL or an unknown name). */
int hx_kind_takes_unit_down(const char *kind);
/* 1 when a fault of this kind ends the learner's process, so that it is
 * back only after it joins again with a new incarnation
 * (INJ_TRAIT_TERMINATES: kill, preempt). */
int hx_kind_restarts_unit(const char *kind);

#endif
