/* fault_kinds.h - what the harness needs to know about a fault kind's
 * effect on its unit, asked by name.
 *
 * The one place in harness/ that names fault kinds by their effect: the
 * runner's live floor (run_actions.c), the down intervals of the history
 * (history.c) and the hypotheses that look for a fault that took a learner
 * out (reintegration, fault_effective) all ask here. Today the lists are
 * written out below; once the injector table carries traits, each body
 * becomes one trait query (injector_has_trait) and nothing else changes.
 * Not the list of valid kinds: that is the injector table's
 * (experiment.c validates against it).
 */
#ifndef HARNESS_FAULT_KINDS_H
#define HARNESS_FAULT_KINDS_H

/* 1 when a fault of this kind takes its learner out of training while it
 * is active (kill, preempt, pause, partition, blackhole), else 0. */
int hx_kind_takes_unit_down(const char *kind);
/* 1 when a fault of this kind ends the learner's process, so that it is
 * back only after it joins again with a new incarnation (kill, preempt). */
int hx_kind_restarts_unit(const char *kind);

#endif
