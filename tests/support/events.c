/*
 * Test data shared by the unit tests: splitmix64, id and event builders, comparisons, and the
 * two random event shapes of events.h.
 *
 * Invariant: each generator draws the same values from the stream, in the same order, as the
 * copy it replaced in its test (test_block.c for the wide shape, test_storage.c for the plain
 * one), so seeds printed by earlier runs still replay. Change a draw and every recorded seed
 * means something else. Rejected: one merged event generator, which would have changed both
 * streams and lost the wide shape's edge cases or the plain shape's readable ids.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <assert.h>
#include <string.h>

#include "tests/support/events.h"

#define EVENTS_DAY_MS 86400000LL

const char *const test_status_pool[TEST_STATUS_POOL_COUNT] = {
    "paid",     "shipped",   "pending", "",
    "refunded", "cancelled", "x",       "a-status-of-exactly-32-bytes-abc"};
static_assert(TEST_STATUS_PLAIN_COUNT <= TEST_STATUS_POOL_COUNT, "plain statuses are a prefix");

uint64_t test_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t test_rng_below(uint64_t *state, uint64_t bound)
{
    ASSERT(bound > 0);
    return test_rng_next(state) % bound;
}

void test_id_int(struct ds_id *id, int64_t value)
{
    memset(id, 0, sizeof(*id));
    id->value = value;
}

void test_id_string(struct ds_id *id, const void *text, size_t len)
{
    assert_true(len >= 1 && len <= DS_ID_BYTES_MAX);
    memset(id, 0, sizeof(*id));
    id->is_string = true;
    id->len = (uint8_t)len;
    memcpy(id->text, text, len);
}

bool test_id_equal(const struct ds_id *a, const struct ds_id *b)
{
    if (a->is_string != b->is_string) {
        return false;
    }
    if (a->is_string) {
        return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
    }
    return a->value == b->value;
}

void test_event_set_status(struct ds_event *e, const char *status)
{
    size_t len = strlen(status);
    assert_true(len <= DS_STATUS_BYTES_MAX);
    e->status_len = (uint8_t)len;
    memcpy(e->status, status, len);
}

bool test_event_equal(const struct ds_event *a, const struct ds_event *b)
{
    return test_id_equal(&a->order_id, &b->order_id) &&
           test_id_equal(&a->customer_id, &b->customer_id) && a->ts_ms == b->ts_ms &&
           a->amount_units == b->amount_units && a->status_len == b->status_len &&
           memcmp(a->status, b->status, a->status_len) == 0 && a->has_version == b->has_version &&
           a->version == b->version && a->retract == b->retract &&
           a->items_bytes == b->items_bytes &&
           (a->items_bytes == 0 || memcmp(a->items, b->items, a->items_bytes) == 0);
}

void test_event_assert_equal(const struct ds_event *want, const struct ds_event *got)
{
    assert_true(test_id_equal(&want->order_id, &got->order_id));
    assert_true(test_id_equal(&want->customer_id, &got->customer_id));
    assert_true(want->ts_ms == got->ts_ms);
    assert_true(want->amount_units == got->amount_units);
    assert_int_equal(want->status_len, got->status_len);
    assert_memory_equal(want->status, got->status, want->status_len);
    assert_int_equal(want->has_version, got->has_version);
    assert_true(want->version == got->version);
    assert_int_equal(want->retract, got->retract);
    assert_int_equal(want->items_bytes, got->items_bytes);
    if (want->items_bytes > 0) {
        assert_memory_equal(want->items, got->items, want->items_bytes);
    }
}

/* ---- the wide shape ------------------------------------------------------------------------- */

/* An id of either type with magnitudes from 1 to 2^63-1 and strings of any bytes. */
static void events_random_id_wide(uint64_t *rng, struct ds_id *id)
{
    if (test_rng_below(rng, 3) == 0) {
        char text[DS_ID_BYTES_MAX];
        size_t len = 1 + (size_t)test_rng_below(rng, DS_ID_BYTES_MAX);
        for (size_t i = 0; i < len; i++) {
            text[i] = (char)test_rng_next(rng);
        }
        test_id_string(id, text, len);
        return;
    }
    int64_t value;
    switch (test_rng_below(rng, 5)) {
    case 0: value = 1 + (int64_t)test_rng_below(rng, 100); break;
    case 1: value = INT64_MAX - (int64_t)test_rng_below(rng, 3); break;
    case 2: value = 1 + (int64_t)(test_rng_next(rng) >> 1) % INT64_MAX; break;
    default: value = 100000 + (int64_t)test_rng_below(rng, 1000000); break;
    }
    test_id_int(id, value);
}

