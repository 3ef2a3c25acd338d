/* disk.c - the `disk` fault: failing writes, fsyncs and renames.
 *
 * The agent preloads libchaosloco_diskfault.so (injectors/shim/diskfault.c)
 * into the unit with CHAOSLOCO_DISKFAULT_FILE = t->diskfault_file. This
 * injector only rewrites that control file, atomically:
 *
 *   errno=EIO|ENOSPC ops=write,fsync,rename path=<glob> probability=<p> seed=<n>
 *
 * and "off" on revert/sweep. The shim rereads the file at most every 50 ms,
 * so the fault takes effect (and ends) within ~50 ms of apply (revert).
 */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/file.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"

typedef struct disk_ctx {
    char line[1200]; /* the control line (with '\n') */
    char file[512];  /* control file written at apply */
    int applied;     /* 1 between apply and revert */
} disk_ctx;

/* ops: bit k of the decoded mask is disk_op_names[k]. */
static const char *const disk_op_names[] = {"write", "fsync", "rename", NULL};
static const char *const disk_errnos[] = {"EIO", "ENOSPC", NULL};
enum { P_ERRNO, P_OPS, P_PATH, P_PROB };
static const inj_param disk_params[] = {
    [P_ERRNO] = {"errno", INJ_ENUM, 0, .max = 16, .def_str = "EIO", .values = disk_errnos,
                 .help = "what the failed calls return"},
    [P_OPS] = {"ops", INJ_LIST, 0, .values = disk_op_names,
               .help = "write: write/pwrite; fsync: fsync/fdatasync; rename: rename/renameat"},
    [P_PATH] = {"path", INJ_STRING, 0, .max = 1024, .def_str = "*",
                .help = "fnmatch glob on the absolute path, no spaces; '*' also matches '/'"},
    [P_PROB] = {"probability", INJ_NUMBER, 0, 0, 1, .def = 1, .help = "chance per matching call"},
    {0},
};

static int disk_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    inj_value v[4];
    int rc = inj_params_decode(params, disk_params, v, err, errlen);
    if (rc)
        return rc;
    const char *eno = v[P_ERRNO].s, *path = v[P_PATH].s;
    double prob = v[P_PROB].d;
    for (const char *p = path; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return cx_fail(err, errlen, CX_EINVAL,
                           "params.path: the glob may not contain spaces or control characters");
    /* "write,fsync" in canonical order */
    char ops[32] = "";
    size_t used = 0;
    for (unsigned k = 0; disk_op_names[k]; k++)
        if (v[P_OPS].mask & (1u << k)) {
            int n = snprintf(ops + used, sizeof ops - used, "%s%s", used ? "," : "", disk_op_names[k]);
            if (n > 0)
                used += (size_t)n;
        }
    disk_ctx *d = calloc(1, sizeof *d);
    if (!d)
        return cx_fail(err, errlen, CX_ENOMEM, "disk ctx");
    snprintf(d->line, sizeof d->line, "errno=%s ops=%s path=%s probability=%.6g seed=%llu\n", eno, ops, path,
             prob, (unsigned long long)seed);
    *ctx = d;
    return 0;
}

static int disk_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    disk_ctx *d = ctx;
    if (!t->diskfault_file || !t->diskfault_file[0])
        return cx_fail(err, errlen, CX_ENOTSUP,
                       "the unit was not started with the disk-fault shim preloaded");
    int rc = cx_file_write_atomic(t->diskfault_file, d->line, strlen(d->line), err, errlen);
    if (rc)
        return rc;
    snprintf(d->file, sizeof d->file, "%s", t->diskfault_file);
    d->applied = 1;
    json_object_set_new(evidence, "file", json_string(d->file));
    json_object_set_new(evidence, "line", json_stringn(d->line, strcspn(d->line, "\n")));
    json_object_set_new(evidence, "takes_effect_within_ms", json_integer(50));
    return 0;
}

static int disk_off(const char *file, char *err, size_t errlen)
{
    return cx_file_write_atomic(file, "off\n", 4, err, errlen);
}

static int disk_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    disk_ctx *d = ctx;
    if (!d->applied)
        return 0;
    int rc = disk_off(d->file, err, errlen);
    if (rc == 0)
        d->applied = 0;
    return rc;
}

static json_t *disk_undo_record(void *ctx)
{
    disk_ctx *d = ctx;
    return json_pack("{s:s}", "file", d->file);
}

static int disk_sweep(json_t *record, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    const char *file = NULL;
    json_error_t je;
    if (json_unpack_ex(record, &je, JSON_STRICT, "{s:s}", "file", &file) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "disk undo record: %s", je.text);
    return file[0] ? disk_off(file, err, errlen) : 0;
}

static void disk_free(void *ctx)
{
    free(ctx);
}

const injector inj_disk = {
    .type = "disk",
    .summary = "Fail the unit's write/pwrite, fsync/fdatasync and rename/renameat on matching paths with "
               "EIO or ENOSPC (LD_PRELOAD shim; effective within 50 ms). 501 without the shim.",
    .params = disk_params,
    .prepare = disk_prepare,
    .apply = disk_apply,
    .tick = NULL,
    .revert = disk_revert,
    .undo_record = disk_undo_record,
    .sweep = disk_sweep,
    .free = disk_free,
};
