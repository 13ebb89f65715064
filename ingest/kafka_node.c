/*
 * The Kafka node behind `dayshard run`: a consumer group member feeding the writer stage,
 * exactly once into storage.
 *
 * Offsets. Storage records, in every commit, the next offset of each Kafka partition whose
 * events (or dead letters) it holds: that is the node's durable position. Kafka offsets are
 * committed only after that commit (from the writer thread, asynchronously), so the group's
 * committed offset never runs ahead of durable data. On assignment a partition resumes from
 * max(durable position, group committed offset): the first covers a commit to Kafka lost in a
 * crash (no event stored twice), the second a range another member stored while it owned the
 * partition (not read again here). On revocation the node hands over what it read, waits for
 * the commit that makes it durable, commits those offsets to Kafka synchronously, and only
 * then lets the partitions go. In the orders model a partition's orders are the state of its
 * whole history and move with it: a node reads a partition it holds nothing of from its start,
 * resumes one it holds at its own durable position (a member that stored past it meanwhile
 * gives its copy up, so the range is read again here), and gives up the partitions it is no
 * longer assigned at its next assignment (give_up_unassigned).
 *
 * The positions group. Each durable position is also committed to "<group>.dayshard-positions",
 * a group no member ever joins, through a second handle that never subscribes: a plain offset
 * commit there is accepted whatever state the consumer group is in, and a starting member reads
 * it like the group's offset. It is what makes a handover exact when the group's commit at
 * revocation is refused: librdkafka's mock broker (`dayshard broker`) refuses every offset
 * commit while a rebalance waits for members to join (REBALANCE_IN_PROGRESS), where Kafka
 * accepts them, so without it the member taking the partitions re-read what this node stored
 * since the rebalance began (found by tests/integration/test_run_group.sh). A commit refused for
 * a transient reason (a timeout, the coordinator moving) is covered the same way. Rejected: the
 * cooperative-sticky protocol (revocation while the group is stable), because librdkafka 2.0.2
 * loses the whole assignment when an offset commit queued behind its JoinGroup comes back
 * ILLEGAL_GENERATION (librdkafka issue #4059, fixed in 2.10), which the periodic commits make
 * certain in every rebalance.
 *
 * Threads: the consumer thread (the caller) polls, decodes, routes and serves rebalance
 * callbacks; the writer thread (stage.c) appends and commits, then publishes each partition's
 * durable position through an atomic array the consumer thread reads at assignment.
 *
 * Stopping (SIGTERM) is bounded whatever the broker's state: everything read is committed to
 * storage first (a barrier: nothing Kafka-side comes before it); then the Kafka-side steps (the
 * dead-letter topic's flush, the final offset commits, leaving the group, the producers' last
 * sends) share STOP_KAFKA_BUDGET_MS, each bounded by what is left. The final commit to the
 * group doubles as the probe: when its answer is a local error (timed out, no coordinator, all
 * brokers down) the broker is taken as unreachable and the node does not leave the group
 * (rd_kafka_consumer_close waits out session.timeout.ms for a coordinator that does not answer:
 * from 47 s to over 60 s measured with a frozen broker); it destroys the handle without the
 * close instead. What
 * Kafka did not hear is made up at the next start: the node resumes from its durable positions
 * (max with the committed offsets, see above), and the coordinator drops the member that did
 * not leave after session.timeout.ms, which rebalances the group.
 *
 * If this node dies with durable data whose offsets it had not yet committed to Kafka, and
 * another member takes the partition before this node comes back, that member reads the range
 * again into its own data directory; this node gives its copy up when it learns of it (orders
 * model: give_up_unassigned; events model: the tenures, node_tenure.h).
 *
 * Rejected: rd_kafka_consumer_poll per message (a queue operation per event); batches of up
 * to 1024 from rd_kafka_consume_batch_queue, which also serves the rebalance callback.
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ingest/kafka_conf.h"
#include "ingest/kafka_dlq.h"
#include "ingest/node_heat.h"
#include "ingest/node_tenure.h"
#include "ingest/node_watch.h"
#include "ingest/stage.h"

#define CONSUME_BATCH 1024u
#define POLL_TIMEOUT_MS 50
#define HAND_OVER_AGE_NS (5u * 1000000u)
#define COMMITTED_TIMEOUT_MS 10000
/* How often the consumer thread commits the durable positions of its partitions again: an
 * asynchronous commit that failed is otherwise not retried until more data arrives. */
#define COMMIT_REFRESH_INTERVAL_NS (1000u * 1000000u)
/* Bounds of the commits at revocation: the group's, once, and the positions group's, retried
 * until the deadline. A synchronous rd_kafka_commit waits out session.timeout.ms for an
 * unreachable coordinator (40 s to stop a node whose broker was gone, measured with five
 * attempts), and the revocation callback holds up the rebalance and the node's exit. */
#define RELEASE_GROUP_COMMIT_TIMEOUT_MS 2000
#define RELEASE_POSITIONS_DEADLINE_MS 3000
#define RELEASE_COMMIT_PAUSE_MS 100
#define POSITIONS_GROUP_SUFFIX ".dayshard-positions"
/* How long a commit waits for the dead-letter topic to acknowledge its copies. */
/* The consumer lag is sampled (and reported to the observer) this often. */
#define LAG_SAMPLE_INTERVAL_NS (1000ull * 1000000u)
#define DLQ_FLUSH_TIMEOUT_MS 10000
/* The Kafka-side steps of a stop share this budget, from the stop's start (file comment): the
 * node exits within 10 s with what is left for the storage commits, the handles' teardown and
 * the CLI's query service and index builder (which stop in milliseconds). */
#define STOP_KAFKA_BUDGET_MS 4000
/* Leaving the group is polled in slices of this much. */
#define STOP_CLOSE_SLICE_MS 100
/* How long after the Kafka budget the node waits for librdkafka's teardown (the function teardown).
 */
#define STOP_TEARDOWN_WAIT_MS 1500
#define TEARDOWN_POLL_NS (5u * 1000000u)
/* How far ahead of this node's clock a message's timestamp may be and still count as written
 * then (clocks of producer machines drift by milliseconds, NTP-less ones by seconds). */
#define HEAT_CLOCK_SKEW_MS 10000

struct node {
    struct kafka_dlq *dlq; /* --dlq-topic, or NULL; used by the writer thread */
    const struct ingest_node_config *cfg;
    struct ingest_node_stats *stats;
    rd_kafka_t *rk;
    rd_kafka_t *positions; /* commits to the positions group (file comment); never subscribes */
    struct storage *st;
    struct shard_map *map;
    struct node_heat *heat;        /* consumer thread only */
    struct ingest_decoder decoder; /* consumer thread: the items of the event being added */
    struct stage stage;
    bool stage_running;
    bool closing; /* stopping: the revocation neither commits (node_stop did) nor gives up */
    atomic_uint_least64_t stop_deadline_ns; /* set at a stop (0 before): the Kafka budget's end */
    bool left_group;                        /* the stop's close finished within the budget */
    bool orders_model; /* the data directory counts orders: their partitions move with them */
    struct node_tenure *tenure; /* events model: holders and claims (node_tenure.h), else NULL */
    struct tenure_history history[INGEST_NODE_PARTITIONS_MAX]; /* consumer thread: at assignment */
    uint64_t last_tenure_ns;                     /* consumer thread: the last tenure_tick */
    int32_t release[INGEST_NODE_PARTITIONS_MAX]; /* consumer thread: partitions to give up */
    char deadletters[DS_PATH_MAX];
    atomic_int fatal; /* a fatal client error (error_cb) */
    char fatal_reason[512];
    /* durable next offset per partition, published by the writer after each commit (-1 none) */
    atomic_int_least64_t durable[INGEST_NODE_PARTITIONS_MAX];
    /* writer thread only: the last offset committed to Kafka per partition (at start: the
     * durable position, which this node must not commit again: another member may own the
     * partition now and have committed further) */
    int64_t kafka_committed[INGEST_NODE_PARTITIONS_MAX];
    atomic_int partitions_seen; /* 1 + highest partition read so far */
    /* consumer thread only */
    bool assigned[INGEST_NODE_PARTITIONS_MAX];
    int64_t position[INGEST_NODE_PARTITIONS_MAX];
    int64_t start[INGEST_NODE_PARTITIONS_MAX];     /* the offset chosen at assignment */
    int32_t assigned_end;                          /* 1 + the highest partition ever assigned */
    bool lag_reported[INGEST_NODE_PARTITIONS_MAX]; /* on_lag last said "assigned" */
    uint64_t last_lag_ns;
    int64_t lag_total; /* over the assigned partitions at the last sample, -1 unknown */
    int lag_partitions;
    bool paused; /* consumption paused by cfg->should_pause */
    uint64_t last_status_ns;
    uint64_t last_refresh_ns;
    uint64_t messages;
};

