/*
 * Unit tests of the day totals behind unfiltered counts: storage_day_totals and the
 * query_count path that uses them must answer exactly what the per-partition fan-out answers
 * (query_count_request.fanout, the oracle), field for field and group for group, for every day
 * and every range, while a live writer commits and a long-lived reader refreshes between
 * commits. Random data over many days and shards, in the events and the orders models (the
 * latter with retractions across days and shards), with shard counts growing (adaptive
 * sharding), a retention floor rising, damaged blocks (a payload byte flipped in a block just
 * committed), a reader whose shard map lags its storage (the day totals cannot answer and the
 * fan-out does), and a second reader that refreshes only at the end (a long stale list).
 * Randomised: prints its seed, replays DS_TEST_SEED.
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

#include "query/query.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

#define DAYS 14
#define ORDER_IDS 400
#define ROUNDS 24

struct world {
    char dir[64];
    enum storage_model model;
    uint64_t rng;
    int32_t day0;
    struct storage *w; /* the writer */
    struct shard_map *wmap;
    struct storage *r; /* refreshed after every commit */
    struct shard_map *rmap;
    struct storage *late; /* refreshed only at the end */
    struct shard_map *late_map;
    int64_t versions[ORDER_IDS];
    bool damaged_part[DAYS * SHARD_COUNT_MAX];
    uint32_t comparisons;
    uint32_t damaged;
    bool compact; /* compact now and then (the orders model) */
    uint32_t compacted;
};

static void world_open(struct world *x, enum storage_model model, uint32_t retention_days)
{
    memset(x, 0, sizeof(*x));
    x->model = model;
    /* With retention too: compactions beside a rising floor once lost rows, because the
     * writer's compaction reader missed a MANIFEST replaced by a file with its inode number and
     * size (storage_refresh pins the MANIFEST now; test_orders has the focused test). */
    x->compact = model == STORAGE_MODEL_ORDERS;
    x->rng = test_seed() ^ (uint64_t)model;
    x->day0 = test_day_of("2026-03-01");
    assert_int_equal(test_tempdir_make(x->dir, sizeof(x->dir)), 0);
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = x->dir;
    cfg.io_mode = STORAGE_IO_SYNC;
    cfg.model = model;
    cfg.retention_days = retention_days;
    cfg.block_events_max = 16; /* many blocks, so that damage hits one of several */
    assert_int_equal(storage_open(&cfg, &x->w), 0);
    assert_int_equal(shard_map_open(x->dir, 2, 0, &x->wmap), 0);
}

static void world_close(struct world *x)
{
    shard_map_close(x->late_map);
    storage_close(x->late);
    shard_map_close(x->rmap);
    storage_close(x->r);
    shard_map_close(x->wmap);
    storage_close(x->w);
    test_tempdir_remove(x->dir);
}

static void reader_open(struct world *x, struct storage **st, struct shard_map **map)
{
    assert_int_equal(storage_open_reader(x->dir, st), 0);
    assert_int_equal(shard_map_open(x->dir, 2, SHARD_MAP_READ_ONLY, map), 0);
}

/* One event on a day of [lo, hi], routed as ingest routes it; in the orders model a version of
 * one of ORDER_IDS orders (a new version moves it, with a retraction of the old one). */
static void append_one(struct world *x, int32_t lo, int32_t hi, bool *touched)
{
    int32_t day = lo + (int32_t)test_rng_below(&x->rng, (uint64_t)(hi - lo + 1));
    struct ds_event e;
    test_event_random_plain(&x->rng, day, &e);
    if (x->model == STORAGE_MODEL_ORDERS) {
        uint32_t id = (uint32_t)test_rng_below(&x->rng, ORDER_IDS);
        test_id_int(&e.order_id, (int64_t)id + 1); /* 0 is no id */
        e.has_version = true;
        e.version = ++x->versions[id];
    }
    int shards = shard_map_ensure(x->wmap, day);
    assert_true(shards > 0);
    uint32_t shard = shard_of_id(&e.order_id, (uint32_t)shards);
    int rc = storage_append(x->w, day, shard, &e, NULL);
    if (rc != 0 && rc != -ERANGE) { /* -ERANGE: below the retention floor */
        fail_msg("append: %s", ds_strerror(rc));
    }
    if (rc == 0) {
        touched[(uint32_t)(day - x->day0) * SHARD_COUNT_MAX + shard] = true;
    }
}

