/*
 * Private to ingest/: the shard map topic, "<topic>.shardmap" (docs/FORMATS.md). Nodes
 * publish every growth of a day's shard count to it and follow it, so that several nodes (and
 * `dayshard produce --key partition`) agree on one map without a coordinator of their own:
 * merging is the maximum per day, so maps never conflict, and a compacted topic keyed by day
 * keeps one message per day however long it runs. Each node's map file stays its own truth:
 * what the topic says is merged into it (durably, before any event uses it), never the other
 * way round.
 *
 * A message is keyed "YYYY-MM-DD" with the value {"day":"YYYY-MM-DD","shards":S,"at":"...Z",
 * "reason":"...","from":"host:pid"}. Compaction keeps the last message of a day, which may be
 * a smaller count published late by a node that had not yet seen a larger one: a node that
 * reads another node's count below its own republishes its own, so the compacted topic
 * converges to the maximum too ("from" tells a node its own messages, which it skips).
 *
 * One thread owns a struct shardmap_topic (the node's consumer thread, or the producer's).
 */
#ifndef DS_INGEST_SHARDMAP_TOPIC_H
#define DS_INGEST_SHARDMAP_TOPIC_H

#include "ingest/ingest.h"
#include "shard/shard.h"

#define SHARDMAP_TOPIC_SUFFIX ".shardmap"
/* How long a start waits to read the topic to its end before going on without it. */
#define SHARDMAP_TOPIC_CATCH_UP_MS 5000

struct shardmap_topic;

/* Called for each (day, shard count) read from the topic; own is true for a message this
 * handle published (a node reading back its own earlier, smaller count need not answer it). */
typedef void (*shardmap_topic_fn)(int32_t day, uint32_t shard_count, bool own, void *user);

/* Connects to "<data_topic>.shardmap" (creating it compacted where the cluster allows; the
 * embedded broker creates it itself) and reads it from the beginning. group names the reading
 * handle's group ("<group>.dayshard-shardmap"); it never commits. Returns 0, -DS_EUSAGE (a
 * refused property) or -DS_EKAFKA. */
DS_MUST_USE int shardmap_topic_open(const char *brokers, const char *data_topic, const char *group,
                                    const struct ingest_kafka_props *props,
                                    struct shardmap_topic **out);
void shardmap_topic_close(struct shardmap_topic *t);
/* The topic's name. */
const char *shardmap_topic_name(const struct shardmap_topic *t);
/* Reads what the topic held when called (up to its high watermarks), waiting at most
 * timeout_ms; fn gets every message. Returns messages read, or -DS_EKAFKA when the topic could
 * not be read in time (then fn got what was read). */
DS_MUST_USE int shardmap_topic_catch_up(struct shardmap_topic *t, int timeout_ms,
                                        shardmap_topic_fn fn, void *user);
/* Without blocking: serves delivery reports and passes newly arrived messages to fn. Returns
 * messages read. */
int shardmap_topic_poll(struct shardmap_topic *t, shardmap_topic_fn fn, void *user);
/* Publishes a day's count (asynchronously; a failed delivery is logged). */
void shardmap_topic_publish(struct shardmap_topic *t, int32_t day, uint32_t shard_count,
                            int64_t at_ms, const char *reason);

/* Merges (day, count) into a map that routes events: a count above the map's is made durable
 * (shard_map_grow_sync) before returning. Returns 1 when the map grew, 0 when it had as much,
 * or the map's error. */
DS_MUST_USE int shardmap_topic_merge(struct shard_map *map, int32_t day, uint32_t shard_count);

#endif /* DS_INGEST_SHARDMAP_TOPIC_H */
