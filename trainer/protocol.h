/* protocol.h - the wire format between learners and the syncer, shared by
 * both sides so they cannot disagree: header names, the tensor header set,
 * CRC32C framing and payload validation, and the reject reasons.
 *
 * A tensor body is application/octet-stream: the encoded values (f32 little
 * endian, or encoding.h's bf16/int8/int4 blocks), nothing else. Its CRC32C
 * travels in X-Chaosloco-Crc32c as 8 lowercase hex digits. The other
 * headers name who sent it and what it is (see proto_hdr).
 *
 * What it is not: HTTP (http_server/http_client do that), nor the encodings
 * themselves (encoding.h).
 */
#ifndef TRN_PROTOCOL_H
#define TRN_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_H_LEARNER "X-Chaosloco-Learner"
#define PROTO_H_INCARNATION "X-Chaosloco-Incarnation"
#define PROTO_H_FRAGMENT "X-Chaosloco-Fragment"
#define PROTO_H_BASE_VERSION "X-Chaosloco-Base-Version"
#define PROTO_H_TOKENS "X-Chaosloco-Tokens"
#define PROTO_H_STEPS "X-Chaosloco-Steps"
#define PROTO_H_ENCODING "X-Chaosloco-Encoding"
#define PROTO_H_CRC32C "X-Chaosloco-Crc32c"
/* Contributions: the round of the stagger schedule they were made for
 * (fragment_round); optional (absent: the syncer's open or next round),
 * but a present one must be valid. */
#define PROTO_H_ROUND "X-Chaosloco-Round"
/* Answers carrying a tensor also say which version / step it is.
 * X-Chaosloco-Step on a contribution: the learner's inner step count at
 * the send, so that its steps cover (step - steps, step] (required: it
 * numbers the contributions, and the syncer refuses a step sent twice, so
 * a replayed contribution is refused). */
#define PROTO_H_VERSION "X-Chaosloco-Version"
#define PROTO_H_STEP "X-Chaosloco-Step"
#define PROTO_H_PARTICIPANTS "X-Chaosloco-Participants"
/* GET /v1/optimizer (ddp): the AdamW step counter of the global state. */
#define PROTO_H_ADAM_STEPS "X-Chaosloco-Adam-Steps"
/* Downstream delta chains (GET /v1/fragments/{p}?newer-than=V&delta=1):
 * the version the chain starts from, and the CRC32C of the canonical f32
 * fragment (little-endian bytes) the chain must reproduce. */
#define PROTO_H_DELTA_FROM "X-Chaosloco-Delta-From"
#define PROTO_H_FRAGMENT_CRC32C "X-Chaosloco-Fragment-Crc32c"
/* The syncer's seal on a served fragment (trainer/seal.h): HMAC-SHA256 of
 * (table digest, fragment, version, fragment CRC32C), 64 hex digits. */
#define PROTO_H_SEAL "X-Chaosloco-Seal"

#define PROTO_MAX_LEARNER_ID 1000000

/* Why the syncer refused a payload (the `reject` event reasons of docs/api.md). */
typedef enum proto_reason {
    PROTO_OK = 0,
    PROTO_R_CHECKSUM,
    PROTO_R_LENGTH,
    PROTO_R_NONFINITE,
    PROTO_R_UNKNOWN_LEARNER,
    PROTO_R_STALE_INCARNATION,
    PROTO_R_STALE_VERSION,
    PROTO_R_BAD_HEADER,
    PROTO_R_HALTED,
    PROTO_R_NORM,  /* not sent by this syncer: a contribution's norm is clipped (trainer/syncer/guard.h); kept for
                      the metric's label set and older syncers */
    PROTO_R_CLAIM, /* tokens/steps beyond what could have been trained since the pull */
    PROTO_R_AUTH,  /* no, a wrong or another principal's credential (401/403; syncer.c's access table) */
    PROTO_R_MERGE, /* accepted, then dropped: its round's merge result was refused (trainer/syncer/guard.h) */
    PROTO_R_COUNT
} proto_reason;

const char *proto_reason_name(proto_reason r); /* "checksum", ... */
/* The reason named name (proto_reason_name's inverse: "stale_incarnation" ->
 * PROTO_R_STALE_INCARNATION) into *out: 0, or CX_EINVAL (and *out untouched)
 * when name is NULL or names none. */
int proto_reason_value(const char *name, proto_reason *out);

/* The headers of a tensor body. Fields not used by a call are -1. */
typedef struct proto_hdr {
    int64_t learner;      /* learner id */
    int64_t incarnation;  /* syncer-assigned incarnation, >= 1 */
    int64_t fragment;     /* fragment id (contributions) */
    int64_t base_version; /* version of the global fragment the delta is against */
    int64_t tokens;       /* tokens trained since the learner last received the fragment */
    int64_t steps;        /* inner steps since the learner last received the fragment */
    int64_t encoding;     /* config_encoding */
    uint32_t crc32c;      /* checksum of the body */
    int64_t round;        /* contributions: slot round of the fragment (fragment_round); -1 absent */
    int64_t step; /* contributions: the learner's inner step at the send (X-Chaosloco-Step); -1 absent */
} proto_hdr;

