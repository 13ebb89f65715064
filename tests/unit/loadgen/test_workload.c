/*
 * Unit tests of loadgen/workload.c and workload_config.c: the deterministic workload
 * generator. Checks determinism, time order, id sequence, the shape of each profile (days,
 * hours, busy day, hot customer, flash sale, Zipf customers, statuses, amounts, string ids), the
 * send-time schedule, the configuration check, and the order stream (updates, duplicates,
 * versions, stale versions, items: exact counts, byte-equal duplicates, lines the decoder
 * reads back).
 *
 * The statistical tests use seed 42, or DS_TEST_SEED when set (the seed is printed); their
 * tolerances are at least six standard deviations, so any seed passes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"
#include "loadgen/loadgen.h"
#include "tests/support/tempdir.h"

#define DAY_MS 86400000LL
#define HOUR_MS 3600000LL
/* The statistical tests' seed unless DS_TEST_SEED gives one; main prints the seed in use. */
#define WORKLOAD_SEED_DEFAULT 42

static struct loadgen_workload_config config_default(void)
{
    struct loadgen_workload_config cfg;
    loadgen_workload_defaults(&cfg);
    cfg.seed = test_seed_or(WORKLOAD_SEED_DEFAULT);
    return cfg;
}

static struct loadgen_workload *workload_new(const struct loadgen_workload_config *cfg)
{
    struct loadgen_workload *w = NULL;
    assert_int_equal(loadgen_workload_create(cfg, &w), 0);
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
    struct loadgen_workload_config cfg;
    memset(&cfg, 0xA5, sizeof(cfg));
    loadgen_workload_defaults(&cfg);
    assert_int_equal(cfg.profile, LOADGEN_PROFILE_UNIFORM);
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
    assert_true(cfg.rate_eps == 0.0);
    assert_int_equal(cfg.flash_factor, 50);
    assert_int_equal(cfg.flash_seconds, 60);
    assert_true(cfg.flash_start_fraction == 1.0 / 3.0);
    assert_true(cfg.update_fraction == 0.0);
    assert_true(cfg.duplicate_fraction == 0.0);
    assert_true(cfg.items_fraction == 0.0);
    assert_int_equal(loadgen_workload_config_check(&cfg), 0);
}

static void test_workload_next_same_seed_same_stream(void **state)
{
    /* Two generators of one configuration produce identical streams, byte for byte, with
     * identical send times. */
    (void)state;
    const enum loadgen_profile profiles[] = {LOADGEN_PROFILE_UNIFORM, LOADGEN_PROFILE_BUSY_DAY,
                                             LOADGEN_PROFILE_HOT_CUSTOMER,
                                             LOADGEN_PROFILE_FLASH_SALE};
    for (size_t p = 0; p < DS_ARRAY_LEN(profiles); p++) {
        struct loadgen_workload_config cfg = config_default();
        cfg.profile = profiles[p];
        cfg.events = 50000;
        cfg.string_id_permille = 100;
        cfg.rate_eps = 100.0; /* flash-sale: 10,500 window events, a 395 s schedule */
        struct loadgen_workload *a = workload_new(&cfg);
        struct loadgen_workload *b = workload_new(&cfg);
        struct ds_event ea;
        struct ds_event eb;
        uint64_t count = 0;
        while (loadgen_workload_next(a, &ea)) {
            assert_true(loadgen_workload_next(b, &eb));
            assert_memory_equal(&ea, &eb, sizeof(ea));
            assert_true(loadgen_workload_send_time(a) == loadgen_workload_send_time(b));
            count++;
        }
        assert_false(loadgen_workload_next(b, &eb));
        assert_int_equal(count, cfg.events);
        loadgen_workload_destroy(a);
        loadgen_workload_destroy(b);
    }
}

static void test_workload_next_different_seed_different_stream(void **state)
{
    /* Another seed gives another stream (customers, amounts and timestamps all differ). */
    (void)state;
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 1000;
    struct loadgen_workload *a = workload_new(&cfg);
    cfg.seed ^= 1;
    struct loadgen_workload *b = workload_new(&cfg);
    uint64_t customers_differ = 0;
    uint64_t amounts_differ = 0;
    uint64_t ts_differ = 0;
    struct ds_event ea;
    struct ds_event eb;
    while (loadgen_workload_next(a, &ea)) {
        assert_true(loadgen_workload_next(b, &eb));
        customers_differ += ea.customer_id.value != eb.customer_id.value;
        amounts_differ += ea.amount_units != eb.amount_units;
        ts_differ += ea.ts_ms != eb.ts_ms;
        assert_int_equal(ea.order_id.value, eb.order_id.value);
    }
    assert_true(customers_differ > 500);
    assert_true(amounts_differ > 500);
    assert_true(ts_differ > 500);
    loadgen_workload_destroy(a);
    loadgen_workload_destroy(b);
}

