/*
 * Restoring quarantined ranges from the topic (ingest.h, ingest_restore_run): for each range
 * fsck --repair quarantined, read its source offsets again with a consumer assigned to exactly
 * those partitions and offsets (no group, no commit), keep the events the range lost, and
 * append them through storage_append on a writer handle, as a node does; then mark the range.
 *
 * Which events a range lost: in the orders model, every event of the range whose order the
 * repair reverted or lost (storage_restore_orders_want), in offset order, applied by the
 * model's rules; no other order's current version was in the range. In the events model, the
 * events the node routed to the range's (day, shard) within its offsets: when the range came
 * from one Kafka partition these are exactly its events, since one partition's events reach a
 * (day, shard) in offset order. When they are more than the record's event count (a range from
 * several partitions, whose offsets interleave with other blocks'), those the partition still
 * holds are taken away, by content (restore_select.h); when what is left is still more than the
 * range had (events with equal content), which were in it is unknown and none is appended: the
 * range's events are reported lost, never counted twice. Fewer (the topic no longer holds
 * some) are appended and the rest reported lost.
 *
 * Offsets are read up to the storage's committed position of the partition only: later ones
 * were never stored, and the node reads them anyway. An offset the topic no longer gives back
 * (below the low watermark, compacted away, a transaction marker) is counted missing.
 *
 * Rejected: reading all of a range's events into storage without the filter above, and
 * relying on the orders model's rules to drop what is already there: an event without a
 * version is applied whenever its content differs, so an old one would revert its order.
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"
#include "ingest/kafka_conf.h"
#include "ingest/restore_select.h"
#include "shard/shard.h"

#define RESTORE_POLL_MS 200
#define RESTORE_METADATA_TIMEOUT_MS 5000
/* Payload bytes of one range's events held between reading and appending: a block holds at most
 * tens of thousands of events of ~300 bytes; a range from many partitions more. */
#define RESTORE_HELD_BYTES_MAX (1ull << 30)

struct held_event {
    uint32_t range; /* index of the range it was read for */
    int32_t partition;
    int64_t offset;
    uint64_t at; /* payload's first byte in the arena */
    uint32_t len;
};

struct restore {
    const struct ingest_restore_config *cfg;
    struct storage *st;
    struct shard_map *map;
    struct storage_restore_orders *orders;
    struct ingest_decoder *decoder;
    rd_kafka_t *rk;
    bool orders_model;
    /* the range being restored */
    struct held_event *held;
    uint64_t held_count, held_capacity;
    char *arena;
    uint64_t arena_bytes, arena_capacity;
    struct storage_restore_range *ranges; /* of DIR, sorted by name */
    uint32_t range_count;
    struct storage_restore_tally *tallies; /* one per range */
    uint32_t range_index;                  /* the range being read */
    struct storage_restore_tally *tally;   /* its tally */
};

/* ---- the consumer ------------------------------------------------------------------------ */

static int consumer_create(struct restore *r)
{
    /* After the user's properties: assigned, never a member of a group, never committing. */
    static const struct kafka_conf_pair fixed[] = {{"group.id", "dayshard-restore"},
                                                   {"client.id", "dayshard-restore"},
                                                   {"enable.auto.commit", "false"},
                                                   {"enable.auto.offset.store", "false"},
                                                   {"enable.partition.eof", "true"}};
    const struct kafka_conf_spec spec = {.brokers = r->cfg->brokers,
                                         .props = r->cfg->props,
                                         .fixed = fixed,
                                         .fixed_count = DS_ARRAY_LEN(fixed),
                                         .what = "the restore consumer"};
    int rc = kafka_conf_consumer(&spec, &r->rk);
    if (rc != 0) {
        return rc;
    }
    rd_kafka_poll_set_consumer(r->rk);
    return 0;
}

/* Partitions of the topic (0 when it does not exist), for a range from several. */
static int topic_partitions(struct restore *r, int32_t *count)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(r->rk, r->cfg->topic, NULL);
    if (t == NULL) {
        return -DS_EKAFKA;
    }
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(r->rk, 0, t, &md, RESTORE_METADATA_TIMEOUT_MS);
    rd_kafka_topic_destroy(t);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_error("kafka: topic %s: metadata: %s", r->cfg->topic, rd_kafka_err2str(err));
        return -DS_EKAFKA;
    }
    *count = md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR
                 ? md->topics[0].partition_cnt
                 : 0;
    rd_kafka_metadata_destroy(md);
    return 0;
}

