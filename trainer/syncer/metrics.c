/* metrics.c - the syncer's GET /metrics (part of the api component,
 * api.h): the Prometheus text exposition of its counters, gauges and
 * per-learner families.
 *
 * What it is not: where the counters are kept (each component's struct,
 * core.h) nor the JSON status (api.c). It reads under s->mu and writes
 * nothing. tests/integration/test_dashboard_embed.c checks the Grafana
 * dashboard's metric names against this file's text.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/http_server.h"
#include "common/prom.h"
#include "trainer/syncer/core.h"
#include "trainer/syncer/members.h"

/* GET /metrics, the syncer's counters and gauges (mu held). */
static void metrics_syncer(const syncer *s, cx_buf *b)
{
    cx_prom_one_int(b, "chaosloco_syncer_merges_total", CX_PROM_COUNTER, "Merges done (ddp: averaged steps).",
                    (long long)s->merges);
    cx_prom_family(b, "chaosloco_syncer_contributions_total", CX_PROM_COUNTER,
                   "Contributions and gradients by result and reason.");
    static const char *const accepted[] = {"result", "accepted", "reason", "", NULL};
    cx_prom_int(b, "chaosloco_syncer_contributions_total", accepted, (long long)s->accepted_total);
    for (int r = 1; r < PROTO_R_COUNT; r++) {
        const char *const l[] = {"result", "rejected", "reason", proto_reason_name((proto_reason)r), NULL};
        cx_prom_int(b, "chaosloco_syncer_contributions_total", l, (long long)s->members.rejects[r]);
    }
    static const char *const in[] = {"direction", "in", NULL}, *const out[] = {"direction", "out", NULL};
    cx_prom_family(b, "chaosloco_syncer_bytes_total", CX_PROM_COUNTER, "Tensor payload bytes by direction.");
    cx_prom_int(b, "chaosloco_syncer_bytes_total", in, (long long)s->bytes_in);
    cx_prom_int(b, "chaosloco_syncer_bytes_total", out, (long long)s->bytes_out);
    cx_prom_family(b, "chaosloco_syncer_fragment_answers_total", CX_PROM_COUNTER,
                   "Fragment answers: delta chains, and full f32 fragments by reason (history and mismatch "
                   "are fallbacks).");
    static const char *const delta[] = {"kind", "delta", "reason", "", NULL};
    cx_prom_int(b, "chaosloco_syncer_fragment_answers_total", delta, (long long)s->deltas.answers_delta);
    for (int r = 0; r < FULL_R_COUNT; r++) {
        const char *const l[] = {"kind", "full", "reason", deltas_full_reason_names[r], NULL};
        cx_prom_int(b, "chaosloco_syncer_fragment_answers_total", l, (long long)s->deltas.answers_full[r]);
    }
    static const char *const kd[] = {"kind", "delta", NULL}, *const kf[] = {"kind", "full", NULL};
    cx_prom_family(b, "chaosloco_syncer_fragment_answer_bytes_total", CX_PROM_COUNTER,
                   "Bytes of fragment answers by kind.");
    cx_prom_int(b, "chaosloco_syncer_fragment_answer_bytes_total", kd, (long long)s->deltas.bytes_out_delta);
    cx_prom_int(b, "chaosloco_syncer_fragment_answer_bytes_total", kf, (long long)s->deltas.bytes_out_full);
    cx_prom_one_int(b, "chaosloco_syncer_tokens_merged_total", CX_PROM_COUNTER,
                    "Tokens of merged contributions.", (long long)s->tokens_merged);
    int64_t trained = members_tokens_trained(s);
    cx_prom_one_int(b, "chaosloco_syncer_tokens_trained_total", CX_PROM_COUNTER,
                    "Tokens the learners trained (each incarnation from where it resumed).",
                    (long long)trained);
    cx_prom_one_real(b, "chaosloco_syncer_merge_efficiency", CX_PROM_GAUGE,
                     "Merged tokens over trained tokens (NaN before any was trained).",
                     trained > 0 ? (double)s->tokens_merged / (double)trained : NAN, 4);
    cx_prom_one_real(b, "chaosloco_syncer_eval_loss", CX_PROM_GAUGE,
                     "Eval loss of the global model, nats per byte.", s->dur.eval_loss, 6);
    cx_prom_one_real(b, "chaosloco_syncer_longest_merge_gap_seconds", CX_PROM_GAUGE,
                     "Longest gap between two merges.", (double)s->rounds.longest_gap_ms / 1000.0, 3);
    if (!syncer_is_ddp(s)) {
        cx_prom_one_int(b, "chaosloco_syncer_rounds_merged_total", CX_PROM_COUNTER,
                        "Rounds merged (diloco, decoupled).", (long long)s->rounds.merged);
        cx_prom_one_int(b, "chaosloco_syncer_round_contributions_total", CX_PROM_COUNTER,
                        "Contributions merged in rounds.", (long long)s->rounds.parts);
        cx_prom_one_int(b, "chaosloco_syncer_stale_rejected_total", CX_PROM_COUNTER,
                        "Contributions refused as stale.", (long long)s->rounds.stale_rejected);
    }
    cx_prom_family(b, "chaosloco_syncer_fragment_version", CX_PROM_GAUGE,
                   "Current version of each fragment.");
    for (int p = 0; p < s->P; p++) {
        char frag[16];
        snprintf(frag, sizeof frag, "%d", p);
        const char *const l[] = {"fragment", frag, NULL};
        cx_prom_int(b, "chaosloco_syncer_fragment_version", l, (long long)s->versions[p]);
    }
}

