/*
 * Unit tests of the heat history (shard/heat_history.c): a column for every completed second
 * (empty ones too), cells ordered, the ring's wraparound and bound, the full partition table in
 * one column, late events re-taking their column, revisions, the copy's window, second cursor
 * and revision cursor, and the growths' heat second.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shard/shard.h"

/* 2026-01-21T00:00:00Z in epoch seconds. */
#define T0 1768953600LL
#define CELLS_MAX ((size_t)SHARD_HEAT_HISTORY_S * SHARD_HEAT_PARTITIONS_MAX)

struct fixture {
    struct shard_heat *heat;
    struct shard_heat_history *history;
    struct shard_heat_history_view view;
    struct shard_heat_cell *cells; /* CELLS_MAX */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(shard_heat_create(SHARD_CAPACITY_DEFAULT, &f->heat), 0);
    assert_int_equal(shard_heat_history_create(&f->history), 0);
    f->cells = calloc(CELLS_MAX, sizeof(*f->cells));
    assert_non_null(f->cells);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shard_heat_history_destroy(f->history);
    shard_heat_destroy(f->heat);
    free(f->cells);
    free(f);
    return 0;
}

static int32_t day0(void)
{
    return (int32_t)(T0 / 86400);
}

static void observe_n(struct shard_heat *heat, int64_t second, int32_t day, uint32_t shard,
                      uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        shard_heat_observe(heat, second, day, shard, -1, NULL);
    }
}

/* The node's tick: advance to now, record what completed. */
static void tick(struct fixture *f, int64_t now)
{
    if (shard_heat_advance(f->heat, now)) {
        shard_heat_history_record(f->history, f->heat);
    }
}

static const struct shard_heat_history_view *copy(struct fixture *f, uint32_t seconds,
                                                  int64_t after)
{
    assert_int_equal(
        shard_heat_history_copy(f->history, seconds, after, &f->view, f->cells, CELLS_MAX), 0);
    return &f->view;
}

static const struct shard_heat_cell *cell(const struct fixture *f, uint32_t column, uint32_t i)
{
    assert_true(column < f->view.column_count);
    assert_true(i < f->view.columns[column].cell_count);
    return &f->cells[f->view.columns[column].first_cell + i];
}

/* The index in the view of the column of second t (it must be there). */
static uint32_t at(const struct fixture *f, int64_t t)
{
    for (uint32_t k = 0; k < f->view.column_count; k++) {
        if (f->view.columns[k].t == t) {
            return k;
        }
    }
    fail_msg("no column for second %lld", (long long)t);
    return 0;
}

static uint32_t nonempty_count(const struct shard_heat_history_view *v)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < v->column_count; k++) {
        n += v->columns[k].cell_count > 0 ? 1u : 0u;
    }
    return n;
}

/* The view's columns are consecutive seconds ending at its second. */
static void assert_consecutive(const struct shard_heat_history_view *v)
{
    for (uint32_t k = 0; k < v->column_count; k++) {
        assert_int_equal(v->columns[k].t, v->second - (int64_t)(v->column_count - 1u - k));
    }
}

static void test_heat_history_empty_before_any_record(void **state)
{
    /* Nothing recorded: no second, no columns, no growths. */
    struct fixture *f = *state;
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->second, -1);
    assert_int_equal(v->column_count, 0);
    assert_int_equal(v->growth_count, 0);
    assert_int_equal(v->cell_count, 0);
}

