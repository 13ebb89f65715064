/*
 * struct ingest_node_watch (ingest.h): what a running node is assigned and where the topic's
 * partitions end, for threads other than the node's (the query service's consistent=true).
 *
 * The consumer thread publishes a handle to ask the broker through (node_watch_attach/detach)
 * and each assignment change (node_watch_assign: the partitions and the offset each was started
 * from) under one mutex. A query copies the assignment under the mutex, then asks the broker for
 * each partition's high watermark without it (rd_kafka_query_watermark_offsets is thread-safe
 * and uses its own reply queue), so a slow broker never holds up a rebalance callback. The
 * handle stays valid while queries are in flight: detach stops new ones and waits for those
 * (each bounded by its request's timeout) before the node destroys the handle.
 *
 * The handle is the node's positions handle, which never fetches, not its consumer: a broker
 * answers the requests of one connection in order, so on the consumer's connection a watermark
 * query waits behind the fetch the broker holds open (fetch.wait.max.ms, 10 ms here, 500 ms by
 * librdkafka's default). Measured with bench/http_consistent.sh (4 partitions, idle node): a
 * consistent count took p50 42.7 ms / p99 186 ms through the consumer, 0.37 / 0.52 ms through
 * the positions handle.
 *
 * Every change bumps a generation, so a reader that waits on the answer can tell that the
 * assignment moved under it (a rebalance) and say so instead of answering for partitions the
 * node no longer reads. Between a revocation and the next assignment (eager rebalancing
 * revokes everything first) the node is not settled and queries answer -EAGAIN: an empty set
 * there would read as "nothing to wait for".
 *
 * Rejected: reading the assignment with rd_kafka_assignment from the query thread (it cannot
 * tell an empty assignment from a rebalance in progress, and it gives no start offsets), and
 * the watermarks librdkafka caches from fetches (rd_kafka_get_watermark_offsets: up to a fetch
 * old, so an event acknowledged just before the request could be missed; the guarantee needs
 * the broker's answer after the request arrived).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/node_watch.h"

struct ingest_node_watch {
    pthread_mutex_t lock;
    pthread_cond_t idle; /* users dropped to 0 */
    rd_kafka_t *rk;      /* NULL while the node does not consume */
    const char *topic;
    uint32_t users; /* queries using rk without the lock */
    bool settled;   /* an assignment is in effect (possibly empty), no revocation pending */
    uint64_t generation;
    int32_t end;                                    /* 1 + the highest partition ever assigned */
    bool assigned[INGEST_NODE_PARTITIONS_MAX];      /* under lock */
    int64_t start[INGEST_NODE_PARTITIONS_MAX];      /* the offset chosen at assignment, or -1 */
    bool claims_on;                                 /* the node reports claims (the events model) */
    int64_t claim_from[INGEST_NODE_PARTITIONS_MAX]; /* its latest run's start, or -1 */
};

int ingest_node_watch_create(struct ingest_node_watch **out)
{
    struct ingest_node_watch *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return -ENOMEM;
    }
    ASSERT(pthread_mutex_init(&w->lock, NULL) == 0);
    ASSERT(pthread_cond_init(&w->idle, NULL) == 0);
    for (uint32_t p = 0; p < INGEST_NODE_PARTITIONS_MAX; p++) {
        w->claim_from[p] = -1;
    }
    *out = w;
    return 0;
}

