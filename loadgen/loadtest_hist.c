/*
 * The load test's latency histogram (loadtest_hist.h). Bucket index of a value v:
 *   v < 128:  v itself (exact);
 *   else:     e = floor(log2 v) (7..35), the top 7 bits of v, v >> (e - 6) (64..127), pick one of
 *             64 buckets of width 2^(e - 6) inside [2^e, 2^(e+1)).
 * A bucket's width over its lowest value is at most 1/64, so reading a percentile back as its
 * bucket's highest value is exact below 128 us and at most 1.6% high above.
 *
 * Invariants: count is the sum of the buckets; max_us is the largest value recorded (clamped).
 * Rejected: fixed buckets on a linear scale (either coarse at the millisecond or huge to reach
 * minutes), and keeping every value to sort (memory grows with the run's events).
 */
#include <string.h>

#include "loadgen/loadtest_hist.h"

_Static_assert(LOADTEST_HIST_VALUE_BITS_MAX > LOADTEST_HIST_SUB_BUCKET_BITS,
               "the log part of the histogram has at least one power of two");

void loadtest_hist_reset(struct loadtest_hist *h)
{
    memset(h, 0, sizeof(*h));
}

static uint32_t loadtest_hist_index(uint64_t v)
{
    if (v < LOADTEST_HIST_SUB_BUCKETS) {
        return (uint32_t)v;
    }
    uint32_t e = 63u - (uint32_t)__builtin_clzll(v);
    uint32_t shift = e - (LOADTEST_HIST_SUB_BUCKET_BITS - 1u);
    uint32_t top = (uint32_t)(v >> shift); /* 64..127 */
    ASSERT(top >= LOADTEST_HIST_SUB_BUCKETS / 2u && top < LOADTEST_HIST_SUB_BUCKETS);
    return LOADTEST_HIST_SUB_BUCKETS + (e - LOADTEST_HIST_SUB_BUCKET_BITS) * 64u + (top - 64u);
}

/* The highest value bucket i holds. */
static uint64_t loadtest_hist_highest(uint32_t i)
{
    if (i < LOADTEST_HIST_SUB_BUCKETS) {
        return i;
    }
    uint32_t j = i - LOADTEST_HIST_SUB_BUCKETS;
    uint32_t e = j / 64u + LOADTEST_HIST_SUB_BUCKET_BITS;
    uint32_t shift = e - (LOADTEST_HIST_SUB_BUCKET_BITS - 1u);
    uint64_t lowest = (uint64_t)(j % 64u + 64u) << shift;
    return lowest + (UINT64_C(1) << shift) - 1u;
}

void loadtest_hist_record(struct loadtest_hist *h, uint64_t value_us)
{
    uint64_t v = value_us < LOADTEST_HIST_VALUE_US_MAX ? value_us : LOADTEST_HIST_VALUE_US_MAX;
    uint32_t i = loadtest_hist_index(v);
    ASSERT(i < LOADTEST_HIST_BUCKETS);
    h->buckets[i]++;
    h->count++;
    h->max_us = v > h->max_us ? v : h->max_us;
}

double loadtest_hist_percentile(const struct loadtest_hist *h, double p)
{
    ASSERT(p > 0.0 && p <= 1.0);
    if (h->count == 0) {
        return -1.0;
    }
    /* The rank in 1..count; p x count is rounded down first when it is within a rounding error
     * of an integer, so 0.99 x 100 gives rank 99 as loadtest_percentile does. */
    double exact = p * (double)h->count;
    uint64_t rank = (uint64_t)exact;
    rank += exact - (double)rank > 1e-9 ? 1u : 0u;
    rank = rank > 0 ? rank : 1;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < LOADTEST_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = loadtest_hist_highest(i);
            return (double)(v < h->max_us ? v : h->max_us);
        }
    }
    ASSERT(false); /* count is the sum of the buckets */
    return -1.0;
}
