/*
 * Unit tests of fsck's balance check for the orders model (storage/fsck_orders.c), through
 * storage_fsck: in each partition, in append order, every retraction cancels an earlier
 * uncancelled row with the same fields, and the rows left are the current versions of the
 * orders-by-id store.
 *
 * Directories are built through storage_append of the orders model (new orders, updates in
 * place, moves to another day or shard, stale and unchanged events, several versions in one
 * commit), which must check clean. The violations are then made the way they arise: a flipped
 * byte in one committed block, which fsck --repair quarantines (the manifest skips it, checksums
 * pass again), takes that block's rows or retractions out of one partition while the store
 * keeps its orders. Which block holds what follows from the commits: each commit seals one
 * block per touched partition. Each test opens with what it breaks and what fsck must name.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/storage.h"
#include "tests/support/events.h"
#include "tests/support/store_fixture.h"
#include "tests/support/tempdir.h"

#define DAY_MS 86400000LL
/* 2026-01-21, the contract example's day. */
#define DAY0 20474
#define PARTS 3u /* (DAY0, 0), (DAY0, 1), (DAY0 + 1, 0) */
#define RANDOM_ORDERS 300u
#define REPORT_BYTES TEST_STORE_TEXT_BYTES /* fsck's problem lines: the fixture's text */

static struct storage *open_model(const char *dir, enum storage_model model)
{
    struct storage_config cfg;
    test_store_config(&cfg, dir, model, false, 64);
    return test_store_open(&cfg);
}

static void part_of(uint32_t part, int32_t *day, uint32_t *shard)
{
    *day = DAY0 + (part == 2 ? 1 : 0);
    *shard = part == 1 ? 1u : 0u;
}

/* Version `version` (0: none) of order id on part, at minute `minute` of its day. */
static void order_event(struct ds_event *e, int64_t id, uint32_t part, int64_t minute,
                        const char *status, int64_t amount_units, int64_t version)
{
    memset(e, 0, sizeof(*e));
    int32_t day = 0;
    uint32_t shard = 0;
    part_of(part, &day, &shard);
    test_id_int(&e->order_id, id);
    test_id_int(&e->customer_id, id % 7 + 1);
    e->ts_ms = (int64_t)day * DAY_MS + minute * 60000;
    test_event_set_status(e, status);
    e->amount_units = amount_units;
    e->has_version = version > 0;
    e->version = version;
}

static void append(struct storage *st, uint32_t part, const struct ds_event *e)
{
    int32_t day = 0;
    uint32_t shard = 0;
    part_of(part, &day, &shard);
    assert_int_equal(storage_append(st, day, shard, e, NULL), 0);
}

/* storage_fsck with the problem lines caught in text (REPORT_BYTES); quarantine_only: a
 * repair that leaves the balance broken, as the violations below need. */
static int fsck_report_with(const char *dir, bool repair, bool quarantine_only,
                            struct storage_fsck_report *report, char *text)
{
    FILE *out = tmpfile();
    assert_non_null(out);
    struct storage_fsck_options options = {
        .repair = repair, .quarantine_only = quarantine_only, .report_file = out};
    memset(report, 0, sizeof(*report));
    int rc = storage_fsck(dir, &options, report);
    rewind(out);
    size_t n = fread(text, 1, REPORT_BYTES - 1, out);
    text[n] = '\0';
    fclose(out);
    return rc;
}

static int fsck_report(const char *dir, bool repair, struct storage_fsck_report *report, char *text)
{
    return fsck_report_with(dir, repair, false, report, text);
}

