/*
 * Tests of the orders model in storage (storage/orders.c through storage.h): the rules that make
 * an event a new order, a replacement, a stale or an unchanged one; the retractions that keep
 * partition totals counting each order once; lookups by writers and readers; and that a crash
 * at any write or sync leaves the orders and the rows of one commit together.
 *
 * A small reference model in the test (struct ref) follows the same rules as
 * tests/integration/orders_oracle.py, so every run compares the store with it.
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

#include "storage/storage.h"
#include "tests/support/events.h"
#include "tests/support/fake_io.h"
#include "tests/support/tempdir.h"

#define DAY0 20474 /* 2026-01-21 */
#define SHARDS 3u
#define ABSENT (-1)

struct fixture {
    char dir[256];
    uint8_t scratch[STORAGE_ORDER_SCRATCH_BYTES];
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    test_tempdir_remove(fx->dir);
    free(fx);
    return 0;
}

static struct storage *open_store(const char *dir, struct storage_io *io, bool read_only)
{
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = dir;
    cfg.io = io;
    cfg.io_mode = STORAGE_IO_SYNC;
    cfg.read_only = read_only;
    cfg.partitions_max = 4096;
    cfg.open_bytes_max = 1u << 20; /* the least: open blocks a writer keeps show at once */
    cfg.model = read_only ? STORAGE_MODEL_RECORDED : STORAGE_MODEL_ORDERS;
    struct storage *st = NULL;
    int rc = storage_open(&cfg, &st);
    if (rc != 0) {
        fail_msg("storage_open %s: %s", dir, ds_strerror(rc));
    }
    return st;
}

/* ---- events and the reference ------------------------------------------------------------- */

/* One version: status is an index into STATUSES, version < 0 for none, day an offset from DAY0. */
static const char *const STATUSES[] = {"pending", "paid", "shipped", "cancelled"};

struct version {
    int64_t order;
    int64_t customer;
    int32_t day;
    int64_t ts_in_day_ms;
    uint32_t status;
    int64_t amount;
    int64_t version; /* ABSENT: none */
};

static void event_of(const struct version *v, struct ds_event *e)
{
    memset(e, 0, sizeof(*e));
    test_id_int(&e->order_id, v->order);
    test_id_int(&e->customer_id, v->customer);
    e->ts_ms = (int64_t)(DAY0 + v->day) * 86400000 + v->ts_in_day_ms;
    e->amount_units = v->amount;
    test_event_set_status(e, STATUSES[v->status]);
    e->has_version = v->version != ABSENT;
    e->version = e->has_version ? v->version : 0;
}

/* The reference: each order's current version, its floor, and versions seen. */
struct ref_order {
    bool exists;
    struct version cur;
    int64_t floor; /* ABSENT: none */
    uint32_t seen;
    uint32_t shard;
};

enum fate { CREATED, APPLIED, STALE, UNCHANGED };

static bool same_content(const struct version *a, const struct version *b)
{
    return a->customer == b->customer && a->day == b->day && a->ts_in_day_ms == b->ts_in_day_ms &&
           a->status == b->status && a->amount == b->amount;
}

static enum fate ref_apply(struct ref_order *o, const struct version *v, uint32_t shard)
{
    if (!o->exists) {
        *o = (struct ref_order){
            .exists = true, .cur = *v, .floor = v->version, .seen = 1, .shard = shard};
        return CREATED;
    }
    bool same = same_content(v, &o->cur);
    if (v->version != ABSENT && o->floor != ABSENT &&
        (v->version < o->floor || (v->version == o->floor && !same))) {
        return STALE;
    }
    if (same && (v->version == ABSENT || v->version == o->floor)) {
        return UNCHANGED;
    }
    o->cur = *v;
    o->floor = v->version != ABSENT ? v->version : o->floor;
    o->seen++;
    o->shard = shard;
    return APPLIED;
}

static void append_version(struct storage *st, const struct version *v, uint32_t shard,
                           const struct ds_source *src)
{
    struct ds_event e;
    event_of(v, &e);
    int rc = storage_append(st, DAY0 + v->day, shard, &e, src);
    if (rc != 0) {
        fail_msg("append order %lld: %s", (long long)v->order, ds_strerror(rc));
    }
}

static void expect_lookups(struct fixture *fx, struct storage *st, const struct ref_order *ref,
                           size_t n);

/* Every committed partition's net count and amount, and each order's lookup, equal the
 * reference. */
