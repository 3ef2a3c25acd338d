/* history.h - the event history the hypotheses are judged on.
 *
 * A hyp_history is what a runner collected about one run, and nothing
 * else: it never talks to a process and judges nothing. The runner feeds it
 *
 *   syncer events   (GET /v1/events, docs/telemetry.md: seq, t_mono_ms, type, ...)
 *   fault records   (each agent's GET /v1/faults, tagged with its learner id)
 *   action events   (the harness's own events.jsonl lines, journal.h)
 *   counters        (figures only the runner knows: wire bytes, control loss)
 *   learner finals  (each learner's last step/tokens as the syncer saw them)
 *
 * and the hypotheses (hypothesis.h, one file each under harness/hypotheses/)
 * read it through the hx_* readers and queries below, which hold the notions
 * several of them share: a fault's window, the down intervals, the live
 * count, the fragment count, the run-relative time.
 *
 * One time base: every time the history holds is the harness's own
 * CLOCK_MONOTONIC ms. The runner maps the syncer's (coordinator's) and each
 * agent's times onto it before it feeds them (common/timebase.h, the
 * runner's run/clock.c), so a hypothesis never meets another host's clock.
 * A mapped time carries its error bound: an event's t_err_ms, a fault
 * record's mono_err_ms (ms; absent or 0 = exact: the harness's own times,
 * an events file written on its clock, a test's history). Times of one
 * source compare exactly (the mapping keeps their order and lengths); a
 * syncer event against an agent's fault time is uncertain by the sum of
 * both bounds (hx_cross_err), and the queries below and the hypotheses
 * judge such an edge conservatively: what must be shown to have happened
 * inside a window counts only when it is inside whatever the clocks' error.
 *
 * Ownership: hyp_history keeps its own deep copies of what it is fed; every
 * json_t a reader returns is borrowed from it and lives as long as it does.
 */
#ifndef HARNESS_HISTORY_H
#define HARNESS_HISTORY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hyp_history hyp_history;

/* Counters a runner may set (hyp_history_set_counter). */
#define HYP_C_BYTES_IN "bytes_in"         /* syncer /v1/status bytes.in at the end */
#define HYP_C_BYTES_OUT "bytes_out"       /* syncer /v1/status bytes.out at the end */
#define HYP_C_TOKENS "tokens_trained"     /* total tokens trained by all learners */
#define HYP_C_CONTROL_LOSS "control_loss" /* final eval loss of a control run */
#define HYP_C_STEPS_TARGET "steps_target" /* inner steps each learner must train */
#define HYP_C_END_MONO "end_mono_ms"      /* end of the observed run */
#define HYP_C_START_MONO "start_mono_ms"  /* start of the observed run */

/* ---- feeding (the runner) ---- */

/* learners: M; quorum: K (the live floor of no_global_downtime). */
hyp_history *hyp_history_new(int learners, int quorum);
void hyp_history_free(hyp_history *h);
/* A syncer event (docs/telemetry.md shape). Copied; kept in seq order. Returns
 * CX_EINVAL (with err) when it lacks seq/t_mono_ms/type. */
int hyp_history_add_syncer_event(hyp_history *h, const json_t *ev, char *err, size_t errlen);
/* An agent fault record (docs/telemetry.md shape) of the agent beside learner. */
int hyp_history_add_fault(hyp_history *h, int learner, const json_t *record, char *err, size_t errlen);
/* A harness action event (journal.h: phase invoke|ok|fail ...). */
int hyp_history_add_action(hyp_history *h, const json_t *ev, char *err, size_t errlen);
void hyp_history_set_counter(hyp_history *h, const char *name, double value);
/* 1 and *out when set, else 0. */
int hyp_history_counter(const hyp_history *h, const char *name, double *out);
/* Final per-learner progress as the runner saw it (syncer status at the
 * end): step and cumulative tokens. Optional; heartbeats are used too. */
void hyp_history_set_learner_final(hyp_history *h, int learner, int64_t step, int64_t tokens);

/* ---- reading (the hypotheses) ---- */

int hx_learners(const hyp_history *h); /* M (>= 1) */
int hx_quorum(const hyp_history *h);   /* K (>= 1) */
size_t hx_nevents(const hyp_history *h);
const json_t *hx_event(const hyp_history *h, size_t i); /* i < hx_nevents, seq order */
/* The next syncer event of type at index >= *i, *i moved past it; NULL at
 * the end. for (size_t i = 0; (e = hx_next_event(h, "eval", &i));) ... */
const json_t *hx_next_event(const hyp_history *h, const char *type, size_t *i);
size_t hx_nfaults(const hyp_history *h);
const json_t *hx_fault(const hyp_history *h, size_t i); /* i < hx_nfaults, as fed */
int hx_fault_learner(const hyp_history *h, size_t i);   /* the learner of fault i */
size_t hx_nactions(const hyp_history *h);
const json_t *hx_action(const hyp_history *h, size_t i); /* i < hx_nactions, as fed */
/* 1 and the learner's final step/tokens when the runner set them, else 0. */
int hx_learner_final(const hyp_history *h, int learner, int64_t *step, int64_t *tokens);