static void assert_balanced(struct test_store_fixture *fx, uint64_t orders, uint64_t retractions)
{
    char *text = fx->text;
    struct storage_fsck_report r;
    int rc = fsck_report(fx->dir, false, &r, text);
    if (rc != 0) {
        print_error("%s", text);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(r.orders, orders);
    assert_int_equal(r.retractions, retractions);
    assert_int_equal(r.retractions_unmatched, 0);
    assert_int_equal(r.orders_mismatched, 0);
    assert_int_equal(r.balance_unchecked, 0);
    assert_null(strstr(text, "balance"));
}

/* ---- clean directories --------------------------------------------------------------------- */

static void test_fsck_orders_balanced_after_every_rule(void **state)
{
    /* One order per rule of the orders model, each in its own commit after the orders exist:
     * an update in place, moves to another day and another shard, a new customer, a stale
     * version, an unchanged repeat, the same content under a higher version, and three versions
     * of one order in one commit. Every applied event leaves one retraction, and fsck finds the
     * rows and the store in balance. */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    struct ds_event e;
    for (int64_t id = 1; id <= 8; id++) {
        order_event(&e, id, 0, id, "pending", 1000 * id, id <= 4 ? 0 : 5);
        append(st, 0, &e);
    }
    assert_int_equal(storage_commit(st), 0);
    assert_balanced(fx, 8, 0);
    order_event(&e, 1, 0, 1, "paid", 1000, 0); /* in place */
    append(st, 0, &e);
    order_event(&e, 2, 2, 2, "pending", 2000, 0); /* another day */
    append(st, 2, &e);
    order_event(&e, 3, 1, 3, "pending", 3001, 0); /* another shard (and amount) */
    append(st, 1, &e);
    order_event(&e, 4, 0, 4, "pending", 4000, 0);
    test_id_int(&e.customer_id, 99); /* another customer */
    append(st, 0, &e);
    order_event(&e, 5, 1, 5, "paid", 5000, 4); /* stale: below version 5 */
    append(st, 1, &e);
    order_event(&e, 6, 0, 6, "pending", 6000, 0); /* unchanged: no version, same content */
    append(st, 0, &e);
    order_event(&e, 7, 0, 7, "pending", 7000, 6); /* same content, a higher version */
    append(st, 0, &e);
    for (int64_t v = 6; v <= 8; v++) { /* three versions in one commit, over two partitions */
        order_event(&e, 8, (uint32_t)(v % 2), 8, v == 8 ? "shipped" : "paid", 8000 + v, v);
        append(st, (uint32_t)(v % 2), &e);
    }
    assert_int_equal(storage_commit(st), 0);
    struct storage_order_stats stats;
    storage_order_stats(st, &stats);
    assert_int_equal(stats.created, 8);
    assert_int_equal(stats.stale, 1);
    assert_int_equal(stats.unchanged, 1);
    assert_int_equal(stats.applied, 8);
    storage_close(st);
    assert_balanced(fx, 8, 8);
}

static void test_fsck_orders_balanced_random_updates(void **state)
{
    /* Random updates over several commits: changes of status, amount, day and shard, half of
     * the orders versioned with some stale versions, some unchanged repeats, and string order
     * ids. The check agrees with the writer's own figures: as many retractions as applied
     * events, as many orders as were created. */
    struct test_store_fixture *fx = *state;
    uint64_t rng = test_seed();
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    static struct ds_event live[RANDOM_ORDERS];
    static uint32_t live_part[RANDOM_ORDERS];
    for (uint32_t o = 0; o < RANDOM_ORDERS; o++) {
        live_part[o] = (uint32_t)test_rng_below(&rng, PARTS);
        order_event(&live[o], o + 1, live_part[o], (int64_t)test_rng_below(&rng, 1440),
                    test_status_pool[test_rng_below(&rng, TEST_STATUS_PLAIN_COUNT)],
                    (int64_t)test_rng_below(&rng, 100000), o % 2 == 0 ? 1 : 0);
        if (o % 5 == 0) {
            char text[16];
            int n = snprintf(text, sizeof(text), "ord-%u", o);
            test_id_string(&live[o].order_id, text, (size_t)n);
        }
        append(st, live_part[o], &live[o]);
    }
    assert_int_equal(storage_commit(st), 0);
    for (int round = 0; round < 5; round++) {
        for (uint32_t o = 0; o < RANDOM_ORDERS; o++) {
            if (test_rng_below(&rng, 3) != 0) {
                continue;
            }
            struct ds_event e = live[o];
            uint32_t part = live_part[o];
            uint64_t kind = test_rng_below(&rng, 6);
            if (kind == 0) {
                part = (uint32_t)test_rng_below(&rng, PARTS);
                int32_t day = 0;
                uint32_t shard = 0;
                part_of(part, &day, &shard);
                e.ts_ms = (int64_t)day * DAY_MS + (e.ts_ms % DAY_MS);
            } else if (kind == 1) {
                test_event_set_status(&e, test_status_pool[test_rng_below(&rng, 3)]);
            } else if (kind == 2) {
                e.amount_units += 1 + (int64_t)test_rng_below(&rng, 50);
            } else if (kind == 3 && e.has_version) {
                e.version -= 1; /* stale (or a repeat of version 0's content: stale too) */
                test_event_set_status(&e, "late");
            }
            /* kind 4, 5: the same content again (unchanged), or a higher version of it */
            if (e.has_version && kind != 3 && kind != 4) {
                e.version += 1;
            }
            append(st, part, &e);
            if (kind != 3 || !e.has_version) {
                live[o] = e;
                live_part[o] = part;
            }
        }
        assert_int_equal(storage_commit(st), 0);
    }
    struct storage_order_stats stats;
    storage_order_stats(st, &stats);
    assert_int_equal(stats.created, RANDOM_ORDERS);
    assert_true(stats.applied > RANDOM_ORDERS / 2);
    assert_true(stats.stale > 0);
    assert_true(stats.unchanged > 0);
    storage_close(st);
    assert_balanced(fx, RANDOM_ORDERS, stats.applied);
}

static void test_fsck_orders_balanced_after_compaction(void **state)
{
    /* Compaction rewrites a partition with only its current versions: no retraction is left
     * there, and the rows left are still exactly the store's orders, while the partitions not
     * compacted keep theirs. 50 orders in (DAY0, 0), each updated 3 times in place, 10 of them
     * finally moved to (DAY0 + 1, 0); then (DAY0, 0) is compacted. */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    struct ds_event e;
    for (int64_t step = 0; step < 4; step++) {
        for (int64_t id = 1; id <= 50; id++) {
            uint32_t part = step == 3 && id <= 10 ? 2u : 0u;
            order_event(&e, id, part, id, "pending", 100 * id + step, 0);
            append(st, part, &e);
        }
        assert_int_equal(storage_commit(st), 0);
    }
    assert_balanced(fx, 50, 150);
    struct storage_compact_report compacted;
    assert_int_equal(storage_compact(st, DAY0, 0, &compacted), 1);
    assert_int_equal(compacted.rows_before, 50 + 2 * 150 - 10); /* 10 last rows moved */
    assert_int_equal(compacted.rows_after, 40);
    storage_close(st);
    /* The 10 moved orders' retractions went to (DAY0, 0) too, so none is left anywhere. */
    assert_balanced(fx, 50, 0);
    /* And once a writer's recovery has removed the replaced segment. */
    storage_close(open_model(fx->dir, STORAGE_MODEL_ORDERS));
    assert_balanced(fx, 50, 0);
}

static void test_fsck_orders_events_model_balanced_by_source(void **state)
{
    /* A directory of the events model holding a retraction of a row it never had: no orders to
     * balance there (no order figures), but the events model's own check (a retraction cancels
     * a row of its source, fsck_events.c) counts it unmatched, and fsck reports damage. */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_EVENTS);
    struct ds_event e;
    order_event(&e, 1, 0, 1, "paid", 100, 0);
    append(st, 0, &e);
    order_event(&e, 2, 0, 2, "paid", 100, 0);
    e.retract = true;
    append(st, 0, &e);
    assert_int_equal(storage_commit(st), 0);
    storage_close(st);
    struct storage_fsck_report r;
    assert_int_equal(fsck_report(fx->dir, false, &r, fx->text), 1);
    assert_int_equal(r.orders, 0);
    assert_int_equal(r.orders_mismatched, 0);
    assert_int_equal(r.retractions, 1);
    assert_int_equal(r.retractions_unmatched, 1);
    assert_non_null(strstr(fx->text, "cancels no row"));
}

