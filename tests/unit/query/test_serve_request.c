/*
 * Unit tests of query/serve_request.c: routing and validation of HTTP request targets. Every
 * malformed request must map to its 4xx status with a message, and valid ones must fill the
 * count request exactly as the CLI would.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

static unsigned parse(const char *method, const char *target, struct query_route *route)
{
    return query_route_parse(method, target, strlen(target), QUERY_RANGE_DAYS_DEFAULT, route);
}

static void test_serve_request_count_valid(void **state)
{
    /* A full count request fills every field of the count request. */
    (void)state;
    struct query_route r;
    assert_int_equal(
        parse("GET", "/v1/count?day=2026-01-21&to=2026-01-23&status=pa%69d&by=hour", &r), 0);
    assert_int_equal(r.endpoint, QUERY_EP_COUNT);
    assert_true(r.needs_token);
    int32_t day = 0;
    assert_int_equal(ds_date_parse("2026-01-21", 10, &day), 0);
    assert_int_equal(r.count.day_first, day);
    assert_int_equal(r.count.day_last, day + 2);
    assert_true(r.count.has_status);
    assert_int_equal(r.count.status_len, 4);
    assert_memory_equal(r.count.status, "paid", 4);
    assert_int_equal(r.count.by, QUERY_GROUP_HOUR);
    assert_int_equal(r.count.range_days_max, QUERY_RANGE_DAYS_DEFAULT);
    /* Without to, the range is one day; HEAD is allowed; a '+' is a space. */
    assert_int_equal(parse("HEAD", "/v1/count?day=2026-01-21&status=a+b", &r), 0);
    assert_int_equal(r.count.day_last, day);
    assert_memory_equal(r.count.status, "a b", 3);
}

static void test_serve_request_count_bad_params(void **state)
{
    /* Each malformed count request gets 400 and a message. */
    (void)state;
    static const char *const bad[] = {
        "/v1/count",                               /* day missing */
        "/v1/count?day=2026-02-30",                /* impossible date */
        "/v1/count?day=2026-1-5",                  /* not YYYY-MM-DD */
        "/v1/count?day=",                          /* empty */
        "/v1/count?day",                           /* no value */
        "/v1/count?day=2026-01-21&to=2026-01-20",  /* to before day */
        "/v1/count?day=2025-01-01&to=2026-01-02",  /* 367 days */
        "/v1/count?day=2026-01-21&by=week",        /* unknown by */
        "/v1/count?day=2026-01-21&stauts=paid",    /* unknown parameter */
        "/v1/count?day=2026-01-21&day=2026-01-22", /* repeated */
        "/v1/count?day=2026-01-21&status=%zz",     /* bad escape */
        "/v1/count?day=2026-01-21&status=%4",      /* truncated escape */
        "/v1/count?day=2026-01-21&status=a%00b",   /* NUL */
        "/v1/count?day=2026-01-21&status=0123456789012345678901234567890123", /* 34 bytes */
        "/v1/count?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9",                      /* too many */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct query_route r;
        unsigned status = parse("GET", bad[i], &r);
        if (status != 400) {
            fail_msg("%s: status %u", bad[i], status);
        }
        assert_true(strlen(r.error) > 0);
        assert_int_equal(r.endpoint, QUERY_EP_COUNT);
    }
}

static void test_serve_request_paths_and_methods(void **state)
{
    /* Unknown paths are 404, other methods 405, bytes outside the target grammar 400. */
    (void)state;
    struct query_route r;
    assert_int_equal(parse("GET", "/v1/counts?day=2026-01-21", &r), 404);
    assert_int_equal(parse("GET", "/v1/count/", &r), 404);
    assert_int_equal(parse("GET", "//", &r), 404);
    assert_int_equal(parse("POST", "/v1/count?day=2026-01-21", &r), 405);
    assert_int_equal(parse("DELETE", "/metrics", &r), 405);
    assert_int_equal(parse("POST", "/nope", &r), 404);
    assert_int_equal(parse("GET", "/v1/co%unt", &r), 400);
    assert_int_equal(parse("GET", "/v1/co%00unt", &r), 400);
    assert_int_equal(query_route_parse("GET", "/v1/count\0x", 11, 366, &r), 400);
    assert_int_equal(parse("GET", "/v1/count?day=2026-01-21\x01", &r), 400);
    assert_int_equal(parse("GET", "/metrics?x=1", &r), 400);
    char long_target[HTTP_URI_BYTES_MAX + 16];
    memset(long_target, 'a', sizeof(long_target) - 1);
    long_target[0] = '/';
    long_target[sizeof(long_target) - 1] = '\0';
    assert_int_equal(parse("GET", long_target, &r), 414);
}