/* Flips a byte near the end of the last segment of a partition written this round, so that
 * the block there (committed by this round, read by no reader yet) fails its payload CRC. */
static void damage_one(struct world *x, const bool *touched)
{
    uint32_t start = (uint32_t)test_rng_below(&x->rng, DAYS * SHARD_COUNT_MAX);
    for (uint32_t k = 0; k < DAYS * SHARD_COUNT_MAX; k++) {
        uint32_t i = (start + k) % (DAYS * SHARD_COUNT_MAX);
        if (!touched[i]) {
            continue;
        }
        char date[DS_DATE_TEXT_SIZE];
        ds_date_format(x->day0 + (int32_t)(i / SHARD_COUNT_MAX), date);
        char dir[DS_PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/parts/%s/%u", x->dir, date, i % SHARD_COUNT_MAX);
        DIR *d = opendir(dir);
        if (d == NULL) {
            continue; /* the day was dropped since */
        }
        char last[256] = "";
        for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
            if (strstr(e->d_name, ".seg") != NULL && strcmp(e->d_name, last) > 0) {
                snprintf(last, sizeof(last), "%s", e->d_name);
            }
        }
        closedir(d);
        char path[DS_PATH_MAX + 272];
        snprintf(path, sizeof(path), "%s/%s", dir, last);
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        struct stat sb;
        assert_int_equal(fstat(fd, &sb), 0);
        uint8_t byte = 0;
        assert_int_equal(pread(fd, &byte, 1, sb.st_size - 3), 1);
        byte ^= 0xff;
        assert_int_equal(pwrite(fd, &byte, 1, sb.st_size - 3), 1);
        close(fd);
        x->damaged++;
        x->damaged_part[i] = true;
        return;
    }
}

/* Compacts a partition of the orders model that holds no damage (a compaction reads every
 * event): its rewrite replaces its segments, and a reader drops the partition's summary. */
static void compact_one(struct world *x)
{
    uint32_t start = (uint32_t)test_rng_below(&x->rng, DAYS * SHARD_COUNT_MAX);
    for (uint32_t k = 0; k < DAYS * SHARD_COUNT_MAX; k++) {
        uint32_t i = (start + k) % (DAYS * SHARD_COUNT_MAX);
        int32_t day = x->day0 + (int32_t)(i / SHARD_COUNT_MAX);
        if (x->damaged_part[i] || i % SHARD_COUNT_MAX >= shard_map_get(x->wmap, day) ||
            day < storage_retention_floor(x->w)) {
            continue;
        }
        struct storage_compact_report report;
        int rc = storage_compact(x->w, day, i % SHARD_COUNT_MAX, &report);
        assert_true(rc == 0 || rc == 1);
        if (rc == 1) {
            x->compacted++;
            return;
        }
    }
}

static void assert_results_equal(const struct query_count_result *a,
                                 const struct query_count_result *b)
{
    assert_int_equal(a->count, b->count);
    assert_true(a->amount_units == b->amount_units);
    assert_int_equal(a->partitions, b->partitions);
    assert_int_equal(a->blocks, b->blocks);
    assert_int_equal(a->bytes, b->bytes);
    assert_int_equal(a->damaged_blocks, b->damaged_blocks);
    assert_int_equal(a->model, b->model);
    assert_int_equal(a->retention_floor, b->retention_floor);
    assert_int_equal(a->group_count, b->group_count);
    for (size_t i = 0; i < a->group_count; i++) {
        assert_int_equal(a->groups[i].day, b->groups[i].day);
        assert_int_equal(a->groups[i].shard, b->groups[i].shard);
        assert_int_equal(a->groups[i].hour, b->groups[i].hour);
        assert_int_equal(a->groups[i].count, b->groups[i].count);
        assert_true(a->groups[i].amount_units == b->groups[i].amount_units);
    }
}

/* The day-totals answer of [first, last] by `by` against the fan-out's on the same handle, and
 * (when given) against the fan-out of another handle over the same commits. */
