/*
 * Unit tests of shard/heat.c: the per-second rates, window and growth-window sums over a
 * synthetic timeline (late, too-late and future events), capacity accounting, the growth rule
 * and a day growing at the second it crosses it, full tables, sources, snapshot order, and the
 * customers' heavy hitters against exact decayed weights computed here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard/shard.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

/* 2026-01-21T00:00:00Z in epoch seconds: every timeline starts here. */
#define T0 1768953600LL
/* exp(-1/SHARD_HEAT_CUSTOMER_TAU_S) (the test links no libm). */
#define TEST_DECAY 0.90483741803595952
#define TEST_PER_SECOND (1.0 - TEST_DECAY)
static_assert(SHARD_HEAT_CUSTOMER_TAU_S == 10u, "TEST_DECAY is exp(-1/10)");

/* cmocka 1.1's assert_float_equal compares floats; these rates need doubles. */
static void assert_near_at(double got, double want, double tolerance, const char *file, int line)
{
    if (!(got - want <= tolerance && want - got <= tolerance)) {
        print_error("%.17g != %.17g (tolerance %g)\n", got, want, tolerance);
        _fail(file, line);
    }
}
#define assert_near(got, want, tolerance)                                                          \
    assert_near_at((got), (want), (tolerance), __FILE__, __LINE__)

struct fixture {
    struct shard_heat *heat; /* capacity SHARD_CAPACITY_DEFAULT */
    struct shard_heat_snapshot snap;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(shard_heat_create(SHARD_CAPACITY_DEFAULT, &f->heat), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shard_heat_destroy(f->heat);
    free(f);
    return 0;
}

static int32_t day0(void)
{
    return test_day_of("2026-01-21");
}

/* n events of second on (day, shard), no source, no customer. */
static void observe_n(struct shard_heat *heat, int64_t second, int32_t day, uint32_t shard,
                      uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        shard_heat_observe(heat, second, day, shard, -1, NULL);
    }
}

static const struct shard_heat_snapshot *snapshot(struct fixture *f, uint32_t top)
{
    shard_heat_snapshot(f->heat, top, &f->snap);
    return &f->snap;
}

static const struct shard_heat_partition_row *partition_row(const struct shard_heat_snapshot *snap,
                                                            int32_t day, uint32_t shard)
{
    for (uint32_t i = 0; i < snap->partition_count; i++) {
        if (snap->partitions[i].day == day && snap->partitions[i].shard == shard) {
            return &snap->partitions[i];
        }
    }
    return NULL;
}

static const struct shard_heat_day_row *day_row(const struct shard_heat_snapshot *snap, int32_t day)
{
    for (uint32_t i = 0; i < snap->day_count; i++) {
        if (snap->days[i].day == day) {
            return &snap->days[i];
        }
    }
    return NULL;
}

/* The events per second of the synthetic timeline: uneven, with a zero every 11th second. */
static uint64_t timeline_count(int64_t k)
{
    return k % 11 == 10 ? 0 : (uint64_t)(1 + (k * 7) % 13 * 3);
}

/* Model sum of timeline_count over the seconds first .. last (clipped at 0). */
static uint64_t timeline_sum(int64_t first, int64_t last)
{
    uint64_t sum = 0;
    for (int64_t k = first < 0 ? 0 : first; k <= last; k++) {
        sum += timeline_count(k);
    }
    return sum;
}

static void test_heat_rates_follow_timeline(void **state)
{
    /* Over 130 seconds of uneven traffic, rate_now is the last complete second, window and
     * growth-window sums are the last 60 and 5 complete seconds, the peak and total hold. */
    struct fixture *f = *state;
    const int32_t day = day0();
    uint64_t peak = 0;
    uint64_t events = 0;
    for (int64_t k = 0; k < 130; k++) {
        observe_n(f->heat, T0 + k, day, 2, timeline_count(k));
        events += timeline_count(k);
        peak = timeline_count(k) > peak ? timeline_count(k) : peak;
        assert_true(shard_heat_advance(f->heat, T0 + k + 1));
        assert_int_equal(shard_heat_second(f->heat), T0 + k + 1);
        const struct shard_heat_snapshot *snap = snapshot(f, 8);
        assert_int_equal(snap->second, T0 + k);
        assert_int_equal(snap->rate_now, timeline_count(k));
        assert_int_equal(snap->events, events);
        const struct shard_heat_partition_row *p = partition_row(snap, day, 2);
        assert_non_null(p);
        assert_int_equal(p->rate_now, timeline_count(k));
        assert_int_equal(p->window_events, timeline_sum(k - 59, k));
        assert_int_equal(p->rate_peak, peak);
        assert_int_equal(p->events, events);
        const struct shard_heat_day_row *d = day_row(snap, day);
        assert_non_null(d);
        assert_int_equal(d->window_events, timeline_sum(k - 59, k));
        assert_int_equal(d->growth_window_events, timeline_sum(k - 4, k));
        assert_int_equal(shard_heat_day_growth_events(f->heat, day), timeline_sum(k - 4, k));
    }
}

static void test_heat_late_event_within_window_lands_in_its_second(void **state)
{
    /* An event up to 60 s late is added to its own second: it changes that second's rate and
     * the window, and leaves the seconds around it alone. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 0, 10);
    shard_heat_advance(f->heat, T0 + 2);
    observe_n(f->heat, T0 + 1, day, 0, 4); /* late into the last complete second */
    const struct shard_heat_partition_row *p = partition_row(snapshot(f, 8), day, 0);
    assert_int_equal(p->rate_now, 4);
    assert_int_equal(p->window_events, 14);
    shard_heat_advance(f->heat, T0 + 60);
    observe_n(f->heat, T0, day, 0, 5); /* exactly current - 60: still inside */
    p = partition_row(snapshot(f, 8), day, 0);
    assert_int_equal(p->window_events, 19);
    assert_int_equal(p->rate_peak, 15);
    assert_int_equal(p->rate_now, 0);
    assert_int_equal(p->events, 19);
    shard_heat_advance(f->heat, T0 + 61); /* T0 leaves the window */
    p = partition_row(snapshot(f, 8), day, 0);
    assert_int_equal(p->window_events, 4);
}

