/*
 * ingest: turning outside bytes into order events and feeding them to storage.
 *
 * - ingest_decode(): one JSON order event (a Kafka message value or one line of a file) into a
 *   struct ds_event, or a named reason why it is a bad event (docs/EVENTS.md). Pure, no
 *   allocation, no recursion: any thread may call it on its own event and error structs.
 * - the file pipeline (ingest_file_run): read JSON lines, decode on one thread, route and append
 *   on a writer thread, dead-letter the bad lines, commit durably; used by `dayshard ingest`.
 * - the Kafka consumer path: the node (`dayshard run`), its dead-letter topic, back-pressure,
 *   and the follower of the shard map topic; plus the client properties and log routing that
 *   the producing side (loadgen/) shares, so both sides configure librdkafka one way.
 *
 * The producer, the workload generator, the embedded broker and the load test live in
 * loadgen/, above this folder: nothing here depends on them.
 */
#ifndef DS_INGEST_H
#define DS_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "storage/storage.h"

/* ---- decoding ------------------------------------------------------------------------------ */

/* The largest event accepted: real order events are ~100-300 bytes; 64 KiB leaves room for
 * generous unknown fields while bounding the work one bad message can cause. */
#define INGEST_EVENT_BYTES_MAX (64u * 1024u)
/* Nesting depth of (ignored) objects and arrays inside an event. */
#define INGEST_DEPTH_MAX 64u

/* Why an event was rejected. The names (ingest_reason_name) are part of the metrics and the
 * dead-letter format: append new reasons, never renumber. */
enum ingest_reason {
    INGEST_OK = 0,
    INGEST_NOT_JSON,         /* not valid JSON at all (syntax error, bad escape, bad literal) */
    INGEST_NOT_OBJECT,       /* valid JSON whose top level is not an object */
    INGEST_TOO_LARGE,        /* more than INGEST_EVENT_BYTES_MAX bytes */
    INGEST_TOO_DEEP,         /* nesting deeper than INGEST_DEPTH_MAX */
    INGEST_TRAILING_GARBAGE, /* bytes other than white space after the object */
    INGEST_DUPLICATE_FIELD,  /* a known field given twice */
    INGEST_BAD_UTF8,         /* a string that is not valid UTF-8 (or has an escaped NUL) */
    INGEST_MISSING_ORDER_ID, /* no order_id */
    INGEST_BAD_ORDER_ID,     /* order_id neither integer nor non-empty string (float, bool...) */
    INGEST_ORDER_ID_RANGE,   /* integer order_id outside 1..2^63-1 */
    INGEST_MISSING_CUSTOMER_ID,
    INGEST_BAD_CUSTOMER_ID,
    INGEST_CUSTOMER_ID_RANGE,
    INGEST_STRING_TOO_LONG,  /* id string over DS_ID_BYTES_MAX or status over DS_STATUS_BYTES_MAX */
    INGEST_MISSING_TS,       /* neither ts nor order_date */
    INGEST_BAD_TS,           /* ts neither RFC 3339 text nor integer epoch milliseconds */
    INGEST_TS_RANGE,         /* ts before 1970 or after 9999 (see DS_TS_MS_MIN/MAX) */
    INGEST_BAD_ORDER_DATE,   /* order_date not a valid YYYY-MM-DD */
    INGEST_BAD_STATUS,       /* status not a string */
    INGEST_BAD_AMOUNT,       /* amount not a JSON number */
    INGEST_AMOUNT_PRECISION, /* more than four decimal places */
    INGEST_AMOUNT_RANGE,     /* |amount| * 10000 does not fit in int64 */
    INGEST_BAD_VERSION,      /* version not an integer 0..2^63-1 (fraction, exponent, sign...) */
    INGEST_BAD_ITEMS,        /* items not an array of {"product", "quantity"} objects by the
                              * rules of docs/EVENTS.md (see ingest/decode.c) */
    INGEST_ITEMS_TOO_LARGE,  /* items over DS_ITEMS_COUNT_MAX entries or over
                              * DS_ITEMS_JSON_BYTES_MAX bytes of JSON text */
    INGEST_TOO_LATE,         /* a valid event of a day below the retention floor (storage.h,
                              * --retention-days): its day was or is being dropped */
    INGEST_REASON_COUNT,
};

