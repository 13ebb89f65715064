/*
 * Unit tests of what fsck --repair reports it rolled back (storage/fsck_rollback.c), through
 * storage_fsck: a MANIFEST damaged before its tail keeps its valid prefix (the first commit),
 * and the report says exactly what the later commits lost.
 *
 * Two partitions A = (DAY0, 0) and B = (DAY0 + 1, 0), three commits, one block per partition
 * each touched (B exists only from the second commit on, so its segment is an orphan after the
 * rollback). Events model: A 10 | A 7, B 5 | A 4 events. Orders model:
 *   1: A [1v1 2v1 3v1 4v1 5v1]
 *   2: A [ret 1v1, 1v2, ret 2v1, ret 3v1, 3v2, 6v1]   B [2v2]   (order 2 moves to B)
 *   3: A [ret 3v2, 3v3]
 * Rolled back to the first commit: orders 1, 2 and 3 revert to v1, order 6 is lost; the count
 * is truth (6 orders) - 1.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
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
#define DAY0 20474 /* 2026-01-21 */

static void event_of(int64_t id, int32_t day, const char *status, int64_t version,
                     struct ds_event *e)
{
    memset(e, 0, sizeof(*e));
    test_id_int(&e->order_id, id);
    test_id_int(&e->customer_id, id + 100);
    e->ts_ms = (int64_t)day * DAY_MS + id * 60000 + version;
    test_event_set_status(e, status);
    e->amount_units = 1000 * id + version;
    e->has_version = true;
    e->version = version;
}

static void append(struct storage *st, int64_t id, int32_t day, const char *status, int64_t version)
{
    struct ds_event e;
    event_of(id, day, status, version, &e);
    assert_int_equal(storage_append(st, day, 0, &e, NULL), 0);
}

static uint64_t file_size_of(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (uint64_t)sb.st_size;
}

static void byte_flip(const char *path, uint64_t at)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b = 0;
    assert_int_equal(pread(fd, &b, 1, (off_t)at), 1);
    b ^= 0x5a;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)at), 1);
    close(fd);
}

static int fsck_run(const char *dir, bool repair, struct storage_fsck_report *r)
{
    struct storage_fsck_options options = {.repair = repair};
    memset(r, 0, sizeof(*r));
    return storage_fsck(dir, &options, r);
}

static uint64_t count_of(const char *dir, int32_t day)
{
    struct storage *st = NULL;
    assert_int_equal(storage_open_reader(dir, &st), 0);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, day, 0, NULL, 0, &t), 0);
    assert_int_equal(t.damaged_blocks, 0);
    storage_close(st);
    return t.count;
}

/* Damages the MANIFEST's second record: at + 20 bytes, where at is its size after commit 1. */
static void manifest_damage(const char *dir, uint64_t at)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/MANIFEST", dir);
    assert_true(file_size_of(path) > at + 20);
    byte_flip(path, at + 20);
    struct storage_fsck_report r;
    assert_int_equal(fsck_run(dir, false, &r), 1);
    assert_true(r.manifest_damaged);
}

static uint64_t manifest_size(const char *dir)
{
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/MANIFEST", dir);
    return file_size_of(path);
}

/* The events model's directory; returns the MANIFEST's size after the first commit, and the
 * end of A's first block in *a_end. */
static uint64_t build_events(const char *dir, uint64_t *a_end)
{
    struct storage_config cfg;
    test_store_config(&cfg, dir, STORAGE_MODEL_EVENTS, false, 64);
    struct storage *st = test_store_open(&cfg);
    const int counts[3][2] = {{10, 0}, {7, 5}, {4, 0}};
    uint64_t first = 0;
    int64_t id = 1;
    for (int c = 0; c < 3; c++) {
        for (int p = 0; p < 2; p++) {
            for (int i = 0; i < counts[c][p]; i++) {
                append(st, id++, DAY0 + p, "paid", 1);
            }
        }
        assert_int_equal(storage_commit(st), 0);
        if (c == 0) {
            first = manifest_size(dir);
            char seg[DS_PATH_MAX];
            snprintf(seg, sizeof(seg), "%s/parts/2026-01-21/0/00000001.seg", dir);
            *a_end = file_size_of(seg);
        }
    }
    storage_close(st);
    assert_int_equal(count_of(dir, DAY0), 21);
    assert_int_equal(count_of(dir, DAY0 + 1), 5);
    return first;
}

