/*
 * Unit tests of index/store.c, the by-customer index store: answers equal a ground truth
 * sorted here (a heavy customer with thousands of orders, a light one with one, string customer
 * ids, integer and string ids that look alike, order id ties on one timestamp), full pagination
 * with limits 1, 7 and 1000, the same with checkpoints written while batches arrive and after
 * reopening from a checkpoint or from the whole log, pages stable while newer
 * entries arrive, idempotent re-apply, the cursor and its entries across close and reopen and
 * across kill -9 of a writer process (never a part of an apply), malformed tokens and limits,
 * invalid entries and configurations, a second writer, queries on another thread during
 * applies (whole applies only), a damaged run (an error, never a wrong answer), and a reader
 * that sees the writer's applies after a refresh. index_check (fsck): a clean index and one beside
 * a live writer are clean; a flipped log record followed by intact ones or inside what the
 * checkpoint covers, a flipped or cut checkpoint, a bad FORMAT and a log cut inside the
 * checkpoint are damage naming the file; a torn log tail without a checkpoint is clean.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "index/index.h"
#include "index/index_private.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

#define TS0 1768953600000LL /* 2026-01-21T00:00:00Z */
#define TRUTH_MAX 8000u

struct fixture {
    char dir[64];
    char index_dir[128];
    struct index *g;
    struct index_entry *entries; /* the applied entries, the ground truth */
    size_t count;
    struct index_entry page[INDEX_PAGE_LIMIT_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    snprintf(f->index_dir, sizeof(f->index_dir), "%s/gsi", f->dir);
    f->entries = calloc(TRUTH_MAX, sizeof(*f->entries));
    assert_non_null(f->entries);
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = f->index_dir;
    cfg.batch_entries_max = 4096;
    assert_int_equal(index_open(&cfg, &f->g), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    index_close(f->g);
    test_tempdir_remove(f->dir);
    free(f->entries);
    free(f);
    return 0;
}

/* Reopens the writer (closing writes a checkpoint) with the shortest checkpoint interval, so
 * that applies write checkpoints too. */
static int reopen(struct fixture *f)
{
    index_close(f->g);
    f->g = NULL;
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = f->index_dir;
    cfg.batch_entries_max = 4096;
    cfg.checkpoint_bytes = INDEX_CHECKPOINT_BYTES_MIN;
    return index_open(&cfg, &f->g);
}

static void entry_make(struct index_entry *e, const struct ds_id *customer, int64_t ts_ms,
                       const struct ds_id *order, const char *status, int64_t amount_units)
{
    memset(e, 0, sizeof(*e));
    e->customer_id = *customer;
    e->ts_ms = ts_ms;
    e->order_id = *order;
    e->day = ds_day_from_ms(ts_ms);
    e->status_len = (uint8_t)strlen(status);
    memcpy(e->status, status, e->status_len);
    e->amount_units = amount_units;
}

/* The order of the contract: ids ascending = integers by value, then strings bytewise with a
 * prefix first. */
static int id_compare(const struct ds_id *a, const struct ds_id *b)
{
    if (a->is_string != b->is_string) {
        return a->is_string ? 1 : -1;
    }
    if (!a->is_string) {
        return (a->value > b->value) - (a->value < b->value);
    }
    size_t common = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->text, b->text, common);
    return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

/* Newest first: ts descending, then order id descending. */
static int entry_newest_first(const void *x, const void *y)
{
    const struct index_entry *a = x;
    const struct index_entry *b = y;
    if (a->ts_ms != b->ts_ms) {
        return a->ts_ms > b->ts_ms ? -1 : 1;
    }
    return -id_compare(&a->order_id, &b->order_id);
}

static void entry_assert_equal(const struct index_entry *want, const struct index_entry *got)
{
    assert_true(test_id_equal(&want->customer_id, &got->customer_id));
    assert_true(test_id_equal(&want->order_id, &got->order_id));
    assert_int_equal(want->ts_ms, got->ts_ms);
    assert_int_equal(want->day, got->day);
    assert_int_equal(want->status_len, got->status_len);
    assert_memory_equal(want->status, got->status, want->status_len);
    assert_int_equal(want->amount_units, got->amount_units);
}

/* The applied entries of customer, newest first, into a fresh array of *n entries. */
static struct index_entry *truth_of(const struct fixture *f, const struct ds_id *customer,
                                    size_t *n)
{
    struct index_entry *out = calloc(f->count + 1, sizeof(*out));
    assert_non_null(out);
    *n = 0;
    for (size_t i = 0; i < f->count; i++) {
        if (test_id_equal(&f->entries[i].customer_id, customer)) {
            out[(*n)++] = f->entries[i];
        }
    }
    qsort(out, *n, sizeof(*out), entry_newest_first);
    return out;
}

static void apply_all(struct fixture *f, size_t first, size_t batch, const char *cursor)
{
    for (size_t i = first; i < f->count; i += batch) {
        size_t n = f->count - i < batch ? f->count - i : batch;
        assert_int_equal(index_apply(f->g, f->entries + i, n, cursor, strlen(cursor)), 0);
    }
}

/* Reads every page of customer with limit and checks it against the truth. */
static void assert_pages_equal_truth(struct fixture *f, const struct ds_id *customer,
                                     uint32_t limit)
{
    size_t n = 0;
    struct index_entry *truth = truth_of(f, customer, &n);
    size_t seen = 0;
    char token[INDEX_TOKEN_CHARS_MAX + 1] = "";
    for (;;) {
        struct index_page page = {.entries = f->page};
        assert_int_equal(index_query(f->g, customer, limit, token, &page), 0);
        assert_true(page.count <= limit);
        for (uint32_t i = 0; i < page.count; i++) {
            assert_true(seen < n);
            entry_assert_equal(&truth[seen++], &page.entries[i]);
        }
        if (!page.has_next) {
            break;
        }
        assert_int_equal(page.count, limit);
        strcpy(token, page.next_token);
    }
    assert_int_equal(seen, n);
    free(truth);
}

/* A mixed population: heavy integer customer 7 (3000 orders, 10 per timestamp so ties are
 * broken by order id, integer and string order ids mixed), light integer customer 8 (one
 * order), string customer "7" (500 orders) and string customer "cust-a\0b" (200 orders). */
static void population_make(struct fixture *f, uint64_t seed)
{
    uint64_t rng = seed;
    struct ds_id heavy, light, str7, str_a;
    test_id_int(&heavy, 7);
    test_id_int(&light, 8);
    test_id_string(&str7, "7", 1);
    test_id_string(&str_a, "cust-a\0b", 8);
    const struct ds_id *customers[4] = {&heavy, &light, &str7, &str_a};
    const size_t orders[4] = {3000, 1, 500, 200};
    for (size_t c = 0; c < 4; c++) {
        for (size_t k = 0; k < orders[c]; k++) {
            struct ds_id order;
            uint64_t pick = test_rng_below(&rng, 4);
            char text[16];
            int len = snprintf(text, sizeof(text), "%zu", k);
            if (pick == 0) {
                test_id_string(&order, text, (size_t)len);
            } else if (pick == 1) {
                text[len] = '\0';
                test_id_string(&order, text, (size_t)len + 1); /* a zero byte inside */
            } else {
                test_id_int(&order, (int64_t)(k + 1));
            }
            int64_t ts = TS0 + (int64_t)(k / 10) * 1000 + (int64_t)test_rng_below(&rng, 2);
            const char *status = test_status_pool[test_rng_below(&rng, TEST_STATUS_POOL_COUNT)];
            int64_t amount = (int64_t)test_rng_next(&rng);
            entry_make(&f->entries[f->count++], customers[c], ts, &order, status, amount);
        }
    }
    /* Shuffle so that batches hold every customer in random order. */
    for (size_t i = f->count - 1; i > 0; i--) {
        size_t j = (size_t)test_rng_below(&rng, i + 1);
        struct index_entry t = f->entries[i];
        f->entries[i] = f->entries[j];
        f->entries[j] = t;
    }
}

static void test_index_query_equals_truth_all_limits(void **state)
{
    /* Every page of every customer, at limits 1, 7 and 1000, equals the truth. */
    struct fixture *f = *state;
    population_make(f, test_seed());
    apply_all(f, 0, 1000, "c1");
    struct ds_id ids[5];
    test_id_int(&ids[0], 7);
    test_id_int(&ids[1], 8);
    test_id_string(&ids[2], "7", 1);
    test_id_string(&ids[3], "cust-a\0b", 8);
    test_id_int(&ids[4], 9); /* no orders */
    const uint32_t limits[3] = {1, 7, 1000};
    for (size_t c = 0; c < 5; c++) {
        for (size_t l = 0; l < 3; l++) {
            assert_pages_equal_truth(f, &ids[c], limits[l]);
        }
    }
}

static void assert_heavy_and_string_pages_equal_truth(struct fixture *f)
{
    struct ds_id heavy, str_a;
    test_id_int(&heavy, 7);
    test_id_string(&str_a, "cust-a\0b", 8);
    assert_pages_equal_truth(f, &heavy, 1000);
    assert_pages_equal_truth(f, &heavy, 7);
    assert_pages_equal_truth(f, &str_a, 1);
}

static void test_index_query_equals_truth_across_checkpoints(void **state)
{
    /* 3701 entries applied 8 times over (replays) in batches of 50, with a checkpoint of the
     * table every MiB of log: every page equals the truth, with no duplicates, on the writer,
     * after a reopen from the last checkpoint, and after a reopen that must read the whole log
     * (the checkpoint removed). */
    struct fixture *f = *state;
    assert_int_equal(reopen(f), 0);
    population_make(f, test_seed());
    uint64_t empty = index_bytes_on_disk(f->g);
    for (int round = 0; round < 8; round++) {
        apply_all(f, 0, 50, "c");
    }
    char table[160];
    snprintf(table, sizeof(table), "%s/table", f->index_dir);
    for (int i = 0; i < 2000 && access(table, F_OK) != 0; i++) {
        usleep(10000); /* the writer's checkpoint thread renames it in while applies go on */
    }
    assert_int_equal(access(table, F_OK), 0); /* written while applying, before any close */
    assert_true(index_bytes_on_disk(f->g) > empty + (1u << 20));
    assert_heavy_and_string_pages_equal_truth(f);
    assert_int_equal(reopen(f), 0);
    assert_heavy_and_string_pages_equal_truth(f);
    index_close(f->g);
    f->g = NULL;
    assert_int_equal(unlink(table), 0);
    assert_int_equal(reopen(f), 0);
    assert_heavy_and_string_pages_equal_truth(f);
}

static void test_index_pages_stable_while_newer_entries_arrive(void **state)
{
    /* Entries applied between pages are newer: later pages neither skip nor repeat. */
    struct fixture *f = *state;
    population_make(f, test_seed());
    apply_all(f, 0, 1000, "c1");
    struct ds_id heavy;
    test_id_int(&heavy, 7);
    size_t n = 0;
    struct index_entry *truth = truth_of(f, &heavy, &n);
    size_t seen = 0;
    char token[INDEX_TOKEN_CHARS_MAX + 1] = "";
    for (int64_t round = 0;; round++) {
        struct index_page page = {.entries = f->page};
        assert_int_equal(index_query(f->g, &heavy, 7, token, &page), 0);
        for (uint32_t i = 0; i < page.count; i++) {
            entry_assert_equal(&truth[seen++], &page.entries[i]);
        }
        if (!page.has_next) {
            break;
        }
        strcpy(token, page.next_token);
        struct index_entry fresh;
        struct ds_id order;
        test_id_int(&order, 1000000 + round);
        entry_make(&fresh, &heavy, TS0 + 86400000LL + round, &order, "paid", round);
        assert_int_equal(index_apply(f->g, &fresh, 1, "c2", 2), 0);
    }
    assert_int_equal(seen, n);
    free(truth);
}

static void test_index_apply_twice_changes_nothing(void **state)
{
    /* Re-applying the same batches (a builder replaying after a crash) adds nothing. */
    struct fixture *f = *state;
    population_make(f, test_seed());
    apply_all(f, 0, 1000, "c1");
    apply_all(f, 0, 700, "c1");
    assert_int_equal(reopen(f), 0);
    struct ds_id heavy;
    test_id_int(&heavy, 7);
    assert_pages_equal_truth(f, &heavy, 1000);
}

static void test_index_cursor_and_entries_survive_reopen(void **state)
{
    /* The cursor starts empty; after apply, close and reopen, cursor and entries agree. */
    struct fixture *f = *state;
    char buf[16];
    size_t len = 99;
    assert_int_equal(index_cursor(f->g, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 0);
    population_make(f, test_seed());
    apply_all(f, 0, 4096, "position-1");
    assert_int_equal(reopen(f), 0);
    assert_int_equal(index_cursor(f->g, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 10);
    assert_memory_equal(buf, "position-1", 10);
    assert_int_equal(index_cursor(f->g, buf, 4, &len), -ENOSPC);
    struct ds_id str7;
    test_id_string(&str7, "7", 1);
    assert_pages_equal_truth(f, &str7, 1000);
    assert_true(index_bytes_on_disk(f->g) > 0);
}

#define CRASH_BATCH 300u

/* Batch i: CRASH_BATCH orders of customer i + 1, order ids i * CRASH_BATCH + 1 ... */
static void crash_batch(struct index_entry *batch, uint64_t i)
{
    struct ds_id customer;
    test_id_int(&customer, (int64_t)i + 1);
    for (uint32_t j = 0; j < CRASH_BATCH; j++) {
        struct ds_id order;
        test_id_int(&order, (int64_t)(i * CRASH_BATCH + j + 1));
        entry_make(&batch[j], &customer, TS0 + j, &order, "paid", (int64_t)j);
    }
}

static uint64_t crash_cursor(struct fixture *f)
{
    uint64_t cursor = 0;
    size_t len = 0;
    assert_int_equal(index_cursor(f->g, &cursor, sizeof(cursor), &len), 0);
    assert_true(len == 0 || len == sizeof(cursor));
    return len == 0 ? 0 : cursor; /* the cursor is the number of batches applied */
}

static uint32_t orders_of(struct fixture *f, int64_t customer_value)
{
    struct ds_id customer;
    test_id_int(&customer, customer_value);
    struct index_page page = {.entries = f->page};
    assert_int_equal(index_query(f->g, &customer, INDEX_PAGE_LIMIT_MAX, NULL, &page), 0);
    return page.count;
}

static void test_index_damaged_run_is_an_error_not_a_wrong_answer(void **state)
{
    /* One customer's batch, checkpointed at close; then a byte of its run flipped (inside what
     * the checkpoint covers, so opening does not read it): a query that needs that run fails
     * with -DS_ECORRUPT rather than answering from damaged bytes, and other customers still
     * answer. */
    struct fixture *f = *state;
    struct index_entry batch[CRASH_BATCH];
    crash_batch(batch, 0);
    uint64_t one = 1;
    assert_int_equal(index_apply(f->g, batch, CRASH_BATCH, &one, sizeof(one)), 0);
    crash_batch(batch, 1);
    uint64_t two = 2;
    assert_int_equal(index_apply(f->g, batch, CRASH_BATCH, &two, sizeof(two)), 0);
    index_close(f->g);
    f->g = NULL;
    char log[160];
    snprintf(log, sizeof(log), "%s/log", f->index_dir);
    FILE *file = fopen(log, "r+b");
    assert_non_null(file);
    assert_int_equal(fseek(file, 64 + 100, SEEK_SET), 0); /* customer 1's run: the first */
    int c = fgetc(file);
    assert_int_equal(fseek(file, 64 + 100, SEEK_SET), 0);
    assert_int_equal(fputc(c ^ 0x5A, file), c ^ 0x5A);
    assert_int_equal(fclose(file), 0);
    assert_int_equal(reopen(f), 0);
    struct ds_id damaged;
    test_id_int(&damaged, 1);
    struct index_page page = {.entries = f->page};
    assert_int_equal(index_query(f->g, &damaged, INDEX_PAGE_LIMIT_MAX, NULL, &page), -DS_ECORRUPT);
    assert_int_equal(orders_of(f, 2), CRASH_BATCH);
    assert_int_equal(crash_cursor(f), 2);
}

/* ---- index_check ------------------------------------------------------------------------------
 */

#define CHECK_APPLIES 3u

/* Applies CHECK_APPLIES crash batches (customers 1..3, cursor = batches applied) and closes the
 * writer, which writes the checkpoint DIR/table covering the whole log. */
static void check_index_make(struct fixture *f)
{
    struct index_entry batch[CRASH_BATCH];
    for (uint64_t i = 0; i < CHECK_APPLIES; i++) {
        crash_batch(batch, i);
        uint64_t cursor = i + 1;
        assert_int_equal(index_apply(f->g, batch, CRASH_BATCH, &cursor, sizeof(cursor)), 0);
    }
    index_close(f->g);
    f->g = NULL;
}

static void check_path(const struct fixture *f, const char *name, char *dst, size_t cap)
{
    int n = snprintf(dst, cap, "%s/%s", f->index_dir, name);
    assert_true(n > 0 && (size_t)n < cap);
}

static long check_file_size(const struct fixture *f, const char *name)
{
    char path[160];
    check_path(f, name, path, sizeof(path));
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    assert_int_equal(fseek(file, 0, SEEK_END), 0);
    long size = ftell(file);
    assert_int_equal(fclose(file), 0);
    return size;
}

static void check_file_flip(const struct fixture *f, const char *name, long offset)
{
    char path[160];
    check_path(f, name, path, sizeof(path));
    FILE *file = fopen(path, "r+b");
    assert_non_null(file);
    assert_int_equal(fseek(file, offset, SEEK_SET), 0);
    int c = fgetc(file);
    assert_true(c != EOF);
    assert_int_equal(fseek(file, offset, SEEK_SET), 0);
    assert_int_equal(fputc(c ^ 0x5A, file), c ^ 0x5A);
    assert_int_equal(fclose(file), 0);
}

static void check_file_cut(const struct fixture *f, const char *name, long size)
{
    char path[160];
    check_path(f, name, path, sizeof(path));
    assert_int_equal(truncate(path, size), 0);
}

static void check_file_remove(const struct fixture *f, const char *name)
{
    char path[160];
    check_path(f, name, path, sizeof(path));
    assert_int_equal(unlink(path), 0);
}

/* Runs index_check, which must succeed; returns the cursor (the batches it covers). */
static uint64_t check_run(const struct fixture *f, struct index_check_report *report)
{
    uint8_t *cursor = NULL;
    assert_int_equal(index_check(f->index_dir, &cursor, report), 0);
    assert_true(report->damaged == (report->reason[0] != '\0'));
    uint64_t covered = 0;
    if (!report->damaged && report->cursor_len > 0) {
        assert_int_equal(report->cursor_len, sizeof(covered));
        memcpy(&covered, cursor, sizeof(covered));
    }
    free(cursor);
    return covered;
}

static void check_assert_damaged(const struct fixture *f, const char *file_named)
{
    struct index_check_report report;
    (void)check_run(f, &report);
    assert_true(report.present);
    assert_true(report.damaged);
    if (strstr(report.reason, file_named) == NULL) {
        fail_msg("the reason \"%s\" names no %s", report.reason, file_named);
    }
}

static int check_count_entry(const struct index_entry *entry, void *user)
{
    uint64_t *counts = user;
    assert_false(entry->customer_id.is_string);
    assert_true(entry->customer_id.value >= 1 && entry->customer_id.value <= CHECK_APPLIES);
    assert_int_equal(entry->day, ds_day_from_ms(entry->ts_ms));
    counts[entry->customer_id.value - 1]++;
    return 0;
}

static void test_index_check_clean_index_reports_what_it_holds(void **state)
{
    /* A clean index closed by its writer: not damaged, every apply, run and entry counted, the
     * checkpoint covering the whole log, no tail, the last cursor returned; index_check_entries
     * visits each customer's entries; a missing directory is no index, not damage. */
    struct fixture *f = *state;
    check_index_make(f);
    struct index_check_report report;
    assert_int_equal(check_run(f, &report), CHECK_APPLIES);
    assert_true(report.present);
    assert_false(report.damaged);
    assert_int_equal(report.applies, CHECK_APPLIES);
    assert_int_equal(report.entries, CHECK_APPLIES * CRASH_BATCH);
    assert_true(report.runs >= CHECK_APPLIES);
    assert_int_equal(report.slots_used, CHECK_APPLIES);
    assert_int_equal(report.log_bytes, check_file_size(f, "log"));
    assert_int_equal(report.committed_bytes, report.log_bytes);
    assert_int_equal(report.tail_bytes, 0);
    assert_true(report.table_present);
    assert_int_equal(report.table_covers_bytes, report.log_bytes);
    assert_int_equal(report.slots_log2, INDEX_TABLE_SLOTS_LOG2_DEFAULT);
    uint64_t counts[CHECK_APPLIES] = {0};
    assert_int_equal(
        index_check_entries(f->index_dir, report.committed_bytes, check_count_entry, counts), 0);
    for (size_t i = 0; i < CHECK_APPLIES; i++) {
        assert_int_equal(counts[i], CRASH_BATCH);
    }
    char missing[160];
    check_path(f, "nothing-here", missing, sizeof(missing));
    uint8_t *cursor = NULL;
    assert_int_equal(index_check(missing, &cursor, &report), 0);
    assert_null(cursor);
    assert_false(report.present);
    assert_false(report.damaged);
}

static void test_index_check_beside_a_live_writer_is_clean(void **state)
{
    /* Applies written but never checkpointed (the writer still open, no DIR/table): the check
     * takes no lock and reads every apply the writer flushed. */
    struct fixture *f = *state;
    struct index_entry batch[CRASH_BATCH];
    for (uint64_t i = 0; i < 2; i++) {
        crash_batch(batch, i);
        uint64_t cursor = i + 1;
        assert_int_equal(index_apply(f->g, batch, CRASH_BATCH, &cursor, sizeof(cursor)), 0);
    }
    struct index_check_report report;
    assert_int_equal(check_run(f, &report), 2);
    assert_false(report.damaged);
    assert_false(report.table_present);
    assert_int_equal(report.entries, 2 * CRASH_BATCH);
}

static void test_index_check_flipped_record_before_intact_ones_is_damage(void **state)
{
    /* A byte of the first apply's run flipped, DIR/table removed (so nothing but the records
     * after it can tell): damage naming the log. A reader refuses the index (-DS_ECORRUPT)
     * rather than answering from the applies before the damage as if they were all; a writer
     * still opens (it cuts the log there and its builder replays). */
    struct fixture *f = *state;
    check_index_make(f);
    check_file_remove(f, "table");
    check_file_flip(f, "log", 64 + 100);
    check_assert_damaged(f, "/log");
    struct index_check_report report;
    (void)check_run(f, &report);
    assert_non_null(strstr(report.reason, "intact records follow"));
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = f->index_dir;
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&cfg, &reader), -DS_ECORRUPT);
    assert_int_equal(reopen(f), 0);
    assert_int_equal(crash_cursor(f), 0); /* cut before the first apply */
}

static void test_index_compacted_log_checks_clean_and_every_flipped_byte_is_damage(void **state)
{
    /* A compacted log (sealed records, no DIR/table) checks clean and answers as
     * before; then each of a spread of its sealed bytes flipped in turn (CRC-covered): index_check
     * reports damage and a reader refuses the index rather than answer from it. */
    struct fixture *f = *state;
    check_index_make(f);
    assert_int_equal(reopen(f), 0);
    uint64_t before[CHECK_APPLIES + 1];
    for (int64_t c = 1; c <= (int64_t)CHECK_APPLIES; c++) {
        before[c] = orders_of(f, c);
    }
    struct index_compact_stats stats;
    assert_int_equal(index_compact(f->g, &stats), 0);
    assert_true(stats.bytes_after < stats.bytes_before);
    for (int64_t c = 1; c <= (int64_t)CHECK_APPLIES; c++) {
        assert_int_equal(orders_of(f, c), before[c]);
    }
    index_close(f->g);
    f->g = NULL;
    struct index_check_report report;
    assert_int_equal(check_run(f, &report), CHECK_APPLIES);
    assert_false(report.damaged);
    assert_false(report.table_present); /* the sealed log is its own checkpoint */
    assert_int_equal(report.entries, CHECK_APPLIES * CRASH_BATCH);
    char path[160];
    check_path(f, "log", path, sizeof(path));
    char *clean = NULL;
    size_t len = 0;
    assert_int_equal(ds_read_file(path, 1u << 20, &clean, &len), 0);
    size_t sealed_end = len - (24 + sizeof(uint64_t)); /* the cursor record closes the log */
    for (size_t at = 64; at < sealed_end; at += 1 + (sealed_end - 64) / 97) {
        check_file_flip(f, "log", (long)at);
        check_assert_damaged(f, "/log");
        struct index_config cfg;
        index_config_defaults(&cfg);
        cfg.dir = f->index_dir;
        struct index *reader = NULL;
        assert_int_equal(index_open_reader(&cfg, &reader), -DS_ECORRUPT);
        assert_int_equal(ds_write_file_atomic(path, clean, len), 0);
    }
    free(clean);
    assert_int_equal(reopen(f), 0);
    assert_int_equal(orders_of(f, 1), before[1]);
}

static void test_index_check_flipped_record_inside_the_checkpoint_is_damage(void **state)
{
    /* A byte of the middle apply's run flipped, the checkpoint kept: damage (the table covers
     * it), even though opening never reads that run again. */
    struct fixture *f = *state;
    check_index_make(f);
    long size = check_file_size(f, "log");
    check_file_flip(f, "log", 64 + (size - 64) / 2);
    check_assert_damaged(f, "/log");
}

static void test_index_check_flipped_table_byte_is_damage(void **state)
{
    /* A byte of the checkpoint's header, then one of its body, flipped: damage naming the
     * table each time; and a reader refuses a checkpoint that is not one of its log. */
    struct fixture *f = *state;
    check_index_make(f);
    check_file_flip(f, "table", 40);
    check_assert_damaged(f, "/table");
    check_file_flip(f, "table", 40); /* back: clean again */
    struct index_check_report report;
    assert_int_equal(check_run(f, &report), CHECK_APPLIES);
    assert_false(report.damaged);
    check_file_flip(f, "table", check_file_size(f, "table") - 3);
    check_assert_damaged(f, "/table");
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = f->index_dir;
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&cfg, &reader), -DS_ECORRUPT);
}

