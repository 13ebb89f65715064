/*
 * Tests of retention (storage_config.retention_days, storage.h "retention"): the floor follows
 * stream time, the day below it goes whole (totals, scans, visits, orders, its files), a later
 * event of it is refused (-ERANGE), a restart keeps the floor, a reader that opened before the
 * drop sees the whole day or a clean error and nothing after its refresh, and a crash at any
 * write or sync around the drop leaves every day whole or gone, never half.
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
#include <sys/stat.h>
#include <unistd.h>

#include "storage/storage.h"
#include "tests/support/events.h"
#include "tests/support/store_fixture.h"
#include "tests/support/fake_io.h"
#include "tests/support/tempdir.h"

#define DAY0 20474 /* 2026-01-21 */
#define SHARDS 2u
#define PER_DAY 40u /* events of each day, spread over the shards */

static int open_rc(const char *dir, struct storage_io *io, bool read_only, enum storage_model model,
                   uint32_t retention_days, struct storage **out)
{
    struct storage_config cfg;
    test_store_config(&cfg, dir, model, read_only, 4096);
    cfg.io = io;
    cfg.block_events_max = 16; /* several blocks per partition */
    cfg.retention_days = retention_days;
    return storage_open(&cfg, out);
}

static struct storage *open_store(const char *dir, bool read_only, enum storage_model model,
                                  uint32_t retention_days)
{
    struct storage *st = NULL;
    int rc = open_rc(dir, NULL, read_only, model, retention_days, &st);
    if (rc != 0) {
        fail_msg("storage_open %s: %s", dir, ds_strerror(rc));
    }
    return st;
}

/* Event i of day (order ids unique per day and i, so the orders model creates each). */
static void event_of(int32_t day, uint32_t i, struct ds_event *e)
{
    memset(e, 0, sizeof(*e));
    test_id_int(&e->order_id, (int64_t)(day - DAY0 + 10) * 1000 + i + 1);
    test_id_int(&e->customer_id, (int64_t)(i % 7) + 1);
    e->ts_ms = (int64_t)day * 86400000 + (int64_t)i * 60000;
    e->amount_units = 10000 + (int64_t)i;
    test_event_set_status(e, i % 3 == 0 ? "paid" : "pending");
}

/* Appends day's PER_DAY events with source offsets from *offset on (file source). */
static void append_day(struct storage *st, int32_t day, int64_t *offset)
{
    for (uint32_t i = 0; i < PER_DAY; i++) {
        struct ds_event e;
        event_of(day, i, &e);
        struct ds_source src = {.partition = DS_SOURCE_FILE, .offset = (*offset)++};
        assert_int_equal(storage_append(st, day, i % SHARDS, &e, &src), 0);
    }
}

static uint64_t day_count(struct storage *st, int32_t day)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < SHARDS; s++) {
        struct storage_partition_total t;
        assert_int_equal(storage_partition_totals(st, day, s, NULL, 0, &t), 0);
        total += t.count;
    }
    return total;
}

static int count_events(const struct ds_event *e, void *user)
{
    (void)e;
    (*(uint64_t *)user)++;
    return 0;
}

static int count_parts(int32_t day, uint32_t shard, void *user)
{
    (void)shard;
    int32_t *min_day = user;
    if (day < *min_day) {
        *min_day = day;
    }
    return 0;
}

