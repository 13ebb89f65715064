/*
 * Unit tests of query/router_merge.c: the router's merges of node answers. Counts add up
 * exactly (amounts as integers of 1/10000, beyond 64 bits too), groups by key in the node's
 * order, as_of as a union with the larger offset; a customer's orders merge newest first in the
 * index's order, each once, never past a member's frontier (its next token: what a short page
 * of the orders model stops at), with the router's cursor being a node's token (the same bytes
 * index/key.c encodes); an answer that is not a node's document is -DS_ECORRUPT naming the field.
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

#include "index/index_private.h"
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

static struct query_route count_route(enum query_group by)
{
    struct query_route route = {.endpoint = QUERY_EP_COUNT};
    route.count.day_first = 20454; /* 2026-01-01 */
    route.count.day_last = 20455;
    route.count.by = by;
    return route;
}

static void test_router_merge_count_sums_exactly(void **state)
{
    /* Intent: counts and amounts add up exactly (past 2^63 units), groups merge by key. */
    (void)state;
    const char *a = "{\"day\":\"2026-01-01\",\"to\":\"2026-01-02\",\"status\":null,\"count\":3,"
                    "\"amount_sum\":\"922337203685477.5807\",\"partitions\":2,\"blocks\":2,"
                    "\"bytes\":100,\"damaged_blocks\":0,\"model\":\"events\",\"by\":\"day\","
                    "\"groups\":[{\"key\":\"2026-01-02\",\"count\":1,\"amount_sum\":\"0.0001\"}],"
                    "\"as_of\":{\"0\":10,\"2\":7}}";
    const char *b = "{\"day\":\"2026-01-01\",\"to\":\"2026-01-02\",\"status\":null,\"count\":4,"
                    "\"amount_sum\":\"922337203685477.5807\",\"partitions\":1,\"blocks\":5,"
                    "\"bytes\":50,\"damaged_blocks\":1,\"model\":\"events\",\"by\":\"day\","
                    "\"groups\":[{\"key\":\"2026-01-01\",\"count\":2,\"amount_sum\":\"-1.5\"},"
                    "{\"key\":\"2026-01-02\",\"count\":2,\"amount_sum\":\"2.2500\"}],"
                    "\"as_of\":{\"1\":4,\"2\":9}}";
    const char *bodies[] = {a, b};
    struct query_route route = count_route(QUERY_GROUP_DAY);
    struct router_merged m = {0};
    assert_int_equal(router_merge_count(&route, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    assert_int_equal(json_integer_value(json_object_get(doc, "count")), 7);
    assert_string_equal(json_string_value(json_object_get(doc, "amount_sum")),
                        "1844674407370955.1614");
    assert_int_equal(json_integer_value(json_object_get(doc, "partitions")), 3);
    assert_int_equal(json_integer_value(json_object_get(doc, "damaged_blocks")), 1);
    assert_string_equal(json_string_value(json_object_get(doc, "model")), "events");
    json_t *groups = json_object_get(doc, "groups");
    assert_int_equal(json_array_size(groups), 2);
    json_t *g0 = json_array_get(groups, 0);
    json_t *g1 = json_array_get(groups, 1);
    assert_string_equal(json_string_value(json_object_get(g0, "key")), "2026-01-01");
    assert_string_equal(json_string_value(json_object_get(g0, "amount_sum")), "-1.5000");
    assert_string_equal(json_string_value(json_object_get(g1, "key")), "2026-01-02");
    assert_int_equal(json_integer_value(json_object_get(g1, "count")), 3);
    assert_string_equal(json_string_value(json_object_get(g1, "amount_sum")), "2.2501");
    json_t *as_of = json_object_get(doc, "as_of");
    assert_int_equal(json_integer_value(json_object_get(as_of, "0")), 10);
    assert_int_equal(json_integer_value(json_object_get(as_of, "1")), 4);
    assert_int_equal(json_integer_value(json_object_get(as_of, "2")), 9); /* the larger */
    assert_int_equal(m.as_of.bits[0], 7u);
    json_decref(doc);
    free(m.body);
}

static void test_router_merge_count_bad_answer_named(void **state)
{
    /* Intent: an answer missing a field, or not JSON, is refused naming what is wrong. */
    (void)state;
    struct query_route route = count_route(QUERY_GROUP_NONE);
    const char *no_amount[] = {"{\"count\":1,\"partitions\":1,\"blocks\":1,\"bytes\":1,"
                               "\"damaged_blocks\":0}"};
    struct router_merged m = {0};
    assert_int_equal(router_merge_count(&route, no_amount, 1, &m), -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "amount_sum"));
    const char *not_json[] = {"<html>"};
    assert_int_equal(router_merge_count(&route, not_json, 1, &m), -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "not a JSON object"));
    const char *bad_amount[] = {"{\"count\":1,\"amount_sum\":\"1.23456\",\"partitions\":1,"
                                "\"blocks\":1,\"bytes\":1,\"damaged_blocks\":0}"};
    assert_int_equal(router_merge_count(&route, bad_amount, 1, &m), -DS_ECORRUPT);
    assert_null(m.body);
}

