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

static void test_grow_new_latest_day_starts_from_recent_rate(void **state)
{
    /* A stream in time order moves to a new day at midnight: the map's latest day, once
     * written, starts from what the day before's rate over the last 5 s needs, not from that
     * day's count (32 here, from an earlier burst); an older day written late starts at the
     * base count; the start is capped at max_shards. */
    struct fixture *f = *state;
    assert_int_equal(shard_map_grow_sync(f->map, f->day, 32), 0);
    int32_t next = f->day + 1;
    int32_t older = f->day - 5;
    assert_int_equal(shard_map_ensure(f->map, next), 4);
    assert_int_equal(shard_map_ensure(f->map, older), 4);
    assert_int_equal(shard_map_sync(f->map), 0);
    for (int64_t s = 1; s <= 5; s++) {
        observe(f, T0 - s, f->day, 12000); /* 12000/s: 16 shards take it with 25% headroom */
    }
    observe(f, T0, next, 1);
    observe(f, T0, older, 1);
    (void)shard_heat_advance(f->heat, T0);
    struct plan_record r = plan(f, T0 * 1000 + 500);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.day, next);
    assert_int_equal(r.last.from, 4);
    assert_int_equal(r.last.to, 16);
    assert_non_null(strstr(r.last.reason, "a new latest day starts at 16 shards for the 12000 "
                                          "events/s over 5 s of 2026-01-21 (32 shards)"));
    r = (struct plan_record){0};
    assert_int_equal(
        shard_growth_plan(f->heat, f->map, 1000, 8, T0 * 1000 + 500, record_growth, &r), 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.to, 8);
    /* With the count taken, nothing more to do; a rate above it still grows it further. */
    assert_int_equal(shard_map_grow_sync(f->map, next, 16), 0);
    r = plan(f, T0 * 1000 + 500);
    assert_int_equal(r.calls, 0);
    observe(f, T0, next, 40000);
    r = plan(f, T0 * 1000 + 999);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.to, 64);
}

static void test_grow_start_rule_only_while_the_day_is_new(void **state)
{
    /* Once a day has events older than the growth window, the day before's rate no longer
     * sizes it: a backfill of the day before at 30000/s grows that day, never the new one. */
    struct fixture *f = *state;
    int32_t next = f->day + 1;
    assert_int_equal(shard_map_ensure(f->map, next), 4);
    observe(f, T0, next, 100);
    (void)shard_heat_advance(f->heat, T0 + 10);
    for (int64_t s = 5; s <= 9; s++) {
        observe(f, T0 + s, f->day, 30000);
    }
    observe(f, T0 + 10, next, 100);
    struct plan_record r = plan(f, (T0 + 10) * 1000 + 500);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.last.day, f->day);
    assert_int_equal(r.last.to, 64);
    assert_int_equal(shard_map_grow_sync(f->map, f->day, 64), 0);
    r = plan(f, (T0 + 10) * 1000 + 500);
    assert_int_equal(r.calls, 0);
    assert_int_equal(shard_map_get(f->map, next), 4);
}

static void test_grow_start_target_band(void **state)
{
    /* The pure rule at its edges (capacity 1000/s, a 5 s window, the new day at 4 shards). */
    (void)state;
    /* Lower only at 80% of the lower count's threshold: 3200/s fits 4 shards, 3201/s not. */
    assert_int_equal(shard_start_target(5 * 3200, 5, 8, 4, 1000, 256), 4);
    assert_int_equal(shard_start_target(5 * 3201, 5, 8, 4, 1000, 256), 8);
    /* Up to the previous count's threshold the previous count; past it, growth from it. */
    assert_int_equal(shard_start_target(5 * 8000, 5, 8, 4, 1000, 256), 8);
    assert_int_equal(shard_start_target(5 * 8000 + 1, 5, 8, 4, 1000, 256), 16);
    /* After a burst at 128 shards, a quarter of its rate (25000 of 100000/s) starts at 32. */
    assert_int_equal(shard_start_target(5 * 25000, 5, 128, 4, 1000, 256), 32);
    assert_int_equal(shard_start_target(5 * 25601, 5, 128, 4, 1000, 256), 64);
    assert_int_equal(shard_start_target(0, 5, 128, 4, 1000, 256), 4);
    /* The previous count at or below the new day's: growth from the new day's own count. */
    assert_int_equal(shard_start_target(5 * 4000, 5, 4, 4, 1000, 256), 4);
    assert_int_equal(shard_start_target(5 * 5000, 5, 2, 4, 1000, 256), 8);
    assert_int_equal(shard_start_target(5 * 3000, 5, 2, 8, 1000, 256), 8);
    /* Capped: the previous count at max_shards; a count not a doubling of the new day's. */
    assert_int_equal(shard_start_target(5 * 60000, 5, 512, 4, 1000, 64), 64);
    assert_int_equal(shard_start_target(5 * 1000, 5, 512, 4, 1000, 64), 4);
    assert_int_equal(shard_start_target(5 * 9000, 5, 12, 4, 1000, 256), 12);
    assert_int_equal(shard_start_target(5 * 6000, 5, 12, 4, 1000, 256), 8);
    /* Off, or already at the maximum. */
    assert_int_equal(shard_start_target(5 * 60000, 5, 128, 4, 0, 256), 4);
    assert_int_equal(shard_start_target(5 * 60000, 5, 128, 16, 1000, 16), 16);
    assert_int_equal(
        shard_start_target(UINT64_MAX, 1, SHARD_COUNT_MAX, 1, SHARD_CAPACITY_MAX, SHARD_COUNT_MAX),
        SHARD_COUNT_MAX);
    /* Every previous count and rate: the start takes the rate (below the maximum), never
     * exceeds the previous count unless the rate is past its threshold, and is lower than the
     * previous count exactly when half of it takes the rate with 25% headroom. */
    for (uint32_t previous = 4; previous <= 256; previous *= 2) {
        for (uint64_t rate = 0; rate <= 300000; rate += 97) {
            uint32_t start = shard_start_target(5 * rate, 5, previous, 4, 1000, 256);
            assert_true(start >= 4);
            assert_true(start == 256 || (uint64_t)start * 1000 >= rate);
            if (rate <= (uint64_t)previous * 1000) {
                assert_true(start <= previous);
                bool half_takes_it = previous > 4 && rate * 5 <= (uint64_t)previous / 2 * 1000 * 4;
                assert_int_equal(start < previous, half_takes_it);
            } else {
                assert_int_equal(start, shard_growth_target(5 * rate, 5, previous, 1000, 256));
            }
        }
    }
}

