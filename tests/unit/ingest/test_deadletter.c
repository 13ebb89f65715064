/*
 * Unit tests of ingest/deadletter.c: numbered files in write order, the committed position
 * (file number and length) recovered exactly after a crash at every step of a run that rotates
 * often, a directory of the old layout adopted, and retention by the stream day a file was
 * closed on. A "crash" closes the files without a commit: buffered lines reach the file, the
 * worst case for recovery, which must cut them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ingest/deadletter.h"
#include "tests/support/tempdir.h"

#define DL_TEXT_BYTES (1u << 16)

struct dl_fixture {
    char dir[256];
    char legacy[320];
    char text[DL_TEXT_BYTES]; /* every file's lines, concatenated in name order */
};

static int dl_setup(void **state)
{
    struct dl_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    snprintf(fx->legacy, sizeof(fx->legacy), "%s/deadletter.jsonl", fx->dir);
    *state = fx;
    return 0;
}

static int dl_teardown(void **state)
{
    struct dl_fixture *fx = *state;
    test_tempdir_remove(fx->dir);
    free(fx);
    return 0;
}

static int name_compare(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads every deadletter.*.jsonl of fx->dir in name order into fx->text; returns the number of
 * files. */
static uint32_t dl_read_all(struct dl_fixture *fx)
{
    DIR *listing = opendir(fx->dir);
    assert_non_null(listing);
    char *names[1024];
    uint32_t count = 0;
    for (struct dirent *e = readdir(listing); e != NULL; e = readdir(listing)) {
        if (strncmp(e->d_name, "deadletter.", 11) == 0 && strcmp(e->d_name, "deadletter.jsonl")) {
            assert_true(count < 1024);
            names[count++] = strdup(e->d_name);
        }
    }
    closedir(listing);
    qsort(names, count, sizeof(names[0]), name_compare);
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        char path[600];
        snprintf(path, sizeof(path), "%s/%s", fx->dir, names[i]);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        used += fread(fx->text + used, 1, DL_TEXT_BYTES - 1 - used, f);
        fclose(f);
        free(names[i]);
    }
    fx->text[used] = '\0';
    return count;
}

static void dl_write(struct deadletter *d, uint32_t i)
{
    char line[32];
    int len = snprintf(line, sizeof(line), "{\"n\":%u}", i);
    deadletter_write(d, line, (size_t)len);
}

/* The lines {"n":0} .. {"n":count-1}, each with its newline. */
static void dl_expect(char *dst, size_t dst_capacity, uint32_t count)
{
    size_t used = 0;
    dst[0] = '\0';
    for (uint32_t i = 0; i < count; i++) {
        used += (size_t)snprintf(dst + used, dst_capacity - used, "{\"n\":%u}\n", i);
    }
}

static void test_deadletter_rotate_numbers_files_in_write_order(void **state)
{
    /* Intent: past the rotation size a sync begins the next file, the position names it with
     * length 0, and the files read in name order give every line once, in order. */
    struct dl_fixture *fx = *state;
    struct deadletter d;
    assert_int_equal(deadletter_open(&d, fx->legacy, 0, 40, 3), 0);
    uint64_t position = 0;
    for (uint32_t i = 0; i < 30; i++) {
        dl_write(&d, i);
        if (i % 3 == 2) {
            assert_int_equal(deadletter_sync(&d, 3, &position), 0);
        }
    }
    assert_int_equal(deadletter_sync(&d, 3, &position), 0);
    uint32_t number = d.number;
    assert_true(number >= 5);
    assert_int_equal(position >> DEADLETTER_LENGTH_BITS, number);
    deadletter_close(&d);
    char expected[4096];
    dl_expect(expected, sizeof(expected), 30);
    assert_int_equal(dl_read_all(fx), number + 1);
    assert_string_equal(fx->text, expected);
    assert_int_equal(access(fx->legacy, F_OK), -1);
}

/* One run of the crash loop: writes lines, syncing every third and committing every sync but
 * the one at crash_step (a crash after the sync that may have rotated, before its commit),
 * crashes there, recovers, checks, then finishes the run and checks again. Returns whether
 * the crash came right after a rotation. */
