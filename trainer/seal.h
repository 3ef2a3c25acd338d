/* seal.h - the syncer's seal on the global fragments it serves: proof, to
 * a syncer that lost its state, that a learner's copy is one it published.
 *
 * What it is: HMAC-SHA256 (GnuTLS, which libmicrohttpd brings for its TLS)
 * over (fragment table digest, fragment, version, CRC32C of the fragment's
 * values), keyed by a key derived from the run's admin credential, which
 * no learner holds (trainer/credential.h). The syncer sends the seal with
 * every fragment it serves (X-Chaosloco-Seal, diloco and decoupled); a
 * learner keeps the seal of its copy and reports it in a join's "holds";
 * a rebuild takes only a sealed copy (trainer/syncer/rebuild.c). In ddp
 * modes a learner's copy is the whole state of a step (parameters, AdamW
 * m and v, bit-identical with the syncer's): one seal covers the CRC32C of
 * every fragment of it at that version (seal_make_state), sent with each
 * step's mean gradient and with GET /v1/optimizer. The key
 * lives where the credentials live, outside the state dir, so a syncer
 * whose state dir was wiped can still check what it published.
 * What it is not: encryption, or a check of the bytes a learner uploads
 * (the rebuild compares their CRC32C with the sealed one).
 */
#ifndef TRN_SEAL_H
#define TRN_SEAL_H

#include <stddef.h>
#include <stdint.h>

#define SEAL_BYTES 32                /* HMAC-SHA256 */
#define SEAL_HEX (2 * SEAL_BYTES)    /* hex digits of a seal */
#define SEAL_STATE_FRAGMENTS_MAX 256 /* fragments one ddp state seal may cover */

typedef struct seal_key {
    uint8_t k[SEAL_BYTES];
    int set; /* 0: no key (an insecure syncer): nothing is sealed or checked */
} seal_key;

/* The key of a run from its admin credential ("admin.<64 hex>"). 0, or
 * CX_ESYS when the HMAC fails (err says why; key stays unset). */
int seal_key_derive(seal_key *key, const char *admin_cred, char *err, size_t errlen);

/* The seal of fragment p at version v whose values have CRC32C crc, in a
 * model whose fragment table has digest table_digest: SEAL_HEX lowercase
 * hex digits and a NUL in out. 0, or CX_ESYS (out = ""). */
int seal_make(const seal_key *key, uint32_t table_digest, int p, int64_t v, uint32_t crc,
              char out[SEAL_HEX + 1]);

/* 1 when hex is the seal of (table_digest, p, v, crc) under key (compared in
 * constant time), else 0 (also for a malformed or empty hex). */
int seal_check(const seal_key *key, uint32_t table_digest, int p, int64_t v, uint32_t crc, const char *hex);

/* The seal of a ddp state at version v whose P fragments (each its
 * params | AdamW m | v, f32 little endian) have CRC32C crc[0..P): out as
 * seal_make's. 0, or CX_EINVAL / CX_ESYS (out = ""). */
int seal_make_state(const seal_key *key, uint32_t table_digest, int64_t v, const uint32_t *crc, int P,
                    char out[SEAL_HEX + 1]);

/* 1 when hex is the seal of that ddp state under key, else 0. */
int seal_check_state(const seal_key *key, uint32_t table_digest, int64_t v, const uint32_t *crc, int P,
                     const char *hex);

/* 1 when s is SEAL_HEX lowercase hex digits, else 0. */
int seal_well_formed(const char *s);

#endif