void ingest_node_config_defaults(struct ingest_node_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->topic = "orders";
    cfg->group = "dayshard";
    cfg->base_shards = SHARD_COUNT_DEFAULT;
    cfg->io_mode = STORAGE_IO_AUTO;
    cfg->commit_interval_ms = 100;
    cfg->status_interval_ms = 5000;
    cfg->shard_capacity_eps = SHARD_CAPACITY_DEFAULT;
    cfg->max_shards = SHARD_MAX_SHARDS_DEFAULT;
    cfg->deadletter_file_bytes = INGEST_DEADLETTER_FILE_BYTES_DEFAULT;
}

static int kafka_error(const char *what, rd_kafka_resp_err_t err)
{
    ds_log_error("kafka: %s: %s", what, rd_kafka_err2str(err));
    return -DS_EKAFKA;
}

/* ---- callbacks ----------------------------------------------------------------------------- */

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    struct node *n = opaque;
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char text[256];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, text, sizeof(text));
        int len = snprintf(n->fatal_reason, sizeof(n->fatal_reason), "%s: %s",
                           rd_kafka_err2name(orig), text);
        ASSERT(len > 0);
        atomic_store(&n->fatal, 1);
        return;
    }
    /* Transport errors and brokers going away are retried by librdkafka: tell, keep going. */
    ds_log_warn("kafka: %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

/* Writer thread: a dead-letter record also goes to the dead-letter topic. */
static void on_reject(const char *record, size_t len, int32_t partition, void *user)
{
    struct node *n = user;
    kafka_dlq_send(n->dlq, record, len, partition);
}

/* Writer thread, after each durable commit: publish positions, commit them to Kafka. */
/* Writer thread, after a durable commit: tells the observer. */
static void observe_commit(struct node *n)
{
    if (n->cfg->on_commit == NULL) {
        return;
    }
    struct ingest_node_progress progress = {
        .events_durable = atomic_load(&n->stage.accepted),
        .commit_ns = n->stage.last_commit_ns,
        .commit_seq = storage_commit_seq(n->st),
        .orders_model = storage_model(n->st) == STORAGE_MODEL_ORDERS,
    };
    storage_order_stats(n->st, &progress.orders);
    storage_held(n->st, &progress.held);
    storage_ids_held(n->st, &progress.ids);
    progress.retention_floor = storage_retention_floor(n->st);
    progress.stream_day = storage_stream_day(n->st);
    progress.maintenance = n->stage.maintenance;
    for (uint32_t r = 0; r < INGEST_REASON_COUNT; r++) {
        progress.rejected_by_reason[r] = atomic_load(&n->stage.rejected_by_reason[r]);
    }
    n->cfg->on_commit(&progress, n->cfg->observer_user);
}

/* Adds partition p at offset to a list of offset commits, carrying its holder history in the
 * events model. Returns false, adding nothing, when this node must not commit p to the group:
 * it does not hold p now (node_tenure_commit_meta), and has read nothing of it in a tenure of
 * its own. */
static bool commit_add(struct node *n, rd_kafka_topic_partition_list_t *list, const char *topic,
                       int32_t p, int64_t offset)
{
    rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(list, topic, p);
    if (n->tenure != NULL && !node_tenure_commit_meta(n->tenure, p, tp)) {
        rd_kafka_topic_partition_list_del_by_idx(list, list->cnt - 1);
        return false;
    }
    tp->offset = offset;
    return true;
}

static void on_commit(struct storage *st, void *user)
{
    struct node *n = user;
    observe_commit(n);
    if (n->dlq != NULL) {
        /* The file holds every dead letter durably already; the topic is its copy. Waiting here
         * keeps the group's offsets behind the copies the topic acknowledged, unless the topic
         * is unreachable for the whole wait (then the failure is logged and the file rules). */
        int flushed = kafka_dlq_flush(n->dlq, DLQ_FLUSH_TIMEOUT_MS, &n->stop_deadline_ns);
        (void)flushed;
    }
    int seen = atomic_load(&n->partitions_seen);
    rd_kafka_topic_partition_list_t *list = NULL;
    for (int p = 0; p < seen; p++) {
        int64_t next = storage_source_next(st, p);
        atomic_store(&n->durable[p], next);
        if (next <= n->kafka_committed[p]) {
            continue;
        }
        if (list == NULL) {
            list = rd_kafka_topic_partition_list_new(seen);
        }
        if (commit_add(n, list, n->cfg->topic, p, next)) {
            n->kafka_committed[p] = next;
        }
    }
    if (list != NULL && list->cnt > 0) {
        /* Asynchronous: a failure is logged by librdkafka, and the consumer thread commits the
         * durable positions again within COMMIT_REFRESH_INTERVAL_NS (refresh_commits). */
        rd_kafka_resp_err_t err = rd_kafka_commit(n->rk, list, 1);
        rd_kafka_resp_err_t handed = rd_kafka_commit(n->positions, list, 1);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR || handed != RD_KAFKA_RESP_ERR_NO_ERROR) {
            ds_log_warn("kafka: offset commit: %s / %s", rd_kafka_err2str(err),
                        rd_kafka_err2str(handed));
        }
    }
    if (list != NULL) {
        rd_kafka_topic_partition_list_destroy(list);
    }
}

/* The offset this node answers for on partition p: its durable position, or the start chosen
 * at assignment while nothing newer is stored (committing an older durable position would
 * move the group back over a range another member stored). -1 when neither is known. */
static int64_t responsible_offset(struct node *n, int32_t p)
{
    int64_t durable = atomic_load(&n->durable[p]);
    return durable > n->start[p] ? durable : n->start[p] >= 0 ? n->start[p] : -1;
}

/* Consumer thread, every COMMIT_REFRESH_INTERVAL_NS: commits the positions of the assigned
 * partitions again, asynchronously, so that one refused while idle still gets through. */
static void refresh_commits(struct node *n)
{
    uint64_t now = ds_clock_ns();
    if (now - n->last_refresh_ns < COMMIT_REFRESH_INTERVAL_NS) {
        return;
    }
    n->last_refresh_ns = now;
    /* Serves the positions handle's queue: the replies of its asynchronous commits, errors. */
    rd_kafka_poll(n->positions, 0);
    int seen = atomic_load(&n->partitions_seen);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(seen > 0 ? seen : 1);
    for (int p = 0; p < seen; p++) {
        int64_t offset = n->assigned[p] ? responsible_offset(n, p) : -1;
        if (offset >= 0) {
            (void)commit_add(n, list, n->cfg->topic, p, offset);
        }
    }
    if (list->cnt > 0) {
        /* Errors here are the enqueueing kind only; librdkafka logs failed commits. */
        (void)rd_kafka_commit(n->rk, list, 1);
        (void)rd_kafka_commit(n->positions, list, 1);
    }
    rd_kafka_topic_partition_list_destroy(list);
}

