/*
 * Private to ingest/: a node's heat and adaptive sharding (docs/ARCHITECTURE.md). The node's
 * consumer thread owns all of it: it observes every routed event (no lock on that path), and
 * once per loop ticks, which once a second (when the heat's second moves) plans growth, makes
 * each growth durable in the shard map before any event uses it, records it in DIR/shardmap.log,
 * publishes it on "<topic>.shardmap", merges what other nodes published, and hands the observer
 * a report.
 *
 * A failed map write stops growth for the rest of the node's life (logged, in the report):
 * events keep the shard counts the durable map has, so nothing is lost or misplaced.
 */
#ifndef DS_INGEST_NODE_HEAT_H
#define DS_INGEST_NODE_HEAT_H

#include "ingest/ingest.h"
#include "shard/shard.h"

struct node_heat;

/* Opens the heat tracker, and the shard map topic unless cfg->no_shardmap_topic; reads the
 * topic to its end and merges it into map (durably) before returning. map is borrowed until
 * node_heat_close. Returns 0, -ENOMEM, a map error, or the topic's -DS_EUSAGE. */
DS_MUST_USE int node_heat_open(const struct ingest_node_config *cfg, struct shard_map *map,
                               struct node_heat **out);
void node_heat_close(struct node_heat *nh);
/* One routed event; second is the message's producer time (epoch seconds). */
void node_heat_observe(struct node_heat *nh, int64_t second, int32_t day, uint32_t shard,
                       int32_t source, const struct ds_id *customer);
/* This node reads `assigned` of the topic's `total` partitions (0 when unknown): it sees that
 * share of a day's writes, so it grows days at that share of the capacity (at least 1/s). */
void node_heat_share(struct node_heat *nh, uint32_t assigned, uint32_t total);
/* Every loop of the consumer thread. Returns 0, or a map error from merging a day that the map
 * must hold (the node stops: a map it cannot write cannot route new days either). */
DS_MUST_USE int node_heat_tick(struct node_heat *nh, struct ingest_node_stats *stats);

#endif /* DS_INGEST_NODE_HEAT_H */