static void test_index_check_cut_table_is_damage(void **state)
{
    /* The checkpoint cut short of its last slot, then to half its header: damage naming it. */
    struct fixture *f = *state;
    check_index_make(f);
    check_file_cut(f, "table", check_file_size(f, "table") - 1);
    check_assert_damaged(f, "/table");
    check_file_cut(f, "table", 30);
    check_assert_damaged(f, "/table");
}

static void test_index_check_bad_format_is_damage(void **state)
{
    /* FORMAT overwritten, then removed while the log is there: damage naming FORMAT. */
    struct fixture *f = *state;
    check_index_make(f);
    char path[160];
    check_path(f, "FORMAT", path, sizeof(path));
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fputs("dayshard-gsi 3\n", file) >= 0, 1);
    assert_int_equal(fclose(file), 0);
    check_assert_damaged(f, "FORMAT");
    check_file_remove(f, "FORMAT");
    check_assert_damaged(f, "FORMAT");
}

static void test_index_check_cut_log_inside_the_checkpoint_is_damage(void **state)
{
    /* The log cut by one byte, and to its header alone, with the checkpoint kept: the table
     * covers what is gone, so this is damage, not a torn tail. */
    struct fixture *f = *state;
    check_index_make(f);
    long size = check_file_size(f, "log");
    check_file_cut(f, "log", size - 1);
    check_assert_damaged(f, "/table");
    check_file_cut(f, "log", 64);
    check_assert_damaged(f, "/table");
    check_file_cut(f, "log", 10);
    check_assert_damaged(f, "/log");
}