static void test_serve_request_probes_and_orders(void **state)
{
    /* Probes need no token; orders validate limit and name the endpoint for the 501. */
    (void)state;
    struct query_route r;
    assert_int_equal(parse("GET", "/healthz", &r), 0);
    assert_false(r.needs_token);
    assert_int_equal(parse("GET", "/readyz", &r), 0);
    assert_false(r.needs_token);
    assert_int_equal(parse("GET", "/metrics", &r), 0);
    assert_true(r.needs_token);
    assert_int_equal(parse("GET", "/v1/partitions?day=2026-01-21", &r), 0);
    assert_int_equal(r.endpoint, QUERY_EP_PARTITIONS);
    assert_int_equal(parse("GET", "/v1/partitions", &r), 400);
    assert_int_equal(parse("GET", "/v1/customers/c%2042/orders?limit=5&consistent=true", &r), 0);
    assert_int_equal(r.endpoint, QUERY_EP_ORDERS);
    assert_int_equal(r.limit, 5);
    assert_int_equal(parse("GET", "/v1/customers/42/orders?limit=0", &r), 400);
    assert_int_equal(parse("GET", "/v1/customers/42/orders?limit=1001", &r), 400);
    assert_int_equal(parse("GET", "/v1/customers/42/orders?consistent=yes", &r), 400);
    assert_int_equal(parse("GET", "/v1/customers//orders", &r), 404);
    assert_int_equal(parse("GET", "/v1/customers/a/b/orders", &r), 404);
}

static void test_serve_request_order_route(void **state)
{
    /* /v1/orders/{id} (the order lookup): the id follows the customer route's rule, decoded once
     * from the raw segment (so '/' and '%' can be in it), and takes only consistent and timeout_ms.
     */
    (void)state;
    struct query_route r;
    assert_int_equal(parse("GET", "/v1/orders/108", &r), 0);
    assert_int_equal(r.endpoint, QUERY_EP_ORDER);
    assert_true(r.needs_token);
    assert_false(r.order_id.is_string);
    assert_int_equal(r.order_id.value, 108);
    assert_false(r.consistent);
    assert_int_equal(parse("GET", "/v1/orders/9223372036854775807", &r), 0);
    assert_false(r.order_id.is_string);
    assert_int_equal(r.order_id.value, INT64_MAX);
    static const struct {
        const char *target;
        const char *id; /* the string id it names */
    } strings[] = {
        {"/v1/orders/%2242%22", "42"}, /* quoted: the string 42 */
        {"/v1/orders/0108", "0108"},   /* a leading zero: not an integer */
        {"/v1/orders/9223372036854775808", "9223372036854775808"}, /* past 2^63-1 */
        {"/v1/orders/-5", "-5"},
        {"/v1/orders/A%2F1%25", "A/1%"}, /* '/' and '%' travel encoded, decoded once */
        {"/v1/orders/%2525", "%25"},
        {"/v1/orders/a+b", "a+b"}, /* '+' is a space only in a query */
        {"/v1/orders/caf%C3%A9", "caf\xc3\xa9"},
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(strings); i++) {
        unsigned status = parse("GET", strings[i].target, &r);
        if (status != 0 || !r.order_id.is_string || r.order_id.len != strlen(strings[i].id) ||
            memcmp(r.order_id.text, strings[i].id, r.order_id.len) != 0) {
            fail_msg("%s: status %u, string %d, '%.*s'", strings[i].target, status,
                     r.order_id.is_string, (int)r.order_id.len, r.order_id.text);
        }
        assert_int_equal(r.endpoint, QUERY_EP_ORDER);
    }
    assert_int_equal(parse("HEAD", "/v1/orders/7?consistent=true&timeout_ms=250", &r), 0);
    assert_true(r.consistent);
    assert_int_equal(r.timeout_ms, 250);
    /* The customer route decodes its id once too now: %25 is a '%'. */
    assert_int_equal(parse("GET", "/v1/customers/50%25/orders", &r), 0);
    assert_int_equal(r.customer.len, 3);
    assert_memory_equal(r.customer.text, "50%", 3);
    char long_id[96] = "/v1/orders/";
    memset(long_id + strlen(long_id), 'x', DS_ID_BYTES_MAX + 1);
    const struct {
        const char *target;
        const char *error; /* what the message must name */
    } bad[] = {
        {"/v1/orders/", "missing order id"},
        {"/v1/orders/%22%22", "order id must be 1..64 bytes"},
        {"/v1/orders/a%00b", "NUL byte"},
        {"/v1/orders/%zz", "bad percent-encoding"},
        {"/v1/orders/1?limit=5", "unknown parameter 'limit'"},
        {"/v1/orders/1?cursor=ab", "unknown parameter 'cursor'"},
        {"/v1/orders/1?timeout_ms=5", "timeout_ms bounds the wait"},
        {"/v1/orders/1?consistent=yes", "bad consistent"},
        {"/v1/orders/1?consistent=true&consistent=true", "given twice"},
        {long_id, "order id must be 1..64 bytes"},
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        unsigned status = parse("GET", bad[i].target, &r);
        if (status != 400 || strstr(r.error, bad[i].error) == NULL) {
            fail_msg("%s: status %u, error '%s'", bad[i].target, status, r.error);
        }
        assert_int_equal(r.endpoint, QUERY_EP_ORDER);
    }
    assert_int_equal(parse("GET", "/v1/orders", &r), 404);
    assert_int_equal(parse("GET", "/v1/orders/1/items", &r), 404);
    assert_int_equal(parse("GET", "/v1/order/1", &r), 404);
    assert_int_equal(parse("POST", "/v1/orders/1", &r), 405);
    assert_int_equal(r.endpoint, QUERY_EP_ORDER);
}

