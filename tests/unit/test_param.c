/* test_param.c - parameter declarations (harness/param.h): decoding with
 * defaults, "given" flags, enums and learner bounds, unknown keys, and the
 * text and schema the docs are generated from; the members of a document
 * (strings, objects, arrays). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/param.h"

typedef struct tp_params {
    double ratio;    /* number */
    int has_ratio;   /* ratio given */
    int64_t learner; /* learner id */
    int64_t live;    /* 1..learners */
    int mode;        /* enum index */
    int on;          /* bool */
    double wait_s;   /* seconds */
} tp_params;

static const char *const tp_modes[] = {"steps", "time", NULL};

static const param_def tp_def[] = {
    {.name = "ratio",
     .type = PARAM_NUMBER,
     .flags = PARAM_CAP,
     .min = 0,
     .max = 1e6,
     .def = 0.5,
     .what = "a ratio",
     .unit = "rel",
     .doc = "a ratio",
     .offset = PARAM_AT(tp_params, ratio),
     .set_at = PARAM_SET_AT(tp_params, has_ratio)},
    {.name = "learner",
     .type = PARAM_LEARNER,
     .def = -1,
     .def_text = "every learner",
     .offset = PARAM_AT(tp_params, learner)},
    {.name = "live",
     .type = PARAM_INT,
     .flags = PARAM_MAX_LEARNERS,
     .min = 1,
     .def = 0,
     .what = "a number of live learners",
     .offset = PARAM_AT(tp_params, live)},
    {.name = "mode", .type = PARAM_ENUM, .values = tp_modes, .def = 0, .offset = PARAM_AT(tp_params, mode)},
    {.name = "on", .type = PARAM_BOOL, .def = 1, .offset = PARAM_AT(tp_params, on)},
    {.name = "wait_s", .type = PARAM_SECONDS, .flags = PARAM_REQUIRED, .offset = PARAM_AT(tp_params, wait_s)},
    {0},
};

/* Decode text with 4 learners; the diag is returned (caller frees). */
static jv_diag *decode(const char *text, tp_params *p)
{
    json_t *o = json_loads(text, 0, NULL);
    cr_assert_not_null(o, "%s", text);
    jv_diag *d = jv_diag_new();
    static const char *const own[] = {"kind", NULL};
    memset(p, 0x5a, sizeof *p);
    cr_assert_eq(param_decode(tp_def, own, o, "$.x", 4, d, p), 0);
    json_decref(o);
    return d;
}

static int has_msg(const jv_diag *d, const char *want)
{
    for (size_t i = 0; i < jv_diag_kept(d); i++)
        if (strcmp(jv_diag_get(d, i), want) == 0)
            return 1;
    return 0;
}

Test(param, defaults_then_values)
{
    tp_params p;
    jv_diag *d = decode("{\"kind\": 1, \"wait_s\": 2}", &p);
    cr_assert_eq(jv_diag_count(d), 0, "%s", jv_diag_get(d, 0));
    cr_assert_eq(p.ratio, 0.5);
    cr_assert_eq(p.has_ratio, 0);
    cr_assert_eq(p.learner, -1);
    cr_assert_eq(p.live, 0);
    cr_assert_eq(p.mode, 0);
    cr_assert_eq(p.on, 1);
    cr_assert_eq(p.wait_s, 2.0);
    jv_diag_free(d);

    d = decode(
        "{\"wait_s\": 1, \"ratio\": 3, \"learner\": 3, \"live\": 4, \"mode\": \"time\", \"on\": false}", &p);
    cr_assert_eq(jv_diag_count(d), 0, "%s", jv_diag_get(d, 0));
    cr_assert_eq(p.ratio, 3.0);
    cr_assert_eq(p.has_ratio, 1);
    cr_assert_eq(p.learner, 3);
    cr_assert_eq(p.live, 4);
    cr_assert_eq(p.mode, 1);
    cr_assert_eq(p.on, 0);
    jv_diag_free(d);
}