static bool day_dir_exists(const char *dir, int32_t day)
{
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(day, date);
    char path[512];
    snprintf(path, sizeof(path), "%s/parts/%s", dir, date);
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Seven days, one commit each, N = 3: each commit of a new day drops the day N behind it. */
static void test_retention_drops_whole_days(void **state)
{
    struct test_store_fixture *fx = *state;
    struct storage *st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 3);
    int64_t offset = 1;
    assert_int_equal(storage_retention_floor(st), 0);
    for (int32_t d = 0; d < 7; d++) {
        append_day(st, DAY0 + d, &offset);
        /* stream time moved with the appends: the floor an event meets is the coming one */
        assert_int_equal(storage_retention_floor(st), DAY0 + d - 2);
        assert_int_equal(storage_commit(st), 0);
    }
    /* kept: DAY0+4 .. DAY0+6 (N = 3 with stream time DAY0+6) */
    assert_int_equal(storage_retention_floor(st), DAY0 + 4);
    for (int32_t d = 0; d < 7; d++) {
        assert_int_equal(day_count(st, DAY0 + d), d >= 4 ? PER_DAY : 0);
    }
    uint64_t scanned = 0;
    assert_int_equal(storage_partition_scan(st, DAY0 + 3, 0, count_events, &scanned), 0);
    assert_int_equal(scanned, 0);
    int32_t min_day = INT32_MAX;
    assert_int_equal(storage_partition_visit(st, count_parts, &min_day), 0);
    assert_int_equal(min_day, DAY0 + 4);
    /* too late: refused, nothing stored, the source still advances */
    struct ds_event e;
    event_of(DAY0 + 3, 99, &e);
    struct ds_source src = {.partition = DS_SOURCE_FILE, .offset = offset};
    assert_int_equal(storage_append(st, DAY0 + 3, 0, &e, &src), -ERANGE);
    assert_int_equal(storage_source_advance(st, &src), 0);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(storage_source_next(st, DS_SOURCE_FILE), offset + 1);
    assert_int_equal(day_count(st, DAY0 + 3), 0);
    storage_close(st);
    /* the writer's close removed the dropped days' files */
    for (int32_t d = 0; d < 7; d++) {
        assert_int_equal(day_dir_exists(fx->dir, DAY0 + d), d >= 4);
    }
    /* a restart keeps the floor, even without retention configured */
    st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 0);
    assert_int_equal(storage_retention_floor(st), DAY0 + 4);
    assert_int_equal(storage_append(st, DAY0 + 3, 0, &e, &src), -ERANGE);
    assert_int_equal(day_count(st, DAY0 + 4), PER_DAY);
    storage_close(st);
    struct storage *rd = open_store(fx->dir, true, STORAGE_MODEL_RECORDED, 0);
    assert_int_equal(storage_retention_floor(rd), DAY0 + 4);
    assert_int_equal(day_count(rd, DAY0 + 3), 0);
    assert_int_equal(day_count(rd, DAY0 + 6), PER_DAY);
    storage_close(rd);
    /* a larger window later does not bring a day back; a smaller one drops at the open */
    st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 30);
    assert_int_equal(storage_retention_floor(st), DAY0 + 4);
    storage_close(st);
    st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 1);
    assert_int_equal(storage_retention_floor(st), DAY0 + 6);
    assert_int_equal(day_count(st, DAY0 + 5), 0);
    assert_int_equal(day_count(st, DAY0 + 6), PER_DAY);
    storage_close(st);
    struct storage_fsck_report rep;
    struct storage_fsck_options opt = {.repair = false, .report_file = NULL};
    assert_int_equal(storage_fsck(fx->dir, &opt, &rep), 0);
    assert_int_equal(rep.orphan_segments, 0);
    assert_int_equal(rep.events_ok, PER_DAY);
}

/* The MANIFEST of a store with a floor is format 4 (older binaries refuse it by version). */
static void test_retention_manifest_format(void **state)
{
    struct test_store_fixture *fx = *state;
    struct storage *st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 0);
    int64_t offset = 1;
    append_day(st, DAY0, &offset);
    append_day(st, DAY0 + 5, &offset);
    assert_int_equal(storage_commit(st), 0);
    storage_close(st);
    char path[512];
    snprintf(path, sizeof(path), "%s/MANIFEST", fx->dir);
    char magic[9] = {0};
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(magic, 1, 8, f), 8);
    fclose(f);
    assert_string_equal(magic, "DSMANIF1"); /* no retention: the format older binaries read */
    st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 2);
    storage_close(st);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(magic, 1, 8, f), 8);
    fclose(f);
    assert_string_equal(magic, "DSMANIF4");
}

/* A reader that opened before the drop: the dropped day is whole or the call fails cleanly,
 * never a part of it; after its refresh, 0. */