static void expect_ref(struct fixture *fx, struct storage *st, const struct ref_order *ref,
                       size_t n, int32_t days)
{
    for (int32_t d = 0; d < days; d++) {
        for (uint32_t s = 0; s < SHARDS; s++) {
            for (uint32_t k = 0; k <= DS_ARRAY_LEN(STATUSES); k++) {
                const char *status = k < DS_ARRAY_LEN(STATUSES) ? STATUSES[k] : NULL;
                uint64_t want = 0;
                int64_t amount = 0;
                for (size_t i = 0; i < n; i++) {
                    const struct ref_order *o = &ref[i];
                    if (o->exists && o->cur.day == d && o->shard == s &&
                        (status == NULL || o->cur.status == k)) {
                        want++;
                        amount += o->cur.amount;
                    }
                }
                struct storage_partition_total t;
                assert_int_equal(storage_partition_totals(st, DAY0 + d, s, status,
                                                          status ? strlen(status) : 0, &t),
                                 0);
                if (t.count != want || t.amount_units != (ds_i128)amount) {
                    fail_msg("day +%d shard %u status %s: count %llu amount %lld, want %llu "
                             "%lld",
                             d, s, status ? status : "*", (unsigned long long)t.count,
                             (long long)t.amount_units, (unsigned long long)want,
                             (long long)amount);
                }
            }
        }
    }
    expect_lookups(fx, st, ref, n);
}

/* Each order's lookup equals the reference (a writer's include what it did not commit yet). */
static void expect_lookups(struct fixture *fx, struct storage *st, const struct ref_order *ref,
                           size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct ds_id id;
        test_id_int(&id, (int64_t)i + 1);
        struct storage_order got;
        int rc = storage_order_get(st, &id, &got, fx->scratch, sizeof(fx->scratch));
        if (!ref[i].exists) {
            assert_int_equal(rc, -ENOENT);
            continue;
        }
        assert_int_equal(rc, 0);
        struct ds_event want;
        event_of(&ref[i].cur, &want);
        assert_int_equal(got.ts_ms, want.ts_ms);
        assert_int_equal(got.day, DAY0 + ref[i].cur.day);
        assert_int_equal(got.shard, ref[i].shard);
        assert_int_equal(got.amount_units, want.amount_units);
        assert_int_equal(got.customer_id.value, want.customer_id.value);
        assert_memory_equal(got.status, want.status, want.status_len);
        assert_int_equal(got.status_len, want.status_len);
        assert_int_equal(got.has_version, ref[i].floor != ABSENT);
        assert_int_equal(got.version, ref[i].floor != ABSENT ? ref[i].floor : 0);
        assert_int_equal(got.versions_seen, ref[i].seen);
    }
}

/* ---- the rules ----------------------------------------------------------------------------- */

static void test_orders_rules(void **state)
{
    /* Each rule once, in the oracle's order of tests, with the partition totals, the lookups
     * and the stats after each step. */
    struct fixture *fx = *state;
    struct storage *st = open_store(fx->dir, NULL, false);
    assert_int_equal(storage_model(st), STORAGE_MODEL_ORDERS);
    /* A commit before any order (a node's first barrier): nothing for the store to write. */
    struct ds_source none = {.partition = 0, .offset = 0};
    assert_int_equal(storage_source_advance(st, &none), 0);
    assert_int_equal(storage_commit(st), 0);
    struct ref_order ref[4] = {0};
    struct {
        struct version v;
        uint32_t shard;
        enum fate fate;
    } steps[] = {
        {{1, 7, 0, 1000, 0, 500, ABSENT}, 0, CREATED},   /* order 1, pending */
        {{1, 7, 0, 1000, 0, 500, ABSENT}, 0, UNCHANGED}, /* a producer's retry */
        {{1, 7, 0, 1000, 1, 500, ABSENT}, 1, APPLIED},   /* paid, routed to shard 1 */
        {{1, 8, 1, 2000, 1, 900, ABSENT}, 2, APPLIED},   /* another day and customer */
        {{2, 9, 0, 5000, 1, 100, 2}, 0, CREATED},        /* order 2 at version 2 */
        {{2, 9, 0, 5000, 0, 100, 1}, 0, STALE},          /* version 1 after version 2 */
        {{2, 9, 0, 5000, 2, 100, 2}, 0, STALE},          /* version 2 again, other content */
        {{2, 9, 0, 5000, 1, 100, 2}, 0, UNCHANGED},      /* version 2 again, same content */
        {{2, 9, 0, 5000, 2, 100, ABSENT}, 1, APPLIED},   /* no version: by arrival */
        {{2, 9, 0, 5000, 3, 100, 2}, 1, STALE},          /* the floor stays 2 */
        {{2, 9, 0, 5000, 2, 100, 3}, 1, APPLIED},        /* same content, higher version */
        {{3, 9, 2, 0, 3, 1, ABSENT}, 2, CREATED},
    };
    uint64_t fates[4] = {0};
    for (size_t i = 0; i < DS_ARRAY_LEN(steps); i++) {
        struct ds_source src = {.partition = 0, .offset = (int64_t)i};
        append_version(st, &steps[i].v, steps[i].shard, &src);
        enum fate f = ref_apply(&ref[steps[i].v.order - 1], &steps[i].v, steps[i].shard);
        assert_int_equal(f, steps[i].fate);
        fates[f]++;
        expect_lookups(fx, st, ref, 3); /* the writer sees its uncommitted orders */
        if (i % 4 == 3) {
            assert_int_equal(storage_commit(st), 0);
            expect_ref(fx, st, ref, 3, 3);
        }
    }
    assert_int_equal(storage_commit(st), 0);
    struct storage_order_stats stats;
    storage_order_stats(st, &stats);
    assert_int_equal(stats.orders, 3);
    assert_int_equal(stats.created, fates[CREATED]);
    assert_int_equal(stats.applied, fates[APPLIED]);
    assert_int_equal(stats.stale, fates[STALE]);
    assert_int_equal(stats.unchanged, fates[UNCHANGED]);
    /* Ignored events still move their source on: a restart does not read them again. */
    assert_int_equal(storage_source_next(st, 0), (int64_t)DS_ARRAY_LEN(steps));
    expect_ref(fx, st, ref, 4, 3);
    storage_close(st);
    st = open_store(fx->dir, NULL, false);
    expect_ref(fx, st, ref, 4, 3);
    storage_close(st);
    st = open_store(fx->dir, NULL, true);
    expect_ref(fx, st, ref, 4, 3);
    storage_close(st);
}

