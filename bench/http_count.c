/*
 * Benchmark: count latency over HTTP keep-alive (targets: one-day count p99 <= 250 us, the same
 * on a busy day and at 10M events stored; with day totals, one-day p99 <= 150 us at any S up to
 * 256, a 28-day range p99 <= 1 ms at S = 256), for each listed S shards per day, and a
 * 28-day range. For each S it appends the busy-day workload (28 days, 30% on the busy day)
 * through the storage API, starts two query services in-process on 127.0.0.1:0 over the same
 * directory, and one client thread asks sequentially on one keep-alive connection. The services
 * are started after the first tenth of the events and keep running while the rest is appended
 * (they refresh per request), so the quiet-day figure at a tenth and at all events shows the
 * latency is flat. Baselines in the same run: the second service fans every count out over the
 * day's partitions (query_http_config.count_fanout, the path without day totals) where the first
 * reads the day totals, each query is also timed in-process on both paths, and per S the
 * loopback floor (bench.h: a bare TCP round trip, which no HTTP answer beats). Each query
 * prints both paths and the fan-out / day-totals ratios.
 *
 * Usage: bench_http_count [events=10000000] [iterations=20000] [shards=4,16,64]
 *        bench_http_count --url HOST:PORT PATH [iterations]   (client only, any running service)
 */
#include <ftw.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "loadgen/loadgen.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

static struct bench_latency measure_http(const char *address, const char *path, uint64_t iterations,
                                         uint64_t *count_out)
{
    int fd = bench_http_connect(address);
    static char buf[1 << 20];
    uint64_t *ns = calloc(iterations, sizeof(*ns));
    ASSERT(ns != NULL);
    /* Warm-up: each service thread's reader builds its own summaries on its first request. */
    for (int i = 0; i < 7; i++) {
        (void)bench_http_get(fd, path, buf, sizeof(buf));
    }
    const char *body = bench_http_get(fd, path, buf, sizeof(buf));
    const char *count = strstr(body, "\"count\":");
    *count_out = count != NULL ? strtoull(count + 8, NULL, 10) : 0;
    for (uint64_t i = 0; i < iterations; i++) {
        uint64_t t0 = ds_clock_ns();
        (void)bench_http_get(fd, path, buf, sizeof(buf));
        ns[i] = ds_clock_ns() - t0;
    }
    close(fd);
    struct bench_latency l = bench_latency_of(ns, iterations);
    free(ns);
    return l;
}

static struct bench_latency
measure_inprocess(const char *dir, const struct query_count_request *req, uint64_t iterations)
{
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    bench_open_data(dir, SHARD_COUNT_DEFAULT, true, &st, &map);
    uint64_t *ns = calloc(iterations, sizeof(*ns));
    ASSERT(ns != NULL);
    struct query_count_result res;
    for (uint64_t i = 0; i <= iterations; i++) {
        uint64_t t0 = ds_clock_ns();
        ASSERT(query_count(st, map, req, &res) == 0);
        query_count_result_deinit(&res);
        if (i > 0) { /* the first builds the summaries (and the day totals) */
            ns[i - 1] = ds_clock_ns() - t0;
        }
    }
    struct bench_latency l = bench_latency_of(ns, iterations);
    free(ns);
    shard_map_close(map);
    storage_close(st);
    return l;
}

static void append_events(const char *dir, uint32_t shards, struct loadgen_workload *w,
                          uint64_t count)
{
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    bench_open_data(dir, shards, false, &st, &map);
    struct ds_event event;
    for (uint64_t i = 0; i < count && loadgen_workload_next(w, &event); i++) {
        bench_append(st, map, &event);
        if ((i + 1) % 1000000 == 0) {
            ASSERT(storage_commit(st) == 0);
        }
    }
    ASSERT(storage_commit(st) == 0);
    shard_map_close(map);
    storage_close(st);
}

/* One query's figures on both paths, measured alternately in the same run. */
struct paths {
    struct bench_latency http[2];   /* [0] day totals, [1] the per-partition fan-out */
    struct bench_latency inproc[2]; /* the same, in-process */
    uint64_t count;
};

static double ratio_of(double num, double den)
{
    return num / (den > 0 ? den : 1);
}

static void report(const char *what, const struct paths *p)
{
    static const char *const names[2] = {"day totals", "fan-out"};
    for (int i = 0; i < 2; i++) {
        printf("  %-26s %-10s count %9llu  HTTP p50 %7.1f p99 %7.1f max %8.1f us  in-process "
               "p50 %7.1f p99 %7.1f us\n",
               what, names[i], (unsigned long long)p->count, p->http[i].p50_us, p->http[i].p99_us,
               p->http[i].max_us, p->inproc[i].p50_us, p->inproc[i].p99_us);
    }
    printf("  %-26s fan-out / day totals: HTTP p50 %.2fx p99 %.2fx, in-process p50 %.1fx p99 "
           "%.1fx\n",
           what, ratio_of(p->http[1].p50_us, p->http[0].p50_us),
           ratio_of(p->http[1].p99_us, p->http[0].p99_us),
           ratio_of(p->inproc[1].p50_us, p->inproc[0].p50_us),
           ratio_of(p->inproc[1].p99_us, p->inproc[0].p99_us));
}