static void test_retention_reader_during_drop(void **state)
{
    struct test_store_fixture *fx = *state;
    struct storage *st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 2);
    int64_t offset = 1;
    append_day(st, DAY0, &offset);
    assert_int_equal(storage_commit(st), 0);
    /* one reader has the day's summary, one has only opened */
    struct storage *warm = open_store(fx->dir, true, STORAGE_MODEL_RECORDED, 0);
    struct storage *cold = open_store(fx->dir, true, STORAGE_MODEL_RECORDED, 0);
    assert_int_equal(day_count(warm, DAY0), PER_DAY);
    append_day(st, DAY0 + 2, &offset);
    assert_int_equal(storage_commit(st), 0); /* drops DAY0 */
    storage_close(st);                       /* and removes its files */
    assert_false(day_dir_exists(fx->dir, DAY0));
    assert_int_equal(day_count(warm, DAY0), PER_DAY);
    for (uint32_t s = 0; s < SHARDS; s++) {
        struct storage_partition_total t;
        /* the files are gone: a clean -ESTALE (refresh and ask again), never a part */
        assert_int_equal(storage_partition_totals(cold, DAY0, s, NULL, 0, &t), -ESTALE);
        uint64_t scanned = 0;
        assert_int_equal(storage_partition_scan(cold, DAY0, s, count_events, &scanned), -ESTALE);
        assert_int_equal(scanned, 0);
    }
    assert_int_equal(storage_refresh(warm), 0);
    assert_int_equal(storage_refresh(cold), 0);
    assert_int_equal(day_count(warm, DAY0), 0);
    assert_int_equal(day_count(cold, DAY0), 0);
    assert_int_equal(day_count(cold, DAY0 + 2), PER_DAY);
    storage_close(warm);
    storage_close(cold);
}

static int count_orders(const struct storage_order *o, void *user)
{
    assert_true(o->day >= DAY0 + 1);
    (*(uint64_t *)user)++;
    return 0;
}

/* Orders model: an order whose current version lies in a dropped day is gone; a later version
 * of it in a kept day is a new order, never a retraction into the dropped day. */
static void test_retention_orders(void **state)
{
    struct test_store_fixture *fx = *state;
    struct storage *st = open_store(fx->dir, false, STORAGE_MODEL_ORDERS, 2);
    int64_t offset = 1;
    append_day(st, DAY0, &offset);
    assert_int_equal(storage_commit(st), 0);
    append_day(st, DAY0 + 2, &offset); /* floor DAY0 + 1: DAY0 goes */
    assert_int_equal(storage_commit(st), 0);
    uint8_t scratch[STORAGE_ORDER_SCRATCH_BYTES];
    struct storage_order o;
    struct ds_event e;
    event_of(DAY0, 3, &e);
    assert_int_equal(storage_order_get(st, &e.order_id, &o, scratch, sizeof(scratch)), -ENOENT);
    /* the same order again, now in a kept day */
    e.ts_ms += 2 * 86400000LL;
    struct ds_source src = {.partition = DS_SOURCE_FILE, .offset = offset++};
    assert_int_equal(storage_append(st, DAY0 + 2, 0, &e, &src), 0);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(storage_order_get(st, &e.order_id, &o, scratch, sizeof(scratch)), 0);
    assert_int_equal(o.day, DAY0 + 2);
    assert_int_equal(o.versions_seen, 1);
    assert_int_equal(day_count(st, DAY0 + 2), PER_DAY + 1);
    assert_int_equal(day_count(st, DAY0), 0);
    uint64_t orders = 0;
    assert_int_equal(storage_order_visit(st, count_orders, &orders), 0);
    assert_int_equal(orders, PER_DAY + 1);
    storage_close(st);
    struct storage *rd = open_store(fx->dir, true, STORAGE_MODEL_RECORDED, 0);
    event_of(DAY0, 4, &e);
    assert_int_equal(storage_order_get(rd, &e.order_id, &o, scratch, sizeof(scratch)), -ENOENT);
    storage_close(rd);
    struct storage_fsck_report rep;
    struct storage_fsck_options opt = {.repair = false, .report_file = NULL};
    assert_int_equal(storage_fsck(fx->dir, &opt, &rep), 0);
    assert_int_equal(rep.orders_mismatched, 0);
    assert_int_equal(rep.retractions_unmatched, 0);
}

/* A crash run: days DAY0..DAY0+2 committed without retention; then opened with N = 3 (the
 * floor becomes DAY0 at the open, nothing to drop yet) and, with write or sync n failing, the
 * commit of DAY0+3 and the drop of DAY0 it causes; a crash of mode. Afterwards every day is
 * whole or (below the floor) gone, files included. Returns the operations. */
