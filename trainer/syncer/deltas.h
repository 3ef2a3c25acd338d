/* deltas.h - the syncer's deltas component: downstream deltas and
 * fragment reads.
 *
 * Owns: s->deltas (struct syncer_deltas): each fragment's kept encoded
 * deltas and error-feedback residual, and the answer counters.
 * Operations: encode a merged fragment's update (deltas_encode), read a
 * fragment as full f32 or a chain of deltas (deltas_read, which its route
 * calls), and the versions long poll (its route).
 * Lock: s->mu held, except the route handlers, which take it.
 * What it is not: the merge (rounds.h); it only encodes what a merge made.
 */
#ifndef TRN_SYNCER_DELTAS_H
#define TRN_SYNCER_DELTAS_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/protocol.h"
#include "trainer/syncer/api.h"

#define LONG_POLL_MAX_MS 30000 /* cap on ?wait-ms */
#define DELTA_HISTORY 8        /* encoded downstream deltas kept per fragment */
#define DELTA_HISTORY_F32X 2   /* ... and at most this many f32 fragments' worth of bytes */

/* Why a GET /v1/fragments/{p} was answered with the full f32 fragment. */
typedef enum full_reason {
    FULL_PULL = 0,  /* plain pull (join, rejoin, resync, no delta=1) */
    FULL_HISTORY,   /* delta asked, but the kept deltas do not reach back to V */
    FULL_MISMATCH,  /* resync=1: the learner's delta result failed the CRC check */
    FULL_SIZE,      /* the chain would be bigger than the f32 fragment */
    FULL_UNENCODED, /* the run's encoding is f32: no deltas */
    FULL_R_COUNT
} full_reason;
extern const char *const deltas_full_reason_names[FULL_R_COUNT]; /* deltas.c */

/* One encoded downstream delta: Θ_version = Θ_{version-1} + decode(bytes). */
typedef struct delta_rec {
    int64_t version; /* the version it produces */
    uint8_t *bytes;  /* encoded d^ (the run's encoding) */
    size_t len;      /* bytes */
} delta_rec;

/* Per-fragment downstream state (encoded runs; diloco and decoupled). */
typedef struct frag_hist {
    float *resid;               /* [fragment_length] error-feedback residual (in memory only) */
    delta_rec d[DELTA_HISTORY]; /* kept deltas, oldest first, versions contiguous */
    int n;                      /* deltas kept */
    size_t bytes;               /* sum of d[].len */
} frag_hist;

/* The deltas component's state; deltas.c is its only writer. */
typedef struct syncer_deltas {
    frag_hist *hist;                    /* [P]; resid allocated only when deltas_encodes */
    int64_t answers_delta;              /* fragment answers sent as delta chains */
    int64_t answers_delta_versions;     /* deltas in those chains */
    int64_t bytes_out_delta;            /* bytes of those chains */
    int64_t answers_full[FULL_R_COUNT]; /* full f32 answers by reason */
    int64_t bytes_out_full;             /* bytes of full fragment answers */
} syncer_deltas;

/* Set up s->deltas at start-up (s->P and the fragment table known): a
 * history per fragment, and its residual when the run is encoded (not f32,
 * not ddp). 0, or -1 with err. */
int deltas_init(syncer *s, char *err, size_t errlen);
/* Free what deltas_init allocated (a partial init too). */
void deltas_cleanup(syncer *s);
/* Fragment p was replaced wholesale (a rebuild): its kept deltas no longer
 * lead to it and its residual restarts at 0 (mu held). */
void deltas_forget(syncer *s, int p);
/* Free every kept delta of h (the residual stays). */
void deltas_hist_clear(frag_hist *h);
/* Whether deltas_encode does anything for fragment p (and so needs Θ_V). */
int deltas_encodes(const syncer *s, int p);
/* Quantize the update of fragment p (mu held). old = Θ_V, th = the exact
 * Θ_new on entry; on return th = Θ_{V+1} = Θ_V + d^, the canonical value
 * every learner reproduces by the same f32 add. f32 runs and ddp modes:
 * nothing to do. */
void deltas_encode(syncer *s, int p, const float *old, float *th, int64_t version);
/* What deltas_read answers for one read of a fragment. */
typedef struct deltas_answer {
    int64_t version;    /* the fragment's version */
    int newer;          /* 0: not newer than the version the caller holds (answered 204, nothing sent) */
    uint8_t *chain;     /* the chain of encoded deltas as sent (the caller frees it), or NULL: full f32 */
    size_t chain_len;   /* its bytes */
    int chain_n;        /* deltas in it */
    full_reason reason; /* why the full fragment was sent (chain NULL) */
    int record;         /* 1: a current learner's pull, its `pull` event is due */
} deltas_answer;

/* A read of fragment p (mu held) by the caller h names (learner -1:
 * anonymous), who holds version `newer` (-1: none) and asks for a chain of
 * deltas (want_delta) or, after its delta result failed the CRC check,
 * the full fragment (resync). vals[fragment_length] gets the fragment's
 * current values. The answer is counted (bytes out, answers by kind) and a
 * current learner's pull noted (did it adopt its own contribution?). */
void deltas_read(syncer *s, int p, const proto_hdr *h, int64_t newer, int want_delta, int resync, float *vals,
                 deltas_answer *out);
/* GET /v1/fragments/{p}: full f32 or a chain of encoded deltas. */
SYNCER_HANDLER(deltas_route_fragment_get);
/* GET /v1/versions: every fragment's version; long-polls on request. */
SYNCER_HANDLER(deltas_route_versions);

#endif
