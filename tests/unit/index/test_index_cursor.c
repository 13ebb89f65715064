/*
 * Unit tests of the index's cursor records (index/records.c, index/apply.c, index/checkpoint.c):
 * an apply appends only the bytes of the cursor that changed, whatever its length; a cursor far
 * above the whole-record limit (pieces) comes back equal on the writer, on a reader opened from
 * DIR/table and from the whole log, after a refresh, after compaction and in index_check; a
 * log cut inside the pieces of an apply reopens as the apply before; a log of whole-cursor
 * records (the format before delta records) opens and takes delta records after them; and
 * index_check finds a DIR/table cursor that differs from the one the log builds.
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
#include "index/index_private.h"
#include "tests/support/tempdir.h"

#define TS0 1768953600000LL /* 2026-01-21T00:00:00Z */
/* Four times a whole cursor record's limit: its first apply and compaction write pieces. */
#define BIG_BYTES (4u * INDEX_CURSOR_FULL_BYTES_MAX)

struct fixture {
    char dir[64];
    char index_dir[128];
    struct index *g;
    uint8_t *cursor; /* the cursor last applied */
    size_t cursor_len;
    uint8_t *got;
    uint64_t order;
};

static void config_make(const struct fixture *f, struct index_config *cfg)
{
    index_config_defaults(cfg);
    cfg->dir = f->index_dir;
    cfg->batch_entries_max = 64;
    cfg->table_slots_log2 = 10;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(test_tempdir_make(f->dir, sizeof(f->dir)), 0);
    snprintf(f->index_dir, sizeof(f->index_dir), "%s/gsi", f->dir);
    f->cursor = calloc(1, BIG_BYTES + 4096);
    f->got = malloc(BIG_BYTES + 4096);
    assert_non_null(f->cursor);
    assert_non_null(f->got);
    struct index_config cfg;
    config_make(f, &cfg);
    assert_int_equal(index_open(&cfg, &f->g), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    index_close(f->g);
    test_tempdir_remove(f->dir);
    free(f->cursor);
    free(f->got);
    free(f);
    return 0;
}

static uint64_t log_bytes(const struct fixture *f)
{
    char path[192];
    snprintf(path, sizeof(path), "%s/log", f->index_dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* One apply of one entry with f->cursor[0..len); returns the bytes it appended to the log. */
static uint64_t apply(struct fixture *f, size_t len)
{
    struct index_entry e;
    memset(&e, 0, sizeof(e));
    e.customer_id.value = 7;
    e.order_id.value = (int64_t)++f->order;
    e.ts_ms = TS0 + (int64_t)f->order;
    e.day = ds_day_from_ms(e.ts_ms);
    uint64_t before = log_bytes(f);
    f->cursor_len = len;
    assert_int_equal(index_apply(f->g, &e, 1, f->cursor, len), 0);
    return log_bytes(f) - before;
}

static void cursor_assert(struct fixture *f, struct index *g)
{
    size_t len = 0;
    assert_int_equal(index_cursor(g, f->got, 16, &len), f->cursor_len > 16 ? -ENOSPC : 0);
    assert_int_equal(len, f->cursor_len);
    assert_int_equal(index_cursor(g, f->got, BIG_BYTES + 4096, &len), 0);
    assert_int_equal(len, f->cursor_len);
    assert_memory_equal(f->got, f->cursor, len);
}

/* The writer, a new reader, a reopened writer and index_check all hold f->cursor. */
static void everyone_agrees(struct fixture *f)
{
    cursor_assert(f, f->g);
    struct index_config cfg;
    config_make(f, &cfg);
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&cfg, &reader), 0);
    cursor_assert(f, reader);
    index_close(reader);
    uint8_t *checked = NULL;
    struct index_check_report report;
    assert_int_equal(index_check(f->index_dir, &checked, &report), 0);
    if (report.damaged) {
        fail_msg("index_check: %s", report.reason);
    }
    assert_int_equal(report.cursor_len, f->cursor_len);
    assert_memory_equal(checked, f->cursor, f->cursor_len);
    free(checked);
}

static void reopen(struct fixture *f)
{
    index_close(f->g);
    f->g = NULL;
    struct index_config cfg;
    config_make(f, &cfg);
    assert_int_equal(index_open(&cfg, &f->g), 0);
}

static void remove_table(struct fixture *f)
{
    char path[192];
    snprintf(path, sizeof(path), "%s/table", f->index_dir);
    assert_true(unlink(path) == 0 || errno == ENOENT);
}

/* A cursor shaped like the builder's: a header, then 20 bytes per partition, each position a
 * counter that moves when the partition takes events. */
static void positions_make(struct fixture *f, uint32_t count, uint64_t seq)
{
    memcpy(f->cursor, "GSC1", 4);
    memcpy(f->cursor + 4, &seq, 8);
    memcpy(f->cursor + 12, &count, 4);
    for (uint32_t i = 0; i < count; i++) {
        uint8_t *p = f->cursor + 16 + (size_t)i * 20;
        uint32_t day = 20000 + i / 64;
        uint32_t shard = i % 64;
        memcpy(p, &day, 4);
        memcpy(p + 4, &shard, 4);
    }
}

static void position_move(struct fixture *f, uint32_t i, uint64_t offset)
{
    memcpy(f->cursor + 16 + (size_t)i * 20 + 12, &offset, 8);
}

static void test_cursor_apply_writes_only_what_changed(void **state)
{
    /* Intent: with 90 days x 64 shards followed (115 KB of cursor), an apply that moves four
     * positions and the sequence appends its run and a cursor record of a few dozen bytes, as
     * with 4 partitions followed; a new day's partitions (an insertion) and the days retention
     * drops (a deletion at the front) cost the bytes of what changed, not the cursor. */
    struct fixture *f = *state;
    positions_make(f, 4, 1);
    (void)apply(f, 16 + 4 * 20);
    positions_make(f, 4, 2);
    position_move(f, 1, 123456);
    uint64_t small = apply(f, 16 + 4 * 20);
    size_t big = 16 + 5760 * 20;
    positions_make(f, 5760, 3);
    (void)apply(f, big);
    uint64_t offset = 1000;
    uint64_t most = 0;
    for (uint64_t seq = 4; seq < 40; seq++) {
        memcpy(f->cursor + 4, &seq, 8);
        for (uint32_t k = 0; k < 4; k++) {
            position_move(f, 5760 - 64 + (uint32_t)((seq + k) % 64), offset += 977);
        }
        uint64_t bytes = apply(f, big);
        most = bytes > most ? bytes : most;
    }
    /* a run of one entry is ~100 bytes; the cursor's change ~60 */
    assert_true(small < 200);
    assert_true(most < 200);
    /* a new day of 64 partitions at the end */
    memmove(f->cursor + big, f->cursor + big - 64 * 20, 64 * 20);
    for (uint32_t s = 0; s < 64; s++) {
        uint32_t day = 20000 + 90;
        memcpy(f->cursor + big + s * 20, &day, 4);
        memset(f->cursor + big + s * 20 + 8, 0, 12);
    }
    uint32_t count = 5760 + 64;
    memcpy(f->cursor + 12, &count, 4);
    uint64_t grown = apply(f, big + 64 * 20);
    assert_true(grown < 200 + 64 * 20);
    /* the first day dropped */
    count = 5760;
    memmove(f->cursor + 16, f->cursor + 16 + 64 * 20, (size_t)count * 20);
    memcpy(f->cursor + 12, &count, 4);
    uint64_t dropped = apply(f, big);
    assert_true(dropped < 200);
    everyone_agrees(f);
    reopen(f);
    everyone_agrees(f);
}

static void test_cursor_far_above_a_record_in_pieces_comes_back_equal(void **state)
{
    /* Intent: a cursor of 1 MiB (four times the largest whole-cursor record) is written in
     * pieces and reads back equal everywhere: DIR/table's copy, the whole log, after a reader's
     * refresh, after compaction (its RESET record, in pieces too). */
    struct fixture *f = *state;
    for (size_t i = 0; i < BIG_BYTES; i++) {
        f->cursor[i] = (uint8_t)(i * 2654435761u >> 13);
    }
    struct index_config cfg;
    config_make(f, &cfg);
    (void)apply(f, 100);
    struct index *reader = NULL;
    assert_int_equal(index_open_reader(&cfg, &reader), 0);
    uint64_t bytes = apply(f, BIG_BYTES);
    assert_true(bytes > BIG_BYTES / 2); /* the new bytes, all but its zeros */
    everyone_agrees(f);
    assert_int_equal(index_refresh(reader), 0);
    cursor_assert(f, reader);
    f->cursor[BIG_BYTES / 2] ^= 0x5a;
    assert_true(apply(f, BIG_BYTES) < 200);
    assert_int_equal(index_refresh(reader), 0);
    cursor_assert(f, reader);
    index_close(reader);
    reopen(f); /* from DIR/table's cursor */
    everyone_agrees(f);
    remove_table(f);
    reopen(f); /* from the whole log */
    everyone_agrees(f);
    assert_int_equal(index_compact(f->g, NULL), 0);
    everyone_agrees(f);
    reopen(f);
    everyone_agrees(f);
    f->cursor[7] ^= 1;
    assert_true(apply(f, BIG_BYTES) < 200);
    reopen(f);
    everyone_agrees(f);
}

static void test_cursor_log_cut_inside_pieces_reopens_as_the_apply_before(void **state)
{
    /* Intent: an apply whose cursor change is written in pieces is whole or absent after a cut
     * anywhere inside its pieces: the writer reopens with the cursor before it, and applies on
     * from there. */
    struct fixture *f = *state;
    memset(f->cursor, 0x11, 64);
    (void)apply(f, 64);
    uint64_t before = log_bytes(f);
    uint8_t *kept = malloc(64);
    assert_non_null(kept);
    memcpy(kept, f->cursor, 64);
    for (size_t i = 0; i < BIG_BYTES; i++) {
        f->cursor[i] = (uint8_t)(i * 7u + 1u);
    }
    uint64_t bytes = apply(f, BIG_BYTES);
    index_close(f->g);
    f->g = NULL;
    char path[192];
    snprintf(path, sizeof(path), "%s/table", f->index_dir);
    (void)unlink(path); /* the close's checkpoint covers the whole apply */
    snprintf(path, sizeof(path), "%s/log", f->index_dir);
    assert_int_equal(truncate(path, (off_t)(before + bytes * 2 / 3)), 0);
    reopen(f);
    memcpy(f->cursor, kept, 64);
    f->cursor_len = 64;
    everyone_agrees(f);
    assert_int_equal(log_bytes(f), before);
    f->cursor[3] = 0x22;
    (void)apply(f, 64);
    reopen(f);
    everyone_agrees(f);
    free(kept);
}

/* Appends a whole-cursor record (type 2, the format before delta records) to DIR/log. */
static void old_record_append(struct fixture *f, uint64_t number, const char *cursor)
{
    uint8_t r[INDEX_CURSOR_HEADER_BYTES + 64] = {0};
    size_t n = strlen(cursor);
    r[8] = INDEX_RECORD_CURSOR;
    ds_put_le32(r + 12, (uint32_t)n);
    ds_put_le64(r + 16, number);
    memcpy(r + INDEX_CURSOR_HEADER_BYTES, cursor, n);
    size_t len = INDEX_CURSOR_HEADER_BYTES + n;
    ds_put_le32(r + 4, (uint32_t)len);
    ds_put_le32(r, ds_crc32c(0, r + 4, len - 4u));
    char path[192];
    snprintf(path, sizeof(path), "%s/log", f->index_dir);
    FILE *file = fopen(path, "ab");
    assert_non_null(file);
    assert_int_equal(fwrite(r, 1, len, file), len);
    assert_int_equal(fclose(file), 0);
}

static void test_cursor_old_whole_records_open_and_take_deltas(void **state)
{
    /* Intent: a log whose applies end in whole-cursor records opens with the last one's cursor
     * (writer, reader, index_check), and the deltas appended after it build on it. */
    struct fixture *f = *state;
    index_close(f->g);
    f->g = NULL;
    remove_table(f);
    old_record_append(f, 1, "old-cursor-1");
    old_record_append(f, 2, "old-cursor-two");
    memcpy(f->cursor, "old-cursor-two", 14);
    f->cursor_len = 14;
    reopen(f);
    everyone_agrees(f);
    memcpy(f->cursor, "new-cursor-two!", 15);
    (void)apply(f, 15);
    everyone_agrees(f);
    reopen(f);
    everyone_agrees(f);
}

static void test_cursor_table_cursor_that_differs_is_damage(void **state)
{
    /* Intent: DIR/table's copy of the cursor is checked: a byte of it flipped (its CRC made
     * right again) is damage for index_check and for a reader. */
    struct fixture *f = *state;
    memset(f->cursor, 0x33, 300);
    (void)apply(f, 300);
    f->cursor[10] = 0x44;
    (void)apply(f, 300);
    index_close(f->g);
    f->g = NULL;
    char path[192];
    snprintf(path, sizeof(path), "%s/table", f->index_dir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t *t = malloc((size_t)st.st_size);
    assert_non_null(t);
    assert_int_equal(pread(fd, t, (size_t)st.st_size, 0), st.st_size);
    assert_int_equal(ds_get_le32(t + 28), 300);
    t[st.st_size - 1] ^= 1; /* the cursor's last byte */
    ds_put_le32(t + 52, ds_crc32c(0, t + INDEX_TABLE_HEADER_BYTES,
                                  (size_t)st.st_size - INDEX_TABLE_HEADER_BYTES));
    ds_put_le32(t + 60, ds_crc32c(0, t, 60));
    assert_int_equal(pwrite(fd, t, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    free(t);
    struct index_check_report report;
    assert_int_equal(index_check(f->index_dir, NULL, &report), 0);
    assert_true(report.damaged);
    assert_non_null(strstr(report.reason, "cursor"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cursor_apply_writes_only_what_changed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cursor_far_above_a_record_in_pieces_comes_back_equal,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_cursor_log_cut_inside_pieces_reopens_as_the_apply_before, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cursor_old_whole_records_open_and_take_deltas, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cursor_table_cursor_that_differs_is_damage, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
