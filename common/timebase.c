/* timebase.c - offsets of other processes' monotonic clocks from round trips
 * (see timebase.h; docs/internals/timebase.md has the reasoning). */
#include "common/timebase.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

#define RHO (CX_TB_MAX_DRIFT_PPM * 1e-6) /* ms of offset change per ms */
#define NEAR_MAX 64                      /* samples one mapping looks at, at most */

/* One kept sample: the offset (remote - local) lies in [lo, hi] at remote
 * time r. */
typedef struct tb_sample {
    double r;  /* remote ms of the stamp */
    double lo; /* ms: remote - recv */
    double hi; /* ms: remote - send */
} tb_sample;

struct cx_tb_clock {
    pthread_mutex_t mu;
    char name[64];
    tb_sample *b;         /* [CX_TB_MAX_BUCKETS] the tightest sample per bucket, by r */
    size_t nb;            /* buckets in use */
    double width;         /* remote ms per bucket (CX_TB_BUCKET_MS, doubled as needed) */
    double *ar, *ac;      /* [CX_TB_MAX_BUCKETS] the centre line's anchors: remote ms, offset ms */
    size_t na;            /* anchors */
    int dirty;            /* the anchors are stale */
    int64_t samples;      /* samples taken */
    int64_t unstamped;    /* answers without a stamp */
    int64_t inconsistent; /* mappings with contradicting samples */
    double rtt_min;       /* ms, INFINITY before the first sample */
    double last_r;        /* remote ms of the latest sample */
};

cx_tb_clock *cx_tb_clock_new(const char *name)
{
    cx_tb_clock *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->b = calloc(CX_TB_MAX_BUCKETS, sizeof *c->b);
    c->ar = calloc(CX_TB_MAX_BUCKETS, sizeof *c->ar);
    c->ac = calloc(CX_TB_MAX_BUCKETS, sizeof *c->ac);
    if (!c->b || !c->ar || !c->ac || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c->b);
        free(c->ar);
        free(c->ac);
        free(c);
        return NULL;
    }
    snprintf(c->name, sizeof c->name, "%s", name ? name : "?");
    c->width = CX_TB_BUCKET_MS;
    c->rtt_min = INFINITY;
    return c;
}

void cx_tb_clock_free(cx_tb_clock *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->b);
    free(c->ar);
    free(c->ac);
    free(c);
}

const char *cx_tb_clock_name(const cx_tb_clock *c)
{
    return c->name;
}

static double half(const tb_sample *s)
{
    return 0.5 * (s->hi - s->lo);
}

static double mid(const tb_sample *s)
{
    return 0.5 * (s->hi + s->lo);
}

static int64_t bucket_of(const cx_tb_clock *c, double r)
{
    return (int64_t)floor(r / c->width);
}

