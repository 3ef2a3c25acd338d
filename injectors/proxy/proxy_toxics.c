/* proxy_toxics.c - the proxy's toxic API (add, update, remove, the
 * Toxiproxy JSON shapes and its lenient decoding) and its counters. Each
 * change edits p->toxics under p->mu and is handed to the loop with
 * proxy_commit_locked, so that when a call returns every chunk read from
 * then on goes through the new chain. The toxic kinds themselves are
 * toxic.c and toxics/<type>.c.
 */
#include "injectors/proxy/proxy_internal.h"

#include "common/err.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- toxics: shared records ---- */

void shared_toxic_unref(shared_toxic *t)
{
    if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(t);
}

/* ---- toxics: the API ---- */

int proxy_toxic_validate(json_t *toxic, char *err, size_t errlen)
{
    toxic_spec s;
    return toxic_spec_parse(toxic, &s, err, errlen);
}

static int toxic_index_locked(proxy *p, const char *name)
{
    for (int i = 0; i < p->ntoxics; i++)
        if (strcmp(p->toxics[i]->spec.name, name) == 0)
            return i;
    return -1;
}

int proxy_toxic_add(proxy *p, json_t *toxic, uint64_t seed, json_t **out, char *err, size_t errlen)
{
    toxic_spec s;
    int rc = toxic_spec_parse(toxic, &s, err, errlen);
    if (rc != 0)
        return rc;
    shared_toxic *t = calloc(1, sizeof *t);
    if (!t)
        return cx_fail(err, errlen, CX_ENOMEM, "out of memory");
    t->spec = s;
    t->seed = seed;
    t->refs = 1;
    pthread_mutex_lock(&p->mu);
    if (toxic_index_locked(p, s.name) >= 0) {
        pthread_mutex_unlock(&p->mu);
        free(t);
        return cx_fail(err, errlen, CX_ECONFLICT, "toxic %s already exists", s.name);
    }
    if (p->ntoxics >= PROXY_MAX_TOXICS) {
        pthread_mutex_unlock(&p->mu);
        free(t);
        return cx_fail(err, errlen, CX_ETOOBIG, "proxy %s: at most %d toxics", p->name, PROXY_MAX_TOXICS);
    }
    t->id = p->next_toxic_id++;
    p->toxics[p->ntoxics++] = t;
    cx_info("proxy %s: toxic added name=%s type=%s stream=%s toxicity=%g", p->name, s.name, s.kind->name,
            toxic_stream_name(s.stream), s.toxicity);
    proxy_commit_locked(p);
    pthread_mutex_unlock(&p->mu);
    if (out)
        *out = toxic_spec_json(&s);
    return CX_OK;
}

int proxy_toxic_update(proxy *p, const char *name, json_t *body, json_t **out, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    int i = name ? toxic_index_locked(p, name) : -1;
    if (i < 0) {
        pthread_mutex_unlock(&p->mu);
        return cx_fail(err, errlen, CX_ENOTFOUND, "toxic not found: %s", name ? name : "");
    }
    toxic_spec s = p->toxics[i]->spec;
    int rc = toxic_spec_update(&s, body, err, errlen);
    if (rc == 0) {
        p->toxics[i]->spec = s;
        proxy_commit_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    if (rc == 0 && out)
        *out = toxic_spec_json(&s);
    return rc;
}

int proxy_toxic_remove(proxy *p, const char *name, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    int i = name ? toxic_index_locked(p, name) : -1;
    if (i < 0) {
        pthread_mutex_unlock(&p->mu);
        return cx_fail(err, errlen, CX_ENOTFOUND, "toxic not found: %s", name ? name : "");
    }
    shared_toxic *t = p->toxics[i];
    memmove(&p->toxics[i], &p->toxics[i + 1], sizeof p->toxics[0] * (size_t)(p->ntoxics - i - 1));
    p->ntoxics--;
    cx_info("proxy %s: toxic removed name=%s", p->name, name);
    proxy_commit_locked(p);
    pthread_mutex_unlock(&p->mu);
    shared_toxic_unref(t);
    return CX_OK;
}

json_t *proxy_toxic_json(proxy *p, const char *name)
{
    json_t *j = NULL;
    pthread_mutex_lock(&p->mu);
    int i = name ? toxic_index_locked(p, name) : -1;
    if (i >= 0)
        j = toxic_spec_json(&p->toxics[i]->spec);
    pthread_mutex_unlock(&p->mu);
    return j;
}

json_t *proxy_toxics_json(proxy *p)
{
    json_t *a = json_array();
    pthread_mutex_lock(&p->mu);
    for (int i = 0; a && i < p->ntoxics; i++)
        json_array_append_new(a, toxic_spec_json(&p->toxics[i]->spec));
    pthread_mutex_unlock(&p->mu);
    return a;
}

json_t *proxy_json(proxy *p)
{
    json_t *toxics = proxy_toxics_json(p);
    char up[256], lis[160];
    pthread_mutex_lock(&p->mu);
    snprintf(up, sizeof up, "%s", p->upstream);
    snprintf(lis, sizeof lis, "%s", p->listen_echo[0] ? p->listen_echo : p->listen_addr);
    bool enabled = p->enabled;
    pthread_mutex_unlock(&p->mu);
    return json_pack("{s:s, s:s, s:s, s:b, s:o*}", "name", p->name, "listen", lis, "upstream", up, "enabled",
                     enabled, "toxics", toxics);
}

json_t *proxy_toxic_lenient(json_t *body, const char *type, json_t *ignored)
{
    if (!json_is_object(body))
        return json_incref(body);
    json_t *out = json_object();
    if (!out)
        return NULL;
    static const char *const create_keys[] = {"name", "type", "stream", "toxicity", "attributes", NULL};
    static const char *const update_keys[] = {"toxicity", "attributes", NULL};
    const char *const *keys = type ? update_keys : create_keys;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        int known = 0;
        for (const char *const *k = keys; *k; k++)
            known |= strcmp(*k, key) == 0;
        if (known && strcmp(key, "attributes") != 0)
            json_object_set(out, key, v);
        else if (!known && ignored)
            json_array_append_new(ignored, json_string(key));
    }
    json_t *attrs = json_object_get(body, "attributes");
    const toxic_kind *t = toxic_kind_find(type ? type : json_string_value(json_object_get(body, "type")));
    if (attrs && (!t || !json_is_object(attrs))) {
        json_object_set(out, "attributes", attrs); /* the strict check names what is wrong */
    } else if (attrs) {
        json_t *kept = json_object();
        json_object_foreach(attrs, key, v)
        {
            if (toxic_attr_known(t, key)) {
                json_object_set(kept, key, v);
            } else if (ignored) {
                char path[300];
                snprintf(path, sizeof path, "attributes.%s", key);
                json_array_append_new(ignored, json_string(path));
            }
        }
        json_object_set_new(out, "attributes", kept);
    }
    return out;
}