void ingest_node_watch_destroy(struct ingest_node_watch *w)
{
    if (w == NULL) {
        return;
    }
    ASSERT(w->rk == NULL); /* the node detached before returning */
    ASSERT(w->users == 0);
    pthread_cond_destroy(&w->idle);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

void node_watch_attach(struct ingest_node_watch *w, rd_kafka_t *rk, const char *topic)
{
    if (w == NULL) {
        return;
    }
    ASSERT(rk != NULL);
    ASSERT(topic != NULL);
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    ASSERT(w->rk == NULL);
    w->rk = rk;
    w->topic = topic;
    w->settled = false;
    w->generation++;
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
}

void node_watch_detach(struct ingest_node_watch *w)
{
    if (w == NULL) {
        return;
    }
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    w->rk = NULL;
    w->settled = false;
    w->generation++;
    memset(w->assigned, 0, sizeof(w->assigned));
    while (w->users > 0) { /* each user is bounded by its request's timeout */
        ASSERT(pthread_cond_wait(&w->idle, &w->lock) == 0);
    }
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
}

void node_watch_assign(struct ingest_node_watch *w, const rd_kafka_topic_partition_list_t *parts,
                       bool on)
{
    if (w == NULL) {
        return;
    }
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    for (int i = 0; i < parts->cnt; i++) {
        int32_t p = parts->elems[i].partition;
        if (p < 0 || p >= (int32_t)INGEST_NODE_PARTITIONS_MAX) {
            continue; /* the node refuses such a partition when a message comes from it */
        }
        w->assigned[p] = on;
        w->start[p] = on && parts->elems[i].offset >= 0 ? parts->elems[i].offset : -1;
        w->end = p >= w->end ? p + 1 : w->end;
    }
    w->settled = on;
    w->generation++;
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
}

void node_watch_claim(struct ingest_node_watch *w, int32_t partition, int64_t from)
{
    if (w == NULL) {
        return;
    }
    ASSERT(partition >= 0 && partition < (int32_t)INGEST_NODE_PARTITIONS_MAX);
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    w->claims_on = true;
    w->claim_from[partition] = from;
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
}

void node_watch_claims_enable(struct ingest_node_watch *w)
{
    if (w == NULL) {
        return;
    }
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    w->claims_on = true;
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
}

int ingest_node_watch_claims(struct ingest_node_watch *w, ingest_node_claim_fn fn, void *user)
{
    int64_t from[INGEST_NODE_PARTITIONS_MAX];
    bool open[INGEST_NODE_PARTITIONS_MAX];
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    bool on = w->claims_on;
    for (uint32_t p = 0; p < INGEST_NODE_PARTITIONS_MAX; p++) {
        from[p] = w->claim_from[p];
        open[p] = w->assigned[p];
    }
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
    if (!on) {
        return -ENOENT;
    }
    for (int32_t p = 0; p < (int32_t)INGEST_NODE_PARTITIONS_MAX; p++) {
        int rc = from[p] >= 0 ? fn(p, from[p], open[p], user) : 0;
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

uint64_t ingest_node_watch_generation(struct ingest_node_watch *w)
{
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    uint64_t generation = w->generation;
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
    return generation;
}

/* A copy of the assignment taken under the lock, with the handle to query it through. */
struct watch_snapshot {
    rd_kafka_t *rk;
    const char *topic;
    uint64_t generation;
    uint32_t count;
    int32_t *partitions;
    int64_t *start;
};

/* Copies the assignment and registers a user of the handle. Returns 0, -EAGAIN (not consuming
 * or not settled) or -ENOMEM. */
static int watch_take(struct ingest_node_watch *w, struct watch_snapshot *s)
{
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    int rc = w->rk != NULL && w->settled ? 0 : -EAGAIN;
    uint32_t count = 0;
    for (int32_t p = 0; rc == 0 && p < w->end; p++) {
        count += w->assigned[p] ? 1u : 0u;
    }
    s->partitions = rc == 0 ? malloc(sizeof(int32_t) * (count + 1u)) : NULL;
    s->start = rc == 0 ? malloc(sizeof(int64_t) * (count + 1u)) : NULL;
    rc = rc == 0 && (s->partitions == NULL || s->start == NULL) ? -ENOMEM : rc;
    s->count = 0;
    for (int32_t p = 0; rc == 0 && p < w->end; p++) {
        if (w->assigned[p]) {
            s->partitions[s->count] = p;
            s->start[s->count] = w->start[p];
            s->count++;
        }
    }
    ASSERT(rc != 0 || s->count == count);
    s->rk = w->rk;
    s->topic = w->topic;
    s->generation = w->generation;
    w->users += rc == 0 ? 1u : 0u;
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
    if (rc != 0) {
        free(s->partitions);
        free(s->start);
    }
    return rc;
}

static void watch_release(struct ingest_node_watch *w, struct watch_snapshot *s)
{
    free(s->partitions);
    free(s->start);
    ASSERT(pthread_mutex_lock(&w->lock) == 0);
    ASSERT(w->users > 0);
    if (--w->users == 0) {
        ASSERT(pthread_cond_broadcast(&w->idle) == 0);
    }
    ASSERT(pthread_mutex_unlock(&w->lock) == 0);
}

/* librdkafka's answer for one partition as our code: a timeout, a partition the broker does
 * not know (deleted topic), anything else. Logged here, once per failed request. */
static int watermark_error(const char *topic, int32_t p, rd_kafka_resp_err_t err)
{
    ds_log_warn("kafka: high watermark of %s[%d]: %s", topic, p, rd_kafka_err2str(err));
    if (err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT) {
        return -ETIMEDOUT;
    }
    return -DS_EKAFKA;
}

int ingest_node_watch_positions(struct ingest_node_watch *w, uint32_t timeout_ms,
                                ingest_node_position_fn fn, void *user, uint64_t *generation)
{
    ASSERT(w != NULL);
    ASSERT(fn != NULL);
    ASSERT(timeout_ms >= 1);
    struct watch_snapshot s;
    int rc = watch_take(w, &s);
    if (rc != 0) {
        return rc;
    }
    uint64_t deadline = ds_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    for (uint32_t i = 0; rc == 0 && i < s.count; i++) { /* bounded by the assignment */
        uint64_t now = ds_clock_ns();
        if (now >= deadline) {
            rc = watermark_error(s.topic, s.partitions[i], RD_KAFKA_RESP_ERR__TIMED_OUT);
            break;
        }
        int64_t low = 0;
        int64_t high = 0;
        int left_ms = (int)((deadline - now + 999999u) / 1000000u);
        rd_kafka_resp_err_t err =
            rd_kafka_query_watermark_offsets(s.rk, s.topic, s.partitions[i], &low, &high, left_ms);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            rc = watermark_error(s.topic, s.partitions[i], err);
            break;
        }
        /* Below the start chosen at assignment the partition was stored by another member
         * (or by this node's earlier run); below the low watermark nothing exists any more. */
        int64_t from = s.start[i] > low ? s.start[i] : low;
        rc = fn(s.partitions[i], high, from, user);
    }
    *generation = s.generation;
    uint32_t count = s.count;
    watch_release(w, &s);
    return rc == 0 ? (int)count : rc;
}