/* Details of a rejection, for the dead-letter record and error messages. */
struct ingest_error {
    enum ingest_reason reason;
    size_t byte_offset; /* where in the input the problem was found */
};

/* Decodes len bytes of one JSON event into *event. Returns 0, or -EINVAL with *error filled
 * (event contents are then unspecified). json need not be NUL-terminated; it is borrowed.
 * `version` and `items` are validated (a bad one rejects the event) and version is set, but
 * the items are not kept: event->items is NULL and items_bytes 0. A caller that stores items
 * decodes with ingest_decoder_decode(). */
DS_MUST_USE int ingest_decode(const char *json, size_t len, struct ds_event *event,
                              struct ingest_error *error);

/* The memory an event's canonical items live in (struct ds_event.items): one per decoding
 * thread, embedded or allocated by the caller, no setup needed. */
struct ingest_decoder {
    /* private */
    uint8_t items[DS_ITEMS_BYTES_MAX];
};
/* ingest_decode() that also hands back the items: event->items points into decoder and stays
 * valid until the next call with the same decoder. */
DS_MUST_USE int ingest_decoder_decode(struct ingest_decoder *decoder, const char *json, size_t len,
                                      struct ds_event *event, struct ingest_error *error);

/* The order_id of one JSON event, for keying a Kafka message without decoding it all: when
 * ingest_decode() accepts the input, this returns 0 with the same order_id. When the object's
 * first member is a well-formed order_id it is taken without reading further (0 even if a later
 * member is bad: a bad event's key does not matter); otherwise the whole event is decoded and
 * -EINVAL returned when it is rejected. */
DS_MUST_USE int ingest_decode_order_id(const char *json, size_t len, struct ds_id *order_id);

/* "not_json", "missing_order_id", ...; "ok" for INGEST_OK. Never NULL. */
const char *ingest_reason_name(enum ingest_reason reason);

/* Writes one event as a canonical JSON line (no newline) into dst; returns the length, or
 * -ENOSPC if dst_capacity is too small. ingest_decode() of the output gives the event back,
 * version included; items are not written (the line carries what is counted, and a line with
 * items could need ~42 KiB). INGEST_JSON_LINE_BYTES_MAX bytes always suffice: the worst case
 * is 1097 bytes (two 64-byte string ids and a 32-byte status made of control characters, each
 * written as \u00XX, and a 19-digit version). */
#define INGEST_JSON_LINE_BYTES_MAX 1120u
DS_MUST_USE int ingest_event_format_json(const struct ds_event *event, char *dst,
                                         size_t dst_capacity);

/* ---- the file pipeline --------------------------------------------------------------------- */

/* Events per batch handed from the decode thread to the writer thread, and batches in flight:
 * 8 x 4096 events bound the memory between the threads (~7 MiB) and keep both cores busy. */
#define INGEST_BATCH_EVENTS 4096u
#define INGEST_BATCHES_MAX 8u

/* Dead letters rotate by size into DIR/deadletter.NNNNNNNN.jsonl (ingest/deadletter.h): a file
 * is closed and the next begun at the first commit after it reaches the rotation size. 64 MiB
 * by default keeps a file quick to grep and copy; 1 GiB at most, since larger files only make
 * retention (a rotated file goes once the retention floor passes the day it was closed)
 * coarser. */
#define INGEST_DEADLETTER_FILE_BYTES_DEFAULT (64ull << 20)
#define INGEST_DEADLETTER_FILE_BYTES_MAX (1ull << 30)

struct storage;
struct shard_map;