static void test_heat_late_event_beyond_window_counts_only_events(void **state)
{
    /* An event more than 60 s old counts in events only: no bucket, no peak, no customer, no
     * capacity accounting. */
    struct fixture *f = *state;
    const int32_t day = day0();
    shard_heat_advance(f->heat, T0 + 100);
    struct ds_id customer;
    test_id_int(&customer, 42);
    for (int i = 0; i < 1500; i++) {
        shard_heat_observe(f->heat, T0 + 39, day, 1, 3, &customer); /* current - 61 */
    }
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    assert_int_equal(snap->events, 1500);
    assert_int_equal(snap->would_throttle_events, 0);
    assert_int_equal(snap->customer_count, 0);
    const struct shard_heat_partition_row *p = partition_row(snap, day, 1);
    assert_non_null(p);
    assert_int_equal(p->events, 1500);
    assert_int_equal(p->window_events, 0);
    assert_int_equal(p->rate_peak, 0);
    assert_int_equal(snap->source_count, 1);
    assert_int_equal(snap->sources[0].events, 1500);
    assert_int_equal(snap->sources[0].window_events, 0);
    assert_int_equal(snap->sources[0].rate_peak, 0);
    assert_int_equal(shard_heat_second(f->heat), T0 + 100);
}

static void test_heat_future_event_advances_clock(void **state)
{
    /* An event ahead of the clock moves the current second to it; the next advance reports the
     * move once, and a wall clock behind producer time never moves the clock back. */
    struct fixture *f = *state;
    const int32_t day = day0();
    assert_int_equal(shard_heat_second(f->heat), 0);
    assert_true(shard_heat_advance(f->heat, T0));
    observe_n(f->heat, T0, day, 0, 3);
    observe_n(f->heat, T0 + 5, day, 0, 2);
    assert_int_equal(shard_heat_second(f->heat), T0 + 5);
    assert_true(shard_heat_advance(f->heat, T0)); /* moved by the event, not by this call */
    assert_false(shard_heat_advance(f->heat, T0 + 2));
    assert_false(shard_heat_advance(f->heat, T0 + 5));
    assert_int_equal(shard_heat_second(f->heat), T0 + 5);
    const struct shard_heat_partition_row *p = partition_row(snapshot(f, 8), day, 0);
    assert_int_equal(p->rate_now, 0);      /* T0 + 4 */
    assert_int_equal(p->window_events, 3); /* T0 + 5 is not complete yet */
    assert_true(shard_heat_advance(f->heat, T0 + 6));
    p = partition_row(snapshot(f, 8), day, 0);
    assert_int_equal(p->rate_now, 2);
    assert_int_equal(p->window_events, 5);
}

static void test_heat_rate_peak_keeps_busiest_second(void **state)
{
    /* rate_peak is the busiest second ever, also long after it left the window. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 3, 3);
    observe_n(f->heat, T0 + 1, day, 3, 10);
    observe_n(f->heat, T0 + 2, day, 3, 2);
    shard_heat_advance(f->heat, T0 + 500);
    observe_n(f->heat, T0 + 500, day, 3, 1);
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    const struct shard_heat_partition_row *p = partition_row(snap, day, 3);
    assert_int_equal(p->rate_peak, 10);
    assert_int_equal(p->rate_now, 0);
    assert_int_equal(p->window_events, 0);
    assert_int_equal(p->events, 16);
    assert_int_equal(day_row(snap, day)->rate_peak, 10);
}

static void test_heat_capacity_one_second_over(void **state)
{
    /* 1500 events in one second at capacity 1000: 500 would be throttled, one second over. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 0, 1500);
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    assert_int_equal(snap->capacity_eps, SHARD_CAPACITY_DEFAULT);
    assert_int_equal(snap->would_throttle_events, 500);
    assert_int_equal(snap->over_capacity_seconds, 1);
    const struct shard_heat_partition_row *p = partition_row(snap, day, 0);
    assert_int_equal(p->would_throttle_events, 500);
    assert_int_equal(p->over_capacity_seconds, 1);
}

static void test_heat_capacity_spread_seconds_under(void **state)
{
    /* The same 1500 events over two seconds, and exactly 1000 in a third: nothing over. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 0, 750);
    observe_n(f->heat, T0 + 1, day, 0, 750);
    observe_n(f->heat, T0 + 2, day, 0, 1000);
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    assert_int_equal(snap->would_throttle_events, 0);
    assert_int_equal(snap->over_capacity_seconds, 0);
    observe_n(f->heat, T0 + 2, day, 0, 1); /* the 1001st */
    snap = snapshot(f, 8);
    assert_int_equal(snap->would_throttle_events, 1);
    assert_int_equal(snap->over_capacity_seconds, 1);
}

static void test_heat_capacity_late_events_complete_a_second(void **state)
{
    /* Late events of a second count against that second's capacity, across shards apart. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 0, 900);
    observe_n(f->heat, T0, day, 1, 900);
    shard_heat_advance(f->heat, T0 + 10);
    observe_n(f->heat, T0, day, 0, 200);
    observe_n(f->heat, T0 + 9, day, 0, 999);
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    assert_int_equal(snap->would_throttle_events, 100);
    assert_int_equal(snap->over_capacity_seconds, 1);
    assert_int_equal(partition_row(snap, day, 1)->would_throttle_events, 0);
}

static void test_heat_capacity_zero_disables_accounting(void **state)
{
    /* capacity_eps 0: no second is ever over capacity. */
    (void)state;
    struct shard_heat *heat = NULL;
    assert_int_equal(shard_heat_create(0, &heat), 0);
    observe_n(heat, T0, day0(), 0, 5000);
    struct shard_heat_snapshot *snap = malloc(sizeof(*snap));
    assert_non_null(snap);
    shard_heat_snapshot(heat, 8, snap);
    assert_int_equal(snap->capacity_eps, 0);
    assert_int_equal(snap->would_throttle_events, 0);
    assert_int_equal(snap->over_capacity_seconds, 0);
    assert_int_equal(snap->partitions[0].rate_peak, 5000);
    free(snap);
    shard_heat_destroy(heat);
}

static void test_heat_growth_target_threshold_exact(void **state)
{
    /* 4 shards x 1000 eps x 5 s = 20000: that many events is fine, one more grows the day. */
    (void)state;
    assert_int_equal(shard_growth_target(20000, 5, 4, 1000, 256), 4);
    assert_int_equal(shard_growth_target(20001, 5, 4, 1000, 256), 8);
    assert_int_equal(shard_growth_target(0, 5, 4, 1000, 256), 4);
    assert_int_equal(shard_growth_target(1000, 1, 1, 1000, 256), 1);
    assert_int_equal(shard_growth_target(1001, 1, 1, 1000, 256), 2);
}