static void test_heat_history_columns_every_second_and_ordered(void **state)
{
    /* A completed second is a column of the partitions written in it, by day then shard; a
     * second with no event is an empty column (so are the heat window's seconds before the
     * first record); the incomplete second is not there yet. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day + 1, 3, 5);
    observe_n(f->heat, T0, day, 7, 2);
    observe_n(f->heat, T0, day + 1, 0, 1);
    tick(f, T0 + 1);
    observe_n(f->heat, T0 + 2, day, 0, 4); /* T0 + 1 had nothing */
    tick(f, T0 + 3);
    observe_n(f->heat, T0 + 3, day, 1, 9); /* the current second */
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->second, T0 + 2);
    assert_int_equal(v->column_count, SHARD_HEAT_WINDOW_S + 2u);
    assert_int_equal(v->columns[0].t, T0 + 1 - (int64_t)SHARD_HEAT_WINDOW_S);
    assert_consecutive(v);
    assert_int_equal(nonempty_count(v), 2);
    uint32_t c0 = at(f, T0);
    assert_int_equal(v->columns[c0].cell_count, 3);
    assert_int_equal(cell(f, c0, 0)->day, day);
    assert_int_equal(cell(f, c0, 0)->shard, 7);
    assert_int_equal(cell(f, c0, 0)->events, 2);
    assert_int_equal(cell(f, c0, 1)->day, day + 1);
    assert_int_equal(cell(f, c0, 1)->shard, 0);
    assert_int_equal(cell(f, c0, 1)->events, 1);
    assert_int_equal(cell(f, c0, 2)->shard, 3);
    assert_int_equal(cell(f, c0, 2)->events, 5);
    assert_int_equal(v->columns[at(f, T0 + 1)].cell_count, 0);
    assert_int_equal(v->columns[at(f, T0 + 2)].cell_count, 1);
    assert_int_equal(cell(f, at(f, T0 + 2), 0)->events, 4);
    assert_int_equal(v->cell_count, 4);
}

static void test_heat_history_late_event_retakes_its_column(void **state)
{
    /* An event of a second already recorded (a lagging Kafka partition) is in its column after
     * the next record, which takes the column again under a new revision; one late by less
     * than the record is in the column from the start. The history then sums what the heat
     * counted. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 0, 3);
    observe_n(f->heat, T0 + 1, day, 0, 1); /* the clock moves to T0 + 1 without a tick */
    observe_n(f->heat, T0, day, 0, 2);     /* late, but before T0's column was taken */
    tick(f, T0 + 2);
    uint64_t taken =
        copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL)->columns[at(f, T0)].revision;
    assert_int_equal(cell(f, at(f, T0), 0)->events, 5);
    observe_n(f->heat, T0, day, 0, 10); /* late after the record */
    observe_n(f->heat, T0, day, 2, 4);  /* and a partition new to that second */
    tick(f, T0 + 3);
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(nonempty_count(v), 2);
    uint32_t c0 = at(f, T0);
    assert_int_equal(v->columns[c0].cell_count, 2);
    assert_int_equal(cell(f, c0, 0)->events, 15);
    assert_int_equal(cell(f, c0, 1)->shard, 2);
    assert_int_equal(cell(f, c0, 1)->events, 4);
    assert_int_equal(cell(f, at(f, T0 + 1), 0)->events, 1);
    assert_true(v->columns[c0].revision > taken);
    assert_true(v->columns[c0].revision > v->columns[at(f, T0 + 1)].revision);
    assert_true(v->columns[c0].revision <= v->revision);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < v->cell_count; i++) {
        sum += f->cells[i].events;
    }
    struct shard_heat_snapshot snap;
    shard_heat_snapshot(f->heat, 1, &snap);
    assert_int_equal(snap.events, 20);
    assert_int_equal(sum, snap.events);
}

static void test_heat_history_late_past_the_window_stays_out(void **state)
{
    /* An event older than the heat's window is in no bucket of the heat, so its second's
     * column stays as taken (no amendment, no new revision for it). */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 0, 3);
    tick(f, T0 + 1);
    tick(f, T0 + 1 + SHARD_HEAT_WINDOW_S + 1);
    uint64_t before = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL)->revision;
    uint64_t taken = f->view.columns[at(f, T0)].revision;
    observe_n(f->heat, T0, day, 0, 7);
    tick(f, T0 + 2 + SHARD_HEAT_WINDOW_S + 1);
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(cell(f, at(f, T0), 0)->events, 3);
    assert_int_equal(v->columns[at(f, T0)].revision, taken);
    assert_int_equal(v->revision, before + 1); /* the one new second only */
}

static void test_heat_history_revisions_increase(void **state)
{
    /* Every column taken gets the next revision: appended columns in order of t, an amended
     * one above all taken before it; the history's revision is the newest. */
    struct fixture *f = *state;
    const int32_t day = day0();
    uint64_t last = 0;
    for (int64_t s = 0; s < 5; s++) {
        observe_n(f->heat, T0 + s, day, 0, 1);
        tick(f, T0 + s + 1);
        uint64_t r = shard_heat_history_revision(f->history);
        assert_true(r > last);
        last = r;
    }
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->revision, last);
    for (uint32_t k = 1; k < v->column_count; k++) {
        assert_true(v->columns[k].revision > v->columns[k - 1].revision);
    }
    assert_int_equal(v->columns[v->column_count - 1].revision, last);
    observe_n(f->heat, T0 + 2, day, 1, 1);
    tick(f, T0 + 6);
    v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->revision, last + 2); /* T0 + 2 again, and T0 + 5 */
    assert_int_equal(v->columns[at(f, T0 + 2)].revision, last + 1);
}

