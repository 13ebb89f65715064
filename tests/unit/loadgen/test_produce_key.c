/*
 * Unit tests of loadgen/produce_key.c: the Kafka message keys of `dayshard produce --key`.
 * Checks the mode names both ways, each mode's text for integer and string ids, the
 * docs/EVENTS.md partition example, the shard count callback and its fallback, a property check
 * over generated events (every partition key parses and routes like shard_of_id), and -ENOSPC.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "loadgen/loadgen.h"
#include "shard/shard.h"
#include "tests/support/tempdir.h"

#define KEY_SEED_DEFAULT 7

static struct ds_event event_int(int64_t order_id, int64_t customer_id, int64_t ts_ms)
{
    struct ds_event event;
    memset(&event, 0, sizeof(event));
    event.order_id.value = order_id;
    event.customer_id.value = customer_id;
    event.ts_ms = ts_ms;
    return event;
}

static void id_set_text(struct ds_id *id, const char *text)
{
    memset(id, 0, sizeof(*id));
    id->is_string = true;
    id->len = (uint8_t)strlen(text);
    memcpy(id->text, text, id->len);
}

/* The key of event under mode, NUL-terminated for comparison, with base shards 4 and no
 * callback. */
static const char *key_of(enum loadgen_produce_key mode, const struct ds_event *event,
                          uint32_t base_shards, char *dst)
{
    int n = loadgen_produce_key_format(mode, event, base_shards, dst, LOADGEN_PRODUCE_KEY_BYTES_MAX,
                                       NULL, NULL);
    assert_true(n >= 1 && n <= (int)LOADGEN_PRODUCE_KEY_BYTES_MAX);
    dst[n] = '\0';
    return dst;
}

static int64_t ms_of(int32_t year, uint32_t month, uint32_t day, int64_t ms_in_day)
{
    return (int64_t)ds_days_from_civil(year, month, day) * 86400000LL + ms_in_day;
}

static void test_produce_key_parse_names_round_trip(void **state)
{
    /* Every mode's name parses back to it; anything else is -DS_EUSAGE and leaves *out alone. */
    (void)state;
    const char *names[] = {"order", "customer", "day", "partition"};
    for (size_t i = 0; i < DS_ARRAY_LEN(names); i++) {
        enum loadgen_produce_key mode = LOADGEN_PRODUCE_KEY_DAY;
        assert_int_equal(loadgen_produce_key_parse(names[i], &mode), 0);
        assert_int_equal(mode, (enum loadgen_produce_key)i);
        assert_string_equal(loadgen_produce_key_name(mode), names[i]);
    }
    const char *bad[] = {"", "Order", "days", "partition ", "order_id", "shard"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        enum loadgen_produce_key mode = LOADGEN_PRODUCE_KEY_CUSTOMER;
        assert_int_equal(loadgen_produce_key_parse(bad[i], &mode), -DS_EUSAGE);
        assert_int_equal(mode, LOADGEN_PRODUCE_KEY_CUSTOMER);
    }
    assert_string_equal(loadgen_produce_key_name((enum loadgen_produce_key)4), "unknown");
}

static void test_produce_key_format_ids_as_text(void **state)
{
    /* order and customer: the decimal text of an integer id (up to 2^63-1), a string id's bytes
     * as they are (64 bytes the longest). */
    (void)state;
    char key[LOADGEN_PRODUCE_KEY_BYTES_MAX + 1];
    struct ds_event event = event_int(106, 7, ms_of(2026, 1, 21, 0));
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_ORDER, &event, 4, key), "106");
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_CUSTOMER, &event, 4, key), "7");
    event = event_int(INT64_MAX, 1, 0);
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_ORDER, &event, 4, key), "9223372036854775807");
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_CUSTOMER, &event, 4, key), "1");
    id_set_text(&event.order_id, "ord-42");
    char long_id[DS_ID_BYTES_MAX + 1];
    memset(long_id, 'c', DS_ID_BYTES_MAX);
    long_id[DS_ID_BYTES_MAX] = '\0';
    id_set_text(&event.customer_id, long_id);
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_ORDER, &event, 4, key), "ord-42");
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_CUSTOMER, &event, 4, key), long_id);
}