/* ---- violations ---------------------------------------------------------------------------- */

static void file_flip(const char *path, uint64_t offset)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t byte = 0;
    assert_int_equal(pread(fd, &byte, 1, (off_t)offset), 1);
    byte ^= 0x5A;
    assert_int_equal(pwrite(fd, &byte, 1, (off_t)offset), 1);
    assert_int_equal(close(fd), 0);
}

/* Damages block `index` (0 is the first) of the first segment of part, in its payload, and lets
 * fsck --repair quarantine it; the repair must leave the blocks clean. */
static void quarantine_block(struct test_store_fixture *fx, uint32_t part, uint32_t index)
{
    int32_t day = 0;
    uint32_t shard = 0;
    part_of(part, &day, &shard);
    test_store_block_damage(fx->dir, day, shard, index);
    struct storage_fsck_report r;
    (void)fsck_report_with(fx->dir, true, true, &r, fx->text);
    assert_int_equal(r.quarantined_blocks, 1);
    assert_int_equal(r.blocks_bad, 0);
}

/* fsck (no repair) finds exactly these violations; their lines are left in text. */
static void assert_violations(const char *dir, uint64_t unmatched, uint64_t mismatched, char *text)
{
    struct storage_fsck_report r;
    assert_int_equal(fsck_report(dir, false, &r, text), 1);
    assert_int_equal(r.blocks_bad, 0);
    assert_int_equal(r.retractions_unmatched, unmatched);
    assert_int_equal(r.orders_mismatched, mismatched);
    assert_int_equal(r.balance_unchecked, 0);
    assert_non_null(strstr(text, "retractions do not balance"));
}

