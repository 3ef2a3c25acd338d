/* test_seal.c - trainer/seal.h: a seal binds the table digest, fragment,
 * version and CRC under one key (a ddp state's seal every fragment's CRC);
 * another key, a changed field or a malformed seal does not check;
 * HMAC-SHA256 against a published vector. */
#include <criterion/criterion.h>
#include <gnutls/crypto.h>
#include <string.h>

#include "trainer/seal.h"

#define ADMIN "admin.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

Test(seal, binds_every_field_under_its_key)
{
    seal_key k, other;
    char err[256], s[SEAL_HEX + 1];
    cr_assert_eq(seal_key_derive(&k, ADMIN, err, sizeof err), 0, "%s", err);
    cr_assert_eq(seal_key_derive(&other, "admin.ffff", err, sizeof err), 0, "%s", err);
    cr_assert_eq(seal_make(&k, 0x1234abcd, 2, 17, 0xdeadbeef, s), 0);
    cr_assert(seal_well_formed(s), "64 lowercase hex digits: %s", s);
    cr_assert(seal_check(&k, 0x1234abcd, 2, 17, 0xdeadbeef, s));
    cr_assert(!seal_check(&other, 0x1234abcd, 2, 17, 0xdeadbeef, s), "another key");
    cr_assert(!seal_check(&k, 0x1234abce, 2, 17, 0xdeadbeef, s), "another model");
    cr_assert(!seal_check(&k, 0x1234abcd, 3, 17, 0xdeadbeef, s), "another fragment");
    cr_assert(!seal_check(&k, 0x1234abcd, 2, 18, 0xdeadbeef, s), "another version");
    cr_assert(!seal_check(&k, 0x1234abcd, 2, 17, 0xdeadbeee, s), "another CRC");
    char again[SEAL_HEX + 1];
    cr_assert_eq(seal_make(&k, 0x1234abcd, 2, 17, 0xdeadbeef, again), 0);
    cr_assert_str_eq(again, s, "deterministic");
}

Test(seal, malformed_or_missing_seals_do_not_check)
{
    seal_key k, none = {0};
    char err[256], s[SEAL_HEX + 1];
    cr_assert_eq(seal_key_derive(&k, ADMIN, err, sizeof err), 0, "%s", err);
    cr_assert_eq(seal_make(&k, 1, 0, 1, 1, s), 0);
    cr_assert(!seal_check(&k, 1, 0, 1, 1, ""));
    cr_assert(!seal_check(&k, 1, 0, 1, 1, NULL));
    char upper[SEAL_HEX + 1];
    memcpy(upper, s, sizeof upper);
    for (int i = 0; i < SEAL_HEX; i++)
        if (upper[i] >= 'a' && upper[i] <= 'f')
            upper[i] = (char)(upper[i] - 'a' + 'A');
    cr_assert(!seal_well_formed(upper) || strcmp(upper, s) == 0, "uppercase is not the form");
    char shorter[SEAL_HEX];
    memcpy(shorter, s, SEAL_HEX - 1);
    shorter[SEAL_HEX - 1] = 0;
    cr_assert(!seal_check(&k, 1, 0, 1, 1, shorter));
    cr_assert(!seal_check(&none, 1, 0, 1, 1, s), "no key checks nothing");
    cr_assert_neq(seal_make(&none, 1, 0, 1, 1, s), 0, "no key seals nothing");
    cr_assert_str_eq(s, "");
}

/* A ddp state's seal covers every fragment's CRC at one version. */
Test(seal, a_state_seal_binds_every_fragment_and_the_version)
{
    seal_key k;
    char err[256], s[SEAL_HEX + 1];
    uint32_t crc[3] = {1, 2, 3};
    cr_assert_eq(seal_key_derive(&k, ADMIN, err, sizeof err), 0, "%s", err);
    cr_assert_eq(seal_make_state(&k, 7, 40, crc, 3, s), 0);
    cr_assert(seal_check_state(&k, 7, 40, crc, 3, s));
    cr_assert(!seal_check_state(&k, 7, 41, crc, 3, s), "another version");
    cr_assert(!seal_check_state(&k, 8, 40, crc, 3, s), "another model");
    cr_assert(!seal_check_state(&k, 7, 40, crc, 2, s), "fewer fragments");
    crc[2] = 4;
    cr_assert(!seal_check_state(&k, 7, 40, crc, 3, s), "another CRC of one fragment");
    char frag[SEAL_HEX + 1];
    cr_assert_eq(seal_make(&k, 7, 0, 40, 1, frag), 0);
    cr_assert(!seal_check_state(&k, 7, 40, (uint32_t[]){1}, 1, frag), "a fragment seal is not a state seal");
    cr_assert_neq(seal_make_state(&k, 7, 40, crc, 0, s), 0, "no fragments");
    cr_assert_neq(seal_make_state(&k, 7, 40, crc, SEAL_STATE_FRAGMENTS_MAX + 1, s), 0, "too many");
}

/* The HMAC underneath is HMAC-SHA256: RFC 4231 test case 2. */
Test(seal, the_mac_is_hmac_sha256)
{
    unsigned char out[32];
    cr_assert_eq(gnutls_hmac_fast(GNUTLS_MAC_SHA256, "Jefe", 4, "what do ya want for nothing?", 28, out), 0);
    static const unsigned char want[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                           0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                           0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    cr_assert_eq(memcmp(out, want, 32), 0);
}
