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
/* storage_compact of p (a committed partition, nothing pending), reading it through reader (a
 * read-only handle of the same directory refreshed to st's last commit, so that decoding never
 * shares st's codec with the rewrite's sealing). */
DS_MUST_USE int store_orders_compact(struct storage *st, struct storage *reader, struct part *p,
                                     struct storage_compact_report *out);

#endif /* DS_STORAGE_ORDERS_H */