static void test_index_check_torn_log_tail_is_clean(void **state)
{
    /* Without a checkpoint (a crash before the writer's first one), the log cut in the middle
     * of its last apply's records, or followed by bytes of a torn append: clean, the cut part
     * counted as a tail, the cursor the last whole apply's; a reader opens it. */
    struct fixture *f = *state;
    check_index_make(f);
    check_file_remove(f, "table");
    struct index_check_report report;
    assert_int_equal(check_run(f, &report), CHECK_APPLIES);
    uint64_t whole = report.log_bytes;
    uint64_t third = 0; /* where the second apply ends: cut between it and the log's end */
    check_file_cut(f, "log", (long)whole - 10);
    assert_int_equal(check_run(f, &report), CHECK_APPLIES - 1);
    assert_false(report.damaged);
    third = report.committed_bytes;
    assert_int_equal(report.tail_bytes, whole - 10 - third);
    assert_int_equal(report.applies, CHECK_APPLIES - 1);
    assert_int_equal(report.entries, (CHECK_APPLIES - 1) * CRASH_BATCH);
    char path[160];
    check_path(f, "log", path, sizeof(path));
    FILE *file = fopen(path, "ab");
    assert_non_null(file);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(fputc((i * 37) & 0xff, file), (i * 37) & 0xff);
    }
    assert_int_equal(fclose(file), 0);
    assert_int_equal(check_run(f, &report), CHECK_APPLIES - 1);
    assert_false(report.damaged);
    assert_int_equal(report.tail_bytes, whole - 10 + 300 - third);
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = f->index_dir;
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&cfg, &reader), 0);
    index_close(reader);
}

