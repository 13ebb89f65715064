/*
 * Tests of storage_release_range (storage/store_release.c, events model): the rows of one
 * Kafka partition from an offset on get retraction rows in their own (day, shard) partitions,
 * in blocks that mix partitions, days and shards; counts drop by exactly those rows; a second
 * release, one resumed after -EAGAIN, and one after a crash (before or after its commit: a
 * child killed with SIGKILL) retract each row once; a merge keeps rows and retractions; the
 * source's next offset becomes lo; the orders model and uncommitted appends are refused; fsck
 * finds every retraction matched, and one whose row a repair quarantined unmatched.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/storage.h"
#include "tests/support/events.h"
#include "tests/support/store_fixture.h"
#include "tests/support/tempdir.h"

#define DAY0 20474 /* 2026-01-21 */
#define DAYS 3u
#define SHARDS 3u
#define PARTITIONS 4u /* Kafka partitions 0..3 */
#define EVENTS 1200u
#define SOURCE 1
#define LO 150

static struct storage *open_store(const char *dir, enum storage_model model, uint32_t rows_max)
{
    struct storage_config cfg;
    test_store_config(&cfg, dir, model, false, 4096);
    cfg.block_events_max = 64;
    cfg.release_rows_max = rows_max;
    return test_store_open(&cfg);
}

/* What the feed stored: per (day, shard) the rows, and those of (SOURCE, >= LO). */
struct fed {
    uint64_t rows[DAYS][SHARDS];
    uint64_t in_range[DAYS][SHARDS];
    uint64_t in_range_total;
    int64_t next[PARTITIONS]; /* the next offset of each Kafka partition */
};

/* EVENTS events over DAYS days and SHARDS shards, each from one of PARTITIONS Kafka
 * partitions at its next offset (one in ten without a source), committed every 37 events: so
 * blocks mix partitions and offsets, and a partition's rows spread over every (day, shard). */
static void feed(struct storage *st, struct fed *f, uint64_t *rng)
{
    memset(f, 0, sizeof(*f));
    for (uint32_t i = 0; i < EVENTS; i++) {
        uint32_t d = (uint32_t)test_rng_below(rng, DAYS);
        uint32_t shard = (uint32_t)test_rng_below(rng, SHARDS);
        struct ds_event e;
        test_event_random_plain(rng, DAY0 + (int32_t)d, &e);
        uint32_t part = (uint32_t)test_rng_below(rng, PARTITIONS);
        struct ds_source src = {.partition = (int32_t)part, .offset = f->next[part]++};
        bool none = test_rng_below(rng, 10) == 0;
        assert_int_equal(storage_append(st, DAY0 + (int32_t)d, shard, &e, none ? NULL : &src), 0);
        f->rows[d][shard]++;
        if (!none && src.partition == SOURCE && src.offset >= LO) {
            f->in_range[d][shard]++;
            f->in_range_total++;
        }
        if (i % 37 == 36) {
            assert_int_equal(storage_commit(st), 0);
        }
    }
    assert_int_equal(storage_commit(st), 0);
    assert_true(f->in_range_total > 100);
}

/* Every partition's net count: its rows, less its rows of the range when released. */
static void assert_counts(struct storage *st, const struct fed *f, bool released)
{
    for (uint32_t d = 0; d < DAYS; d++) {
        for (uint32_t s = 0; s < SHARDS; s++) {
            struct storage_partition_total t;
            assert_int_equal(storage_partition_totals(st, DAY0 + (int32_t)d, s, NULL, 0, &t), 0);
            assert_int_equal(t.count, f->rows[d][s] - (released ? f->in_range[d][s] : 0));
        }
    }
}

/* Per partition, in append order: rows of the range and their retractions, which must pair
 * up one to one (each retraction after its row, with the same source) when released. */
struct pairing {
    uint64_t rows;
    uint64_t retractions;
    uint64_t unpaired; /* retractions without an earlier row of their offset */
    uint8_t seen[EVENTS + 1];
};