/* Offset i of a list read by rd_kafka_committed, or -1 (none, or not read). */
static int64_t committed_offset(rd_kafka_resp_err_t err, const rd_kafka_topic_partition_list_t *l,
                                int i)
{
    const rd_kafka_topic_partition_t *tp = &l->elems[i];
    return err == RD_KAFKA_RESP_ERR_NO_ERROR && tp->err == 0 && tp->offset >= 0 ? tp->offset : -1;
}

/* Orders model, a partition read from its start: warns when the topic no longer holds the
 * start of its history (retention deleted it), since the orders whose last version came
 * before it cannot be rebuilt here. */
static void history_check(struct node *n, int32_t partition)
{
    int64_t low = 0;
    int64_t high = 0;
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
        n->positions, n->cfg->topic, partition, &low, &high, COMMITTED_TIMEOUT_MS);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR && low > 0) {
        ds_log_warn("kafka: %s[%d] starts at offset %lld: its earlier history is gone from the "
                    "topic, so orders whose last version came before it are missing here (keep "
                    "the orders topic with cleanup.policy=compact, keyed by order_id)",
                    n->cfg->topic, partition, (long long)low);
    }
}

/* Events model: whether the positions group's offset of a partition (tp, read with its
 * metadata) was committed by the partition's latest recorded holder. The positions group takes
 * any commit, and a member that froze past its session commits there when it wakes, before it
 * learns that it lost the partition: that offset is not where the holder stopped. */
static bool positions_trusted(const struct node *n, const rd_kafka_topic_partition_t *tp)
{
    if (tp->partition < 0 || tp->partition >= (int32_t)INGEST_NODE_PARTITIONS_MAX) {
        return true;
    }
    const struct tenure_history *group = &n->history[tp->partition];
    if (group->count == 0) {
        return true; /* no holder recorded in the group: nothing to compare with */
    }
    struct tenure_history by = {0};
    const char *reason = NULL;
    bool ok = tenure_parse(tp->metadata, tp->metadata_size, &by, &reason) == 0 && by.count > 0 &&
              by.entries[0].node == group->entries[0].node;
    if (!ok) {
        ds_log_info("kafka: %s[%" PRId32 "]: the positions group's offset %" PRId64
                    " was not committed by its latest holder: not used",
                    n->cfg->topic, tp->partition, tp->offset);
    }
    return ok;
}

/* The partitions' start offsets: max(durable position here, group committed offset, positions
 * group offset); in the orders model a partition this node holds nothing of is read from its
 * start, and one it holds resumes at its durable position. */
static void choose_offsets(struct node *n, rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_topic_partition_list_t *handed = rd_kafka_topic_partition_list_copy(parts);
    rd_kafka_resp_err_t err = rd_kafka_committed(n->rk, parts, COMMITTED_TIMEOUT_MS);
    rd_kafka_resp_err_t handed_err = rd_kafka_committed(n->positions, handed, COMMITTED_TIMEOUT_MS);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR || handed_err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_warn("kafka: reading committed offsets: %s / %s; a partition another member "
                    "stored may be read again",
                    rd_kafka_err2str(err), rd_kafka_err2str(handed_err));
    }
    ASSERT(handed->cnt == parts->cnt);
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];
        ASSERT(handed->elems[i].partition == tp->partition);
        int64_t group = committed_offset(err, parts, i);
        int64_t positions = committed_offset(handed_err, handed, i);
        if (n->tenure != NULL && positions >= 0 && !positions_trusted(n, &handed->elems[i])) {
            positions = -1;
        }
        int64_t own = tp->partition >= 0 && tp->partition < (int32_t)INGEST_NODE_PARTITIONS_MAX
                          ? atomic_load(&n->durable[tp->partition])
                          : -1;
        int64_t start = own > group ? own : group;
        start = positions > start ? positions : start;
        if (n->orders_model && own < 0) {
            /* The orders of this partition are the state of its whole history: read it from
             * its start (the member that held it gives its orders up). */
            start = RD_KAFKA_OFFSET_BEGINNING;
            history_check(n, tp->partition);
        } else if (n->orders_model) {
            /* Resume at this node's own position, below what another member stored while it
             * held the partition (this node frozen past its session, or dead): that member
             * gives those orders up, and a line read again is an unchanged order here. */
            start = own;
        }
        tp->offset =
            start >= 0 || start == RD_KAFKA_OFFSET_BEGINNING ? start : RD_KAFKA_OFFSET_INVALID;
        ds_log_info("kafka: assigned %s[%d] from offset %lld (durable here %lld, group %lld, "
                    "positions %lld)",
                    tp->topic, tp->partition, (long long)start, (long long)own, (long long)group,
                    (long long)positions);
    }
    rd_kafka_topic_partition_list_destroy(handed);
}

/* Milliseconds from now to deadline_ns, at most cap_ms; 0 when it has passed. */
static int left_ms(uint64_t deadline_ns, int cap_ms)
{
    uint64_t now = ds_clock_ns();
    uint64_t left = deadline_ns > now ? (deadline_ns - now) / 1000000u : 0;
    return left < (uint64_t)cap_ms ? (int)left : cap_ms;
}

/* The positions group's commit at revocation, retried until RELEASE_POSITIONS_DEADLINE_MS or
 * deadline_ns, whichever comes first: the next owner starts from it. */
static void commit_positions_sync(struct node *n, const rd_kafka_topic_partition_list_t *list,
                                  uint64_t deadline_ns)
{
    uint64_t deadline = ds_clock_ns() + (uint64_t)RELEASE_POSITIONS_DEADLINE_MS * 1000000u;
    deadline = deadline_ns < deadline ? deadline_ns : deadline;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
    for (;;) { /* bounded by the deadline */
        uint64_t now = ds_clock_ns();
        if (now >= deadline) {
            break;
        }
        err = kafka_commit_bounded(n->positions, list, (int)((deadline - now) / 1000000u) + 1);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            return;
        }
        struct timespec pause = {.tv_sec = 0, .tv_nsec = RELEASE_COMMIT_PAUSE_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    ds_log_warn("kafka: positions commit at %s: %s (the data is durable here; the next owner may "
                "read it again)",
                n->closing ? "the stop" : "revocation", rd_kafka_err2str(err));
}

/* Commits the durable positions of parts to the group (unless lost) and to the positions group,
 * each bounded and neither past deadline_ns. Returns the group commit's answer: NO_ERROR when
 * there was nothing to commit, __ASSIGNMENT_LOST when not asked. */
static rd_kafka_resp_err_t commit_release(struct node *n,
                                          const rd_kafka_topic_partition_list_t *parts, bool lost,
                                          uint64_t deadline_ns)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(parts->cnt);
    for (int i = 0; i < parts->cnt; i++) {
        int32_t p = parts->elems[i].partition;
        int64_t offset =
            p >= 0 && p < (int32_t)INGEST_NODE_PARTITIONS_MAX ? responsible_offset(n, p) : -1;
        if (offset >= 0) {
            (void)commit_add(n, list, parts->elems[i].topic, p, offset);
        }
    }
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (list->cnt > 0) {
        int timeout_ms = left_ms(deadline_ns, RELEASE_GROUP_COMMIT_TIMEOUT_MS);
        err = lost             ? RD_KAFKA_RESP_ERR__ASSIGNMENT_LOST
              : timeout_ms > 0 ? kafka_commit_bounded(n->rk, list, timeout_ms)
                               : RD_KAFKA_RESP_ERR__TIMED_OUT;
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR && !(lost && n->tenure != NULL)) {
            ds_log_warn("kafka: offset commit at %s: %s (the positions group is committed next)",
                        n->closing ? "the stop" : "revocation", rd_kafka_err2str(err));
        }
        /* Events model: a lost assignment means another member may hold the partitions already
         * and have committed past this node; the positions group accepts any commit, so this
         * node's offset would move it back or over a range nobody holds. */
        if (!(lost && n->tenure != NULL)) {
            commit_positions_sync(n, list, deadline_ns);
        }
    }
    rd_kafka_topic_partition_list_destroy(list);
    return err;
}