/* Runs a generator to its end, checking order, ids and the day range; counts events per day. */
static void stream_check(const struct loadgen_workload_config *cfg, uint64_t *per_day)
{
    struct loadgen_workload *w = workload_new(cfg);
    struct ds_event event;
    int64_t last_ts = INT64_MIN;
    uint64_t count = 0;
    while (loadgen_workload_next(w, &event)) {
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
    assert_false(loadgen_workload_next(w, &event));
    loadgen_workload_destroy(w);
}

static void test_workload_next_time_order_and_ids_every_profile(void **state)
{
    /* Every profile yields non-decreasing timestamps inside the configured days and order ids
     * 1, 2, 3, ... with no gap or repeat, also with string ids mixed in. */
    (void)state;
    const enum loadgen_profile profiles[] = {LOADGEN_PROFILE_UNIFORM, LOADGEN_PROFILE_BUSY_DAY,
                                             LOADGEN_PROFILE_HOT_CUSTOMER};
    for (size_t p = 0; p < DS_ARRAY_LEN(profiles); p++) {
        struct loadgen_workload_config cfg = config_default();
        cfg.profile = profiles[p];
        cfg.rate_eps = 1000.0; /* a schedule does not change the events */
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
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 280000 + 13;
    uint64_t per_day[28] = {0};
    stream_check(&cfg, per_day);
    for (size_t d = 0; d < 28; d++) {
        assert_true(per_day[d] >= cfg.events / 28 - 1 && per_day[d] <= cfg.events / 28 + 2);
    }
    uint64_t per_hour[24] = {0};
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    while (loadgen_workload_next(w, &event)) {
        per_hour[(event.ts_ms % DAY_MS) / HOUR_MS]++;
    }
    loadgen_workload_destroy(w);
    for (size_t h = 0; h < 24; h++) {
        double expected = (double)cfg.events / 24.0;
        assert_true(fabs((double)per_hour[h] - expected) < 0.01 * expected);
    }
}

static void test_workload_next_busy_day_share(void **state)
{
    /* Busy day: busy_fraction of all events fall on the busy day, the rest evenly elsewhere. */
    (void)state;
    struct loadgen_workload_config cfg = config_default();
    cfg.profile = LOADGEN_PROFILE_BUSY_DAY;
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
    struct loadgen_workload_config cfg = config_default();
    cfg.profile = LOADGEN_PROFILE_BUSY_DAY;
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

static double customer_one_share(const struct loadgen_workload_config *cfg)
{
    struct loadgen_workload *w = workload_new(cfg);
    struct ds_event event;
    uint64_t ones = 0;
    while (loadgen_workload_next(w, &event)) {
        ones += event.customer_id.value == 1;
    }
    loadgen_workload_destroy(w);
    return (double)ones / (double)cfg->events;
}

static void test_workload_next_hot_customer_share(void **state)
{
    /* Hot customer: customer 1 places hot_fraction of the orders, whatever zipf_s. */
    (void)state;
    struct loadgen_workload_config cfg = config_default();
    cfg.profile = LOADGEN_PROFILE_HOT_CUSTOMER;
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
    struct loadgen_workload_config cfg = config_default();
    cfg.events = events;
    cfg.customers = customers;
    cfg.zipf_s = s;
    uint64_t *counts = calloc(customers + 1, sizeof(*counts));
    assert_non_null(counts);
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    while (loadgen_workload_next(w, &event)) {
        assert_true(event.customer_id.value >= 1 && (uint64_t)event.customer_id.value <= customers);
        counts[event.customer_id.value]++;
    }
    loadgen_workload_destroy(w);
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
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 200000;
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    while (loadgen_workload_next(w, &event)) {
        size_t i = 0;
        while (i < 5 && !(event.status_len == strlen(names[i]) &&
                          memcmp(event.status, names[i], event.status_len) == 0)) {
            i++;
        }
        assert_true(i < 5);
        counts[i]++;
    }
    loadgen_workload_destroy(w);
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
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 100000;
    int64_t *amounts = malloc(cfg.events * sizeof(*amounts));
    assert_non_null(amounts);
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    size_t n = 0;
    while (loadgen_workload_next(w, &event)) {
        assert_int_equal(event.amount_units % 100, 0);
        assert_true(event.amount_units >= 10000 && event.amount_units <= 5000000);
        amounts[n++] = event.amount_units;
    }
    loadgen_workload_destroy(w);
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
        struct loadgen_workload_config cfg = config_default();
        cfg.events = 100000;
        cfg.string_id_permille = permilles[i];
        struct loadgen_workload *w = workload_new(&cfg);
        struct ds_event event;
        uint64_t strings = 0;
        while (loadgen_workload_next(w, &event)) {
            strings += event.order_id.is_string;
        }
        loadgen_workload_destroy(w);
        double p = permilles[i] / 1000.0;
        double sigma = sqrt(p * (1 - p) / (double)cfg.events);
        assert_true(fabs((double)strings / (double)cfg.events - p) <= 6.0 * sigma + 1e-9);
    }
    /* Full check of the text: stream_check parses every id. */
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 20000;
    cfg.string_id_permille = 1000;
    stream_check(&cfg, NULL);
}

static void test_workload_next_empty_stream(void **state)
{
    /* events = 0 is a valid, empty stream. */
    (void)state;
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 0;
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    assert_false(loadgen_workload_next(w, &event));
    assert_false(loadgen_workload_next(w, &event));
    loadgen_workload_destroy(w);
    loadgen_workload_destroy(NULL);
}

/* ---- flash-sale and the schedule ------------------------------------------------------------ */

/* The flash-sale stream most tests use: 1000 events/s, 28 days, busy day 20 (2026-01-21),
 * factor 50, a 60 s window a third into a 300 s schedule, so [100 s, 160 s), while the uniform
 * stream is on days 9 to 14 (a day takes 300 / 28 = 10.7 s of the schedule). */
#define FLASH_RATE_EPS 1000.0
#define FLASH_UNIFORM_EVENTS 300000u
#define FLASH_EXTRA_EVENTS 105000u /* (50 - 1) * 1000 * 60 / 28 */
#define FLASH_SCHEDULE_S 300u

static struct loadgen_workload_config flash_config(void)
{
    struct loadgen_workload_config cfg = config_default();
    cfg.profile = LOADGEN_PROFILE_FLASH_SALE;
    cfg.rate_eps = FLASH_RATE_EPS;
    cfg.events = FLASH_UNIFORM_EVENTS + FLASH_EXTRA_EVENTS;
    return cfg;
}

/* The window's extra events as the header defines them, computed here independently. */
static uint64_t flash_extra_events(const struct loadgen_workload_config *cfg)
{
    return (uint64_t)llround((double)(cfg->flash_factor - 1) * cfg->rate_eps *
                             (double)cfg->flash_seconds / (double)cfg->days);
}

/* Where the window starts in the schedule: a fraction of the uniform events' duration. */
static double flash_start_s(const struct loadgen_workload_config *cfg)
{
    double uniform = (double)(cfg->events - flash_extra_events(cfg));
    return cfg->flash_start_fraction * (uniform / cfg->rate_eps);
}

/* One flash-sale stream, counted by send time. */
struct flash_counts {
    uint64_t in_window;      /* events due in [start, start + flash_seconds) */
    uint64_t busy_in_window; /* of which on the busy day */
    uint64_t busy_outside;   /* busy-day events due outside the window */
    double busy_first_in_s;  /* send times of the first and last busy-day event in the window */
    double busy_last_in_s;
};

/* Runs a flash-sale stream to its end: order ids 1, 2, 3..., send times never decreasing, days
 * inside the stream, and the events of every day but the busy one in ts order (only the busy
 * day takes the window's events out of order). Counts into *c and, when per_second is not NULL,
 * events per whole second of send time (seconds entries). */
static void flash_run(const struct loadgen_workload_config *cfg, struct flash_counts *c,
                      uint64_t *per_second, size_t seconds)
{
    memset(c, 0, sizeof(*c));
    double start_s = flash_start_s(cfg);
    double end_s = start_s + (double)cfg->flash_seconds;
    int32_t busy_day = cfg->first_day + (int32_t)cfg->busy_day_index;
    struct loadgen_workload *w = workload_new(cfg);
    struct ds_event event;
    uint64_t count = 0;
    double last_send_s = 0.0;
    int64_t last_other_ts = INT64_MIN;
    while (loadgen_workload_next(w, &event)) {
        assert_int_equal(id_number(&event.order_id, "ord-"), ++count);
        double send_s = loadgen_workload_send_time(w);
        assert_true(send_s >= last_send_s);
        last_send_s = send_s;
        int32_t day = ds_day_from_ms(event.ts_ms);
        assert_true(day >= cfg->first_day && day < cfg->first_day + (int32_t)cfg->days);
        if (day != busy_day) {
            assert_true(event.ts_ms >= last_other_ts);
            last_other_ts = event.ts_ms;
        }
        bool inside = send_s >= start_s && send_s < end_s;
        c->in_window += inside;
        if (day == busy_day && inside) {
            c->busy_first_in_s = c->busy_in_window == 0 ? send_s : c->busy_first_in_s;
            c->busy_last_in_s = send_s;
            c->busy_in_window++;
        } else if (day == busy_day) {
            c->busy_outside++;
        }
        if (per_second != NULL) {
            assert_true(send_s < (double)seconds);
            per_second[(size_t)send_s]++;
        }
    }
    assert_int_equal(count, cfg->events);
    loadgen_workload_destroy(w);
}

static void test_workload_next_flash_sale_busy_day_shares(void **state)
{
    /* Inside the window the busy day takes its extra events, (factor - 1) / (days + factor - 1)
     * of the window's events when the uniform stream is on other days then; outside it keeps
     * only its uniform share. When the window covers the uniform stream's own pass over the
     * busy day, that day's whole share falls inside too. Counts are exact to an event or two:
     * the time mapping is stratified and the schedule does not depend on the seed. */
    (void)state;
    struct loadgen_workload_config cfg = flash_config();
    assert_int_equal(flash_extra_events(&cfg), FLASH_EXTRA_EVENTS);
    struct flash_counts c;
    flash_run(&cfg, &c, NULL, 0);
    double uniform_share = (double)FLASH_UNIFORM_EVENTS / 28.0;
    assert_int_equal(c.busy_in_window, FLASH_EXTRA_EVENTS);
    double uniform_in_window = FLASH_RATE_EPS * 60.0;
    assert_true(fabs((double)c.in_window - (FLASH_EXTRA_EVENTS + uniform_in_window)) <= 1.0);
    assert_true(fabs((double)c.busy_outside - uniform_share) <= 1.0);
    double share_in = (double)c.busy_in_window / (double)c.in_window;
    assert_true(fabs(share_in - 49.0 / 77.0) < 1e-4);
    double share_out = (double)c.busy_outside / (double)(cfg.events - c.in_window);
    double share_out_expected = uniform_share / ((double)FLASH_UNIFORM_EVENTS - uniform_in_window);
    assert_true(fabs(share_out - share_out_expected) < 1e-4);

    /* A window from 0.7 of the schedule, [210 s, 270 s), holds the uniform stream's busy day
     * (quantiles 20/28 to 21/28, 214 s to 225 s). */
    cfg.flash_start_fraction = 0.7;
    flash_run(&cfg, &c, NULL, 0);
    assert_true(fabs((double)c.busy_in_window - (FLASH_EXTRA_EVENTS + uniform_share)) <= 1.0);
    assert_int_equal(c.busy_outside, 0);
}

static void test_workload_send_time_flash_sale_schedule(void **state)
{
    /* The schedule: every whole second outside the window sends exactly rate_eps events; each
     * second inside sends rate_eps * (1 + (factor - 1) / days) (2750 here: every day keeps its
     * rate), and exactly flash_seconds seconds do, from flash_start_fraction of the schedule.
     * The busy day's rate: its uniform share, rate_eps / days, is its normal rate (its events
     * over the schedule); in the window it gets (factor - 1) times that on top, so factor times
     * its normal rate. Tolerance 0.1%: the extra count is rounded to a whole event (0.5 in
     * 105,000) and a day's uniform count is exact to one event (1 in 10,714). */
    (void)state;
    struct loadgen_workload_config cfg = flash_config();
    uint64_t per_second[FLASH_SCHEDULE_S + 1] = {0};
    struct flash_counts c;
    flash_run(&cfg, &c, per_second, DS_ARRAY_LEN(per_second));
    uint32_t flash_seconds = 0;
    for (size_t second = 0; second < FLASH_SCHEDULE_S; second++) {
        if (second >= 100 && second < 160) {
            assert_true(per_second[second] >= 2749 && per_second[second] <= 2751);
            flash_seconds++;
        } else {
            assert_int_equal(per_second[second], 1000);
        }
    }
    assert_int_equal(flash_seconds, cfg.flash_seconds);
    assert_int_equal(per_second[FLASH_SCHEDULE_S], 0);
    /* The window's first event is due at its start, its last one step before its end. */
    double step_s = 60.0 / FLASH_EXTRA_EVENTS;
    assert_true(fabs(c.busy_first_in_s - 100.0) < 1e-9);
    assert_true(fabs(c.busy_last_in_s - (160.0 - step_s)) < 1e-9);
    double normal_eps = (double)c.busy_outside / (double)FLASH_SCHEDULE_S;
    assert_true(fabs(normal_eps - FLASH_RATE_EPS / 28.0) < 0.01);
    double extra_eps = (double)c.busy_in_window / (double)cfg.flash_seconds;
    double factor = (normal_eps + extra_eps) / normal_eps;
    if (fabs(factor - 50.0) > 50.0 * 1e-3) {
        fail_msg("busy day at %.3f times its normal rate in the window, expected 50", factor);
    }
}

static void test_workload_send_time_index_over_rate(void **state)
{
    /* Every other profile's schedule is index / rate_eps; without a rate every send time is 0.
     * flash-sale's schedule does not depend on the seed, its events do. */
    (void)state;
    struct loadgen_workload_config cfg = config_default();
    cfg.profile = LOADGEN_PROFILE_BUSY_DAY;
    cfg.events = 10000;
    cfg.rate_eps = 250.0;
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    uint64_t index = 0;
    while (loadgen_workload_next(w, &event)) {
        assert_true(loadgen_workload_send_time(w) == (double)index / 250.0);
        index++;
    }
    loadgen_workload_destroy(w);
    cfg.rate_eps = 0.0;
    w = workload_new(&cfg);
    while (loadgen_workload_next(w, &event)) {
        assert_true(loadgen_workload_send_time(w) == 0.0);
    }
    loadgen_workload_destroy(w);

    cfg = flash_config();
    struct loadgen_workload *a = workload_new(&cfg);
    cfg.seed ^= 1;
    struct loadgen_workload *b = workload_new(&cfg);
    struct ds_event eb;
    uint64_t customers_differ = 0;
    uint64_t days_differ = 0;
    while (loadgen_workload_next(a, &event)) {
        assert_true(loadgen_workload_next(b, &eb));
        assert_true(loadgen_workload_send_time(a) == loadgen_workload_send_time(b));
        customers_differ += event.customer_id.value != eb.customer_id.value;
        days_differ += ds_day_from_ms(event.ts_ms) != ds_day_from_ms(eb.ts_ms);
    }
    assert_true(customers_differ > cfg.events / 2);
    /* Only the event whose stratum straddles a day boundary may change day: 28 days, two
     * streams (the uniform one and the window's). */
    assert_true(days_differ <= 28 + 1);
    loadgen_workload_destroy(a);
    loadgen_workload_destroy(b);
}

static void test_workload_config_check_flash_sale_fits(void **state)
{
    /* flash-sale needs a rate and a schedule that holds the window: with the defaults at
     * 1000 events/s, 105,000 window events plus 90,000 uniform ones (60 s after a third of the
     * schedule is 90 s of it). One event fewer is refused; so is no rate. Small and extreme
     * valid cases generate. */
    (void)state;
    struct loadgen_workload_config cfg = flash_config();
    cfg.events = FLASH_EXTRA_EVENTS + 90000;
    assert_int_equal(loadgen_workload_config_check(&cfg), 0);
    struct flash_counts c;
    flash_run(&cfg, &c, NULL, 0);
    /* The window is the schedule's last 60 s of 90: the uniform busy day falls inside too. */
    assert_true(fabs((double)c.busy_in_window - (FLASH_EXTRA_EVENTS + 90000.0 / 28.0)) <= 1.0);
    assert_int_equal(c.busy_outside, 0);
    cfg.events--;
    assert_int_equal(loadgen_workload_config_check(&cfg), -DS_EUSAGE);

    struct loadgen_workload_config good[6];
    size_t n = 0;
    for (size_t i = 0; i < DS_ARRAY_LEN(good); i++) {
        good[i] = flash_config();
        good[i].rate_eps = 10.0;
        good[i].events = 5000;
    }
    good[n++].flash_factor = 1; /* no extra events: the uniform stream alone */
    good[n].days = 1; /* 29,400 window events, the 600 uniform ones in the window on day 0 too */
    good[n].busy_day_index = 0;
    good[n++].events = 29400 + 900;
    good[n++].flash_start_fraction = 0.0;
    good[n].flash_factor = 1000;
    good[n].flash_seconds = 1;
    good[n++].events = 400;
    good[n].rate_eps = 0.5; /* 490 window events; the uniform stream reaches day 2 after it */
    good[n].days = 3;
    good[n].busy_day_index = 2;
    good[n++].events = 600;
    good[n].busy_day_index = 27;
    good[n++].string_id_permille = 1000;
    for (size_t i = 0; i < n; i++) {
        if (loadgen_workload_config_check(&good[i]) != 0) {
            fail_msg("good flash-sale config %zu refused", i);
        }
        flash_run(&good[i], &c, NULL, 0);
        assert_int_equal(c.busy_in_window, flash_extra_events(&good[i]) + (i == 1 ? 600 : 0));
    }
}

static void test_workload_config_check_rejects_each_bad_field(void **state)
{
    /* Each out-of-range field alone is -DS_EUSAGE, from the check and from create. */
    (void)state;
    struct loadgen_workload_config bad[48];
    size_t n = 0;
    for (size_t i = 0; i < DS_ARRAY_LEN(bad); i++) {
        bad[i] = config_default();
    }
    bad[n++].profile = (enum loadgen_profile)7;
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
    bad[n].profile = LOADGEN_PROFILE_BUSY_DAY;
    bad[n++].busy_day_index = 28;
    bad[n++].string_id_permille = 1001;
    bad[n++].rate_eps = -1.0;
    bad[n++].rate_eps = NAN;
    bad[n++].rate_eps = INFINITY;
    bad[n++].rate_eps = (double)LOADGEN_WORKLOAD_RATE_EPS_MAX * 1.01;
    bad[n++].flash_factor = 0;
    bad[n++].flash_factor = LOADGEN_WORKLOAD_FLASH_FACTOR_MAX + 1;
    bad[n++].flash_seconds = 0;
    bad[n++].flash_seconds = LOADGEN_WORKLOAD_FLASH_SECONDS_MAX + 1;
    bad[n++].flash_start_fraction = -0.01;
    bad[n++].flash_start_fraction = 1.0;
    bad[n++].flash_start_fraction = NAN;
    /* flash-sale: no rate; fewer events than the window's extra ones; a window that ends after
     * the schedule (starting at 0.999 of 300 s); a busy day outside the days. */
    bad[n] = flash_config();
    bad[n++].rate_eps = 0.0;
    bad[n] = flash_config();
    bad[n++].events = 0;
    bad[n] = flash_config();
    bad[n++].events = FLASH_EXTRA_EVENTS;
    bad[n] = flash_config();
    bad[n++].flash_start_fraction = 0.999;
    bad[n] = flash_config();
    bad[n++].busy_day_index = 28;
    bad[n] = flash_config();
    bad[n++].profile = (enum loadgen_profile)(LOADGEN_PROFILE_FLASH_SALE + 1);
    bad[n++].update_fraction = -0.01;
    bad[n++].update_fraction = 1.01;
    bad[n++].update_fraction = NAN;
    bad[n++].duplicate_fraction = -0.01;
    bad[n++].duplicate_fraction = NAN;
    bad[n].update_fraction = 0.6;
    bad[n++].duplicate_fraction = 0.31; /* together over LOADGEN_WORKLOAD_REPEAT_FRACTION_MAX */
    bad[n++].items_fraction = 1.01;
    bad[n++].items_fraction = NAN;
    assert_true(n <= DS_ARRAY_LEN(bad));
    for (size_t i = 0; i < n; i++) {
        if (loadgen_workload_config_check(&bad[i]) != -DS_EUSAGE) {
            fail_msg("bad config %zu accepted", i);
        }
        struct loadgen_workload *w = (struct loadgen_workload *)&bad[i];
        assert_int_equal(loadgen_workload_create(&bad[i], &w), -DS_EUSAGE);
        assert_ptr_equal(w, (struct loadgen_workload *)&bad[i]);
    }
}

static void test_workload_config_check_accepts_edges(void **state)
{
    /* A profile without a busy day does not care where it would be: 7 uniform days. */
    struct loadgen_workload_config week;
    loadgen_workload_defaults(&week);
    week.days = 7;
    assert_int_equal(loadgen_workload_config_check(&week), 0);

    /* The extreme valid values are accepted and generate. */
    (void)state;
    struct loadgen_workload_config good[10];
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
    good[n].profile = LOADGEN_PROFILE_HOT_CUSTOMER;
    good[n++].customers = (uint64_t)INT64_MAX;
    good[n].first_day = 0;
    good[n++].string_id_permille = 1000;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(loadgen_workload_config_check(&good[i]), 0);
        stream_check(&good[i], NULL);
    }
}

/* ---- orders, not events ---------------------------------------------------------------------- */

#define LINES_KEPT 512u /* more than the generator's WORKLOAD_RECENT_LINES */

/* The order stream of the tests: 30% updates, 5% duplicates, 20% of orders with items. */
static struct loadgen_workload_config config_orders(uint64_t events)
{
    struct loadgen_workload_config cfg = config_default();
    cfg.events = events;
    cfg.update_fraction = 0.3;
    cfg.duplicate_fraction = 0.05;
    cfg.items_fraction = 0.2;
    return cfg;
}

static uint64_t line_hash(const char *line, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (uint8_t)line[i]) * 1099511628211ull;
    }
    return h;
}

