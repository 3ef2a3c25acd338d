/* toxic.c - Toxiproxy toxic specs and the stages that apply them: the
 * registry of toxic kinds (one file each in toxics/), parsing, chunks and
 * the per-link chain. See toxic.h for the model (stages stamp ready times,
 * never sleep).
 */
#include "injectors/proxy/toxic.h"

#include "common/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- toxic: the kinds ---- */

/* One line per kind: X(name) for `const toxic_kind toxic_name` in
 * injectors/proxy/toxics/name.c. The order is the one error messages list. */
/* clang-format off */
#define TOXIC_KINDS(X) \
    X(latency)         \
    X(bandwidth)       \
    X(slow_close)      \
    X(timeout)         \
    X(reset_peer)      \
    X(slicer)          \
    X(limit_data)      \
    X(corrupt)         \
    X(noop)            \
    /* the list ends here: each line above ends with a backslash */
/* clang-format on */

#define TOXIC_DECLARE(name) extern const toxic_kind toxic_##name;
TOXIC_KINDS(TOXIC_DECLARE)

#define TOXIC_ENTRY(name) &toxic_##name,
static const toxic_kind *const toxic_kinds[] = {TOXIC_KINDS(TOXIC_ENTRY) NULL};

const toxic_kind *toxic_kind_find(const char *name)
{
    for (const toxic_kind *const *k = toxic_kinds; name && *k; k++)
        if (strcmp((*k)->name, name) == 0)
            return *k;
    return NULL;
}

const char *toxic_stream_name(toxic_stream s)
{
    return s == TOXIC_UPSTREAM ? "upstream" : "downstream";
}

/* ---- toxic: attributes ---- */

/* Index of key among k's attributes, or -1. */
static int attr_index(const toxic_kind *k, const char *key)
{
    for (int i = 0; k && k->attrs[i].key; i++)
        if (strcmp(k->attrs[i].key, key) == 0)
            return i;
    return -1;
}

int toxic_attr_known(const toxic_kind *k, const char *key)
{
    return attr_index(k, key) >= 0;
}

static int attr_range_error(const toxic_attr_def *d, double v, char *err, size_t errlen)
{
    if (d->min > 0 && v < d->min)
        return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be > 0 (got %g)", d->key, v);
    return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be in [%g, %g] (got %g)", d->key,
                   d->min, d->max, v);
}

/* Range-check every attribute of the kind (defaults included), then its
 * own cross-field rule. */
static int attrs_check(const toxic_kind *k, const toxic_attrs *a, char *err, size_t errlen)
{
    for (int i = 0; k->attrs[i].key; i++) {
        const toxic_attr_def *d = &k->attrs[i];
        if (a->v[i] < d->min || a->v[i] > d->max)
            return attr_range_error(d, a->v[i], err, errlen);
    }
    return k->check ? k->check(a, err, errlen) : CX_OK;
}

/* Decode attributes (object) into *a for kind k; range checks come later. */
static int attrs_decode(const toxic_kind *k, json_t *attrs, toxic_attrs *a, char *err, size_t errlen)
{
    if (!json_is_object(attrs))
        return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes: must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(attrs, key, v)
    {
        int i = attr_index(k, key);
        if (i < 0)
            return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: unknown attribute for type %s", key,
                           k->name);
        const toxic_attr_def *d = &k->attrs[i];
        if (!json_is_number(v))
            return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be a number", key);
        double x = json_number_value(v);
        if (!isfinite(x))
            return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be finite", key);
        if (!d->is_double) {
            if (json_is_real(v) && x != floor(x))
                return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be an integer (got %g)",
                               key, x);
            if (x < d->min || x > d->max)
                return attr_range_error(d, x, err, errlen);
        }
        a->v[i] = x;
    }
    return CX_OK;
}

