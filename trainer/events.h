/* events.h - the syncer's machine-readable event log (docs/api.md, docs/telemetry.md).
 *
 * Every event is one JSON object with a gapless sequence number `seq`
 * (1, 2, 3, ... persisted across restarts), `t_real` (ISO-8601 UTC ms),
 * `t_mono_ms` (this process's CLOCK_MONOTONIC) and `type`, plus the type's
 * fields. Each event is appended to <state-dir>/events.jsonl as one line
 * (flushed per event) and kept in an in-memory ring for GET /v1/events;
 * requests older than the ring are served from the file.
 *
 * Recovery: events_new() reads the end of the existing file only (a few
 * hundred KB, whatever its size: a restart does not re-read the history),
 * drops a torn last line (a crash in the middle of a write) by truncating
 * the file to the last complete line, and continues from the last seq + 1
 * (or from a floor the caller knows from its checkpoint, whichever is
 * larger). Reads of old events find their start by bisection on the file
 * (seqs grow down it), so they too cost what they return, not the history.
 *
 * Thread-safe: one internal mutex; never call back into the caller.
 */
#ifndef TRN_EVENTS_H
#define TRN_EVENTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

typedef struct events events;

/* Open (create) path and recover its last seq. ring_cap: events kept in
 * memory (>= 16). NULL with err on failure. */
events *events_new(const char *path, size_t ring_cap, char *err, size_t errlen);
void events_free(events *ev);

/* Never hand out a seq <= floor (the caller's checkpoint may know a later
 * seq than a damaged file). */
void events_set_seq_floor(events *ev, int64_t floor);

/* Append one event: adds seq, t_real, t_mono_ms and type to fields (stolen;
 * NULL = no extra fields). Returns the seq given, or a negative cx_err when
 * the file write failed (the event still goes to the ring and the seq is
 * still consumed, so the sequence stays gapless for readers of the API). */
int64_t events_emit(events *ev, const char *type, json_t *fields);

/* Append events with seq > since, at most limit of them, as NDJSON lines to
 * out. Returns 0 or a negative cx_err (CX_ETOOBIG when out is full: the
 * lines that fit are there). */
int events_since(events *ev, int64_t since, size_t limit, cx_buf *out);

int64_t events_last_seq(events *ev);

/* Call fn on every event of the file with seq > since and (unless type is
 * NULL) of that type, oldest first (fn gets a borrowed, parsed object; a
 * non-zero return stops the scan; lines of other types are not parsed).
 * Used at start-up, e.g. to find the fragment versions published after the
 * checkpoint (since = its seq, type "merge"). */
int events_foreach_file(events *ev, int64_t since, const char *type, int (*fn)(void *ctx, json_t *event),
                        void *ctx);

/* Bytes of the file read by recovery and events_foreach_file so far: what a
 * restart cost (tests bound it against the file's size). */
int64_t events_read_bytes(events *ev);

#endif
