/*
 * ids: the orders-by-id store of the orders model, private to storage/.
 *
 * One record per order: its current version (id, version, ts, day, shard, status, amount,
 * customer, items, versions seen). Two tiers:
 * - the recent tier: DIR/ids/log (log.<gen> after the first seal), an append-only write-ahead
 *   log of the records written since the last seal, a record superseding every earlier one of
 *   its id, and an in-memory keydir mapping a hash of each id to its latest record (a tombstone
 *   when the order left). Bounded by a budget of log bytes (IDS_RECENT_BYTES_DEFAULT);
 * - the sealed tier: one immutable file per day (ids_file.h) holding the orders whose current
 *   version is on that day, sorted by id, with a block index and a bloom filter in memory.
 * A lookup asks the keydir first, then the frozen tier's, then the files (newest day first); an
 * order is in one file at most. A seal (ids_maintain after a commit) freezes the recent tier (a
 * new log starts, DIR/ids/CURRENT names both logs), merges the frozen records into the files of
 * the days they touch on its own thread, drops the files of days below the retention floor,
 * replaces DIR/ids/CURRENT (the files and the new log) and is installed by the writer at a later
 * ids_maintain; the frozen tier answers lookups until then.
 *
 * Durability follows the caller's commit: ids_put keeps the record in memory (visible to
 * ids_get at once); ids_queue queues its write and a sync on the storage_io, the caller flushes
 * and records the returned position in its own commit (the MANIFEST), then calls ids_committed.
 * Positions are logical: the descriptor's base plus the offset in the current log, so they
 * only grow across seals. Opening with a committed position loads the descriptor's files
 * (their indexes only), cuts the log back to the position and replays the records below it.
 * After a failed flush the handle must be closed and reopened with the last committed
 * position, as struct storage is.
 *
 * Threads: a handle belongs to one thread (its seal thread reads only the frozen tier and the
 * old files, which the handle does not change while the seal runs). A reader (read_only) in another
 * thread or process opens the same directory and follows the writer with ids_refresh(committed
 * position), which reopens the files when the descriptor changed.
 */
#ifndef DS_STORAGE_IDS_H
#define DS_STORAGE_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "storage/io.h"

/* ---- limits -------------------------------------------------------------------------------- */

/* A keydir slot is 8 bytes: 28 high bits of the id's hash and 36 bits of (log offset / 4 + 1).
 * Records are 4-byte aligned, so one log may hold 2^36 - 1 four-byte units (256 GiB), and the
 * table 2^28 slots (2 GiB of memory) at most; at the 3/4 load where it grows that is
 * IDS_ORDERS_MAX records of the recent tier. Seals keep the recent tier near
 * IDS_RECENT_BYTES_DEFAULT (about 500k records), so neither limit is reached while seals
 * succeed; the sealed tier has no count limit (a file per retained day). */
#define IDS_LOG_BYTES_MAX (((1ull << 36) - 1) * 4)
#define IDS_SLOTS_MAX (1ull << 28)
#define IDS_ORDERS_MAX (IDS_SLOTS_MAX / 4 * 3)
/* The recent tier's budget: a commit that leaves the log at this size or more starts a seal.
 * 8 MiB is about 300k records and a keydir of about 4 MiB; while the seal runs the frozen tier
 * holds as much again. Past IDS_RECENT_HARD_BYTES (the writer's in-memory tail of the log) a
 * commit waits for a running seal (logged). */
#define IDS_RECENT_BYTES_DEFAULT (8u * 1024 * 1024)
#define IDS_RECENT_HARD_BYTES (16u * 1024 * 1024)
/* Record bytes not yet queued (puts since the last commit); past it ids_put answers -EAGAIN and
 * the caller commits first. 64 MiB is about 600k orders of average size. */
#define IDS_PENDING_BYTES_MAX (64u * 1024 * 1024)
/* The fixed part of a record and the largest record (two ids, a status, items, padding). */
#define IDS_RECORD_HEADER_BYTES 72u
#define IDS_RECORD_BYTES_MAX                                                                       \
    (IDS_RECORD_HEADER_BYTES + 2u * DS_ID_BYTES_MAX + DS_STATUS_BYTES_MAX + DS_ITEMS_BYTES_MAX + 3u)

/* ---- types --------------------------------------------------------------------------------- */

/* A record is the current version of one order: struct storage_order (storage.h). items is
 * borrowed for ids_put, and points into the caller's scratch buffer after ids_get. */
