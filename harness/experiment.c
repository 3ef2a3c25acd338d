/* experiment.c - load and strictly validate an experiment file (see
 * experiment.h). Every check reports into a jv_diag and keeps going, so the
 * user sees all problems of a file at once.
 *
 * This file holds the document (its top-level keys, the "ci" merge patch,
 * load and free) and the helpers every part shares (exp_internal.h); the
 * parts live beside it: exp_topology.c (topology, training, attach,
 * trainer), exp_method.c (fault types, targets, method, chaos) and
 * exp_stops.c (stop conditions, rollbacks). */
#include "harness/experiment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/rng.h"
#include "harness/exp_internal.h"

/* ---- merge patch (RFC 7386) ---- */

json_t *exp_merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    if (!out)
        return NULL;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)patch, key, val)
    {
        if (json_is_null(val)) {
            json_object_del(out, key);
            continue;
        }
        json_t *merged = exp_merge_patch(json_object_get(out, key), val);
        if (!merged || json_object_set_new(out, key, merged) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* ---- small helpers ---- */

/* A value of JSON type want (named what: "an array") at path.key (0
 * absent, 1 ok, -1 wrong type). */
static int get_typed(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                     json_type want, const char *what, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    char p[JV_PATHLEN];
    jv_path_key(p, sizeof(p), path, key);
    if (!v) {
        if (required)
            jv_diag_add(d, p, "missing required key");
        return 0;
    }
    if (json_typeof(v) != want) {
        char got[64];
        jv_describe(got, sizeof(got), v);
        jv_diag_add(d, p, "expected %s, got %s", what, got);
        return -1;
    }
    *out = v;
    return 1;
}

/* An array at path.key (0 absent, 1 ok, -1 wrong type). */
int exp_get_array(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                  json_t **out)
{
    return get_typed(d, path, obj, key, required, JSON_ARRAY, "an array", out);
}

int exp_get_object(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                   json_t **out)
{
    return get_typed(d, path, obj, key, required, JSON_OBJECT, "an object", out);
}

int exp_nonempty_string(jv_diag *d, const char *path, const json_t *obj, const char *key, int required,
                        const char **out)
{
    int r = jv_get_string(d, path, obj, key, required, NULL, out);
    if (r == 1 && (*out)[0] == '\0') {
        char p[JV_PATHLEN];
        jv_path_key(p, sizeof(p), path, key);
        jv_diag_add(d, p, "expected a non-empty string, got \"\"");
        return -1;
    }
    return r;
}

/* ---- hypotheses ---- */

static void parse_hyps(experiment *e, const json_t *doc, const char *key, hyp_spec ***out, int *nout,
                       jv_diag *d)
{
    json_t *arr = NULL;
    if (exp_get_array(d, "$", doc, key, 0, &arr) != 1)
        return;
    size_t n = json_array_size(arr);
    *out = calloc(n ? n : 1, sizeof(hyp_spec *));
    if (!*out)
        return;
    char base[JV_PATHLEN];
    jv_path_key(base, sizeof(base), "$", key);
    for (size_t i = 0; i < n; i++) {
        char p[JV_PATHLEN];
        jv_path_idx(p, sizeof(p), base, i);
        hyp_spec *s = hyp_spec_parse(json_array_get(arr, i), p, exp_learners_or_max(e), d);
        if (s)
            (*out)[(*nout)++] = s;
    }
}

/* ---- the document ---- */

static void parse_doc(experiment *e, const json_t *doc, jv_diag *d)
{
    static const char *const keys[] = {
        "$schema",   "title",        "description", "tags",    "seed",
        "topology",  "steady_state", "method",      "chaos",   "stop_conditions",
        "rollbacks", "verify",       "ci",          "horizon", NULL};
    if (jv_check_keys(d, "$", doc, keys) < 0)
        return;
    const char *s;
    jv_get_string(d, "$", doc, "$schema", 0, NULL, &s);
    if (exp_nonempty_string(d, "$", doc, "title", 1, &s) == 1)
        e->title = strdup(s);
    e->description = strdup("");
    if (jv_get_string(d, "$", doc, "description", 0, NULL, &s) == 1) {
        free(e->description);
        e->description = strdup(s);
    }
    json_t *tags = NULL;
    if (exp_get_array(d, "$", doc, "tags", 0, &tags) == 1) {
        e->tags = calloc(json_array_size(tags) + 1, sizeof(char *));
        for (size_t i = 0; i < json_array_size(tags) && e->tags; i++) {
            json_t *t = json_array_get(tags, i);
            if (!json_is_string(t) || !json_string_length(t)) {
                char p[JV_PATHLEN], got[64];
                jv_path_idx(p, sizeof(p), "$.tags", i);
                jv_describe(got, sizeof(got), t);
                jv_diag_add(d, p, "expected a non-empty string, got %s", got);
                continue;
            }
            e->tags[e->ntags++] = strdup(json_string_value(t));
        }
    }
    int64_t seed = 1;
    jv_get_int(d, "$", doc, "seed", 0, 0, INT64_MAX, "a seed", &seed);
    e->seed = (uint64_t)seed;
    json_t *ci = NULL;
    exp_get_object(d, "$", doc, "ci", 0, &ci);

    exp_parse_topology(e, doc, d);
    parse_hyps(e, doc, "steady_state", &e->steady_state, &e->nsteady, d);

    /* the optional sections with a parser of their own, in file order */
    static const struct {
        const char *key;
        int is_array;
        void (*parse)(experiment *, const json_t *, jv_diag *);
    } sections[] = {{"method", 1, exp_parse_method},
                    {"chaos", 0, exp_parse_chaos},
                    {"stop_conditions", 1, exp_parse_stops},
                    {"rollbacks", 1, exp_parse_rollbacks}};
    for (size_t k = 0; k < sizeof sections / sizeof sections[0]; k++) {
        json_t *v = NULL;
        int got = sections[k].is_array ? exp_get_array(d, "$", doc, sections[k].key, 0, &v)
                                       : exp_get_object(d, "$", doc, sections[k].key, 0, &v);
        if (got == 1)
            sections[k].parse(e, v, d);
    }
    parse_hyps(e, doc, "verify", &e->verify, &e->nverify, d);
    json_t *hz = NULL;
    if (exp_get_object(d, "$", doc, "horizon", 0, &hz) == 1) {
        static const char *const hkeys[] = {"min_tokens", "min_merges", NULL};
        if (jv_check_keys(d, "$.horizon", hz, hkeys) == 0) {
            jv_get_int(d, "$.horizon", hz, "min_tokens", 0, 1, INT64_MAX, "a token count", &e->min_tokens);
            jv_get_int(d, "$.horizon", hz, "min_merges", 0, 1, 100000000, "a number of merges",
                       &e->min_merges);
        }
    }
    if (!e->nmethod && !e->chaos.enabled && !e->nverify && !e->nsteady && json_is_object(doc))
        jv_diag_add(d, "$", "expected at least one of method, chaos, steady_state, verify, got none");
}

int exp_parse(const json_t *doc, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen)
{
    *out = NULL;
    jv_diag *own = d ? NULL : jv_diag_new();
    jv_diag *dd = d ? d : own;
    if (!dd)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    size_t before = jv_diag_count(dd);
    json_t *use = NULL;
    const char *prefix = "";
    jv_diag *tmp = jv_diag_new();
    if (!tmp) {
        jv_diag_free(own);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    json_t *ci = json_is_object(doc) ? json_object_get(doc, "ci") : NULL;
    if ((flags & EXP_CI) && json_is_object(ci)) {
        json_t *base = json_deep_copy(doc);
        if (base)
            json_object_del(base, "ci");
        use = base ? exp_merge_patch(base, ci) : NULL;
        json_decref(base);
        prefix = "[ci] ";
    } else {
        use = json_incref((json_t *)doc);
    }
    experiment *e = calloc(1, sizeof(*e));
    if (!use || !e) {
        json_decref(use);
        free(e);
        jv_diag_free(tmp);
        jv_diag_free(own);
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    }
    parse_doc(e, use, tmp);
    jv_diag_merge(dd, tmp, prefix);
    jv_diag_free(tmp);
    e->doc = use;
    size_t nerr = jv_diag_count(dd) - before;
    if (nerr) {
        int rc = cx_fail(err, errlen, CX_EINVAL, "%zu error%s, first: %s", nerr, nerr == 1 ? "" : "s",
                         jv_diag_get(dd, before));
        exp_free(e);
        jv_diag_free(own);
        return rc;
    }
    jv_diag_free(own);
    *out = e;
    return 0;
}

static int load_common(json_t *doc, const json_error_t *je, const char *name, unsigned flags,
                       experiment **out, jv_diag *d, char *err, size_t errlen)
{
    *out = NULL;
    if (!doc) {
        char where[JV_PATHLEN];
        if (je->line > 0) /* -1 when the file could not be read at all */
            snprintf(where, sizeof(where), "%s:%d:%d", name, je->line, je->column);
        else
            snprintf(where, sizeof(where), "%s", name);
        jv_diag_add(d, where, "%s", je->text);
        return cx_fail(err, errlen, CX_EINVAL, "%s: %s", where, je->text);
    }
    int rc = exp_parse(doc, flags, out, d, err, errlen);
    json_decref(doc);
    return rc;
}

int exp_load(const char *path, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    return load_common(doc, &je, path, flags, out, d, err, errlen);
}

int exp_load_string(const char *text, unsigned flags, experiment **out, jv_diag *d, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    return load_common(doc, &je, "<string>", flags, out, d, err, errlen);
}

/* ---- lifetime and lookups ---- */

static void free_strv(char **v, int n)
{
    if (!v)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void exp_free(experiment *e)
{
    if (!e)
        return;
    free(e->title);
    free(e->description);
    free_strv(e->tags, e->ntags);
    json_decref(e->training);
    free(e->mode);
    free(e->attach_syncer);
    free_strv(e->attach_agents, e->nattach_agents);
    free(e->attach_token_file);
    free_strv(e->attach_agent_token_files, e->nattach_agents);
    free(e->attach_ca_file);
    free(e->attach_syncer_credential_file);
    if (e->trainer) {
        free_strv(e->trainer->coordinator, e->trainer->ncoordinator);
        free_strv(e->trainer->learner, e->trainer->nlearner);
        free(e->trainer->cwd);
        free(e->trainer->events_file);
        free(e->trainer);
    }
    for (int i = 0; i < e->nsteady; i++)
        hyp_spec_free(e->steady_state[i]);
    free(e->steady_state);
    for (int i = 0; i < e->nmethod; i++) {
        free(e->method[i].name);
        free(e->method[i].fault);
        free(e->method[i].targets.ids);
        json_decref(e->method[i].params);
    }
    free(e->method);
    for (int i = 0; i < e->chaos.nfaults; i++) {
        free(e->chaos.faults[i].type);
        json_decref(e->chaos.faults[i].params);
    }
    free(e->chaos.faults);
    for (int i = 0; i < e->nrollbacks; i++) {
        free(e->rollbacks[i].name);
        free(e->rollbacks[i].targets.ids);
    }
    free(e->rollbacks);
    for (int i = 0; i < e->nverify; i++)
        hyp_spec_free(e->verify[i]);
    free(e->verify);
    json_decref(e->doc);
    free(e);
}

uint64_t exp_action_seed(uint64_t run_seed, int idx)
{
    return cx_seed_derive(run_seed, 1000 + (uint64_t)idx) & INT64_MAX; /* JSON integers are int64 */
}

int exp_action_index(const experiment *e, const char *name)
{
    for (int i = 0; name && i < e->nmethod; i++)
        if (e->method[i].name && strcmp(e->method[i].name, name) == 0)
            return i;
    return -1;
}
