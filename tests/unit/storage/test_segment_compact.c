/*
 * Tests of segment compaction in both data models (storage_compact, storage_compact_due): the
 * events model's small-block merge keeps every row, in order, in fewer blocks, and a follower of
 * positions and a reopen read it as before; a crash after any slice of a compaction in progress
 * (each pass, the tail, right after the swap) loses no committed row and leaves no rewrite file
 * behind once the writer reopens.
 *
 * The crash is a real one: a child process runs the writer and kills itself with SIGKILL right
 * after the chosen slice, so the rewrite's files stay as it left them, unclosed. Slices of one
 * block each (storage_config.compact_slice_ns = 1) make the slice boundaries deterministic.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
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
#define DAY0_TEXT "2026-01-21"
#define BLOCK_EVENTS 64u

static struct storage *open_store(const char *dir, enum storage_model model, bool read_only,
                                  uint64_t slice_ns)
{
    struct storage_config cfg;
    test_store_config(&cfg, dir, model, read_only, 4096);
    cfg.block_events_max = BLOCK_EVENTS;
    cfg.compact_dead_rows_min = 64;
    cfg.compact_slice_ns = slice_ns;
    return test_store_open(&cfg);
}

/* ---- what a partition holds ---------------------------------------------------------------- */

/* A row's fields hashed (those a retraction repeats, plus items). */
static uint64_t row_hash(const struct ds_event *e)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    uint64_t words[] = {(uint64_t)e->order_id.value,
                        (uint64_t)e->customer_id.value,
                        (uint64_t)e->ts_ms,
                        (uint64_t)e->amount_units,
                        (uint64_t)e->order_id.is_string,
                        e->status_len,
                        e->items_bytes};
    for (size_t i = 0; i < DS_ARRAY_LEN(words); i++) {
        h = ds_mix64(h ^ words[i]) + i;
    }
    for (uint8_t i = 0; i < e->status_len; i++) {
        h = ds_mix64(h ^ (uint8_t)e->status[i]);
    }
    for (uint16_t i = 0; i < e->items_bytes; i++) {
        h = ds_mix64(h ^ e->items[i]);
    }
    return h;
}

/* Live rows as a multiset (a row adds its hash, a retraction takes the row it cancels away: a
 * compaction keeps it), and the stored rows in order (a merge keeps that too). */
struct rows_seen {
    uint64_t live_sum;
    uint64_t ordered;
    uint64_t rows;
    uint64_t retractions;
};

static int rows_seen_add(const struct ds_event *e, void *user)
{
    struct rows_seen *s = user;
    uint64_t h = row_hash(e);
    s->live_sum += e->retract ? (uint64_t)0 - h : h;
    s->ordered = ds_mix64(s->ordered ^ h ^ e->retract);
    s->rows++;
    s->retractions += e->retract;
    return 0;
}

static struct rows_seen rows_of(struct storage *st, int32_t day, uint32_t shard)
{
    struct rows_seen s = {0};
    assert_int_equal(storage_partition_scan(st, day, shard, rows_seen_add, &s), 0);
    return s;
}

/* Segment files in (DAY0, shard)'s directory. */
static uint32_t segment_files(const char *dir, uint32_t shard)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/parts/%s/%u", dir, DAY0_TEXT, shard);
    DIR *d = opendir(path);
    assert_non_null(d);
    uint32_t n = 0;
    for (struct dirent *de = readdir(d); de != NULL; de = readdir(d)) {
        size_t len = strlen(de->d_name);
        n += len > 4 && strcmp(de->d_name + len - 4, ".seg") == 0;
    }
    closedir(d);
    return n;
}

static void fsck_of(const char *dir, struct storage_fsck_report *r)
{
    struct storage_fsck_options options = {.repair = false, .report_file = NULL};
    memset(r, 0, sizeof(*r));
    assert_true(storage_fsck(dir, &options, r) >= 0);
}

/* ---- feeding ------------------------------------------------------------------------------- */

/* One event of order id (the orders model takes a new amount as a new version). */
static void append_order(struct storage *st, uint32_t shard, int64_t id, int64_t amount)
{
    struct ds_event e;
    memset(&e, 0, sizeof(e));
    test_id_int(&e.order_id, id);
    test_id_int(&e.customer_id, id % 13 + 1);
    e.ts_ms = (int64_t)DAY0 * 86400000 + id % 86400 * 1000;
    e.amount_units = amount;
    test_event_set_status(&e, amount % 2 == 0 ? "paid" : "pending");
    assert_int_equal(storage_append(st, DAY0, shard, &e, NULL), 0);
}

