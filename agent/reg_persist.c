/* reg_persist.c - the fault registry's faults.json: snapshots of the active
 * list written atomically (before an apply, under the lock; after an apply
 * or a revert, once the lock is released), and the crash sweep that undoes
 * what a previous agent's file says may have been done. Part of the
 * registry (registry.h, reg_internal.h; its lifecycle is drawn in
 * registry.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/reg_internal.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/file.h"
#include "common/json.h"
#include "common/log.h"

/* ---- registry: persistence ---- */

/* Who may wait for whom: the registry lock is held across the one write
 * that must land before an apply (reg_create's), never across any other.
 * Every other change (a revert, the record after an apply) takes a
 * snapshot of the active list under the lock, releases the lock, then
 * writes it: a POST, a GET or the agent loop never waits for that fsync
 * on the registry lock. Writers take wlock, and a snapshot older than
 * the newest one written is dropped, so the file never goes back in time.
 * A crash before a revert's write leaves the reverted fault in the file:
 * the next start sweeps it again (sweeps are idempotent). */

/* The active list (and extra, a fault about to be applied) as faults.json
 * text, and its generation. Lock held. NULL on out of memory. */
static char *snapshot(reg *r, const fault *extra, uint64_t *gen)
{
    json_t *arr = json_array();
    json_t *root = json_pack("{s:i,s:I,s:o}", "version", 1, "next_id", (json_int_t)r->next_id, "faults", arr);
    if (!root)
        return NULL;
    for (int pass = 0; pass < 2; pass++) {
        for (const fault *f = pass == 0 ? extra : r->active; f; f = pass == 0 ? NULL : f->next) {
            json_t *rec =
                json_pack("{s:s,s:s,s:s,s:s,s:b,s:O?}", "id", f->id, "type", f->type, "target", f->target,
                          "created_real", f->created_real, "lease", f->lease, "undo", f->undo);
            if (rec && !f->undo)
                json_object_set_new(rec, "undo", json_null());
            json_array_append_new(arr, rec);
        }
    }
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(root);
    *gen = ++r->gen;
    return text;
}

/* Write a snapshot (taken) unless a newer one is already written. Any
 * thread, registry lock held or not. */
static int write_snapshot(reg *r, char *text, uint64_t gen, char *err, size_t errlen)
{
    if (!text)
        return cx_fail(err, errlen, CX_ENOMEM, "registry: out of memory");
    int rc = 0;
    pthread_mutex_lock(&r->wlock);
    if (gen > r->written_gen) {
        rc = cx_file_write_atomic(r->path, text, strlen(text), err, errlen);
        if (rc == 0)
            r->written_gen = gen;
    }
    pthread_mutex_unlock(&r->wlock);
    free(text);
    return rc;
}

/* Rewrite faults.json now, lock held: the write before an apply. */
int reg_persist(reg *r, const fault *extra, char *err, size_t errlen)
{
    uint64_t gen = 0;
    char *text = snapshot(r, extra, &gen);
    return write_snapshot(r, text, gen, err, errlen);
}

/* Lock held: take the snapshot of the active list as it is now. */
pending reg_pending_take(reg *r)
{
    pending p = {NULL, 0};
    p.text = snapshot(r, NULL, &p.gen);
    return p;
}

/* Lock released: write it; a failure is logged with what (after a revert
 * of ..., after the apply of ...). */
void reg_pending_write(reg *r, pending p, const char *what)
{
    char err[CX_ERRLEN];
    if (write_snapshot(r, p.text, p.gen, err, sizeof err) < 0)
        cx_warn("registry: %s: %s", what, err);
}

/* ---- registry: the crash sweep ---- */

int reg_sweep_previous(reg *r, int *nswept, char *err, size_t errlen)
{
    *nswept = 0;
    if (access(r->path, F_OK) != 0)
        return 0;
    char lerr[CX_ERRLEN] = "";
    json_t *root = cx_json_load_file(r->path, lerr, sizeof lerr);
    json_t *arr = root ? json_object_get(root, "faults") : NULL;
    if (!root || !json_is_array(arr)) {
        char bad[4200];
        snprintf(bad, sizeof bad, "%s.corrupt", r->path);
        rename(r->path, bad);
        json_decref(root);
        return cx_fail(err, errlen, CX_ECORRUPT, "registry: %s unreadable (%s), moved to %s", r->path,
                       lerr[0] ? lerr : "no faults array", bad);
    }
    pthread_mutex_lock(&r->lock);
    json_t *nid = json_object_get(root, "next_id");
    if (json_is_integer(nid) && json_integer_value(nid) > 0)
        r->next_id = (uint64_t)json_integer_value(nid);
    size_t i;
    json_t *rec;
    json_array_foreach(arr, i, rec)
    {
        const char *id = json_string_value(json_object_get(rec, "id"));
        const char *type = json_string_value(json_object_get(rec, "type"));
        const char *target = json_string_value(json_object_get(rec, "target"));
        json_t *undo = json_object_get(rec, "undo");
        fault *f = calloc(1, sizeof *f);
        if (!f)
            break;
        snprintf(f->id, sizeof f->id, "%s", id ? id : "?");
        f->type = strdup(type ? type : "?");
        f->target = strdup(target ? target : "unit");
        f->origin = strdup("sweep");
        f->inj = type ? r->hooks.find(type) : NULL;
        f->state = F_REVERTED;
        f->revert_reason = "agent_restart";
        f->evidence = json_object();
        snprintf(f->created_real, sizeof f->created_real, "%s",
                 json_string_value(json_object_get(rec, "created_real"))
                     ? json_string_value(json_object_get(rec, "created_real"))
                     : "");
        int64_t now = cx_mono_ms();
        f->started_mono_ms = f->ended_mono_ms = now;
        if (undo && !json_is_null(undo) && f->inj && f->inj->sweep) {
            inj_target t;
            memset(&t, 0, sizeof t);
            char serr[CX_ERRLEN] = "";
            /* A forged record must not make the sweep write or signal
             * outside what this agent owns. */
            int rc = r->hooks.sweep_check
                         ? r->hooks.sweep_check(r->hooks.ctx, f->type, undo, serr, sizeof serr)
                         : 0;
            if (rc < 0) {
                char why[CX_ERRLEN];
                snprintf(why, sizeof why, "%s", serr);
                snprintf(serr, sizeof serr, "sweep refused: %s", why);
            } else {
                rc = r->hooks.target_get(r->hooks.ctx, "unit", &t, serr, sizeof serr);
                if (rc == 0) {
                    rc = f->inj->sweep(undo, &t, serr, sizeof serr);
                    r->hooks.target_put(r->hooks.ctx, &t);
                }
            }
            json_object_set_new(f->evidence, "swept", json_boolean(rc == 0));
            if (rc < 0) {
                f->state = F_FAILED;
                f->error = strdup(serr);
                cx_error("sweep of fault %s (%s) failed: %s", f->id, f->type, serr);
            } else {
                cx_info("swept fault %s (%s) left by a previous agent", f->id, f->type);
            }
        } else {
            json_object_set_new(f->evidence, "swept", json_false());
            if (!f->inj)
                cx_warn("previous agent's fault %s has unknown type '%s': nothing to sweep", f->id, f->type);
        }
        reg_count(r->reverted_total, f->type, "agent_restart");
        reg_push_ended(r, f);
        (*nswept)++;
    }
    json_decref(root);
    int rc = reg_persist(r, NULL, err, errlen);
    pthread_mutex_unlock(&r->lock);
    return rc;
}