static void compare(struct world *x, struct storage *st, const struct shard_map *map,
                    struct storage *other, const struct shard_map *other_map, int32_t first,
                    int32_t last, enum query_group by)
{
    struct query_count_request req = {.day_first = first, .day_last = last, .by = by};
    struct query_count_result fast, slow;
    assert_int_equal(query_count(st, map, &req, &fast), 0);
    req.fanout = true;
    assert_int_equal(query_count(st, map, &req, &slow), 0);
    assert_results_equal(&fast, &slow);
    query_count_result_deinit(&slow);
    if (other != NULL) {
        assert_int_equal(query_count(other, other_map, &req, &slow), 0);
        assert_results_equal(&fast, &slow);
        query_count_result_deinit(&slow);
    }
    query_count_result_deinit(&fast);
    x->comparisons++;
}

/* Every day and every range of the window (a day before and after it included), by nothing,
 * day and hour; against a reader opened now when fresh is set. */
static void compare_all(struct world *x, struct storage *st, const struct shard_map *map,
                        bool fresh)
{
    struct storage *other = NULL;
    struct shard_map *other_map = NULL;
    if (fresh) {
        reader_open(x, &other, &other_map);
    }
    static const enum query_group groups[] = {QUERY_GROUP_NONE, QUERY_GROUP_DAY, QUERY_GROUP_HOUR};
    for (int32_t a = x->day0 - 1; a <= x->day0 + DAYS; a++) {
        for (int32_t b = a; b <= x->day0 + DAYS; b++) {
            for (size_t g = 0; g < DS_ARRAY_LEN(groups); g++) {
                compare(x, st, map, other, other_map, a, b, groups[g]);
            }
        }
    }
    shard_map_close(other_map);
    storage_close(other);
}

/* storage_day_totals of every day equals the sum of storage_partition_totals over its shards. */
static void check_day_totals(struct world *x, struct storage *st, const struct shard_map *map)
{
    for (int32_t day = x->day0; day < x->day0 + DAYS; day++) {
        uint32_t shards = shard_map_get(map, day);
        struct storage_day_total d;
        int rc = storage_day_totals(st, day, shards, &d);
        assert_true(rc == 0 || rc == 1);
        if (rc == 1) {
            continue; /* the map lags storage: the count fans out (compare checks it) */
        }
        struct storage_day_total sum = {0};
        for (uint32_t shard = 0; shard < shards; shard++) {
            struct storage_partition_total t;
            assert_int_equal(storage_partition_totals(st, day, shard, NULL, 0, &t), 0);
            sum.count += t.count;
            sum.amount_units += t.amount_units;
            sum.blocks += t.blocks;
            sum.bytes += t.bytes;
            sum.rows += t.rows;
            sum.damaged_blocks += t.damaged_blocks;
            for (int h = 0; h < 24; h++) {
                sum.hours[h].count += t.hours[h].count;
                sum.hours[h].amount_units += t.hours[h].amount_units;
            }
        }
        assert_int_equal(d.count, sum.count);
        assert_true(d.amount_units == sum.amount_units);
        assert_int_equal(d.blocks, sum.blocks);
        assert_int_equal(d.bytes, sum.bytes);
        assert_int_equal(d.rows, sum.rows);
        assert_int_equal(d.damaged_blocks, sum.damaged_blocks);
        for (int h = 0; h < 24; h++) {
            assert_int_equal(d.hours[h].count, sum.hours[h].count);
            assert_true(d.hours[h].amount_units == sum.hours[h].amount_units);
        }
        assert_true(d.shard_end <= shards);
    }
}

/* One round: appends to a window of days that moves forward (so that a retention floor rises),
 * sometimes grows a day's shard count first, commits, sometimes damages a block just committed,
 * and refreshes the reader (its shard map only sometimes: a lagging map). */