#define WRITER_DIR_ENV "TEST_GSI_WRITER_DIR"
#define WRITER_FD_ENV "TEST_GSI_WRITER_FD"
/* What the writer process reports on its pipe: an apply returned, a checkpoint was renamed into
 * place (a cursor on disk that a kill cannot take back). */
#define WRITER_APPLIED 'a'
#define WRITER_CHECKPOINTED 'c'

/* The writer process of the kill -9 test: applies batches from the stored cursor on, with the
 * shortest checkpoint interval (so that checkpoints are written too), until it is killed,
 * reporting each apply and each checkpoint done on the fd WRITER_FD_ENV names. It is a fresh
 * exec of this binary, so nothing of the test process is shared. */
static int writer_child_main(const char *dir, int report_fd)
{
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.batch_entries_max = 4096;
    cfg.checkpoint_bytes = INDEX_CHECKPOINT_BYTES_MIN;
    struct index *g = NULL;
    if (index_open(&cfg, &g) != 0) {
        return 2;
    }
    uint64_t start = 0;
    size_t len = 0;
    if (index_cursor(g, &start, sizeof(start), &len) != 0) {
        return 3;
    }
    struct index_entry *batch = calloc(CRASH_BATCH, sizeof(*batch));
    uint64_t checkpoints = 0;
    for (uint64_t i = len == 0 ? 0 : start; batch != NULL; i++) {
        crash_batch(batch, i);
        uint64_t next = i + 1;
        if (index_apply(g, batch, CRASH_BATCH, &next, sizeof(next)) != 0) {
            return 1;
        }
        struct index_checkpoint_stats c;
        index_checkpoint_stats_get(g, &c);
        char report[2] = {WRITER_APPLIED, WRITER_CHECKPOINTED};
        size_t n = c.done > checkpoints ? 2 : 1;
        checkpoints = c.done;
        if (write(report_fd, report, n) != (ssize_t)n) {
            return 5;
        }
    }
    return 4;
}

