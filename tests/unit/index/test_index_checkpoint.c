/*
 * Unit tests of index/checkpoint.c's checkpoints taken while applies go on: the applying
 * thread writes the table between two applies and a thread of the writer's syncs the log, the
 * table and renames it. A checkpoint begun while applies continue is still the table of exactly
 * the cursor record it names: index_check (which rebuilds the table from the log up to that
 * record and compares) finds every one clean while the writer runs, and a copy of the
 * checkpoint with only the log it covers opens as a reader that answers exactly the applies up
 * to its cursor. Closing waits for a checkpoint in flight and writes the last one. A checkpoint
 * that cannot be written (its temp file, or the rename) is logged and retried while applies go
 * on. The inline mode (checkpoint_inline, kept to compare) finishes each
 * checkpoint inside the apply and gives the same index. The kill -9 loops of test_index and
 * test_index_oracle run writers with this thread on (the default).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

#define TS0 1768953600000LL /* 2026-01-21T00:00:00Z */
/* Entries per apply and customers they cycle through: ~150 KiB of log per apply, so the
 * shortest checkpoint interval (1 MiB) passes every ~7 applies. */
#define BATCH 4096u
#define CUSTOMERS 997u
#define SLOTS_LOG2 12u
#define COPY_BYTES_MAX (64u << 20)

