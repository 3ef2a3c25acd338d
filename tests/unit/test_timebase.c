/* test_timebase.c - common/timebase.h: a remote clock mapped from round
 * trips. A simulated remote whose clock is offset (hours, a day, behind),
 * drifts (hundreds of ppm) and answers over asymmetric links: every mapped
 * time must hold the truth within its bound, the bound must stay near the
 * tightest round trip's half, and one clock's times keep their order. Then
 * the stamp itself: parsing, the observer, and a real answer of a
 * cx_http_server carrying this process's clock. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/http_client.h"
#include "common/http_server.h"
#include "common/rng.h"
#include "common/timebase.h"

TestSuite(timebase, .timeout = 60);

#define DAY_MS (24.0 * 3600.0 * 1000.0)

/* The simulated remote: offset(L) = off0 + drift * L (ms of remote clock
 * ahead of ours at our time L). */
typedef struct sim {
    double off0;  /* ms */
    double drift; /* ms per ms (200 ppm = 2e-4) */
} sim;

static double remote_at(const sim *s, double local)
{
    return local + s->off0 + s->drift * local;
}

/* The local time at which the remote read remote_ms (inverse of remote_at). */
static double local_of(const sim *s, double remote_ms)
{
    return (remote_ms - s->off0) / (1.0 + s->drift);
}

/* One round trip sent at our time t: request delay d1, answer delay d2. */
static void round_trip(cx_tb_clock *c, const sim *s, double t, double d1, double d2)
{
    cr_assert_eq(cx_tb_add(c, t, t + d1 + d2, remote_at(s, t + d1)), 0);
}

/* The true local time of remote time r lies within the mapping's bound;
 * returns the bound. */
static double check_map(cx_tb_clock *c, const sim *s, double r)
{
    double local, err;
    cr_assert_eq(cx_tb_map(c, r, &local, &err), 0);
    double truth = local_of(s, r);
    cr_assert(fabs(local - truth) <= err + 1e-6, "remote %.3f: mapped %.3f +- %.3f, truth %.3f (off by %.3f)",
              r, local, err, truth, local - truth);
    return err;
}

Test(timebase, known_offsets_with_symmetric_delays)
{
    const double offs[] = {0.0, 2 * 3600e3, 5 * 60e3, DAY_MS, -3 * 3600e3 - 0.37};
    for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
        sim s = {.off0 = offs[k]};
        cx_tb_clock *c = cx_tb_clock_new("remote");
        cx_rng rng;
        cx_rng_seed(&rng, 11 + k);
        double t0 = 5e6; /* our clock: 5000 s since boot */
        for (int i = 0; i < 600; i++) {
            double d = 0.05 + 0.95 * cx_rng_uniform(&rng);
            round_trip(c, &s, t0 + i * 100.0, d, d * (0.8 + 0.4 * cx_rng_uniform(&rng)));
        }
        double worst = 0;
        for (int i = 0; i < 400; i++) {
            double e = check_map(c, &s, remote_at(&s, t0 + 60e3 * cx_rng_uniform(&rng)));
            worst = e > worst ? e : worst;
        }
        /* the tightest round trips are ~0.1 ms: the bound is a round trip's half, not more */
        cr_expect_lt(worst, 1.2, "offset %.0f ms: worst bound %.3f ms", offs[k], worst);
        cx_tb_stats st;
        cx_tb_stats_get(c, &st);
        cr_expect_eq(st.samples, 600);
        cr_expect(st.have);
        cr_expect_lt(fabs(st.offset_ms - offs[k]), st.error_ms + 1e-6, "journal offset %.3f vs %.3f",
                     st.offset_ms, offs[k]);
        cx_tb_clock_free(c);
    }
}