/* Before partitions go: everything read is committed to storage, then to Kafka (sync). A lost
 * assignment is committed to storage too, so that this node resumes after what it read if the
 * partitions come back, and to the positions group only: the consumer group refuses commits
 * of a member that lost its generation. At a stop, node_stop did all of it before the close. */
static void release_partitions(struct node *n, rd_kafka_topic_partition_list_t *parts, bool lost)
{
    if (!n->stage_running || n->closing) {
        return;
    }
    int rc = stage_barrier(&n->stage);
    if (rc != 0) {
        /* The writer logged the failure with its file; this is its consequence. */
        ds_log_warn("revoking partitions: the storage commit failed (%s): offsets past the "
                    "durable positions stay uncommitted",
                    ds_strerror(rc));
        return;
    }
    (void)commit_release(n, parts, lost, UINT64_MAX);
}

static void mark_assigned(struct node *n, const rd_kafka_topic_partition_list_t *parts, bool on)
{
    for (int i = 0; i < parts->cnt; i++) {
        int32_t p = parts->elems[i].partition;
        if (p >= 0 && p < (int32_t)INGEST_NODE_PARTITIONS_MAX) {
            n->assigned[p] = on;
            n->assigned_end = on && p >= n->assigned_end ? p + 1 : n->assigned_end;
            n->position[p] = on ? parts->elems[i].offset : -1;
            n->start[p] = on ? parts->elems[i].offset : -1;
        }
    }
    node_watch_assign(n->cfg->watch, parts, on);
}

/* Tells the heat which share of the topic's partitions this node owns: a node that reads 1/K
 * of them sees about 1/K of a day's writes (keys spread evenly), so it grows days at 1/K of
 * the capacity. The partition count comes from the cluster's metadata (a rebalance is rare). */
static void share_update(struct node *n)
{
    uint32_t assigned = 0;
    for (int32_t p = 0; p < n->assigned_end; p++) {
        assigned += n->assigned[p] ? 1u : 0u;
    }
    rd_kafka_topic_t *topic = rd_kafka_topic_new(n->rk, n->cfg->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int total = 0;
    if (topic != NULL && rd_kafka_metadata(n->rk, 0, topic, &md, COMMITTED_TIMEOUT_MS) ==
                             RD_KAFKA_RESP_ERR_NO_ERROR) {
        total = md->topic_cnt == 1 ? md->topics[0].partition_cnt : 0;
        rd_kafka_metadata_destroy(md);
    }
    if (topic != NULL) {
        rd_kafka_topic_destroy(topic);
    }
    node_heat_share(n->heat, assigned, total > 0 ? (uint32_t)total : 0);
}

/* Orders model: the orders of partitions another member now owns leave this data directory
 * (storage_release_source through the writer), so that the member that reads them from their
 * start holds them alone. Not at a close: a node that stops keeps its data, and gives up what
 * it no longer owns when it joins again. */
static void give_up_list(struct node *n, uint32_t count)
{
    if (count == 0 || !n->stage_running) {
        return;
    }
    int rc = stage_give_up(&n->stage, n->release, NULL, count);
    if (rc != 0) {
        ds_log_warn("kafka: giving up %u partitions: %s (the node stops; this data directory "
                    "still holds their orders)",
                    count, ds_strerror(rc));
    }
}

static void give_up(struct node *n, const rd_kafka_topic_partition_list_t *parts)
{
    uint32_t count = 0;
    for (int i = 0; n->orders_model && i < parts->cnt; i++) {
        int32_t p = parts->elems[i].partition;
        if (p >= 0 && p < (int32_t)INGEST_NODE_PARTITIONS_MAX && atomic_load(&n->durable[p]) >= 0) {
            n->release[count++] = p;
        }
    }
    give_up_list(n, count);
}

/* Eager protocol: the partitions this node holds data of and is not assigned now. */
static void give_up_unassigned(struct node *n, const rd_kafka_topic_partition_list_t *parts)
{
    uint32_t count = 0;
    for (int32_t p = 0; n->orders_model && p < (int32_t)INGEST_NODE_PARTITIONS_MAX; p++) {
        bool assigned = false;
        for (int i = 0; i < parts->cnt && !assigned; i++) {
            assigned = parts->elems[i].partition == p;
        }
        if (!assigned && atomic_load(&n->durable[p]) >= 0) {
            n->release[count++] = p;
        }
    }
    give_up_list(n, count);
}

/* ---- tenures (events model, node_tenure.h) ------------------------------------------------ */

/* How long a rebalance callback waits for the group's answers about holders (read, record). */
#define TENURE_KAFKA_TIMEOUT_MS 2000
/* Partitions held here but not assigned, and assigned ones not yet recorded, are looked at
 * again this often. */
#define TENURE_TICK_INTERVAL_NS (1000u * 1000000u)

static bool is_assigned(const rd_kafka_topic_partition_list_t *parts, int32_t p)
{
    for (int i = 0; parts != NULL && i < parts->cnt; i++) {
        if (parts->elems[i].partition == p) {
            return true;
        }
    }
    return false;
}

/* Gives up, before anything more is read, what this node stored of parts[0..count) (their
 * histories in n->history) past the start of a later holder; marks the unassigned ones whose
 * histories show nothing more can be held twice as settled. Returns 0 or the writer's error. */
static int tenure_release(struct node *n, const int32_t *parts, uint32_t count, bool assigned)
{
    int32_t release[INGEST_NODE_PARTITIONS_MAX];
    int64_t from[INGEST_NODE_PARTITIONS_MAX];
    uint32_t releases = 0;
    for (uint32_t i = 0; i < count; i++) {
        int32_t p = parts[i];
        const struct tenure_history *h = &n->history[p];
        int64_t next = atomic_load(&n->durable[p]);
        int64_t lo = -1;
        if (next >= 0 && node_tenure_release_point(n->tenure, h, next, &lo)) {
            ds_log_warn("kafka: %s[%" PRId32 "]: this node stored it up to offset %" PRId64
                        ", and another member started reading it at %" PRId64
                        ": giving up this node's events from there",
                        n->cfg->topic, p, next, lo);
            release[releases] = p;
            from[releases++] = lo;
        } else if (!assigned) {
            /* Settled: a later holder started at or after what this node holds. */
            bool later = h->count > 0 && h->entries[0].node != node_tenure_id(n->tenure);
            node_tenure_settle(n->tenure, p, later);
        }
    }
    if (releases == 0 || !n->stage_running) {
        return 0;
    }
    int rc = stage_give_up(&n->stage, release, from, releases);
    if (rc != 0) {
        ds_log_error("kafka: giving up %u partitions' events: %s (the node stops; this data "
                     "directory still holds them)",
                     releases, ds_strerror(rc));
        return rc;
    }
    for (uint32_t i = 0; i < releases; i++) {
        node_tenure_released(n->tenure, release[i], from[i]);
    }
    return 0;
}

/* The low watermark of partition p: where a partition with no position anywhere starts. */
static int64_t low_watermark(struct node *n, int32_t p)
{
    int64_t low = -1;
    int64_t high = -1;
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(n->positions, n->cfg->topic, p, &low,
                                                               &high, TENURE_KAFKA_TIMEOUT_MS);
    return err == RD_KAFKA_RESP_ERR_NO_ERROR ? low : -1;
}

/* Records this node as the holder of the assigned partitions in parts (offsets chosen) that
 * are not recorded yet; returns how many are left unrecorded. */
static uint32_t tenure_record(struct node *n, rd_kafka_topic_partition_list_t *parts)
{
    int32_t which[INGEST_NODE_PARTITIONS_MAX];
    int64_t start[INGEST_NODE_PARTITIONS_MAX];
    bool continues[INGEST_NODE_PARTITIONS_MAX];
    struct tenure_history *h = malloc(INGEST_NODE_PARTITIONS_MAX * sizeof(*h));
    ASSERT(h != NULL);
    uint32_t count = 0;
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];
        int32_t p = tp->partition;
        if (p < 0 || p >= (int32_t)INGEST_NODE_PARTITIONS_MAX ||
            node_tenure_recorded(n->tenure, p)) {
            continue;
        }
        if (tp->offset < 0) {
            /* Nothing committed nor stored: the entry needs the offset reading starts at. */
            tp->offset = low_watermark(n, p);
            n->start[p] = tp->offset;
        }
        if (tp->offset < 0) {
            continue; /* unknown for now: stays unrecorded, asked again at the next tick */
        }
        const struct tenure_history *mine = &n->history[p];
        int64_t durable = atomic_load(&n->durable[p]);
        which[count] = p;
        start[count] = tp->offset;
        continues[count] = mine->count > 0 && mine->entries[0].node == node_tenure_id(n->tenure) &&
                           durable >= 0 && durable == tp->offset;
        h[count++] = *mine;
    }
    (void)node_tenure_record(n->tenure, n->rk, n->cfg->topic, which, start, continues, h, count,
                             TENURE_KAFKA_TIMEOUT_MS);
    free(h);
    uint32_t left = 0;
    for (int i = 0; i < parts->cnt; i++) {
        left += node_tenure_recorded(n->tenure, parts->elems[i].partition) ? 0u : 1u;
    }
    return left;
}