struct fixture {
    char dir[64];
    char index_dir[128];
    char copy_dir[128];
    struct index *g;
    struct index_entry *batch;
    struct index_entry page[INDEX_PAGE_LIMIT_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    snprintf(f->index_dir, sizeof(f->index_dir), "%s/gsi", f->dir);
    snprintf(f->copy_dir, sizeof(f->copy_dir), "%s/copy", f->dir);
    f->batch = calloc(BATCH, sizeof(*f->batch));
    assert_non_null(f->batch);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    index_close(f->g);
    test_tempdir_remove(f->dir);
    free(f->batch);
    free(f);
    return 0;
}

static void writer_open(struct fixture *f, bool inline_sync)
{
    struct index_config cfg;
    index_config_defaults(&cfg);
    cfg.dir = f->index_dir;
    cfg.table_slots_log2 = SLOTS_LOG2;
    cfg.batch_entries_max = BATCH;
    cfg.checkpoint_bytes = INDEX_CHECKPOINT_BYTES_MIN;
    cfg.checkpoint_inline = inline_sync;
    assert_int_equal(index_open(&cfg, &f->g), 0);
}

/* Order o (1-based) belongs to customer 1 + (o - 1) % CUSTOMERS, at TS0 + o ms. Apply a (0-based)
 * holds orders a * BATCH + 1 .. (a + 1) * BATCH; its cursor is a + 1, the applies it covers. */
static void apply_number(struct fixture *f, uint64_t a)
{
    for (uint32_t j = 0; j < BATCH; j++) {
        int64_t order = (int64_t)(a * BATCH + j + 1);
        struct index_entry *e = &f->batch[j];
        memset(e, 0, sizeof(*e));
        test_id_int(&e->customer_id, 1 + (order - 1) % CUSTOMERS);
        test_id_int(&e->order_id, order);
        e->ts_ms = TS0 + order;
        e->day = ds_day_from_ms(e->ts_ms);
        e->status_len = 4;
        memcpy(e->status, "paid", 4);
        e->amount_units = order;
    }
    uint64_t cursor = a + 1;
    assert_int_equal(index_apply(f->g, f->batch, BATCH, &cursor, sizeof(cursor)), 0);
}

/* Customer c's orders in the first `applies` applies: how many, and the newest. */
static void truth_of(uint64_t applies, int64_t c, uint64_t *count, int64_t *newest)
{
    uint64_t orders = applies * BATCH;
    *count = orders >= (uint64_t)c ? (orders - (uint64_t)c) / CUSTOMERS + 1 : 0;
    *newest = *count > 0 ? c + (int64_t)(*count - 1) * CUSTOMERS : 0;
}

/* Every customer's newest page on g equals the first `applies` applies, and the cursor is
 * theirs. */
static void assert_index_is(struct fixture *f, struct index *g, uint64_t applies)
{
    uint64_t cursor = 0;
    size_t len = 0;
    assert_int_equal(index_cursor(g, &cursor, sizeof(cursor), &len), 0);
    assert_int_equal(len, applies > 0 ? sizeof(cursor) : 0);
    assert_int_equal(cursor, applies);
    for (int64_t c = 1; c <= (int64_t)CUSTOMERS; c += 37) {
        uint64_t count = 0;
        int64_t newest = 0;
        truth_of(applies, c, &count, &newest);
        struct ds_id customer;
        test_id_int(&customer, c);
        struct index_page page = {.entries = f->page};
        assert_int_equal(index_query(g, &customer, 3, NULL, &page), 0);
        assert_int_equal(page.count, count < 3 ? count : 3);
        assert_int_equal(page.has_next, count > 3);
        if (count > 0) {
            assert_int_equal(page.entries[0].order_id.value, newest);
            assert_int_equal(page.entries[0].ts_ms, TS0 + newest);
        }
    }
}

static void file_copy(const char *from, const char *to, uint64_t bytes_max)
{
    int in = open(from, O_RDONLY);
    assert_true(in >= 0);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(out >= 0);
    char *buf = malloc(1u << 20);
    assert_non_null(buf);
    for (uint64_t done = 0; done < bytes_max;) {
        size_t want = bytes_max - done < (1u << 20) ? (size_t)(bytes_max - done) : (1u << 20);
        ssize_t n = read(in, buf, want);
        assert_true(n >= 0);
        if (n == 0) {
            break;
        }
        assert_int_equal(write(out, buf, (size_t)n), n);
        done += (uint64_t)n;
    }
    free(buf);
    close(in);
    close(out);
}

/* Copies DIR/FORMAT, DIR/table and the log prefix the table covers into copy_dir, and returns
 * what index_check says that prefix covers (the table and log of one moment: the table is read
 * first, the log only grows). */
static uint64_t checkpoint_copy(struct fixture *f)
{
    char from[256];
    char to[256];
    test_tempdir_remove(f->copy_dir);
    assert_int_equal(mkdir(f->copy_dir, 0755), 0);
    snprintf(from, sizeof(from), "%s/FORMAT", f->index_dir);
    snprintf(to, sizeof(to), "%s/FORMAT", f->copy_dir);
    file_copy(from, to, COPY_BYTES_MAX);
    snprintf(from, sizeof(from), "%s/table", f->index_dir);
    snprintf(to, sizeof(to), "%s/table", f->copy_dir);
    file_copy(from, to, COPY_BYTES_MAX);
    uint8_t header[64];
    int fd = open(to, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, header, sizeof(header), 0), (ssize_t)sizeof(header));
    close(fd);
    uint64_t covers = 0;
    memcpy(&covers, header + 32, sizeof(covers)); /* store.c: [32] u64 the log end it covers */
    snprintf(from, sizeof(from), "%s/log", f->index_dir);
    snprintf(to, sizeof(to), "%s/log", f->copy_dir);
    file_copy(from, to, covers);
    return covers;
}

