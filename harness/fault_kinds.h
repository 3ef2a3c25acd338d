/* fault_kinds.h - what the harness needs to know about a fault kind's
 * effect, asked by name.
 *
 * The one place in harness/ that names fault kinds by their effect: the
 * runner's live floor and its dispatch (run/timeline.c), the loader's
 * checks (exp_method.c), the Chaos Toolkit export (ctk.c), the report's
 * fault windows (report.c), the down intervals of the history (history.c)
 * and the hypotheses that look for a fault that took a learner out
 * (reintegration, fault_effective, rejoin_time) and the docs generator
 * (tools/kinds_docs.c) all ask here. An agent's
 * kind is one query of the injector table's traits (injectors/injector.h),
 * so a new kind declares its effect in its own file and harness/ follows;
 * the harness's own kinds (the runner performs them, no agent does) are
 * the entries of hx_harness_kinds, each with its flags.
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

/* ---- the harness's own kinds ---- */

#define HX_KIND_HARNESS 0x1u     /* the runner performs it itself: never sent to an agent */
#define HX_KIND_SYNCER_DOWN 0x2u /* it takes the syncer down until the runner starts it again */

/* One fault kind of the harness's own. */
typedef struct hx_kind {
    const char *name; /* as an experiment file's "fault" names it */
    unsigned flags;   /* HX_KIND_* */
} hx_kind;

/* The harness's own kinds ({NULL, 0} ends it): syncer_restart (SIGKILL or
 * SIGTERM the launched syncer, start it again; experiment.h). */
extern const hx_kind hx_harness_kinds[];

/* 1 when the runner performs a fault of this kind itself (HX_KIND_HARNESS):
 * not sent to an agent, its params checked by the loader, not by an
 * injector; else 0 (also for NULL or an agent's kind). */
int hx_kind_is_harness(const char *kind);
/* 1 when a fault of this kind takes the syncer down (HX_KIND_SYNCER_DOWN). */
int hx_kind_takes_syncer_down(const char *kind);

#endif