struct ingest_file_config {
    struct storage *storage; /* borrowed; used only by the writer thread while running */
    struct shard_map *map;   /* borrowed; used only by the decode thread while running */
    /* "DIR/deadletter.jsonl": names the dead-letter files, JSON lines of rejected input
     * appended and synced, rotated at deadletter_file_bytes (1..INGEST_DEADLETTER_FILE_BYTES_MAX,
     * default INGEST_DEADLETTER_FILE_BYTES_DEFAULT) */
    const char *deadletter_path;
    uint64_t deadletter_file_bytes;
    const char *source_name;     /* named in dead letters: the file path or "-" */
    uint32_t commit_interval_ms; /* group commit at least this often (1..60000) */
    uint64_t commit_events;      /* and at least every this many events */
    /* Skip the lines before the file source's committed next line (storage_source_next of
     * DS_SOURCE_FILE): re-running the same input after a failed run (a full disk) then stores
     * each line exactly once. Only for the same input: the position is a line number. */
    bool resume;
};

void ingest_file_config_defaults(struct ingest_file_config *cfg);

struct ingest_stats {
    uint64_t lines;    /* lines read, blank ones included */
    uint64_t blank;    /* empty or white-space lines, skipped */
    uint64_t accepted; /* events durable in storage */
    uint64_t rejected; /* lines in the dead-letter file */
    uint64_t rejected_by_reason[INGEST_REASON_COUNT];
    uint64_t commits;
    uint64_t bytes_read;
};

/* Reads JSON lines from fd until end of input: decodes and routes on the calling thread,
 * appends and group-commits on a writer thread, dead-letters bad lines. Returns 0 when every
 * accepted event is durable and every rejected line is in the durable dead-letter file; else
 * the first error (stats then tell what was read; nothing after the last commit is durable). */
DS_MUST_USE int ingest_file_run(const struct ingest_file_config *cfg, int fd,
                                struct ingest_stats *stats);

/* Day, shard count (the shard map gives a new day the base count and is synced at once) and
 * shard of an event; used by every source so that routing is one piece of code. Returns 0 or
 * the shard map's error. The map belongs to the calling thread. */
DS_MUST_USE int ingest_route(struct shard_map *map, const struct ds_event *event, int32_t *day,
                             uint32_t *shard);

/* Writes the --json summary of a run. */
void ingest_stats_json(const struct ingest_stats *stats, FILE *out);

/* ---- Kafka: client properties ---------------------------------------------------------- */

/* librdkafka properties passed through from `-X key=value` and `--config FILE`. Keys and values
 * are copied into the struct; the caller owns it (it is large: keep it off the stack of
 * threads with small stacks, or static in main). */
#define INGEST_KAFKA_PROPS_MAX 64u
#define INGEST_KAFKA_PROP_BYTES_MAX 512u
struct ingest_kafka_props {
    uint32_t count;
    char key[INGEST_KAFKA_PROPS_MAX][INGEST_KAFKA_PROP_BYTES_MAX];
    char value[INGEST_KAFKA_PROPS_MAX][INGEST_KAFKA_PROP_BYTES_MAX];
};

/* Adds "key=value"; returns 0, -DS_EUSAGE (no '=' or empty key), or -DS_ELIMIT. */
DS_MUST_USE int ingest_kafka_props_add(struct ingest_kafka_props *props, const char *key_value);
/* What kind of librdkafka client a configuration is for. */
enum ingest_kafka_client { INGEST_KAFKA_CONSUMER = 0, INGEST_KAFKA_PRODUCER };
/* Applies the properties that apply to a client of that kind to a librdkafka configuration
 * (rd_kafka_conf_t *, passed as void * so this header does not drag librdkafka in): one
 * librdkafka documents for consumers only is left out of a producer's, and the other way round
 * (a node's -X session.timeout.ms reaches its consumer, not its dead-letter producer, which
 * would warn that it ignores it), as rd_kafka_conf_properties_show's C/P column says. On a
 * refused property returns -DS_EUSAGE and writes librdkafka's reason into err. */
DS_MUST_USE int ingest_kafka_props_apply(const struct ingest_kafka_props *props,
                                         enum ingest_kafka_client client, void *rd_conf, char *err,
                                         size_t err_capacity);
