/*
 * Unit tests of shard/heat_advice.c: the advice rule over hand-made heat reports. Each case,
 * each threshold exactly at its edge (at the bar: no advice; one event past it: advice), the
 * lower bar that keeps a case already advised, and no advice on an even load.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "shard/shard.h"
#include "tests/support/events.h"

static int setup(void **state)
{
    struct shard_heat_report *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->heat.capacity_eps = 1000;
    r->growth_capacity_eps = 1000;
    r->base_shards = 4;
    r->max_shards = 8;
    r->adaptive = true;
    r->kafka_partitions_total = 4;
    r->kafka_partitions_assigned = 4;
    *state = r;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static void source_set(struct shard_heat_report *r, int32_t partition, uint64_t window_events)
{
    struct shard_heat_source_row *k = &r->heat.sources[r->heat.source_count++];
    k->partition = partition;
    k->window_events = window_events;
    k->window_seconds = SHARD_HEAT_WINDOW_S;
    k->events = window_events;
}

static void customer_set(struct shard_heat_report *r, int64_t id, double rate_eps)
{
    struct shard_heat_customer_row *c = &r->heat.customers[r->heat.customer_count++];
    c->customer = (struct ds_id){.value = id};
    c->rate_eps = rate_eps;
}

static void day_set(struct shard_heat_report *r, const char *day, uint32_t shards,
                    uint64_t growth_window_events)
{
    uint32_t i = r->heat.day_count++;
    r->heat.days[i].day = test_day_of(day);
    r->heat.days[i].growth_window_events = growth_window_events;
    r->day_shards[i] = shards;
}

static uint32_t plan(const struct shard_heat_report *r, const struct shard_advice *previous,
                     uint32_t previous_count, struct shard_advice *out)
{
    return shard_advice_plan(r, previous, previous_count, out, SHARD_ADVICE_MAX);
}

static void test_heat_advice_none_on_even_load(void **state)
{
    /* Four partitions at a fair share each, many small customers, a day below max: nothing. */
    struct shard_heat_report *r = *state;
    for (int32_t p = 0; p < 4; p++) {
        source_set(r, p, 60000);
    }
    for (int64_t c = 1; c <= 50; c++) {
        customer_set(r, c, 20.0);
    }
    r->heat.customer_rate_eps = 4000.0;
    day_set(r, "2026-01-21", 8, 5 * 8 * 1000);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 0);
}

static void test_heat_advice_skew_past_twice_fair_share(void **state)
{
    /* 1200 of 2400 is exactly 2x a quarter: not advised; 1201 of 2401 is past it. */
    struct shard_heat_report *r = *state;
    source_set(r, 0, 400);
    source_set(r, 1, 400);
    source_set(r, 2, 1200);
    source_set(r, 3, 400);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->heat.sources[2].window_events = 1201;
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_KAFKA_PARTITION_SKEW);
    assert_int_equal(out[0].partition, 2);
    assert_string_equal(out[0].subject, "partition 2");
    assert_string_equal(shard_advice_case_name(out[0].kind), "kafka_partition_skew");
    assert_non_null(strstr(out[0].evidence, "Kafka partition 2 took 50% of this node's writes"));
    assert_non_null(strstr(out[0].evidence, "fair share 25.0% of 4 partitions"));
    assert_non_null(strstr(out[0].remedy, "--key order"));
}

static void test_heat_advice_skew_needs_minimum_events(void **state)
{
    /* All writes in one of four partitions (keyed by day), but 299 events in the window is a
     * trickle: not advised until 300 (SHARD_ADVICE_MIN_EPS x SHARD_ADVICE_MIN_SECONDS). The
     * partitions without writes are not rows: the fair share comes from the assignment. */
    struct shard_heat_report *r = *state;
    source_set(r, 3, 299);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->heat.sources[0].window_events = 300;
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_int_equal(out[0].partition, 3);
    assert_non_null(strstr(out[0].evidence, "took 100%"));
    /* Written in 2 seconds of the window only, however many events: no pattern yet; 3 is. */
    r->heat.sources[0].window_events = 100000;
    r->heat.sources[0].window_seconds = 2;
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->heat.sources[0].window_seconds = 3;
    assert_int_equal(plan(r, NULL, 0, out), 1);
}