static void test_heat_history_copy_since_gives_new_and_amended(void **state)
{
    /* A copy since a previous copy's revision holds the columns appended since and those
     * amended since, whatever their second, and the growths that became visible since; since
     * 0 it holds everything kept. */
    struct fixture *f = *state;
    const int32_t day = day0();
    for (int64_t s = 0; s < 5; s++) {
        observe_n(f->heat, T0 + s, day, 0, 1);
    }
    tick(f, T0 + 5);
    struct shard_heat_history_view *v = &f->view;
    assert_int_equal(shard_heat_history_copy_since(f->history, 0, v, f->cells, CELLS_MAX), 0);
    assert_int_equal(v->column_count, SHARD_HEAT_WINDOW_S);
    assert_consecutive(v);
    uint64_t seen = v->revision;
    assert_int_equal(shard_heat_history_copy_since(f->history, seen, v, f->cells, CELLS_MAX), 0);
    assert_int_equal(v->column_count, 0);
    observe_n(f->heat, T0 + 1, day, 3, 6); /* late */
    observe_n(f->heat, T0 + 5, day, 0, 2);
    tick(f, T0 + 6);
    struct shard_growth g = {.day = day, .from = 4, .to = 8, .t = T0 + 4};
    shard_heat_history_growth(f->history, &g); /* of a complete second: visible at once */
    assert_int_equal(shard_heat_history_copy_since(f->history, seen, v, f->cells, CELLS_MAX), 0);
    assert_int_equal(v->column_count, 2);
    assert_int_equal(v->columns[0].t, T0 + 1);
    assert_int_equal(v->columns[0].cell_count, 2);
    assert_int_equal(cell(f, 0, 1)->events, 6);
    assert_int_equal(v->columns[1].t, T0 + 5);
    assert_int_equal(v->growth_count, 1);
    assert_int_equal(v->growths[0].to, 8);
    /* The second cursor misses the amendment: it names only seconds after it. */
    int64_t second_seen = T0 + 4;
    assert_int_equal(copy(f, SHARD_HEAT_HISTORY_S, second_seen)->column_count, 1);
}

static void test_heat_history_ring_wraps_and_window_cuts(void **state)
{
    /* Past SHARD_HEAT_HISTORY_S seconds the oldest columns go; a copy asks for the last N
     * seconds (some of them empty). */
    struct fixture *f = *state;
    const int32_t day = day0();
    const uint32_t seconds = SHARD_HEAT_HISTORY_S + 17u;
    for (uint32_t s = 0; s < seconds; s++) {
        observe_n(f->heat, T0 + s, day, s % 4u, 1 + s % 3u);
        tick(f, T0 + s + 1);
    }
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->second, T0 + seconds - 1);
    assert_int_equal(v->column_count, SHARD_HEAT_HISTORY_S);
    for (uint32_t k = 0; k < v->column_count; k++) {
        int64_t t = T0 + 17 + k;
        assert_int_equal(v->columns[k].t, t);
        assert_int_equal(v->columns[k].cell_count, 1);
        assert_int_equal(cell(f, k, 0)->shard, (uint32_t)(t - T0) % 4u);
        assert_int_equal(cell(f, k, 0)->events, 1 + (uint32_t)(t - T0) % 3u);
    }
    v = copy(f, 10, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->column_count, 10);
    assert_int_equal(v->columns[0].t, T0 + seconds - 10);
    /* Ten more seconds, only two with events: a 10 s window holds those two. */
    observe_n(f->heat, T0 + seconds + 3, day, 0, 1);
    observe_n(f->heat, T0 + seconds + 8, day, 0, 1);
    tick(f, T0 + seconds + 10);
    v = copy(f, 10, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->second, T0 + seconds + 9);
    assert_int_equal(v->column_count, 10);
    assert_int_equal(nonempty_count(v), 2);
    assert_int_equal(v->columns[3].t, T0 + seconds + 3);
    assert_int_equal(v->columns[3].cell_count, 1);
    assert_int_equal(v->columns[8].cell_count, 1);
    /* The ring stays bounded: exactly the last SHARD_HEAT_HISTORY_S seconds. */
    v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->column_count, SHARD_HEAT_HISTORY_S);
    assert_consecutive(v);
}

