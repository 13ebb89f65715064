/*
 * Unit tests of query/heat_render.c: the /v1/heat document (parsed back with jansson, an
 * independent JSON reader) and the bounded heat series of /metrics, from a hand-made report.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"
#include "query/query.h"
#include "tests/support/events.h"

static struct query_metrics metrics;

/* A report with two partitions of one day (4 shards, grown to 8), two Kafka partitions, an
 * integer and a string customer and one growth. */
static struct shard_heat_report *report_make(void)
{
    struct shard_heat_report *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    int32_t day = test_day_of("2026-01-21");
    struct shard_heat_snapshot *s = &r->heat;
    s->second = 1796083205; /* 2026-12-01T00:00:05Z */
    s->capacity_eps = 1000;
    s->events = 5000;
    s->rate_now = 2000;
    s->would_throttle_events = 700;
    s->over_capacity_seconds = 3;
    s->customer_rate_eps = 400.0;
    s->partition_count = 2;
    s->partitions[0] = (struct shard_heat_partition_row){.day = day,
                                                         .shard = 2,
                                                         .rate_now = 1500,
                                                         .rate_peak = 1700,
                                                         .window_events = 6000,
                                                         .events = 4000,
                                                         .over_capacity_seconds = 3,
                                                         .would_throttle_events = 700};
    s->partitions[1] = (struct shard_heat_partition_row){
        .day = day, .shard = 0, .rate_now = 500, .rate_peak = 600, .events = 1000};
    r->partition_day_shards[0] = 8;
    r->partition_day_shards[1] = 8;
    s->day_count = 1;
    s->days[0] = (struct shard_heat_day_row){.day = day, .rate_now = 2000, .events = 5000};
    r->day_shards[0] = 8;
    s->source_count = 2;
    s->sources[0] = (struct shard_heat_source_row){.partition = 0, .rate_now = 1200, .events = 3};
    s->sources[1] = (struct shard_heat_source_row){.partition = 7, .rate_now = 800, .events = 2};
    s->customer_count = 2;
    test_id_int(&s->customers[0].customer, 42);
    s->customers[0].rate_eps = 100.0;
    test_id_string(&s->customers[1].customer, "c\"7", 3);
    s->customers[1].rate_eps = 50.0;
    s->customers[1].error_eps = 2.5;
    r->base_shards = 4;
    r->max_shards = 256;
    r->adaptive = true;
    r->growths_total = 1;
    r->growth_count = 1;
    r->growths[0] = (struct shard_growth){.day = day, .from = 4, .to = 8, .at_ms = 1796083203120};
    snprintf(r->growths[0].reason, sizeof(r->growths[0].reason), "over \"capacity\"");
    return r;
}

static json_t *render(const struct shard_heat_report *r, uint32_t top)
{
    size_t cap = query_heat_json_bound();
    char *text = malloc(cap);
    assert_non_null(text);
    int64_t n = query_heat_json(r, &metrics, top, text, cap);
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(text));
    json_error_t err;
    json_t *doc = json_loadb(text, (size_t)n, 0, &err);
    if (doc == NULL) {
        fail_msg("not JSON: %s at %d: %s", err.text, err.position, text);
    }
    /* Too small a buffer is refused, never cut. */
    assert_int_equal(query_heat_json(r, &metrics, top, text, (size_t)n), -ENOSPC);
    free(text);
    return doc;
}

static void test_heat_render_document(void **state)
{
    /* Every field of /v1/heat (docs/HTTP_API.md), the shares, the lag from the metrics, nulls where
     * nothing is known, and string ids escaped. */
    (void)state;
    query_metrics_init(&metrics, NULL, 0);
    query_metrics_lag_set(&metrics, 0, 12);
    query_metrics_gsi_lag_set(&metrics, 33);
    atomic_store(&metrics.events_ingested, 4900);
    struct shard_heat_report *r = report_make();
    json_t *d = render(r, 10);
    assert_string_equal(json_string_value(json_object_get(d, "second")), "2026-12-01T00:00:05Z");
    assert_int_equal(json_integer_value(json_object_get(d, "shard_capacity_eps")), 1000);
    assert_int_equal(json_integer_value(json_object_get(d, "would_throttle_events")), 700);
    assert_int_equal(json_integer_value(json_object_get(d, "events_durable")), 4900);
    assert_int_equal(json_integer_value(json_object_get(d, "gsi_lag_ms")), 33);
    json_t *p = json_array_get(json_object_get(d, "partitions"), 0);
    assert_string_equal(json_string_value(json_object_get(p, "key")), "DAY#2026-01-21#2");
    assert_int_equal(json_integer_value(json_object_get(p, "day_shards")), 8);
    assert_true(json_real_value(json_object_get(p, "share")) == 0.75);
    assert_true(json_real_value(json_object_get(p, "rate_avg")) == 100.0);
    json_t *k = json_object_get(d, "kafka_partitions");
    assert_int_equal(json_array_size(k), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(k, 0), "lag")), 12);
    assert_true(json_is_null(json_object_get(json_array_get(k, 1), "lag")));
    json_t *c = json_object_get(d, "customers");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(c, 0), "customer_id")), 42);
    assert_string_equal(json_string_value(json_object_get(json_array_get(c, 1), "customer_id")),
                        "c\"7");
    assert_true(json_real_value(json_object_get(json_array_get(c, 0), "share")) == 0.25);
    json_t *g = json_array_get(json_object_get(d, "growths"), 0);
    assert_string_equal(json_string_value(json_object_get(g, "at")), "2026-12-01T00:00:03.120Z");
    assert_string_equal(json_string_value(json_object_get(g, "reason")), "over \"capacity\"");
    json_decref(d);
    /* top bounds the lists (not the Kafka partitions, all listed); no GSI: null. */
    query_metrics_gsi_lag_set(&metrics, -1);
    d = render(r, 1);
    assert_int_equal(json_array_size(json_object_get(d, "partitions")), 1);
    assert_int_equal(json_array_size(json_object_get(d, "customers")), 1);
    assert_int_equal(json_array_size(json_object_get(d, "kafka_partitions")), 2);
    assert_true(json_is_null(json_object_get(d, "gsi_lag_ms")));
    json_decref(d);
    free(r);
}

