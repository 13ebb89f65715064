/*
 * Benchmark of shard_heat_observe on the busy-day workload (fixed seed: bench.h's generator,
 * 28 days, one with 30% of the events, Zipf(1.1) customers over a million ids), against the
 * routing work alone in the same run.
 *
 * Each event is routed as a node would: day = ds_day_from_ms(ts), shard = shard_of_id(order,
 * 4), source = order id mod 16 (a Kafka partition), and a producer clock that moves one second
 * every BENCH_EVENTS_PER_SECOND events (the generator spreads its timestamps over 28 days, so
 * its own seconds would hold one event each). The baseline runs that loop without the observe
 * call; the heat runs add it, on a fresh tracker each run. Runs alternate so that both see the
 * same machine. Reports the medians as ns/event, their difference and ratio, and the median
 * time of one shard_heat_snapshot(top = SHARD_HEAT_TOP_MAX), the once-a-second cost. A second
 * pair measures what the node's consumer thread does per event (decode the JSON message and
 * route it) without and with the observe call: that ratio is the heat's cost where it runs.
 *
 * The observe call is also timed in thread CPU (CLOCK_THREAD_CPUTIME_ID), which a shared
 * machine disturbs less than the wall clock (time spent waiting for a core is not in it), and
 * on two more customer streams with the same routing, that isolate the two paths of the
 * customers' Space-Saving counters: every event a customer no counter holds (uniform over a
 * million ids: each event takes the least counter) and every event a customer a counter holds
 * (uniform over 500 ids). To compare two versions of shard/heat.c, build this file in both trees
 * and alternate the binaries (bench/heat_compare.sh).
 *
 * Usage: bench_heat [events] [runs]   (CI runs it with a tiny count as a smoke test).
 *
 * Rejected: generating events inside the timed loop (the Zipf sampler costs more than the
 * observe call and would hide it); keeping whole struct ds_event values (200 bytes each, 400 MB
 * for the default count) instead of the three integers the loop reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/bench.h"
#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "shard/shard.h"

#define BENCH_EVENTS_DEFAULT 2000000u
#define BENCH_RUNS_DEFAULT 5u
#define BENCH_EVENTS_PER_SECOND 200000u
#define BENCH_SHARDS SHARD_COUNT_DEFAULT
#define BENCH_SOURCES 16
#define BENCH_SNAPSHOTS 21
/* The customer streams that isolate the counters' two paths (see the opening comment). */
#define BENCH_NEW_CUSTOMERS 1000000u
#define BENCH_HELD_CUSTOMERS 500u
#define BENCH_STREAMS 3

/* What the loop reads of an event. */
struct bench_event {
    int64_t ts_ms;
    int64_t order_id;
    int64_t customer_id;
};

static struct bench_event *bench_events_build(size_t count)
{
    struct bench_event *events = malloc(count * sizeof(*events));
    ASSERT(events != NULL);
    struct loadgen_workload *w = bench_busy_day_workload(count);
    struct ds_event e;
    for (size_t i = 0; i < count; i++) {
        ASSERT(loadgen_workload_next(w, &e));
        /* The default workload has integer ids only (string_id_permille 0). */
        ASSERT(!e.order_id.is_string && !e.customer_id.is_string);
        events[i] = (struct bench_event){
            .ts_ms = e.ts_ms, .order_id = e.order_id.value, .customer_id = e.customer_id.value};
    }
    loadgen_workload_destroy(w);
    return events;
}

/* CPU time of the calling thread, in ns. */
static uint64_t bench_thread_cpu_ns(void)
{
    struct timespec t;
    int rc = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    ASSERT(rc == 0);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* events with their customers replaced by ids drawn uniformly from 1 .. customers (fixed
 * seed, splitmix64). */
static struct bench_event *bench_events_recustomer(const struct bench_event *events, size_t count,
                                                   uint64_t customers)
{
    struct bench_event *out = malloc(count * sizeof(*out));
    ASSERT(out != NULL);
    uint64_t state = 0x5eed;
    for (size_t i = 0; i < count; i++) {
        out[i] = events[i];
        out[i].customer_id = 1 + (int64_t)(ds_mix64(state += 0x9e3779b97f4a7c15ull) % customers);
    }
    return out;
}

/* One pass over the events, with heat (observe each one) or without (NULL: routing only).
 * Returns ns/event and sets *cpu_ns to the thread CPU ns/event; the routed values fold into
 * *checksum so nothing is optimised away. */
static double bench_run(const struct bench_event *events, size_t count, struct shard_heat *heat,
                        uint64_t *checksum, double *cpu_ns)
{
    const int64_t second0 = events[0].ts_ms / 1000;
    struct ds_id order = {0};
    struct ds_id customer = {0};
    uint64_t sum = 0;
    uint64_t cpu_start = bench_thread_cpu_ns();
    uint64_t start = ds_clock_ns();
    for (size_t i = 0; i < count; i++) {
        const struct bench_event *e = &events[i];
        order.value = e->order_id;
        customer.value = e->customer_id;
        int32_t day = ds_day_from_ms(e->ts_ms);
        uint32_t shard = shard_of_id(&order, BENCH_SHARDS);
        int64_t second = second0 + (int64_t)(i / BENCH_EVENTS_PER_SECOND);
        int32_t source = (int32_t)(e->order_id % BENCH_SOURCES);
        if (heat != NULL) {
            shard_heat_observe(heat, second, day, shard, source, &customer);
        }
        sum += (uint64_t)day ^ shard ^ (uint64_t)second ^ (uint64_t)source;
    }
    uint64_t elapsed = ds_clock_ns() - start;
    *cpu_ns = (double)(bench_thread_cpu_ns() - cpu_start) / (double)count;
    *checksum += sum;
    return (double)elapsed / (double)count;
}

/* The events as the JSON lines a node decodes (one buffer, offsets per line). */
struct bench_lines {
    char *text;
    size_t *start; /* count + 1 offsets */
};

static void bench_lines_build(struct bench_lines *lines, size_t count)
{
    lines->text = malloc(count * INGEST_JSON_LINE_BYTES_MAX);
    lines->start = malloc((count + 1) * sizeof(size_t));
    ASSERT(lines->text != NULL && lines->start != NULL);
    struct loadgen_workload *w = bench_busy_day_workload(count);
    struct ds_event e;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        ASSERT(loadgen_workload_next(w, &e));
        lines->start[i] = at;
        int n = ingest_event_format_json(&e, lines->text + at, INGEST_JSON_LINE_BYTES_MAX);
        ASSERT(n > 0);
        at += (size_t)n;
    }
    lines->start[count] = at;
    loadgen_workload_destroy(w);
}