static void test_serve_request_heat(void **state)
{
    /* /v1/heat takes only top, 1..64 (default 10), and needs the token like every data path. */
    (void)state;
    struct query_route r;
    assert_int_equal(parse("GET", "/v1/heat", &r), 0);
    assert_int_equal(r.endpoint, QUERY_EP_HEAT);
    assert_int_equal(r.top, SERVE_HEAT_TOP_DEFAULT);
    assert_true(r.needs_token);
    assert_int_equal(parse("GET", "/v1/heat?top=64", &r), 0);
    assert_int_equal(r.top, 64);
    assert_int_equal(parse("GET", "/v1/heat?top=1", &r), 0);
    assert_int_equal(r.top, 1);
    const char *bad[] = {
        "/v1/heat?top=0",       "/v1/heat?top=65",         "/v1/heat?top=",   "/v1/heat?top=x",
        "/v1/heat?top=1&top=2", "/v1/heat?day=2026-01-21", "/v1/heat?top=-1", "/v1/heat?top=0010"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        assert_int_equal(parse("GET", bad[i], &r), 400);
        assert_true(r.error[0] != '\0');
    }
    assert_int_equal(parse("POST", "/v1/heat", &r), 405);
    assert_int_equal(parse("GET", "/v1/heat/x", &r), 404);
}

static void test_serve_request_console(void **state)
{
    /* GET / and its two assets are the console, which checks the token itself (needs_token is
     * false); / takes only token=T, decoded, non-empty, once. */
    (void)state;
    struct query_route r;
    const char *paths[] = {"/", "/console.js", "/console.css"};
    for (size_t i = 0; i < DS_ARRAY_LEN(paths); i++) {
        assert_int_equal(parse("GET", paths[i], &r), 0);
        assert_int_equal(r.endpoint, QUERY_EP_CONSOLE);
        assert_false(r.needs_token);
        assert_false(r.has_token);
    }
    assert_int_equal(parse("GET", "/?token=s3cr%2Bt", &r), 0);
    assert_true(r.has_token);
    assert_int_equal(r.token_len, 6);
    assert_string_equal(r.token, "s3cr+t");
    const char *bad[] = {"/?token=", "/?token=a&token=b", "/?tokn=a", "/?token=%zz",
                         "/?token=a%00b"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        assert_int_equal(parse("GET", bad[i], &r), 400);
        assert_true(r.error[0] != '\0');
    }
    assert_int_equal(parse("POST", "/", &r), 405);
    assert_int_equal(parse("GET", "/console", &r), 404);
    assert_int_equal(parse("GET", "/index.html", &r), 404);
}

