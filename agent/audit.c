/* audit.c - append-only JSON lines, one write(2) each. */
#include "agent/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/parse.h"

struct audit {
    int fd; /* O_APPEND */
};

audit *audit_new(const char *path, char *err, size_t errlen)
{
    audit *a = calloc(1, sizeof *a);
    if (!a) {
        cx_fail(err, errlen, CX_ENOMEM, "audit: out of memory");
        return NULL;
    }
    a->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (a->fd < 0) {
        int e = errno;
        free(a);
        cx_fail(err, errlen, CX_EIO, "audit: open %s: %s", path, strerror(e));
        return NULL;
    }
    return a;
}

void audit_free(audit *a)
{
    if (!a)
        return;
    close(a->fd);
    free(a);
}

void audit_log(audit *a, const char *method, const char *path, int status, const char *fault_id,
               const char *auth, const char *detail)
{
    if (!a)
        return;
    char when[40];
    cx_iso_time(when, sizeof when, cx_real_ns());
    /* A hostile path (invalid UTF-8, control bytes) is exactly what an
     * audit line must keep: escaped, so the JSON line is always written. */
    char m[64], pth[4200], fid[128], au[32], det[2048];
    cx_utf8_sanitize(method, m, sizeof m);
    cx_utf8_sanitize(path, pth, sizeof pth);
    cx_utf8_sanitize(fault_id, fid, sizeof fid);
    cx_utf8_sanitize(auth ? auth : "none", au, sizeof au);
    cx_utf8_sanitize(detail, det, sizeof det);
    json_t *o = json_pack("{s:s,s:I,s:s,s:s,s:i,s:s?,s:s,s:s?}", "t_real", when, "t_mono_ms",
                          (json_int_t)cx_mono_ms(), "method", m, "path", pth, "status", status, "fault_id",
                          fault_id ? fid : NULL, "auth", au, "detail", detail ? det : NULL);
    if (!o)
        return;
    if (!fault_id)
        json_object_set_new(o, "fault_id", json_null());
    if (!detail)
        json_object_set_new(o, "detail", json_null());
    char *line = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!line)
        return;
    size_t n = strlen(line);
    char *withnl = realloc(line, n + 2);
    if (!withnl) {
        free(line);
        return;
    }
    withnl[n] = '\n';
    withnl[n + 1] = '\0';
    if (write(a->fd, withnl, n + 1) != (ssize_t)(n + 1))
        cx_warn("audit: write failed: %s", strerror(errno));
    free(withnl);
}
