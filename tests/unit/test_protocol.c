/* test_protocol.c - tensor headers and payload validation. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "trainer/config.h"
#include "trainer/protocol.h"

typedef struct kv {
    const char *k[16];
    const char *v[16];
    int n;
} kv;

static const char *get(const void *ctx, const char *name)
{
    const kv *h = ctx;
    for (int i = 0; i < h->n; i++)
        if (strcasecmp(h->k[i], name) == 0)
            return h->v[i];
    return NULL;
}

/* Parse "Name: value" lines as a server would see them. */
static void from_lines(kv *h, const char **ptrs)
{
    static char store[16][PROTO_LINE];
    h->n = 0;
    for (int i = 0; ptrs[i]; i++) {
        snprintf(store[i], PROTO_LINE, "%s", ptrs[i]);
        char *colon = strchr(store[i], ':');
        cr_assert(colon);
        *colon = 0;
        h->k[h->n] = store[i];
        h->v[h->n++] = colon + 2;
    }
}

Test(protocol, header_round_trip)
{
    proto_hdr a = {7, 3, 2, 41, 4096, 24, CONFIG_ENC_INT4, 0xdeadbeefu, 12, 240}, b;
    char lines[PROTO_MAX_LINES][PROTO_LINE];
    const char *ptrs[PROTO_MAX_LINES + 1];
    char err[CX_ERRLEN];
    kv h;
    proto_hdr_format(&a, lines, ptrs);
    from_lines(&h, ptrs);
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_CONTRIBUTION, err, sizeof err), 0, "%s", err);
    cr_assert_eq(b.learner, 7);
    cr_assert_eq(b.incarnation, 3);
    cr_assert_eq(b.fragment, 2);
    cr_assert_eq(b.base_version, 41);
    cr_assert_eq(b.tokens, 4096);
    cr_assert_eq(b.steps, 24);
    cr_assert_eq(b.encoding, CONFIG_ENC_INT4);
    cr_assert_eq(b.crc32c, 0xdeadbeefu);
    cr_assert_eq(b.round, 12);
    cr_assert_eq(b.step, 240);
}

Test(protocol, round_is_optional_but_a_bad_one_is_named)
{
    kv h = {{PROTO_H_LEARNER, PROTO_H_INCARNATION, PROTO_H_CRC32C}, {"1", "2", "00ff"}, 3};
    proto_hdr b;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_GRADIENT, err, sizeof err), 0, "%s", err);
    cr_assert_eq(b.round, -1, "absent");
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_GRADIENT | PROTO_NEED_ROUND, err, sizeof err),
                 CX_EINVAL, "needed but absent");
    cr_assert(strstr(err, PROTO_H_ROUND) != NULL, "%s", err);
    h.k[3] = PROTO_H_ROUND;
    h.v[3] = "-4";
    h.n = 4;
    err[0] = 0;
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_GRADIENT, err, sizeof err), CX_EINVAL,
                 "present and bad: refused even when not needed");
    cr_assert(strstr(err, PROTO_H_ROUND) != NULL, "%s", err);
    h.v[3] = "9";
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_GRADIENT, err, sizeof err), 0, "%s", err);
    cr_assert_eq(b.round, 9);
}

Test(protocol, missing_and_bad_headers_are_named)
{
    kv h = {{PROTO_H_LEARNER, PROTO_H_INCARNATION, PROTO_H_CRC32C}, {"1", "x", "00ff"}, 3};
    proto_hdr b;
    char err[CX_ERRLEN] = "";
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_GRADIENT, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, PROTO_H_INCARNATION) != NULL, "%s", err);
    h.v[1] = "2";
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_GRADIENT, err, sizeof err), 0, "%s", err);
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_CONTRIBUTION, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, "missing header") != NULL, "%s", err);
    h.v[2] = "zz";
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_GRADIENT, err, sizeof err), CX_EINVAL);
    cr_assert(strstr(err, PROTO_H_CRC32C) != NULL, "%s", err);
    h.v[0] = "-3";
    h.v[2] = "1";
    cr_assert_eq(proto_hdr_parse(&b, get, &h, PROTO_NEED_GRADIENT, err, sizeof err), CX_EINVAL);
}

Test(protocol, crc_text)
{
    uint32_t v;
    char s[9];
    proto_crc_format(0x0000abcdu, s);
    cr_assert_str_eq(s, "0000abcd");
    cr_assert_eq(proto_crc_parse("0000ABCD", &v), 0);
    cr_assert_eq(v, 0xabcdu);
    cr_assert_eq(proto_crc_parse("", &v), CX_EINVAL);
    cr_assert_eq(proto_crc_parse("123456789", &v), CX_EINVAL);
    cr_assert_eq(proto_crc_parse("12g4", &v), CX_EINVAL);
}

Test(protocol, body_checks)
{
    float v[64];
    unsigned char wire[256];
    char err[CX_ERRLEN];
    for (int i = 0; i < 64; i++)
        v[i] = (float)i * 0.5f - 3.0f;
    proto_f32_encode(v, 64, wire);
    uint32_t crc = cx_crc32c(0, wire, sizeof wire);
    cr_assert_eq(proto_check_body(wire, 256, 256, crc, err, sizeof err), PROTO_OK);
    cr_assert_eq(proto_check_body(wire, 252, 256, cx_crc32c(0, wire, 252), err, sizeof err), PROTO_R_LENGTH);
    cr_assert(strstr(err, "252") != NULL, "%s", err);
    wire[17] ^= 0x10;
    cr_assert_eq(proto_check_body(wire, 256, 256, crc, err, sizeof err), PROTO_R_CHECKSUM);
    wire[17] ^= 0x10;
    float back[64];
    proto_f32_decode(wire, 64, back);
    cr_assert_eq(memcmp(back, v, sizeof v), 0);
    cr_assert_eq(proto_first_nonfinite(back, 64), -1);
    back[40] = NAN;
    cr_assert_eq(proto_first_nonfinite(back, 64), 40);
    back[40] = 1.0f;
    back[3] = -INFINITY;
    cr_assert_eq(proto_first_nonfinite(back, 64), 3);
}

Test(protocol, reason_names_match_contracts)
{
    cr_assert_str_eq(proto_reason_name(PROTO_R_CHECKSUM), "checksum");
    cr_assert_str_eq(proto_reason_name(PROTO_R_LENGTH), "length");
    cr_assert_str_eq(proto_reason_name(PROTO_R_NONFINITE), "nonfinite");
    cr_assert_str_eq(proto_reason_name(PROTO_R_UNKNOWN_LEARNER), "unknown_learner");
    cr_assert_str_eq(proto_reason_name(PROTO_R_STALE_INCARNATION), "stale_incarnation");
    cr_assert_str_eq(proto_reason_name(PROTO_R_STALE_VERSION), "stale_version");
    cr_assert_str_eq(proto_reason_name(PROTO_R_BAD_HEADER), "bad_header");
    cr_assert_str_eq(proto_reason_name(PROTO_R_HALTED), "halted");
}
