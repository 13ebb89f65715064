/*
 * test_index_compact: the seal's retention floor (index_seal_start with a floor day): entries of
 * days below it leave the log, the rest answer as before, and every customer stays reachable
 * after reopening from the log alone (a chain whose entries all fall below the floor keeps one,
 * so no slot a probe window passes is freed). Also the rule that says when to seal. The seal's
 * answers against a model and its crashes are in test_index_oracle.
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
#include <unistd.h>

#include "index/index.h"
#include "tests/support/tempdir.h"

#define TS0 1768953600000LL /* 2026-01-21T00:00:00Z */
#define DAY_MS 86400000LL
#define DAYS 10
#define FLOOR_DAYS 5 /* the floor: the first day kept */
#define CUSTOMERS 50 /* in a table of 2^6 slots: probe windows overlap, some chains are shared */
#define OLD_CUSTOMERS 10 /* customers 1..10 have orders on the first 3 days only */
#define PER_DAY 3

struct fixture {
    char root[128];
    char dir[160];
    struct index_config cfg;
    struct index *g;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->root, sizeof(f->root)), 0);
    snprintf(f->dir, sizeof(f->dir), "%s/gsi", f->root);
    index_config_defaults(&f->cfg);
    f->cfg.dir = f->dir;
    f->cfg.table_slots_log2 = 6;
    f->cfg.batch_entries_max = 4096;
    assert_int_equal(index_open(&f->cfg, &f->g), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    index_close(f->g);
    test_tempdir_remove(f->root);
    free(f);
    return 0;
}

static void entry_make(struct index_entry *e, int64_t customer, int64_t day, int64_t k)
{
    memset(e, 0, sizeof(*e));
    e->customer_id.value = customer;
    e->ts_ms = TS0 + day * DAY_MS + k * 1000 + customer;
    e->order_id.value = customer * 1000000 + day * 100 + k + 1;
    e->day = (int32_t)((TS0 + day * DAY_MS) / DAY_MS);
    e->status_len = 4;
    memcpy(e->status, "paid", 4);
    e->amount_units = 100 + k;
}

/* Day's orders of every customer with orders that day, as one apply. */
static void apply_day(struct index *g, int64_t day)
{
    struct index_entry batch[CUSTOMERS * PER_DAY];
    size_t n = 0;
    for (int64_t c = 1; c <= CUSTOMERS; c++) {
        if (c <= OLD_CUSTOMERS && day >= 3) {
            continue;
        }
        for (int64_t k = 0; k < PER_DAY; k++) {
            entry_make(&batch[n++], c, day, k);
        }
    }
    char cursor[16];
    int len = snprintf(cursor, sizeof(cursor), "day-%lld", (long long)day);
    assert_int_equal(index_apply(g, batch, n, cursor, (size_t)len), 0);
}

/* The customer's entries (all pages), each checked to be of day >= min_day. */
static uint32_t orders_of(struct index *g, int64_t customer, int64_t min_day)
{
    struct ds_id id = {.value = customer};
    struct index_entry entries[7];
    struct index_page page = {.entries = entries};
    char token[INDEX_TOKEN_CHARS_MAX + 1] = "";
    uint32_t total = 0;
    for (int pages = 0; pages < 1000; pages++) {
        assert_int_equal(index_query(g, &id, 7, token, &page), 0);
        for (uint32_t i = 0; i < page.count; i++) {
            assert_true(entries[i].ts_ms >= TS0 + min_day * DAY_MS);
            assert_int_equal(entries[i].customer_id.value, customer);
        }
        total += page.count;
        if (!page.has_next) {
            return total;
        }
        strcpy(token, page.next_token);
    }
    fail_msg("customer %lld pages without end", (long long)customer);
    return 0;
}