/* What the stream checks remember of each order, indexed by order id. */
struct order_seen {
    uint64_t last_hash;  /* of its last line */
    int64_t top_version; /* greatest version sent, -1 when none */
    bool versioned;      /* its first line had a version */
};

static void test_workload_next_orders_counts_exact(void **state)
{
    /* A stream of N lines with updates u and duplicates d has exactly round(N u) updates and
     * round(N d) duplicates; new orders keep ids 1, 2, ... in ts order, and every update or
     * duplicate names an order already sent. */
    (void)state;
    struct loadgen_workload_config cfg = config_orders(20000);
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    struct loadgen_workload_stats before = {0};
    uint64_t next_id = 1;
    int64_t last_new_ts = INT64_MIN;
    while (loadgen_workload_next(w, &event)) {
        struct loadgen_workload_stats after;
        loadgen_workload_stats(w, &after);
        uint64_t id = id_number(&event.order_id, "ord-");
        if (after.orders > before.orders) {
            assert_int_equal(id, next_id);
            next_id++;
            assert_true(event.ts_ms >= last_new_ts);
            last_new_ts = event.ts_ms;
        } else {
            assert_true(id < next_id);
        }
        int32_t day = ds_day_from_ms(event.ts_ms);
        assert_true(day >= cfg.first_day && day < cfg.first_day + (int32_t)cfg.days);
        before = after;
    }
    assert_int_equal(before.updates, 6000);
    assert_int_equal(before.duplicates, 1000);
    assert_int_equal(before.orders, 13000);
    assert_int_equal(next_id - 1, 13000);
    loadgen_workload_destroy(w);
}

