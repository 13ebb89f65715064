/*
 * Benchmark: count latency in-process (target:
 * one-day count <= 100 us median, flat in the number of events stored) and storage append
 * throughput with bytes per event.
 *
 * Builds a data directory from the busy-day workload (28 days, 30% on 2026-01-21, 4 shards)
 * by appending through the storage API (no JSON), measuring append events/s and bytes/event.
 * It measures the one-day count at 1M and at the full event count to show it is flat, and the
 * 28-day count, by=hour and a status filter. Each latency is the median (and p99, max) of
 * ITERATIONS queries on a reader opened read-only, after a first cold query that builds the
 * summaries from block headers (reported apart). Baseline in the same run: the same one-day
 * count by decompressing and scanning the day's blocks, which is what a count costs without
 * header summaries.
 *
 * Then, for each of S = 4, 64, 256 shards per day (a directory each), one day and 28 days
 * from the day totals and by the per-partition fan-out (the baseline), alternately in the same run,
 * with the ratios.
 *
 * Usage: bench_count_latency [events=10000000] [iterations=20000] [path_events=2000000]
 *        [shards=4,64,256]
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "loadgen/loadgen.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

struct latency {
    double p50_us, p99_us, max_us, cold_us;
};

static struct latency measure(const char *dir, const struct query_count_request *req,
                              uint64_t iterations, uint64_t *count_out)
{
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    int rc = storage_open_reader(dir, &st);
    rc = rc == 0 ? shard_map_open(dir, SHARD_COUNT_DEFAULT, SHARD_MAP_READ_ONLY, &map) : rc;
    ASSERT(rc == 0);
    uint64_t *ns = calloc(iterations, sizeof(*ns));
    ASSERT(ns != NULL);
    struct latency lat = {0};
    struct query_count_result res;
    uint64_t t0 = ds_clock_ns();
    rc = query_count(st, map, req, &res);
    lat.cold_us = (double)(ds_clock_ns() - t0) / 1e3;
    ASSERT(rc == 0);
    *count_out = res.count;
    query_count_result_deinit(&res);
    for (uint64_t i = 0; i < iterations; i++) {
        t0 = ds_clock_ns();
        rc = query_count(st, map, req, &res);
        ns[i] = ds_clock_ns() - t0;
        ASSERT(rc == 0 && res.count == *count_out);
        query_count_result_deinit(&res);
    }
    qsort(ns, iterations, sizeof(*ns), bench_compare_u64);
    lat.p50_us = (double)ns[iterations / 2] / 1e3;
    lat.p99_us = (double)ns[iterations * 99 / 100] / 1e3;
    lat.max_us = (double)ns[iterations - 1] / 1e3;
    free(ns);
    shard_map_close(map);
    storage_close(st);
    return lat;
}

struct scan_count {
    uint64_t events;
};

static int count_event(const struct ds_event *event, void *user)
{
    (void)event;
    ((struct scan_count *)user)->events++;
    return 0;
}

/* The baseline: the one-day count by decompressing every block of the day. */
static double scan_day_us(const char *dir, int32_t day, uint64_t *events)
{
    struct storage *st = NULL;
    int rc = storage_open_reader(dir, &st);
    ASSERT(rc == 0);
    uint64_t best = UINT64_MAX;
    for (int round = 0; round < 3; round++) {
        struct scan_count c = {0};
        uint64_t t0 = ds_clock_ns();
        for (uint32_t shard = 0; shard < SHARD_COUNT_DEFAULT; shard++) {
            rc = storage_partition_scan(st, day, shard, count_event, &c);
            ASSERT(rc == 0);
        }
        uint64_t ns = ds_clock_ns() - t0;
        best = ns < best ? ns : best;
        *events = c.events;
    }
    storage_close(st);
    return (double)best / 1e3;
}

/* Appends events [0, upto) of the workload (continuing w) and commits every million. */
static double append_until(struct storage *st, struct shard_map *map, struct loadgen_workload *w,
                           uint64_t count)
{
    struct ds_event event;
    uint64_t t0 = ds_clock_ns();
    for (uint64_t i = 0; i < count && loadgen_workload_next(w, &event); i++) {
        bench_append(st, map, &event);
        if ((i + 1) % 1000000 == 0) {
            ASSERT(storage_commit(st) == 0);
        }
    }
    ASSERT(storage_commit(st) == 0);
    return (double)(ds_clock_ns() - t0) / 1e9;
}

static void report(const char *what, const struct latency *l, uint64_t count)
{
    printf("  %-34s count %9llu  p50 %8.2f us  p99 %8.2f us  max %8.1f us  (cold %.0f us)\n", what,
           (unsigned long long)count, l->p50_us, l->p99_us, l->max_us, l->cold_us);
}

/* One day and 28 days at S shards per day, from the day totals and by the fan-out over every
 * partition (query_count_request.fanout, the baseline), measured alternately on
 * the same directory, with the ratios. */
