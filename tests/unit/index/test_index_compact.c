/*
 * test_index_compact: the seal's retention floor (index_seal_start with a floor day): entries of
 * days below it leave the log, a customer left with none leaves the index, the rest answer as
 * before, also after reopening from the log alone. The slot table grown by seals while applies
 * go on, from 2^6 slots to thousands of customers at most half load: every customer answers
 * its orders, the index checks clean, reopened and through readers. Also the rule that says
 * when to seal. The seal's answers against a model and its crashes are in test_index_oracle.
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
        assert_int_equal(orders_of(g, c, 0), 0); /* all below the floor: gone */
    }
}

static void test_index_compact_seal_leaves_out_days_below_the_floor(void **state)
{
    /* Ten days applied, a seal with the floor at day 5 started, the last day applied while it
     * runs: afterwards every customer answers exactly its orders of days 5..9, the old
     * customers none, the log shrank, and the same holds reopened from the log alone
     * (DIR/table removed). */
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

/* The growth test: customers 1..GROW_CUSTOMERS get one order in each wave they are in, and the
 * heavy customer 1 GROW_HEAVY more in each wave applied while a seal runs (several runs of one
 * apply, which skip back together); waves are applies of at most GROW_BATCH entries. */
#define GROW_CUSTOMERS 3000
#define GROW_FIRST 2000 /* customers in the first wave; the others arrive while seals run */
#define GROW_HEAVY 300
#define GROW_BATCH 4096
#define GROW_SEALS_MAX 8

struct grow {
    uint32_t orders[GROW_CUSTOMERS + 1]; /* per customer, orders applied */
    int64_t customers;                   /* customers 1..customers have orders */
    uint32_t waves;
    struct index_entry batch[GROW_BATCH];
};

/* One wave: an order for each customer c <= upto with c % stride == the wave's number % stride
 * and for each new one (above the model's customers, which grow to upto), and GROW_HEAVY more
 * for customer 1 when heavy. */
static void grow_wave(struct index *g, struct grow *m, int64_t upto, int64_t stride, bool heavy)
{
    struct index_entry *batch = m->batch;
    size_t n = 0;
    int64_t day = m->waves++;
    char cursor[16];
    int len = snprintf(cursor, sizeof(cursor), "wave-%u", m->waves);
    for (int64_t c = 1; c <= upto; c++) {
        if (c <= m->customers && c % stride != day % stride && !(heavy && c == 1)) {
            continue;
        }
        for (int64_t k = 0; k < (heavy && c == 1 ? GROW_HEAVY : 1); k++) {
            if (n == GROW_BATCH) {
                assert_int_equal(index_apply(g, batch, n, cursor, (size_t)len), 0);
                n = 0;
            }
            entry_make(&batch[n++], c, day, k);
            m->orders[c]++;
        }
    }
    assert_int_equal(index_apply(g, batch, n, cursor, (size_t)len), 0);
    m->customers = upto > m->customers ? upto : m->customers;
}

static void grow_assert_answers(struct index *g, const struct grow *m)
{
    for (int64_t c = 1; c <= GROW_CUSTOMERS; c++) {
        assert_int_equal(orders_of(g, c, 0), m->orders[c]);
    }
}

static void test_index_compact_seals_grow_the_table_while_applies_go_on(void **state)
{
    /* 2000 customers applied to a table of 2^6 slots (every probe window full), then seals,
     * each with waves applied while it runs (new customers among them, up to 3000): seals
     * grow the table until at most half of it is used, and not to 8 slots a customer; after
     * each, every customer answers all its orders; then the index checks clean with the grown
     * size in its log header, a reader opened before sees the log replaced and one opened
     * after answers the same, and so does the writer reopened with and without DIR/table. */
    struct fixture *f = *state;
    struct grow *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    grow_wave(f->g, m, GROW_FIRST, 1, false);
    uint32_t log2 = f->cfg.table_slots_log2;
    struct index *before = NULL;
    int seals = 0;
    for (bool grew = true; grew; seals++) {
        assert_true(seals < GROW_SEALS_MAX);
        index_close(before);
        assert_int_equal(index_open_reader(&f->cfg, &before), 0);
        struct index_seal *s = NULL;
        assert_int_equal(index_seal_start(f->g, INT32_MIN, &s), 0);
        struct index_compact_stats stats;
        int rc = -EAGAIN;
        for (int64_t wave = 0; rc == -EAGAIN; wave++) {
            /* A few hundred new customers and a tenth of the others per wave, and a pause:
             * the seal's thread catches up with the applies and finishes. */
            int64_t upto = m->customers + 200;
            grow_wave(f->g, m, upto < GROW_CUSTOMERS ? upto : GROW_CUSTOMERS, 10, wave < 2);
            usleep(5000);
            rc = index_seal_finish(s, wave >= 20, &stats);
        }
        assert_int_equal(rc, 0);
        assert_true(stats.slots_log2 >= log2);
        grew = stats.slots_log2 > log2;
        log2 = stats.slots_log2;
        grow_assert_answers(f->g, m);
    }
    assert_true(seals >= 3); /* 2^6 slots do not reach thousands of customers at once */
    assert_true(2u * (uint64_t)m->customers <= 1ull << log2);
    assert_true(1ull << log2 <= 8u * (uint64_t)m->customers); /* not oversized either */
    assert_true(index_replaced(before));
    index_close(before);
    struct index_check_report report;
    uint8_t *cursor = NULL;
    assert_int_equal(index_check(f->dir, &cursor, &report), 0);
    free(cursor);
    if (report.damaged) {
        fail_msg("gsi check: %s", report.reason);
    }
    assert_int_equal(report.slots_log2, log2);
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&f->cfg, &reader), 0);
    grow_assert_answers(reader, m);
    index_close(reader);
    index_close(f->g);
    assert_int_equal(index_open(&f->cfg, &f->g), 0); /* from DIR/table */
    grow_assert_answers(f->g, m);
    index_close(f->g);
    char path[200];
    snprintf(path, sizeof(path), "%s/table", f->dir);
    assert_true(unlink(path) == 0 || errno == ENOENT);
    assert_int_equal(index_open(&f->cfg, &f->g), 0); /* from the log alone */
    grow_assert_answers(f->g, m);
    grow_wave(f->g, m, GROW_CUSTOMERS, 1, true); /* applies go on in the grown table */
    grow_assert_answers(f->g, m);
    free(m);
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
        cmocka_unit_test_setup_teardown(test_index_compact_seals_grow_the_table_while_applies_go_on,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_compact_seal_due_follows_the_live_part, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
