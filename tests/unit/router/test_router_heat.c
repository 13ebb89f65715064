/*
 * Unit tests of router/router_heat.c: heat through the router, merged from known member
 * bodies. /v1/heat: partition keys and days summed per key (peaks the largest, shares over the
 * merged rate, cut to top), Kafka partitions concatenated, customers merged as Space-Saving
 * summaries (a member that did not list a customer adds its bound to estimate and error, and
 * the merged estimates keep the guarantee against exact counts), growths a union newest first,
 * advice concatenated, differing capacities warned of, a member without heat yet adding
 * nothing. /v1/heat/history: columns summed by t up to the oldest member's second, growths in
 * the window, the seconds parameter checked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/router_private.h"

static json_t *merged_doc(const struct router_merged *m)
{
    json_error_t err;
    json_t *doc = json_loadb(m->body, m->len, 0, &err);
    if (!json_is_object(doc)) {
        fail_msg("not a JSON object (%s): %.*s", err.text, (int)m->len, m->body);
    }
    return doc;
}

static json_int_t int_at(const json_t *o, const char *name)
{
    const json_t *v = json_object_get(o, name);
    if (!json_is_integer(v)) {
        fail_msg("\"%s\" is not an integer", name);
    }
    return json_integer_value(v);
}

static double real_at(const json_t *o, const char *name)
{
    const json_t *v = json_object_get(o, name);
    if (!json_is_number(v)) {
        fail_msg("\"%s\" is not a number", name);
    }
    return json_number_value(v);
}

/* A node's /v1/heat with the given lists (JSON arrays' insides) and head numbers. */
static char *heat_body(const char *second, unsigned capacity, unsigned events, unsigned rate,
                       const char *partitions, const char *days, const char *sources,
                       const char *customers, const char *growths, const char *extra)
{
    char *b = malloc(8192);
    assert_non_null(b);
    snprintf(b, 8192,
             "{\"second\":%s,\"window_s\":60,\"shard_capacity_eps\":%u,\"max_shards\":256,"
             "\"base_shards\":4,\"adaptive\":true,\"growth_failed\":false,\"growths_total\":1,"
             "\"events\":%u,\"rate_now\":%u,\"untracked_events\":0,\"over_capacity_seconds\":1,"
             "\"would_throttle_events\":7,\"partitions\":[%s],\"days\":[%s],"
             "\"kafka_partitions\":[%s],\"customers\":[%s],\"growths\":[%s]%s,"
             "\"events_durable\":%u,\"gsi_lag_ms\":null}",
             second, capacity, events, rate, partitions, days, sources, customers, growths, extra,
             events);
    return b;
}

static const char *const urls2[] = {"http://a:1", "http://b:2"};