/* Reads the writer's reports until `applies` applies (and, with want_checkpoint, a checkpoint
 * done) were reported; fails the test when the writer reports nothing for a minute. */
static void writer_wait(int fd, uint32_t applies, bool want_checkpoint)
{
    uint32_t seen = 0;
    bool checkpointed = false;
    while (seen < applies || (want_checkpoint && !checkpointed)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 60000), 1);
        char buf[64];
        ssize_t got = read(fd, buf, sizeof(buf));
        assert_true(got > 0);
        for (ssize_t i = 0; i < got; i++) {
            seen += buf[i] == WRITER_APPLIED;
            checkpointed |= buf[i] == WRITER_CHECKPOINTED;
        }
    }
}

static void test_index_kill9_keeps_cursor_and_its_entries(void **state)
{
    /* A writer process killed at random moments: every batch the cursor covers is complete,
     * nothing beyond it is visible, and the store keeps working from the cursor. With the WAL
     * off a kill loses the applies still in memtables; the cursor goes back with them. The
     * kills wait for the writer's state, not for time: the first round kills at a random
     * moment of its start (before any apply, possibly), the others after a random number of
     * applies plus up to 20 ms, and the last after a checkpoint too, so the loop cannot end
     * with nothing applied however slow the machine (ThreadSanitizer, a busy machine). */
    struct fixture *f = *state;
    uint64_t rng = test_seed();
    for (int round = 0; round < 6; round++) {
        uint64_t start = crash_cursor(f);
        index_close(f->g);
        f->g = NULL;
        int report[2];
        assert_int_equal(pipe(report), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            char fd[16];
            snprintf(fd, sizeof(fd), "%d", report[1]);
            close(report[0]);
            setenv(WRITER_DIR_ENV, f->index_dir, 1);
            setenv(WRITER_FD_ENV, fd, 1);
            execl("/proc/self/exe", "test_index", (char *)NULL);
            _exit(127);
        }
        close(report[1]);
        if (round == 0) {
            usleep((useconds_t)test_rng_below(&rng, 200000));
        } else {
            writer_wait(report[0], 1u + (uint32_t)test_rng_below(&rng, 8), round == 5);
            usleep((useconds_t)test_rng_below(&rng, 20000));
        }
        kill(child, SIGKILL);
        close(report[0]);
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(reopen(f), 0);
        uint64_t applied = crash_cursor(f);
        assert_true(applied >= start);
        for (uint64_t i = 0; i < applied; i++) {
            assert_int_equal(orders_of(f, (int64_t)i + 1), CRASH_BATCH);
        }
        assert_int_equal(orders_of(f, (int64_t)applied + 1), 0);
        assert_int_equal(orders_of(f, (int64_t)applied + 2), 0);
    }
    assert_true(crash_cursor(f) > 0); /* the last round's checkpoint holds a cursor */
}