/* The assigned partitions of parts this node may not read yet (not recorded as their holder). */
static rd_kafka_topic_partition_list_t *unrecorded(struct node *n,
                                                   const rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(parts->cnt + 1);
    for (int i = 0; i < parts->cnt; i++) {
        if (!node_tenure_recorded(n->tenure, parts->elems[i].partition)) {
            rd_kafka_topic_partition_list_add(list, parts->elems[i].topic,
                                              parts->elems[i].partition);
        }
    }
    return list;
}

/* Eager assignment, events model, before choose_offsets: reads the histories of the assigned
 * partitions and of those held here but assigned elsewhere, and gives up what was stored past
 * a later holder's start. Returns 0 or the writer's error. */
static int tenure_assign(struct node *n, const rd_kafka_topic_partition_list_t *parts)
{
    int32_t list[INGEST_NODE_PARTITIONS_MAX];
    uint32_t count = 0;
    for (int32_t p = 0; p < (int32_t)INGEST_NODE_PARTITIONS_MAX; p++) {
        bool assigned = is_assigned(parts, p);
        if (!assigned) {
            node_tenure_unassign(n->tenure, p);
        }
        if (assigned || atomic_load(&n->durable[p]) >= 0) {
            list[count++] = p;
        }
    }
    struct tenure_history *h = malloc(INGEST_NODE_PARTITIONS_MAX * sizeof(*h));
    ASSERT(h != NULL);
    int rc =
        node_tenure_read(n->tenure, n->rk, n->cfg->topic, list, count, TENURE_KAFKA_TIMEOUT_MS, h);
    (void)rc; /* histories that could not be read are empty: nothing released, asked again */
    int32_t held[INGEST_NODE_PARTITIONS_MAX];
    int32_t mine[INGEST_NODE_PARTITIONS_MAX];
    uint32_t held_count = 0;
    uint32_t mine_count = 0;
    for (uint32_t i = 0; i < count; i++) {
        n->history[list[i]] = h[i];
        if (is_assigned(parts, list[i])) {
            mine[mine_count++] = list[i];
        } else {
            held[held_count++] = list[i];
        }
    }
    free(h);
    rc = tenure_release(n, mine, mine_count, true);
    return rc == 0 ? tenure_release(n, held, held_count, false) : rc;
}

/* Consumer thread, every TENURE_TICK_INTERVAL_NS: records the assigned partitions the group
 * refused at assignment (and lets them be read), and looks at the histories of partitions held
 * here, assigned elsewhere and not settled. Returns 0 or the writer's error. */
static int tenure_tick(struct node *n)
{
    uint64_t now = ds_clock_ns();
    if (n->tenure == NULL || now - n->last_tenure_ns < TENURE_TICK_INTERVAL_NS) {
        return 0;
    }
    n->last_tenure_ns = now;
    int32_t seen = atomic_load(&n->partitions_seen);
    int32_t end = seen > n->assigned_end ? seen : n->assigned_end;
    rd_kafka_topic_partition_list_t *waiting = rd_kafka_topic_partition_list_new(1);
    int32_t held[INGEST_NODE_PARTITIONS_MAX];
    uint32_t count = 0;
    for (int32_t p = 0; p < end; p++) {
        if (n->assigned[p] && !node_tenure_recorded(n->tenure, p)) {
            rd_kafka_topic_partition_list_add(waiting, n->cfg->topic, p)->offset = n->start[p];
        } else if (!n->assigned[p] && atomic_load(&n->durable[p]) >= 0 &&
                   !node_tenure_settled(n->tenure, p)) {
            held[count++] = p;
        }
    }
    if (waiting->cnt > 0 && tenure_record(n, waiting) < (uint32_t)waiting->cnt && !n->paused) {
        rd_kafka_topic_partition_list_t *ready = rd_kafka_topic_partition_list_new(waiting->cnt);
        for (int i = 0; i < waiting->cnt; i++) {
            if (node_tenure_recorded(n->tenure, waiting->elems[i].partition)) {
                rd_kafka_topic_partition_list_add(ready, n->cfg->topic,
                                                  waiting->elems[i].partition);
            }
        }
        (void)rd_kafka_resume_partitions(n->rk, ready);
        rd_kafka_topic_partition_list_destroy(ready);
    }
    rd_kafka_topic_partition_list_destroy(waiting);
    if (count == 0) {
        return 0;
    }
    struct tenure_history *h = malloc(count * sizeof(*h));
    ASSERT(h != NULL);
    int rc =
        node_tenure_read(n->tenure, n->rk, n->cfg->topic, held, count, TENURE_KAFKA_TIMEOUT_MS, h);
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        n->history[held[i]] = h[i];
    }
    free(h);
    return rc == 0 ? tenure_release(n, held, count, false) : 0;
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    struct node *n = opaque;
    bool cooperative = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    n->stats->rebalances++;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        if (!cooperative) {
            give_up_unassigned(n, parts); /* the whole assignment: the rest is someone else's */
        }
        if (n->tenure != NULL && tenure_assign(n, parts) != 0) {
            return; /* the writer failed: the loop stops on its error */
        }
        choose_offsets(n, parts);
        uint32_t waiting = n->tenure != NULL ? tenure_record(n, parts) : 0;
        mark_assigned(n, parts, true);
        rd_kafka_error_t *error = NULL;
        if (cooperative) {
            error = rd_kafka_incremental_assign(rk, parts);
        } else {
            rd_kafka_assign(rk, parts);
        }
        if (error != NULL) {
            ds_log_error("kafka: assign: %s", rd_kafka_error_string(error));
            rd_kafka_error_destroy(error);
        }
        if (n->paused) {
            /* Back-pressure holds: new partitions start paused too. */
            (void)rd_kafka_pause_partitions(rk, parts);
        } else {
            /* librdkafka keeps a partition's pause across a revocation and a new assignment: a
             * partition paused in an earlier assignment (by back-pressure that lifted while
             * nothing was assigned, or while unrecorded as its holder) is resumed here. */
            (void)rd_kafka_resume_partitions(rk, parts);
        }
        if (!n->paused && waiting > 0) {
            /* Not read until recorded as their holder (tenure_tick). */
            rd_kafka_topic_partition_list_t *hold = unrecorded(n, parts);
            (void)rd_kafka_pause_partitions(rk, hold);
            rd_kafka_topic_partition_list_destroy(hold);
        }
        share_update(n);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        release_partitions(n, parts, rd_kafka_assignment_lost(rk) != 0);
        if (cooperative && !n->closing) {
            give_up(n, parts); /* cooperative: exactly the partitions that move */
        }
    } else {
        ds_log_error("kafka: rebalance: %s", rd_kafka_err2str(err));
    }
    mark_assigned(n, parts, false);
    for (int i = 0; n->tenure != NULL && i < parts->cnt; i++) {
        node_tenure_unassign(n->tenure, parts->elems[i].partition);
    }
    if (cooperative) {
        rd_kafka_error_t *error = rd_kafka_incremental_unassign(rk, parts);
        if (error != NULL) {
            rd_kafka_error_destroy(error);
        }
    } else {
        rd_kafka_assign(rk, NULL);
    }
}

