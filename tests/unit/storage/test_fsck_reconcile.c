/*
 * Unit tests of fsck --repair's reconciliation of the orders model (storage/fsck_reconcile.c),
 * through storage_fsck: after a block is quarantined, each order's current version is the
 * newest one still present (reverted), or the order is lost, or it stays; the retractions
 * balance, fsck ends clean, and the counts are the truth of the surviving versions.
 *
 * One directory, two partitions A = (DAY0, 0) and B = (DAY0 + 1, 0), three commits, each
 * sealing one block per partition it touched:
 *   A0 [1v1 2v1 3v1 4v1 5v1]
 *   A1 [ret 1v1, 1v2, ret 2v1, ret 3v1, 3v2]     B0 [2v2]          (order 2 moves to B)
 *   A2 [ret 3v2, 3v3, ret 5v1]                   B1 [5v2]          (order 5 moves to B)
 * Quarantining A2 loses a current version (3v3: back to 3v2) and a retraction (5v1 is left
 * over); A0 a superseded row of each order (4 is lost, four retractions cancel nothing); A1 a
 * current version (1v2: back to 1v1) and retractions (2v1, 3v1 left over, ret 3v2 unmatched).
 * A restore of A2's order from its event brings back its versions_seen too. The crash test stops
 * the repair at each of its crash points in a child process and checks that a second repair ends
 * the same.
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
#include <sys/wait.h>
#include <unistd.h>

#include "storage/storage.h"
#include "tests/support/events.h"
#include "tests/support/store_fixture.h"
#include "tests/support/tempdir.h"

#define DAY_MS 86400000LL
#define DAY0 20474 /* 2026-01-21 */
#define ORDERS 5
#define CRASH_EXIT 42

/* What an order must be after the repair: absent (version 0), or version on day. */
struct expect {
    int64_t version;
    int32_t day;
};

static void event_of(int64_t id, int32_t day, const char *status, int64_t version,
                     struct ds_event *e)
{
    memset(e, 0, sizeof(*e));
    test_id_int(&e->order_id, id);
    test_id_int(&e->customer_id, id + 100);
    e->ts_ms = (int64_t)day * DAY_MS + id * 60000;
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

static void build(const char *dir)
{
    struct storage_config cfg;
    test_store_config(&cfg, dir, STORAGE_MODEL_ORDERS, false, 64);
    struct storage *st = test_store_open(&cfg);
    for (int64_t id = 1; id <= ORDERS; id++) {
        append(st, id, DAY0, "pending", 1);
    }
    assert_int_equal(storage_commit(st), 0);
    append(st, 1, DAY0, "paid", 2);
    append(st, 2, DAY0 + 1, "paid", 2);
    append(st, 3, DAY0, "paid", 2);
    assert_int_equal(storage_commit(st), 0);
    append(st, 3, DAY0, "shipped", 3);
    append(st, 5, DAY0 + 1, "paid", 2);
    assert_int_equal(storage_commit(st), 0);
    storage_close(st);
}

static int fsck_run(const char *dir, bool repair, bool quarantine_only,
                    struct storage_fsck_report *r, void (*step_fn)(uint32_t, void *), void *user)
{
    struct storage_fsck_options options = {.repair = repair,
                                           .quarantine_only = quarantine_only,
                                           .report_file = NULL,
                                           .step_fn = step_fn,
                                           .step_user = user};
    memset(r, 0, sizeof(*r));
    return storage_fsck(dir, &options, r);
}

/* Flips a payload byte of block index of partition (day, 0)'s first segment and quarantines
 * it without reconciling: the balance is then broken. */
static void quarantine_block(const char *dir, int32_t day, uint32_t index)
{
    test_store_block_damage(dir, day, 0, index);
    struct storage_fsck_report r;
    assert_int_equal(fsck_run(dir, true, true, &r, NULL, NULL), 1);
    assert_int_equal(r.quarantined_blocks, 1);
    assert_true(r.retractions_unmatched + r.orders_mismatched > 0);
}

static uint64_t count_of(struct storage *st, int32_t day)
{
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, day, 0, NULL, 0, &t), 0);
    assert_int_equal(t.damaged_blocks, 0);
    return t.count;
}