Test(param, errors_are_jsonv_messages)
{
    tp_params p;
    jv_diag *d =
        decode("{\"ratio\": -1, \"learner\": 4, \"live\": 5, \"mode\": \"bytes\", \"on\": 1, \"x\": 0}", &p);
    cr_assert(has_msg(d, "$.x.ratio: expected a ratio in [0, 1e+06], got -1"));
    cr_assert(has_msg(d, "$.x.learner: expected a learner id in 0..3, got 4"));
    cr_assert(has_msg(d, "$.x.live: expected a number of live learners in 1..4, got 5"));
    cr_assert(has_msg(d, "$.x.mode: expected one of steps|time, got \"bytes\""));
    cr_assert(has_msg(d, "$.x.on: expected true or false, got 1"));
    cr_assert(has_msg(d, "$.x.wait_s: missing required key"));
    cr_assert(
        has_msg(d, "$.x.x: unknown key (expected one of: kind, ratio, learner, live, mode, on, wait_s)"));
    cr_assert_eq(jv_diag_count(d), 7);
    cr_assert_eq(p.has_ratio, 0, "an invalid value is not given");
    jv_diag_free(d);

    json_t *arr = json_array();
    d = jv_diag_new();
    cr_assert_eq(param_decode(tp_def, NULL, arr, "$.x", 4, d, &p), -1);
    cr_assert(has_msg(d, "$.x: expected an object, got an array"));
    jv_diag_free(d);
    json_decref(arr);
}

Test(param, text_and_line)
{
    char buf[256];
    param_text(&tp_def[0], buf, sizeof buf);
    cr_assert_str_eq(buf, "number 0..1e+06 rel, default 0.5");
    param_text(&tp_def[1], buf, sizeof buf);
    cr_assert_str_eq(buf, "learner id 0..learners-1, default every learner");
    param_text(&tp_def[2], buf, sizeof buf);
    cr_assert_str_eq(buf, "integer 1..learners, default 0");
    param_text(&tp_def[3], buf, sizeof buf);
    cr_assert_str_eq(buf, "\"steps\" | \"time\", default \"steps\"");
    param_text(&tp_def[5], buf, sizeof buf);
    cr_assert_str_eq(buf, "seconds 0.001..1e+07, required");
    param_line(tp_def, buf, sizeof buf);
    cr_assert_str_eq(buf, "ratio (rel, default 0.5), learner (id, default every learner), live (default 0), "
                          "mode (default \"steps\"), on (default true), wait_s (s, required)");
    param_line(NULL, buf, sizeof buf);
    cr_assert_str_eq(buf, "(none)");
}

/* The schema publishes the range as declared: caps left out, $refs for
 * seconds and learner ids, defaults only when documented. */
Test(param, schema)
{
    const char *want[] = {
        "{\"type\": \"number\", \"minimum\": 0, \"default\": 0.5, \"description\": \"a ratio\"}",
        "{\"$ref\": \"#/$defs/learner_id\"}",
        "{\"type\": \"integer\", \"minimum\": 1, \"default\": 0}",
        "{\"enum\": [\"steps\", \"time\"], \"default\": \"steps\"}",
        "{\"type\": \"boolean\", \"default\": true}",
        "{\"$ref\": \"#/$defs/seconds\"}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cx_buf b;
        cx_buf_init(&b, 4096);
        param_schema(&tp_def[i], &b);
        cr_assert_str_eq(b.data, want[i]);
        json_t *j = json_loads(b.data, 0, NULL);
        cr_assert_not_null(j, "not JSON: %s", b.data);
        json_decref(j);
        cx_buf_cleanup(&b);
    }
}

/* ---- members of a document: strings, objects, arrays ---- */

typedef struct td_doc {
    const char *title; /* non-empty, required */
    const char *note;  /* any string */
    json_t *box;       /* an object with fields */
    json_t *list;      /* an array */
    int64_t seed;      /* 0..INT64_MAX */
    int64_t n;         /* box.n */
} td_doc;

