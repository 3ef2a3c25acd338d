/* toxic.h - toxic specs (Toxiproxy JSON <-> C) and the per-link toxic
 * stages that transform a direction's chunk stream. Internal to the proxy
 * (injectors/proxy/); the public API is proxy.h.
 *
 * A stage never blocks and never sleeps: it computes, at the moment a chunk
 * is read, when each output chunk may leave (ready_ns). The proxy loop
 * writes chunks in queue order once their time has come, so every toxic is
 * a pure function of (arrival times, bytes, seed) and the chain as a whole
 * never reorders bytes.
 */
#ifndef INJ_PROXY_TOXIC_H
#define INJ_PROXY_TOXIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOXIC_NAME_MAX 64

typedef enum toxic_stream { TOXIC_UPSTREAM = 0, TOXIC_DOWNSTREAM = 1 } toxic_stream;

#define TOXIC_MAX_ATTRS 4
#define TOXIC_MS_MAX 86400000.0 /* one day: cap for every ms attribute */

/* A toxic's attributes, in its kind's order (toxic_kind.attrs[i] is v[i]);
 * integers are held exactly (every range is below 2^53). 0 = unset. */
typedef struct toxic_attrs {
    double v[TOXIC_MAX_ATTRS];
} toxic_attrs;

struct toxic_kind;

typedef struct toxic_spec {
    char name[TOXIC_NAME_MAX + 1]; /* unique per proxy */
    const struct toxic_kind *kind; /* its type */
    toxic_stream stream;
    double toxicity; /* 0..1: chance per link that the toxic applies */
    toxic_attrs a;
} toxic_spec;

/* Counters shared between the proxy loop (writer, relaxed atomics) and API
 * readers. */
typedef struct toxic_counters {
    uint64_t links_applied; /* links the draw applied the toxic to */
    uint64_t links_skipped; /* links the draw spared */
    uint64_t bytes;         /* bytes entering the stage on applied links */
    uint64_t chunks;        /* chunks leaving the stage */
    uint64_t delayed_ns;    /* sum over chunks of the delay the stage added, ns */
    uint64_t bytes_dropped; /* bytes discarded */
    uint64_t bits_flipped;  /* corrupt */
    uint64_t closes;        /* links closed or reset because of the toxic */
} toxic_counters;

/* ---- specs ---- */

const char *toxic_stream_name(toxic_stream s);
/* Parse a Toxiproxy toxic object strictly, defaults first. CX_EINVAL with
 * "toxic.attributes.rate: must be > 0 (got 0)"-style messages. */
int toxic_spec_parse(json_t *j, toxic_spec *out, char *err, size_t errlen);
/* Apply an update body ({attributes?, toxicity?, name/type/stream equal})
 * to *s. On error *s is unchanged. */
int toxic_spec_update(toxic_spec *s, json_t *body, char *err, size_t errlen);
/* The kind named name (Toxiproxy's type), or NULL. */
const struct toxic_kind *toxic_kind_find(const char *name);
/* 1 when key is an attribute of kind k. */
int toxic_attr_known(const struct toxic_kind *k, const char *key);
/* New reference, Toxiproxy shape. */
json_t *toxic_spec_json(const toxic_spec *s);

/* ---- chunks ---- */

typedef enum chunk_kind {
    CHUNK_DATA,  /* bytes */
    CHUNK_EOF,   /* the source half-closed: shutdown(dst, SHUT_WR) when reached */
    CHUNK_CLOSE, /* a toxic ends the link when reached (limit_data) */
} chunk_kind;

typedef struct chunk {
    struct chunk *next;
    chunk_kind kind;
    size_t len;       /* bytes in data */
    size_t off;       /* bytes of data already written */
    int64_t stamp_ns; /* Toxiproxy's chunk timestamp: CLOCK_MONOTONIC when the proxy read it,
                           moved on by each latency stage it passes (so stacked latencies add up) */
    int64_t ready_ns; /* earliest time it may be written */
    unsigned char data[];
} chunk;

typedef struct chunk_list {
    chunk *head;
    chunk *tail;
    size_t bytes; /* sum of len - off */
} chunk_list;

/* NULL on allocation failure. data copied when non-NULL. */
chunk *chunk_new(chunk_kind kind, const void *data, size_t len, int64_t stamp_ns, int64_t ready_ns);
void chunk_list_push(chunk_list *l, chunk *c);
chunk *chunk_list_pop(chunk_list *l);
void chunk_list_clear(chunk_list *l);

/* ---- stages: one toxic on one direction of one link ---- */

typedef enum toxic_timer { TOXIC_TIMER_NONE, TOXIC_TIMER_CLOSE, TOXIC_TIMER_RESET } toxic_timer;

