/*
 * storage: durable, compressed, append-only day partitions (DESIGN.md section 4).
 *
 * A data directory holds one directory per partition (day, shard) with append-only segment
 * files of blocks. A block is a zstd-compressed columnar payload behind a header that carries
 * the aggregates a count needs (event count, exact amount sum, counts and sums per (status,
 * hour), min/max ts, source offset range) and CRC32C checksums of header and payload. A
 * manifest log records, at every group commit, where each touched segment's committed data
 * ends and the next source offset of every source partition; it is the single truth of what is
 * durable. Recovery at open cuts everything past the manifest (torn or uncommitted tails).
 *
 * Threads: a struct storage belongs to one thread (the writer). Readers in other processes open
 * the same directory read-only and see the last committed state; see storage_refresh().
 *
 * Every operation on data and manifest files goes through struct storage_io: io_uring (several
 * partitions' blocks and syncs in flight on one ring), plain pwrite/fdatasync, or a test fake
 * that injects faults. Writes and syncs are queued; reads, truncates and renames are immediate.
 */
#ifndef DS_STORAGE_H
#define DS_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"
#include "storage/io.h"
#include "storage/limits.h"
#include "storage/model.h"

/* ---- opening ------------------------------------------------------------------------------- */

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
     * and as many as live ones (default STORAGE_COMPACT_DEAD_ROWS_MIN; 0: never, for
     * measuring what superseded versions cost, `ingest --no-compact`). */
    uint64_t compact_dead_rows_min;
    uint32_t partitions_max; /* partitions tracked (<= STORAGE_PARTITIONS_MAX) */
    /* Writers: keep the newest retention_days days of stream time (see "retention" below);
     * 0 (the default) keeps every day. <= STORAGE_RETENTION_DAYS_MAX. */
    uint32_t retention_days;
    /* The data model: RECORDED (the default) takes the directory's; an explicit one must match
     * it (-DS_EUSAGE otherwise) and is the model a writer records when it creates dir. */
    enum storage_model model;
};

void storage_config_defaults(struct storage_config *cfg);
DS_MUST_USE int storage_config_check(const struct storage_config *cfg);

struct storage;

/* Opens a data directory. A writer takes an exclusive lock (-DS_ELOCKED if another writer has
 * it), records the model of a directory it creates, replays the manifest and cuts every segment
 * back to its committed end. Returns 0, -DS_EUSAGE (a bad config, or a model refused as
 * storage_model_check says, logged with its reason, before anything is created), -DS_ECORRUPT
 * (manifest damaged before its tail, or DIR/MODEL unreadable), -DS_EFORMAT, or a negated
 * errno. */
DS_MUST_USE int storage_open(const struct storage_config *cfg, struct storage **out);
/* Opens dir read-only as every reader does (`count --data`, the query service, the index
 * builder, the demo): the defaults, and room for as many partitions as any writer may have
 * made (STORAGE_PARTITIONS_MAX), whatever it was configured with. */
DS_MUST_USE int storage_open_reader(const char *dir, struct storage **out);
/* Closes without committing: appends since the last commit are dropped, as in a crash. */
void storage_close(struct storage *st);
const char *storage_io_backend(const struct storage *st);
/* The data model of the open directory (never STORAGE_MODEL_RECORDED). */
enum storage_model storage_model(const struct storage *st);

/* ---- writing ------------------------------------------------------------------------------- */

/* Adds one event to partition (day, shard). It is not durable until storage_commit returns 0.
 * source may be NULL. In the orders model the event is a version of its order (see "orders"
 * below): it may be stored with a retraction of the order's previous version, or not at all.
 * Returns 0, -ERANGE (day below storage_retention_floor: nothing stored), -DS_ELIMIT (too many
 * partitions, or orders), -EAGAIN (orders model: the uncommitted
 * versions reached their memory bound; commit, then append the event again), or an I/O error
 * from an early block seal or an order lookup. */
DS_MUST_USE int storage_append(struct storage *st, int32_t day, uint32_t shard,
                               const struct ds_event *event, const struct ds_source *source);
