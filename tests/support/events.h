/*
 * Test data: a seedable random generator, ids, events and days, and their comparison.
 *
 * Single-threaded test code only; the generator's whole state is the uint64_t the caller holds,
 * so a test replays exactly from the seed it printed (tempdir.h: test_seed). The builders and
 * assertions use cmocka's assert_* macros: a misuse or a mismatch fails the running test.
 *
 * Two random event shapes are kept apart on purpose, each drawing its own fixed sequence from the
 * generator so that a recorded seed keeps replaying the same events:
 * - test_event_random_wide: every edge a codec must survive (ids of arbitrary bytes, integers up
 *   to INT64_MAX, timestamps at both ends of the day, amounts from INT64_MIN to INT64_MAX);
 * - test_event_random_plain: ordinary events for model-based tests (lower-case string ids, a few
 *   common statuses, amounts in everyday ranges plus some near INT64_MAX).
 */
#ifndef DS_TEST_EVENTS_H
#define DS_TEST_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* The statuses random events draw from, in this order: "paid", "shipped", "pending", "",
 * "refunded", "cancelled" (the first TEST_STATUS_PLAIN_COUNT, which the plain shape uses), then
 * "x" and one of exactly DS_STATUS_BYTES_MAX bytes. */
#define TEST_STATUS_POOL_COUNT 8u
#define TEST_STATUS_PLAIN_COUNT 6u
extern const char *const test_status_pool[TEST_STATUS_POOL_COUNT];

/* splitmix64: the next value of the stream state points to (any seed is fine). */
uint64_t test_rng_next(uint64_t *state);
/* test_rng_next(state) % bound: uniform enough below bound for tests. bound >= 1. */
uint64_t test_rng_below(uint64_t *state, uint64_t bound);

/* Sets id to the integer value (all other bytes zero). */
void test_id_int(struct ds_id *id, int64_t value);
/* Sets id to the string of len bytes at text (any bytes, 1 <= len <= DS_ID_BYTES_MAX; all other
 * bytes zero). */
void test_id_string(struct ds_id *id, const void *text, size_t len);
/* The same id: same type and the same value or the same bytes. */
bool test_id_equal(const struct ds_id *a, const struct ds_id *b);

/* Sets e's status to the NUL-terminated status (at most DS_STATUS_BYTES_MAX bytes). */
void test_event_set_status(struct ds_event *e, const char *status);
/* The same event: equal ids, timestamps, amounts, status bytes, versions, retract flags and
 * canonical items. */
bool test_event_equal(const struct ds_event *a, const struct ds_event *b);
/* Asserts got equals want, one field at a time so that a failure names the field. */
void test_event_assert_equal(const struct ds_event *want, const struct ds_event *got);

/* A random event on day with the edge cases of the header comment; its status is one of the
 * first statuses entries of the pool above (1 <= statuses <= TEST_STATUS_POOL_COUNT). */
void test_event_random_wide(uint64_t *rng, int32_t day, size_t statuses, struct ds_event *e);
/* A random ordinary event on day, as described in the header comment; its status is one of the
 * first TEST_STATUS_PLAIN_COUNT entries of the pool. */
void test_event_random_plain(uint64_t *rng, int32_t day, struct ds_event *e);

/* The day number of a "YYYY-MM-DD" date, which must be valid. */
int32_t test_day_of(const char *text);

#endif /* DS_TEST_EVENTS_H */
