/*
 * The types of storage's public API: the configuration, totals, positions, orders, reports and
 * the callbacks of scans and visits. Part of the public API through storage.h, which includes
 * it and documents the functions that use each type; storage's own headers include this one
 * instead of the facade, so that no lower layer depends on the facade.
 */
#ifndef DS_STORAGE_TYPES_H
#define DS_STORAGE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "storage/io.h"
#include "storage/limits.h"
#include "storage/model.h"

struct storage_config {
    const char *dir;              /* the data directory (created if missing, unless read-only) */
    bool read_only;               /* a reader: never writes, sees the last committed state */
    enum storage_io_mode io_mode; /* used when io is NULL */
    struct storage_io *io;        /* injected backend (borrowed), or NULL to create one */
    uint32_t block_events_max;    /* seal a block at this many events (<= BLOCK_EVENTS_MAX) */
    uint64_t segment_bytes_max;   /* roll a segment past this size */
    uint64_t open_bytes_max;      /* memory of all open blocks */
    int zstd_level;               /* 1..19 */
    /* Orders model: storage_compact_due rewrites a partition once it has this many dead rows
     * making a quarter of its rows or more (default STORAGE_COMPACT_DEAD_ROWS_MIN; 0: never, for
     * measuring what superseded versions cost, `ingest --no-compact`). */
    uint64_t compact_dead_rows_min;
    /* The time one storage_compact_due call works (default and most STORAGE_COMPACT_SLICE_NS;
     * at least 1: every slice then does one block, as tests use to stop at each slice). */
    uint64_t compact_slice_ns;
    /* Retraction rows one storage_release_range call appends before -EAGAIN (0: the default,
     * STORAGE_RELEASE_ROWS_MAX, also the most; tests set a few to stop at each). */
    uint32_t release_rows_max;
    uint32_t partitions_max; /* partitions tracked (<= STORAGE_PARTITIONS_MAX) */
    /* Writers: keep the newest retention_days days of stream time (see "retention" below);
     * 0 (the default) keeps every day. <= STORAGE_RETENTION_DAYS_MAX. */
    uint32_t retention_days;
    /* The data model: RECORDED (the default) takes the directory's; an explicit one must match
     * it (-DS_EUSAGE otherwise) and is the model a writer records when it creates dir. */
    enum storage_model model;
};

/* Aggregates of one partition, optionally restricted to one status. Counts and sums are net:
 * rows stored minus retraction rows (the orders model: a retraction cancels an earlier row with
 * the same fields, in the same partition, status and hour), a retraction's amount subtracted.
 * Summaries add signed block cells; the totals handed out are never negative (see
 * storage_partition_totals). */
struct storage_hour_total {
    int64_t count;
    ds_i128 amount_units;
};

struct storage_partition_total {
    uint64_t count; /* net: inserted rows - retraction rows */
    ds_i128 amount_units;
    uint64_t blocks;
    uint64_t bytes; /* on-disk bytes of the partition's committed blocks */
    /* Rows stored (orders model: current versions, superseded ones and their retractions;
     * rows - count of them are dead until a compaction removes them). */
    uint64_t rows;
    int64_t ts_min_ms, ts_max_ms; /* valid when count > 0 */
    struct storage_hour_total hours[24];
    /* Committed blocks whose payload fails its CRC (their events are counted, from their intact
     * headers) and ranges whose block header is unreadable (their events are not): the count
     * is not backed by readable records until `dayshard fsck --repair` quarantines them. */
    uint64_t damaged_blocks;
};

/* Totals of one day over its partitions of shards below shard_count, for all statuses: the sums
 * of storage_partition_totals over them (count, amount, blocks, bytes, rows, damaged blocks,
 * and hours; not ts_min_ms/ts_max_ms), from a per-day aggregate a reader keeps current as its
 * refreshes take in commits (only the partitions a commit moved are read again), so a count
 * costs one lookup per day rather than one per shard. */
