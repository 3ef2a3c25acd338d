/* memory.c - the `memory` fault: a memory limit on the unit's cgroup.
 *
 * Only where a memory cgroup is writable (v2 memory.max, v1
 * memory.limit_in_bytes); there is no signal-based fallback, so apply fails
 * with CX_ENOTSUP (HTTP 501) and the reason otherwise. The process group is
 * attached first; on v1 its existing charges move along where the kernel
 * still supports move_charge_at_immigrate. A limit below current usage makes
 * the kernel reclaim first; v1 refuses it with EBUSY if that fails
 * (CX_EBUSY), v2 accepts it and may OOM-kill the unit (then the supervisor
 * sees a crash, which is the point of the fault).
 */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "injectors/cgroup.h"
#include "injectors/inj_params.h"
#include "injectors/injector.h"
#include "injectors/unit_proc.h"

#define MEMORY_MIN_BYTES (4LL << 20)

typedef struct memory_ctx {
    int64_t limit_bytes; /* limit to set, bytes (>= 4 MiB) */
    int applied;         /* 1 between apply and revert */
    char root[512];      /* cgroup root of the set */
    char unit_id[65];    /* unit id */
} memory_ctx;

static const inj_param memory_params[] = {
    {"limit_bytes", INJ_INT, INJ_REQUIRED, MEMORY_MIN_BYTES, 1LL << 50, .unit = "bytes",
     .help = "the memory limit of the unit's cgroup"},
    {0},
};

static int memory_prepare(json_t *params, uint64_t seed, void **ctx, char *err, size_t errlen)
{
    (void)seed;
    inj_value v[1];
    int rc = inj_params_decode(params, memory_params, v, err, errlen);
    if (rc)
        return rc;
    int64_t limit = v[0].i;
    memory_ctx *m = calloc(1, sizeof *m);
    if (!m)
        return cx_fail(err, errlen, CX_ENOMEM, "memory ctx");
    m->limit_bytes = limit;
    *ctx = m;
    return 0;
}

static int memory_apply(void *ctx, inj_target *t, json_t *evidence, char *err, size_t errlen)
{
    memory_ctx *m = ctx;
    int rc = uproc_need_running(t->pid, err, errlen);
    if (rc)
        return rc;
    cg_set *s = NULL;
    rc = cg_set_open(NULL, t->unit_id, &s, err, errlen);
    if (rc)
        return rc;
    char contents[64] = "";
    int64_t usage = 0;
    if (!cg_set_available(s, CG_MEMORY)) {
        rc = cx_fail(err, errlen, CX_ENOTSUP, "no writable memory cgroup: %s", cg_set_why(s, CG_MEMORY));
        goto out;
    }
    rc = cg_set_attach_group(s, CG_MEMORY, t->pid, err, errlen);
    if (!rc)
        rc = cg_set_memory_limit(s, m->limit_bytes, contents, sizeof contents, err, errlen);
    if (rc)
        goto out;
    (void)cg_set_memory_usage(s, &usage, NULL, 0);
    snprintf(m->root, sizeof m->root, "%s", cg_set_root(s));
    snprintf(m->unit_id, sizeof m->unit_id, "%s", t->unit_id);
    m->applied = 1;
    json_object_set_new(evidence, "method", json_string("cgroup"));
    json_object_set_new(evidence, "cgroup", json_string(cg_set_dir(s, CG_MEMORY)));
    json_object_set_new(evidence, "limit", json_string(contents));
    json_object_set_new(evidence, "usage_bytes", json_integer(usage));
    json_object_set_new(evidence, "pid", json_integer(t->pid));
out:
    cg_set_free(s);
    return rc;
}

static int memory_clear(const char *root, const char *unit_id, char *err, size_t errlen)
{
    cg_set *s = NULL;
    int rc = cg_set_open(root, unit_id, &s, err, errlen);
    if (rc)
        return rc;
    if (cg_set_available(s, CG_MEMORY))
        rc = cg_set_memory_limit(s, -1, NULL, 0, err, errlen);
    cg_set_free(s);
    return rc;
}

static int memory_revert(void *ctx, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    memory_ctx *m = ctx;
    if (!m->applied)
        return 0;
    int rc = memory_clear(m->root, m->unit_id, err, errlen);
    if (rc == 0)
        m->applied = 0;
    return rc;
}

static json_t *memory_undo_record(void *ctx)
{
    memory_ctx *m = ctx;
    return json_pack("{s:s, s:s}", "cgroup_root", m->root, "unit_id", m->unit_id);
}

static int memory_sweep(json_t *record, inj_target *t, char *err, size_t errlen)
{
    (void)t;
    const char *root = NULL, *unit_id = NULL;
    json_error_t je;
    if (json_unpack_ex(record, &je, JSON_STRICT, "{s:s, s:s}", "cgroup_root", &root, "unit_id", &unit_id) !=
        0)
        return cx_fail(err, errlen, CX_EINVAL, "memory undo record: %s", je.text);
    return memory_clear(root[0] ? root : NULL, unit_id, err, errlen);
}

static void memory_free(void *ctx)
{
    free(ctx);
}

const injector inj_memory = {
    .type = "memory",
    .summary = "Memory limit on the unit's cgroup (v2 memory.max, v1 memory.limit_in_bytes); 501 where no "
               "memory cgroup is writable. Below current usage: v1 refuses (EBUSY), v2 may OOM-kill.",
    .params = memory_params,
    .prepare = memory_prepare,
    .apply = memory_apply,
    .tick = NULL,
    .revert = memory_revert,
    .undo_record = memory_undo_record,
    .sweep = memory_sweep,
    .free = memory_free,
};
