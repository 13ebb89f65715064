/*
 * Unit tests of query/count.c and query/render.c: count fan-out over a day range and the shard
 * map, groupings by shard, hour and day, status filters, range errors, the exact JSON document
 * of the HTTP API, and JSON string escaping.
 *
 * The contract example of docs/EVENTS.md is built from the fixtures
 * (tests/fixtures/shop.jsonl and busy-day.jsonl) as struct ds_event values, without the
 * JSON decoder: with 3 shards, 2026-01-21 holds orders 106, 340, 341, 342 in shards 1, 1, 2, 0,
 * a count of 4 read from 3 partitions, amount_sum "133.7400".
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
#include <sys/stat.h>
#include <unistd.h>

#include "query/query.h"
#include "tests/support/events.h"
#include "tests/support/tempdir.h"

#define DAY_MS 86400000LL
#define HOUR_MS 3600000LL

struct fixture {
    char dir[64];
    struct storage *st;
    struct shard_map *map;
};

/* One fixture line: order, customer, status, amount in 1/10000, timestamp in epoch ms. */
struct order {
    int64_t order_id;
    int64_t customer_id;
    const char *status;
    int64_t amount_units;
    const char *date;  /* UTC day */
    int64_t ms_in_day; /* UTC time of day */
};

/* shop.jsonl then busy-day.jsonl; 341's "12:30:00+02:00" is 10:30 UTC, 342's 1768996800000 ms
 * is 2026-01-21T12:00:00Z, order_date means midnight UTC, and 105 has no amount (0). */
static const struct order FIXTURE[] = {
    {101, 1, "paid", 400000, "2026-01-03", 0},
    {102, 2, "shipped", 255000, "2026-01-05", 0},
    {103, 3, "paid", 120000, "2026-01-10", 0},
    {104, 4, "shipped", 602500, "2026-01-15", 0},
    {105, 3, "pending", 0, "2026-01-20", 0},
    {106, 5, "paid", 187500, "2026-01-21", 0},
    {340, 2, "paid", 99900, "2026-01-21", 9 * HOUR_MS + 15 * 60000},
    {341, 1, "pending", 50000, "2026-01-21", 10 * HOUR_MS + 30 * 60000},
    {342, 3, "paid", 1000000, "2026-01-21", 12 * HOUR_MS},
};

static void event_of(const struct order *o, struct ds_event *e)
{
    memset(e, 0, sizeof(*e));
    e->order_id.value = o->order_id;
    e->customer_id.value = o->customer_id;
    e->ts_ms = (int64_t)test_day_of(o->date) * DAY_MS + o->ms_in_day;
    e->amount_units = o->amount_units;
    test_event_set_status(e, o->status);
}