/* Checks the line of an update: it changes its order and, when versioned, is stale exactly
 * when its version is below the order's top. Returns true when it was stale. */
static bool update_check(struct order_seen *o, const struct ds_event *event, uint64_t hash)
{
    assert_true(hash != o->last_hash);
    assert_int_equal(event->has_version, o->versioned);
    bool stale = event->has_version && event->version < o->top_version;
    if (event->has_version && !stale) {
        assert_true(event->version > o->top_version);
        o->top_version = event->version;
    }
    return stale;
}

static void test_workload_line_duplicates_updates_versions(void **state)
{
    /* Duplicates repeat one of the last lines byte for byte; an update always changes its order;
     * an order either always or never carries a version (1 on its first line); stale lines are
     * exactly the ones below a version sent before, and about 1 in 20 versioned updates. */
    (void)state;
    struct loadgen_workload_config cfg = config_orders(40000);
    struct loadgen_workload *w = workload_new(&cfg);
    struct order_seen *seen = calloc(cfg.events + 1, sizeof(*seen));
    uint64_t *kept = calloc(LINES_KEPT, sizeof(*kept));
    assert_non_null(seen);
    assert_non_null(kept);
    struct ds_event event;
    struct loadgen_workload_stats before = {0};
    char line[LOADGEN_WORKLOAD_LINE_BYTES_MAX];
    uint64_t index = 0;
    uint64_t stale = 0;
    while (loadgen_workload_next(w, &event)) {
        int n = loadgen_workload_line(w, line, sizeof(line));
        assert_true(n > 0);
        uint64_t hash = line_hash(line, (size_t)n);
        struct loadgen_workload_stats after;
        loadgen_workload_stats(w, &after);
        struct order_seen *o = &seen[id_number(&event.order_id, "ord-")];
        if (after.orders > before.orders) {
            o->versioned = event.has_version;
            o->top_version = event.has_version ? event.version : -1;
            assert_true(!event.has_version || event.version == 1);
        } else if (after.duplicates > before.duplicates) {
            bool found = false;
            for (uint64_t k = 1; k <= LINES_KEPT && k <= index && !found; k++) {
                found = kept[(index - k) % LINES_KEPT] == hash;
            }
            assert_true(found);
        } else {
            assert_int_equal(after.updates, before.updates + 1);
            bool is_stale = update_check(o, &event, hash);
            stale += is_stale;
            assert_int_equal(after.stale, before.stale + (is_stale ? 1 : 0));
        }
        if (after.duplicates == before.duplicates) {
            o->last_hash = hash;
        }
        kept[index++ % LINES_KEPT] = hash;
        before = after;
    }
    assert_int_equal(stale, before.stale);
    /* Half the orders are versioned, so about half the updates; about 5% of those are stale
     * (expected 300 of 6000 here; the bounds are over 8 sigma wide). */
    uint64_t versioned_updates = before.updates / 2;
    assert_true(stale > versioned_updates / 40 && stale < versioned_updates / 12);
    free(kept);
    free(seen);
    loadgen_workload_destroy(w);
}