static void test_router_merge_count_retention_floor_is_latest(void **state)
{
    /* Intent: members whose floors differ (each node keeps its own stream time) merge to the
     * latest floor, the first day every member still keeps; a member whose range is above its
     * floor leaves the field out; a floor that is not a date is refused, named. */
    (void)state;
    struct query_route route = count_route(QUERY_GROUP_NONE);
    const char *head = "{\"count\":1,\"amount_sum\":\"1.0000\",\"partitions\":1,"
                       "\"blocks\":1,\"bytes\":1,\"damaged_blocks\":0";
    char a[256], b[256], c[256];
    snprintf(a, sizeof(a), "%s,\"retention_floor\":\"2026-01-03\"}", head);
    snprintf(b, sizeof(b), "%s,\"retention_floor\":\"2026-01-05\"}", head);
    snprintf(c, sizeof(c), "%s}", head);
    const char *bodies[] = {a, b, c};
    struct router_merged m = {0};
    assert_int_equal(router_merge_count(&route, bodies, 3, &m), 0);
    json_t *doc = merged_doc(&m);
    assert_string_equal(json_string_value(json_object_get(doc, "retention_floor")), "2026-01-05");
    assert_int_equal(json_integer_value(json_object_get(doc, "count")), 3);
    json_decref(doc);
    free(m.body);
    m = (struct router_merged){0};
    const char *none[] = {c, c};
    assert_int_equal(router_merge_count(&route, none, 2, &m), 0);
    doc = merged_doc(&m);
    assert_null(json_object_get(doc, "retention_floor"));
    json_decref(doc);
    free(m.body);
    m = (struct router_merged){0};
    char bad_floor[256];
    snprintf(bad_floor, sizeof(bad_floor), "%s,\"retention_floor\":\"2026-01-5\"}", head);
    const char *bad[] = {a, bad_floor};
    assert_int_equal(router_merge_count(&route, bad, 2, &m), -DS_ECORRUPT);
    assert_non_null(strstr(m.error, "retention_floor"));
    assert_null(m.body);
}

/* A node token of (ts, id) as index/key.c writes it. */
static void node_token(int64_t ts_ms, const struct ds_id *id, char *dst)
{
    uint8_t key[INDEX_TAIL_BYTES_MAX];
    size_t n = index_key_tail_encode(ts_ms, id, key);
    index_key_hex_encode(key, n, dst);
}

static void test_router_merge_token_is_node_token(void **state)
{
    /* Intent: the router's cursor is byte for byte a node's page token. */
    (void)state;
    struct ds_id ids[3] = {{.value = 42}, {.is_string = true, .len = 3}, {.value = INT64_MAX}};
    memcpy(ids[1].text, "a\0b", 3);
    for (size_t i = 0; i < 3; i++) {
        char want[INDEX_TOKEN_CHARS_MAX + 1];
        char got[QUERY_ORDERS_TOKEN_CHARS_MAX + 1];
        node_token(1767225600123, &ids[i], want);
        router_order_token(1767225600123, &ids[i], got);
        assert_string_equal(got, want);
    }
}

/* An order line of a node answer at ts (ms within 2026-01-01) with id (JSON). */
static void order_json(char *dst, size_t cap, uint32_t second, const char *id)
{
    snprintf(dst, cap,
             "{\"order_id\":%s,\"ts\":\"2026-01-01T00:00:%02u.000Z\",\"day\":\"2026-01-01\","
             "\"status\":\"paid\",\"amount\":\"1.0000\"}",
             id, second);
}

