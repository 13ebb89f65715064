/*
 * Unit tests of query/http_request.c: routing and validation of HTTP request targets. Every
 * malformed request must map to its 4xx status with a message, and valid ones must fill the
 * count request exactly as the CLI would.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "query/http_private.h"

static unsigned parse(const char *method, const char *target, struct http_route *route)
{
    return http_route_parse(method, target, strlen(target), QUERY_RANGE_DAYS_DEFAULT, route);
}

static void test_http_request_count_valid(void **state)
{
    /* A full count request fills every field of the count request. */
    (void)state;
    struct http_route r;
    assert_int_equal(
        parse("GET", "/v1/count?day=2026-01-21&to=2026-01-23&status=pa%69d&by=hour", &r), 0);
    assert_int_equal(r.endpoint, HTTP_EP_COUNT);
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

static void test_http_request_count_bad_params(void **state)
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
        struct http_route r;
        unsigned status = parse("GET", bad[i], &r);
        if (status != 400) {
            fail_msg("%s: status %u", bad[i], status);
        }
        assert_true(strlen(r.error) > 0);
        assert_int_equal(r.endpoint, HTTP_EP_COUNT);
    }
}

static void test_http_request_paths_and_methods(void **state)
{
    /* Unknown paths are 404, other methods 405, bytes outside the target grammar 400. */
    (void)state;
    struct http_route r;
    assert_int_equal(parse("GET", "/v1/counts?day=2026-01-21", &r), 404);
    assert_int_equal(parse("GET", "/v1/count/", &r), 404);
    assert_int_equal(parse("GET", "/", &r), 404);
    assert_int_equal(parse("POST", "/v1/count?day=2026-01-21", &r), 405);
    assert_int_equal(parse("DELETE", "/metrics", &r), 405);
    assert_int_equal(parse("POST", "/nope", &r), 404);
    assert_int_equal(parse("GET", "/v1/co%unt", &r), 400);
    assert_int_equal(parse("GET", "/v1/co%00unt", &r), 400);
    assert_int_equal(http_route_parse("GET", "/v1/count\0x", 11, 366, &r), 400);
    assert_int_equal(parse("GET", "/v1/count?day=2026-01-21\x01", &r), 400);
    assert_int_equal(parse("GET", "/metrics?x=1", &r), 400);
    char long_target[HTTP_URI_BYTES_MAX + 16];
    memset(long_target, 'a', sizeof(long_target) - 1);
    long_target[0] = '/';
    long_target[sizeof(long_target) - 1] = '\0';
    assert_int_equal(parse("GET", long_target, &r), 414);
}

static void test_http_request_probes_and_orders(void **state)
{
    /* Probes need no token; orders validate limit and name the endpoint for the 501. */
    (void)state;
    struct http_route r;
    assert_int_equal(parse("GET", "/healthz", &r), 0);
    assert_false(r.needs_token);
    assert_int_equal(parse("GET", "/readyz", &r), 0);
    assert_false(r.needs_token);
    assert_int_equal(parse("GET", "/metrics", &r), 0);
    assert_true(r.needs_token);
    assert_int_equal(parse("GET", "/v1/partitions?day=2026-01-21", &r), 0);
    assert_int_equal(r.endpoint, HTTP_EP_PARTITIONS);
    assert_int_equal(parse("GET", "/v1/partitions", &r), 400);
    assert_int_equal(parse("GET", "/v1/customers/c%2042/orders?limit=5&consistent=true", &r), 0);
    assert_int_equal(r.endpoint, HTTP_EP_ORDERS);
    assert_int_equal(r.limit, 5);
    assert_int_equal(parse("GET", "/v1/customers/42/orders?limit=0", &r), 400);
    assert_int_equal(parse("GET", "/v1/customers/42/orders?limit=1001", &r), 400);
    assert_int_equal(parse("GET", "/v1/customers/42/orders?consistent=yes", &r), 400);
    assert_int_equal(parse("GET", "/v1/customers//orders", &r), 404);
    assert_int_equal(parse("GET", "/v1/customers/a/b/orders", &r), 404);
}

static void test_http_request_heat(void **state)
{
    /* /v1/heat takes only top, 1..64 (default 10), and needs the token like every data path. */
    (void)state;
    struct http_route r;
    assert_int_equal(parse("GET", "/v1/heat", &r), 0);
    assert_int_equal(r.endpoint, HTTP_EP_HEAT);
    assert_int_equal(r.top, HTTP_HEAT_TOP_DEFAULT);
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

static void test_http_request_error_json_escapes(void **state)
{
    /* Client bytes quoted in a message stay printable ASCII, and the document is valid JSON. */
    (void)state;
    struct http_route r;
    assert_int_equal(parse("GET", "/v1/count?day=%22%5C%FF", &r), 400);
    assert_null(strchr(r.error, '\xff'));
    char doc[512];
    int64_t n = http_error_json(r.error, doc, sizeof(doc));
    assert_true(n > 0);
    assert_string_equal(doc,
                        "{\"error\":\"bad day '\\\"\\\\?': expected a real date YYYY-MM-DD\"}");
    assert_int_equal(http_error_json("x", doc, 8), -ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_request_count_valid),
        cmocka_unit_test(test_http_request_count_bad_params),
        cmocka_unit_test(test_http_request_paths_and_methods),
        cmocka_unit_test(test_http_request_probes_and_orders),
        cmocka_unit_test(test_http_request_heat),
        cmocka_unit_test(test_http_request_error_json_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
