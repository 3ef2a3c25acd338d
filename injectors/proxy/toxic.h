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

typedef enum toxic_type {
    TOXIC_NOOP,
    TOXIC_LATENCY,
    TOXIC_BANDWIDTH,
    TOXIC_SLOW_CLOSE,
    TOXIC_TIMEOUT,
    TOXIC_RESET_PEER,
    TOXIC_SLICER,
    TOXIC_LIMIT_DATA,
    TOXIC_CORRUPT,
    TOXIC_NTYPES,
} toxic_type;

typedef enum toxic_stream { TOXIC_UPSTREAM = 0, TOXIC_DOWNSTREAM = 1 } toxic_stream;

/* Every attribute of every type; a type reads only its own. */
typedef struct toxic_attrs {
    int64_t latency_ms;     /* latency.latency */
    int64_t jitter_ms;      /* latency.jitter */
    int64_t rate_kbps;      /* bandwidth.rate, KB/s (1 KB = 1000 bytes) */
    int64_t close_delay_ms; /* slow_close.delay */
    int64_t timeout_ms;     /* timeout.timeout, reset_peer.timeout */
    int64_t average_size;   /* slicer.average_size, bytes */
    int64_t size_variation; /* slicer.size_variation, bytes */
    int64_t slice_delay_us; /* slicer.delay, microseconds */
    int64_t limit_bytes;    /* limit_data.bytes */
    double probability;     /* corrupt.probability, per bit, 0..1 */
} toxic_attrs;

typedef struct toxic_spec {
    char name[TOXIC_NAME_MAX + 1]; /* unique per proxy */
    toxic_type type;
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

const char *toxic_type_name(toxic_type t);
const char *toxic_stream_name(toxic_stream s);
/* Parse a Toxiproxy toxic object strictly, defaults first. CX_EINVAL with
 * "toxic.attributes.rate: must be > 0 (got 0)"-style messages. */
int toxic_spec_parse(json_t *j, toxic_spec *out, char *err, size_t errlen);
/* Apply an update body ({attributes?, toxicity?, name/type/stream equal})
 * to *s. On error *s is unchanged. */
int toxic_spec_update(toxic_spec *s, json_t *body, char *err, size_t errlen);
/* The type named name, or -1. */
int toxic_type_from_name(const char *name);
/* 1 when key is an attribute of type t. */
int toxic_attr_known(toxic_type t, const char *key);
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
    size_t len;         /* bytes in data */
    size_t off;         /* bytes of data already written */
    int64_t arrival_ns; /* CLOCK_MONOTONIC when the proxy read it; never changes */
    int64_t ready_ns;   /* earliest time it may be written */
    unsigned char data[];
} chunk;

typedef struct chunk_list {
    chunk *head;
    chunk *tail;
    size_t bytes; /* sum of len - off */
} chunk_list;

/* NULL on allocation failure. data copied when non-NULL. */
chunk *chunk_new(chunk_kind kind, const void *data, size_t len, int64_t arrival_ns, int64_t ready_ns);
void chunk_list_push(chunk_list *l, chunk *c);
chunk *chunk_list_pop(chunk_list *l);
void chunk_list_clear(chunk_list *l);

/* ---- stages: one toxic on one direction of one link ---- */

typedef enum toxic_timer { TOXIC_TIMER_NONE, TOXIC_TIMER_CLOSE, TOXIC_TIMER_RESET } toxic_timer;

typedef struct toxic_inst {
    uint64_t id;          /* the proxy's toxic id */
    toxic_spec spec;      /* attributes as of the last sync */
    bool applied;         /* toxicity draw for this link */
    uint64_t rng;         /* splitmix64 state (jitter, slicer sizes, corruption) */
    int64_t next_free_ns; /* bandwidth: when the emulated wire is free again */
    uint64_t passed;      /* limit_data: bytes let through */
    bool tripped;         /* limit_data reached / reset_peer triggered */
    uint64_t bit_pos;     /* corrupt: bits seen so far on this direction */
    uint64_t next_flip;   /* corrupt: absolute bit index of the next flip */
    toxic_timer timer;    /* link-level action due at timer_ns */
    int64_t timer_ns;     /* CLOCK_MONOTONIC ns */
    toxic_counters *ctr;  /* the toxic's shared counters (borrowed) */
} toxic_inst;

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

#endif