struct storage_order;

struct ids;

/* ---- lifecycle ----------------------------------------------------------------------------- */

/* Opens DIR/ids through io (borrowed, must outlive the handle): the descriptor DIR/ids/CURRENT
 * (none: a store not sealed yet, whose log is DIR/ids/log), its sealed files' indexes and its
 * log. A writer creates the log when missing, cuts it back to committed_bytes and removes what
 * an unfinished seal left; a reader only reads (a missing log is empty while committed_bytes
 * is 0; a reader whose committed_bytes is below the descriptor's base sees the sealed state).
 * Both replay the log's records below committed_bytes. Returns 0, -DS_ECORRUPT (a bad
 * descriptor or sealed file, a log shorter than committed_bytes, or a record below it that fails
 * its checks: logged with the offset), -DS_ELIMIT (more recent records than IDS_ORDERS_MAX),
 * -ENOMEM, or a negated errno. */
DS_MUST_USE int ids_open(struct storage_io *io, const char *dir, uint64_t committed_bytes,
                         bool read_only, struct ids **out);
/* Closes without committing: puts since the last commit are dropped. Accepts NULL. */
void ids_close(struct ids *ids);

/* ---- lookups ------------------------------------------------------------------------------- */

/* The latest record of order id, committed or not. scratch (borrowed, at least
 * IDS_RECORD_BYTES_MAX bytes) receives the record's bytes; out->items points into it. Returns 0,
 * -ENOENT (a miss: no I/O was done), -DS_ECORRUPT (the stored record fails its checks), or a
 * negated errno of the read. out is untouched on failure. */
DS_MUST_USE int ids_get(struct ids *ids, const struct ds_id *id, struct storage_order *out,
                        void *scratch, size_t scratch_capacity);
/* Starts loading the keydir slot where a lookup of id begins, so that a lookup a few events
 * later finds it in cache (a writer calls it ahead of its appends). */
void ids_prefetch(const struct ids *ids, const struct ds_id *id);
/* Distinct orders the handle knows (committed and pending). */
uint64_t ids_count(const struct ids *ids);
/* Memory of the keydir in bytes (for the bench and for budgets). */
uint64_t ids_keydir_bytes(const struct ids *ids);
/* Memory of the keydir, the pending and tail buffers and the sealed files' indexes. */
uint64_t ids_memory_bytes(const struct ids *ids);
/* Sealed files, and the bytes of those files and of the log. */
uint32_t ids_sealed_files(const struct ids *ids);
uint64_t ids_disk_bytes(const struct ids *ids);

/* ---- writing ------------------------------------------------------------------------------- */

/* Records rec as the current version of its order (the caller decided it supersedes what
 * ids_get returned). Visible to ids_get at once, durable after ids_queue, the caller's flush
 * and commit. Not allowed between ids_queue and ids_committed. Returns 0, -EAGAIN (pending bytes
 * would pass IDS_PENDING_BYTES_MAX: commit first), -DS_ELIMIT (IDS_ORDERS_MAX orders or
 * IDS_LOG_BYTES_MAX bytes), -ENOMEM (keydir growth refused), -DS_EUSAGE (a field out of its
 * range), or -EROFS for a reader. Nothing changes on failure. */
DS_MUST_USE int ids_put(struct ids *ids, const struct storage_order *rec);
/* Removes the order current (as ids_get or ids_visit gave it) from the store: a tombstone
 * record follows the same commit rules as ids_put. Returns 0, -EAGAIN (pending bytes full:
 * commit first), -DS_ECORRUPT (not in the store), -DS_EUSAGE or -EROFS. */
DS_MUST_USE int ids_remove(struct ids *ids, const struct storage_order *current);
/* Record bytes put since the last commit. */
uint64_t ids_pending_bytes(const struct ids *ids);
/* Queues the write of the pending records and a sync of the log on io; *committed_bytes gets
 * the position to record in the caller's commit once its flush succeeded. With nothing
 * pending it queues nothing and gives the current length. Returns 0 or the queueing error. */
DS_MUST_USE int ids_queue(struct ids *ids, uint64_t *committed_bytes);
/* After the caller's commit of committed_bytes (as ids_queue gave it) succeeded. */
void ids_committed(struct ids *ids, uint64_t committed_bytes);
/* The position of the last commit this handle knows. */
uint64_t ids_committed_bytes(const struct ids *ids);