static void round_run(struct world *x, uint32_t round)
{
    bool touched[DAYS * SHARD_COUNT_MAX];
    memset(touched, 0, sizeof(touched));
    int32_t lo = x->day0 + (int32_t)(round * (DAYS - 5) / ROUNDS);
    int32_t hi = lo + 4;
    if (test_rng_below(&x->rng, 3) == 0) {
        int32_t day = lo + (int32_t)test_rng_below(&x->rng, 5);
        int shards = shard_map_ensure(x->wmap, day);
        assert_true(shards > 0);
        uint32_t grown = (uint32_t)shards * 2 <= 32 ? (uint32_t)shards * 2 : 32;
        assert_int_equal(shard_map_grow(x->wmap, day, grown), 0);
    }
    uint32_t n = 50 + (uint32_t)test_rng_below(&x->rng, 300);
    for (uint32_t i = 0; i < n; i++) {
        append_one(x, lo, hi, touched);
    }
    assert_int_equal(shard_map_sync(x->wmap), 0); /* a writer syncs its map before it commits */
    assert_int_equal(storage_commit(x->w), 0);
    if (x->compact && test_rng_below(&x->rng, 2) == 0) {
        compact_one(x);
    }
    if (test_rng_below(&x->rng, 3) == 0) {
        damage_one(x, touched);
    }
    if (x->r == NULL) {
        reader_open(x, &x->r, &x->rmap);
        reader_open(x, &x->late, &x->late_map);
        compare_all(x, x->late, x->late_map, false); /* builds its summaries once, now */
    }
    assert_int_equal(storage_refresh(x->r), 0);
    if (test_rng_below(&x->rng, 4) != 0) {
        assert_int_equal(shard_map_reload(x->rmap), 0);
    }
}

static void run_model(enum storage_model model, uint32_t retention_days)
{
    struct world x;
    world_open(&x, model, retention_days);
    for (uint32_t round = 0; round < ROUNDS; round++) {
        round_run(&x, round);
        bool fresh = round % 6 == 5;
        if (fresh) {
            /* A reader opened now reads the map as it is: so must the one compared with it. */
            assert_int_equal(shard_map_reload(x.rmap), 0);
        }
        compare_all(&x, x.r, x.rmap, fresh);
        check_day_totals(&x, x.r, x.rmap);
    }
    assert_int_equal(shard_map_reload(x.rmap), 0);
    compare_all(&x, x.r, x.rmap, true);
    assert_int_equal(storage_refresh(x.late), 0);
    assert_int_equal(shard_map_reload(x.late_map), 0);
    compare_all(&x, x.late, x.late_map, true);
    check_day_totals(&x, x.late, x.late_map);
    /* The loops ran, and damage was injected and seen. */
    assert_true(x.comparisons > ROUNDS * 100);
    assert_true(x.damaged > 0);
    assert_true(!x.compact || x.compacted > 0);
    struct query_count_request all = {.day_first = x.day0, .day_last = x.day0 + DAYS - 1};
    struct query_count_result res;
    assert_int_equal(query_count(x.r, x.rmap, &all, &res), 0);
    assert_true(res.damaged_blocks > 0 || retention_days > 0); /* damage may be dropped */
    assert_true(res.count > 0);
    query_count_result_deinit(&res);
    world_close(&x);
}

static void test_count_days_match_fanout_events(void **state)
{
    /* The events model: every event counts; shards grow; a block damaged now and then. */
    (void)state;
    run_model(STORAGE_MODEL_EVENTS, 0);
}

static void test_count_days_match_fanout_orders(void **state)
{
    /* The orders model: versions move orders across days and shards (retractions), so day
     * totals must net them exactly as the fan-out does. */
    (void)state;
    run_model(STORAGE_MODEL_ORDERS, 0);
}

static void test_count_days_match_fanout_retention(void **state)
{
    /* A retention floor rising under the reader: days below it count zero on both paths. */
    (void)state;
    run_model(STORAGE_MODEL_ORDERS, 6);
}

static void test_count_days_refuse_what_they_cannot_answer(void **state)
{
    /* A writer's handle keeps no day totals, and a shard count below the day's highest shard
     * with data cannot be answered from them: both return 1 (the count fans out). A day never
     * written is zeros. */
    (void)state;
    struct world x;
    world_open(&x, STORAGE_MODEL_EVENTS, 0);
    bool touched[DAYS * SHARD_COUNT_MAX];
    memset(touched, 0, sizeof(touched));
    assert_int_equal(shard_map_grow(x.wmap, x.day0, 8), 0);
    for (int i = 0; i < 200; i++) {
        append_one(&x, x.day0, x.day0, touched);
    }
    assert_int_equal(shard_map_sync(x.wmap), 0);
    assert_int_equal(storage_commit(x.w), 0);
    struct storage_day_total d;
    assert_int_equal(storage_day_totals(x.w, x.day0, 8, &d), 1);
    reader_open(&x, &x.r, &x.rmap);
    assert_int_equal(storage_day_totals(x.r, x.day0, 8, &d), 0);
    assert_int_equal(d.shard_end, 8);
    assert_int_equal(d.count, 200);
    assert_int_equal(storage_day_totals(x.r, x.day0, 7, &d), 1);
    assert_int_equal(storage_day_totals(x.r, x.day0 + 1, 8, &d), 0);
    assert_int_equal(d.count, 0);
    assert_int_equal(d.blocks, 0);
    world_close(&x);
}