typedef struct toxic_inst {
    uint64_t id;                         /* the proxy's toxic id */
    toxic_spec spec;                     /* attributes as of the last sync */
    bool applied;                        /* toxicity draw for this link */
    uint64_t rng;                        /* splitmix64 state (jitter, slicer sizes, corruption) */
    toxic_timer timer;                   /* link-level action due at timer_ns */
    int64_t timer_ns;                    /* CLOCK_MONOTONIC ns */
    toxic_counters *ctr;                 /* the toxic's shared counters (borrowed) */
    _Alignas(8) unsigned char state[32]; /* the kind's own per-link state (TOXIC_STATE) */
} toxic_inst;

/* The kind's per-link state: a struct of its own inside ti->state, which
 * its file checks once with TOXIC_STATE_FITS(type). */
#define TOXIC_STATE(ti, type) ((type *)(void *)(ti)->state)
#define TOXIC_STATE_FITS(type)                                                                               \
    _Static_assert(sizeof(type) <= sizeof(((toxic_inst *)0)->state), #type " does not fit toxic_inst.state")

/* Draw toxicity for (seed, link_id) and set up state. now_ns starts the
 * timeout toxic's clock. */
void toxic_inst_init(toxic_inst *ti, uint64_t id, const toxic_spec *s, uint64_t seed, uint64_t link_id,
                     int64_t now_ns, toxic_counters *ctr);
/* New attributes on a live link (Toxiproxy restarts the toxic: the
 * timeout clock starts again). The toxicity draw is kept. */
void toxic_inst_update(toxic_inst *ti, const toxic_spec *s, int64_t now_ns);
/* Move every chunk of *in through the stage into *out (in order). Chunks
 * the stage drops are freed. Returns false on allocation failure (the
 * chunks then pass through unchanged). */
bool toxic_inst_run(toxic_inst *ti, chunk_list *in, chunk_list *out, int64_t now_ns);

/* Deterministic hash used for toxicity draws and rng seeding. */
uint64_t toxic_mix(uint64_t a, uint64_t b);

/* ---- kinds: one toxic type, one file in injectors/proxy/toxics/ ----
 *
 * As Toxiproxy's toxic registry (CREATING_TOXICS.md): a kind is its name,
 * its attributes and a function that moves one chunk through the stage.
 * Its run() never waits (it stamps ready times; the proxy loop writes a
 * chunk once its time has come, so every wait is interruptible by a
 * revert) and never drops bytes in flight by accident: whatever it takes
 * from the input is pushed to out, or counted as dropped when dropping is
 * the toxic. Listed in TOXIC_KINDS (toxic.c), one line each. */

typedef struct toxic_attr_def {
    const char *key; /* Toxiproxy attribute name */
    bool is_double;  /* else an integer */
    double min, max; /* inclusive range */
} toxic_attr_def;

typedef struct toxic_kind {
    const char *name;                          /* Toxiproxy type: "latency" */
    toxic_attr_def attrs[TOXIC_MAX_ATTRS + 1]; /* {NULL}-terminated; attrs[i] is spec.a.v[i] */
    /* A rule across attributes (after each one's range), or NULL. */
    int (*check)(const toxic_attrs *a, char *err, size_t errlen);
    /* (Re)start the per-link state of an applied link: at init (old NULL)
     * and when the attributes change on a live link (old = the previous
     * spec; ti->spec is already the new one). NULL = no state. */
    void (*start)(toxic_inst *ti, const toxic_spec *old, int64_t now_ns);
    /* One chunk of an applied link (its bytes already counted): push what
     * leaves to out in order, or free it as dropped (toxic_drop). false on
     * an allocation failure, with c pushed unchanged. NULL: c passes. */
    bool (*run)(toxic_inst *ti, chunk *c, chunk_list *out, int64_t now_ns);
    bool resets; /* its timer ends the link with a reset (RST), not a close */
} toxic_kind;

/* Helpers for the kinds' run(). */
/* Pass c on unchanged (counted as a chunk when it is data). */
void toxic_pass(toxic_inst *ti, chunk *c, chunk_list *out);
/* Free c, counting its bytes as dropped. */
void toxic_drop(toxic_inst *ti, chunk *c);
/* Hold c until t at least (the added delay is counted). */
void toxic_delay_to(toxic_inst *ti, chunk *c, int64_t t);
/* Cut c into pieces of piece(ti) bytes (at most what is left), each
 * ready at ready(ti, piece, i, base ready time), appended to out; c is
 * freed. false (c untouched) on allocation failure. */
bool toxic_split(toxic_inst *ti, chunk *c, chunk_list *out, size_t (*piece)(toxic_inst *ti),
                 int64_t (*ready)(toxic_inst *ti, chunk *p, int64_t i, int64_t base));
/* Uniform in [0, 1) and in [-r, r], from ti->rng. */
double toxic_rng_unit(toxic_inst *ti);
int64_t toxic_rng_pm(toxic_inst *ti, int64_t r);

#define TOXIC_CTR_ADD(ti, field, v) __atomic_fetch_add(&(ti)->ctr->field, (uint64_t)(v), __ATOMIC_RELAXED)

#endif
