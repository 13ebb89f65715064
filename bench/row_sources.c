/*
 * bench_row_sources [EVENTS] [RUNS] [COMMIT_EVENTS]: what keeping each row's Kafka source costs
 * the events model (block version 4: a partition and an offset column per block).
 *
 * Each run appends the busy-day workload's EVENTS events (default 2,000,000; fixed seed) through
 * the storage API into a fresh directory of the events model, routed as every source does, with
 * a storage_commit every COMMIT_EVENTS events (default 10,000, about a node's batch), and:
 *   - "sources": each event with the source a node gives it: one of 12 Kafka partitions (the
 *     producer's key hash of the order id), at that partition's next offset;
 *   - "none": the same events without a source (the blocks the events model writes without
 *     row sources, versions 1-2: the baseline).
 * The two alternate run by run (RUNS each, default 5) so both see the same machine. Printed:
 * the median append+commit rate (events/s, the clock around the appends and commits) and the
 * on-disk bytes per event (the committed blocks' bytes over the events), with the ratio
 * sources / none. Directories go under /tmp and are removed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench.h"

#define RUNS_MAX 15
#define KAFKA_PARTITIONS 12u

struct run_result {
    double events_per_s;
    double bytes_per_event;
};

struct bytes_sum {
    struct storage *st;
    uint64_t bytes;
    uint64_t events;
};

static int add_partition(int32_t day, uint32_t shard, void *user)
{
    struct bytes_sum *sum = user;
    struct storage_partition_total t;
    ASSERT(storage_partition_totals(sum->st, day, shard, NULL, 0, &t) == 0);
    sum->bytes += t.bytes;
    sum->events += t.count;
    return 0;
}

static struct run_result run_once(uint64_t events, uint64_t commit_events, bool sources, int run)
{
    char dir[128];
    snprintf(dir, sizeof(dir), "/tmp/bench-row-sources-%d-%d", (int)getpid(), run);
    bench_remove_tree(dir);
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    bench_open_data(dir, SHARD_COUNT_DEFAULT, false, &st, &map);
    struct loadgen_workload *w = bench_busy_day_workload(events);
    int64_t next[KAFKA_PARTITIONS] = {0};
    struct ds_event event;
    uint64_t n = 0;
    uint64_t start = bench_now_ns();
    while (loadgen_workload_next(w, &event)) {
        int32_t day = 0;
        uint32_t shard = 0;
        ASSERT(ingest_route(map, &event, &day, &shard) == 0);
        uint64_t key = event.order_id.is_string ? (uint64_t)event.order_id.text[0]
                                                : (uint64_t)event.order_id.value;
        uint32_t partition = (uint32_t)(ds_mix64(key) % KAFKA_PARTITIONS);
        struct ds_source source = {.partition = (int32_t)partition, .offset = next[partition]++};
        ASSERT(storage_append(st, day, shard, &event, sources ? &source : NULL) == 0);
        if (++n % commit_events == 0) {
            ASSERT(storage_commit(st) == 0);
        }
    }
    ASSERT(storage_commit(st) == 0);
    uint64_t elapsed = bench_now_ns() - start;
    ASSERT(n == events);
    struct bytes_sum sum = {.st = st};
    ASSERT(storage_partition_visit(st, add_partition, &sum) == 0);
    ASSERT(sum.events == events);
    loadgen_workload_destroy(w);
    shard_map_close(map);
    storage_close(st);
    bench_remove_tree(dir);
    return (struct run_result){.events_per_s = (double)n * 1e9 / (double)elapsed,
                               .bytes_per_event = (double)sum.bytes / (double)n};
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000ull;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    uint64_t commit_events = argc > 3 ? strtoull(argv[3], NULL, 10) : 10000ull;
    if (events == 0 || runs < 1 || runs > RUNS_MAX || commit_events == 0) {
        fprintf(stderr, "usage: bench_row_sources [EVENTS>0] [RUNS 1..%d] [COMMIT_EVENTS>0]\n",
                RUNS_MAX);
        return 2;
    }
    double rate[2][RUNS_MAX];
    double bytes[2][RUNS_MAX];
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 2; k++) {
            struct run_result res = run_once(events, commit_events, k == 1, r * 2 + k);
            rate[k][r] = res.events_per_s;
            bytes[k][r] = res.bytes_per_event;
        }
    }
    static const char *const names[2] = {"none", "sources"};
    double rate_median[2];
    double bytes_median[2];
    printf("bench_row_sources: %llu events, %d runs each, commit every %llu\n",
           (unsigned long long)events, runs, (unsigned long long)commit_events);
    for (int k = 0; k < 2; k++) {
        rate_median[k] = bench_median(rate[k], runs);
        bytes_median[k] = bench_median(bytes[k], runs);
        printf("  %-8s append+commit %.0f events/s (median; min %.0f, max %.0f), "
               "%.3f bytes/event on disk\n",
               names[k], rate_median[k], rate[k][0], rate[k][runs - 1], bytes_median[k]);
    }
    printf("  ratio sources/none: rate %.3f, bytes/event %.3f\n", rate_median[1] / rate_median[0],
           bytes_median[1] / bytes_median[0]);
    return 0;
}
