/*
 * Private to storage/: fsck's check that the retractions of the orders model balance
 * (fsck_orders.c), one caller: fsck.c. It reads the directory through a reader handle of its
 * own and the public API only (partition scans, the orders-by-id store's visit), so it sees one
 * committed state of both, even beside a live writer.
 */
#ifndef DS_STORAGE_FSCK_ORDERS_H
#define DS_STORAGE_FSCK_ORDERS_H

#include <stdio.h>

#include "common/common.h"

struct storage_fsck_report; /* storage.h */

/* Named violations per run: the first few, then one line with how many more. */
#define FSCK_ORDERS_NAMED_MAX 10u

/* Checks, for a directory of the orders model, that in each partition (day, shard), in append
 * order, every retraction cancels an earlier, not yet cancelled row with the same (order id,
 * customer, ts, status, amount), and that the rows left are exactly the current versions the
 * orders-by-id store places there (as multisets). Adds orders, retractions,
 * retractions_unmatched, orders_mismatched and balance_unchecked to report (the rest is left
 * alone); names the first FSCK_ORDERS_NAMED_MAX violations on out (may be NULL) with their
 * partition and order id. A directory of the events model adds nothing. A partition whose
 * blocks fail their checks (the block check reports them), and a directory no reader can open
 * or whose orders-by-id store is damaged, are not checked: balance_unchecked counts them (the
 * directory as 1), named. Returns 0 (violations and damage are figures, not errors), -ENOMEM,
 * -DS_ELIMIT (a row repeated 2^32 times in one partition), or an I/O error. */
DS_MUST_USE int fsck_orders_check(const char *dir, FILE *out, struct storage_fsck_report *report);

#endif /* DS_STORAGE_FSCK_ORDERS_H */
