/*
 * Unit tests of loadgen/soak_verdict.c: the soak's samples and growth rule. Checks the window
 * maximum (by stream day, skipping unknown values), the limit of each kind of rule, and the
 * verdicts over synthetic samples: a flat sawtooth is bounded, a directory that keeps growing
 * grows, RSS within 12 MiB is bounded and beyond it grows, a family rule judges every store,
 * and a series without samples in a window is not judged.
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

#include "loadgen/soak.h"

#define MIB (1024.0 * 1024.0)

static const struct soak_rule *rule_named(const char *name)
{
    const struct soak_rule *rules = NULL;
    size_t n = soak_rules(&rules);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rules[i].series, name) == 0) {
            return &rules[i];
        }
    }
    fail_msg("no rule %s", name);
    return NULL;
}

static void test_soak_verdict_window_max_by_stream_day(void **state)
{
    /* Only samples whose stream day is in [from, to) and whose value is known count. */
    (void)state;
    const double day[] = {0, 1, 2, NAN, 2, 3, 4};
    const double v[] = {100, 5, 7, 1000, NAN, 9, 50};
    assert_true(soak_window_max(v, day, 7, 1, 4) == 9);
    assert_true(soak_window_max(v, day, 7, 2, 3) == 7);
    assert_true(isnan(soak_window_max(v, day, 7, 5, 9)));
}

static void test_soak_verdict_rule_limits(void **state)
{
    /* The table's figures: 1.25x + 1 MiB for bytes, +12 MiB RSS, +64 fds, + N + 2 sealed files. */
    (void)state;
    assert_true(soak_rule_limit(rule_named("disk_bytes"), 100 * MIB, 5) == 126 * MIB);
    assert_true(soak_rule_limit(rule_named("rss_bytes"), 200 * MIB, 5) == 212 * MIB);
    assert_true(soak_rule_limit(rule_named("open_fds"), 100, 5) == 164);
    assert_true(soak_rule_limit(rule_named("ids_sealed_files"), 5, 5) == 12);
    assert_true(soak_rule_limit(rule_named("days_held"), 8, 5) == 11);
}

/* 40 stream days, N = 5, four samples a day; each series filled by f(day). */
static void fill(struct soak_samples *s, const char *name, double (*f)(double day))
{
    for (uint32_t k = 0; k < s->count; k++) {
        double day = floor((double)k / 4.0);
        s->values[soak_samples_series(s, "stream_day")][k] = day;
        s->values[soak_samples_series(s, name)][k] = f(day);
    }
}

static double sawtooth(double day)
{
    return 100 * MIB + fmod(day, 3.0) * 10 * MIB;
}
static double growing(double day)
{
    return day * 10 * MIB;
}
static double rss_small(double day)
{
    return 200 * MIB + day / 40.0 * 11 * MIB;
}
static double rss_big(double day)
{
    return 200 * MIB + day / 40.0 * 30 * MIB;
}
static double store_fixed(double day)
{
    return day < 0 ? 0 : MIB;
}
static double only_early(double day)
{
    return day < 20 ? 7 : NAN;
}

static const struct soak_verdict *find(const struct soak_verdict *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].series, name) == 0) {
            return &v[i];
        }
    }
    fail_msg("no verdict for %s", name);
    return NULL;
}

static void test_soak_verdicts_bounded_grown_unjudged(void **state)
{
    /* Each kind of series gets the verdict its shape deserves. */
    (void)state;
    struct soak_samples *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    assert_int_equal(soak_samples_init(s), 0);
    s->count = 160;
    fill(s, "disk_bytes", sawtooth);
    fill(s, "disk_bytes.parts", growing);
    fill(s, "disk_bytes.other", store_fixed);
    fill(s, "rss_bytes", rss_small);
    fill(s, "open_fds", only_early);
    struct soak_verdict v[SOAK_VERDICTS_MAX];
    struct soak_windows w;
    soak_windows(40, 5, 0, &w); /* no restarts: [10, 15) against [35, 40) */
    size_t n = soak_verdicts(s, &w, 5, v, SOAK_VERDICTS_MAX);
    assert_int_equal(n, 5);
    const struct soak_verdict *d = find(v, n, "disk_bytes");
    assert_true(d->judged && !d->grew);
    assert_true(d->first_max == 120 * MIB && d->last_max == 120 * MIB);
    const struct soak_verdict *p = find(v, n, "disk_bytes.parts");
    assert_true(p->judged && p->grew);
    assert_true(p->first_max == 140 * MIB && p->last_max == 390 * MIB);
    assert_true(find(v, n, "disk_bytes.other")->judged && !find(v, n, "disk_bytes.other")->grew);
    assert_true(!find(v, n, "rss_bytes")->grew);
    assert_true(!find(v, n, "open_fds")->judged && !find(v, n, "open_fds")->grew);
    fill(s, "rss_bytes", rss_big);
    n = soak_verdicts(s, &w, 5, v, SOAK_VERDICTS_MAX);
    assert_true(find(v, n, "rss_bytes")->grew);
    soak_samples_deinit(s);
    free(s);
}

