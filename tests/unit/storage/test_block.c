/*
 * Unit tests of storage/block.c: the open block (limits, and that a refused add leaves it
 * unchanged), sealing into the on-disk format and reading it back (every field of every event,
 * header cells against a re-aggregation in the test, the amount scale), and rejection of damaged
 * blocks: any flipped byte, any truncation, and damage behind recomputed checksums (decoder
 * robustness: corrupt input must give an error, never a crash or undefined behaviour).
 *
 * The block functions are private to storage/; the test includes storage/format.h for them.
 * Randomised tests print their seed (test_seed) and replay the one in DS_TEST_SEED.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "storage/format.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

#define DAY_MS 86400000LL
#define HOUR_MS 3600000LL
/* 2026-01-21, the day of the contract example. */
#define TEST_DAY 20474
#define EVENTS_MAX_TEST 4096u

/* ---- helpers ------------------------------------------------------------------------------- */

struct fixture {
    struct block_codec codec;
    struct open_block *ob;
    uint64_t rng;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(block_codec_init(&f->codec, 1), 0);
    f->ob = calloc(1, sizeof(*f->ob));
    assert_non_null(f->ob);
    open_block_reset(f->ob); /* as storage does: a fresh block has no source yet */
    f->rng = 1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    open_block_free(f->ob);
    free(f->ob);
    block_codec_deinit(&f->codec);
    free(f);
    return 0;
}

static int64_t day_start_ms(int32_t day)
{
    return (int64_t)day * DAY_MS;
}

/* Events a decode delivered, in order. */
struct collected {
    struct ds_event *events;
    struct ds_source *sources; /* partition BLOCK_SOURCE_NONE: the row came without one */
    size_t count;
    size_t capacity;
};

static int collect_event(const struct ds_event *event, const struct ds_source *source, void *user)
{
    struct collected *c = user;
    if (c->count == c->capacity) {
        c->capacity = c->capacity == 0 ? 64 : c->capacity * 2;
        c->events = realloc(c->events, c->capacity * sizeof(*c->events));
        c->sources = realloc(c->sources, c->capacity * sizeof(*c->sources));
        assert_non_null(c->events);
        assert_non_null(c->sources);
    }
    c->sources[c->count] =
        source != NULL ? *source : (struct ds_source){.partition = BLOCK_SOURCE_NONE};
    c->events[c->count++] = *event;
    return 0;
}

/* A sealed block in its own malloc'd buffer (8-aligned, as the readers' buffers are). */
struct sealed {
    uint8_t *buf;
    size_t len;
};

static struct sealed seal(struct fixture *f, int32_t day)
{
    size_t bound = block_seal_bound(f->ob);
    uint8_t *buf = malloc(bound);
    assert_non_null(buf);
    int64_t len = block_seal(&f->codec, f->ob, day_start_ms(day), buf, bound);
    assert_true(len > 0);
    assert_true((size_t)len <= bound);
    return (struct sealed){.buf = buf, .len = (size_t)len};
}

/* Parses and decodes a whole block; returns the first error. */
static int parse_and_decode(struct fixture *f, const uint8_t *buf, size_t len, int32_t day,
                            struct collected *out)
{
    struct block_view view;
    int rc = block_view_parse(buf, len, &view);
    if (rc != 0) {
        return rc;
    }
    size_t need = (size_t)view.header->header_bytes + view.header->payload_bytes;
    if (need > len) {
        return -DS_ECORRUPT; /* what every reader checks before reading a payload */
    }
    return block_decode(&f->codec, &view, buf + view.header->header_bytes, day_start_ms(day),
                        out != NULL ? collect_event : NULL, out);
}

/* Adds events to f->ob; every add must succeed. */
static void add_all(struct fixture *f, const struct ds_event *events, size_t count,
                    const struct ds_source *sources, uint32_t events_max)
{
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(
            open_block_add(f->ob, &events[i], sources ? &sources[i] : NULL, false, events_max), 0);
    }
}

/* The per-(status, hour) aggregates of a set of events, keyed by status name. */
struct truth_cell {
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    uint32_t hour;
    int32_t count; /* inserts - retractions */
    ds_i128 amount;
};

static size_t truth_cells(const struct ds_event *events, size_t count, int32_t day,
                          struct truth_cell *cells, size_t cells_max)
{
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const struct ds_event *e = &events[i];
        uint32_t hour = (uint32_t)((e->ts_ms - day_start_ms(day)) / HOUR_MS);
        size_t j = 0;
        while (j < n && !(cells[j].hour == hour && cells[j].status_len == e->status_len &&
                          memcmp(cells[j].status, e->status, e->status_len) == 0)) {
            j++;
        }
        if (j == n) {
            assert_true(n < cells_max);
            cells[n] = (struct truth_cell){.status_len = e->status_len, .hour = hour};
            memcpy(cells[n].status, e->status, e->status_len);
            n++;
        }
        cells[j].count += e->retract ? -1 : 1;
        cells[j].amount += e->retract ? -(ds_i128)e->amount_units : e->amount_units;
    }
    return n;
}

/* Checks a parsed header against the events it was sealed from. */
static void assert_header_matches(const struct block_view *view, const struct ds_event *events,
                                  size_t count, int32_t day)
{
    const struct block_header *h = view->header;
    assert_int_equal(h->event_count, count);
    int64_t ts_min = INT64_MAX;
    int64_t ts_max = INT64_MIN;
    for (size_t i = 0; i < count; i++) {
        ts_min = events[i].ts_ms < ts_min ? events[i].ts_ms : ts_min;
        ts_max = events[i].ts_ms > ts_max ? events[i].ts_ms : ts_max;
    }
    assert_true(h->ts_min_ms == ts_min);
    assert_true(h->ts_max_ms == ts_max);

    static struct truth_cell truth[STORAGE_BLOCK_STATUS_MAX * 24];
    size_t n = truth_cells(events, count, day, truth, DS_ARRAY_LEN(truth));
    assert_int_equal(h->cell_count, n);
    int64_t total = 0;
    int64_t want_total = 0;
    for (size_t i = 0; i < count; i++) {
        want_total += events[i].retract ? -1 : 1;
    }
    for (uint16_t i = 0; i < h->cell_count; i++) {
        const struct block_cell *cell = &view->cells[i];
        assert_true(cell->status_index < h->status_count);
        const char *name = view->status[cell->status_index];
        uint8_t len = view->status_len[cell->status_index];
        size_t j = 0;
        while (j < n && !(truth[j].hour == cell->hour && truth[j].status_len == len &&
                          memcmp(truth[j].status, name, len) == 0)) {
            j++;
        }
        assert_true(j < n);
        assert_int_equal(cell->count, truth[j].count);
        assert_true(block_cell_amount(cell) == truth[j].amount);
        total += cell->count;
    }
    assert_true(total == want_total);
}

/* Seals the fixture's block, parses it, checks the header and that decoding gives back events. */
static struct sealed round_trip(struct fixture *f, const struct ds_event *events, size_t count,
                                int32_t day)
{
    struct sealed s = seal(f, day);
    struct block_view view;
    assert_int_equal(block_header_check(s.buf, s.len), 0);
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal((size_t)view.header->header_bytes + view.header->payload_bytes, s.len);
    assert_header_matches(&view, events, count, day);
    struct collected got = {0};
    assert_int_equal(block_decode(&f->codec, &view, s.buf + view.header->header_bytes,
                                  day_start_ms(day), collect_event, &got),
                     0);
    assert_int_equal(got.count, count);
    for (size_t i = 0; i < count; i++) {
        test_event_assert_equal(&events[i], &got.events[i]);
        assert_int_equal(got.events[i].retract, events[i].retract);
    }
    free(got.events);
    free(got.sources);
    return s;
}

/* ---- round trips --------------------------------------------------------------------------- */

static void test_block_round_trip_random_events(void **state)
{
    /* Random events of every shape seal and decode back field for field, in order. */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    static const size_t sizes[] = {1, 2, 7, 100, 1000, EVENTS_MAX_TEST};
    for (size_t round = 0; round < DS_ARRAY_LEN(sizes); round++) {
        size_t count = sizes[round];
        struct ds_event *events = calloc(count, sizeof(*events));
        assert_non_null(events);
        int32_t day = TEST_DAY + (int32_t)round;
        for (size_t i = 0; i < count; i++) {
            test_event_random_wide(&rng, day, TEST_STATUS_POOL_COUNT, &events[i]);
        }
        open_block_reset(f->ob);
        add_all(f, events, count, NULL, STORAGE_BLOCK_EVENTS_MAX);
        struct sealed s = round_trip(f, events, count, day);
        free(s.buf);
        free(events);
    }
}

static void test_block_round_trip_every_hour_and_day_edges(void **state)
{
    /* Events at the first and last millisecond of every hour land in that hour's cell. */
    struct fixture *f = *state;
    struct ds_event events[48];
    for (int h = 0; h < 24; h++) {
        for (int edge = 0; edge < 2; edge++) {
            struct ds_event *e = &events[h * 2 + edge];
            memset(e, 0, sizeof(*e));
            test_id_int(&e->order_id, 1000 + h * 2 + edge);
            test_id_int(&e->customer_id, 7);
            e->ts_ms = day_start_ms(TEST_DAY) + h * HOUR_MS + (edge ? HOUR_MS - 1 : 0);
            e->amount_units = (int64_t)(h + 1) * (edge ? -1 : 1);
            test_event_set_status(e, h % 2 ? "paid" : "shipped");
        }
    }
    add_all(f, events, DS_ARRAY_LEN(events), NULL, STORAGE_BLOCK_EVENTS_MAX);
    struct sealed s = round_trip(f, events, DS_ARRAY_LEN(events), TEST_DAY);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->cell_count, 24);
    for (uint16_t i = 0; i < 24; i++) {
        /* Each hour holds +(h+1) and -(h+1): two events, amount zero. */
        assert_int_equal(view.cells[i].count, 2);
        assert_true(block_cell_amount(&view.cells[i]) == 0);
    }
    free(s.buf);
}