static void test_heat_history_column_holds_every_partition(void **state)
{
    /* One second writing all SHARD_HEAT_PARTITIONS_MAX keys (a month of days at 256 shards and
     * more) is one column of that many cells, in order. */
    struct fixture *f = *state;
    const int32_t day = day0();
    const uint32_t shards = 256;
    const uint32_t days = SHARD_HEAT_PARTITIONS_MAX / shards;
    static_assert(SHARD_HEAT_PARTITIONS_MAX % 256u == 0, "whole days");
    for (uint32_t d = days; d-- > 0;) {
        for (uint32_t s = shards; s-- > 0;) {
            shard_heat_observe(f->heat, T0, day + (int32_t)d, s, -1, NULL);
        }
    }
    observe_n(f->heat, T0, day, 5, 6);
    tick(f, T0 + 1);
    const struct shard_heat_history_view *v = copy(f, 1, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->column_count, 1);
    assert_int_equal(v->columns[0].cell_count, SHARD_HEAT_PARTITIONS_MAX);
    uint64_t events = 0;
    for (uint32_t i = 0; i < SHARD_HEAT_PARTITIONS_MAX; i++) {
        const struct shard_heat_cell *c = cell(f, 0, i);
        assert_int_equal(c->day, day + (int32_t)(i / shards));
        assert_int_equal(c->shard, i % shards);
        events += c->events;
    }
    assert_int_equal(events, SHARD_HEAT_PARTITIONS_MAX + 6);
    assert_int_equal(cell(f, 0, 5)->events, 7);
}

static void test_heat_history_cursor_gives_only_new_columns(void **state)
{
    /* A copy after a previous copy's second holds only the seconds completed since. */
    struct fixture *f = *state;
    const int32_t day = day0();
    for (int64_t s = 0; s < 5; s++) {
        observe_n(f->heat, T0 + s, day, 0, 1);
    }
    tick(f, T0 + 5);
    int64_t seen = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL)->second;
    assert_int_equal(nonempty_count(&f->view), 5);
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, seen);
    assert_int_equal(v->column_count, 0);
    observe_n(f->heat, T0 + 5, day, 1, 2);
    observe_n(f->heat, T0 + 6, day, 2, 3);
    tick(f, T0 + 7);
    v = copy(f, SHARD_HEAT_HISTORY_S, seen);
    assert_int_equal(v->second, T0 + 6);
    assert_int_equal(v->column_count, 2);
    assert_int_equal(v->columns[0].t, T0 + 5);
    assert_int_equal(cell(f, 1, 0)->shard, 2);
}

static void test_heat_history_copy_too_few_cells_says_how_many(void **state)
{
    /* Too small a buffer: -ENOSPC, nothing copied, the cells needed named. */
    struct fixture *f = *state;
    const int32_t day = day0();
    for (uint32_t s = 0; s < 6; s++) {
        observe_n(f->heat, T0, day, s, 1);
    }
    tick(f, T0 + 1);
    struct shard_heat_cell few[4];
    assert_int_equal(shard_heat_history_copy(f->history, SHARD_HEAT_HISTORY_S,
                                             SHARD_HEAT_HISTORY_ALL, &f->view, few, 4),
                     -ENOSPC);
    assert_int_equal(f->view.cell_count, 6);
    assert_int_equal(f->view.column_count, 0);
}

static void test_heat_history_clock_jump_keeps_the_window(void **state)
{
    /* The heat's clock jumping minutes ahead completes every second between: each gets a
     * column, but only the seconds the heat's window covers have counts; a second completed by
     * the jump more than a window before the new clock is an empty column. */
    struct fixture *f = *state;
    const int32_t day = day0();
    observe_n(f->heat, T0, day, 0, 2);
    tick(f, T0 + 1);
    observe_n(f->heat, T0 + 1, day, 0, 3);
    observe_n(f->heat, T0 + 200, day, 1, 1);
    tick(f, T0 + 201);
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->second, T0 + 200);
    assert_int_equal(v->column_count, 200 + SHARD_HEAT_WINDOW_S);
    assert_consecutive(v);
    assert_int_equal(nonempty_count(v), 2);
    assert_int_equal(v->columns[at(f, T0)].cell_count, 1);
    assert_int_equal(v->columns[at(f, T0 + 200)].cell_count, 1);
    /* T0 + 1 (3 events) completed in the jump, 199 s before the new clock: empty. */
    assert_int_equal(v->columns[at(f, T0 + 1)].cell_count, 0);
    /* A jump past the whole ring keeps its last SHARD_HEAT_HISTORY_S seconds only. */
    observe_n(f->heat, T0 + 1000, day, 2, 1);
    tick(f, T0 + 1001);
    v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->column_count, SHARD_HEAT_HISTORY_S);
    assert_consecutive(v);
    assert_int_equal(nonempty_count(v), 1);
}

