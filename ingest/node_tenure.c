/*
 * A node's tenures in the events model (node_tenure.h).
 *
 * Why: in the events model a partition's new owner starts at the offset Kafka holds for it,
 * and the old owner keeps what it stored. When the old owner stored past that offset (frozen
 * past session.timeout.ms with events read, or killed between a storage commit and the offset
 * commit after it), the range is on two disks and a count through the router sums it twice.
 * Each holder therefore records where it started (the history in the group's offset metadata,
 * written through the generation-fenced group commit, so a member that lost its generation
 * cannot overwrite it), and a node that finds a later holder's start below its own stored end
 * gives its events from that start on up (storage_release_range) before it reads anything.
 *
 * The history entry is committed before the partition is read: a holder that read without
 * an entry could be followed by one that never learns where it started, and the range between
 * would stay on two disks. A partition whose entry the group refused (a rebalance began) is
 * read only once a retry is accepted.
 *
 * The claims (the start of the latest run of each partition, DIR/TENURES) go to the query
 * service through the watch: a router sees two members whose runs overlap and answers 503 (or
 * fails over) until the release commits, instead of a sum that counts the overlap twice.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/kafka_conf.h"
#include "ingest/node_tenure.h"
#include "ingest/node_watch.h"

struct node_tenure {
    char dir[DS_PATH_MAX];
    struct ingest_node_watch *watch;
    uint64_t id;
    struct tenure_runs runs; /* consumer thread */
    /* under lock: read by the writer thread's commits */
    pthread_mutex_t lock;
    bool recorded[INGEST_NODE_PARTITIONS_MAX];
    uint32_t meta_len[INGEST_NODE_PARTITIONS_MAX];
    char meta[INGEST_NODE_PARTITIONS_MAX][TENURE_TEXT_BYTES_MAX];
    /* consumer thread */
    bool settled[INGEST_NODE_PARTITIONS_MAX];
};

static bool partition_ok(int32_t p)
{
    return p >= 0 && p < (int32_t)INGEST_NODE_PARTITIONS_MAX;
}

int node_tenure_open(const char *dir, struct ingest_node_watch *watch, struct node_tenure **out)
{
    struct node_tenure *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    int len = snprintf(t->dir, sizeof(t->dir), "%s", dir);
    ASSERT(len > 0 && (size_t)len < sizeof(t->dir));
    t->watch = watch;
    int rc = tenure_node_id_load(dir, &t->id);
    rc = rc == 0 ? tenure_runs_load(dir, &t->runs) : rc;
    if (rc != 0) {
        free(t);
        return rc;
    }
    ASSERT(pthread_mutex_init(&t->lock, NULL) == 0);
    node_watch_claims_enable(watch);
    for (int32_t p = 0; p < (int32_t)INGEST_NODE_PARTITIONS_MAX; p++) {
        int64_t from = -1;
        if (tenure_runs_get(&t->runs, (uint32_t)p, &from)) {
            node_watch_claim(watch, p, from);
        }
    }
    ds_log_info("kafka: node id %016" PRIx64 " (%s/NODE_ID)", t->id, dir);
    *out = t;
    return 0;
}

void node_tenure_close(struct node_tenure *t)
{
    if (t == NULL) {
        return;
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

bool node_tenure_commit_meta(struct node_tenure *t, int32_t p, rd_kafka_topic_partition_t *tp)
{
    if (!partition_ok(p)) {
        return false;
    }
    ASSERT(pthread_mutex_lock(&t->lock) == 0);
    bool ok = t->recorded[p];
    char *copy = ok ? malloc(t->meta_len[p]) : NULL;
    if (copy != NULL) {
        memcpy(copy, t->meta[p], t->meta_len[p]);
        tp->metadata = copy;
        tp->metadata_size = t->meta_len[p];
    }
    ASSERT(pthread_mutex_unlock(&t->lock) == 0);
    return copy != NULL;
}

int node_tenure_read(struct node_tenure *t, rd_kafka_t *rk, const char *topic, const int32_t *parts,
                     uint32_t count, int timeout_ms, struct tenure_history *out)
{
    (void)t;
    memset(out, 0, count * sizeof(*out));
    if (count == 0) {
        return 0;
    }
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)count);
    for (uint32_t i = 0; i < count; i++) {
        rd_kafka_topic_partition_list_add(list, topic, parts[i]);
    }
    rd_kafka_resp_err_t err = rd_kafka_committed(rk, list, timeout_ms);
    int rc = 0;
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_warn("kafka: reading the partitions' holders: %s", rd_kafka_err2str(err));
        rc = err == RD_KAFKA_RESP_ERR__TIMED_OUT ? -ETIMEDOUT : -DS_EKAFKA;
    }
    for (int i = 0; rc == 0 && i < list->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &list->elems[i];
        const char *reason = NULL;
        if (tp->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            ds_log_warn("kafka: reading the holders of %s[%" PRId32 "]: %s", topic, tp->partition,
                        rd_kafka_err2str(tp->err));
        } else if (tenure_parse(tp->metadata, tp->metadata_size, &out[i], &reason) != 0) {
            ds_log_warn("kafka: %s[%" PRId32 "]: the committed offset's metadata is not a "
                        "holder history (%s): taken as none",
                        topic, tp->partition, reason);
        }
    }
    rd_kafka_topic_partition_list_destroy(list);
    return rc;
}