/* Orders 1 and 2 in (DAY0, 0), block 0; then the change of order 1 in a second commit. */
static void two_orders_then(struct storage *st, uint32_t part_after)
{
    struct ds_event e;
    order_event(&e, 1, 0, 10, "pending", 1500, 0);
    append(st, 0, &e);
    order_event(&e, 2, 0, 20, "pending", 2500, 0);
    append(st, 0, &e);
    assert_int_equal(storage_commit(st), 0);
    order_event(&e, 1, part_after, 10, "paid", 1500, 0);
    append(st, part_after, &e);
    assert_int_equal(storage_commit(st), 0);
}

static void test_fsck_orders_unmatched_retraction_found(void **state)
{
    /* Order 1 paid in place: (DAY0, 0) holds [1 pending, 2 pending] then [retract 1 pending,
     * 1 paid]. Without the first block the retraction cancels nothing: one unmatched
     * retraction, named with its partition and order; order 2 lost its row too. */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    two_orders_then(st, 0);
    storage_close(st);
    assert_balanced(fx, 2, 1);
    quarantine_block(fx, 0, 0);
    char *text = fx->text;
    assert_violations(fx->dir, 1, 1, text);
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(DAY0, date);
    char want[128];
    snprintf(want, sizeof(want), "/parts/%s/0: retraction cancels no earlier row: order 1 (", date);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "status \"pending\", amount 0.1500)"));
    snprintf(want, sizeof(want), "/parts/%s/0: the current version of order 2 (", date);
    assert_non_null(strstr(text, want));
}

static void test_fsck_orders_retraction_before_its_row_found(void **state)
{
    /* Append order matters, not just the multiset: order 1 goes pending -> paid -> pending, one
     * commit each, all in (DAY0, 0): [1 pending] [retract 1 pending, 1 paid] [retract 1 paid,
     * 1 pending]. Without the first block, the partition's rows and retractions still cancel
     * as multisets, but its first retraction comes before any row it could cancel: one
     * unmatched retraction, and the last row is order 1's current version (nothing mismatched). */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    const char *const steps[3] = {"pending", "paid", "pending"};
    struct ds_event e;
    for (int i = 0; i < 3; i++) {
        order_event(&e, 1, 0, 10, steps[i], 1500, 0);
        append(st, 0, &e);
        assert_int_equal(storage_commit(st), 0);
    }
    storage_close(st);
    assert_balanced(fx, 1, 2);
    quarantine_block(fx, 0, 0);
    char *text = fx->text;
    assert_violations(fx->dir, 1, 0, text);
    assert_non_null(strstr(text, "retraction cancels no earlier row: order 1 ("));
}