static void test_orders_items_and_string_ids(void **state)
{
    /* Items are part of the content and come back with the version; a string order id is
     * another order than the integer with the same digits. */
    struct fixture *fx = *state;
    struct storage *st = open_store(fx->dir, NULL, false);
    struct ds_event e;
    memset(&e, 0, sizeof(e));
    test_id_string(&e.order_id, "5", 1);
    test_id_int(&e.customer_id, 1);
    e.ts_ms = (int64_t)DAY0 * 86400000;
    test_event_set_status(&e, "paid");
    static const uint8_t items[] = {1, 3, 'p', 'e', 'n', 2};
    e.items = items;
    e.items_bytes = sizeof(items);
    assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), 0);
    assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), 0); /* unchanged */
    e.items = NULL;
    e.items_bytes = 0;
    assert_int_equal(storage_append(st, DAY0, 0, &e, NULL), 0); /* items gone: applied */
    struct ds_event n = e;
    test_id_int(&n.order_id, 5);
    n.items = items;
    n.items_bytes = sizeof(items);
    assert_int_equal(storage_append(st, DAY0, 0, &n, NULL), 0);
    assert_int_equal(storage_commit(st), 0);
    storage_close(st);
    st = open_store(fx->dir, NULL, true);
    struct storage_order o;
    assert_int_equal(storage_order_get(st, &e.order_id, &o, fx->scratch, sizeof(fx->scratch)), 0);
    assert_int_equal(o.items_bytes, 0);
    assert_null(o.items);
    assert_int_equal(o.versions_seen, 2);
    assert_int_equal(storage_order_get(st, &n.order_id, &o, fx->scratch, sizeof(fx->scratch)), 0);
    assert_int_equal(o.items_bytes, sizeof(items));
    assert_memory_equal(o.items, items, sizeof(items));
    assert_int_equal(o.versions_seen, 1);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &t), 0);
    assert_int_equal(t.count, 2);
    storage_close(st);
}

/* ---- readers and durability ---------------------------------------------------------------- */

static int count_visit(const struct storage_order *o, void *user)
{
    uint64_t *seen = user;
    assert_true(o->order_id.value >= 1 && o->order_id.value <= 64);
    assert_int_equal(seen[o->order_id.value - 1], 0);
    seen[o->order_id.value - 1] = o->versions_seen;
    return 0;
}

