/*
 * Unit tests of ingest/workload.c: the deterministic workload generator. Checks determinism,
 * time order, id sequence, the shape of each profile (days, hours, busy day, hot customer,
 * Zipf customers, statuses, amounts, string ids) and the configuration check.
 *
 * The statistical tests use seed 42, or DS_TEST_SEED when set (the seed is printed); their
 * tolerances are at least six standard deviations, so any seed passes.
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

#include "ingest/ingest.h"
#include "tests/support/tempdir.h"

#define DAY_MS 86400000LL
#define HOUR_MS 3600000LL
/* The statistical tests' seed unless DS_TEST_SEED gives one; main prints the seed in use. */
#define WORKLOAD_SEED_DEFAULT 42

static struct ingest_workload_config config_default(void)
{
    struct ingest_workload_config cfg;
    ingest_workload_defaults(&cfg);
    cfg.seed = test_seed_or(WORKLOAD_SEED_DEFAULT);
    return cfg;
}

static struct ingest_workload *workload_new(const struct ingest_workload_config *cfg)
{
    struct ingest_workload *w = NULL;
    assert_int_equal(ingest_workload_create(cfg, &w), 0);
    assert_non_null(w);
    return w;
}

/* The numeric part of an id: the integer, or the digits after the string's prefix. */
static uint64_t id_number(const struct ds_id *id, const char *prefix)
{
    if (!id->is_string) {
        assert_int_equal(id->len, 0);
        assert_true(id->value >= 1);
        return (uint64_t)id->value;
    }
    size_t prefix_len = strlen(prefix);
    assert_true(id->len > prefix_len && id->len <= DS_ID_BYTES_MAX);
    assert_memory_equal(id->text, prefix, prefix_len);
    assert_int_equal(id->value, 0);
    uint64_t value = 0;
    for (size_t i = prefix_len; i < id->len; i++) {
        assert_true(id->text[i] >= '0' && id->text[i] <= '9');
        assert_false(i == prefix_len && id->text[i] == '0');
        value = value * 10 + (uint64_t)(id->text[i] - '0');
    }
    return value;
}

static void test_workload_defaults_match_documentation(void **state)
{
    /* The defaults are the documented demo and benchmark workload, and they pass the check. */
    (void)state;
    struct ingest_workload_config cfg;
    memset(&cfg, 0xA5, sizeof(cfg));
    ingest_workload_defaults(&cfg);
    assert_int_equal(cfg.profile, INGEST_PROFILE_UNIFORM);
    assert_int_equal(cfg.seed, 42);
    assert_int_equal(cfg.events, 1000000);
    assert_int_equal(cfg.first_day, ds_days_from_civil(2026, 1, 1));
    assert_int_equal(cfg.days, 28);
    assert_int_equal(cfg.customers, 1000000);
    assert_true(cfg.zipf_s == 1.1);
    assert_int_equal(cfg.busy_day_index, 20);
    assert_int_equal(cfg.first_day + (int32_t)cfg.busy_day_index, ds_days_from_civil(2026, 1, 21));
    assert_true(cfg.busy_fraction == 0.3);
    assert_true(cfg.hot_fraction == 0.01);
    assert_int_equal(cfg.string_id_permille, 0);
    assert_int_equal(ingest_workload_config_check(&cfg), 0);
}

static void test_workload_next_same_seed_same_stream(void **state)
{
    /* Two generators of one configuration produce identical streams, byte for byte. */
    (void)state;
    const enum ingest_profile profiles[] = {INGEST_PROFILE_UNIFORM, INGEST_PROFILE_BUSY_DAY,
                                            INGEST_PROFILE_HOT_CUSTOMER};
    for (size_t p = 0; p < DS_ARRAY_LEN(profiles); p++) {
        struct ingest_workload_config cfg = config_default();
        cfg.profile = profiles[p];
        cfg.events = 50000;
        cfg.string_id_permille = 100;
        struct ingest_workload *a = workload_new(&cfg);
        struct ingest_workload *b = workload_new(&cfg);
        struct ds_event ea;
        struct ds_event eb;
        uint64_t count = 0;
        while (ingest_workload_next(a, &ea)) {
            assert_true(ingest_workload_next(b, &eb));
            assert_memory_equal(&ea, &eb, sizeof(ea));
            count++;
        }
        assert_false(ingest_workload_next(b, &eb));
        assert_int_equal(count, cfg.events);
        ingest_workload_destroy(a);
        ingest_workload_destroy(b);
    }
}