/* Routes and appends an event as ingest does: day from ts, S(day) from the map, shard of id. */
static void ingest(struct fixture *fx, const struct ds_event *e)
{
    int32_t day = ds_day_from_ms(e->ts_ms);
    int shards = shard_map_ensure(fx->map, day);
    assert_true(shards > 0);
    uint32_t shard = shard_of_id(&e->order_id, (uint32_t)shards);
    assert_int_equal(storage_append(fx->st, day, shard, e, NULL), 0);
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(test_tempdir_make(fx->dir, sizeof(fx->dir)), 0);
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = fx->dir;
    cfg.io_mode = STORAGE_IO_SYNC;
    cfg.model = STORAGE_MODEL_EVENTS; /* the fixture counts events */
    assert_int_equal(storage_open(&cfg, &fx->st), 0);
    assert_int_equal(shard_map_open(fx->dir, 3, 0, &fx->map), 0);
    for (size_t i = 0; i < DS_ARRAY_LEN(FIXTURE); i++) {
        struct ds_event e;
        event_of(&FIXTURE[i], &e);
        ingest(fx, &e);
    }
    assert_int_equal(storage_commit(fx->st), 0);
    assert_int_equal(shard_map_sync(fx->map), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    shard_map_close(fx->map);
    storage_close(fx->st);
    test_tempdir_remove(fx->dir);
    free(fx);
    return 0;
}

static struct query_count_request request(const char *first, const char *last, const char *status,
                                          enum query_group by)
{
    struct query_count_request req;
    memset(&req, 0, sizeof(req));
    req.day_first = test_day_of(first);
    req.day_last = test_day_of(last);
    req.by = by;
    if (status != NULL) {
        req.has_status = true;
        req.status_len = (uint8_t)strlen(status);
        memcpy(req.status, status, req.status_len);
    }
    return req;
}

static void assert_amount(ds_i128 units, const char *text)
{
    char buf[DS_AMOUNT_TEXT_SIZE];
    ds_amount_format(units, buf);
    assert_string_equal(buf, text);
}

/* Renders res as JSON into a malloc'd string of exactly the bound (checked to be enough). */
static char *render(const struct query_count_request *req, const struct query_count_result *res)
{
    size_t bound = query_count_json_bound(res);
    char *json = malloc(bound);
    assert_non_null(json);
    int64_t n = query_count_json(req, res, json, bound);
    assert_true(n > 0);
    assert_int_equal(strlen(json), (size_t)n);
    return json;
}

/* ---- the contract example ------------------------------------------------------------------ */

static void test_count_contract_example_busy_day(void **state)
{
    /* docs/EVENTS.md: 2026-01-21 with 3 shards counts 4 orders from 3 partitions, shards
     * 0:1, 1:2, 2:1, amount_sum 133.7400. */
    struct fixture *fx = *state;
    struct query_count_request req = request("2026-01-21", "2026-01-21", NULL, QUERY_GROUP_SHARD);
    struct query_count_result res;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.count, 4);
    assert_int_equal(res.partitions, 3);
    assert_amount(res.amount_units, "133.7400");
    assert_int_equal(res.blocks, 3);
    assert_int_equal(res.group_count, 3);
    static const uint64_t per_shard[] = {1, 2, 1};
    static const char *const amounts[] = {"100.0000", "28.7400", "5.0000"};
    for (uint32_t k = 0; k < 3; k++) {
        assert_int_equal(res.groups[k].day, test_day_of("2026-01-21"));
        assert_int_equal(res.groups[k].shard, k);
        assert_int_equal(res.groups[k].count, per_shard[k]);
        assert_amount(res.groups[k].amount_units, amounts[k]);
    }
    /* The whole document, bytes included (the only figure the test does not choose), and the
     * directory's model (events: the fixture's store was created with the default). */
    assert_int_equal(res.model, STORAGE_MODEL_EVENTS);
    char *json = render(&req, &res);
    char want[1024];
    snprintf(want, sizeof(want),
             "{\"day\":\"2026-01-21\",\"to\":\"2026-01-21\",\"status\":null,\"count\":4,"
             "\"amount_sum\":\"133.7400\",\"partitions\":3,\"blocks\":3,\"bytes\":%llu,"
             "\"damaged_blocks\":0,\"model\":\"events\",\"by\":\"shard\",\"groups\":["
             "{\"key\":0,\"day\":\"2026-01-21\",\"partition\":\"DAY#2026-01-21#0\",\"count\":1,"
             "\"amount_sum\":\"100.0000\"},"
             "{\"key\":1,\"day\":\"2026-01-21\",\"partition\":\"DAY#2026-01-21#1\",\"count\":2,"
             "\"amount_sum\":\"28.7400\"},"
             "{\"key\":2,\"day\":\"2026-01-21\",\"partition\":\"DAY#2026-01-21#2\",\"count\":1,"
             "\"amount_sum\":\"5.0000\"}]}",
             (unsigned long long)res.bytes);
    assert_string_equal(json, want);
    free(json);
    query_count_result_deinit(&res);
}

static void test_count_contract_example_from_reader(void **state)
{
    /* A read-only opener of the same directory (dayshard count --data) gives the same answer. */
    struct fixture *fx = *state;
    struct storage_config cfg;
    storage_config_defaults(&cfg);
    cfg.dir = fx->dir;
    cfg.read_only = true;
    struct storage *reader = NULL;
    assert_int_equal(storage_open(&cfg, &reader), 0);
    struct shard_map *map = NULL;
    assert_int_equal(shard_map_open(fx->dir, 3, SHARD_MAP_READ_ONLY, &map), 0);
    struct query_count_request req = request("2026-01-21", "2026-01-21", NULL, QUERY_GROUP_NONE);
    struct query_count_result res;
    assert_int_equal(query_count(reader, map, &req, &res), 0);
    assert_int_equal(res.count, 4);
    assert_int_equal(res.partitions, 3);
    assert_amount(res.amount_units, "133.7400");
    assert_int_equal(res.group_count, 0);
    assert_null(res.groups);
    query_count_result_deinit(&res);
    shard_map_close(map);
    storage_close(reader);
}

