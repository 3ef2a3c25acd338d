/* rng.h - the harness's seeded random numbers: splitmix64 to derive seeds,
 * xoshiro256** for streams. Reproducible across hosts (no libc rand). */
#ifndef HARNESS_RNG_H
#define HARNESS_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct hx_rng {
    uint64_t s[4]; /* xoshiro256** state, never all zero */
} hx_rng;

static inline uint64_t hx_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A seed for stream `stream` of a run seeded `seed` (independent streams). */
static inline uint64_t hx_derive(uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ULL);
    hx_splitmix64(&x);
    return hx_splitmix64(&x);
}

static inline void hx_rng_init(hx_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = hx_splitmix64(&x);
}

static inline uint64_t hx_rotl(uint64_t v, int k)
{
    return (v << k) | (v >> (64 - k));
}

static inline uint64_t hx_next(hx_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = hx_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = hx_rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1). */
static inline double hx_uniform(hx_rng *r)
{
    return (double)(hx_next(r) >> 11) * 0x1.0p-53;
}

/* Exponential with the given mean (> 0). */
static inline double hx_exponential(hx_rng *r, double mean)
{
    return -mean * log1p(-hx_uniform(r));
}

/* Uniform integer in [0, n), n > 0 (rejection, unbiased). */
static inline uint64_t hx_below(hx_rng *r, uint64_t n)
{
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do
        v = hx_next(r);
    while (v >= lim);
    return v % n;
}

#endif
