/*
 * A node's live figures (struct query_metrics) and their Prometheus text rendering.
 *
 * Writers are the node's threads (consumer, writer) with relaxed atomic stores and adds; the
 * reader is an HTTP worker rendering /metrics. Figures are independent counters and gauges, so
 * no ordering between them is promised and none is needed. The labels are bounded by the
 * struct itself: at most QUERY_METRICS_REASONS_MAX reasons and only assigned partitions.
 *
 * Rejected: naming the ingest reasons here (query/ may not include ingest/: the layering is
 * storage <- query), and a histogram with caller-chosen buckets (the node and the service
 * would have to agree on memory at runtime; fixed buckets are enough for fsync latency).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "query/query.h"

const uint32_t query_fsync_bucket_bounds_us[QUERY_FSYNC_BUCKETS] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000};
const uint32_t query_gsi_lag_bucket_bounds_ms[QUERY_GSI_LAG_BUCKETS] = {
    10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};

void query_metrics_init(struct query_metrics *m, const char *const *reason_names,
                        uint32_t reason_count)
{
    ASSERT(m != NULL);
    ASSERT(reason_count == 0 || reason_names != NULL);
    memset(m, 0, sizeof(*m));
    m->reason_count =
        reason_count < QUERY_METRICS_REASONS_MAX ? reason_count : QUERY_METRICS_REASONS_MAX;
    for (uint32_t i = 0; i < m->reason_count; i++) {
        m->reason_names[i] = reason_names[i];
    }
    for (uint32_t i = 0; i < QUERY_METRICS_LAG_PARTITIONS_MAX; i++) {
        atomic_store_explicit(&m->consumer_lag[i], -1, memory_order_relaxed);
    }
    atomic_store_explicit(&m->gsi_lag_ms, -1, memory_order_relaxed);
    atomic_store_explicit(&m->orders, -1, memory_order_relaxed);
    for (uint32_t i = 0; i < QUERY_HELD_COUNT; i++) {
        atomic_store_explicit(&m->held[i], -1, memory_order_relaxed);
    }
    int rc = pthread_mutex_init(&m->heat_lock, NULL);
    ASSERT(rc == 0);
}

void query_metrics_heat_set(struct query_metrics *m, const struct shard_heat_report *report)
{
    ASSERT(m != NULL && report != NULL);
    pthread_mutex_lock(&m->heat_lock);
    m->heat = *report;
    m->heat_present = true;
    pthread_mutex_unlock(&m->heat_lock);
}

bool query_metrics_heat_get(struct query_metrics *m, struct shard_heat_report *out)
{
    ASSERT(m != NULL && out != NULL);
    pthread_mutex_lock(&m->heat_lock);
    bool present = m->heat_present;
    if (present) {
        *out = m->heat;
    }
    pthread_mutex_unlock(&m->heat_lock);
    return present;
}

void query_metrics_gsi_lag_set(struct query_metrics *m, int64_t lag_ms)
{
    atomic_store_explicit(&m->gsi_lag_ms, lag_ms, memory_order_relaxed);
}

void query_metrics_gsi_lag_observe(struct query_metrics *m, uint64_t lag_ns)
{
    uint32_t bucket = QUERY_GSI_LAG_BUCKETS;
    for (uint32_t i = 0; i < QUERY_GSI_LAG_BUCKETS; i++) {
        if (lag_ns <= (uint64_t)query_gsi_lag_bucket_bounds_ms[i] * 1000000u) {
            bucket = i;
            break;
        }
    }
    atomic_fetch_add_explicit(&m->gsi_lag_buckets[bucket], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->gsi_lag_sum_ns, lag_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->gsi_lag_count, 1, memory_order_relaxed);
}

void query_metrics_joined_set(struct query_metrics *m)
{
    uint64_t now = ds_clock_ns();
    uint_fast64_t none = 0;
    (void)atomic_compare_exchange_strong_explicit(&m->writer_seen_ns, &none, now,
                                                  memory_order_relaxed, memory_order_relaxed);
    atomic_store_explicit(&m->consumer_seen_ns, now, memory_order_relaxed);
    atomic_store_explicit(&m->joined, true, memory_order_relaxed);
}

enum query_readiness query_metrics_readiness(const struct query_metrics *m, int64_t lag_max,
                                             uint64_t stall_ns, uint64_t now_ns, int64_t *lag,
                                             uint64_t *silent_ns)
{
    ASSERT(stall_ns > 0);
    *lag = query_metrics_lag_max(m);
    *silent_ns = 0;
    if (!atomic_load_explicit(&m->joined, memory_order_relaxed)) {
        return QUERY_UNREADY_JOINING;
    }
    uint64_t consumer = atomic_load_explicit(&m->consumer_seen_ns, memory_order_relaxed);
    uint64_t writer = atomic_load_explicit(&m->writer_seen_ns, memory_order_relaxed);
    /* both are set before joined, though a relaxed reader may see joined first: 0 is "now" */
    if (consumer > 0 && now_ns > consumer && now_ns - consumer >= stall_ns) {
        *silent_ns = now_ns - consumer;
        return QUERY_UNREADY_CONSUMER;
    }
    if (*lag > lag_max) {
        return QUERY_UNREADY_LAG;
    }
    if (*lag > 0 && writer > 0 && now_ns > writer && now_ns - writer >= stall_ns) {
        *silent_ns = now_ns - writer;
        return QUERY_UNREADY_WRITER;
    }
    return QUERY_READY;
}

