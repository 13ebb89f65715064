/*
 * The query service's figures (http_private.h): /v1/partitions (each partition's totals and
 * its write rate between two observations of the service) and /metrics (the node's live
 * figures, the store's positions, the answers by class, heat, and per-shard series of the
 * most recent days), rendered from a reader's view.
 *
 * Write rates are observed, not measured by the writer: a direct-mapped table keyed by (day,
 * shard) keeps the last observation of each partition, so the memory is bounded whatever days
 * are asked about and a collision only restarts that partition's rate.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/serve_private.h"

/* ---- partition heat ------------------------------------------------------------------------ */

/* Records an observation of a partition's event count and returns its write rate (events/s
 * between the two latest observations at least SERVE_HEAT_INTERVAL_NS apart), or -1 when no
 * rate is known yet. */
static double heat_observe(struct query_http *h, int32_t day, uint32_t shard, uint64_t events,
                           uint64_t now_ns)
{
    uint64_t key = shard_fnv1a64(&day, sizeof(day)) ^ ((uint64_t)shard * 0x9e3779b97f4a7c15ull);
    struct heat_entry *e = &h->heat[key % SERVE_HEAT_ENTRIES];
    ASSERT(pthread_mutex_lock(&h->heat_lock) == 0);
    if (!e->used || e->day != day || e->shard != shard || events < e->events0) {
        *e = (struct heat_entry){
            .used = true, .day = day, .shard = shard, .t0_ns = now_ns, .events0 = events};
    } else if (now_ns - e->t0_ns >= SERVE_HEAT_INTERVAL_NS) {
        e->rate_per_s = (double)(events - e->events0) * 1e9 / (double)(now_ns - e->t0_ns);
        e->has_rate = true;
        e->t0_ns = now_ns;
        e->events0 = events;
    }
    double rate = e->has_rate ? e->rate_per_s : -1.0;
    ASSERT(pthread_mutex_unlock(&h->heat_lock) == 0);
    return rate;
}

static int put_partition(char *dst, size_t cap, int32_t day, uint32_t shard,
                         const struct storage_partition_total *t, double rate)
{
    char key[SHARD_KEY_TEXT_SIZE];
    char rate_text[32];
    shard_key_format(day, shard, key);
    if (rate < 0) {
        snprintf(rate_text, sizeof(rate_text), "null");
    } else {
        snprintf(rate_text, sizeof(rate_text), "%.1f", rate);
    }
    return snprintf(dst, cap,
                    "%s{\"shard\":%u,\"partition\":\"%s\",\"events\":%" PRIu64 ",\"bytes\":%" PRIu64
                    ",\"blocks\":%" PRIu64 ",\"write_rate_per_s\":%s}",
                    shard == 0 ? "" : ",", shard, key, t->count, t->bytes, t->blocks, rate_text);
}

/* Renders /v1/partitions for the reader's view. Returns the length or a negative code. */
static int64_t render_partitions(struct query_http *h, struct serve_reader *r, int32_t day,
                                 char *body, size_t cap)
{
    uint32_t shards = shard_map_get(r->map, day);
    char date[DS_DATE_TEXT_SIZE];
    ds_date_format(day, date);
    int n = snprintf(body, cap, "{\"day\":\"%s\",\"shards\":%u,\"partitions\":[", date, shards);
    size_t len = (size_t)n;
    uint64_t now_ns = ds_clock_ns();
    for (uint32_t shard = 0; shard < shards; shard++) {
        struct storage_partition_total t;
        int rc = storage_partition_totals(r->st, day, shard, NULL, 0, &t);
        if (rc != 0) {
            return rc;
        }
        double rate = heat_observe(h, day, shard, t.count, now_ns);
        n = put_partition(body + len, cap - len, day, shard, &t, rate);
        ASSERT(n > 0 && (size_t)n < cap - len);
        len += (size_t)n;
    }
    ASSERT(len + 3 < cap);
    memcpy(body + len, "]}", 3);
    return serve_append_claims(h, body, serve_append_as_of(body, len + 2, r), r);
}

