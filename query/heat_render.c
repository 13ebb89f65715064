/*
 * Heat as people and scrapers read it: the JSON of GET /v1/heat?top=N and the heat series of
 * /metrics, both rendered from a node's struct shard_heat_report (a copy taken under the
 * metrics' heat lock, so rendering holds no lock).
 *
 * /metrics carries only the top rows (HEAT_METRICS_TOP partitions and customers, the days of
 * the report), so the label set stays bounded however many keys are written; the exact totals
 * (events, throttled events, growths) are plain counters.
 *
 * Rejected: rendering from the tracker itself (it belongs to the consumer thread, which must
 * not take a lock per event; the once-a-second report is the price of that).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "query/serve_private.h"
#include "query/query.h"

/* Rows of each list in /metrics. */
#define HEAT_METRICS_TOP 10u
/* One partition row at its longest, and the fixed parts of the document. */
#define HEAT_PARTITION_ROW_BYTES 400u
#define HEAT_DAY_ROW_BYTES 200u
#define HEAT_SOURCE_ROW_BYTES 160u
#define HEAT_CUSTOMER_ROW_BYTES (6u * DS_ID_BYTES_MAX + 120u)
#define HEAT_GROWTH_ROW_BYTES (170u + 6u * SHARD_GROWTH_REASON_BYTES)
#define HEAT_FIXED_BYTES 1024u
/* Every text JSON-escaped at its longest (a byte as \u00XX) plus the keys. */
#define HEAT_ADVICE_ROW_BYTES                                                                      \
    (96u + 6u * (SHARD_ADVICE_SUBJECT_BYTES + 2u * SHARD_ADVICE_TEXT_BYTES))

size_t query_heat_json_bound(void)
{
    return HEAT_FIXED_BYTES + SHARD_HEAT_TOP_MAX * HEAT_PARTITION_ROW_BYTES +
           SHARD_HEAT_TOP_MAX * HEAT_DAY_ROW_BYTES +
           SHARD_HEAT_SOURCES_SNAPSHOT_MAX * HEAT_SOURCE_ROW_BYTES +
           SHARD_HEAT_TOP_MAX * HEAT_CUSTOMER_ROW_BYTES +
           SHARD_GROWTHS_KEPT * HEAT_GROWTH_ROW_BYTES + SHARD_ADVICE_MAX * HEAT_ADVICE_ROW_BYTES;
}