/* Group commit: seals every open block, writes the blocks and syncs the touched segments (all
 * partitions in flight together), then appends and syncs a manifest record. On 0, every event
 * appended so far is durable and the recorded source offsets advanced. On error nothing since
 * the previous commit is acknowledged; the storage must be closed and reopened (recovery). */
DS_MUST_USE int storage_commit(struct storage *st);
/* Advances a source partition's offset past an event that was not stored (a bad event that
 * went to the dead-letter file): the next commit records it like an appended one. */
DS_MUST_USE int storage_source_advance(struct storage *st, const struct ds_source *source);
/* Records the dead-letter file's length to commit with the next storage_commit, so that the
 * dead letters and the data of one commit are acknowledged together. */
void storage_deadletter_set(struct storage *st, uint64_t bytes);
/* The dead-letter file length of the last commit (0 when never set): a writer cuts the file
 * back to it at start, so dead letters of an unacknowledged commit are not kept twice when
 * their events are replayed. */
uint64_t storage_deadletter_committed(const struct storage *st);
/* Events appended but not yet committed. */
uint64_t storage_pending_events(const struct storage *st);
/* The next source offset to read for a source partition (-1 when never seen): one past the
 * highest committed offset. */
int64_t storage_source_next(const struct storage *st, int32_t source_partition);

/* ---- retention ----------------------------------------------------------------------------- */

/* Stream time, as Kafka Streams defines it: the greatest event day this writer has appended
 * (committed, or pending; after a restart the greatest day holding committed data). With
 * retention_days N > 0 the floor is stream day - N + 1: with N = 7 and stream time 2026-01-21,
 * days 2026-01-15 .. 2026-01-21 are kept. The commit that raises the floor writes its record as
 * one new MANIFEST (atomic rename, format 4) that records the floor and leaves out every
 * partition of each day below it, so its data and its drop become durable together; the files
 * are removed 30 s later (STORE_RETIRE_DELAY_NS), at the writer's close, or by recovery.
 * Readers hide every day below the committed floor at once (totals zero, scans and visits skip
 * it, orders whose current version lies there are gone), so no one sees half a day. The floor
 * only rises; it is kept in the MANIFEST (format 4), so a restart keeps it. */

/* The day below which an event is too late: a writer's current floor (pending appends count
 * for stream time, so the floor an event meets is the one its commit will set), a reader's
 * committed one. 0 when nothing was dropped and nothing will be. storage_append refuses an
 * event below it (-ERANGE): the caller dead-letters it as too late and advances its source. */
int32_t storage_retention_floor(const struct storage *st);

/* ---- reading ------------------------------------------------------------------------------- */

/* Readers: re-read the manifest to see newer commits of a live writer. */
DS_MUST_USE int storage_refresh(struct storage *st);
/* Sequence number of the last commit this handle knows (0 before any). It only grows, so a
 * reader can tell after storage_refresh whether anything new was committed. */
uint64_t storage_commit_seq(const struct storage *st);

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

/* Totals of partition (day, shard) from block headers (never decompressing a block), for all
 * statuses (status NULL) or one status. A partition never written gives all zeros. Ranges a
 * repair quarantined are not counted; damage found on the way is in damaged_blocks (the
 * summary reads each committed block once per handle to check its payload CRC). A net count
 * below zero in some status and hour after some block (more retractions than rows they cancel
 * so far: a consistent partition appends a retraction after its row) is -DS_ECORRUPT, logged
 * with the partition. */
DS_MUST_USE int storage_partition_totals(struct storage *st, int32_t day, uint32_t shard,
                                         const char *status, size_t status_len,
                                         struct storage_partition_total *out);

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
/* Returns 0 with out filled (all zeros for a day never written or below the retention floor),
 * 1 when the aggregate cannot answer (a writer's handle, which keeps none, or a partition at or
 * above shard_count holds data: ask storage_partition_totals per shard), or an error of
 * storage_partition_totals for one of the day's partitions (the lowest shard failing). */
