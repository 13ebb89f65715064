/*
 * Unit tests of shard/grow.c: the adaptive growth plan over a heat tracker and a shard map (the
 * window rule and the current-second rule, exactly at their thresholds), and what the plan
 * hands its callback.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "shard/shard.h"
#include "tests/support/events.h"

/* 2026-12-01T00:00:00Z: an arbitrary second on the producer clock. */
#define T0 1796083200LL

struct fixture {
    struct shard_heat *heat;
    struct shard_map *map;
    int32_t day;
};

struct plan_record {
    uint32_t calls;
    struct shard_growth last;
    int stop_with;
};

static int record_growth(const struct shard_growth *growth, void *user)
{
    struct plan_record *r = user;
    r->calls++;
    r->last = *growth;
    return r->stop_with;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(shard_heat_create(1000, &f->heat), 0);
    assert_int_equal(shard_map_open(NULL, 4, 0, &f->map), 0);
    f->day = test_day_of("2026-01-21");
    assert_int_equal(shard_map_ensure(f->map, f->day), 4);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shard_heat_destroy(f->heat);
    shard_map_close(f->map);
    free(f);
    return 0;
}

static void observe(struct fixture *f, int64_t second, int32_t day, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        shard_heat_observe(f->heat, second, day, (uint32_t)(i % 4), 0, NULL);
    }
}

/* Plans at now_ms with the map's counts, capacity 1000, at most 256 shards. */
static struct plan_record plan(struct fixture *f, int64_t now_ms)
{
    struct plan_record r = {0};
    assert_int_equal(shard_growth_plan(f->heat, f->map, 1000, 256, now_ms, record_growth, &r), 0);
    return r;
}

static void test_grow_window_rule_exact_threshold(void **state)
{
    /* Five complete seconds at exactly 4 shards x 1000/s are at capacity, not over it; one
     * event more is over, and the day doubles to 8 (25% headroom over 4000.2/s). */
    struct fixture *f = *state;
    for (int64_t s = 0; s < 5; s++) {
        observe(f, T0 + s, f->day, 4000);
    }
    assert_true(shard_heat_advance(f->heat, T0 + 5));
    struct plan_record r = plan(f, (T0 + 5) * 1000 + 10);
    assert_int_equal(r.calls, 0);
    observe(f, T0 + 4, f->day, 1); /* a late event of a complete second */
    r = plan(f, (T0 + 5) * 1000 + 10);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.day, f->day);
    assert_int_equal(r.last.from, 4);
    assert_int_equal(r.last.to, 8);
    assert_int_equal(r.last.at_ms, (T0 + 5) * 1000 + 10);
    assert_non_null(strstr(r.last.reason, "over 5 s > 4 shards x 1000/s"));
}

static void test_grow_current_second_rule_exact_threshold(void **state)
{
    /* 4000 events in the current second are at capacity; the 4001st is over it at once,
     * without waiting for the second to complete. Half a second in, 4001 events project to
     * 8002/s, which needs 16 shards with 25% headroom (8 x 1000 < 10002.5). */
    struct fixture *f = *state;
    (void)shard_heat_advance(f->heat, T0);
    observe(f, T0, f->day, 4000);
    struct plan_record r = plan(f, T0 * 1000 + 500);
    assert_int_equal(r.calls, 0);
    observe(f, T0, f->day, 1);
    r = plan(f, T0 * 1000 + 500);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.from, 4);
    assert_int_equal(r.last.to, 16);
    assert_non_null(strstr(r.last.reason, "4001 events in this second (~8002/s)"));
    /* At the very start of a second the projection uses a tenth of a second at least. */
    r = plan(f, T0 * 1000 + 1);
    assert_int_equal(r.last.to, 64); /* 40010/s x 1.25 / 1000 -> 50.01 -> 64 */
    /* Late in the second it is nearly the count itself: 4001/0.95 s x 1.25 -> 8 shards. */
    r = plan(f, T0 * 1000 + 950);
    assert_int_equal(r.last.to, 8);
}

