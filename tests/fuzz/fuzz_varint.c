/*
 * libFuzzer harness for common/'s varint codec (common.h, "varints"): stored blocks, the
 * orders-by-id log and canonical items are outside input after a crash or a bad disk, and every
 * varint in them is read by ds_varint_get.
 *
 * Input, read twice:
 *   as bytes:   decoded varint by varint from the front (a failure skips one byte). A varint that
 *               decodes re-encodes to at most as many bytes, carrying the same 7-bit groups, the
 *               dropped ones all zero (the input was padded), and decodes back to the same value;
 *               a failure is exactly the rule's: fewer than 10 bytes all with the continuation
 *               bit (truncated), or 9 of them then a 10th byte above 1 (past 64 bits).
 *   as numbers: each 8-byte little-endian group is a u64 that encodes in ds_varint_bytes bytes
 *               and decodes back, and as an int64 survives zigzag both ways.
 * Properties, any broken one aborts.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "tests/fuzz/fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

/* Whether the rule says src[0..len) holds no varint at its front. */
static bool varint_bad(const uint8_t *src, size_t len)
{
    for (size_t i = 0; i < len && i < DS_VARINT_BYTES_MAX; i++) {
        if (i == DS_VARINT_BYTES_MAX - 1u) {
            return src[i] > 1u;
        }
        if ((src[i] & 0x80u) == 0) {
            return false;
        }
    }
    return len < DS_VARINT_BYTES_MAX;
}

/* A decoded varint: its re-encoding is a consistent prefix of the input. */
static void check_decoded(const uint8_t *src, size_t n, uint64_t v)
{
    uint8_t again[DS_VARINT_BYTES_MAX];
    size_t m = ds_varint_put(again, v);
    check(m >= 1 && m <= n && m == ds_varint_bytes(v));
    for (size_t i = 0; i < m; i++) {
        check((again[i] & 0x7Fu) == (src[i] & 0x7Fu));
    }
    for (size_t i = m; i < n; i++) {
        check((src[i] & 0x7Fu) == 0);
    }
    /* The shortest encoding is the input itself. */
    check(m < n || memcmp(again, src, n) == 0);
    uint64_t w = ~v;
    check(ds_varint_get(again, m, &w) == m && w == v);
}

static void check_bytes(const uint8_t *data, size_t size)
{
    size_t at = 0;
    while (at < size) { /* each turn moves at by at least one byte */
        uint64_t v = 0x5A5A5A5A5A5A5A5Aull;
        size_t n = ds_varint_get(data + at, size - at, &v);
        check(n <= DS_VARINT_BYTES_MAX && n <= size - at);
        check((n == 0) == varint_bad(data + at, size - at));
        if (n == 0) {
            check(v == 0x5A5A5A5A5A5A5A5Aull);
            at++;
            continue;
        }
        check_decoded(data + at, n, v);
        const uint8_t *p = data + at;
        uint64_t w = 0;
        check(ds_varint_next(&p, data + size, &w) && w == v && p == data + at + n);
        at += n;
    }
}

static void check_numbers(const uint8_t *data, size_t size)
{
    struct fuzz_input in = {.p = data, .end = data + size};
    for (size_t i = 0; i < size / 8; i++) {
        uint64_t v = fuzz_take_le(&in, 8);
        uint8_t buf[DS_VARINT_BYTES_MAX];
        size_t n = ds_varint_put(buf, v);
        check(n == ds_varint_bytes(v));
        uint64_t w = ~v;
        check(ds_varint_get(buf, n, &w) == n && w == v);
        check(n == 1 || ds_varint_get(buf, n - 1, &w) == 0);
        int64_t s = (int64_t)v;
        check(ds_unzigzag(ds_zigzag(s)) == s);
        check(ds_zigzag(ds_unzigzag(v)) == v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_bytes(data, size);
    check_numbers(data, size);
    return 0;
}