static double heat_share(uint64_t part, uint64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

static void heat_put_partitions(struct http_text *b, const struct shard_heat_report *r,
                                uint32_t top)
{
    const struct shard_heat_snapshot *s = &r->heat;
    http_text_put(b, ",\"partitions\":[");
    uint32_t rows = s->partition_count < top ? s->partition_count : top;
    for (uint32_t i = 0; i < rows; i++) {
        const struct shard_heat_partition_row *p = &s->partitions[i];
        char key[SHARD_KEY_TEXT_SIZE];
        char day[DS_DATE_TEXT_SIZE];
        shard_key_format(p->day, p->shard, key);
        ds_date_format(p->day, day);
        http_text_put(b,
                      "%s{\"key\":\"%s\",\"day\":\"%s\",\"shard\":%u,\"day_shards\":%u,"
                      "\"rate_now\":%" PRIu64 ",\"rate_avg\":%.1f,\"rate_peak\":%" PRIu64
                      ",\"events\":%" PRIu64 ",\"share\":%.4f,\"over_capacity_seconds\":%" PRIu64
                      ",\"would_throttle_events\":%" PRIu64 "}",
                      i > 0 ? "," : "", key, day, p->shard, r->partition_day_shards[i], p->rate_now,
                      (double)p->window_events / SHARD_HEAT_WINDOW_S, p->rate_peak, p->events,
                      heat_share(p->rate_now, s->rate_now), p->over_capacity_seconds,
                      p->would_throttle_events);
    }
    http_text_put(b, "]");
}

static void heat_put_days(struct http_text *b, const struct shard_heat_report *r, uint32_t top)
{
    const struct shard_heat_snapshot *s = &r->heat;
    http_text_put(b, ",\"days\":[");
    uint32_t rows = s->day_count < top ? s->day_count : top;
    for (uint32_t i = 0; i < rows; i++) {
        const struct shard_heat_day_row *d = &s->days[i];
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(d->day, day);
        http_text_put(b,
                      "%s{\"day\":\"%s\",\"shards\":%u,\"rate_now\":%" PRIu64 ",\"rate_avg\":%.1f,"
                      "\"rate_peak\":%" PRIu64 ",\"events\":%" PRIu64 ",\"share\":%.4f}",
                      i > 0 ? "," : "", day, r->day_shards[i], d->rate_now,
                      (double)d->window_events / SHARD_HEAT_WINDOW_S, d->rate_peak, d->events,
                      heat_share(d->rate_now, s->rate_now));
    }
    http_text_put(b, "]");
}

static void heat_put_sources(struct http_text *b, const struct shard_heat_report *r,
                             const struct query_metrics *m)
{
    const struct shard_heat_snapshot *s = &r->heat;
    http_text_put(b, ",\"kafka_partitions\":[");
    for (uint32_t i = 0; i < s->source_count; i++) {
        const struct shard_heat_source_row *k = &s->sources[i];
        int64_t lag = -1;
        if (m != NULL && k->partition >= 0 &&
            (uint32_t)k->partition < QUERY_METRICS_LAG_PARTITIONS_MAX) {
            lag = atomic_load_explicit(&m->consumer_lag[k->partition], memory_order_relaxed);
        }
        http_text_put(b,
                      "%s{\"partition\":%d,\"rate_now\":%" PRIu64 ",\"rate_peak\":%" PRIu64
                      ",\"events\":%" PRIu64 ",\"lag\":",
                      i > 0 ? "," : "", k->partition, k->rate_now, k->rate_peak, k->events);
        if (lag >= 0) {
            http_text_put(b, "%" PRId64 "}", lag);
        } else {
            http_text_put(b, "null}");
        }
    }
    http_text_put(b, "]");
}

static void heat_put_customers(struct http_text *b, const struct shard_heat_report *r, uint32_t top)
{
    const struct shard_heat_snapshot *s = &r->heat;
    http_text_put(b, ",\"customers\":[");
    uint32_t rows = s->customer_count < top ? s->customer_count : top;
    for (uint32_t i = 0; i < rows; i++) {
        const struct shard_heat_customer_row *c = &s->customers[i];
        char id[6u * DS_ID_BYTES_MAX + 3];
        int64_t n = query_id_json(&c->customer, id, sizeof(id));
        ASSERT(n > 0);
        double share = s->customer_rate_eps > 0 ? c->rate_eps / s->customer_rate_eps : 0.0;
        http_text_put(b,
                      "%s{\"customer_id\":%s,\"rate_eps\":%.1f,\"error_eps\":%.1f,\"share\":%.4f}",
                      i > 0 ? "," : "", id, c->rate_eps, c->error_eps, share > 1.0 ? 1.0 : share);
    }
    http_text_put(b, "]");
}

void heat_growth_json(struct http_text *b, const struct shard_growth *g, bool first)
{
    char day[DS_DATE_TEXT_SIZE];
    char at[DS_TS_TEXT_SIZE];
    char reason[6u * SHARD_GROWTH_REASON_BYTES + 3];
    ds_date_format(g->day, day);
    ds_ts_format(g->at_ms, at);
    int64_t n =
        http_json_string(g->reason, strnlen(g->reason, sizeof(g->reason)), reason, sizeof(reason));
    ASSERT(n > 0);
    http_text_put(
        b, "%s{\"t\":%" PRId64 ",\"day\":\"%s\",\"from\":%u,\"to\":%u,\"at\":\"%s\",\"reason\":%s}",
        first ? "" : ",", g->t, day, g->from, g->to, at, reason);
}

static void heat_put_growths(struct http_text *b, const struct shard_heat_report *r)
{
    http_text_put(b, ",\"growths\":[");
    for (uint32_t i = 0; i < r->growth_count; i++) {
        heat_growth_json(b, &r->growths[i], i == 0);
    }
    http_text_put(b, "]");
}

/* One advice text as a JSON string (",\"name\":\"...\""). */
static void heat_put_advice_text(struct http_text *b, const char *name, const char *text,
                                 size_t text_capacity)
{
    char json[6u * SHARD_ADVICE_TEXT_BYTES + 3];
    int64_t n = http_json_string(text, strnlen(text, text_capacity), json, sizeof(json));
    ASSERT(n > 0);
    http_text_put(b, ",\"%s\":%s", name, json);
}

/* "advice": the hot spots more shards cannot relieve (shard.h, "advice"); always present. */
static void heat_put_advice(struct http_text *b, const struct shard_heat_report *r)
{
    ASSERT(r->advice_count <= SHARD_ADVICE_MAX);
    http_text_put(b, ",\"advice\":[");
    for (uint32_t i = 0; i < r->advice_count; i++) {
        const struct shard_advice *a = &r->advice[i];
        http_text_put(b, "%s{\"case\":\"%s\"", i > 0 ? "," : "", shard_advice_case_name(a->kind));
        heat_put_advice_text(b, "subject", a->subject, sizeof(a->subject));
        heat_put_advice_text(b, "evidence", a->evidence, sizeof(a->evidence));
        heat_put_advice_text(b, "remedy", a->remedy, sizeof(a->remedy));
        http_text_put(b, "}");
    }
    http_text_put(b, "]");
}

int64_t query_heat_json(const struct shard_heat_report *r, const struct query_metrics *m,
                        uint32_t top, char *dst, size_t dst_capacity)
{
    ASSERT(r != NULL && dst != NULL);
    ASSERT(top >= 1 && top <= SHARD_HEAT_TOP_MAX);
    const struct shard_heat_snapshot *s = &r->heat;
    struct http_text b = {.dst = dst, .capacity = dst_capacity};
    http_text_put(&b, "{\"second\":");
    if (s->second > 0) {
        char at[DS_TS_TEXT_SIZE];
        ds_ts_format(s->second * 1000, at);
        at[19] = 'Z'; /* whole seconds: "YYYY-MM-DDTHH:MM:SSZ" */
        at[20] = '\0';
        http_text_put(&b, "\"%s\"", at);
    } else {
        http_text_put(&b, "null");
    }
    http_text_put(&b,
                  ",\"window_s\":%u,\"shard_capacity_eps\":%u,\"max_shards\":%u,\"base_shards\":%u,"
                  "\"adaptive\":%s,\"growth_failed\":%s,\"growths_total\":%" PRIu64
                  ",\"events\":%" PRIu64 ",\"rate_now\":%" PRIu64 ",\"untracked_events\":%" PRIu64
                  ",\"over_capacity_seconds\":%" PRIu64 ",\"would_throttle_events\":%" PRIu64,
                  SHARD_HEAT_WINDOW_S, s->capacity_eps, r->max_shards, r->base_shards,
                  r->adaptive ? "true" : "false", r->growth_failed ? "true" : "false",
                  r->growths_total, s->events, s->rate_now, s->untracked_events,
                  s->over_capacity_seconds, s->would_throttle_events);
    heat_put_partitions(&b, r, top);
    heat_put_days(&b, r, top);
    heat_put_sources(&b, r, m);
    heat_put_customers(&b, r, top);
    heat_put_growths(&b, r);
    heat_put_advice(&b, r);
    if (m != NULL) {
        http_text_put(&b, ",\"events_durable\":%" PRIuFAST64,
                      atomic_load_explicit(&m->events_ingested, memory_order_relaxed));
    }
    int64_t gsi_lag = m != NULL ? atomic_load_explicit(&m->gsi_lag_ms, memory_order_relaxed) : -1;
    if (gsi_lag >= 0) {
        http_text_put(&b, ",\"gsi_lag_ms\":%" PRId64 "}", gsi_lag);
    } else {
        http_text_put(&b, ",\"gsi_lag_ms\":null}");
    }
    return b.overflow ? -ENOSPC : (int64_t)b.len;
}

void heat_metrics_put(const struct shard_heat_report *r, struct http_text *b)
{
    const struct shard_heat_snapshot *s = &r->heat;
    http_text_put(
        b,
        "# HELP dayshard_heat_events_total Events the heat tracker observed (producer time).\n"
        "# TYPE dayshard_heat_events_total counter\n"
        "dayshard_heat_events_total %" PRIu64 "\n"
        "# HELP dayshard_heat_would_throttle_events_total Events past --shard-capacity in "
        "their partition-second: what a store with that per-partition limit would refuse.\n"
        "# TYPE dayshard_heat_would_throttle_events_total counter\n"
        "dayshard_heat_would_throttle_events_total %" PRIu64 "\n"
        "# HELP dayshard_shard_growths_total Shard count growths (adaptive sharding).\n"
        "# TYPE dayshard_shard_growths_total counter\n"
        "dayshard_shard_growths_total %" PRIu64 "\n"
        "# HELP dayshard_heat_partition_rate Events in the last complete second, hottest "
        "partitions only.\n"
        "# TYPE dayshard_heat_partition_rate gauge\n",
        s->events, s->would_throttle_events, r->growths_total);
    uint32_t rows = s->partition_count < HEAT_METRICS_TOP ? s->partition_count : HEAT_METRICS_TOP;
    for (uint32_t i = 0; i < rows; i++) {
        char key[SHARD_KEY_TEXT_SIZE];
        shard_key_format(s->partitions[i].day, s->partitions[i].shard, key);
        http_text_put(b, "dayshard_heat_partition_rate{key=\"%s\"} %" PRIu64 "\n", key,
                      s->partitions[i].rate_now);
    }
    http_text_put(b, "# HELP dayshard_day_shards Shard count of the hottest days.\n"
                     "# TYPE dayshard_day_shards gauge\n");
    rows = s->day_count < HEAT_METRICS_TOP ? s->day_count : HEAT_METRICS_TOP;
    for (uint32_t i = 0; i < rows; i++) {
        char day[DS_DATE_TEXT_SIZE];
        ds_date_format(s->days[i].day, day);
        http_text_put(b, "dayshard_day_shards{day=\"%s\"} %u\n", day, r->day_shards[i]);
    }
    http_text_put(b, "# HELP dayshard_heat_customer_rate Decayed write rate of the top customers "
                     "(Space-Saving estimate).\n"
                     "# TYPE dayshard_heat_customer_rate gauge\n");
    rows = s->customer_count < HEAT_METRICS_TOP ? s->customer_count : HEAT_METRICS_TOP;
    for (uint32_t i = 0; i < rows; i++) {
        const struct ds_id *id = &s->customers[i].customer;
        char label[2u * DS_ID_BYTES_MAX + 24];
        size_t len = 0;
        if (!id->is_string) {
            len = (size_t)snprintf(label, sizeof(label), "%" PRId64, id->value);
        } else {
            /* Label values escape backslash, quote and newline; other bytes go as they are. */
            for (uint8_t k = 0; k < id->len && len + 2 < sizeof(label); k++) {
                char c = id->text[k];
                if (c == '\\' || c == '"' || c == '\n') {
                    label[len++] = '\\';
                    c = c == '\n' ? 'n' : c;
                }
                label[len++] = c;
            }
            label[len] = '\0';
        }
        http_text_put(b, "dayshard_heat_customer_rate{customer=\"%s\"} %.1f\n", label,
                      s->customers[i].rate_eps);
    }
}