static void test_block_round_trip_id_extremes(void **state)
{
    /* Integer ids at 1 and 2^63-1 side by side (largest deltas) and strings of 1 and 64 bytes. */
    struct fixture *f = *state;
    struct ds_event events[6];
    char all_bytes[DS_ID_BYTES_MAX];
    for (size_t i = 0; i < sizeof(all_bytes); i++) {
        all_bytes[i] = (char)(i * 37);
    }
    memset(events, 0, sizeof(events));
    test_id_int(&events[0].order_id, 1);
    test_id_int(&events[1].order_id, INT64_MAX);
    test_id_int(&events[2].order_id, 1);
    test_id_string(&events[3].order_id, "\0", 1);
    test_id_string(&events[4].order_id, all_bytes, DS_ID_BYTES_MAX);
    test_id_int(&events[5].order_id, INT64_MAX - 1);
    test_id_int(&events[0].customer_id, INT64_MAX);
    test_id_string(&events[1].customer_id, all_bytes, DS_ID_BYTES_MAX);
    test_id_int(&events[2].customer_id, 1);
    test_id_int(&events[3].customer_id, 128);
    test_id_string(&events[4].customer_id, "c", 1);
    test_id_int(&events[5].customer_id, 127);
    for (size_t i = 0; i < DS_ARRAY_LEN(events); i++) {
        events[i].ts_ms = day_start_ms(TEST_DAY) + (int64_t)i * 1000;
        test_event_set_status(&events[i], "");
    }
    events[2].amount_units = INT64_MIN;
    events[3].amount_units = INT64_MAX;
    add_all(f, events, DS_ARRAY_LEN(events), NULL, STORAGE_BLOCK_EVENTS_MAX);
    struct sealed s = round_trip(f, events, DS_ARRAY_LEN(events), TEST_DAY);
    free(s.buf);
}

static void test_block_header_sources_recorded(void **state)
{
    /* The header keeps the source partition and offset range: one source, mixed, or none. */
    struct fixture *f = *state;
    struct ds_event events[4];
    struct ds_source sources[4] = {{3, 100}, {3, 90}, {3, 250}, {3, 120}};
    for (size_t i = 0; i < 4; i++) {
        memset(&events[i], 0, sizeof(events[i]));
        test_id_int(&events[i].order_id, (int64_t)i + 1);
        test_id_int(&events[i].customer_id, 1);
        events[i].ts_ms = day_start_ms(TEST_DAY) + 5;
        test_event_set_status(&events[i], "paid");
    }
    add_all(f, events, 4, sources, 100);
    struct sealed s = round_trip(f, events, 4, TEST_DAY);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->source_partition, 3);
    assert_true(view.header->source_offset_min == 90);
    assert_true(view.header->source_offset_max == 250);
    free(s.buf);

    open_block_reset(f->ob);
    sources[2].partition = DS_SOURCE_FILE;
    add_all(f, events, 4, sources, 100);
    s = round_trip(f, events, 4, TEST_DAY);
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->source_partition, BLOCK_SOURCE_MIXED);
    assert_true(view.header->source_offset_min == 90);
    assert_true(view.header->source_offset_max == 250);
    free(s.buf);

    open_block_reset(f->ob);
    add_all(f, events, 4, NULL, 100);
    s = round_trip(f, events, 4, TEST_DAY);
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->source_partition, BLOCK_SOURCE_NONE);
    free(s.buf);

    /* Events without a source before ones with a source: the range is the sourced ones'. */
    open_block_reset(f->ob);
    assert_int_equal(open_block_add(f->ob, &events[0], NULL, false, 100), 0);
    assert_int_equal(open_block_add(f->ob, &events[1], &sources[0], false, 100), 0);
    assert_int_equal(open_block_add(f->ob, &events[2], &sources[1], false, 100), 0);
    s = round_trip(f, events, 3, TEST_DAY);
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->source_partition, 3);
    assert_true(view.header->source_offset_min == 90);
    assert_true(view.header->source_offset_max == 100);
    free(s.buf);
}

/* ---- amount scale -------------------------------------------------------------------------- */

/* Seals count events with the given amounts; returns the scale byte of the raw payload. */
static uint8_t scale_of(struct fixture *f, const int64_t *amounts, size_t count,
                        uint32_t *raw_bytes)
{
    struct ds_event *events = calloc(count, sizeof(*events));
    assert_non_null(events);
    open_block_reset(f->ob);
    for (size_t i = 0; i < count; i++) {
        test_id_int(&events[i].order_id, (int64_t)i + 1);
        test_id_int(&events[i].customer_id, 9);
        events[i].ts_ms = day_start_ms(TEST_DAY) + (int64_t)i;
        events[i].amount_units = amounts[i];
        test_event_set_status(&events[i], "paid");
    }
    add_all(f, events, count, NULL, STORAGE_BLOCK_EVENTS_MAX);
    struct sealed s = round_trip(f, events, count, TEST_DAY);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    *raw_bytes = view.header->raw_bytes;
    /* The raw payload's first byte is the scale; decompress it independently of the codec. */
    uint8_t *raw = malloc(view.header->raw_bytes);
    assert_non_null(raw);
    size_t n = ZSTD_decompress(raw, view.header->raw_bytes, s.buf + view.header->header_bytes,
                               view.header->payload_bytes);
    assert_false(ZSTD_isError(n));
    assert_int_equal(n, view.header->raw_bytes);
    uint8_t scale = raw[0];
    free(raw);
    free(s.buf);
    free(events);
    return scale;
}

static void test_block_amount_scale_largest_common_power_of_ten(void **state)
{
    /* The scale is the largest power of ten (up to 10^4) dividing every amount; values stay exact
     * whatever it is, and a larger scale gives a smaller raw payload. */
    struct fixture *f = *state;
    uint32_t raw4 = 0;
    uint32_t raw0 = 0;
    uint32_t raw = 0;
    const int64_t whole[] = {10000, 250000, -30000, 0, 9990000};
    assert_int_equal(scale_of(f, whole, DS_ARRAY_LEN(whole), &raw4), 4);
    const int64_t zeros[] = {0, 0, 0};
    assert_int_equal(scale_of(f, zeros, DS_ARRAY_LEN(zeros), &raw), 4);
    const int64_t thousand[] = {1000, -5000, 123000};
    assert_int_equal(scale_of(f, thousand, DS_ARRAY_LEN(thousand), &raw), 3);
    const int64_t cents[] = {100, -2500, 10000, 1999900};
    assert_int_equal(scale_of(f, cents, DS_ARRAY_LEN(cents), &raw), 2);
    const int64_t tenths[] = {10, 10000, -990};
    assert_int_equal(scale_of(f, tenths, DS_ARRAY_LEN(tenths), &raw), 1);
    const int64_t odd[] = {10000, 250000, -30001, 0, 9990000};
    assert_int_equal(scale_of(f, odd, DS_ARRAY_LEN(odd), &raw0), 0);
    assert_true(raw4 < raw0);
    const int64_t extremes[] = {INT64_MIN, INT64_MAX, -1};
    assert_int_equal(scale_of(f, extremes, DS_ARRAY_LEN(extremes), &raw), 0);
    /* The largest multiples of 10^4 that fit: scaled down and multiplied back exactly. */
    const int64_t big[] = {INT64_MAX / 10000 * 10000, INT64_MIN / 10000 * 10000};
    assert_int_equal(scale_of(f, big, DS_ARRAY_LEN(big), &raw), 4);
}

/* ---- open block limits --------------------------------------------------------------------- */

/* Everything open_block_add may change, to check that a refused add changed nothing. */
struct ob_snapshot {
    struct open_block fields;
    struct open_row *rows;
    uint8_t *strings;
};

static struct ob_snapshot ob_snapshot_take(const struct open_block *ob)
{
    struct ob_snapshot s = {.fields = *ob};
    s.rows = malloc((size_t)ob->count * sizeof(*s.rows) + 1);
    s.strings = malloc((size_t)ob->strings_bytes + 1);
    assert_non_null(s.rows);
    assert_non_null(s.strings);
    if (ob->count > 0) {
        memcpy(s.rows, ob->rows, (size_t)ob->count * sizeof(*s.rows));
    }
    if (ob->strings_bytes > 0) {
        memcpy(s.strings, ob->strings, ob->strings_bytes);
    }
    return s;
}

static void ob_snapshot_check_and_free(struct ob_snapshot *s, const struct open_block *ob)
{
    assert_int_equal(ob->count, s->fields.count);
    assert_int_equal(ob->strings_bytes, s->fields.strings_bytes);
    assert_int_equal(ob->status_count, s->fields.status_count);
    assert_int_equal(ob->items_bytes, s->fields.items_bytes);
    assert_int_equal(ob->extras_count, s->fields.extras_count);
    assert_true(ob->ts_min_ms == s->fields.ts_min_ms);
    assert_true(ob->ts_max_ms == s->fields.ts_max_ms);
    assert_int_equal(ob->source_partition, s->fields.source_partition);
    assert_true(ob->source_offset_min == s->fields.source_offset_min);
    assert_true(ob->source_offset_max == s->fields.source_offset_max);
    for (uint16_t i = 0; i < ob->status_count; i++) {
        assert_int_equal(ob->status_len[i], s->fields.status_len[i]);
        assert_memory_equal(ob->status[i], s->fields.status[i], ob->status_len[i]);
    }
    if (ob->count > 0) {
        assert_memory_equal(ob->rows, s->rows, (size_t)ob->count * sizeof(*s->rows));
    }
    if (ob->strings_bytes > 0) {
        assert_memory_equal(ob->strings, s->strings, ob->strings_bytes);
    }
    free(s->rows);
    free(s->strings);
}