/* Amounts of every shape: zero, whole units, cents, four decimals, negative, near the limits. */
static int64_t events_random_amount_wide(uint64_t *rng)
{
    switch (test_rng_below(rng, 8)) {
    case 0: return 0;
    case 1: return (int64_t)test_rng_below(rng, 100000) * 10000;
    case 2: return -(int64_t)test_rng_below(rng, 100000) * 100;
    case 3: return (int64_t)test_rng_below(rng, 1000000000) - 500000000;
    case 4: return INT64_MAX - (int64_t)test_rng_below(rng, 3);
    case 5: return INT64_MIN + (int64_t)test_rng_below(rng, 3);
    case 6: return (int64_t)test_rng_next(rng);
    default: return (int64_t)test_rng_below(rng, 10000) * 1000;
    }
}

void test_event_random_wide(uint64_t *rng, int32_t day, size_t statuses, struct ds_event *e)
{
    assert_true(statuses >= 1 && statuses <= TEST_STATUS_POOL_COUNT);
    int64_t day_start_ms = (int64_t)day * EVENTS_DAY_MS;
    memset(e, 0, sizeof(*e));
    events_random_id_wide(rng, &e->order_id);
    events_random_id_wide(rng, &e->customer_id);
    switch (test_rng_below(rng, 10)) {
    case 0: e->ts_ms = day_start_ms; break;
    case 1: e->ts_ms = day_start_ms + EVENTS_DAY_MS - 1; break;
    default: e->ts_ms = day_start_ms + (int64_t)test_rng_below(rng, (uint64_t)EVENTS_DAY_MS); break;
    }
    e->amount_units = events_random_amount_wide(rng);
    test_event_set_status(e, test_status_pool[test_rng_below(rng, statuses)]);
}

/* ---- the plain shape ------------------------------------------------------------------------ */

/* One id in four a lower-case string, else an integer below 10^6 or, rarely, near INT64_MAX. */
static void events_random_id_plain(uint64_t *rng, struct ds_id *id)
{
    memset(id, 0, sizeof(*id));
    if (test_rng_below(rng, 4) == 0) {
        id->is_string = true;
        id->len = (uint8_t)(1 + test_rng_below(rng, DS_ID_BYTES_MAX));
        for (uint8_t i = 0; i < id->len; i++) {
            id->text[i] = (char)('a' + test_rng_below(rng, 26));
        }
        return;
    }
    id->value = test_rng_below(rng, 8) == 0 ? INT64_MAX - (int64_t)test_rng_below(rng, 10)
                                            : 1 + (int64_t)test_rng_below(rng, 1000000);
}

void test_event_random_plain(uint64_t *rng, int32_t day, struct ds_event *e)
{
    memset(e, 0, sizeof(*e));
    events_random_id_plain(rng, &e->order_id);
    events_random_id_plain(rng, &e->customer_id);
    e->ts_ms = (int64_t)day * EVENTS_DAY_MS + (int64_t)test_rng_below(rng, (uint64_t)EVENTS_DAY_MS);
    switch (test_rng_below(rng, 5)) {
    case 0: e->amount_units = (int64_t)test_rng_below(rng, 100000) * 100; break;
    case 1: e->amount_units = -(int64_t)test_rng_below(rng, 100000) * 10000; break;
    case 2: e->amount_units = INT64_MAX - (int64_t)test_rng_below(rng, 1000); break;
    default: e->amount_units = (int64_t)test_rng_below(rng, 10000000); break;
    }
    test_event_set_status(e, test_status_pool[test_rng_below(rng, TEST_STATUS_PLAIN_COUNT)]);
}

/* ---- days ----------------------------------------------------------------------------------- */

int32_t test_day_of(const char *text)
{
    int32_t day = -1;
    assert_int_equal(ds_date_parse(text, strlen(text), &day), 0);
    return day;
}
