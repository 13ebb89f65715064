/*
 * storage: durable, compressed, append-only day partitions (docs/FORMATS.md).
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
#include "storage/types.h"

/* ---- opening ------------------------------------------------------------------------------- */

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
/* The stream day above (pending appends included on a writer), -1 while nothing is stored. */
int32_t storage_stream_day(const struct storage *st);

/* ---- reading ------------------------------------------------------------------------------- */

/* Readers: re-read the manifest to see newer commits of a live writer. */
DS_MUST_USE int storage_refresh(struct storage *st);
/* Sequence number of the last commit this handle knows (0 before any). It only grows, so a
 * reader can tell after storage_refresh whether anything new was committed. */
uint64_t storage_commit_seq(const struct storage *st);

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

/* Returns 0 with out filled (all zeros for a day never written or below the retention floor),
 * 1 when the aggregate cannot answer (a writer's handle, which keeps none, or a partition at or
 * above shard_count holds data: ask storage_partition_totals per shard), or an error of
 * storage_partition_totals for one of the day's partitions (the lowest shard failing). */
DS_MUST_USE int storage_day_totals(struct storage *st, int32_t day, uint32_t shard_count,
                                   struct storage_day_total *out);

int storage_partition_scan(struct storage *st, int32_t day, uint32_t shard, storage_event_fn fn,
                           void *user);

/* Like storage_partition_scan, from *pos to the committed end: visits each block's events and
 * moves *pos past a block only once fn accepted all of its events, so a stop (fn non-zero, or
 * an error) resumes at the start of the unfinished block and a follower that applies events
 * idempotently loses nothing. Returns 0, fn's value, -DS_ECORRUPT, or -ERANGE when *pos lies
 * beyond what this handle knows is committed (a position from another directory). */
int storage_partition_scan_from(struct storage *st, int32_t day, uint32_t shard,
                                struct storage_position *pos, storage_event_fn fn, void *user);

/* Like storage_partition_scan_from, with each row's source (storage_source_event_fn): in the
 * events model a row appended with a source keeps it, through compactions too. */
int storage_partition_scan_sources(struct storage *st, int32_t day, uint32_t shard,
                                   struct storage_position *pos, storage_source_event_fn fn,
                                   void *user);

int storage_partition_visit(struct storage *st, storage_partition_fn fn, void *user);

/* What a handle holds: partitions in its table (retention frees those of dropped days), a
 * reader's days of totals, and a writer's open segment descriptors (partitions written in the
 * last commits; idle ones are closed). */
struct storage_held {
    uint32_t partitions;
    uint32_t days;
    uint32_t segment_fds;
};
void storage_held(const struct storage *st, struct storage_held *out);

/* The orders-by-id store a handle holds (docs/FORMATS.md; all zero in the events model),
 * cheap enough for every commit: its orders, the recent tier's keydir and log (a writer's
 * commit waits for a running seal once the log reaches recent_hard_bytes), the memory of
 * keydir, buffers and sealed files' indexes, the sealed files (one per retained day) and the
 * bytes on disk; and a writer's seals: installed, running, and its time waiting in them
 * (calls that had seal work, their total and the longest). */
struct storage_ids_held {
    uint64_t orders;
    uint64_t keydir_bytes;
    uint64_t recent_bytes;
    uint64_t recent_hard_bytes;
    uint64_t memory_bytes;
    uint32_t sealed_files;
    uint64_t disk_bytes;
    uint64_t seals;
    bool sealing;
    uint64_t stall_calls;
    uint64_t stall_total_ns;
    uint64_t stall_max_ns;
};
void storage_ids_held(const struct storage *st, struct storage_ids_held *out);

/* ---- orders (the orders model) ------------------------------------------------------------- */

/* In a directory of the orders model, storage_append applies docs/EVENTS.md's rules to each
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

/* What the orders model did with the events this writer handle took, and the orders it holds
 * (struct storage_order_stats). */
void storage_order_stats(const struct storage *st, struct storage_order_stats *out);

/* Writers only, between commits (nothing appended since the last storage_commit): compacts
 * partition (day, shard) now, in one go (a compaction in slices gives way and starts again
 * when due): in the orders model without its superseded versions, in the events model (where
 * every row is current) with its blocks merged into full ones. Returns 1 (compacted, *out
 * set), 0 (nothing to remove: no retraction in the orders model), -DS_EUSAGE (uncommitted
 * appends), or an I/O error after which the storage must be reopened like after a failed
 * commit (the old partition stays). */
DS_MUST_USE int storage_compact(struct storage *st, int32_t day, uint32_t shard,
                                struct storage_compact_report *out);
