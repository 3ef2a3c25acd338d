/* log.h - the human log: one line per event on stderr,
 *   <iso time> <LEVEL> <component>[<pid>] message key=value ...
 * Machine-readable events never go here (see DESIGN.md §7). Thread-safe:
 * each line is written with a single write(2).
 */
#ifndef CX_LOG_H
#define CX_LOG_H

typedef enum cx_log_level { CX_LOG_DEBUG, CX_LOG_INFO, CX_LOG_WARN, CX_LOG_ERROR } cx_log_level;

/* Set this process's component name (copied) and minimum level. The env
 * variable CHAOSLOCO_LOG=debug|info|warn|error overrides min. */
void cx_log_init(const char *component, cx_log_level min);
void cx_log(cx_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define cx_debug(...) cx_log(CX_LOG_DEBUG, __VA_ARGS__)
#define cx_info(...) cx_log(CX_LOG_INFO, __VA_ARGS__)
#define cx_warn(...) cx_log(CX_LOG_WARN, __VA_ARGS__)
#define cx_error(...) cx_log(CX_LOG_ERROR, __VA_ARGS__)

#endif