void query_metrics_rejected_add(struct query_metrics *m, uint32_t reason_index, uint64_t n)
{
    if (reason_index < m->reason_count) {
        atomic_fetch_add_explicit(&m->rejected[reason_index], n, memory_order_relaxed);
    }
}

void query_metrics_lag_set(struct query_metrics *m, int32_t partition, int64_t lag)
{
    if (partition >= 0 && (uint32_t)partition < QUERY_METRICS_LAG_PARTITIONS_MAX) {
        atomic_store_explicit(&m->consumer_lag[partition], lag < 0 ? -1 : lag,
                              memory_order_relaxed);
    }
}

void query_metrics_fsync_observe(struct query_metrics *m, uint64_t latency_ns)
{
    uint32_t bucket = QUERY_FSYNC_BUCKETS;
    for (uint32_t i = 0; i < QUERY_FSYNC_BUCKETS; i++) {
        if (latency_ns <= (uint64_t)query_fsync_bucket_bounds_us[i] * 1000u) {
            bucket = i;
            break;
        }
    }
    atomic_fetch_add_explicit(&m->fsync_buckets[bucket], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->fsync_sum_ns, latency_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->fsync_count, 1, memory_order_relaxed);
}

int64_t query_metrics_lag_max(const struct query_metrics *m)
{
    int64_t max = 0;
    for (uint32_t i = 0; i < QUERY_METRICS_LAG_PARTITIONS_MAX; i++) {
        int64_t lag = atomic_load_explicit(&m->consumer_lag[i], memory_order_relaxed);
        max = lag > max ? lag : max;
    }
    return max;
}

/* A reason name is a label value: it is the caller's static string, but quote and backslash
 * would still break the exposition format, so anything outside [a-z0-9_] is written as '_'. */
static void put_label_value(struct http_text *b, const char *name)
{
    char clean[64];
    size_t i = 0;
    for (; name[i] != '\0' && i + 1 < sizeof(clean); i++) {
        char c = name[i];
        bool plain = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        clean[i] = plain ? c : '_';
    }
    clean[i] = '\0';
    http_text_put(b, "%s", clean);
}

static void put_rejected(struct http_text *b, const struct query_metrics *m)
{
    http_text_put(b, "# HELP dayshard_events_rejected_total Events sent to the dead-letter store.\n"
                     "# TYPE dayshard_events_rejected_total counter\n");
    for (uint32_t i = 0; i < m->reason_count; i++) {
        http_text_put(b, "dayshard_events_rejected_total{reason=\"");
        put_label_value(b, m->reason_names[i]);
        http_text_put(b, "\"} %" PRIuFAST64 "\n",
                      atomic_load_explicit(&m->rejected[i], memory_order_relaxed));
    }
}

static void put_lag(struct http_text *b, const struct query_metrics *m)
{
    http_text_put(b, "# HELP dayshard_consumer_lag_messages Messages behind the high watermark.\n"
                     "# TYPE dayshard_consumer_lag_messages gauge\n");
    for (uint32_t i = 0; i < QUERY_METRICS_LAG_PARTITIONS_MAX; i++) {
        int64_t lag = atomic_load_explicit(&m->consumer_lag[i], memory_order_relaxed);
        if (lag >= 0) {
            http_text_put(b, "dayshard_consumer_lag_messages{partition=\"%u\"} %" PRId64 "\n", i,
                          lag);
        }
    }
}

