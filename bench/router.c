/*
 * Benchmark: the router's overhead (target: count p99 through the router over 4 nodes <= 2x a
 * single node's p99, in the same run). The busy-day workload is appended once to a
 * single directory and once split over 4 directories (event i to directory i % 4, as a topic's
 * partitions would spread it); 5 query services start in-process (query_http_start) on
 * 127.0.0.1:0, one over the single directory and one over each quarter, and a router
 * (router_start) over the 4 quarters. One client asks sequentially on one keep-alive
 * connection; each round measures the single node, then the router, for the same count, so
 * both see the same machine state. Medians over the rounds of each side's p50 and p99, their
 * ratio, and the loopback floor (bench.h: a bare TCP round trip) are printed; every answer's
 * count is checked to be the same through both.
 *
 * Usage: bench_router [events=1000000] [iterations=5000] [rounds=5]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "loadgen/loadgen.h"
#include "query/query.h"
#include "router/router.h"
#include "shard/shard.h"
#include "storage/storage.h"

#define BENCH_NODES 4u

static struct bench_latency measure(const char *address, const char *path, uint64_t iterations,
                                    uint64_t *count_out)
{
    int fd = bench_http_connect(address);
    static char buf[1 << 20];
    uint64_t *ns = calloc(iterations, sizeof(*ns));
    ASSERT(ns != NULL);
    for (int i = 0; i < 20; i++) { /* warm-up: every service thread builds its summaries */
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

/* Appends the workload to the single directory and, split, to the quarters. */
static void append_all(const char *single, char quarters[BENCH_NODES][64], uint64_t events)
{
    struct storage *st[BENCH_NODES + 1];
    struct shard_map *map[BENCH_NODES + 1];
    bench_open_data(single, SHARD_COUNT_DEFAULT, false, &st[BENCH_NODES], &map[BENCH_NODES]);
    for (uint32_t i = 0; i < BENCH_NODES; i++) {
        bench_open_data(quarters[i], SHARD_COUNT_DEFAULT, false, &st[i], &map[i]);
    }
    struct loadgen_workload *w = bench_busy_day_workload(events);
    struct ds_event event;
    for (uint64_t i = 0; i < events && loadgen_workload_next(w, &event); i++) {
        bench_append(st[BENCH_NODES], map[BENCH_NODES], &event);
        bench_append(st[i % BENCH_NODES], map[i % BENCH_NODES], &event);
    }
    for (uint32_t i = 0; i <= BENCH_NODES; i++) {
        ASSERT(storage_commit(st[i]) == 0);
        shard_map_close(map[i]);
        storage_close(st[i]);
    }
    loadgen_workload_destroy(w);
}

struct bench_side {
    double p50[64];
    double p99[64];
};

/* addresses: the single node, the router over the quarters, the router over the single node
 * alone (its own overhead, without a fan-out). */