static void test_produce_key_format_day_is_utc_date(void **state)
{
    /* day: YYYY-MM-DD of the event's UTC day, at both ends of a day and of the valid range. */
    (void)state;
    char key[LOADGEN_PRODUCE_KEY_BYTES_MAX + 1];
    struct ds_event event = event_int(1, 1, ms_of(2026, 1, 21, 0));
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_DAY, &event, 4, key), "2026-01-21");
    event.ts_ms = ms_of(2026, 1, 21, 86399999);
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_DAY, &event, 4, key), "2026-01-21");
    event.ts_ms = ms_of(2026, 1, 22, 0);
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_DAY, &event, 4, key), "2026-01-22");
    event.ts_ms = DS_TS_MS_MIN;
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_DAY, &event, 4, key), "1970-01-01");
    event.ts_ms = DS_TS_MS_MAX;
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_DAY, &event, 4, key), "9999-12-31");
}

static void test_produce_key_format_partition_design_example(void **state)
{
    /* docs/EVENTS.md: with S = 3, orders 106, 340, 341, 342 of 2026-01-21 land in shards
     * 1, 1, 2, 0. A string id routes by FNV-1a, as shard_of_id does. */
    (void)state;
    char key[LOADGEN_PRODUCE_KEY_BYTES_MAX + 1];
    const int64_t ids[] = {106, 340, 341, 342};
    const char *expected[] = {"DAY#2026-01-21#1", "DAY#2026-01-21#1", "DAY#2026-01-21#2",
                              "DAY#2026-01-21#0"};
    for (size_t i = 0; i < DS_ARRAY_LEN(ids); i++) {
        struct ds_event event = event_int(ids[i], 5, ms_of(2026, 1, 21, 36000000));
        assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_PARTITION, &event, 3, key), expected[i]);
    }
    struct ds_event event = event_int(1, 5, ms_of(2026, 1, 21, 0));
    id_set_text(&event.order_id, "file-s-1");
    char want[SHARD_KEY_TEXT_SIZE];
    size_t len =
        shard_key_format(ds_days_from_civil(2026, 1, 21), shard_of_id(&event.order_id, 1024), want);
    assert_true(len > 0);
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_PARTITION, &event, 1024, key), want);
    event = event_int(5, 5, ms_of(2026, 1, 21, 0));
    assert_string_equal(key_of(LOADGEN_PRODUCE_KEY_PARTITION, &event, 1, key), "DAY#2026-01-21#0");
}

/* A shard map view: day 2026-01-21 has 16 shards, every other day is unknown (0). Counts
 * calls and keeps the last day asked for. */
struct shards_view {
    int32_t hot_day;
    uint32_t calls;
    int32_t last_day;
};

static uint32_t shards_of_day(int32_t day, void *user)
{
    struct shards_view *view = user;
    view->calls++;
    view->last_day = day;
    return day == view->hot_day ? 16u : 0u;
}

static void test_produce_key_format_partition_asks_shard_map(void **state)
{
    /* partition asks the callback for S(day) of the event's day; an unknown day (0) gets the
     * base count. The other modes never call it. */
    (void)state;
    struct shards_view view = {.hot_day = ds_days_from_civil(2026, 1, 21)};
    char key[LOADGEN_PRODUCE_KEY_BYTES_MAX + 1];
    struct ds_event event = event_int(16 * 9 + 13, 5, ms_of(2026, 1, 21, 500));
    int n = loadgen_produce_key_format(LOADGEN_PRODUCE_KEY_PARTITION, &event, 4, key, sizeof(key),
                                       shards_of_day, &view);
    assert_int_equal(n, 17);
    key[n] = '\0';
    assert_string_equal(key, "DAY#2026-01-21#13");
    assert_int_equal(view.calls, 1);
    assert_int_equal(view.last_day, view.hot_day);
    event.ts_ms = ms_of(2026, 1, 22, 500);
    n = loadgen_produce_key_format(LOADGEN_PRODUCE_KEY_PARTITION, &event, 4, key, sizeof(key),
                                   shards_of_day, &view);
    assert_int_equal(n, 16);
    key[n] = '\0';
    assert_string_equal(key, "DAY#2026-01-22#1"); /* 157 mod 4 */
    assert_int_equal(view.calls, 2);
    assert_int_equal(view.last_day, view.hot_day + 1);
    const enum loadgen_produce_key others[] = {
        LOADGEN_PRODUCE_KEY_ORDER, LOADGEN_PRODUCE_KEY_CUSTOMER, LOADGEN_PRODUCE_KEY_DAY};
    for (size_t i = 0; i < DS_ARRAY_LEN(others); i++) {
        assert_true(loadgen_produce_key_format(others[i], &event, 4, key, sizeof(key),
                                               shards_of_day, &view) > 0);
    }
    assert_int_equal(view.calls, 2);
}

