/* exitcode.h - the process exit statuses of every chaosloco subcommand,
 * named once.
 *
 * What it is: the values a *_main() returns to chaosloco.c's main (and a
 * bench or tool main returns to the shell). What it is not: an error code
 * (functions return 0 or a negative cx_err, err.h); only main turns one
 * into an exit status.
 *
 *   value  name                 meaning
 *   -----  -------------------  ------------------------------------------
 *       0  CX_EXIT_OK           done: every hypothesis held (run), every
 *                               file valid (validate), clean shutdown after
 *                               SIGTERM/SIGINT (agent, syncer, learner)
 *       1  CX_EXIT_FAILURE      the command ran and failed: a runtime
 *                               failure (cannot listen, cannot start),
 *                               some file invalid (validate), some agent
 *                               failed or did not answer (halt), the run
 *                               directory could not be read (report)
 *       1  CX_EXIT_DEVIATED     run: a hypothesis deviated (or the steady
 *                               state did not hold); same value as
 *                               CX_EXIT_FAILURE, named for run's verdict
 *       2  CX_EXIT_ABORTED      run, compare: a stop condition, SIGINT/
 *                               SIGTERM or a halt ended it early
 *       3  CX_EXIT_ERROR        run, compare: a harness or injection error
 *      64  CX_EXIT_USAGE        bad flags or a bad input file (sysexits.h
 *                               EX_USAGE); the message names the flag
 *     127  CX_EXIT_EXEC_FAILED  a forked child could not exec its command
 *                               (the shell's "command not found"); never
 *                               returned by a subcommand
 *
 * docs/experiments.md ("Exit codes"), docs/api.md, docs/dashboard.md and
 * docs/training.md name the same values.
 */
#ifndef CX_EXITCODE_H
#define CX_EXITCODE_H

enum cx_exit {
    CX_EXIT_OK = 0,            /* success */
    CX_EXIT_FAILURE = 1,       /* ran and failed (runtime failure, invalid file, agent failed) */
    CX_EXIT_DEVIATED = 1,      /* run: a hypothesis deviated */
    CX_EXIT_ABORTED = 2,       /* run, compare: stopped early (stop condition, signal, halt) */
    CX_EXIT_ERROR = 3,         /* run, compare: harness or injection error */
    CX_EXIT_USAGE = 64,        /* bad flags or input file (EX_USAGE) */
    CX_EXIT_EXEC_FAILED = 127, /* forked child: exec failed */
};

#endif