/* ---- filters and groupings ----------------------------------------------------------------- */

static void test_count_status_filter(void **state)
{
    /* A status filter counts only that status, from the same partitions; an absent status
     * counts zero; the empty status is a status like any other. */
    struct fixture *fx = *state;
    static const struct {
        const char *status;
        uint64_t count;
        const char *amount;
    } cases[] = {{"paid", 3, "128.7400"},
                 {"pending", 1, "5.0000"},
                 {"shipped", 0, "0.0000"},
                 {"", 0, "0.0000"},
                 {"PAID", 0, "0.0000"}};
    for (size_t i = 0; i < DS_ARRAY_LEN(cases); i++) {
        struct query_count_request req =
            request("2026-01-21", "2026-01-21", cases[i].status, QUERY_GROUP_NONE);
        struct query_count_result res;
        assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
        assert_int_equal(res.count, cases[i].count);
        assert_amount(res.amount_units, cases[i].amount);
        assert_int_equal(res.partitions, 3);
        query_count_result_deinit(&res);
    }
}

static void test_count_by_hour(void **state)
{
    /* by=hour gives 24 rows per day, zeros included, each event in its UTC hour (341 at
     * 12:30+02:00 is hour 10). */
    struct fixture *fx = *state;
    struct query_count_request req = request("2026-01-21", "2026-01-21", NULL, QUERY_GROUP_HOUR);
    struct query_count_result res;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.group_count, 24);
    uint64_t total = 0;
    for (uint32_t h = 0; h < 24; h++) {
        const struct query_group_row *g = &res.groups[h];
        assert_int_equal(g->hour, h);
        assert_int_equal(g->day, test_day_of("2026-01-21"));
        uint64_t want = (h == 0 || h == 9 || h == 10 || h == 12) ? 1 : 0;
        assert_int_equal(g->count, want);
        total += g->count;
    }
    assert_int_equal(total, 4);
    assert_amount(res.groups[0].amount_units, "18.7500");
    assert_amount(res.groups[9].amount_units, "9.9900");
    assert_amount(res.groups[10].amount_units, "5.0000");
    assert_amount(res.groups[12].amount_units, "100.0000");
    query_count_result_deinit(&res);

    /* With a status filter the hours follow it. */
    req = request("2026-01-21", "2026-01-21", "pending", QUERY_GROUP_HOUR);
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    for (uint32_t h = 0; h < 24; h++) {
        assert_int_equal(res.groups[h].count, h == 10 ? 1 : 0);
    }
    query_count_result_deinit(&res);
}

static void test_count_by_day_range_with_empty_days(void **state)
{
    /* by=day over 2026-01-01..2026-01-22: one row per day, zeros for days without orders; the
     * partitions figure counts every shard the map gives each day, so a day known to the map
     * but holding no events still counts its shards, and a day it never saw counts none. */
    struct fixture *fx = *state;
    int32_t empty_known = test_day_of("2026-01-22");
    assert_int_equal(shard_map_ensure(fx->map, empty_known), 3);
    struct query_count_request req = request("2026-01-01", "2026-01-22", NULL, QUERY_GROUP_DAY);
    struct query_count_result res;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.group_count, 22);
    assert_int_equal(res.count, 9);
    assert_amount(res.amount_units, "271.4900");
    assert_int_equal(res.partitions, 7 * 3); /* six days with orders and 2026-01-22 */
    static const struct {
        const char *date;
        uint64_t count;
        const char *amount;
    } days[] = {{"2026-01-03", 1, "40.0000"}, {"2026-01-05", 1, "25.5000"},
                {"2026-01-10", 1, "12.0000"}, {"2026-01-15", 1, "60.2500"},
                {"2026-01-20", 1, "0.0000"},  {"2026-01-21", 4, "133.7400"}};
    for (size_t i = 0; i < res.group_count; i++) {
        const struct query_group_row *g = &res.groups[i];
        assert_int_equal(g->day, req.day_first + (int32_t)i);
        uint64_t want = 0;
        const char *amount = "0.0000";
        for (size_t j = 0; j < DS_ARRAY_LEN(days); j++) {
            if (test_day_of(days[j].date) == g->day) {
                want = days[j].count;
                amount = days[j].amount;
            }
        }
        assert_int_equal(g->count, want);
        assert_amount(g->amount_units, amount);
    }
    query_count_result_deinit(&res);

    /* A range of only unknown days: zero everything, zero partitions. */
    req = request("2025-06-01", "2025-06-10", NULL, QUERY_GROUP_DAY);
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.count, 0);
    assert_int_equal(res.partitions, 0);
    assert_int_equal(res.group_count, 10);
    query_count_result_deinit(&res);
}

