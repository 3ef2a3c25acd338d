/* toxic.c - Toxiproxy toxic specs and the stages that apply them.
 * See toxic.h for the model (stages stamp ready times, never sleep).
 */
#include "injectors/proxy/toxic.h"

#include "common/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOXIC_MS_MAX INT64_C(86400000) /* one day: cap for every ms attribute */

#define CTR_ADD(ti, field, v) __atomic_fetch_add(&(ti)->ctr->field, (uint64_t)(v), __ATOMIC_RELAXED)

/* ---- toxic: names ---- */

static const char *const toxic_type_names[TOXIC_NTYPES] = {
    [TOXIC_NOOP] = "noop",           [TOXIC_LATENCY] = "latency",
    [TOXIC_BANDWIDTH] = "bandwidth", [TOXIC_SLOW_CLOSE] = "slow_close",
    [TOXIC_TIMEOUT] = "timeout",     [TOXIC_RESET_PEER] = "reset_peer",
    [TOXIC_SLICER] = "slicer",       [TOXIC_LIMIT_DATA] = "limit_data",
    [TOXIC_CORRUPT] = "corrupt",
};

const char *toxic_type_name(toxic_type t)
{
    return (unsigned)t < TOXIC_NTYPES ? toxic_type_names[t] : "?";
}

const char *toxic_stream_name(toxic_stream s)
{
    return s == TOXIC_UPSTREAM ? "upstream" : "downstream";
}

/* ---- toxic: attribute table ---- */

typedef struct attr_def {
    toxic_type type;
    const char *key; /* Toxiproxy attribute name */
    size_t off;      /* offsetof(toxic_attrs, ...) */
    bool is_double;  /* else int64 */
    double min, max; /* inclusive range */
} attr_def;

#define A_I(t, k, f, lo, hi)                                                                                 \
    {                                                                                                        \
        t, k, offsetof(toxic_attrs, f), false, (double)(lo), (double)(hi)                                    \
    }
static const attr_def attr_defs[] = {
    A_I(TOXIC_LATENCY, "latency", latency_ms, 0, TOXIC_MS_MAX),
    A_I(TOXIC_LATENCY, "jitter", jitter_ms, 0, TOXIC_MS_MAX),
    A_I(TOXIC_BANDWIDTH, "rate", rate_kbps, 1, INT64_C(1000000000)),
    A_I(TOXIC_SLOW_CLOSE, "delay", close_delay_ms, 0, TOXIC_MS_MAX),
    A_I(TOXIC_TIMEOUT, "timeout", timeout_ms, 0, TOXIC_MS_MAX),
    A_I(TOXIC_RESET_PEER, "timeout", timeout_ms, 0, TOXIC_MS_MAX),
    A_I(TOXIC_SLICER, "average_size", average_size, 1, 1 << 20),
    A_I(TOXIC_SLICER, "size_variation", size_variation, 0, 1 << 20),
    A_I(TOXIC_SLICER, "delay", slice_delay_us, 0, INT64_C(1000000000)),
    A_I(TOXIC_LIMIT_DATA, "bytes", limit_bytes, 0, INT64_C(1) << 50),
    {TOXIC_CORRUPT, "probability", offsetof(toxic_attrs, probability), true, 0.0, 1.0},
};
#define N_ATTR_DEFS (sizeof attr_defs / sizeof attr_defs[0])

static const attr_def *attr_find(toxic_type t, const char *key)
{
    for (size_t i = 0; i < N_ATTR_DEFS; i++)
        if (attr_defs[i].type == t && strcmp(attr_defs[i].key, key) == 0)
            return &attr_defs[i];
    return NULL;
}

int toxic_attr_known(toxic_type t, const char *key)
{
    return attr_find(t, key) != NULL;
}

int toxic_type_from_name(const char *name)
{
    for (int i = 0; name && i < TOXIC_NTYPES; i++)
        if (strcmp(name, toxic_type_names[i]) == 0)
            return i;
    return -1;
}

static double attr_get(const toxic_attrs *a, const attr_def *d)
{
    const char *base = (const char *)a + d->off;
    if (d->is_double)
        return *(const double *)(const void *)base;
    return (double)*(const int64_t *)(const void *)base;
}

/* Range-check every attribute of the type (defaults included) and the one
 * cross-field rule. */