enum http_result serve_partitions(struct query_http *h, struct http_request *c,
                                  const struct query_route *route)
{
    struct serve_reader *r = NULL;
    int rc = serve_reader_acquire(h, &r);
    if (rc != 0) {
        return serve_storage_error(c, rc);
    }
    size_t cap = 128u + (size_t)shard_map_get(r->map, route->day) * 192u + r->as_of_len +
                 SERVE_CLAIMS_BYTES_MAX;
    char *body = malloc(cap);
    int64_t len = body != NULL ? render_partitions(h, r, route->day, body, cap) : -ENOMEM;
    serve_reader_release(r);
    if (len < 0) {
        free(body);
        return len == -EAGAIN ? serve_respond_starting(c) : serve_storage_error(c, (int)len);
    }
    return http_respond_json(c, 200, body, len);
}

/* ---- /metrics ------------------------------------------------------------------------------ */

struct recent_days {
    uint32_t count;
    int32_t days[SERVE_METRICS_RECENT_DAYS];
    uint32_t shards[SERVE_METRICS_RECENT_DAYS];
};

static int keep_recent(int32_t day, uint32_t shard_count, void *user)
{
    struct recent_days *recent = user;
    if (recent->count == SERVE_METRICS_RECENT_DAYS) {
        memmove(recent->days, recent->days + 1, sizeof(recent->days[0]) * (recent->count - 1));
        memmove(recent->shards, recent->shards + 1,
                sizeof(recent->shards[0]) * (recent->count - 1));
        recent->count--;
    }
    recent->days[recent->count] = day;
    recent->shards[recent->count] = shard_count;
    recent->count++;
    return 0;
}

enum recent_series { SERIES_EVENTS = 0, SERIES_BYTES, SERIES_RATE, SERIES_COUNT };

/* One metric family over the recent days' shards (the exposition format wants each family's
 * samples together, so the partitions are visited once per family; their totals are cached). */
static int put_recent_series(struct query_http *h, struct serve_reader *r,
                             const struct recent_days *recent, enum recent_series series,
                             struct http_text *b)
{
    static const char *const names[SERIES_COUNT] = {
        "dayshard_partition_events", "dayshard_partition_bytes", "dayshard_partition_write_rate"};
    static const char *const help[SERIES_COUNT] = {
        "Events stored per shard of the most recent days.",
        "Bytes stored per shard of the most recent days.",
        "Events per second written per shard, between two observations of the service."};
    http_text_put(b, "# HELP %s %s\n# TYPE %s gauge\n", names[series], help[series], names[series]);
    uint64_t now_ns = ds_clock_ns();
    for (uint32_t i = 0; i < recent->count; i++) {
        char date[DS_DATE_TEXT_SIZE];
        ds_date_format(recent->days[i], date);
        for (uint32_t shard = 0; shard < recent->shards[i]; shard++) {
            struct storage_partition_total t;
            int rc = storage_partition_totals(r->st, recent->days[i], shard, NULL, 0, &t);
            if (rc != 0) {
                return rc;
            }
            double rate = series == SERIES_RATE
                              ? heat_observe(h, recent->days[i], shard, t.count, now_ns)
                              : 0.0;
            if (series == SERIES_EVENTS || series == SERIES_BYTES) {
                http_text_put(b, "%s{day=\"%s\",shard=\"%u\"} %" PRIu64 "\n", names[series], date,
                              shard, series == SERIES_EVENTS ? t.count : t.bytes);
            } else if (rate >= 0) {
                http_text_put(b, "%s{day=\"%s\",shard=\"%u\"} %.1f\n", names[series], date, shard,
                              rate);
            }
        }
    }
    return 0;
}

