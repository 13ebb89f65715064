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

/* A partition, as the reconciliation names it. */
struct storage_part_id {
    int32_t day;
    uint32_t shard;
};

/* An order id as JSON: a number, or a string with '"', '\\' and control bytes escaped. */
void fsck_json_id(FILE *f, const struct ds_id *id);
/* ,"name":{"day",...,"status" of a version; the caller closes the object. */
void fsck_json_version(FILE *f, const char *name, int32_t day, uint32_t shard, bool has_version,
                       int64_t version, int64_t ts_ms, const char *status, uint8_t status_len);

/* The index of (day, shard) in parts[0..count), sorted by (day, shard), or FSCK_PART_NONE. */
#define FSCK_PART_NONE UINT32_MAX
uint32_t fsck_part_find(const struct storage_part_id *parts, uint32_t count, int32_t day,
                        uint32_t shard);

/* The same check, silent, for the reconciliation: *out (allocated, the caller frees it) gets
 * the partitions with data whose balance breaks, ascending, *count how many. Returns 0,
 * -DS_EUSAGE (not the orders model), -DS_ECORRUPT (a block or the store cannot be read: not
 * checked), or fsck_orders_check's errors. */
DS_MUST_USE int fsck_orders_broken(const char *dir, struct storage_part_id **out, uint32_t *count);

/* Makes the orders-by-id store and the partitions of dir agree again (fsck_reconcile.c), after
 * a repair's quarantine and recovery: each order whose current version lost its row falls back
 * to the newest version still present (reverted), one with no version left leaves the store
 * (lost); rows and retractions of those orders that no longer balance are rewritten away.
 * Takes the writer lock; options->step_fn marks its crash points. Adds orders_reverted and
 * orders_lost to report, names each such order in DIR/quarantine/<time>.orders.jsonl and says what
 * it did on options->report_file. Returns 0 or a negated errno; a crash at any point leaves a
 * directory that a second call finishes. */
struct storage_fsck_options;
DS_MUST_USE int fsck_reconcile(const char *dir, const struct storage_fsck_options *options,
                               struct storage_fsck_report *report);

#endif /* DS_STORAGE_FSCK_ORDERS_H */
