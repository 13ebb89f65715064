/*
 * Latency of one load test run (loadtest.h), measured against the producer's schedule so that
 * coordinated omission shows: a stalled producer or pipeline delays events that were due, and
 * the delay is counted from when they were due, not from when they were finally sent. Also the
 * percentile rule every figure of the load test uses (loadtest_percentile).
 *
 * - Send delay: every event, sent_ns - due_ns (kafka_produce.c's on_sent), into a histogram of
 *   the whole run (seconds from warmup_s on) and one of the current second (its p99 kept per
 *   second). Fixed memory whatever the event count.
 * - End to end: every stride-th event (stride = ceil(events / LOADTEST_MARKS_MAX)) keeps its
 *   scheduled time. A probe thread records the nodes' durable (/v1/heat events_durable) and
 *   queryable (a day-count query over the workload's days, consistent=false) totals every
 *   LOADTEST_PROBE_INTERVAL_MS. After the run, sampled event i (0-based, in send order) is
 *   durable at the first probe whose durable total exceeds i, so its latency is that probe's
 *   time minus its scheduled time; the same for queryable.
 *
 * Invariants: the producer thread alone writes the send-delay state and the marks, the probe
 * thread alone the probes; loadtest_latency_finish reads both after the threads are joined, so
 * nothing here is shared while it changes. Sampled events never reached by a probe are counted
 * as unseen, never given a latency.
 *
 * What the end-to-end figure means: it takes the events' total order (the producer's send order)
 * for the order in which they become durable. Across Kafka partitions that is not exact: a
 * partition behind the others makes its events wait longer than the figure says and the others'
 * less. It is exact for one partition and close whenever partitions progress evenly; the run's
 * lag (lag_ms) and the per-partition heat show when they do not. The first probe after an event
 * became durable is an upper bound on when it did, by at most the probe interval plus the time
 * a probe takes.
 *
 * Rejected: stamping sampled events with their scheduled time and asking the nodes when they
 * stored each one (a lookup per sampled event, and the node would have to expose write times);
 * interpolating between probes (commits make the totals jump, so an interpolated time could be
 * earlier than the truth: an upper bound is the honest side to err on).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "loadgen/loadtest.h"
#include "loadgen/loadtest_hist.h"

struct loadtest_probe {
    uint64_t at_ns;
    uint64_t durable;
    uint64_t queryable;
};

struct loadtest_latency {
    uint64_t t0_ns;
    uint32_t warmup_s;
    uint32_t stride;
    /* the producer thread */
    uint64_t sent;
    uint32_t second;                  /* the second of the events now in this_second */
    struct loadtest_hist whole;       /* from warmup_s on */
    struct loadtest_hist this_second; /* events scheduled in `second` */
    float *send_p99_ms;               /* LOADTEST_SECONDS_MAX, -1: none */
    uint64_t mark_count;
    uint64_t *mark_due_ns; /* LOADTEST_MARKS_MAX: event mark x stride's scheduled time */
    /* the probe thread */
    uint64_t probe_count;
    struct loadtest_probe *probes; /* LOADTEST_PROBES_MAX */
};

int loadtest_latency_create(uint64_t t0_ns, uint64_t events, uint32_t warmup_s,
                            struct loadtest_latency **out)
{
    ASSERT(events > 0);
    struct loadtest_latency *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return -ENOMEM;
    }
    l->t0_ns = t0_ns;
    l->warmup_s = warmup_s;
    l->stride = (uint32_t)((events + LOADTEST_MARKS_MAX - 1u) / LOADTEST_MARKS_MAX);
    l->send_p99_ms = malloc(LOADTEST_SECONDS_MAX * sizeof(float));
    l->mark_due_ns = malloc(LOADTEST_MARKS_MAX * sizeof(uint64_t));
    l->probes = malloc(LOADTEST_PROBES_MAX * sizeof(struct loadtest_probe));
    if (l->send_p99_ms == NULL || l->mark_due_ns == NULL || l->probes == NULL) {
        loadtest_latency_destroy(l);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < LOADTEST_SECONDS_MAX; i++) {
        l->send_p99_ms[i] = -1.0f;
    }
    loadtest_hist_reset(&l->whole);
    loadtest_hist_reset(&l->this_second);
    ASSERT(l->stride >= 1);
    *out = l;
    return 0;
}

