/* crc32c.h - CRC-32C (Castagnoli), the checksum on every tensor payload and
 * checkpoint. Uses the SSE4.2 instruction when the CPU has it, a table
 * otherwise; both give the same value.
 */
#ifndef CX_CRC32C_H
#define CX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend crc (start with 0) over buf[0..len). cx_crc32c(0, "123456789", 9)
 * == 0xE3069283. */
uint32_t cx_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