static void test_index_checkpoint_begun_during_applies_is_exactly_its_cursor(void **state)
{
    /* Applies go on while the thread syncs and renames: every checkpoint on disk is the table
     * of the cursor record it names (index_check rebuilds that table from the log and compares),
     * and its copy with only the log it covers answers exactly the applies up to its cursor. */
    struct fixture *f = *state;
    writer_open(f, false);
    uint64_t in_flight_seen = 0;
    uint64_t copies = 0;
    uint64_t checks = 0;
    uint64_t covers_last = 0;
    for (uint64_t a = 0; a < 240; a++) {
        apply_number(f, a);
        struct index_checkpoint_stats s;
        index_checkpoint_stats_get(f->g, &s);
        assert_int_equal(s.failed, 0);
        in_flight_seen += s.started > s.done ? 1u : 0u;
        if (a % 8 != 7) {
            continue; /* applies back to back most of the time, so checkpoints overlap them */
        }
        struct index_check_report report;
        assert_int_equal(index_check(f->index_dir, NULL, &report), 0);
        assert_false(report.damaged);
        checks++;
        if (!report.table_present) {
            continue;
        }
        assert_true(report.table_covers_bytes >= covers_last);
        covers_last = report.table_covers_bytes;
        if (a % 16 == 15) {
            uint64_t covers = checkpoint_copy(f);
            struct index_config cfg;
            index_config_defaults(&cfg);
            cfg.dir = f->copy_dir;
            struct index *reader = NULL;
            assert_int_equal(index_open_reader(&cfg, &reader), 0);
            uint64_t applies = 0;
            size_t len = 0;
            assert_int_equal(index_cursor(reader, &applies, sizeof(applies), &len), 0);
            assert_true(applies >= 1 && applies <= a + 1);
            assert_index_is(f, reader, applies);
            index_close(reader);
            assert_int_equal(index_check(f->copy_dir, NULL, &report), 0);
            assert_false(report.damaged);
            assert_int_equal(report.table_covers_bytes, covers);
            assert_int_equal(report.log_bytes, covers);
            copies++;
        }
    }
    struct index_checkpoint_stats s;
    index_checkpoint_stats_get(f->g, &s);
    assert_true(s.done >= 20); /* the loop did take checkpoints */
    assert_true(checks >= 25);
    assert_true(in_flight_seen > 0); /* and applies returned while one was in flight */
    assert_true(copies >= 10);
    assert_index_is(f, f->g, 240);
}

static void test_index_checkpoint_close_waits_and_covers_the_whole_log(void **state)
{
    /* Closing right after an apply that began a checkpoint waits for it and writes the last
     * one: the table covers the whole log, no temp file is left, and reopening reads no log. */
    struct fixture *f = *state;
    writer_open(f, false);
    struct index_checkpoint_stats s;
    uint64_t a = 0;
    do {
        apply_number(f, a++);
        index_checkpoint_stats_get(f->g, &s);
    } while (s.started == 0);
    index_close(f->g);
    f->g = NULL;
    struct index_check_report report;
    assert_int_equal(index_check(f->index_dir, NULL, &report), 0);
    assert_false(report.damaged);
    assert_true(report.table_present);
    assert_int_equal(report.table_covers_bytes, report.log_bytes);
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s/table.tmp", f->index_dir);
    assert_int_equal(access(tmp, F_OK), -1);
    writer_open(f, false);
    assert_index_is(f, f->g, a);
}

/* Applies from *a on (a few ms apart) until the checkpoint figure `field` passes `above`, for
 * at most 20 s; returns the stats. */
static struct index_checkpoint_stats apply_until(struct fixture *f, uint64_t *a, size_t field,
                                                 uint64_t above)
{
    struct index_checkpoint_stats s;
    for (int tries = 0; tries < 4000; tries++) {
        apply_number(f, (*a)++);
        index_checkpoint_stats_get(f->g, &s);
        uint64_t v = 0;
        memcpy(&v, (const char *)&s + field, sizeof(v));
        if (v > above) {
            return s;
        }
        usleep(5000);
    }
    fail_msg("the checkpoint figure at offset %zu stayed at %llu", field,
             (unsigned long long)above);
    return s;
}