static int pair_row(const struct ds_event *e, const struct ds_source *source, void *user)
{
    struct pairing *p = user;
    if (source == NULL || source->partition != SOURCE) {
        assert_false(e->retract); /* only the range is released */
        return 0;
    }
    assert_true(source->offset >= 0 && source->offset <= EVENTS);
    if (!e->retract) {
        p->rows++;
        p->seen[source->offset]++;
        return 0;
    }
    assert_true(source->offset >= LO);
    p->retractions++;
    if (p->seen[source->offset] == 0) {
        p->unpaired++;
    } else {
        p->seen[source->offset]--;
    }
    return 0;
}

/* Every row of the range has exactly one retraction (released) or none. */
static void assert_pairs(struct storage *st, const struct fed *f, bool released)
{
    uint64_t retractions = 0;
    for (uint32_t d = 0; d < DAYS; d++) {
        for (uint32_t s = 0; s < SHARDS; s++) {
            struct pairing *p = calloc(1, sizeof(*p));
            assert_non_null(p);
            struct storage_position from = {0};
            assert_int_equal(
                storage_partition_scan_sources(st, DAY0 + (int32_t)d, s, &from, pair_row, p), 0);
            assert_int_equal(p->unpaired, 0);
            assert_int_equal(p->retractions, released ? f->in_range[d][s] : 0);
            retractions += p->retractions;
            free(p);
        }
    }
    assert_int_equal(retractions, released ? f->in_range_total : 0);
}

static void assert_fsck_clean(const char *dir, uint64_t retractions)
{
    struct storage_fsck_options options = {.repair = false, .report_file = NULL};
    struct storage_fsck_report r;
    memset(&r, 0, sizeof(r));
    assert_int_equal(storage_fsck(dir, &options, &r), 0);
    assert_int_equal(r.retractions, retractions);
    assert_int_equal(r.retractions_unmatched, 0);
    assert_int_equal(r.balance_unchecked, 0);
}

static void test_release_range_mixed_blocks_days_and_shards(void **state)
{
    /* Released rows of SOURCE from LO on, over three days and three shards in blocks mixing
     * four partitions: each gets one retraction in its own partition, counts drop by exactly
     * them, the next offset becomes LO, and a second release retracts nothing. A reopen, a
     * reader and fsck agree. */
    struct test_store_fixture *fx = *state;
    uint64_t rng = test_seed_or(41);
    struct storage *st = open_store(fx->dir, STORAGE_MODEL_EVENTS, 0);
    struct fed f;
    feed(st, &f, &rng);
    assert_true(storage_source_next(st, SOURCE) > LO);
    assert_counts(st, &f, false);
    uint64_t released = 0;
    assert_int_equal(storage_release_range(st, SOURCE, LO, &released), 0);
    assert_int_equal(released, f.in_range_total);
    assert_int_equal(storage_pending_events(st), f.in_range_total);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(storage_source_next(st, SOURCE), LO);
    assert_int_equal(storage_source_next(st, 0), f.next[0]); /* the others stay */
    assert_counts(st, &f, true);
    assert_pairs(st, &f, true);

    assert_int_equal(storage_release_range(st, SOURCE, LO, &released), 0);
    assert_int_equal(released, 0);
    assert_int_equal(storage_pending_events(st), 0);
    /* A higher lo: its rows are released already. */
    assert_int_equal(storage_release_range(st, SOURCE, LO + 100, &released), 0);
    assert_int_equal(released, 0);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(storage_source_next(st, SOURCE), LO);
    storage_close(st);

    st = open_store(fx->dir, STORAGE_MODEL_EVENTS, 0);
    assert_int_equal(storage_source_next(st, SOURCE), LO);
    assert_counts(st, &f, true);
    assert_int_equal(storage_release_range(st, SOURCE, LO, &released), 0);
    assert_int_equal(released, 0);
    storage_close(st);
    struct storage *r = NULL;
    assert_int_equal(storage_open_reader(fx->dir, &r), 0);
    assert_counts(r, &f, true);
    assert_pairs(r, &f, true);
    storage_close(r);
    assert_fsck_clean(fx->dir, f.in_range_total);
}