/* ---- sealing ------------------------------------------------------------------------------- */

/* A writer after ids_committed: installs a finished seal; starts one (freezing the recent tier,
 * then sealing it on a thread) when the log reached the recent budget or when a sealed file's
 * day is below floor (days below it were dropped by retention); waits for a running one when
 * the log reached IDS_RECENT_HARD_BYTES. Returns 1 (a seal was installed), 0, or a failed
 * seal's error (logged; the store is unchanged and usable, and the next try waits for a
 * quarter of the budget more). */
int ids_maintain(struct ids *ids, int32_t floor);
/* Seals now, on the calling thread (after a running seal and a frozen tier left by an open):
 * the recent tier's records of days at or above floor are merged into their days' files (a
 * file whose orders changed or left is rewritten), files of days below floor are removed, a new
 * empty log starts at the committed position and DIR/ids/CURRENT names the result; the old log
 * and files are removed after. The keydir is emptied. Nothing pending or queued. Returns 0, or
 * -ENOMEM, -DS_ECORRUPT (a sealed record failed its checks) or a negated errno, with the store as
 * it was. */
DS_MUST_USE int ids_seal(struct ids *ids, int32_t floor);
/* The recent tier's budget in log bytes (tests lower it). */
void ids_set_recent_budget(struct ids *ids, uint64_t bytes);
/* Lowers the keydir's slot limit (a power of two from 1024 to IDS_SLOTS_MAX, at least the
 * table's size now): tests show the store running past a limit its seals keep it under. */
void ids_set_slots_max(struct ids *ids, uint64_t slots);
/* Whether ids_maintain seals on a thread (the default) or before it returns (tests). */
void ids_set_background(struct ids *ids, bool background);
/* The writer's time in ids_maintain, per call made while a seal was due, running or installed:
 * the calls, the longest and the 99th percentile. */
void ids_seal_stalls(const struct ids *ids, uint64_t *calls, uint64_t *max_ns, uint64_t *p99_ns);
/* Maintenance at a glance, cheap enough for every commit (no sort, no allocation): the recent
 * tier's log bytes (a commit waits for a running seal past IDS_RECENT_HARD_BYTES), the seals
 * this handle installed, whether one runs now, and ids_seal_stalls' calls with their total
 * and longest time. */
struct ids_progress {
    uint64_t recent_bytes;
    uint64_t seals;
    bool sealing;
    uint64_t stall_calls;
    uint64_t stall_total_ns;
    uint64_t stall_max_ns;
};
void ids_progress(const struct ids *ids, struct ids_progress *out);

/* Visits the current version of every committed order: the sealed files' orders the recent
 * tier does not shadow, then the log once in order, a record visited when the keydir still
 * points at it (no lookup I/O). fn may remove the order it is given (ids_remove). fn's scratch-free
 * record (items point into a buffer valid during the call). Stops when fn returns non-zero and
 * returns that value; else 0, -DS_ECORRUPT or a negated errno of a read. */
DS_MUST_USE int ids_visit(struct ids *ids, int (*fn)(const struct storage_order *rec, void *user),
                          void *user);

/* ---- the record codec (for tests and the fuzzer) ------------------------------------------- */

/* Whether rec can be stored (ids in range, ts valid with day its day, lengths in bounds). */
bool ids_record_valid(const struct storage_order *rec);
/* Encodes a valid rec into dst (IDS_RECORD_BYTES_MAX bytes), zero padding included; returns
 * the padded size. */
size_t ids_record_encode(const struct storage_order *rec, bool tombstone, uint8_t *dst);
/* Decodes and checks the record at src (avail bytes); out->items points into src. Returns 0 or
 * -DS_ECORRUPT (a bad CRC, length, field or value). */
DS_MUST_USE int ids_record_decode(const uint8_t *src, size_t avail, struct storage_order *out,
                                  bool *tombstone);

/* ---- following a writer -------------------------------------------------------------------- */

/* A reader: replays the records between its committed position and committed_bytes (a newer
 * commit of the writer), or reopens the store when the descriptor changed (a seal). Returns 0,
 * -ERANGE (committed_bytes below what the handle has in the same log), or
 * ids_open's errors; after a failure the handle must be closed (it may hold part of the
 * records it replayed). */
DS_MUST_USE int ids_refresh(struct ids *ids, uint64_t committed_bytes);

#endif /* DS_STORAGE_IDS_H */