/* ---- holding a range's events ------------------------------------------------------------ */

static int hold(struct restore *r, const rd_kafka_message_t *m)
{
    if (r->held_count == r->held_capacity) {
        uint64_t capacity = r->held_capacity == 0 ? 4096 : r->held_capacity * 2;
        void *v = realloc(r->held, capacity * sizeof(*r->held));
        if (v == NULL) {
            return -ENOMEM;
        }
        r->held = v;
        r->held_capacity = capacity;
    }
    if (r->arena_bytes + m->len > r->arena_capacity) {
        uint64_t capacity = r->arena_capacity == 0 ? (1u << 20) : r->arena_capacity;
        while (capacity < r->arena_bytes + m->len) {
            capacity *= 2;
        }
        if (capacity > RESTORE_HELD_BYTES_MAX) {
            ds_log_error("restore: a range's events pass %llu bytes",
                         (unsigned long long)RESTORE_HELD_BYTES_MAX);
            return -DS_ELIMIT;
        }
        void *a = realloc(r->arena, capacity);
        if (a == NULL) {
            return -ENOMEM;
        }
        r->arena = a;
        r->arena_capacity = capacity;
    }
    memcpy(r->arena + r->arena_bytes, m->payload, m->len);
    r->held[r->held_count++] = (struct held_event){.range = r->range_index,
                                                   .partition = m->partition,
                                                   .offset = m->offset,
                                                   .at = r->arena_bytes,
                                                   .len = (uint32_t)m->len};
    r->arena_bytes += m->len;
    return 0;
}

/* Whether the range lost this message's event (file comment). */
static int wanted(struct restore *r, const struct storage_restore_range *range,
                  const rd_kafka_message_t *m, bool *want)
{
    struct ds_event event;
    struct ingest_error error;
    *want = false;
    if (m->payload == NULL ||
        ingest_decoder_decode(r->decoder, m->payload, m->len, &event, &error) != 0) {
        return 0; /* a dead letter: never stored */
    }
    if (r->orders_model) {
        *want = storage_restore_orders_want(r->orders, &event);
        return 0;
    }
    int32_t day = 0;
    uint32_t shard = 0;
    int rc = ingest_route(r->map, &event, &day, &shard);
    *want = rc == 0 && day == range->day && shard == range->shard;
    return rc;
}

/* Reads offsets [from, to] of partition p, holding the wanted events. */
static int read_partition(struct restore *r, const struct storage_restore_range *range, int32_t p,
                          int64_t from, int64_t to)
{
    int64_t low = 0;
    int64_t high = 0;
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(r->rk, r->cfg->topic, p, &low, &high,
                                                               RESTORE_METADATA_TIMEOUT_MS);
    if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        low = high = 0; /* the topic or partition is gone: every offset is missing */
    } else if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_error("kafka: %s [%d]: watermarks: %s", r->cfg->topic, p, rd_kafka_err2str(err));
        return -DS_EKAFKA;
    }
    int64_t start = from > low ? from : low;
    int64_t end = to < high - 1 ? to : high - 1;
    if (start > end) {
        r->tally->offsets_missing += (uint64_t)(to - from + 1);
        return 0;
    }
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, r->cfg->topic, p)->offset = start;
    err = rd_kafka_assign(r->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_error("kafka: %s [%d]: assign: %s", r->cfg->topic, p, rd_kafka_err2str(err));
        return -DS_EKAFKA;
    }
    uint64_t got = 0;
    uint64_t idle_ms = 0;
    int rc = 0;
    int64_t next = start;
    while (rc == 0 && next <= end) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(r->rk, RESTORE_POLL_MS);
        if (m == NULL) {
            idle_ms += RESTORE_POLL_MS;
            if (idle_ms >= r->cfg->timeout_ms) {
                ds_log_error("kafka: %s [%d]: nothing read for %u ms at offset %lld", r->cfg->topic,
                             p, r->cfg->timeout_ms, (long long)next);
                rc = -DS_EKAFKA;
            }
            continue;
        }
        idle_ms = 0;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && m->partition == p) {
            next = end + 1; /* the end of what the topic holds */
        } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            ds_log_warn("kafka: restore: %s", rd_kafka_message_errstr(m));
        } else if (m->partition == p && m->offset >= next && m->offset <= end) {
            bool want = false;
            got++;
            next = m->offset + 1;
            rc = wanted(r, range, m, &want);
            rc = rc == 0 && want ? hold(r, m) : rc;
        } else if (m->partition == p && m->offset > end) {
            next = end + 1;
        }
        rd_kafka_message_destroy(m);
    }
    (void)rd_kafka_assign(r->rk, NULL);
    r->tally->events_read += got;
    r->tally->offsets_missing += (uint64_t)(to - from + 1) - got;
    return rc;
}

