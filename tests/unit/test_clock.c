/* test_clock.c - common/clock.h's timed waits: a deadline already past
 * returns CX_ETIMEDOUT at once with the mutex still held, a signal wakes a
 * waiter long before its deadline, and a wait nobody signals reports the
 * timeout no earlier than its monotonic deadline, on a default
 * (CLOCK_REALTIME) cond and on a CLOCK_MONOTONIC one alike (a wait that
 * read the deadline on the cond's own clock would return at once on the
 * first). No assertion on how fast anything is: a wait that does not
 * return is caught by the suite's timeout. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "common/clock.h"
#include "common/err.h"

TestSuite(clock, .timeout = 30);

typedef struct waitpair {
    pthread_mutex_t mu; /* error-checking: unlock fails unless held */
    pthread_cond_t cv;  /* on the clock waitpair_init was given */
} waitpair;

static void waitpair_init(waitpair *w, clockid_t cond_clock)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    cr_assert_eq(pthread_mutex_init(&w->mu, &ma), 0);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    cr_assert_eq(pthread_condattr_setclock(&ca, cond_clock), 0);
    cr_assert_eq(pthread_cond_init(&w->cv, &ca), 0);
    pthread_condattr_destroy(&ca);
}

static void waitpair_cleanup(waitpair *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

Test(clock, a_deadline_in_the_past_returns_at_once_holding_the_mutex)
{
    waitpair w;
    waitpair_init(&w, CLOCK_REALTIME);
    pthread_mutex_lock(&w.mu);
    cr_assert_eq(cx_cond_wait_until_ns(&w.cv, &w.mu, cx_mono_ns() - 1), CX_ETIMEDOUT);
    cr_assert_eq(cx_cond_wait_until_ms(&w.cv, &w.mu, cx_mono_ms() - 1000), CX_ETIMEDOUT);
    cr_assert_eq(cx_cond_wait_until_ms(&w.cv, &w.mu, 0), CX_ETIMEDOUT);
    cr_assert_eq(pthread_mutex_unlock(&w.mu), 0, "the mutex is still held by the caller");
    waitpair_cleanup(&w);
}

typedef struct waiter {
    waitpair w;
    bool go;          /* under w.mu: the predicate the waiter waits for */
    bool waiting;     /* under w.mu: the waiter is in its wait loop */
    int rc;           /* the waiter's last return code */
    int64_t deadline; /* ms, far away */
} waiter;

static void *waiter_main(void *arg)
{
    waiter *t = arg;
    pthread_mutex_lock(&t->w.mu);
    t->waiting = true;
    t->rc = CX_OK;
    while (!t->go && t->rc == CX_OK)
        t->rc = cx_cond_wait_until_ms(&t->w.cv, &t->w.mu, t->deadline);
    pthread_mutex_unlock(&t->w.mu);
    return NULL;
}

Test(clock, a_signal_wakes_the_waiter_before_its_deadline)
{
    static waiter t;
    waitpair_init(&t.w, CLOCK_REALTIME);
    t.deadline = cx_mono_ms() + 600000; /* far beyond the suite's timeout */
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, waiter_main, &t), 0);
    for (;;) { /* until the waiter holds the predicate loop (it releases mu only inside the wait) */
        pthread_mutex_lock(&t.w.mu);
        bool in = t.waiting;
        if (in) {
            t.go = true;
            pthread_cond_signal(&t.w.cv);
        }
        pthread_mutex_unlock(&t.w.mu);
        if (in)
            break;
        cx_sleep_ms(1);
    }
    pthread_join(th, NULL);
    cr_assert_eq(t.rc, CX_OK, "woken, not timed out");
    cr_assert(t.go);
    waitpair_cleanup(&t.w);
}

/* Wait, unsignalled, until the deadlines 30 ms ahead (ns, then ms) pass. */
static void expect_timeout_at_deadline(clockid_t cond_clock)
{
    waitpair w;
    waitpair_init(&w, cond_clock);
    pthread_mutex_lock(&w.mu);
    int64_t deadline_ns = cx_mono_ns() + 30 * 1000000LL;
    int rc, rounds = 0;
    while ((rc = cx_cond_wait_until_ns(&w.cv, &w.mu, deadline_ns)) == CX_OK && rounds < 1000)
        rounds++; /* spurious wake-ups: wait again with the same deadline */
    cr_assert_eq(rc, CX_ETIMEDOUT);
    cr_assert_geq(cx_mono_ns(), deadline_ns, "not before the deadline (cond clock %d)", (int)cond_clock);
    int64_t deadline_ms = cx_mono_ms() + 30;
    while ((rc = cx_cond_wait_until_ms(&w.cv, &w.mu, deadline_ms)) == CX_OK && rounds < 2000)
        rounds++;
    cr_assert_eq(rc, CX_ETIMEDOUT);
    cr_assert_geq(cx_mono_ms(), deadline_ms, "not before the deadline (cond clock %d)", (int)cond_clock);
    cr_assert_eq(pthread_mutex_unlock(&w.mu), 0, "the mutex is held again on return");
    waitpair_cleanup(&w);
}

Test(clock, an_unsignalled_wait_reports_the_timeout_at_its_monotonic_deadline)
{
    expect_timeout_at_deadline(CLOCK_REALTIME);
    expect_timeout_at_deadline(CLOCK_MONOTONIC);
}

Test(clock, iso_and_stamp_forms_name_the_same_utc_second)
{
    char iso[40], stamp[24], tiny[4];
    int64_t ns = 1796212226123000000LL; /* 2026-12-02T11:50:26.123Z */
    cx_iso_time(iso, sizeof iso, ns);
    cr_assert_str_eq(iso, "2026-12-02T11:50:26.123Z");
    cx_stamp_time(stamp, sizeof stamp, ns);
    cr_assert_str_eq(stamp, "20261202T115026Z");
    cx_stamp_time(tiny, sizeof tiny, ns);
    cr_assert_str_eq(tiny, "", "a buffer too small gets an empty string, never a cut stamp");
}