/* Routes librdkafka's own log lines through dayshard's logger (rd_kafka_conf_set_log_cb on a
 * rd_kafka_conf_t *, passed as void * for the same reason): configuration warnings become
 * warnings, the rest debug lines, since what matters reaches the error callbacks. Every client
 * of the project, consumer or producer, installs it so a broker going away reads one way. */
void ingest_kafka_conf_set_log(void *rd_conf);

/* ---- Kafka: following the shard map topic (`dayshard produce --key partition`) ----------- */

/* A reader of "<topic>.shardmap" keeping S(day) in memory, for producers that salt their keys
 * with the shard map. One thread owns it (the producing one). */
struct ingest_shardmap_follower;
/* Connects and reads the topic to its end (at most a few seconds: a topic that is missing or
 * slow leaves every day at base_shards, with a warning). Returns 0, -DS_EUSAGE (a refused
 * property), -ENOMEM or -DS_EKAFKA. */
DS_MUST_USE int ingest_shardmap_follower_open(const char *brokers, const char *topic,
                                              const struct ingest_kafka_props *props,
                                              uint32_t base_shards,
                                              struct ingest_shardmap_follower **out);
/* S(day) as the topic says (reading what arrived since, at most every 100 ms), or 0 for a day
 * the topic does not name: the shards callback of loadgen's producer, user = the follower. */
uint32_t ingest_shardmap_follower_shards(int32_t day, void *user);
void ingest_shardmap_follower_close(struct ingest_shardmap_follower *f);

/* ---- Kafka: restoring quarantined ranges from the topic ----------------------------------- */

/* Reads each range `fsck --repair` quarantined (and no restore finished) again from the topic
 * it was consumed from, with a consumer assigned to exactly its partitions and offsets (no
 * group, no offset commit), and appends the events the range lost through storage_append on a
 * writer handle of data_dir, as a node would (kafka_restore.c says which events); then marks the
 * range done (storage_restore_mark), so a second run applies nothing twice. Takes the writer
 * lock: no node may run on data_dir meanwhile. */
struct ingest_restore_config {
    const char *data_dir;
    const char *brokers;
    const char *topic;
    const struct ingest_kafka_props *props; /* borrowed; may be NULL */
    uint32_t base_shards; /* the shard map's count for a day it does not know (default 4) */
    uint32_t timeout_ms;  /* a partition that gives nothing this long fails (default 30000) */
};
void ingest_restore_config_defaults(struct ingest_restore_config *cfg);

struct ingest_restore_report {
    uint64_t ranges;              /* quarantined ranges of committed data */
    uint64_t ranges_restored;     /* restored by this run */
    uint64_t ranges_done_before;  /* restored by an earlier run: skipped */
    uint64_t ranges_unrestorable; /* no Kafka source recorded (unknown, or file ingest) */
    uint64_t events_read;         /* messages read back from the ranges' offsets */
    uint64_t events_applied;      /* events appended */
    uint64_t offsets_missing;     /* offsets the topic no longer holds */
    uint64_t events_lost;         /* events model: the ranges' events not restored */
    struct storage_restore_orders_report orders; /* orders model */
};

/* Returns 0 (out filled), -DS_EUSAGE (a refused property), -DS_ELOCKED (a writer runs),
 * -DS_EKAFKA (the broker did not answer; ranges restored so far stay done), or another error of
 * storage; every error is logged. */
DS_MUST_USE int ingest_restore_run(const struct ingest_restore_config *cfg,
                                   struct ingest_restore_report *out);

/* ---- Kafka: the node (`dayshard run`) ------------------------------------------------------ */

/* Kafka partitions of the consumed topic one node tracks (storage keeps one offset each). */
#define INGEST_NODE_PARTITIONS_MAX 4093u

/* What a node reports after each durable group commit (totals since it started). */
/* The writer's maintenance between commits (orders model: segment compaction in slices) and
 * its longest stall: the longest one group commit held the writer, the commit itself (writes,
 * fdatasync, MANIFEST, a wait for the orders-by-id store's seal) and the compaction slice and
 * dead-letter work after it. Figures since the node started. */
