/* test_pool.c - common/pool.h: every index runs exactly once, in the fixed
 * chunks the header promises, on the thread the chunk index names, with the
 * caller as chunk 0; bad thread counts are refused. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/err.h"
#include "common/pool.h"

enum { N_MAX = 1000 };

typedef struct {
    atomic_int hits[N_MAX]; /* runs per index */
    size_t lo[8], hi[8];    /* bounds seen per chunk */
    pthread_t tid[8];       /* thread per chunk */
    atomic_int calls;       /* chunk calls */
} rec;

static void record(void *ctx, size_t lo, size_t hi, int k)
{
    rec *r = ctx;
    cr_assert(lo < hi && k >= 0 && k < 8);
    r->lo[k] = lo;
    r->hi[k] = hi;
    r->tid[k] = pthread_self();
    for (size_t i = lo; i < hi; i++)
        atomic_fetch_add(&r->hits[i], 1);
    atomic_fetch_add(&r->calls, 1);
}

Test(pool, each_index_runs_once_in_the_fixed_chunks)
{
    char err[CX_ERRLEN];
    static rec r;
    for (int threads = 1; threads <= 4; threads++) {
        cx_pool *p = cx_pool_new(threads, err, sizeof err);
        cr_assert(p, "%s", err);
        cr_assert_eq(cx_pool_threads(p), threads);
        const size_t ns[] = {0, 1, 2, 3, 7, 999, N_MAX};
        for (int rep = 0; rep < 50; rep++) /* many calls: the wake-up path is reused */
            for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
                size_t n = ns[c];
                memset(&r, 0, sizeof r);
                cx_pool_for(p, n, record, &r);
                for (size_t i = 0; i < n; i++)
                    cr_assert_eq(atomic_load(&r.hits[i]), 1, "threads=%d n=%zu: index %zu ran %d times",
                                 threads, n, i, atomic_load(&r.hits[i]));
                int K = n < (size_t)threads ? (int)n : threads;
                cr_assert_eq(atomic_load(&r.calls), n ? K : 0, "threads=%d n=%zu", threads, n);
                for (int k = 0; k < K; k++) {
                    cr_assert_eq(r.lo[k], n * (size_t)k / (size_t)K, "threads=%d n=%zu chunk %d", threads, n,
                                 k);
                    cr_assert_eq(r.hi[k], n * (size_t)(k + 1) / (size_t)K);
                }
                if (n)
                    cr_assert(pthread_equal(r.tid[0], pthread_self()), "chunk 0 runs in the caller");
                if (K > 1)
                    cr_assert(!pthread_equal(r.tid[1], pthread_self()), "chunk 1 runs on a worker");
            }
        cx_pool_free(p);
    }
    memset(&r, 0, sizeof r);
    cx_pool_for(NULL, 5, record, &r); /* no pool: one chunk in the caller */
    cr_assert_eq(atomic_load(&r.calls), 1);
    cr_assert_eq(r.hi[0], 5);
    cx_pool_free(NULL);
}

Test(pool, chunk_bounds_do_not_overflow)
{
    size_t n = (size_t)-1 / 2;
    cr_assert_eq(cx_pool_chunk_lo(n, 3, 3), n);
    cr_assert_eq(cx_pool_chunk_lo(n, 3, 0), 0);
    cr_assert(cx_pool_chunk_lo(n, 3, 1) == n / 3);
}

Test(pool, bad_thread_counts_are_refused)
{
    char err[CX_ERRLEN] = "";
    cr_assert_null(cx_pool_new(0, err, sizeof err));
    cr_assert(strstr(err, "threads=0"), "%s", err);
    cr_assert_null(cx_pool_new(CX_POOL_MAX_THREADS + 1, err, sizeof err));
    cr_assert(strstr(err, "out of range"), "%s", err);
}