static void put_fsync(struct http_text *b, const struct query_metrics *m)
{
    http_text_put(
        b, "# HELP dayshard_fsync_seconds Duration of a group commit: block writes, fdatasync "
           "of the touched segments and of the manifest.\n"
           "# TYPE dayshard_fsync_seconds histogram\n");
    uint64_t cumulative = 0;
    for (uint32_t i = 0; i <= QUERY_FSYNC_BUCKETS; i++) {
        cumulative += atomic_load_explicit(&m->fsync_buckets[i], memory_order_relaxed);
        if (i < QUERY_FSYNC_BUCKETS) {
            uint32_t us = query_fsync_bucket_bounds_us[i];
            http_text_put(b, "dayshard_fsync_seconds_bucket{le=\"%u.%06u\"} %" PRIu64 "\n",
                          us / 1000000u, us % 1000000u, cumulative);
        } else {
            http_text_put(b, "dayshard_fsync_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n",
                          cumulative);
        }
    }
    uint64_t sum_ns = atomic_load_explicit(&m->fsync_sum_ns, memory_order_relaxed);
    http_text_put(b, "dayshard_fsync_seconds_sum %" PRIu64 ".%09" PRIu64 "\n", sum_ns / 1000000000u,
                  sum_ns % 1000000000u);
    /* The count is the +Inf bucket: both come from the same loads, so they always agree. */
    http_text_put(b, "dayshard_fsync_seconds_count %" PRIu64 "\n", cumulative);
}

/* Only with a builder (the gauge is -1 without one). */
static void put_gsi_lag(struct http_text *b, const struct query_metrics *m)
{
    int64_t now_ms = atomic_load_explicit(&m->gsi_lag_ms, memory_order_relaxed);
    if (now_ms < 0) {
        return;
    }
    http_text_put(
        b,
        "# HELP dayshard_gsi_lag_ms Age of the oldest durable commit whose orders are not "
        "yet in the by-customer index (0: caught up).\n"
        "# TYPE dayshard_gsi_lag_ms gauge\n"
        "dayshard_gsi_lag_ms %" PRId64 "\n"
        "# HELP dayshard_gsi_lag_seconds Time from a commit being durable to its orders "
        "being queryable in the by-customer index.\n"
        "# TYPE dayshard_gsi_lag_seconds histogram\n",
        now_ms);
    uint64_t cumulative = 0;
    for (uint32_t i = 0; i <= QUERY_GSI_LAG_BUCKETS; i++) {
        cumulative += atomic_load_explicit(&m->gsi_lag_buckets[i], memory_order_relaxed);
        if (i < QUERY_GSI_LAG_BUCKETS) {
            uint32_t ms = query_gsi_lag_bucket_bounds_ms[i];
            http_text_put(b, "dayshard_gsi_lag_seconds_bucket{le=\"%u.%03u\"} %" PRIu64 "\n",
                          ms / 1000u, ms % 1000u, cumulative);
        } else {
            http_text_put(b, "dayshard_gsi_lag_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n",
                          cumulative);
        }
    }
    uint64_t sum_ns = atomic_load_explicit(&m->gsi_lag_sum_ns, memory_order_relaxed);
    http_text_put(b, "dayshard_gsi_lag_seconds_sum %" PRIu64 ".%09" PRIu64 "\n",
                  sum_ns / 1000000000u, sum_ns % 1000000000u);
    http_text_put(b, "dayshard_gsi_lag_seconds_count %" PRIu64 "\n", cumulative);
}

void query_metrics_orders_set(struct query_metrics *m, const struct storage_order_stats *stats)
{
    atomic_store_explicit(&m->orders, (int64_t)stats->orders, memory_order_relaxed);
    const uint64_t fates[4] = {stats->created, stats->applied, stats->stale, stats->unchanged};
    for (size_t i = 0; i < 4; i++) {
        atomic_store_explicit(&m->order_events[i], fates[i], memory_order_relaxed);
    }
}

/* The orders model's figures; nothing in the events model. */
static void put_orders(struct http_text *b, const struct query_metrics *m)
{
    int64_t orders = atomic_load_explicit(&m->orders, memory_order_relaxed);
    if (orders < 0) {
        return;
    }
    static const char *const fates[4] = {"created", "applied", "stale", "unchanged"};
    http_text_put(
        b,
        "# HELP dayshard_orders Distinct orders this node stores (orders model).\n"
        "# TYPE dayshard_orders gauge\n"
        "dayshard_orders %" PRId64 "\n"
        "# HELP dayshard_order_events_total Events since the node started, by what they did to "
        "their order: created, applied (a newer version), stale (older than the current "
        "version: ignored), unchanged (a repeat: ignored).\n"
        "# TYPE dayshard_order_events_total counter\n",
        orders);
    for (size_t i = 0; i < 4; i++) {
        http_text_put(b, "dayshard_order_events_total{fate=\"%s\"} %" PRIuFAST64 "\n", fates[i],
                      atomic_load_explicit(&m->order_events[i], memory_order_relaxed));
    }
}

