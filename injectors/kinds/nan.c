/* nan.c - the `nan` fault: the learner's next N contributions carry NaN.
 *
 * In-band hook (docs/faults.md, "nan"): the learner reads <hook_dir>/nan (a decimal
 * N) before each contribution, poisons it when N > 0 (before the CRC, so
 * only the syncer's finite check can catch it) and rewrites N-1. This
 * injector writes N atomically; revert and sweep remove the file (what the
 * learner has already sent stays sent).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"

typedef struct nan_ctx {
    int64_t count;  /* contributions to poison, 1..1000 */
    char file[512]; /* <hook_dir>/nan written at apply */
    int applied;    /* 1 between apply and revert */
} nan_ctx;

static const inj_param nan_params[] = {
    {"count", INJ_INT, 0, 1, 1000, .def = 1, .unit = "contributions", .help = "contributions to poison"},
    {0},
};

static int nan_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    (void)seed;
    inj_value v[1];
    int rc = inj_params_decode(params, nan_params, v, err, errlen);
    if (rc)
        return rc;
    int64_t count = v[0].i;
    nan_ctx *n = calloc(1, sizeof *n);
    if (!n)
        return cx_fail(err, errlen, CX_ENOMEM, "nan ctx");
    n->count = count;
    *ctx = n;
    return 0;
}

static int nan_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    nan_ctx *n = ctx;
    if (!t->hook_dir || !t->hook_dir[0])
        return cx_fail(err, errlen, CX_ENOTSUP, "the unit has no hook directory (CHAOSLOCO_HOOK_DIR)");
    int len = snprintf(n->file, sizeof n->file, "%s/nan", t->hook_dir);
    if (len < 0 || (size_t)len >= sizeof n->file)
        return cx_fail(err, errlen, CX_EINVAL, "hook dir path too long");
    int rc = cx_mkdir_p(t->hook_dir, err, errlen);
    if (rc)
        return rc;
    char v[24];
    int vl = snprintf(v, sizeof v, "%lld", (long long)n->count);
    rc = cx_file_write_atomic(n->file, v, (size_t)vl, err, errlen);
    if (rc)
        return rc;
    n->applied = 1;
    json_object_set_new(evidence, "file", json_string(n->file));
    json_object_set_new(evidence, "content", json_string(v));
    json_object_set_new(evidence, "count", json_integer(n->count));
    return 0;
}

static int nan_remove(const char *file, char *err, size_t errlen)
{
    if (unlink(file) != 0 && errno != ENOENT) {
        int e = errno;
        return cx_fail(err, errlen, CX_EIO, "unlink %s: %s", file, strerror(e));
    }
    return 0;
}

static int nan_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    nan_ctx *n = ctx;
    if (!n->applied)
        return 0;
    int rc = nan_remove(n->file, err, errlen);
    if (rc == 0)
        n->applied = 0;
    return rc;
}

static json_t *nan_undo_record(void *ctx)
{
    nan_ctx *n = ctx;
    return json_pack("{s:s}", "file", n->file);
}

static int nan_sweep(json_t *record, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    const char *file = NULL;
    json_error_t je;
    if (json_unpack_ex(record, &je, JSON_STRICT, "{s:s}", "file", &file) != 0)
        return cx_fail(err, errlen, CX_EINVAL, "nan undo record: %s", je.text);
    return file[0] ? nan_remove(file, err, errlen) : 0;
}

static void nan_free(void *ctx)
{
    free(ctx);
}

const injector inj_nan = {
    .type = "nan",
    .summary = "The learner's next count contributions carry a NaN (in-band hook file <hook_dir>/nan), "
               "to prove the syncer's finite check rejects them; revert removes the hook file.",
    .params = nan_params,
    .prepare = nan_prepare,
    .apply = nan_apply,
    .tick = NULL,
    .revert = nan_revert,
    .undo_record = nan_undo_record,
    .sweep = nan_sweep,
    .free = nan_free,
};
