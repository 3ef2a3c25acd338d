/* sim.h - a discrete-event goodput simulator of a failure-prone cluster.
 *
 * Reproduces the shape of the Decoupled DiLoCo paper's Table 1 (goodput and
 * uptime of data-parallel, elastic data-parallel and decoupled training at
 * 150k-2.4M chips) from an explicit, documented model; docs/simulate.md
 * states every assumption, the calibration and the sensitivity study.
 *
 * The model in one paragraph: a job is one or more *groups* of chips (DP and
 * elastic DP: one group of all chips; decoupled: M learner groups of N/M
 * chips). Chips fail as a Poisson process, each at rate 1/MTBF while its
 * group computes (stop_policy chooses what happens while it is stopped).
 * A failure takes down its failure domain (a block of domain_chips
 * chips). A *restart* group (DP) stops on any failure, swaps the failed
 * domain for a spare, restarts and rolls back to its last checkpoint. An
 * *elastic* group pauses to re-shard around the lost domain and runs on
 * with fewer chips; the domain rejoins after its recovery time, costing
 * another re-shard. Groups never wait on each other. It is not a model of
 * training quality, bandwidth or stragglers: only chip-time.
 *
 * Everything here is pure computation: no I/O, no globals, thread-safe.
 */
#ifndef CX_SIM_H
#define CX_SIM_H

#include <stddef.h>
#include <stdint.h>

typedef enum sim_mode {
    SIM_DP,        /* one restart group of all chips */
    SIM_ELASTIC,   /* one elastic group of all chips */
    SIM_DECOUPLED, /* M independent learner groups */
} sim_mode;

/* Shape of the random durations (restart and domain recovery); the mean
 * is always the configured value. */
typedef enum sim_dist {
    SIM_DIST_FIXED,     /* always the mean */
    SIM_DIST_EXP,       /* exponential */
    SIM_DIST_LOGNORMAL, /* lognormal with shape sigma (heavy tail) */
} sim_dist;

/* Failures of chips whose group is stopped (restarting, re-sharding or
 * waiting for domains): do they happen, and what do they cost? */
typedef enum sim_stop_policy {
    SIM_STOP_NONE,   /* no: only computing chips are interrupted (busy clock) */
    SIM_STOP_FOLD,   /* yes, in wall time; handled by the stop in progress at no extra time */
    SIM_STOP_EXTEND, /* yes, in wall time; the stop starts over from the failure */
} sim_stop_policy;

typedef struct sim_params {
    double mtbf_years;           /* per chip mean time between interruptions, y; 0 = never fails */
    double restart_s;            /* mean restart of a stopped restart group (detect, spare, reload), s */
    double recovery_s;           /* mean time a failed domain is out of service, s */
    sim_dist dist;               /* shape of restart_s and recovery_s */
    double lognormal_sigma;      /* shape of SIM_DIST_LOGNORMAL, 1 */
    double rescale_s;            /* elastic re-shard pause (on loss and on rejoin), s */
    double checkpoint_s;         /* compute between checkpoints, s; 0 = Daly's optimum */
    double checkpoint_cost_s;    /* blocking checkpoint write, s */
    int64_t domain_chips;        /* chips per failure domain (slice), chips */
    double horizon_days;         /* simulated wall time per trial, days */
    sim_stop_policy stop_policy; /* failures during a stop */
    int learner_elastic;         /* 1: learners recover elastically; 0: like a DP job */
    int quorum;                  /* K: learners that must compute for global progress */
} sim_params;

/* Outcome of one trial. */
typedef struct sim_result {
    double goodput;      /* useful chip-time / allocated chip-time, 0..1 */
    double uptime;       /* fraction of wall time the global model advances, 0..1 */
    int64_t failures;    /* chip failures that took a domain or job down */
    int64_t stops;       /* restarts + re-shards performed */
    int64_t events;      /* events processed (including thinned failure arrivals) */
    double checkpoint_s; /* checkpoint interval used by restart groups, s (0: none) */
} sim_result;

/* Mean and 95% confidence half-width (Student t) over trials. */
typedef struct sim_stats {
    double goodput_mean;  /* 0..1 */
    double goodput_ci95;  /* half-width, 0..1; 0 with one trial */
    double uptime_mean;   /* 0..1 */
    double uptime_ci95;   /* half-width, 0..1 */
    double failures_mean; /* per trial */
    int trials;           /* count */
} sim_stats;

/* The calibrated defaults (docs/simulate.md, "Calibration"). */
void sim_params_init(sim_params *p);

/* CX_EINVAL naming the bad field when a value is out of range. */
int sim_params_check(const sim_params *p, char *err, size_t errlen);

/* Checkpoint interval a restart group of `chips` uses: p->checkpoint_s if
 * set, else Daly's higher-order optimum for this group's MTBF and the
 * checkpoint cost; 0 when the group never fails (no checkpoints needed). */
double sim_checkpoint_interval_s(const sim_params *p, int64_t chips);

/* Run one trial. learners is M for SIM_DECOUPLED (1..chips) and ignored
 * otherwise. Deterministic in (params, mode, chips, learners, seed);
 * learner g of a decoupled run draws from the same random stream as the
 * single group of a DP/elastic run with the same seed when g == 0, so M=1
 * reproduces DP (restart learners) or elastic DP (elastic learners)
 * exactly. CX_EINVAL on bad input, CX_ENOMEM. */
int sim_run(const sim_params *p, sim_mode mode, int64_t chips, int learners, uint64_t seed, sim_result *out,
            char *err, size_t errlen);

/* Run `trials` trials with seeds derived from seed, and summarise. */
int sim_run_trials(const sim_params *p, sim_mode mode, int64_t chips, int learners, uint64_t seed, int trials,
                   sim_stats *out, char *err, size_t errlen);

/* The paper's Table 1 goodput in percent for this row and chip count, or
 * a negative value when the paper gives none. */
double sim_paper_goodput_pct(sim_mode mode, int learners, int64_t chips);

/* "dp", "elastic", "decoupled"; and back (CX_EINVAL on anything else). */
const char *sim_mode_name(sim_mode mode);
int sim_mode_parse(const char *s, sim_mode *out, char *err, size_t errlen);
const char *sim_dist_name(sim_dist d);
const char *sim_stop_policy_name(sim_stop_policy s); /* none, fold, extend */
int sim_stop_policy_parse(const char *s, sim_stop_policy *out, char *err, size_t errlen);
int sim_dist_parse(const char *s, sim_dist *out, char *err, size_t errlen);

#endif
