/*
 * Private to loadgen/: a latency histogram of fixed size (loadtest_hist.c), for figures taken
 * once per event (the producer's send delay: millions a run) where keeping every value to sort
 * would grow with the run. Values are microseconds; one thread records, and reads after it is
 * done (the caller synchronises, e.g. by joining the recording thread).
 *
 * Log-linear buckets, as HdrHistogram's: values below LOADTEST_HIST_SUB_BUCKETS are exact; above,
 * each power of two is cut into LOADTEST_HIST_SUB_BUCKETS / 2 equal buckets, so a percentile read
 * back is at most 1/64 (1.6%) above the exact one and never below it. The maximum is kept exactly.
 */
#ifndef DS_LOADGEN_LOADTEST_HIST_H
#define DS_LOADGEN_LOADTEST_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* 128: the relative error of a bucket is 1 / (128 / 2) = 1.6%, near the 1% a latency figure
 * needs, for 16 KiB of counts. */
#define LOADTEST_HIST_SUB_BUCKET_BITS 7u
#define LOADTEST_HIST_SUB_BUCKETS (1u << LOADTEST_HIST_SUB_BUCKET_BITS)
/* Values from 2^36 us (19 hours) up share the top bucket: longer than any load test runs. */
#define LOADTEST_HIST_VALUE_BITS_MAX 36u
#define LOADTEST_HIST_VALUE_US_MAX ((UINT64_C(1) << LOADTEST_HIST_VALUE_BITS_MAX) - 1u)
#define LOADTEST_HIST_BUCKETS                                                                      \
    (LOADTEST_HIST_SUB_BUCKETS + (LOADTEST_HIST_VALUE_BITS_MAX - LOADTEST_HIST_SUB_BUCKET_BITS) *  \
                                     (LOADTEST_HIST_SUB_BUCKETS / 2u))

struct loadtest_hist {
    uint64_t count;
    uint64_t max_us;
    uint64_t buckets[LOADTEST_HIST_BUCKETS];
};

/* Empties h (its memory is the caller's). */
void loadtest_hist_reset(struct loadtest_hist *h);

/* Counts one value; values above LOADTEST_HIST_VALUE_US_MAX count as that maximum. */
void loadtest_hist_record(struct loadtest_hist *h, uint64_t value_us);

/* The p-th percentile (0 < p <= 1) as the value of rank ceil(p x count) in sorted order, the
 * rule loadtest_percentile uses: the highest value of its bucket, at most max_us. -1 when empty. */
double loadtest_hist_percentile(const struct loadtest_hist *h, double p);

#endif /* DS_LOADGEN_LOADTEST_HIST_H */
