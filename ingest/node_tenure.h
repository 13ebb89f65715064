/*
 * Private to ingest/: a node's tenures in the events model (node_tenure.c). Who held a Kafka
 * partition from which offset is kept in the consumer group's committed offset metadata
 * (tenure.h's history); this node records its own entry before it reads a partition it was
 * assigned, gives up what it stored past a later holder's start before it reads anything, and
 * reports the start of its latest run of each partition to the query service (its claims).
 */
#ifndef DS_INGEST_NODE_TENURE_H
#define DS_INGEST_NODE_TENURE_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>

#include "ingest/ingest.h"
#include "ingest/tenure.h"

struct node_tenure;

/* Loads DIR/NODE_ID (created on first use) and DIR/TENURES, and publishes the known runs as
 * claims into watch (may be NULL). Returns 0, or tenure_node_id_load's / tenure_runs_load's
 * errors (logged with the file). */
DS_MUST_USE int node_tenure_open(const char *dir, struct ingest_node_watch *watch,
                                 struct node_tenure **out);
void node_tenure_close(struct node_tenure *t);

/* Any thread, for a commit to the consumer group: whether partition p may be committed by this
 * node (it is assigned p and its history entry is recorded); if so tp gets the history as its
 * metadata (a copy the list frees). A partition this node does not hold now is never committed
 * to the group: the broker accepts a commit of any partition from any member of the current
 * generation, and this node's offset and history would replace the holder's. */
bool node_tenure_commit_meta(struct node_tenure *t, int32_t p, rd_kafka_topic_partition_t *tp);

/* Consumer thread: reads the committed histories of parts[0..count) through rk (the group's
 * consumer) within timeout_ms into out. A partition whose history cannot be read or parsed
 * gets an empty one (logged). Returns 0, or -ETIMEDOUT / -DS_EKAFKA when none could be read
 * (every history empty then). */
DS_MUST_USE int node_tenure_read(struct node_tenure *t, rd_kafka_t *rk, const char *topic,
                                 const int32_t *parts, uint32_t count, int timeout_ms,
                                 struct tenure_history *out);

/* Whether this node, holding p up to next (exclusive), must give up [*lo, inf) of it before it
 * reads anything (tenure_release_point with this node's id). */
bool node_tenure_release_point(const struct node_tenure *t, const struct tenure_history *h,
                               int64_t next, int64_t *lo);
/* Consumer thread, after a release of [lo, inf) of p is durable: the latest run ends at lo. */
void node_tenure_released(struct node_tenure *t, int32_t p, int64_t lo);

/* Consumer thread, at assignment: records this node's entry (its id, start) at the head of h
 * for each of parts[0..count), committing offset start and the new history to the group
 * through rk within timeout_ms, and saves start as the partition's run (DIR/TENURES) so the
 * claim is on disk before the first event of the run is stored. A partition that goes on
 * where this node's stored run ends (continues[i]: h's newest entry is this node's and start
 * is its stored next offset) keeps its entry and its run: one contiguous run, one entry, so
 * restarts do not push other holders' entries out of the history. A partition whose commit
 * the group refused stays unrecorded (node_tenure_recorded): the caller must not read it yet.
 * Returns the number recorded. */
uint32_t node_tenure_record(struct node_tenure *t, rd_kafka_t *rk, const char *topic,
                            const int32_t *parts, const int64_t *start, const bool *continues,
                            const struct tenure_history *h, uint32_t count, int timeout_ms);
/* This node's id (DIR/NODE_ID). */
uint64_t node_tenure_id(const struct node_tenure *t);
bool node_tenure_recorded(const struct node_tenure *t, int32_t p);
/* Consumer thread: p is revoked (no more commits of it to the group). */
void node_tenure_unassign(struct node_tenure *t, int32_t p);

/* Consumer thread: a partition this node holds but is not assigned needs no more checks once
 * its history names a later holder that started at or after the node's next offset (nothing
 * this node holds can be held twice, and it stores no more of p). */
void node_tenure_settle(struct node_tenure *t, int32_t p, bool settled);
bool node_tenure_settled(const struct node_tenure *t, int32_t p);

#endif /* DS_INGEST_NODE_TENURE_H */
