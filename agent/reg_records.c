/* reg_records.c - a fault's record as JSON, the counters, the lookups, and
 * the registry's read-only queries (reg_get, reg_list, reg_active,
 * reg_counters, reg_find_tag). The lifecycle that changes records is in
 * registry.c; what both share is in reg_internal.h.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/reg_internal.h"
#include "agent/registry.h"
#include "common/clock.h"
#include "common/err.h"

const char *reg_state_name(fault_state s)
{
    switch (s) {
    case F_ACTIVE:
        return "active";
    case F_REVERTED:
        return "reverted";
    case F_FAILED:
        return "failed";
    case F_EXPIRED:
        return "expired";
    }
    return "unknown";
}

void reg_fault_free(fault *f)
{
    if (!f)
        return;
    if (f->ctx && f->inj && f->inj->free)
        f->inj->free(f->ctx);
    free(f->type);
    free(f->target);
    free(f->origin);
    free(f->tag);
    free(f->error);
    json_decref(f->params);
    json_decref(f->evidence);
    json_decref(f->undo);
    free(f);
}

json_t *reg_fault_json(const fault *f, int64_t now)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "id", json_string(f->id));
    json_object_set_new(o, "type", json_string(f->type));
    json_object_set_new(o, "target", json_string(f->target));
    json_object_set_new(o, "params", f->params ? json_deep_copy(f->params) : json_object());
    json_object_set_new(o, "duration_ms", f->duration_ms > 0 ? json_integer(f->duration_ms) : json_null());
    json_object_set_new(o, "toxicity", f->has_toxicity ? json_real(f->toxicity) : json_null());
    json_object_set_new(o, "seed", json_integer((json_int_t)(f->seed & INT64_MAX)));
    json_object_set_new(o, "state", json_string(reg_state_name(f->state)));
    json_object_set_new(o, "created_real", json_string(f->created_real));
    json_object_set_new(o, "started_mono_ms", json_integer(f->started_mono_ms));
    json_object_set_new(o, "ended_mono_ms",
                        f->state == F_ACTIVE ? json_null() : json_integer(f->ended_mono_ms));
    json_object_set_new(o, "expires_in_ms",
                        f->state == F_ACTIVE && f->duration_ms > 0
                            ? json_integer(f->expires_mono_ms > now ? f->expires_mono_ms - now : 0)
                            : json_null());
    json_object_set_new(o, "evidence", f->evidence ? json_deep_copy(f->evidence) : json_object());
    json_object_set_new(o, "revert_reason", f->revert_reason ? json_string(f->revert_reason) : json_null());
    json_object_set_new(o, "error", f->error ? json_string(f->error) : json_null());
    json_object_set_new(o, "lease", json_boolean(f->lease));
    json_object_set_new(o, "origin", json_string(f->origin ? f->origin : "api"));
    return o;
}

void reg_count(json_t *map, const char *a, const char *b)
{
    char key[128];
    snprintf(key, sizeof key, "%s|%s", a, b);
    json_t *v = json_object_get(map, key);
    json_object_set_new(map, key, json_integer(v ? json_integer_value(v) + 1 : 1));
}

fault *reg_find_active(reg *r, const char *id)
{
    for (fault *f = r->active; f; f = f->next)
        if (strcmp(f->id, id) == 0)
            return f;
    return NULL;
}

fault *reg_find_ended(reg *r, const char *id)
{
    for (fault *f = r->ended; f; f = f->next)
        if (strcmp(f->id, id) == 0)
            return f;
    return NULL;
}

/* ---- registry: queries ---- */

int reg_get(reg *r, const char *id, json_t **out)
{
    pthread_mutex_lock(&r->lock);
    fault *f = reg_find_active(r, id);
    if (!f)
        f = reg_find_ended(r, id);
    *out = f ? reg_fault_json(f, cx_mono_ms()) : NULL;
    pthread_mutex_unlock(&r->lock);
    return f ? 0 : CX_ENOTFOUND;
}

json_t *reg_list(reg *r)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&r->lock);
    int64_t now = cx_mono_ms();
    for (fault *f = r->active; f; f = f->next)
        json_array_append_new(arr, reg_fault_json(f, now));
    for (fault *f = r->ended; f; f = f->next)
        json_array_append_new(arr, reg_fault_json(f, now));
    pthread_mutex_unlock(&r->lock);
    return arr;
}

int reg_active(reg *r, const char *type)
{
    int n = 0;
    pthread_mutex_lock(&r->lock);
    for (fault *f = r->active; f; f = f->next)
        if (!type || strcmp(f->type, type) == 0)
            n++;
    pthread_mutex_unlock(&r->lock);
    return n;
}

json_t *reg_counters(reg *r)
{
    pthread_mutex_lock(&r->lock);
    json_t *o = json_pack("{s:O,s:O}", "faults_total", r->faults_total, "reverted_total", r->reverted_total);
    json_t *copy = json_deep_copy(o);
    json_decref(o);
    pthread_mutex_unlock(&r->lock);
    return copy;
}

int reg_find_tag(reg *r, const char *tag, char *id, size_t idlen)
{
    int rc = CX_ENOTFOUND;
    pthread_mutex_lock(&r->lock);
    for (fault *f = r->active; f; f = f->next)
        if (f->tag && strcmp(f->tag, tag) == 0) {
            snprintf(id, idlen, "%s", f->id);
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&r->lock);
    return rc;
}