static void assert_after_floor(struct index *g)
{
    for (int64_t c = OLD_CUSTOMERS + 1; c <= CUSTOMERS; c++) {
        assert_int_equal(orders_of(g, c, FLOOR_DAYS), (DAYS - FLOOR_DAYS) * PER_DAY);
    }
    for (int64_t c = 1; c <= OLD_CUSTOMERS; c++) {
        assert_true(orders_of(g, c, 0) <= 1); /* at most the one a whole chain keeps */
    }
}

static void test_index_compact_seal_leaves_out_days_below_the_floor(void **state)
{
    /* Ten days applied, a seal with the floor at day 5 started, the last day applied while it
     * runs: afterwards every customer answers exactly its orders of days 5..9, the old
     * customers at most one, the log shrank, and the same holds reopened from the log alone
     * (DIR/table removed), so no probe window lost a slot. */
    struct fixture *f = *state;
    for (int64_t day = 0; day < DAYS - 1; day++) {
        apply_day(f->g, day);
    }
    int32_t floor_day = (int32_t)((TS0 + FLOOR_DAYS * DAY_MS) / DAY_MS);
    struct index_seal *s = NULL;
    assert_int_equal(index_seal_start(f->g, floor_day, &s), 0);
    apply_day(f->g, DAYS - 1); /* copied after the sealed part, linked to it */
    struct index_compact_stats stats;
    assert_int_equal(index_seal_finish(s, true, &stats), 0);
    assert_true(stats.bytes_after < stats.bytes_before);
    assert_true(stats.dropped_entries >=
                (uint64_t)(CUSTOMERS - OLD_CUSTOMERS) * FLOOR_DAYS * PER_DAY);
    assert_true(stats.tail_bytes > 0);
    assert_after_floor(f->g);
    index_close(f->g);
    f->g = NULL;
    char path[200];
    snprintf(path, sizeof(path), "%s/table", f->dir);
    assert_true(unlink(path) == 0 || errno == ENOENT);
    assert_int_equal(index_open(&f->cfg, &f->g), 0);
    assert_after_floor(f->g);
    char cursor[64];
    size_t len = 0;
    assert_int_equal(index_cursor(f->g, cursor, sizeof(cursor), &len), 0);
    assert_memory_equal(cursor, "day-9", 5);
    struct index_check_report report;
    uint8_t *check_cursor = NULL;
    assert_int_equal(index_check(f->dir, &check_cursor, &report), 0);
    assert_false(report.damaged);
    assert_non_null(check_cursor);
    assert_memory_equal(check_cursor, cursor, len);
    free(check_cursor);
}

static void test_index_compact_seal_due_follows_the_live_part(void **state)
{
    /* index_seal_due: nothing to seal on an empty log, idle or not; a live part past the idle
     * minimum is due only when idle; after a seal nothing is due until more is appended. */
    struct fixture *f = *state;
    assert_false(index_seal_due(f->g, true));
    for (int64_t day = 0; day < DAYS; day++) {
        apply_day(f->g, day);
    }
    uint64_t sealed = 0;
    uint64_t live = 0;
    index_log_bytes(f->g, &sealed, &live);
    assert_true(live < INDEX_SEAL_LIVE_MIN_BYTES);
    assert_int_equal(index_seal_due(f->g, true), live >= INDEX_SEAL_IDLE_MIN_BYTES);
    assert_false(index_seal_due(f->g, false));
    struct index_seal *s = NULL;
    assert_int_equal(index_seal_start(f->g, INT32_MIN, &s), 0);
    assert_int_equal(index_seal_finish(s, true, NULL), 0);
    index_log_bytes(f->g, &sealed, &live);
    assert_true(sealed > 0);
    assert_false(index_seal_due(f->g, true));
    assert_int_equal(orders_of(f->g, OLD_CUSTOMERS + 1, 0), DAYS * PER_DAY);
}

int main(void)
{
    setenv("DS_LOG", "error", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_index_compact_seal_leaves_out_days_below_the_floor,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_compact_seal_due_follows_the_live_part, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
