/* clock.h - monotonic and realtime clocks, and waits on a condition
 * variable until a monotonic deadline.
 * Monotonic time drives every timeout and duration; realtime only stamps
 * events for humans. (The clock fault skews realtime only.)
 */
#ifndef CX_CLOCK_H
#define CX_CLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

int64_t cx_mono_ns(void);
int64_t cx_mono_ms(void);
int64_t cx_real_ns(void);
/* Sleep for ms, resuming after signals. */
void cx_sleep_ms(int64_t ms);
/* "2026-12-02T11:30:26.123Z" into buf (>= 32 bytes). */
void cx_iso_time(char *buf, size_t len, int64_t real_ns);
/* The compact UTC stamp used in run directory names: 20261202T113026Z
 * (whole seconds). */
void cx_stamp_time(char *buf, size_t len, int64_t real_ns);

/* ---- timed waits ---- */

/* Wait on cond, with mutex held (released while waiting, held again on
 * return), until it is signalled or the monotonic clock reaches the
 * deadline (cx_mono_ns() / cx_mono_ms() time). CX_ETIMEDOUT when the
 * deadline passed while waiting, or had passed already (then at once,
 * without releasing mutex); otherwise 0: woken by a signal, or spuriously,
 * so callers re-check their condition in a loop, as with any condition
 * variable, and call again with the same deadline.
 *
 * Any cond will do, whatever clock it was initialised with: the wait is
 * pthread_cond_clockwait(CLOCK_MONOTONIC) (glibc >= 2.30). Not a realtime
 * deadline, which a skewed or rated realtime clock (the clock fault)
 * moves; and not pthread_cond_timedwait on a CLOCK_MONOTONIC cond, which
 * libfaketime 0.9.10 (the clock fault's preload, DONT_FAKE_MONOTONIC=1)
 * turns into an immediate timeout, so a learner under it would spin. */
int cx_cond_wait_until_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline_ns);
int cx_cond_wait_until_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline_ms);

#endif