static void test_index_query_rejects_bad_tokens_and_limits(void **state)
{
    /* Malformed tokens and limits outside 1..1000 are usage errors, not crashes. */
    struct fixture *f = *state;
    population_make(f, test_seed());
    apply_all(f, 0, 4096, "c");
    struct ds_id heavy;
    test_id_int(&heavy, 7);
    struct index_page page = {.entries = f->page};
    assert_int_equal(index_query(f->g, &heavy, 0, NULL, &page), -DS_EUSAGE);
    assert_int_equal(index_query(f->g, &heavy, 1001, NULL, &page), -DS_EUSAGE);
    assert_int_equal(index_query(f->g, &heavy, 2, NULL, &page), 0);
    assert_true(page.has_next);
    char good[INDEX_TOKEN_CHARS_MAX + 1];
    strcpy(good, page.next_token);
    char upper[INDEX_TOKEN_CHARS_MAX + 1];
    strcpy(upper, good);
    for (char *p = upper; *p; p++) {
        *p = (char)(*p >= 'a' && *p <= 'f' ? *p - 'a' + 'A' : *p);
    }
    char truncated[INDEX_TOKEN_CHARS_MAX + 1];
    strcpy(truncated, good);
    truncated[strlen(truncated) - 2] = '\0';
    char longer[2 * INDEX_TOKEN_CHARS_MAX];
    snprintf(longer, sizeof(longer), "%s00", good);
    char huge[INDEX_TOKEN_CHARS_MAX + 8];
    memset(huge, 'f', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    const char *bad[] = {"zz",
                         "abc",
                         "00",
                         upper,
                         truncated,
                         longer,
                         huge,
                         "fffffffffffffffffe0000000000000000",  /* order id above INT64_MAX */
                         "0000000000000000fe7ffffffffffffffe",  /* ts above DS_TS_MS_MAX */
                         "fffffffffffffffffc0000000000000000"}; /* unknown order-id tag */
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        page.count = 77;
        assert_int_equal(index_query(f->g, &heavy, 5, bad[i], &page), -DS_EUSAGE);
    }
    struct ds_id invalid;
    test_id_int(&invalid, 0);
    assert_int_equal(index_query(f->g, &invalid, 5, NULL, &page), -DS_EUSAGE);
    assert_int_equal(index_query(f->g, &heavy, 5, good, &page), 0);
    assert_int_equal(page.count, 5);
}

