/* rng.h - chaosloco's one seeded random number generator: splitmix64 to
 * derive seeds and independent streams, xoshiro256** for the streams.
 * Reproducible across hosts and libcs (never rand()); header-only because
 * it sits in inner loops (data generation, simulation events).
 *
 * Not for secrets: tokens come from getrandom(2).
 */
#ifndef CX_RNG_H
#define CX_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct cx_rng {
    uint64_t s[4]; /* xoshiro256** state, never all zero once seeded */
} cx_rng;

static inline uint64_t cx_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The seed of stream `stream` of a run seeded `seed`: distinct streams are
 * independent, and the same (seed, stream) always gives the same seed. */
static inline uint64_t cx_seed_derive(uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ULL);
    cx_splitmix64(&x);
    return cx_splitmix64(&x);
}

static inline void cx_rng_seed(cx_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = cx_splitmix64(&x);
}

static inline uint64_t cx_rotl64(uint64_t v, int k)
{
    return (v << k) | (v >> (64 - k));
}

static inline uint64_t cx_rng_next(cx_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = cx_rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = cx_rotl64(s[3], 45);
    return out;
}

/* Uniform in [0, 1). */
static inline double cx_rng_uniform(cx_rng *r)
{
    return (double)(cx_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in (0, 1): never 0 nor 1, so log() of it is always finite. */
static inline double cx_rng_uniform_open(cx_rng *r)
{
    return ((double)(cx_rng_next(r) >> 11) + 0.5) * 0x1.0p-53;
}

/* Exponential with the given mean (> 0). */
static inline double cx_rng_exponential(cx_rng *r, double mean)
{
    return -mean * log(cx_rng_uniform_open(r));
}

/* Standard normal (Box-Muller, one value per call). */
static inline double cx_rng_normal(cx_rng *r)
{
    double u1 = cx_rng_uniform_open(r), u2 = cx_rng_uniform_open(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Uniform integer in [0, n), n > 0, unbiased (rejection). */
static inline uint64_t cx_rng_below(cx_rng *r, uint64_t n)
{
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do
        v = cx_rng_next(r);
    while (v >= lim);
    return v % n;
}

#endif