static void test_release_range_resumes_after_eagain(void **state)
{
    /* With release_rows_max 7, each call retracts 7 rows and returns -EAGAIN; committing and
     * calling again goes on where it stopped: every row retracted once, the next offset lowered
     * by the call that finishes. */
    struct test_store_fixture *fx = *state;
    uint64_t rng = test_seed_or(43);
    struct storage *st = open_store(fx->dir, STORAGE_MODEL_EVENTS, 7);
    struct fed f;
    feed(st, &f, &rng);
    int64_t next = storage_source_next(st, SOURCE);
    uint64_t total = 0;
    uint32_t calls = 0;
    int rc = -EAGAIN;
    while (rc == -EAGAIN) {
        uint64_t released = 0;
        rc = storage_release_range(st, SOURCE, LO, &released);
        calls++;
        assert_true(rc == 0 || rc == -EAGAIN);
        assert_true(rc == 0 ? released <= 7 : released == 7);
        total += released;
        if (rc == -EAGAIN) {
            assert_int_equal(storage_source_next(st, SOURCE), next); /* not yet */
        }
        assert_int_equal(storage_commit(st), 0);
        assert_true(calls <= f.in_range_total);
    }
    assert_int_equal(calls, f.in_range_total / 7 + 1);
    assert_int_equal(total, f.in_range_total);
    assert_int_equal(storage_source_next(st, SOURCE), LO);
    assert_counts(st, &f, true);
    assert_pairs(st, &f, true);
    storage_close(st);
    assert_fsck_clean(fx->dir, f.in_range_total);
}

/* A child releases and dies by SIGKILL: before its commit, or right after it. */
static void crash_release(const char *dir, bool commit)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct storage *st = open_store(dir, STORAGE_MODEL_EVENTS, 0);
        uint64_t released = 0;
        if (storage_release_range(st, SOURCE, LO, &released) != 0 || released == 0) {
            _exit(3);
        }
        if (commit && storage_commit(st) != 0) {
            _exit(4);
        }
        raise(SIGKILL);
        _exit(5);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static void test_release_range_crash_before_and_after_commit(void **state)
{
    /* Killed before the release's commit, nothing of it is kept (counts and next offset as
     * before) and a release after the reopen retracts every row; killed after it, the
     * retractions are durable and a release after the reopen retracts none. */
    struct test_store_fixture *fx = *state;
    for (int after = 0; after < 2; after++) {
        snprintf(fx->path, sizeof(fx->path), "%s/%d", fx->dir, after);
        uint64_t rng = test_seed_or(47);
        struct storage *st = open_store(fx->path, STORAGE_MODEL_EVENTS, 0);
        struct fed f;
        feed(st, &f, &rng);
        int64_t next = storage_source_next(st, SOURCE);
        storage_close(st);

        crash_release(fx->path, after == 1);
        st = open_store(fx->path, STORAGE_MODEL_EVENTS, 0);
        assert_int_equal(storage_source_next(st, SOURCE), after == 1 ? LO : next);
        assert_counts(st, &f, after == 1);
        uint64_t released = 0;
        assert_int_equal(storage_release_range(st, SOURCE, LO, &released), 0);
        assert_int_equal(released, after == 1 ? 0 : f.in_range_total);
        assert_int_equal(storage_commit(st), 0);
        assert_int_equal(storage_source_next(st, SOURCE), LO);
        assert_counts(st, &f, true);
        assert_pairs(st, &f, true);
        storage_close(st);
        assert_fsck_clean(fx->path, f.in_range_total);
    }
}

static void test_release_range_merge_keeps_rows_and_retractions(void **state)
{
    /* The events model's merge keeps a released row and its retraction both (counts equal
     * before and after), so a release after it retracts nothing again. */
    struct test_store_fixture *fx = *state;
    uint64_t rng = test_seed_or(53);
    struct storage *st = open_store(fx->dir, STORAGE_MODEL_EVENTS, 0);
    struct fed f;
    feed(st, &f, &rng);
    uint64_t released = 0;
    assert_int_equal(storage_release_range(st, SOURCE, LO, &released), 0);
    assert_int_equal(storage_commit(st), 0);
    for (uint32_t d = 0; d < DAYS; d++) {
        for (uint32_t s = 0; s < SHARDS; s++) {
            struct storage_compact_report rep;
            assert_int_equal(storage_compact(st, DAY0 + (int32_t)d, s, &rep), 1);
            assert_int_equal(rep.rows_after, rep.rows_before);
            assert_int_equal(rep.rows_after, f.rows[d][s] + f.in_range[d][s]);
        }
    }
    assert_counts(st, &f, true);
    assert_pairs(st, &f, true);
    assert_int_equal(storage_release_range(st, SOURCE, LO, &released), 0);
    assert_int_equal(released, 0);
    storage_close(st);
    assert_fsck_clean(fx->dir, f.in_range_total);
}