struct ingest_writer_maintenance {
    uint64_t compactions;       /* partitions rewritten */
    uint64_t compaction_slices; /* slices run, of those and of one in progress */
    uint64_t compaction_slice_ns_max;
    bool compacting; /* one is in progress */
    uint64_t stall_ns_max;
};

struct ingest_node_progress {
    uint64_t events_durable;
    uint64_t rejected_by_reason[INGEST_REASON_COUNT]; /* durable dead letters, by reason */
    uint64_t commit_ns;  /* how long this group commit took: writes, fdatasync, manifest */
    uint64_t commit_seq; /* the storage commit sequence it made durable (storage_commit_seq) */
    bool orders_model;   /* the data directory counts orders: orders below is set */
    struct storage_order_stats orders;
    /* What the writer holds after this commit (storage.h): partitions, open segment files, the
     * orders-by-id store and its seals; and the retention floor and stream day (-1: none). */
    struct storage_held held;
    struct storage_ids_held ids;
    int32_t retention_floor;
    int32_t stream_day;
    struct ingest_writer_maintenance maintenance; /* with this commit's compaction slice */
};
/* Observers of a running node (for the query service's /metrics and /readyz). on_commit runs
 * on the writer thread after every durable commit. on_lag runs on the consumer thread about
 * once a second for each partition ever assigned (lag in messages behind the high watermark,
 * -1 while the partition is not assigned here), then, once the node has joined its group (its
 * first assignment, possibly empty), once more with partition -1 and the total lag. Both must
 * be quick and must not call back into the node. */
typedef void (*ingest_node_commit_fn)(const struct ingest_node_progress *progress, void *user);
typedef void (*ingest_node_lag_fn)(int32_t partition, int64_t lag, void *user);
/* Back-pressure from a follower of the stored data (the GSI builder): asked on the consumer
 * thread every loop (so it must be cheap); while it returns 1 the node pauses fetching of
 * every assigned partition (librdkafka pause), keeps serving rebalances and commits, and
 * resumes when it returns 0. A negated errno means the follower failed for good (its disk is
 * full, say): the node stops with that error rather than stay paused forever. */
typedef int (*ingest_node_pause_fn)(void *user);
/* Heat (shard/shard.h): on the consumer thread once a second, the node's heat report (write
 * rates per partition, day, Kafka partition and customer; the growths of the shard map). The
 * report is the node's: copy what is needed before returning. */
struct shard_heat_report;
struct shard_heat_history;
typedef void (*ingest_node_heat_fn)(const struct shard_heat_report *report, void *user);

/* Read-your-writes (the query service's consistent=true): which partitions a node is
 * assigned and where the topic's partitions end now, for any thread (ingest/node_watch.c).
 * The caller creates it, hands it to the node in ingest_node_config.watch and destroys it
 * after ingest_node_run returned; the node publishes a broker handle and its assignment into
 * it while it consumes. */
struct ingest_node_watch;
DS_MUST_USE int ingest_node_watch_create(struct ingest_node_watch **out);
/* NULL is fine. */
void ingest_node_watch_destroy(struct ingest_node_watch *w);
/* One assigned partition: the high watermark the broker reports (the next offset it will
 * write), and the offset from which this node stores the partition (below it: another
 * member's data, or gone from the log). Returns 0, or a code that stops the visit. */
typedef int (*ingest_node_position_fn)(int32_t partition, int64_t high_watermark,
                                       int64_t stored_from, void *user);
/* Any thread: for every partition the node is assigned now, asks the broker for its high
 * watermark (all of them within timeout_ms, >= 1) and calls fn, in partition order.
 * *generation gets the generation of the assignment visited. Returns the number of
 * partitions (0: an empty assignment), -EAGAIN (the node is not consuming: starting, not yet
 * in its group, in a rebalance, stopping), -ETIMEDOUT (the broker did not answer in time),
 * -DS_EKAFKA (it answered an error; logged), -ENOMEM, or fn's code. */
