/* clock.c - clocks, sleeping and timed waits. */
#include "common/clock.h"

#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t cx_mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}
int64_t cx_mono_ms(void)
{
    return clock_ns(CLOCK_MONOTONIC) / 1000000LL;
}
int64_t cx_real_ns(void)
{
    return clock_ns(CLOCK_REALTIME);
}

void cx_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void cx_iso_time(char *buf, size_t len, int64_t real_ns)
{
    time_t s = (time_t)(real_ns / 1000000000LL);
    int ms = (int)((real_ns / 1000000LL) % 1000);
    if (ms < 0)
        ms += 1000;
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

void cx_stamp_time(char *buf, size_t len, int64_t real_ns)
{
    time_t s = (time_t)(real_ns / 1000000000LL);
    struct tm tm;
    gmtime_r(&s, &tm);
    if (len > 0 && strftime(buf, len, "%Y%m%dT%H%M%SZ", &tm) == 0)
        buf[0] = '\0';
}

/* ---- timed waits ---- */

int cx_cond_wait_until_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline_ns)
{
    if (cx_mono_ns() >= deadline_ns)
        return CX_ETIMEDOUT;
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000LL),
                          .tv_nsec = (long)(deadline_ns % 1000000000LL)};
    return pthread_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, &ts) == ETIMEDOUT ? CX_ETIMEDOUT : CX_OK;
}

int cx_cond_wait_until_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline_ms)
{
    return cx_cond_wait_until_ns(cond, mutex, deadline_ms * 1000000LL);
}