struct storage_day_total {
    uint64_t count;
    ds_i128 amount_units;
    uint64_t blocks;
    uint64_t bytes;
    uint64_t rows;
    uint64_t damaged_blocks;
    struct storage_hour_total hours[24];
    uint32_t shard_end; /* 1 + the highest shard of the day with committed data, 0 while none */
};

/* Visits every committed event of a partition in append order, decompressing blocks and
 * verifying them (GSI rebuild, tests); retraction rows included, with event->retract set. Stops
 * early when fn returns non-zero and returns that value; -DS_ECORRUPT for a block that fails a
 * check. */
typedef int (*storage_event_fn)(const struct ds_event *event, void *user);
/* The same visit with each row's source (storage_partition_scan_sources): its Kafka partition
 * and offset (or DS_SOURCE_FILE and line), or NULL for a row stored without one, and for every
 * row of a block written before rows carried their source (block versions 1-3: the orders
 * model, and the events model before version 4). Borrowed for the call. */
typedef int (*storage_source_event_fn)(const struct ds_event *event, const struct ds_source *source,
                                       void *user);

/* A place in a partition's committed data: the segment and byte offset of the next block to
 * read. {0, 0} is the start. Positions are stable across writer restarts (committed blocks
 * never move), so a follower can persist them. */
struct storage_position {
    uint32_t segment_id;
    uint64_t offset;
};

/* Visits the partitions that have committed data, by ascending (day, shard). */
typedef int (*storage_partition_fn)(int32_t day, uint32_t shard, void *user);

/* The current version of one order (the order lookup). items points at items_bytes canonical bytes
 * (common.h), or is NULL with items_bytes 0 when the version has no items field. */
struct storage_order {
    struct ds_id order_id;
    bool has_version;
    int64_t version; /* the greatest version applied (the floor); 0 when !has_version */
    int64_t ts_ms;
    int32_t day;
    uint32_t shard;
    uint8_t status_len;
    char status[DS_STATUS_BYTES_MAX];
    int64_t amount_units;
    struct ds_id customer_id;
    uint16_t items_bytes;
    const uint8_t *items;
    uint32_t versions_seen; /* events of this order that were stored: the first and each applied */
    /* The source partition of the current version (a Kafka partition, DS_SOURCE_FILE), or
     * STORAGE_ORDER_NO_SOURCE: a node gives up the orders of a partition it loses. */
    int32_t source_partition;
};
/* The source partition of an order stored without a source (storage_order.source_partition). */
#define STORAGE_ORDER_NO_SOURCE (-3)
/* Scratch a lookup needs for the record's bytes (items point into it). */
#define STORAGE_ORDER_SCRATCH_BYTES                                                                \
    (72u + 2u * DS_ID_BYTES_MAX + DS_STATUS_BYTES_MAX + DS_ITEMS_BYTES_MAX + 3u)

/* What the orders model did with the events this writer handle took (since it was opened), and
 * the orders it holds. All zero in the events model. */
struct storage_order_stats {
    uint64_t orders;    /* distinct orders (committed and pending) */
    uint64_t created;   /* events that were a new order */
    uint64_t applied;   /* events that replaced an order's current version */
    uint64_t stale;     /* events older than the current version: ignored */
    uint64_t unchanged; /* repeats of the current version: ignored */
};

/* Compaction: superseded versions and their retractions stay in their partition (counted out,
 * taking space: storage_partition_total.rows - count of them) until a compaction rewrites the
 * partition with only its current versions (orders model), or with every row and its small
 * blocks merged (both models): new segments, one new MANIFEST naming them (atomic), the
 * replaced segments removed STORE_RETIRE_DELAY_NS (30 s) later. Counts never change; a
 * follower of positions (the index builder) restarts the partition at the rewrite. */
struct storage_compact_report {
    int32_t day;
    uint32_t shard;
    uint64_t rows_before, rows_after; /* stored rows: versions and retractions */
    uint64_t bytes_before, bytes_after;
    uint64_t ns;           /* from its start to the swap, slices and the commits between */
    uint32_t slices;       /* the slices it ran in, between commits */
    uint64_t slice_ns_max; /* the longest: how long it held the writer at most */
};