Test(timebase, asymmetric_delays_stay_within_the_bound)
{
    /* every request waits 8 ms, every answer 0.1 ms: the midpoint is off by
     * ~4 ms and nothing can tell; the bound must say so */
    sim s = {.off0 = DAY_MS};
    cx_tb_clock *c = cx_tb_clock_new("slow uplink");
    cx_rng rng;
    cx_rng_seed(&rng, 3);
    for (int i = 0; i < 300; i++)
        round_trip(c, &s, 1e6 + i * 200.0, 8.0 + 0.2 * cx_rng_uniform(&rng),
                   0.1 + 0.2 * cx_rng_uniform(&rng));
    double e = 0;
    for (int i = 0; i < 200; i++)
        e = check_map(c, &s, remote_at(&s, 1e6 + 60e3 * cx_rng_uniform(&rng)));
    cr_expect_geq(e, 3.9, "the bound covers the asymmetry (%.3f ms)", e);
    cr_expect_lt(e, 4.6, "and not much more (%.3f ms)", e);
    /* one fast symmetric round trip in the middle: the bound near it shrinks */
    round_trip(c, &s, 1e6 + 30e3 + 50, 0.05, 0.05);
    double near = check_map(c, &s, remote_at(&s, 1e6 + 30e3 + 60));
    cr_expect_lt(near, 0.2, "a tight sample tightens the bound near it (%.3f ms)", near);
    cx_tb_clock_free(c);
}

Test(timebase, drift_is_followed)
{
    const double drifts[] = {2e-4, -3e-4, 9e-4};
    for (size_t k = 0; k < sizeof drifts / sizeof drifts[0]; k++) {
        sim s = {.off0 = DAY_MS + 123.456, .drift = drifts[k]};
        cx_tb_clock *c = cx_tb_clock_new("drifting");
        cx_rng rng;
        cx_rng_seed(&rng, 5 + k);
        double t0 = 2e6;
        for (int i = 0; i < 1200; i++) { /* one round trip a second for 20 minutes */
            double d = 0.1 + 0.5 * cx_rng_uniform(&rng);
            round_trip(c, &s, t0 + i * 1000.0, d, d);
        }
        double worst = 0;
        for (int i = 0; i <= 1000; i++) {
            double e = check_map(c, &s, remote_at(&s, t0 + 1200e3 * i / 1000.0));
            worst = e > worst ? e : worst;
        }
        /* one offset for the whole run would be off by drift x 20 min (240 ms at
         * 200 ppm); the estimate follows the drift within a few ms */
        cr_expect_lt(worst, 2.5, "drift %.0f ppm: worst bound %.3f ms", drifts[k] * 1e6, worst);
        cx_tb_stats st;
        cx_tb_stats_get(c, &st);
        cr_expect_lt(fabs(st.drift_ppm - drifts[k] * 1e6), 50.0, "drift estimate %.1f ppm vs %.1f",
                     st.drift_ppm, drifts[k] * 1e6);
        cx_tb_clock_free(c);
    }
}

Test(timebase, one_clock_keeps_order_and_lengths)
{
    sim s = {.off0 = 5 * 60e3, .drift = 1e-4};
    cx_tb_clock *c = cx_tb_clock_new("remote");
    cx_rng rng;
    cx_rng_seed(&rng, 9);
    for (int i = 0; i < 400; i++) {
        double d = 0.05 + 3.0 * cx_rng_uniform(&rng); /* noisy: midpoints jump by ms */
        round_trip(c, &s, 1e6 + i * 250.0, d, 0.05 + 3.0 * cx_rng_uniform(&rng));
    }
    double prev = -INFINITY, r0 = remote_at(&s, 1e6), l0 = 0, e0;
    cr_assert_eq(cx_tb_map(c, r0, &l0, &e0), 0);
    for (int i = 1; i <= 2000; i++) {
        double r = r0 + i * 50.0, l, e;
        cr_assert_eq(cx_tb_map(c, r, &l, &e), 0);
        cr_assert_gt(l, prev, "mapping is strictly increasing (%d)", i);
        prev = l;
        /* lengths within one clock: within the drift bound (0.1 %) */
        cr_assert_leq(fabs((l - l0) - (r - r0)), 1e-3 * (r - r0) + 1e-6, "length %.3f vs %.3f", l - l0,
                      r - r0);
    }
    cx_tb_clock_free(c);
}