static int attrs_check(toxic_type t, const toxic_attrs *a, char *err, size_t errlen)
{
    for (size_t i = 0; i < N_ATTR_DEFS; i++) {
        const attr_def *d = &attr_defs[i];
        if (d->type != t)
            continue;
        double v = attr_get(a, d);
        if (v < d->min || v > d->max) {
            if (d->min > 0 && v < d->min)
                return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be > 0 (got %g)", d->key,
                               v);
            return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be in [%g, %g] (got %g)",
                           d->key, d->min, d->max, v);
        }
    }
    if (t == TOXIC_SLICER && a->size_variation >= a->average_size)
        return cx_fail(err, errlen, CX_EINVAL,
                       "toxic.attributes.size_variation: must be < average_size (%lld) (got %lld)",
                       (long long)a->average_size, (long long)a->size_variation);
    return CX_OK;
}

/* Decode attributes (object) into *a for type t; range checks come later. */
static int attrs_decode(toxic_type t, json_t *attrs, toxic_attrs *a, char *err, size_t errlen)
{
    if (!json_is_object(attrs))
        return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes: must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(attrs, key, v)
    {
        const attr_def *d = attr_find(t, key);
        if (!d)
            return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: unknown attribute for type %s", key,
                           toxic_type_name(t));
        if (!json_is_number(v))
            return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be a number", key);
        double x = json_number_value(v);
        if (!isfinite(x))
            return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be finite", key);
        char *base = (char *)a + d->off;
        if (d->is_double) {
            *(double *)(void *)base = x;
        } else {
            if (json_is_real(v) && x != floor(x))
                return cx_fail(err, errlen, CX_EINVAL, "toxic.attributes.%s: must be an integer (got %g)",
                               key, x);
            if (x < d->min || x > d->max) /* check before the cast can overflow */
                return d->min > 0 && x < d->min ? cx_fail(err, errlen, CX_EINVAL,
                                                          "toxic.attributes.%s: must be > 0 (got %g)", key, x)
                                                : cx_fail(err, errlen, CX_EINVAL,
                                                          "toxic.attributes.%s: must be in [%g, %g] (got %g)",
                                                          key, d->min, d->max, x);
            *(int64_t *)(void *)base = json_is_integer(v) ? (int64_t)json_integer_value(v) : (int64_t)x;
        }
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
    int t = toxic_type_from_name(type);
    if (t < 0)
        return cx_fail(err, errlen, CX_EINVAL,
                       "toxic.type: unknown type '%s' (known: latency, bandwidth, slow_close, timeout, "
                       "reset_peer, slicer, limit_data, corrupt, noop)",
                       type);
    s.type = (toxic_type)t;

    int rc;
    v = json_object_get(j, "stream");
    if (v && !json_is_null(v) && (rc = stream_decode(v, &s.stream, err, errlen)) != 0)
        return rc;
    v = json_object_get(j, "toxicity");
    if (v && !json_is_null(v) && (rc = toxicity_decode(v, &s.toxicity, err, errlen)) != 0)
        return rc;
    v = json_object_get(j, "attributes");
    if (v && !json_is_null(v) && (rc = attrs_decode(s.type, v, &s.a, err, errlen)) != 0)
        return rc;
    if ((rc = attrs_check(s.type, &s.a, err, errlen)) != 0)
        return rc;
    v = json_object_get(j, "name");
    if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0)) {
        if (!json_is_string(v))
            return cx_fail(err, errlen, CX_EINVAL, "toxic.name: must be a string");
        if ((rc = name_check(json_string_value(v), err, errlen)) != 0)
            return rc;
        snprintf(s.name, sizeof s.name, "%s", json_string_value(v));
    } else { /* Toxiproxy's default name */
        snprintf(s.name, sizeof s.name, "%s_%s", toxic_type_name(s.type), toxic_stream_name(s.stream));
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
                (json_string_length(v) && strcmp(json_string_value(v), toxic_type_name(s.type)) != 0))
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
            if ((rc = attrs_decode(s.type, v, &s.a, err, errlen)) != 0)
                return rc;
        } else {
            return cx_fail(err, errlen, CX_EINVAL, "toxic: unknown key '%s'", key);
        }
    }
    if ((rc = attrs_check(s.type, &s.a, err, errlen)) != 0)
        return rc;
    *cur = s;
    return CX_OK;
}

json_t *toxic_spec_json(const toxic_spec *s)
{
    json_t *attrs = json_object();
    for (size_t i = 0; attrs && i < N_ATTR_DEFS; i++) {
        const attr_def *d = &attr_defs[i];
        if (d->type != s->type)
            continue;
        double v = attr_get(&s->a, d);
        json_object_set_new(attrs, d->key, d->is_double ? json_real(v) : json_integer((json_int_t)v));
    }
    return json_pack("{s:s, s:s, s:s, s:f, s:o*}", "name", s->name, "type", toxic_type_name(s->type),
                     "stream", toxic_stream_name(s->stream), "toxicity", s->toxicity, "attributes", attrs);
}