static void test_heat_growth_target_doubles_to_headroom(void **state)
{
    /* Doubling stops at the first count taking the rate with 25% headroom: 8 shards take
     * 40000 events in 5 s, so up to 32000 events fit 8 and 32001 need 16. */
    (void)state;
    assert_int_equal(shard_growth_target(30000, 5, 4, 1000, 256), 8);
    assert_int_equal(shard_growth_target(32000, 5, 4, 1000, 256), 8);
    assert_int_equal(shard_growth_target(32001, 5, 4, 1000, 256), 16);
    assert_int_equal(shard_growth_target(40000, 5, 4, 1000, 256), 16);
    assert_int_equal(shard_growth_target(1000000, 5, 4, 1000, 256), 256);
    assert_int_equal(shard_growth_target(500000, 5, 4, 1000, 256), 128);
    assert_int_equal(shard_growth_target(25001, 5, 5, 1000, 256), 10);
}

static void test_heat_growth_target_cap_and_no_ops(void **state)
{
    /* Growth stops at max_shards; nothing happens at or above it, or without a capacity; the
     * largest inputs do not overflow. */
    (void)state;
    assert_int_equal(shard_growth_target(40000, 5, 4, 1000, 8), 8);
    assert_int_equal(shard_growth_target(40000, 5, 4, 1000, 12), 12);
    assert_int_equal(shard_growth_target(40000, 5, 8, 1000, 8), 8);
    assert_int_equal(shard_growth_target(40000, 5, 300, 1, 256), 300);
    assert_int_equal(shard_growth_target(40000, 5, 4, 0, 256), 4);
    assert_int_equal(shard_growth_target(UINT64_MAX, 1, 1, 1, SHARD_COUNT_MAX), SHARD_COUNT_MAX);
    /* 2^64-1 events against 1e8 eps x (2^32-1) s: 54 shards' worth with headroom, so 64. */
    assert_int_equal(
        shard_growth_target(UINT64_MAX, UINT32_MAX, 1, SHARD_CAPACITY_MAX, SHARD_COUNT_MAX), 64);
    assert_int_equal(
        shard_growth_target(UINT64_MAX, UINT32_MAX, 1024, SHARD_CAPACITY_MAX, SHARD_COUNT_MAX),
        1024);
}

/* Events of second k of the ramp (producer clock T0 + k). */
static uint64_t ramp_count(int64_t k)
{
    return 2000 + (uint64_t)k * 157;
}

struct visit_record {
    uint32_t calls;
    int32_t day;
    uint64_t events;
    int stop_with;
};

static int visit_record_day(int32_t day, uint64_t growth_window_events,
                            uint64_t current_second_events, void *user)
{
    (void)current_second_events;
    struct visit_record *r = user;
    r->calls++;
    r->day = day;
    r->events = growth_window_events;
    return r->stop_with;
}

static void test_heat_growth_day_grows_at_crossing_second(void **state)
{
    /* A day whose traffic ramps up grows exactly at the first second its last 5 complete
     * seconds exceed 5 x 4 shards x 1000 eps (found here from the ramp itself), and not
     * before; after growing to 8 shards it stays there until twice the threshold. */
    struct fixture *f = *state;
    const int32_t day = day0();
    int64_t crossing = -1;
    for (int64_t c = 5; c < 100 && crossing < 0; c++) {
        uint64_t sum = 0;
        for (int64_t k = c - 5; k < c; k++) {
            sum += ramp_count(k);
        }
        crossing = sum > 20000 ? c : -1;
    }
    assert_true(crossing > 5);
    uint32_t shards = 4;
    int64_t grown_at = -1;
    for (int64_t k = 0; k < crossing + 3; k++) {
        for (uint64_t i = 0; i < ramp_count(k); i++) {
            shard_heat_observe(f->heat, T0 + k, day, (uint32_t)(i % shards), (int32_t)(i % 3),
                               NULL);
        }
        assert_true(shard_heat_advance(f->heat, T0 + k + 1));
        uint64_t events = shard_heat_day_growth_events(f->heat, day);
        struct visit_record record = {0};
        assert_int_equal(shard_heat_visit_active_days(f->heat, visit_record_day, &record), 0);
        assert_int_equal(record.calls, 1);
        assert_int_equal(record.day, day);
        assert_int_equal(record.events, events);
        uint32_t target = shard_growth_target(events, SHARD_HEAT_GROWTH_WINDOW_S, shards,
                                              SHARD_CAPACITY_DEFAULT, SHARD_MAX_SHARDS_DEFAULT);
        if (target != shards) {
            assert_int_equal(grown_at, -1);
            grown_at = k + 1;
            shards = target;
        }
    }
    assert_int_equal(grown_at, crossing);
    assert_int_equal(shards, 8);
}

static void test_heat_visit_active_days_stops_early(void **state)
{
    /* Only days with events in the growth window are visited; a non-zero return stops the
     * visit and is returned. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day + 9, 0, 5); /* leaves the growth window at T0 + 6 */
    observe_n(f->heat, T0 + 10, day, 0, 5);
    observe_n(f->heat, T0 + 10, day + 1, 0, 5);
    observe_n(f->heat, T0 + 10, day + 2, 0, 5);
    shard_heat_advance(f->heat, T0 + 11);
    struct visit_record record = {0};
    assert_int_equal(shard_heat_visit_active_days(f->heat, visit_record_day, &record), 0);
    assert_int_equal(record.calls, 3);
    record = (struct visit_record){.stop_with = 7};
    assert_int_equal(shard_heat_visit_active_days(f->heat, visit_record_day, &record), 7);
    assert_int_equal(record.calls, 1);
    assert_int_equal(shard_heat_day_growth_events(f->heat, day + 9), 0);
    assert_int_equal(shard_heat_day_growth_events(f->heat, day + 500), 0);
}

/* Shards per day that fill the partition table over SHARD_HEAT_DAYS_MAX days. */
#define FILL_SHARDS (SHARD_HEAT_PARTITIONS_MAX / SHARD_HEAT_DAYS_MAX)
static_assert(SHARD_HEAT_PARTITIONS_MAX == SHARD_HEAT_DAYS_MAX * FILL_SHARDS, "days fill both");

/* One event on each of the SHARD_HEAT_PARTITIONS_MAX keys (SHARD_HEAT_DAYS_MAX days x
 * FILL_SHARDS shards), days first_day and on, at second. */
