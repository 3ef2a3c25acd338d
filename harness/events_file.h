/* events_file.h - follow a coordinator's JSON-lines event file: the file
 * form of the telemetry contract (docs/telemetry.md, "The file form").
 *
 * A tailer reads what a coordinator appended to one path since its last
 * call and hands back each new event as a parsed JSON object, the same
 * objects GET /v1/events serves, so the runner treats both sources alike.
 * It is not a writer (examples/pytorch-diloco/contract.py is one) and it
 * judges nothing: it only enforces the file's own rules.
 *
 *   - Only '\n'-terminated lines are read. An unterminated tail (an event
 *     being written) is not consumed: the next call reads it again from
 *     its first byte, so a writer that cut a torn tail back to its last
 *     complete line and appended again is read correctly.
 *   - Every complete line is one JSON object with integer seq, integer
 *     t_mono_ms and string type. Anything else (an empty line, bad JSON,
 *     a line longer than line_max bytes) is an error naming the file and
 *     the line number; never skipped.
 *   - Within a file, each event's seq is the previous one's + 1.
 *   - A file truncated below what was read, or replaced (another inode at
 *     the path, e.g. rewritten and renamed over), is read again from its
 *     start: events with seq <= the last one taken are the history already
 *     read and are skipped; the first newer one must be that seq + 1.
 *     (Before switching to a replacing file, the old one is read to its
 *     end.)
 *
 * An error is sticky: every later call returns it again (the run fails;
 * nothing after a bad line is trusted). Memory: one buffer of line_max + 1
 * bytes, and each call reads at most EVF_POLL_BYTES.
 *
 * Ownership: the tailer owns its path copy, descriptor and buffer; events
 * are appended to the caller's array (new references it owns).
 */
#ifndef HARNESS_EVENTS_FILE_H
#define HARNESS_EVENTS_FILE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define EVF_LINE_MAX ((size_t)1 << 20)   /* default longest line, bytes without the '\n' */
#define EVF_POLL_BYTES ((size_t)8 << 20) /* bytes one evf_poll reads at most */

typedef struct evf evf;

/* A tailer of path (which need not exist yet: a call before it does reads
 * nothing). line_max: the longest line accepted (0 = EVF_LINE_MAX). NULL
 * when out of memory. */
evf *evf_new(const char *path, size_t line_max);
void evf_free(evf *t); /* NULL is a no-op */

/* Read what was appended since the last call: every new event is appended
 * to out (a JSON array). Returns how many, or a negative cx_err with err
 * "events file PATH, line N: ..." (sticky, see above). */
int evf_poll(evf *t, json_t *out, char *err, size_t errlen);

int64_t evf_last_seq(const evf *t); /* seq of the last event taken, 0 none */

#endif