static void test_workload_next_different_seed_different_stream(void **state)
{
    /* Another seed gives another stream (customers, amounts and timestamps all differ). */
    (void)state;
    struct ingest_workload_config cfg = config_default();
    cfg.events = 1000;
    struct ingest_workload *a = workload_new(&cfg);
    cfg.seed ^= 1;
    struct ingest_workload *b = workload_new(&cfg);
    uint64_t customers_differ = 0;
    uint64_t amounts_differ = 0;
    uint64_t ts_differ = 0;
    struct ds_event ea;
    struct ds_event eb;
    while (ingest_workload_next(a, &ea)) {
        assert_true(ingest_workload_next(b, &eb));
        customers_differ += ea.customer_id.value != eb.customer_id.value;
        amounts_differ += ea.amount_units != eb.amount_units;
        ts_differ += ea.ts_ms != eb.ts_ms;
        assert_int_equal(ea.order_id.value, eb.order_id.value);
    }
    assert_true(customers_differ > 500);
    assert_true(amounts_differ > 500);
    assert_true(ts_differ > 500);
    ingest_workload_destroy(a);
    ingest_workload_destroy(b);
}

/* Runs a generator to its end, checking order, ids and the day range; counts events per day. */
static void stream_check(const struct ingest_workload_config *cfg, uint64_t *per_day)
{
    struct ingest_workload *w = workload_new(cfg);
    struct ds_event event;
    int64_t last_ts = INT64_MIN;
    uint64_t count = 0;
    while (ingest_workload_next(w, &event)) {
        assert_true(event.ts_ms >= last_ts);
        last_ts = event.ts_ms;
        assert_int_equal(id_number(&event.order_id, "ord-"), count + 1);
        assert_int_equal(event.order_id.is_string, event.customer_id.is_string);
        uint64_t customer = id_number(&event.customer_id, "cust-");
        assert_true(customer >= 1 && customer <= cfg->customers);
        int32_t day = ds_day_from_ms(event.ts_ms);
        assert_true(day >= cfg->first_day);
        assert_true(day < cfg->first_day + (int32_t)cfg->days);
        if (per_day != NULL) {
            per_day[day - cfg->first_day]++;
        }
        count++;
    }
    assert_int_equal(count, cfg->events);
    assert_false(ingest_workload_next(w, &event));
    ingest_workload_destroy(w);
}

static void test_workload_next_time_order_and_ids_every_profile(void **state)
{
    /* Every profile yields non-decreasing timestamps inside the configured days and order ids
     * 1, 2, 3, ... with no gap or repeat, also with string ids mixed in. */
    (void)state;
    const enum ingest_profile profiles[] = {INGEST_PROFILE_UNIFORM, INGEST_PROFILE_BUSY_DAY,
                                            INGEST_PROFILE_HOT_CUSTOMER};
    for (size_t p = 0; p < DS_ARRAY_LEN(profiles); p++) {
        struct ingest_workload_config cfg = config_default();
        cfg.profile = profiles[p];
        cfg.events = 200000;
        cfg.string_id_permille = 300;
        stream_check(&cfg, NULL);
        /* Many more events than milliseconds: timestamps repeat but never go back. */
        cfg.days = 1;
        cfg.busy_day_index = 0;
        cfg.events = 300000;
        cfg.first_day = 0;
        stream_check(&cfg, NULL);
        /* Few events over many days. */
        cfg.days = 3660;
        cfg.busy_day_index = 3659;
        cfg.events = 7;
        cfg.first_day = DS_DAY_MAX - 3659;
        stream_check(&cfg, NULL);
    }
}