static int toxicity_decode(json_t *v, double *out, char *err, size_t errlen)
{
    if (!json_is_number(v))
        return cx_fail(err, errlen, CX_EINVAL, "toxic.toxicity: must be a number");
    double x = json_number_value(v);
    if (!(x >= 0.0 && x <= 1.0))
        return cx_fail(err, errlen, CX_EINVAL, "toxic.toxicity: must be in [0, 1] (got %g)", x);
    *out = x;
    return CX_OK;
}

static int name_check(const char *s, char *err, size_t errlen)
{
    size_t n = strlen(s);
    if (n == 0 || n > TOXIC_NAME_MAX)
        return cx_fail(err, errlen, CX_EINVAL, "toxic.name: must be 1..%d characters", TOXIC_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.'))
            return cx_fail(err, errlen, CX_EINVAL, "toxic.name: '%s' has a character outside [A-Za-z0-9_.-]",
                           s);
    }
    return CX_OK;
}

static int stream_decode(json_t *v, toxic_stream *out, char *err, size_t errlen)
{
    const char *s = json_string_value(v);
    if (s && strcmp(s, "upstream") == 0)
        *out = TOXIC_UPSTREAM;
    else if (s && strcmp(s, "downstream") == 0)
        *out = TOXIC_DOWNSTREAM;
    else
        return cx_fail(err, errlen, CX_EINVAL, "toxic.stream: must be \"upstream\" or \"downstream\"");
    return CX_OK;
}

/* ---- toxic: parse, update, dump ---- */

int toxic_spec_parse(json_t *j, toxic_spec *out, char *err, size_t errlen)
{
    if (!json_is_object(j))
        return cx_fail(err, errlen, CX_EINVAL, "toxic: must be a JSON object");
    toxic_spec s;
    memset(&s, 0, sizeof s);
    s.stream = TOXIC_DOWNSTREAM;
    s.toxicity = 1.0;

    const char *key;
    json_t *v;
    json_object_foreach(j, key, v)
    {
        if (strcmp(key, "name") != 0 && strcmp(key, "type") != 0 && strcmp(key, "stream") != 0 &&
            strcmp(key, "toxicity") != 0 && strcmp(key, "attributes") != 0)
            return cx_fail(err, errlen, CX_EINVAL, "toxic: unknown key '%s'", key);
    }
    json_t *jt = json_object_get(j, "type");
    const char *type = json_string_value(jt);
    if (!type)
        return cx_fail(err, errlen, CX_EINVAL, "toxic.type: required string");
    s.kind = toxic_kind_find(type);
    if (!s.kind) {
        char known[256] = "";
        size_t used = 0;
        for (const toxic_kind *const *k = toxic_kinds; *k && used < sizeof known; k++) {
            int n = snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", (*k)->name);
            if (n < 0)
                break;
            used += (size_t)n;
        }
        return cx_fail(err, errlen, CX_EINVAL, "toxic.type: unknown type '%s' (known: %s)", type, known);
    }

    int rc;
    v = json_object_get(j, "stream");
    if (v && !json_is_null(v) && (rc = stream_decode(v, &s.stream, err, errlen)) != 0)
        return rc;
    v = json_object_get(j, "toxicity");
    if (v && !json_is_null(v) && (rc = toxicity_decode(v, &s.toxicity, err, errlen)) != 0)
        return rc;
    v = json_object_get(j, "attributes");
    if (v && !json_is_null(v) && (rc = attrs_decode(s.kind, v, &s.a, err, errlen)) != 0)
        return rc;
    if ((rc = attrs_check(s.kind, &s.a, err, errlen)) != 0)
        return rc;
    v = json_object_get(j, "name");
    if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0)) {
        if (!json_is_string(v))
            return cx_fail(err, errlen, CX_EINVAL, "toxic.name: must be a string");
        if ((rc = name_check(json_string_value(v), err, errlen)) != 0)
            return rc;
        snprintf(s.name, sizeof s.name, "%s", json_string_value(v));
    } else { /* Toxiproxy's default name */
        snprintf(s.name, sizeof s.name, "%s_%s", s.kind->name, toxic_stream_name(s.stream));
    }
    *out = s;
    return CX_OK;
}

