/* horizon.c - when a harness run has trained long enough (horizon.h). */
#include "harness/horizon.h"

#include <stdio.h>
#include <string.h>

#include "harness/hypothesis.h"
#include "trainer/config.h"

int horizon_window(const json_t *spec, const char *label, hz_window *w)
{
    const hypothesis *k = hyp_find(json_string_value(json_object_get(spec, "hypothesis")));
    memset(w, 0, sizeof *w);
    w->label = label;
    w->learner = -1;
    return k && k->window ? k->window(spec, w) : 0;
}

int64_t horizon_close_ms(const hz_window *w, const hz_progress *p)
{
    if (w->tokens > 0)
        return p->eval_tokens >= w->tokens ? 0 : -1;
    if (w->from_start)
        return p->start_ms + w->len_ms;
    if (p->pending > 0)
        return -1;
    int64_t anchor = p->any_heal_ms;
    if (w->learner >= 0)
        anchor = w->learner < p->m && p->heal_ms ? p->heal_ms[w->learner] : 0;
    return anchor > 0 ? anchor + w->len_ms : 0;
}

static void say(char *buf, size_t len, const char *fmt, const char *a, double x)
{
    if (buf && len)
        snprintf(buf, len, fmt, a, x);
}

int horizon_done(const hz_window *w, int n, const hz_progress *p, char *why, size_t len)
{
    if (p->pending > 0) {
        if (why && len)
            snprintf(why, len, "%d timeline entries not fired or not healed", p->pending);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        int64_t c = horizon_close_ms(&w[i], p);
        if (w[i].tokens > 0 && c < 0) {
            if (why && len)
                snprintf(why, len, "%s's window closes once an eval covers %lld merged tokens (now %lld)",
                         w[i].label, (long long)w[i].tokens, (long long)p->eval_tokens);
            return 0;
        }
        if (c > p->now_ms) {
            say(why, len, "%s's window closes in %.1f s", w[i].label, (double)(c - p->now_ms) / 1000.0);
            return 0;
        }
    }
    if (p->tokens < p->min_tokens) {
        if (why && len)
            snprintf(why, len, "%lld of %lld tokens trained", (long long)p->tokens, (long long)p->min_tokens);
        return 0;
    }
    if (p->merges < p->min_merges) {
        if (why && len)
            snprintf(why, len, "%lld of %lld merges", (long long)p->merges, (long long)p->min_merges);
        return 0;
    }
    if (why && len)
        snprintf(why, len, "every fault healed, every window closed, %lld tokens trained, %lld merges",
                 (long long)p->tokens, (long long)p->merges);
    return 1;
}

int horizon_unobserved(const hz_window *w, const hz_progress *p, char *msg, size_t len)
{
    int64_t c = horizon_close_ms(w, p);
    double end_s = (double)(p->now_ms - p->start_ms) / 1000.0;
    char who[64];
    if (w->learner >= 0)
        snprintf(who, sizeof who, "learner %d's", w->learner);
    else
        snprintf(who, sizeof who, "%s's", w->label);
    if (w->tokens > 0 && c < 0) {
        if (msg && len)
            snprintf(
                msg, len,
                "run ended (t=%.1f s) before %s by_tokens window closed: the last eval covered %lld of %lld "
                "merged tokens",
                end_s, who, (long long)p->eval_tokens, (long long)w->tokens);
        return 1;
    }
    if (c < 0) {
        if (msg && len)
            snprintf(msg, len,
                     "run ended (t=%.1f s) before %s %s window could open: a fault was still pending", end_s,
                     who, w->key);
        return 1;
    }
    if (c > p->now_ms) {
        if (msg && len)
            snprintf(msg, len, "run ended before %s %s window closed (closes at t=%.1f s, ended at t=%.1f s)",
                     who, w->key, (double)(c - p->start_ms) / 1000.0, end_s);
        return 1;
    }
    return 0;
}

long long horizon_learner_budget(int64_t steps)
{
    if (steps <= 0)
        return 0;
    return steps >= CONFIG_STEPS_MAX / HORIZON_BUDGET_X ? CONFIG_STEPS_MAX : (long long)steps * HORIZON_BUDGET_X;
}