static void test_count_by_shard_over_range_and_grown_map(void **state)
{
    /* by=shard over a range lists every (day, shard) of the map in order; a day whose shard
     * count grew fans out over the new shards too (zeros where nothing was written). */
    struct fixture *fx = *state;
    int32_t busy = test_day_of("2026-01-21");
    assert_int_equal(shard_map_grow(fx->map, busy, 5), 0);
    struct query_count_request req = request("2026-01-20", "2026-01-22", NULL, QUERY_GROUP_SHARD);
    struct query_count_result res;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.group_count, 3 + 5); /* 2026-01-22 is unknown: no shards */
    assert_int_equal(res.partitions, 8);
    assert_int_equal(res.count, 5);
    /* 2026-01-20: order 105 in shard 0 (105 mod 3); 2026-01-21: shards 0:1, 1:2, 2:1 as routed
     * with 3 shards, and the two new shards empty. */
    static const uint64_t counts[] = {1, 0, 0, 1, 2, 1, 0, 0};
    for (size_t i = 0; i < res.group_count; i++) {
        const struct query_group_row *g = &res.groups[i];
        assert_int_equal(g->day, i < 3 ? busy - 1 : busy);
        assert_int_equal(g->shard, i < 3 ? i : i - 3);
        assert_int_equal(g->count, counts[i]);
    }
    query_count_result_deinit(&res);
}

static void test_count_groups_sum_to_total(void **state)
{
    /* Over a larger random load across many days, every grouping's rows add up to the
     * ungrouped total (count and amount), with and without a status filter. */
    struct fixture *fx = *state;
    uint64_t seed = test_seed();
    uint64_t rng = seed;
    int32_t first = test_day_of("2026-02-01");
    for (int i = 0; i < 3000; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        struct ds_event e;
        memset(&e, 0, sizeof(e));
        e.order_id.value = (int64_t)(rng >> 33) + 1;
        e.customer_id.value = 1;
        e.ts_ms = (int64_t)(first + (int32_t)((rng >> 20) % 10)) * DAY_MS +
                  (int64_t)((rng >> 8) % (uint64_t)DAY_MS);
        e.amount_units = (int64_t)((rng >> 40) % 1000000) - 200000;
        test_event_set_status(&e, (rng >> 50) % 3 == 0 ? "paid" : "shipped");
        ingest(fx, &e);
    }
    assert_int_equal(storage_commit(fx->st), 0);
    static const char *const filters[] = {NULL, "paid", "shipped"};
    for (size_t f = 0; f < DS_ARRAY_LEN(filters); f++) {
        struct query_count_request req =
            request("2026-01-25", "2026-02-12", filters[f], QUERY_GROUP_NONE);
        struct query_count_result total;
        assert_int_equal(query_count(fx->st, fx->map, &req, &total), 0);
        if (filters[f] == NULL) {
            assert_int_equal(total.count, 3000);
        }
        static const enum query_group bys[] = {QUERY_GROUP_SHARD, QUERY_GROUP_HOUR,
                                               QUERY_GROUP_DAY};
        for (size_t b = 0; b < DS_ARRAY_LEN(bys); b++) {
            req.by = bys[b];
            struct query_count_result res;
            assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
            assert_int_equal(res.count, total.count);
            assert_true(res.amount_units == total.amount_units);
            assert_int_equal(res.partitions, total.partitions);
            uint64_t count = 0;
            ds_i128 amount = 0;
            for (size_t i = 0; i < res.group_count; i++) {
                count += res.groups[i].count;
                amount += res.groups[i].amount_units;
            }
            assert_int_equal(count, total.count);
            assert_true(amount == total.amount_units);
            char *json = render(&req, &res);
            free(json);
            query_count_result_deinit(&res);
        }
        query_count_result_deinit(&total);
    }
}