static void test_index_apply_rejects_invalid_entries_and_big_batches(void **state)
{
    /* An entry whose day disagrees with its ts, or a bad id, or too many entries: refused,
     * and nothing of the batch (nor its cursor) is applied. */
    struct fixture *f = *state;
    struct ds_id customer, order;
    test_id_int(&customer, 5);
    test_id_int(&order, 1);
    struct index_entry e[2];
    entry_make(&e[0], &customer, TS0, &order, "paid", 1);
    entry_make(&e[1], &customer, TS0, &order, "paid", 1);
    e[1].day += 1;
    assert_int_equal(index_apply(f->g, e, 2, "x", 1), -DS_EUSAGE);
    e[1] = e[0];
    e[1].order_id.value = 0;
    assert_int_equal(index_apply(f->g, e, 2, "x", 1), -DS_EUSAGE);
    assert_int_equal(index_apply(f->g, f->entries, 4097, "x", 1), -DS_ELIMIT);
    static const char big[1] = {0}; /* never read: the length is refused first */
    assert_int_equal(index_apply(f->g, e, 1, big, (size_t)INDEX_CURSOR_BYTES_MAX + 1), -DS_ELIMIT);
    assert_int_equal(orders_of(f, 5), 0);
    size_t len = 9;
    char buf[8];
    assert_int_equal(index_cursor(f->g, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 0);
}

static void test_index_second_writer_is_refused(void **state)
{
    /* One writer per directory. */
    struct fixture *f = *state;
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = f->index_dir;
    struct index *other = NULL;
    assert_int_equal(index_open(&cfg, &other), -DS_ELOCKED);
    assert_null(other);
    cfg.table_slots_log2 = 0;
    assert_int_equal(index_open(&cfg, &other), -DS_EUSAGE);
}

/* The concurrent query test: applies of one customer's batches, CONCURRENT_BATCH orders each
 * with ts rising across batches, while another thread reads that customer's newest page. */
#define CONCURRENT_APPLIES 60u
#define CONCURRENT_BATCH 200u

struct concurrent_reader {
    struct index *g;
    atomic_bool done;
    atomic_uint queries;
    atomic_bool ok;
    struct index_entry page[INDEX_PAGE_LIMIT_MAX];
};

static void *concurrent_reader_main(void *arg)
{
    struct concurrent_reader *r = arg;
    struct ds_id customer;
    test_id_int(&customer, 5);
    int64_t last_newest = 0;
    while (!atomic_load(&r->done) && atomic_load(&r->ok)) {
        struct index_page page = {.entries = r->page};
        int rc = index_query(r->g, &customer, INDEX_PAGE_LIMIT_MAX, NULL, &page);
        atomic_fetch_add(&r->queries, 1);
        /* All of an apply or none of it: a whole number of batches, newest first, and never
         * older than what an earlier query saw. */
        bool whole = page.count % CONCURRENT_BATCH == 0 || page.count == INDEX_PAGE_LIMIT_MAX;
        bool sorted = true;
        for (uint32_t i = 1; i < page.count; i++) {
            sorted = sorted && page.entries[i - 1].ts_ms >= page.entries[i].ts_ms;
        }
        int64_t newest = page.count > 0 ? page.entries[0].ts_ms : 0;
        atomic_store(&r->ok, rc == 0 && whole && sorted && newest >= last_newest);
        last_newest = newest;
    }
    return NULL;
}

static void test_index_queries_while_applying_see_whole_applies(void **state)
{
    /* Queries on the writer's handle run on other threads while index_apply runs (the HTTP
     * workers of `run --http`): every answer holds whole applies, sorted, never going back. */
    struct fixture *f = *state;
    struct concurrent_reader *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->g = f->g;
    atomic_init(&r->ok, true);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, concurrent_reader_main, r), 0);
    struct index_entry batch[CONCURRENT_BATCH];
    struct ds_id customer;
    test_id_int(&customer, 5);
    for (uint64_t a = 0; a < CONCURRENT_APPLIES; a++) {
        for (uint32_t j = 0; j < CONCURRENT_BATCH; j++) {
            struct ds_id order;
            test_id_int(&order, (int64_t)(a * CONCURRENT_BATCH + j + 1));
            entry_make(&batch[j], &customer, TS0 + (int64_t)(a * CONCURRENT_BATCH + j), &order,
                       "paid", 1);
        }
        uint64_t cursor = a + 1;
        unsigned seen = atomic_load(&r->queries);
        assert_int_equal(index_apply(f->g, batch, CONCURRENT_BATCH, &cursor, sizeof(cursor)), 0);
        while (atomic_load(&r->queries) < seen + 2 && atomic_load(&r->ok)) {
            sched_yield(); /* let queries overlap the next apply too, not only follow it */
        }
    }
    atomic_store(&r->done, true);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_true(atomic_load(&r->ok));
    assert_true(atomic_load(&r->queries) >= 2 * CONCURRENT_APPLIES);
    free(r);
}