static bool dl_crash_at(struct dl_fixture *fx, uint32_t crash_step)
{
    struct deadletter d;
    assert_int_equal(deadletter_open(&d, fx->legacy, 0, 30, 1), 0);
    uint64_t committed = 0;
    uint32_t committed_lines = 0;
    bool rotated = false;
    uint32_t i = 0;
    for (; i < 40; i++) {
        dl_write(&d, i);
        if (i % 3 != 2) {
            continue;
        }
        uint32_t before = d.number;
        uint64_t position = 0;
        assert_int_equal(deadletter_sync(&d, 1, &position), 0);
        if (i == crash_step) {
            rotated = d.number != before;
            break;
        }
        committed = position;
        committed_lines = i + 1;
    }
    deadletter_close(&d); /* the crash: nothing after the last commit is acknowledged */
    assert_int_equal(deadletter_open(&d, fx->legacy, committed, 30, 1), 0);
    deadletter_close(&d);
    char expected[4096];
    dl_expect(expected, sizeof(expected), committed_lines);
    dl_read_all(fx);
    assert_string_equal(fx->text, expected);
    /* The source replays from the first unacknowledged line; each line ends up once. */
    assert_int_equal(deadletter_open(&d, fx->legacy, committed, 30, 1), 0);
    for (uint32_t j = committed_lines; j < 45; j++) {
        dl_write(&d, j);
    }
    uint64_t position = 0;
    assert_int_equal(deadletter_sync(&d, 1, &position), 0);
    deadletter_close(&d);
    assert_int_equal(deadletter_open(&d, fx->legacy, position, 30, 1), 0);
    deadletter_close(&d);
    dl_expect(expected, sizeof(expected), 45);
    dl_read_all(fx);
    assert_string_equal(fx->text, expected);
    return rotated;
}

static void test_deadletter_recover_exact_after_crash_at_every_sync(void **state)
{
    /* Intent: a crash after any sync, rotation included, before the commit recording it,
     * recovers exactly the committed lines: later files removed, the committed one cut. */
    struct dl_fixture *fx = *state;
    uint32_t runs = 0;
    uint32_t after_rotation = 0;
    for (uint32_t step = 2; step < 40; step += 3) {
        test_tempdir_remove(fx->dir);
        assert_int_equal(mkdir(fx->dir, 0755), 0);
        after_rotation += dl_crash_at(fx, step) ? 1 : 0;
        runs++;
    }
    assert_true(runs > 10);
    assert_true(after_rotation >= 3);
}

static void test_deadletter_open_adopts_legacy_file(void **state)
{
    /* Intent: a directory of the old layout (one deadletter.jsonl, its committed length as the
     * position) keeps its acknowledged lines as file 0, its uncommitted tail cut. */
    struct dl_fixture *fx = *state;
    FILE *f = fopen(fx->legacy, "w");
    assert_non_null(f);
    fputs("{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n", f);
    fclose(f);
    struct deadletter d;
    assert_int_equal(deadletter_open(&d, fx->legacy, 24, 1000, -1), 0);
    assert_int_equal(d.number, 0);
    dl_write(&d, 3);
    uint64_t position = 0;
    assert_int_equal(deadletter_sync(&d, -1, &position), 0);
    assert_int_equal(position, DEADLETTER_POSITION(0, 32));
    deadletter_close(&d);
    assert_int_equal(access(fx->legacy, F_OK), -1);
    char expected[256];
    dl_expect(expected, sizeof(expected), 4);
    assert_int_equal(dl_read_all(fx), 1);
    assert_string_equal(fx->text, expected);
}

static void test_deadletter_open_refuses_legacy_beside_numbered(void **state)
{
    /* Intent: a deadletter.jsonl beside numbered files cannot be placed: -EEXIST, nothing
     * renamed or cut. */
    struct dl_fixture *fx = *state;
    struct deadletter d;
    assert_int_equal(deadletter_open(&d, fx->legacy, 0, 1000, -1), 0);
    deadletter_close(&d);
    FILE *f = fopen(fx->legacy, "w");
    assert_non_null(f);
    fputs("{\"n\":0}\n", f);
    fclose(f);
    assert_int_equal(deadletter_open(&d, fx->legacy, 0, 1000, -1), -EEXIST);
    deadletter_close(&d);
    assert_int_equal(access(fx->legacy, F_OK), 0);
}

/* Rotates once per stream day in days[0..count): file k is closed on days[k]. */
static void dl_rotate_on(struct deadletter *d, const int32_t *days, uint32_t count)
{
    for (uint32_t k = 0; k < count; k++) {
        dl_write(d, k);
        uint64_t position = 0;
        assert_int_equal(deadletter_sync(d, days[k], &position), 0);
        assert_int_equal(position, DEADLETTER_POSITION(d->number, 0));
    }
}

