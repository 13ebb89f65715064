/*
 * Private to ingest/: the node's side of struct ingest_node_watch (ingest.h). The consumer
 * thread publishes a handle to ask the broker through while it consumes, and every change of
 * its assignment; the watch answers other threads from that (node_watch.c).
 */
#ifndef DS_INGEST_NODE_WATCH_H
#define DS_INGEST_NODE_WATCH_H

#include <librdkafka/rdkafka.h>

#include "ingest/ingest.h"

/* Queries go through rk (a handle of the node that does not fetch; borrowed until
 * node_watch_detach) about topic (borrowed likewise). w may be NULL (no watch): then these
 * calls do nothing. */
void node_watch_attach(struct ingest_node_watch *w, rd_kafka_t *rk, const char *topic);
/* The handle goes away: no new query starts, and this waits for the ones in flight (each
 * bounded by its request's timeout). */
void node_watch_detach(struct ingest_node_watch *w);
/* Consumer thread, in the rebalance callback: parts (with the start offsets chosen) become
 * assigned (on) or are revoked (!on). */
void node_watch_assign(struct ingest_node_watch *w, const rd_kafka_topic_partition_list_t *parts,
                       bool on);

/* Events model, consumer thread: the start of the node's latest run of partition (the offset
 * it last started reading it at, DIR/TENURES), or -1 when it holds no run it can name. */
void node_watch_claim(struct ingest_node_watch *w, int32_t partition, int64_t from);
/* Events model: the node makes claims (none yet is a claim too: it holds no run). */
void node_watch_claims_enable(struct ingest_node_watch *w);

#endif /* DS_INGEST_NODE_WATCH_H */