static uint64_t crash_run(struct test_store_fixture *fx, uint64_t n, enum fake_crash_mode mode,
                          enum storage_model model, uint32_t *dropped)
{
    struct storage *st = open_store(fx->dir, false, model, 0);
    int64_t offset = 1;
    for (int32_t d = 0; d < 3; d++) {
        append_day(st, DAY0 + d, &offset);
    }
    assert_int_equal(storage_commit(st), 0);
    storage_close(st);
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    assert_int_equal(open_rc(fx->dir, fake_io_base(fake), false, model, 3, &st), 0);
    assert_int_equal(storage_retention_floor(st), DAY0);
    fake_io_fail_nth(fake, n, -EIO);
    append_day(st, DAY0 + 3, &offset);
    int committed = storage_commit(st);
    assert_true(committed == 0 || n > 0);
    storage_close(st);
    uint64_t ops = fake_io_ops(fake);
    assert_int_equal(fake_io_crash(fake, n * 31 + (uint64_t)mode, mode), 0);
    fake_io_destroy(fake);
    st = open_store(fx->dir, false, model, 0);
    int32_t floor = storage_retention_floor(st);
    assert_true(floor == DAY0 || floor == DAY0 + 1);
    for (int32_t d = 0; d < 3; d++) {
        assert_int_equal(day_count(st, DAY0 + d), DAY0 + d < floor ? 0 : PER_DAY);
    }
    uint64_t last = day_count(st, DAY0 + 3);
    assert_true(last == 0 || last == PER_DAY);
    /* the commit that raised stream time and its drop are one step: both or neither */
    assert_int_equal(floor == DAY0 + 1, last == PER_DAY);
    *dropped += floor == DAY0 + 1;
    storage_close(st);
    for (int32_t d = 0; d < 3; d++) {
        assert_int_equal(day_dir_exists(fx->dir, DAY0 + d), DAY0 + d >= floor);
    }
    struct storage_fsck_report rep;
    struct storage_fsck_options opt = {.repair = false, .report_file = NULL};
    assert_int_equal(storage_fsck(fx->dir, &opt, &rep), 0);
    test_tempdir_remove(fx->dir);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    return ops;
}

static void test_retention_crash_loop(void **state)
{
    struct test_store_fixture *fx = *state;
    for (int model = STORAGE_MODEL_EVENTS; model <= STORAGE_MODEL_ORDERS; model++) {
        uint32_t dropped = 0;
        uint64_t ops = crash_run(fx, 0, FAKE_CRASH_CLEAN, (enum storage_model)model, &dropped);
        assert_int_equal(dropped, 1);
        assert_true(ops > 4);
        uint32_t runs = 0;
        dropped = 0;
        for (uint64_t n = 1; n <= ops + 1; n++) {
            for (int mode = FAKE_CRASH_CLEAN; mode <= FAKE_CRASH_GARBAGE; mode++) {
                (void)crash_run(fx, n, (enum fake_crash_mode)mode, (enum storage_model)model,
                                &dropped);
                runs++;
            }
        }
        /* both outcomes happened: failures before the drop's rename keep the day whole */
        assert_true(dropped > 0 && dropped < runs);
        print_message("model %d: %llu operations, %u crash runs, the day dropped in %u\n", model,
                      (unsigned long long)ops, runs, dropped);
    }
}

static void test_retention_config_limits(void **state)
{
    struct test_store_fixture *fx = *state;
    struct storage *st = NULL;
    assert_int_equal(
        open_rc(fx->dir, NULL, false, STORAGE_MODEL_EVENTS, STORAGE_RETENTION_DAYS_MAX + 1, &st),
        -DS_EUSAGE);
    assert_null(st);
    assert_int_equal(
        open_rc(fx->dir, NULL, false, STORAGE_MODEL_EVENTS, STORAGE_RETENTION_DAYS_MAX, &st), 0);
    storage_close(st);
}

/* 200 days through a table of 16 partitions (8 days at 2 shards), N = 3: retention frees a
 * dropped day's partitions, so the table never fills; a reader following the writer holds only
 * the kept days; counts stay exact. */
