/* hash.h - FNV-1a, 64-bit: the non-cryptographic hash behind the data
 * fingerprints (numerics/data.c, numerics/corpus.c). Not for anything an
 * adversary chooses the input of. */
#ifndef CX_HASH_H
#define CX_HASH_H

#include <stddef.h>
#include <stdint.h>

#define CX_FNV1A64_INIT 0xCBF29CE484222325ull

/* h extended by the n bytes at p (start from CX_FNV1A64_INIT). */
static inline uint64_t cx_fnv1a64(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

#endif