DS_MUST_USE int ingest_node_watch_positions(struct ingest_node_watch *w, uint32_t timeout_ms,
                                            ingest_node_position_fn fn, void *user,
                                            uint64_t *generation);
/* Any thread, cheap: changes whenever partitions are assigned or revoked and when the node
 * starts or stops consuming. */
uint64_t ingest_node_watch_generation(struct ingest_node_watch *w);
/* The node's claims (events model): for each Kafka partition it holds a run of, the offset the
 * run started at and whether it is open (the node is assigned the partition now: the run goes
 * on) or ends at the node's stored next offset. Returns 0, or a code that stops the visit. */
typedef int (*ingest_node_claim_fn)(int32_t partition, int64_t from, bool open, void *user);
/* Any thread: calls fn per claim in partition order. Returns 0, -ENOENT when the node makes no
 * claims (the orders model, or not started), or fn's code. */
DS_MUST_USE int ingest_node_watch_claims(struct ingest_node_watch *w, ingest_node_claim_fn fn,
                                         void *user);

struct ingest_node_config {
    const char *brokers;
    const char *topic;
    const char *group;
    const char *data_dir;
    uint32_t base_shards;
    int io_mode;                            /* enum storage_io_mode */
    int model;                              /* enum storage_model (0: the directory's) */
    uint32_t retention_days;                /* storage_config.retention_days (0: keep all) */
    uint64_t deadletter_file_bytes;         /* as in struct ingest_file_config */
    const struct ingest_kafka_props *props; /* may be NULL */
    uint32_t commit_interval_ms;            /* group commit (and Kafka offset commit) cadence */
    uint32_t status_interval_ms;            /* how often the consumer lag is logged */
    const char *dlq_topic; /* also send dead letters to this topic (NULL: the file only) */
    /* Adaptive write sharding (docs/ARCHITECTURE.md "Hot keys"): a day whose write rate (producer
     * time) exceeds shard_capacity_eps per shard grows, up to max_shards; 0 keeps counts fixed. */
    uint32_t shard_capacity_eps;
    uint32_t max_shards;
    bool no_shardmap_topic;            /* do not follow or publish "<topic>.shardmap" */
    ingest_node_commit_fn on_commit;   /* may be NULL */
    ingest_node_heat_fn on_heat;       /* may be NULL */
    ingest_node_lag_fn on_lag;         /* may be NULL */
    ingest_node_pause_fn should_pause; /* may be NULL */
    void *observer_user;
    struct ingest_node_watch *watch; /* may be NULL; retained until ingest_node_run returns */
    /* The heat console's history (shard.h): the consumer thread records every completed
     * second and every growth into it. May be NULL; retained until ingest_node_run returns. */
    struct shard_heat_history *heat_history;
};
void ingest_node_config_defaults(struct ingest_node_config *cfg);

struct ingest_node_stats {
    uint64_t accepted; /* events durable in storage */
    uint64_t rejected; /* bad events in the dead-letter file */
    uint64_t commits;
    uint64_t rebalances; /* assignments and revocations served */
    uint64_t pauses;     /* times should_pause stopped consumption */
    uint64_t growths;    /* shard count growths this node made (adaptive sharding) */
    uint64_t merged;     /* growths taken from the shard map topic */
    int64_t lag;         /* consumer lag at the last status (messages), -1 unknown */
};

/* Runs a consumer group member until *stop becomes non-zero: decodes, routes and appends;
 * commits Kafka offsets only once the data (and dead letters) holding them are durable; on a
 * restart resumes every partition from max(its own durable position, the group's committed
 * offset); on revocation commits and syncs before letting partitions go. Once *stop is set it
 * returns within 10 s whatever the broker's state, with everything read durable (kafka_node.c,
 * "Stopping"). Returns 0 after a clean stop, or the error that stopped it (-DS_EKAFKA for a fatal
 * client error, a storage error, -DS_ELOCKED when another node writes the data directory). */
DS_MUST_USE int ingest_node_run(const struct ingest_node_config *cfg,
                                struct ingest_node_stats *stats, const volatile int *stop);

#endif /* DS_INGEST_H */
