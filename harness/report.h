/* report.h - report.html of a run directory, self-contained.
 *
 * Rendered from the run's files only (journal.json for the hypotheses and
 * actions, events.jsonl for the eval losses, merges, contributions and the
 * fault records), so `chaosloco report RUN_DIR` can re-render it at any
 * time, byte for byte the same. The charts are the dashboard's own: the
 * embedded uPlot and dashboards/web/charts.js (dashboards/assets.h) are
 * inlined, and ChaoslocoCharts.renderRun() draws them from a JSON blob in the
 * page shaped like the dashboard's snapshot ({t0_mono_ms, now_mono_ms,
 * series: {loss, merges, rates}, faults}). The page makes no request at all
 * (a Content-Security-Policy forbids any) and works offline from a file.
 * Fault windows, hypotheses and actions are also HTML tables. Everything
 * from the files is HTML-escaped; the blob is escaped for a <script>.
 */
#ifndef HARNESS_REPORT_H
#define HARNESS_REPORT_H

#include <stddef.h>

#include "common/buf.h"

/* Render RUN_DIR/report.html (atomically). CX_ENOTFOUND when journal.json
 * is missing (or an embedded chart asset is), CX_EINVAL when it is not a
 * journal. */
int report_render(const char *run_dir, char *err, size_t errlen);
/* The document into b (for tests). */
int report_html(const char *run_dir, cx_buf *b, char *err, size_t errlen);

#endif