struct plan_record {
    struct shard_growth growth;
    uint32_t calls;
};

static int plan_take(const struct shard_growth *growth, void *user)
{
    struct plan_record *r = user;
    r->growth = *growth;
    r->calls++;
    return 0;
}

static void test_heat_history_growth_has_heat_second(void **state)
{
    /* A planned growth carries the heat's current second; the history lists a growth once its
     * second is complete and in the window asked for, and after a cursor only newer ones. */
    struct fixture *f = *state;
    const int32_t day = day0();
    struct shard_map *map = NULL;
    assert_int_equal(shard_map_open(NULL, 4, 0, &map), 0);
    assert_true(shard_map_ensure(map, day) >= 0);
    for (int64_t s = 0; s < 5; s++) {
        observe_n(f->heat, T0 + s, day, 0, 5000);
    }
    tick(f, T0 + 5);
    struct plan_record r = {0};
    assert_int_equal(
        shard_growth_plan(f->heat, map, 1000, 256, (T0 + 5) * 1000 + 10, plan_take, &r), 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.growth.t, T0 + 5);
    assert_int_equal(r.growth.at_ms, (T0 + 5) * 1000 + 10);
    shard_heat_history_growth(f->history, &r.growth);
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->growth_count, 0); /* its second is not complete yet */
    int64_t seen = v->second;
    tick(f, T0 + 6);
    v = copy(f, SHARD_HEAT_HISTORY_S, seen);
    assert_int_equal(v->growth_count, 1);
    assert_int_equal(v->growths[0].t, T0 + 5);
    assert_int_equal(v->growths[0].to, r.growth.to);
    assert_int_equal(copy(f, SHARD_HEAT_HISTORY_S, T0 + 5)->growth_count, 0);
    tick(f, T0 + 7);
    assert_int_equal(copy(f, 1, SHARD_HEAT_HISTORY_ALL)->growth_count, 0);
    assert_int_equal(copy(f, 2, SHARD_HEAT_HISTORY_ALL)->growth_count, 1);
    shard_map_close(map);
}

static void test_heat_history_growths_ring_keeps_newest(void **state)
{
    /* More growths than the ring holds: the newest SHARD_HEAT_HISTORY_GROWTHS_MAX, in order. */
    struct fixture *f = *state;
    observe_n(f->heat, T0 + 10, day0(), 0, 1);
    tick(f, T0 + 11);
    for (uint32_t i = 0; i < SHARD_HEAT_HISTORY_GROWTHS_MAX + 5u; i++) {
        struct shard_growth g = {.day = day0(), .from = 1, .to = 2 + i, .t = T0 + 10};
        shard_heat_history_growth(f->history, &g);
    }
    const struct shard_heat_history_view *v = copy(f, SHARD_HEAT_HISTORY_S, SHARD_HEAT_HISTORY_ALL);
    assert_int_equal(v->growth_count, SHARD_HEAT_HISTORY_GROWTHS_MAX);
    assert_int_equal(v->growths[0].to, 2 + 5);
    assert_int_equal(v->growths[SHARD_HEAT_HISTORY_GROWTHS_MAX - 1].to,
                     2 + SHARD_HEAT_HISTORY_GROWTHS_MAX + 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_heat_history_empty_before_any_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_columns_every_second_and_ordered, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_late_event_retakes_its_column, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_late_past_the_window_stays_out, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_revisions_increase, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_copy_since_gives_new_and_amended, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_ring_wraps_and_window_cuts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_column_holds_every_partition, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_cursor_gives_only_new_columns, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_copy_too_few_cells_says_how_many, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_clock_jump_keeps_the_window, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_growth_has_heat_second, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_history_growths_ring_keeps_newest, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
