/* hyp_kind.h - what a hypothesis file (harness/hypotheses/NAME.c) needs
 * besides the history: the verdict writer and small parsing helpers.
 * Private to harness/: hypothesis.c and the hypothesis files include it.
 *
 * A hypothesis file defines one `const hypothesis hyp_<name>` (the name its
 * line in hypothesis.c's HYP_KINDS expects) and keeps everything else
 * static: its params struct and their param_def table (harness/param.h),
 * the check of rules across params, measure and judge.
 */
#ifndef HARNESS_HYPOTHESES_HYP_KIND_H
#define HARNESS_HYPOTHESES_HYP_KIND_H

#include <stddef.h>

#include "harness/history.h"
#include "harness/hypothesis.h"
#include "harness/jsonv.h"

/* Fill v: status, figure, comparison, threshold, unit, explanation (printf). */
void hyp_verdict_set(hyp_verdict *v, hyp_status st, double measured, const char *cmp, double threshold,
                     const char *unit, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* Append to a fixed note buffer (never overflows; what does not fit is cut). */
void hyp_note(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A number of the entry as written, 0 when absent (windows read the raw
 * entry: horizon_window is called on it). */
double hyp_spec_num(const json_t *spec, const char *key);

#endif
