/* clock.c - the `clock` fault: skew the unit's realtime clock.
 *
 * The agent starts the unit under libfaketime with FAKETIME_TIMESTAMP_FILE
 * = t->faketime_file, FAKETIME_NO_CACHE=1 and DONT_FAKE_MONOTONIC=1, so
 * rewriting that file changes what the unit's clock_gettime(CLOCK_REALTIME)/
 * time()/gettimeofday() return from the next call on, while
 * CLOCK_MONOTONIC (every duration) stays real.
 *
 * File syntax (libfaketime's "relative offset" form, parsed with atof in
 * the unit's C locale, so '.' is the decimal point): "+3600.000" or
 * "-30.500", optionally followed by " x<rate>" ("+0.000 x2"). The offset is
 * in seconds; we never emit libfaketime's m/h/d/y suffixes. Rate caveat:
 * libfaketime scales time elapsed since the faked process started, so a
 * rate != 1 also shifts the clock by (rate-1) * (process age) at once.
 * revert (and sweep) write "+0": no skew.
 */
#include "injectors/clock.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"

#define CLOCK_MAX_OFFSET_S 315360000.0 /* ten years */

typedef struct clock_ctx {
    double offset_s; /* realtime offset, s (may be negative) */
    double rate;     /* realtime speed factor, > 0 */
    char line[64];   /* the timestamp-file line this fault writes */
    char file[512];  /* file written at apply (for revert/undo) */
    int applied;     /* 1 between apply and revert */
} clock_ctx;

static const inj_param clock_params[] = {
    {"offset_s", INJ_NUMBER, INJ_REQUIRED, -CLOCK_MAX_OFFSET_S, CLOCK_MAX_OFFSET_S, .unit = "s",
     .help = "realtime offset, may be negative or fractional"},
    {"rate", INJ_NUMBER, 0, 0.001, 1000, .def = 1, .help = "realtime speed relative to real time"},
    {0},
};

static int clock_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    (void)seed;
    inj_value v[2];
    int rc = inj_params_decode(params, clock_params, v, err, errlen);
    if (rc)
        return rc;
    double offset = v[0].d, rate = v[1].d;
    clock_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return cx_fail(err, errlen, CX_ENOMEM, "clock ctx");
    c->offset_s = offset;
    c->rate = rate;
    if (rate == 1.0)
        snprintf(c->line, sizeof c->line, "%+.3f\n", offset);
    else
        snprintf(c->line, sizeof c->line, "%+.3f x%.6g\n", offset, rate);
    *ctx = c;
    return 0;
}

static int clock_write(const char *file, const char *line, char *err, size_t errlen)
{
    return cx_file_write_atomic(file, line, strlen(line), err, errlen);
}

static int clock_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    clock_ctx *c = ctx;
    if (!t->faketime_file || !t->faketime_file[0])
        return cx_fail(err, errlen, CX_ENOTSUP,
                       "the unit does not run under libfaketime (not installed, or started without it)");
    int rc = clock_write(t->faketime_file, c->line, err, errlen);
    if (rc)
        return rc;
    snprintf(c->file, sizeof c->file, "%s", t->faketime_file);
    c->applied = 1;
    char shown[64];
    snprintf(shown, sizeof shown, "%.*s", (int)strcspn(c->line, "\n"), c->line);
    json_object_set_new(evidence, "file", json_string(c->file));
    json_object_set_new(evidence, "line", json_string(shown));
    json_object_set_new(evidence, "offset_s", json_real(c->offset_s));
    json_object_set_new(evidence, "rate", json_real(c->rate));
    return 0;
}

static int clock_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    clock_ctx *c = ctx;
    if (!c->applied)
        return 0;
    int rc = clock_write(c->file, "+0\n", err, errlen);
    if (rc == 0)
        c->applied = 0;
    return rc;
}

static json_t *clock_undo_record(void *ctx)
{
    clock_ctx *c = ctx;
    return json_pack("{s:s}", "file", c->file);
}

static int clock_sweep(json_t *record, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    const char *file = NULL;
    json_error_t je;
    if (json_unpack_ex(record, &je, JSON_STRICT, "{s:s}", "file", &file) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "clock undo record: %s", je.text);
    if (!file[0])
        return 0;
    return clock_write(file, "+0\n", err, errlen);
}

static void clock_free(void *ctx)
{
    free(ctx);
}

/* ---- clock: stale libfaketime shared memory ---- */

/* pid from "faketime_shm_<pid>" / "sem.faketime_sem_<pid>", or 0. */
static long clock_shm_pid(const char *name)
{
    const char *num = NULL;
    if (strncmp(name, "faketime_shm_", 13) == 0)
        num = name + 13;
    else if (strncmp(name, "sem.faketime_sem_", 17) == 0)
        num = name + 17;
    if (!num || !*num)
        return 0;
    char *end = NULL;
    long pid = strtol(num, &end, 10);
    return *end == '\0' && pid > 0 ? pid : 0;
}

int inj_clock_clean_shm(const char *shm_dir, int *removed, char *err, size_t errlen)
{
    if (removed)
        *removed = 0;
    if (!shm_dir)
        shm_dir = "/dev/shm";
    DIR *d = opendir(shm_dir);
    if (!d) {
        int e = errno;
        return cx_fail(err, errlen, CX_ESYS, "opendir %s: %s", shm_dir, strerror(e));
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long pid = clock_shm_pid(de->d_name);
        if (pid == 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[1024];
        int n = snprintf(path, sizeof path, "%s/%s", shm_dir, de->d_name);
        if (n > 0 && (size_t)n < sizeof path && unlink(path) == 0 && removed)
            (*removed)++;
    }
    closedir(d);
    return 0;
}

const injector inj_clock = {
    .type = "clock",
    .summary = "Skew the unit's realtime clock through libfaketime's timestamp file (offset and rate); "
               "CLOCK_MONOTONIC stays real. 501 when the unit does not run under libfaketime.",
    .params = clock_params,
    .prepare = clock_prepare,
    .apply = clock_apply,
    .tick = NULL,
    .revert = clock_revert,
    .undo_record = clock_undo_record,
    .sweep = clock_sweep,
    .free = clock_free,
};