/* A day fed fast: commits of 3 events each into (DAY0, 0), so its blocks hold 3 rows. In the
 * orders model events is split between 60 orders, each updated again and again. */
static void feed_fast(struct storage *st, enum storage_model model, uint64_t *rng, uint32_t events)
{
    for (uint32_t i = 0; i < events; i++) {
        if (model == STORAGE_MODEL_ORDERS) {
            append_order(st, 0, (int64_t)(i % 60) + 1, (int64_t)i + 1);
        } else {
            struct ds_event e;
            test_event_random_plain(rng, DAY0, &e);
            assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), 0);
        }
        if (i % 3 == 2) {
            assert_int_equal(storage_commit(st), 0);
        }
    }
    assert_int_equal(storage_commit(st), 0);
}

/* One event into (DAY0, 1): a commit that leaves (DAY0, 0) idle. */
static void append_other(struct storage *st, enum storage_model model, uint64_t *rng)
{
    if (model == STORAGE_MODEL_ORDERS) {
        append_order(st, 1, 100000 + (int64_t)test_rng_below(rng, 1u << 30), 5);
        return;
    }
    struct ds_event e;
    test_event_random_plain(rng, DAY0, &e);
    assert_int_equal(storage_append(st, DAY0, 1, &e, NULL), 0);
}

/* ---- the events model's merge -------------------------------------------------------------- */

static void test_segment_compact_events_merge_keeps_every_row(void **state)
{
    /* A day fed fast in the events model holds a block per commit. Idle for
     * STORAGE_COMPACT_IDLE_COMMITS commits, storage_compact_due merges it: the same rows in the
     * same order, the same count and amount, full blocks; a reader's old position restarts at
     * the rewrite; a reopen (recovery removes the replaced segments), a reader and fsck agree. */
    struct test_store_fixture *fx = *state;
    uint64_t rng = test_seed_or(31);
    struct storage *st = open_store(fx->dir, STORAGE_MODEL_EVENTS, false, STORAGE_COMPACT_SLICE_NS);
    feed_fast(st, STORAGE_MODEL_EVENTS, &rng, 600);
    struct storage_partition_total before;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &before), 0);
    assert_int_equal(before.count, 600);
    assert_int_equal(before.blocks, 200);
    struct rows_seen rows_before = rows_of(st, DAY0, 0);
    struct storage *r = open_store(fx->dir, STORAGE_MODEL_EVENTS, true, STORAGE_COMPACT_SLICE_NS);
    struct storage_position old_pos = {0};
    struct rows_seen followed = {0};
    assert_int_equal(storage_partition_scan_from(r, DAY0, 0, &old_pos, rows_seen_add, &followed),
                     0);
    assert_int_equal(followed.rows, 600);

    struct storage_compact_report rep = {0};
    uint32_t commits = 0;
    int rc = 0;
    while (rc == 0) {
        append_other(st, STORAGE_MODEL_EVENTS, &rng);
        assert_int_equal(storage_commit(st), 0);
        commits++;
        rc = storage_compact_due(st, &rep);
        assert_true(rc >= 0);
        assert_true(commits <= 2 * STORAGE_COMPACT_IDLE_COMMITS);
    }
    assert_true(commits >= STORAGE_COMPACT_IDLE_COMMITS); /* not while it was written */
    assert_int_equal(rep.day, DAY0);
    assert_int_equal(rep.shard, 0);
    assert_int_equal(rep.rows_before, 600);
    assert_int_equal(rep.rows_after, 600);
    assert_true(rep.bytes_after < rep.bytes_before);
    struct storage_partition_total after;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &after), 0);
    assert_int_equal(after.count, before.count);
    assert_true(after.amount_units == before.amount_units);
    assert_int_equal(after.rows, before.rows);
    assert_int_equal(after.blocks, (600 + BLOCK_EVENTS - 1) / BLOCK_EVENTS);
    struct rows_seen rows_after = rows_of(st, DAY0, 0);
    assert_int_equal(rows_after.rows, rows_before.rows);
    assert_int_equal(rows_after.ordered, rows_before.ordered);
    assert_int_equal(storage_compact_due(st, &rep), 0); /* merged: not due again */

    /* The reader's position lies in a replaced segment: it reads the rewrite from its start
     * (a follower applies rows idempotently), and it counts as the writer does. */
    assert_int_equal(storage_refresh(r), 0);
    struct rows_seen again = {0};
    assert_int_equal(storage_partition_scan_from(r, DAY0, 0, &old_pos, rows_seen_add, &again), 0);
    assert_int_equal(again.ordered, rows_before.ordered);
    struct storage_partition_total tr;
    assert_int_equal(storage_partition_totals(r, DAY0, 0, NULL, 0, &tr), 0);
    assert_int_equal(tr.count, 600);
    assert_int_equal(tr.blocks, after.blocks);
    storage_close(r);
    storage_close(st);

    st = open_store(fx->dir, STORAGE_MODEL_EVENTS, false, STORAGE_COMPACT_SLICE_NS);
    assert_int_equal(segment_files(fx->dir, 0), 1); /* the replaced segment removed */
    assert_int_equal(rows_of(st, DAY0, 0).ordered, rows_before.ordered);
    /* storage_compact merges at once in the events model: every row kept again. */
    assert_int_equal(storage_compact(st, DAY0, 0, &rep), 1);
    assert_int_equal(rep.rows_before, 600);
    assert_int_equal(rep.rows_after, 600);
    storage_close(st);
    r = open_store(fx->dir, STORAGE_MODEL_EVENTS, true, STORAGE_COMPACT_SLICE_NS);
    assert_int_equal(rows_of(r, DAY0, 0).ordered, rows_before.ordered);
    storage_close(r);
    struct storage_fsck_report fr;
    fsck_of(fx->dir, &fr);
    assert_int_equal(fr.blocks_bad, 0);
    assert_int_equal(fr.orphan_segments, 0);
    assert_int_equal(fr.torn_bytes, 0);
    assert_int_equal(fr.events_ok, 600 + commits);
}

