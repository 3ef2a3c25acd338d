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

static int64_t shard_target(const hz_window *w, const hz_progress *p)
{
    return w->steps > 0 ? w->steps : p->steps_target;
}

/* The least-advanced learner short of w's shard target (its step into
 * *step), -1 when every learner reached it or no target is known. */
static int shard_short(const hz_window *w, const hz_progress *p, int64_t *step)
{
    int64_t target = shard_target(w, p), least = 0;
    int worst = -1;
    for (int l = 0; target > 0 && l < p->m; l++) {
        int64_t s = p->steps ? p->steps[l] : 0;
        if (s < target - w->slack && (worst < 0 || s < least)) {
            worst = l;
            least = s;
        }
    }
    if (worst >= 0)
        *step = least;
    return worst;
}

int64_t horizon_close_ms(const hz_window *w, const hz_progress *p)
{
    int64_t step;
    if (w->shard)
        return shard_short(w, p, &step) < 0 ? 0 : -1;
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
        int64_t c = horizon_close_ms(&w[i], p), step = 0;
        int l = w[i].shard ? shard_short(&w[i], p, &step) : -1;
        if (l >= 0) {
            if (why && len)
                snprintf(why, len, "%s waits for every learner's shard: learner %d at step %lld of %lld", w[i].label,
                         l, (long long)step, (long long)(shard_target(&w[i], p) - w[i].slack));
            return 0;
        }
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
    int64_t step = 0;
    int l = w->shard ? shard_short(w, p, &step) : -1;
    if (l >= 0) {
        if (msg && len)
            snprintf(msg, len,
                     "run ended (t=%.1f s) before every learner trained its shard: learner %d at step %lld of "
                     "%lld",
                     end_s, l, (long long)step, (long long)(shard_target(w, p) - w->slack));
        return 1;
    }
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

/* One condition of the end: share done, ms left (-1 unknown), its name. */
static void est_take(hz_estimate *e, double frac, int64_t left, const char *what)
{
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    if (frac < e->fraction)
        e->fraction = frac;
    if (left < 0) {
        e->lower_bound = 1;
        if (!e->waiting[0] || e->left_ms <= 0)
            snprintf(e->waiting, sizeof e->waiting, "%s", what);
    } else if (left > e->left_ms) {
        e->left_ms = left;
        snprintf(e->waiting, sizeof e->waiting, "%s", what);
    }
}

/* ms to reach goal from have at the rate have/elapsed; -1 when no rate. */
static int64_t extrapolate(int64_t have, int64_t goal, int64_t elapsed_ms)
{
    if (have <= 0 || elapsed_ms <= 0)
        return -1;
    return (int64_t)((double)(goal - have) * (double)elapsed_ms / (double)have);
}

void horizon_estimate(const hz_window *w, int n, const hz_progress *p, hz_estimate *e)
{
    memset(e, 0, sizeof *e);
    e->fraction = 1.0;
    int64_t elapsed = p->now_ms - p->start_ms;
    char what[160];
    if (p->pending > 0) {
        snprintf(what, sizeof what, "%d fault%s to fire or heal", p->pending, p->pending == 1 ? "" : "s");
        est_take(e, p->entries > 0 ? (double)(p->entries - p->pending) / p->entries : 0.0, -1, what);
    }
    for (int i = 0; i < n; i++) {
        int64_t c = horizon_close_ms(&w[i], p);
        if (w[i].learner >= 0)
            snprintf(what, sizeof what, "learner %d's %s window (%s)", w[i].learner, w[i].key, w[i].label);
        else
            snprintf(what, sizeof what, "%s's %s window", w[i].label, w[i].key);
        int64_t step = 0;
        int l = w[i].shard ? shard_short(&w[i], p, &step) : -1;
        if (l >= 0) {
            int64_t goal = shard_target(&w[i], p) - w[i].slack;
            snprintf(what, sizeof what, "learner %d's shard (step %lld of %lld)", l, (long long)step,
                     (long long)goal);
            est_take(e, (double)step / (double)goal, extrapolate(step, goal, elapsed), what);
        } else if (w[i].tokens > 0 && c < 0)
            est_take(e, (double)p->eval_tokens / (double)w[i].tokens,
                     extrapolate(p->eval_tokens, w[i].tokens, elapsed), what);
        else if (c > p->now_ms) {
            int64_t anchor = w[i].from_start ? p->start_ms : c - w[i].len_ms;
            est_take(e, c > anchor ? (double)(p->now_ms - anchor) / (double)(c - anchor) : 1.0, c - p->now_ms,
                     what);
        }
        /* c < 0 otherwise: a pending fault may open it (counted above); 0 or past: closed */
    }
    if (p->tokens < p->min_tokens) {
        snprintf(what, sizeof what, "tokens (%lld of %lld trained)", (long long)p->tokens,
                 (long long)p->min_tokens);
        est_take(e, (double)p->tokens / (double)p->min_tokens, extrapolate(p->tokens, p->min_tokens, elapsed),
                 what);
    }
    if (p->merges < p->min_merges) {
        snprintf(what, sizeof what, "merges (%lld of %lld)", (long long)p->merges, (long long)p->min_merges);
        est_take(e, (double)p->merges / (double)p->min_merges, extrapolate(p->merges, p->min_merges, elapsed),
                 what);
    }
    if (e->lower_bound && e->left_ms == 0)
        e->left_ms = -1;
}

long long horizon_learner_budget(int64_t steps)
{
    if (steps <= 0)
        return 0;
    return steps >= CONFIG_STEPS_MAX / HORIZON_BUDGET_X ? CONFIG_STEPS_MAX
                                                        : (long long)steps * HORIZON_BUDGET_X;
}
