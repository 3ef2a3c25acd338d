/* jsonv.h - strict JSON validation that collects every error with its path.
 *
 * Jansson's JSON_STRICT unpacking stops at the first problem; an experiment
 * file deserves the whole list at once. These helpers walk a decoded
 * document, report each problem as `<json path>: expected <what>, got <value>`
 * (e.g. `$.method[1].targets.ids[0]: expected a learner id in 0..3, got 7`)
 * into a jv_diag, and keep going. They never abort and never print.
 *
 * Used by the experiment loader and by every hypothesis's params parser.
 * Paths are JSONPath-like: `$`, `.key`, `[index]`.
 */
#ifndef HARNESS_JSONV_H
#define HARNESS_JSONV_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JV_PATHLEN 256

/* A list of error messages (each owned by the diag). Only the first
 * JV_DIAG_KEEP messages are kept; every later one is still counted, so a
 * hostile file costs memory and output bounded by the cap, not by the
 * number of its errors. */
typedef struct jv_diag jv_diag;

#define JV_DIAG_KEEP 50 /* messages kept per diag */

jv_diag *jv_diag_new(void);
void jv_diag_free(jv_diag *d); /* NULL is a no-op */
/* Every error reported, kept or not. */
size_t jv_diag_count(const jv_diag *d);
/* Messages kept: min(count, JV_DIAG_KEEP) less any lost to out-of-memory;
 * jv_diag_get(d, i) is valid for i below it. */
size_t jv_diag_kept(const jv_diag *d);
const char *jv_diag_get(const jv_diag *d, size_t i); /* borrowed */
/* Append "<path>: <message>". Over the cap, or on allocation failure, the
 * message is dropped but still counted, so a document is never reported
 * valid by mistake. */
void jv_diag_add(jv_diag *d, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Append every message of src, each prefixed by prefix (may be ""); src's
 * dropped messages stay counted. */
void jv_diag_merge(jv_diag *d, const jv_diag *src, const char *prefix);
/* Print the kept messages to f, one per line as "<prefix><message>"
 * (prefix may be ""), then "<prefix>... and N more errors" when some were
 * dropped. */
void jv_diag_print(FILE *f, const jv_diag *d, const char *prefix);

/* Child paths: "$.a" + "b" -> "$.a.b"; "$.a" + 3 -> "$.a[3]". Truncated
 * (never overflowed) beyond JV_PATHLEN. */
void jv_path_key(char *out, size_t len, const char *parent, const char *key);
void jv_path_idx(char *out, size_t len, const char *parent, size_t idx);

/* Short rendering of a JSON value for messages ("7", "\"kil\"", "an
 * object", "null"), into out. */
void jv_describe(char *out, size_t len, const json_t *v);
/* Human name of a JSON type: "an object", "a string", ... */
const char *jv_type_name(const json_t *v);

/* obj must be an object whose keys are all in keys (NULL-terminated).
 * Reports "not an object" or each unknown key (with the list of known
 * ones). Returns 0 if obj is an object (even with unknown keys), -1 if not. */
int jv_check_keys(jv_diag *d, const char *path, const json_t *obj, const char *const *keys);

/* Field getters. Each returns 1 when the key is present and valid (out
 * written), 0 when absent (out untouched; "missing required key" reported
 * if required), -1 when present but invalid (reported). path is the
 * object's path; the message names path.key. what describes the value in
 * the message ("a learner id"); NULL gives a generic name. */
int jv_get_int(jv_diag *d, const char *path, const json_t *obj, const char *key, int required, int64_t min,
               int64_t max, const char *what, int64_t *out);
int jv_get_number(jv_diag *d, const char *path, const json_t *obj, const char *key, int required, double min,
                  double max, const char *what, double *out);
int jv_get_bool(jv_diag *d, const char *path, const json_t *obj, const char *key, int required, int *out);
/* A string; if choices (NULL-terminated) is given it must be one of them. */
int jv_get_string(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                  const char *const *choices, const char **out);

/* An array / an object at path.key (1 ok, 0 absent, -1 wrong type:
 * "expected an array, got ..."); *out borrowed from obj. */
int jv_get_array(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                 json_t **out);
int jv_get_object(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                  json_t **out);
/* A non-empty string at path.key (1 ok, 0 absent, -1 wrong type or ""). */
int jv_get_nonempty_string(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                           const char **out);

/* The same checks on a bare value at path (array elements). */
int jv_int_value(jv_diag *d, const char *path, const json_t *v, int64_t min, int64_t max, const char *what,
                 int64_t *out);
int jv_number_value(jv_diag *d, const char *path, const json_t *v, double min, double max, const char *what,
                    double *out);

#endif
