/* fuzz_log.h - for the libFuzzer targets whose code logs (the experiment
 * loader, the agent's fault decoding): declares libFuzzer's two entry
 * points and defines LLVMFuzzerInitialize, which sets the log to errors
 * only so that a run prints libFuzzer's lines, not one warning per input.
 * Include it from exactly one file of a target; the target defines
 * LLVMFuzzerTestOneInput. */
#ifndef FUZZ_LOG_H
#define FUZZ_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "common/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    cx_log_init("fuzz", CX_LOG_ERROR);
    return 0;
}

#endif
