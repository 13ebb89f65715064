/*
 * Unit tests of query/metrics.c: the node's live figures and their Prometheus text. Checks the
 * exact series a scraper reads (names, labels, cumulative buckets), that unassigned partitions
 * stay out, and that a too-small buffer is refused rather than cut.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "query/query.h"

static struct query_metrics metrics;

static void test_metrics_text_series(void **state)
{
    /* Every figure appears under its dayshard_* name with bounded labels. */
    (void)state;
    static const char *const reasons[] = {"not_json", "bad_ts", "we\"ird"};
    query_metrics_init(&metrics, reasons, 3);
    atomic_store(&metrics.events_ingested, 1234);
    query_metrics_rejected_add(&metrics, 1, 5);
    query_metrics_rejected_add(&metrics, 7, 5); /* no such reason: ignored */
    query_metrics_lag_set(&metrics, 3, 42);
    query_metrics_lag_set(&metrics, 5000, 9);          /* beyond the table: ignored */
    query_metrics_fsync_observe(&metrics, 40000);      /* 40 us: first bucket */
    query_metrics_fsync_observe(&metrics, 3000000);    /* 3 ms */
    query_metrics_fsync_observe(&metrics, 9000000000); /* 9 s: +Inf only */
    char text[64 * 1024];
    int64_t n = query_metrics_text(&metrics, text, sizeof(text));
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(text));
    assert_non_null(strstr(text, "\ndayshard_events_ingested_total 1234\n"));
    assert_non_null(strstr(text, "\ndayshard_events_rejected_total{reason=\"bad_ts\"} 5\n"));
    assert_non_null(strstr(text, "\ndayshard_events_rejected_total{reason=\"not_json\"} 0\n"));
    assert_non_null(strstr(text, "{reason=\"we_ird\"}"));
    assert_non_null(strstr(text, "\ndayshard_consumer_lag_messages{partition=\"3\"} 42\n"));
    assert_null(strstr(text, "partition=\"0\""));
    assert_non_null(strstr(text, "\ndayshard_fsync_seconds_bucket{le=\"0.000050\"} 1\n"));
    assert_non_null(strstr(text, "\ndayshard_fsync_seconds_bucket{le=\"0.002500\"} 1\n"));
    assert_non_null(strstr(text, "\ndayshard_fsync_seconds_bucket{le=\"0.005000\"} 2\n"));
    assert_non_null(strstr(text, "\ndayshard_fsync_seconds_bucket{le=\"0.250000\"} 2\n"));
    assert_non_null(strstr(text, "\ndayshard_fsync_seconds_bucket{le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(text, "\ndayshard_fsync_seconds_count 3\n"));
    assert_non_null(strstr(text, "\ndayshard_fsync_seconds_sum 9.003040000\n"));
    assert_non_null(strstr(text, "# TYPE dayshard_fsync_seconds histogram\n"));
}

static void test_metrics_lag_max(void **state)
{
    /* Readiness reads the largest lag over assigned partitions only. */
    (void)state;
    query_metrics_init(&metrics, NULL, 0);
    assert_int_equal(query_metrics_lag_max(&metrics), 0);
    query_metrics_lag_set(&metrics, 0, 10);
    query_metrics_lag_set(&metrics, 1023, 700);
    query_metrics_lag_set(&metrics, 2, 30);
    assert_int_equal(query_metrics_lag_max(&metrics), 700);
    query_metrics_lag_set(&metrics, 1023, -1); /* revoked */
    assert_int_equal(query_metrics_lag_max(&metrics), 30);
}

static void test_metrics_text_too_small(void **state)
{
    /* A buffer that cannot hold the text is refused with -ENOSPC, never cut. */
    (void)state;
    query_metrics_init(&metrics, NULL, 0);
    char text[64];
    assert_int_equal(query_metrics_text(&metrics, text, sizeof(text)), -ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_text_series),
        cmocka_unit_test(test_metrics_lag_max),
        cmocka_unit_test(test_metrics_text_too_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