/* ---- JSON members, tolerant of what is missing ---- */

/* An integer (or a finite real, truncated) at key, else dflt. */
int64_t hx_jint(const json_t *o, const char *key, int64_t dflt);
/* A finite number at key: 1 and *out, else 0 (absent, null, NaN). */
int hx_jnum(const json_t *o, const char *key, double *out);
/* A loss (nats): finite and >= 0. The syncer writes a NaN/Inf loss as -1
 * (JSON has no NaN) and a cross-entropy is never negative, so a negative,
 * null or missing value all mean "not finite": 0. */
int hx_jloss(const json_t *o, const char *key, double *out);
const char *hx_jstr(const json_t *o, const char *key); /* "" when absent, never NULL */
int64_t hx_ev_seq(const json_t *e);                    /* seq, -1 none */
int64_t hx_ev_t(const json_t *e);                      /* t_mono_ms, 0 none */
int64_t hx_ev_err(const json_t *e);                    /* t_err_ms: its bound (ms), 0 none */
int hx_ev_is(const json_t *e, const char *type);       /* 1 when e's type is type */

/* ---- queries: notions several hypotheses share ---- */

int64_t hx_start(const hyp_history *h); /* run start: the counter, else the first event */
int64_t hx_end(const hyp_history *h);   /* run end: the counter, else the last event/fault end */
/* s of t since the run start (for "t=24.2 s of the run"). */
double hx_run_s(const hyp_history *h, int64_t t);
/* "t=24.2 s of the run" into buf (returned). */
const char *hx_fmt_t(const hyp_history *h, int64_t t, char *buf, size_t len);

int64_t hx_fault_start(const json_t *rec); /* started_mono_ms, -1 none */
int64_t hx_fault_err(const json_t *rec);   /* mono_err_ms: the bound of its times (ms), 0 none */
/* The uncertainty of an event's time against a fault record's: the sum of
 * both bounds (ms). "Certainly after" is t_ev - t_fault > hx_cross_err. */
int64_t hx_cross_err(const json_t *ev, const json_t *rec);
/* The largest bound of any time in the history (ms, 0 when all are exact):
 * a safe margin where an edge is compared with many events. */
int64_t hx_err_max(const hyp_history *h);
/* When the fault healed: ended_mono_ms, else started + duration_ms. */
int64_t hx_fault_end(const json_t *rec);
/* 1 when the record took effect: it has a start and did not fail. */
int hx_fault_ran(const json_t *rec);

/* The rejoin after a fault on learner (a new incarnation's join), judged
 * with the clocks' error: a join that may have come before the fault's
 * start (t - start < hx_cross_err) counts as before it, so a join within the
 * bound of the start is never taken for the rejoin (the conservative side:
 * "never joined again" rather than a pass on the old incarnation's join).
 * With exact times: joins before the start, then the first at or after it. */
typedef struct hx_rejoin_info {
    const json_t *join; /* the first join of a new incarnation certainly not before the start, NULL none */
    int64_t prev_inc;   /* the highest incarnation joined not certainly after the start (0 none) */
    const json_t *edge; /* a join within the error bound of the start (counted before it), NULL none */
    int64_t edge_err;   /* ms: that bound */
} hx_rejoin_info;
void hx_rejoin(const hyp_history *h, int learner, const json_t *fault, hx_rejoin_info *out);
/* 1 when merge event merge lists (learner, incarnation) among its participants. */
int hx_participated(const json_t *merge, int learner, int64_t incarnation);

typedef struct hx_interval {
    int learner;    /* who is down */
    int64_t a, b;   /* [a, b) mono ms */
    int64_t ea, eb; /* ms: the error bounds of a and b */
} hx_interval;

/* Down intervals (new array, *n entries; NULL when out of memory): a fault
 * of a kind that takes the unit down (hx_kind_takes_unit_down), from its
 * start until it healed, and for a kind that restarts the unit until the
 * learner joined again (hx_rejoin; or the end of the history). */
hx_interval *hx_down_intervals(const hyp_history *h, size_t *n);
/* Time within [a, b) during which fewer than k learners were alive. */
int64_t hx_excused_ms(const hyp_history *h, const hx_interval *iv, size_t n, int k, int64_t a, int64_t b);
/* Fragment count: the latest start event's versions, else max id + 1. */
int hx_fragment_count(const hyp_history *h);
/* Tokens trained: the runner's counter, else each learner's largest
 * cumulative token count (heartbeats, final status). */
double hx_tokens_trained(const hyp_history *h);

#endif