static void test_fsck_rollback_events_exact(void **state)
{
    /* The second and third commits are rolled back: A's 7 + 4 events past its committed end
     * and B's 5 in a segment the prefix does not know; count = 26 - 16. */
    struct test_store_fixture *fx = *state;
    uint64_t a_end = 0;
    manifest_damage(fx->dir, build_events(fx->dir, &a_end));
    struct storage_fsck_report r;
    assert_int_equal(fsck_run(fx->dir, true, &r), 0);
    assert_int_equal(r.events_rolled_back, 16);
    assert_int_equal(r.blocks_rolled_back, 3);
    assert_int_equal(r.rolled_back_ranges, 2);
    assert_true(r.rolled_back_bytes > 0);
    assert_int_equal(r.quarantined_events, 0);
    assert_int_equal(r.quarantined_blocks, 0);
    assert_int_equal(r.events_unknown_ranges, 0);
    assert_int_equal(count_of(fx->dir, DAY0), 10);
    assert_int_equal(count_of(fx->dir, DAY0 + 1), 0);
    assert_int_equal(fsck_run(fx->dir, false, &r), 0);
    /* The rolled-back bytes are kept: A's range and B's whole segment, not committed. */
    char qdir[DS_PATH_MAX];
    snprintf(qdir, sizeof(qdir), "%s/quarantine", fx->dir);
    DIR *d = opendir(qdir);
    assert_non_null(d);
    int records = 0;
    for (struct dirent *de = readdir(d); de != NULL; de = readdir(d)) {
        size_t n = strlen(de->d_name);
        records += n > 5 && strcmp(de->d_name + n - 5, ".json") == 0;
    }
    closedir(d);
    assert_int_equal(records, 2);
}

static void test_fsck_rollback_events_damaged_header_unknown(void **state)
{
    /* The second commit's block in A has a damaged header: its events are unknown (one range),
     * and the blocks around it count exactly (B's 5, A's third block 4). */
    struct test_store_fixture *fx = *state;
    uint64_t a_end = 0;
    manifest_damage(fx->dir, build_events(fx->dir, &a_end));
    char seg[DS_PATH_MAX];
    snprintf(seg, sizeof(seg), "%s/parts/2026-01-21/0/00000001.seg", fx->dir);
    byte_flip(seg, a_end + 30);
    struct storage_fsck_report r;
    assert_int_equal(fsck_run(fx->dir, true, &r), 0);
    assert_int_equal(r.events_rolled_back, 9);
    assert_int_equal(r.blocks_rolled_back, 2);
    assert_int_equal(r.events_unknown_ranges, 1);
    assert_int_equal(count_of(fx->dir, DAY0), 10);
}

/* The orders model's directory; returns the MANIFEST's size after the first commit. */
static uint64_t build_orders(const char *dir)
{
    struct storage_config cfg;
    test_store_config(&cfg, dir, STORAGE_MODEL_ORDERS, false, 64);
    struct storage *st = test_store_open(&cfg);
    for (int64_t id = 1; id <= 5; id++) {
        append(st, id, DAY0, "pending", 1);
    }
    assert_int_equal(storage_commit(st), 0);
    uint64_t first = manifest_size(dir);
    append(st, 1, DAY0, "paid", 2);
    append(st, 2, DAY0 + 1, "paid", 2);
    append(st, 3, DAY0, "paid", 2);
    append(st, 6, DAY0, "pending", 1);
    assert_int_equal(storage_commit(st), 0);
    append(st, 3, DAY0, "shipped", 3);
    assert_int_equal(storage_commit(st), 0);
    storage_close(st);
    assert_int_equal(count_of(dir, DAY0), 5); /* 1, 3, 4, 5, 6 */
    assert_int_equal(count_of(dir, DAY0 + 1), 1);
    return first;
}

