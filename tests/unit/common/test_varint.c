/*
 * Unit tests of common/'s varint codec (common.h, "varints"): round trips at every encoded
 * length, the boundary values, zigzag's extremes, and the one rule for bad input (truncation
 * at every byte, a 10th byte past 64 bits, input longer than 10 bytes). Stored blocks and the
 * orders-by-id log decode through this codec, so what it accepts is what a reader accepts.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "common/common.h"

/* The smallest value that needs `bytes` bytes (1..10). */
static uint64_t varint_length_min(size_t bytes)
{
    return bytes == 1 ? 0 : (uint64_t)1 << (7u * (bytes - 1u));
}

/* Encodes v, checks the length and that decoding the exact bytes gives v back. */
static void varint_round_trip(uint64_t v, size_t bytes_expected)
{
    uint8_t buf[DS_VARINT_BYTES_MAX + 4];
    memset(buf, 0xAA, sizeof(buf));
    size_t n = ds_varint_put(buf, v);
    assert_int_equal(n, bytes_expected);
    assert_int_equal(ds_varint_bytes(v), bytes_expected);
    assert_int_equal(buf[n], 0xAA); /* nothing written past the returned length */
    for (size_t i = 0; i + 1 < n; i++) {
        assert_true(buf[i] & 0x80u);
    }
    assert_false(buf[n - 1] & 0x80u);
    uint64_t got = ~v;
    assert_int_equal(ds_varint_get(buf, n, &got), n);
    assert_true(got == v);
    /* The cursor form reads the same and moves past exactly the varint. */
    const uint8_t *p = buf;
    got = ~v;
    assert_true(ds_varint_next(&p, buf + sizeof(buf), &got));
    assert_true(got == v);
    assert_ptr_equal(p, buf + n);
}

static void test_varint_round_trip_every_length(void **state)
{
    /* Intent: each length 1..10 encodes and decodes at its smallest and largest value. */
    (void)state;
    for (size_t bytes = 1; bytes <= DS_VARINT_BYTES_MAX; bytes++) {
        uint64_t lo = varint_length_min(bytes);
        uint64_t hi = bytes == DS_VARINT_BYTES_MAX ? UINT64_MAX : varint_length_min(bytes + 1) - 1;
        varint_round_trip(lo, bytes);
        varint_round_trip(hi, bytes);
        varint_round_trip(lo + (hi - lo) / 3, bytes);
    }
}

static void test_varint_round_trip_boundaries(void **state)
{
    /* Intent: the named boundaries encode to the lengths and bytes LEB128 defines. */
    (void)state;
    varint_round_trip(0, 1);
    varint_round_trip(127, 1);
    varint_round_trip(128, 2);
    varint_round_trip((uint64_t)INT64_MAX, 9);
    varint_round_trip(UINT64_MAX, 10);
    uint8_t buf[DS_VARINT_BYTES_MAX];
    assert_int_equal(ds_varint_put(buf, 128), 2);
    assert_int_equal(buf[0], 0x80);
    assert_int_equal(buf[1], 0x01);
    assert_int_equal(ds_varint_put(buf, 300), 2);
    assert_int_equal(buf[0], 0xAC);
    assert_int_equal(buf[1], 0x02);
    assert_int_equal(ds_varint_put(buf, UINT64_MAX), 10);
    for (size_t i = 0; i < 9; i++) {
        assert_int_equal(buf[i], 0xFF);
    }
    assert_int_equal(buf[9], 0x01);
}

static void test_varint_zigzag_extremes(void **state)
{
    /* Intent: zigzag maps small magnitudes to small codes, is a bijection at the extremes, and
     * the extremes survive a varint round trip. */
    (void)state;
    assert_true(ds_zigzag(0) == 0);
    assert_true(ds_zigzag(-1) == 1);
    assert_true(ds_zigzag(1) == 2);
    assert_true(ds_zigzag(-2) == 3);
    assert_true(ds_zigzag(INT64_MAX) == UINT64_MAX - 1);
    assert_true(ds_zigzag(INT64_MIN) == UINT64_MAX);
    const int64_t values[] = {
        0,         1,         -1,        63,        -64,           64,           -65,
        INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1};
    for (size_t i = 0; i < DS_ARRAY_LEN(values); i++) {
        uint64_t code = ds_zigzag(values[i]);
        assert_true(ds_unzigzag(code) == values[i]);
        uint8_t buf[DS_VARINT_BYTES_MAX];
        size_t n = ds_varint_put(buf, code);
        uint64_t got = 0;
        assert_int_equal(ds_varint_get(buf, n, &got), n);
        assert_true(ds_unzigzag(got) == values[i]);
    }
}

