/* assets.h - the dashboard's web assets, embedded in the binary at build
 * time.
 *
 * dashboards/embed.cmake turns every file of dashboards/web/ and uPlot's
 * dist files (copied from node_modules into the build tree by
 * dashboards/CMakeLists.txt; the repository never holds uPlot's code) into
 * one generated C file with this table. The harness's report.html reuses
 * them: inline "uPlot.iife.min.js", "uPlot.min.css" and "charts.js", then
 * call ChaoslocoCharts.renderRun(element, snapshot).
 */
#ifndef DASH_ASSETS_H
#define DASH_ASSETS_H

#include <stddef.h>

typedef struct dash_asset {
    const char *name;          /* "app.js": served as /assets/app.js */
    const char *content_type;  /* "text/javascript; charset=utf-8" */
    const unsigned char *data; /* bytes, followed by one NUL not counted in len */
    size_t len;                /* bytes */
} dash_asset;

/* Terminated by an entry with name NULL. */
extern const dash_asset dash_assets[];

/* By name ("index.html"), or NULL. */
const dash_asset *dash_asset_find(const char *name);

#endif