static void test_orders_reader_follows_and_uncommitted_is_dropped(void **state)
{
    /* A reader sees committed versions only, and newer ones after storage_refresh; a writer
     * closed without committing loses its versions with their rows; visit gives each current
     * order once. */
    struct fixture *fx = *state;
    struct storage *w = open_store(fx->dir, NULL, false);
    struct version v = {1, 1, 0, 0, 0, 10, ABSENT};
    append_version(w, &v, 0, NULL);
    assert_int_equal(storage_commit(w), 0);
    struct storage *r = open_store(fx->dir, NULL, true);
    struct ds_id id;
    test_id_int(&id, 1);
    struct storage_order o;
    assert_int_equal(storage_order_get(r, &id, &o, fx->scratch, sizeof(fx->scratch)), 0);
    assert_int_equal(o.status_len, strlen("pending"));
    v.status = 1;
    append_version(w, &v, 0, NULL);
    assert_int_equal(storage_order_get(w, &id, &o, fx->scratch, sizeof(fx->scratch)), 0);
    assert_int_equal(o.status_len, strlen("paid"));
    assert_int_equal(storage_refresh(r), 0);
    assert_int_equal(storage_order_get(r, &id, &o, fx->scratch, sizeof(fx->scratch)), 0);
    assert_int_equal(o.status_len, strlen("pending")); /* not committed yet */
    assert_int_equal(storage_commit(w), 0);
    assert_int_equal(storage_refresh(r), 0);
    assert_int_equal(storage_order_get(r, &id, &o, fx->scratch, sizeof(fx->scratch)), 0);
    assert_int_equal(o.status_len, strlen("paid"));
    assert_int_equal(o.versions_seen, 2);
    /* Uncommitted: a new order and an update, then a close (a crash). */
    struct version v2 = {2, 1, 0, 0, 0, 10, ABSENT};
    append_version(w, &v2, 1, NULL);
    v.status = 2;
    append_version(w, &v, 2, NULL);
    storage_close(w);
    w = open_store(fx->dir, NULL, false);
    test_id_int(&id, 2);
    assert_int_equal(storage_order_get(w, &id, &o, fx->scratch, sizeof(fx->scratch)), -ENOENT);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(w, DAY0, 0, "paid", 4, &t), 0);
    assert_int_equal(t.count, 1);
    assert_int_equal(storage_partition_totals(w, DAY0, 2, NULL, 0, &t), 0);
    assert_int_equal(t.count, 0);
    uint64_t seen[64] = {0};
    assert_int_equal(storage_order_visit(w, count_visit, seen), 0);
    assert_int_equal(seen[0], 2);
    assert_int_equal(seen[1], 0);
    storage_close(w);
    storage_close(r);
}

static void test_orders_events_model_keeps_no_orders(void **state)
{
    struct fixture *fx = *state;
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = fx->dir;
    cfg.model = STORAGE_MODEL_EVENTS;
    struct storage *st = NULL;
    assert_int_equal(storage_open(&cfg, &st), 0);
    struct version v = {1, 1, 0, 0, 0, 10, ABSENT};
    append_version(st, &v, 0, NULL);
    append_version(st, &v, 0, NULL);
    assert_int_equal(storage_commit(st), 0);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &t), 0);
    assert_int_equal(t.count, 2); /* every event counts */
    struct ds_id id;
    test_id_int(&id, 1);
    struct storage_order o;
    assert_int_equal(storage_order_get(st, &id, &o, fx->scratch, sizeof(fx->scratch)), -DS_EUSAGE);
    struct storage_order_stats stats;
    storage_order_stats(st, &stats);
    assert_int_equal(stats.orders, 0);
    assert_int_equal(stats.created, 0);
    storage_close(st);
}

/* ---- random streams and crashes ------------------------------------------------------------ */

enum { ORDERS = 40, DAYS = 3 };

static void random_version(uint64_t *rng, struct version *v)
{
    v->order = (int64_t)test_rng_below(rng, ORDERS) + 1;
    v->customer = (int64_t)test_rng_below(rng, 5) + 1;
    v->day = (int32_t)test_rng_below(rng, 8) == 0 ? (int32_t)test_rng_below(rng, DAYS) : 0;
    v->ts_in_day_ms = (int64_t)(v->order * 1000);
    v->status = (uint32_t)test_rng_below(rng, DS_ARRAY_LEN(STATUSES));
    v->amount = (int64_t)test_rng_below(rng, 3) * 100;
    v->version = test_rng_below(rng, 2) ? (int64_t)test_rng_below(rng, 6) : ABSENT;
}

/* One crash run: rounds of random versions, each committed when storage_commit succeeds, with
 * operation n failing (0: none), then a crash of mode and a reopen, which must hold exactly
 * the last acknowledged state, or the state of the failed commit when its MANIFEST record
 * survived the crash whole (never acknowledged, never half). Returns the operations issued. */