int toxic_spec_update(toxic_spec *cur, json_t *body, char *err, size_t errlen)
{
    if (!json_is_object(body))
        return cx_fail(err, errlen, CX_EINVAL, "toxic: must be a JSON object");
    toxic_spec s = *cur;
    const char *key;
    json_t *v;
    int rc;
    json_object_foreach(body, key, v)
    {
        if (json_is_null(v))
            continue;
        if (strcmp(key, "name") == 0) {
            if (!json_is_string(v) || (json_string_length(v) && strcmp(json_string_value(v), s.name) != 0))
                return cx_fail(err, errlen, CX_EINVAL, "toxic.name: cannot be changed by an update");
        } else if (strcmp(key, "type") == 0) {
            if (!json_is_string(v) ||
                (json_string_length(v) && strcmp(json_string_value(v), s.kind->name) != 0))
                return cx_fail(err, errlen, CX_EINVAL, "toxic.type: cannot be changed by an update");
        } else if (strcmp(key, "stream") == 0) {
            toxic_stream st = s.stream;
            if (json_is_string(v) && json_string_length(v) == 0)
                continue;
            if ((rc = stream_decode(v, &st, err, errlen)) != 0)
                return rc;
            if (st != s.stream)
                return cx_fail(err, errlen, CX_EINVAL, "toxic.stream: cannot be changed by an update");
        } else if (strcmp(key, "toxicity") == 0) {
            if ((rc = toxicity_decode(v, &s.toxicity, err, errlen)) != 0)
                return rc;
        } else if (strcmp(key, "attributes") == 0) {
            if ((rc = attrs_decode(s.kind, v, &s.a, err, errlen)) != 0)
                return rc;
        } else {
            return cx_fail(err, errlen, CX_EINVAL, "toxic: unknown key '%s'", key);
        }
    }
    if ((rc = attrs_check(s.kind, &s.a, err, errlen)) != 0)
        return rc;
    *cur = s;
    return CX_OK;
}

json_t *toxic_spec_json(const toxic_spec *s)
{
    json_t *attrs = json_object();
    for (int i = 0; attrs && s->kind->attrs[i].key; i++) {
        const toxic_attr_def *d = &s->kind->attrs[i];
        double v = s->a.v[i];
        json_object_set_new(attrs, d->key, d->is_double ? json_real(v) : json_integer((json_int_t)v));
    }
    return json_pack("{s:s, s:s, s:s, s:f, s:o*}", "name", s->name, "type", s->kind->name, "stream",
                     toxic_stream_name(s->stream), "toxicity", s->toxicity, "attributes", attrs);
}

/* ---- chunks ---- */

chunk *chunk_new(chunk_kind kind, const void *data, size_t len, int64_t stamp_ns, int64_t ready_ns)
{
    chunk *c = malloc(sizeof *c + len);
    if (!c)
        return NULL;
    c->next = NULL;
    c->kind = kind;
    c->len = len;
    c->off = 0;
    c->stamp_ns = stamp_ns;
    c->ready_ns = ready_ns;
    if (data && len)
        memcpy(c->data, data, len);
    return c;
}

void chunk_list_push(chunk_list *l, chunk *c)
{
    c->next = NULL;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
    l->bytes += c->len - c->off;
}

chunk *chunk_list_pop(chunk_list *l)
{
    chunk *c = l->head;
    if (!c)
        return NULL;
    l->head = c->next;
    if (!l->head)
        l->tail = NULL;
    l->bytes -= c->len - c->off;
    c->next = NULL;
    return c;
}

void chunk_list_clear(chunk_list *l)
{
    chunk *c;
    while ((c = chunk_list_pop(l)))
        free(c);
}

/* ---- stages: randomness ---- */

