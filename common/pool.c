/* pool.c - the persistent thread pool (see pool.h).
 *
 * States of one call, all under p->mu except the spins:
 *
 *   IDLE --cx_pool_for: job set, gen++ , broadcast go--> RUNNING
 *   RUNNING: worker k sees gen != its last, runs chunk k, pending--;
 *            the last one to finish broadcasts done
 *   RUNNING --cx_pool_for sees pending == 0--> IDLE
 *   any --cx_pool_free: quit = 1, gen++, broadcast--> workers exit, joined
 *
 * Workers and the caller spin briefly on the atomics before sleeping: a
 * model step makes a few hundred calls of tens of microseconds each, and a
 * condition-variable wake-up alone costs about that much.
 */
#include "common/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

#define POOL_SPIN 4000 /* polls of the atomics before blocking */

typedef struct pool_worker {
    cx_pool *pool; /* owner */
    int index;     /* chunk this worker runs: 1..threads-1 */
    pthread_t tid; /* its thread */
} pool_worker;

struct cx_pool {
    int threads;                        /* including the caller */
    pthread_mutex_t mu;                 /* guards everything below with the condvars */
    pthread_cond_t go;                  /* gen changed */
    pthread_cond_t done;                /* pending reached 0 */
    atomic_uint gen;                    /* call counter; workers run on a change */
    atomic_int pending;                 /* workers still running the current call */
    int quit;                           /* 1: workers exit */
    cx_pool_fn fn;                      /* current call */
    void *ctx;                          /* its context */
    size_t n;                           /* its range */
    int chunks;                         /* K of the current call */
    int started;                        /* workers created (for cleanup) */
    pool_worker w[CX_POOL_MAX_THREADS]; /* [threads - 1] used */
};

static void pool_run_chunk(cx_pool *p, int k)
{
    if (k >= p->chunks)
        return;
    size_t lo = cx_pool_chunk_lo(p->n, p->chunks, k), hi = cx_pool_chunk_lo(p->n, p->chunks, k + 1);
    if (lo < hi)
        p->fn(p->ctx, lo, hi, k);
}

static void *pool_main(void *arg)
{
    pool_worker *w = arg;
    cx_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        for (int i = 0; i < POOL_SPIN && atomic_load_explicit(&p->gen, memory_order_acquire) == seen; i++)
            ;
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->gen, memory_order_relaxed) == seen)
            pthread_cond_wait(&p->go, &p->mu);
        seen = atomic_load_explicit(&p->gen, memory_order_relaxed);
        int quit = p->quit;
        pthread_mutex_unlock(&p->mu);
        if (quit)
            return NULL;
        pool_run_chunk(p, w->index);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

cx_pool *cx_pool_new(int threads, char *err, size_t errlen)
{
    if (threads < 1 || threads > CX_POOL_MAX_THREADS) {
        cx_fail(err, errlen, CX_EINVAL, "pool: threads=%d out of range 1..%d", threads, CX_POOL_MAX_THREADS);
        return NULL;
    }
    cx_pool *p = calloc(1, sizeof(*p));
    if (!p) {
        cx_fail(err, errlen, CX_ENOMEM, "pool: out of memory");
        return NULL;
    }
    p->threads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    for (int i = 0; i < threads - 1; i++) {
        p->w[i].pool = p;
        p->w[i].index = i + 1;
        int rc = pthread_create(&p->w[i].tid, NULL, pool_main, &p->w[i]);
        if (rc != 0) {
            cx_fail(err, errlen, CX_ESYS, "pool: cannot start thread %d of %d: %s", i + 1, threads,
                    strerror(rc));
            cx_pool_free(p);
            return NULL;
        }
        p->started++;
    }
    return p;
}

void cx_pool_free(cx_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->w[i].tid, NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int cx_pool_threads(const cx_pool *p)
{
    return p ? p->threads : 1;
}

void cx_pool_for(cx_pool *p, size_t n, cx_pool_fn fn, void *ctx)
{
    if (n == 0)
        return;
    if (!p || p->threads == 1 || n == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunks = n < (size_t)p->threads ? (int)n : p->threads;
    atomic_store_explicit(&p->pending, p->threads - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    pool_run_chunk(p, 0);
    for (int i = 0; i < POOL_SPIN && atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++)
        ;
    if (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