static uint64_t crash_run(struct fixture *fx, uint64_t n, enum fake_crash_mode mode)
{
    storage_close(open_store(fx->dir, NULL, false)); /* created (test_storage tests creation) */
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    fake_io_fail_nth(fake, n, -EIO);
    struct storage *st = open_store(fx->dir, fake_io_base(fake), false);
    struct ref_order pending[ORDERS] = {0}, committed[ORDERS] = {0};
    uint64_t rng = n * 977 + (uint64_t)mode + 1;
    for (int round = 0; round < 6; round++) {
        for (int k = 0; k < 15; k++) {
            struct version v;
            random_version(&rng, &v);
            uint32_t shard = (uint32_t)test_rng_below(&rng, SHARDS);
            struct ds_event e;
            event_of(&v, &e);
            if (storage_append(st, DAY0 + v.day, shard, &e, NULL) != 0) {
                goto crash; /* an early seal failed: nothing more is acknowledged */
            }
            (void)ref_apply(&pending[v.order - 1], &v, shard);
        }
        if (storage_commit(st) != 0) {
            break;
        }
        memcpy(committed, pending, sizeof(committed));
    }
crash:
    storage_close(st);
    uint64_t ops = fake_io_ops(fake);
    assert_int_equal(fake_io_crash(fake, n * 31 + (uint64_t)mode, mode), 0);
    fake_io_destroy(fake);
    st = open_store(fx->dir, NULL, false);
    struct ds_id id;
    test_id_int(&id, 1);
    /* Which state survived: the lookups tell, then everything must match it exactly. */
    bool is_committed = true;
    for (size_t i = 0; i < ORDERS && is_committed; i++) {
        struct storage_order o;
        test_id_int(&id, (int64_t)i + 1);
        int rc = storage_order_get(st, &id, &o, fx->scratch, sizeof(fx->scratch));
        is_committed =
            committed[i].exists ? rc == 0 && o.versions_seen == committed[i].seen : rc == -ENOENT;
    }
    expect_ref(fx, st, is_committed ? committed : pending, ORDERS, DAYS);
    storage_close(st);
    test_tempdir_remove(fx->dir);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    return ops;
}

static void test_orders_crash_loop_fail_every_operation(void **state)
{
    /* Fail the n-th write or sync for every n, then crash clean, torn or with garbage: the
     * orders store and the partitions come back together at a commit boundary. */
    struct fixture *fx = *state;
    uint64_t ops = crash_run(fx, 0, FAKE_CRASH_CLEAN);
    assert_true(ops > 20);
    for (uint64_t n = 1; n <= ops + 1; n++) {
        for (int mode = FAKE_CRASH_CLEAN; mode <= FAKE_CRASH_GARBAGE; mode++) {
            (void)crash_run(fx, n, (enum fake_crash_mode)mode);
        }
    }
}

static void test_orders_random_stream_matches_reference(void **state)
{
    /* Thousands of random versions (updates, moves, stale and repeated ones) with commits and
     * reopenings between them: totals per partition and status, and every lookup, equal the
     * reference at each step. */
    struct fixture *fx = *state;
    uint64_t seed = test_seed_or(12345);
    print_message("seed %llu\n", (unsigned long long)seed);
    uint64_t rng = seed;
    struct ref_order ref[ORDERS] = {0};
    for (int session = 0; session < 5; session++) {
        struct storage *st = open_store(fx->dir, NULL, false);
        for (int k = 0; k < 600; k++) {
            struct version v;
            random_version(&rng, &v);
            uint32_t shard = (uint32_t)test_rng_below(&rng, SHARDS);
            append_version(st, &v, shard, NULL);
            (void)ref_apply(&ref[v.order - 1], &v, shard);
            if (test_rng_below(&rng, 50) == 0) {
                assert_int_equal(storage_commit(st), 0);
            }
        }
        assert_int_equal(storage_commit(st), 0);
        expect_ref(fx, st, ref, ORDERS, DAYS);
        storage_close(st);
    }
}

/* ---- giving up a source partition ---------------------------------------------------------- */

