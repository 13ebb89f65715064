/*
 * Unit tests of shard/route.c: FNV-1a vectors, the shard function of docs/EVENTS.md, and
 * the partition key format and its strict parser.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "shard/shard.h"
#include "tests/support/events.h"

static int key_parse(const char *text, int32_t *day, uint32_t *shard)
{
    return shard_key_parse(text, strlen(text), day, shard);
}

static void test_route_fnv1a64_known_vectors(void **state)
{
    /* The published FNV-1a 64 test vectors, so other tools can reproduce our routing. */
    (void)state;
    assert_true(shard_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    assert_true(shard_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(shard_fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
    assert_true(shard_fnv1a64(NULL, 0) == 0xcbf29ce484222325ull);
}

static void test_route_shard_of_id_contract_example(void **state)
{
    /* docs/EVENTS.md: with S = 3, orders 106, 340, 341, 342 land in shards 1, 1, 2, 0. */
    (void)state;
    const int64_t ids[] = {106, 340, 341, 342};
    const uint32_t shards[] = {1, 1, 2, 0};
    for (size_t i = 0; i < DS_ARRAY_LEN(ids); i++) {
        struct ds_id id;
        test_id_int(&id, ids[i]);
        assert_int_equal(shard_of_id(&id, 3), shards[i]);
    }
}

static void test_route_shard_of_id_integer_is_modulus(void **state)
{
    /* Integer ids route by plain modulus, including the largest id and a single shard. */
    (void)state;
    struct ds_id max_id;
    test_id_int(&max_id, INT64_MAX);
    assert_int_equal(shard_of_id(&max_id, 1), 0);
    assert_int_equal(shard_of_id(&max_id, 1000), (uint32_t)(INT64_MAX % 1000));
    assert_int_equal(shard_of_id(&max_id, SHARD_COUNT_MAX), (uint32_t)(INT64_MAX % 1024));
    for (int64_t v = 1; v < 5000; v += 7) {
        struct ds_id id;
        test_id_int(&id, v);
        assert_int_equal(shard_of_id(&id, 17), (uint32_t)(v % 17));
    }
}

static void test_route_shard_of_id_string_uses_fnv(void **state)
{
    /* String ids route by FNV-1a 64 of their bytes, so "106" and 106 may differ. */
    (void)state;
    const char *texts[] = {"a", "foobar", "ord-106", "\xff\x00z"};
    for (size_t i = 0; i < DS_ARRAY_LEN(texts); i++) {
        struct ds_id id;
        test_id_string(&id, texts[i], strlen(texts[i]));
        for (uint32_t s = 1; s <= 64; s++) {
            assert_int_equal(shard_of_id(&id, s),
                             (uint32_t)(shard_fnv1a64(texts[i], strlen(texts[i])) % s));
        }
    }
    struct ds_id foobar;
    test_id_string(&foobar, "foobar", 6);
    assert_int_equal(shard_of_id(&foobar, 3), (uint32_t)(0x85944171f73967e8ull % 3));
    /* A 64-byte id, the longest allowed. */
    char long_text[DS_ID_BYTES_MAX + 1];
    memset(long_text, 'x', DS_ID_BYTES_MAX);
    long_text[DS_ID_BYTES_MAX] = '\0';
    struct ds_id long_id;
    test_id_string(&long_id, long_text, DS_ID_BYTES_MAX);
    assert_true(shard_of_id(&long_id, 7) < 7);
}

static void test_route_key_format_canonical(void **state)
{
    /* Keys are "DAY#YYYY-MM-DD#k" with k in plain decimal. */
    (void)state;
    char key[SHARD_KEY_TEXT_SIZE];
    assert_int_equal(shard_key_format(test_day_of("2026-01-21"), 2, key), 16);
    assert_string_equal(key, "DAY#2026-01-21#2");
    assert_int_equal(shard_key_format(0, 0, key), 16);
    assert_string_equal(key, "DAY#1970-01-01#0");
    assert_int_equal(shard_key_format(DS_DAY_MAX, SHARD_COUNT_MAX - 1, key), 19);
    assert_string_equal(key, "DAY#9999-12-31#1023");
    assert_int_equal(shard_key_format(test_day_of("2024-02-29"), 10, key), 17);
    assert_string_equal(key, "DAY#2024-02-29#10");
}

static void test_route_key_parse_round_trip(void **state)
{
    /* Every formatted key parses back to its day and shard. */
    (void)state;
    const int32_t days[] = {0, 1, test_day_of("2000-02-29"), test_day_of("2026-01-21"), DS_DAY_MAX};
    const uint32_t shards[] = {0, 1, 9, 10, 99, 100, 999, 1000, SHARD_COUNT_MAX - 1};
    for (size_t i = 0; i < DS_ARRAY_LEN(days); i++) {
        for (size_t j = 0; j < DS_ARRAY_LEN(shards); j++) {
            char key[SHARD_KEY_TEXT_SIZE];
            size_t len = shard_key_format(days[i], shards[j], key);
            assert_int_equal(strlen(key), len);
            int32_t day = -1;
            uint32_t shard = 9999;
            assert_int_equal(shard_key_parse(key, len, &day, &shard), 0);
            assert_int_equal(day, days[i]);
            assert_int_equal(shard, shards[j]);
        }
    }
}

static void test_route_key_parse_rejects_non_canonical(void **state)
{
    /* Anything but the exact canonical form is refused and leaves the outputs untouched. */
    (void)state;
    const char *bad[] = {
        "",                     /* empty */
        "DAY#",                 /* prefix only */
        "DAY#2026-01-21",       /* missing # and shard */
        "DAY#2026-01-21#",      /* missing shard */
        "DAY#2026-01-21-2",     /* wrong separator */
        "DAY2026-01-21#2",      /* missing # after DAY */
        "day#2026-01-21#2",     /* lowercase prefix */
        "DAY#2026-1-21#2",      /* bad day */
        "DAY#2026-02-30#2",     /* Feb 30 */
        "DAY#2025-02-29#0",     /* not a leap year */
        "DAY#1969-12-31#0",     /* before the epoch */
        "DAY#2026-13-01#0",     /* month 13 */
        "DAY#2026-01-21#1024",  /* k too big */
        "DAY#2026-01-21#99999", /* too many digits */
        "DAY#2026-01-21#02",    /* leading zero */
        "DAY#2026-01-21#-1",    /* sign */
        "DAY#2026-01-21#+1",    /* sign */
        "DAY#2026-01-21#2 ",    /* trailing space */
        "DAY#2026-01-21#2x",    /* trailing bytes */
        "DAY#2026-01-21#2\n",   /* trailing newline */
        " DAY#2026-01-21#2",    /* leading space */
        "DAY#2026-01-21##2",    /* double # */
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        int32_t day = 77;
        uint32_t shard = 77;
        assert_int_equal(key_parse(bad[i], &day, &shard), -DS_EUSAGE);
        assert_int_equal(day, 77);
        assert_int_equal(shard, 77);
    }
    /* An embedded NUL counts as a byte, not as the end of the key. */
    int32_t day = 0;
    uint32_t shard = 0;
    assert_int_equal(shard_key_parse("DAY#2026-01-21#2\0", 17, &day, &shard), -DS_EUSAGE);
    /* A key whose length stops early is judged on those bytes only. */
    assert_int_equal(shard_key_parse("DAY#2026-01-21#23", 16, &day, &shard), 0);
    assert_int_equal(shard, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_fnv1a64_known_vectors),
        cmocka_unit_test(test_route_shard_of_id_contract_example),
        cmocka_unit_test(test_route_shard_of_id_integer_is_modulus),
        cmocka_unit_test(test_route_shard_of_id_string_uses_fnv),
        cmocka_unit_test(test_route_key_format_canonical),
        cmocka_unit_test(test_route_key_parse_round_trip),
        cmocka_unit_test(test_route_key_parse_rejects_non_canonical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