static void test_retention_frees_dropped_days(void **state)
{
    struct test_store_fixture *fx = *state;
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = fx->dir;
    cfg.io_mode = STORAGE_IO_SYNC;
    cfg.partitions_max = 16;
    cfg.block_events_max = 16;
    cfg.model = STORAGE_MODEL_EVENTS;
    cfg.retention_days = 3;
    struct storage *st = NULL;
    assert_int_equal(storage_open(&cfg, &st), 0);
    struct storage *rd = open_store(fx->dir, true, STORAGE_MODEL_RECORDED, 0);
    int64_t offset = 1;
    uint32_t held_max = 0, days_max = 0, fds_max = 0;
    for (int32_t d = 0; d < 200; d++) {
        append_day(st, DAY0 + d, &offset);
        assert_int_equal(storage_commit(st), 0);
        struct storage_held h;
        storage_held(st, &h);
        held_max = h.partitions > held_max ? h.partitions : held_max;
        fds_max = h.segment_fds > fds_max ? h.segment_fds : fds_max;
        if (d % 9 == 0) {
            assert_int_equal(storage_refresh(rd), 0);
            assert_int_equal(day_count(rd, DAY0 + d), PER_DAY);
            assert_int_equal(day_count(rd, DAY0 + d - 3), 0);
            storage_held(rd, &h);
            days_max = h.days > days_max ? h.days : days_max;
            held_max = h.partitions > held_max ? h.partitions : held_max;
        }
    }
    assert_true(held_max <= 4 * SHARDS); /* the kept 3 days and the one being dropped */
    assert_true(days_max <= 4);
    assert_true(fds_max <= 4 * SHARDS);
    for (int32_t d = 195; d < 200; d++) {
        assert_int_equal(day_count(st, DAY0 + d), d >= 197 ? PER_DAY : 0);
    }
    storage_close(rd);
    storage_close(st);
    st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 3);
    struct storage_held h;
    storage_held(st, &h);
    assert_true(h.partitions <= 3 * SHARDS);
    assert_int_equal(day_count(st, DAY0 + 199), PER_DAY);
    storage_close(st);
}

/* Without retention: a writer closes the segment descriptors of partitions idle for
 * STORE_IDLE_COMMITS commits and reopens one when it is written again; nothing is lost. */
static void test_retention_idle_segments_closed(void **state)
{
    struct test_store_fixture *fx = *state;
    struct storage *st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 0);
    int64_t offset = 1;
    for (int32_t d = 0; d < 40; d++) {
        append_day(st, DAY0 + d, &offset);
    }
    assert_int_equal(storage_commit(st), 0);
    struct storage_held h;
    storage_held(st, &h);
    assert_int_equal(h.segment_fds, 40 * SHARDS);
    for (uint32_t c = 0; c < 200; c++) { /* one partition written per commit */
        struct ds_event e;
        event_of(DAY0 + 40, c, &e);
        struct ds_source src = {.partition = DS_SOURCE_FILE, .offset = offset++};
        assert_int_equal(storage_append(st, DAY0 + 40, 0, &e, &src), 0);
        assert_int_equal(storage_commit(st), 0);
    }
    storage_held(st, &h);
    assert_int_equal(h.partitions, 40 * SHARDS + 1);
    assert_int_equal(h.segment_fds, 1);
    append_day(st, DAY0 + 3, &offset); /* idle partitions written again: reopened */
    assert_int_equal(storage_commit(st), 0);
    storage_held(st, &h);
    assert_int_equal(h.segment_fds, 1 + SHARDS);
    assert_int_equal(day_count(st, DAY0 + 3), 2 * PER_DAY);
    storage_close(st);
    st = open_store(fx->dir, false, STORAGE_MODEL_EVENTS, 0);
    assert_int_equal(day_count(st, DAY0 + 3), 2 * PER_DAY);
    assert_int_equal(day_count(st, DAY0 + 40), 200);
    storage_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_retention_drops_whole_days, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_retention_manifest_format, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_retention_reader_during_drop, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_retention_orders, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_retention_crash_loop, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_retention_config_limits, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_retention_frees_dropped_days, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_retention_idle_segments_closed, test_store_setup,
                                        test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