static void test_workload_line_decodes_to_event(void **state)
{
    /* Every generated line decodes (ingest_decoder_decode) to the event the generator returned:
     * ids, ts, status, amount, version, and the canonical items byte for byte; the share of new
     * orders with items is near items_fraction and every basket has 0..5 items. A buffer one
     * byte short is -ENOSPC and left untouched. */
    (void)state;
    struct loadgen_workload_config cfg = config_orders(20000);
    cfg.string_id_permille = 100;
    struct loadgen_workload *w = workload_new(&cfg);
    struct ingest_decoder *decoder = calloc(1, sizeof(*decoder));
    assert_non_null(decoder);
    struct ds_event event;
    char line[LOADGEN_WORKLOAD_LINE_BYTES_MAX];
    uint64_t with_items = 0;
    while (loadgen_workload_next(w, &event)) {
        int n = loadgen_workload_line(w, line, sizeof(line));
        assert_true(n > 0);
        char small[LOADGEN_WORKLOAD_LINE_BYTES_MAX];
        memset(small, '#', sizeof(small));
        assert_int_equal(loadgen_workload_line(w, small, (size_t)n - 1), -ENOSPC);
        assert_true(small[0] == '#' && small[n - 2] == '#'); /* untouched */
        struct ds_event back;
        struct ingest_error error;
        if (ingest_decoder_decode(decoder, line, (size_t)n, &back, &error) != 0) {
            fail_msg("%.*s: %s at %zu", n, line, ingest_reason_name(error.reason),
                     error.byte_offset);
        }
        assert_memory_equal(&back.order_id, &event.order_id, sizeof(event.order_id));
        assert_memory_equal(&back.customer_id, &event.customer_id, sizeof(event.customer_id));
        assert_int_equal(back.ts_ms, event.ts_ms);
        assert_int_equal(back.amount_units, event.amount_units);
        assert_int_equal(back.status_len, event.status_len);
        assert_memory_equal(back.status, event.status, event.status_len);
        assert_int_equal(back.has_version, event.has_version);
        assert_int_equal(back.version, event.version);
        assert_int_equal(back.items_bytes, event.items_bytes);
        assert_true((back.items == NULL) == (event.items == NULL));
        if (event.items != NULL) {
            assert_memory_equal(back.items, event.items, event.items_bytes);
            assert_true(event.items[0] <= LOADGEN_WORKLOAD_ITEMS_MAX);
            with_items++;
        }
    }
    struct loadgen_workload_stats stats;
    loadgen_workload_stats(w, &stats);
    assert_int_equal(with_items, stats.with_items);
    /* Lines with items: 20% of new orders and of their updates and duplicates. */
    assert_true(with_items > cfg.events / 5 - 800 && with_items < cfg.events / 5 + 800);
    free(decoder);
    loadgen_workload_destroy(w);
}