void query_metrics_held_set(struct query_metrics *m, const struct storage_held *held,
                            const struct storage_ids_held *ids, int32_t floor, int32_t stream_day,
                            const struct query_writer_figures *writer)
{
    ASSERT(m != NULL && held != NULL);
    int64_t v[QUERY_HELD_COUNT];
    for (uint32_t i = 0; i < QUERY_HELD_COUNT; i++) {
        v[i] = -1;
    }
    v[QUERY_HELD_PARTITIONS] = held->partitions;
    v[QUERY_HELD_SEGMENT_FDS] = held->segment_fds;
    v[QUERY_HELD_RETENTION_FLOOR_DAY] = floor > 0 ? floor : 0;
    v[QUERY_HELD_STREAM_DAY] = stream_day; /* -1 while nothing is stored: not rendered */
    if (ids != NULL) {
        v[QUERY_HELD_IDS_KEYDIR_BYTES] = (int64_t)ids->keydir_bytes;
        v[QUERY_HELD_IDS_RECENT_BYTES] = (int64_t)ids->recent_bytes;
        v[QUERY_HELD_IDS_RECENT_HARD_BYTES] = (int64_t)ids->recent_hard_bytes;
        v[QUERY_HELD_IDS_MEMORY_BYTES] = (int64_t)ids->memory_bytes;
        v[QUERY_HELD_IDS_SEALED_FILES] = ids->sealed_files;
        v[QUERY_HELD_IDS_SEALS] = (int64_t)ids->seals;
        v[QUERY_HELD_IDS_SEALING] = ids->sealing ? 1 : 0;
        v[QUERY_HELD_IDS_STALL_CALLS] = (int64_t)ids->stall_calls;
        v[QUERY_HELD_IDS_STALL_NS] = (int64_t)ids->stall_total_ns;
        v[QUERY_HELD_IDS_STALL_MAX_NS] = (int64_t)ids->stall_max_ns;
    }
    if (writer != NULL) {
        v[QUERY_HELD_WRITER_STALL_MAX_NS] = (int64_t)writer->stall_ns_max;
        v[QUERY_HELD_COMPACTIONS] = (int64_t)writer->compactions;
        v[QUERY_HELD_COMPACTION_SLICES] = (int64_t)writer->compaction_slices;
        v[QUERY_HELD_COMPACTION_SLICE_MAX_NS] = (int64_t)writer->compaction_slice_ns_max;
        v[QUERY_HELD_COMPACTING] = writer->compacting ? 1 : 0;
    }
    for (uint32_t i = 0; i < QUERY_HELD_COUNT; i++) {
        atomic_store_explicit(&m->held[i], v[i], memory_order_relaxed);
    }
    atomic_store_explicit(&m->writer_seen_ns, ds_clock_ns(), memory_order_relaxed);
}

/* How a held figure is written: as it is, nanoseconds as seconds, a day as its first second. */
enum held_unit { HELD_PLAIN = 0, HELD_NS, HELD_DAY };

struct held_family {
    const char *name;
    const char *type;
    enum held_unit unit;
    const char *help;
};