bool node_tenure_release_point(const struct node_tenure *t, const struct tenure_history *h,
                               int64_t next, int64_t *lo)
{
    return tenure_release_point(h, t->id, next, lo);
}

/* Saves the runs; a failure is logged by tenure_runs_save and costs only the claim's accuracy
 * after a restart (the run starts on disk stay the previous ones), so the node goes on. */
static void runs_save(struct node_tenure *t)
{
    int rc = tenure_runs_save(t->dir, &t->runs);
    if (rc != 0) {
        ds_log_warn("kafka: %s/TENURES not saved (%s): a router may see this node's runs as "
                    "they were before",
                    t->dir, ds_strerror(rc));
    }
}

void node_tenure_released(struct node_tenure *t, int32_t p, int64_t lo)
{
    if (!partition_ok(p)) {
        return;
    }
    int64_t from = -1;
    if (tenure_runs_get(&t->runs, (uint32_t)p, &from) && lo < from) {
        tenure_runs_lower(&t->runs, (uint32_t)p, lo);
        runs_save(t);
        node_watch_claim(t->watch, p, lo);
    }
}

uint64_t node_tenure_id(const struct node_tenure *t)
{
    return t->id;
}

uint32_t node_tenure_record(struct node_tenure *t, rd_kafka_t *rk, const char *topic,
                            const int32_t *parts, const int64_t *start, const bool *continues,
                            const struct tenure_history *h, uint32_t count, int timeout_ms)
{
    if (count == 0) {
        return 0;
    }
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)count);
    char(*text)[TENURE_TEXT_BYTES_MAX] = malloc(count * sizeof(*text));
    int64_t *len = malloc(count * sizeof(*len));
    ASSERT(text != NULL && len != NULL); /* a few KiB at a rebalance */
    for (uint32_t i = 0; i < count; i++) {
        struct tenure_history mine = h[i];
        if (!continues[i]) {
            tenure_prepend(&mine, t->id, start[i]);
        }
        len[i] = tenure_format(&mine, text[i], TENURE_TEXT_BYTES_MAX);
        ASSERT(len[i] > 0);
        rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(list, topic, parts[i]);
        tp->offset = start[i];
        tp->metadata = malloc((size_t)len[i]);
        ASSERT(tp->metadata != NULL);
        memcpy(tp->metadata, text[i], (size_t)len[i]);
        tp->metadata_size = (size_t)len[i];
    }
    rd_kafka_resp_err_t err = kafka_commit_bounded(rk, list, timeout_ms);
    uint32_t recorded = 0;
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_warn("kafka: recording this node as the holder of %u partitions: %s (they are "
                    "read once a retry is accepted)",
                    count, rd_kafka_err2str(err));
    } else {
        for (uint32_t i = 0; i < count; i++) {
            ASSERT(pthread_mutex_lock(&t->lock) == 0);
            memcpy(t->meta[parts[i]], text[i], (size_t)len[i]);
            t->meta_len[parts[i]] = (uint32_t)len[i];
            t->recorded[parts[i]] = true;
            ASSERT(pthread_mutex_unlock(&t->lock) == 0);
            t->settled[parts[i]] = false;
            int64_t from = start[i];
            if (continues[i] && !tenure_runs_get(&t->runs, (uint32_t)parts[i], &from)) {
                from = h[i].entries[0].start; /* a run stored before runs were kept */
            }
            tenure_runs_set(&t->runs, (uint32_t)parts[i], from);
            node_watch_claim(t->watch, parts[i], from);
            ds_log_info("kafka: recorded as the holder of %s[%" PRId32 "] from offset %" PRId64
                        "%s",
                        topic, parts[i], start[i], continues[i] ? " (its run goes on)" : "");
            recorded++;
        }
        runs_save(t);
    }
    rd_kafka_topic_partition_list_destroy(list);
    free(text);
    free(len);
    return recorded;
}

bool node_tenure_recorded(const struct node_tenure *t, int32_t p)
{
    return partition_ok(p) && t->recorded[p]; /* written by this (the consumer) thread only */
}

void node_tenure_unassign(struct node_tenure *t, int32_t p)
{
    if (!partition_ok(p)) {
        return;
    }
    ASSERT(pthread_mutex_lock(&t->lock) == 0);
    t->recorded[p] = false;
    ASSERT(pthread_mutex_unlock(&t->lock) == 0);
    t->settled[p] = false;
}

void node_tenure_settle(struct node_tenure *t, int32_t p, bool settled)
{
    if (partition_ok(p)) {
        t->settled[p] = settled;
    }
}

bool node_tenure_settled(const struct node_tenure *t, int32_t p)
{
    return partition_ok(p) && t->settled[p];
}