/* The consumer thread's own work per event: decode the message, route it (day, shard), and
 * with heat observe it. Returns ns/event. */
static double bench_run_decode(const struct bench_lines *lines, size_t count,
                               struct shard_heat *heat, uint64_t *checksum, double *cpu_ns)
{
    const char *first = lines->text;
    int64_t second0 = 0;
    uint64_t sum = 0;
    uint64_t cpu_start = bench_thread_cpu_ns();
    uint64_t start = ds_clock_ns();
    for (size_t i = 0; i < count; i++) {
        struct ds_event e;
        struct ingest_error err;
        int rc =
            ingest_decode(first + lines->start[i], lines->start[i + 1] - lines->start[i], &e, &err);
        ASSERT(rc == 0);
        int32_t day = ds_day_from_ms(e.ts_ms);
        uint32_t shard = shard_of_id(&e.order_id, BENCH_SHARDS);
        second0 = i == 0 ? e.ts_ms / 1000 : second0;
        int64_t second = second0 + (int64_t)(i / BENCH_EVENTS_PER_SECOND);
        int32_t source = (int32_t)(i % BENCH_SOURCES);
        if (heat != NULL) {
            shard_heat_observe(heat, second, day, shard, source, &e.customer_id);
        }
        sum += (uint64_t)day ^ shard ^ (uint64_t)e.amount_units;
    }
    uint64_t elapsed = ds_clock_ns() - start;
    *cpu_ns = (double)(bench_thread_cpu_ns() - cpu_start) / (double)count;
    *checksum += sum;
    return (double)elapsed / (double)count;
}

/* Median microseconds of one snapshot of heat. */
static double bench_snapshot_us(const struct shard_heat *heat, struct shard_heat_snapshot *snap)
{
    double us[BENCH_SNAPSHOTS];
    for (int i = 0; i < BENCH_SNAPSHOTS; i++) {
        uint64_t start = ds_clock_ns();
        shard_heat_snapshot(heat, SHARD_HEAT_TOP_MAX, snap);
        us[i] = (double)(ds_clock_ns() - start) / 1e3;
    }
    return bench_median(us, BENCH_SNAPSHOTS);
}

