/*
 * ids: the orders-by-id store of the orders model, private to storage/.
 *
 * One record per order: its current version (id, version, ts, day, shard, status, amount,
 * customer, items, versions seen). On disk DIR/ids/log is append-only; a record supersedes every
 * earlier record of the same id. In memory a keydir maps a hash of each id to the log offset of
 * its latest record, so a lookup that misses costs a probe or two and no I/O, and a hit costs one
 * read of the record (whose id is compared, so a hash collision is harmless).
 *
 * Durability follows the caller's commit: ids_put keeps the record in memory (visible to
 * ids_get at once); ids_queue queues its write and a sync on the storage_io, the caller flushes
 * and records the returned log length in its own commit (the MANIFEST), then calls
 * ids_committed. Opening with a committed length cuts the log back to it and replays the
 * records below it. After a failed flush the handle must be closed and reopened with the last
 * committed length, as struct storage is.
 *
 * Threads: a handle belongs to one thread. A reader (read_only) in another thread or process
 * opens the same directory and follows the writer with ids_refresh(committed length).
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
 * Records are 4-byte aligned, so the log may hold 2^36 - 1 four-byte units (256 GiB), and the
 * table 2^28 slots (2 GiB of memory) at most; at the 3/4 load where it grows that is
 * IDS_ORDERS_MAX distinct orders. A node holding more would need 12-byte slots; 8-byte ones
 * keep the table at two thirds of that memory for every node below it. */
#define IDS_LOG_BYTES_MAX (((1ull << 36) - 1) * 4)
#define IDS_SLOTS_MAX (1ull << 28)
#define IDS_ORDERS_MAX (IDS_SLOTS_MAX / 4 * 3)
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

/* Opens DIR/ids/log through io (borrowed, must outlive the handle). A writer creates it when
 * missing and cuts it back to committed_bytes; a reader only reads (a missing log is empty while
 * committed_bytes is 0). Both replay the records below committed_bytes. Returns 0, -DS_ECORRUPT
 * (the log is shorter than committed_bytes, or a record below it fails its checks: logged with
 * the offset), -DS_ELIMIT (more orders than IDS_ORDERS_MAX), -ENOMEM, or a negated errno. */
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
 * the log length to record in the caller's commit once its flush succeeded. With nothing
 * pending it queues nothing and gives the current length. Returns 0 or the queueing error. */
DS_MUST_USE int ids_queue(struct ids *ids, uint64_t *committed_bytes);
/* After the caller's commit of committed_bytes (as ids_queue gave it) succeeded. */
void ids_committed(struct ids *ids, uint64_t committed_bytes);
/* The log length of the last commit this handle knows. */
uint64_t ids_committed_bytes(const struct ids *ids);

/* Visits the current version of every committed order, reading the log once in order: a
 * record is visited when the keydir still points at it (no lookup I/O). fn's scratch-free
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

/* A reader: replays the records between its committed length and committed_bytes (a newer
 * commit of the writer). Returns 0, -ERANGE (committed_bytes below what the handle has), or
 * ids_open's errors; after a failure the handle must be closed (it may hold part of the
 * records it replayed). */
DS_MUST_USE int ids_refresh(struct ids *ids, uint64_t committed_bytes);

#endif /* DS_STORAGE_IDS_H */