static void test_workload_next_uniform_spreads_days_and_hours(void **state)
{
    /* Uniform: every day gets events/days to within one event, and hours are even. */
    (void)state;
    struct ingest_workload_config cfg = config_default();
    cfg.events = 280000 + 13;
    uint64_t per_day[28] = {0};
    stream_check(&cfg, per_day);
    for (size_t d = 0; d < 28; d++) {
        assert_true(per_day[d] >= cfg.events / 28 - 1 && per_day[d] <= cfg.events / 28 + 2);
    }
    uint64_t per_hour[24] = {0};
    struct ingest_workload *w = workload_new(&cfg);
    struct ds_event event;
    while (ingest_workload_next(w, &event)) {
        per_hour[(event.ts_ms % DAY_MS) / HOUR_MS]++;
    }
    ingest_workload_destroy(w);
    for (size_t h = 0; h < 24; h++) {
        double expected = (double)cfg.events / 24.0;
        assert_true(fabs((double)per_hour[h] - expected) < 0.01 * expected);
    }
}

static void test_workload_next_busy_day_share(void **state)
{
    /* Busy day: busy_fraction of all events fall on the busy day, the rest evenly elsewhere. */
    (void)state;
    struct ingest_workload_config cfg = config_default();
    cfg.profile = INGEST_PROFILE_BUSY_DAY;
    cfg.events = 270000;
    uint64_t per_day[28] = {0};
    stream_check(&cfg, per_day);
    double busy_expected = cfg.busy_fraction * (double)cfg.events;
    assert_true(fabs((double)per_day[20] - busy_expected) <= 2.0);
    double other_expected = (1.0 - cfg.busy_fraction) * (double)cfg.events / 27.0;
    for (size_t d = 0; d < 28; d++) {
        if (d != 20) {
            assert_true(fabs((double)per_day[d] - other_expected) <= 2.0);
        }
    }
}

static void test_workload_next_busy_day_edges(void **state)
{
    /* Busy day first or last, a share of 0 or 1, and a single day all behave. */
    (void)state;
    struct ingest_workload_config cfg = config_default();
    cfg.profile = INGEST_PROFILE_BUSY_DAY;
    cfg.events = 10000;
    cfg.days = 10;
    const uint32_t indexes[] = {0, 4, 9};
    const double fractions[] = {0.0, 0.5, 1.0};
    for (size_t i = 0; i < DS_ARRAY_LEN(indexes); i++) {
        for (size_t j = 0; j < DS_ARRAY_LEN(fractions); j++) {
            cfg.busy_day_index = indexes[i];
            cfg.busy_fraction = fractions[j];
            uint64_t per_day[10] = {0};
            stream_check(&cfg, per_day);
            double busy_expected = fractions[j] * (double)cfg.events;
            assert_true(fabs((double)per_day[indexes[i]] - busy_expected) <= 2.0);
            for (size_t d = 0; d < 10; d++) {
                if (d != indexes[i]) {
                    double other = (1.0 - fractions[j]) * (double)cfg.events / 9.0;
                    assert_true(fabs((double)per_day[d] - other) <= 2.0);
                }
            }
        }
    }
    cfg.days = 1;
    cfg.busy_day_index = 0;
    cfg.busy_fraction = 0.3;
    uint64_t one_day[1] = {0};
    stream_check(&cfg, one_day);
    assert_int_equal(one_day[0], cfg.events);
}

static double customer_one_share(const struct ingest_workload_config *cfg)
{
    struct ingest_workload *w = workload_new(cfg);
    struct ds_event event;
    uint64_t ones = 0;
    while (ingest_workload_next(w, &event)) {
        ones += event.customer_id.value == 1;
    }
    ingest_workload_destroy(w);
    return (double)ones / (double)cfg->events;
}