static void test_orders_release_source_partition(void **state)
{
    /* Orders from Kafka partitions 0 and 1; partition 0 given up: its orders leave the counts
     * and the store (lookups miss, a reopen replays the tombstones), its position reads -1,
     * partition 1 is untouched, fsck-style totals stay consistent; reading partition 0 again
     * from its start (as the node taking it back does) creates its orders again. */
    struct fixture *fx = *state;
    struct storage *st = open_store(fx->dir, NULL, false);
    struct ref_order ref[ORDERS] = {0};
    uint64_t rng = 4242;
    struct version history[600];
    uint32_t shards[600];
    for (int k = 0; k < 600; k++) {
        random_version(&rng, &history[k]);
        shards[k] = (uint32_t)test_rng_below(&rng, SHARDS);
        struct ds_source src = {.partition = (int32_t)(history[k].order % 2), .offset = k};
        append_version(st, &history[k], shards[k], &src);
        (void)ref_apply(&ref[history[k].order - 1], &history[k], shards[k]);
    }
    assert_int_equal(storage_commit(st), 0);
    uint64_t released = 0;
    assert_int_equal(storage_release_source(st, 0, &released), 0);
    uint64_t even = 0;
    for (size_t i = 0; i < ORDERS; i++) {
        if (ref[i].exists && (i + 1) % 2 == 0) {
            even++;
            ref[i].exists = false; /* order ids 2, 4, ... came from partition 0 */
        }
    }
    assert_int_equal(released, even);
    assert_true(released > 5);
    assert_int_equal(storage_commit(st), 0);
    assert_int_equal(storage_source_next(st, 0), -1);
    assert_true(storage_source_next(st, 1) > 0);
    expect_ref(fx, st, ref, ORDERS, DAYS);
    storage_close(st);
    st = open_store(fx->dir, NULL, false); /* the tombstones replay */
    expect_ref(fx, st, ref, ORDERS, DAYS);
    assert_int_equal(storage_source_next(st, 0), -1);
    assert_int_equal(storage_release_source(st, 0, &released), 0);
    assert_int_equal(released, 0); /* nothing left to give up */
    /* The partition read again from its start: the same orders as before the release. */
    for (int k = 0; k < 600; k++) {
        if (history[k].order % 2 == 0) {
            struct ds_source src = {.partition = 0, .offset = k};
            append_version(st, &history[k], shards[k], &src);
            (void)ref_apply(&ref[history[k].order - 1], &history[k], shards[k]);
        }
    }
    assert_int_equal(storage_commit(st), 0);
    expect_ref(fx, st, ref, ORDERS, DAYS);
    struct storage_compact_report rep;
    for (int32_t d = 0; d < DAYS; d++) {
        for (uint32_t s = 0; s < SHARDS; s++) {
            assert_true(storage_compact(st, DAY0 + d, s, &rep) >= 0);
        }
    }
    expect_ref(fx, st, ref, ORDERS, DAYS);
    storage_close(st);
    st = open_store(fx->dir, NULL, true);
    expect_ref(fx, st, ref, ORDERS, DAYS);
    storage_close(st);
}

/* ---- compaction ---------------------------------------------------------------------------- */

struct scan_count {
    uint64_t rows, retractions;
};

static int count_rows(const struct ds_event *e, void *user)
{
    struct scan_count *c = user;
    c->rows++;
    c->retractions += e->retract;
    return 0;
}

/* Fills the store with a random update-heavy stream (committed), mirrored in ref. */
static void fill_random(struct storage *st, struct ref_order *ref, uint64_t *rng, int events)
{
    for (int k = 0; k < events; k++) {
        struct version v;
        random_version(rng, &v);
        uint32_t shard = (uint32_t)test_rng_below(rng, SHARDS);
        append_version(st, &v, shard, NULL);
        (void)ref_apply(&ref[v.order - 1], &v, shard);
        if (test_rng_below(rng, 100) == 0) {
            assert_int_equal(storage_commit(st), 0);
        }
    }
    assert_int_equal(storage_commit(st), 0);
}

static void test_orders_compaction_keeps_current_versions(void **state)
{
    /* Every partition compacted: counts, sums and lookups unchanged; the partition holds only
     * its current versions (no retraction, rows == count) in fewer bytes; a reopened writer and
     * a reader agree; a follower's position in a replaced segment restarts at the rewrite; more
     * versions after the compaction keep working. */
    struct fixture *fx = *state;
    struct ref_order ref[ORDERS] = {0};
    uint64_t rng = test_seed_or(777);
    struct storage *st = open_store(fx->dir, NULL, false);
    fill_random(st, ref, &rng, 3000);
    struct storage *r = open_store(fx->dir, NULL, true);
    struct storage_position old_pos = {0};
    struct scan_count seen = {0};
    assert_int_equal(storage_partition_scan_from(r, DAY0, 0, &old_pos, count_rows, &seen), 0);
    uint64_t compacted = 0;
    for (int32_t d = 0; d < DAYS; d++) {
        for (uint32_t s = 0; s < SHARDS; s++) {
            struct storage_compact_report rep;
            int rc = storage_compact(st, DAY0 + d, s, &rep);
            assert_true(rc == 0 || rc == 1);
            if (rc == 0) {
                continue;
            }
            compacted++;
            struct storage_partition_total t;
            assert_int_equal(storage_partition_totals(st, DAY0 + d, s, NULL, 0, &t), 0);
            assert_int_equal(rep.rows_after, t.count);
            assert_int_equal(t.rows, t.count);
            assert_int_equal(t.blocks, t.count > 0 ? 1 : 0); /* one block of current rows */
            assert_true(rep.rows_before > rep.rows_after);
            assert_true(rep.bytes_after < rep.bytes_before);
            struct scan_count c = {0};
            assert_int_equal(storage_partition_scan(st, DAY0 + d, s, count_rows, &c), 0);
            assert_int_equal(c.retractions, 0);
            assert_int_equal(c.rows, t.count);
        }
    }
    assert_true(compacted >= 3);
    expect_ref(fx, st, ref, ORDERS, DAYS);
    assert_int_equal(storage_refresh(r), 0);
    expect_ref(fx, r, ref, ORDERS, DAYS);
    /* The follower's old position is in a replaced segment: it reads the rewrite again. */
    struct scan_count again = {0};
    assert_int_equal(storage_partition_scan_from(r, DAY0, 0, &old_pos, count_rows, &again), 0);
    struct storage_partition_total t0;
    assert_int_equal(storage_partition_totals(r, DAY0, 0, NULL, 0, &t0), 0);
    assert_int_equal(again.rows, t0.count);
    storage_close(r);
    fill_random(st, ref, &rng, 1000); /* updates of compacted orders retract rewritten rows */
    expect_ref(fx, st, ref, ORDERS, DAYS);
    storage_close(st);
    char replaced[512];
    snprintf(replaced, sizeof(replaced), "%s/parts/2026-01-21/0/00000001.seg", fx->dir);
    assert_int_equal(access(replaced, F_OK), 0); /* kept for readers until its delay passed */
    st = open_store(fx->dir, NULL, false);
    assert_int_equal(access(replaced, F_OK), -1); /* recovery removed what was replaced */
    expect_ref(fx, st, ref, ORDERS, DAYS);
    struct storage_compact_report rep;
    assert_int_equal(storage_compact(st, DAY0, 0, &rep), 1); /* a second compaction */
    storage_close(st);
    st = open_store(fx->dir, NULL, true);
    expect_ref(fx, st, ref, ORDERS, DAYS);
    storage_close(st);
}