static void fill_partitions(struct shard_heat *heat, int64_t second, int32_t first_day)
{
    for (uint32_t d = 0; d < SHARD_HEAT_DAYS_MAX; d++) {
        for (uint32_t s = 0; s < FILL_SHARDS; s++) {
            shard_heat_observe(heat, second, first_day + (int32_t)d, s, -1, NULL);
        }
    }
}

static void test_heat_table_full_evicts_idle_keys(void **state)
{
    /* A key idle for a whole window gives its place to a new key when the table is full; the
     * capacity totals it had survive it. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day + 5000, 0, 1500);
    fill_partitions(f->heat, T0 + 100, day);
    const struct shard_heat_snapshot *snap = snapshot(f, SHARD_HEAT_TOP_MAX);
    assert_int_equal(snap->untracked_events, 0);
    assert_int_equal(snap->events, 1500 + SHARD_HEAT_PARTITIONS_MAX);
    assert_int_equal(snap->would_throttle_events, 500);
    assert_int_equal(snap->over_capacity_seconds, 1);
    for (uint32_t i = 0; i < snap->partition_count; i++) {
        assert_int_not_equal(snap->partitions[i].day, day + 5000);
    }
    /* 61 s later every key is idle, so one more new key finds room again. */
    observe_n(f->heat, T0 + 161, day, FILL_SHARDS, 1);
    snap = snapshot(f, SHARD_HEAT_TOP_MAX);
    assert_int_equal(snap->untracked_events, 0);
    assert_non_null(partition_row(snap, day, FILL_SHARDS));
}

static void test_heat_table_full_counts_untracked_when_all_active(void **state)
{
    /* With every key active, an event of a new key counts in untracked_events, and still in
     * its day and the totals; a new day finds no room in the days either. A key is active
     * while it has an event in the window. */
    struct fixture *f = *state;
    const int32_t day = day0();
    fill_partitions(f->heat, T0, day);
    observe_n(f->heat, T0, day, FILL_SHARDS, 2);
    observe_n(f->heat, T0 + 1, day, FILL_SHARDS + 1, 1);
    observe_n(f->heat, T0 + 1, day + 2000, 0, 1);
    observe_n(f->heat, T0 + 1, day, 0, 3); /* a tracked key still counts */
    shard_heat_advance(f->heat, T0 + 2);
    const struct shard_heat_snapshot *snap = snapshot(f, 1);
    assert_int_equal(snap->untracked_events, 4);
    assert_int_equal(snap->events, SHARD_HEAT_PARTITIONS_MAX + 7);
    assert_int_equal(snap->rate_now, 5);
    assert_int_equal(snap->partitions[0].day, day);
    assert_int_equal(snap->partitions[0].shard, 0);
    assert_int_equal(snap->partitions[0].events, 4);
    assert_int_equal(snap->days[0].day, day);
    assert_int_equal(snap->days[0].events, FILL_SHARDS + 2 + 1 + 3);
    assert_int_equal(shard_heat_day_growth_events(f->heat, day + 2000), 0);
    /* A key with an event exactly 60 s ago is still active; one second later it is not. */
    observe_n(f->heat, T0 + 60, day, FILL_SHARDS + 2, 1);
    assert_int_equal(snapshot(f, 1)->untracked_events, 5);
    observe_n(f->heat, T0 + 61, day, FILL_SHARDS + 3, 1);
    assert_int_equal(snapshot(f, 1)->untracked_events, 5);
}

static void test_heat_sources_listed_by_partition(void **state)
{
    /* Sources are listed ascending with their counts; -1 and out-of-range partitions are not
     * sources but their events count everywhere else; at most SOURCES_SNAPSHOT_MAX rows. */
    struct fixture *f = *state;
    const int32_t day = day0();
    const int32_t sources[] = {5, 0, 4095, -1, 4096, 7, 5, 5};
    for (size_t i = 0; i < DS_ARRAY_LEN(sources); i++) {
        shard_heat_observe(f->heat, T0, day, 0, sources[i], NULL);
    }
    shard_heat_advance(f->heat, T0 + 1);
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    assert_int_equal(snap->events, DS_ARRAY_LEN(sources));
    assert_int_equal(snap->source_count, 4);
    const int32_t want[] = {0, 5, 7, 4095};
    const uint64_t want_events[] = {1, 3, 1, 1};
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(snap->sources[i].partition, want[i]);
        assert_int_equal(snap->sources[i].events, want_events[i]);
        assert_int_equal(snap->sources[i].rate_now, want_events[i]);
        assert_int_equal(snap->sources[i].rate_peak, want_events[i]);
        assert_int_equal(snap->sources[i].window_events, want_events[i]);
        assert_int_equal(snap->sources[i].window_seconds, 1);
    }
    for (int32_t s = 0; s < (int32_t)SHARD_HEAT_SOURCES_MAX; s++) {
        shard_heat_observe(f->heat, T0 + 1, day, 0, s, NULL);
    }
    snap = snapshot(f, 8);
    assert_int_equal(snap->source_count, SHARD_HEAT_SOURCES_SNAPSHOT_MAX);
    for (uint32_t i = 0; i < snap->source_count; i++) {
        assert_int_equal(snap->sources[i].partition, (int32_t)i);
    }
    /* Partition 5 wrote in two seconds of the window: T0 (3 events) and T0 + 1 (1). */
    shard_heat_advance(f->heat, T0 + 2);
    snap = snapshot(f, 8);
    assert_int_equal(snap->sources[5].window_events, 4);
    assert_int_equal(snap->sources[5].window_seconds, 2);
    /* The window forgets T0: partition 5 keeps its one event of T0 + 1 there, all 4 in events. */
    shard_heat_advance(f->heat, T0 + 61);
    snap = snapshot(f, 8);
    assert_int_equal(snap->sources[5].partition, 5);
    assert_int_equal(snap->sources[5].window_events, 1);
    assert_int_equal(snap->sources[5].window_seconds, 1);
    assert_int_equal(snap->sources[5].events, 4);
}

/* Rows in snapshot order: rate_now descending, then events descending, then key ascending. */
static void assert_partitions_ordered(const struct shard_heat_snapshot *snap)
{
    for (uint32_t i = 1; i < snap->partition_count; i++) {
        const struct shard_heat_partition_row *a = &snap->partitions[i - 1];
        const struct shard_heat_partition_row *b = &snap->partitions[i];
        bool ordered = a->rate_now != b->rate_now ? a->rate_now > b->rate_now
                       : a->events != b->events   ? a->events > b->events
                       : a->day != b->day         ? a->day < b->day
                                                  : a->shard < b->shard;
        assert_true(ordered);
    }
}