static void test_workload_next_hot_customer_share(void **state)
{
    /* Hot customer: customer 1 places hot_fraction of the orders, whatever zipf_s. */
    (void)state;
    struct ingest_workload_config cfg = config_default();
    cfg.profile = INGEST_PROFILE_HOT_CUSTOMER;
    cfg.events = 200000;
    const double fractions[] = {0.0, 0.01, 0.25, 1.0};
    const double exponents[] = {0.5, 1.1, 3.0};
    for (size_t i = 0; i < DS_ARRAY_LEN(fractions); i++) {
        for (size_t j = 0; j < DS_ARRAY_LEN(exponents); j++) {
            cfg.hot_fraction = fractions[i];
            cfg.zipf_s = exponents[j];
            double share = customer_one_share(&cfg);
            double sigma = sqrt(fractions[i] * (1 - fractions[i]) / (double)cfg.events);
            assert_true(fabs(share - fractions[i]) <= 6.0 * sigma + 1e-9);
        }
    }
    /* A single customer is always the hot one. */
    cfg.customers = 1;
    cfg.hot_fraction = 0.25;
    assert_true(customer_one_share(&cfg) == 1.0);
}

/* Counts customers 1..customers of a uniform stream and checks them against Zipf(s). */
static void zipf_check(uint64_t customers, double s, uint64_t events)
{
    struct ingest_workload_config cfg = config_default();
    cfg.events = events;
    cfg.customers = customers;
    cfg.zipf_s = s;
    uint64_t *counts = calloc(customers + 1, sizeof(*counts));
    assert_non_null(counts);
    struct ingest_workload *w = workload_new(&cfg);
    struct ds_event event;
    while (ingest_workload_next(w, &event)) {
        assert_true(event.customer_id.value >= 1 && (uint64_t)event.customer_id.value <= customers);
        counts[event.customer_id.value]++;
    }
    ingest_workload_destroy(w);
    double harmonic = 0.0;
    for (uint64_t k = 1; k <= customers; k++) {
        harmonic += pow((double)k, -s);
    }
    for (uint64_t k = 2; k <= customers; k++) {
        assert_true(counts[1] >= counts[k]);
    }
    const uint64_t ranks[] = {1, 2, 3, 5, 10, 50, 100, 1000};
    for (size_t i = 0; i < DS_ARRAY_LEN(ranks) && ranks[i] <= customers; i++) {
        double expected = (double)events * pow((double)ranks[i], -s) / harmonic;
        double observed = (double)counts[ranks[i]];
        if (fabs(observed - expected) > 6.0 * sqrt(expected) + 0.02 * expected + 1.0) {
            fail_msg("s %.2f rank %lu: observed %.0f, expected %.1f", s, (unsigned long)ranks[i],
                     observed, expected);
        }
    }
    free(counts);
}

static void test_workload_next_zipf_customers(void **state)
{
    /* Customers follow rank^-s: customer 1 is the most frequent and each rank's count is
     * close to its Zipf probability, for several exponents (s = 1 takes the series branch). */
    (void)state;
    zipf_check(1000, 1.1, 400000);
    zipf_check(1000, 1.0, 200000);
    zipf_check(100, 0.5, 200000);
    zipf_check(10, 2.0, 100000);
    zipf_check(1, 1.1, 1000);
}