static void test_serve_request_heat_history_and_stream(void **state)
{
    /* /v1/heat/history takes only seconds, 1..300 (default 300); /v1/heat/stream takes no
     * parameter; both need the token. */
    (void)state;
    struct query_route r;
    assert_int_equal(parse("GET", "/v1/heat/history", &r), 0);
    assert_int_equal(r.endpoint, QUERY_EP_HEAT_HISTORY);
    assert_int_equal(r.seconds, SHARD_HEAT_HISTORY_S);
    assert_true(r.needs_token);
    assert_int_equal(parse("GET", "/v1/heat/history?seconds=1", &r), 0);
    assert_int_equal(r.seconds, 1);
    assert_int_equal(parse("GET", "/v1/heat/history?seconds=300", &r), 0);
    assert_int_equal(r.seconds, 300);
    const char *bad[] = {"/v1/heat/history?seconds=0",    "/v1/heat/history?seconds=301",
                         "/v1/heat/history?seconds=",     "/v1/heat/history?seconds=x",
                         "/v1/heat/history?top=5",        "/v1/heat/history?seconds=1&seconds=2",
                         "/v1/heat/history?seconds=1000", "/v1/heat/stream?seconds=5"};
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        assert_int_equal(parse("GET", bad[i], &r), 400);
        assert_true(strstr(r.error, "seconds") != NULL || strstr(r.error, "unknown") != NULL);
    }
    assert_int_equal(parse("GET", "/v1/heat/stream", &r), 0);
    assert_int_equal(r.endpoint, QUERY_EP_HEAT_STREAM);
    assert_true(r.needs_token);
    assert_int_equal(parse("POST", "/v1/heat/stream", &r), 405);
    assert_int_equal(parse("GET", "/v1/heat/streams", &r), 404);
}

static void test_serve_request_error_json_escapes(void **state)
{
    /* Client bytes quoted in a message stay printable ASCII, and the document is valid JSON. */
    (void)state;
    struct query_route r;
    assert_int_equal(parse("GET", "/v1/count?day=%22%5C%FF", &r), 400);
    assert_null(strchr(r.error, '\xff'));
    char doc[512];
    int64_t n = http_error_json(r.error, doc, sizeof(doc));
    assert_true(n > 0);
    assert_string_equal(doc,
                        "{\"error\":\"bad day '\\\"\\\\?': expected a real date YYYY-MM-DD\"}");
    assert_int_equal(http_error_json("x", doc, 8), -ENOSPC);
}