void loadtest_latency_destroy(struct loadtest_latency *l)
{
    if (l == NULL) {
        return;
    }
    free(l->probes);
    free(l->mark_due_ns);
    free(l->send_p99_ms);
    free(l);
}

/* The second of the schedule (from the run's origin) an event due at due_ns belongs to. */
static uint64_t loadtest_latency_second(const struct loadtest_latency *l, uint64_t due_ns)
{
    return due_ns > l->t0_ns ? (due_ns - l->t0_ns) / 1000000000u : 0;
}

/* Closes the second being recorded: its p99 into the series. */
static void loadtest_latency_close_second(struct loadtest_latency *l)
{
    if (l->this_second.count > 0 && l->second < LOADTEST_SECONDS_MAX) {
        l->send_p99_ms[l->second] =
            (float)(loadtest_hist_percentile(&l->this_second, 0.99) / 1000.0);
    }
    loadtest_hist_reset(&l->this_second);
}

void loadtest_latency_on_sent(uint64_t due_ns, uint64_t sent_ns, void *user)
{
    struct loadtest_latency *l = user;
    ASSERT(l != NULL);
    uint64_t delay_us = sent_ns > due_ns ? (sent_ns - due_ns) / 1000u : 0;
    uint64_t second = loadtest_latency_second(l, due_ns);
    if (second > l->second) { /* the schedule never goes back */
        loadtest_latency_close_second(l);
        l->second = second < UINT32_MAX ? (uint32_t)second : UINT32_MAX;
    }
    loadtest_hist_record(&l->this_second, delay_us);
    if (second >= l->warmup_s) {
        loadtest_hist_record(&l->whole, delay_us);
    }
    if (l->sent % l->stride == 0 && l->mark_count < LOADTEST_MARKS_MAX) {
        l->mark_due_ns[l->mark_count++] = due_ns;
    }
    l->sent++;
}

void loadtest_latency_probe(struct loadtest_latency *l, uint64_t now_ns, uint64_t durable,
                            uint64_t queryable)
{
    if (l->probe_count == LOADTEST_PROBES_MAX) {
        return;
    }
    l->probes[l->probe_count++] =
        (struct loadtest_probe){.at_ns = now_ns, .durable = durable, .queryable = queryable};
}

static int loadtest_float_cmp(const void *a, const void *b)
{
    float x = *(const float *)a;
    float y = *(const float *)b;
    return (x > y) - (x < y);
}

double loadtest_percentile(float *v, size_t n, double p)
{
    if (n == 0) {
        return -1.0;
    }
    qsort(v, n, sizeof(*v), loadtest_float_cmp);
    size_t i = (size_t)ceil(p * (double)n);
    return v[i > 0 ? i - 1 : 0];
}

void loadtest_percentiles_of(float *v, size_t n, struct loadtest_percentiles *out)
{
    *out = (struct loadtest_percentiles){
        .count = n, .p50_ms = -1, .p90_ms = -1, .p99_ms = -1, .p999_ms = -1, .max_ms = -1};
    if (n == 0) {
        return;
    }
    out->p50_ms = loadtest_percentile(v, n, 0.50); /* sorts v: the others find it sorted */
    out->p90_ms = loadtest_percentile(v, n, 0.90);
    out->p99_ms = loadtest_percentile(v, n, 0.99);
    out->p999_ms = loadtest_percentile(v, n, 0.999);
    out->max_ms = v[n - 1];
    ASSERT(out->p50_ms <= out->p99_ms && out->p99_ms <= out->max_ms);
}

static void loadtest_latency_send_figures(struct loadtest_latency *l, struct loadtest_result *res)
{
    loadtest_latency_close_second(l);
    const struct loadtest_hist *h = &l->whole;
    struct loadtest_percentiles *p = &res->latency[LOADTEST_LATENCY_SEND_DELAY];
    *p = (struct loadtest_percentiles){
        .count = h->count, .p50_ms = -1, .p90_ms = -1, .p99_ms = -1, .p999_ms = -1, .max_ms = -1};
    if (h->count > 0) {
        p->p50_ms = loadtest_hist_percentile(h, 0.50) / 1000.0;
        p->p90_ms = loadtest_hist_percentile(h, 0.90) / 1000.0;
        p->p99_ms = loadtest_hist_percentile(h, 0.99) / 1000.0;
        p->p999_ms = loadtest_hist_percentile(h, 0.999) / 1000.0;
        p->max_ms = (double)h->max_us / 1000.0;
    }
    for (uint32_t i = 0; i < res->second_count; i++) {
        res->seconds[i].send_delay_p99_ms = l->send_p99_ms[i];
    }
}

