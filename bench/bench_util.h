/* bench_util.h - what the C benchmarks share: a monotonic clock in seconds
 * and a cheap deterministic fill for inputs whose values do not matter. */
#ifndef CX_BENCH_UTIL_H
#define CX_BENCH_UTIL_H

#include <stddef.h>

#include "common/clock.h"

static inline double bench_now(void)
{
    return (double)cx_mono_ns() * 1e-9;
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