static const struct held_family held_families[QUERY_HELD_COUNT] = {
    [QUERY_HELD_PARTITIONS] = {"dayshard_partitions_held", "gauge", HELD_PLAIN,
                               "Partitions (day, shard) in the writer's table: days below the "
                               "retention floor leave it."},
    [QUERY_HELD_SEGMENT_FDS] = {"dayshard_segment_fds", "gauge", HELD_PLAIN,
                                "Segment files the writer holds open (partitions written "
                                "recently; idle ones are closed)."},
    [QUERY_HELD_RETENTION_FLOOR_DAY] = {"dayshard_retention_floor_timestamp_seconds", "gauge",
                                        HELD_DAY,
                                        "First second of the oldest day kept (0: nothing "
                                        "dropped); older events are dead letters (too_late)."},
    [QUERY_HELD_STREAM_DAY] = {"dayshard_stream_day_timestamp_seconds", "gauge", HELD_DAY,
                               "First second of the stream day: the greatest event day "
                               "stored."},
    [QUERY_HELD_IDS_KEYDIR_BYTES] = {"dayshard_ids_keydir_bytes", "gauge", HELD_PLAIN,
                                     "Memory of the orders-by-id store's keydir (its recent "
                                     "tier)."},
    [QUERY_HELD_IDS_RECENT_BYTES] = {"dayshard_ids_recent_bytes", "gauge", HELD_PLAIN,
                                     "Bytes of the orders-by-id store's recent tier (its log); "
                                     "a seal moves them into the day files."},
    [QUERY_HELD_IDS_RECENT_HARD_BYTES] = {"dayshard_ids_recent_hard_bytes", "gauge", HELD_PLAIN,
                                          "Recent tier bytes at which a commit waits for the "
                                          "running seal (stalling ingest)."},
    [QUERY_HELD_IDS_MEMORY_BYTES] = {"dayshard_ids_memory_bytes", "gauge", HELD_PLAIN,
                                     "Memory of the orders-by-id store: keydir, buffers, the "
                                     "day files' indexes."},
    [QUERY_HELD_IDS_SEALED_FILES] = {"dayshard_ids_sealed_files", "gauge", HELD_PLAIN,
                                     "Sealed day files of the orders-by-id store (one per "
                                     "retained day)."},
    [QUERY_HELD_IDS_SEALS] = {"dayshard_ids_seals_total", "counter", HELD_PLAIN,
                              "Seals of the orders-by-id store's recent tier installed since "
                              "the node started."},
    [QUERY_HELD_IDS_SEALING] = {"dayshard_ids_sealing", "gauge", HELD_PLAIN,
                                "1 while a seal of the orders-by-id store runs."},
    [QUERY_HELD_IDS_STALL_CALLS] = {"dayshard_ids_seal_stalls_total", "counter", HELD_PLAIN,
                                    "Commits whose maintenance of the orders-by-id store had "
                                    "seal work (start, install or wait)."},
    [QUERY_HELD_IDS_STALL_NS] = {"dayshard_ids_seal_stall_seconds_total", "counter", HELD_NS,
                                 "Writer time spent in those commits' seal work."},
    [QUERY_HELD_IDS_STALL_MAX_NS] = {"dayshard_ids_seal_stall_seconds_max", "gauge", HELD_NS,
                                     "Longest writer time in one commit's seal work since the "
                                     "node started."},
    [QUERY_HELD_WRITER_STALL_MAX_NS] = {"dayshard_writer_stall_seconds_max", "gauge", HELD_NS,
                                        "Longest time one group commit held the writer since the "
                                        "node started: writes, fdatasync, MANIFEST, a seal wait "
                                        "and the compaction slice after it."},
    [QUERY_HELD_COMPACTIONS] = {"dayshard_compactions_total", "counter", HELD_PLAIN,
                                "Partitions rewritten by segment compaction (superseded versions "
                                "removed, small blocks merged) since the node started."},
    [QUERY_HELD_COMPACTION_SLICES] = {"dayshard_compaction_slices_total", "counter", HELD_PLAIN,
                                      "Slices of segment compaction run between commits."},
    [QUERY_HELD_COMPACTION_SLICE_MAX_NS] = {"dayshard_compaction_slice_seconds_max", "gauge",
                                            HELD_NS,
                                            "Longest compaction slice since the node started."},
    [QUERY_HELD_COMPACTING] = {"dayshard_compacting", "gauge", HELD_PLAIN,
                               "1 while a segment compaction is in progress."},
};

static void put_held(struct http_text *b, const struct query_metrics *m)
{
    for (uint32_t i = 0; i < QUERY_HELD_COUNT; i++) {
        const struct held_family *f = &held_families[i];
        ASSERT(f->name != NULL);
        int64_t v = atomic_load_explicit(&m->held[i], memory_order_relaxed);
        if (v < 0) {
            continue;
        }
        http_text_put(b, "# HELP %s %s\n# TYPE %s %s\n%s ", f->name, f->help, f->name, f->type,
                      f->name);
        if (f->unit == HELD_NS) {
            http_text_put(b, "%" PRId64 ".%09" PRId64 "\n", v / 1000000000, v % 1000000000);
        } else {
            http_text_put(b, "%" PRId64 "\n", f->unit == HELD_DAY ? v * 86400 : v);
        }
    }
}

int64_t query_metrics_text(const struct query_metrics *m, char *dst, size_t dst_capacity)
{
    ASSERT(m != NULL);
    ASSERT(dst_capacity > 0);
    struct http_text b = {.dst = dst, .capacity = dst_capacity};
    http_text_put(&b,
                  "# HELP dayshard_events_ingested_total Events stored durably by this node.\n"
                  "# TYPE dayshard_events_ingested_total counter\n"
                  "dayshard_events_ingested_total %" PRIuFAST64 "\n",
                  atomic_load_explicit(&m->events_ingested, memory_order_relaxed));
    put_rejected(&b, m);
    put_lag(&b, m);
    put_fsync(&b, m);
    put_gsi_lag(&b, m);
    put_orders(&b, m);
    put_held(&b, m);
    return b.overflow ? -ENOSPC : (int64_t)b.len;
}