static void test_count_days_storage_error_is_the_fanouts(void **state)
{
    /* A partition that cannot be read (a directory in place of its segment) fails the count
     * with the error the fan-out returns, and keeps failing (it stays stale) until it reads. */
    (void)state;
    struct world x;
    world_open(&x, STORAGE_MODEL_EVENTS, 0);
    bool touched[DAYS * SHARD_COUNT_MAX];
    memset(touched, 0, sizeof(touched));
    for (int i = 0; i < 100; i++) {
        append_one(&x, x.day0, x.day0 + 1, touched);
    }
    assert_int_equal(shard_map_sync(x.wmap), 0);
    assert_int_equal(storage_commit(x.w), 0);
    reader_open(&x, &x.r, &x.rmap);
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(x.day0, date);
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/parts/%s/1/00000001.seg", x.dir, date);
    char moved[DS_PATH_MAX + 8];
    snprintf(moved, sizeof(moved), "%s.away", path);
    assert_int_equal(rename(path, moved), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    struct query_count_request req = {.day_first = x.day0, .day_last = x.day0 + 1};
    struct query_count_result res;
    assert_int_equal(query_count(x.r, x.rmap, &req, &res), -EISDIR);
    assert_int_equal(query_count(x.r, x.rmap, &req, &res), -EISDIR);
    req.fanout = true;
    assert_int_equal(query_count(x.r, x.rmap, &req, &res), -EISDIR);
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(rename(moved, path), 0);
    req.fanout = false;
    compare_all(&x, x.r, x.rmap, true);
    world_close(&x);
}

static void test_count_days_follow_a_repair(void **state)
{
    /* fsck --repair quarantines damaged blocks (manifest skip entries): a reader that counted
     * them refreshes, drops those partitions' summaries out of its day totals and rebuilds them
     * without the ranges, answering as the fan-out and a fresh reader do. */
    (void)state;
    struct world x;
    world_open(&x, STORAGE_MODEL_EVENTS, 0);
    for (uint32_t round = 0; round < ROUNDS && x.damaged < 2; round++) {
        round_run(&x, round);
    }
    assert_true(x.damaged >= 2);
    assert_int_equal(shard_map_reload(x.rmap), 0);
    compare_all(&x, x.r, x.rmap, true);
    struct query_count_request all = {.day_first = x.day0, .day_last = x.day0 + DAYS - 1};
    struct query_count_result before;
    assert_int_equal(query_count(x.r, x.rmap, &all, &before), 0);
    assert_true(before.damaged_blocks > 0);
    storage_close(x.w);
    x.w = NULL;
    struct storage_fsck_options options = {.repair = true};
    struct storage_fsck_report report;
    assert_int_equal(storage_fsck(x.dir, &options, &report), 0);
    assert_int_equal(storage_refresh(x.r), 0);
    compare_all(&x, x.r, x.rmap, true);
    struct query_count_result after;
    assert_int_equal(query_count(x.r, x.rmap, &all, &after), 0);
    assert_int_equal(after.damaged_blocks, 0);
    assert_true(after.count < before.count); /* the quarantined blocks' events are out */
    query_count_result_deinit(&before);
    query_count_result_deinit(&after);
    world_close(&x);
}

int main(void)
{
    printf("test_count_days: seed %llu (DS_TEST_SEED replays)\n", (unsigned long long)test_seed());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_days_match_fanout_events),
        cmocka_unit_test(test_count_days_match_fanout_orders),
        cmocka_unit_test(test_count_days_match_fanout_retention),
        cmocka_unit_test(test_count_days_refuse_what_they_cannot_answer),
        cmocka_unit_test(test_count_days_storage_error_is_the_fanouts),
        cmocka_unit_test(test_count_days_follow_a_repair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