static void test_release_range_refused(void **state)
{
    /* The orders model, uncommitted appends, a source that is not a Kafka partition and a
     * negative lo are usage errors, and leave nothing released. */
    struct test_store_fixture *fx = *state;
    uint64_t rng = test_seed_or(59);
    snprintf(fx->path, sizeof(fx->path), "%s/orders", fx->dir);
    struct storage *st = open_store(fx->path, STORAGE_MODEL_ORDERS, 0);
    uint64_t released = 1;
    assert_int_equal(storage_release_range(st, SOURCE, LO, &released), -DS_EUSAGE);
    assert_int_equal(released, 0);
    storage_close(st);

    st = open_store(fx->dir, STORAGE_MODEL_EVENTS, 0);
    struct fed f;
    feed(st, &f, &rng);
    struct ds_event e;
    test_event_random_plain(&rng, DAY0, &e);
    struct ds_source src = {.partition = SOURCE, .offset = f.next[SOURCE]};
    assert_int_equal(storage_append(st, DAY0, 0, &e, &src), 0);
    assert_int_equal(storage_release_range(st, SOURCE, LO, &released), -DS_EUSAGE);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(storage_release_range(st, DS_SOURCE_FILE, 0, &released), -DS_EUSAGE);
    assert_int_equal(storage_release_range(st, SOURCE, -1, &released), -DS_EUSAGE);
    assert_int_equal(storage_pending_events(st), 0);
    storage_close(st);
}

static void test_release_range_fsck_finds_retraction_without_row(void **state)
{
    /* A retraction whose row is gone (its block quarantined by fsck --repair) cancels no row:
     * fsck counts it unmatched and reports damage; the rest stays matched. */
    struct test_store_fixture *fx = *state;
    uint64_t rng = test_seed_or(61);
    struct storage *st = open_store(fx->dir, STORAGE_MODEL_EVENTS, 0);
    for (int64_t i = 0; i < 20; i++) {
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        struct ds_source src = {.partition = SOURCE, .offset = i};
        assert_int_equal(storage_append(st, DAY0, 0, &e, &src), 0);
        if (i % 10 == 9) {
            assert_int_equal(storage_commit(st), 0); /* blocks of 10 rows */
        }
    }
    uint64_t released = 0;
    assert_int_equal(storage_release_range(st, SOURCE, 0, &released), 0);
    assert_int_equal(released, 20);
    assert_int_equal(storage_commit(st), 0);
    storage_close(st);
    assert_fsck_clean(fx->dir, 20);

    test_store_block_damage(fx->dir, DAY0, 0, 0);
    struct storage_fsck_options repair = {.repair = true, .report_file = NULL};
    struct storage_fsck_report r;
    memset(&r, 0, sizeof(r));
    assert_int_equal(storage_fsck(fx->dir, &repair, &r), 1);
    memset(&r, 0, sizeof(r));
    struct storage_fsck_options check = {.repair = false, .report_file = NULL};
    assert_int_equal(storage_fsck(fx->dir, &check, &r), 1);
    assert_int_equal(r.blocks_bad, 0);
    assert_int_equal(r.retractions, 20);
    assert_int_equal(r.retractions_unmatched, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_release_range_mixed_blocks_days_and_shards,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_release_range_resumes_after_eagain, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_release_range_crash_before_and_after_commit,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_release_range_merge_keeps_rows_and_retractions,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_release_range_refused, test_store_setup,
                                        test_store_teardown),
        cmocka_unit_test_setup_teardown(test_release_range_fsck_finds_retraction_without_row,
                                        test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