static void test_orders_reader_sees_every_replaced_manifest(void **state)
{
    /* A compaction replaces the MANIFEST (rename). Two in a row can leave a file that took the
     * inode number the first one freed, with the size a reader loaded: a reader comparing
     * (inode, size) alone kept its stale view, and the writer's compaction reader then rewrote
     * a partition without the rows committed since (rows lost; test_count_days with retention
     * found it). A reader pins the MANIFEST it loaded, so every refresh here must see the
     * writer's state. */
    struct fixture *fx = *state;
    struct storage *st = open_store(fx->dir, NULL, false);
    struct storage *r = open_store(fx->dir, NULL, true);
    int64_t id = 0;
    for (int round = 0; round < 160; round++) {
        /* 1 to 5 replacements between refreshes: which freed inode number a new file takes
         * depends on the file system; one of these lands on the one the reader loaded. */
        for (int k = 0; k <= round % 5; k++) {
            id++;
            struct version v = {id, id % 97 + 1, 0, round * 10 + k, 0, 100, ABSENT};
            append_version(st, &v, 0, NULL);
            v.status = 1; /* a second version: a retraction to compact away */
            append_version(st, &v, 0, NULL);
            assert_int_equal(storage_commit(st), 0);
            struct storage_compact_report rep;
            assert_int_equal(storage_compact(st, DAY0, 0, &rep), 1);
        }
        assert_int_equal(storage_refresh(r), 0);
        struct storage_partition_total tw, tr;
        assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &tw), 0);
        assert_int_equal(storage_partition_totals(r, DAY0, 0, NULL, 0, &tr), 0);
        assert_int_equal(tw.count, (uint64_t)id);
        assert_int_equal(tr.count, tw.count);
        assert_int_equal(tr.rows, tw.rows);
    }
    storage_close(r);
    storage_close(st);
}

static void test_orders_compaction_of_many_partitions_keeps_blocks_whole(void **state)
{
    /* Compacting partition after partition leaves no open block behind: each rewrite is one
     * block per partition, not one per row once the earlier rewrites filled the open-block
     * budget (1 MiB here). */
    struct fixture *fx = *state;
    struct storage *st = open_store(fx->dir, NULL, false);
    enum { DAYS_MANY = 60, PER_PARTITION = 400 };
    int64_t id = 0;
    for (int32_t d = 0; d < DAYS_MANY; d++) {
        for (uint32_t s = 0; s < SHARDS; s++) {
            for (int k = 0; k < PER_PARTITION; k++) {
                id++;
                struct version v = {id, id % 97 + 1, d, k * 1000, 0, 100 + k, ABSENT};
                append_version(st, &v, s, NULL);
                v.status = 1;
                append_version(st, &v, s, NULL);
            }
        }
        assert_int_equal(storage_commit(st), 0);
    }
    for (int32_t d = 0; d < DAYS_MANY; d++) {
        for (uint32_t s = 0; s < SHARDS; s++) {
            struct storage_compact_report rep;
            assert_int_equal(storage_compact(st, DAY0 + d, s, &rep), 1);
            struct storage_partition_total t;
            assert_int_equal(storage_partition_totals(st, DAY0 + d, s, "paid", 4, &t), 0);
            assert_int_equal(t.count, PER_PARTITION);
            assert_int_equal(t.blocks, 1);
        }
    }
    storage_close(st);
}