/* ---- the consumer loop --------------------------------------------------------------------- */

static int take_message(struct node *n, const rd_kafka_message_t *m, int64_t now_ms)
{
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            ds_log_warn("kafka: consume: %s", rd_kafka_message_errstr(m));
        }
        return 0;
    }
    int32_t p = m->partition;
    if (p < 0 || p >= (int32_t)INGEST_NODE_PARTITIONS_MAX) {
        ds_log_error("kafka: partition %d is beyond the %u this node tracks", p,
                     INGEST_NODE_PARTITIONS_MAX);
        return -DS_ELIMIT;
    }
    if (p >= atomic_load(&n->partitions_seen)) {
        atomic_store(&n->partitions_seen, p + 1);
    }
    n->position[p] = m->offset + 1;
    n->messages++;
    struct ds_source source = {.partition = p, .offset = m->offset};
    const char *payload = m->payload != NULL ? m->payload : "";
    struct ds_event event;
    struct ingest_error error;
    if (ingest_decoder_decode(&n->decoder, payload, m->len, &event, &error) != 0) {
        return stage_add_reject(&n->stage, &error, &source, payload, m->len);
    }
    int32_t day = 0;
    uint32_t shard = 0;
    int rc = ingest_route(n->map, &event, &day, &shard);
    if (rc != 0) {
        return rc;
    }
    /* Heat in producer time (the message's timestamp): a backlog read late still shows the
     * rate it was written at. A message without one, or stamped ahead of this clock by more
     * than a skew allowance (a producer whose clock is wrong must not move the heat window
     * into the future), counts at the wall clock (read once per batch). */
    int64_t written_ms = rd_kafka_message_timestamp(m, NULL);
    if (written_ms < 0 || written_ms > now_ms + HEAT_CLOCK_SKEW_MS) {
        written_ms = now_ms;
    }
    node_heat_observe(n->heat, written_ms / 1000, day, shard, p, &event.customer_id);
    return stage_add_event(&n->stage, &event, day, shard, &source);
}

/* Lag of assigned partition p (messages behind the high watermark librdkafka last saw, from
 * the position read, or from the start chosen at assignment), or -1 when not known yet. */
static int64_t partition_lag(struct node *n, int32_t p)
{
    int64_t from = n->position[p] >= 0 ? n->position[p] : n->start[p];
    int64_t low = 0;
    int64_t high = -1;
    if (from < 0 || rd_kafka_get_watermark_offsets(n->rk, n->cfg->topic, p, &low, &high) != 0 ||
        high < 0) {
        return -1;
    }
    return high > from ? high - from : 0;
}

/* Samples the consumer lag of every partition (at most every LAG_SAMPLE_INTERVAL_NS, and at
 * least as often as the status line), tells the observer, and keeps the total for the log. */
static void lag_sample(struct node *n, uint64_t now)
{
    uint64_t interval = (uint64_t)n->cfg->status_interval_ms * 1000000u;
    interval = interval < LAG_SAMPLE_INTERVAL_NS ? interval : LAG_SAMPLE_INTERVAL_NS;
    if (now - n->last_lag_ns < interval) {
        return;
    }
    n->last_lag_ns = now;
    int64_t total = 0;
    int counted = 0;
    for (int32_t p = 0; p < n->assigned_end; p++) {
        int64_t lag = n->assigned[p] ? partition_lag(n, p) : -1;
        if (lag >= 0) {
            total += lag;
            counted++;
        }
        if (n->cfg->on_lag != NULL && (n->assigned[p] || n->lag_reported[p])) {
            /* An assigned partition whose lag is not known yet reports 0 behind: it has no
             * backlog the node knows of. */
            n->cfg->on_lag(p, n->assigned[p] ? (lag >= 0 ? lag : 0) : -1, n->cfg->observer_user);
        }
        n->lag_reported[p] = n->assigned[p];
    }
    n->lag_total = counted > 0 ? total : -1;
    n->lag_partitions = counted;
    if (n->cfg->on_lag != NULL && n->stats->rebalances > 0) {
        n->cfg->on_lag(-1, total, n->cfg->observer_user);
    }
    n->stats->lag = n->lag_total;
}

/* Samples the lag; logs it with the counters every status interval. */
static void status(struct node *n)
{
    uint64_t now = ds_clock_ns();
    lag_sample(n, now);
    if (now - n->last_status_ns < (uint64_t)n->cfg->status_interval_ms * 1000000u) {
        return;
    }
    n->last_status_ns = now;
    ds_log_info("node: %llu messages read, %llu events durable, %llu dead letters, "
                "consumer lag %lld over %d partitions%s, %llu back-pressure pauses",
                (unsigned long long)n->messages,
                (unsigned long long)atomic_load(&n->stage.accepted),
                (unsigned long long)atomic_load(&n->stage.rejected),
                (long long)(n->lag_total > 0 ? n->lag_total : 0), n->lag_partitions,
                n->paused ? " (paused)" : "", (unsigned long long)n->stats->pauses);
}

/* Consumer thread: pauses or resumes fetching of the whole assignment as cfg->should_pause
 * asks (back-pressure from the GSI builder). Returns 0, or the follower's error that stops the
 * node. */
static int apply_back_pressure(struct node *n)
{
    int asked = n->cfg->should_pause != NULL ? n->cfg->should_pause(n->cfg->observer_user) : 0;
    if (asked < 0) {
        return asked;
    }
    bool want = asked > 0;
    if (want == n->paused) {
        return 0;
    }
    rd_kafka_topic_partition_list_t *assigned = NULL;
    rd_kafka_resp_err_t err = rd_kafka_assignment(n->rk, &assigned);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        err = want ? rd_kafka_pause_partitions(n->rk, assigned)
                   : rd_kafka_resume_partitions(n->rk, assigned);
    }
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR && !want && n->tenure != NULL) {
        /* Not read until recorded as their holder (tenure_tick). */
        rd_kafka_topic_partition_list_t *hold = unrecorded(n, assigned);
        (void)rd_kafka_pause_partitions(n->rk, hold);
        rd_kafka_topic_partition_list_destroy(hold);
    }
    if (assigned != NULL) {
        rd_kafka_topic_partition_list_destroy(assigned);
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ds_log_warn("kafka: cannot %s consumption: %s", want ? "pause" : "resume",
                    rd_kafka_err2str(err));
        return 0; /* asked again on the next loop */
    }
    n->paused = want;
    n->stats->pauses += want ? 1 : 0;
    /* Debug only: under a tight bound this flips several times a second; the status line
     * counts the pauses. */
    ds_log_debug("node: consumption %s (back-pressure)", want ? "paused" : "resumed");
    return 0;
}

