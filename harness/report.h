/* report.h - report.html of a run directory, self-contained.
 *
 * Rendered from the run's files only (journal.json for the hypotheses and
 * actions, events.jsonl for the eval losses and the fault records), so
 * `chaosloco report RUN_DIR` can re-render it at any time. The page makes
 * no external request: the loss curve is inline SVG (a polyline over
 * time, fault windows shaded as rectangles, one colour per fault type), the
 * hypotheses and actions are HTML tables. Everything from the files is
 * HTML-escaped.
 */
#ifndef HARNESS_REPORT_H
#define HARNESS_REPORT_H

#include <stddef.h>

#include "common/buf.h"

/* Render RUN_DIR/report.html (atomically). CX_ENOTFOUND when journal.json
 * is missing, CX_EINVAL when it is not a journal. */
int report_render(const char *run_dir, char *err, size_t errlen);
/* The document into b (for tests). */
int report_html(const char *run_dir, cx_buf *b, char *err, size_t errlen);

#endif
