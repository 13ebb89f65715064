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

static void test_metrics_held_rendered_after_commit(void **state)
{
    /* The writer's holdings appear only once a commit reported them, with HELP and TYPE, days as
     * their first second and nanoseconds as seconds; the events model (ids NULL) leaves the
     * orders-by-id store's families out. */
    (void)state;
    query_metrics_init(&metrics, NULL, 0);
    char text[64 * 1024];
    int64_t n = query_metrics_text(&metrics, text, sizeof(text));
    assert_true(n > 0);
    assert_null(strstr(text, "dayshard_partitions_held"));
    struct storage_held held = {.partitions = 12, .days = 0, .segment_fds = 5};
    query_metrics_held_set(&metrics, &held, NULL, 0, 20460, NULL); /* 2026-01-07 */
    n = query_metrics_text(&metrics, text, sizeof(text));
    assert_true(n > 0);
    assert_non_null(strstr(text, "# TYPE dayshard_partitions_held gauge\n"
                                 "dayshard_partitions_held 12\n"));
    assert_non_null(strstr(text, "\ndayshard_segment_fds 5\n"));
    assert_non_null(strstr(text, "\ndayshard_retention_floor_timestamp_seconds 0\n"));
    assert_non_null(strstr(text, "\ndayshard_stream_day_timestamp_seconds 1767744000\n"));
    assert_null(strstr(text, "dayshard_ids_"));
    assert_null(strstr(text, "dayshard_compact")); /* the writer's figures were not given */
    assert_null(strstr(text, "dayshard_writer_stall"));
    struct storage_ids_held ids = {.keydir_bytes = 4096,
                                   .recent_bytes = 777,
                                   .recent_hard_bytes = 16u << 20,
                                   .sealed_files = 3,
                                   .seals = 2,
                                   .sealing = true,
                                   .stall_calls = 9,
                                   .stall_total_ns = 1500000000,
                                   .stall_max_ns = 250000};
    struct query_writer_figures writer = {.stall_ns_max = 35000000,
                                          .compactions = 4,
                                          .compaction_slices = 11,
                                          .compaction_slice_ns_max = 21000000,
                                          .compacting = true};
    query_metrics_held_set(&metrics, &held, &ids, 20458, -1, &writer);
    n = query_metrics_text(&metrics, text, sizeof(text));
    assert_true(n > 0);
    assert_non_null(strstr(text, "\ndayshard_retention_floor_timestamp_seconds 1767571200\n"));
    assert_null(strstr(text, "dayshard_stream_day_timestamp_seconds")); /* nothing stored */
    assert_non_null(strstr(text, "\ndayshard_ids_keydir_bytes 4096\n"));
    assert_non_null(strstr(text, "\ndayshard_ids_recent_bytes 777\n"));
    assert_non_null(strstr(text, "\ndayshard_ids_recent_hard_bytes 16777216\n"));
    assert_non_null(strstr(text, "\ndayshard_ids_sealed_files 3\n"));
    assert_non_null(strstr(text, "# TYPE dayshard_ids_seals_total counter\n"
                                 "dayshard_ids_seals_total 2\n"));
    assert_non_null(strstr(text, "\ndayshard_ids_sealing 1\n"));
    assert_non_null(strstr(text, "\ndayshard_ids_seal_stalls_total 9\n"));
    assert_non_null(strstr(text, "\ndayshard_ids_seal_stall_seconds_total 1.500000000\n"));
    assert_non_null(strstr(text, "\ndayshard_ids_seal_stall_seconds_max 0.000250000\n"));
    assert_non_null(strstr(text, "\ndayshard_writer_stall_seconds_max 0.035000000\n"));
    assert_non_null(strstr(text, "# TYPE dayshard_compactions_total counter\n"
                                 "dayshard_compactions_total 4\n"));
    assert_non_null(strstr(text, "\ndayshard_compaction_slices_total 11\n"));
    assert_non_null(strstr(text, "\ndayshard_compaction_slice_seconds_max 0.021000000\n"));
    assert_non_null(strstr(text, "\ndayshard_compacting 1\n"));
}

static void test_metrics_readiness_follows_progress(void **state)
{
    /* Ready takes a joined node whose consumer thread reported within the stall bound, whose
     * lag is within its bound, and whose writer committed within the bound while messages
     * wait; an idle node (lag 0) needs no commit. */
    (void)state;
    const uint64_t s = 1000000000u;
    const uint64_t stall = 10 * s;
    int64_t lag = -1;
    uint64_t silent = 1;
    query_metrics_init(&metrics, NULL, 0);
    assert_int_equal(query_metrics_readiness(&metrics, 100, stall, ds_clock_ns(), &lag, &silent),
                     QUERY_UNREADY_JOINING);
    uint64_t t0 = ds_clock_ns();
    query_metrics_joined_set(&metrics);
    query_metrics_lag_set(&metrics, 0, 0);
    assert_int_equal(query_metrics_readiness(&metrics, 100, stall, t0 + s, &lag, &silent),
                     QUERY_READY);
    assert_int_equal(lag, 0);
    assert_int_equal(silent, 0);
    /* idle for 11 s: the writer has nothing to commit, but the consumer must still report */
    assert_int_equal(query_metrics_readiness(&metrics, 100, stall, t0 + 11 * s, &lag, &silent),
                     QUERY_UNREADY_CONSUMER);
    assert_true(silent >= 10 * s && silent <= 11 * s);
    /* messages wait and no commit came since joining */
    query_metrics_lag_set(&metrics, 0, 7);
    assert_int_equal(query_metrics_readiness(&metrics, 100, stall, t0 + 5 * s, &lag, &silent),
                     QUERY_READY);
    uint64_t t1 = ds_clock_ns();
    query_metrics_joined_set(&metrics); /* the consumer reports on; the writer stays silent */
    assert_int_equal(query_metrics_readiness(&metrics, 100, stall, t1 + s, &lag, &silent),
                     QUERY_READY);
    metrics.consumer_seen_ns = t0 + 11 * s; /* reported just now, as seen from t0 + 11 s */
    assert_int_equal(query_metrics_readiness(&metrics, 100, stall, t0 + 11 * s, &lag, &silent),
                     QUERY_UNREADY_WRITER);
    assert_int_equal(lag, 7);
    assert_true(silent >= 10 * s && silent <= 11 * s);
    /* a commit: ready again */
    struct storage_held held = {.partitions = 1};
    query_metrics_held_set(&metrics, &held, NULL, 0, -1, NULL);
    uint64_t t2 = ds_clock_ns();
    metrics.consumer_seen_ns = t2;
    assert_int_equal(query_metrics_readiness(&metrics, 100, stall, t2 + s, &lag, &silent),
                     QUERY_READY);
    /* a lag over its bound, with both threads fine */
    query_metrics_lag_set(&metrics, 0, 101);
    assert_int_equal(query_metrics_readiness(&metrics, 100, stall, t2 + s, &lag, &silent),
                     QUERY_UNREADY_LAG);
    assert_int_equal(lag, 101);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_text_series),
        cmocka_unit_test(test_metrics_lag_max),
        cmocka_unit_test(test_metrics_text_too_small),
        cmocka_unit_test(test_metrics_held_rendered_after_commit),
        cmocka_unit_test(test_metrics_readiness_follows_progress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