static void test_heat_snapshot_orders_rows_and_clamps_top(void **state)
{
    /* Ties in rate_now go to more events, then to the lower (day, shard); top is clamped to
     * 1..SHARD_HEAT_TOP_MAX and keeps the hottest rows. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 3, 10);
    observe_n(f->heat, T0 + 1, day, 2, 5);
    observe_n(f->heat, T0 + 1, day, 1, 5);
    observe_n(f->heat, T0 + 1, day + 1, 0, 9);
    observe_n(f->heat, T0 + 1, day, 3, 5);
    shard_heat_advance(f->heat, T0 + 2);
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    assert_int_equal(snap->partition_count, 4);
    const uint32_t want_shards[] = {0, 3, 1, 2};
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(snap->partitions[i].shard, want_shards[i]);
    }
    assert_int_equal(snap->partitions[0].day, day + 1);
    assert_int_equal(snap->day_count, 2);
    assert_int_equal(snap->days[0].day, day); /* 15 events this second against 9 */
    assert_int_equal(snapshot(f, 0)->partition_count, 1);
    assert_int_equal(f->snap.partitions[0].day, day + 1);
    assert_int_equal(snapshot(f, 2)->partition_count, 2);
    /* 100 keys of distinct rates: the top 64 are the 64 busiest, in order. */
    for (uint32_t k = 0; k < 100; k++) {
        observe_n(f->heat, T0 + 2, day + 10 + (int32_t)(k % 7), k, 1 + (k * 37) % 100);
    }
    shard_heat_advance(f->heat, T0 + 3);
    snap = snapshot(f, 1000);
    assert_int_equal(snap->partition_count, SHARD_HEAT_TOP_MAX);
    assert_partitions_ordered(snap);
    assert_int_equal(snap->partitions[0].rate_now, 100);
    assert_int_equal(snap->partitions[SHARD_HEAT_TOP_MAX - 1].rate_now, 100 - 63);
}

static void test_heat_customers_decay_per_second(void **state)
{
    /* A customer's rate is its weight times (1 - decay), decayed once per completed second;
     * after a long silence the customers are gone. */
    struct fixture *f = *state;
    struct ds_id customer;
    test_id_int(&customer, 77);
    for (int i = 0; i < 100; i++) {
        shard_heat_observe(f->heat, T0, day0(), 0, -1, &customer);
    }
    shard_heat_advance(f->heat, T0 + 1);
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    assert_int_equal(snap->customer_count, 1);
    assert_true(test_id_equal(&snap->customers[0].customer, &customer));
    assert_near(snap->customers[0].rate_eps, 100 * TEST_DECAY * TEST_PER_SECOND, 1e-9);
    assert_near(snap->customers[0].error_eps, 0.0, 0.0);
    assert_near(snap->customer_rate_eps, 100 * TEST_DECAY * TEST_PER_SECOND, 1e-9);
    shard_heat_advance(f->heat, T0 + 11);
    double decay11 = 1.0;
    for (int i = 0; i < 11; i++) {
        decay11 *= TEST_DECAY;
    }
    assert_near(snapshot(f, 8)->customers[0].rate_eps, 100 * decay11 * TEST_PER_SECOND, 1e-9);
    shard_heat_advance(f->heat, T0 + 100000);
    snap = snapshot(f, 8);
    assert_int_equal(snap->customer_count, 0);
    assert_near(snap->customer_rate_eps, 0.0, 0.0);
}

/* Takes every counter, all at weight 2 but the last two customers' at 1, either growing the
 * counters after every insertion (grow_last) or inserting the light ones after the others
 * grew: the heap must find the least counters either way. */
static void customers_fill_two_light(struct shard_heat *heat, bool grow_last)
{
    const int64_t heavy = (int64_t)SHARD_HEAT_CUSTOMERS_MAX - 2;
    struct ds_id customer;
    for (int64_t c = 1; c <= (int64_t)SHARD_HEAT_CUSTOMERS_MAX; c++) {
        test_id_int(&customer, c);
        shard_heat_observe(heat, T0, day0(), 0, -1, &customer);
        if (!grow_last && c <= heavy) {
            shard_heat_observe(heat, T0, day0(), 0, -1, &customer);
        }
    }
    for (int64_t c = 1; grow_last && c <= heavy; c++) {
        test_id_int(&customer, c);
        shard_heat_observe(heat, T0, day0(), 0, -1, &customer);
    }
}

/* The first newcomer takes one light counter, the second (two events) must take the other:
 * estimate 1 + 2, error 1. */
static void customers_check_newcomers(struct fixture *f)
{
    struct ds_id customer;
    test_id_int(&customer, 5000);
    shard_heat_observe(f->heat, T0, day0(), 0, -1, &customer);
    test_id_int(&customer, 6000);
    shard_heat_observe(f->heat, T0, day0(), 0, -1, &customer);
    shard_heat_observe(f->heat, T0, day0(), 0, -1, &customer);
    const struct shard_heat_snapshot *snap = snapshot(f, 4);
    assert_int_equal(snap->customer_count, 4);
    assert_true(test_id_equal(&snap->customers[0].customer, &customer));
    assert_near(snap->customers[0].rate_eps, 3 * TEST_PER_SECOND, 1e-12);
    assert_near(snap->customers[0].error_eps, TEST_PER_SECOND, 1e-12);
    for (uint32_t i = 1; i < 4; i++) {
        assert_near(snap->customers[i].rate_eps, 2 * TEST_PER_SECOND, 1e-12);
    }
    assert_near(snap->customer_rate_eps, (2 * SHARD_HEAT_CUSTOMERS_MAX + 1) * TEST_PER_SECOND,
                1e-9);
}

static void test_heat_customers_replacement_after_growth(void **state)
{
    /* Counters that grew after insertion sink below the light ones: a newcomer takes the
     * least counter, keeping its weight as error. */
    struct fixture *f = *state;
    customers_fill_two_light(f->heat, true);
    customers_check_newcomers(f);
}

static void test_heat_customers_replacement_after_insertion(void **state)
{
    /* Light counters inserted under heavier ones rise to the top of the heap: a newcomer takes
     * the least counter, keeping its weight as error. */
    struct fixture *f = *state;
    customers_fill_two_light(f->heat, false);
    customers_check_newcomers(f);
}