/* What proto_hdr_parse must find: a bit set of the PROTO_NEED_* values. */
enum {
    PROTO_NEED_LEARNER = 1 << 0,
    PROTO_NEED_INCARNATION = 1 << 1,
    PROTO_NEED_FRAGMENT = 1 << 2,
    PROTO_NEED_BASE_VERSION = 1 << 3,
    PROTO_NEED_TOKENS = 1 << 4,
    PROTO_NEED_STEPS = 1 << 5,
    PROTO_NEED_ENCODING = 1 << 6,
    PROTO_NEED_CRC = 1 << 7,
    PROTO_NEED_ROUND = 1 << 8, /* not in PROTO_NEED_CONTRIBUTION: a round is optional */
    PROTO_NEED_STEP = 1 << 9,
};
#define PROTO_NEED_CONTRIBUTION (0xff | PROTO_NEED_STEP)
#define PROTO_NEED_GRADIENT (PROTO_NEED_LEARNER | PROTO_NEED_INCARNATION | PROTO_NEED_CRC)

/* Header lookup: value of header `name` or NULL (cx_http_header fits). */
typedef const char *(*proto_header_fn)(const void *ctx, const char *name);

/* Parse the headers named in `need` (others are tried and set when present
 * and valid, else -1). A missing or malformed needed header is CX_EINVAL with
 * a message naming it; so is a malformed X-Chaosloco-Round even when not
 * needed (a contribution naming a round must name a valid one); the same
 * for X-Chaosloco-Step when not needed. */
int proto_hdr_parse(proto_hdr *h, proto_header_fn get, const void *ctx, unsigned need, char *err,
                    size_t errlen);

/* Format the present (>= 0) fields of h as "Name: value" strings into
 * lines[i] (each PROTO_LINE bytes) and set ptrs[i] to them, NULL-terminated:
 * ready for cx_http_do's hdrs. ptrs must hold PROTO_MAX_LINES + 1. */
#define PROTO_LINE 64
#define PROTO_MAX_LINES 10
void proto_hdr_format(const proto_hdr *h, char lines[PROTO_MAX_LINES][PROTO_LINE], const char **ptrs);

/* "1a2b3c4d" <-> u32. proto_crc_parse accepts 1-8 hex digits, else CX_EINVAL. */
void proto_crc_format(uint32_t crc, char out[9]);
int proto_crc_parse(const char *s, uint32_t *out);

/* Validate a received body: length (exactly expected_len bytes), then CRC.
 * Returns PROTO_OK or PROTO_R_LENGTH / PROTO_R_CHECKSUM with the detail in
 * err. */
proto_reason proto_check_body(const void *body, size_t len, size_t expected_len, uint32_t crc, char *err,
                              size_t errlen);

/* Index of the first NaN/Inf in v[0..n) or -1 when all are finite. */
ptrdiff_t proto_first_nonfinite(const float *v, size_t n);

/* f32 payloads (ddp gradients, global fragments): host floats to/from
 * little-endian bytes (a copy on little-endian hosts). */
void proto_f32_encode(const float *v, size_t n, void *out);
void proto_f32_decode(const void *in, size_t n, float *v);

/* CRC32C of v[0..n) as little-endian f32 bytes (what an f32 payload of v
 * would carry), without materialising the payload. */
uint32_t proto_f32_crc(const float *v, size_t n);

/* ---- delta chains (syncer -> learner) ----
 * A delta-chain body is a sequence of records, oldest first, one per
 * version V+1 .. current:
 *   int64 LE  version this delta produces (the previous record's + 1)
 *   uint32 LE payload bytes b
 *   b bytes   the encoded delta d^ (encoding.h layout, the run's encoding)
 * Applying it: global_fragment[i] += decode(payload)[i] (one f32 add per
 * element, record after record). The body's CRC32C is in
 * X-Chaosloco-Crc32c as for every tensor body. */
#define PROTO_DELTA_REC_HDR 12 /* bytes before each record's payload */

/* Write one record header (version, payload length) at out[0..12). */
void proto_delta_put_hdr(uint8_t out[PROTO_DELTA_REC_HDR], int64_t version, uint32_t payload_len);

/* Read the record at body[*off..len): 1 with *version, *payload, *plen set
 * and *off advanced; 0 at the end (*off == len); CX_ECORRUPT (message in
 * err) for a truncated record. */
int proto_delta_next(const uint8_t *body, size_t len, size_t *off, int64_t *version, const uint8_t **payload,
                     size_t *plen, char *err, size_t errlen);

#endif