static void test_router_merge_orders_stops_at_frontier(void **state)
{
    /* Intent: a member's short page with a next token (it looked up to there) bounds the page:
     * orders of others past it wait for the next page, so none of that member's is skipped. */
    (void)state;
    char a1[256], b1[256], b2[256], b3[256];
    order_json(a1, sizeof(a1), 50, "1");
    order_json(b1, sizeof(b1), 45, "2");
    order_json(b2, sizeof(b2), 30, "3");
    order_json(b3, sizeof(b3), 20, "4");
    char frontier[INDEX_TOKEN_CHARS_MAX + 1];
    struct ds_id five = {.value = 5};
    node_token(1767225600000 + 40000, &five, frontier); /* A looked down to 00:00:40 */
    char a[2048], b[2048];
    snprintf(a, sizeof(a), "{\"customer_id\":7,\"orders\":[%s],\"next\":\"%s\",\"gsi_lag_ms\":3}",
             a1, frontier);
    char b_next[INDEX_TOKEN_CHARS_MAX + 1];
    struct ds_id four = {.value = 4};
    node_token(1767225600000 + 20000, &four, b_next);
    snprintf(b, sizeof(b),
             "{\"customer_id\":7,\"orders\":[%s,%s,%s],\"next\":\"%s\",\"gsi_lag_ms\":9}", b1, b2,
             b3, b_next);
    const char *bodies[] = {a, b};
    struct query_route route = {.endpoint = QUERY_EP_ORDERS, .limit = 3, .customer = {.value = 7}};
    struct router_merged m = {0};
    assert_int_equal(router_merge_orders(&route, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    json_t *orders = json_object_get(doc, "orders");
    assert_int_equal(json_array_size(orders), 2); /* 00:00:30 is past A's frontier */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(orders, 0), "order_id")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(orders, 1), "order_id")), 2);
    assert_string_equal(json_string_value(json_object_get(doc, "next")), frontier);
    assert_int_equal(json_integer_value(json_object_get(doc, "gsi_lag_ms")), 9);
    json_decref(doc);
    free(m.body);
}

static void test_router_merge_orders_tie_break_and_once(void **state)
{
    /* Intent: equal ts: string ids first, descending, then integers descending; the same
     * order from two members is listed once; the end of every member is the end (null). */
    (void)state;
    char s1[256], s2[256], i7[256], i8[256];
    order_json(s1, sizeof(s1), 10, "\"s-1\"");
    order_json(s2, sizeof(s2), 10, "\"s-2\"");
    order_json(i7, sizeof(i7), 10, "7");
    order_json(i8, sizeof(i8), 10, "8");
    char a[2048], b[2048];
    snprintf(a, sizeof(a),
             "{\"customer_id\":\"42\",\"orders\":[%s,%s],\"next\":null,"
             "\"gsi_lag_ms\":0}",
             s1, i7);
    snprintf(b, sizeof(b),
             "{\"customer_id\":\"42\",\"orders\":[%s,%s,%s],\"next\":null,"
             "\"gsi_lag_ms\":0}",
             s2, i8, i7);
    const char *bodies[] = {a, b};
    struct query_route route = {.endpoint = QUERY_EP_ORDERS,
                                .limit = 10,
                                .customer = {.is_string = true, .len = 2, .text = "42"}};
    struct router_merged m = {0};
    assert_int_equal(router_merge_orders(&route, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    json_t *orders = json_object_get(doc, "orders");
    assert_int_equal(json_array_size(orders), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(orders, 0), "order_id")),
                        "s-2");
    assert_string_equal(json_string_value(json_object_get(json_array_get(orders, 1), "order_id")),
                        "s-1");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(orders, 2), "order_id")), 8);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(orders, 3), "order_id")), 7);
    assert_true(json_is_null(json_object_get(doc, "next")));
    assert_string_equal(json_string_value(json_object_get(doc, "customer_id")), "42");
    json_decref(doc);
    free(m.body);
}