static void test_orders_compaction_due_after_enough_retractions(void **state)
{
    /* storage_compact_due leaves a partition alone until it has STORAGE_COMPACT_DEAD_ROWS_MIN
     * dead rows making a quarter of its rows, then rewrites it in slices between commits while
     * it takes more versions: the swap keeps those (the tail) and changes no total, and each
     * slice holds the writer for about STORAGE_COMPACT_SLICE_NS only. */
    struct fixture *fx = *state;
    struct storage *st = open_store(fx->dir, NULL, false);
    struct version v = {1, 1, 0, 0, 0, 10, ABSENT};
    struct storage_compact_report rep;
    uint32_t updates = 0;
    uint32_t started_at = 0;
    int due = 0;
    while (due == 0) {
        for (int k = 0; k < 1000; k++) {
            v.amount++;
            append_version(st, &v, 0, NULL);
            updates++;
        }
        assert_int_equal(storage_commit(st), 0);
        bool was_running = storage_compacting(st);
        due = storage_compact_due(st, &rep);
        assert_true(due >= 0);
        if (!was_running && (storage_compacting(st) || due == 1)) {
            started_at = updates;
        }
        assert_true(updates < 3 * STORAGE_COMPACT_DEAD_ROWS_MIN);
    }
    assert_int_equal(due, 1);
    assert_true(2 * (started_at - 1) >= STORAGE_COMPACT_DEAD_ROWS_MIN);
    assert_true(started_at < updates); /* the swap came at a later commit, with a tail */
    assert_true(rep.slices >= 2);
    assert_true(rep.slice_ns_max < 100ull * 1000 * 1000);
    /* the current version, plus the tail's versions and retractions */
    assert_int_equal(rep.rows_after, 1 + 2 * (uint64_t)(updates - started_at));
    assert_true(rep.rows_after < rep.rows_before);
    struct storage_partition_total t;
    assert_int_equal(storage_partition_totals(st, DAY0, 0, NULL, 0, &t), 0);
    assert_int_equal(t.count, 1);
    assert_true(t.amount_units == (ds_i128)v.amount);
    assert_int_equal(storage_compact(st, DAY0, 0, &rep), 1);
    assert_int_equal(rep.rows_after, 1);
    assert_int_equal(storage_compact_due(st, &rep), 0);
    storage_close(st);
}

/* A crash run of a compaction with operation n failing: afterwards the store answers ref
 * exactly (a compaction never changes an answer), whether the rewrite's MANIFEST took or not. */
static uint64_t compaction_crash_run(struct fixture *fx, uint64_t n, enum fake_crash_mode mode)
{
    struct ref_order ref[ORDERS] = {0};
    uint64_t rng = 99;
    struct storage *st = open_store(fx->dir, NULL, false);
    fill_random(st, ref, &rng, 800);
    storage_close(st);
    struct fake_io *fake = NULL;
    assert_int_equal(fake_io_create(&fake), 0);
    st = open_store(fx->dir, fake_io_base(fake), false);
    fake_io_fail_nth(fake, n, -EIO);
    for (uint32_t s = 0; s < SHARDS; s++) {
        struct storage_compact_report rep;
        if (storage_compact(st, DAY0, s, &rep) < 0) {
            break;
        }
    }
    storage_close(st);
    uint64_t ops = fake_io_ops(fake);
    assert_int_equal(fake_io_crash(fake, n * 17 + (uint64_t)mode, mode), 0);
    fake_io_destroy(fake);
    st = open_store(fx->dir, NULL, false);
    expect_ref(fx, st, ref, ORDERS, DAYS);
    storage_close(st);
    test_tempdir_remove(fx->dir);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    return ops;
}

static void test_orders_compaction_crash_loop(void **state)
{
    struct fixture *fx = *state;
    uint64_t ops = compaction_crash_run(fx, 0, FAKE_CRASH_CLEAN);
    assert_true(ops > 10);
    for (uint64_t n = 1; n <= ops + 1; n++) {
        for (int mode = FAKE_CRASH_CLEAN; mode <= FAKE_CRASH_GARBAGE; mode++) {
            (void)compaction_crash_run(fx, n, (enum fake_crash_mode)mode);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_orders_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orders_items_and_string_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orders_reader_follows_and_uncommitted_is_dropped,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_orders_events_model_keeps_no_orders, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orders_crash_loop_fail_every_operation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_orders_random_stream_matches_reference, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_orders_release_source_partition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orders_compaction_keeps_current_versions, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_orders_compaction_of_many_partitions_keeps_blocks_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orders_compaction_due_after_enough_retractions, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_orders_compaction_crash_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orders_reader_sees_every_replaced_manifest, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
