/* stop_signals.c - SIGTERM and SIGINT as a stop request (stop_signals.h). */
#include "common/stop_signals.h"

#include <string.h>

static volatile sig_atomic_t stop_signal; /* 0, or the first SIGTERM/SIGINT */

static void on_stop_signal(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
}

volatile sig_atomic_t *cx_stop_on_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return &stop_signal;
}