static void test_heat_customers_late_event_weighs_its_age(void **state)
{
    /* An event k seconds late adds the weight exp(-k/tau) it would have kept by now, both to a
     * counter it finds and to a counter it takes over. */
    struct fixture *f = *state;
    struct ds_id customer;
    test_id_int(&customer, 1);
    shard_heat_advance(f->heat, T0 + 5);
    shard_heat_observe(f->heat, T0, day0(), 0, -1, &customer);
    double decay5 = TEST_DECAY * TEST_DECAY * TEST_DECAY * TEST_DECAY * TEST_DECAY;
    const struct shard_heat_snapshot *snap = snapshot(f, 4);
    assert_near(snap->customers[0].rate_eps, decay5 * TEST_PER_SECOND, 1e-12);
    for (int64_t c = 2; c <= (int64_t)SHARD_HEAT_CUSTOMERS_MAX; c++) {
        test_id_int(&customer, c);
        shard_heat_observe(f->heat, T0 + 5, day0(), 0, -1, &customer);
    }
    /* Customer 1 holds the least counter (decay5); a new customer one second late takes it. */
    test_id_int(&customer, 5000);
    shard_heat_observe(f->heat, T0 + 4, day0(), 0, -1, &customer);
    shard_heat_observe(f->heat, T0 + 5, day0(), 0, -1, &customer);
    snap = snapshot(f, 4);
    assert_true(test_id_equal(&snap->customers[0].customer, &customer));
    assert_near(snap->customers[0].rate_eps, (decay5 + TEST_DECAY + 1) * TEST_PER_SECOND, 1e-12);
    assert_near(snap->customers[0].error_eps, decay5 * TEST_PER_SECOND, 1e-12);
}

static void test_heat_customers_string_ids(void **state)
{
    /* String ids are counted by their bytes and reported as strings; the string "5" and the
     * integer 5 are two customers; a 64-byte id round-trips. */
    struct fixture *f = *state;
    struct ds_id alice, bob, five_text, five, longest;
    test_id_string(&alice, "alice", 5);
    test_id_string(&bob, "bob", 3);
    test_id_string(&five_text, "5", 1);
    test_id_int(&five, 5);
    char text[DS_ID_BYTES_MAX];
    memset(text, 'z', sizeof(text));
    test_id_string(&longest, text, sizeof(text));
    const struct {
        const struct ds_id *id;
        int events;
    } plan[] = {{&alice, 30}, {&bob, 10}, {&five_text, 7}, {&five, 4}, {&longest, 2}};
    for (size_t p = 0; p < DS_ARRAY_LEN(plan); p++) {
        for (int i = 0; i < plan[p].events; i++) {
            struct ds_id copy = *plan[p].id;
            shard_heat_observe(f->heat, T0, day0(), 0, -1, &copy);
        }
    }
    shard_heat_advance(f->heat, T0 + 1);
    const struct shard_heat_snapshot *snap = snapshot(f, 8);
    assert_int_equal(snap->customer_count, DS_ARRAY_LEN(plan));
    for (size_t p = 0; p < DS_ARRAY_LEN(plan); p++) {
        const struct shard_heat_customer_row *row = &snap->customers[p];
        assert_true(test_id_equal(&row->customer, plan[p].id));
        assert_near(row->rate_eps, plan[p].events * TEST_DECAY * TEST_PER_SECOND, 1e-9);
    }
    assert_true(snap->customers[2].customer.is_string);
    assert_false(snap->customers[3].customer.is_string);
    assert_int_equal(snap->customers[4].customer.len, DS_ID_BYTES_MAX);
}

/* The Zipf workload of the heavy-hitter test: customer ranks 0..ZIPF_CUSTOMERS-1. */
#define ZIPF_CUSTOMERS 50000u
#define ZIPF_SECONDS 240
#define ZIPF_EVENTS_PER_SECOND 2500u
#define ZIPF_ID_BASE 1000
#define ZIPF_ID_STEP 7919

struct zipf {
    double cdf[ZIPF_CUSTOMERS];
    double weight[ZIPF_CUSTOMERS]; /* the exact decayed weight of each customer */
    double total;
    double decay_pow[SHARD_HEAT_WINDOW_S + 1];
};

/* P(rank) proportional to 1 / (rank + 1)^1.5, without libm: x^1.5 = x * sqrt(x) by Newton. */
static void zipf_init(struct zipf *z)
{
    double sum = 0;
    for (uint32_t r = 0; r < ZIPF_CUSTOMERS; r++) {
        double x = r + 1.0;
        double root = x;
        for (int i = 0; i < 40; i++) {
            root = 0.5 * (root + x / root);
        }
        sum += 1.0 / (x * root);
        z->cdf[r] = sum;
    }
    for (uint32_t r = 0; r < ZIPF_CUSTOMERS; r++) {
        z->cdf[r] /= sum;
    }
    z->decay_pow[0] = 1.0;
    for (uint32_t k = 1; k <= SHARD_HEAT_WINDOW_S; k++) {
        z->decay_pow[k] = z->decay_pow[k - 1] * TEST_DECAY;
    }
}