/* After a commit (nothing appended since): one slice, of about
 * storage_config.compact_slice_ns, of the compaction in progress, or of a new one when a
 * partition is due: one with at least storage_config.compact_dead_rows_min dead rows making a
 * quarter of its rows or more (orders model: superseded versions stay under about a quarter of
 * each partition), or, in both models, one idle for STORAGE_COMPACT_IDLE_COMMITS commits whose
 * blocks average under a quarter of block_events_max (small blocks merged into full ones). The
 * partition takes appends between slices; once the rewrite holds all it committed, the slice
 * right after a commit makes the rewrite the partition (one MANIFEST, as storage_compact); a
 * crash at any point leaves the partition as its last commit made it (recovery removes the
 * rewrite's files). Returns 1 when that slice swapped (*out set), 0 otherwise (a slice done,
 * or nothing due), or storage_compact's errors. */
DS_MUST_USE int storage_compact_due(struct storage *st, struct storage_compact_report *out);
/* Whether a compaction is in progress (storage_compact_due goes on with it). */
bool storage_compacting(const struct storage *st);

/* A writer giving up a source (Kafka) partition another node takes over (orders model): right
 * after a commit, every order whose current version came from source is retracted from its
 * partition and removed from the orders store, and source's position is forgotten
 * (storage_source_next answers -1), so that the node taking the partition over can read its
 * whole history and hold its orders without them counting twice across the nodes. Durable
 * with the next storage_commit. *released gets the orders given up. Returns 0, -DS_EUSAGE
 * (events model, or uncommitted appends), -EAGAIN (commit, then call again: it goes on where it
 * stopped), or an error after which the storage must be reopened. */
DS_MUST_USE int storage_release_source(struct storage *st, int32_t source, uint64_t *released);

/* A writer giving back a range of a Kafka partition it should not have kept (events model: the
 * partition's new owner reads it from lo): right after a commit, every committed row whose
 * source is (source, offset >= lo) and that no retraction cancels yet gets a retraction row (the
 * same fields, the same source; storage_event_fn sees event->retract) in its own (day, shard)
 * partition, so counts drop by exactly those rows; and source's next offset becomes lo when it
 * was above (storage_source_next). Durable with the next storage_commit. Idempotent: a row
 * with a retraction of its (source, offset) in its partition is passed over, so a release
 * repeated after a crash, or resumed, retracts each row once. Rows of blocks written without
 * row sources (block versions 1-3: before the events model kept them) cannot be released: a
 * warning names the partition and how many rows may be in the range. *released gets the
 * rows retracted by this call. Returns 0, -DS_EUSAGE (orders model, uncommitted appends, source
 * not a Kafka partition, lo < 0), -EAGAIN (storage_config.release_rows_max rows retracted:
 * commit, then call again; it goes on where it stopped, and lowers the next offset only when it
 * finishes), or an error after which the storage must be reopened. */
DS_MUST_USE int storage_release_range(struct storage *st, int32_t source, int64_t lo,
                                      uint64_t *released);

DS_MUST_USE int storage_order_visit(struct storage *st, storage_order_fn fn, void *user);

/* ---- checking ------------------------------------------------------------------------------ */

DS_MUST_USE int storage_fsck(const char *dir, const struct storage_fsck_options *options,
                             struct storage_fsck_report *report);

/* ---- restore from the topic (storage/fsck_restore.c) --------------------------------------- */

/* fsck --repair quarantines a damaged range with the Kafka partition(s) and offsets its events
 * came from. A restore (ingest_restore_run: `fsck --repair --brokers`, `run
 * --restore-quarantine`) reads those offsets again and appends the events through
 * storage_append, the path of a node, on a writer handle. Storage keeps what a restore needs to
 * be exact and to run twice safely: the ranges waiting, a marker per range (DIR/quarantine/
 * <name>.restore: started at which commit, or done), and in the orders model the orders the
 * repair reverted or lost (its <time>.orders.jsonl), which are the only orders a restore may
 * touch: every other order's current version survived the damage. */

enum storage_restore_state {
    STORAGE_RESTORE_PENDING = 0, /* no restore has begun */
    STORAGE_RESTORE_STARTED,     /* begun before commit started_seq + 1; not known finished */
    STORAGE_RESTORE_DONE,
};

#define STORAGE_RESTORE_NAME_BYTES 96u
/* source_partition of a range whose events came from several Kafka partitions (the offsets then
 * span all of them), and of one whose source is unknown (an unreadable block header). */
#define STORAGE_RESTORE_SOURCE_MIXED (-2)
#define STORAGE_RESTORE_SOURCE_UNKNOWN (-3)

