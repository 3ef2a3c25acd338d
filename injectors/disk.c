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

enum { DISK_OP_WRITE = 1, DISK_OP_FSYNC = 2, DISK_OP_RENAME = 4 };

typedef struct disk_ctx {
    char line[1200]; /* the control line (with '\n') */
    char file[512];  /* control file written at apply */
    int applied;     /* 1 between apply and revert */
} disk_ctx;

/* ops: array of unique "write"/"fsync"/"rename" → "write,fsync" in that
 * canonical order. */
static int disk_ops(json_t *params, char *out, size_t len, char *err, size_t errlen)
{
    static const char *const names[] = {"write", "fsync", "rename"};
    unsigned mask = DISK_OP_WRITE | DISK_OP_FSYNC | DISK_OP_RENAME;
    if (inj_param_has(params, "ops")) {
        json_t *ops = json_object_get(params, "ops");
        if (!json_is_array(ops) || json_array_size(ops) == 0)
            return cx_fail(err, errlen, CX_EINVAL,
                           "params.ops: must be a non-empty array of \"write\", "
                           "\"fsync\", \"rename\"");
        mask = 0;
        size_t i;
        json_t *v;
        json_array_foreach(ops, i, v)
        {
            unsigned bit = 0;
            for (unsigned k = 0; k < 3; k++)
                if (json_is_string(v) && strcmp(json_string_value(v), names[k]) == 0)
                    bit = 1u << k;
            if (!bit)
                return cx_fail(err, errlen, CX_EINVAL,
                               "params.ops[%zu]: must be \"write\", \"fsync\" or \"rename\"", i);
            if (mask & bit)
                return cx_fail(err, errlen, CX_EINVAL, "params.ops[%zu]: \"%s\" listed twice", i,
                               json_string_value(v));
            mask |= bit;
        }
    }
    size_t used = 0;
    out[0] = '\0';
    for (unsigned k = 0; k < 3; k++)
        if (mask & (1u << k)) {
            int n = snprintf(out + used, len - used, "%s%s", used ? "," : "", names[k]);
            if (n > 0)
                used += (size_t)n;
        }
    return 0;
}

static int disk_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    static const char *const keys[] = {"errno", "ops", "path", "probability", NULL};
    const char *eno = "EIO", *path = "*";
    double prob = 1;
    char ops[32];
    int rc = inj_params_check(params, keys, err, errlen);
    if (!rc)
        rc = inj_param_string(params, "errno", 0, "EIO", 16, &eno, err, errlen);
    if (!rc && strcmp(eno, "EIO") != 0 && strcmp(eno, "ENOSPC") != 0)
        rc = cx_fail(err, errlen, CX_EINVAL, "params.errno: '%s' is not EIO or ENOSPC", eno);
    if (!rc)
        rc = inj_param_string(params, "path", 0, "*", 1024, &path, err, errlen);
    if (!rc)
        for (const char *p = path; *p; p++)
            if ((unsigned char)*p <= ' ' || *p == 0x7f) {
                rc = cx_fail(err, errlen, CX_EINVAL,
                             "params.path: the glob may not contain spaces or control characters");
                break;
            }
    if (!rc)
        rc = inj_param_number(params, "probability", 0, 1, 0, 1, &prob, err, errlen);
    if (!rc)
        rc = disk_ops(params, ops, sizeof ops, err, errlen);
    if (rc)
        return rc;
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
    .params =
        "errno: \"EIO\" (default) | \"ENOSPC\"; ops: non-empty array of \"write\", \"fsync\", \"rename\" "
        "(default all); path: fnmatch glob on the absolute path, no spaces, '*' also matches '/' "
        "(default \"*\"); probability: number 0..1 per matching call (default 1)",
    .prepare = disk_prepare,
    .apply = disk_apply,
    .tick = NULL,
    .revert = disk_revert,
    .undo_record = disk_undo_record,
    .sweep = disk_sweep,
    .free = disk_free,
};