/* Every row of a partition with its source, in order (partition INT32_MIN: none). */
struct sourced_rows {
    uint64_t hash[400];
    struct ds_source source[400];
    uint32_t count;
};

static int sourced_rows_add(const struct ds_event *e, const struct ds_source *source, void *user)
{
    struct sourced_rows *r = user;
    assert_true(r->count < DS_ARRAY_LEN(r->hash));
    r->hash[r->count] = row_hash(e);
    r->source[r->count] =
        source != NULL ? *source : (struct ds_source){.partition = INT32_MIN, .offset = 0};
    r->count++;
    return 0;
}

static void assert_sourced_rows(struct storage *st, const struct sourced_rows *want)
{
    struct sourced_rows *got = calloc(1, sizeof(*got));
    assert_non_null(got);
    struct storage_position from = {0};
    assert_int_equal(storage_partition_scan_sources(st, DAY0, 0, &from, sourced_rows_add, got), 0);
    assert_int_equal(got->count, want->count);
    for (uint32_t i = 0; i < want->count; i++) {
        assert_true(got->hash[i] == want->hash[i]);
        assert_int_equal(got->source[i].partition, want->source[i].partition);
        assert_true(got->source[i].offset == want->source[i].offset);
    }
    free(got);
}

static void test_segment_compact_events_merge_keeps_sources(void **state)
{
    /* The events model's merge keeps each row's source (block version 4): rows of three Kafka
     * partitions mixed in blocks, rows appended without a source and a block with none at all
     * (written as version 1) come out of storage_compact in order with the sources they went
     * in with, for the writer, after a reopen and for a reader; fsck finds the rewrite clean. */
    struct test_store_fixture *fx = *state;
    uint64_t rng = test_seed_or(37);
    struct storage *st = open_store(fx->dir, STORAGE_MODEL_EVENTS, false, STORAGE_COMPACT_SLICE_NS);
    struct sourced_rows *want = calloc(1, sizeof(*want));
    assert_non_null(want);
    for (uint32_t i = 0; i < 300; i++) {
        struct ds_event e;
        test_event_random_plain(&rng, DAY0, &e);
        struct ds_source src = {.partition = (int32_t)(i % 3), .offset = 1000 + (int64_t)i};
        bool none = i % 10 == 0 || (i >= 150 && i < 153); /* 150..152: a block of none */
        assert_int_equal(storage_append(st, DAY0, 0, &e, none ? NULL : &src), 0);
        want->hash[want->count] = row_hash(&e);
        want->source[want->count++] = none ? (struct ds_source){.partition = INT32_MIN} : src;
        if (i % 3 == 2) {
            assert_int_equal(storage_commit(st), 0);
        }
    }
    assert_int_equal(storage_commit(st), 0);
    assert_sourced_rows(st, want);
    struct storage_compact_report rep = {0};
    assert_int_equal(storage_compact(st, DAY0, 0, &rep), 1);
    assert_int_equal(rep.rows_before, 300);
    assert_int_equal(rep.rows_after, 300);
    struct storage_partition_total after;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &after), 0);
    assert_int_equal(after.blocks, (300 + BLOCK_EVENTS - 1) / BLOCK_EVENTS);
    assert_sourced_rows(st, want);
    storage_close(st);

    st = open_store(fx->dir, STORAGE_MODEL_EVENTS, false, STORAGE_COMPACT_SLICE_NS);
    assert_sourced_rows(st, want);
    /* A second merge reads the version 4 blocks of the first: still every source. */
    assert_int_equal(storage_compact(st, DAY0, 0, &rep), 1);
    assert_sourced_rows(st, want);
    storage_close(st);
    struct storage *r = open_store(fx->dir, STORAGE_MODEL_EVENTS, true, STORAGE_COMPACT_SLICE_NS);
    assert_sourced_rows(r, want);
    storage_close(r);
    struct storage_fsck_report fr;
    fsck_of(fx->dir, &fr);
    assert_int_equal(fr.blocks_bad, 0);
    assert_int_equal(fr.events_ok, 300);
    free(want);
}