/* ---- toxics: counters ---- */

void proxy_stats_get(proxy *p, proxy_stats *s)
{
    s->bytes_up = ATOMIC_GET(p->st.bytes_up);
    s->bytes_down = ATOMIC_GET(p->st.bytes_down);
    s->conns_accepted = ATOMIC_GET(p->st.conns_accepted);
    s->conns_open = ATOMIC_GET(p->st.conns_open);
    s->conns_refused = ATOMIC_GET(p->st.conns_refused);
    s->conns_dropped = ATOMIC_GET(p->st.conns_dropped);
    s->conns_reset = ATOMIC_GET(p->st.conns_reset);
    s->upstream_errors = ATOMIC_GET(p->st.upstream_errors);
}

static void counters_export(toxic_counters *c, proxy_toxic_stats *s)
{
    s->links_applied = ATOMIC_GET(c->links_applied);
    s->links_skipped = ATOMIC_GET(c->links_skipped);
    s->bytes = ATOMIC_GET(c->bytes);
    s->chunks = ATOMIC_GET(c->chunks);
    s->delayed_ms = ATOMIC_GET(c->delayed_ns) / 1000000;
    s->bytes_dropped = ATOMIC_GET(c->bytes_dropped);
    s->bits_flipped = ATOMIC_GET(c->bits_flipped);
    s->closes = ATOMIC_GET(c->closes);
}

int proxy_toxic_stats_get(proxy *p, const char *name, proxy_toxic_stats *s)
{
    pthread_mutex_lock(&p->mu);
    int i = name ? toxic_index_locked(p, name) : -1;
    if (i >= 0)
        counters_export(&p->toxics[i]->ctr, s);
    pthread_mutex_unlock(&p->mu);
    return i >= 0 ? CX_OK : CX_ENOTFOUND;
}

json_t *proxy_stats_json(proxy *p)
{
    proxy_stats s;
    proxy_stats_get(p, &s);
    json_t *toxics = json_object();
    pthread_mutex_lock(&p->mu);
    for (int i = 0; toxics && i < p->ntoxics; i++) {
        proxy_toxic_stats ts;
        counters_export(&p->toxics[i]->ctr, &ts);
        json_object_set_new(toxics, p->toxics[i]->spec.name,
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "links_applied",
                                      (json_int_t)ts.links_applied, "links_skipped",
                                      (json_int_t)ts.links_skipped, "bytes", (json_int_t)ts.bytes, "chunks",
                                      (json_int_t)ts.chunks, "delayed_ms", (json_int_t)ts.delayed_ms,
                                      "bytes_dropped", (json_int_t)ts.bytes_dropped, "bits_flipped",
                                      (json_int_t)ts.bits_flipped, "closes", (json_int_t)ts.closes));
    }
    bool partitioned = p->partition > 0;
    bool enabled = p->enabled;
    pthread_mutex_unlock(&p->mu);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:b, s:o*}", "bytes_up",
                     (json_int_t)s.bytes_up, "bytes_down", (json_int_t)s.bytes_down, "conns_accepted",
                     (json_int_t)s.conns_accepted, "conns_open", (json_int_t)s.conns_open, "conns_refused",
                     (json_int_t)s.conns_refused, "conns_dropped", (json_int_t)s.conns_dropped, "conns_reset",
                     (json_int_t)s.conns_reset, "upstream_errors", (json_int_t)s.upstream_errors, "enabled",
                     enabled, "partitioned", partitioned, "toxics", toxics);
}
