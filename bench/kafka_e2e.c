/*
 * Benchmark: end to end through the embedded broker (issue 3 targets: >= 500,000 events/s
 * sustained and >= 0.5 of the file ingest rate measured in the same run).
 *
 * One run: start the embedded broker (12 partitions) and a node; once the node holds its
 * partitions, a producer sends the busy-day events of a generated file as fast as it can while
 * the node consumes; the clock stops when a reader of the data directory sees every event
 * durable. The parts, in the same run: the producer alone (sending everything to a fresh
 * broker before any node starts), then a node catching up that backlog alone. Consumer lag
 * (messages behind the high watermarks) is sampled from the node every 100 ms. Baseline in the same
 * run: `dayshard ingest` of the same file (ingest_file_run) into a fresh directory. Reported:
 * medians over RUNS, the ratio, and lag p50/max.
 *
 * Usage: bench_kafka_e2e [events=1000000] [runs=3]
 * Environment: DS_BENCH_TRACE=1 prints the durable count and the lag every 20 ms (stderr);
 * DS_BENCH_PRODUCE_X / DS_BENCH_NODE_X=key=value pass one librdkafka property to the producer /
 * the node.
 * The mock broker keeps ~5 MiB per partition: a node that fell far behind would lose events and
 * the run would time out (reported), so keep events modest.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "ingest/ingest.h"
#include "query/query.h"
#include "shard/shard.h"
#include "storage/storage.h"

#define RUNS_MAX 9
#define LAG_SAMPLES_MAX 100000

struct e2e {
    struct ingest_node_config node;
    struct ingest_node_stats node_stats;
    struct ingest_kafka_props props;
    struct ingest_kafka_props produce_props;
    int node_rc;
    volatile int stop;
    struct ingest_produce_config produce;
    struct ingest_produce_stats produce_stats;
    int produce_rc;
    atomic_bool produce_done;
};

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *node_main(void *arg)
{
    struct e2e *e = arg;
    e->node_rc = ingest_node_run(&e->node, &e->node_stats, &e->stop);
    return NULL;
}

static void *producer_main(void *arg)
{
    struct e2e *e = arg;
    e->produce_rc = ingest_produce_run(&e->produce, &e->produce_stats, NULL);
    atomic_store(&e->produce_done, true);
    return NULL;
}

/* What one run measures. */
enum e2e_mode {
    E2E_STREAM, /* the producer sends while the node consumes: the end-to-end figure */
    E2E_BACKLOG /* the producer sends everything first, then the node catches up alone */
};

/* One run; returns events/s from the node's assignment to the last event durable (0 when events
 * went missing), sets *cpu_us_per_event (CPU of the whole process over that time, per event)
 * and, for a backlog run, *produce_rate (the producer alone, to its last delivery report);
 * appends lag samples of streaming runs. */
