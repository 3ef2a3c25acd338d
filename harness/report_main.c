/* report_main.c - `chaosloco report RUN_DIR`: re-render report.html from
 * the run directory's files (report.h). */
#include <stdio.h>
#include <string.h>

#include "common/commands.h"
#include "common/err.h"
#include "common/exitcode.h"
#include "common/flags.h"
#include "common/log.h"
#include "harness/report.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: chaosloco report RUN_DIR\n\n"
               "Re-render RUN_DIR/report.html (self-contained: loss curve with the fault windows shaded,\n"
               "hypotheses and actions tables) from RUN_DIR/journal.json and RUN_DIR/events.jsonl.\n\n"
               "  --help   this text\n\n"
               "exit: 0 written, 1 the run directory could not be read, 64 usage error\n");
}

int report_main(int argc, char **argv)
{
    cx_log_init("report", CX_LOG_INFO);
    const char *dir = NULL;
    const cx_flag flags[] = {{0}};
    int npos = 0;
    int rc0 = cx_flags_parse("chaosloco report", argc, argv, flags, "RUN_DIR", &dir, 1, &npos, usage);
    if (rc0 != CX_FLAGS_OK)
        return rc0;
    if (!dir) {
        fprintf(stderr, "chaosloco report: RUN_DIR is required (see --help)\n");
        return CX_EXIT_USAGE;
    }
    char err[CX_ERRLEN];
    if (report_render(dir, err, sizeof err) < 0) {
        fprintf(stderr, "chaosloco report: %s\n", err);
        return CX_EXIT_FAILURE;
    }
    printf("%s/report.html\n", dir);
    return CX_EXIT_OK;
}