/* Dropped days awaiting removal: more of them the faster the feed, here growing. */
static double retired_growing(double day)
{
    return day * 4 * MIB;
}
static double whole_with_retired(double day)
{
    return sawtooth(day) + retired_growing(day);
}

static void test_soak_verdicts_leave_the_retired_days_out(void **state)
{
    /* The whole directory is judged without the days awaiting removal, which are reported but
     * not judged; the same growth in a store of its own fails it. */
    (void)state;
    struct soak_samples *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    assert_int_equal(soak_samples_init(s), 0);
    s->count = 160;
    fill(s, "disk_bytes", whole_with_retired);
    fill(s, "disk_bytes.parts", sawtooth);
    fill(s, "disk_bytes.retired", retired_growing);
    struct soak_verdict v[SOAK_VERDICTS_MAX];
    struct soak_windows w;
    soak_windows(40, 5, 0, &w);
    size_t n = soak_verdicts(s, &w, 5, v, SOAK_VERDICTS_MAX);
    assert_int_equal(n, 2); /* the whole and parts: retired is not judged */
    const struct soak_verdict *d = find(v, n, "disk_bytes");
    assert_true(d->judged && !d->grew);
    assert_true(d->first_max == 120 * MIB && d->last_max == 120 * MIB);
    assert_true(!find(v, n, "disk_bytes.parts")->grew);
    fill(s, "disk_bytes.ids", retired_growing);
    n = soak_verdicts(s, &w, 5, v, SOAK_VERDICTS_MAX);
    assert_true(find(v, n, "disk_bytes.ids")->grew);
    soak_samples_deinit(s);
    free(s);
}

static void test_soak_windows_span_a_restart_cycle(void **state)
{
    /* Each window is max(N, restart interval) days: with a restart every 10 days both hold
     * one, so a node's memory warmed up after a restart is compared with the same. */
    (void)state;
    struct soak_windows w;
    soak_windows(60, 5, 10, &w);
    assert_int_equal(w.first_from, 10);
    assert_int_equal(w.first_to, 20);
    assert_int_equal(w.last_from, 50);
    assert_int_equal(w.last_to, 60);
    assert_int_equal(soak_windows_days_min(5, 10), 30);
    assert_int_equal(soak_windows_days_min(5, 3), 20); /* N = 5 is the longer */
    soak_windows(20, 5, 0, &w);
    assert_int_equal(w.first_to, 15);
    assert_int_equal(w.last_from, 15);
}

static void test_soak_windows_follow_the_restart_cycles(void **state)
{
    /* With a restart every 20 days and N = 5, the first window is the cycle from the restart
     * at day 20 (not [10, 30), half of two cycles), the last from the last restart at least
     * 20 days before the end: both hold a node 0..20 days after its start. */
    (void)state;
    struct soak_windows w;
    soak_windows(100, 5, 20, &w);
    assert_int_equal(w.first_from, 20);
    assert_int_equal(w.first_to, 40);
    assert_int_equal(w.last_from, 80);
    assert_int_equal(w.last_to, 100);
    soak_windows(70, 5, 20, &w); /* the last restart 20 days before the end is at day 40 */
    assert_int_equal(w.last_from, 40);
    assert_int_equal(w.last_to, 70);
    assert_int_equal(soak_windows_days_min(5, 20), 60);
    assert_int_equal(soak_windows_days_min(3, 8), 24); /* first restart from day 6 is 8 */
    assert_int_equal(soak_windows_days_min(5, 0), 20);
}

static void test_soak_samples_set_add_and_limits(void **state)
{
    /* add sums over labels (NAN counts as 0), a new series is NAN before its first value, and
     * the series table refuses more than SOAK_SERIES_MAX. */
    (void)state;
    struct soak_samples *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    assert_int_equal(soak_samples_init(s), 0);
    assert_int_equal(soak_samples_begin(s), 0);
    assert_int_equal(soak_samples_set(s, "t_s", 1.0), 0);
    soak_samples_end(s);
    assert_int_equal(soak_samples_begin(s), 0);
    assert_int_equal(soak_samples_add(s, "lag", 3), 0);
    assert_int_equal(soak_samples_add(s, "lag", 4), 0);
    soak_samples_end(s);
    int lag = soak_samples_series(s, "lag");
    assert_true(lag >= 0);
    assert_true(isnan(s->values[lag][0]));
    assert_true(s->values[lag][1] == 7);
    char name[32];
    for (uint32_t i = s->series_count; i < SOAK_SERIES_MAX; i++) {
        snprintf(name, sizeof(name), "x%u", i);
        assert_true(soak_samples_series(s, name) >= 0);
    }
    assert_int_equal(soak_samples_series(s, "one-too-many"), -ENOSPC);
    soak_samples_deinit(s);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_soak_verdict_window_max_by_stream_day),
        cmocka_unit_test(test_soak_verdict_rule_limits),
        cmocka_unit_test(test_soak_verdicts_bounded_grown_unjudged),
        cmocka_unit_test(test_soak_verdicts_leave_the_retired_days_out),
        cmocka_unit_test(test_soak_windows_span_a_restart_cycle),
        cmocka_unit_test(test_soak_windows_follow_the_restart_cycles),
        cmocka_unit_test(test_soak_samples_set_add_and_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