/* ---- range errors -------------------------------------------------------------------------- */

static void test_count_range_errors(void **state)
{
    /* to before day is -DS_EUSAGE; a range longer than the limit (the default 366 days, or the
     * request's own) is -DS_ELIMIT; the limit itself is fine; days outside 0..DS_DAY_MAX and an
     * over-long status are -DS_EUSAGE. No result memory is left to free on error. */
    struct fixture *fx = *state;
    struct query_count_result res;
    struct query_count_request req = request("2026-01-21", "2026-01-20", NULL, QUERY_GROUP_DAY);
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), -DS_EUSAGE);
    assert_null(res.groups);

    req = request("2026-01-01", "2026-01-01", NULL, QUERY_GROUP_DAY);
    req.day_last = req.day_first + (int32_t)QUERY_RANGE_DAYS_DEFAULT - 1;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.group_count, QUERY_RANGE_DAYS_DEFAULT);
    query_count_result_deinit(&res);
    req.day_last++;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), -DS_ELIMIT);
    assert_null(res.groups);

    req.range_days_max = 10;
    req.day_last = req.day_first + 9;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    query_count_result_deinit(&res);
    req.day_last = req.day_first + 10;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), -DS_ELIMIT);

    req.range_days_max = QUERY_RANGE_DAYS_MAX;
    req.day_last = req.day_first + (int32_t)QUERY_RANGE_DAYS_MAX;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), -DS_ELIMIT);

    req = request("2026-01-01", "2026-01-01", NULL, QUERY_GROUP_NONE);
    req.day_first = -1;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), -DS_EUSAGE);
    req.day_first = DS_DAY_MAX;
    req.day_last = DS_DAY_MAX + 1;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), -DS_EUSAGE);
    req.day_last = DS_DAY_MAX;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.count, 0);
    query_count_result_deinit(&res);
    query_count_result_deinit(NULL);

    /* A status length past the status array is a bad request, not an over-read. */
    req = request("2026-01-21", "2026-01-21", "paid", QUERY_GROUP_NONE);
    req.status_len = DS_STATUS_BYTES_MAX + 1;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), -DS_EUSAGE);
    req.status_len = DS_STATUS_BYTES_MAX;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    query_count_result_deinit(&res);
}

static void test_count_storage_error_propagates(void **state)
{
    /* Damage in the fan-out (a committed segment cut short) answers without the unreadable
     * block and says so in damaged_blocks; a storage error (a segment that cannot be read: a
     * directory in its place) is returned as is, with no group memory left behind. */
    struct fixture *fx = *state;
    char path[DS_PATH_MAX];
    snprintf(path, sizeof(path), "%s/parts/2026-01-21/1/00000001.seg", fx->dir);
    assert_int_equal(truncate(path, 70), 0);
    struct query_count_request req = request("2026-01-20", "2026-01-21", NULL, QUERY_GROUP_HOUR);
    struct query_count_result res;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.damaged_blocks, 1);
    assert_true(res.count > 0);
    query_count_result_deinit(&res);
    req = request("2026-01-20", "2026-01-20", NULL, QUERY_GROUP_NONE);
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.damaged_blocks, 0);
    query_count_result_deinit(&res);

    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    storage_close(fx->st); /* a fresh handle: the summary above is cached */
    assert_int_equal(storage_open_reader(fx->dir, &fx->st), 0);
    req = request("2026-01-20", "2026-01-21", NULL, QUERY_GROUP_HOUR);
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), -EISDIR);
    assert_null(res.groups);
    assert_int_equal(res.group_count, 0);
    /* Days not touching the damaged partition still answer. */
    req = request("2026-01-20", "2026-01-20", NULL, QUERY_GROUP_SHARD);
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.count, 1);
    query_count_result_deinit(&res);
}