Test(timebase, no_sample_and_bad_samples)
{
    cx_tb_clock *c = cx_tb_clock_new("nobody");
    double l, e;
    cr_expect_eq(cx_tb_map(c, 1000.0, &l, &e), CX_ENOTFOUND);
    cr_expect_eq(cx_tb_add(c, 10.0, 9.0, 5.0), CX_EINVAL, "recv before send");
    cr_expect_eq(cx_tb_add(c, NAN, 9.0, 5.0), CX_EINVAL);
    cr_expect_eq(cx_tb_add(c, 1.0, 2.0, INFINITY), CX_EINVAL);
    cx_tb_stats st;
    cx_tb_stats_get(c, &st);
    cr_expect_eq(st.samples, 0);
    cr_expect_not(st.have);
    json_t *j = cx_tb_json(c);
    cr_expect(json_is_null(json_object_get(j, "offset_ms")), "no offset before a sample");
    cr_expect_str_eq(json_string_value(json_object_get(j, "clock")), "nobody");
    json_decref(j);
    cx_tb_clock_free(c);
}

Test(timebase, memory_is_bounded_over_hours)
{
    sim s = {.off0 = -2 * 3600e3, .drift = 5e-5};
    cx_tb_clock *c = cx_tb_clock_new("long run");
    cx_rng rng;
    cx_rng_seed(&rng, 21);
    int n = 4 * 3600 * 2; /* two a second for four hours */
    for (int i = 0; i < n; i++) {
        double d = 0.1 + cx_rng_uniform(&rng);
        round_trip(c, &s, 1e7 + i * 500.0, d, d);
    }
    double worst = 0;
    for (int i = 0; i <= 500; i++) {
        double e = check_map(c, &s, remote_at(&s, 1e7 + (n * 500.0) * i / 500.0));
        worst = e > worst ? e : worst;
    }
    cr_expect_lt(worst, 10.0, "4 h, buckets merged: worst bound %.3f ms", worst);
    cx_tb_stats st;
    cx_tb_stats_get(c, &st);
    cr_expect_eq(st.samples, n);
    cr_expect_gt(st.span_ms, 3.9 * 3600e3);
    cx_tb_clock_free(c);
}

Test(timebase, a_clock_that_jumps_is_reported)
{
    /* not a monotonic clock: 50 ms forward half way; the samples on both
     * sides of the jump contradict each other, and the stats say so */
    sim a = {.off0 = 1000.0}, b = {.off0 = 1050.0};
    cx_tb_clock *c = cx_tb_clock_new("jumpy");
    for (int i = 0; i < 100; i++)
        round_trip(c, i < 50 ? &a : &b, 1e6 + i * 100.0, 0.2, 0.2);
    double l, e;
    for (int i = 0; i < 40; i++) /* remote times around the jump (a ends at 1005900, b starts at 1006050) */
        cr_assert_eq(cx_tb_map(c, 1e6 + 5800.0 + i * 10.0, &l, &e), 0);
    cx_tb_stats st;
    cx_tb_stats_get(c, &st);
    cr_expect_gt(st.inconsistent, 0, "contradicting samples are counted");
    cx_tb_clock_free(c);
}

