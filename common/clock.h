/* clock.h - monotonic and realtime clocks.
 * Monotonic time drives every timeout and duration; realtime only stamps
 * events for humans. (The clock fault skews realtime only.)
 */
#ifndef CX_CLOCK_H
#define CX_CLOCK_H

#include <stddef.h>
#include <stdint.h>

int64_t cx_mono_ns(void);
int64_t cx_mono_ms(void);
int64_t cx_real_ns(void);
/* Sleep for ms, resuming after signals. */
void cx_sleep_ms(int64_t ms);
/* "2026-12-02T11:30:26.123Z" into buf (>= 32 bytes). */
void cx_iso_time(char *buf, size_t len, int64_t real_ns);

#endif
