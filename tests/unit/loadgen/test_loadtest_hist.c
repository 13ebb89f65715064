/*
 * Unit tests of loadgen/loadtest_hist.c: percentiles read back from the histogram against
 * sorting every value (the oracle) over random values of several shapes, exact below 128 us,
 * within 1/64 above and never below; the maximum exact; clamping of huge values; an empty
 * histogram; reset. Randomised: the seed is printed and DS_TEST_SEED replays one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/loadtest_hist.h"

#define HIST_VALUES 20000u
#define HIST_SEED_DEFAULT 11u

static uint64_t hist_seed(void)
{
    const char *env = getenv("DS_TEST_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 10) : HIST_SEED_DEFAULT;
    printf("seed %llu (DS_TEST_SEED replays it)\n", (unsigned long long)seed);
    return seed;
}

static uint64_t hist_next(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static int hist_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The oracle: the value of rank ceil(p x n) of the sorted values. */
static uint64_t hist_oracle(const uint64_t *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p * (double)n - 1e-9);
    return sorted[rank > 0 ? rank - 1 : 0];
}

/* One shape of values: exact below 128, within 1/64 and never below above, max exact. */
static void hist_check_shape(uint64_t seed, uint64_t (*draw)(uint64_t *state))
{
    struct loadtest_hist *h = malloc(sizeof(*h));
    uint64_t *v = malloc(HIST_VALUES * sizeof(*v));
    assert_non_null(h);
    assert_non_null(v);
    loadtest_hist_reset(h);
    uint64_t state = seed | 1u;
    for (size_t i = 0; i < HIST_VALUES; i++) {
        v[i] = draw(&state);
        loadtest_hist_record(h, v[i]);
    }
    qsort(v, HIST_VALUES, sizeof(*v), hist_u64_cmp);
    assert_int_equal(h->count, HIST_VALUES);
    assert_int_equal(h->max_us, v[HIST_VALUES - 1]);
    const double ps[] = {0.001, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0};
    size_t checked = 0;
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
        double got = loadtest_hist_percentile(h, ps[k]);
        double want = (double)hist_oracle(v, HIST_VALUES, ps[k]);
        if (want < LOADTEST_HIST_SUB_BUCKETS) {
            assert_true(got == want);
        } else {
            assert_true(got >= want);
            assert_true(got <= want * (1.0 + 1.0 / 64.0));
        }
        checked++;
    }
    assert_true(loadtest_hist_percentile(h, 1.0) == (double)v[HIST_VALUES - 1]);
    assert_int_equal(checked, sizeof(ps) / sizeof(ps[0]));
    free(v);
    free(h);
}

static uint64_t draw_small(uint64_t *state)
{
    return hist_next(state) % 200u; /* around the exact/logarithmic border */
}

static uint64_t draw_wide(uint64_t *state)
{
    /* log-uniform from 1 us to about 17 minutes: every power of two gets values */
    uint32_t bits = (uint32_t)(hist_next(state) % 30u);
    return (hist_next(state) & ((UINT64_C(1) << bits) - 1u)) | (UINT64_C(1) << bits);
}

static uint64_t draw_tail(uint64_t *state)
{
    /* most values near 2 ms, one in a hundred near a second: a coordinated-omission tail */
    uint64_t r = hist_next(state);
    return r % 100u == 0 ? 900000u + r % 200000u : 1500u + r % 1000u;
}

static void test_loadtest_hist_percentiles_match_sorting(void **state)
{
    /* Intent: every percentile read back agrees with sorting all values, within the promise. */
    (void)state;
    uint64_t seed = hist_seed();
    hist_check_shape(seed, draw_small);
    hist_check_shape(seed + 1u, draw_wide);
    hist_check_shape(seed + 2u, draw_tail);
}

static void test_loadtest_hist_percentile_exact_when_small(void **state)
{
    /* Intent: values 1..100 give the textbook ranks exactly (p50 = 50, p99 = 99, max = 100). */
    (void)state;
    struct loadtest_hist *h = malloc(sizeof(*h));
    assert_non_null(h);
    loadtest_hist_reset(h);
    for (uint64_t i = 100; i >= 1; i--) {
        loadtest_hist_record(h, i);
    }
    assert_true(loadtest_hist_percentile(h, 0.5) == 50.0);
    assert_true(loadtest_hist_percentile(h, 0.9) == 90.0);
    assert_true(loadtest_hist_percentile(h, 0.99) == 99.0);
    assert_true(loadtest_hist_percentile(h, 0.999) == 100.0);
    assert_true(loadtest_hist_percentile(h, 1.0) == 100.0);
    free(h);
}

static void test_loadtest_hist_clamps_huge_values(void **state)
{
    /* Intent: a value past the top bucket counts as the maximum value, not out of bounds. */
    (void)state;
    struct loadtest_hist *h = malloc(sizeof(*h));
    assert_non_null(h);
    loadtest_hist_reset(h);
    loadtest_hist_record(h, UINT64_MAX);
    loadtest_hist_record(h, 0);
    assert_int_equal(h->count, 2);
    assert_int_equal(h->max_us, LOADTEST_HIST_VALUE_US_MAX);
    assert_true(loadtest_hist_percentile(h, 1.0) == (double)LOADTEST_HIST_VALUE_US_MAX);
    assert_true(loadtest_hist_percentile(h, 0.5) == 0.0);
    free(h);
}

static void test_loadtest_hist_empty_after_reset(void **state)
{
    /* Intent: an empty histogram has no percentile (-1), also after values and a reset. */
    (void)state;
    struct loadtest_hist *h = malloc(sizeof(*h));
    assert_non_null(h);
    loadtest_hist_reset(h);
    assert_true(loadtest_hist_percentile(h, 0.99) == -1.0);
    loadtest_hist_record(h, 5000);
    assert_true(loadtest_hist_percentile(h, 0.99) >= 5000.0);
    loadtest_hist_reset(h);
    assert_true(loadtest_hist_percentile(h, 0.5) == -1.0);
    assert_int_equal(h->max_us, 0);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loadtest_hist_percentiles_match_sorting),
        cmocka_unit_test(test_loadtest_hist_percentile_exact_when_small),
        cmocka_unit_test(test_loadtest_hist_clamps_huge_values),
        cmocka_unit_test(test_loadtest_hist_empty_after_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