static void compare_paths(uint64_t events, uint64_t iterations, uint32_t shards)
{
    char dir[] = "/tmp/dayshard-bench-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    struct loadgen_workload_config wcfg = bench_busy_day_config(events);
    struct loadgen_workload *w = bench_busy_day_workload(events);
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    bench_open_data(dir, shards, false, &st, &map);
    (void)append_until(st, map, w, events);
    storage_close(st);
    shard_map_close(map);
    loadgen_workload_destroy(w);
    int32_t busy = wcfg.first_day + (int32_t)wcfg.busy_day_index;
    struct query_count_request queries[2] = {
        {.day_first = busy, .day_last = busy},
        {.day_first = wcfg.first_day, .day_last = wcfg.first_day + (int32_t)wcfg.days - 1}};
    static const char *const names[2] = {"one day (busy)", "28 days"};
    for (int q = 0; q < 2; q++) {
        uint64_t count[2] = {0, 0};
        struct latency l[2];
        for (int path = 0; path < 2; path++) {
            queries[q].fanout = path == 1;
            l[path] =
                measure(dir, &queries[q], q == 0 ? iterations : iterations / 4 + 1, &count[path]);
        }
        ASSERT(count[0] == count[1]);
        printf("  S = %3u %-15s count %9llu  day totals p50 %8.2f p99 %8.2f us  fan-out p50 "
               "%8.2f p99 %8.2f us  ratio p50 %6.1fx p99 %6.1fx\n",
               shards, names[q], (unsigned long long)count[0], l[0].p50_us, l[0].p99_us,
               l[1].p50_us, l[1].p99_us, l[1].p50_us / (l[0].p50_us > 0 ? l[0].p50_us : 1),
               l[1].p99_us / (l[0].p99_us > 0 ? l[0].p99_us : 1));
    }
    bench_remove_tree(dir);
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000ull;
    uint64_t iterations = argc > 2 ? strtoull(argv[2], NULL, 10) : 20000ull;
    iterations = iterations < 10 ? 10 : iterations;
    /* the shard-count comparison: fewer events by default, each S builds its own directory */
    uint64_t path_events = argc > 3 ? strtoull(argv[3], NULL, 10) : 2000000ull;
    const char *shard_list = argc > 4 ? argv[4] : "4,64,256";
    uint64_t first = events < 1000000 ? events / 10 : 1000000;
    char dir[] = "/tmp/dayshard-bench-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);

    struct loadgen_workload_config wcfg = bench_busy_day_config(events);
    struct loadgen_workload *w = bench_busy_day_workload(events);
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    bench_open_data(dir, SHARD_COUNT_DEFAULT, false, &st, &map);

    int32_t busy = wcfg.first_day + (int32_t)wcfg.busy_day_index;
    struct query_count_request one_day = {.day_first = busy, .day_last = busy};
    struct query_count_request early = {.day_first = wcfg.first_day, .day_last = wcfg.first_day};
    struct query_count_request month = {.day_first = wcfg.first_day,
                                        .day_last = wcfg.first_day + (int32_t)wcfg.days - 1};
    struct query_count_request by_hour = one_day;
    by_hour.by = QUERY_GROUP_HOUR;
    struct query_count_request paid = one_day;
    paid.has_status = true;
    paid.status_len = 4;
    memcpy(paid.status, "paid", 4);

    printf("bench_count_latency: %llu busy-day events, 4 shards, %llu iterations per query\n",
           (unsigned long long)events, (unsigned long long)iterations);
    double seconds = append_until(st, map, w, first);
    uint64_t count = 0;
    struct latency at_first = measure(dir, &early, iterations, &count);
    report("one day, 1st day, at 1M stored", &at_first, count);
    seconds += append_until(st, map, w, events - first);
    storage_close(st);
    shard_map_close(map);
    loadgen_workload_destroy(w);

    struct storage_fsck_options fopts = {0};
    struct storage_fsck_report fr;
    ASSERT(storage_fsck(dir, &fopts, &fr) == 0);
    printf("storage append (no JSON): %.0f events/s, %.2f bytes/event on disk, %llu blocks\n",
           (double)events / seconds, (double)fr.bytes_ok / (double)fr.events_ok,
           (unsigned long long)fr.blocks_ok);

    struct latency early_all = measure(dir, &early, iterations, &count);
    report("one day, 1st day, all stored", &early_all, count);
    struct latency l;
    struct latency busy_lat = measure(dir, &one_day, iterations, &count);
    report("one day, busy day", &busy_lat, count);
    uint64_t busy_count = count;
    l = measure(dir, &month, iterations, &count);
    report("28 days", &l, count);
    l = measure(dir, &by_hour, iterations, &count);
    report("busy day by hour", &l, count);
    l = measure(dir, &paid, iterations, &count);
    report("busy day, status paid", &l, count);
    uint64_t scanned = 0;
    double scan_us = scan_day_us(dir, busy, &scanned);
    ASSERT(scanned == busy_count);
    printf("baseline: busy-day count by decompressing its blocks: %.0f us (best of 3); "
           "the summary count is %.0f times faster\n",
           scan_us, scan_us / busy_lat.p50_us);
    printf("flatness: 1st-day count p50 at 1M stored %.2f us, at %llu stored %.2f us "
           "[target <= 100 us, flat]\n",
           at_first.p50_us, (unsigned long long)events, early_all.p50_us);
    bench_remove_tree(dir);

    printf("day totals against the per-partition fan-out (%llu events per S, in-process):\n",
           (unsigned long long)path_events);
    for (const char *p = shard_list; *p != '\0';) {
        char *end = NULL;
        unsigned long shards = strtoul(p, &end, 10);
        ASSERT(end != p && shards >= 1 && shards <= SHARD_COUNT_MAX);
        compare_paths(path_events, iterations, (uint32_t)shards);
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}
