/* stop_signals.h - SIGTERM and SIGINT as a stop request for a command's
 * main loop.
 *
 * What it is: the one handler the long-running commands (learner, syncer,
 * agent) install before their loop, which polls the flag and shuts down
 * cleanly (checkpoint, revert, stop the unit) once it is set. SIGPIPE is
 * ignored too, so that a peer that hangs up is an error return on the
 * socket, not the death of the process. What it is not: a way to wait for
 * a signal (the dashboard blocks them and sigwait()s).
 *
 * One flag per process; installing twice is harmless.
 */
#ifndef CX_STOP_SIGNALS_H
#define CX_STOP_SIGNALS_H

#include <signal.h>

/* Install the handlers; returns the flag: 0 until SIGTERM or SIGINT
 * arrives, then the number of the first such signal (a later one does not
 * change it, so a log line names what started the shutdown). */
volatile sig_atomic_t *cx_stop_on_signals(void);

#endif