static int consume(struct node *n, const volatile int *stop)
{
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(n->rk);
    rd_kafka_message_t *msgs[CONSUME_BATCH];
    int rc = 0;
    while (rc == 0 && (stop == NULL || *stop == 0) && atomic_load(&n->fatal) == 0) {
        ssize_t got = rd_kafka_consume_batch_queue(queue, POLL_TIMEOUT_MS, msgs, CONSUME_BATCH);
        int64_t now_ms = ds_clock_realtime_ms();
        for (ssize_t i = 0; i < got; i++) {
            if (rc == 0) {
                rc = take_message(n, msgs[i], now_ms);
            }
            rd_kafka_message_destroy(msgs[i]);
        }
        if (rc == 0) {
            rc = stage_flush_older(&n->stage, HAND_OVER_AGE_NS);
        }
        if (rc == 0) {
            rc = node_heat_tick(n->heat, n->stats);
        }
        if (rc == 0) {
            rc = apply_back_pressure(n);
        }
        if (rc == 0) {
            rc = tenure_tick(n);
        }
        refresh_commits(n);
        status(n);
    }
    rd_kafka_queue_destroy(queue);
    if (rc == 0 && atomic_load(&n->fatal) != 0) {
        ds_log_error("kafka: fatal error: %s", n->fatal_reason);
        rc = -DS_EKAFKA;
    }
    return rc;
}

/* ---- the stop ------------------------------------------------------------------------------ */

/* Leaves the group (rd_kafka_consumer_close through a queue this thread serves, which runs the
 * revocation) until deadline_ns. Returns whether the consumer closed in time. */
static bool leave_group(struct node *n, uint64_t deadline_ns)
{
    ASSERT(n->rk != NULL);
    ASSERT(n->closing);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(n->rk);
    rd_kafka_error_t *error = rd_kafka_consumer_close_queue(n->rk, queue);
    bool closed = error == NULL;
    if (error != NULL) {
        ds_log_warn("kafka: leaving the group: %s", rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    }
    while (closed && !rd_kafka_consumer_closed(n->rk)) { /* bounded by deadline_ns */
        int slice_ms = left_ms(deadline_ns, STOP_CLOSE_SLICE_MS);
        if (slice_ms == 0) {
            ds_log_warn("kafka: leaving the group took the stop's whole budget (%d ms): "
                        "skipping the rest (the coordinator drops this member after "
                        "session.timeout.ms)",
                        STOP_KAFKA_BUDGET_MS);
            closed = false;
            break;
        }
        /* Not rd_kafka_queue_poll_callback: it asserts on an op that has no callback (seen in
         * test_run_faults), where this returns it as an event. */
        rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, slice_ms);
        if (ev != NULL && rd_kafka_event_type(ev) == RD_KAFKA_EVENT_REBALANCE) {
            /* Served by the rebalance callback when librdkafka calls it; by hand otherwise. */
            on_rebalance(n->rk, rd_kafka_event_error(ev), rd_kafka_event_topic_partition_list(ev),
                         n);
        }
        if (ev != NULL) {
            rd_kafka_event_destroy(ev);
        }
    }
    rd_kafka_queue_destroy(queue);
    return closed;
}

/* Consumer thread, once the loop has ended: what was read goes to storage, then Kafka hears of
 * it within the budget (file comment, "Stopping"). */
static void node_stop(struct node *n)
{
    ASSERT(n->rk != NULL);
    ASSERT(atomic_load(&n->stop_deadline_ns) == 0);
    uint64_t started = ds_clock_ns();
    uint64_t deadline = started + (uint64_t)STOP_KAFKA_BUDGET_MS * 1000000u;
    atomic_store(&n->stop_deadline_ns, deadline);
    /* Before the handle goes. Known limit: it waits for the consistent=true queries asking
     * through the positions handle, and librdkafka 2.0.2's rd_kafka_query_watermark_offsets
     * does not keep to its timeout with a frozen broker (docs/ARCHITECTURE.md "Stopping"). */
    node_watch_detach(n->cfg->watch);
    n->closing = true;
    int rc = n->stage_running ? stage_barrier(&n->stage) : 0;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (rc != 0) {
        ds_log_warn("stopping: the storage commit failed (%s): offsets past the durable "
                    "positions stay uncommitted",
                    ds_strerror(rc));
    } else {
        rd_kafka_topic_partition_list_t *assigned = NULL;
        if (rd_kafka_assignment(n->rk, &assigned) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            err = commit_release(n, assigned, false, deadline);
        }
        if (assigned != NULL) {
            rd_kafka_topic_partition_list_destroy(assigned);
        }
    }
    /* librdkafka's own errors are negative: no answer from a broker. */
    if (err < 0) {
        ds_log_warn("kafka: the broker did not answer the final commit (%s): skipping the group "
                    "leave; the next start resumes from the durable positions",
                    rd_kafka_err2str(err));
        n->left_group = false;
    } else {
        ds_log_info("kafka: leaving the group");
        n->left_group = leave_group(n, deadline);
    }
    ds_log_info("kafka: stopped in %llu ms (%s)",
                (unsigned long long)((ds_clock_ns() - started) / 1000000u),
                n->left_group ? "left the group" : "did not leave the group");
}

/* ---- setup --------------------------------------------------------------------------------- */

/* The handle committing to the positions group (file comment): a consumer that never
 * subscribes nor assigns, so its commits carry no generation and no group state refuses them. */
static int create_positions(struct node *n)
{
    char group[DS_PATH_MAX];
    int len = snprintf(group, sizeof(group), "%s%s", n->cfg->group, POSITIONS_GROUP_SUFFIX);
    if (len < 0 || (size_t)len >= sizeof(group)) {
        ds_log_error("kafka: group id '%s' is too long", n->cfg->group);
        return -DS_EUSAGE;
    }
    /* After the user's properties, which may name the consumer group. */
    const struct kafka_conf_pair fixed[] = {
        {"group.id", group}, {"client.id", "dayshard-positions"}, {"enable.auto.commit", "false"}};
    const struct kafka_conf_spec spec = {.brokers = n->cfg->brokers,
                                         .props = n->cfg->props,
                                         .fixed = fixed,
                                         .fixed_count = DS_ARRAY_LEN(fixed),
                                         .what = "the positions handle",
                                         .error_cb = on_error,
                                         .opaque = n};
    return kafka_conf_consumer(&spec, &n->positions);
}