static void test_varint_get_truncated_at_every_byte(void **state)
{
    /* Intent: a varint cut before its last byte fails at every cut, for every length, and leaves
     * the outputs untouched. */
    (void)state;
    for (size_t bytes = 1; bytes <= DS_VARINT_BYTES_MAX; bytes++) {
        uint8_t buf[DS_VARINT_BYTES_MAX];
        uint64_t v = bytes == DS_VARINT_BYTES_MAX ? UINT64_MAX : varint_length_min(bytes + 1) - 1;
        size_t n = ds_varint_put(buf, v);
        assert_int_equal(n, bytes);
        for (size_t cut = 0; cut < n; cut++) {
            uint64_t got = 12345;
            assert_int_equal(ds_varint_get(buf, cut, &got), 0);
            assert_true(got == 12345);
            const uint8_t *p = buf;
            assert_false(ds_varint_next(&p, buf + cut, &got));
            assert_ptr_equal(p, buf);
            assert_true(got == 12345);
        }
    }
}

static void test_varint_get_bad_tenth_byte(void **state)
{
    /* Intent: a 10th byte of 0 or 1 is the top bit of a 64-bit value; any other (a higher bit,
     * or the continuation bit, alone or with bit 0) is a value past 64 bits and fails. */
    (void)state;
    uint8_t buf[DS_VARINT_BYTES_MAX + 2];
    memset(buf, 0xFF, 9);
    for (unsigned tenth = 0; tenth <= 0xFF; tenth++) {
        buf[9] = (uint8_t)tenth;
        buf[10] = 0x00; /* a terminator a lenient decoder might go on to */
        buf[11] = 0x00;
        uint64_t got = 7;
        size_t n = ds_varint_get(buf, sizeof(buf), &got);
        if (tenth <= 1) {
            assert_int_equal(n, 10);
            assert_true(got == (tenth == 1 ? UINT64_MAX : UINT64_MAX >> 1));
        } else {
            assert_int_equal(n, 0);
            assert_true(got == 7);
        }
    }
}

static void test_varint_get_overlong_fails(void **state)
{
    /* Intent: more than 10 bytes of continuation fail even with a terminator after them, and the
     * longest legal encodings (10 bytes, padding included) decode. */
    (void)state;
    uint8_t buf[16];
    memset(buf, 0x80, sizeof(buf));
    buf[15] = 0x00;
    uint64_t got = 9;
    assert_int_equal(ds_varint_get(buf, sizeof(buf), &got), 0);
    assert_true(got == 9);
    /* Padded zero: 0x80 x9 then 0x00 is 10 bytes worth 0, within the rule. */
    memset(buf, 0x80, 9);
    buf[9] = 0x00;
    assert_int_equal(ds_varint_get(buf, sizeof(buf), &got), 10);
    assert_true(got == 0);
    /* The same with a 10th continuation byte is 11+ bytes: bad. */
    buf[9] = 0x80;
    buf[10] = 0x00;
    got = 9;
    assert_int_equal(ds_varint_get(buf, sizeof(buf), &got), 0);
    assert_true(got == 9);
}

static void test_varint_get_empty_fails(void **state)
{
    /* Intent: no bytes is truncated input, not a zero. */
    (void)state;
    uint8_t byte = 0;
    uint64_t got = 3;
    assert_int_equal(ds_varint_get(&byte, 0, &got), 0);
    assert_true(got == 3);
}

static void test_varint_le_round_trip(void **state)
{
    /* Intent: the little-endian helpers store the low byte first and read back what they wrote. */
    (void)state;
    uint8_t buf[8];
    ds_put_le16(buf, 0xA1B2u);
    assert_int_equal(buf[0], 0xB2);
    assert_int_equal(buf[1], 0xA1);
    assert_int_equal(ds_get_le16(buf), 0xA1B2u);
    ds_put_le32(buf, 0x01020304u);
    assert_int_equal(buf[0], 0x04);
    assert_int_equal(ds_get_le32(buf), 0x01020304u);
    ds_put_le64(buf, 0x0102030405060708ull);
    assert_int_equal(buf[0], 0x08);
    assert_int_equal(buf[7], 0x01);
    assert_true(ds_get_le64(buf) == 0x0102030405060708ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varint_round_trip_every_length),
        cmocka_unit_test(test_varint_round_trip_boundaries),
        cmocka_unit_test(test_varint_zigzag_extremes),
        cmocka_unit_test(test_varint_get_truncated_at_every_byte),
        cmocka_unit_test(test_varint_get_bad_tenth_byte),
        cmocka_unit_test(test_varint_get_overlong_fails),
        cmocka_unit_test(test_varint_get_empty_fails),
        cmocka_unit_test(test_varint_le_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
