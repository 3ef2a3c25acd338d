/* timebase.h - one time base: another process's CLOCK_MONOTONIC mapped onto
 * this one's, with an error bound.
 *
 * Hosts' monotonic clocks differ by whole boot times (and NTP never steps
 * them), so a time another process stamped means nothing here until it is
 * mapped. Every HTTP answer of chaosloco's servers carries the answering
 * process's own monotonic clock in the header CX_TB_HEADER (common/
 * http_server.c stamps every answer it sends; a foreign coordinator must do
 * the same: docs/telemetry.md, "Time"). Each request this process makes
 * anyway then gives one sample:
 *
 *   send    this process's clock just before the request went out
 *   recv    this process's clock when the answer's status line came back
 *   remote  the stamp, taken by the remote at some instant between the two
 *
 * so the offset (remote clock - this clock) lies in [remote - recv,
 * remote - send] whatever the two directions' delays were: Cristian's
 * estimate remote - (send + recv) / 2 with error <= (recv - send) / 2.
 *
 * What a cx_tb_clock keeps: the tightest sample of each second of remote
 * time (CX_TB_BUCKET_MS; past CX_TB_MAX_BUCKETS buckets they are merged
 * pairwise, so memory is bounded however long the run). What it answers,
 * for any remote time r (cx_tb_map):
 *
 *   the mapped time  r - c(r), where c is a centre line through the
 *                    tightest sample of each CX_TB_SEGMENT_MS segment,
 *                    chained with its slope bounded by the drift bound:
 *                    it follows drift, and it is continuous and strictly
 *                    increasing, so two times of one process keep their
 *                    order and their difference (within 0.1 %)
 *   its error bound  from the samples near r: each one's offset interval,
 *                    widened by CX_TB_MAX_DRIFT_PPM per ms between it and r,
 *                    intersected; the bound covers that intersection as
 *                    seen from c(r)
 *
 * The bound is sound as long as the two clocks' rates differ by less than
 * CX_TB_MAX_DRIFT_PPM (1000 ppm: crystals are within +-100 ppm, NTP's
 * frequency correction within +-500 ppm). Samples that contradict each
 * other under that assumption (a clock that jumped: not a monotonic clock,
 * or another host behind the same address) are counted as inconsistent and
 * the bound then comes from the single nearest tight sample.
 *
 * What it is not: a clock synchronisation. Nothing is adjusted; the times
 * are mapped where they are judged (the harness's runner, the dashboard).
 *
 * Thread safety: every call locks the clock (the harness's lease thread
 * adds samples while the main thread maps).
 */
#ifndef CX_TIMEBASE_H
#define CX_TIMEBASE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http_client.h"

#define CX_TB_HEADER "X-Chaosloco-Mono-Ms" /* value: the answerer's CLOCK_MONOTONIC in ms, e.g. 12345.678 */
#define CX_TB_MAX_DRIFT_PPM 1000.0         /* assumed bound on two monotonic clocks' rate difference */
#define CX_TB_BUCKET_MS 1000.0             /* remote ms per kept sample (the tightest of them) */
#define CX_TB_MAX_BUCKETS 2048             /* kept samples at most (then buckets double) */
#define CX_TB_SEGMENT_MS 10000.0           /* remote ms per anchor of the centre line */

typedef struct cx_tb_clock cx_tb_clock;

/* A clock with no sample yet; name says whose it is in messages ("syncer",
 * "agent 1"; copied). NULL when out of memory. */
cx_tb_clock *cx_tb_clock_new(const char *name);
void cx_tb_clock_free(cx_tb_clock *c); /* NULL is a no-op */
const char *cx_tb_clock_name(const cx_tb_clock *c);

/* One round trip: send_ms and recv_ms on this process's clock (ms, as
 * cx_mono_ns() / 1e6), remote_ms the remote's stamp. 0, or CX_EINVAL (not
 * finite, recv before send) and the sample is not kept. */
int cx_tb_add(cx_tb_clock *c, double send_ms, double recv_ms, double remote_ms);

/* A cx_http_opts.observe callback (clock is the cx_tb_clock): the sample of
 * one answer from its CX_TB_HEADER stamp and the result's t_send_ms /
 * t_recv_ms. An answer without a valid stamp is counted (cx_tb_stats
 * unstamped) and gives no sample. */
void cx_tb_observe(void *clock, const cx_http_result *r);

/* Remote time remote_ms mapped onto this process's clock: *local_ms, and
 * *err_ms >= 0 such that the true time lies within local +- err. 0, or
 * CX_ENOTFOUND when the clock has no sample yet. */
int cx_tb_map(cx_tb_clock *c, double remote_ms, double *local_ms, double *err_ms);

/* What a clock looks like now (journals, summaries, logs). */
typedef struct cx_tb_stats {
    int64_t samples;      /* samples taken */
    int64_t unstamped;    /* answers without a valid stamp */
    int64_t inconsistent; /* mappings whose nearby samples contradicted each other */
    int have;             /* 1 once there is a sample: the figures below are set */
    double offset_ms;     /* remote - local at the latest sample (the centre line) */
    double error_ms;      /* the bound there */
    double rtt_min_ms;    /* the tightest round trip */
    double drift_ppm;     /* the centre line's mean slope over its span (0 for one anchor) */
    double span_ms;       /* remote ms from the first kept sample to the latest */
} cx_tb_stats;

void cx_tb_stats_get(cx_tb_clock *c, cx_tb_stats *out);
/* The stats as JSON (new): {"clock": name, "samples", "unstamped",
 * "inconsistent", "offset_ms", "error_ms", "rtt_min_ms", "drift_ppm",
 * "span_s"}; the figures are null before the first sample. */
json_t *cx_tb_json(cx_tb_clock *c);

/* Parse a CX_TB_HEADER value ("12345.678", decimal ms, finite, >= 0): 0 and
 * *ms, else CX_EINVAL. */
int cx_tb_parse_stamp(const char *value, double *ms);

#endif