/* Each sampled event's latency to the first probe whose total (durable, or queryable) passed
 * it, in ms, or -1 when no probe did; returns how many were never passed. */
static uint64_t loadtest_latency_marks(const struct loadtest_latency *l, bool queryable,
                                       float *lat_ms)
{
    uint64_t unseen = 0;
    uint64_t j = 0;
    uint64_t total = 0; /* the largest total up to probe j: a restarted node must not undo it */
    for (uint64_t k = 0; k < l->mark_count; k++) {
        uint64_t event = k * l->stride;
        while (j < l->probe_count && total <= event) {
            uint64_t t = queryable ? l->probes[j].queryable : l->probes[j].durable;
            total = t > total ? t : total;
            j += total <= event ? 1u : 0u;
        }
        if (total <= event) {
            lat_ms[k] = -1.0f;
            unseen++;
            continue;
        }
        uint64_t at = l->probes[j].at_ns;
        lat_ms[k] = at > l->mark_due_ns[k] ? (float)((double)(at - l->mark_due_ns[k]) / 1e6) : 0;
    }
    return unseen;
}

/* The end-to-end figures of one kind: whole run (from warmup_s on) and p99 per second. */
static void loadtest_latency_e2e(const struct loadtest_latency *l, bool queryable, float *lat,
                                 float *scratch, struct loadtest_result *res)
{
    res->e2e_unseen[queryable ? 1 : 0] = loadtest_latency_marks(l, queryable, lat);
    size_t n = 0;
    for (uint32_t i = 0; i < res->second_count; i++) {
        *(queryable ? &res->seconds[i].queryable_p99_ms : &res->seconds[i].durable_p99_ms) = -1;
    }
    for (uint64_t k = 0; k < l->mark_count;) {
        uint64_t second = loadtest_latency_second(l, l->mark_due_ns[k]);
        size_t m = 0;
        for (; k < l->mark_count && loadtest_latency_second(l, l->mark_due_ns[k]) == second; k++) {
            if (lat[k] >= 0) {
                scratch[m++] = lat[k];
                lat[n] = lat[k]; /* k >= n: the whole run's values move down in place */
                n += second >= l->warmup_s ? 1u : 0u;
            }
        }
        if (m > 0 && second < res->second_count) {
            struct loadtest_second *sec = &res->seconds[second];
            *(queryable ? &sec->queryable_p99_ms : &sec->durable_p99_ms) =
                loadtest_percentile(scratch, m, 0.99);
        }
    }
    loadtest_percentiles_of(
        lat, n, &res->latency[queryable ? LOADTEST_LATENCY_QUERYABLE : LOADTEST_LATENCY_DURABLE]);
}

void loadtest_latency_finish(struct loadtest_latency *l, struct loadtest_result *res)
{
    ASSERT(l != NULL);
    ASSERT(res->second_count <= LOADTEST_SECONDS_MAX);
    res->warmup_s = l->warmup_s;
    res->e2e_stride = l->stride;
    loadtest_latency_send_figures(l, res);
    float *lat = malloc((l->mark_count > 0 ? l->mark_count : 1) * sizeof(float));
    float *scratch = malloc((l->mark_count > 0 ? l->mark_count : 1) * sizeof(float));
    if (lat != NULL && scratch != NULL) {
        loadtest_latency_e2e(l, false, lat, scratch, res);
        loadtest_latency_e2e(l, true, lat, scratch, res);
    } else { /* not measured rather than wrong */
        loadtest_percentiles_of(NULL, 0, &res->latency[LOADTEST_LATENCY_DURABLE]);
        loadtest_percentiles_of(NULL, 0, &res->latency[LOADTEST_LATENCY_QUERYABLE]);
    }
    free(scratch);
    free(lat);
}