static void test_produce_key_format_generated_events_route_like_shards(void **state)
{
    /* Property, over generated events with integer and string ids: the partition key parses
     * (shard_key_parse) to the event's day and to shard_of_id(order_id, S) < S, the day key is
     * the same date, and the order key is the id's text. */
    (void)state;
    struct loadgen_workload_config cfg;
    loadgen_workload_defaults(&cfg);
    cfg.seed = test_seed_or(KEY_SEED_DEFAULT);
    cfg.events = 20000;
    cfg.string_id_permille = 500;
    struct loadgen_workload *w = NULL;
    assert_int_equal(loadgen_workload_create(&cfg, &w), 0);
    struct ds_event event;
    const uint32_t shard_counts[] = {1, 3, 4, 7, 1024};
    uint64_t count = 0;
    while (loadgen_workload_next(w, &event)) {
        uint32_t shards = shard_counts[count++ % DS_ARRAY_LEN(shard_counts)];
        char key[LOADGEN_PRODUCE_KEY_BYTES_MAX];
        int n = loadgen_produce_key_format(LOADGEN_PRODUCE_KEY_PARTITION, &event, shards, key,
                                           sizeof(key), NULL, NULL);
        assert_true(n > 0);
        int32_t day = -1;
        uint32_t shard = SHARD_COUNT_MAX;
        assert_int_equal(shard_key_parse(key, (size_t)n, &day, &shard), 0);
        assert_int_equal(day, ds_day_from_ms(event.ts_ms));
        assert_true(shard < shards);
        assert_int_equal(shard, shard_of_id(&event.order_id, shards));
        char date[DS_DATE_TEXT_SIZE];
        ds_date_format(day, date);
        n = loadgen_produce_key_format(LOADGEN_PRODUCE_KEY_DAY, &event, shards, key, sizeof(key),
                                       NULL, NULL);
        assert_int_equal(n, 10);
        assert_memory_equal(key, date, 10);
        n = loadgen_produce_key_format(LOADGEN_PRODUCE_KEY_ORDER, &event, shards, key, sizeof(key),
                                       NULL, NULL);
        if (event.order_id.is_string) {
            assert_int_equal(n, event.order_id.len);
            assert_memory_equal(key, event.order_id.text, (size_t)n);
        } else {
            char digits[24];
            int len = snprintf(digits, sizeof(digits), "%lld", (long long)event.order_id.value);
            assert_int_equal(n, len);
            assert_memory_equal(key, digits, (size_t)n);
        }
    }
    assert_int_equal(count, cfg.events);
    loadgen_workload_destroy(w);
}

static void test_produce_key_format_small_buffer_enospc(void **state)
{
    /* A buffer one byte short of the key is -ENOSPC and left untouched; the exact size works. */
    (void)state;
    struct ds_event event = event_int(12345, 678, ms_of(2026, 1, 21, 0));
    const enum loadgen_produce_key modes[] = {LOADGEN_PRODUCE_KEY_ORDER,
                                              LOADGEN_PRODUCE_KEY_CUSTOMER, LOADGEN_PRODUCE_KEY_DAY,
                                              LOADGEN_PRODUCE_KEY_PARTITION};
    const size_t lengths[] = {5, 3, 10, 16};
    for (size_t i = 0; i < DS_ARRAY_LEN(modes); i++) {
        char key[LOADGEN_PRODUCE_KEY_BYTES_MAX];
        memset(key, '!', sizeof(key));
        assert_int_equal(
            loadgen_produce_key_format(modes[i], &event, 4, key, lengths[i] - 1, NULL, NULL),
            -ENOSPC);
        for (size_t j = 0; j < sizeof(key); j++) {
            assert_int_equal(key[j], '!');
        }
        assert_int_equal(
            loadgen_produce_key_format(modes[i], &event, 4, key, lengths[i], NULL, NULL),
            (int)lengths[i]);
        assert_int_equal(key[lengths[i]], '!');
    }
}

int main(void)
{
    printf("produce key tests: seed %lu (set DS_TEST_SEED to replay another)\n",
           (unsigned long)test_seed_or(KEY_SEED_DEFAULT));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_produce_key_parse_names_round_trip),
        cmocka_unit_test(test_produce_key_format_ids_as_text),
        cmocka_unit_test(test_produce_key_format_day_is_utc_date),
        cmocka_unit_test(test_produce_key_format_partition_design_example),
        cmocka_unit_test(test_produce_key_format_partition_asks_shard_map),
        cmocka_unit_test(test_produce_key_format_generated_events_route_like_shards),
        cmocka_unit_test(test_produce_key_format_small_buffer_enospc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
