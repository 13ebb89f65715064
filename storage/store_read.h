/*
 * Private to storage/: the read side of the engine (store_read.c), one layer above store.h.
 * Only the facade (storage.c, fsck.c) calls it; it never calls the write side. It reads only
 * committed ranges, through the synchronous ops of st->io (open, size, read, close), on its own
 * descriptors: a reader and the writer's in-process queries run the same code.
 */
#ifndef DS_STORAGE_STORE_READ_H
#define DS_STORAGE_STORE_READ_H

#include <stdio.h>

#include "storage/store.h"

/* Extends p's summary up to its committed end, building it on first use. On failure the
 * summary is dropped (rebuilt on next use) and the error returned. */
DS_MUST_USE int store_read_summary_extend(struct storage *st, struct part *p);

/* storage_day_totals for a reader's day: brings d current (extending the summaries of its
 * stale partitions) and copies its sums into out. */
DS_MUST_USE int store_read_day_totals(struct storage *st, struct day_totals *d,
                                      struct storage_day_total *out);

/* storage_partition_totals for a partition with committed data; out is zeroed by the caller. */
DS_MUST_USE int store_read_totals(struct storage *st, struct part *p, const char *status,
                                  size_t status_len, struct storage_partition_total *out);

/* Whether a scan decodes a block, from its header (which passed its checks): a block refused
 * is passed over unread. */
typedef bool (*store_block_want_fn)(const struct block_header *header, void *user);

/* storage_partition_scan_sources for a partition with committed data; want (may be NULL: every
 * block) picks the blocks decoded, and gets user too. */
int store_read_scan_from(struct storage *st, const struct part *p, struct storage_position *pos,
                         store_block_want_fn want, storage_source_event_fn fn, void *user);

/* storage_partition_visit: partitions with committed data by ascending (day, shard). */
int store_read_visit(struct storage *st, storage_partition_fn fn, void *user);

/* Verifies every committed block of p into report (for fsck.c), decoding each, passing over
 * quarantined ranges; problems go to out (or nowhere) and, when damage is not NULL, into that
 * list: damaged blocks, unreadable ranges (up to the next valid block header), a damaged
 * segment header, committed bytes missing, and a torn tail holding CRC-valid blocks. Returns 0
 * or an I/O error (-ENOMEM). */
DS_MUST_USE int store_read_verify_partition(struct storage *st, const struct part *p,
                                            struct storage_fsck_report *report, FILE *out,
                                            struct damage_list *damage);

/* Walks the file at path from byte from (>= 64) to its size, checking block headers and
 * payload CRCs, and adds one past_end entry to damage (may be NULL) when the range holds any
 * CRC-valid block: their count, events and source offsets. Returns 0 or an I/O error. */
DS_MUST_USE int store_read_range_scan(struct storage *st, const char *path, int32_t day,
                                      uint32_t shard, uint32_t segment_id, uint64_t from,
                                      struct damage_list *damage, FILE *out);

#endif /* DS_STORAGE_STORE_READ_H */