/* ---- crashes between slices ---------------------------------------------------------------- */

/* What the child committed before it died, and what it saw of the compaction. */
struct crash_note {
    struct rows_seen rows;
    struct storage_partition_total totals;
    uint64_t rows_at_start; /* the partition's rows when the compaction started */
    uint32_t slices;        /* slices run */
    int32_t swapped;        /* the last slice swapped the rewrite in */
    int32_t compacting;     /* a compaction is still in progress */
};

#define CRASH_EVENTS 150u /* 50 blocks of 3 events: as many slices per pass */

/* The child: makes (DAY0, 0) due (the orders model by its dead rows, the events model once
 * idle), then, from the compaction's start, appends to the partition every other commit (so
 * the rewrite has a tail to copy) and dies by SIGKILL right after slice `slices`. When the
 * compaction swaps before, it exits 3 instead. The note goes to fd either way. */
static void crash_child(const char *dir, enum storage_model model, uint32_t slices, int fd)
{
    uint64_t rng = 5;
    struct storage *st = open_store(dir, model, false, 1);
    struct crash_note note = {0};
    for (uint32_t turn = 0; turn < 10000; turn++) {
        if (storage_compacting(st) && turn % 2 == 0) {
            if (model == STORAGE_MODEL_ORDERS) {
                append_order(st, 0, (int64_t)(turn % 60) + 1, 1000000 + turn);
            } else {
                struct ds_event e;
                test_event_random_plain(&rng, DAY0, &e);
                assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), 0);
            }
        } else {
            append_other(st, model, &rng);
        }
        assert_int_equal(storage_commit(st), 0);
        bool was = storage_compacting(st);
        if (!was) {
            struct storage_partition_total t;
            assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &t), 0);
            note.rows_at_start = t.rows;
        }
        struct storage_compact_report rep;
        int rc = storage_compact_due(st, &rep);
        assert_true(rc >= 0);
        if (!was && !storage_compacting(st) && rc == 0) {
            continue; /* nothing due yet */
        }
        note.slices++;
        if (note.slices < slices && rc == 0) {
            continue;
        }
        note.rows = rows_of(st, DAY0, 0);
        note.swapped = rc == 1;
        note.compacting = storage_compacting(st);
        assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &note.totals), 0);
        assert_int_equal(write(fd, &note, sizeof(note)), (ssize_t)sizeof(note));
        if (note.slices < slices) {
            _exit(3); /* swapped before slice `slices` */
        }
        raise(SIGKILL);
    }
    _exit(4);
}

/* Feeds a new directory, runs the child with slices, and reads its note: true when it was
 * killed after slice `slices`, false when the compaction swapped before (note->slices then
 * says after how many). */
static bool crash_child_run(struct test_store_fixture *fx, enum storage_model model,
                            uint32_t slices, struct crash_note *note)
{
    snprintf(fx->path, sizeof(fx->path), "%s/%d-%u", fx->dir, (int)model, slices);
    uint64_t rng = 17;
    struct storage *st = open_store(fx->path, model, false, 1);
    feed_fast(st, model, &rng, CRASH_EVENTS);
    storage_close(st);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        crash_child(fx->path, model, slices, fds[1]);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], note, sizeof(*note));
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(n, (ssize_t)sizeof(*note));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        return false;
    }
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    return true;
}