/* fsck is clean, each order is as expected, and each day counts the orders placed there. */
static void assert_state(const char *dir, const struct expect want[ORDERS])
{
    struct storage_fsck_report r;
    assert_int_equal(fsck_run(dir, false, false, &r, NULL, NULL), 0);
    struct storage *st = NULL;
    assert_int_equal(storage_open_reader(dir, &st), 0);
    uint64_t per_day[2] = {0, 0};
    static uint8_t scratch[STORAGE_ORDER_SCRATCH_BYTES];
    for (int64_t id = 1; id <= ORDERS; id++) {
        struct ds_id oid;
        test_id_int(&oid, id);
        struct storage_order o;
        int rc = storage_order_get(st, &oid, &o, scratch, sizeof(scratch));
        const struct expect *w = &want[id - 1];
        if (w->version == 0) {
            assert_int_equal(rc, -ENOENT);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(o.version, w->version);
        assert_int_equal(o.day, w->day);
        assert_int_equal(o.amount_units, 1000 * id + w->version);
        per_day[w->day - DAY0]++;
    }
    assert_int_equal(r.orders, per_day[0] + per_day[1]);
    assert_int_equal(count_of(st, DAY0), per_day[0]);
    assert_int_equal(count_of(st, DAY0 + 1), per_day[1]);
    storage_close(st);
}

/* The repair's figures, and the record listing exactly reverted + lost orders. */
static void repair_and_check(const char *dir, uint64_t reverted, uint64_t lost)
{
    struct storage_fsck_report r;
    assert_int_equal(fsck_run(dir, true, false, &r, NULL, NULL), 0);
    assert_int_equal(r.orders_reverted, reverted);
    assert_int_equal(r.orders_lost, lost);
    assert_int_equal(r.retractions_unmatched, 0);
    assert_int_equal(r.orders_mismatched, 0);
    char qdir[DS_PATH_MAX];
    snprintf(qdir, sizeof(qdir), "%s/quarantine", dir);
    DIR *d = opendir(qdir);
    assert_non_null(d);
    uint64_t lines = 0;
    uint64_t lines_lost = 0;
    for (struct dirent *de = readdir(d); de != NULL; de = readdir(d)) {
        if (strstr(de->d_name, ".orders.jsonl") == NULL) {
            continue;
        }
        char path[DS_PATH_MAX + 256];
        snprintf(path, sizeof(path), "%s/%s", qdir, de->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char line[1024];
        while (fgets(line, sizeof(line), f) != NULL) {
            lines++;
            lines_lost += strstr(line, "\"outcome\":\"lost\"") != NULL;
        }
        fclose(f);
    }
    closedir(d);
    assert_int_equal(lines, reverted + lost);
    assert_int_equal(lines_lost, lost);
}

static const struct expect WANT_A2[ORDERS] = {
    {2, DAY0}, {2, DAY0 + 1}, {2, DAY0}, {1, DAY0}, {2, DAY0 + 1}};
static const struct expect WANT_A0[ORDERS] = {
    {2, DAY0}, {2, DAY0 + 1}, {3, DAY0}, {0, 0}, {2, DAY0 + 1}};
static const struct expect WANT_A1[ORDERS] = {
    {1, DAY0}, {2, DAY0 + 1}, {3, DAY0}, {1, DAY0}, {2, DAY0 + 1}};

static void test_fsck_reconcile_current_version_reverts(void **state)
{
    /* A2 held 3v3 (current) and the retractions of 3v2 and 5v1: order 3 reverts to 3v2, the
     * left-over 5v1 goes, order 5 stays in B. */
    struct test_store_fixture *fx = *state;
    build(fx->dir);
    quarantine_block(fx->dir, DAY0, 2);
    repair_and_check(fx->dir, 1, 0);
    assert_state(fx->dir, WANT_A2);
}

static void test_fsck_reconcile_superseded_rows_lost(void **state)
{
    /* A0 held every first version: order 4 had no other and is lost; the retractions of the
     * others cancel nothing and go; their current versions stay. */
    struct test_store_fixture *fx = *state;
    build(fx->dir);
    quarantine_block(fx->dir, DAY0, 0);
    repair_and_check(fx->dir, 0, 1);
    assert_state(fx->dir, WANT_A0);
}

static void test_fsck_reconcile_retractions_lost(void **state)
{
    /* A1 held 1v2 (current: back to 1v1) and retractions of 1v1, 2v1 and 3v1: the rows they
     * cancelled are left over and go, and ret 3v2 in A2 cancels nothing and goes. */
    struct test_store_fixture *fx = *state;
    build(fx->dir);
    quarantine_block(fx->dir, DAY0, 1);
    repair_and_check(fx->dir, 1, 0);
    assert_state(fx->dir, WANT_A1);
}

static void test_fsck_reconcile_moved_order_current_lost(void **state)
{
    /* B1 held 5v2, moved from A: order 5 reverts to 5v1 in A (its retraction there goes). */
    struct test_store_fixture *fx = *state;
    build(fx->dir);
    quarantine_block(fx->dir, DAY0 + 1, 1);
    repair_and_check(fx->dir, 1, 0);
    static const struct expect want[ORDERS] = {
        {2, DAY0}, {2, DAY0 + 1}, {3, DAY0}, {1, DAY0}, {1, DAY0}};
    assert_state(fx->dir, want);
}

static uint32_t versions_seen_of(const char *dir, int64_t id, int64_t *version)
{
    struct storage *st = NULL;
    assert_int_equal(storage_open_reader(dir, &st), 0);
    static uint8_t scratch[STORAGE_ORDER_SCRATCH_BYTES];
    struct ds_id oid;
    test_id_int(&oid, id);
    struct storage_order o;
    assert_int_equal(storage_order_get(st, &oid, &o, scratch, sizeof(scratch)), 0);
    storage_close(st);
    *version = o.version;
    return o.versions_seen;
}

static void test_fsck_reconcile_restore_gives_back_versions_seen(void **state)
{
    /* Order 3 applied 3v1, 3v2, 3v3 (versions_seen 3) and reverts to 3v2 when A2 goes; a
     * restore that appends 3v3 again brings back the order as a clean ingest left it, count
     * included, not 4. Its events come as ingest_restore_run hands them over: wanted, appended,
     * committed, then finished. */
    struct test_store_fixture *fx = *state;
    build(fx->dir);
    int64_t version = 0;
    assert_int_equal(versions_seen_of(fx->dir, 3, &version), 3);
    quarantine_block(fx->dir, DAY0, 2);
    repair_and_check(fx->dir, 1, 0);
    assert_int_equal(versions_seen_of(fx->dir, 3, &version), 3);
    assert_int_equal(version, 2);

    struct storage_config cfg;
    test_store_config(&cfg, fx->dir, STORAGE_MODEL_ORDERS, false, 64);
    struct storage *st = test_store_open(&cfg);
    struct storage_restore_orders *o = NULL;
    assert_int_equal(storage_restore_orders_load(st, &o), 0);
    assert_int_equal(storage_restore_orders_count(o), 1);
    struct ds_event e;
    event_of(3, DAY0, "shipped", 3, &e);
    assert_true(storage_restore_orders_want(o, &e));
    assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), 0);
    assert_int_equal(storage_commit(st), 0);
    struct storage_restore_orders_report report;
    assert_int_equal(storage_restore_orders_finish(st, o, true, 1, &report), 0);
    assert_int_equal(report.restored, 1);
    assert_int_equal(report.reverted + report.lost, 0);
    storage_restore_orders_destroy(o);
    storage_close(st);

    assert_int_equal(versions_seen_of(fx->dir, 3, &version), 3);
    assert_int_equal(version, 3);
    static const struct expect want[ORDERS] = {
        {2, DAY0}, {2, DAY0 + 1}, {3, DAY0}, {1, DAY0}, {2, DAY0 + 1}};
    assert_state(fx->dir, want);
}

