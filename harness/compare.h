/* compare.h - one experiment, the same seed and fault schedule, run in
 * several training modes; one table of the figures that tell the modes
 * apart (DESIGN §5, §9).
 *
 * Each mode is a full `chaosloco run` (run.h) with --mode MODE into
 * OUT/<mode>/; its summary.json gives goodput, bytes per token, final loss
 * and the longest merge gap. Time to target loss is computed here: the
 * target is the worst final loss over the modes that trained (so every
 * mode reaches it), the time the first eval at or below it, in s from each
 * run's start. Written as OUT/compare.csv and OUT/compare.json.
 */
#ifndef HARNESS_COMPARE_H
#define HARNESS_COMPARE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define COMPARE_MAX_MODES 8

typedef struct compare_opts {
    const char *experiment; /* path (required) */
    const char *modes[COMPARE_MAX_MODES];
    int nmodes;
    const char *out_dir; /* OUT, or NULL: out/compare-<slug>-<UTC time> */
    int ci;              /* the "ci" variant */
    int has_seed;
    uint64_t seed;
    double time_limit_s; /* per run, 0 = run's default */
} compare_opts;

/* The table from per-mode summaries (array of {mode, exit_code, summary}):
 * adds time_to_target_s and returns {target_loss, rows: [...]} (new). */
json_t *compare_table(const json_t *runs);
/* CSV text of a compare_table (malloc'd). */
char *compare_csv(const json_t *table);

/* Run every mode. *worst gets the worst exit code seen among runs that
 * were not a usage error: 3 when a run hit a harness error, else 0 (a
 * mode whose hypotheses deviate is a result, not a failure of compare).
 * Returns CX_EINVAL on a usage problem (message in err). */
int compare_run(const compare_opts *o, int *exit_code, char *err, size_t errlen);

#endif