/* Index of the first bucket with remote time >= r (nb when none). */
static size_t lower_bound(const cx_tb_clock *c, double r)
{
    size_t lo = 0, hi = c->nb;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (c->b[m].r < r)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

/* Double the bucket width, keeping the tightest sample of each new bucket. */
static void coarsen(cx_tb_clock *c)
{
    c->width *= 2;
    size_t w = 0;
    for (size_t i = 0; i < c->nb; i++) {
        if (w > 0 && bucket_of(c, c->b[w - 1].r) == bucket_of(c, c->b[i].r)) {
            if (half(&c->b[i]) <= half(&c->b[w - 1]))
                c->b[w - 1] = c->b[i];
            continue;
        }
        c->b[w++] = c->b[i];
    }
    c->nb = w;
}

int cx_tb_add(cx_tb_clock *c, double send_ms, double recv_ms, double remote_ms)
{
    if (!isfinite(send_ms) || !isfinite(recv_ms) || !isfinite(remote_ms) || recv_ms < send_ms)
        return CX_EINVAL;
    tb_sample s = {.r = remote_ms, .lo = remote_ms - recv_ms, .hi = remote_ms - send_ms};
    pthread_mutex_lock(&c->mu);
    c->samples++;
    if (recv_ms - send_ms < c->rtt_min)
        c->rtt_min = recv_ms - send_ms;
    if (remote_ms > c->last_r || c->samples == 1)
        c->last_r = remote_ms;
    for (;;) {
        size_t i = lower_bound(c, remote_ms);
        int64_t k = bucket_of(c, remote_ms);
        /* the bucket's sample is at i (r >= remote_ms) or at i - 1 */
        size_t hit = c->nb;
        if (i < c->nb && bucket_of(c, c->b[i].r) == k)
            hit = i;
        else if (i > 0 && bucket_of(c, c->b[i - 1].r) == k)
            hit = i - 1;
        if (hit < c->nb) {
            /* the tighter one stays; on a tie the newer (drift moves on) */
            if (half(&s) <= half(&c->b[hit])) {
                c->b[hit] = s;
                /* replacing may move r within the bucket: keep the order */
                while (hit > 0 && c->b[hit - 1].r > c->b[hit].r) {
                    tb_sample t = c->b[hit - 1];
                    c->b[hit - 1] = c->b[hit];
                    c->b[--hit] = t;
                }
                while (hit + 1 < c->nb && c->b[hit + 1].r < c->b[hit].r) {
                    tb_sample t = c->b[hit + 1];
                    c->b[hit + 1] = c->b[hit];
                    c->b[++hit] = t;
                }
            }
            break;
        }
        if (c->nb == CX_TB_MAX_BUCKETS) {
            coarsen(c);
            continue;
        }
        memmove(&c->b[i + 1], &c->b[i], (c->nb - i) * sizeof *c->b);
        c->b[i] = s;
        c->nb++;
        break;
    }
    c->dirty = 1;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* ---- the centre line ---- */

/* Anchors: the tightest sample of each segment, chained so that the line's
 * slope stays within +-RHO (it follows drift, never a jump between two
 * noisy midpoints close together). Caller holds c->mu. */
static void build_anchors(cx_tb_clock *c)
{
    c->na = 0;
    size_t best = 0;
    for (size_t i = 0; i <= c->nb; i++) {
        int end = i == c->nb ||
                  (i > best && floor(c->b[i].r / CX_TB_SEGMENT_MS) != floor(c->b[best].r / CX_TB_SEGMENT_MS));
        if (end && i > 0) {
            const tb_sample *s = &c->b[best];
            double off = mid(s);
            if (c->na > 0) {
                double dr = s->r - c->ar[c->na - 1], prev = c->ac[c->na - 1];
                double slope = dr > 0 ? (off - prev) / dr : 0.0;
                slope = slope > RHO ? RHO : slope < -RHO ? -RHO : slope;
                off = prev + slope * dr;
            }
            c->ar[c->na] = s->r;
            c->ac[c->na++] = off;
            best = i;
        } else if (i < c->nb && half(&c->b[i]) < half(&c->b[best])) {
            best = i;
        }
    }
    c->dirty = 0;
}

/* The centre line's offset at remote time r: beyond its ends, the nearest
 * segment's slope goes on (flat for one anchor). Caller holds c->mu;
 * anchors built. */
static double centre(const cx_tb_clock *c, double r)
{
    size_t n = c->na;
    if (n == 1)
        return c->ac[0];
    if (r <= c->ar[0])
        return c->ac[0] + (r - c->ar[0]) * (c->ac[1] - c->ac[0]) / (c->ar[1] - c->ar[0]);
    if (r >= c->ar[n - 1])
        return c->ac[n - 1] +
               (r - c->ar[n - 1]) * (c->ac[n - 1] - c->ac[n - 2]) / (c->ar[n - 1] - c->ar[n - 2]);
    size_t lo = 0, hi = c->na - 1; /* ar[lo] <= r < ar[hi] */
    while (hi - lo > 1) {
        size_t m = lo + (hi - lo) / 2;
        if (c->ar[m] <= r)
            lo = m;
        else
            hi = m;
    }
    double f = (r - c->ar[lo]) / (c->ar[hi] - c->ar[lo]);
    return c->ac[lo] + f * (c->ac[hi] - c->ac[lo]);
}

/* ---- mapping ---- */

/* The offset interval at r from the samples near it: each sample's
 * interval widened by RHO per ms of distance, intersected, visiting samples
 * by distance until one's widening alone is wider than what is left.
 * Caller holds c->mu. */
static void interval_at(cx_tb_clock *c, double r, double *lo, double *hi)
{
    size_t right = lower_bound(c, r), left = right; /* next: b[left - 1], b[right] */
    double L = -INFINITY, H = INFINITY;
    double fb_lo = 0, fb_hi = 0, fb_w = INFINITY; /* the single tightest projected sample */
    for (int seen = 0; seen < NEAR_MAX && (left > 0 || right < c->nb); seen++) {
        double dl = left > 0 ? r - c->b[left - 1].r : INFINITY;
        double dr = right < c->nb ? c->b[right].r - r : INFINITY;
        const tb_sample *s = dl <= dr ? &c->b[--left] : &c->b[right++];
        double d = fabs(r - s->r), slack = RHO * d;
        if (seen > 0 && slack > H - L && H >= L)
            break;
        double slo = s->lo - slack, shi = s->hi + slack;
        if (shi - slo < fb_w) {
            fb_w = shi - slo;
            fb_lo = slo;
            fb_hi = shi;
        }
        L = slo > L ? slo : L;
        H = shi < H ? shi : H;
    }
    if (L > H) { /* contradicting samples: the nearest tight one alone */
        c->inconsistent++;
        L = fb_lo;
        H = fb_hi;
    }
    *lo = L;
    *hi = H;
}

/* Caller holds c->mu and there is a sample. */
static void map_locked(cx_tb_clock *c, double remote_ms, double *local_ms, double *err_ms)
{
    if (c->dirty)
        build_anchors(c);
    double lo, hi, mid_off = centre(c, remote_ms);
    interval_at(c, remote_ms, &lo, &hi);
    double e = hi - mid_off > mid_off - lo ? hi - mid_off : mid_off - lo;
    *local_ms = remote_ms - mid_off;
    *err_ms = e > 0 ? e : 0;
}

int cx_tb_map(cx_tb_clock *c, double remote_ms, double *local_ms, double *err_ms)
{
    pthread_mutex_lock(&c->mu);
    if (c->nb == 0) {
        pthread_mutex_unlock(&c->mu);
        return CX_ENOTFOUND;
    }
    map_locked(c, remote_ms, local_ms, err_ms);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* ---- stamps ---- */

int cx_tb_parse_stamp(const char *value, double *ms)
{
    if (!value)
        return CX_EINVAL;
    while (*value == ' ' || *value == '\t')
        value++;
    if (!(*value >= '0' && *value <= '9'))
        return CX_EINVAL;
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    while (end && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n'))
        end++;
    if (errno || !end || *end || !isfinite(v) || v < 0)
        return CX_EINVAL;
    *ms = v;
    return 0;
}

void cx_tb_observe(void *clock, const cx_http_result *r)
{
    cx_tb_clock *c = clock;
    char v[64];
    double ms;
    if (!c || !r)
        return;
    if (cx_http_result_header(r, CX_TB_HEADER, v, sizeof v) != 0 || cx_tb_parse_stamp(v, &ms) != 0 ||
        cx_tb_add(c, r->t_send_ms, r->t_recv_ms, ms) != 0) {
        pthread_mutex_lock(&c->mu);
        c->unstamped++;
        pthread_mutex_unlock(&c->mu);
    }
}

/* ---- stats ---- */

void cx_tb_stats_get(cx_tb_clock *c, cx_tb_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&c->mu);
    out->samples = c->samples;
    out->unstamped = c->unstamped;
    if (c->nb > 0) {
        double local;
        map_locked(c, c->last_r, &local, &out->error_ms);
        out->have = 1;
        out->offset_ms = c->last_r - local;
        out->rtt_min_ms = c->rtt_min;
        out->span_ms = c->last_r - c->b[0].r;
        double dr = c->ar[c->na - 1] - c->ar[0];
        out->drift_ppm = dr > 0 ? (c->ac[c->na - 1] - c->ac[0]) / dr * 1e6 : 0.0;
    }
    out->inconsistent = c->inconsistent;
    pthread_mutex_unlock(&c->mu);
}

static json_t *num_or_null(int have, double x)
{
    return have && isfinite(x) ? json_real(x) : json_null();
}

json_t *cx_tb_json(cx_tb_clock *c)
{
    cx_tb_stats st;
    cx_tb_stats_get(c, &st);
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "clock", json_string(c->name));
    json_object_set_new(o, "samples", json_integer((json_int_t)st.samples));
    json_object_set_new(o, "unstamped", json_integer((json_int_t)st.unstamped));
    json_object_set_new(o, "inconsistent", json_integer((json_int_t)st.inconsistent));
    json_object_set_new(o, "offset_ms", num_or_null(st.have, st.offset_ms));
    json_object_set_new(o, "error_ms", num_or_null(st.have, st.error_ms));
    json_object_set_new(o, "rtt_min_ms", num_or_null(st.have, st.rtt_min_ms));
    json_object_set_new(o, "drift_ppm", num_or_null(st.have, st.drift_ppm));
    json_object_set_new(o, "span_s", num_or_null(st.have, st.span_ms / 1000.0));
    return o;
}
