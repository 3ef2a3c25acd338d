/* bench_util.h - what the C benchmarks share: a monotonic clock in seconds,
 * the calling thread's CPU time in seconds, and a cheap deterministic fill
 * for inputs whose values do not matter. */
#ifndef CX_BENCH_UTIL_H
#define CX_BENCH_UTIL_H

#include <stddef.h>

#include <time.h>

#include "common/clock.h"

static inline double bench_now(void)
{
    return (double)cx_mono_ns() * 1e-9;
}

/* CPU time of the calling thread: what a single-threaded kernel costs when
 * other processes share the cores (time spent descheduled is not counted;
 * cache and memory bandwidth taken by the others still are). */
static inline double bench_thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* n floats in [-0.5, 0.5) from an LCG seeded with seed */
static inline void bench_fill(float *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

#endif
