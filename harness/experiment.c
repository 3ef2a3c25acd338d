/* experiment.c - load and strictly validate an experiment file (see
 * experiment.h). Every check reports into a jv_diag and keeps going, so the
 * user sees all problems of a file at once.
 *
 * This file holds the document (its top-level keys, declared once in
 * exp_file_params with param.h; the "ci" merge patch; load and free); the
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

/* ---- hypotheses ---- */

static void parse_hyps(experiment *e, const json_t *arr, const char *base, hyp_spec ***out, int *nout,
                       jv_diag *d)
{
    if (!arr)
        return;
    size_t n = json_array_size(arr);
    *out = calloc(n ? n : 1, sizeof(hyp_spec *));
    if (!*out)
        return;
    for (size_t i = 0; i < n; i++) {
        char p[JV_PATHLEN];
        jv_path_idx(p, sizeof(p), base, i);
        hyp_spec *s = hyp_spec_parse(json_array_get(arr, i), p, exp_learners_or_max(e), d);
        if (s)
            (*out)[(*nout)++] = s;
    }
}

/* ---- the document ---- */

/* The document's keys as param_decode hands them over (borrowed from the
 * document). */
typedef struct exp_doc {
    const char *schema, *title, *description;
    json_t *tags, *topology, *steady_state, *method, *chaos, *stop_conditions, *rollbacks, *verify, *ci,
        *horizon;
    int64_t seed;
} exp_doc;

static const param_def horizon_params[] = {
    {.name = "min_tokens",
     .type = PARAM_INT,
     .min = 1,
     .max = 9223372036854775807.0,
     .def_text = "learners x steps x batch (none with topology.trainer)",
     .what = "a token count",
     .doc = "tokens all learners train at least",
     .offset = PARAM_AT(experiment, min_tokens)},
    {.name = "min_merges",
     .type = PARAM_INT,
     .min = 1,
     .max = 100000000,
     .def_text = "none",
     .what = "a number of merges",
     .doc = "merges (outer steps) the syncer makes at least",
     .offset = PARAM_AT(experiment, min_merges)},
    {0},
};

#define DOC_MEMBER(key, t, sch, text)                                                                        \
    {                                                                                                        \
        .name = #key, .type = t, .schema = sch, .doc = text, .offset = PARAM_AT(exp_doc, key)                \
    }

/* In the order of the file's sections (the list of known keys in an
 * "unknown key" message). */
const param_def exp_file_params[] = {
    {.name = "$schema",
     .type = PARAM_STRING,
     .doc = "ignored (editor support)",
     .offset = PARAM_AT(exp_doc, schema)},
    {.name = "title",
     .type = PARAM_STRING,
     .flags = PARAM_REQUIRED | PARAM_NONEMPTY,
     .doc = "one line; the JUnit suite name",
     .offset = PARAM_AT(exp_doc, title)},
    {.name = "description",
     .type = PARAM_STRING,
     .doc = "free text",
     .offset = PARAM_AT(exp_doc, description)},
    DOC_MEMBER(tags, PARAM_ARRAY,
               "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"minLength\": 1}}",
               "free labels: non-empty strings"),
    {.name = "seed",
     .type = PARAM_INT,
     .flags = PARAM_INT64,
     .min = 0,
     .max = 9223372036854775807.0,
     .def = 1,
     .what = "a seed",
     .doc = "the run seed: target draws, chaos draws, fault seeds. `chaosloco run --seed` overrides it",
     .offset = PARAM_AT(exp_doc, seed)},
    {.name = "topology",
     .type = PARAM_OBJECT,
     .flags = PARAM_REQUIRED,
     .schema = "{\"$ref\": \"#/$defs/topology\"}",
     .doc = "what to launch or attach to (below)",
     .offset = PARAM_AT(exp_doc, topology)},
    DOC_MEMBER(
        steady_state, PARAM_ARRAY, "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/hypothesis\"}}",
        "hypotheses checked before the method starts; if one does not hold the run's status is `failed`"),
    DOC_MEMBER(method, PARAM_ARRAY, "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/action\"}}",
               "actions: timed faults (below)"),
    DOC_MEMBER(chaos, PARAM_OBJECT, "{\"$ref\": \"#/$defs/chaos\"}",
               "a seeded Poisson fault schedule (below)"),
    DOC_MEMBER(stop_conditions, PARAM_ARRAY,
               "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/stop_condition\"}}",
               "abort the run early (below)"),
    DOC_MEMBER(rollbacks, PARAM_ARRAY, "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/rollback\"}}",
               "what to undo after the method, whatever happened (below)"),
    DOC_MEMBER(verify, PARAM_ARRAY, "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/hypothesis\"}}",
               "hypotheses judged after the method; a failure makes the run `deviated` (exit 1)"),
    DOC_MEMBER(ci, PARAM_OBJECT, "{\"type\": \"object\"}",
               "a JSON merge patch (RFC 7386) applied to the file for the CI variant (below)"),
    {.name = "horizon",
     .type = PARAM_OBJECT,
     .fields = horizon_params,
     .doc = "how long a run lasts: it ends once every fault healed, every verify window closed, at least "
            "min_tokens were trained and at least min_merges merges happened (below)",
     .offset = PARAM_AT(exp_doc, horizon)},
    {0},
};

#undef DOC_MEMBER

static void parse_tags(experiment *e, const json_t *tags, jv_diag *d)
{
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

static void parse_doc(experiment *e, const json_t *doc, jv_diag *d)
{
    exp_doc f;
    if (param_decode(exp_file_params, NULL, doc, "$", 0, d, &f) < 0)
        return;
    if (f.title)
        e->title = strdup(f.title);
    e->description = strdup(f.description ? f.description : "");
    if (f.tags)
        parse_tags(e, f.tags, d);
    e->seed = (uint64_t)f.seed;

    exp_parse_topology(e, doc, f.topology, d);
    parse_hyps(e, f.steady_state, "$.steady_state", &e->steady_state, &e->nsteady, d);
    if (f.method)
        exp_parse_method(e, f.method, d);
    if (f.chaos)
        exp_parse_chaos(e, f.chaos, d);
    if (f.stop_conditions)
        exp_parse_stops(e, f.stop_conditions, d);
    if (f.rollbacks)
        exp_parse_rollbacks(e, f.rollbacks, d);
    parse_hyps(e, f.verify, "$.verify", &e->verify, &e->nverify, d);
    if (f.horizon)
        param_decode(horizon_params, NULL, f.horizon, "$.horizon", 0, d, e);
    if (!e->nmethod && !e->chaos.enabled && !e->nverify && !e->nsteady)
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