static void test_workload_next_status_distribution(void **state)
{
    /* Statuses follow paid 60%, shipped 20%, pending 12%, cancelled 5%, refunded 3%. */
    (void)state;
    const char *names[] = {"paid", "shipped", "pending", "cancelled", "refunded"};
    const double shares[] = {0.60, 0.20, 0.12, 0.05, 0.03};
    uint64_t counts[5] = {0};
    struct ingest_workload_config cfg = config_default();
    cfg.events = 200000;
    struct ingest_workload *w = workload_new(&cfg);
    struct ds_event event;
    while (ingest_workload_next(w, &event)) {
        size_t i = 0;
        while (i < 5 && !(event.status_len == strlen(names[i]) &&
                          memcmp(event.status, names[i], event.status_len) == 0)) {
            i++;
        }
        assert_true(i < 5);
        counts[i]++;
    }
    ingest_workload_destroy(w);
    for (size_t i = 0; i < 5; i++) {
        double share = (double)counts[i] / (double)cfg.events;
        double sigma = sqrt(shares[i] * (1 - shares[i]) / (double)cfg.events);
        assert_true(fabs(share - shares[i]) <= 6.0 * sigma);
    }
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void test_workload_next_amounts_in_cents_within_range(void **state)
{
    /* Amounts are whole cents from 1.00 to 500.00, log-normal-ish around a median of ~22. */
    (void)state;
    struct ingest_workload_config cfg = config_default();
    cfg.events = 100000;
    int64_t *amounts = malloc(cfg.events * sizeof(*amounts));
    assert_non_null(amounts);
    struct ingest_workload *w = workload_new(&cfg);
    struct ds_event event;
    size_t n = 0;
    while (ingest_workload_next(w, &event)) {
        assert_int_equal(event.amount_units % 100, 0);
        assert_true(event.amount_units >= 10000 && event.amount_units <= 5000000);
        amounts[n++] = event.amount_units;
    }
    ingest_workload_destroy(w);
    qsort(amounts, n, sizeof(*amounts), compare_i64);
    double median = (double)amounts[n / 2] / DS_AMOUNT_SCALE;
    assert_true(median > 20.0 && median < 25.0);
    /* Spread: a tenth of orders under ~6, a tenth over ~80. */
    double p10 = (double)amounts[n / 10] / DS_AMOUNT_SCALE;
    double p90 = (double)amounts[n - n / 10] / DS_AMOUNT_SCALE;
    assert_true(p10 > 3.0 && p10 < 10.0);
    assert_true(p90 > 50.0 && p90 < 150.0);
    free(amounts);
}

static void test_workload_next_string_ids_share(void **state)
{
    /* string_id_permille of the events carry "ord-<n>" and "cust-<n>" ids; 0 means none. */
    (void)state;
    const uint32_t permilles[] = {0, 1, 250, 1000};
    for (size_t i = 0; i < DS_ARRAY_LEN(permilles); i++) {
        struct ingest_workload_config cfg = config_default();
        cfg.events = 100000;
        cfg.string_id_permille = permilles[i];
        struct ingest_workload *w = workload_new(&cfg);
        struct ds_event event;
        uint64_t strings = 0;
        while (ingest_workload_next(w, &event)) {
            strings += event.order_id.is_string;
        }
        ingest_workload_destroy(w);
        double p = permilles[i] / 1000.0;
        double sigma = sqrt(p * (1 - p) / (double)cfg.events);
        assert_true(fabs((double)strings / (double)cfg.events - p) <= 6.0 * sigma + 1e-9);
    }
    /* Full check of the text: stream_check parses every id. */
    struct ingest_workload_config cfg = config_default();
    cfg.events = 20000;
    cfg.string_id_permille = 1000;
    stream_check(&cfg, NULL);
}

static void test_workload_next_empty_stream(void **state)
{
    /* events = 0 is a valid, empty stream. */
    (void)state;
    struct ingest_workload_config cfg = config_default();
    cfg.events = 0;
    struct ingest_workload *w = workload_new(&cfg);
    struct ds_event event;
    assert_false(ingest_workload_next(w, &event));
    assert_false(ingest_workload_next(w, &event));
    ingest_workload_destroy(w);
    ingest_workload_destroy(NULL);
}

static void test_workload_config_check_rejects_each_bad_field(void **state)
{
    /* Each out-of-range field alone is -DS_EUSAGE, from the check and from create. */
    (void)state;
    struct ingest_workload_config bad[24];
    size_t n = 0;
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        bad[i] = config_default();
    }
    bad[n++].profile = (enum ingest_profile)7;
    bad[n++].events = (uint64_t)INT64_MAX + 1;
    bad[n++].days = 0;
    bad[n++].days = 3661;
    bad[n++].customers = 0;
    bad[n++].customers = (uint64_t)INT64_MAX + 1;
    bad[n++].zipf_s = 0.0;
    bad[n++].zipf_s = -1.0;
    bad[n++].zipf_s = 10.5;
    bad[n++].zipf_s = NAN;
    bad[n++].busy_fraction = -0.01;
    bad[n++].busy_fraction = 1.01;
    bad[n++].busy_fraction = NAN;
    bad[n++].hot_fraction = -0.01;
    bad[n++].hot_fraction = 1.01;
    bad[n++].hot_fraction = NAN;
    bad[n++].first_day = -1;
    bad[n++].first_day = DS_DAY_MAX - 26; /* 28 days would end one day past DS_DAY_MAX */
    bad[n++].busy_day_index = 28;
    bad[n++].string_id_permille = 1001;
    assert_true(n <= DS_ARRAY_LEN(bad));
    for (size_t i = 0; i < n; i++) {
        if (ingest_workload_config_check(&bad[i]) != -DS_EUSAGE) {
            fail_msg("bad config %zu accepted", i);
        }
        struct ingest_workload *w = (struct ingest_workload *)&bad[i];
        assert_int_equal(ingest_workload_create(&bad[i], &w), -DS_EUSAGE);
        assert_ptr_equal(w, (struct ingest_workload *)&bad[i]);
    }
}