/* GET /metrics, one family per learner figure, one sample per learner that
 * has joined (mu held). */
static void metrics_learners(const syncer *s, cx_buf *b, int64_t now)
{
    static const struct {
        const char *name; /* after chaosloco_syncer_ */
        cx_prom_type type;
        const char *help;
    } lm[] = {
        {"learner_step", CX_PROM_GAUGE, "Inner steps a learner reported."},
        {"learner_tokens_total", CX_PROM_COUNTER, "Tokens a learner reported."},
        {"learner_last_seen_seconds", CX_PROM_GAUGE, "Seconds since the learner was last heard from."},
        {"learner_incarnation", CX_PROM_GAUGE, "Current incarnation of the learner."},
        {"learner_up", CX_PROM_GAUGE, "1 while the learner is active (not absent or left)."},
        {"learner_clock_skew_seconds", CX_PROM_GAUGE, "Learner realtime minus syncer realtime."},
        {"learner_adopted_with_own", CX_PROM_GAUGE,
         "Fraction of the merged fragments a learner pulled after contributing that held its contribution."},
    };
    for (size_t m = 0; m < sizeof lm / sizeof lm[0]; m++) {
        char name[96];
        snprintf(name, sizeof name, "chaosloco_syncer_%s", lm[m].name);
        cx_prom_family(b, name, lm[m].type, lm[m].help);
        for (int i = 0; i < MAX_LEARNERS; i++) {
            const learner_rec *l = &s->members.learners[i];
            if (l->id < 0 || l->incarnation == 0)
                continue;
            char id[24];
            snprintf(id, sizeof id, "%lld", (long long)l->id);
            const char *const lab[] = {"learner", id, NULL};
            switch (m) {
            case 0:
                cx_prom_int(b, name, lab, (long long)l->step);
                break;
            case 1:
                cx_prom_int(b, name, lab, (long long)l->tokens);
                break;
            case 2:
                cx_prom_real(b, name, lab, (double)(now - l->last_seen_ms) / 1000.0, 3);
                break;
            case 3:
                cx_prom_int(b, name, lab, (long long)l->incarnation);
                break;
            case 4:
                cx_prom_int(b, name, lab, l->state == LS_ACTIVE);
                break;
            case 5:
                cx_prom_real(b, name, lab, (double)l->clock_skew_ms / 1000.0, 3);
                break;
            default:
                if (l->adopted > 0) /* no value yet: no sample */
                    cx_prom_real(b, name, lab, (double)l->adopted_own / (double)l->adopted, 6);
                break;
            }
        }
    }
}

int syncer_api_metrics(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)req;
    syncer *s = ctx;
    int64_t now = cx_mono_ms();
    pthread_mutex_lock(&s->mu);
    metrics_syncer(s, &resp->body);
    metrics_learners(s, &resp->body, now);
    pthread_mutex_unlock(&s->mu);
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4";
    return 0;
}