static void test_heat_advice_skew_needs_partition_count(void **state)
{
    /* One partition (or an unknown count) has no fair share to exceed. */
    struct shard_heat_report *r = *state;
    source_set(r, 0, 100000);
    r->kafka_partitions_assigned = 1;
    r->kafka_partitions_total = 1;
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->kafka_partitions_assigned = 0;
    r->kafka_partitions_total = 0;
    assert_int_equal(plan(r, NULL, 0, out), 0);
    /* A node reading 3 of 8 partitions judges by its own 3: one at 100% is past 2 x 33%. */
    r->kafka_partitions_assigned = 3;
    r->kafka_partitions_total = 8;
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_non_null(strstr(out[0].evidence, "fair share 33.3% of 3 partitions"));
}

static void test_heat_advice_skew_keeps_at_lower_bar(void **state)
{
    /* 1.6x fair: not a new skew, but one already advised stays until it falls below 1.5x. */
    struct shard_heat_report *r = *state;
    source_set(r, 0, 1600);
    source_set(r, 1, 800);
    source_set(r, 2, 800);
    source_set(r, 3, 800);
    struct shard_advice previous[SHARD_ADVICE_MAX];
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->heat.sources[0].window_events = 5000; /* 5000 / 7400: past 2x */
    assert_int_equal(plan(r, NULL, 0, previous), 1);
    r->heat.sources[0].window_events = 1600; /* 1600 / 4000 = 40%: 1.6x */
    assert_int_equal(plan(r, previous, 1, out), 1);
    assert_int_equal(out[0].partition, 0);
    r->heat.sources[0].window_events = 1440; /* 1440 / 3840 = 37.5%: exactly 1.5x */
    assert_int_equal(plan(r, previous, 1, out), 0);
}

static void test_heat_advice_hot_customer_explains_skew(void **state)
{
    /* Keyed by customer, customer 42 writes half of everything: its partition takes 62.5%
     * (fair 25%, 37.5 points past it); half of that excess is 18.75%. */
    struct shard_heat_report *r = *state;
    source_set(r, 0, 1000);
    source_set(r, 1, 5000);
    source_set(r, 2, 1000);
    source_set(r, 3, 1000);
    r->heat.customer_rate_eps = 1000.0;
    customer_set(r, 42, 500.0);
    customer_set(r, 7, 10.0);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_HOT_CUSTOMER);
    assert_string_equal(shard_advice_case_name(out[0].kind), "hot_customer");
    assert_string_equal(out[0].subject, "customer 42");
    assert_int_equal(out[0].partition, 1);
    assert_int_equal(out[0].customer.value, 42);
    assert_non_null(strstr(out[0].evidence, "customer 42 wrote 50%"));
    assert_non_null(strstr(out[0].evidence, "Kafka partition 1 took 62%"));
    assert_non_null(strstr(out[0].remedy, "rate-limit"));
    /* At 18% the customer does not explain the excess: the partition's skew is the advice. */
    r->heat.customers[0].rate_eps = 180.0;
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_KAFKA_PARTITION_SKEW);
    /* Advised before, the customer stays down to 35% of the excess (13.1%). */
    struct shard_advice previous = {
        .kind = SHARD_ADVICE_HOT_CUSTOMER, .partition = 1, .day = -1, .customer = {.value = 42}};
    assert_int_equal(plan(r, &previous, 1, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_HOT_CUSTOMER);
    r->heat.customers[0].rate_eps = 130.0;
    assert_int_equal(plan(r, &previous, 1, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_KAFKA_PARTITION_SKEW);
}

static void test_heat_advice_busy_day_outweighs_spread_customer(void **state)
{
    /* Keyed by day, a busy month: the busy day (30% of the writes) sits in partition 3 of 8
     * (31%), and the Zipf head, customer 1 (12%), writes on every day. The customer's share
     * would explain the excess, but the day's is larger: a skew, naming the day. */
    struct shard_heat_report *r = *state;
    r->kafka_partitions_assigned = 8;
    r->kafka_partitions_total = 8;
    const uint64_t per_partition[8] = {1000, 1000, 900, 3100, 1000, 1000, 1000, 1000};
    for (int32_t p = 0; p < 8; p++) {
        source_set(r, p, per_partition[p]);
    }
    day_set(r, "2026-01-20", 4, 0);
    r->heat.days[0].window_events = 240;
    day_set(r, "2026-01-21", 16, 0);
    r->heat.days[1].window_events = 3000;
    r->heat.customer_rate_eps = 1000.0;
    customer_set(r, 1, 120.0);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_KAFKA_PARTITION_SKEW);
    assert_int_equal(out[0].partition, 3);
    assert_non_null(strstr(out[0].evidence, "took 31% of this node's writes"));
    assert_non_null(strstr(out[0].evidence, "the busiest day, 2026-01-21, took 30%"));
    /* A customer over the day's share is the better explanation: keyed by customer. */
    r->heat.customers[0].rate_eps = 310.0;
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_HOT_CUSTOMER);
    assert_string_equal(out[0].subject, "customer 1");
    /* A day below half the excess is not named. */
    r->heat.customers[0].rate_eps = 0.0;
    r->heat.days[1].window_events = 900;
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_KAFKA_PARTITION_SKEW);
    assert_null(strstr(out[0].evidence, "busiest day"));
}