static const param_def td_box[] = {
    {.name = "n", .type = PARAM_INT, .min = 1, .max = 10, .def_text = "none", .offset = PARAM_AT(td_doc, n)},
    {0},
};

static const param_def td_def[] = {
    {.name = "title",
     .type = PARAM_STRING,
     .flags = PARAM_REQUIRED | PARAM_NONEMPTY,
     .offset = PARAM_AT(td_doc, title)},
    {.name = "note", .type = PARAM_STRING, .doc = "free", .offset = PARAM_AT(td_doc, note)},
    {.name = "box", .type = PARAM_OBJECT, .fields = td_box, .doc = "a box", .offset = PARAM_AT(td_doc, box)},
    {.name = "list",
     .type = PARAM_ARRAY,
     .schema = "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}}",
     .doc = "numbers",
     .offset = PARAM_AT(td_doc, list)},
    {.name = "seed",
     .type = PARAM_INT,
     .flags = PARAM_INT64,
     .min = 0,
     .max = 9223372036854775807.0,
     .def = 1,
     .offset = PARAM_AT(td_doc, seed)},
    {0},
};

static size_t td_decode(const char *text, td_doc *doc, char *first, size_t len)
{
    json_t *o = json_loads(text, 0, NULL);
    cr_assert_not_null(o, "%s", text);
    jv_diag *d = jv_diag_new();
    cr_assert_eq(param_decode(td_def, NULL, o, "$", 0, d, doc), 0);
    size_t n = jv_diag_count(d);
    snprintf(first, len, "%s", n ? jv_diag_get(d, 0) : "");
    jv_diag_free(d);
    json_decref(o); /* the borrowed members are not read after this */
    return n;
}

/* Strings are borrowed; objects and arrays are type-checked and handed
 * back; "" is refused where declared non-empty. */
Test(param, document_members)
{
    td_doc doc;
    char first[256];
    cr_assert_eq(td_decode("{\"title\": \"t\"}", &doc, first, sizeof first), 0);
    cr_assert_null(doc.note);
    cr_assert_null(doc.box);
    cr_assert_null(doc.list);
    cr_assert_eq(doc.seed, 1);
    cr_assert_eq(td_decode("{\"title\": \"\", \"box\": 1, \"list\": {}}", &doc, first, sizeof first), 3);
    cr_assert_str_eq(first, "$.title: expected a non-empty string, got \"\"");
    cr_assert_null(doc.title);
    cr_assert_eq(td_decode("{\"box\": {}}", &doc, first, sizeof first), 1);
    cr_assert_str_eq(first, "$.title: missing required key");
    cr_assert_eq(td_decode("{\"title\": \"t\", \"list\": 2}", &doc, first, sizeof first), 1);
    cr_assert_str_eq(first, "$.list: expected an array, got 2");
}

Test(param, document_schema_and_text)
{
    const char *want[] = {
        "{\"type\": \"string\", \"minLength\": 1}",
        "{\"type\": \"string\", \"description\": \"free\"}",
        "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {\"n\": {\"type\": "
        "\"integer\", \"minimum\": 1, \"maximum\": 10}}, \"description\": \"a box\"}",
        "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"description\": \"numbers\"}",
        "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9223372036854775807, \"default\": 1}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cx_buf b;
        cx_buf_init(&b, 4096);
        param_schema(&td_def[i], &b);
        cr_assert_str_eq(b.data, want[i]);
        cx_buf_cleanup(&b);
    }
    char buf[256];
    param_text(&td_def[0], buf, sizeof buf);
    cr_assert_str_eq(buf, "non-empty string, required");
    param_text(&td_def[2], buf, sizeof buf);
    cr_assert_str_eq(buf, "object, optional");
    param_line(td_box, buf, sizeof buf);
    cr_assert_str_eq(buf, "n (default none)");
}