static void crash_at(uint32_t step, void *user)
{
    if (step == *(const uint32_t *)user) {
        _exit(CRASH_EXIT);
    }
}

static void test_fsck_reconcile_crash_then_repair_ends_the_same(void **state)
{
    /* For each crash point k of the repair (each quarantined block in turn): a child runs the
     * repair and dies at k; a second repair must end in the state of an uninterrupted one. */
    struct test_store_fixture *fx = *state;
    static const struct {
        int32_t day;
        uint32_t block;
        const struct expect *want;
    } cases[] = {{DAY0, 2, WANT_A2}, {DAY0, 0, WANT_A0}, {DAY0, 1, WANT_A1}};
    uint32_t crashes = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (uint32_t k = 0;; k++) {
            test_tempdir_remove(fx->dir);
            assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
            build(fx->dir);
            quarantine_block(fx->dir, cases[c].day, cases[c].block);
            fflush(NULL);
            pid_t pid = fork();
            assert_true(pid >= 0);
            if (pid == 0) {
                struct storage_fsck_report r;
                int rc = fsck_run(fx->dir, true, false, &r, crash_at, &k);
                _exit(rc == 0 ? 0 : 1);
            }
            int status = 0;
            assert_int_equal(waitpid(pid, &status, 0), pid);
            assert_true(WIFEXITED(status));
            struct storage_fsck_report r;
            assert_int_equal(fsck_run(fx->dir, true, false, &r, NULL, NULL), 0);
            assert_state(fx->dir, cases[c].want);
            if (WEXITSTATUS(status) != CRASH_EXIT) {
                assert_int_equal(WEXITSTATUS(status), 0); /* k is past its last point */
                break;
            }
            crashes++;
        }
    }
    assert_true(crashes >= 9); /* at least the record, the store and one rewrite, per case */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fsck_reconcile_current_version_reverts,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_reconcile_superseded_rows_lost, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_reconcile_retractions_lost, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_reconcile_moved_order_current_lost,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_reconcile_restore_gives_back_versions_seen,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_fsck_reconcile_crash_then_repair_ends_the_same,
                                        test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