static void test_serve_request_consistent_params(void **state)
{
    /* consistent and timeout_ms on both endpoints that wait; timeout_ms alone, out of
     * 1..QUERY_CONSISTENT_TIMEOUT_MS_MAX or not a plain decimal is a 400 naming it. */
    (void)state;
    struct query_route r;
    assert_int_equal(parse("GET", "/v1/count?day=2026-01-21&consistent=true&timeout_ms=250", &r),
                     0);
    assert_true(r.consistent);
    assert_int_equal(r.timeout_ms, 250);
    assert_int_equal(parse("GET", "/v1/count?day=2026-01-21&consistent=true", &r), 0);
    assert_true(r.consistent);
    assert_int_equal(r.timeout_ms, 0); /* the service's default */
    assert_int_equal(parse("GET", "/v1/count?day=2026-01-21&consistent=false", &r), 0);
    assert_false(r.consistent);
    assert_int_equal(parse("GET", "/v1/count?day=2026-01-21", &r), 0);
    assert_false(r.consistent);
    assert_int_equal(parse("GET",
                           "/v1/count?timeout_ms=60000&consistent=true&day=2026-01-21&"
                           "to=2026-01-22&status=paid&by=day",
                           &r),
                     0);
    assert_int_equal(r.timeout_ms, QUERY_CONSISTENT_TIMEOUT_MS_MAX);
    assert_int_equal(r.count.by, QUERY_GROUP_DAY);
    assert_int_equal(parse("GET", "/v1/customers/42/orders?consistent=true&timeout_ms=1", &r), 0);
    assert_true(r.consistent);
    assert_int_equal(r.timeout_ms, 1);
    static const char *const bad[] = {
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms=0",
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms=60001",
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms=100000",
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms=",
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms",
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms=-5",
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms=1e3",
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms=2s",
        "/v1/count?day=2026-01-21&consistent=true&timeout_ms=1&timeout_ms=2",
        "/v1/count?day=2026-01-21&consistent=TRUE",
        "/v1/count?day=2026-01-21&timeout_ms=100",
        "/v1/count?day=2026-01-21&consistent=false&timeout_ms=100",
        "/v1/customers/42/orders?timeout_ms=100",
        "/v1/customers/42/orders?consistent=true&timeout_ms=0",
        "/v1/customers/42/orders?consistent=true&timeout_ms=99999",
        "/v1/partitions?day=2026-01-21&consistent=true",
    };
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        unsigned status = parse("GET", bad[i], &r);
        if (status != 400 || r.error[0] == '\0') {
            fail_msg("%s: status %u, error '%s'", bad[i], status, r.error);
        }
    }
    assert_int_equal(parse("GET", "/v1/count?day=2026-01-21&consistent=true&timeout_ms=0", &r),
                     400);
    assert_string_equal(r.error, "bad timeout_ms: expected 1..60000 (milliseconds)");
    assert_int_equal(parse("GET", "/v1/count?day=2026-01-21&timeout_ms=100", &r), 400);
    assert_string_equal(r.error, "timeout_ms bounds the wait of consistent=true: give both");
}

static void test_serve_request_consistency_json(void **state)
{
    /* The field an answer carries: which guarantee, and for a node the positions it covers. */
    (void)state;
    char text[256];
    int64_t n = serve_consistency_json(SERVE_CONSISTENCY_DURABLE, NULL, 0, text, sizeof(text));
    assert_int_equal(n, (int64_t)strlen(text));
    assert_string_equal(text, ",\"consistency\":\"durable\"");
    const struct query_position pos[] = {{.partition = 0, .high_watermark = 12, .stored_from = 0},
                                         {.partition = 3, .high_watermark = INT64_MAX}};
    n = serve_consistency_json(SERVE_CONSISTENCY_ACKNOWLEDGED, pos, 2, text, sizeof(text));
    assert_string_equal(text, ",\"consistency\":\"acknowledged\",\"high_watermarks\":{\"0\":12,"
                              "\"3\":9223372036854775807}");
    assert_int_equal(n, (int64_t)strlen(text));
    assert_true((size_t)n < serve_consistency_json_bound(2));
    n = serve_consistency_json(SERVE_CONSISTENCY_ACKNOWLEDGED, pos, 0, text, sizeof(text));
    assert_string_equal(text, ",\"consistency\":\"acknowledged\",\"high_watermarks\":{}");
    assert_int_equal(serve_consistency_json(SERVE_CONSISTENCY_ACKNOWLEDGED, pos, 2, text, 40),
                     -ENOSPC);
}

