#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"

uint32_t cx_crc32c_sw(uint32_t crc, const void *buf, size_t len);

Test(crc32c, known_vectors)
{
    cr_assert_eq(cx_crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(cx_crc32c(0, "", 0), 0u);
    unsigned char zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof ones);
    /* RFC 3720 B.4 test vectors */
    cr_assert_eq(cx_crc32c(0, zeros, 32), 0x8A9136AAu);
    cr_assert_eq(cx_crc32c(0, ones, 32), 0x62A8AB43u);
    unsigned char inc[32];
    for (int i = 0; i < 32; i++)
        inc[i] = (unsigned char)i;
    cr_assert_eq(cx_crc32c(0, inc, 32), 0x46DD794Eu);
}

Test(crc32c, incremental_and_table_path_agree)
{
    size_t n = 100003;
    unsigned char *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 2654435761u >> 13);
    uint32_t whole = cx_crc32c(0, b, n);
    uint32_t parts = cx_crc32c(cx_crc32c(0, b, 777), b + 777, n - 777);
    cr_assert_eq(whole, parts);
    cr_assert_eq(whole, cx_crc32c_sw(0, b, n));
    b[500] ^= 1;
    cr_assert_neq(whole, cx_crc32c(0, b, n));
    free(b);
}