/* Visits the current version of every committed order (in the order their versions were
 * written: not sorted), for fsck and tests. Reads the whole store. Stops early when fn returns
 * non-zero and returns that value; -DS_EUSAGE in the events model. */
typedef int (*storage_order_fn)(const struct storage_order *order, void *user);

struct storage_fsck_report {
    uint64_t partitions;
    uint64_t segments;
    uint64_t blocks_ok;
    uint64_t events_ok;
    uint64_t bytes_ok;        /* on-disk bytes of the blocks that passed */
    uint64_t blocks_bad;      /* damaged blocks (or unreadable ranges) inside committed data */
    uint64_t torn_bytes;      /* bytes past the committed end (torn or uncommitted tails) */
    uint64_t orphan_segments; /* segment files the manifest never committed */
    uint64_t repaired;        /* tails cut and orphans removed with repair */
    bool manifest_damaged;    /* a record before the MANIFEST's tail fails its check */
    /* What --repair moved to DIR/quarantine/ (zero without repair): blocks taken out of
     * committed data plus CRC-valid blocks found past committed ends, their known events
     * (a range whose header is unreadable adds to events_unknown_ranges instead), and bytes. */
    uint64_t quarantined_blocks;
    uint64_t quarantined_events;
    uint64_t quarantined_bytes;
    uint64_t events_unknown_ranges;
    uint64_t quarantined_total; /* ranges the manifest skips, from this and earlier repairs */
    /* The balance of retractions. Orders model (storage/fsck_orders.h): in each partition, in
     * append order, a retraction cancels an earlier uncancelled row with the same order id,
     * customer, ts, status and amount, and the rows left are the current versions the
     * orders-by-id store places there. Events model (storage/fsck_events.h; orders and
     * orders_mismatched zero): a retraction (storage_release_range) cancels an earlier
     * uncancelled row with the same source partition and offset. */
    uint64_t orders;                /* current orders in the orders-by-id store */
    uint64_t retractions;           /* retraction rows in the partitions */
    uint64_t retractions_unmatched; /* retractions cancelling no earlier uncancelled row */
    uint64_t orders_mismatched;     /* rows left with no current order + orders with no row */
    /* Not checked, which is damage too: partitions with a damaged block, or the whole directory
     * when no reader opens it or its orders-by-id store cannot be read (counts 1). */
    uint64_t balance_unchecked;
    /* What --repair's reconciliation did to orders whose rows were quarantined (zero without
     * repair; storage_fsck): orders now at the newest version still present in the data, and
     * orders with no version left, gone from the store. */
    uint64_t orders_reverted;
    uint64_t orders_lost;
};

/* Verifies every block of a data directory (header and payload CRCs, decompression, aggregates
 * recomputed from the events against the header). With repair (needs the writer lock), nothing
 * acknowledged is deleted: every damaged committed block (a block whose header is unreadable:
 * the range up to the next block header passing its CRC) and every past-the-end range holding
 * CRC-valid blocks is copied to DIR/quarantine/ with a JSON record, synced; then one new
 * MANIFEST (atomic rename) skips the committed ranges and keeps only the valid prefix of a
 * damaged MANIFEST; then a writer's recovery cuts torn tails and removes orphan segments.
 * Prints one line per problem to report_file (may be NULL). Returns 0 when the directory is
 * clean (after repair), 1 when damage remains, or a negated errno (-DS_ELOCKED: a writer runs;
 * -DS_ECORRUPT: the MANIFEST is damaged and repair was not asked for). */
struct storage_fsck_options {
    bool repair;
    bool quarantine_only; /* repair without the reconciliation of the orders model (tests) */
    /* Tests: called at each crash point of the reconciliation (step 0, 1, ...: its record
     * written, the store committed, then before and after each partition's rewrite commit);
     * NULL in production. */
    void (*step_fn)(uint32_t step, void *user);
    void *step_user;
    void *report_file; /* FILE *, borrowed; NULL for silence */
};

#endif /* DS_STORAGE_TYPES_H */