static void test_grow_larger_of_both_rules(void **state)
{
    /* A day hot for five seconds and hotter now: the larger target wins. */
    struct fixture *f = *state;
    for (int64_t s = 0; s < 5; s++) {
        observe(f, T0 + s, f->day, 6000); /* window: 6000/s -> 8 shards */
    }
    assert_true(shard_heat_advance(f->heat, T0 + 5));
    observe(f, T0 + 5, f->day, 20000); /* now: 20000/s by 1 s -> 32 shards */
    struct plan_record r = plan(f, (T0 + 5) * 1000 + 999);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.to, 32);
}

static void test_grow_respects_map_and_limits(void **state)
{
    /* Days the map does not know are skipped; a day at the maximum does not grow; capacity 0
     * plans nothing; a non-zero return from the callback stops the plan. */
    struct fixture *f = *state;
    int32_t unknown = f->day + 1;
    int32_t other = f->day + 2;
    assert_int_equal(shard_map_ensure(f->map, other), 4);
    observe(f, T0, unknown, 50000);
    observe(f, T0, f->day, 50000);
    observe(f, T0, other, 50000);
    struct plan_record r = plan(f, T0 * 1000 + 999);
    assert_int_equal(r.calls, 2);
    r = (struct plan_record){.stop_with = 9};
    assert_int_equal(
        shard_growth_plan(f->heat, f->map, 1000, 256, T0 * 1000 + 999, record_growth, &r), 9);
    assert_int_equal(r.calls, 1);
    r = (struct plan_record){0};
    assert_int_equal(shard_growth_plan(f->heat, f->map, 0, 256, T0 * 1000, record_growth, &r), 0);
    assert_int_equal(r.calls, 0);
    assert_int_equal(shard_map_grow_sync(f->map, f->day, 256), 0);
    assert_int_equal(shard_map_grow_sync(f->map, other, 256), 0);
    r = plan(f, T0 * 1000 + 999);
    assert_int_equal(r.calls, 0);
    /* Growth is capped at max_shards: 50000/s would want 64 shards; the cap is 16. */
    int32_t capped = f->day + 3;
    assert_int_equal(shard_map_ensure(f->map, capped), 4);
    observe(f, T0, capped, 50000);
    r = (struct plan_record){0};
    assert_int_equal(
        shard_growth_plan(f->heat, f->map, 1000, 16, T0 * 1000 + 999, record_growth, &r), 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.day, capped);
    assert_int_equal(r.last.to, 16);
}

static void test_grow_latest_day_inherits_previous_count(void **state)
{
    /* A stream in time order moves to a new day at midnight: the map's latest day, once
     * written, starts with the count of the day before it (a quiet first event is enough);
     * an older day written late does not inherit; the inheritance is capped at max_shards. */
    struct fixture *f = *state;
    assert_int_equal(shard_map_grow_sync(f->map, f->day, 32), 0);
    int32_t next = f->day + 1;
    int32_t older = f->day - 5;
    assert_int_equal(shard_map_ensure(f->map, next), 4);
    assert_int_equal(shard_map_ensure(f->map, older), 4);
    assert_int_equal(shard_map_sync(f->map), 0);
    observe(f, T0, next, 1);
    observe(f, T0, older, 1);
    struct plan_record r = plan(f, T0 * 1000 + 500);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.day, next);
    assert_int_equal(r.last.from, 4);
    assert_int_equal(r.last.to, 32);
    assert_non_null(strstr(r.last.reason, "the 32 shards of 2026-01-21, the day before it"));
    r = (struct plan_record){0};
    assert_int_equal(
        shard_growth_plan(f->heat, f->map, 1000, 16, T0 * 1000 + 500, record_growth, &r), 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.to, 16);
    /* With the count taken, nothing more to do; a rate above it still grows it further. */
    assert_int_equal(shard_map_grow_sync(f->map, next, 32), 0);
    r = plan(f, T0 * 1000 + 500);
    assert_int_equal(r.calls, 0);
    observe(f, T0, next, 40000);
    r = plan(f, T0 * 1000 + 999);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.to, 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_grow_window_rule_exact_threshold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_current_second_rule_exact_threshold, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_grow_larger_of_both_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_respects_map_and_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_latest_day_inherits_previous_count, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
