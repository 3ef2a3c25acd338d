/* json.c - Jansson helpers. */
#include "common/json.h"

#include <stdarg.h>
#include <stdio.h>

#include "common/err.h"

int cx_json_unpack(json_t *root, const char *where, char *err, size_t errlen, const char *fmt, ...)
{
    json_error_t je;
    va_list ap;
    va_start(ap, fmt);
    int rc = json_vunpack_ex(root, &je, JSON_STRICT, fmt, ap);
    va_end(ap);
    if (rc == 0)
        return 0;
    return cx_fail(err, errlen, CX_EINVAL, "%s: %s", where && *where ? where : "$", je.text);
}

char *cx_json_dumps(const json_t *j)
{
    return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
}

json_t *cx_json_load_file(const char *path, char *err, size_t errlen)
{
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        cx_fail(err, errlen, CX_EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    return j;
}