static void test_router_heat_partitions_days_sum_per_key(void **state)
{
    /* Intent: one key's rows add up (rates, events, over-capacity seconds, throttled), its peak
     * is the larger, shares are over the merged rate, the list is hottest first and cut to top;
     * days add up the same way; Kafka partitions are all listed, by partition. */
    (void)state;
    char *a = heat_body(
        "\"2026-12-01T10:00:05Z\"", 1000, 500, 300,
        "{\"key\":\"2026-01-21/0\",\"day\":\"2026-01-21\",\"shard\":0,\"day_shards\":4,"
        "\"rate_now\":200,\"rate_avg\":150.5,\"rate_peak\":900,\"events\":400,\"share\":0.6667,"
        "\"over_capacity_seconds\":1,\"would_throttle_events\":7},"
        "{\"key\":\"2026-01-21/1\",\"day\":\"2026-01-21\",\"shard\":1,\"day_shards\":4,"
        "\"rate_now\":100,\"rate_avg\":50.0,\"rate_peak\":100,\"events\":100,\"share\":0.3333,"
        "\"over_capacity_seconds\":0,\"would_throttle_events\":0}",
        "{\"day\":\"2026-01-21\",\"shards\":4,\"rate_now\":300,\"rate_avg\":200.5,"
        "\"rate_peak\":1000,\"events\":500,\"share\":1.0}",
        "{\"partition\":2,\"rate_now\":300,\"rate_peak\":1000,\"events\":500,\"lag\":0}", "", "",
        "");
    char *b = heat_body(
        "\"2026-12-01T10:00:04Z\"", 1000, 700, 500,
        "{\"key\":\"2026-01-21/0\",\"day\":\"2026-01-21\",\"shard\":0,\"day_shards\":8,"
        "\"rate_now\":250,\"rate_avg\":100.25,\"rate_peak\":600,\"events\":300,\"share\":0.5,"
        "\"over_capacity_seconds\":2,\"would_throttle_events\":30},"
        "{\"key\":\"2026-01-22/0\",\"day\":\"2026-01-22\",\"shard\":0,\"day_shards\":4,"
        "\"rate_now\":250,\"rate_avg\":10.0,\"rate_peak\":250,\"events\":400,\"share\":0.5,"
        "\"over_capacity_seconds\":0,\"would_throttle_events\":0}",
        "{\"day\":\"2026-01-22\",\"shards\":4,\"rate_now\":250,\"rate_avg\":10.0,"
        "\"rate_peak\":250,\"events\":400,\"share\":0.5},"
        "{\"day\":\"2026-01-21\",\"shards\":8,\"rate_now\":250,\"rate_avg\":100.25,"
        "\"rate_peak\":600,\"events\":300,\"share\":0.5}",
        "{\"partition\":0,\"rate_now\":500,\"rate_peak\":900,\"events\":700,\"lag\":3},"
        "{\"partition\":3,\"rate_now\":0,\"rate_peak\":1,\"events\":1,\"lag\":null}",
        "", "", "");
    const char *bodies[] = {a, b};
    struct router_merged m = {0};
    assert_int_equal(router_merge_heat(2, urls2, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    json_t *nodes = json_object_get(doc, "nodes");
    assert_int_equal(json_array_size(nodes), 2); /* kept as it was for existing readers */
    assert_string_equal(json_string_value(json_object_get(json_array_get(nodes, 1), "node")),
                        "http://b:2");
    assert_int_equal(int_at(json_object_get(json_array_get(nodes, 0), "heat"), "events"), 500);
    json_t *h = json_object_get(doc, "merged");
    assert_string_equal(json_string_value(json_object_get(h, "second")), "2026-12-01T10:00:04Z");
    assert_int_equal(int_at(h, "events"), 1200);
    assert_int_equal(int_at(h, "rate_now"), 800);
    assert_int_equal(int_at(h, "would_throttle_events"), 14);
    assert_int_equal(int_at(h, "events_durable"), 1200);
    assert_int_equal(int_at(h, "members"), 2);
    assert_null(json_object_get(h, "warnings"));
    assert_null(json_object_get(h, "advice"));
    assert_true(json_is_null(json_object_get(h, "gsi_lag_ms")));
    json_t *parts = json_object_get(h, "partitions");
    assert_int_equal(json_array_size(parts), 2); /* three keys, top 2 */
    json_t *p0 = json_array_get(parts, 0);
    assert_string_equal(json_string_value(json_object_get(p0, "key")), "2026-01-21/0");
    assert_int_equal(int_at(p0, "rate_now"), 450);
    assert_int_equal(int_at(p0, "events"), 700);
    assert_int_equal(int_at(p0, "rate_peak"), 900);
    assert_int_equal(int_at(p0, "day_shards"), 8);
    assert_int_equal(int_at(p0, "over_capacity_seconds"), 3);
    assert_int_equal(int_at(p0, "would_throttle_events"), 37);
    assert_true(real_at(p0, "rate_avg") == 250.8); /* 250.75 as the node rounds: %.1f */
    assert_true(real_at(p0, "share") == 0.5625);   /* 450 / 800 */
    json_t *p1 = json_array_get(parts, 1);
    assert_string_equal(json_string_value(json_object_get(p1, "key")), "2026-01-22/0");
    assert_true(real_at(p1, "share") == 0.3125);
    json_t *days = json_object_get(h, "days");
    assert_int_equal(json_array_size(days), 2);
    json_t *d0 = json_array_get(days, 0);
    assert_string_equal(json_string_value(json_object_get(d0, "day")), "2026-01-21");
    assert_int_equal(int_at(d0, "rate_now"), 550);
    assert_int_equal(int_at(d0, "events"), 800);
    assert_int_equal(int_at(d0, "rate_peak"), 1000);
    assert_int_equal(int_at(d0, "shards"), 8);
    json_t *sources = json_object_get(h, "kafka_partitions");
    assert_int_equal(json_array_size(sources), 3);
    assert_int_equal(int_at(json_array_get(sources, 0), "partition"), 0);
    assert_int_equal(int_at(json_array_get(sources, 1), "partition"), 2);
    assert_int_equal(int_at(json_array_get(sources, 2), "partition"), 3);
    assert_int_equal(int_at(json_array_get(sources, 0), "lag"), 3);
    json_decref(doc);
    free(m.body);
    free(a);
    free(b);
}

/* A customer row: rate, error, share as a node gives them. */
#define CUSTOMER(id, rate, error, share)                                                           \
    "{\"customer_id\":" id ",\"rate_eps\":" rate ",\"error_eps\":" error ",\"share\":" share "}"

static void test_router_heat_customers_merge_with_bounds(void **state)
{
    /* Intent: a customer listed by both members sums its rates and errors; one listed by one
     * member gets the other's bound (the least rate of its full list) added to its rate and
     * its error, so its estimate stays above the truth; a member whose list is not full adds
     * nothing (it listed every counter); shares are over the members' totals (rate / share). */
    (void)state;
    char *a = heat_body(
        "\"2026-12-01T10:00:05Z\"", 1000, 1, 1, "", "", "", /* full: top 2 */
        CUSTOMER("1", "50.0", "2.0", "0.5000") "," CUSTOMER("2", "30.0", "1.0", "0.3000"), "", "");
    char *b = heat_body(
        "\"2026-12-01T10:00:05Z\"", 1000, 1, 1, "", "", "",
        CUSTOMER("1", "40.0", "0.0", "0.4000") "," CUSTOMER("\"x\"", "20.0", "5.0", "0.2000"), "",
        "");
    char *c = heat_body("\"2026-12-01T10:00:05Z\"", 1000, 1, 1, "", "", "", /* not full */
                        CUSTOMER("\"x\"", "10.0", "0.0", "1.0000"), "", "");
    const char *bodies[] = {a, b, c};
    const char *urls[] = {"http://a:1", "http://b:2", "http://c:3"};
    struct router_merged m = {0};
    assert_int_equal(router_merge_heat(2, urls, bodies, 3, &m), 0);
    json_t *doc = merged_doc(&m);
    json_t *list = json_object_get(json_object_get(doc, "merged"), "customers");
    assert_int_equal(json_array_size(list), 2);
    json_t *c0 = json_array_get(list, 0);
    assert_int_equal(int_at(c0, "customer_id"), 1);
    assert_true(real_at(c0, "rate_eps") == 90.0); /* 50 + 40 + c's bound 0 */
    assert_true(real_at(c0, "error_eps") == 2.0);
    assert_true(real_at(c0, "share") == 0.4286); /* 90 / (100 + 100 + 10) */
    json_t *c1 = json_array_get(list, 1);
    assert_string_equal(json_string_value(json_object_get(c1, "customer_id")), "x");
    assert_true(real_at(c1, "rate_eps") == 60.0);  /* 20 + 10 + a's bound 30 */
    assert_true(real_at(c1, "error_eps") == 35.0); /* 5 + 0 + 30 */
    json_decref(doc);
    free(m.body);
    free(a);
    free(b);
    free(c);
}

/* xorshift64*: the seeded stream of the randomised test. */
static uint64_t rand_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

#define RAND_MEMBERS 3u
#define RAND_CUSTOMERS 40u
#define RAND_TOP 8u

/* Member k's list: its exact top RAND_TOP customers by weight (a Space-Saving summary with
 * room for every key reports exactly these, error 0), ties by id. */
static size_t rand_member_list(const uint32_t *w, char *dst, size_t cap)
{
    bool taken[RAND_CUSTOMERS] = {false};
    size_t len = 0;
    for (uint32_t r = 0; r < RAND_TOP; r++) {
        uint32_t best = RAND_CUSTOMERS;
        for (uint32_t id = 0; id < RAND_CUSTOMERS; id++) {
            if (!taken[id] && w[id] > 0 && (best == RAND_CUSTOMERS || w[id] > w[best])) {
                best = id;
            }
        }
        if (best == RAND_CUSTOMERS) {
            break;
        }
        taken[best] = true;
        len += (size_t)snprintf(dst + len, cap - len,
                                "%s{\"customer_id\":%u,\"rate_eps\":%u.0,\"error_eps\":0.0,"
                                "\"share\":0.0100}",
                                r > 0 ? "," : "", best + 1, w[best]);
    }
    return len;
}

static void test_router_heat_customers_bound_holds_against_exact(void **state)
{
    /* Intent: on random per-member weights, every merged customer's estimate is at least its
     * exact total and at most the total plus its error (the Space-Saving guarantee survives
     * the merge), and the loop really compared rows. */
    (void)state;
    const char *env = getenv("DS_TEST_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 10) : 20261201u;
    print_message("seed %llu (DS_TEST_SEED replays)\n", (unsigned long long)seed);
    uint64_t s = seed | 1u;
    uint32_t checked = 0;
    for (int round = 0; round < 50; round++) {
        uint32_t w[RAND_MEMBERS][RAND_CUSTOMERS];
        char lists[RAND_MEMBERS][2048];
        char *bodies[RAND_MEMBERS];
        for (uint32_t k = 0; k < RAND_MEMBERS; k++) {
            for (uint32_t id = 0; id < RAND_CUSTOMERS; id++) {
                uint64_t x = rand_next(&s);
                w[k][id] = x % 3 == 0 ? 0u : (uint32_t)(x >> 40) % 500u;
            }
            rand_member_list(w[k], lists[k], sizeof(lists[k]));
            bodies[k] = heat_body("null", 1000, 0, 0, "", "", "", lists[k], "", "");
        }
        const char *urls[] = {"http://a:1", "http://b:2", "http://c:3"};
        struct router_merged m = {0};
        assert_int_equal(
            router_merge_heat(RAND_TOP, urls, (const char *const *)bodies, RAND_MEMBERS, &m), 0);
        json_t *doc = merged_doc(&m);
        json_t *list = json_object_get(json_object_get(doc, "merged"), "customers");
        for (size_t j = 0; j < json_array_size(list); j++) {
            json_t *row = json_array_get(list, j);
            json_int_t id = int_at(row, "customer_id") - 1;
            double exact = 0;
            for (uint32_t k = 0; k < RAND_MEMBERS; k++) {
                exact += w[k][id];
            }
            assert_true(real_at(row, "rate_eps") >= exact);
            assert_true(real_at(row, "rate_eps") <= exact + real_at(row, "error_eps"));
            checked++;
        }
        json_decref(doc);
        free(m.body);
        for (uint32_t k = 0; k < RAND_MEMBERS; k++) {
            free(bodies[k]);
        }
    }
    assert_true(checked > 300);
}

static void test_router_heat_growths_advice_capacity(void **state)
{
    /* Intent: growths are a union newest first with one (day, from, to) once; advice is
     * concatenated, one (case, subject) once; members with different capacities give the
     * largest and a warning. */
    (void)state;
    const char *g1 = "{\"day\":\"2026-01-21\",\"from\":4,\"to\":8,\"at\":\"2026-12-01T10:00:01."
                     "000Z\",\"reason\":\"r\"}";
    const char *g1_late = "{\"day\":\"2026-01-21\",\"from\":4,\"to\":8,\"at\":\"2026-12-01T10:00:"
                          "02.000Z\",\"reason\":\"r\"}";
    const char *g2 = "{\"day\":\"2026-01-21\",\"from\":8,\"to\":16,\"at\":\"2026-12-01T10:00:03."
                     "000Z\",\"reason\":\"r\"}";
    char growths_b[512];
    snprintf(growths_b, sizeof(growths_b), "%s,%s", g2, g1_late);
    const char *advice_a = ",\"advice\":[{\"case\":\"hot_customer\",\"subject\":\"customer 42\","
                           "\"evidence\":\"e\",\"remedy\":\"r\"}]";
    const char *advice_b =
        ",\"advice\":[{\"case\":\"hot_customer\",\"subject\":\"customer 42\",\"evidence\":\"e2\","
        "\"remedy\":\"r\"},{\"case\":\"day_at_max_shards\",\"subject\":\"2026-01-21\","
        "\"evidence\":\"e\",\"remedy\":\"r\"}]";
    char *a = heat_body("\"2026-12-01T10:00:05Z\"", 1000, 1, 1, "", "", "", "", g1, advice_a);
    char *b =
        heat_body("\"2026-12-01T10:00:05Z\"", 2000, 1, 1, "", "", "", "", growths_b, advice_b);
    const char *bodies[] = {a, b};
    struct router_merged m = {0};
    assert_int_equal(router_merge_heat(10, urls2, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    json_t *h = json_object_get(doc, "merged");
    json_t *growths = json_object_get(h, "growths");
    assert_int_equal(json_array_size(growths), 2);
    assert_int_equal(int_at(json_array_get(growths, 0), "to"), 16);
    assert_int_equal(int_at(json_array_get(growths, 1), "to"), 8);
    assert_string_equal(json_string_value(json_object_get(json_array_get(growths, 1), "at")),
                        "2026-12-01T10:00:01.000Z"); /* the first made of the repeats */
    json_t *advice = json_object_get(h, "advice");
    assert_int_equal(json_array_size(advice), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(advice, 1), "case")),
                        "day_at_max_shards");
    assert_int_equal(int_at(h, "shard_capacity_eps"), 2000);
    json_t *warnings = json_object_get(h, "warnings");
    assert_int_equal(json_array_size(warnings), 1);
    assert_non_null(strstr(json_string_value(json_array_get(warnings, 0)), "shard_capacity_eps"));
    json_decref(doc);
    free(m.body);
    free(a);
    free(b);
}

static void test_router_heat_member_without_heat_adds_nothing(void **state)
{
    /* Intent: a member with no complete second yet (second null, empty lists) leaves the other
     * member's numbers as they are and does not move "second". */
    (void)state;
    char *a = heat_body("null", 1000, 0, 0, "", "", "", "", "", "");
    char *b =
        heat_body("\"2026-12-01T10:00:05Z\"", 1000, 9, 3,
                  "{\"key\":\"2026-01-21/0\",\"day\":\"2026-01-21\",\"shard\":0,\"day_shards\":4,"
                  "\"rate_now\":3,\"rate_avg\":0.2,\"rate_peak\":3,\"events\":9,\"share\":1.0,"
                  "\"over_capacity_seconds\":0,\"would_throttle_events\":0}",
                  "", "", "", "", "");
    const char *bodies[] = {a, b};
    struct router_merged m = {0};
    assert_int_equal(router_merge_heat(10, urls2, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    json_t *h = json_object_get(doc, "merged");
    assert_string_equal(json_string_value(json_object_get(h, "second")), "2026-12-01T10:00:05Z");
    assert_int_equal(int_at(h, "events"), 9);
    json_t *p0 = json_array_get(json_object_get(h, "partitions"), 0);
    assert_int_equal(int_at(p0, "events"), 9);
    assert_true(real_at(p0, "rate_avg") == 0.2);
    assert_true(real_at(p0, "share") == 1.0);
    json_decref(doc);
    free(m.body);
    /* Only members without heat: second stays null, the lists empty. */
    const char *none[] = {a, a};
    m = (struct router_merged){0};
    assert_int_equal(router_merge_heat(10, urls2, none, 2, &m), 0);
    doc = merged_doc(&m);
    h = json_object_get(doc, "merged");
    assert_true(json_is_null(json_object_get(h, "second")));
    assert_int_equal(json_array_size(json_object_get(h, "partitions")), 0);
    json_decref(doc);
    free(m.body);
    free(a);
    free(b);
}

static void test_router_heat_bad_answer_named(void **state)
{
    /* Intent: an answer that is not a node's heat is -DS_ECORRUPT naming the field. */
    (void)state;
    char *a = heat_body("\"2026-12-01T10:00:05Z\"", 1000, 1, 1, "", "", "", "", "", "");
    const char *bodies[] = {a, "{\"second\":null}"};
    struct router_merged m = {0};
    assert_int_equal(router_merge_heat(10, urls2, bodies, 2, &m), -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "\"second\""));
    const char *rows[] = {a, "{\"second\":null,\"window_s\":60,\"shard_capacity_eps\":1,"
                             "\"max_shards\":1,\"base_shards\":1,\"adaptive\":false,"
                             "\"growth_failed\":false,\"growths_total\":0,\"events\":0,"
                             "\"rate_now\":0,\"untracked_events\":0,\"over_capacity_seconds\":0,"
                             "\"would_throttle_events\":0,\"partitions\":[{\"key\":1}],"
                             "\"days\":[],\"kafka_partitions\":[],\"customers\":[],"
                             "\"growths\":[]}"};
    m = (struct router_merged){0};
    assert_int_equal(router_merge_heat(10, urls2, rows, 2, &m), -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "\"partitions\""));
    assert_null(m.body);
    /* One customer listed twice by one member: not a Space-Saving summary. */
    char *twice = heat_body(
        "null", 1000, 0, 0, "", "", "",
        CUSTOMER("7", "1.0", "0.0", "0.5000") "," CUSTOMER("7", "1.0", "0.0", "0.5000"), "", "");
    const char *dup[] = {a, twice};
    m = (struct router_merged){0};
    assert_int_equal(router_merge_heat(10, urls2, dup, 2, &m), -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "\"customers\""));
    free(twice);
    free(a);
}

/* ---- /v1/heat/history ---------------------------------------------------------------------- */

static void test_router_heat_history_columns_by_t(void **state)
{
    /* Intent: columns of the same t add up per day element-wise (the shorter array padded);
     * "second" is the oldest member's newest, and no column after it nor before the window
     * is given; growths in the window are a union oldest first. */
    (void)state;
    const char *a = "{\"version\":1,\"second\":1000,\"seconds\":3,\"shard_capacity_eps\":1000,"
                    "\"max_shards\":256,\"columns\":["
                    "{\"t\":996,\"days\":{\"2026-01-21\":[5]}},"
                    "{\"t\":998,\"days\":{\"2026-01-21\":[1,2,3]}},"
                    "{\"t\":1000,\"days\":{\"2026-01-21\":[4],\"2026-01-22\":[0,7]}}],"
                    "\"growths\":[{\"t\":998,\"day\":\"2026-01-21\",\"from\":4,\"to\":8,"
                    "\"at\":\"2026-12-01T10:00:01.000Z\",\"reason\":\"r\"}]}";
    const char *b = "{\"version\":1,\"second\":999,\"seconds\":3,\"shard_capacity_eps\":1000,"
                    "\"max_shards\":256,\"columns\":["
                    "{\"t\":998,\"days\":{\"2026-01-21\":[10]}},"
                    "{\"t\":999,\"days\":{\"2026-01-22\":[1]}}],"
                    "\"growths\":[{\"t\":998,\"day\":\"2026-01-21\",\"from\":4,\"to\":8,"
                    "\"at\":\"2026-12-01T10:00:01.500Z\",\"reason\":\"r\"},"
                    "{\"t\":999,\"day\":\"2026-01-22\",\"from\":4,\"to\":8,"
                    "\"at\":\"2026-12-01T10:00:02.000Z\",\"reason\":\"r\"}]}";
    const char *bodies[] = {a, b};
    struct router_merged m = {0};
    assert_int_equal(router_merge_heat_history(3, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    assert_int_equal(int_at(doc, "version"), 1);
    assert_int_equal(int_at(doc, "second"), 999);
    assert_int_equal(int_at(doc, "seconds"), 3);
    assert_null(json_object_get(doc, "warnings"));
    json_t *columns = json_object_get(doc, "columns");
    assert_int_equal(json_array_size(columns), 2); /* 996 is before 997..999, 1000 after */
    json_t *c0 = json_array_get(columns, 0);
    assert_int_equal(int_at(c0, "t"), 998);
    json_t *d = json_object_get(json_object_get(c0, "days"), "2026-01-21");
    assert_int_equal(json_array_size(d), 3);
    assert_int_equal(json_integer_value(json_array_get(d, 0)), 11);
    assert_int_equal(json_integer_value(json_array_get(d, 1)), 2);
    assert_int_equal(json_integer_value(json_array_get(d, 2)), 3);
    json_t *c1 = json_array_get(columns, 1);
    assert_int_equal(int_at(c1, "t"), 999);
    d = json_object_get(json_object_get(c1, "days"), "2026-01-22");
    assert_int_equal(json_integer_value(json_array_get(d, 0)), 1);
    json_t *growths = json_object_get(doc, "growths");
    assert_int_equal(json_array_size(growths), 2);
    assert_int_equal(int_at(json_array_get(growths, 0), "t"), 998);
    assert_string_equal(json_string_value(json_object_get(json_array_get(growths, 1), "day")),
                        "2026-01-22");
    json_decref(doc);
    free(m.body);
}

static void test_router_heat_history_capacity_and_no_second(void **state)
{
    /* Intent: differing capacities give the largest and a warning; a member with no second
     * yet does not hold "second" back; with no member having one, second is null and there
     * are no columns. */
    (void)state;
    const char *a = "{\"version\":1,\"second\":50,\"seconds\":300,\"shard_capacity_eps\":500,"
                    "\"max_shards\":64,\"columns\":[{\"t\":50,\"days\":{\"2026-01-21\":[2]}}],"
                    "\"growths\":[]}";
    const char *none = "{\"version\":1,\"second\":null,\"seconds\":300,"
                       "\"shard_capacity_eps\":1000,\"max_shards\":256,\"columns\":[],"
                       "\"growths\":[]}";
    const char *bodies[] = {a, none};
    struct router_merged m = {0};
    assert_int_equal(router_merge_heat_history(300, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    assert_int_equal(int_at(doc, "second"), 50);
    assert_int_equal(int_at(doc, "shard_capacity_eps"), 1000);
    assert_int_equal(int_at(doc, "max_shards"), 256);
    assert_int_equal(json_array_size(json_object_get(doc, "warnings")), 1);
    assert_int_equal(json_array_size(json_object_get(doc, "columns")), 1);
    json_decref(doc);
    free(m.body);
    const char *nones[] = {none, none};
    m = (struct router_merged){0};
    assert_int_equal(router_merge_heat_history(300, nones, 2, &m), 0);
    doc = merged_doc(&m);
    assert_true(json_is_null(json_object_get(doc, "second")));
    assert_int_equal(json_array_size(json_object_get(doc, "columns")), 0);
    assert_null(json_object_get(doc, "warnings"));
    json_decref(doc);
    free(m.body);
    const char *broken[] = {a, "{\"version\":1,\"second\":50,\"shard_capacity_eps\":1,"
                               "\"max_shards\":1,\"columns\":[{\"t\":50,\"days\":{\"d\":[-1]}}],"
                               "\"growths\":[]}"};
    m = (struct router_merged){0};
    assert_int_equal(router_merge_heat_history(300, broken, 2, &m), -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "\"columns\""));
    /* Two cells that overflow a 64-bit sum: refused, not wrapped. */
    const char *huge = "{\"version\":1,\"second\":50,\"shard_capacity_eps\":500,"
                       "\"max_shards\":64,\"columns\":[{\"t\":50,\"days\":{\"2026-01-21\":"
                       "[9223372036854775807]}}],\"growths\":[]}";
    const char *overflow[] = {huge, huge};
    m = (struct router_merged){0};
    assert_int_equal(router_merge_heat_history(300, overflow, 2, &m), -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "\"columns\""));
}

static void test_router_heat_history_parse_seconds(void **state)
{
    /* Intent: seconds defaults to 300, takes 1..300, and anything else is a 400 naming why. */
    (void)state;
    uint32_t seconds = 0;
    char message[128];
    assert_int_equal(router_history_parse("", 0, &seconds, message, sizeof(message)), 0);
    assert_int_equal(seconds, 300);
    assert_int_equal(router_history_parse("seconds=5", 9, &seconds, message, sizeof(message)), 0);
    assert_int_equal(seconds, 5);
    static const char *const bad[] = {
        "seconds=0",           "seconds=301",         "seconds=", "seconds=1x",
        "seconds=99999999999", "seconds=5&seconds=5", "top=3"};
    static const char *const why[] = {
        "1..300", "1..300", "1..300", "1..300", "1..300", "twice", "unknown parameter 'top=3'"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        message[0] = '\0';
        assert_int_equal(
            router_history_parse(bad[i], strlen(bad[i]), &seconds, message, sizeof(message)), 400);
        assert_non_null(strstr(message, why[i]));
    }
}

/* ---- /v1/heat/stream's frames ------------------------------------------------------------- */

static void test_router_heat_frame_history_after_last(void **state)
{
    /* Intent: a frame is one "event: heat" with one data line holding the merged heat, the
     * history and the newest 31 days' counts; the first frame carries the whole history, the
     * next only the columns and growths after the first's second; the feed asks 300 seconds
     * first, then the seconds since with the slack. */
    (void)state;
    const char *heat = "{\"nodes\":[],\"merged\":{\"events\":5,\"advice\":[]},\"node_group\":1}";
    const char *history =
        "{\"version\":1,\"second\":1001,\"seconds\":300,\"shard_capacity_eps\":1000,"
        "\"max_shards\":256,\"columns\":[{\"t\":1000,\"days\":{\"2026-01-21\":[1]}},"
        "{\"t\":1001,\"days\":{\"2026-01-21\":[2]}}],\"growths\":[{\"t\":1001,"
        "\"day\":\"2026-01-21\",\"from\":4,\"to\":8,\"at\":\"x\",\"reason\":\"line\\nbreak\"}],"
        "\"members\":2}";
    char counts[4096];
    size_t n =
        (size_t)snprintf(counts, sizeof(counts), "{\"count\":40,\"by\":\"day\",\"groups\":[");
    for (int d = 1; d <= 40; d++) {
        n += (size_t)snprintf(counts + n, sizeof(counts) - n,
                              "%s{\"key\":\"2026-%02d-%02d\",\"count\":%d,\"amount_sum\":\"1.0\"}",
                              d > 1 ? "," : "", d <= 31 ? 1 : 2, d <= 31 ? d : d - 31, d);
    }
    snprintf(counts + n, sizeof(counts) - n, "]}");
    struct router_heat_feed feed = {0};
    assert_int_equal(router_heat_feed_seconds(&feed, 5000), 300);
    struct router_merged m = {0};
    assert_int_equal(router_heat_frame(&feed, heat, history, counts, NULL, 0, &m), 0);
    assert_int_equal(feed.last_second, 1001);
    assert_true(m.len > 20 && memcmp(m.body, "event: heat\ndata: {", 19) == 0);
    assert_string_equal(m.body + m.len - 2, "\n\n");
    assert_null(memchr(m.body + 12, '\n', m.len - 14)); /* one data line */
    json_t *doc = json_loadb(m.body + 18, m.len - 20, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(int_at(json_object_get(doc, "heat"), "events"), 5);
    assert_int_equal(json_array_size(json_object_get(json_object_get(doc, "history"), "columns")),
                     2);
    json_t *days = json_object_get(doc, "counts");
    assert_int_equal(json_array_size(days), 31);
    assert_string_equal(json_string_value(json_object_get(json_array_get(days, 0), "day")),
                        "2026-01-10");
    assert_int_equal(int_at(json_array_get(days, 30), "count"), 40);
    json_decref(doc);
    free(m.body);

    /* 3 s since and the slack is less than the amend window, which a turn always asks */
    assert_int_equal(router_heat_feed_seconds(&feed, 1004), ROUTER_HEAT_AMEND_S);
    assert_int_equal(router_heat_feed_seconds(&feed, 990), ROUTER_HEAT_AMEND_S);
    assert_int_equal(router_heat_feed_seconds(&feed, 1001 + 100), 110); /* 100 s since, and 10 */
    assert_int_equal(router_heat_feed_seconds(&feed, 1001 + 300), 300);
    m = (struct router_merged){0};
    assert_int_equal(router_heat_frame(&feed, heat, history, counts, NULL, 0, &m), 0);
    doc = json_loadb(m.body + 18, m.len - 20, 0, NULL);
    json_t *h = json_object_get(doc, "history");
    assert_int_equal(json_array_size(json_object_get(h, "columns")), 0);
    assert_int_equal(json_array_size(json_object_get(h, "growths")), 0);
    json_decref(doc);
    free(m.body);

    m = (struct router_merged){0};
    assert_int_equal(router_heat_frame(&feed, "{\"nodes\":[]}", history, counts, NULL, 0, &m),
                     -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "\"merged\""));
    assert_int_equal(feed.last_second, 1001);
}

static void test_router_heat_frame_carries_amended_columns(void **state)
{
    /* Intent: a member amended an already sent second (a late event): the next frame carries
     * that column again with the new merged sum, next to the new second, and counts it; a
     * column equal to the previous turn's, or older than the previous turn's window, does not
     * go again; a frame with only an amendment still says so (the feed sends it). */
    (void)state;
    const char *heat = "{\"nodes\":[],\"merged\":{\"events\":5,\"advice\":[]}}";
    const char *counts = "{\"groups\":[]}";
    const char *a1 = "{\"version\":1,\"second\":1001,\"seconds\":300,\"shard_capacity_eps\":1000,"
                     "\"max_shards\":256,\"revision\":9,\"columns\":["
                     "{\"t\":1000,\"revision\":8,\"days\":{\"2026-01-21\":[1,2]}},"
                     "{\"t\":1001,\"revision\":9,\"days\":{\"2026-01-21\":[2]}}],\"growths\":[]}";
    const char *a2 = "{\"version\":1,\"second\":1001,\"seconds\":300,\"shard_capacity_eps\":1000,"
                     "\"max_shards\":256,\"revision\":4,\"columns\":["
                     "{\"t\":1001,\"revision\":4,\"days\":{\"2026-01-21\":[0,5]}}],\"growths\":[]}";
    const char *first[] = {a1, a2};
    struct router_merged before = {0};
    assert_int_equal(router_merge_heat_history(70, first, 2, &before), 0);
    /* a1 amends 1000 (a late event of shard 1) and completes 1002; 1001 stays as it was. */
    const char *b1 = "{\"version\":1,\"second\":1002,\"seconds\":300,\"shard_capacity_eps\":1000,"
                     "\"max_shards\":256,\"revision\":11,\"columns\":["
                     "{\"t\":1000,\"revision\":10,\"days\":{\"2026-01-21\":[1,7]}},"
                     "{\"t\":1001,\"revision\":9,\"days\":{\"2026-01-21\":[2]}},"
                     "{\"t\":1002,\"revision\":11,\"days\":{\"2026-01-21\":[3]}}],\"growths\":[]}";
    const char *b2 = "{\"version\":1,\"second\":1002,\"seconds\":300,\"shard_capacity_eps\":1000,"
                     "\"max_shards\":256,\"revision\":5,\"columns\":["
                     "{\"t\":1001,\"revision\":4,\"days\":{\"2026-01-21\":[0,5]}},"
                     "{\"t\":1002,\"revision\":5,\"days\":{\"2026-01-21\":[1]}}],\"growths\":[]}";
    const char *second[] = {b1, b2};
    struct router_merged after = {0};
    assert_int_equal(router_merge_heat_history(70, second, 2, &after), 0);
    struct router_heat_feed feed = {.last_second = 1001, .previous_history = before.body};
    struct router_merged m = {0};
    assert_int_equal(router_heat_frame(&feed, heat, after.body, counts, NULL, 0, &m), 0);
    assert_int_equal(feed.last_second, 1002);
    assert_int_equal(feed.amended_columns, 1);
    json_t *doc = json_loadb(m.body + 18, m.len - 20, 0, NULL);
    json_t *columns = json_object_get(json_object_get(doc, "history"), "columns");
    assert_int_equal(json_array_size(columns), 2);
    json_t *c = json_array_get(columns, 0);
    assert_int_equal(int_at(c, "t"), 1000);
    json_t *cells = json_object_get(json_object_get(c, "days"), "2026-01-21");
    assert_int_equal(json_integer_value(json_array_get(cells, 1)), 7);
    c = json_array_get(columns, 1);
    assert_int_equal(int_at(c, "t"), 1002);
    cells = json_object_get(json_object_get(c, "days"), "2026-01-21");
    assert_int_equal(json_integer_value(json_array_get(cells, 0)), 4); /* 3 + 1 */
    json_decref(doc);
    free(m.body);

    /* Nothing changed since: no column goes again, the feed learns there is none. */
    feed = (struct router_heat_feed){.last_second = 1002, .previous_history = after.body};
    m = (struct router_merged){0};
    assert_int_equal(router_heat_frame(&feed, heat, after.body, counts, NULL, 0, &m), 0);
    assert_int_equal(feed.amended_columns, 0);
    doc = json_loadb(m.body + 18, m.len - 20, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(json_object_get(doc, "history"), "columns")),
                     0);
    json_decref(doc);
    free(m.body);

    /* An amended second older than the previous history's window cannot be told: not sent. */
    struct router_merged narrow = {0};
    assert_int_equal(router_merge_heat_history(1, first, 2, &narrow), 0);
    feed = (struct router_heat_feed){.last_second = 1001, .previous_history = narrow.body};
    m = (struct router_merged){0};
    assert_int_equal(router_heat_frame(&feed, heat, after.body, counts, NULL, 0, &m), 0);
    assert_int_equal(feed.amended_columns, 0);
    free(m.body);
    free(narrow.body);
    free(before.body);
    free(after.body);
}

static void test_router_heat_frame_warnings_and_newest_day(void **state)
{
    /* Intent: a frame made without a member carries "warnings" naming what is missing (and
     * none when nothing is), and the counts' last day is the newest day the merged heat
     * lists, whatever its order. */
    (void)state;
    const char *heat = "{\"nodes\":[],\"merged\":{\"events\":5,\"days\":["
                       "{\"day\":\"2026-03-02\",\"events\":4},{\"day\":\"2026-03-14\","
                       "\"events\":1},{\"day\":\"2026-01-30\",\"events\":9}]}}";
    const char *history = "{\"version\":1,\"second\":7,\"seconds\":300,\"columns\":[],"
                          "\"growths\":[]}";
    const char *counts = "{\"groups\":[]}";
    int32_t day = 0;
    assert_int_equal(router_heat_newest_day(heat, &day), 0);
    char text[DS_DATE_TEXT_SIZE];
    ds_date_format(day, text);
    assert_string_equal(text, "2026-03-14");
    day = 12;
    assert_int_equal(router_heat_newest_day("{\"merged\":{\"days\":[]}}", &day), -ENOENT);
    assert_int_equal(router_heat_newest_day("not json", &day), -ENOENT);
    assert_int_equal(day, 12);

    const char *warnings[] = {"http://127.0.0.1:1 did not answer: refused", "counts: none"};
    struct router_heat_feed feed = {0};
    struct router_merged m = {0};
    assert_int_equal(router_heat_frame(&feed, heat, history, counts, warnings, 2, &m), 0);
    json_t *doc = json_loadb(m.body + 18, m.len - 20, 0, NULL);
    json_t *list = json_object_get(doc, "warnings");
    assert_int_equal(json_array_size(list), 2);
    assert_string_equal(json_string_value(json_array_get(list, 0)), warnings[0]);
    json_decref(doc);
    free(m.body);
    m = (struct router_merged){0};
    assert_int_equal(router_heat_frame(&feed, heat, history, counts, NULL, 0, &m), 0);
    doc = json_loadb(m.body + 18, m.len - 20, 0, NULL);
    assert_null(json_object_get(doc, "warnings"));
    json_decref(doc);
    free(m.body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_heat_partitions_days_sum_per_key),
        cmocka_unit_test(test_router_heat_customers_merge_with_bounds),
        cmocka_unit_test(test_router_heat_customers_bound_holds_against_exact),
        cmocka_unit_test(test_router_heat_growths_advice_capacity),
        cmocka_unit_test(test_router_heat_member_without_heat_adds_nothing),
        cmocka_unit_test(test_router_heat_bad_answer_named),
        cmocka_unit_test(test_router_heat_history_columns_by_t),
        cmocka_unit_test(test_router_heat_history_capacity_and_no_second),
        cmocka_unit_test(test_router_heat_history_parse_seconds),
        cmocka_unit_test(test_router_heat_frame_history_after_last),
        cmocka_unit_test(test_router_heat_frame_carries_amended_columns),
        cmocka_unit_test(test_router_heat_frame_warnings_and_newest_day),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