/* Reads the range's offsets of every partition it may have come from. */
static int read_range(struct restore *r, const struct storage_restore_range *range)
{
    int32_t first = range->source_partition;
    int32_t last = range->source_partition;
    if (range->source_partition == STORAGE_RESTORE_SOURCE_MIXED) {
        int32_t count = 0;
        int rc = topic_partitions(r, &count);
        if (rc != 0) {
            return rc;
        }
        if (count == 0) {
            /* No such topic: nothing of the range can be read back. */
            r->tally->offsets_missing +=
                (uint64_t)(range->source_offset_max - range->source_offset_min + 1);
        }
        first = 0;
        last = count - 1;
    }
    for (int32_t p = first; p <= last; p++) {
        /* Only what this directory stored of p: its committed position bounds the range. */
        int64_t next = storage_source_next(r->st, p);
        int64_t to = range->source_offset_max < next - 1 ? range->source_offset_max : next - 1;
        if (next < 0 || to < range->source_offset_min) {
            continue;
        }
        int rc = read_partition(r, range, p, range->source_offset_min, to);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- applying ---------------------------------------------------------------------------- */

static int append_one(struct restore *r, const struct held_event *h)
{
    struct ds_event event;
    struct ingest_error error;
    int rc = ingest_decoder_decode(r->decoder, r->arena + h->at, h->len, &event, &error);
    ASSERT(rc == 0); /* it decoded when it was held */
    int32_t day = 0;
    uint32_t shard = 0;
    rc = ingest_route(r->map, &event, &day, &shard);
    if (rc != 0) {
        return rc;
    }
    struct ds_source source = {.partition = h->partition, .offset = h->offset};
    struct storage_order_stats before;
    storage_order_stats(r->st, &before);
    rc = storage_append(r->st, day, shard, &event, &source);
    if (rc == -EAGAIN) {
        rc = storage_commit(r->st);
        rc = rc == 0 ? storage_append(r->st, day, shard, &event, &source) : rc;
    }
    if (rc == -ERANGE) {
        return 0; /* its day was dropped by retention since: nothing to restore */
    }
    if (rc == 0) {
        /* Stored, not merely taken: in the orders model a stale or unchanged event is not. */
        struct storage_order_stats after;
        storage_order_stats(r->st, &after);
        bool stored =
            !r->orders_model || after.created + after.applied > before.created + before.applied;
        r->tallies[h->range].events_applied += stored ? 1 : 0;
    }
    return rc;
}

static int held_compare(const void *a, const void *b)
{
    const struct held_event *x = a;
    const struct held_event *y = b;
    if (x->partition != y->partition) {
        return x->partition < y->partition ? -1 : 1;
    }
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

struct present {
    struct restore_key *keys;
    uint64_t count;
};

static int present_take(const struct ds_event *event, void *user)
{
    struct present *p = user;
    (void)restore_select_take(p->keys, p->count, restore_select_hash(event));
    return 0;
}

/* Events model, more held events than the range had: keeps those the partition does not hold
 * (restore_select.h), in read order. */
static int held_subtract_present(struct restore *r, const struct storage_restore_range *range)
{
    struct restore_key *keys = calloc(r->held_count, sizeof(*keys));
    if (keys == NULL) {
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < r->held_count; i++) {
        struct ds_event event;
        struct ingest_error error;
        const struct held_event *h = &r->held[i];
        int rc = ingest_decoder_decode(r->decoder, r->arena + h->at, h->len, &event, &error);
        ASSERT(rc == 0); /* it decoded when it was held */
        keys[i] = (struct restore_key){.hash = restore_select_hash(&event), .index = i};
    }
    restore_select_sort(keys, r->held_count);
    struct present p = {.keys = keys, .count = r->held_count};
    int rc = storage_partition_scan(r->st, range->day, range->shard, present_take, &p);
    if (rc == 0) {
        bool *gone = calloc(r->held_count, sizeof(*gone));
        rc = gone != NULL ? 0 : -ENOMEM;
        for (uint64_t i = 0; rc == 0 && i < r->held_count; i++) {
            gone[keys[i].index] = !keys[i].taken;
        }
        uint64_t kept = 0;
        for (uint64_t i = 0; rc == 0 && i < r->held_count; i++) {
            if (gone[i]) {
                r->held[kept++] = r->held[i];
            }
        }
        r->held_count = rc == 0 ? kept : r->held_count;
        free(gone);
    }
    free(keys);
    return rc;
}

/* How many held events to append (*n; events model: the count check of the file comment). */
static int events_to_apply(struct restore *r, const struct storage_restore_range *range,
                           uint64_t *n)
{
    *n = r->held_count;
    if (r->orders_model || !range->events_known || r->held_count <= range->events) {
        return 0;
    }
    uint64_t read = r->held_count;
    int rc = held_subtract_present(r, range);
    if (rc != 0) {
        return rc;
    }
    ds_log_info("restore %s: %llu events of its day and shard in its offsets, %llu of them not "
                "in the partition any more, %llu in the range",
                range->name, (unsigned long long)read, (unsigned long long)r->held_count,
                (unsigned long long)range->events);
    *n = r->held_count <= range->events ? r->held_count : 0;
    return 0;
}

/* Appends the first n held events, then commits. */
static int append_held(struct restore *r, uint64_t n)
{
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        rc = append_one(r, &r->held[i]);
    }
    return rc == 0 ? storage_commit(r->st) : rc;
}

static void held_clear(struct restore *r)
{
    r->held_count = 0;
    r->arena_bytes = 0;
}

/* Reads ranges[i] (its tally reset), holding the events it lost. */
static int read_one(struct restore *r, uint32_t i)
{
    r->range_index = i;
    r->tally = &r->tallies[i];
    *r->tally = (struct storage_restore_tally){0};
    int rc = r->rk == NULL ? consumer_create(r) : 0;
    return rc == 0 ? read_range(r, &r->ranges[i]) : rc;
}

static void report_range(struct ingest_restore_report *out,
                         const struct storage_restore_range *range,
                         const struct storage_restore_tally *t)
{
    out->ranges_restored++;
    out->events_read += t->events_read;
    out->events_applied += t->events_applied;
    out->offsets_missing += t->offsets_missing;
    out->events_lost += t->events_lost;
    ds_log_info("restore %s: %llu events read, %llu applied, %llu offsets missing", range->name,
                (unsigned long long)t->events_read, (unsigned long long)t->events_applied,
                (unsigned long long)t->offsets_missing);
}

/* Whether the range has Kafka offsets to read. */
static bool readable(const struct storage_restore_range *range)
{
    return range->source_partition >= 0 || range->source_partition == STORAGE_RESTORE_SOURCE_MIXED;
}

/* Events model, one range (not done): its events are its own (day, shard)'s, so ranges are
 * restored one by one, each in one commit. */
static int restore_events_range(struct restore *r, uint32_t i, struct ingest_restore_report *out)
{
    const struct storage_restore_range *range = &r->ranges[i];
    if (range->state == STORAGE_RESTORE_STARTED && storage_commit_seq(r->st) > range->started_seq) {
        /* The commit of an interrupted restore landed: appending again would count twice. */
        struct storage_restore_tally none = {0};
        out->ranges_done_before++;
        return storage_restore_mark(r->cfg->data_dir, range, STORAGE_RESTORE_DONE, 0, &none);
    }
    held_clear(r);
    int rc = read_one(r, i);
    rc = rc == 0 ? storage_restore_mark(r->cfg->data_dir, range, STORAGE_RESTORE_STARTED,
                                        storage_commit_seq(r->st), NULL)
                 : rc;
    if (rc == 0 && r->held_count > 0) {
        qsort(r->held, r->held_count, sizeof(*r->held), held_compare);
    }
    uint64_t n = 0;
    rc = rc == 0 ? events_to_apply(r, range, &n) : rc;
    rc = rc == 0 ? append_held(r, n) : rc;
    if (rc != 0) {
        return rc;
    }
    struct storage_restore_tally *t = &r->tallies[i];
    if (range->events_known && t->events_applied < range->events) {
        t->events_lost = range->events - t->events_applied;
    }
    if (n < r->held_count) {
        ds_log_warn("restore %s: %llu events of its day and shard in its offsets are not in the "
                    "partition, more than its %llu: which were in it is unknown, none restored",
                    range->name, (unsigned long long)r->held_count,
                    (unsigned long long)range->events);
    }
    rc = storage_restore_mark(r->cfg->data_dir, range, STORAGE_RESTORE_DONE, 0, t);
    if (rc == 0) {
        report_range(out, range, t);
    }
    return rc;
}

static int restore_events_model(struct restore *r, struct ingest_restore_report *out,
                                bool *all_done)
{
    for (uint32_t i = 0; i < r->range_count; i++) {
        const struct storage_restore_range *range = &r->ranges[i];
        if (range->state == STORAGE_RESTORE_DONE) {
            out->ranges_done_before++;
        } else if (!readable(range)) {
            out->ranges_unrestorable++; /* no Kafka offsets recorded: nothing to read */
            out->events_lost += range->events;
        } else {
            int rc = restore_events_range(r, i, out);
            if (rc != 0) {
                *all_done = false;
                ds_log_error("restore %s: %s", range->name, ds_strerror(rc));
                return rc;
            }
        }
    }
    return 0;
}

/* Drops the second of two held events of one offset (ranges from several partitions may span
 * the same offsets); held is sorted. */
static void held_unique(struct restore *r)
{
    uint64_t kept = 0;
    for (uint64_t i = 0; i < r->held_count; i++) {
        if (kept == 0 || held_compare(&r->held[kept - 1], &r->held[i]) != 0) {
            r->held[kept++] = r->held[i];
        }
    }
    r->held_count = kept;
}

/* Orders model: drops the held events of orders whose last one read back the store holds
 * already (storage_restore_orders_last: a restore that ran before). held is sorted. */
static int held_drop_settled(struct restore *r)
{
    int rc = 0;
    for (uint64_t i = r->held_count; rc == 0 && i > 0; i--) {
        struct ds_event event;
        struct ingest_error error;
        const struct held_event *h = &r->held[i - 1];
        rc = ingest_decoder_decode(r->decoder, r->arena + h->at, h->len, &event, &error);
        ASSERT(rc == 0); /* it decoded when it was held */
        rc = storage_restore_orders_last(r->orders, r->st, &event);
    }
    uint64_t kept = 0;
    for (uint64_t i = 0; rc == 0 && i < r->held_count; i++) {
        struct ds_event event;
        struct ingest_error error;
        const struct held_event *h = &r->held[i];
        rc = ingest_decoder_decode(r->decoder, r->arena + h->at, h->len, &event, &error);
        ASSERT(rc == 0);
        if (storage_restore_orders_want(r->orders, &event)) {
            r->held[kept++] = *h;
        }
    }
    r->held_count = rc == 0 ? kept : r->held_count;
    return rc;
}

/* Orders model: an order's events may lie in several ranges, and versions without a number
 * apply in arrival order; so every range is read (those done before too, when orders wait),
 * and the events of all are appended together in (partition, offset) order, in commits the
 * model's rules make idempotent. */
static int restore_orders_model(struct restore *r, struct ingest_restore_report *out,
                                bool *all_done)
{
    bool wanted_any = storage_restore_orders_count(r->orders) > 0;
    held_clear(r);
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < r->range_count; i++) {
        const struct storage_restore_range *range = &r->ranges[i];
        if (readable(range) && wanted_any) {
            rc = read_one(r, i);
        }
        if (rc == 0 && range->state != STORAGE_RESTORE_DONE && readable(range)) {
            rc = storage_restore_mark(r->cfg->data_dir, range, STORAGE_RESTORE_STARTED,
                                      storage_commit_seq(r->st), NULL);
        }
    }
    if (rc == 0 && r->held_count > 0) {
        qsort(r->held, r->held_count, sizeof(*r->held), held_compare);
        held_unique(r);
    }
    rc = rc == 0 ? held_drop_settled(r) : rc;
    rc = rc == 0 ? append_held(r, r->held_count) : rc;
    for (uint32_t i = 0; rc == 0 && i < r->range_count; i++) {
        const struct storage_restore_range *range = &r->ranges[i];
        if (range->state == STORAGE_RESTORE_DONE) {
            out->ranges_done_before++;
        } else if (!readable(range)) {
            out->ranges_unrestorable++;
        } else {
            rc = storage_restore_mark(r->cfg->data_dir, range, STORAGE_RESTORE_DONE, 0,
                                      &r->tallies[i]);
            if (rc == 0) {
                report_range(out, range, &r->tallies[i]);
            }
        }
    }
    if (rc != 0) {
        *all_done = false;
        ds_log_error("restore: %s", ds_strerror(rc));
    }
    return rc;
}

/* The ranges of committed data, into r->ranges. */
static int ranges_load(struct restore *r)
{
    r->ranges = calloc(STORAGE_QUARANTINE_MAX, sizeof(*r->ranges));
    r->tallies = calloc(STORAGE_QUARANTINE_MAX, sizeof(*r->tallies));
    if (r->ranges == NULL || r->tallies == NULL) {
        return -ENOMEM;
    }
    uint32_t count = 0;
    int rc = storage_restore_ranges(r->cfg->data_dir, r->ranges, STORAGE_QUARANTINE_MAX, &count);
    if (rc != 0) {
        return rc;
    }
    for (uint32_t i = 0; i < count; i++) {
        if (r->ranges[i].committed) {
            /* the others were never acknowledged: the node reads those offsets again itself */
            r->ranges[r->range_count++] = r->ranges[i];
        }
    }
    return 0;
}

static int restore_all(struct restore *r, struct ingest_restore_report *out)
{
    int rc = ranges_load(r);
    if (rc != 0) {
        return rc;
    }
    out->ranges = r->range_count;
    bool all_done = true;
    rc = r->orders_model ? restore_orders_model(r, out, &all_done)
                         : restore_events_model(r, out, &all_done);
    if (rc == 0 && r->orders_model) {
        rc = storage_restore_orders_finish(r->st, r->orders, all_done, ds_clock_realtime_ms(),
                                           &out->orders);
    }
    return rc;
}

void ingest_restore_config_defaults(struct ingest_restore_config *cfg)
{
    *cfg = (struct ingest_restore_config){.base_shards = 4, .timeout_ms = 30000};
}

int ingest_restore_run(const struct ingest_restore_config *cfg, struct ingest_restore_report *out)
{
    ASSERT(cfg->data_dir != NULL && cfg->brokers != NULL && cfg->topic != NULL);
    ASSERT(cfg->timeout_ms > 0);
    struct restore r = {.cfg = cfg};
    struct ingest_restore_report report = {0};
    struct storage_config scfg;
    storage_config_defaults(&scfg);
    scfg.dir = cfg->data_dir;
    int rc = storage_open(&scfg, &r.st);
    rc = rc == 0 ? shard_map_open(cfg->data_dir, cfg->base_shards, 0, &r.map) : rc;
    rc = rc == 0 ? storage_restore_orders_load(r.st, &r.orders) : rc;
    r.decoder = rc == 0 ? malloc(sizeof(*r.decoder)) : NULL;
    rc = rc == 0 && r.decoder == NULL ? -ENOMEM : rc;
    if (rc == 0) {
        r.orders_model = storage_model(r.st) == STORAGE_MODEL_ORDERS;
        rc = restore_all(&r, &report);
    }
    if (r.rk != NULL) {
        (void)rd_kafka_consumer_close(r.rk);
        rd_kafka_destroy(r.rk);
    }
    free(r.held);
    free(r.arena);
    free(r.ranges);
    free(r.tallies);
    free(r.decoder);
    storage_restore_orders_destroy(r.orders);
    shard_map_close(r.map);
    storage_close(r.st);
    if (rc != 0) {
        return rc;
    }
    *out = report;
    return 0;
}