static void test_index_reader_sees_flushed_applies_after_refresh(void **state)
{
    /* A reader sees what the writer had applied when it opened (from the checkpoint the
     * writer's close wrote, then the log), and what was applied since after a refresh. */
    struct fixture *f = *state;
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = f->index_dir;
    struct index_entry batch[CRASH_BATCH];
    crash_batch(batch, 0);
    uint64_t one = 1;
    assert_int_equal(index_apply(f->g, batch, CRASH_BATCH, &one, sizeof(one)), 0);
    assert_int_equal(reopen(f), 0); /* closing writes a checkpoint */
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&cfg, &reader), 0);
    struct ds_id c1, c2;
    test_id_int(&c1, 1);
    test_id_int(&c2, 2);
    struct index_page page = {.entries = f->page};
    assert_int_equal(index_query(reader, &c1, 1000, NULL, &page), 0);
    assert_int_equal(page.count, CRASH_BATCH);
    crash_batch(batch, 1);
    uint64_t two = 2;
    assert_int_equal(index_apply(f->g, batch, CRASH_BATCH, &two, sizeof(two)), 0);
    assert_int_equal(index_refresh(reader), 0);
    assert_int_equal(index_query(reader, &c2, 1000, NULL, &page), 0);
    assert_int_equal(page.count, CRASH_BATCH); /* past the checkpoint: read from the log */
    assert_int_equal(index_query(f->g, &c2, 1000, NULL, &page), 0);
    assert_int_equal(page.count, CRASH_BATCH); /* the writer's handle sees it at once */
    index_close(f->g);
    f->g = NULL;
    assert_int_equal(index_refresh(reader), 0);
    assert_int_equal(index_query(reader, &c2, 1000, NULL, &page), 0);
    assert_int_equal(page.count, CRASH_BATCH);
    uint64_t cursor = 0;
    size_t len = 0;
    assert_int_equal(index_cursor(reader, &cursor, sizeof(cursor), &len), 0);
    assert_int_equal(cursor, 2);
    index_close(reader);
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/none", f->dir);
    cfg.dir = missing;
    assert_int_equal(index_open_reader(&cfg, &reader), -ENOENT);
}

static void test_index_config_rejects_tables_outside_limits(void **state)
{
    /* table_slots_log2 and checkpoint_bytes have hard limits, and the memory bound grows with
     * the table. */
    (void)state;
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = "/nonexistent/gsi";
    assert_int_equal(index_config_check(&cfg), 0);
    uint64_t bound = index_memory_bytes(&cfg);
    assert_true(bound > (uint64_t)INDEX_SLOT_BYTES << cfg.table_slots_log2);
    cfg.table_slots_log2++;
    assert_true(index_memory_bytes(&cfg) >=
                bound + ((uint64_t)INDEX_SLOT_BYTES << (cfg.table_slots_log2 - 1)));
    cfg.table_slots_log2 = INDEX_TABLE_SLOTS_LOG2_MIN - 1;
    assert_int_equal(index_config_check(&cfg), -DS_EUSAGE);
    cfg.table_slots_log2 = INDEX_TABLE_SLOTS_LOG2_MAX + 1;
    assert_int_equal(index_config_check(&cfg), -DS_EUSAGE);
    struct index *g = NULL;
    assert_int_equal(index_open(&cfg, &g), -DS_EUSAGE);
    assert_null(g);
    index_config_defaults(&cfg);
    cfg.dir = "/nonexistent/gsi";
    cfg.checkpoint_bytes = INDEX_CHECKPOINT_BYTES_MIN - 1;
    assert_int_equal(index_config_check(&cfg), -DS_EUSAGE);
}

/* A key's value (status, zigzag amount) round-trips at the amount's extremes, and its varint
 * follows common's one rule: a 10th byte carrying bits past 64, a truncated varint and bytes
 * after the value are corrupt, not a wrong amount. */
static void test_index_key_value_varint_follows_the_common_rule(void **state)
{
    (void)state;
    const int64_t amounts[] = {0, -1, 1, 12345678, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof(amounts) / sizeof(amounts[0]); i++) {
        struct index_entry e = {0};
        e.status_len = 4;
        memcpy(e.status, "paid", 4);
        e.amount_units = amounts[i];
        uint8_t buf[INDEX_VALUE_BYTES_MAX];
        size_t n = index_key_value_encode(&e, buf);
        struct index_entry back = {0};
        assert_int_equal(index_key_value_decode(buf, n, &back), 0);
        assert_true(back.amount_units == amounts[i]);
        assert_int_equal(back.status_len, 4);
        assert_memory_equal(back.status, "paid", 4);
        assert_int_equal(index_key_value_decode(buf, n - 1, &back), -DS_ECORRUPT);
    }
    /* Empty status, then ten varint bytes: 0x01 as the 10th fits in 64 bits, 0x02 does not. */
    uint8_t raw[12] = {0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00};
    struct index_entry e = {0};
    assert_int_equal(index_key_value_decode(raw, 11, &e), 0);
    assert_true(e.amount_units == INT64_MIN);
    assert_int_equal(index_key_value_decode(raw, 12, &e), -DS_ECORRUPT);
    raw[10] = 0x02;
    assert_int_equal(index_key_value_decode(raw, 11, &e), -DS_ECORRUPT);
    raw[10] = 0x81;
    assert_int_equal(index_key_value_decode(raw, 12, &e), -DS_ECORRUPT);
}

int main(void)
{
    const char *writer_dir = getenv(WRITER_DIR_ENV);
    const char *writer_fd = getenv(WRITER_FD_ENV);
    if (writer_dir != NULL && writer_fd != NULL) {
        return writer_child_main(writer_dir, atoi(writer_fd));
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_key_value_varint_follows_the_common_rule),
        cmocka_unit_test_setup_teardown(test_index_query_equals_truth_all_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_query_equals_truth_across_checkpoints, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_pages_stable_while_newer_entries_arrive, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_apply_twice_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_cursor_and_entries_survive_reopen, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_kill9_keeps_cursor_and_its_entries, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_query_rejects_bad_tokens_and_limits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_apply_rejects_invalid_entries_and_big_batches,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_second_writer_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_queries_while_applying_see_whole_applies, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_damaged_run_is_an_error_not_a_wrong_answer,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_reader_sees_flushed_applies_after_refresh, setup,
                                        teardown),
        cmocka_unit_test(test_index_config_rejects_tables_outside_limits),
        cmocka_unit_test_setup_teardown(test_index_check_clean_index_reports_what_it_holds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_check_beside_a_live_writer_is_clean, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_index_check_flipped_record_before_intact_ones_is_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_check_flipped_record_inside_the_checkpoint_is_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_compacted_log_checks_clean_and_every_flipped_byte_is_damage, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_index_check_flipped_table_byte_is_damage, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_check_cut_table_is_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_check_bad_format_is_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_check_cut_log_inside_the_checkpoint_is_damage,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_check_torn_log_tail_is_clean, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