static void simple_event(struct ds_event *e, int64_t order, const char *status, int64_t ts_offset)
{
    memset(e, 0, sizeof(*e));
    test_id_int(&e->order_id, order);
    test_id_int(&e->customer_id, order % 17 + 1);
    e->ts_ms = day_start_ms(TEST_DAY) + ts_offset;
    e->amount_units = order * 100;
    test_event_set_status(e, status);
}

static void test_block_add_limit_events_max(void **state)
{
    /* Past events_max the add is refused with -DS_ELIMIT and the block is unchanged; it still
     * seals to exactly the accepted events. */
    struct fixture *f = *state;
    const uint32_t events_max = 7;
    struct ds_event events[7];
    struct ds_source source = {.partition = 1, .offset = 10};
    for (uint32_t i = 0; i < events_max; i++) {
        simple_event(&events[i], i + 1, i % 2 ? "paid" : "shipped", (int64_t)i * 1000);
        source.offset = 10 + i;
        assert_int_equal(open_block_add(f->ob, &events[i], &source, false, events_max), 0);
    }
    struct ds_event extra;
    simple_event(&extra, 99, "new-status", 1);
    test_id_string(&extra.order_id, "a-string-id", 11);
    extra.ts_ms = day_start_ms(TEST_DAY) + DAY_MS - 1; /* would move ts_max */
    struct ds_source other = {.partition = 2, .offset = 1};
    struct ob_snapshot snap = ob_snapshot_take(f->ob);
    assert_int_equal(open_block_add(f->ob, &extra, &other, false, events_max), -DS_ELIMIT);
    ob_snapshot_check_and_free(&snap, f->ob);
    /* A lower events_max than the count also refuses. */
    snap = ob_snapshot_take(f->ob);
    assert_int_equal(open_block_add(f->ob, &extra, NULL, false, 3), -DS_ELIMIT);
    ob_snapshot_check_and_free(&snap, f->ob);
    struct sealed s = round_trip(f, events, events_max, TEST_DAY);
    free(s.buf);
}

static void test_block_add_limit_statuses(void **state)
{
    /* A status beyond STORAGE_BLOCK_STATUS_MAX distinct ones is refused (-DS_ELIMIT) and leaves
     * the block unchanged, even when the add had to grow the row buffer first; known statuses
     * are still accepted afterwards. */
    struct fixture *f = *state;
    /* 1024 events fill the first row allocation exactly, so the refused add also reallocates. */
    const uint32_t count = 1024;
    struct ds_event *events = calloc(count + 1, sizeof(*events));
    assert_non_null(events);
    for (uint32_t i = 0; i < count; i++) {
        char status[8];
        snprintf(status, sizeof(status), "s%u", i % STORAGE_BLOCK_STATUS_MAX);
        simple_event(&events[i], i + 1, status, (int64_t)i * 60000);
        assert_int_equal(open_block_add(f->ob, &events[i], NULL, false, STORAGE_BLOCK_EVENTS_MAX),
                         0);
    }
    assert_int_equal(f->ob->status_count, STORAGE_BLOCK_STATUS_MAX);
    struct ds_event extra;
    simple_event(&extra, 5000, "one-too-many", 7);
    test_id_string(&extra.customer_id, "cust", 4);
    struct ob_snapshot snap = ob_snapshot_take(f->ob);
    assert_int_equal(open_block_add(f->ob, &extra, NULL, false, STORAGE_BLOCK_EVENTS_MAX),
                     -DS_ELIMIT);
    ob_snapshot_check_and_free(&snap, f->ob);
    simple_event(&events[count], 6000, "s5", 8);
    assert_int_equal(open_block_add(f->ob, &events[count], NULL, false, STORAGE_BLOCK_EVENTS_MAX),
                     0);
    struct sealed s = round_trip(f, events, count + 1, TEST_DAY);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->status_count, STORAGE_BLOCK_STATUS_MAX);
    free(s.buf);
    free(events);
}

static void test_block_add_limit_string_capacity(void **state)
{
    /* String ids beyond BLOCK_STRING_BYTES_MAX are refused (-DS_ELIMIT), whether the order or
     * the customer id overflows, with a new status pending or not; the block is unchanged. */
    struct fixture *f = *state;
    char text[DS_ID_BYTES_MAX];
    memset(text, 'q', sizeof(text));
    size_t capacity = BLOCK_STRING_BYTES_MAX / (2 * (1 + DS_ID_BYTES_MAX)) + 2;
    struct ds_event *events = calloc(capacity, sizeof(*events));
    assert_non_null(events);
    size_t accepted = 0;
    int rc = 0;
    while (rc == 0) {
        assert_true(accepted < capacity);
        struct ds_event *e = &events[accepted];
        simple_event(e, (int64_t)accepted + 1, accepted % 2 ? "a" : "b", (int64_t)accepted);
        text[0] = (char)accepted;
        test_id_string(&e->order_id, text, DS_ID_BYTES_MAX);
        test_id_string(&e->customer_id, text, DS_ID_BYTES_MAX);
        /* Snapshots (a copy of up to 1 MiB) only near the limit, where a refusal can come. */
        bool near =
            f->ob->strings_bytes + 4u * 2u * (1u + DS_ID_BYTES_MAX) > BLOCK_STRING_BYTES_MAX;
        struct ob_snapshot snap = {0};
        if (near) {
            snap = ob_snapshot_take(f->ob);
        }
        rc = open_block_add(f->ob, e, NULL, false, STORAGE_BLOCK_EVENTS_MAX);
        if (rc == 0) {
            free(snap.rows);
            free(snap.strings);
            accepted++;
        } else {
            assert_true(near);
            assert_int_equal(rc, -DS_ELIMIT);
            ob_snapshot_check_and_free(&snap, f->ob);
        }
    }
    assert_true(f->ob->strings_bytes <= BLOCK_STRING_BYTES_MAX);
    assert_true(f->ob->strings_bytes + 2u * (1u + DS_ID_BYTES_MAX) > BLOCK_STRING_BYTES_MAX);

    /* The order id would still fit but the customer id not: both roll back. */
    size_t room = BLOCK_STRING_BYTES_MAX - f->ob->strings_bytes;
    if (room >= 2) {
        struct ds_event e;
        simple_event(&e, 77, "brand-new-status", 3);
        size_t order_len = room - 1 < DS_ID_BYTES_MAX ? room - 1 : DS_ID_BYTES_MAX;
        test_id_string(&e.order_id, text, order_len);
        test_id_string(&e.customer_id, text, DS_ID_BYTES_MAX);
        struct ob_snapshot snap = ob_snapshot_take(f->ob);
        assert_int_equal(open_block_add(f->ob, &e, NULL, false, STORAGE_BLOCK_EVENTS_MAX),
                         -DS_ELIMIT);
        ob_snapshot_check_and_free(&snap, f->ob);
    }
    /* An event with integer ids still fits. */
    simple_event(&events[accepted], 123456, "b", 9);
    assert_int_equal(
        open_block_add(f->ob, &events[accepted], NULL, false, STORAGE_BLOCK_EVENTS_MAX), 0);
    accepted++;
    struct sealed s = round_trip(f, events, accepted, TEST_DAY);
    free(s.buf);
    free(events);
}

static void test_block_seal_small_destination(void **state)
{
    /* Sealing into less than block_seal_bound is refused with -ENOSPC. */
    struct fixture *f = *state;
    struct ds_event e;
    simple_event(&e, 1, "paid", 0);
    assert_int_equal(open_block_add(f->ob, &e, NULL, false, 10), 0);
    size_t bound = block_seal_bound(f->ob);
    uint8_t *buf = malloc(bound);
    assert_non_null(buf);
    assert_true(block_seal(&f->codec, f->ob, day_start_ms(TEST_DAY), buf, bound - 1) == -ENOSPC);
    free(buf);
}

/* ---- damage -------------------------------------------------------------------------------- */

/* A block of mixed events used by the damage tests: small enough to flip every byte. */
static struct sealed damage_subject(struct fixture *f, size_t count, struct ds_event **events_out)
{
    uint64_t rng = 42;
    struct ds_event *events = calloc(count, sizeof(*events));
    assert_non_null(events);
    for (size_t i = 0; i < count; i++) {
        test_event_random_wide(&rng, TEST_DAY, 4, &events[i]);
    }
    /* Large whole amounts make the scale 4, so damage to an amount can overflow on decode. */
    events[0].amount_units = INT64_MAX / 10000 * 10000;
    events[1].amount_units = INT64_MIN / 10000 * 10000;
    for (size_t i = 2; i < count; i++) {
        events[i].amount_units = events[i].amount_units / 10000 * 10000;
    }
    open_block_reset(f->ob);
    add_all(f, events, count, NULL, STORAGE_BLOCK_EVENTS_MAX);
    struct sealed s = round_trip(f, events, count, TEST_DAY);
    *events_out = events;
    return s;
}

