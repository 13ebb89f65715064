/*
 * Benchmark of the workload generator alone: ns per loadgen_workload_next() call over 10M
 * events of the default (uniform) workload, fixed seed, median of 5 runs, plus the fastest
 * and slowest run. The generator must stay far below the ingest path's per-event cost so that
 * benchmarks fed by it measure the pipeline, not the generator.
 *
 * Usage: bench_workload [events] [profile: uniform|busy-day|hot-customer|flash-sale]
 * (CI runs it with a tiny event count as a smoke test). flash-sale runs on a ten-minute
 * schedule (rate events / 600), so that its window holds about a sixth of the events.
 *
 * Rejected: timing each call (a clock read costs as much as the call itself); the per-run
 * totals are what a feeding loop sees.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "loadgen/loadgen.h"

#define BENCH_RUNS 5u
#define BENCH_EVENTS_DEFAULT 10000000ull

/* flash-sale's schedule: the whole stream in ten minutes of send time. */
#define BENCH_SCHEDULE_S 600.0

/* One run; returns elapsed nanoseconds and folds every event into *checksum so that nothing
 * is optimised away. */
static uint64_t bench_run(const struct loadgen_workload_config *cfg, uint64_t *checksum)
{
    struct loadgen_workload *w = NULL;
    int rc = loadgen_workload_create(cfg, &w);
    ASSERT(rc == 0);
    struct ds_event event;
    uint64_t sum = 0;
    uint64_t count = 0;
    uint64_t start = ds_clock_ns();
    while (loadgen_workload_next(w, &event)) {
        sum += (uint64_t)event.ts_ms ^ (uint64_t)event.customer_id.value ^
               (uint64_t)event.amount_units ^ event.status_len;
        count++;
    }
    uint64_t elapsed = ds_clock_ns() - start;
    ASSERT(count == cfg->events);
    loadgen_workload_destroy(w);
    *checksum ^= sum;
    return elapsed;
}

static int bench_profile_parse(const char *name, enum loadgen_profile *profile)
{
    if (strcmp(name, "uniform") == 0) {
        *profile = LOADGEN_PROFILE_UNIFORM;
    } else if (strcmp(name, "busy-day") == 0) {
        *profile = LOADGEN_PROFILE_BUSY_DAY;
    } else if (strcmp(name, "hot-customer") == 0) {
        *profile = LOADGEN_PROFILE_HOT_CUSTOMER;
    } else if (strcmp(name, "flash-sale") == 0) {
        *profile = LOADGEN_PROFILE_FLASH_SALE;
    } else {
        return -DS_EUSAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct loadgen_workload_config cfg;
    loadgen_workload_defaults(&cfg);
    cfg.events = BENCH_EVENTS_DEFAULT;
    if (argc > 1) {
        cfg.events = strtoull(argv[1], NULL, 10);
    }
    bool profile_bad = argc > 2 && bench_profile_parse(argv[2], &cfg.profile) != 0;
    if (cfg.profile == LOADGEN_PROFILE_FLASH_SALE) {
        cfg.rate_eps = (double)cfg.events / BENCH_SCHEDULE_S;
    }
    if (profile_bad || argc > 3 || cfg.events == 0 || loadgen_workload_config_check(&cfg) != 0) {
        fprintf(stderr, "usage: bench_workload [events >= 1] "
                        "[uniform|busy-day|hot-customer|flash-sale]\n");
        return 2;
    }
    uint64_t elapsed_ns[BENCH_RUNS];
    uint64_t checksum = 0;
    for (size_t run = 0; run < BENCH_RUNS; run++) {
        elapsed_ns[run] = bench_run(&cfg, &checksum);
    }
    qsort(elapsed_ns, BENCH_RUNS, sizeof(elapsed_ns[0]), bench_compare_u64);
    double events = (double)cfg.events;
    double median = (double)elapsed_ns[BENCH_RUNS / 2] / events;
    printf("bench_workload: %llu events x %u runs, seed %llu, profile %d\n",
           (unsigned long long)cfg.events, BENCH_RUNS, (unsigned long long)cfg.seed,
           (int)cfg.profile);
    printf("ns/event: median %.1f, min %.1f, max %.1f; events/s (median) %.0f; checksum %016llx\n",
           median, (double)elapsed_ns[0] / events, (double)elapsed_ns[BENCH_RUNS - 1] / events,
           1e9 / median, (unsigned long long)checksum);
    return 0;
}