static int put_recent_partitions(struct query_http *h, struct serve_reader *r, struct http_text *b)
{
    struct recent_days recent = {0};
    (void)shard_map_visit(r->map, keep_recent, &recent);
    for (uint32_t series = 0; series < SERIES_COUNT; series++) {
        int rc = put_recent_series(h, r, &recent, (enum recent_series)series, b);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static void put_sources(struct serve_reader *r, struct http_text *b)
{
    http_text_put(b,
                  "# HELP dayshard_storage_commit_seq Sequence number of the last durable commit.\n"
                  "# TYPE dayshard_storage_commit_seq gauge\ndayshard_storage_commit_seq %" PRIu64
                  "\n"
                  "# HELP dayshard_source_next_offset Next source offset after the durable data.\n"
                  "# TYPE dayshard_source_next_offset gauge\n",
                  storage_commit_seq(r->st));
    for (int32_t p = DS_SOURCE_FILE; p < (int32_t)STORAGE_SOURCES_MAX - 2; p++) {
        int64_t next = storage_source_next(r->st, p);
        if (next < 0) {
            continue;
        }
        if (p == DS_SOURCE_FILE) {
            http_text_put(b, "dayshard_source_next_offset{partition=\"file\"} %" PRId64 "\n", next);
        } else {
            http_text_put(b, "dayshard_source_next_offset{partition=\"%" PRId32 "\"} %" PRId64 "\n",
                          p, next);
        }
    }
}

static void put_http_counters(struct query_http *h, struct http_text *b)
{
    static const char *const names[HTTP_CLASS_COUNT] = {"2xx", "4xx", "5xx"};
    http_text_put(b, "# HELP dayshard_http_requests_total HTTP answers by status class.\n"
                     "# TYPE dayshard_http_requests_total counter\n");
    for (uint32_t i = 0; i < HTTP_CLASS_COUNT; i++) {
        http_text_put(b, "dayshard_http_requests_total{code=\"%s\"} %" PRIu64 "\n", names[i],
                      http_server_answers(h->server, HTTP_TAG_ANY, (enum http_class)i));
    }
}

/* Renders /metrics into b. Returns 0, or a storage error. */
static int render_metrics(struct query_http *h, struct serve_reader *r, struct http_text *b,
                          struct shard_heat_report *heat)
{
    if (h->metrics != NULL) {
        int64_t n = query_metrics_text(h->metrics, b->dst, b->capacity);
        if (n < 0) {
            b->overflow = true;
            return 0;
        }
        b->len = (size_t)n;
    }
    put_sources(r, b);
    put_http_counters(h, b);
    serve_held_put(h, r, b);
    if (h->metrics != NULL && heat != NULL && query_metrics_heat_get(h->metrics, heat)) {
        heat_metrics_put(heat, b);
    }
    return put_recent_partitions(h, r, b);
}

enum http_result serve_metrics(struct query_http *h, struct http_request *c)
{
    struct serve_reader *r = NULL;
    int rc = serve_reader_acquire(h, &r);
    if (rc != 0) {
        return serve_storage_error(c, rc);
    }
    struct http_text b = {.capacity = 64u * 1024};
    /* Without a node there is no heat to copy. */
    struct shard_heat_report *heat = h->metrics != NULL ? malloc(sizeof(*heat)) : NULL;
    for (;;) { /* doubles the buffer until the text fits, at most SERVE_METRICS_BYTES_MAX */
        b.dst = malloc(b.capacity);
        b.len = 0;
        b.overflow = false;
        rc = b.dst != NULL ? render_metrics(h, r, &b, heat) : -ENOMEM;
        if (rc != 0 || !b.overflow || b.capacity >= SERVE_METRICS_BYTES_MAX) {
            break;
        }
        free(b.dst);
        b.capacity *= 2;
    }
    serve_reader_release(r);
    free(heat);
    if (rc != 0 || b.overflow) {
        free(b.dst);
        return serve_storage_error(c, rc != 0 ? rc : -ENOSPC);
    }
    return http_respond(c, 200, b.dst, b.len, "text/plain; version=0.0.4");
}