static void test_block_corrupt_any_flipped_byte(void **state)
{
    /* Flipping any single byte of a sealed block, header or payload, is detected: parse, header
     * check or decode answers -DS_ECORRUPT or -DS_EZSTD, never success and never a crash. */
    struct fixture *f = *state;
    struct ds_event *events = NULL;
    struct sealed s = damage_subject(f, 60, &events);
    uint8_t *copy = malloc(s.len);
    assert_non_null(copy);
    static const uint8_t masks[] = {0x01, 0x10, 0x80, 0xFF};
    for (size_t at = 0; at < s.len; at++) {
        for (size_t m = 0; m < DS_ARRAY_LEN(masks); m++) {
            memcpy(copy, s.buf, s.len);
            copy[at] ^= masks[m];
            int rc = parse_and_decode(f, copy, s.len, TEST_DAY, NULL);
            if (rc != -DS_ECORRUPT && rc != -DS_EZSTD) {
                print_error("byte %zu mask 0x%02x: rc %d\n", at, masks[m], rc);
                fail();
            }
            if (at < sizeof(struct block_header) && block_header_check(copy, s.len) == 0) {
                /* Damage in the fixed header passes the header check alone only when it claims
                 * more header than the buffer holds (the reader then reads on and fails). */
                struct block_header h;
                memcpy(&h, copy, sizeof(h));
                assert_true(h.header_bytes > s.len);
            }
        }
    }
    free(copy);
    free(s.buf);
    free(events);
}

static void test_block_corrupt_truncated(void **state)
{
    /* A block cut at any length is rejected: the header parse fails while the header is
     * incomplete, then the length check; with the missing payload bytes zeroed, decode fails. */
    struct fixture *f = *state;
    struct ds_event *events = NULL;
    struct sealed s = damage_subject(f, 40, &events);
    struct block_view full;
    assert_int_equal(block_view_parse(s.buf, s.len, &full), 0);
    size_t header_bytes = full.header->header_bytes;
    for (size_t len = 0; len < s.len; len++) {
        /* Exactly len bytes, so that ASan sees any read past them. */
        uint8_t *cut = malloc(len > 0 ? len : 1);
        assert_non_null(cut);
        memcpy(cut, s.buf, len);
        struct block_view view;
        int rc = block_view_parse(cut, len, &view);
        if (len < header_bytes) {
            assert_int_equal(rc, -DS_ECORRUPT);
        } else {
            assert_int_equal(rc, 0);
            assert_true(len < (size_t)view.header->header_bytes + view.header->payload_bytes);
        }
        assert_int_equal(parse_and_decode(f, cut, len, TEST_DAY, NULL), -DS_ECORRUPT);
        free(cut);
        /* A torn write that left zeros where the payload's tail should be. */
        if (len >= header_bytes) {
            uint8_t *zeroed = calloc(1, s.len);
            assert_non_null(zeroed);
            memcpy(zeroed, s.buf, len);
            rc = parse_and_decode(f, zeroed, s.len, TEST_DAY, NULL);
            assert_true(rc == -DS_ECORRUPT || rc == -DS_EZSTD);
            free(zeroed);
        }
    }
    free(s.buf);
    free(events);
}

/* Recomputes the header CRC after a deliberate change, as a buggy writer or an attacker could. */
static void fix_header_crc(uint8_t *buf)
{
    struct block_header h;
    memcpy(&h, buf, sizeof(h));
    h.header_crc = 0;
    memcpy(buf, &h, sizeof(h));
    h.header_crc = ds_crc32c(0, buf, h.header_bytes);
    memcpy(buf, &h, sizeof(h));
}

static void test_block_corrupt_header_behind_valid_crc(void **state)
{
    /* Header damage behind a recomputed CRC (status table, cells, counts, lengths) is either
     * refused with -DS_ECORRUPT or, when the result is still self-consistent (a renamed status,
     * say), decodes; it never crashes or trips undefined behaviour. */
    struct fixture *f = *state;
    struct ds_event *events = NULL;
    struct sealed s = damage_subject(f, 30, &events);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    size_t header_bytes = view.header->header_bytes;
    uint8_t *copy = malloc(s.len);
    assert_non_null(copy);
    static const uint8_t masks[] = {0x01, 0x04, 0x80, 0xFF};
    size_t accepted = 0;
    for (size_t at = 0; at < header_bytes; at++) {
        if (at >= offsetof(struct block_header, header_crc) && at < sizeof(struct block_header)) {
            continue; /* the CRC itself is recomputed */
        }
        for (size_t m = 0; m < DS_ARRAY_LEN(masks); m++) {
            memcpy(copy, s.buf, s.len);
            copy[at] ^= masks[m];
            struct block_header h;
            memcpy(&h, copy, sizeof(h));
            if (h.header_bytes >= sizeof(h) && h.header_bytes <= s.len) {
                fix_header_crc(copy);
            }
            struct collected got = {0};
            int rc = parse_and_decode(f, copy, s.len, TEST_DAY, &got);
            if (rc != 0 && rc != -DS_ECORRUPT && rc != -DS_EZSTD) {
                print_error("byte %zu mask 0x%02x: rc %d\n", at, masks[m], rc);
                fail();
            }
            if (rc == 0) {
                accepted++;
                /* A block that decodes is self-consistent: its cells re-aggregate its events
                 * (block_decode checks it), so only the header's own fields can differ. */
                assert_int_equal(got.count, 30);
            }
            free(got.events);
            free(got.sources);
        }
    }
    /* Status renames and in-range ts_min/max moves are among the self-consistent changes. */
    assert_true(accepted > 0);
    free(copy);
    free(s.buf);
    free(events);
}

static void test_block_corrupt_raw_payload_behind_valid_crc(void **state)
{
    /* Damage inside the decompressed columns, recompressed behind valid CRCs, exercises the
     * column decoder itself: every result is -DS_ECORRUPT or a decode whose events still
     * re-aggregate to the header; nothing crashes or overflows (run under UBSan). */
    struct fixture *f = *state;
    struct ds_event *events = NULL;
    struct sealed s = damage_subject(f, 30, &events);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    size_t header_bytes = view.header->header_bytes;
    size_t raw_len = view.header->raw_bytes;
    uint8_t *raw = malloc(raw_len);
    assert_non_null(raw);
    assert_int_equal(
        ZSTD_decompress(raw, raw_len, s.buf + header_bytes, view.header->payload_bytes), raw_len);
    uint8_t *damaged = malloc(raw_len);
    size_t block_capacity = header_bytes + ZSTD_compressBound(raw_len);
    uint8_t *block = malloc(block_capacity);
    assert_non_null(damaged);
    assert_non_null(block);
    ZSTD_CCtx *cctx = ZSTD_createCCtx(); /* one context: ZSTD_compress would make one a call */
    assert_non_null(cctx);
    static const uint8_t masks[] = {0x01, 0x02, 0x40, 0x80, 0x7F, 0xFF};
    for (size_t at = 0; at < raw_len; at++) {
        for (size_t m = 0; m < DS_ARRAY_LEN(masks); m++) {
            memcpy(damaged, raw, raw_len);
            damaged[at] ^= masks[m];
            memcpy(block, s.buf, header_bytes);
            size_t z = ZSTD_compressCCtx(cctx, block + header_bytes, block_capacity - header_bytes,
                                         damaged, raw_len, 1);
            assert_false(ZSTD_isError(z));
            struct block_header h;
            memcpy(&h, block, sizeof(h));
            h.payload_bytes = (uint32_t)z;
            h.payload_crc = ds_crc32c(0, block + header_bytes, z);
            memcpy(block, &h, sizeof(h));
            fix_header_crc(block);
            int rc = parse_and_decode(f, block, header_bytes + z, TEST_DAY, NULL);
            if (rc != 0 && rc != -DS_ECORRUPT) {
                print_error("raw byte %zu mask 0x%02x: rc %d\n", at, masks[m], rc);
                fail();
            }
        }
    }
    ZSTD_freeCCtx(cctx);
    free(block);
    free(damaged);
    free(raw);
    free(s.buf);
    free(events);
}

/* ---- versions and items (block format 2) --------------------------------------------------- */

/* Canonical items of count items whose products are product_len bytes of 'a' + i (i < 100). */
static size_t items_make(uint8_t *dst, size_t count, size_t product_len, uint32_t quantity)
{
    assert_true(count <= DS_ITEMS_COUNT_MAX && product_len >= 1 &&
                product_len <= DS_ITEM_PRODUCT_BYTES_MAX);
    size_t n = 0;
    dst[n++] = (uint8_t)count;
    for (size_t i = 0; i < count; i++) {
        dst[n++] = (uint8_t)product_len;
        memset(dst + n, 'a' + (int)(i % 26), product_len);
        n += product_len;
        uint32_t q = quantity + (uint32_t)i;
        for (; q >= 0x80u; q >>= 7) {
            dst[n++] = (uint8_t)(q | 0x80u);
        }
        dst[n++] = (uint8_t)q;
    }
    assert_true(n <= DS_ITEMS_BYTES_MAX);
    return n;
}

/* round_trip plus the version and items of every event, and the block's format version. */
static void round_trip_extras(struct fixture *f, const struct ds_event *events, size_t count,
                              uint16_t want_version)
{
    struct sealed s = round_trip(f, events, count, TEST_DAY);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->version, want_version);
    struct collected got = {0};
    assert_int_equal(block_decode(&f->codec, &view, s.buf + view.header->header_bytes,
                                  day_start_ms(TEST_DAY), collect_event, &got),
                     0);
    assert_int_equal(got.count, count);
    /* Items point into the codec's scratch, which holds the whole decoded payload until the
     * next decode: still valid here. */
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(got.events[i].has_version, events[i].has_version);
        assert_true(got.events[i].version == events[i].version);
        assert_int_equal(got.events[i].items_bytes, events[i].items_bytes);
        if (events[i].items_bytes == 0) {
            assert_null(got.events[i].items);
        } else {
            assert_memory_equal(got.events[i].items, events[i].items, events[i].items_bytes);
        }
    }
    free(got.events);
    free(got.sources);
    free(s.buf);
}