/* ---- simulated streams: the plan applied as the node applies it ---------------------------- */

/* Capacity 100/s keeps the simulated streams small: 10000/s needs 128 shards. */
#define SIM_CAPACITY 100u
#define SIM_SLICES 10 /* the node plans at least every 50 ms; here every 100 ms */
#define SIM_GROWTHS_MAX 64u

struct sim {
    struct shard_heat *heat;
    struct shard_map *map;
    uint32_t growth_count;
    struct shard_growth growths[SIM_GROWTHS_MAX];
    uint64_t events_per_shard[8][256];
};

static int sim_apply(const struct shard_growth *growth, void *user)
{
    struct sim *sim = user;
    assert_true(sim->growth_count < SIM_GROWTHS_MAX);
    sim->growths[sim->growth_count++] = *growth;
    assert_int_equal(shard_map_grow_sync(sim->map, growth->day, growth->to), 0);
    return 0;
}

static struct sim *sim_create(void)
{
    struct sim *sim = calloc(1, sizeof(*sim));
    assert_non_null(sim);
    assert_int_equal(shard_heat_create(SIM_CAPACITY, &sim->heat), 0);
    assert_int_equal(shard_map_open(NULL, 4, 0, &sim->map), 0);
    return sim;
}

static void sim_destroy(struct sim *sim)
{
    shard_heat_destroy(sim->heat);
    shard_map_close(sim->map);
    free(sim);
}

/* One second of producer time (T0 + second) at `rate` events/s, all to `day` (first_day + 0..7),
 * in SIM_SLICES slices, each routed with the map's count and followed by a plan. */
static void sim_second(struct sim *sim, int64_t second, int32_t first_day, int32_t day,
                       uint64_t rate)
{
    assert_true(day >= first_day && day < first_day + 8);
    int shards = shard_map_ensure(sim->map, day);
    assert_true(shards > 0);
    (void)shard_heat_advance(sim->heat, T0 + second);
    for (int k = 0; k < SIM_SLICES; k++) {
        uint64_t n = rate * (uint64_t)(k + 1) / SIM_SLICES - rate * (uint64_t)k / SIM_SLICES;
        uint32_t count = shard_map_get(sim->map, day);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t shard = (uint32_t)(i % count);
            shard_heat_observe(sim->heat, T0 + second, day, shard, 0, NULL);
            sim->events_per_shard[day - first_day][shard]++;
        }
        int64_t now_ms = (T0 + second) * 1000 + (k + 1) * (1000 / SIM_SLICES) - 1;
        assert_int_equal(
            shard_growth_plan(sim->heat, sim->map, SIM_CAPACITY, 256, now_ms, sim_apply, sim), 0);
    }
}

/* The growths of one day, in order. */
static uint32_t sim_growths_of(const struct sim *sim, int32_t day, struct shard_growth *out,
                               uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < sim->growth_count; i++) {
        if (sim->growths[i].day == day && n < max) {
            out[n++] = sim->growths[i];
        }
    }
    return n;
}