static double e2e_run(const char *dir, const char *input, uint64_t events, int run,
                      enum e2e_mode mode, double *cpu_us_per_event, double *produce_rate,
                      double *lags, int *lag_count)
{
    struct ingest_broker_config bcfg;
    ingest_broker_config_defaults(&bcfg);
    struct ingest_broker *broker = NULL;
    ASSERT(ingest_broker_start(&bcfg, &broker) == 0);
    struct e2e *e = calloc(1, sizeof(*e));
    ASSERT(e != NULL);
    char data[256];
    snprintf(data, sizeof(data), "%s/kafka%d-%d", dir, run, (int)mode);
    ASSERT(ingest_kafka_props_add(&e->props, "session.timeout.ms=6000") == 0);
    const char *nx = getenv("DS_BENCH_NODE_X");
    if (nx != NULL) {
        ASSERT(ingest_kafka_props_add(&e->props, nx) == 0);
    }
    ingest_node_config_defaults(&e->node);
    e->node.brokers = ingest_broker_bootstrap(broker);
    e->node.data_dir = data;
    e->node.props = &e->props;
    e->node.status_interval_ms = 100;
    /* DS_BENCH_PRODUCE_X=key=value passes one librdkafka property to the producer (for
     * example compression.codec=none, to see what lz4 costs). */
    const char *extra = getenv("DS_BENCH_PRODUCE_X");
    if (extra != NULL) {
        ASSERT(ingest_kafka_props_add(&e->produce_props, extra) == 0);
        e->produce.props = &e->produce_props;
    }
    e->produce.brokers = e->node.brokers;
    e->produce.topic = "orders";
    e->produce.input_fd = open(input, O_RDONLY);
    ASSERT(e->produce.input_fd >= 0);
    pthread_t node;
    pthread_t producer;
    if (mode == E2E_BACKLOG) {
        producer_main(e);
        ASSERT(e->produce_rc == 0 && e->produce_stats.seconds > 0);
        *produce_rate = (double)e->produce_stats.acked / e->produce_stats.seconds;
    }
    ASSERT(pthread_create(&node, NULL, node_main, e) == 0);
    while (__atomic_load_n(&e->node_stats.rebalances, __ATOMIC_RELAXED) == 0) {
        sleep_ms(10); /* the group's first join takes the broker's ~3 s rebalance delay */
    }
    uint64_t t0 = ds_clock_ns();
    double cpu0 = bench_cpu_seconds();
    if (mode == E2E_STREAM) {
        ASSERT(pthread_create(&producer, NULL, producer_main, e) == 0);
    }
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    uint64_t last_change = t0;
    uint64_t seen = 0;
    bool trace = getenv("DS_BENCH_TRACE") != NULL; /* the durable count and lag every 20 ms */
    while (seen < events && ds_clock_ns() - last_change < 30ull * 1000000000u) {
        sleep_ms(20);
        uint64_t now = bench_durable_events(&st, &map, data);
        last_change = now != seen ? ds_clock_ns() : last_change;
        seen = now;
        int64_t lag = __atomic_load_n(&e->node_stats.lag, __ATOMIC_RELAXED);
        if (trace) {
            fprintf(stderr, "trace run %d: %6.0f ms durable %8llu lag %lld\n", run,
                    (double)(ds_clock_ns() - t0) / 1e6, (unsigned long long)seen, (long long)lag);
        }
        if (mode == E2E_STREAM && lag >= 0 && *lag_count < LAG_SAMPLES_MAX) {
            lags[(*lag_count)++] = (double)lag;
        }
    }
    double seconds = (double)(ds_clock_ns() - t0) / 1e9;
    *cpu_us_per_event = (bench_cpu_seconds() - cpu0) * 1e6 / (double)events;
    if (mode == E2E_STREAM) {
        pthread_join(producer, NULL);
    }
    __atomic_store_n(&e->stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(node, NULL);
    close(e->produce.input_fd);
    shard_map_close(map);
    storage_close(st);
    ingest_broker_stop(broker);
    if (seen != events) {
        printf("  run %d: only %llu of %llu events became durable (producer rc %d, acked %llu)\n",
               run, (unsigned long long)seen, (unsigned long long)events, e->produce_rc,
               (unsigned long long)e->produce_stats.acked);
        free(e);
        return 0;
    }
    free(e);
    return (double)events / seconds;
}

static double file_run(const char *dir, const char *input, int run)
{
    char data[256];
    char dead[300];
    snprintf(data, sizeof(data), "%s/file%d", dir, run);
    snprintf(dead, sizeof(dead), "%s/deadletter.jsonl", data);
    struct storage *st = NULL;
    struct shard_map *map = NULL;
    bench_open_data(data, SHARD_COUNT_DEFAULT, false, &st, &map);
    struct ingest_file_config icfg;
    ingest_file_config_defaults(&icfg);
    icfg.storage = st;
    icfg.map = map;
    icfg.deadletter_path = dead;
    int fd = open(input, O_RDONLY);
    ASSERT(fd >= 0);
    struct ingest_stats stats;
    uint64_t t0 = ds_clock_ns();
    ASSERT(ingest_file_run(&icfg, fd, &stats) == 0);
    double seconds = (double)(ds_clock_ns() - t0) / 1e9;
    close(fd);
    shard_map_close(map);
    storage_close(st);
    return (double)stats.accepted / seconds;
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000ull;
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    runs = runs < 1 ? 1 : (runs > RUNS_MAX ? RUNS_MAX : runs);
    char dir[] = "/tmp/dayshard-bench-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char input[256];
    snprintf(input, sizeof(input), "%s/events.jsonl", dir);
    bench_generate_busy_day(input, events);
    printf("bench_kafka_e2e: %llu busy-day events, %d runs, embedded broker with 12 partitions\n",
           (unsigned long long)events, runs);
    double kafka[RUNS_MAX];
    double cpu[RUNS_MAX];
    double backlog[RUNS_MAX];
    double backlog_cpu[RUNS_MAX];
    double produce[RUNS_MAX];
    double file[RUNS_MAX];
    double *lags = calloc(LAG_SAMPLES_MAX, sizeof(*lags));
    ASSERT(lags != NULL);
    int lag_count = 0;
    for (int r = 0; r < runs; r++) {
        double unused = 0;
        kafka[r] = e2e_run(dir, input, events, r, E2E_STREAM, &cpu[r], &unused, lags, &lag_count);
        backlog[r] = e2e_run(dir, input, events, r, E2E_BACKLOG, &backlog_cpu[r], &produce[r], lags,
                             &lag_count);
        file[r] = file_run(dir, input, r);
        printf("  run %d: end to end %.0f events/s (%.2f us CPU/event), file ingest %.0f "
               "events/s, ratio %.2f; producer alone %.0f, node catching up alone %.0f "
               "(%.2f us CPU/event)\n",
               r + 1, kafka[r], cpu[r], file[r], file[r] > 0 ? kafka[r] / file[r] : 0.0, produce[r],
               backlog[r], backlog_cpu[r]);
    }
    double k = bench_median(kafka, runs);
    double f = bench_median(file, runs);
    double c = bench_median(cpu, runs);
    double b = bench_median(backlog, runs);
    double bc = bench_median(backlog_cpu, runs);
    double p = bench_median(produce, runs);
    printf("median end to end (produce -> broker -> node -> durable): %.0f events/s   "
           "[target >= 500,000]\n",
           k);
    printf("median CPU per event over the pipeline (producer, broker and node threads): %.2f us\n",
           c);
    printf("median file ingest of the same events, same run: %.0f events/s; ratio %.2f   "
           "[target >= 0.5]\n",
           f, k / f);
    printf("median of the parts, same runs: producer alone %.0f events/s; node catching up a "
           "backlog alone %.0f events/s (%.2f us CPU/event), ratio to file ingest %.2f\n",
           p, b, bc, b / f);
    if (lag_count > 0) {
        double max = 0;
        for (int i = 0; i < lag_count; i++) {
            max = lags[i] > max ? lags[i] : max;
        }
        printf("consumer lag over the runs (%d samples): median %.0f, max %.0f messages\n",
               lag_count, bench_median(lags, lag_count), max);
    }
    free(lags);
    bench_remove_tree(dir);
    return 0;
}