static void test_index_checkpoint_failures_are_retried_while_applies_go_on(void **state)
{
    /* A temp file that cannot be created (a directory in its place) and a rename that cannot
     * happen (a non-empty directory named table) fail on the checkpoint thread: both are
     * counted and logged, every apply still succeeds, and once the obstacle is gone a later
     * checkpoint is written. */
    struct fixture *f = *state;
    writer_open(f, false);
    char tmp[256];
    char table[256];
    char inside[300];
    snprintf(tmp, sizeof(tmp), "%s/table.tmp", f->index_dir);
    snprintf(table, sizeof(table), "%s/table", f->index_dir);
    snprintf(inside, sizeof(inside), "%s/x", table);
    assert_int_equal(mkdir(tmp, 0755), 0);
    uint64_t a = 0;
    struct index_checkpoint_stats s =
        apply_until(f, &a, offsetof(struct index_checkpoint_stats, failed), 0);
    assert_int_equal(s.done, 0);
    /* Swap obstacles between applies with no checkpoint in flight: the thread's next one then
     * meets the directory named table at its rename. */
    while (s.started > s.failed) {
        s = apply_until(f, &a, offsetof(struct index_checkpoint_stats, failed), s.failed);
    }
    assert_int_equal(rmdir(tmp), 0);
    assert_int_equal(mkdir(table, 0755), 0);
    assert_int_equal(mkdir(inside, 0755), 0);
    s = apply_until(f, &a, offsetof(struct index_checkpoint_stats, failed), s.failed);
    assert_int_equal(s.done, 0);
    assert_int_equal(access(tmp, F_OK), -1); /* the failed rename's temp file was removed */
    while (s.started > s.failed) {
        s = apply_until(f, &a, offsetof(struct index_checkpoint_stats, failed), s.failed);
    }
    assert_int_equal(rmdir(inside), 0);
    assert_int_equal(rmdir(table), 0);
    s = apply_until(f, &a, offsetof(struct index_checkpoint_stats, done), 0);
    assert_index_is(f, f->g, a);
    index_close(f->g);
    f->g = NULL;
    struct index_check_report report;
    assert_int_equal(index_check(f->index_dir, NULL, &report), 0);
    assert_false(report.damaged);
    assert_int_equal(report.table_covers_bytes, report.log_bytes);
    writer_open(f, false);
    assert_index_is(f, f->g, a);
}

static void test_index_checkpoint_inline_finishes_inside_the_apply(void **state)
{
    /* checkpoint_inline (kept to compare): the apply that passes the interval returns with its
     * checkpoint renamed into place, and the index is the same as with the thread. */
    struct fixture *f = *state;
    writer_open(f, true);
    struct index_checkpoint_stats s;
    for (uint64_t a = 0; a < 40; a++) {
        apply_number(f, a);
        index_checkpoint_stats_get(f->g, &s);
        assert_int_equal(s.done, s.started);
    }
    assert_true(s.done >= 3);
    assert_index_is(f, f->g, 40);
    index_close(f->g);
    f->g = NULL;
    writer_open(f, false);
    assert_index_is(f, f->g, 40);
}

static void test_index_checkpoint_thread_resumes_after_a_compaction(void **state)
{
    /* index_compact stops the checkpoint thread (no checkpoint of the old log after the swap);
     * the applies after it start the thread again and its checkpoints complete: a thread that
     * kept its stop flag exited at once, its checkpoint never finished, and close aborted. */
    struct fixture *f = *state;
    writer_open(f, false);
    uint64_t a = 0;
    struct index_checkpoint_stats s =
        apply_until(f, &a, offsetof(struct index_checkpoint_stats, done), 0);
    struct index_compact_stats compacted;
    assert_int_equal(index_compact(f->g, &compacted), 0);
    assert_true(compacted.bytes_after < compacted.bytes_before);
    assert_index_is(f, f->g, a);
    index_checkpoint_stats_get(f->g, &s);
    uint64_t before = s.done;
    for (uint64_t k = 0; k < 3; k++) { /* several: the first could slip in before it exited */
        s = apply_until(f, &a, offsetof(struct index_checkpoint_stats, done), before + k);
    }
    assert_int_equal(s.failed, 0);
    index_close(f->g);
    f->g = NULL;
    writer_open(f, false);
    assert_index_is(f, f->g, a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_index_checkpoint_begun_during_applies_is_exactly_its_cursor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_checkpoint_close_waits_and_covers_the_whole_log,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_checkpoint_failures_are_retried_while_applies_go_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_checkpoint_thread_resumes_after_a_compaction,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_checkpoint_inline_finishes_inside_the_apply,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