static void test_fsck_orders_row_without_order_found(void **state)
{
    /* Order 1 moves to the next day: (DAY0, 0) holds [1, 2] then [retract 1], (DAY0 + 1, 0)
     * holds [1 paid]. Without the retraction's block, order 1's old row stays in (DAY0, 0)
     * where the store has no order 1: one row without its order, named. */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    two_orders_then(st, 2);
    storage_close(st);
    assert_balanced(fx, 2, 1);
    quarantine_block(fx, 0, 1);
    char *text = fx->text;
    assert_violations(fx->dir, 0, 1, text);
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(DAY0, date);
    char want[160];
    snprintf(want, sizeof(want),
             "/parts/%s/0: row is left uncancelled and is not its order's current version: "
             "order 1 (customer 2, ",
             date);
    assert_non_null(strstr(text, want));
}

static void test_fsck_orders_order_without_row_found(void **state)
{
    /* Order 1 moves to the next day, whose only block holds its current version. Without that
     * block the store's order 1 has no row in (DAY0 + 1, 0): named with that partition. */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    two_orders_then(st, 2);
    storage_close(st);
    quarantine_block(fx, 2, 0);
    char *text = fx->text;
    assert_violations(fx->dir, 0, 1, text);
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(DAY0 + 1, date);
    char want[160];
    snprintf(want, sizeof(want),
             "/parts/%s/0: the current version of order 1 (customer 2, ts %sT00:10:00.000Z, "
             "status \"paid\", amount 0.1500) has no row there",
             date, date);
    assert_non_null(strstr(text, want));
}

static uint32_t count_lines(const char *text, const char *needle)
{
    uint32_t n = 0;
    for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + 1, needle)) {
        n++;
    }
    return n;
}

static void test_fsck_orders_names_only_the_first(void **state)
{
    /* 40 orders move from (DAY0, 1) to (DAY0, 0), paid; without the block of their retractions, 40
     * rows are left: all counted, the first FSCK_ORDERS_NAMED_MAX (10) named, the rest summed
     * up in one line. */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    struct ds_event e;
    for (int64_t id = 1; id <= 40; id++) {
        order_event(&e, id, 1, id, "pending", id, 0);
        append(st, 1, &e);
    }
    assert_int_equal(storage_commit(st), 0);
    for (int64_t id = 1; id <= 40; id++) {
        order_event(&e, id, 0, id, "paid", id, 0);
        append(st, 0, &e);
    }
    assert_int_equal(storage_commit(st), 0);
    storage_close(st);
    assert_balanced(fx, 40, 40);
    quarantine_block(fx, 1, 1);
    char *text = fx->text;
    assert_violations(fx->dir, 0, 40, text);
    assert_int_equal(count_lines(text, "row is left uncancelled"), 10);
    assert_non_null(strstr(text, ": 30 more balance violations not listed\n"));
}

static void test_fsck_orders_damaged_store_unchecked(void **state)
{
    /* A flipped byte in a record of the orders-by-id store: nothing to balance the rows
     * against. fsck does not run a balance over part of the store: it counts the directory as
     * unchecked, names the store, and exits 1 (damage) with the blocks themselves clean. */
    struct test_store_fixture *fx = *state;
    struct storage *st = open_model(fx->dir, STORAGE_MODEL_ORDERS);
    two_orders_then(st, 2);
    storage_close(st);
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/ids/log", fx->dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    file_flip(path, (uint64_t)sb.st_size / 2);
    char *text = fx->text;
    struct storage_fsck_report r;
    assert_int_equal(fsck_report(fx->dir, false, &r, text), 1);
    assert_int_equal(r.blocks_bad, 0);
    assert_int_equal(r.balance_unchecked, 1);
    assert_int_equal(r.orders, 0);
    assert_int_equal(r.retractions_unmatched + r.orders_mismatched, 0);
    assert_non_null(strstr(text, "/ids: the orders-by-id store cannot be read: "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fsck_orders_balanced_after_every_rule,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_balanced_random_updates, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_balanced_after_compaction,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_events_model_balanced_by_source,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_unmatched_retraction_found,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_retraction_before_its_row_found,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_row_without_order_found, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_order_without_row_found, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_names_only_the_first, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_orders_damaged_store_unchecked, test_store_setup,
                                        test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