DS_MUST_USE int storage_day_totals(struct storage *st, int32_t day, uint32_t shard_count,
                                   struct storage_day_total *out);

/* Visits every committed event of a partition in append order, decompressing blocks and
 * verifying them (GSI rebuild, tests); retraction rows included, with event->retract set. Stops
 * early when fn returns non-zero and returns that value; -DS_ECORRUPT for a block that fails a
 * check. */
typedef int (*storage_event_fn)(const struct ds_event *event, void *user);
int storage_partition_scan(struct storage *st, int32_t day, uint32_t shard, storage_event_fn fn,
                           void *user);

/* A place in a partition's committed data: the segment and byte offset of the next block to
 * read. {0, 0} is the start. Positions are stable across writer restarts (committed blocks
 * never move), so a follower can persist them. */
struct storage_position {
    uint32_t segment_id;
    uint64_t offset;
};
/* Like storage_partition_scan, from *pos to the committed end: visits each block's events and
 * moves *pos past a block only once fn accepted all of its events, so a stop (fn non-zero, or
 * an error) resumes at the start of the unfinished block and a follower that applies events
 * idempotently loses nothing. Returns 0, fn's value, -DS_ECORRUPT, or -ERANGE when *pos lies
 * beyond what this handle knows is committed (a position from another directory). */
int storage_partition_scan_from(struct storage *st, int32_t day, uint32_t shard,
                                struct storage_position *pos, storage_event_fn fn, void *user);

/* Visits the partitions that have committed data, by ascending (day, shard). */
typedef int (*storage_partition_fn)(int32_t day, uint32_t shard, void *user);
int storage_partition_visit(struct storage *st, storage_partition_fn fn, void *user);

/* ---- orders (the orders model) ------------------------------------------------------------- */

/* In a directory of the orders model, storage_append applies DESIGN.md section 2's rules to each
 * event, as a version of its order (tests/integration/orders_oracle.py is their reference):
 *   - a new order_id is stored (created);
 *   - a version below the greatest one applied (the floor), or equal to it with other content,
 *     is stale: not stored, counted;
 *   - the current content again (customer, ts, status, amount, items) without a version or with
 *     the floor's version is an unchanged repeat: not stored, counted;
 *   - otherwise the event replaces the order (applied): a retraction of the current version is
 *     appended to the current version's (day, shard) partition and the event to (day, shard),
 *     in the same commit, so partition totals count each order once, by its current version.
 * Events not stored still advance their source's offset. The current version of every order is
 * kept in the orders-by-id store (DIR/ids/), committed with the same MANIFEST record as the
 * blocks, so a crash never separates them. */

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
#define STORAGE_ORDER_NO_SOURCE (-3)
/* Scratch a lookup needs for the record's bytes (items point into it). */
#define STORAGE_ORDER_SCRATCH_BYTES                                                                \
    (72u + 2u * DS_ID_BYTES_MAX + DS_STATUS_BYTES_MAX + DS_ITEMS_BYTES_MAX + 3u)

/* The current version of order id as this handle knows it: a writer's includes what it appended
 * since its last commit, a reader's the last commit it refreshed to (the first lookup of a
 * reader loads the store; later ones cost a keydir probe, and a read for a hit). scratch has at
 * least STORAGE_ORDER_SCRATCH_BYTES. Thread: the handle's. Returns 0, -ENOENT (no such order),
 * -DS_EUSAGE (the directory counts events: it keeps no orders), -DS_ECORRUPT, or a negated
 * errno. */
DS_MUST_USE int storage_order_get(struct storage *st, const struct ds_id *id,
                                  struct storage_order *out, void *scratch,
                                  size_t scratch_capacity);

/* A hint from a writer about an event it will append soon (orders model: its order's lookup
 * starts loading; nothing in the events model). */
void storage_prefetch(const struct storage *st, const struct ds_event *event);

/* What the orders model did with the events this writer handle took (since it was opened), and
 * the orders it holds. All zero in the events model. */
