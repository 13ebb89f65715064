/*
 * Private to storage/: what fsck --repair rolls back (fsck_rollback.c), one caller: fsck.c.
 * The bytes past a segment's committed end and the segment files no commit names are cut by
 * the recovery that ends a repair. When the MANIFEST lost records (damaged before its tail, or
 * cut), those bytes hold commits that were acknowledged; fsck cannot tell them from a crash's
 * uncommitted writes, so it reports every complete block there as rolled back, which is the
 * loss a count sees: count after repair = truth - quarantined_events - events_rolled_back.
 *
 * Two steps around the recovery: fsck_rollback_collect reads the ranges while they are still
 * on disk (block headers for the events; in the orders model the rows, decoded, for their
 * order ids), and fsck_rollback_settle looks those orders up in the orders-by-id store as the
 * recovery left it (at the commit of the MANIFEST's valid prefix).
 */
#ifndef DS_STORAGE_FSCK_ROLLBACK_H
#define DS_STORAGE_FSCK_ROLLBACK_H

#include <stdio.h>

#include "storage/store.h"

struct fsck_rollback;

/* Reads the past_end entries of damage (ranges of st's segments, before recovery cuts them):
 * blocks_rolled_back, events_rolled_back and rolled_back_ranges go to report, and a damaged
 * range followed by a valid block header adds to events_unknown_ranges (a damaged range that
 * runs to the end of the file is a torn write and counts nothing). In the orders model the
 * inserted rows are decoded and their orders kept, with the newest row of each, for
 * fsck_rollback_settle. *out gets the state (NULL when there is nothing to settle). Returns 0,
 * -ENOMEM, -DS_ELIMIT (a range larger than a segment can be) or an I/O error. */
DS_MUST_USE int fsck_rollback_collect(struct storage *st, const struct damage_list *damage,
                                      struct storage_fsck_report *report,
                                      struct fsck_rollback **out);

/* After recovery: per order whose rows were rolled back, the store of dir (a reader's view)
 * either holds an older version (orders_reverted) or none (orders_lost); each goes to
 * DIR/quarantine/<time>.rollback.orders.jsonl (the lines of fsck_reconcile's orders.jsonl,
 * with "rolled_back":true), synced, and one line to out (may be NULL). rb may be NULL.
 * Returns 0 or a negated errno. */
DS_MUST_USE int fsck_rollback_settle(struct fsck_rollback *rb, const char *dir, FILE *out,
                                     struct storage_fsck_report *report);

void fsck_rollback_destroy(struct fsck_rollback *rb);

#endif /* DS_STORAGE_FSCK_ROLLBACK_H */