static void test_fsck_rollback_orders_lost_and_reverted(void **state)
{
    struct test_store_fixture *fx = *state;
    manifest_damage(fx->dir, build_orders(fx->dir));
    struct storage_fsck_report r;
    assert_int_equal(fsck_run(fx->dir, true, &r), 0);
    assert_int_equal(r.orders_reverted, 3);
    assert_int_equal(r.orders_lost, 1);
    assert_int_equal(r.retractions_unmatched, 0);
    assert_int_equal(r.orders_mismatched, 0);
    assert_int_equal(r.events_unknown_ranges, 0);
    /* Rows and retractions: A's 6 of commit 2 and 2 of commit 3, B's 1. */
    assert_int_equal(r.events_rolled_back, 9);
    assert_int_equal(r.blocks_rolled_back, 3);
    assert_int_equal(r.orders, 5);
    assert_int_equal(count_of(fx->dir, DAY0) + count_of(fx->dir, DAY0 + 1), 6 - 1);
    struct storage *st = NULL;
    assert_int_equal(storage_open_reader(fx->dir, &st), 0);
    static uint8_t scratch[STORAGE_ORDER_SCRATCH_BYTES];
    for (int64_t id = 1; id <= 6; id++) {
        struct ds_id oid;
        test_id_int(&oid, id);
        struct storage_order o;
        int rc = storage_order_get(st, &oid, &o, scratch, sizeof(scratch));
        if (id == 6) {
            assert_int_equal(rc, -ENOENT);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(o.version, 1);
        }
    }
    storage_close(st);
    /* The record names order 6 lost and orders 1, 2, 3 reverted, with the rolled-back version. */
    char qdir[DS_PATH_MAX];
    snprintf(qdir, sizeof(qdir), "%s/quarantine", fx->dir);
    DIR *d = opendir(qdir);
    assert_non_null(d);
    int files = 0;
    char text[4096] = "";
    for (struct dirent *de = readdir(d); de != NULL; de = readdir(d)) {
        if (strstr(de->d_name, ".rollback.orders.jsonl") == NULL ||
            strstr(de->d_name, ".tmp") != NULL) {
            continue;
        }
        files++;
        char path[DS_PATH_MAX + 256];
        snprintf(path, sizeof(path), "%s/%s", qdir, de->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    closedir(d);
    assert_int_equal(files, 1);
    assert_non_null(strstr(text, "{\"order\":6,\"outcome\":\"lost\",\"rolled_back\":true,"
                                 "\"had\":{\"day\":\"2026-01-21\",\"shard\":0,"));
    assert_non_null(strstr(text, "{\"order\":3,\"outcome\":\"reverted\",\"rolled_back\":true,"
                                 "\"had\":{\"day\":\"2026-01-21\",\"shard\":0,"));
    assert_non_null(strstr(text, "\"version\":3,\"status\":\"shipped\"},\"now\":{"));
    assert_non_null(strstr(text, "{\"order\":2,\"outcome\":\"reverted\",\"rolled_back\":true,"
                                 "\"had\":{\"day\":\"2026-01-22\",\"shard\":0,"));
    assert_non_null(strstr(text, "{\"order\":1,\"outcome\":\"reverted\""));
    assert_null(strstr(text, "{\"order\":4,"));
    assert_null(strstr(text, "{\"order\":5,"));
    /* A second repair finds nothing to do. */
    assert_int_equal(fsck_run(fx->dir, true, &r), 0);
    assert_int_equal(r.orders_lost + r.orders_reverted + r.events_rolled_back, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fsck_rollback_events_exact, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_rollback_events_damaged_header_unknown,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_rollback_orders_lost_and_reverted,
                                        test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
