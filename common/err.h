/* err.h - the one error enum of chaosloco, its strings and its HTTP statuses.
 *
 * Every fallible function returns 0 (CX_OK) or a negative cx_err, and writes
 * detail into an optional caller-supplied buffer passed last
 * (`char *err, size_t errlen`; either may be NULL/0). Only main() exits.
 */
#ifndef CX_ERR_H
#define CX_ERR_H

#include <stddef.h>

typedef enum cx_err {
    CX_OK = 0,
    CX_EINVAL = -1,    /* bad input: flag, JSON body, file, parameter range */
    CX_ENOMEM = -2,    /* allocation failed */
    CX_EIO = -3,       /* read/write/fsync failed */
    CX_ENOTFOUND = -4, /* no such thing (route, fault, learner, file) */
    CX_ECONFLICT = -5, /* stale version or incarnation, state conflict */
    CX_ETIMEDOUT = -6, /* a deadline passed */
    CX_EUNAVAIL = -7,  /* peer unreachable or service halted */
    CX_ECORRUPT = -8,  /* checksum, length or non-finite payload */
    CX_EAUTH = -9,     /* missing or wrong bearer token */
    CX_ETOOBIG = -10,  /* over a hard cap (body, buffer, log) */
    CX_ENOTSUP = -11,  /* not possible on this host (no cgroup, ...) */
    CX_EBUSY = -12,    /* try again later */
    CX_ESYS = -13,     /* an unexpected system call failure (see errbuf) */
    CX_ENOUNIT = -14,  /* the fault needs a running unit and the unit has no process */
} cx_err;
#define CX_ERR_LAST CX_ENOUNIT /* the lowest code: codes run from CX_ERR_LAST to CX_OK */

/* Static, human-readable name of an error code ("bad input", ...). */
const char *cx_strerror(int err);

/* HTTP status for an error code: EINVAL/ECORRUPT 400, EAUTH 401,
 * ENOTFOUND 404, ECONFLICT and ENOUNIT 409, ETOOBIG 413, ENOTSUP 501, EUNAVAIL 503,
 * ETIMEDOUT 504, anything else 500. */
int cx_err_http_status(int err);

/* snprintf into err (if non-NULL) and return code: `return cx_fail(err,
 * errlen, CX_EINVAL, "bad --steps %s", s);` */
int cx_fail(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define CX_ERRLEN 256

#endif