static void test_block_extras_round_trip_versions_and_items(void **state)
{
    /* Random events, some with a version (0, INT64_MAX and between), some with items ([] and
     * up to 100), seal as a version 2 block and decode back with every field. */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    const size_t count = 1000;
    struct ds_event *events = calloc(count, sizeof(*events));
    uint8_t *items = malloc(count * 200);
    assert_non_null(events);
    assert_non_null(items);
    for (size_t i = 0; i < count; i++) {
        test_event_random_wide(&rng, TEST_DAY, TEST_STATUS_POOL_COUNT, &events[i]);
        uint64_t kind = test_rng_below(&rng, 4);
        if (kind != 0) {
            events[i].has_version = true;
            events[i].version = kind == 1   ? 0
                                : kind == 2 ? INT64_MAX
                                            : (int64_t)(test_rng_next(&rng) >> 2);
        }
        if (test_rng_below(&rng, 3) == 0) {
            size_t n = test_rng_below(&rng, 4);
            events[i].items = items + i * 200;
            events[i].items_bytes = (uint16_t)items_make(
                items + i * 200, n, 1 + test_rng_below(&rng, 40),
                (uint32_t)(1 + test_rng_below(&rng, DS_ITEM_QUANTITY_MAX - 4)));
        }
    }
    add_all(f, events, count, NULL, STORAGE_BLOCK_EVENTS_MAX);
    round_trip_extras(f, events, count, BLOCK_VERSION_EXTRAS);
    /* One event with only a version is enough for format 2; so is one with only items. */
    open_block_reset(f->ob);
    struct ds_event two[2];
    simple_event(&two[0], 1, "paid", 0);
    simple_event(&two[1], 2, "paid", 1);
    two[1].has_version = true;
    two[1].version = 5;
    add_all(f, two, 2, NULL, STORAGE_BLOCK_EVENTS_MAX);
    round_trip_extras(f, two, 2, BLOCK_VERSION_EXTRAS);
    open_block_reset(f->ob);
    two[1].has_version = false;
    two[1].version = 0;
    uint8_t empty_items = 0;
    two[0].items = &empty_items;
    two[0].items_bytes = 1;
    add_all(f, two, 2, NULL, STORAGE_BLOCK_EVENTS_MAX);
    round_trip_extras(f, two, 2, BLOCK_VERSION_EXTRAS);
    free(items);
    free(events);
}

/* A version 1 block sealed by the encoder before block format 2 existed (5 events of day
 * 20474: ids 100..104 with "ord-7" and "cust-x" strings, statuses paid/pending/"", amounts
 * 9.99 + i/100, hours 0..4 at +1.234 s; partition 0, offsets 10..14). */
static const uint8_t block_v1_fixture[] = {
    0x44, 0x53, 0x42, 0x4b, 0x01, 0x00, 0xd0, 0x00, 0x53, 0x00, 0x00, 0x00, 0x4f, 0x00, 0x00, 0x00,
    0x05, 0x00, 0x00, 0x00, 0x03, 0x00, 0x05, 0x00, 0xd2, 0xdc, 0xd9, 0xdd, 0x9b, 0x01, 0x00, 0x00,
    0xd2, 0x96, 0xb5, 0xde, 0x9b, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xbf, 0xfb, 0x2e, 0xaa,
    0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xd5, 0xe7, 0x6c, 0x50, 0x04, 0x70, 0x61, 0x69, 0x64, 0x07, 0x70, 0x65,
    0x6e, 0x64, 0x69, 0x6e, 0x67, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x3c, 0x86, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x03, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x68, 0x87, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0xa0, 0x86, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x04, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xcc, 0x87, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x04, 0x87, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x4f, 0x55, 0x02, 0x00, 0x34, 0x04, 0x02, 0x05, 0x00, 0x00, 0x00,
    0x11, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
    0x07, 0x00, 0x00, 0x00, 0x00, 0x04, 0x09, 0x02, 0x04, 0x00, 0x80, 0xba, 0xb7, 0x03, 0xc8, 0x01,
    0x02, 0x04, 0x02, 0x05, 0x6f, 0x72, 0x64, 0x2d, 0x37, 0x01, 0x02, 0x03, 0x05, 0x06, 0x63, 0x75,
    0x73, 0x74, 0x2d, 0x78, 0xce, 0x0f, 0xd0, 0x0f, 0xd2, 0x0f, 0xd4, 0x0f, 0xd6, 0x0f, 0x01, 0x00,
    0x9b, 0x73, 0x4f,
};

static void test_block_extras_v1_block_still_read(void **state)
{
    /* The old encoder's block decodes to its events, none with a version or items; and events
     * without them still seal as version 1, to the same bytes. */
    struct fixture *f = *state;
    static const char *const statuses[3] = {"paid", "pending", ""};
    struct ds_event events[5];
    for (int i = 0; i < 5; i++) {
        memset(&events[i], 0, sizeof(events[i]));
        test_id_int(&events[i].order_id, 100 + i);
        test_id_int(&events[i].customer_id, 1 + i);
        if (i == 2) {
            test_id_string(&events[i].order_id, "ord-7", 5);
        }
        if (i == 3) {
            test_id_string(&events[i].customer_id, "cust-x", 6);
        }
        events[i].ts_ms = day_start_ms(TEST_DAY) + i * HOUR_MS + 1234;
        events[i].amount_units = 99900 + i * 100;
        test_event_set_status(&events[i], statuses[i % 3]);
    }
    uint8_t *buf = malloc(sizeof(block_v1_fixture));
    assert_non_null(buf);
    memcpy(buf, block_v1_fixture, sizeof(block_v1_fixture));
    struct collected got = {0};
    assert_int_equal(parse_and_decode(f, buf, sizeof(block_v1_fixture), TEST_DAY, &got), 0);
    assert_int_equal(((const struct block_header *)(const void *)buf)->version, BLOCK_VERSION);
    assert_int_equal(got.count, 5);
    for (size_t i = 0; i < 5; i++) {
        test_event_assert_equal(&events[i], &got.events[i]);
        assert_false(got.events[i].has_version);
        assert_int_equal(got.events[i].items_bytes, 0);
        assert_null(got.events[i].items);
    }
    free(got.events);
    free(got.sources);
    for (int i = 0; i < 5; i++) {
        struct ds_source source = {.partition = 0, .offset = 10 + i};
        assert_int_equal(open_block_add(f->ob, &events[i], &source, false, 100), 0);
    }
    struct sealed s = seal(f, TEST_DAY);
    assert_int_equal(s.len, sizeof(block_v1_fixture));
    assert_memory_equal(s.buf, block_v1_fixture, s.len);
    free(s.buf);
    free(buf);
}

static void test_block_extras_largest_items_round_trip(void **state)
{
    /* Events with 100 items of 64-byte products and the largest quantities (the largest
     * canonical items) seal within block_seal_bound and decode back. */
    struct fixture *f = *state;
    uint8_t *items = malloc(DS_ITEMS_BYTES_MAX);
    assert_non_null(items);
    size_t n = items_make(items, DS_ITEMS_COUNT_MAX, DS_ITEM_PRODUCT_BYTES_MAX,
                          DS_ITEM_QUANTITY_MAX - (DS_ITEMS_COUNT_MAX - 1));
    assert_int_equal(n, DS_ITEMS_BYTES_MAX); /* every quantity took 5 bytes */
    struct ds_event events[3];
    for (int i = 0; i < 3; i++) {
        simple_event(&events[i], 10 + i, "paid", i);
        events[i].items = items;
        events[i].items_bytes = (uint16_t)n;
        events[i].has_version = true;
        events[i].version = INT64_MAX - i;
    }
    add_all(f, events, 3, NULL, STORAGE_BLOCK_EVENTS_MAX);
    assert_int_equal(f->ob->items_bytes, 3 * n);
    assert_true(block_seal_bound(f->ob) >= 3 * n);
    assert_true(open_block_memory(f->ob) >= sizeof(*f->ob) + 3 * n);
    round_trip_extras(f, events, 3, BLOCK_VERSION_EXTRAS);
    free(items);
}

static void test_block_extras_items_capacity_seals_early(void **state)
{
    /* Items beyond BLOCK_ITEMS_BYTES_MAX are refused with -DS_ELIMIT (the writer seals the
     * block and retries) and the block is unchanged, items and strings included; events
     * without items still fit, and the full block round-trips. */
    struct fixture *f = *state;
    uint8_t *items = malloc(DS_ITEMS_BYTES_MAX);
    assert_non_null(items);
    size_t n = items_make(items, DS_ITEMS_COUNT_MAX, DS_ITEM_PRODUCT_BYTES_MAX, 7);
    size_t fit = BLOCK_ITEMS_BYTES_MAX / n;
    struct ds_event *events = calloc(fit + 1, sizeof(*events));
    assert_non_null(events);
    for (size_t i = 0; i < fit; i++) {
        simple_event(&events[i], (int64_t)i + 1, "paid", (int64_t)i);
        events[i].items = items;
        events[i].items_bytes = (uint16_t)n;
        assert_int_equal(open_block_add(f->ob, &events[i], NULL, false, STORAGE_BLOCK_EVENTS_MAX),
                         0);
    }
    assert_int_equal(f->ob->items_bytes, fit * n);
    struct ds_event extra;
    simple_event(&extra, 999, "a-new-status", 5);
    test_id_string(&extra.order_id, "string-order", 12); /* its string must roll back too */
    extra.items = items;
    extra.items_bytes = (uint16_t)n;
    struct ob_snapshot snap = ob_snapshot_take(f->ob);
    assert_int_equal(open_block_add(f->ob, &extra, NULL, false, STORAGE_BLOCK_EVENTS_MAX),
                     -DS_ELIMIT);
    ob_snapshot_check_and_free(&snap, f->ob);
    simple_event(&events[fit], 1000, "paid", 6);
    events[fit].has_version = true;
    events[fit].version = 3;
    assert_int_equal(open_block_add(f->ob, &events[fit], NULL, false, STORAGE_BLOCK_EVENTS_MAX), 0);
    round_trip_extras(f, events, fit + 1, BLOCK_VERSION_EXTRAS);
    /* After sealing, the same event fits a fresh block. */
    open_block_reset(f->ob);
    assert_int_equal(open_block_add(f->ob, &extra, NULL, false, STORAGE_BLOCK_EVENTS_MAX), 0);
    free(events);
    free(items);
}