static void test_count_group_parse(void **state)
{
    /* "shard", "hour" and "day" name the groupings; anything else is -DS_EUSAGE. */
    (void)state;
    enum query_group g = QUERY_GROUP_NONE;
    assert_int_equal(query_group_parse("shard", &g), 0);
    assert_int_equal(g, QUERY_GROUP_SHARD);
    assert_int_equal(query_group_parse("hour", &g), 0);
    assert_int_equal(g, QUERY_GROUP_HOUR);
    assert_int_equal(query_group_parse("day", &g), 0);
    assert_int_equal(g, QUERY_GROUP_DAY);
    static const char *const bad[] = {"", "Shard", "days", "none", "shard ", "status"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        g = QUERY_GROUP_HOUR;
        assert_int_equal(query_group_parse(bad[i], &g), -DS_EUSAGE);
        assert_int_equal(g, QUERY_GROUP_HOUR);
    }
}

/* ---- rendering ----------------------------------------------------------------------------- */

static void test_count_json_exact_small_cases(void **state)
{
    /* The JSON document for hand-built results, compared byte for byte: no grouping with a
     * status to escape, by=hour keys, by=day keys, negative and huge amounts. */
    (void)state;
    struct query_count_request req =
        request("2026-01-21", "2026-01-22", "pa\"id\n", QUERY_GROUP_NONE);
    struct query_count_result res;
    memset(&res, 0, sizeof(res));
    res.count = 4;
    res.amount_units = 1337400;
    res.partitions = 6;
    res.blocks = 3;
    res.bytes = 1234;
    res.damaged_blocks = 2; /* always present; a count over damaged blocks says so */
    char *json = render(&req, &res);
    assert_string_equal(json, "{\"day\":\"2026-01-21\",\"to\":\"2026-01-22\",\"status\":"
                              "\"pa\\\"id\\u000a\",\"count\":4,\"amount_sum\":\"133.7400\","
                              "\"partitions\":6,\"blocks\":3,\"bytes\":1234,\"damaged_blocks\":2}");
    free(json);

    struct query_group_row rows[2] = {
        {.day = test_day_of("2026-01-21"), .hour = 0, .count = 1, .amount_units = -5},
        {.day = test_day_of("2026-01-21"),
         .hour = 23,
         .count = 18446744073709551615ull,
         .amount_units = (ds_i128)INT64_MAX * 1000},
    };
    req = request("2026-01-21", "2026-01-21", NULL, QUERY_GROUP_HOUR);
    res.groups = rows;
    res.group_count = 2;
    res.amount_units = -10000;
    json = render(&req, &res);
    assert_string_equal(
        json, "{\"day\":\"2026-01-21\",\"to\":\"2026-01-21\",\"status\":null,"
              "\"count\":4,\"amount_sum\":\"-1.0000\",\"partitions\":6,"
              "\"blocks\":3,\"bytes\":1234,\"damaged_blocks\":2,\"by\":\"hour\",\"groups\":["
              "{\"key\":\"2026-01-21T00:00:00Z\",\"count\":1,"
              "\"amount_sum\":\"-0.0005\"},"
              "{\"key\":\"2026-01-21T23:00:00Z\",\"count\":18446744073709551615,"
              "\"amount_sum\":\"922337203685477580.7000\"}]}");
    free(json);

    req.by = QUERY_GROUP_DAY;
    res.group_count = 1;
    json = render(&req, &res);
    assert_string_equal(
        json, "{\"day\":\"2026-01-21\",\"to\":\"2026-01-21\",\"status\":null,"
              "\"count\":4,\"amount_sum\":\"-1.0000\",\"partitions\":6,"
              "\"blocks\":3,\"bytes\":1234,\"damaged_blocks\":2,\"by\":\"day\",\"groups\":["
              "{\"key\":\"2026-01-21\",\"count\":1,\"amount_sum\":\"-0.0005\"}]}");
    free(json);

    /* An empty grouping still has its (empty) array. */
    req.by = QUERY_GROUP_SHARD;
    res.group_count = 0;
    res.groups = NULL;
    json = render(&req, &res);
    assert_non_null(strstr(json, ",\"by\":\"shard\",\"groups\":[]}"));
    free(json);
}