struct storage_order_stats {
    uint64_t orders;    /* distinct orders (committed and pending) */
    uint64_t created;   /* events that were a new order */
    uint64_t applied;   /* events that replaced an order's current version */
    uint64_t stale;     /* events older than the current version: ignored */
    uint64_t unchanged; /* repeats of the current version: ignored */
};
void storage_order_stats(const struct storage *st, struct storage_order_stats *out);

/* Compaction: superseded versions and their retractions stay in their partition (counted out,
 * taking space: storage_partition_total.rows - count of them) until a compaction rewrites the
 * partition with only its current versions: new segments, one new MANIFEST naming them
 * (atomic), the replaced segments removed STORE_RETIRE_DELAY_NS (30 s) later. Counts never
 * change; a follower of positions (the index builder) restarts the partition at the rewrite. */
struct storage_compact_report {
    int32_t day;
    uint32_t shard;
    uint64_t rows_before, rows_after; /* stored rows: versions and retractions */
    uint64_t bytes_before, bytes_after;
    uint64_t ns; /* how long it took */
};
/* Writers only, between commits (nothing appended since the last storage_commit): compacts
 * partition (day, shard) now. Returns 1 (compacted, *out set), 0 (nothing to remove: no
 * retraction), -DS_EUSAGE (the events model, or uncommitted appends), or an I/O error after
 * which the storage must be reopened like after a failed commit (the old partition stays). */
DS_MUST_USE int storage_compact(struct storage *st, int32_t day, uint32_t shard,
                                struct storage_compact_report *out);
/* After a commit: compacts at most one partition that took many retractions (at least
 * storage_config.compact_dead_rows_min dead rows, and as many dead rows as live ones), so a
 * writer calling it after each commit keeps superseded versions to about half of each
 * partition. Returns storage_compact's values (0 when none is due). */
#define STORAGE_COMPACT_DEAD_ROWS_MIN 16384u
DS_MUST_USE int storage_compact_due(struct storage *st, struct storage_compact_report *out);

/* A writer giving up a source (Kafka) partition another node takes over (orders model): right
 * after a commit, every order whose current version came from source is retracted from its
 * partition and removed from the orders store, and source's position is forgotten
 * (storage_source_next answers -1), so that the node taking the partition over can read its
 * whole history and hold its orders without them counting twice across the nodes. Durable
 * with the next storage_commit. *released gets the orders given up. Returns 0, -DS_EUSAGE
 * (events model, or uncommitted appends), -EAGAIN (commit, then call again: it goes on where it
 * stopped), or an error after which the storage must be reopened. */
DS_MUST_USE int storage_release_source(struct storage *st, int32_t source, uint64_t *released);

/* Visits the current version of every committed order (in the order their versions were
 * written: not sorted), for fsck and tests. Reads the whole store. Stops early when fn returns
 * non-zero and returns that value; -DS_EUSAGE in the events model. */
typedef int (*storage_order_fn)(const struct storage_order *order, void *user);
DS_MUST_USE int storage_order_visit(struct storage *st, storage_order_fn fn, void *user);

/* ---- checking ------------------------------------------------------------------------------ */

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
    /* The balance of the orders model (storage/fsck_orders.h; all zero in the events model):
     * in each partition, in append order, a retraction cancels an earlier uncancelled row with
     * the same order id, customer, ts, status and amount, and the rows left are the current
     * versions the orders-by-id store places there. */
    uint64_t orders;                /* current orders in the orders-by-id store */
    uint64_t retractions;           /* retraction rows in the partitions */
    uint64_t retractions_unmatched; /* retractions cancelling no earlier uncancelled row */
    uint64_t orders_mismatched;     /* rows left with no current order + orders with no row */
    /* Not checked, which is damage too: partitions with a damaged block, or the whole directory
     * when no reader opens it or its orders-by-id store cannot be read (counts 1). */
    uint64_t balance_unchecked;
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
    void *report_file; /* FILE *, borrowed; NULL for silence */
};
DS_MUST_USE int storage_fsck(const char *dir, const struct storage_fsck_options *options,
                             struct storage_fsck_report *report);

#endif /* DS_STORAGE_H */