static void test_block_extras_corrupt_items_rejected(void **state)
{
    /* Damaged canonical items behind valid CRCs are -DS_ECORRUPT: a product length of 0 or
     * over 64, a quantity of 0, a count over 100, bytes left over, an out-of-range version. */
    struct fixture *f = *state;
    uint8_t items[8] = {1, 2, 'a', 'b', 7};
    struct ds_event e;
    simple_event(&e, 1, "paid", 0);
    e.items = items;
    e.items_bytes = 5;
    e.has_version = true;
    e.version = 4;
    assert_int_equal(open_block_add(f->ob, &e, NULL, false, STORAGE_BLOCK_EVENTS_MAX), 0);
    struct sealed s = seal(f, TEST_DAY);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    size_t header_bytes = view.header->header_bytes;
    size_t raw_len = view.header->raw_bytes;
    uint8_t *raw = malloc(raw_len + 16);
    assert_non_null(raw);
    assert_int_equal(
        ZSTD_decompress(raw, raw_len, s.buf + header_bytes, view.header->payload_bytes), raw_len);
    /* Columns: preamble 33 bytes, then flags(1) ts(1) order(1) customer(1), version(1), items. */
    uint32_t lengths[8];
    memcpy(lengths, raw + 1, sizeof(lengths));
    size_t version_at =
        33u + lengths[0] + lengths[1] + lengths[2] + lengths[3] + lengths[4] + lengths[5];
    size_t items_at = version_at + lengths[6] + 1; /* after the length varint */
    assert_int_equal(raw[version_at], 5);          /* version 4 + 1 */
    assert_int_equal(raw[items_at - 1], 5);
    assert_memory_equal(raw + items_at, items, 5);
    static const struct {
        size_t offset;
        uint8_t value;
    } damage[] = {{1, 0}, {1, 65}, {4, 0}, {0, 101}, {0, 2}, {0, 0}};
    size_t capacity = header_bytes + ZSTD_compressBound(raw_len);
    uint8_t *block = malloc(capacity);
    uint8_t *damaged = malloc(raw_len);
    assert_non_null(block);
    assert_non_null(damaged);
    for (size_t d = 0; d <= DS_ARRAY_LEN(damage); d++) {
        memcpy(damaged, raw, raw_len);
        if (d < DS_ARRAY_LEN(damage)) {
            damaged[items_at + damage[d].offset] = damage[d].value;
        } else {
            damaged[version_at] = 0x80; /* a varint that runs into the items column */
        }
        memcpy(block, s.buf, header_bytes);
        size_t z =
            ZSTD_compress(block + header_bytes, capacity - header_bytes, damaged, raw_len, 1);
        assert_false(ZSTD_isError(z));
        struct block_header h;
        memcpy(&h, block, sizeof(h));
        h.payload_bytes = (uint32_t)z;
        h.payload_crc = ds_crc32c(0, block + header_bytes, z);
        memcpy(block, &h, sizeof(h));
        fix_header_crc(block);
        int rc = parse_and_decode(f, block, header_bytes + z, TEST_DAY, NULL);
        if (rc != -DS_ECORRUPT) {
            print_error("damage %zu: rc %d\n", d, rc);
            fail();
        }
    }
    /* The undamaged payload re-packed the same way decodes: the damage was the cause. */
    memcpy(block, s.buf, s.len);
    assert_int_equal(parse_and_decode(f, block, s.len, TEST_DAY, NULL), 0);
    free(damaged);
    free(block);
    free(raw);
    free(s.buf);
}

static void test_block_corrupt_wrong_day(void **state)
{
    /* A block read back as another day's (a misplaced file) fails the range check. */
    struct fixture *f = *state;
    struct ds_event e;
    simple_event(&e, 1, "paid", 1000);
    assert_int_equal(open_block_add(f->ob, &e, NULL, false, 10), 0);
    struct sealed s = seal(f, TEST_DAY);
    assert_int_equal(parse_and_decode(f, s.buf, s.len, TEST_DAY + 1, NULL), -DS_ECORRUPT);
    assert_int_equal(parse_and_decode(f, s.buf, s.len, TEST_DAY - 1, NULL), -DS_ECORRUPT);
    assert_int_equal(parse_and_decode(f, s.buf, s.len, TEST_DAY, NULL), 0);
    free(s.buf);
}

static int stop_after_two(const struct ds_event *event, const struct ds_source *source, void *user)
{
    (void)source;
    (void)event;
    int *seen = user;
    return ++*seen == 2 ? 42 : 0;
}

static void test_block_decode_callback_stops_early(void **state)
{
    /* A non-zero return of the callback stops the decode and is returned as is. */
    struct fixture *f = *state;
    for (int i = 0; i < 5; i++) {
        struct ds_event e;
        simple_event(&e, i + 1, "paid", i);
        assert_int_equal(open_block_add(f->ob, &e, NULL, false, 10), 0);
    }
    struct sealed s = seal(f, TEST_DAY);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    int seen = 0;
    assert_int_equal(block_decode(&f->codec, &view, s.buf + view.header->header_bytes,
                                  day_start_ms(TEST_DAY), stop_after_two, &seen),
                     42);
    assert_int_equal(seen, 2);
    free(s.buf);
}

/* ---- retractions (block format 3) ---------------------------------------------------------- */

static void test_block_retract_round_trip(void **state)
{
    /* Random versioned events, a third of them retractions, seal as a version 3 block whose
     * cells are the signed sums (checked by round_trip against the test's own aggregation)
     * and decode back with every field, retract included. */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    const size_t count = 2000;
    struct ds_event *events = calloc(count, sizeof(*events));
    assert_non_null(events);
    size_t retractions = 0;
    for (size_t i = 0; i < count; i++) {
        test_event_random_wide(&rng, TEST_DAY, TEST_STATUS_POOL_COUNT, &events[i]);
        events[i].has_version = true;
        events[i].version = (int64_t)test_rng_below(&rng, 5);
        events[i].retract = test_rng_below(&rng, 3) == 0;
        retractions += events[i].retract ? 1u : 0u;
    }
    assert_true(retractions > 0 && retractions < count);
    add_all(f, events, count, NULL, STORAGE_BLOCK_EVENTS_MAX);
    assert_int_equal(f->ob->retract_count, retractions);
    round_trip_extras(f, events, count, BLOCK_VERSION_RETRACT);
    /* One retraction, without version or items, is enough for format 3. */
    open_block_reset(f->ob);
    struct ds_event two[2];
    simple_event(&two[0], 1, "paid", 0);
    simple_event(&two[1], 2, "paid", HOUR_MS);
    two[1].retract = true;
    add_all(f, two, 2, NULL, STORAGE_BLOCK_EVENTS_MAX);
    round_trip_extras(f, two, 2, BLOCK_VERSION_RETRACT);
    free(events);
}

static void test_block_retract_only_negative_cells(void **state)
{
    /* A block of only retractions has negative cells and negated sums; an insert and its
     * retraction in one block leave a cell of count 0 and amount 0, which is still written. */
    struct fixture *f = *state;
    struct ds_event events[6];
    for (int i = 0; i < 6; i++) {
        simple_event(&events[i], 10 + i, i < 4 ? "paid" : "sent", (i % 2) * HOUR_MS);
        events[i].retract = true;
    }
    add_all(f, events, 6, NULL, STORAGE_BLOCK_EVENTS_MAX);
    struct sealed s = round_trip(f, events, 6, TEST_DAY);
    struct block_view view;
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->version, BLOCK_VERSION_RETRACT);
    assert_int_equal(view.header->cell_count, 4); /* paid/sent x hours 0/1 */
    int64_t total = 0;
    for (uint16_t i = 0; i < view.header->cell_count; i++) {
        assert_true(view.cells[i].count < 0);
        assert_true(block_cell_amount(&view.cells[i]) < 0);
        total += view.cells[i].count;
    }
    assert_true(total == -6);
    free(s.buf);

    open_block_reset(f->ob);
    struct ds_event pair[2];
    simple_event(&pair[0], 7, "paid", 5);
    pair[1] = pair[0];
    pair[1].retract = true;
    add_all(f, pair, 2, NULL, STORAGE_BLOCK_EVENTS_MAX);
    s = round_trip(f, pair, 2, TEST_DAY);
    assert_int_equal(block_view_parse(s.buf, s.len, &view), 0);
    assert_int_equal(view.header->cell_count, 1);
    assert_int_equal(view.cells[0].count, 0);
    assert_true(block_cell_amount(&view.cells[0]) == 0);
    assert_int_equal(view.header->event_count, 2);
    free(s.buf);
}

