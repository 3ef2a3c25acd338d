/* fuzz_payload.h - the input layout of fuzz_payload, shared with the seed
 * generator (gen_seeds.c) so the two cannot disagree:
 *   byte 0     encoding kind (mod ENCODING_COUNT)
 *   byte 1     bit 0: 0 = one encoded vector (a contribution, a fragment),
 *                     1 = a delta chain (protocol.h, syncer -> learner)
 *   bytes 2-3  n - 1, little endian, mod FUZZ_PAYLOAD_MAX_N (values per vector)
 *   the rest   the body as it would arrive on the wire
 */
#ifndef FUZZ_PAYLOAD_H
#define FUZZ_PAYLOAD_H

#define FUZZ_PAYLOAD_HDR 4
#define FUZZ_PAYLOAD_MAX_N 4096

#endif
