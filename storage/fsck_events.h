/*
 * Private to storage/: fsck's check that the retraction rows of the events model balance
 * (fsck_events.c), one caller: fsck.c. Public API only, through a reader handle of its own.
 */
#ifndef DS_STORAGE_FSCK_EVENTS_H
#define DS_STORAGE_FSCK_EVENTS_H

#include <stdio.h>

#include "common/common.h"

struct storage_fsck_report; /* storage.h */

/* Checks, for a directory of the events model, that in each partition (day, shard), in append
 * order, every retraction row (storage_release_range) cancels an earlier, not yet cancelled row
 * with the same source partition and offset. Adds retractions, retractions_unmatched and
 * balance_unchecked (partitions whose blocks fail their checks) to report; names the first
 * FSCK_ORDERS_NAMED_MAX unmatched ones on out (may be NULL). A directory of the orders model,
 * or one no reader opens (the other checks say why), adds nothing. Returns 0 (violations are
 * figures), -ENOMEM or an I/O error. */
DS_MUST_USE int fsck_events_check(const char *dir, FILE *out, struct storage_fsck_report *report);

#endif /* DS_STORAGE_FSCK_EVENTS_H */