static void test_deadletter_retire_removes_files_closed_below_floor(void **state)
{
    /* Intent: retention removes exactly the rotated files closed on a day below the floor,
     * oldest first, and never the current file; floor 0 removes nothing. */
    struct dl_fixture *fx = *state;
    struct deadletter d;
    assert_int_equal(deadletter_open(&d, fx->legacy, 0, 1, 10), 0);
    static const int32_t days[] = {10, 11, 12, 13};
    dl_rotate_on(&d, days, 4);
    assert_int_equal(d.number, 4);
    assert_int_equal(dl_read_all(fx), 5);
    assert_int_equal(deadletter_retire(&d, 0, 13), 0);
    assert_int_equal(deadletter_retire(&d, 12, 13), 2);
    assert_int_equal(dl_read_all(fx), 3);
    assert_string_equal(fx->text, "{\"n\":2}\n{\"n\":3}\n");
    assert_int_equal(deadletter_retire(&d, 12, 13), 0);
    assert_int_equal(deadletter_retire(&d, 1000, 13), 2);
    assert_int_equal(dl_read_all(fx), 1);
    assert_int_equal(d.oldest, 4);
    deadletter_close(&d);
}

static void test_deadletter_retire_dates_older_files_by_stream_day_at_open(void **state)
{
    /* Intent: files rotated before a restart count as closed on the stream day at open (never
     * earlier than they were), and files closed while the stream day was unknown wait until
     * it is known. */
    struct dl_fixture *fx = *state;
    struct deadletter d;
    assert_int_equal(deadletter_open(&d, fx->legacy, 0, 1, -1), 0);
    static const int32_t unknown[] = {-1, -1};
    dl_rotate_on(&d, unknown, 2);
    assert_int_equal(deadletter_retire(&d, 50, -1), 0);
    uint64_t position = DEADLETTER_POSITION(d.number, 0);
    deadletter_close(&d);
    assert_int_equal(deadletter_open(&d, fx->legacy, position, 1, 20), 0);
    assert_int_equal(d.oldest, 0);
    assert_int_equal(deadletter_retire(&d, 20, 25), 0);
    assert_int_equal(deadletter_retire(&d, 21, 25), 2);
    deadletter_close(&d);
    /* A file closed with the day unknown takes the first stream day known after. */
    assert_int_equal(deadletter_open(&d, fx->legacy, position, 1, -1), 0);
    dl_rotate_on(&d, unknown, 1);
    assert_int_equal(deadletter_retire(&d, 5, 5), 0);
    assert_int_equal(deadletter_retire(&d, 6, 5), 1);
    deadletter_close(&d);
}

static void test_deadletter_retire_folds_old_closing_days_conservatively(void **state)
{
    /* Intent: past DEADLETTER_CLOSED_MAX rotated files, the oldest share the latest of their
     * days: kept longer, never removed before the floor passes their own day. */
    struct dl_fixture *fx = *state;
    struct deadletter d;
    assert_int_equal(deadletter_open(&d, fx->legacy, 0, 1, 1), 0);
    int32_t days[DEADLETTER_CLOSED_MAX + 6];
    for (uint32_t k = 0; k < DS_ARRAY_LEN(days); k++) {
        days[k] = (int32_t)k + 1;
    }
    dl_rotate_on(&d, days, DS_ARRAY_LEN(days));
    assert_int_equal(deadletter_retire(&d, 4, 100), 0);  /* files 0..5 share day 6 */
    assert_int_equal(deadletter_retire(&d, 8, 100), 7);  /* those and file 6 (day 7) */
    assert_int_equal(deadletter_retire(&d, 10, 100), 2); /* files 7, 8 (days 8, 9) */
    deadletter_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_deadletter_rotate_numbers_files_in_write_order,
                                        dl_setup, dl_teardown),
        cmocka_unit_test_setup_teardown(test_deadletter_recover_exact_after_crash_at_every_sync,
                                        dl_setup, dl_teardown),
        cmocka_unit_test_setup_teardown(test_deadletter_open_adopts_legacy_file, dl_setup,
                                        dl_teardown),
        cmocka_unit_test_setup_teardown(test_deadletter_open_refuses_legacy_beside_numbered,
                                        dl_setup, dl_teardown),
        cmocka_unit_test_setup_teardown(test_deadletter_retire_removes_files_closed_below_floor,
                                        dl_setup, dl_teardown),
        cmocka_unit_test_setup_teardown(
            test_deadletter_retire_dates_older_files_by_stream_day_at_open, dl_setup, dl_teardown),
        cmocka_unit_test_setup_teardown(
            test_deadletter_retire_folds_old_closing_days_conservatively, dl_setup, dl_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