Test(timebase, stamps_parse_strictly)
{
    double ms = 0;
    cr_expect_eq(cx_tb_parse_stamp("12345.678", &ms), 0);
    cr_expect_float_eq(ms, 12345.678, 1e-9);
    cr_expect_eq(cx_tb_parse_stamp(" 86400000 \r", &ms), 0);
    cr_expect_float_eq(ms, 86400000.0, 1e-9);
    const char *bad[] = {"", "-1", "nan", "inf", "12x", "abc", "1.5 2", NULL};
    for (int i = 0; bad[i]; i++)
        cr_expect_eq(cx_tb_parse_stamp(bad[i], &ms), CX_EINVAL, "'%s' refused", bad[i]);
    cr_expect_eq(cx_tb_parse_stamp(NULL, &ms), CX_EINVAL);
}

Test(timebase, observer_takes_a_stamped_answer)
{
    cx_tb_clock *c = cx_tb_clock_new("agent 0");
    cx_http_result r;
    cx_http_result_init(&r);
    const char *hdr =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nx-chaosloco-mono-ms: 5000.5\r\n\r\n";
    cx_buf_append(&r.headers, hdr, strlen(hdr));
    r.status = 200;
    r.t_send_ms = 100.0;
    r.t_recv_ms = 101.0;
    cx_tb_observe(c, &r);
    cx_http_result_cleanup(&r);
    cx_http_result_init(&r);
    const char *plain = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n";
    cx_buf_append(&r.headers, plain, strlen(plain));
    r.t_send_ms = 200.0;
    r.t_recv_ms = 201.0;
    cx_tb_observe(c, &r); /* a foreign coordinator that does not stamp */
    cx_http_result_cleanup(&r);
    cx_tb_stats st;
    cx_tb_stats_get(c, &st);
    cr_expect_eq(st.samples, 1);
    cr_expect_eq(st.unstamped, 1);
    cr_expect_float_eq(st.offset_ms, 4900.0, 1e-6);
    cr_expect_float_eq(st.error_ms, 0.5, 1e-6);
    cr_expect_float_eq(st.rtt_min_ms, 1.0, 1e-9);
    cx_tb_clock_free(c);
}

static int h_ok(void *ctx, const cx_http_req *req, cx_http_resp *resp)
{
    (void)ctx;
    (void)req;
    cx_http_reply_json(resp, 200, json_pack("{s:b}", "ok", 1));
    return 0;
}

Test(timebase, a_real_answer_carries_this_clock)
{
    static const cx_http_route routes[] = {{"GET", "/v1/status", h_ok}};
    char err[CX_ERRLEN] = "";
    cx_http_server *srv = cx_http_server_new("127.0.0.1:0", routes, 1, NULL, 4096, err, sizeof err);
    cr_assert_not_null(srv, "%s", err);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", cx_http_server_port(srv));
    cx_tb_clock *c = cx_tb_clock_new("self");
    cx_http_opts o = {.observe = cx_tb_observe, .observe_ctx = c};
    cx_http_client *cl = cx_http_client_new(base, &o);
    for (int i = 0; i < 5; i++) {
        int st = 0;
        cr_assert_eq(cx_http_json(cl, "GET", "/v1/status", NULL, &st, NULL, err, sizeof err), 0, "%s", err);
        cr_assert_eq(st, 200);
    }
    /* answers the router gives itself are stamped too */
    int st = 0;
    cx_http_json(cl, "GET", "/nope", NULL, &st, NULL, err, sizeof err);
    cr_expect_eq(st, 404);
    cx_tb_stats s;
    cx_tb_stats_get(c, &s);
    cr_expect_eq(s.samples, 6);
    cr_expect_eq(s.unstamped, 0);
    /* one process, one clock: the true offset 0 lies within the bound */
    cr_expect_leq(fabs(s.offset_ms), s.error_ms + 1e-3, "offset %.4f +- %.4f ms", s.offset_ms, s.error_ms);
    double now = (double)cx_mono_ns() / 1e6, l, e;
    cr_assert_eq(cx_tb_map(c, now, &l, &e), 0);
    cr_expect_leq(fabs(l - now), e + 1e-3);
    cx_http_client_free(cl);
    cx_http_server_free(srv);
    cx_tb_clock_free(c);
}