static void test_block_retract_v1_v2_unchanged(void **state)
{
    /* The v1 fixture's cells (written as u32) read as the same positive int32 counts and sum to
     * its event count; its events and those of a fresh version 2 block are not retractions; a
     * block without retractions never seals as version 3. */
    struct fixture *f = *state;
    struct block_view view;
    assert_int_equal(block_view_parse(block_v1_fixture, sizeof(block_v1_fixture), &view), 0);
    int64_t total = 0;
    for (uint16_t i = 0; i < view.header->cell_count; i++) {
        uint32_t bits = 0;
        memcpy(&bits, (const uint8_t *)&view.cells[i] + offsetof(struct block_cell, count), 4);
        assert_int_equal(bits, 1u);
        assert_int_equal(view.cells[i].count, 1);
        total += view.cells[i].count;
    }
    assert_true(total == view.header->event_count);
    uint8_t *buf = malloc(sizeof(block_v1_fixture));
    assert_non_null(buf);
    memcpy(buf, block_v1_fixture, sizeof(block_v1_fixture));
    struct collected got = {0};
    assert_int_equal(parse_and_decode(f, buf, sizeof(block_v1_fixture), TEST_DAY, &got), 0);
    for (size_t i = 0; i < got.count; i++) {
        assert_false(got.events[i].retract);
    }
    free(got.events);
    free(got.sources);
    free(buf);
    struct ds_event two[2];
    simple_event(&two[0], 1, "paid", 0);
    simple_event(&two[1], 2, "paid", 1);
    two[1].has_version = true;
    two[1].version = 3;
    add_all(f, two, 2, NULL, STORAGE_BLOCK_EVENTS_MAX);
    round_trip_extras(f, two, 2, BLOCK_VERSION_EXTRAS);
}

/* Re-encodes block (a sealed one) with raw flags byte i xor mask and the header version set to
 * version, behind valid CRCs; returns the new block (malloc'd) and its length. */
static uint8_t *reflag(const struct sealed *s, size_t i, uint8_t mask, uint16_t version,
                       size_t *len_out)
{
    struct block_view view;
    assert_int_equal(block_view_parse(s->buf, s->len, &view), 0);
    size_t header_bytes = view.header->header_bytes;
    size_t raw_len = view.header->raw_bytes;
    uint8_t *raw = malloc(raw_len);
    assert_non_null(raw);
    assert_int_equal(
        ZSTD_decompress(raw, raw_len, s->buf + header_bytes, view.header->payload_bytes), raw_len);
    size_t preamble = 1u + (view.header->version == BLOCK_VERSION ? 6u : 8u) * 4u;
    assert_true(preamble + i < raw_len);
    raw[preamble + i] ^= mask;
    size_t capacity = header_bytes + ZSTD_compressBound(raw_len);
    uint8_t *block = malloc(capacity);
    assert_non_null(block);
    memcpy(block, s->buf, header_bytes);
    size_t z = ZSTD_compress(block + header_bytes, capacity - header_bytes, raw, raw_len, 1);
    assert_false(ZSTD_isError(z));
    struct block_header h;
    memcpy(&h, block, sizeof(h));
    h.version = version;
    h.payload_bytes = (uint32_t)z;
    h.payload_crc = ds_crc32c(0, block + header_bytes, z);
    memcpy(block, &h, sizeof(h));
    fix_header_crc(block);
    free(raw);
    *len_out = header_bytes + z;
    return block;
}

static void test_block_retract_flipped_bit_caught(void **state)
{
    /* Behind recomputed CRCs, flipping any row's retract bit breaks the re-aggregation (a cell
     * moves by 2 and by twice the amount): -DS_ECORRUPT. Bit 7 in a version 2 block, or a
     * version 3 block relabelled 2, is corrupt too. The unchanged re-encoding still decodes. */
    struct fixture *f = *state;
    struct ds_event events[8];
    for (int i = 0; i < 8; i++) {
        simple_event(&events[i], 20 + i, i % 2 ? "paid" : "sent", i * HOUR_MS / 2);
        events[i].has_version = true;
        events[i].version = i;
        events[i].retract = i % 3 == 0;
    }
    add_all(f, events, 8, NULL, STORAGE_BLOCK_EVENTS_MAX);
    struct sealed s = seal(f, TEST_DAY);
    size_t len = 0;
    uint8_t *same = reflag(&s, 0, 0, BLOCK_VERSION_RETRACT, &len);
    assert_int_equal(parse_and_decode(f, same, len, TEST_DAY, NULL), 0);
    free(same);
    for (size_t i = 0; i < 8; i++) {
        uint8_t *block = reflag(&s, i, OPEN_ROW_RETRACT, BLOCK_VERSION_RETRACT, &len);
        assert_int_equal(parse_and_decode(f, block, len, TEST_DAY, NULL), -DS_ECORRUPT);
        free(block);
    }
    uint8_t *relabelled = reflag(&s, 0, 0, BLOCK_VERSION_EXTRAS, &len);
    assert_int_equal(parse_and_decode(f, relabelled, len, TEST_DAY, NULL), -DS_ECORRUPT);
    free(relabelled);
    free(s.buf);

    open_block_reset(f->ob);
    for (int i = 0; i < 8; i++) {
        events[i].retract = false;
    }
    add_all(f, events, 8, NULL, STORAGE_BLOCK_EVENTS_MAX);
    s = seal(f, TEST_DAY);
    uint8_t *v2 = reflag(&s, 3, OPEN_ROW_RETRACT, BLOCK_VERSION_EXTRAS, &len);
    assert_int_equal(parse_and_decode(f, v2, len, TEST_DAY, NULL), -DS_ECORRUPT);
    free(v2);
    free(s.buf);
}

/* ---- row sources (block format 4) ---------------------------------------------------------- */

/* Sources as a consumer of a few Kafka partitions gives them (offsets rising per partition),
 * some file lines and some rows without one: source[i] partition BLOCK_SOURCE_NONE means NULL. */
static void sources_make(uint64_t *rng, struct ds_source *sources, size_t count,
                         uint32_t partitions, bool odd_ones)
{
    int64_t next[8] = {0, 1000, 5000000000LL, 7, 0, 0, 0, 0};
    assert_true(partitions <= 8);
    for (size_t i = 0; i < count; i++) {
        uint32_t kind = odd_ones ? (uint32_t)test_rng_below(rng, 8) : 7u;
        if (kind == 0) {
            sources[i] = (struct ds_source){.partition = BLOCK_SOURCE_NONE};
        } else if (kind == 1) {
            sources[i] = (struct ds_source){.partition = DS_SOURCE_FILE, .offset = (int64_t)i + 1};
        } else {
            uint32_t part = (uint32_t)test_rng_below(rng, partitions);
            next[part] += 1 + (int64_t)test_rng_below(rng, 3);
            sources[i] = (struct ds_source){.partition = (int32_t)part, .offset = next[part]};
        }
    }
}

/* Adds events with their sources (BLOCK_SOURCE_NONE: none), as the given model would. */
static void add_sourced(struct fixture *f, const struct ds_event *events,
                        const struct ds_source *sources, size_t count, bool row_source)
{
    for (size_t i = 0; i < count; i++) {
        const struct ds_source *src =
            sources[i].partition == BLOCK_SOURCE_NONE ? NULL : &sources[i];
        assert_int_equal(open_block_add(f->ob, &events[i], src, row_source, EVENTS_MAX_TEST), 0);
    }
}

/* Seals f->ob and decodes it back: every event and every row's source as added. */
static struct sealed sources_round_trip(struct fixture *f, const struct ds_event *events,
                                        const struct ds_source *sources, size_t count)
{
    struct sealed s = seal(f, TEST_DAY);
    struct collected got = {0};
    assert_int_equal(parse_and_decode(f, s.buf, s.len, TEST_DAY, &got), 0);
    assert_int_equal(got.count, count);
    for (size_t i = 0; i < count; i++) {
        assert_true(test_event_equal(&got.events[i], &events[i]));
        assert_int_equal(got.sources[i].partition, sources[i].partition);
        if (sources[i].partition != BLOCK_SOURCE_NONE) {
            assert_true(got.sources[i].offset == sources[i].offset);
        }
    }
    free(got.events);
    free(got.sources);
    return s;
}

static void test_block_sources_round_trip_mixed(void **state)
{
    /* The events model keeps each row's source: a block of rows from three Kafka partitions,
     * file lines and rows without a source (retractions among them) seals as version 4 with a
     * mixed header range and decodes every row's source back; a block of one partition names it
     * in the header. */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    const size_t count = 600;
    struct ds_event *events = calloc(count, sizeof(*events));
    struct ds_source *sources = calloc(count, sizeof(*sources));
    assert_non_null(events);
    assert_non_null(sources);
    for (size_t i = 0; i < count; i++) {
        test_event_random_wide(&rng, TEST_DAY, TEST_STATUS_POOL_COUNT, &events[i]);
        events[i].retract = test_rng_below(&rng, 5) == 0;
    }
    sources_make(&rng, sources, count, 3, true);
    add_sourced(f, events, sources, count, true);
    struct sealed s = sources_round_trip(f, events, sources, count);
    const struct block_header *h = (const struct block_header *)(const void *)s.buf;
    assert_int_equal(h->version, BLOCK_VERSION_SOURCES);
    assert_int_equal(h->source_partition, BLOCK_SOURCE_MIXED);
    int64_t min = INT64_MAX, max = INT64_MIN;
    for (size_t i = 0; i < count; i++) {
        if (sources[i].partition != BLOCK_SOURCE_NONE) {
            min = sources[i].offset < min ? sources[i].offset : min;
            max = sources[i].offset > max ? sources[i].offset : max;
        }
    }
    assert_true(h->source_offset_min == min);
    assert_true(h->source_offset_max == max);
    assert_true(max > 5000000000LL);
    free(s.buf);

    open_block_reset(f->ob);
    for (size_t i = 0; i < count; i++) {
        events[i].retract = false;
    }
    sources_make(&rng, sources, count, 1, false);
    add_sourced(f, events, sources, count, true);
    s = sources_round_trip(f, events, sources, count);
    h = (const struct block_header *)(const void *)s.buf;
    assert_int_equal(h->version, BLOCK_VERSION_SOURCES);
    assert_int_equal(h->source_partition, 0);
    assert_true(h->source_offset_min == sources[0].offset);
    assert_true(h->source_offset_max == sources[count - 1].offset);
    free(s.buf);
    free(sources);
    free(events);
}

