/* log.c - the human log line writer. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/clock.h"

static char log_component[32] = "chaosloco";
static cx_log_level log_min = CX_LOG_INFO;

void cx_log_init(const char *component, cx_log_level min)
{
    snprintf(log_component, sizeof log_component, "%s", component ? component : "chaosloco");
    log_min = min;
    const char *env = getenv("CHAOSLOCO_LOG");
    if (!env)
        return;
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(env, names[i]) == 0)
            log_min = (cx_log_level)i;
}

void cx_log(cx_log_level lvl, const char *fmt, ...)
{
    static const char *tags[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (lvl < log_min)
        return;
    char line[2048], ts[40];
    cx_iso_time(ts, sizeof ts, cx_real_ns());
    int n = snprintf(line, sizeof line, "%s %s %s[%d] ", ts, tags[lvl], log_component, (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
