/* seal.c - see seal.h. */
#include "trainer/seal.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "trainer/credential.h"

#define SEAL_CONTEXT "chaosloco fragment seal v1"

int seal_key_derive(seal_key *key, const char *admin_cred, char *err, size_t errlen)
{
    memset(key, 0, sizeof *key);
    int rc = gnutls_hmac_fast(GNUTLS_MAC_SHA256, admin_cred, strlen(admin_cred), SEAL_CONTEXT,
                              strlen(SEAL_CONTEXT), key->k);
    if (rc < 0)
        return cx_fail(err, errlen, CX_ESYS, "seal key: HMAC-SHA256 failed: %s", gnutls_strerror(rc));
    key->set = 1;
    return 0;
}

/* HMAC-SHA256 of msg[0..n) under key, as hex into out. */
static int seal_hex(const seal_key *key, const char *msg, size_t n, char out[SEAL_HEX + 1])
{
    uint8_t raw[SEAL_BYTES];
    out[0] = 0;
    if (!key->set)
        return CX_EINVAL;
    if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, key->k, sizeof key->k, msg, n, raw) < 0)
        return CX_ESYS;
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < SEAL_BYTES; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[SEAL_HEX] = 0;
    return 0;
}

int seal_make(const seal_key *key, uint32_t table_digest, int p, int64_t v, uint32_t crc,
              char out[SEAL_HEX + 1])
{
    char msg[128];
    int n = snprintf(msg, sizeof msg, "table=%08" PRIx32 " fragment=%d version=%" PRId64 " crc32c=%08" PRIx32,
                     table_digest, p, v, crc);
    out[0] = 0;
    if (n < 0 || (size_t)n >= sizeof msg)
        return CX_EINVAL;
    return seal_hex(key, msg, (size_t)n, out);
}

int seal_make_state(const seal_key *key, uint32_t table_digest, int64_t v, const uint32_t *crc, int P,
                    char out[SEAL_HEX + 1])
{
    char msg[64 + 9 * SEAL_STATE_FRAGMENTS_MAX];
    int n =
        snprintf(msg, sizeof msg, "table=%08" PRIx32 " state version=%" PRId64 " crc32c=", table_digest, v);
    out[0] = 0;
    if (P < 1 || P > SEAL_STATE_FRAGMENTS_MAX || n < 0)
        return CX_EINVAL;
    for (int p = 0; p < P; p++)
        n += snprintf(msg + n, sizeof msg - (size_t)n, p ? ",%08" PRIx32 : "%08" PRIx32, crc[p]);
    if ((size_t)n >= sizeof msg)
        return CX_EINVAL;
    return seal_hex(key, msg, (size_t)n, out);
}

int seal_check_state(const seal_key *key, uint32_t table_digest, int64_t v, const uint32_t *crc, int P,
                     const char *hex)
{
    char want[SEAL_HEX + 1];
    if (!key->set || !seal_well_formed(hex) || seal_make_state(key, table_digest, v, crc, P, want) != 0)
        return 0;
    return cred_equal(hex, want);
}

int seal_well_formed(const char *s)
{
    if (!s || strlen(s) != SEAL_HEX)
        return 0;
    for (int i = 0; i < SEAL_HEX; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

int seal_check(const seal_key *key, uint32_t table_digest, int p, int64_t v, uint32_t crc, const char *hex)
{
    char want[SEAL_HEX + 1];
    if (!key->set || !seal_well_formed(hex) || seal_make(key, table_digest, p, v, crc, want) != 0)
        return 0;
    return cred_equal(hex, want);
}
