/*
 * The orders model inside storage (private to storage/): the writer's step and the lookups
 * behind storage.h's "orders" section. See orders.c.
 */
#ifndef DS_STORAGE_ORDERS_H
#define DS_STORAGE_ORDERS_H

#include "storage/store.h"

/* Opens DIR/ids/log at the length the MANIFEST committed (a writer after recovery cuts it
 * there; a reader loads it on first use). */
DS_MUST_USE int store_orders_open(struct storage *st);
/* A reader after a MANIFEST reload: follows the log to the newly committed length. */
DS_MUST_USE int store_orders_refresh(struct storage *st);
/* A writer before its commit: queues the log's write and sync, and notes the length the
 * MANIFEST record will carry. */
DS_MUST_USE int store_orders_queue(struct storage *st);
/* A writer after its commit succeeded. */
void store_orders_committed(struct storage *st);

/* storage_append in the orders model (storage.h). */
DS_MUST_USE int store_orders_append(struct storage *st, int32_t day, uint32_t shard,
                                    const struct ds_event *event, const struct ds_source *source);
DS_MUST_USE int store_orders_get(struct storage *st, const struct ds_id *id,
                                 struct storage_order *out, void *scratch, size_t scratch_capacity);
DS_MUST_USE int store_orders_visit(struct storage *st, storage_order_fn fn, void *user);
uint64_t store_orders_count(const struct storage *st);
/* storage_release_source's work on the orders: retracts and removes every committed order whose
 * current version came from source (called right after a commit). -EAGAIN: the store's
 * pending bytes are full; commit and call again (what was released stays released). */
DS_MUST_USE int store_orders_release(struct storage *st, int32_t source, uint64_t *released);
/* A 64-bit hash, from seed, of the fields a retraction repeats of the row it cancels (order id,
 * customer, ts, status, amount): compaction and fsck match rows and retractions by it. */
uint64_t store_orders_row_hash(uint64_t seed, const struct ds_id *order_id,
                               const struct ds_id *customer_id, int64_t ts_ms, const char *status,
                               uint8_t status_len, int64_t amount_units);
void store_orders_prefetch(const struct storage *st, const struct ds_id *id);
/* Compaction in slices (storage_compact, storage_compact_due), in both models (the events
 * model merges blocks: no retraction, no pass 1). start (between commits, no
 * compaction in progress) begins rewriting p, reading it through reader (a read-only handle of
 * the same directory, so that decoding never shares st's codec with the rewrite's sealing);
 * merge: rewrite it even without a retraction (its blocks are small). step works until
 * deadline_ns (ds_clock_ns), ending at a block boundary, and returns 1 once the rewrite
 * replaced the partition (*out set), 0 while it goes on or when it ended with nothing to do or
 * was given up (the partition dropped, or it outgrew its gap), or an error after which the
 * storage is failed. Only right after a commit. The step that ends the second pass ends its
 * slice there. */
DS_MUST_USE int store_orders_compact_start(struct storage *st, struct storage *reader,
                                           const struct part *p, bool merge);
DS_MUST_USE int store_orders_compact_step(struct storage *st, uint64_t deadline_ns,
                                          struct storage_compact_report *out);
/* Whether the compaction in progress copies the partition's tail: its reader must then be
 * refreshed to the last commit before each step (and only then: the passes before read the
 * partition as it was at the start). */
bool store_orders_compact_tailing(const struct storage *st);
/* Gives a compaction in progress up (its files removed). Accepts none in progress. */
void store_orders_compact_stop(struct storage *st);

#endif /* DS_STORAGE_ORDERS_H */
