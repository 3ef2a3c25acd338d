/* fuzz_syncer_join.h - what fuzz_syncer_join.c and gen_seeds.c share: the
 * input layout of the syncer_join target and the syncer it fuzzes (its
 * config and the lengths of its fragments, so that the generated state
 * uploads have the right size). What it is not: the target itself, nor a
 * general way to start a syncer (tests/integration/trainer_it.h starts the
 * real binary).
 *
 * Input layout (one HTTP request per input):
 *   byte 0   route: FSJ_ROUTE_* (mod FSJ_ROUTES)
 *   byte 1   bits 0-2  credential: FSJ_CRED_* (Authorization header)
 *            bits 3-5  fragment p of the state route (mod P + 1; P names
 *                      no fragment: 404)
 *            bits 6-7  0, 1: as a learner sends it; 2: an X-Chaosloco-Learner
 *                      header naming learner 1 - id (403); 3: Content-Type
 *                      text/plain (415)
 *   JSON routes (join, heartbeat, leave): the body from byte 2; every
 *   FSJ_INC in it is replaced by the current incarnation of the
 *   credential's learner (learner-1: learner 1, any other: learner 0), as
 *   the fuzzer cannot know it (every join bumps it); every FSJ_SEAL
 *   string in a join's holds.seal[p] becomes the syncer's seal on
 *   (p, holds.versions[p], holds.crc32c[p]) (trainer/seal.h), which only
 *   the syncer's key makes: without it the rebuild, which takes sealed
 *   copies only, would be out of the fuzzer's reach.
 *   State route (POST /v1/fragments/{p}/state): bytes 2..FSJ_STATE_HDR-1
 *            byte 2    0..127: the headers as learner id sends them (its
 *                      current incarnation, fragment p, the CRC32C of the
 *                      body); 128..255: bits 0-4 are FSJ_F_* (what is odd)
 *            byte 3    X-Chaosloco-Incarnation with FSJ_F_LIT_INC
 *            byte 4    X-Chaosloco-Fragment with FSJ_F_LIT_FRAG
 *            bytes 5-6 X-Chaosloco-Version, little-endian
 *            bytes 7-10 X-Chaosloco-Crc32c with FSJ_F_LIT_CRC, little-endian
 *   and the body (f32 values) from FSJ_STATE_HDR.
 */
#ifndef FUZZ_SYNCER_JOIN_H
#define FUZZ_SYNCER_JOIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trainer/config.h"
#include "numerics/fragment.h"
#include "numerics/model.h"

enum { FSJ_ROUTE_JOIN, FSJ_ROUTE_HEARTBEAT, FSJ_ROUTE_LEAVE, FSJ_ROUTE_STATE, FSJ_ROUTES };

enum {
    FSJ_CRED_LEARNER0, /* learner-0's credential */
    FSJ_CRED_LEARNER1, /* learner-1's */
    FSJ_CRED_ADMIN,    /* admin: not a learner (403) */
    FSJ_CRED_READ,     /* read: not a learner (403) */
    FSJ_CRED_NONE,     /* no Authorization header (401) */
    FSJ_CRED_BADHEX,   /* learner-0 with one hex digit wrong (401) */
    FSJ_CRED_BASIC,    /* "Basic ...", not a bearer (401) */
    FSJ_CRED_LEARNER0B /* learner-0 again: the common case twice */
};

#define FSJ_F_LIT_INC 0x01  /* X-Chaosloco-Incarnation: byte 3 */
#define FSJ_F_LIT_CRC 0x02  /* X-Chaosloco-Crc32c: bytes 7-10 */
#define FSJ_F_LIT_FRAG 0x04 /* X-Chaosloco-Fragment: byte 4 */
#define FSJ_F_NO_VER 0x08   /* no X-Chaosloco-Version header */
#define FSJ_F_NO_CRC 0x10   /* no X-Chaosloco-Crc32c header */
#define FSJ_STATE_HDR 11    /* bytes before the state route's body */
#define FSJ_INC "@INC"      /* replaced in JSON bodies by the current incarnation */
#define FSJ_SEAL "@SEAL"    /* a join's holds.seal[p]: replaced by the syncer's seal on that report */
#define FSJ_FRAGMENTS 3     /* P of the fuzzed syncer */
#define FSJ_LEARNERS 2      /* M of the fuzzed syncer (credentials learner-0, learner-1) */

/* The fuzzed syncer's config: decoupled, 2 learners, 3 fragments of a tiny
 * mlp (~3.5k parameters) on the synthetic corpus, a 64-token eval, and a
 * 300 ms heartbeat timeout, the rebuild's window (it closes within 3 of
 * them). */
static inline void fsj_config(config *c)
{
    config_defaults(c);
    config_kind_defaults(c, CONFIG_MODE_DECOUPLED, CONFIG_MODEL_MLP);
    c->learners = FSJ_LEARNERS;
    c->fragments = FSJ_FRAGMENTS;
    c->H = 24;
    c->quorum = 1;
    c->context = 4;
    c->embed = 4;
    c->hidden = 8;
    c->eval_tokens = 64;
    c->heartbeat_timeout_ms = 300;
    snprintf(c->data, sizeof c->data, "synthetic");
}

/* The floats of each of the FSJ_FRAGMENTS fragments of that syncer's
 * model, as it splits it (trainer/syncer/core.c new_model). 0, or -1 with err. */
static inline int fsj_fragment_lengths(size_t len[FSJ_FRAGMENTS], char *err, size_t errlen)
{
    config c;
    model_config mc;
    fsj_config(&c);
    config_model_config(&c, INT64_MAX, &mc);
    model *m = model_new(config_model_name(c.model), &mc, (uint64_t)c.seed, err, errlen);
    if (!m)
        return -1;
    fragment_table *ft =
        fragment_table_new(model_tensors(m), model_num_tensors(m), FSJ_FRAGMENTS, err, errlen);
    int rc = ft ? 0 : -1;
    for (int p = 0; ft && p < FSJ_FRAGMENTS; p++)
        len[p] = fragment_length(ft, p);
    fragment_table_free(ft);
    model_free(m);
    return rc;
}

#endif