static void test_workload_next_orders_tiny_streams(void **state)
{
    /* Streams of 1..6 lines at the largest repeat share start with a new order and hold the
     * counts the rounding gives; with updates 0.9 and 2 lines, one is an update. */
    (void)state;
    for (uint64_t events = 1; events <= 6; events++) {
        struct loadgen_workload_config cfg = config_default();
        cfg.events = events;
        cfg.update_fraction = 0.45;
        cfg.duplicate_fraction = 0.45;
        struct loadgen_workload *w = workload_new(&cfg);
        struct ds_event event;
        assert_true(loadgen_workload_next(w, &event));
        assert_int_equal(id_number(&event.order_id, "ord-"), 1);
        uint64_t lines = 1;
        while (loadgen_workload_next(w, &event)) {
            lines++;
        }
        struct loadgen_workload_stats stats;
        loadgen_workload_stats(w, &stats);
        assert_int_equal(lines, events);
        assert_int_equal(stats.orders + stats.updates + stats.duplicates, events);
        assert_true(stats.orders >= 1);
        loadgen_workload_destroy(w);
    }
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 2;
    cfg.update_fraction = 0.9;
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    while (loadgen_workload_next(w, &event)) {
    }
    struct loadgen_workload_stats stats;
    loadgen_workload_stats(w, &stats);
    assert_int_equal(stats.orders, 1);
    assert_int_equal(stats.updates, 1);
    loadgen_workload_destroy(w);
}