static void test_workload_config_check_accepts_edges(void **state)
{
    /* The extreme valid values are accepted and generate. */
    (void)state;
    struct ingest_workload_config good[10];
    size_t n = 0;
    for (size_t i = 0; i < DS_ARRAY_LEN(good); i++) {
        good[i] = config_default();
        good[i].events = 1000;
    }
    good[n++].events = 0;
    good[n].days = 3660;
    good[n++].first_day = DS_DAY_MAX - 3659;
    good[n].days = 1;
    good[n].busy_day_index = 0;
    good[n++].first_day = DS_DAY_MAX;
    good[n++].zipf_s = 10.0;
    good[n++].zipf_s = 1e-3;
    good[n].busy_fraction = 0.0;
    good[n++].hot_fraction = 1.0;
    good[n].profile = INGEST_PROFILE_HOT_CUSTOMER;
    good[n++].customers = (uint64_t)INT64_MAX;
    good[n].first_day = 0;
    good[n++].string_id_permille = 1000;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ingest_workload_config_check(&good[i]), 0);
        stream_check(&good[i], NULL);
    }
}

int main(void)
{
    printf("workload tests: seed %lu (set DS_TEST_SEED to replay another)\n",
           (unsigned long)test_seed_or(WORKLOAD_SEED_DEFAULT));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workload_defaults_match_documentation),
        cmocka_unit_test(test_workload_next_same_seed_same_stream),
        cmocka_unit_test(test_workload_next_different_seed_different_stream),
        cmocka_unit_test(test_workload_next_time_order_and_ids_every_profile),
        cmocka_unit_test(test_workload_next_uniform_spreads_days_and_hours),
        cmocka_unit_test(test_workload_next_busy_day_share),
        cmocka_unit_test(test_workload_next_busy_day_edges),
        cmocka_unit_test(test_workload_next_hot_customer_share),
        cmocka_unit_test(test_workload_next_zipf_customers),
        cmocka_unit_test(test_workload_next_status_distribution),
        cmocka_unit_test(test_workload_next_amounts_in_cents_within_range),
        cmocka_unit_test(test_workload_next_string_ids_share),
        cmocka_unit_test(test_workload_next_empty_stream),
        cmocka_unit_test(test_workload_config_check_rejects_each_bad_field),
        cmocka_unit_test(test_workload_config_check_accepts_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