/* One crash after slice `slices` of a compaction that swaps after slice `total`: the reopened
 * writer holds every committed row and no file of the rewrite (nor, after the swap, of the
 * replaced segments); a compaction runs again to its end. Returns whether the crash left such
 * files behind. */
static bool crash_run(struct test_store_fixture *fx, enum storage_model model, uint32_t slices)
{
    struct crash_note note;
    assert_true(crash_child_run(fx, model, slices, &note));
    assert_int_equal(note.slices, slices);
    /* Past its first slices a compaction in progress has a tail to copy. */
    assert_true(slices < 3 || !note.compacting || note.rows.rows > note.rows_at_start);

    /* The rewrite's segments (or, after a swap, the replaced ones) beside the partition's. */
    bool leftovers = segment_files(fx->path, 0) > 1;

    struct storage *st = open_store(fx->path, model, false, 1);
    assert_int_equal(segment_files(fx->path, 0), 1); /* recovery removed the rest */
    struct rows_seen got = rows_of(st, DAY0, 0);
    assert_int_equal(got.live_sum, note.rows.live_sum);
    assert_int_equal(got.ordered, note.rows.ordered); /* every stored row, in order */
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &t), 0);
    assert_int_equal(t.count, note.totals.count);
    assert_true(t.amount_units == note.totals.amount_units);
    assert_int_equal(t.rows, note.totals.rows);
    /* A compaction starts again and completes on the reopened store. */
    struct storage_compact_report rep;
    int rc = storage_compact(st, DAY0, 0, &rep);
    assert_true(rc == 1 || (rc == 0 && model == STORAGE_MODEL_ORDERS && t.rows == t.count));
    assert_int_equal(rows_of(st, DAY0, 0).live_sum, note.rows.live_sum);
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &t), 0);
    assert_int_equal(t.count, note.totals.count);
    assert_int_equal(t.rows, model == STORAGE_MODEL_ORDERS ? t.count : note.totals.rows);
    storage_close(st);
    struct storage_fsck_report fr;
    fsck_of(fx->path, &fr);
    assert_int_equal(fr.orphan_segments, 0);
    assert_int_equal(fr.blocks_bad, 0);
    assert_int_equal(fr.torn_bytes, 0);
    assert_int_equal(fr.retractions_unmatched, 0);
    test_tempdir_remove(fx->path);
    return leftovers;
}

static void crash_loop(struct test_store_fixture *fx, enum storage_model model)
{
    /* A run without a crash says how many slices the compaction takes (the last swaps). */
    struct crash_note note;
    assert_false(crash_child_run(fx, model, UINT32_MAX, &note));
    test_tempdir_remove(fx->path);
    uint32_t total = note.slices;
    assert_true(note.swapped);
    /* One block a slice: pass 1 (orders model) and pass 2 take one slice per block. */
    assert_true(total > CRASH_EVENTS / 3);
    /* The first slices, through each pass, the last ones of the tail, and right after the
     * swap (the replaced segments still on disk). */
    uint32_t at[] = {1, 2, 3, total / 4, total / 2, 3 * total / 4, total - 2, total - 1, total};
    uint32_t leftovers = 0;
    for (size_t i = 0; i < DS_ARRAY_LEN(at); i++) {
        leftovers += crash_run(fx, model, at[i]);
    }
    /* The events model writes its rewrite from the first slice; pass 1 of the orders model
     * (its first quarter or so) writes none yet. */
    assert_true(leftovers >= (model == STORAGE_MODEL_EVENTS ? DS_ARRAY_LEN(at) : 4));
    print_message("%u slices, crashed after 9 of them, %u leaving rewrite files\n", total,
                  leftovers);
}

static void test_segment_compact_crash_after_each_slice_events(void **state)
{
    crash_loop(*state, STORAGE_MODEL_EVENTS);
}

static void test_segment_compact_crash_after_each_slice_orders(void **state)
{
    crash_loop(*state, STORAGE_MODEL_ORDERS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_segment_compact_events_merge_keeps_every_row,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_segment_compact_events_merge_keeps_sources,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_segment_compact_crash_after_each_slice_events,
                                        test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_segment_compact_crash_after_each_slice_orders,
                                        test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
