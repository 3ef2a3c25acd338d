/* fuzz_experiment.c - libFuzzer target: the experiment loader and
 * validator (harness/experiment.c, jsonv.c, the hypotheses' params and the
 * injectors' prepare() it calls), as `chaosloco validate` and `run` use
 * them, on both variants (as written, and with the "ci" patch applied).
 * Input: the file's bytes. Seeds: the experiments/ files and seeds/experiment/.
 * A valid experiment is also scheduled (validate --schedule). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_log.h"
#include "harness/experiment.h"
#include "harness/schedule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (unsigned flags = 0; flags <= EXP_CI; flags += EXP_CI) {
        jv_diag *d = jv_diag_new();
        experiment *e = NULL;
        char err[256];
        if (exp_load_string(text, flags, &e, d, err, sizeof err) == 0) {
            schedule *s = NULL;
            if (sched_build(e, e->seed, &s, err, sizeof err) == 0)
                sched_free(s);
        }
        /* the capped diag: every error counted, at most JV_DIAG_KEEP kept */
        if (jv_diag_kept(d) > JV_DIAG_KEEP || jv_diag_kept(d) > jv_diag_count(d))
            abort();
        exp_free(e);
        jv_diag_free(d);
    }
    free(text);
    return 0;
}