static void test_heat_render_advice(void **state)
{
    /* "advice" is always there: empty with nothing to advise, else each row's case, subject,
     * evidence and remedy, texts escaped (a string customer id may hold any byte). */
    (void)state;
    query_metrics_init(&metrics, NULL, 0);
    struct shard_heat_report *r = report_make();
    json_t *d = render(r, 10);
    json_t *advice = json_object_get(d, "advice");
    assert_true(json_is_array(advice));
    assert_int_equal(json_array_size(advice), 0);
    json_decref(d);
    r->advice_count = 2;
    r->advice[0] = (struct shard_advice){.kind = SHARD_ADVICE_HOT_CUSTOMER, .partition = 0};
    snprintf(r->advice[0].subject, sizeof(r->advice[0].subject), "customer c\"7\n");
    snprintf(r->advice[0].evidence, sizeof(r->advice[0].evidence), "wrote 91%%");
    snprintf(r->advice[0].remedy, sizeof(r->advice[0].remedy), "key by order_id");
    r->advice[1] = (struct shard_advice){.kind = SHARD_ADVICE_DAY_AT_MAX_SHARDS, .day = 1};
    snprintf(r->advice[1].subject, sizeof(r->advice[1].subject), "2026-01-21");
    d = render(r, 10);
    advice = json_object_get(d, "advice");
    assert_int_equal(json_array_size(advice), 2);
    json_t *a = json_array_get(advice, 0);
    assert_string_equal(json_string_value(json_object_get(a, "case")), "hot_customer");
    assert_string_equal(json_string_value(json_object_get(a, "subject")), "customer c\"7\n");
    assert_string_equal(json_string_value(json_object_get(a, "evidence")), "wrote 91%");
    assert_string_equal(json_string_value(json_object_get(a, "remedy")), "key by order_id");
    a = json_array_get(advice, 1);
    assert_string_equal(json_string_value(json_object_get(a, "case")), "day_at_max_shards");
    assert_string_equal(json_string_value(json_object_get(a, "subject")), "2026-01-21");
    assert_string_equal(json_string_value(json_object_get(a, "evidence")), "");
    json_decref(d);
    free(r);
}

static void test_heat_render_metrics_bounded(void **state)
{
    /* /metrics carries the totals and only the top rows, labels escaped. */
    (void)state;
    struct shard_heat_report *r = report_make();
    char text[16384];
    struct http_text b = {.dst = text, .capacity = sizeof(text)};
    heat_metrics_put(r, &b);
    assert_false(b.overflow);
    assert_non_null(strstr(text, "\ndayshard_heat_would_throttle_events_total 700\n"));
    assert_non_null(strstr(text, "\ndayshard_shard_growths_total 1\n"));
    assert_non_null(
        strstr(text, "\ndayshard_heat_partition_rate{key=\"DAY#2026-01-21#2\"} 1500\n"));
    assert_non_null(strstr(text, "\ndayshard_day_shards{day=\"2026-01-21\"} 8\n"));
    assert_non_null(strstr(text, "\ndayshard_heat_customer_rate{customer=\"c\\\"7\"} 50.0\n"));
    free(r);
}

static void test_heat_render_metrics_store(void **state)
{
    /* The report is copied in and out whole; nothing before the first one. */
    (void)state;
    query_metrics_init(&metrics, NULL, 0);
    struct shard_heat_report *r = report_make();
    struct shard_heat_report *out = calloc(1, sizeof(*out));
    assert_non_null(out);
    assert_false(query_metrics_heat_get(&metrics, out));
    query_metrics_heat_set(&metrics, r);
    assert_true(query_metrics_heat_get(&metrics, out));
    assert_memory_equal(out, r, sizeof(*r));
    free(out);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heat_render_document),
        cmocka_unit_test(test_heat_render_advice),
        cmocka_unit_test(test_heat_render_metrics_bounded),
        cmocka_unit_test(test_heat_render_metrics_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