/* One quarantined range, from its record (<name>.json) and marker (<name>.restore). */
struct storage_restore_range {
    char name[STORAGE_RESTORE_NAME_BYTES]; /* <date>.<shard>.<segment>.<offset> */
    int32_t day;
    uint32_t shard;
    bool committed; /* false: bytes past a committed end, never acknowledged: nothing to restore */
    bool events_known;
    uint64_t events;
    /* A Kafka partition, DS_SOURCE_FILE (line numbers of `dayshard ingest`),
     * STORAGE_RESTORE_SOURCE_MIXED or STORAGE_RESTORE_SOURCE_UNKNOWN. */
    int32_t source_partition;
    int64_t source_offset_min;
    int64_t source_offset_max;
    enum storage_restore_state state;
    uint64_t started_seq; /* STARTED: storage_commit_seq before the restore's first commit */
};

/* What a restore of one range did (kept in its marker). */
struct storage_restore_tally {
    uint64_t events_read;     /* messages the topic gave back in the range */
    uint64_t events_applied;  /* events appended (the range's; in the orders model, versions) */
    uint64_t offsets_missing; /* offsets of the range the topic no longer holds */
    uint64_t events_lost;     /* events model: the range's events not restored */
};

/* The quarantined ranges of dir, sorted by name, with their restore state. Returns 0 (count 0
 * when dir has no quarantine), -DS_ELIMIT (more than capacity), -DS_ECORRUPT (a record or
 * marker unreadable: logged with its path), or a negated errno. */
DS_MUST_USE int storage_restore_ranges(const char *dir, struct storage_restore_range *out,
                                       uint32_t capacity, uint32_t *count);
/* Writes range's marker durably (temporary file, sync, rename, directory sync): STARTED with
 * started_seq before a restore's first append, DONE with its tally after its last commit.
 * Returns 0 or a negated errno (logged). */
DS_MUST_USE int storage_restore_mark(const char *dir, const struct storage_restore_range *range,
                                     enum storage_restore_state state, uint64_t started_seq,
                                     const struct storage_restore_tally *tally);

/* The orders a restore brings back (orders model): those of every <time>.orders.jsonl not yet
 * marked restored, but for orders holding the version number they had before the repair, or a
 * higher one (a number names one content: an equal one with other content is stale). All
 * of the range's events of such an order are appended again, in offset order: the last is the
 * version it had (the current one was in the range), whatever fields the record compares. */
struct storage_restore_orders;
/* Reads them, on the writer handle st. Returns 0, -ENOMEM, -DS_ECORRUPT (an unreadable line,
 * logged), or a negated errno. In the events model the set is empty. */
DS_MUST_USE int storage_restore_orders_load(struct storage *st,
                                            struct storage_restore_orders **out);
/* Whether the restore wants this event (of an order it brings back); notes when it is the
 * version the order had, which the report needs to call the order restored. */
bool storage_restore_orders_want(struct storage_restore_orders *o, const struct ds_event *event);
/* The orders it brings back (those back by their version number aside). */
uint64_t storage_restore_orders_count(const struct storage_restore_orders *o);
/* Given the last event a restore read back of a wanted order (the version it had: the order's
 * current version was in the range), whether the store holds that event already, whole (an
 * earlier restore got it back): then the order is settled and no event of it is wanted, since
 * replaying the versions before it would count them again. Call once per order, after reading
 * and before appending. Returns 0 or an error of storage_order_get. */
DS_MUST_USE int storage_restore_orders_last(struct storage_restore_orders *o, struct storage *st,
                                            const struct ds_event *event);

struct storage_restore_orders_report {
    uint64_t orders;        /* orders the restore meant to bring back */
    uint64_t restored;      /* now at the version they had, or a newer one */
    uint64_t reverted;      /* still at an older version */
    uint64_t lost;          /* still gone */
    char file[DS_PATH_MAX]; /* DIR/quarantine/<time>.unrestored.jsonl naming the reverted and
                             * lost ones ("" when none) */
};
/* After the restore's last commit: checks each wanted order against its version before the
 * repair, gives an order back at that version the versions_seen it had then (in a commit of
 * its own), writes the orders still reverted or lost ({"order":ID,"outcome":"reverted"|"lost"}
 * per line) to DIR/quarantine/<now_ms>.unrestored.jsonl, and, when every range is done
 * (all_done), marks the orders.jsonl files read as restored (<file>.restored), so a later
 * restore does not take their orders again. Returns 0 or a negated errno. */
DS_MUST_USE int storage_restore_orders_finish(struct storage *st, struct storage_restore_orders *o,
                                              bool all_done, int64_t now_ms,
                                              struct storage_restore_orders_report *out);
void storage_restore_orders_destroy(struct storage_restore_orders *o);

#endif /* DS_STORAGE_H */