static void test_workload_next_orders_zero_fractions_plain_stream(void **state)
{
    /* With the three fractions 0 the stream has no versions, no items, no repeats: the events
     * of before (the integration test checks their bytes against sha256 sums of before). */
    (void)state;
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 5000;
    struct loadgen_workload *w = workload_new(&cfg);
    struct ds_event event;
    char line[LOADGEN_WORKLOAD_LINE_BYTES_MAX];
    char plain[INGEST_JSON_LINE_BYTES_MAX];
    while (loadgen_workload_next(w, &event)) {
        assert_false(event.has_version);
        assert_null(event.items);
        int n = loadgen_workload_line(w, line, sizeof(line));
        int m = ingest_event_format_json(&event, plain, sizeof(plain));
        assert_int_equal(n, m);
        assert_memory_equal(line, plain, (size_t)n);
    }
    struct loadgen_workload_stats stats;
    loadgen_workload_stats(w, &stats);
    assert_int_equal(stats.orders, cfg.events);
    assert_int_equal(stats.updates + stats.duplicates + stats.versioned + stats.with_items, 0);
    loadgen_workload_destroy(w);
}

static void test_workload_next_updates_keep_day_same_stream_but_days(void **state)
{
    /* updates_keep_day: every update carries its order's day, and apart from the moved days the
     * stream is the default one line for line (the move is still drawn). */
    (void)state;
    struct loadgen_workload_config cfg = config_default();
    cfg.events = 100000;
    cfg.days = 30;
    cfg.string_id_permille = 0;
    cfg.update_fraction = 0.4;
    struct loadgen_workload *moved = workload_new(&cfg);
    cfg.updates_keep_day = true;
    struct loadgen_workload *kept = workload_new(&cfg);
    int64_t *first_day = calloc(cfg.events + 1, sizeof(*first_day));
    assert_non_null(first_day);
    struct ds_event a, b;
    uint64_t lines = 0, moved_updates = 0;
    while (loadgen_workload_next(moved, &a)) {
        assert_true(loadgen_workload_next(kept, &b));
        lines++;
        assert_int_equal(a.order_id.value, b.order_id.value);
        assert_int_equal(a.customer_id.value, b.customer_id.value);
        assert_int_equal(a.amount_units, b.amount_units);
        assert_int_equal(a.status_len, b.status_len);
        assert_memory_equal(a.status, b.status, a.status_len);
        uint64_t id = (uint64_t)b.order_id.value;
        assert_true(id >= 1 && id <= cfg.events);
        if (first_day[id] == 0) {
            first_day[id] = b.ts_ms / DAY_MS + 1;
            assert_int_equal(a.ts_ms, b.ts_ms);
        }
        assert_int_equal(b.ts_ms / DAY_MS + 1, first_day[id]);
        moved_updates += a.ts_ms / DAY_MS + 1 != first_day[id] ? 1 : 0;
    }
    assert_false(loadgen_workload_next(kept, &b));
    assert_int_equal(lines, cfg.events);
    assert_true(moved_updates > 100); /* the default stream does move days: the flag did work */
    free(first_day);
    loadgen_workload_destroy(kept);
    loadgen_workload_destroy(moved);
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
        cmocka_unit_test(test_workload_next_flash_sale_busy_day_shares),
        cmocka_unit_test(test_workload_send_time_flash_sale_schedule),
        cmocka_unit_test(test_workload_send_time_index_over_rate),
        cmocka_unit_test(test_workload_config_check_flash_sale_fits),
        cmocka_unit_test(test_workload_config_check_rejects_each_bad_field),
        cmocka_unit_test(test_workload_config_check_accepts_edges),
        cmocka_unit_test(test_workload_next_orders_counts_exact),
        cmocka_unit_test(test_workload_line_duplicates_updates_versions),
        cmocka_unit_test(test_workload_line_decodes_to_event),
        cmocka_unit_test(test_workload_next_orders_tiny_streams),
        cmocka_unit_test(test_workload_next_orders_zero_fractions_plain_stream),
        cmocka_unit_test(test_workload_next_updates_keep_day_same_stream_but_days),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