static void test_heat_advice_customer_explains_one_partition(void **state)
{
    /* Two skewed partitions of 8, one hot customer: it explains the hotter one only. */
    struct shard_heat_report *r = *state;
    r->kafka_partitions_assigned = 8;
    r->kafka_partitions_total = 8;
    source_set(r, 2, 3000);
    source_set(r, 5, 4000);
    source_set(r, 6, 1000);
    r->heat.customer_rate_eps = 1000.0;
    customer_set(r, 9, 450.0);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 2);
    assert_int_equal(out[0].kind, SHARD_ADVICE_HOT_CUSTOMER);
    assert_int_equal(out[0].partition, 5);
    assert_int_equal(out[1].kind, SHARD_ADVICE_KAFKA_PARTITION_SKEW);
    assert_int_equal(out[1].partition, 2);
    /* The list is bounded by out_max: the hottest comes first. */
    assert_int_equal(shard_advice_plan(r, NULL, 0, out, 1), 1);
    assert_int_equal(out[0].partition, 5);
}

static void test_heat_advice_day_at_max_shards_over_capacity(void **state)
{
    /* 8 shards = --max-shards at 1000/s: the growth window holds 40,000 at capacity. */
    struct shard_heat_report *r = *state;
    day_set(r, "2026-01-21", 8, 40000);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->heat.days[0].growth_window_events = 40001;
    assert_int_equal(plan(r, NULL, 0, out), 1);
    assert_int_equal(out[0].kind, SHARD_ADVICE_DAY_AT_MAX_SHARDS);
    assert_string_equal(shard_advice_case_name(out[0].kind), "day_at_max_shards");
    assert_string_equal(out[0].subject, "2026-01-21");
    assert_int_equal(out[0].partition, -1);
    assert_non_null(strstr(out[0].evidence, "at 8 shards (--max-shards 8)"));
    assert_non_null(strstr(out[0].remedy, "raise --max-shards"));
    /* Advised, it stays down to 80% of capacity. */
    struct shard_advice previous = out[0];
    r->heat.days[0].growth_window_events = 32001;
    assert_int_equal(plan(r, &previous, 1, out), 1);
    r->heat.days[0].growth_window_events = 32000;
    assert_int_equal(plan(r, &previous, 1, out), 0);
}

static void test_heat_advice_day_below_max_or_fixed_is_not_advised(void **state)
{
    /* Below --max-shards growth is the remedy; with growth off there is no capacity to pass. */
    struct shard_heat_report *r = *state;
    day_set(r, "2026-01-21", 4, 1000000);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->day_shards[0] = 8;
    assert_int_equal(plan(r, NULL, 0, out), 1);
    r->adaptive = false;
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->adaptive = true;
    /* The node's share of the capacity is the bar: at 250/s a shard, 8 shards take 10,000. */
    r->growth_capacity_eps = 250;
    r->heat.days[0].growth_window_events = 10000;
    assert_int_equal(plan(r, NULL, 0, out), 0);
    r->heat.days[0].growth_window_events = 10001;
    assert_int_equal(plan(r, NULL, 0, out), 1);
}

static void test_heat_advice_partitions_before_days(void **state)
{
    /* Both kinds at once: the Kafka partition first, then the day. */
    struct shard_heat_report *r = *state;
    day_set(r, "2026-01-21", 8, 100000);
    source_set(r, 1, 100000);
    struct shard_advice out[SHARD_ADVICE_MAX];
    assert_int_equal(plan(r, NULL, 0, out), 2);
    assert_int_equal(out[0].kind, SHARD_ADVICE_KAFKA_PARTITION_SKEW);
    assert_int_equal(out[1].kind, SHARD_ADVICE_DAY_AT_MAX_SHARDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_heat_advice_none_on_even_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_skew_past_twice_fair_share, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_skew_needs_minimum_events, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_skew_needs_partition_count, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_skew_keeps_at_lower_bar, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_hot_customer_explains_skew, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_busy_day_outweighs_spread_customer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_customer_explains_one_partition, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_day_at_max_shards_over_capacity, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_day_below_max_or_fixed_is_not_advised,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_heat_advice_partitions_before_days, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