static void test_serve_request_unmet_json(void **state)
{
    /* A 503 names the positions still missing (only those), null for a partition the store
     * never saw; when only the index is behind, every position and the commit it needs. */
    (void)state;
    const struct query_position pos[] = {
        {.partition = 0, .high_watermark = 100, .stored_from = 0},
        {.partition = 1, .high_watermark = 50, .stored_from = 0},   /* reached */
        {.partition = 2, .high_watermark = 7, .stored_from = 0},    /* never stored */
        {.partition = 5, .high_watermark = 30, .stored_from = 40}}; /* another member's */
    const int64_t next[] = {90, 50, -1, 3};
    struct serve_unmet_wait w = {.why = SERVE_UNMET_TIMEOUT,
                                 .timeout_ms = 2000,
                                 .count = 4,
                                 .positions = pos,
                                 .durable_next = next};
    char doc[1024];
    int64_t n = serve_unmet_json(&w, doc, sizeof(doc));
    assert_int_equal(n, (int64_t)strlen(doc));
    assert_true((size_t)n < serve_unmet_json_bound(4));
    assert_string_equal(
        doc, "{\"error\":\"not every event the topic had acknowledged is durable here yet "
             "(timeout_ms 2000)\",\"consistency\":\"acknowledged\",\"timeout_ms\":2000,"
             "\"missing\":[{\"partition\":0,\"high_watermark\":100,\"durable_next\":90},"
             "{\"partition\":2,\"high_watermark\":7,\"durable_next\":null}]}");
    w.why = SERVE_UNMET_REBALANCE;
    assert_true(serve_unmet_json(&w, doc, sizeof(doc)) > 0);
    assert_non_null(strstr(doc, "reassigned while waiting (a rebalance)"));
    assert_non_null(strstr(doc, "\"missing\":[{\"partition\":0,"));
    w.why = SERVE_UNMET_INDEX;
    w.index_needed_seq = 77;
    const int64_t all[] = {100, 50, 7, 3};
    w.durable_next = all;
    n = serve_unmet_json(&w, doc, sizeof(doc));
    assert_true(n > 0);
    assert_non_null(strstr(doc, "by-customer index does not hold them yet"));
    assert_non_null(strstr(doc, "{\"partition\":5,\"high_watermark\":30,\"durable_next\":3}]"
                                ",\"index_needed_seq\":77}"));
    assert_int_equal(serve_unmet_json(&w, doc, 200), -ENOSPC);
    /* The bound holds the widest values. */
    struct query_position wide[8];
    int64_t none[8];
    for (size_t i = 0; i < DS_ARRAY_LEN(wide); i++) {
        wide[i] = (struct query_position){.partition = INT32_MAX, .high_watermark = INT64_MAX};
        none[i] = INT64_MAX - 1;
    }
    w = (struct serve_unmet_wait){.why = SERVE_UNMET_INDEX,
                                  .timeout_ms = QUERY_CONSISTENT_TIMEOUT_MS_MAX,
                                  .count = 8,
                                  .positions = wide,
                                  .durable_next = none,
                                  .index_needed_seq = UINT64_MAX};
    size_t cap = serve_unmet_json_bound(8);
    char *big = malloc(cap);
    assert_non_null(big);
    assert_true(serve_unmet_json(&w, big, cap) > 0);
    free(big);
}

static void test_serve_request_position_reached(void **state)
{
    /* The store's next offset reaches the high watermark, or the node does not store below. */
    (void)state;
    struct query_position p = {.partition = 0, .high_watermark = 10, .stored_from = 0};
    assert_true(serve_position_reached(&p, 10));
    assert_true(serve_position_reached(&p, 11));
    assert_false(serve_position_reached(&p, 9));
    assert_false(serve_position_reached(&p, -1));
    p.high_watermark = 0; /* an empty partition */
    assert_true(serve_position_reached(&p, -1));
    p = (struct query_position){.partition = 0, .high_watermark = 10, .stored_from = 10};
    assert_true(serve_position_reached(&p, -1));
    p.stored_from = 9;
    assert_false(serve_position_reached(&p, 5));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_request_count_valid),
        cmocka_unit_test(test_serve_request_count_bad_params),
        cmocka_unit_test(test_serve_request_paths_and_methods),
        cmocka_unit_test(test_serve_request_probes_and_orders),
        cmocka_unit_test(test_serve_request_order_route),
        cmocka_unit_test(test_serve_request_heat),
        cmocka_unit_test(test_serve_request_console),
        cmocka_unit_test(test_serve_request_heat_history_and_stream),
        cmocka_unit_test(test_serve_request_error_json_escapes),
        cmocka_unit_test(test_serve_request_consistent_params),
        cmocka_unit_test(test_serve_request_consistency_json),
        cmocka_unit_test(test_serve_request_unmet_json),
        cmocka_unit_test(test_serve_request_position_reached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