/* ---- chunks ---- */

chunk *chunk_new(chunk_kind kind, const void *data, size_t len, int64_t arrival_ns, int64_t ready_ns)
{
    chunk *c = malloc(sizeof *c + len);
    if (!c)
        return NULL;
    c->next = NULL;
    c->kind = kind;
    c->len = len;
    c->off = 0;
    c->arrival_ns = arrival_ns;
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

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [-r, r]. */
static int64_t rng_pm(uint64_t *s, int64_t r)
{
    if (r <= 0)
        return 0;
    return (int64_t)(rng_next(s) % (uint64_t)(2 * r + 1)) - r;
}

/* Bits to skip before the next flip: geometric with success probability p,
 * so that flips are independent per bit whatever the chunking. */
static uint64_t corrupt_gap(uint64_t *s, double p)
{
    if (p <= 0.0)
        return UINT64_MAX / 2;
    if (p >= 1.0)
        return 0;
    double u = 1.0 - rng_unit(s); /* (0, 1] */
    double g = floor(log(u) / log1p(-p));
    if (!(g < 1e18))
        return UINT64_MAX / 2;
    return (uint64_t)g;
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
        CTR_ADD(ti, links_applied, 1);
    else
        CTR_ADD(ti, links_skipped, 1);
    ti->rng = toxic_mix(seed ^ UINT64_C(0x5851f42d4c957f2d), link_id * 2 + (uint64_t)s->stream);
    toxic_inst_update(ti, s, now_ns);
    ti->next_flip = corrupt_gap(&ti->rng, s->a.probability);
}

void toxic_inst_update(toxic_inst *ti, const toxic_spec *s, int64_t now_ns)
{
    bool prob_changed = ti->spec.a.probability != s->a.probability;
    ti->spec = *s;
    if (!ti->applied)
        return;
    if (s->type == TOXIC_TIMEOUT) {
        ti->timer = s->a.timeout_ms > 0 ? TOXIC_TIMER_CLOSE : TOXIC_TIMER_NONE;
        ti->timer_ns = now_ns + s->a.timeout_ms * 1000000;
    }
    if (s->type == TOXIC_CORRUPT && prob_changed)
        ti->next_flip = ti->bit_pos + corrupt_gap(&ti->rng, s->a.probability);
}

/* ---- stages: the toxics ---- */

static void delay_to(toxic_inst *ti, chunk *c, int64_t t)
{
    if (t > c->ready_ns) {
        CTR_ADD(ti, delayed_ns, t - c->ready_ns);
        c->ready_ns = t;
    }
}

/* Cut c into pieces of the given sizes (sizes sum to c->len), appended to
 * out; each piece's ready time is set by the caller through the callback
 * state. Returns false (c untouched) on allocation failure. */
static bool split_push(chunk_list *out, chunk *c, size_t piece_max, toxic_inst *ti, int mode)
{
    /* mode 0: bandwidth (piece_max fixed); mode 1: slicer (random sizes). */
    chunk_list tmp = {0};
    size_t off = 0;
    int64_t base = c->ready_ns;
    int64_t i = 0;
    while (off < c->len) {
        size_t n = piece_max;
        if (mode == 1) {
            int64_t sz = ti->spec.a.average_size + rng_pm(&ti->rng, ti->spec.a.size_variation);
            n = sz < 1 ? 1 : (size_t)sz;
        }
        if (n > c->len - off)
            n = c->len - off;
        chunk *p = chunk_new(CHUNK_DATA, c->data + off, n, c->arrival_ns, base);
        if (!p) {
            chunk_list_clear(&tmp);
            return false;
        }
        if (mode == 0) {
            int64_t start = p->ready_ns > ti->next_free_ns ? p->ready_ns : ti->next_free_ns;
            ti->next_free_ns = start + (int64_t)n * 1000000 / ti->spec.a.rate_kbps;
            delay_to(ti, p, ti->next_free_ns);
        } else {
            delay_to(ti, p, base + i * ti->spec.a.slice_delay_us * 1000);
        }
        chunk_list_push(&tmp, p);
        off += n;
        i++;
    }
    for (chunk *p; (p = chunk_list_pop(&tmp));) {
        CTR_ADD(ti, chunks, 1);
        chunk_list_push(out, p);
    }
    free(c);
    return true;
}

static void drop(toxic_inst *ti, chunk *c)
{
    CTR_ADD(ti, bytes_dropped, c->len - c->off);
    free(c);
}

bool toxic_inst_run(toxic_inst *ti, chunk_list *in, chunk_list *out, int64_t now_ns)
{
    bool ok = true;
    const toxic_attrs *a = &ti->spec.a;
    for (chunk *c; (c = chunk_list_pop(in));) {
        if (!ti->applied) {
            chunk_list_push(out, c);
            continue;
        }
        if (c->kind == CHUNK_DATA)
            CTR_ADD(ti, bytes, c->len - c->off);
        switch (ti->spec.type) {
        case TOXIC_NOOP:
            break;
        case TOXIC_LATENCY:
            if (c->kind == CHUNK_DATA) {
                int64_t d_ms = a->latency_ms + rng_pm(&ti->rng, a->jitter_ms);
                delay_to(ti, c, c->arrival_ns + (d_ms > 0 ? d_ms : 0) * 1000000);
            }
            break;
        case TOXIC_BANDWIDTH:
            if (c->kind == CHUNK_DATA) {
                /* pieces of at most 100 ms of wire time, as Toxiproxy does */
                int64_t piece = a->rate_kbps * 100;
                if (!split_push(out, c, (size_t)(piece > 0 ? piece : 1), ti, 0))
                    ok = false, chunk_list_push(out, c);
                continue;
            }
            break;
        case TOXIC_SLOW_CLOSE:
            if (c->kind == CHUNK_EOF) {
                delay_to(ti, c, c->ready_ns + a->close_delay_ms * 1000000);
                CTR_ADD(ti, closes, 1);
            }
            break;
        case TOXIC_TIMEOUT:
            if (c->kind == CHUNK_DATA) {
                drop(ti, c);
                continue;
            }
            break;
        case TOXIC_RESET_PEER:
            /* Toxiproxy: the first input (data or EOF) arms the reset;
             * everything from then on is swallowed. */
            if (c->kind != CHUNK_CLOSE) {
                if (!ti->tripped) {
                    ti->tripped = true;
                    ti->timer = TOXIC_TIMER_RESET;
                    ti->timer_ns = now_ns + a->timeout_ms * 1000000;
                }
                drop(ti, c);
                continue;
            }
            break;
        case TOXIC_SLICER:
            if (c->kind == CHUNK_DATA) {
                if (!split_push(out, c, 0, ti, 1))
                    ok = false, chunk_list_push(out, c);
                continue;
            }
            break;
        case TOXIC_LIMIT_DATA:
            if (c->kind == CHUNK_DATA) {
                if (ti->tripped) {
                    drop(ti, c);
                    continue;
                }
                uint64_t room = (uint64_t)a->limit_bytes - ti->passed;
                size_t n = c->len - c->off;
                if (n < room) {
                    ti->passed += n;
                    break;
                }
                /* reaching the limit: deliver the allowed prefix, then end the link */
                chunk *close = chunk_new(CHUNK_CLOSE, NULL, 0, c->arrival_ns, c->ready_ns);
                if (!close) {
                    ok = false;
                    break;
                }
                ti->tripped = true;
                ti->passed += room;
                CTR_ADD(ti, bytes_dropped, n - room);
                CTR_ADD(ti, closes, 1);
                c->len = c->off + (size_t)room;
                if (room > 0) {
                    CTR_ADD(ti, chunks, 1);
                    chunk_list_push(out, c);
                } else {
                    free(c);
                }
                chunk_list_push(out, close);
                continue;
            }
            break;
        case TOXIC_CORRUPT:
            if (c->kind == CHUNK_DATA) {
                uint64_t nbits = (uint64_t)(c->len - c->off) * 8;
                while (ti->next_flip < ti->bit_pos + nbits) {
                    uint64_t b = ti->next_flip - ti->bit_pos;
                    c->data[c->off + b / 8] ^= (unsigned char)(1u << (b % 8));
                    CTR_ADD(ti, bits_flipped, 1);
                    ti->next_flip += corrupt_gap(&ti->rng, a->probability) + 1;
                }
                ti->bit_pos += nbits;
            }
            break;
        case TOXIC_NTYPES:
            break;
        }
        if (c->kind == CHUNK_DATA)
            CTR_ADD(ti, chunks, 1);
        chunk_list_push(out, c);
    }
    return ok;
}