static int create_consumer(struct node *n)
{
    const struct kafka_conf_pair defaults[] = {
        {"group.id", n->cfg->group},
        {"client.id", "dayshard"},
        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        {"auto.offset.reset", "earliest"},
        /* A fetch that finds no new data waits at most this long. librdkafka's default (500 ms)
         * stalls a node on the embedded broker, which holds an empty fetch for the whole wait
         * even when data arrives meanwhile: 10 ms doubled end-to-end throughput there
         * (bench_kafka_e2e, docs/PERFORMANCE.md "The Kafka path"). On real Kafka it costs ~100 idle
         * fetches/s per broker. */
        {"fetch.wait.max.ms", "10"},
        /* librdkafka 2.0.2 stops fetching while its queue holds queued.min.messages (counted
         * over all partitions of the consumer queue) and looks again only after up to a
         * second, even if the queue drained meanwhile: with the default (100,000, a seventh of
         * a second of work here) the node idled most of each second while catching up. A
         * million keeps the fetcher ahead (catch-up 675k -> 920k events/s, bench_kafka_e2e's
         * bimodal 300k/600k runs gone); queued.max.messages.kbytes (64 MiB of payload) still
         * bounds memory (peak RSS 75 -> 152 MiB while catching up). A smaller payload bound
         * stops the fetcher the same way: 16 MiB took catch-up from 693k to 437k events/s,
         * 8 MiB to 275k (orders model, medians of 3). docs/PERFORMANCE.md "The Kafka path". */
        {"queued.min.messages", "1000000"},
    };
    const struct kafka_conf_spec spec = {.brokers = n->cfg->brokers,
                                         .defaults = defaults,
                                         .default_count = DS_ARRAY_LEN(defaults),
                                         .props = n->cfg->props,
                                         .what = "the consumer",
                                         .error_cb = on_error,
                                         .rebalance_cb = on_rebalance,
                                         .opaque = n};
    int rc = kafka_conf_consumer(&spec, &n->rk);
    if (rc != 0) {
        return rc;
    }
    rd_kafka_poll_set_consumer(n->rk);
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, n->cfg->topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(n->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    return e == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : kafka_error("subscribe", e);
}

static int open_data(struct node *n)
{
    struct storage_config scfg;
    storage_config_defaults(&scfg);
    scfg.dir = n->cfg->data_dir;
    scfg.io_mode = (enum storage_io_mode)n->cfg->io_mode;
    scfg.model = (enum storage_model)n->cfg->model;
    scfg.retention_days = n->cfg->retention_days;
    int rc = storage_open(&scfg, &n->st);
    rc = rc == 0 ? shard_map_open(n->cfg->data_dir, n->cfg->base_shards, 0, &n->map) : rc;
    if (rc != 0) {
        return rc;
    }
    n->orders_model = storage_model(n->st) == STORAGE_MODEL_ORDERS;
    if (!n->orders_model) {
        rc = node_tenure_open(n->cfg->data_dir, n->cfg->watch, &n->tenure);
        if (rc != 0) {
            return rc;
        }
    }
    for (uint32_t p = 0; p < INGEST_NODE_PARTITIONS_MAX; p++) {
        int64_t next = storage_source_next(n->st, (int32_t)p);
        atomic_init(&n->durable[p], next);
        n->kafka_committed[p] = next;
        n->position[p] = -1;
        n->start[p] = -1;
        if (next >= 0) {
            atomic_store(&n->partitions_seen, (int)p + 1);
        }
    }
    snprintf(n->deadletters, sizeof(n->deadletters), "%s/deadletter.jsonl", n->cfg->data_dir);
    return 0;
}

static int run(struct node *n, const volatile int *stop)
{
    int rc = open_data(n);
    struct stage_config scfg = {.storage = n->st,
                                .deadletter_path = n->deadletters,
                                .deadletter_file_bytes = n->cfg->deadletter_file_bytes,
                                .source_name = n->cfg->topic,
                                .commit_interval_ms = n->cfg->commit_interval_ms,
                                .commit_events = 1u << 20,
                                .on_commit = on_commit,
                                .on_commit_user = n,
                                .on_reject = n->cfg->dlq_topic != NULL ? on_reject : NULL,
                                .on_reject_user = n};
    if (rc == 0 && n->cfg->dlq_topic != NULL) {
        rc = kafka_dlq_create(n->cfg->brokers, n->cfg->dlq_topic, n->cfg->props, &n->dlq);
    }
    rc = rc == 0 ? node_heat_open(n->cfg, n->map, &n->heat) : rc;
    rc = rc == 0 ? create_positions(n) : rc;
    rc = rc == 0 ? create_consumer(n) : rc;
    if (rc == 0) {
        /* The positions handle never fetches: on the consumer's connection a broker answers a
         * watermark query only after the fetch it holds (node_watch.c). */
        node_watch_attach(n->cfg->watch, n->positions, n->cfg->topic);
    }
    rc = rc == 0 ? stage_start(&n->stage, &scfg) : rc;
    n->stage_running = rc == 0;
    rc = rc == 0 ? consume(n, stop) : rc;
    if (n->rk != NULL) {
        node_stop(n);
    }
    if (n->stage_running) {
        int finished = stage_finish(&n->stage);
        n->stage_running = false;
        rc = rc != 0 ? rc : finished;
        n->stats->accepted = atomic_load(&n->stage.accepted);
        n->stats->rejected = atomic_load(&n->stage.rejected);
        n->stats->commits = atomic_load(&n->stage.commits);
    }
    return rc;
}

/* ---- teardown ------------------------------------------------------------------------------ */

/* The client handles being destroyed, on a thread of their own: rd_kafka_destroy waits until
 * every request in flight is answered or times out (an offset commit sent to a broker that
 * froze holds it for socket.timeout.ms, 60 s by default: measured on the positions handle), and
 * it cannot be cut short. A teardown that outlasts the stop's bound is left to the process exit;
 * the handles and the dead-letter producer are its own then. */
struct teardown {
    struct kafka_dlq *dlq;
    int dlq_flush_ms;
    rd_kafka_t *rk;
    rd_kafka_t *positions;
    atomic_bool done;
};

static void *teardown_main(void *arg)
{
    struct teardown *t = arg;
    kafka_dlq_destroy(t->dlq, t->dlq_flush_ms);
    /* Without a close: node_stop left the group, or chose not to (a close here would wait out
     * session.timeout.ms for an unreachable coordinator). */
    if (t->rk != NULL) {
        rd_kafka_destroy_flags(t->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    }
    /* The positions handle never joined a group: there is nothing to leave. */
    if (t->positions != NULL) {
        rd_kafka_destroy_flags(t->positions, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    }
    atomic_store(&t->done, true);
    return NULL;
}

static bool teardown_done(void *user)
{
    const struct teardown *t = user;
    return atomic_load(&t->done);
}

/* Destroys the node's client handles (after the stage stopped: the writer's commit hook uses
 * them until then), waiting until deadline_ns at most (the struct teardown comment). */
static void teardown(struct node *n, uint64_t deadline_ns)
{
    ASSERT(deadline_ns > 0);
    ASSERT(n->stage_running == false);
    struct teardown *t = calloc(1, sizeof(*t));
    pthread_t thread;
    if (t == NULL) {
        /* Out of memory at exit: destroy here, unbounded, rather than leave the producer's
         * records unsent. */
        struct teardown local = {.dlq = n->dlq, .rk = n->rk, .positions = n->positions};
        (void)teardown_main(&local);
        return;
    }
    uint64_t kafka_end = atomic_load(&n->stop_deadline_ns);
    *t = (struct teardown){
        .dlq = n->dlq,
        .dlq_flush_ms = kafka_end != 0 ? left_ms(kafka_end, STOP_KAFKA_BUDGET_MS) : 0,
        .rk = n->rk,
        .positions = n->positions,
    };
    atomic_init(&t->done, false);
    int rc = pthread_create(&thread, NULL, teardown_main, t);
    if (rc != 0) {
        (void)teardown_main(t);
        free(t);
        return;
    }
    if (ds_wait_until(teardown_done, t, deadline_ns, TEARDOWN_POLL_NS)) {
        ASSERT(pthread_join(thread, NULL) == 0);
        free(t);
        return;
    }
    ds_log_warn("kafka: the client's teardown outlasted the stop's bound (requests in flight to a "
                "broker that does not answer): left to the process exit");
    ASSERT(pthread_detach(thread) == 0);
}

int ingest_node_run(const struct ingest_node_config *cfg, struct ingest_node_stats *stats,
                    const volatile int *stop)
{
    ASSERT(cfg->brokers != NULL && cfg->topic != NULL && cfg->group != NULL);
    ASSERT(cfg->data_dir != NULL && cfg->commit_interval_ms >= 1);
    ASSERT(cfg->max_shards >= cfg->base_shards && cfg->max_shards <= SHARD_COUNT_MAX);
    memset(stats, 0, sizeof(*stats));
    stats->lag = -1;
    struct node *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        return -ENOMEM;
    }
    n->cfg = cfg;
    n->stats = stats;
    int rc = run(n, stop);
    uint64_t kafka_end = atomic_load(&n->stop_deadline_ns);
    teardown(n, (kafka_end != 0 ? kafka_end : ds_clock_ns()) +
                    (uint64_t)STOP_TEARDOWN_WAIT_MS * 1000000u);
    node_heat_close(n->heat);
    node_tenure_close(n->tenure);
    shard_map_close(n->map);
    storage_close(n->st);
    free(n);
    return rc;
}