static void run_query(const char *what, const char *path, const char *const *addresses,
                      uint64_t iterations, uint32_t rounds)
{
    struct bench_side sides[3] = {0};
    uint64_t counts[3] = {0};
    for (uint32_t r = 0; r < rounds; r++) {
        for (uint32_t k = 0; k < 3; k++) {
            struct bench_latency l = measure(addresses[k], path, iterations, &counts[k]);
            sides[k].p50[r] = l.p50_us;
            sides[k].p99[r] = l.p99_us;
        }
        ASSERT(counts[0] == counts[1]); /* the router's sum is the single node's count */
        ASSERT(counts[0] == counts[2]);
    }
    double p50[3], p99[3];
    for (uint32_t k = 0; k < 3; k++) {
        p50[k] = bench_median(sides[k].p50, (int)rounds);
        p99[k] = bench_median(sides[k].p99, (int)rounds);
    }
    printf("  %-10s count %8llu  single node p50 %6.1f p99 %6.1f us | router over %u p50 %6.1f "
           "p99 %6.1f us | router over 1 p50 %6.1f p99 %6.1f us | p99 ratio %.2f (target <= 2)\n",
           what, (unsigned long long)counts[0], p50[0], p99[0], BENCH_NODES, p50[1], p99[1], p50[2],
           p99[2], p99[1] / (p99[0] > 0 ? p99[0] : 1));
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000ull;
    uint64_t iterations = argc > 2 ? strtoull(argv[2], NULL, 10) : 5000ull;
    uint32_t rounds = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 5u;
    iterations = iterations < 10 ? 10 : iterations;
    rounds = rounds < 1 ? 1 : (rounds > 64 ? 64 : rounds);
    char single_dir[] = "/tmp/dayshard-bench-router-XXXXXX";
    ASSERT(mkdtemp(single_dir) != NULL);
    char quarters[BENCH_NODES][64];
    for (uint32_t i = 0; i < BENCH_NODES; i++) {
        snprintf(quarters[i], sizeof(quarters[i]), "/tmp/dayshard-bench-router-q%u-XXXXXX", i);
        ASSERT(mkdtemp(quarters[i]) != NULL);
    }
    append_all(single_dir, quarters, events);
    struct query_http_config hcfg = {.data_dir = single_dir, .listen = "127.0.0.1:0"};
    struct query_http *single = NULL;
    ASSERT(query_http_start(&hcfg, &single) == 0);
    struct query_http *nodes[BENCH_NODES];
    char urls[BENCH_NODES][ROUTER_NODE_URL_BYTES_MAX];
    const char *url_list[BENCH_NODES];
    for (uint32_t i = 0; i < BENCH_NODES; i++) {
        hcfg.data_dir = quarters[i];
        ASSERT(query_http_start(&hcfg, &nodes[i]) == 0);
        snprintf(urls[i], sizeof(urls[i]), "http://%s", query_http_address(nodes[i]));
        url_list[i] = urls[i];
    }
    struct router_config rcfg = {
        .nodes = url_list, .node_count = BENCH_NODES, .listen = "127.0.0.1:0", .threads = 2};
    struct router *router = NULL;
    ASSERT(router_start(&rcfg, &router) == 0);
    char single_url[ROUTER_NODE_URL_BYTES_MAX];
    snprintf(single_url, sizeof(single_url), "http://%s", query_http_address(single));
    const char *single_list[1] = {single_url};
    struct router_config one_cfg = rcfg;
    one_cfg.nodes = single_list;
    one_cfg.node_count = 1;
    struct router *router_one = NULL;
    ASSERT(router_start(&one_cfg, &router_one) == 0);
    const char *addresses[3] = {query_http_address(single), router_address(router),
                                router_address(router_one)};

    struct loadgen_workload_config wcfg = bench_busy_day_config(events);
    char first[DS_DATE_TEXT_SIZE], busy[DS_DATE_TEXT_SIZE], last[DS_DATE_TEXT_SIZE];
    ds_date_format(wcfg.first_day, first);
    ds_date_format(wcfg.first_day + (int32_t)wcfg.busy_day_index, busy);
    ds_date_format(wcfg.first_day + (int32_t)wcfg.days - 1, last);
    char quiet_path[128], busy_path[128], month_path[128];
    snprintf(quiet_path, sizeof(quiet_path), "/v1/count?day=%s", first);
    snprintf(busy_path, sizeof(busy_path), "/v1/count?day=%s", busy);
    snprintf(month_path, sizeof(month_path), "/v1/count?day=%s&to=%s&by=day", first, last);

    printf("bench_router: %llu busy-day events, split over %u nodes; %llu sequential requests "
           "per side and round on one keep-alive connection, %u rounds (medians of the "
           "rounds' figures); services 2 threads each, router 2 threads\n",
           (unsigned long long)events, BENCH_NODES, (unsigned long long)iterations, rounds);
    bench_wakeup_note();
    struct bench_latency floor = bench_loopback_floor(iterations);
    printf("  loopback floor (bare TCP round trip) p50 %.1f us  p99 %.1f us\n", floor.p50_us,
           floor.p99_us);
    run_query("quiet day", quiet_path, addresses, iterations, rounds);
    run_query("busy day", busy_path, addresses, iterations, rounds);
    run_query("28 days", month_path, addresses, iterations, rounds);

    router_stop(router_one);
    router_stop(router);
    for (uint32_t i = 0; i < BENCH_NODES; i++) {
        query_http_stop(nodes[i]);
        bench_remove_tree(quarters[i]);
    }
    query_http_stop(single);
    bench_remove_tree(single_dir);
    return 0;
}