int main(int argc, char **argv)
{
    size_t count = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : BENCH_EVENTS_DEFAULT;
    int runs = argc > 2 ? atoi(argv[2]) : (int)BENCH_RUNS_DEFAULT;
    if (count == 0 || runs <= 0 || runs > 1000) {
        fprintf(stderr, "usage: bench_heat [events > 0] [runs 1..1000]\n");
        return 2;
    }
    struct bench_event *events = bench_events_build(count);
    const struct bench_event *streams[BENCH_STREAMS] = {
        events, bench_events_recustomer(events, count, BENCH_NEW_CUSTOMERS),
        bench_events_recustomer(events, count, BENCH_HELD_CUSTOMERS)};
    const char *stream_names[BENCH_STREAMS] = {"busy-day customers (Zipf 1.1 over 1M)",
                                               "every event a customer no counter holds",
                                               "every event a customer a counter holds"};
    struct shard_heat_snapshot *snap = malloc(sizeof(*snap));
    double *base_ns = malloc((size_t)runs * sizeof(double));
    double *heat_ns = malloc((size_t)runs * sizeof(double));
    double *snap_us = malloc((size_t)runs * sizeof(double));
    double *base_cpu = malloc((size_t)runs * sizeof(double));
    double *stream_cpu[BENCH_STREAMS];
    for (int k = 0; k < BENCH_STREAMS; k++) {
        stream_cpu[k] = malloc((size_t)runs * sizeof(double));
        ASSERT(stream_cpu[k] != NULL);
    }
    ASSERT(snap != NULL && base_ns != NULL && heat_ns != NULL && snap_us != NULL);
    ASSERT(base_cpu != NULL);
    struct bench_lines lines;
    bench_lines_build(&lines, count);
    double *decode_ns = malloc((size_t)runs * sizeof(double));
    double *decode_heat_ns = malloc((size_t)runs * sizeof(double));
    double *decode_cpu = malloc((size_t)runs * sizeof(double));
    double *decode_heat_cpu = malloc((size_t)runs * sizeof(double));
    ASSERT(decode_ns != NULL && decode_heat_ns != NULL);
    ASSERT(decode_cpu != NULL && decode_heat_cpu != NULL);
    uint64_t checksum = 0;
    double cpu = 0;
    bench_run(events, count, NULL, &checksum, &cpu); /* warm-up: page faults, caches, branches */
    bench_run_decode(&lines, count, NULL, &checksum, &cpu);
    for (int r = 0; r < runs; r++) {
        struct shard_heat *heat = NULL;
        ASSERT(shard_heat_create(SHARD_CAPACITY_DEFAULT, &heat) == 0);
        base_ns[r] = bench_run(events, count, NULL, &checksum, &base_cpu[r]);
        heat_ns[r] = bench_run(events, count, heat, &checksum, &stream_cpu[0][r]);
        snap_us[r] = bench_snapshot_us(heat, snap);
        shard_heat_destroy(heat);
        for (int k = 1; k < BENCH_STREAMS; k++) {
            ASSERT(shard_heat_create(SHARD_CAPACITY_DEFAULT, &heat) == 0);
            (void)bench_run(streams[k], count, heat, &checksum, &stream_cpu[k][r]);
            shard_heat_destroy(heat);
        }
        ASSERT(shard_heat_create(SHARD_CAPACITY_DEFAULT, &heat) == 0);
        decode_ns[r] = bench_run_decode(&lines, count, NULL, &checksum, &decode_cpu[r]);
        decode_heat_ns[r] = bench_run_decode(&lines, count, heat, &checksum, &decode_heat_cpu[r]);
        shard_heat_destroy(heat);
    }
    double decode = bench_median(decode_ns, runs);
    double decode_heat = bench_median(decode_heat_ns, runs);
    double base = bench_median(base_ns, runs);
    double with_heat = bench_median(heat_ns, runs);
    printf("bench_heat: %zu events, %d runs, busy-day workload, %u shards, producer clock +1 s "
           "per %u events\n",
           count, runs, BENCH_SHARDS, BENCH_EVENTS_PER_SECOND);
    printf("  routing only:       %.1f ns/event (median)\n", base);
    printf("  routing + observe:  %.1f ns/event (median)\n", with_heat);
    printf("  observe:            %.1f ns/event, ratio %.2fx\n", with_heat - base,
           with_heat / base);
    printf("  the consumer thread's per-event work: decode + route %.1f ns/event, with heat "
           "%.1f ns/event: heat off/on ratio %.3f (+%.1f%%)\n",
           decode, decode_heat, decode_heat / decode, 100.0 * (decode_heat - decode) / decode);
    printf("  snapshot (top %u):  %.1f us (median)\n", SHARD_HEAT_TOP_MAX,
           bench_median(snap_us, runs));
    double decode_thread = bench_median(decode_cpu, runs);
    double decode_heat_thread = bench_median(decode_heat_cpu, runs);
    printf("  thread CPU, the consumer thread's per-event work: decode + route %.1f ns/event, with "
           "heat %.1f ns/event: heat off/on ratio %.3f (+%.1f%%)\n",
           decode_thread, decode_heat_thread, decode_heat_thread / decode_thread,
           100.0 * (decode_heat_thread - decode_thread) / decode_thread);
    double base_thread = bench_median(base_cpu, runs);
    printf("  thread CPU, routing only: %.1f ns/event (median)\n", base_thread);
    for (int k = 0; k < BENCH_STREAMS; k++) {
        double with = bench_median(stream_cpu[k], runs);
        printf("  thread CPU, observe, %s: %.1f ns/event (median)\n", stream_names[k],
               with - base_thread);
    }
    printf(
        "  last run: %llu events, %u partition rows, %llu untracked, %llu would throttle, "
        "top customer %.0f eps; checksum %llx\n",
        (unsigned long long)snap->events, snap->partition_count,
        (unsigned long long)snap->untracked_events, (unsigned long long)snap->would_throttle_events,
        snap->customer_count > 0 ? snap->customers[0].rate_eps : 0.0, (unsigned long long)checksum);
    for (int k = 0; k < BENCH_STREAMS; k++) {
        free(stream_cpu[k]);
    }
    free((void *)streams[1]);
    free((void *)streams[2]);
    free(base_cpu);
    free(decode_heat_cpu);
    free(decode_cpu);
    free(decode_heat_ns);
    free(decode_ns);
    free(lines.start);
    free(lines.text);
    free(snap_us);
    free(heat_ns);
    free(base_ns);
    free(snap);
    free(events);
    return 0;
}
