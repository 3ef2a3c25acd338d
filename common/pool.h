/* pool.h - a small persistent thread pool with a deterministic parallel-for.
 *
 * cx_pool_for(p, n, fn, ctx) splits the index range [0, n) into K =
 * min(threads, n) contiguous chunks, chunk k = [k n / K, (k+1) n / K), and
 * runs chunk k on thread k (the caller is thread 0). The partition depends
 * on n and the thread count only, never on scheduling, so a kernel that
 * writes disjoint outputs per index, or keeps one partial sum per chunk and
 * adds them in chunk order, gives the same bits on every run. The threads
 * are created once by cx_pool_new and wait between calls (a short spin, then
 * a condition variable); a call allocates nothing.
 *
 * What it is not: a task queue. One caller at a time (the pool belongs to a
 * model, and a model is used by one thread at a time); fn must not call
 * cx_pool_for on the same pool. A NULL pool or one thread runs fn(ctx, 0, n,
 * 0) in the caller.
 */
#ifndef CX_POOL_H
#define CX_POOL_H

#include <stddef.h>

#define CX_POOL_MAX_THREADS 64

typedef struct cx_pool cx_pool; /* opaque */

/* One chunk: indices [lo, hi) of the range, chunk index 0..K-1 (for
 * per-chunk scratch). Never called with lo == hi. */
typedef void (*cx_pool_fn)(void *ctx, size_t lo, size_t hi, int chunk);

/* A pool of `threads` (1..CX_POOL_MAX_THREADS) including the caller, i.e.
 * threads - 1 worker threads. NULL with the reason in err on a bad count
 * (CX_EINVAL) or when a thread cannot be created. */
cx_pool *cx_pool_new(int threads, char *err, size_t errlen);
void cx_pool_free(cx_pool *p); /* joins the workers; NULL is a no-op */

int cx_pool_threads(const cx_pool *p); /* 1 for NULL */

/* Run fn over [0, n) in the fixed chunks above and return when every chunk
 * is done (n == 0: nothing runs). */
void cx_pool_for(cx_pool *p, size_t n, cx_pool_fn fn, void *ctx);

/* Bounds of chunk k of K over [0, n) (the partition cx_pool_for uses). */
static inline size_t cx_pool_chunk_lo(size_t n, int K, int k)
{
    /* floor(n k / K) without overflowing n k */
    return n / (size_t)K * (size_t)k + n % (size_t)K * (size_t)k / (size_t)K;
}

#endif
