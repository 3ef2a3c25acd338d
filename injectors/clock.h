/* clock.h - helpers of the `clock` fault the agent calls directly.
 *
 * libfaketime keeps a shared-memory segment and a semaphore per faked
 * process tree (/dev/shm/faketime_shm_<pid>, /dev/shm/sem.faketime_sem_<pid>)
 * and removes them at a clean exit only; a unit killed by a fault leaves
 * them behind. The agent calls inj_clock_clean_shm() when its unit exits and
 * before it starts one.
 */
#ifndef INJ_CLOCK_H
#define INJ_CLOCK_H

#include <stddef.h>

/* Remove libfaketime's files in shm_dir (NULL = "/dev/shm") whose owning
 * pid no longer exists (kill(pid, 0) == ESRCH); files of live processes
 * are left alone. *removed (optional) gets the count. Returns 0 or CX_ESYS
 * when shm_dir cannot be read. */
int inj_clock_clean_shm(const char *shm_dir, int *removed, char *err, size_t errlen);

#endif