static void test_count_json_too_small_buffer(void **state)
{
    /* Every buffer shorter than the document (plus its NUL) is -ENOSPC; the exact size works. */
    (void)state;
    struct query_count_request req = request("2026-01-21", "2026-01-21", "paid", QUERY_GROUP_DAY);
    struct query_group_row row = {.day = test_day_of("2026-01-21"), .count = 2, .amount_units = 3};
    struct query_count_result res = {
        .count = 2, .amount_units = 3, .partitions = 3, .group_count = 1, .groups = &row};
    char *full = render(&req, &res);
    size_t len = strlen(full);
    for (size_t cap = 0; cap <= len; cap++) {
        char *buf = malloc(cap > 0 ? cap : 1);
        assert_non_null(buf);
        assert_true(query_count_json(&req, &res, buf, cap) == -ENOSPC);
        free(buf);
    }
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    assert_true(query_count_json(&req, &res, buf, len + 1) == (int64_t)len);
    assert_string_equal(buf, full);
    free(buf);
    free(full);
}

static void test_count_json_bound_holds_worst_case(void **state)
{
    /* query_count_json_bound is enough for the longest values: a 32-byte status of control
     * characters, maximal counts and amounts, shard keys of 4 digits. */
    (void)state;
    struct query_count_request req = request("9999-12-31", "9999-12-31", NULL, QUERY_GROUP_SHARD);
    req.has_status = true;
    req.status_len = DS_STATUS_BYTES_MAX;
    memset(req.status, 0x01, DS_STATUS_BYTES_MAX);
    struct query_group_row rows[SHARD_COUNT_MAX];
    for (uint32_t i = 0; i < SHARD_COUNT_MAX; i++) {
        rows[i] = (struct query_group_row){.day = req.day_first,
                                           .shard = SHARD_COUNT_MAX - 1 - i,
                                           .count = UINT64_MAX,
                                           .amount_units = -((ds_i128)1 << 126)};
    }
    struct query_count_result res = {.count = UINT64_MAX,
                                     .amount_units = -((ds_i128)1 << 126),
                                     .partitions = UINT32_MAX,
                                     .blocks = UINT64_MAX,
                                     .bytes = UINT64_MAX,
                                     .group_count = SHARD_COUNT_MAX,
                                     .groups = rows};
    char *json = render(&req, &res);
    assert_non_null(strstr(json, "\"partition\":\"DAY#9999-12-31#1023\""));
    free(json);
    req.by = QUERY_GROUP_HOUR;
    json = render(&req, &res);
    free(json);
}

static void test_count_json_string_escaping(void **state)
{
    /* Quotes and backslashes are escaped, control bytes become \u00XX, everything else (DEL,
     * UTF-8) is copied; the result is NUL-terminated and its length returned. */
    (void)state;
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {"", 0, "\"\""},
        {"paid", 4, "\"paid\""},
        {"a\"b", 3, "\"a\\\"b\""},
        {"back\\slash", 10, "\"back\\\\slash\""},
        {"\n\t\r", 3, "\"\\u000a\\u0009\\u000d\""},
        {"\x01\x1f", 2, "\"\\u0001\\u001f\""},
        {"nul\0x", 5, "\"nul\\u0000x\""},
        {"\x7f", 1, "\"\x7f\""},
        {"caf\xc3\xa9", 5, "\"caf\xc3\xa9\""},
        {"/<>", 3, "\"/<>\""},
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(cases); i++) {
        char buf[64];
        memset(buf, 'Z', sizeof(buf));
        int64_t n = http_json_string(cases[i].in, cases[i].len, buf, sizeof(buf));
        assert_true(n == (int64_t)strlen(cases[i].out));
        assert_string_equal(buf, cases[i].out);
    }
}