static void test_router_merge_orders_full_page_cursor(void **state)
{
    /* Intent: a full page's cursor is the last order listed, whoever listed it, and a page
     * ends with more to come when a member had more. */
    (void)state;
    char a1[256], a2[256], b1[256], b2[256];
    order_json(a1, sizeof(a1), 59, "1");
    order_json(a2, sizeof(a2), 40, "2");
    order_json(b1, sizeof(b1), 50, "3");
    order_json(b2, sizeof(b2), 30, "4");
    char a_next[INDEX_TOKEN_CHARS_MAX + 1], b_next[INDEX_TOKEN_CHARS_MAX + 1];
    struct ds_id two = {.value = 2};
    struct ds_id four = {.value = 4};
    node_token(1767225600000 + 40000, &two, a_next);
    node_token(1767225600000 + 30000, &four, b_next);
    char a[2048], b[2048];
    snprintf(a, sizeof(a),
             "{\"customer_id\":7,\"orders\":[%s,%s],\"next\":\"%s\","
             "\"gsi_lag_ms\":0}",
             a1, a2, a_next);
    snprintf(b, sizeof(b),
             "{\"customer_id\":7,\"orders\":[%s,%s],\"next\":\"%s\","
             "\"gsi_lag_ms\":0}",
             b1, b2, b_next);
    const char *bodies[] = {a, b};
    struct query_route route = {.endpoint = QUERY_EP_ORDERS, .limit = 2, .customer = {.value = 7}};
    struct router_merged m = {0};
    assert_int_equal(router_merge_orders(&route, bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    json_t *orders = json_object_get(doc, "orders");
    assert_int_equal(json_array_size(orders), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(orders, 1), "order_id")), 3);
    char want[INDEX_TOKEN_CHARS_MAX + 1];
    struct ds_id three = {.value = 3};
    node_token(1767225600000 + 50000, &three, want);
    assert_string_equal(json_string_value(json_object_get(doc, "next")), want);
    json_decref(doc);
    free(m.body);
}

static void test_router_merge_partitions_sums_by_shard(void **state)
{
    /* Intent: /v1/partitions adds each shard's figures over members; a rate is null only
     * when no member knows one. */
    (void)state;
    const char *a = "{\"day\":\"2026-01-01\",\"shards\":2,\"partitions\":["
                    "{\"shard\":0,\"partition\":\"DAY#2026-01-01#0\",\"events\":3,\"bytes\":30,"
                    "\"blocks\":1,\"write_rate_per_s\":null},"
                    "{\"shard\":1,\"partition\":\"DAY#2026-01-01#1\",\"events\":1,\"bytes\":10,"
                    "\"blocks\":1,\"write_rate_per_s\":2.5}],\"as_of\":{\"0\":5}}";
    const char *b = "{\"day\":\"2026-01-01\",\"shards\":2,\"partitions\":["
                    "{\"shard\":0,\"partition\":\"DAY#2026-01-01#0\",\"events\":4,\"bytes\":40,"
                    "\"blocks\":2,\"write_rate_per_s\":null},"
                    "{\"shard\":1,\"partition\":\"DAY#2026-01-01#1\",\"events\":2,\"bytes\":20,"
                    "\"blocks\":1,\"write_rate_per_s\":1.0}],\"as_of\":{\"1\":6}}";
    const char *bodies[] = {a, b};
    struct router_merged m = {0};
    assert_int_equal(router_merge_partitions(bodies, 2, &m), 0);
    json_t *doc = merged_doc(&m);
    json_t *list = json_object_get(doc, "partitions");
    assert_int_equal(json_array_size(list), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 0), "events")), 7);
    assert_true(json_is_null(json_object_get(json_array_get(list, 0), "write_rate_per_s")));
    assert_true(json_real_value(json_object_get(json_array_get(list, 1), "write_rate_per_s")) ==
                3.5);
    assert_int_equal(m.as_of.bits[0], 3u);
    json_decref(doc);
    free(m.body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_merge_count_sums_exactly),
        cmocka_unit_test(test_router_merge_count_bad_answer_named),
        cmocka_unit_test(test_router_merge_count_retention_floor_is_latest),
        cmocka_unit_test(test_router_merge_token_is_node_token),
        cmocka_unit_test(test_router_merge_orders_stops_at_frontier),
        cmocka_unit_test(test_router_merge_orders_tie_break_and_once),
        cmocka_unit_test(test_router_merge_orders_full_page_cursor),
        cmocka_unit_test(test_router_merge_partitions_sums_by_shard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