uint64_t toxic_mix(uint64_t a, uint64_t b)
{
    uint64_t z = a ^ (b + UINT64_C(0x9e3779b97f4a7c15) + (a << 6) + (a >> 2));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

double toxic_rng_unit(toxic_inst *ti)
{
    return (double)(rng_next(&ti->rng) >> 11) * 0x1.0p-53;
}

int64_t toxic_rng_pm(toxic_inst *ti, int64_t r)
{
    if (r <= 0)
        return 0;
    return (int64_t)(rng_next(&ti->rng) % (uint64_t)(2 * r + 1)) - r;
}

/* ---- stages: per-link state ---- */

void toxic_inst_init(toxic_inst *ti, uint64_t id, const toxic_spec *s, uint64_t seed, uint64_t link_id,
                     int64_t now_ns, toxic_counters *ctr)
{
    memset(ti, 0, sizeof *ti);
    ti->id = id;
    ti->spec = *s;
    ti->ctr = ctr;
    uint64_t draw = toxic_mix(seed, link_id);
    double u = (double)(draw >> 11) * 0x1.0p-53;
    ti->applied = s->toxicity >= 1.0 || u < s->toxicity;
    if (ti->applied)
        TOXIC_CTR_ADD(ti, links_applied, 1);
    else
        TOXIC_CTR_ADD(ti, links_skipped, 1);
    ti->rng = toxic_mix(seed ^ UINT64_C(0x5851f42d4c957f2d), link_id * 2 + (uint64_t)s->stream);
    if (ti->applied && s->kind->start)
        s->kind->start(ti, NULL, now_ns);
}

void toxic_inst_update(toxic_inst *ti, const toxic_spec *s, int64_t now_ns)
{
    toxic_spec old = ti->spec;
    ti->spec = *s;
    if (ti->applied && s->kind->start)
        s->kind->start(ti, &old, now_ns);
}

/* ---- stages: helpers of the kinds ---- */

void toxic_pass(toxic_inst *ti, chunk *c, chunk_list *out)
{
    if (c->kind == CHUNK_DATA)
        TOXIC_CTR_ADD(ti, chunks, 1);
    chunk_list_push(out, c);
}

void toxic_drop(toxic_inst *ti, chunk *c)
{
    TOXIC_CTR_ADD(ti, bytes_dropped, c->len - c->off);
    free(c);
}

void toxic_delay_to(toxic_inst *ti, chunk *c, int64_t t)
{
    if (t > c->ready_ns) {
        TOXIC_CTR_ADD(ti, delayed_ns, t - c->ready_ns);
        c->ready_ns = t;
    }
}

bool toxic_split(toxic_inst *ti, chunk *c, chunk_list *out, size_t (*piece)(toxic_inst *ti),
                 int64_t (*ready)(toxic_inst *ti, chunk *p, int64_t i, int64_t base))
{
    chunk_list tmp = {0};
    size_t off = 0;
    int64_t base = c->ready_ns;
    int64_t i = 0;
    while (off < c->len) {
        size_t n = piece(ti);
        if (n > c->len - off)
            n = c->len - off;
        chunk *p = chunk_new(CHUNK_DATA, c->data + off, n, c->stamp_ns, base);
        if (!p) {
            chunk_list_clear(&tmp);
            return false;
        }
        toxic_delay_to(ti, p, ready(ti, p, i, base));
        chunk_list_push(&tmp, p);
        off += n;
        i++;
    }
    for (chunk *p; (p = chunk_list_pop(&tmp));) {
        TOXIC_CTR_ADD(ti, chunks, 1);
        chunk_list_push(out, p);
    }
    free(c);
    return true;
}

/* ---- stages: the chain ---- */

bool toxic_inst_run(toxic_inst *ti, chunk_list *in, chunk_list *out, int64_t now_ns)
{
    bool ok = true;
    for (chunk *c; (c = chunk_list_pop(in));) {
        if (!ti->applied) {
            chunk_list_push(out, c);
            continue;
        }
        if (c->kind == CHUNK_DATA)
            TOXIC_CTR_ADD(ti, bytes, c->len - c->off);
        if (ti->spec.kind->run) {
            if (!ti->spec.kind->run(ti, c, out, now_ns))
                ok = false;
        } else {
            toxic_pass(ti, c, out);
        }
    }
    return ok;
}
