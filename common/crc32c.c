/*
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and RocksDB.
 * The hardware path uses the SSE4.2 crc32 instruction 8 bytes at a time (~20 GB/s); the table
 * path is the portable fallback and the test oracle. The choice is made per call from
 * __builtin_cpu_supports, which reads a value cached by the runtime at start-up.
 * Rejected: a third-party crc library (none is packaged for C in Debian 12 with SSE4.2 support).
 */
#include "common/common.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t table_entry(uint32_t index)
{
    uint32_t crc = index;
    for (int bit = 0; bit < 8; bit++) {
        crc = (crc & 1u) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return crc;
}

uint32_t ds_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    /* Bytewise with entries computed on the fly: only the oracle and odd CPUs come here. */
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc = (crc >> 8) ^ table_entry((crc ^ p[i]) & 0xFFu);
    }
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *data,
                                                            size_t len)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (len >= 8) {
        c = _mm_crc32_u64(c, ds_get_le64(p));
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len > 0) {
        c32 = _mm_crc32_u8(c32, *p);
        p++;
        len--;
    }
    return ~c32;
}
#endif

uint32_t ds_crc32c(uint32_t crc, const void *data, size_t len)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) {
        return crc32c_hw(crc, data, len);
    }
#endif
    return ds_crc32c_sw(crc, data, len);
}