static void test_block_sources_older_versions_unchanged(void **state)
{
    /* Version 4 is written only for rows keeping a Kafka source: the orders model
     * (row_source false) and the events model with file lines or no sources write the very
     * bytes they write without row sources, versions 1 to 3 as before. */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    const size_t count = 300;
    struct ds_event events[300];
    struct ds_source sources[300];
    for (int variant = 0; variant < 3; variant++) {
        for (size_t i = 0; i < count; i++) {
            test_event_random_wide(&rng, TEST_DAY, TEST_STATUS_POOL_COUNT, &events[i]);
            events[i].has_version = variant >= 1 && i % 2 == 0;
            events[i].version = events[i].has_version ? (int64_t)i : 0;
            events[i].retract = variant == 2 && i % 3 == 0;
        }
        sources_make(&rng, sources, count, 3, true);
        open_block_reset(f->ob);
        add_sourced(f, events, sources, count, false);
        struct sealed plain = seal(f, TEST_DAY);
        const struct block_header *h = (const struct block_header *)(const void *)plain.buf;
        assert_int_equal(h->version, variant == 0   ? BLOCK_VERSION
                                     : variant == 1 ? BLOCK_VERSION_EXTRAS
                                                    : BLOCK_VERSION_RETRACT);
        assert_int_equal(h->source_partition, BLOCK_SOURCE_MIXED);
        free(plain.buf);

        /* File lines and rows without a source only: the same bytes either way. */
        for (size_t i = 0; i < count; i++) {
            if (sources[i].partition >= 0) {
                sources[i] = (struct ds_source){.partition = BLOCK_SOURCE_NONE};
            }
        }
        open_block_reset(f->ob);
        add_sourced(f, events, sources, count, false);
        plain = seal(f, TEST_DAY);
        open_block_reset(f->ob);
        add_sourced(f, events, sources, count, true);
        assert_int_equal(f->ob->sourced_count, 0);
        struct sealed kept = seal(f, TEST_DAY);
        assert_int_equal(kept.len, plain.len);
        assert_memory_equal(kept.buf, plain.buf, plain.len);
        free(kept.buf);
        free(plain.buf);
    }
}

/* s's payload with raw (its decompressed columns, changed) recompressed behind valid CRCs, and
 * the header's version set to version. */
static uint8_t *repack(const struct sealed *s, const uint8_t *raw, size_t raw_len, uint16_t version,
                       size_t *len_out)
{
    const struct block_header *sh = (const struct block_header *)(const void *)s->buf;
    size_t header_bytes = sh->header_bytes;
    size_t capacity = header_bytes + ZSTD_compressBound(raw_len);
    uint8_t *block = malloc(capacity);
    assert_non_null(block);
    memcpy(block, s->buf, header_bytes);
    size_t z = ZSTD_compress(block + header_bytes, capacity - header_bytes, raw, raw_len, 1);
    assert_false(ZSTD_isError(z));
    struct block_header h;
    memcpy(&h, block, sizeof(h));
    h.version = version;
    h.raw_bytes = (uint32_t)raw_len;
    h.payload_bytes = (uint32_t)z;
    h.payload_crc = ds_crc32c(0, block + header_bytes, z);
    memcpy(block, &h, sizeof(h));
    fix_header_crc(block);
    *len_out = header_bytes + z;
    return block;
}

static void test_block_sources_damaged_columns_caught(void **state)
{
    /* A flipped byte of the partitions or offsets column fails the payload CRC; behind a
     * recomputed CRC the decoder refuses it (-DS_ECORRUPT): a partition not the header's, a
     * column not read to its end, or an offset delta that moves the rows' range off the
     * header's. The block repacked unchanged still decodes. */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    const size_t count = 50;
    struct ds_event events[50];
    struct ds_source sources[50];
    for (size_t i = 0; i < count; i++) {
        test_event_random_wide(&rng, TEST_DAY, TEST_STATUS_POOL_COUNT, &events[i]);
        sources[i] = (struct ds_source){.partition = 2, .offset = 100 + (int64_t)i};
    }
    add_sourced(f, events, sources, count, true);
    struct sealed s = sources_round_trip(f, events, sources, count);
    const struct block_header *h = (const struct block_header *)(const void *)s.buf;
    size_t header_bytes = h->header_bytes;
    size_t raw_len = h->raw_bytes;
    uint8_t *raw = malloc(raw_len);
    uint8_t *damaged = malloc(raw_len);
    assert_non_null(raw);
    assert_non_null(damaged);
    assert_int_equal(ZSTD_decompress(raw, raw_len, s.buf + header_bytes, h->payload_bytes),
                     raw_len);
    uint32_t lengths[10];
    memcpy(lengths, raw + 1, sizeof(lengths));
    size_t from = 41;
    for (int i = 0; i < 8; i++) {
        from += lengths[i];
    }
    size_t to = from + lengths[8] + lengths[9];
    assert_int_equal(lengths[8], count); /* one byte per row: zigzag(2) */
    assert_true(lengths[9] >= count);
    size_t len = 0;
    uint8_t *same = repack(&s, raw, raw_len, BLOCK_VERSION_SOURCES, &len);
    assert_int_equal(parse_and_decode(f, same, len, TEST_DAY, NULL), 0);
    free(same);

    static const uint8_t masks[] = {0x01, 0x02, 0x04, 0x40, 0x80, 0xFF};
    uint8_t *copy = malloc(s.len);
    assert_non_null(copy);
    for (size_t at = from; at < to; at++) {
        for (size_t m = 0; m < DS_ARRAY_LEN(masks); m++) {
            memcpy(damaged, raw, raw_len);
            damaged[at] ^= masks[m];
            uint8_t *block = repack(&s, damaged, raw_len, BLOCK_VERSION_SOURCES, &len);
            int rc = parse_and_decode(f, block, len, TEST_DAY, NULL);
            if (rc != -DS_ECORRUPT) {
                print_error("source column byte %zu mask 0x%02x: rc %d\n", at - from, masks[m], rc);
                fail();
            }
            free(block);
        }
    }
    /* Without the CRC recomputed, any flipped payload byte is caught by it. */
    for (size_t at = header_bytes; at < s.len; at++) {
        memcpy(copy, s.buf, s.len);
        copy[at] ^= 0x10;
        assert_int_equal(parse_and_decode(f, copy, s.len, TEST_DAY, NULL), -DS_ECORRUPT);
    }
    free(copy);
    free(damaged);
    free(raw);
    free(s.buf);
}

static void test_block_sources_unknown_version_refused(void **state)
{
    /* A binary refuses a block version it does not know at the header, as binaries without
     * version 4 refuse it (they take versions 1 to 3 only): version 5 here. A version 4 payload
     * relabelled 3 does not decode either: its preamble has ten column lengths, not eight. */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    struct ds_event events[40];
    struct ds_source sources[40];
    for (size_t i = 0; i < 40; i++) {
        test_event_random_wide(&rng, TEST_DAY, TEST_STATUS_POOL_COUNT, &events[i]);
    }
    sources_make(&rng, sources, 40, 2, false);
    add_sourced(f, events, sources, 40, true);
    struct sealed s = sources_round_trip(f, events, sources, 40);
    const struct block_header *h = (const struct block_header *)(const void *)s.buf;
    size_t raw_len = h->raw_bytes;
    uint8_t *raw = malloc(raw_len);
    assert_non_null(raw);
    assert_int_equal(ZSTD_decompress(raw, raw_len, s.buf + h->header_bytes, h->payload_bytes),
                     raw_len);
    size_t len = 0;
    uint8_t *v5 = repack(&s, raw, raw_len, BLOCK_VERSION_SOURCES + 1, &len);
    struct block_view view;
    assert_int_equal(block_header_check(v5, len), -DS_ECORRUPT);
    assert_int_equal(block_view_parse(v5, len, &view), -DS_ECORRUPT);
    free(v5);
    uint8_t *v3 = repack(&s, raw, raw_len, BLOCK_VERSION_RETRACT, &len);
    assert_int_equal(parse_and_decode(f, v3, len, TEST_DAY, NULL), -DS_ECORRUPT);
    free(v3);
    free(raw);
    free(s.buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_block_round_trip_random_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_round_trip_every_hour_and_day_edges, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_round_trip_id_extremes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_header_sources_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_amount_scale_largest_common_power_of_ten, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_add_limit_events_max, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_add_limit_statuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_add_limit_string_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_seal_small_destination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_corrupt_any_flipped_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_corrupt_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_corrupt_header_behind_valid_crc, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_corrupt_raw_payload_behind_valid_crc, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_corrupt_wrong_day, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_decode_callback_stops_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_extras_round_trip_versions_and_items, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_extras_v1_block_still_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_retract_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_retract_only_negative_cells, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_retract_v1_v2_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_retract_flipped_bit_caught, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_sources_round_trip_mixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_sources_older_versions_unchanged, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_sources_damaged_columns_caught, setup, teardown),
        cmocka_unit_test_setup_teardown(test_block_sources_unknown_version_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_extras_largest_items_round_trip, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_extras_items_capacity_seals_early, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_block_extras_corrupt_items_rejected, setup, teardown),
    };
    /* Run one test or a few while debugging: CMOCKA_TEST_FILTER=test_block_corrupt_* */
    const char *filter = getenv("CMOCKA_TEST_FILTER");
    if (filter != NULL) {
        cmocka_set_test_filter(filter);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