static uint32_t zipf_draw(const struct zipf *z, uint64_t *rng)
{
    double u = (double)(test_rng_next(rng) >> 11) / 9007199254740992.0;
    uint32_t lo = 0;
    uint32_t hi = ZIPF_CUSTOMERS - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (z->cdf[mid] < u) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Checks the snapshot's customers against the exact weights (rates are weight x (1-decay)). */
static uint32_t zipf_check(const struct zipf *z, const struct shard_heat_snapshot *snap)
{
    const double tolerance = 1e-9 * z->total;
    assert_near(snap->customer_rate_eps, z->total * TEST_PER_SECOND, tolerance);
    bool listed[ZIPF_CUSTOMERS] = {false};
    for (uint32_t i = 0; i < snap->customer_count; i++) {
        const struct shard_heat_customer_row *row = &snap->customers[i];
        assert_false(row->customer.is_string);
        int64_t rank = (row->customer.value - ZIPF_ID_BASE) / ZIPF_ID_STEP;
        assert_int_equal(ZIPF_ID_BASE + rank * ZIPF_ID_STEP, row->customer.value);
        double truth = z->weight[rank] * TEST_PER_SECOND;
        assert_true(row->rate_eps >= truth - tolerance);
        assert_true(row->rate_eps <= truth + row->error_eps + tolerance);
        listed[rank] = true;
        if (i > 0) {
            assert_true(snap->customers[i - 1].rate_eps >= row->rate_eps);
        }
    }
    /* Space-Saving keeps every key heavier than total / counters, and such a key ranks above
     * the last row listed when its weight does too. */
    double bound = z->total * TEST_PER_SECOND / SHARD_HEAT_CUSTOMERS_MAX;
    if (snap->customer_count == SHARD_HEAT_TOP_MAX &&
        snap->customers[SHARD_HEAT_TOP_MAX - 1].rate_eps > bound) {
        bound = snap->customers[SHARD_HEAT_TOP_MAX - 1].rate_eps;
    }
    uint32_t heavy = 0;
    for (uint32_t r = 0; r < ZIPF_CUSTOMERS; r++) {
        if (z->weight[r] * TEST_PER_SECOND > bound + tolerance) {
            assert_true(listed[r]);
            heavy++;
        }
    }
    return heavy;
}

static void test_heat_customers_heavy_hitters_zipf(void **state)
{
    /* A seeded Zipf(1.5) stream over 50000 customers, one event in ten up to 30 s late: every
     * reported rate bounds the exact decayed rate from above within its error, and every
     * customer heavier than total / SHARD_HEAT_CUSTOMERS_MAX (or than the last row) is listed. */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    struct zipf *z = calloc(1, sizeof(*z));
    assert_non_null(z);
    zipf_init(z);
    uint32_t heavy_checked = 0;
    for (int64_t k = 0; k < ZIPF_SECONDS; k++) {
        for (uint32_t i = 0; i < ZIPF_EVENTS_PER_SECOND; i++) {
            uint32_t rank = zipf_draw(z, &rng);
            uint64_t late = test_rng_below(&rng, 10) == 0 ? test_rng_below(&rng, 31) : 0;
            late = late > (uint64_t)k ? (uint64_t)k : late;
            struct ds_id customer;
            test_id_int(&customer, ZIPF_ID_BASE + (int64_t)rank * ZIPF_ID_STEP);
            shard_heat_observe(f->heat, T0 + k - (int64_t)late, day0(), rank % 4, -1, &customer);
            z->weight[rank] += z->decay_pow[late];
            z->total += z->decay_pow[late];
        }
        assert_true(shard_heat_advance(f->heat, T0 + k + 1));
        for (uint32_t r = 0; r < ZIPF_CUSTOMERS; r++) {
            z->weight[r] *= TEST_DECAY;
        }
        z->total *= TEST_DECAY;
        if (k % 20 == 19) {
            heavy_checked += zipf_check(z, snapshot(f, SHARD_HEAT_TOP_MAX));
        }
    }
    /* The check must have had heavy customers to find, at every checkpoint. */
    assert_true(heavy_checked > 10u * (ZIPF_SECONDS / 20));
    free(z);
}

/* The exact oracle of the Space-Saving test: every customer's decayed weight, by rank. */
#define ORACLE_SECONDS 90
#define ORACLE_EVENTS_PER_SECOND 3000u

struct oracle {
    uint32_t customers; /* ranks 0 .. customers - 1 */
    double *weight;
    double total;
    double *cdf; /* Zipf(1): P(rank) proportional to 1 / (rank + 1); NULL: uniform */
    double decay_pow[SHARD_HEAT_WINDOW_S + 1];
};

static void oracle_init(struct oracle *o, uint32_t customers, bool skewed)
{
    *o = (struct oracle){.customers = customers};
    o->weight = calloc(customers, sizeof(double));
    assert_non_null(o->weight);
    if (skewed) {
        o->cdf = malloc(customers * sizeof(double));
        assert_non_null(o->cdf);
        double sum = 0;
        for (uint32_t r = 0; r < customers; r++) {
            sum += 1.0 / (r + 1.0);
            o->cdf[r] = sum;
        }
        for (uint32_t r = 0; r < customers; r++) {
            o->cdf[r] /= sum;
        }
    }
    o->decay_pow[0] = 1.0;
    for (uint32_t k = 1; k <= SHARD_HEAT_WINDOW_S; k++) {
        o->decay_pow[k] = o->decay_pow[k - 1] * TEST_DECAY;
    }
}

static void oracle_deinit(struct oracle *o)
{
    free(o->weight);
    free(o->cdf);
}

static uint32_t oracle_draw(const struct oracle *o, uint64_t *rng)
{
    if (o->cdf == NULL) {
        return (uint32_t)test_rng_below(rng, o->customers);
    }
    double u = (double)(test_rng_next(rng) >> 11) / 9007199254740992.0;
    uint32_t lo = 0;
    uint32_t hi = o->customers - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (o->cdf[mid] < u) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Rank r's id: every third rank a string ("c<r>"), so both kinds of ids share the counters. */
static void oracle_id(struct ds_id *id, uint32_t rank)
{
    if (rank % 3 == 1) {
        char text[16];
        int len = snprintf(text, sizeof(text), "c%u", rank);
        test_id_string(id, text, (size_t)len);
    } else {
        test_id_int(id, 1000 + (int64_t)rank);
    }
}

static uint32_t oracle_rank(const struct oracle *o, const struct ds_id *id)
{
    uint32_t rank = 0;
    if (id->is_string) {
        assert_true(id->len >= 2 && id->text[0] == 'c');
        for (uint32_t i = 1; i < id->len; i++) {
            rank = rank * 10 + (uint32_t)(id->text[i] - '0');
        }
        assert_int_equal(rank % 3, 1);
    } else {
        assert_true(id->value >= 1000);
        rank = (uint32_t)(id->value - 1000);
        assert_int_not_equal(rank % 3, 1);
    }
    assert_true(rank < o->customers);
    return rank;
}

/* Space-Saving's guarantees, row by row against the exact weights: an estimate is at least the
 * truth and at most the truth plus its error; an error is at most total / counters (the least
 * counter when it was taken); every customer heavier than total / counters, or than the last
 * row, is listed. exact: every customer has a counter of its own (errors 0, estimates exact).
 * Returns the customers heavier than that bound, which were found. */
static uint32_t oracle_check(const struct oracle *o, const struct shard_heat_snapshot *snap,
                             bool exact)
{
    const double tolerance = 1e-9 * (o->total + 1.0);
    const double total_rate = o->total * TEST_PER_SECOND;
    assert_near(snap->customer_rate_eps, total_rate, tolerance);
    bool *listed = calloc(o->customers, sizeof(bool));
    assert_non_null(listed);
    for (uint32_t i = 0; i < snap->customer_count; i++) {
        const struct shard_heat_customer_row *row = &snap->customers[i];
        uint32_t rank = oracle_rank(o, &row->customer);
        double truth = o->weight[rank] * TEST_PER_SECOND;
        assert_true(row->rate_eps >= truth - tolerance);
        assert_true(row->rate_eps <= truth + row->error_eps + tolerance);
        assert_true(row->error_eps <= total_rate / SHARD_HEAT_CUSTOMERS_MAX + tolerance);
        if (exact) {
            assert_near(row->error_eps, 0.0, 0.0);
            assert_near(row->rate_eps, truth, tolerance);
        }
        assert_false(listed[rank]);
        listed[rank] = true;
        if (i > 0) {
            assert_true(snap->customers[i - 1].rate_eps >= row->rate_eps);
        }
    }
    double bound = total_rate / SHARD_HEAT_CUSTOMERS_MAX;
    if (snap->customer_count == SHARD_HEAT_TOP_MAX &&
        snap->customers[SHARD_HEAT_TOP_MAX - 1].rate_eps > bound) {
        bound = snap->customers[SHARD_HEAT_TOP_MAX - 1].rate_eps;
    }
    uint32_t heavy = 0;
    for (uint32_t r = 0; r < o->customers; r++) {
        if (o->weight[r] * TEST_PER_SECOND > bound + tolerance) {
            assert_true(listed[r]);
            heavy++;
        }
    }
    free(listed);
    return heavy;
}

/* Runs ORACLE_SECONDS of a stream over customers (uniform or Zipf(1)), one event in eight up to
 * 20 s late, through the tracker and the exact oracle, checking every 10 seconds. Returns the
 * heavy customers found over all checks. */
static uint32_t oracle_run(struct shard_heat *heat, struct fixture *f, uint32_t customers,
                           bool skewed)
{
    struct oracle o;
    oracle_init(&o, customers, skewed);
    uint64_t rng = test_seed();
    uint32_t heavy = 0;
    for (int64_t k = 0; k < ORACLE_SECONDS; k++) {
        for (uint32_t i = 0; i < ORACLE_EVENTS_PER_SECOND; i++) {
            uint32_t rank = oracle_draw(&o, &rng);
            uint64_t late = test_rng_below(&rng, 8) == 0 ? test_rng_below(&rng, 21) : 0;
            late = late > (uint64_t)k ? (uint64_t)k : late;
            struct ds_id customer;
            oracle_id(&customer, rank);
            shard_heat_observe(heat, T0 + k - (int64_t)late, day0(), rank % 4, -1, &customer);
            o.weight[rank] += o.decay_pow[late];
            o.total += o.decay_pow[late];
        }
        assert_true(shard_heat_advance(heat, T0 + k + 1));
        for (uint32_t r = 0; r < customers; r++) {
            o.weight[r] *= TEST_DECAY;
        }
        o.total *= TEST_DECAY;
        if (k % 10 == 9) {
            heavy += oracle_check(&o, snapshot(f, SHARD_HEAT_TOP_MAX),
                                  customers <= SHARD_HEAT_CUSTOMERS_MAX);
        }
    }
    oracle_deinit(&o);
    return heavy;
}

static void test_heat_customers_space_saving_bounds_against_exact_counts(void **state)
{
    /* Streams that exercise each path of the counters against exact decayed weights, with
     * integer and string ids mixed and late events: few customers (every event adds to a
     * counter of its own: estimates exact), uniform over 100,000 (almost every event takes the
     * least counter; nobody is heavy, the bounds must still hold), and Zipf(1) over 100,000
     * (both paths; the heavy customers must be found). */
    struct fixture *f = *state;
    assert_true(oracle_run(f->heat, f, 700, false) > 0);
    shard_heat_destroy(f->heat);
    assert_int_equal(shard_heat_create(SHARD_CAPACITY_DEFAULT, &f->heat), 0);
    oracle_run(f->heat, f, 100000, false);
    shard_heat_destroy(f->heat);
    assert_int_equal(shard_heat_create(SHARD_CAPACITY_DEFAULT, &f->heat), 0);
    /* Zipf(1) over 100,000: the first ranks hold several times total / 1,024 each. */
    assert_true(oracle_run(f->heat, f, 100000, true) >= 9u * 5u);
}

static void test_heat_empty_tracker_snapshot(void **state)
{
    /* A new tracker is at second 0 and its snapshot is empty; destroy accepts NULL. */
    struct fixture *f = *state;
    assert_int_equal(shard_heat_second(f->heat), 0);
    assert_false(shard_heat_advance(f->heat, 0));
    const struct shard_heat_snapshot *snap = snapshot(f, SHARD_HEAT_TOP_MAX);
    assert_int_equal(snap->events, 0);
    assert_int_equal(snap->partition_count, 0);
    assert_int_equal(snap->day_count, 0);
    assert_int_equal(snap->source_count, 0);
    assert_int_equal(snap->customer_count, 0);
    shard_heat_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_heat_rates_follow_timeline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_late_event_within_window_lands_in_its_second,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_late_event_beyond_window_counts_only_events,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_future_event_advances_clock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_rate_peak_keeps_busiest_second, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_capacity_one_second_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_capacity_spread_seconds_under, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_capacity_late_events_complete_a_second, setup,
                                        teardown),
        cmocka_unit_test(test_heat_capacity_zero_disables_accounting),
        cmocka_unit_test(test_heat_growth_target_threshold_exact),
        cmocka_unit_test(test_heat_growth_target_doubles_to_headroom),
        cmocka_unit_test(test_heat_growth_target_cap_and_no_ops),
        cmocka_unit_test_setup_teardown(test_heat_growth_day_grows_at_crossing_second, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_visit_active_days_stops_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_table_full_evicts_idle_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_table_full_counts_untracked_when_all_active,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_sources_listed_by_partition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_snapshot_orders_rows_and_clamps_top, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_customers_decay_per_second, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_customers_replacement_after_growth, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_customers_replacement_after_insertion, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_customers_late_event_weighs_its_age, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_customers_string_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_customers_heavy_hitters_zipf, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_heat_customers_space_saving_bounds_against_exact_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_empty_tracker_snapshot, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
