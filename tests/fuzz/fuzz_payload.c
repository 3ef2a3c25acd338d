/* fuzz_payload.c - libFuzzer target: the payload decoder and the delta
 * path (numerics/encoding.c, trainer/protocol.c), on what the syncer does
 * with a contribution body (length + CRC check, decode, finiteness) and
 * what the learner does with a delta chain (record walk, versions in
 * sequence, decode each, one f32 add per element; trainer/learner/link.c
 * apply_chain).
 * Oracles beyond the sanitizers: a decode that succeeds yields only finite
 * values (encoding.h's contract), an f32/bf16 decode re-encodes to the same
 * bytes, and proto_check_body accepts exactly the right length and CRC.
 * Input layout: fuzz_payload.h. Seeds: written by gen_seeds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/err.h"
#include "fuzz_payload.h"
#include "numerics/encoding.h"
#include "trainer/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_vector(encoding_kind kind, const uint8_t *body, size_t blen, size_t n, float *out)
{
    char err[CX_ERRLEN];
    size_t want = encoding_size(kind, n);
    uint32_t crc = cx_crc32c(0, body, blen);
    proto_reason r = proto_check_body(body, blen, want, crc, err, sizeof err);
    if ((r == PROTO_OK) != (blen == want))
        abort();
    if (blen == want && proto_check_body(body, blen, want, crc ^ 1u, err, sizeof err) != PROTO_R_CHECKSUM)
        abort();
    if (encoding_decode(kind, body, blen, out, n, err, sizeof err) != 0)
        return;
    if (blen != want || proto_first_nonfinite(out, n) >= 0)
        abort(); /* decode accepted a wrong length or a non-finite value */
    if (kind == ENCODING_F32 || kind == ENCODING_BF16) {
        uint8_t *again = malloc(want ? want : 1);
        if (!again)
            return;
        if (encoding_encode(kind, out, n, again, want, err, sizeof err) != 0 ||
            memcmp(again, body, want) != 0)
            abort(); /* f32 and bf16 values are exact: the bytes must come back */
        free(again);
    }
}

static void delta_chain(encoding_kind kind, const uint8_t *body, size_t blen, size_t n, float *d)
{
    char err[CX_ERRLEN];
    float *frag = calloc(n, sizeof *frag);
    if (!frag)
        return;
    size_t off = 0, plen;
    const uint8_t *payload;
    int64_t v, expect = -1;
    int rc;
    while ((rc = proto_delta_next(body, blen, &off, &v, &payload, &plen, err, sizeof err)) == 1) {
        if (off > blen || payload < body || payload + plen > body + blen)
            abort(); /* a record outside the body */
        if (expect >= 0 && v != expect)
            break;
        if (encoding_decode(kind, payload, plen, d, n, err, sizeof err) != 0)
            break;
        for (size_t i = 0; i < n; i++)
            frag[i] += d[i];
        expect = v + 1;
    }
    (void)proto_f32_crc(frag, n);
    free(frag);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FUZZ_PAYLOAD_HDR)
        return 0;
    encoding_kind kind = (encoding_kind)(data[0] % ENCODING_COUNT);
    size_t n = 1 + (size_t)((data[2] | (data[3] << 8)) % FUZZ_PAYLOAD_MAX_N);
    float *buf = malloc(n * sizeof *buf);
    if (!buf)
        return 0;
    if (data[1] & 1)
        delta_chain(kind, data + FUZZ_PAYLOAD_HDR, size - FUZZ_PAYLOAD_HDR, n, buf);
    else
        one_vector(kind, data + FUZZ_PAYLOAD_HDR, size - FUZZ_PAYLOAD_HDR, n, buf);
    free(buf);
    return 0;
}
