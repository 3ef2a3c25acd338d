/* json.h - Jansson helpers: strict decoding with readable errors.
 */
#ifndef CX_JSON_H
#define CX_JSON_H

#include <jansson.h>
#include <stddef.h>

/* json_vunpack_ex with JSON_STRICT: unknown keys are errors. On failure
 * writes "<path>: <jansson's text>" into err ("" path for the root) and
 * returns CX_EINVAL. where names the object ("body", "$.method[2]"). */
int cx_json_unpack(json_t *root, const char *where, char *err, size_t errlen, const char *fmt, ...);

/* Dump to a malloc'd compact string (caller frees); NULL on failure. */
char *cx_json_dumps(const json_t *j);

/* Load a JSON file; on failure err says file:line:column: reason. */
json_t *cx_json_load_file(const char *path, char *err, size_t errlen);

#endif