/* The same count over HTTP from both services and in-process on both paths, alternating. */
static struct paths measure_paths(const char *dir, struct query_http *const services[2],
                                  const char *path, struct query_count_request req,
                                  uint64_t iterations)
{
    struct paths p = {0};
    for (int i = 0; i < 2; i++) {
        uint64_t count = 0;
        p.http[i] = measure_http(query_http_address(services[i]), path, iterations, &count);
        ASSERT(i == 0 || count == p.count); /* both paths answer the same */
        p.count = count;
        req.fanout = i == 1;
        p.inproc[i] = measure_inprocess(dir, &req, iterations);
    }
    return p;
}

static void run_one(uint64_t events, uint64_t iterations, uint32_t shards)
{
    char dir[] = "/tmp/dayshard-bench-http-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    struct loadgen_workload_config wcfg = bench_busy_day_config(events);
    struct loadgen_workload *w = bench_busy_day_workload(events);
    append_events(dir, shards, w, events / 10);
    /* Two services on the same directory: [0] answers from day totals, [1] fans out. */
    struct query_http *services[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        struct query_http_config hcfg = {
            .data_dir = dir, .listen = "127.0.0.1:0", .count_fanout = i == 1};
        ASSERT(query_http_start(&hcfg, &services[i]) == 0);
    }
    char quiet[128], busy[128], month[128];
    char first[DS_DATE_TEXT_SIZE], busy_day[DS_DATE_TEXT_SIZE], last[DS_DATE_TEXT_SIZE];
    int32_t busy_index = wcfg.first_day + (int32_t)wcfg.busy_day_index;
    ds_date_format(wcfg.first_day, first);
    ds_date_format(busy_index, busy_day);
    ds_date_format(wcfg.first_day + (int32_t)wcfg.days - 1, last);
    snprintf(quiet, sizeof(quiet), "/v1/count?day=%s", first);
    snprintf(busy, sizeof(busy), "/v1/count?day=%s", busy_day);
    snprintf(month, sizeof(month), "/v1/count?day=%s&to=%s", first, last);
    struct query_count_request q_quiet = {.day_first = wcfg.first_day, .day_last = wcfg.first_day};
    struct query_count_request q_busy = {.day_first = busy_index, .day_last = busy_index};
    struct query_count_request q_month = {.day_first = wcfg.first_day,
                                          .day_last = wcfg.first_day + (int32_t)wcfg.days - 1};
    struct bench_latency floor = bench_loopback_floor(iterations);
    printf("S = %u shards per day; loopback floor (bare TCP round trip) p50 %.1f us  p99 %.1f "
           "us\n",
           shards, floor.p50_us, floor.p99_us);
    struct paths p = measure_paths(dir, services, quiet, q_quiet, iterations);
    report("one quiet day, 1/10 stored", &p);
    append_events(dir, shards, w, events - events / 10);
    p = measure_paths(dir, services, quiet, q_quiet, iterations);
    report("one quiet day, all stored", &p);
    struct paths day = measure_paths(dir, services, busy, q_busy, iterations);
    report("busy day", &day);
    struct paths range = measure_paths(dir, services, month, q_month, iterations / 4 + 1);
    report("28 days", &range);
    printf("  S = %u summary (day totals): one-day HTTP p99 %.1f us [target <= 150], 28-day HTTP "
           "p99 %.1f us [target <= 1000 at S = 256], loopback floor p99 %.1f us\n",
           shards, day.http[0].p99_us, range.http[0].p99_us, floor.p99_us);
    for (int i = 0; i < 2; i++) {
        query_http_stop(services[i]);
    }
    loadgen_workload_destroy(w);
    bench_remove_tree(dir);
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "--url") == 0) {
        uint64_t iterations = argc > 4 ? strtoull(argv[4], NULL, 10) : 20000;
        uint64_t count = 0;
        struct bench_latency l =
            measure_http(argv[2], argv[3], iterations < 10 ? 10 : iterations, &count);
        printf("%s count %llu p50_us %.1f p99_us %.1f max_us %.1f\n", argv[3],
               (unsigned long long)count, l.p50_us, l.p99_us, l.max_us);
        return 0;
    }
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000ull;
    uint64_t iterations = argc > 2 ? strtoull(argv[2], NULL, 10) : 20000ull;
    iterations = iterations < 10 ? 10 : iterations;
    const char *shard_list = argc > 3 ? argv[3] : "4,16,64";
    printf("bench_http_count: %llu busy-day events (28 days, 30%% on one), %llu sequential "
           "requests per query on one keep-alive connection, 2 service threads\n",
           (unsigned long long)events, (unsigned long long)iterations);
    bench_wakeup_note();
    for (const char *p = shard_list; *p != '\0';) { /* one run per listed shard count */
        char *end = NULL;
        unsigned long shards = strtoul(p, &end, 10);
        ASSERT(end != p && shards >= 1 && shards <= SHARD_COUNT_MAX);
        run_one(events, iterations, (uint32_t)shards);
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}
