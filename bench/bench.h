/*
 * Helpers shared by the benchmarks (header-only: each benchmark is one executable): medians,
 * process CPU time, a generated input file, and removing a benchmark's scratch directory.
 */
#ifndef DS_BENCH_H
#define DS_BENCH_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "ingest/ingest.h"

static inline int bench_compare_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline int bench_compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its median; n >= 1. */
static inline double bench_median(double *v, int n)
{
    ASSERT(n >= 1);
    qsort(v, (size_t)n, sizeof(*v), bench_compare_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* User + system CPU seconds of the whole process so far (every thread, live or joined). */
static inline double bench_cpu_seconds(void)
{
    struct rusage usage;
    int rc = getrusage(RUSAGE_SELF, &usage);
    ASSERT(rc == 0);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
           (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
}

static inline int bench_remove_entry(const char *path, const struct stat *sb, int flag,
                                     struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes a scratch directory and everything under it. */
static inline void bench_remove_tree(const char *dir)
{
    nftw(dir, bench_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes the default busy-day workload of `events` events (fixed seed) as JSON lines to path;
 * returns the bytes written. Aborts on failure: a benchmark without its input is meaningless. */
static inline uint64_t bench_generate_busy_day(const char *path, uint64_t events)
{
    struct ingest_workload_config cfg;
    ingest_workload_defaults(&cfg);
    cfg.profile = INGEST_PROFILE_BUSY_DAY;
    cfg.events = events;
    FILE *out = fopen(path, "w");
    ASSERT(out != NULL);
    uint64_t bytes = 0;
    int rc = ingest_workload_write(&cfg, out, &bytes);
    ASSERT(rc == 0);
    rc = fclose(out);
    ASSERT(rc == 0);
    return bytes;
}

#endif /* DS_BENCH_H */
