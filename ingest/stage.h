/*
 * Private to ingest/: the writer stage shared by the file pipeline and the Kafka node.
 *
 * A source thread (file reader or Kafka consumer) decodes and routes events into batches and
 * hands them to the writer thread through a bounded SPSC ring; the writer appends the events,
 * writes the dead letters, and group-commits: dead-letter file flushed and synced, its length
 * and the source offsets recorded in the same storage commit. After each commit an optional
 * hook runs on the writer thread (the Kafka node commits consumer offsets there). Empty batches
 * come back through a second ring, so memory between the threads is fixed.
 *
 * Batches are DATA, BARRIER (commit now and acknowledge; used before a Kafka rebalance lets
 * partitions go) or LAST (commit and stop).
 */
#ifndef DS_INGEST_STAGE_H
#define DS_INGEST_STAGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "ingest/deadletter.h"
#include "ingest/ingest.h"
#include "shard/shard.h"
#include "storage/storage.h"

/* Raw bytes of dead letters one batch can carry: four maximal events. */
#define STAGE_RAW_BYTES (4u * INGEST_EVENT_BYTES_MAX)
#define STAGE_REJECTS_MAX 1024u
/* Canonical items (ds_event.items) one batch carries: 37 events of the largest size, thousands
 * of typical ones; a batch is handed over early rather than overflow it. */
#define STAGE_ITEMS_BYTES (256u * 1024u)
/* A dead-letter record: the raw bytes and the source name escaped (at most 6 bytes each, as
 * \u00XX) plus the other fields. */
#define STAGE_RECORD_BYTES (6u * (INGEST_EVENT_BYTES_MAX + DS_PATH_MAX) + 512u)

struct stage_event {
    struct ds_event event;
    int32_t day;
    uint32_t shard;
    struct ds_source source;
};

struct stage_reject {
    enum ingest_reason reason;
    uint32_t byte_offset;
    struct ds_source source;
    uint32_t raw_offset; /* into batch raw */
    uint32_t raw_len;
    bool truncated;
};

enum stage_batch_kind { STAGE_DATA = 0, STAGE_BARRIER, STAGE_LAST };

struct stage_batch {
    enum stage_batch_kind kind;
    uint32_t count;
    uint32_t reject_count;
    uint32_t raw_used;
    uint64_t barrier_seq;
    uint64_t first_ns; /* when the first item went in (for handing over partial batches) */
    struct stage_event items[INGEST_BATCH_EVENTS];
    struct stage_reject rejects[STAGE_REJECTS_MAX];
    char raw[STAGE_RAW_BYTES];
    uint32_t basket_used;
    uint8_t basket[STAGE_ITEMS_BYTES]; /* the events' canonical items (event.items points here) */
    /* A barrier that gives up source partitions (stage_give_up): after the batch's events are
     * committed, the writer releases them (storage_release_source) and commits again. */
    uint32_t release_count;
    int32_t release[INGEST_NODE_PARTITIONS_MAX];
    int64_t release_from[INGEST_NODE_PARTITIONS_MAX]; /* events model: release offsets >= it */
};

/* Runs on the writer thread after every successful storage commit. */
typedef void (*stage_commit_fn)(struct storage *st, void *user);
/* Runs on the writer thread for each dead-letter record written to the file (one JSON object,
 * no newline; borrowed for the call), before the commit that makes it durable. */
typedef void (*stage_reject_fn)(const char *record, size_t len, int32_t partition, void *user);

struct stage_config {
    struct storage *storage;        /* used only by the writer thread while the stage runs */
    const char *deadletter_path;    /* "DIR/deadletter.jsonl": names the files (deadletter.h) */
    uint64_t deadletter_file_bytes; /* rotation size, 1..DEADLETTER_FILE_BYTES_MAX */
    const char *source_name;        /* named in dead letters ("-" or a path or a topic) */
    uint32_t commit_interval_ms;
    uint64_t commit_events;
    stage_commit_fn on_commit; /* may be NULL */
    void *on_commit_user;
    stage_reject_fn on_reject; /* may be NULL */
    void *on_reject_user;
};

struct stage {
    struct stage_config cfg;
    struct ds_ring full;
    struct ds_ring free;
    struct stage_batch *batches;
    struct stage_batch *current; /* the source thread's batch being filled */
    pthread_t writer;
    bool started;
    struct deadletter deadletter; /* writer thread while it runs */
    char *record;                 /* one dead-letter record being formatted (STAGE_RECORD_BYTES) */
    atomic_int error;             /* first writer error, 0 while fine */
    atomic_uint_least64_t barrier_done;
    uint64_t barrier_next;
    /* written by the writer thread, read after join or through the atomics below */
    atomic_uint_least64_t accepted;
    atomic_uint_least64_t rejected;
    atomic_uint_least64_t commits;
    uint64_t last_commit_ns; /* writer thread: how long the last commit took (read in on_commit) */
    struct ingest_writer_maintenance maintenance; /* writer thread (read in on_commit) */
    uint64_t slow_commits;     /* writer thread: slow commits not yet told (stage.c) */
    uint64_t slow_reported_ns; /* when they were last told, 0 never */
    atomic_uint_least64_t rejected_by_reason[INGEST_REASON_COUNT];
};

/* Opens the dead-letter files (deadletter_open: cut back to the storage's committed dead-letter
 * position), starts the writer thread. Returns 0 or a negated errno. */
DS_MUST_USE int stage_start(struct stage *s, const struct stage_config *cfg);
/* Source thread: room for one more event in the current batch (handing the full one over);
 * its items (borrowed) are copied into the batch. */
DS_MUST_USE int stage_add_event(struct stage *s, const struct ds_event *event, int32_t day,
                                uint32_t shard, const struct ds_source *source);
/* Source thread: a bad event for the dead-letter file; its source offset advances with the
 * commit that makes the dead letter durable. */
DS_MUST_USE int stage_add_reject(struct stage *s, const struct ingest_error *error,
                                 const struct ds_source *source, const char *raw, size_t len);
/* Source thread: hands the current batch over if it holds anything older than age_ns. */
DS_MUST_USE int stage_flush_older(struct stage *s, uint64_t age_ns);
/* Source thread: commit everything handed over so far and wait for it (bounded by the disk).
 * Returns 0 or the writer's error. */
DS_MUST_USE int stage_barrier(struct stage *s);
/* Source thread: a barrier that also gives up partitions. Orders model: their orders leave this
 * data directory (storage_release_source; from is ignored and may be NULL). Events model: the
 * events of partitions[i] at offsets >= from[i] leave it (storage_release_range). Returns when
 * it is durable, with stage_barrier's errors. */
DS_MUST_USE int stage_give_up(struct stage *s, const int32_t *partitions, const int64_t *from,
                              uint32_t count);
/* Source thread: hand over what is left, commit, stop the writer, close the dead-letter file.
 * Returns 0 or the first error. Safe to call once after stage_start succeeded. */
DS_MUST_USE int stage_finish(struct stage *s);
/* The writer's error so far (0 while fine); any thread. */
int stage_error(const struct stage *s);

#endif /* DS_INGEST_STAGE_H */