static void test_grow_after_a_burst_later_days_start_lower(void **state)
{
    /* A one-minute burst at 10000/s (100x capacity) grows its day to 128 shards; the day goes
     * on at a quarter of the rate, and each day after it starts at 32 (2500/s with 25%
     * headroom), one growth at its start and none after; the burst day keeps 128 (a count never
     * shrinks) and every event went to a shard below its day's count. */
    (void)state;
    struct sim *sim = sim_create();
    int32_t d0 = test_day_of("2026-01-21");
    int64_t second = 0;
    for (; second < 60; second++) {
        sim_second(sim, second, d0, d0, 10000);
    }
    assert_int_equal(shard_map_get(sim->map, d0), 128);
    for (; second < 180; second++) {
        sim_second(sim, second, d0, d0, 2500);
    }
    for (int32_t d = 1; d <= 4; d++) {
        for (int64_t end = second + 60; second < end; second++) {
            sim_second(sim, second, d0, d0 + d, 2500);
        }
    }
    assert_int_equal(shard_map_get(sim->map, d0), 128);
    for (int32_t d = 1; d <= 4; d++) {
        assert_int_equal(shard_map_get(sim->map, d0 + d), 32);
        struct shard_growth g[4];
        assert_int_equal(sim_growths_of(sim, d0 + d, g, 4), 1);
        assert_int_equal(g[0].from, 4);
        assert_int_equal(g[0].to, 32);
        assert_non_null(strstr(g[0].reason, "a new latest day starts at 32 shards"));
        /* At the day's first plan, 100 ms into its first second. */
        assert_int_equal(g[0].at_ms, (T0 + 60 + 60 * (d + 1)) * 1000 + 99);
        for (uint32_t s = 32; s < 256; s++) {
            assert_int_equal(sim->events_per_shard[d][s], 0);
        }
    }
    sim_destroy(sim);
}

static void test_grow_rate_held_under_threshold_changes_no_count(void **state)
{
    /* Ten minutes at 90% of 4 shards' capacity, a new day every two minutes: no growth at all.
     * Then ten minutes at 90% of 8 shards' capacity from a day at 8: every later day starts at
     * 8 at its first plan and never changes after; the first keeps its 8. */
    (void)state;
    struct sim *sim = sim_create();
    int32_t d0 = test_day_of("2026-02-01");
    for (int64_t second = 0; second < 600; second++) {
        sim_second(sim, second, d0, d0 + (int32_t)(second / 120), 360);
    }
    assert_int_equal(sim->growth_count, 0);
    for (int32_t d = 0; d <= 4; d++) {
        assert_int_equal(shard_map_get(sim->map, d0 + d), 4);
    }
    sim_destroy(sim);

    sim = sim_create();
    assert_int_equal(shard_map_ensure(sim->map, d0), 4);
    assert_int_equal(shard_map_grow_sync(sim->map, d0, 8), 0);
    for (int64_t second = 0; second < 600; second++) {
        sim_second(sim, second, d0, d0 + (int32_t)(second / 120), 720);
    }
    assert_int_equal(sim->growth_count, 4);
    assert_int_equal(shard_map_get(sim->map, d0), 8);
    for (int32_t d = 1; d <= 4; d++) {
        struct shard_growth g[4];
        assert_int_equal(sim_growths_of(sim, d0 + d, g, 4), 1);
        assert_int_equal(g[0].from, 4);
        assert_int_equal(g[0].to, 8);
        assert_int_equal(g[0].at_ms, (T0 + 120 * d) * 1000 + 99);
    }
    sim_destroy(sim);
}

static void test_grow_rate_oscillating_at_threshold_does_not_flap(void **state)
{
    /* The rate alternates 10% over and 10% under 4 shards' capacity each second for ten
     * minutes, a new day every two minutes. The first day grows to 8 in its first second;
     * every later day starts at 8 at its first plan (the rate over the last 5 s, 392/s, is
     * under 4 shards' threshold but within the band) and never changes after: no day starts
     * at 4 and grows, none goes past 8. */
    (void)state;
    struct sim *sim = sim_create();
    int32_t d0 = test_day_of("2026-03-01");
    for (int64_t second = 0; second < 600; second++) {
        sim_second(sim, second, d0, d0 + (int32_t)(second / 120), second % 2 == 0 ? 440 : 360);
    }
    assert_int_equal(sim->growth_count, 5);
    struct shard_growth g[4];
    assert_int_equal(sim_growths_of(sim, d0, g, 4), 1);
    assert_int_equal(g[0].to, 8);
    assert_int_equal(g[0].at_ms, T0 * 1000 + 999); /* the 440th event of its first second */
    for (int32_t d = 1; d <= 4; d++) {
        assert_int_equal(sim_growths_of(sim, d0 + d, g, 4), 1);
        assert_int_equal(g[0].from, 4);
        assert_int_equal(g[0].to, 8);
        assert_int_equal(g[0].at_ms, (T0 + 120 * d) * 1000 + 99);
        assert_int_equal(shard_map_get(sim->map, d0 + d), 8);
    }
    sim_destroy(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_grow_window_rule_exact_threshold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_current_second_rule_exact_threshold, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_grow_larger_of_both_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_respects_map_and_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_new_latest_day_starts_from_recent_rate, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_grow_start_rule_only_while_the_day_is_new, setup,
                                        teardown),
        cmocka_unit_test(test_grow_start_target_band),
        cmocka_unit_test(test_grow_after_a_burst_later_days_start_lower),
        cmocka_unit_test(test_grow_rate_held_under_threshold_changes_no_count),
        cmocka_unit_test(test_grow_rate_oscillating_at_threshold_does_not_flap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