static void test_count_json_string_capacity(void **state)
{
    /* A buffer exactly as long as the literal plus its NUL is enough; one byte less is -ENOSPC,
     * whatever the escapes; nothing is written past the capacity. */
    (void)state;
    static const struct {
        const char *in;
        size_t len;
    } cases[] = {{"", 0},
                 {"a", 1},
                 {"abc", 3},
                 {"a\"", 2},
                 {"\x01", 1},
                 {"x\ny", 3},
                 {"0123456789012345678901234567890\x02", 32}};
    for (size_t i = 0; i < DS_ARRAY_LEN(cases); i++) {
        char full[256];
        int64_t n = http_json_string(cases[i].in, cases[i].len, full, sizeof(full));
        assert_true(n >= 2);
        size_t need = (size_t)n + 1;
        for (size_t cap = 0; cap <= need; cap++) {
            char *buf = malloc(cap > 0 ? cap : 1); /* exact size: ASan sees any overrun */
            assert_non_null(buf);
            int64_t m = http_json_string(cases[i].in, cases[i].len, buf, cap);
            if (cap < need) {
                if (m != -ENOSPC) {
                    print_error("case %zu cap %zu: %lld\n", i, cap, (long long)m);
                    fail();
                }
            } else {
                if (m != n) {
                    print_error("case %zu cap %zu: %lld, want %lld\n", i, cap, (long long)m,
                                (long long)n);
                    fail();
                }
                assert_string_equal(buf, full);
            }
            free(buf);
        }
    }
}

static void test_count_table_smoke(void **state)
{
    /* The table for people names the day, the count, the amount and the partitions read. */
    struct fixture *fx = *state;
    struct query_count_request req = request("2026-01-21", "2026-01-21", "paid", QUERY_GROUP_SHARD);
    struct query_count_result res;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    FILE *out = tmpfile();
    assert_non_null(out);
    query_count_table(&req, &res, out);
    char text[2048] = "";
    rewind(out);
    size_t n = fread(text, 1, sizeof(text) - 1, out);
    text[n] = '\0';
    fclose(out);
    assert_non_null(strstr(text, "day 2026-01-21, status \"paid\": 3 orders, amount 128.7400, "
                                 "3 partitions read"));
    assert_non_null(strstr(text, "DAY#2026-01-21#1"));
    query_count_result_deinit(&res);
}

static void test_count_retractions_net(void **state)
{
    /* Order 342 (paid, 12:00, 100.0000) superseded: its retraction and a new version (shipped,
     * 13:00, 80.0000) in the same partition, another commit, so the retraction is in a block
     * of its own (negative cells). Counts and sums, in total, by hour and by status, are net. */
    struct fixture *fx = *state;
    struct ds_event e;
    event_of(&FIXTURE[8], &e);
    e.retract = true;
    ingest(fx, &e);
    e.retract = false;
    e.ts_ms += HOUR_MS;
    e.amount_units = 800000;
    test_event_set_status(&e, "shipped");
    ingest(fx, &e);
    assert_int_equal(storage_commit(fx->st), 0);

    struct query_count_request req = request("2026-01-21", "2026-01-21", NULL, QUERY_GROUP_HOUR);
    struct query_count_result res;
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.count, 4);
    assert_amount(res.amount_units, "113.7400");
    assert_int_equal(res.groups[12].count, 0);
    assert_amount(res.groups[12].amount_units, "0.0000");
    assert_int_equal(res.groups[13].count, 1);
    assert_amount(res.groups[13].amount_units, "80.0000");
    query_count_result_deinit(&res);

    req = request("2026-01-21", "2026-01-21", "paid", QUERY_GROUP_NONE);
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.count, 2);
    assert_amount(res.amount_units, "28.7400");
    query_count_result_deinit(&res);
    req = request("2026-01-21", "2026-01-21", "shipped", QUERY_GROUP_NONE);
    assert_int_equal(query_count(fx->st, fx->map, &req, &res), 0);
    assert_int_equal(res.count, 1);
    assert_amount(res.amount_units, "80.0000");
    query_count_result_deinit(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_count_contract_example_busy_day, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_contract_example_from_reader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_status_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_by_hour, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_by_day_range_with_empty_days, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_by_shard_over_range_and_grown_map, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_count_groups_sum_to_total, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_range_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_storage_error_propagates, setup, teardown),
        cmocka_unit_test(test_count_group_parse),
        cmocka_unit_test(test_count_json_exact_small_cases),
        cmocka_unit_test(test_count_json_too_small_buffer),
        cmocka_unit_test(test_count_json_bound_holds_worst_case),
        cmocka_unit_test(test_count_json_string_escaping),
        cmocka_unit_test(test_count_json_string_capacity),
        cmocka_unit_test_setup_teardown(test_count_table_smoke, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_retractions_net, setup, teardown),
    };
    const char *filter = getenv("CMOCKA_TEST_FILTER");
    if (filter != NULL) {
        cmocka_set_test_filter(filter);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
